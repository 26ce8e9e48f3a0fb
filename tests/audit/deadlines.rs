//! Deadlines fire on time (issue 34 item 6): a time-based verdict comes from the auditor's
//! own timer within a second of its deadline, with no observation and no query after the cut,
//! and never before it. `counts()` applies what was recorded but never sweeps, so only the
//! timer can have produced what it shows.

use std::time::Duration;

use crate::common::audit::{Eol, Wire, call_with_token, event, progress_of};
use tearline::audit::{AuditConfig, FindingKind as K};
use tearline::vocab::CutAction;

const S: Option<&str> = Some("s-1");
const ABANDON_AFTER: Duration = Duration::from_secs(5);

fn wire() -> Wire {
    Wire::with(AuditConfig {
        abandon_after: ABANDON_AFTER,
        ..AuditConfig::default()
    })
}

/// Lets the auditor's worker run (bounded: a few turns of the paused runtime).
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

fn abandoned_count(w: &Wire) -> u64 {
    w.auditor
        .counts()
        .get(K::Abandoned.as_str())
        .copied()
        .unwrap_or(0)
}

/// Call 7 is reset after its first event; nobody resumes or re-sends it.
fn cut_call(w: &mut Wire) {
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let body = event(Eol::Lf, Some("1"), None, &[&progress_of("t", 1)]);
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
}

#[tokio::test(start_paused = true)]
async fn abandoned_comes_from_the_timer_within_a_second_of_its_deadline_with_no_traffic() {
    let mut w = wire();
    cut_call(&mut w);
    settle().await;
    assert_eq!(abandoned_count(&w), 0, "not at the cut");
    tokio::time::advance(ABANDON_AFTER - Duration::from_millis(100)).await;
    settle().await;
    assert_eq!(abandoned_count(&w), 0, "not before abandon_after");
    // No observation and no sweeping query: only the timer can judge it.
    tokio::time::advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(abandoned_count(&w), 1, "within 1 s of the deadline");
    // Asked much later, the finding still says when it was judged: at its deadline.
    tokio::time::advance(Duration::from_secs(20)).await;
    let found = w.auditor.findings();
    let lost: Vec<_> = found.iter().filter(|f| f.kind == K::Abandoned).collect();
    assert_eq!(lost.len(), 1, "{found:#?}");
    let waited = lost[0].waited_ms.expect("waited_ms");
    assert!((5000..=6000).contains(&waited), "waited {waited} ms");
    assert!(
        (5000..=6000).contains(&lost[0].at_ms),
        "at {} ms",
        lost[0].at_ms
    );
    assert!(
        lost[0].detail.contains("abandon_after passed"),
        "{}",
        lost[0].detail
    );
}

#[tokio::test(start_paused = true)]
async fn an_answered_call_is_never_abandoned_however_long_the_auditor_idles() {
    let mut w = wire();
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let body = event(
        Eol::Lf,
        Some("1"),
        None,
        &[r#"{"jsonrpc":"2.0","id":7,"result":{}}"#],
    );
    w.stream_clean(1, 0, &body);
    tokio::time::advance(Duration::from_secs(120)).await;
    settle().await;
    assert_eq!(abandoned_count(&w), 0);
    assert!(!w.kinds().contains(&K::Abandoned));
}

#[tokio::test(start_paused = true)]
async fn a_deferred_pending_call_settles_on_the_timer_too() {
    let mut w = wire();
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    // The stream ends cleanly without the answer: `pending-call`, deferred for abandon_after.
    let body = event(Eol::Lf, Some("1"), None, &[&progress_of("t", 1)]);
    w.stream_clean(1, 0, &body);
    let pending = |w: &Wire| w.auditor.counts().get(K::PendingCall.as_str()).copied();
    tokio::time::advance(ABANDON_AFTER - Duration::from_millis(100)).await;
    settle().await;
    assert_eq!(pending(&w), None, "not before abandon_after");
    tokio::time::advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(pending(&w), Some(1), "within 1 s of the deadline");
}

/// A real proxy, idle after the cut: a 2026-07-28 call (nobody can resume it) is reset after
/// its first event; the test then only reads `counts()` (which never sweeps) until the timer's
/// `abandoned` appears, and measures when.
#[tokio::test]
async fn on_a_real_idle_proxy_abandoned_comes_within_a_second_of_its_deadline() {
    use crate::common::audit::e2e::{
        CutOnce, Script, Tap, call, client, ev, post, progress, server, within,
    };
    use std::sync::Arc;
    use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
    use tearline::wire::{ObservationSink, http1};
    use tokio::time::Instant;

    within(async {
        let abandon_after = Duration::from_secs(1);
        let first = Script::sse("")
            .chunk(&ev("\n", None, None, &[&progress(1)]))
            .chunk(&ev("\n", None, None, &[&progress(2)]))
            .end();
        let cut = first.offset_of("data: ", 1, 0) - 2 - 2;
        let upstream = server(vec![first]).await;
        let (tx, mut closed) = tokio::sync::watch::channel(0u64);
        let tap = Arc::new(Tap {
            auditor: tearline::audit::Auditor::new(AuditConfig {
                abandon_after,
                ..AuditConfig::default()
            }),
            closed: tx,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let proxy = Proxy::new(ProxyConfig::new("deadlines", upstream.to_string()));
        let sink: Arc<dyn ObservationSink> = tap.clone();
        proxy.set_sink(Some(sink.clone()));
        proxy.set_observer_factory(Arc::new(move |conn| {
            http1::observer_pair(conn, sink.clone())
        }));
        proxy.set_faults(vec![Arc::new(CutOnce::new(cut, CutAction::Reset))]);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));
        client(addr, post(None, Some("2026-07-28"), &call("7", "search"))).await;
        closed.wait_for(|n| *n >= 1).await.unwrap();
        let after_close = Instant::now();
        let count = || {
            tap.auditor
                .counts()
                .get(K::Abandoned.as_str())
                .copied()
                .unwrap_or(0)
        };
        // Bounded wait, reading without sweeping.
        let mut seen = None;
        for _ in 0..60 {
            if count() > 0 {
                seen = Some(after_close.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let seen = seen.expect("abandoned within 3 s of the cut with no traffic");
        assert!(
            seen >= abandon_after - Duration::from_millis(100),
            "before its deadline: {seen:?}"
        );
        assert!(
            seen <= abandon_after + Duration::from_secs(1),
            "late: {seen:?}"
        );
        shutdown.cancel();
        let _ = task.await;
    })
    .await
    .expect("timeout");
}
