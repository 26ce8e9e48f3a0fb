//! Repeated `tearline load` runs through one proxy: every run names its requests with its own
//! run id (keys and prompts), so the audit never takes a later run's request for a re-send of
//! an earlier run's truncated answer — while a request's own re-sends keep its key and are
//! still proven re-sends.

use std::path::Path;
use std::process::{Command, Stdio};

use tearline::lab::LabConfig;
use tokio::net::TcpListener;

use crate::keys::address_in;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tearline")
}

/// The proxy (`profiles/llm-truncation.toml`, findings logged) in front of a lab: each run's
/// `--json` summary (one load run per entry of `policies`, 12 calls each) and the findings.
async fn runs_through_one_proxy(
    out: &Path,
    policies: &[&str],
    path: &str,
) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let lab = TcpListener::bind("127.0.0.1:0").await.expect("bind lab");
    let lab_addr = lab.local_addr().expect("lab addr");
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(tearline::lab::serve(
        lab,
        LabConfig::default(),
        stop.clone(),
    ));
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/llm-truncation.toml");
    let mut proxy = Command::new(bin())
        .args(["proxy", "--listen", "127.0.0.1:0", "--upstream"])
        .arg(lab_addr.to_string())
        .arg("--profile")
        .arg(&profile)
        .args(["--api", "off", "--seed", "3", "--findings-log"])
        .arg(out.join("findings.jsonl"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(out.join("proxy.stderr")).expect("file"))
        .spawn()
        .expect("start proxy");
    let proxy_addr = address_in(&out.join("proxy.stderr")).await;
    let mut summaries = Vec::new();
    for (i, policy) in policies.iter().enumerate() {
        let done = Command::new(bin())
            .args(["load", "--target"])
            .arg(format!("http://{proxy_addr}{path}"))
            .args(["--calls", "12", "--sessions", "2", "--seed", "7", "--json"])
            .args(["--policy", policy, "--report-dir"])
            .arg(out.join(format!("report-{i}")))
            .stderr(Stdio::null())
            .output()
            .expect("run load");
        assert!(done.status.success(), "{done:?}");
        summaries.push(serde_json::from_slice(&done.stdout).expect("--json output"));
    }
    // SIGTERM: the proxy judges what is left and flushes its findings log.
    let _ = Command::new("kill")
        .args(["-TERM", &proxy.id().to_string()])
        .status();
    let _ = tokio::task::spawn_blocking(move || proxy.wait()).await;
    stop.cancel();
    let findings = std::fs::read_to_string(out.join("findings.jsonl")).unwrap_or_default();
    let findings = findings
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON finding"))
        .collect();
    (summaries, findings)
}

fn kind_count(findings: &[serde_json::Value], kind: &str) -> u64 {
    findings.iter().filter(|f| f["kind"] == kind).count() as u64
}

fn counter(summary: &serde_json::Value, name: &str) -> u64 {
    summary["runs"][0]["counters"][name].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_naive_runs_through_one_proxy_leave_every_accepted_truncation_truncated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (summaries, findings) =
        runs_through_one_proxy(dir.path(), &["naive", "naive"], "/v1/chat/completions").await;
    let ids: Vec<&str> = summaries
        .iter()
        .filter_map(|s| s["run_id"].as_str())
        .collect();
    assert_eq!(ids.len(), 2, "{summaries:?}");
    assert_ne!(ids[0], ids[1], "two runs share a run id");
    for (i, id) in ids.iter().enumerate() {
        let path = dir.path().join(format!("report-{i}/report.json"));
        let report = tearline::report::json::load(&path).expect("report");
        assert_eq!(report.facts.run_id.as_deref(), Some(*id));
    }
    let accepted: u64 = summaries.iter().map(|s| counter(s, "silent-loss")).sum();
    assert!(accepted >= 2, "too few truncations to judge: {summaries:?}");
    assert_eq!(kind_count(&findings, "llm-retried"), 0, "{findings:#?}");
    assert_eq!(
        kind_count(&findings, "llm-truncated"),
        accepted,
        "{findings:#?}"
    );
    // Each finding names its own run's key.
    for f in findings.iter().filter(|f| f["kind"] == "llm-truncated") {
        let key = f["ids"][0].as_str().unwrap_or("");
        assert!(
            ids.iter()
                .any(|id| key.starts_with(&format!("tl-llm-{id}-naive-"))),
            "{f}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_runs_own_re_sends_are_still_proven_and_a_later_phase_proves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (summaries, findings) =
        runs_through_one_proxy(dir.path(), &["strict", "naive"], "/v1/chat/completions").await;
    let re_sends = counter(&summaries[0], "reissued");
    assert!(re_sends > 0, "no strict answer was cut: {summaries:?}");
    // Every strict re-send is a proven one (same key, same run); the naive run after it
    // proves nothing, so each answer it took (and each strict request that gave up) is a loss.
    assert_eq!(
        kind_count(&findings, "llm-retried"),
        re_sends,
        "{findings:#?}"
    );
    assert_eq!(
        kind_count(&findings, "llm-truncated"),
        counter(&summaries[0], "failed") + counter(&summaries[1], "silent-loss"),
        "{findings:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_profile_cuts_behind_a_path_prefix_and_on_azure_deployment_paths() {
    for path in [
        "/gateway/team-a/v1/chat/completions",
        "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (summaries, findings) = runs_through_one_proxy(dir.path(), &["naive"], path).await;
        let accepted = counter(&summaries[0], "silent-loss");
        assert!(accepted > 0, "{path}: nothing was cut: {summaries:?}");
        assert_eq!(
            kind_count(&findings, "llm-truncated"),
            accepted,
            "{path}: {findings:#?}"
        );
    }
}
