//! Every command line the README and the `--help` texts show is parsed by the real parser
//! ([`Cli::try_parse_from`]), so a renamed or removed flag (or a `--fail-on` that does not
//! parse) breaks the build's tests instead of a user's first try.
//!
//! What is extracted: README lines starting with `tearline ` inside fenced code blocks and
//! inline code spans (synopses too: optional `[…]` groups are tried one at a time, `a\|b`
//! alternatives each, placeholders such as `N`, `FILE`, `EXPR` replaced by a value of their
//! kind, a shell variable `$K` by 1); in every command's long help, the lines after `Examples:` that start with `tearline `
//! or `--fail-on` (the latter appended to `tearline report show report.json`).
//! What runs for real: the `profiles` examples (no network, no files written). The others need
//! a server, a proxy, a saved report or minutes of load (`replay`, `load`, `serve`, `proxy`):
//! they are parsed here, and their behaviour is what the integration tests run.

use clap::{CommandFactory, Parser};

use super::{Cli, Command};

/// Splits one shell command line into words: single and double quotes, backslash escapes, an
/// unquoted `#` word ends the line, `&` and redirections (`> file`) are dropped.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    cur.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                cur.push(n);
                            }
                        }
                        _ => cur.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    let mut out = Vec::new();
    let mut skip_next = false;
    for w in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        match w.as_str() {
            "&" => {}
            ">" | ">>" | "2>" => skip_next = true,
            _ if w.starts_with('>') => {}
            _ => out.push(w),
        }
    }
    out
}

/// Joins lines ending in `\` with the next one.
fn join_continued(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim_end();
        if let Some(head) = t.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
        } else {
            cur.push_str(t);
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Placeholders of the README's synopses, with a value of their kind.
const PLACEHOLDERS: [(&str, &str); 9] = [
    ("N", "1"),
    ("R", "10"),
    ("EXPR", "'silent-loss>0'"),
    ("HOST:PORT", "127.0.0.1:8080"),
    ("FILE", "profiles/reset-250ms.toml"),
    ("DIR", "out"),
    ("NAME", "reset-250ms"),
    ("…", ""),
    ("...", ""),
];

fn fill(line: &str) -> String {
    line.split(' ')
        .map(|w| {
            PLACEHOLDERS
                .iter()
                .find(|(p, _)| *p == w)
                .map_or(w, |(_, v)| *v)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The concrete command lines of a synopsis: the base without optional groups, then the base
/// with each group (nested brackets flattened), each `\|` alternative on its own (an
/// alternative without a flag replaces the value of the first one).
fn expand(synopsis: &str) -> Vec<String> {
    let mut base = String::new();
    let mut groups = Vec::new();
    let mut depth = 0usize;
    let mut group = String::new();
    for c in synopsis.chars() {
        match c {
            '[' => {
                depth += 1;
            }
            ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    groups.push(std::mem::take(&mut group));
                }
            }
            c if depth > 0 => group.push(c),
            c => base.push(c),
        }
    }
    let alternatives = |text: &str| -> Vec<String> {
        let parts: Vec<&str> = text.split("\\|").map(str::trim).collect();
        let first = parts.first().copied().unwrap_or("");
        parts
            .iter()
            .map(|p| {
                if p.starts_with('-') || *p == first {
                    (*p).to_owned()
                } else {
                    let mut words: Vec<&str> = first.split(' ').collect();
                    words.pop();
                    words.push(p);
                    words.join(" ")
                }
            })
            .collect()
    };
    let mut out = Vec::new();
    for b in alternatives(base.trim()) {
        out.push(fill(&b));
        for g in &groups {
            for a in alternatives(g) {
                out.push(fill(&format!("{b} {a}")));
            }
        }
    }
    out
}

/// Every command line of README.md.
fn readme_lines() -> Vec<String> {
    let readme = include_str!("../README.md");
    let mut out = Vec::new();
    let mut fenced = String::new();
    let mut in_fence = false;
    for line in readme.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            fenced.push_str(line);
            fenced.push('\n');
            continue;
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 && span.starts_with("tearline ") {
                out.extend(expand(span));
            }
        }
    }
    for l in join_continued(&fenced) {
        if l.trim_start().starts_with("tearline ") {
            out.push(l.trim().to_owned());
        }
    }
    out
}

/// Every example line of every command's long help, with the command it belongs to.
fn help_lines() -> Vec<(String, String)> {
    fn walk(cmd: &mut clap::Command, path: String, out: &mut Vec<(String, String)>) {
        let help = cmd.render_long_help().to_string();
        if let Some((_, examples)) = help.split_once("Examples:") {
            for l in join_continued(examples) {
                let t = l.trim();
                if t.starts_with("tearline ") {
                    out.push((path.clone(), t.to_owned()));
                } else if t.starts_with("--fail-on") {
                    out.push((
                        path.clone(),
                        format!("tearline report show report.json {t}"),
                    ));
                }
            }
        }
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .collect();
        for name in names {
            if let Some(sub) = cmd.find_subcommand_mut(&name) {
                walk(sub, format!("{path} {name}"), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&mut Cli::command(), "tearline".to_owned(), &mut out);
    out
}

fn parse(line: &str) -> Result<Cli, String> {
    // The README's agents loop over `K` (`--segment $K/4`): one of its values.
    let line = &line.replace("$K", "1");
    Cli::try_parse_from(shell_words(line)).map_err(|e| format!("`{line}`:\n{e}"))
}

#[test]
fn every_readme_command_line_parses() {
    let lines = readme_lines();
    assert!(
        lines.len() >= 20,
        "too few README commands found: {lines:?}"
    );
    let bad: Vec<String> = lines.iter().filter_map(|l| parse(l).err()).collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_help_example_parses() {
    let lines = help_lines();
    for sub in [
        "proxy",
        "serve",
        "load",
        "replay",
        "report show",
        "profiles",
    ] {
        assert!(
            lines.iter().any(|(p, _)| p == &format!("tearline {sub}")),
            "no example found in `tearline {sub} --help`"
        );
    }
    let bad: Vec<String> = lines
        .iter()
        .filter_map(|(p, l)| parse(l).err().map(|e| format!("{p} --help: {e}")))
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn a_changed_flag_or_a_bad_threshold_is_caught() {
    assert!(parse("tearline replay --threshold 'finding.llm-truncated == 0'").is_err());
    assert!(parse("tearline report show r.json --fail-on 'p99(call)>2'").is_err());
    assert!(parse("tearline replay --fail-on 'finding.llm-truncated>0'").is_ok());
    assert_eq!(
        shell_words(r#"tearline load --args '{"a":1}' --x "b \"c\"" # note"#),
        [
            "tearline",
            "load",
            "--args",
            r#"{"a":1}"#,
            "--x",
            r#"b "c""#
        ]
    );
    assert_eq!(
        expand("tearline replay [--seed N] [--sessions 1 --calls 24 \\| --duration 20s]"),
        [
            "tearline replay",
            "tearline replay --seed 1",
            "tearline replay --sessions 1 --calls 24",
            "tearline replay --duration 20s",
        ]
    );
}

#[test]
fn the_profiles_examples_run_for_real() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let mut ran = 0;
    let lines = readme_lines()
        .into_iter()
        .chain(help_lines().into_iter().map(|(_, l)| l));
    for line in lines {
        let Ok(cli) = parse(&line) else { continue };
        let Command::Profiles(args) = cli.command else {
            continue;
        };
        // A file the checkout does not hold (`my.toml`, the README's FILE) is the user's.
        if line.contains("validate") && !line.contains("profiles/") {
            continue;
        }
        let code = rt
            .block_on(tearline::cmd::profiles::run(args))
            .unwrap_or_else(|e| panic!("`{line}`: {e}"));
        assert_eq!(code, std::process::ExitCode::SUCCESS, "`{line}`");
        ran += 1;
    }
    assert!(ran >= 4, "only {ran} profiles examples ran");
}

#[test]
fn every_documented_fail_on_names_what_a_default_replay_reports() {
    use tearline::load::Policy;
    let replay = tearline::cmd::replay::vocabulary(
        tearline::replay::scenario::Scenario::default(),
        &[Policy::Strict, Policy::Naive],
        1,
    );
    let lines = readme_lines()
        .into_iter()
        .chain(help_lines().into_iter().map(|(_, l)| l));
    let mut checked = 0;
    for line in lines {
        let words = shell_words(&line);
        for pair in words.windows(2).filter(|w| w[0] == "--fail-on") {
            let Ok(t) = pair[1].parse::<tearline::report::Threshold>() else {
                panic!("`{line}`: `{}` does not parse", pair[1]);
            };
            if let Err(e) = replay.check(&t) {
                panic!("`{line}`: {e}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} documented thresholds found");
    let old: tearline::report::Threshold = "max(proxy.client-reconnect)>1s"
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        replay.check(&old).is_err(),
        "the old example named no replay histogram"
    );
}
