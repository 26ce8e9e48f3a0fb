//! A request delayed upstream (latency) whose response stream is then cut with a reset: the
//! audit learns the request when its bytes reach the server, so the torn-cut finding names the
//! request (method, path, JSON-RPC id) instead of `unknown`.

use crate::common::delivery::*;
use tearline::audit::FindingKind;
use tearline::lab::LineEnding;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_after_upstream_latency_names_the_request_method_and_id() {
    let faults = vec![
        fault(&[
            ("kind", s("latency")),
            ("direction", s("upstream")),
            ("latency_ms", i(150)),
        ]),
        fault(&[
            ("kind", s("sse_cut")),
            ("direction", s("downstream")),
            ("at", s("mid-value")),
            ("range", toml::Value::Array(vec![i(40), i(200)])),
            ("method", s("POST")),
            ("action", s("reset")),
        ]),
    ];
    let mut traffic = Traffic::small(LineEnding::Crlf);
    traffic.calls = 2;
    traffic.sessions = 1;
    let r = run(7, faults, traffic).await;
    assert_delivery_truth(&r, "upstream latency + reset");
    let findings = r.auditor.findings();
    let torn: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::TornCut)
        .collect();
    assert!(!torn.is_empty(), "no torn cut: {findings:#?}");
    for f in &torn {
        assert_eq!(f.stream.request, "POST /mcp", "{f:#?}");
        assert!(
            f.stream.rpc_ids.iter().any(|id| id.parse::<u64>().is_ok()),
            "the finding names no JSON-RPC id: {f:#?}"
        );
    }
    assert!(
        !findings.iter().any(|f| f.kind == FindingKind::Unknown),
        "{findings:#?}"
    );
}
