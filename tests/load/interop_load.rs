//! `tearline load` against small real-SDK servers (TS `@modelcontextprotocol/server` 2.x and
//! PyPI `mcp` 2.x, both dual-era), in both eras, directly and through the proxy with a
//! mid-event cut of every SSE stream's result. Through the cut, the strict 2026-07-28 client
//! re-issues the idempotent call with a new id and the audit says `reissued`; it refuses to
//! repeat the non-idempotent `append` and reports the call failed; the naive client loses
//! calls silently. Results longer than the observer keeps are still recognised as answers.
//! Each server start and run is bounded (30 s).

use crate::common;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tearline::audit::{AuditConfig, Auditor};
use tearline::load::era::EraChoice;
use tearline::load::{self, LoadConfig, LoadOutcome, Policy, Stop, Target};
use tearline::proxy::{Proxy, ProxyConfig};
use tearline::wire::ObservationSink;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

/// A real-SDK server process on a free port (killed when dropped).
struct Server {
    port: u16,
    _child: Child,
}

async fn start(cmd: std::process::Command) -> Server {
    let mut child = Command::from(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the server starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let port = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(p) = line.strip_prefix("listening ") {
                return p.trim().parse::<u16>().ok();
            }
        }
        None
    })
    .await
    .expect("the server listens within 30 s")
    .expect("the server printed its port");
    // Keep draining its stdout so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Server {
        port,
        _child: child,
    }
}

async fn ts_server() -> Server {
    let mut c = common::peers::node();
    c.arg(common::peers::dir().join("js/server.mjs"));
    start(c).await
}

async fn py_server() -> Server {
    let mut c = common::peers::python();
    c.arg(common::peers::dir().join("py/server.py"));
    start(c).await
}

fn config(port: u16, era: EraChoice, policy: Policy, tool: &str, calls: u64) -> LoadConfig {
    let target = Target::parse(&format!("http://127.0.0.1:{port}/mcp")).expect("target");
    let args = if tool == "work" {
        serde_json::json!({"n": 2, "pad": 2000})
    } else {
        serde_json::json!({})
    };
    let mut cfg = LoadConfig::new(target, tool, args);
    cfg.era = era;
    cfg.policy = policy;
    cfg.stop = Stop::Calls(calls);
    cfg.backoff = Duration::from_millis(5);
    cfg.call_timeout = Duration::from_secs(10);
    cfg.max_attempts = 12;
    cfg
}

async fn run(cfg: LoadConfig) -> LoadOutcome {
    tokio::time::timeout(
        Duration::from_secs(30),
        load::run(cfg, CancellationToken::new()),
    )
    .await
    .expect("the run finishes within 30 s")
    .expect("the run starts")
}

/// A proxy in front of `port` that cuts half the SSE responses (fixed seed: the same streams
/// every run) inside a `data:` value, with a reset; the auditor watches it.
async fn cutting_proxy(port: u16) -> (u16, Arc<Auditor>, CancellationToken) {
    audited_proxy(
        port,
        r#"
[[fault]]
kind = "sse_cut"
direction = "downstream"
at = "mid-value"
action = "reset"
probability = 0.5
"#,
    )
    .await
}

/// A proxy in front of `port` with the faults of `profile` (TOML; empty: none), watched by an
/// auditor.
async fn audited_proxy(port: u16, profile: &str) -> (u16, Arc<Auditor>, CancellationToken) {
    let faults = if profile.is_empty() {
        Vec::new()
    } else {
        let profile = tearline::profile::parse(profile, "interop").expect("profile");
        profile.factories_for(None)
    };
    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    let proxy = Proxy::with_faults(
        ProxyConfig::new("interop", format!("127.0.0.1:{port}")),
        faults,
    );
    let sink: Arc<dyn ObservationSink> = auditor.clone();
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| {
        tearline::wire::http1::observer_pair(conn, sink.clone())
    }));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    let s = stop.clone();
    tokio::spawn(async move {
        let _ = tearline::proxy::run(listener, proxy, s).await;
    });
    (addr.port(), auditor, stop)
}

async fn both_eras_complete_directly(server: Server) {
    for era in [EraChoice::Legacy, EraChoice::Modern, EraChoice::Auto] {
        let o = run(config(server.port, era, Policy::Strict, "work", 4)).await;
        assert_eq!(
            (o.counters.calls, o.counters.ok),
            (4, 4),
            "{era:?}: {:?}",
            o.errors
        );
        assert_eq!(o.counters.reissued, 0, "{era:?}");
    }
}

async fn cut_2026_streams_are_reissued_by_strict_and_lost_by_naive(server: Server) {
    let (port, auditor, stop) = cutting_proxy(server.port).await;
    let strict = run(config(port, EraChoice::Modern, Policy::Strict, "work", 6)).await;
    auditor.finish();
    let counts = auditor.counts();
    assert_eq!(
        (strict.counters.ok, strict.counters.silent_loss),
        (6, 0),
        "{:?}",
        strict.errors
    );
    assert!(
        strict.counters.reissued >= 1,
        "strict re-issues a cut idempotent call"
    );
    assert!(
        counts.get("reissued").copied().unwrap_or(0) >= 1,
        "audit: {counts:?}"
    );
    for kind in ["abandoned", "unproven-resend"] {
        assert_eq!(
            counts.get(kind).copied().unwrap_or(0),
            0,
            "{kind}: audit {counts:?}"
        );
    }
    // Not idempotent: strict fails a cut call with the reason instead of repeating it.
    let append = run(config(port, EraChoice::Modern, Policy::Strict, "append", 6)).await;
    let refused = append.errors.get("not-idempotent").copied().unwrap_or(0);
    assert!(refused >= 1, "{:?}", append.errors);
    assert_eq!(append.counters.failed, refused);
    assert_eq!(append.counters.ok + append.counters.failed, 6);
    assert_eq!(append.counters.reissued, 0);
    stop.cancel();
    let (port, _auditor, stop) = cutting_proxy(server.port).await;
    let naive = run(config(port, EraChoice::Modern, Policy::Naive, "work", 6)).await;
    assert!(
        naive.counters.silent_loss >= 1,
        "naive takes a cut stream as the answer"
    );
    assert_eq!(
        naive.counters.ok + naive.counters.silent_loss,
        6,
        "{:?}",
        naive.errors
    );
    assert_eq!(naive.counters.reissued, 0);
    stop.cancel();
}

/// Runs `calls` `work` calls padded to `pad` bytes in both eras through an observing proxy
/// without faults; returns the audit's finding counts and how many responses it recognised as
/// the answer to their request (`final-response`).
async fn answers_seen(server: &Server, pad: u64, calls: u64) -> (BTreeMap<String, u64>, u64) {
    let (port, auditor, stop) = audited_proxy(server.port, "").await;
    for era in [EraChoice::Legacy, EraChoice::Modern] {
        let mut cfg = config(port, era, Policy::Strict, "work", calls);
        cfg.args = serde_json::json!({"n": 1, "pad": pad});
        let o = run(cfg).await;
        assert_eq!(o.counters.ok, calls, "{era:?}, pad {pad}: {:?}", o.errors);
    }
    auditor.finish();
    stop.cancel();
    let answered = auditor
        .histograms()
        .get("final-response")
        .map_or(0, |h| h.len());
    (auditor.counts(), answered)
}

/// Results of 20 KB (longer than the observer keeps of an event's data) are recognised as
/// answers exactly as short ones are (the TS SDK writes the response's `id` after its
/// `result`): the same number of final responses, and no call judged pending or abandoned.
async fn long_results_are_recognised_as_answers(server: Server) {
    let (short_counts, short) = answers_seen(&server, 0, 3).await;
    let (long_counts, long) = answers_seen(&server, 20_000, 3).await;
    assert!(
        short >= 6,
        "short results: {short} answers, audit {short_counts:?}"
    );
    assert_eq!(
        long, short,
        "answers recognised, long vs short; audit {long_counts:?}"
    );
    for kind in [
        "pending-call",
        "abandoned",
        "unproven-resend",
        "explicit-loss",
    ] {
        assert_eq!(
            long_counts.get(kind).copied().unwrap_or(0),
            0,
            "{kind}: {long_counts:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_results_from_the_ts_sdk_server_are_recognised_as_answers() {
    long_results_are_recognised_as_answers(ts_server().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_results_from_the_python_sdk_server_are_recognised_as_answers() {
    long_results_are_recognised_as_answers(py_server().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_completes_against_the_ts_sdk_2_server_in_both_eras() {
    both_eras_complete_directly(ts_server().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_completes_against_the_python_sdk_2_server_in_both_eras() {
    both_eras_complete_directly(py_server().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_cuts_the_ts_server_sees_reissues_from_strict_and_silent_loss_from_naive() {
    cut_2026_streams_are_reissued_by_strict_and_lost_by_naive(ts_server().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_cuts_the_python_server_sees_reissues_from_strict_and_silent_loss_from_naive() {
    cut_2026_streams_are_reissued_by_strict_and_lost_by_naive(py_server().await).await;
}
