//! Every command line of README.md and of every `--help` RUNS here as written (through `sh`,
//! from a directory holding the files it names), against stand-ins this test starts: a changed
//! flag, a removed file, a failing command or a server that does not serve breaks the build.
//!
//! Commands that end (`replay`, `load`, `report`, `profiles`) must exit as the text implies (0,
//! or the codes of [`standins::EXITS`]); servers (`proxy`, `serve`, `toxiproxy-server`) must
//! announce their addresses, answer a request on each (the control API `GET /version` with
//! 200, a proxy relaying to its upstream, the lab), then exit 0 on SIGINT. A server an example
//! starts with `&` runs for the next line and is stopped the same way.
//!
//! Every change to a line is a row of a table in [`standins`], with its reason; no example is
//! skipped (the count run is asserted equal to the count listed; identical command lines run
//! once). Examples run in parallel ([`PARALLEL`] at a time), each to a bounded deadline.

#[path = "../../src/cli_examples_text.rs"]
mod text;

mod process;
mod standins;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use process::{Launch, Listener, Running};
use standins::{StandIn, command_of, exits, rewrite};
use text::Example;

/// Examples run at once: most wait on timers and sockets (a replay's outages), few on CPU.
const PARALLEL: usize = 10;
/// Longest a command that ends may run (the longest replay scenario takes ~25 s here).
const RUN_LIMIT: Duration = Duration::from_secs(150);
/// Longest a server may take to announce its addresses.
const START_LIMIT: Duration = Duration::from_secs(30);
/// Longest a server may take to exit after SIGINT (no connection is left open to drain).
const STOP_LIMIT: Duration = Duration::from_secs(20);

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tearline")
}

fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The stand-ins, the fixture files and the environment every example runs in.
struct World {
    root: tempfile::TempDir,
    skel: PathBuf,
    ca: PathBuf,
    env: Vec<(String, String)>,
    /// The lab the written files (my-proxies.toml, toxiproxy.json) name as upstream.
    _lab: Running,
}

impl World {
    fn launch(&self, line: &str, dir: &Path) -> Launch {
        Launch {
            line: line.to_owned(),
            dir: dir.to_path_buf(),
            env: self.env.clone(),
        }
    }

    fn start() -> World {
        let root = tempfile::tempdir().expect("a temp dir");
        let home = root.path().join("home");
        let skel = root.path().join("skel");
        std::fs::create_dir_all(&home).expect("mkdir home");
        std::fs::create_dir_all(skel.join("proxy-a")).expect("mkdir skel");
        std::os::unix::fs::symlink(checkout().join("profiles"), skel.join("profiles"))
            .expect("link profiles");
        let ca = home.join(".local/share/tearline/ca/ca.pem");
        let bin_dir = Path::new(bin()).parent().expect("the binary's directory");
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut env: Vec<(String, String)> = standins::ENV
            .iter()
            .map(|(k, v, _)| {
                let v = v
                    .replace("{home}", &home.display().to_string())
                    .replace("{ca}", &ca.display().to_string());
                ((*k).to_owned(), v)
            })
            .collect();
        env.push(("PATH".to_owned(), path));
        let launch = |line: &str| Launch {
            line: line.to_owned(),
            dir: skel.clone(),
            env: env.clone(),
        };
        let serve = |line: &str| -> (Running, SocketAddr) {
            let mut r = launch(line).spawn();
            let found = r
                .listening(&[Listener::Service], START_LIMIT)
                .unwrap_or_else(|e| panic!("stand-in: {e}"));
            (r, found[0].1)
        };
        // The first HTTPS lab creates the local CA in the test's home (every later one uses it).
        let (mut tls_lab, _) = serve("tearline serve --listen 127.0.0.1:0 --tls-self-signed");
        assert_eq!(tls_lab.interrupt(STOP_LIMIT), Ok(0), "the HTTPS lab stops");
        let (lab_run, lab) = serve("tearline serve --listen 127.0.0.1:0");
        standins::write_static_files(&skel, &checkout(), lab, &ca);
        // The saved reports: a short real replay, and four load agents through a proxy.
        let (mut proxy_run, proxy) = serve(&format!(
            "tearline proxy --listen 127.0.0.1:0 --upstream {lab} --api off \
             --profile profiles/reset-250ms.toml \
             --cuts-log proxy-a/cuts.jsonl --findings-log proxy-a/findings.jsonl"
        ));
        let mut runs: Vec<Running> =
            std::iter::once("tearline replay --seed 1 --out out".to_owned())
                .chain((1..=4).map(|k| {
                    format!(
                        "tearline load --target http://{proxy}/mcp --calls 40 --seed 7 \
                         --segment {k}/4 --report-dir out/agent-{k}"
                    )
                }))
                .map(|l| launch(&l).spawn())
                .collect();
        for r in &mut runs {
            assert_eq!(r.wait(RUN_LIMIT), Ok(0), "a fixture run failed");
        }
        // Stopped, the proxy has written every finding.
        assert_eq!(
            proxy_run.interrupt(STOP_LIMIT),
            Ok(0),
            "the agents' proxy stops"
        );
        for (from, to) in [
            ("out/report.json", "report.json"),
            (
                "out/report.json",
                "tearline-report/20261130T030405Z/report.json",
            ),
            ("out/agent-1/report.hlog", "A.hlog"),
            ("out/agent-2/report.hlog", "B.hlog"),
            ("out/agent-1/report.hlog", "load-a/report.hlog"),
            ("out/agent-2/report.hlog", "load-b/report.hlog"),
            ("proxy-a/cuts.jsonl", "cuts.jsonl"),
            ("proxy-a/findings.jsonl", "findings.jsonl"),
        ] {
            let to = skel.join(to);
            std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
            std::fs::copy(skel.join(from), &to).unwrap_or_else(|e| panic!("copy {from}: {e}"));
        }
        World {
            root,
            skel,
            ca,
            env,
            _lab: lab_run,
        }
    }

    /// A fresh directory for one example, with the files its lines name.
    fn dir_for(&self, n: usize, lines: &[&str]) -> PathBuf {
        let dir = self.root.path().join("runs").join(n.to_string());
        std::fs::create_dir_all(&dir).expect("mkdir run");
        std::os::unix::fs::symlink(checkout().join("profiles"), dir.join("profiles"))
            .expect("link profiles");
        for (name, _) in standins::FILES {
            if lines.iter().any(|l| l.contains(name)) {
                copy_all(&self.skel.join(name), &dir.join(name));
            }
        }
        dir
    }
}

fn copy_all(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).expect("mkdir");
        for e in std::fs::read_dir(from).expect("read dir") {
            let e = e.expect("a dir entry");
            copy_all(&e.path(), &to.join(e.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    }
}

/// Every example of every command's help, as the binary prints it (`tearline help …`).
fn help_examples() -> Vec<Example> {
    fn walk(path: &[String], out: &mut Vec<Example>) {
        let help = std::process::Command::new(bin())
            .arg("help")
            .args(path)
            .output()
            .expect("tearline help runs");
        assert!(help.status.success(), "tearline help {path:?}");
        let text = String::from_utf8_lossy(&help.stdout).into_owned();
        let name = std::iter::once("tearline")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        out.extend(text::help_examples(&name, &text));
        let subcommands: Vec<String> = text
            .split_once("Commands:\n")
            .map(|(_, rest)| {
                rest.lines()
                    .take_while(|l| !l.trim().is_empty())
                    .filter_map(|l| l.split_whitespace().next())
                    .filter(|n| *n != "help")
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        for s in subcommands {
            let mut p = path.to_vec();
            p.push(s);
            walk(&p, out);
        }
    }
    let mut out = Vec::new();
    walk(&[], &mut out);
    out
}

/// The stand-ins one example talks to, started on first use and killed with it.
#[derive(Default)]
struct StandIns {
    at: BTreeMap<u8, SocketAddr>,
    running: Vec<Running>,
}

impl StandIns {
    fn address(&mut self, world: &World, dir: &Path, s: StandIn) -> Result<SocketAddr, String> {
        let key = s as u8;
        if let Some(a) = self.at.get(&key) {
            return Ok(*a);
        }
        let line = match s {
            StandIn::Lab => "tearline serve --listen 127.0.0.1:0".to_owned(),
            StandIn::TlsLab => "tearline serve --listen 127.0.0.1:0 --tls-self-signed".to_owned(),
            StandIn::Proxy => format!(
                "tearline proxy --listen 127.0.0.1:0 --upstream {} --api off",
                self.address(world, dir, StandIn::Lab)?
            ),
            StandIn::TlsProxy => format!(
                "tearline proxy --listen 127.0.0.1:0 --upstream localhost:{} --upstream-tls \
                 --tls-self-signed --api off",
                self.address(world, dir, StandIn::TlsLab)?.port()
            ),
        };
        let mut run = world.launch(&line, dir).spawn();
        let addr = run
            .listening(&[Listener::Service], START_LIMIT)
            .map_err(|e| format!("stand-in {s:?}: {e}"))?[0]
            .1;
        self.running.push(run);
        self.at.insert(key, addr);
        Ok(addr)
    }
}

/// Starts a server line, probes what it announced, stops it with SIGINT.
fn serve_and_stop(world: &World, line: &str, dir: &Path) -> Result<String, String> {
    let words = text::shell_words(line);
    let command = command_of(&words);
    let mut needs = Vec::new();
    if command != "serve" && !line.contains("--api off") {
        needs.push(Listener::Api);
    }
    if command == "serve"
        || ["--listen", "--profile", "--populate", "-config"]
            .iter()
            .any(|f| words.iter().any(|w| w == f))
    {
        needs.push(Listener::Service);
    }
    let tls = line.contains("--tls-self-signed") || line.contains("--tls-cert");
    let mut run = world.launch(line, dir).spawn();
    let found = run.listening(&needs, START_LIMIT)?;
    let mut probed = Vec::new();
    for (kind, addr) in &found {
        match kind {
            Listener::Api => {
                let code = process::http_status(*addr, "/version", None)?;
                if code != 200 {
                    return Err(format!("`{line}`: GET /version answered {code}"));
                }
                probed.push(format!("API {addr} 200"));
            }
            Listener::Service => {
                let code = process::http_status(*addr, "/mcp", tls.then_some(world.ca.as_path()))
                    .map_err(|e| format!("`{line}`: {e}\n{}", run.output()))?;
                probed.push(format!("{addr} answered {code}"));
            }
        }
    }
    let code = run.interrupt(STOP_LIMIT)?;
    if code != 0 {
        return Err(format!(
            "`{line}` exited {code} after SIGINT:\n{}",
            run.output()
        ));
    }
    Ok(format!("served ({}), exit 0 on SIGINT", probed.join(", ")))
}

/// Runs one example (and the servers it starts first).
fn run_example(world: &World, n: usize, ex: &Example) -> Result<String, String> {
    let lines: Vec<&str> = ex
        .started
        .iter()
        .map(String::as_str)
        .chain([ex.line.as_str()])
        .collect();
    let dir = world.dir_for(n, &lines);
    let mut own = StandIns::default();
    let mut at = |s| own.address(world, &dir, s);
    let mut started = Vec::new();
    let mut started_at = None;
    for s in &ex.started {
        let line = rewrite(s, &mut at, None)?;
        let mut run = world.launch(&line, &dir).spawn();
        let found = run.listening(&[Listener::Service], START_LIMIT)?;
        started_at = Some(found[0].1);
        started.push(run);
    }
    let line = rewrite(&ex.line, &mut at, started_at)?;
    let result = match command_of(&text::shell_words(&line)).as_str() {
        "proxy" | "serve" | "toxiproxy-server" => serve_and_stop(world, &line, &dir),
        _ => {
            let mut run = world.launch(&line, &dir).spawn();
            let code = run.wait(RUN_LIMIT)?;
            let allowed = exits(&ex.line);
            if allowed.contains(&code) {
                Ok(format!("exit {code}"))
            } else {
                Err(format!(
                    "`{line}` exited {code}, expected one of {allowed:?}:\n{}",
                    run.output()
                ))
            }
        }
    };
    for mut s in started {
        let code = s.interrupt(STOP_LIMIT)?;
        if code != 0 {
            return Err(format!("a server the example started exited {code}"));
        }
    }
    result.map(|r| format!("`{line}`: {r}"))
}

/// Scheduling order: replays that run longest, other replays, load runs, the rest.
fn weight(line: &str) -> u8 {
    let command = command_of(&text::shell_words(line));
    match command.as_str() {
        "replay"
            if [
                "stateless",
                "replay-from-oldest",
                "audience",
                "--upstream",
                "--tls",
            ]
            .iter()
            .any(|s| line.contains(s)) =>
        {
            0
        }
        "replay" => 1,
        "load" => 2,
        _ => 3,
    }
}

#[test]
fn every_readme_and_help_command_line_runs_as_written() {
    let t0 = Instant::now();
    let readme = std::fs::read_to_string(checkout().join("README.md")).expect("README.md");
    let listed: Vec<Example> = text::readme_examples(&readme)
        .into_iter()
        .chain(help_examples())
        .collect();
    assert!(
        listed.len() >= 100,
        "only {} examples found: the extraction broke",
        listed.len()
    );
    assert!(
        listed.iter().any(|e| !e.started.is_empty()),
        "no example starts a server with `&`"
    );
    // Identical command lines (same servers started first) run once.
    let mut distinct: BTreeMap<(Vec<String>, String), Vec<&Example>> = BTreeMap::new();
    for e in &listed {
        let key_line = e.line.split(" #").next().unwrap_or("").trim().to_owned();
        distinct
            .entry((e.started.clone(), key_line))
            .or_default()
            .push(e);
    }
    // The longest first (replays, then load runs), so the last to end starts early.
    let mut cases: Vec<&Vec<&Example>> = distinct.values().collect();
    cases.sort_by_key(|c| weight(&c[0].line));
    let world = World::start();
    let setup = t0.elapsed();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Duration, Result<String, String>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(case) = cases.get(i) else { break };
                    let t = Instant::now();
                    let r = run_example(&world, i, case[0]);
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, t.elapsed(), r));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _, _)| *i);
    let mut failures = Vec::new();
    let mut checked = 0;
    for (i, took, r) in &results {
        let sources: Vec<&str> = cases[*i].iter().map(|e| e.source.as_str()).collect();
        checked += cases[*i].len();
        match r {
            Ok(what) => eprintln!(
                "ok {:>5.1}s [{}] {what}",
                took.as_secs_f64(),
                sources.join(", ")
            ),
            Err(e) => failures.push(format!("[{}] {e}", sources.join(", "))),
        }
    }
    eprintln!(
        "{} examples listed, {} distinct command lines run in {:.1}s (stand-ins and saved reports: {:.1}s)",
        listed.len(),
        cases.len(),
        t0.elapsed().as_secs_f64(),
        setup.as_secs_f64()
    );
    assert_eq!(
        results.len(),
        cases.len(),
        "every distinct command line ran"
    );
    assert_eq!(checked, listed.len(), "every listed example was run");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
