//! The two images build: every `COPY`/`ADD` source of `deploy/Dockerfile` and
//! `deploy/Dockerfile.toxiproxy` exists and is in the build context (not excluded by the
//! Dockerfile's ignore file), base images are build arguments, the entrypoint is a file the
//! final stage makes, and the Kubernetes manifests run the image `deploy/Dockerfile` is built
//! as. These checks read files only. The real build is `deploy/build-images.sh` (too long for
//! the suite: a first build compiles tearline in release mode); here only its skip path is run.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// One Dockerfile instruction: keyword (upper case), arguments, 1-based line.
struct Instr {
    op: String,
    args: String,
    line: usize,
}

/// The instructions of a Dockerfile: comments and blank lines dropped, `\` continuations joined.
fn instructions(text: &str) -> Vec<Instr> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if pending.is_none() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        if pending.is_some() && line.starts_with('#') {
            continue;
        }
        let (start, mut acc) = pending.take().unwrap_or((i + 1, String::new()));
        match line.strip_suffix('\\') {
            Some(part) => {
                acc.push_str(part);
                acc.push(' ');
                pending = Some((start, acc));
            }
            None => {
                acc.push_str(line);
                let (op, args) = acc.split_once(char::is_whitespace).unwrap_or((&acc, ""));
                out.push(Instr {
                    op: op.to_ascii_uppercase(),
                    args: args.trim().to_owned(),
                    line: start,
                });
            }
        }
    }
    out
}

/// The words of a `COPY`/`ADD` without its `--flags`: sources, then the destination.
fn copy_words(args: &str) -> (Vec<String>, Option<String>) {
    let flags: Vec<String> = args
        .split_whitespace()
        .take_while(|w| w.starts_with("--"))
        .map(str::to_owned)
        .collect();
    let rest: Vec<String> = args
        .split_whitespace()
        .skip(flags.len())
        .map(str::to_owned)
        .collect();
    let from = flags
        .iter()
        .find_map(|f| f.strip_prefix("--from=").map(str::to_owned));
    (rest, from)
}

/// True if a `.dockerignore` pattern list excludes `path` (patterns as used here: a path or a
/// directory prefix, no wildcards, no `!`).
fn ignored(ignore: &str, path: &str) -> bool {
    let path = path.trim_start_matches("./").trim_end_matches('/');
    ignore
        .lines()
        .map(str::trim)
        .filter(|p| !p.is_empty() && !p.starts_with('#'))
        .any(|p| {
            let p = p.trim_start_matches("./").trim_end_matches('/');
            path == p || path.starts_with(&format!("{p}/"))
        })
}

/// Every problem that would stop `text` (a Dockerfile, its ignore file `ignore`) from building
/// the image it describes from the repository at `root`, or leave it without an entrypoint.
fn problems(root: &Path, text: &str, ignore: &str) -> Vec<String> {
    let mut out = Vec::new();
    let instrs = instructions(text);
    let first_from = instrs.iter().position(|i| i.op == "FROM").unwrap_or(0);
    let args: Vec<&str> = instrs[..first_from]
        .iter()
        .filter(|i| i.op == "ARG")
        .map(|i| i.args.as_str())
        .collect();
    for want in ["RUST_IMAGE=", "RUNTIME_IMAGE="] {
        if !args
            .iter()
            .any(|a| a.starts_with(want) && a.len() > want.len())
        {
            out.push(format!("no `ARG {want}<default>` before the first FROM"));
        }
    }
    let stages: Vec<&Instr> = instrs.iter().filter(|i| i.op == "FROM").collect();
    for f in &stages {
        if !f.args.starts_with("${") {
            out.push(format!(
                "line {}: FROM {} is not a build argument",
                f.line, f.args
            ));
        }
    }
    let last_from = instrs.iter().rposition(|i| i.op == "FROM").unwrap_or(0);
    for i in instrs.iter().filter(|i| i.op == "COPY" || i.op == "ADD") {
        let (words, from) = copy_words(&i.args);
        if from.is_some() {
            continue;
        }
        let sources = &words[..words.len().saturating_sub(1)];
        if sources.is_empty() {
            out.push(format!("line {}: {} without a source", i.line, i.op));
        }
        for s in sources {
            if !root.join(s).exists() {
                out.push(format!(
                    "line {}: {} source '{s}' does not exist",
                    i.line, i.op
                ));
            } else if ignored(ignore, s) {
                out.push(format!(
                    "line {}: {} source '{s}' is excluded from the context",
                    i.line, i.op
                ));
            }
        }
    }
    // The entrypoint: exec form, made by the final stage (copied there, or linked to a file
    // copied there).
    let final_stage = &instrs[last_from..];
    let copied: Vec<String> = final_stage
        .iter()
        .filter(|i| i.op == "COPY")
        .filter_map(|i| copy_words(&i.args).0.last().cloned())
        .collect();
    let linked = |path: &str| -> Option<String> {
        final_stage.iter().filter(|i| i.op == "RUN").find_map(|i| {
            let w: Vec<&str> = i.args.split_whitespace().collect();
            w.windows(4)
                .find(|w| w[0] == "ln" && w[1] == "-s" && w[3] == path)
                .map(|w| w[2].to_owned())
        })
    };
    match final_stage.iter().rfind(|i| i.op == "ENTRYPOINT") {
        None => out.push("no ENTRYPOINT".to_owned()),
        Some(e) => match serde_json::from_str::<Vec<String>>(&e.args) {
            Err(_) => out.push(format!("line {}: ENTRYPOINT is not in exec form", e.line)),
            Ok(argv) => {
                let path = argv.first().cloned().unwrap_or_default();
                let target = linked(&path).unwrap_or_else(|| path.clone());
                if !copied.contains(&target) {
                    out.push(format!(
                        "line {}: the entrypoint {path} is not made by the final stage",
                        e.line
                    ));
                }
            }
        },
    }
    // The binary the build stage compiles is the one the final stage copies.
    let builds_bin = instrs.iter().any(|i| {
        i.op == "RUN" && i.args.contains("cargo build") && i.args.contains("--bin tearline")
    });
    if !builds_bin || !copied.iter().any(|c| c == "/usr/local/bin/tearline") {
        out.push("the final stage does not get the tearline binary the build compiles".into());
    }
    out
}

/// The tag in the Dockerfile's own `docker build … -t TAG .` line.
fn build_tag(text: &str) -> Option<String> {
    text.lines()
        .filter(|l| l.contains("docker build"))
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.windows(2).find(|w| w[0] == "-t").map(|w| w[1].to_owned())
        })
}

fn package_version() -> String {
    read("Cargo.toml")
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("a package version")
        .to_owned()
}

#[test]
fn both_dockerfiles_copy_only_what_exists_and_make_their_entrypoint() {
    for file in ["deploy/Dockerfile", "deploy/Dockerfile.toxiproxy"] {
        let text = read(file);
        let ignore = read(&format!("{file}.dockerignore"));
        let found = problems(&root(), &text, &ignore);
        assert!(found.is_empty(), "{file}: {found:#?}");
        assert_eq!(
            build_tag(&text).and_then(|t| t.split_once(':').map(|(_, v)| v.to_owned())),
            Some(package_version()),
            "{file}: its build line tags another version than Cargo.toml's"
        );
    }
}

#[test]
fn the_checks_find_a_missing_copy_source_a_fixed_base_and_a_lost_entrypoint() {
    let text = read("deploy/Dockerfile");
    let ignore = read("deploy/Dockerfile.dockerignore");
    let broken = text.replace(
        "COPY profiles ./profiles",
        "COPY examples ./examples\nCOPY profiles ./profiles",
    );
    let found = problems(&root(), &broken, &ignore);
    assert!(
        found
            .iter()
            .any(|p| p.contains("source 'examples' does not exist")),
        "{found:#?}"
    );
    let excluded = text.replace("COPY bench ./bench", "COPY target ./target");
    let found = problems(&root(), &excluded, &ignore);
    assert!(
        found.iter().any(|p| p.contains("'target' is excluded")),
        "{found:#?}"
    );
    let fixed = text.replace("FROM ${RUNTIME_IMAGE}", "FROM debian:bookworm-slim");
    let found = problems(&root(), &fixed, &ignore);
    assert!(
        found.iter().any(|p| p.contains("is not a build argument")),
        "{found:#?}"
    );
    let toxiproxy = read("deploy/Dockerfile.toxiproxy");
    let unlinked = toxiproxy.replace("ln -s /usr/local/bin/tearline /toxiproxy", "true");
    let found = problems(&root(), &unlinked, &ignore);
    assert!(
        found
            .iter()
            .any(|p| p.contains("entrypoint /toxiproxy is not made")),
        "{found:#?}"
    );
}

#[test]
fn kubernetes_manifests_run_the_image_the_dockerfile_is_built_as() {
    let tag = build_tag(&read("deploy/Dockerfile")).expect("a `docker build -t` line");
    let dir = root().join("deploy/kubernetes");
    let mut images = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("deploy/kubernetes") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).expect("manifest");
            for l in text.lines() {
                if let Some(image) = l.trim().strip_prefix("image:") {
                    images.push((path.clone(), image.trim().to_owned()));
                }
            }
        }
    }
    assert!(
        images.len() >= 3,
        "the agents' proxy and load, the merge: {images:?}"
    );
    for (path, image) in &images {
        assert_eq!(image, &tag, "{}", path.display());
    }
    // The build line the Kubernetes README gives builds that same tag.
    let readme = read("deploy/kubernetes/README.md");
    assert_eq!(build_tag(&readme), Some(tag));
}

#[test]
fn the_image_build_says_it_skipped_where_podman_is_missing() {
    // No PATH: no podman, whatever the machine has.
    let out = std::process::Command::new(root().join("deploy/build-images.sh"))
        .env("PATH", "")
        .output()
        .expect("run deploy/build-images.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(77), "{text}");
    assert_eq!(
        text.trim(),
        "build-images: skipped: podman is not installed"
    );
}
