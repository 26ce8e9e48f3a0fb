//! The world the examples run in: a fresh home holding tearline's local CA, the files the
//! examples name (written, or saved by short real runs while the first examples run), the
//! environment of [`standins::ENV`], and the stand-in servers each example talks to, started
//! for it alone.
//!
//! Invariants: nothing is written outside the test's temp dir; every server started here is
//! killed when its owner is dropped; every wait is bounded.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

use crate::process::{Launch, Listener, Running};
use crate::standins::{self, StandIn};
use crate::{RUN_LIMIT, START_LIMIT, STOP_LIMIT, bin, checkout};

/// The stand-ins, the fixture files and the environment every example runs in.
pub struct World {
    root: tempfile::TempDir,
    skel: PathBuf,
    pub ca: PathBuf,
    env: Vec<(String, String)>,
    /// The lab the written files (my-proxies.toml, toxiproxy.json) name as upstream.
    _lab: Running,
    /// Whether the saved reports ([`standins::SAVED_FILES`]) are made: `None` until then,
    /// then `Ok` or what failed.
    saved: Mutex<Option<Result<(), String>>>,
    saved_made: Condvar,
}

impl World {
    pub fn launch(&self, line: &str, dir: &Path) -> Launch {
        Launch {
            line: line.to_owned(),
            dir: dir.to_path_buf(),
            env: self.env.clone(),
        }
    }

    /// The home with the local CA, the written files and the lab they name.
    pub fn start() -> World {
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
        World {
            root,
            skel,
            ca,
            env,
            _lab: lab_run,
            saved: Mutex::new(None),
            saved_made: Condvar::new(),
        }
    }

    /// Makes [`standins::SAVED_FILES`] (short real runs) and wakes the examples waiting.
    pub fn save_reports(&self) {
        let made = self.make_saved();
        *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = Some(made);
        self.saved_made.notify_all();
    }

    fn make_saved(&self) -> Result<(), String> {
        let serve = |line: &str| -> Result<(Running, SocketAddr), String> {
            let mut r = self.launch(line, &self.skel).spawn();
            let found = r.listening(&[Listener::Service], START_LIMIT)?;
            Ok((r, found[0].1))
        };
        let (_lab, lab) = serve("tearline serve --listen 127.0.0.1:0")?;
        let (mut proxy_run, proxy) = serve(&format!(
            "tearline proxy --listen 127.0.0.1:0 --upstream {lab} --api off \
             --profile profiles/reset-250ms.toml \
             --cuts-log proxy-a/cuts.jsonl --findings-log proxy-a/findings.jsonl"
        ))?;
        let mut runs: Vec<Running> =
            std::iter::once("tearline replay --seed 1 --out out".to_owned())
                .chain((1..=4).map(|k| {
                    format!(
                        "tearline load --target http://{proxy}/mcp --calls 40 --seed 7 \
                         --segment {k}/4 --report-dir out/agent-{k}"
                    )
                }))
                .map(|l| self.launch(&l, &self.skel).spawn())
                .collect();
        for r in &mut runs {
            match r.wait(RUN_LIMIT)? {
                0 => {}
                code => {
                    return Err(format!(
                        "a saved report's run exited {code}:\n{}",
                        r.output()
                    ));
                }
            }
        }
        // Stopped, the proxy has written every finding.
        match proxy_run.interrupt(STOP_LIMIT)? {
            0 => {}
            code => return Err(format!("the agents' proxy exited {code}")),
        }
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
            let to = self.skel.join(to);
            std::fs::create_dir_all(to.parent().expect("a parent")).map_err(|e| e.to_string())?;
            std::fs::copy(self.skel.join(from), &to).map_err(|e| format!("copy {from}: {e}"))?;
        }
        Ok(())
    }

    /// Waits (bounded) until the saved reports are made.
    fn wait_saved(&self) -> Result<(), String> {
        let guard = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .saved_made
            .wait_timeout_while(guard, RUN_LIMIT, |s| s.is_none())
            .unwrap_or_else(|e| e.into_inner());
        guard
            .clone()
            .unwrap_or_else(|| Err("the saved reports were not made in time".to_owned()))
    }

    /// A fresh directory for one example, with the files its lines name (waiting for the
    /// saved reports if it names one).
    pub fn dir_for(&self, n: usize, lines: &[&str]) -> Result<PathBuf, String> {
        let dir = self.root.path().join("runs").join(n.to_string());
        std::fs::create_dir_all(&dir).expect("mkdir run");
        std::os::unix::fs::symlink(checkout().join("profiles"), dir.join("profiles"))
            .expect("link profiles");
        let named = |files: &[(&'static str, &str)]| -> Vec<&'static str> {
            files
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| lines.iter().any(|l| l.contains(n)))
                .collect()
        };
        let saved = named(&standins::SAVED_FILES);
        if !saved.is_empty() {
            self.wait_saved()?;
        }
        for name in named(&standins::WRITTEN_FILES).into_iter().chain(saved) {
            copy_all(&self.skel.join(name), &dir.join(name));
        }
        Ok(dir)
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

/// The stand-ins one example talks to, started on first use and killed with it.
#[derive(Default)]
pub struct StandIns {
    at: BTreeMap<u8, SocketAddr>,
    running: Vec<Running>,
}

impl StandIns {
    pub fn address(&mut self, world: &World, dir: &Path, s: StandIn) -> Result<SocketAddr, String> {
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
