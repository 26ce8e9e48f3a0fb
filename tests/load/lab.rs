//! The load client against the lab server directly (no faults): every call of both policies
//! completes with its verified result, and nothing is detected, resumed or re-issued; and,
//! behind a proxy cutting a 2026-07-28 JSON answer, only the retry policy re-sends a call that
//! is not idempotent.

use std::time::Duration;

use tearline::lab::{LabConfig, serve};
use tearline::load::era::EraChoice;
use tearline::load::{self, LoadConfig, LoadOutcome, Policy, Stop, Target};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

async fn lab() -> (Target, CancellationToken) {
    lab_with(LabConfig::default()).await
}

async fn lab_with(config: LabConfig) -> (Target, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(listener, config, shutdown.clone()));
    let target = Target::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap();
    (target, shutdown)
}

/// A run in the legacy era (2025-11-25: priming events, resumable), which the event counts
/// below describe; the dual-era lab would otherwise be detected as 2026-07-28.
async fn run(target: Target, policy: Policy, tool: &str, args: serde_json::Value) -> LoadOutcome {
    run_in(EraChoice::Legacy, target, policy, tool, args).await
}

async fn run_in(
    era: EraChoice,
    target: Target,
    policy: Policy,
    tool: &str,
    args: serde_json::Value,
) -> LoadOutcome {
    let mut cfg = LoadConfig::new(target, tool, args);
    cfg.era = era;
    cfg.policy = policy;
    cfg.sessions = 8;
    cfg.stop = Stop::Calls(40);
    cfg.call_timeout = Duration::from_secs(10);
    tokio::time::timeout(
        Duration::from_secs(30),
        load::run(cfg, CancellationToken::new()),
    )
    .await
    .expect("run finishes")
    .expect("lab accepts sessions")
}

fn assert_clean(o: &LoadOutcome) {
    let c = o.counters;
    assert!(c.is_balanced());
    assert_eq!((c.calls, c.ok), (40, 40), "{c:?} {:?}", o.errors);
    assert_eq!(
        (
            c.torn_cut,
            c.resumes,
            c.reissued,
            c.renegotiations,
            c.silent_loss
        ),
        (0, 0, 0, 0, 0)
    );
    assert_eq!(
        (
            c.replay_duplicate,
            c.replay_gap,
            c.replay_reorder,
            c.explicit_errors
        ),
        (0, 0, 0, 0)
    );
    assert!(o.traces.is_empty());
    assert_eq!(o.histograms["call"].len(), 40);
}

#[tokio::test]
async fn blob_calls_against_the_lab_are_all_ok_for_both_policies() {
    let (target, shutdown) = lab().await;
    let args = serde_json::json!({"size": 65536, "lines": 3});
    for policy in [Policy::Strict, Policy::Naive] {
        let o = run(target.clone(), policy, "blob", args.clone()).await;
        assert_clean(&o);
        // Per call: the priming event (its `data:` line makes an empty, dispatched event),
        // 3 progress notifications and the result.
        assert_eq!(o.counters.events, 40 * 5);
    }
    shutdown.cancel();
}

#[tokio::test]
async fn progress_calls_against_the_lab_verify_the_whole_sequence() {
    let (target, shutdown) = lab().await;
    let o = run(
        target,
        Policy::Strict,
        "progress",
        serde_json::json!({"n": 5, "interval": 0}),
    )
    .await;
    assert_clean(&o);
    assert_eq!(o.counters.events, 40 * 7);
    shutdown.cancel();
}

#[tokio::test]
async fn a_2026_07_28_lab_without_sessions_or_ids_serves_every_call() {
    let config = LabConfig {
        protocol: tearline::lab::ProtocolVersion::V2026_07_28,
        ..LabConfig::default()
    };
    let (target, shutdown) = lab_with(config).await;
    let o = run_in(
        EraChoice::Auto,
        target,
        Policy::Strict,
        "blob",
        serde_json::json!({"size": 4096, "lines": 2}),
    )
    .await;
    assert_clean(&o);
    shutdown.cancel();
}

/// A 2026-07-28 lab answering calls with JSON bodies, behind a proxy that cuts the first call's
/// body inside its result (`reset`): the client gets part of the body, then a reset.
async fn json_lab_behind_a_cut(
    counter: &tearline::lab::SideEffects,
) -> (Target, CancellationToken) {
    use std::sync::Arc;
    use tearline::accuracy::modern::cut::{CallCut, CutAim};
    use tearline::proxy::{Proxy, ProxyConfig};
    let config = LabConfig {
        protocol: tearline::lab::ProtocolVersion::V2026_07_28,
        narrow: true,
        json_results: true,
        side_effects: counter.clone(),
        ..LabConfig::default()
    };
    let (lab, shutdown) = lab_with(config).await;
    let cut = CallCut::new(CutAim {
        target: 0,
        sse: None,
        action: tearline::vocab::CutAction::Reset,
    });
    let proxy = Proxy::with_faults(
        ProxyConfig::new("json-cut", format!("{}:{}", lab.host, lab.port)),
        vec![cut],
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(tearline::proxy::run(
        listener,
        Arc::clone(&proxy),
        shutdown.clone(),
    ));
    let target = Target::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap();
    (target, shutdown)
}

#[tokio::test]
async fn a_cut_json_answer_of_a_not_idempotent_call_is_resent_by_retry_only() {
    for (policy, runs, ok) in [(Policy::Strict, 1, 0), (Policy::Retry, 2, 1)] {
        let counter = tearline::lab::SideEffects::default();
        let (target, shutdown) = json_lab_behind_a_cut(&counter).await;
        let mut cfg = LoadConfig::new(target, "append", serde_json::json!({"amount": 1}));
        cfg.policy = policy;
        cfg.era = EraChoice::Modern;
        cfg.stop = Stop::Calls(1);
        cfg.backoff = Duration::from_millis(1);
        cfg.call_timeout = Duration::from_secs(10);
        let o = tokio::time::timeout(
            Duration::from_secs(30),
            load::run(cfg, CancellationToken::new()),
        )
        .await
        .expect("run finishes")
        .expect("lab accepts the client");
        assert_eq!(counter.get(), runs, "{policy}: times `append` ran");
        assert_eq!(o.counters.ok, ok, "{policy}: {:?}", o.errors);
        if policy == Policy::Strict {
            assert_eq!(o.errors.get("not-idempotent"), Some(&1), "{:?}", o.errors);
        }
        shutdown.cancel();
    }
}
