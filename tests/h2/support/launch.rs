//! The commands that start each peer (from `tests/peers`, provisioned on first use) with the
//! arguments the h2 tests give them.

use std::process::Command;

use super::certs::Certs;
use crate::peers;

/// What a client is asked to follow: named streams of `n` events, with extra query parameters
/// for the server (`interval`, `size`, `first_delay`, `retry`), resuming up to `resume` times.
#[derive(Clone)]
pub struct Ask<'a> {
    pub streams: &'a [&'a str],
    pub n: u64,
    pub query: String,
    pub resume: u32,
    pub timeout_ms: u64,
}

/// Node's `http2` server: h2c, or h2 over TLS with `certs`.
pub fn node_server(certs: Option<&Certs>) -> Command {
    let mut cmd = peers::node();
    cmd.arg(peers::dir().join("js/h2_sse_server.mjs"));
    if let Some(c) = certs {
        cmd.arg("--cert").arg(&c.cert).arg("--key").arg(&c.key);
    }
    cmd
}

/// Go's `net/http` server (h2 over TLS).
pub fn go_server(certs: &Certs) -> Command {
    let mut cmd = peers::go_h2sse();
    cmd.args(["server", "-cert"])
        .arg(&certs.cert)
        .arg("-key")
        .arg(&certs.key);
    cmd
}

/// Node's `http2` client on `url` (`http://` = h2c prior knowledge), trusting `ca`.
pub fn node_client(url: &str, ca: Option<&Certs>, ask: &Ask) -> Command {
    let mut cmd = peers::node();
    cmd.arg(peers::dir().join("js/h2_sse_client.mjs")).arg(url);
    common_args(&mut cmd, ca, ask, "--");
    cmd
}

/// httpx with `http2=True` on `url` (`http://` = prior knowledge), trusting `ca`.
pub fn py_client(url: &str, ca: Option<&Certs>, ask: &Ask) -> Command {
    let mut cmd = peers::python();
    cmd.arg(peers::dir().join("py/h2_sse_client.py")).arg(url);
    common_args(&mut cmd, ca, ask, "--");
    cmd
}

/// Go's `net/http` client on `url` (https only), trusting `ca`.
pub fn go_client(url: &str, ca: &Certs, ask: &Ask) -> Command {
    let mut cmd = peers::go_h2sse();
    cmd.args(["client", "-url", url]);
    common_args(&mut cmd, Some(ca), ask, "-");
    cmd.arg(format!("-timeout={}ms", ask.timeout_ms));
    cmd
}

fn common_args(cmd: &mut Command, ca: Option<&Certs>, ask: &Ask, dash: &str) {
    cmd.arg(format!("{dash}streams"))
        .arg(ask.streams.join(","))
        .arg(format!("{dash}n"))
        .arg(ask.n.to_string())
        .arg(format!("{dash}resume"))
        .arg(ask.resume.to_string());
    if !ask.query.is_empty() {
        cmd.arg(format!("{dash}query")).arg(&ask.query);
    }
    if let Some(c) = ca {
        cmd.arg(format!("{dash}ca")).arg(&c.ca);
    }
    if dash == "--" {
        cmd.arg("--timeout").arg(ask.timeout_ms.to_string());
    }
}

/// curl fetching `url` with HTTP/2 (`--http2-prior-knowledge` for http://, `--http2` with ALPN
/// for https:// trusting `ca`), the body into `out`, its own report (`--write-out %{json}`: HTTP
/// version, exit code, error message) as one JSON line on stdout.
pub fn curl(url: &str, ca: Option<&Certs>, out: &std::path::Path, max_secs: u64) -> Command {
    let mut cmd = peers::curl();
    cmd.args([
        "--silent",
        "--no-buffer",
        "--max-time",
        &max_secs.to_string(),
    ]);
    if url.starts_with("http://") {
        cmd.arg("--http2-prior-knowledge");
    } else {
        cmd.arg("--http2");
    }
    if let Some(c) = ca {
        cmd.arg("--cacert").arg(&c.ca);
    }
    cmd.arg("--output")
        .arg(out)
        .args(["--write-out", "%{json}\n", url]);
    cmd
}

/// Headless Chromium (driven over the DevTools pipe by a Node script) opening `url`.
pub fn chromium(url: &str, timeout_ms: u64) -> Command {
    let browser = peers::chromium_binary();
    let mut cmd = peers::node();
    cmd.arg(peers::dir().join("js/h2_chromium_eventsource.mjs"))
        .arg(url)
        .arg("--chromium")
        .arg(browser)
        .arg("--timeout")
        .arg(timeout_ms.to_string());
    cmd
}
