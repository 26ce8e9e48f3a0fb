//! Real MCP SDK clients, as users run them, against the lab in its default (dual-era) mode:
//! each completes `tools/list` and a streamed `tools/call` with progress, in the era it asked
//! for. TS `@modelcontextprotocol/sdk` 1.x (legacy), `@modelcontextprotocol/client` 2.x (legacy
//! default, `auto` probing, pinned 2026-07-28) and PyPI `mcp` 2.x (`legacy`, `auto`,
//! `2026-07-28`). Pinned in tests/peers; each run is bounded by a 30 s timeout.

use crate::common;
use std::time::Duration;

use serde_json::Value;
use tearline::lab::{LabConfig, serve};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

struct Outcome {
    era: String,
    tools: Vec<String>,
    progress: u64,
    text: String,
}

async fn lab(cfg: LabConfig) -> (String, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let stop = CancellationToken::new();
    let s = stop.clone();
    tokio::spawn(async move { serve(listener, cfg, s).await.expect("lab") });
    (url, stop)
}

async fn run(mut cmd: std::process::Command) -> Outcome {
    cmd.stdin(std::process::Stdio::null());
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::from(cmd)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finished within 30 s")
    .expect("the client started");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON line in the client's output: {stdout}"));
    Outcome {
        era: v["era"].as_str().unwrap_or("").to_owned(),
        tools: v["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        progress: v["progress"].as_u64().unwrap_or(0),
        text: v["text"].as_str().unwrap_or("").to_owned(),
    }
}

fn js(url: &str, flavour: &str) -> std::process::Command {
    let mut c = common::peers::node();
    c.arg(common::peers::dir().join("js/lab_client.mjs")).args([
        url,
        flavour,
        "progress",
        r#"{"n":3}"#,
    ]);
    c
}

fn py(url: &str, mode: &str) -> std::process::Command {
    let mut c = common::peers::python();
    c.arg(common::peers::dir().join("py/lab_client.py")).args([
        url,
        mode,
        "progress",
        r#"{"n":3}"#,
    ]);
    c
}

fn assert_served(o: &Outcome, era: &str) {
    assert_eq!(o.era, era, "negotiated era");
    assert!(o.tools.iter().any(|t| t == "append"), "tools {:?}", o.tools);
    assert_eq!(o.progress, 3, "progress notifications received");
    assert_eq!(o.text, "progress done: 3");
}

#[tokio::test]
async fn ts_sdk_1_legacy_client_gets_2025_11_25() {
    let (url, stop) = lab(LabConfig::default()).await;
    assert_served(&run(js(&url, "sdk1")).await, "2025-11-25");
    stop.cancel();
}

#[tokio::test]
async fn ts_client_2_default_is_legacy_and_auto_or_pinned_is_2026_07_28() {
    let (url, stop) = lab(LabConfig::default()).await;
    assert_served(&run(js(&url, "sdk2-legacy")).await, "2025-11-25");
    let auto = run(js(&url, "sdk2-auto")).await;
    assert_served(&auto, "2026-07-28");
    assert!(
        auto.tools.iter().any(|t| t == "confirm"),
        "the modern listing has confirm"
    );
    assert_served(&run(js(&url, "sdk2-2026")).await, "2026-07-28");
    stop.cancel();
}

#[tokio::test]
async fn python_mcp_2_client_gets_each_era_it_asks_for() {
    let (url, stop) = lab(LabConfig::default()).await;
    assert_served(&run(py(&url, "legacy")).await, "2025-11-25");
    assert_served(&run(py(&url, "auto")).await, "2026-07-28");
    assert_served(&run(py(&url, "2026-07-28")).await, "2026-07-28");
    stop.cancel();
}

#[tokio::test]
async fn python_client_receives_a_default_blob_under_the_1_mib_event_cap() {
    let cfg = LabConfig {
        max_event_bytes: Some(1 << 20),
        ..LabConfig::default()
    };
    let (url, stop) = lab(cfg).await;
    let mut c = common::peers::python();
    c.arg(common::peers::dir().join("py/lab_client.py")).args([
        url.as_str(),
        "2026-07-28",
        "blob",
        "{}",
    ]);
    let o = run(c).await;
    assert_eq!(o.progress, 3);
    assert!(
        o.text.starts_with("abcdefghijklmnopqrstuvwxyz"),
        "{}",
        o.text
    );
    stop.cancel();
}

#[tokio::test]
async fn a_modern_only_lab_refuses_a_legacy_client_with_the_versions_it_speaks() {
    let cfg = LabConfig {
        protocol: tearline::lab::ProtocolVersion::V2026_07_28,
        narrow: true,
        ..LabConfig::default()
    };
    let (url, stop) = lab(cfg).await;
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::from(js(&url, "sdk1"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("bounded")
    .expect("started");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("2026-07-28"),
        "the error names the revision: {err}"
    );
    // The same lab serves a 2026-07-28 client.
    assert_served(&run(js(&url, "sdk2-2026")).await, "2026-07-28");
    stop.cancel();
}
