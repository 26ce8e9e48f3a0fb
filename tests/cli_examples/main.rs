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
mod world;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use process::Listener;
use standins::{command_of, exits, rewrite};
use text::Example;
use world::{StandIns, World};

/// Examples run at once: most wait on timers and sockets (a replay's outages), few on CPU.
const PARALLEL: usize = 10;
/// Longest a command that ends may run: a bound, not a goal (the longest replay scenario takes
/// ~16 s alone on 2 cores, and over 100 s on the same cores shared with 20 busy processes).
pub const RUN_LIMIT: Duration = Duration::from_secs(300);
/// Longest a server may take to announce its addresses.
pub const START_LIMIT: Duration = Duration::from_secs(30);
/// Longest a server may take to exit after SIGINT (no connection is left open to drain).
pub const STOP_LIMIT: Duration = Duration::from_secs(20);

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tearline")
}

pub fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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
    let dir = world.dir_for(n, &lines)?;
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

/// One case's index, how long it took, and what happened (or what failed).
type Outcome = (usize, Duration, Result<String, String>);

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
    let results: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        s.spawn(|| world.save_reports());
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
        "{} examples listed, {} distinct command lines run in {:.1}s (home, CA and written files: {:.1}s)",
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

#[test]
fn a_line_binds_port_zero_and_talks_to_stand_ins_only() {
    let fake = |s| -> Result<std::net::SocketAddr, String> {
        Ok(match s {
            standins::StandIn::Lab => "127.0.0.1:1001",
            standins::StandIn::Proxy => "127.0.0.1:1002",
            standins::StandIn::TlsLab => "127.0.0.1:1003",
            standins::StandIn::TlsProxy => "127.0.0.1:1004",
        }
        .parse()
        .expect("an address"))
    };
    let cases = [
        (
            "tearline proxy --listen 127.0.0.1:7000 --upstream api.example.com:443 --upstream-tls",
            "tearline proxy --listen 127.0.0.1:0 --upstream localhost:1003 --upstream-tls --api 127.0.0.1:0",
        ),
        (
            "tearline load --target http://127.0.0.1:7000/mcp --duration 60s   # a minute",
            "tearline load --target http://127.0.0.1:1002/mcp --duration 2s",
        ),
        (
            "tearline profiles show gateway-idle-kill > my.toml",
            "tearline profiles show gateway-idle-kill > my.toml",
        ),
        (
            "tearline serve --auth &",
            "tearline serve --auth --listen 127.0.0.1:0",
        ),
        (
            "tearline toxiproxy-server -host 0.0.0.0 -config toxiproxy.json",
            "tearline toxiproxy-server -host 127.0.0.1 -config toxiproxy.json -port 0",
        ),
        (
            "tearline load --era auto",
            "tearline load --era auto --target http://127.0.0.1:1001/mcp",
        ),
    ];
    for (line, want) in cases {
        let got = rewrite(line, fake, None).expect("rewrites");
        assert_eq!(text::shell_words(&got), text::shell_words(want), "{line}");
    }
    let tls = rewrite(
        "tearline load --target https://localhost:8931/mcp",
        fake,
        None,
    );
    assert_eq!(
        tls.as_deref(),
        Ok("tearline load --target https://localhost:1003/mcp")
    );
    let started = "127.0.0.1:2000".parse().ok();
    let got = rewrite(
        "tearline load --target http://127.0.0.1:8931/mcp",
        fake,
        started,
    );
    assert_eq!(
        got.as_deref(),
        Ok("tearline load --target http://127.0.0.1:2000/mcp")
    );
}

#[test]
fn a_changed_flag_or_a_wrong_exit_fails_its_example() {
    let world = World::start();
    let example = |line: &str| Example {
        source: "test".to_owned(),
        started: Vec::new(),
        line: line.to_owned(),
    };
    let bad_flag = run_example(&world, 0, &example("tearline profiles list --no-such-flag"));
    assert!(
        bad_flag.as_ref().is_err_and(|e| e.contains("exited 2")),
        "{bad_flag:?}"
    );
    let no_file = run_example(&world, 1, &example("tearline profiles validate gone.toml"));
    assert!(no_file.is_err(), "{no_file:?}");
    let good = run_example(&world, 2, &example("tearline profiles list"));
    assert!(good.is_ok(), "{good:?}");
    let server = run_example(
        &world,
        3,
        &example("tearline serve --listen 127.0.0.1:8931"),
    );
    assert!(
        server
            .as_ref()
            .is_ok_and(|s| s.contains("exit 0 on SIGINT")),
        "{server:?}"
    );
}
