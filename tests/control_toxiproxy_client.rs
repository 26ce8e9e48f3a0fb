//! A published Toxiproxy client (PyPI `toxiproxy-python`) drives tearline's control API:
//! create a proxy, add latency, observe the delay, remove it, reset, delete.
//!
//! Needs `python3` with the client installed (`python3 -m pip install toxiproxy-python`, done by
//! `.ci/run`); without it the test fails and says so.

mod control_support;

use std::net::SocketAddr;
use std::process::Stdio;

use control_support::{TEST_TIMEOUT, echo_server, start_api};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/toxiproxy_client/latency_roundtrip.py"
);

/// Runs the client script; returns its exit code and output.
async fn run_client(api: SocketAddr, upstream: SocketAddr, extra: &[&str]) -> (i32, String) {
    let child = tokio::process::Command::new("python3")
        .arg(SCRIPT)
        .arg(api.to_string())
        .arg(upstream.to_string())
        .args(extra)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = match child.await {
        Ok(o) => o,
        Err(e) => panic!(
            "cannot run python3 ({e}); install Python 3 and `python3 -m pip install toxiproxy-python`"
        ),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let code = out.status.code().unwrap_or(-1);
    assert_ne!(
        code, 3,
        "the Toxiproxy client is missing; run the install step `python3 -m pip install toxiproxy-python`: {text}"
    );
    (code, text)
}

#[tokio::test]
async fn toxiproxy_python_client_drives_the_api() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let api = start_api(|_| {}).await;
        let upstream = echo_server().await;
        let (code, text) = run_client(api.addr, upstream, &["--no-delay-check"]).await;
        assert_eq!(code, 0, "{text}");
        assert!(text.starts_with("OK "), "{text}");
    })
    .await
    .expect("test timed out");
}
