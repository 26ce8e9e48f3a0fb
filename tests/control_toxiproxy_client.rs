//! A published Toxiproxy client (PyPI `toxiproxy-python`) drives tearline's control API over
//! the real relay: create a proxy, add latency, observe the delay, remove it, reset, delete.
//!
//! Needs `python3` with pip; the pinned client is installed into `tests/peers/` on first use.

mod control_support;
mod peers;

use std::net::SocketAddr;
use std::process::Stdio;

use control_support::live::start_live;
use control_support::{TEST_TIMEOUT, echo_server};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/toxiproxy_client/latency_roundtrip.py"
);

/// Runs the client script; returns its exit code and output.
async fn run_client(api: SocketAddr, upstream: SocketAddr, extra: &[&str]) -> (i32, String) {
    let child = tokio::process::Command::from(peers::python())
        .arg(SCRIPT)
        .arg(api.to_string())
        .arg(upstream.to_string())
        .args(extra)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = match child.await {
        Ok(o) => o,
        Err(e) => panic!("cannot run python3 ({e}); install Python 3.10+"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let code = out.status.code().unwrap_or(-1);
    assert_ne!(
        code, 3,
        "the Toxiproxy client is missing; run `tests/peers/provision.sh python`: {text}"
    );
    (code, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxiproxy_python_client_adds_latency_observes_it_and_removes_it() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let live = start_live().await;
        let upstream = echo_server().await;
        let (code, text) = run_client(live.addr, upstream, &[]).await;
        assert_eq!(code, 0, "{text}");
        assert!(text.starts_with("OK "), "{text}");
        println!("{text}");
        live.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}
