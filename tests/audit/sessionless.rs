//! Session-less truth (issue 24 item 3), over real sockets: the lab's plain feed is a broadcast
//! (every subscriber gets the same ids and data), cut by the proxy, resumed by real clients —
//! the published `eventsource` package (WHATWG EventSource for Node, pinned in tests/peers) and
//! tearline's own EventSource-like client — and by a raw client that stops reading before a
//! reset. A correct server and correct clients: the audit may report only `torn-cut` and
//! `replay-exact` (never `cross-stream`, `cursor-behind` or `fresh-stream`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tearline::accuracy::run::OnConnections;
use tearline::audit::{AuditConfig, Auditor, FindingKind as K};
use tearline::fault::FaultFactory;
use tearline::fault::sse_cut::{self, CutTarget, SseCutConfig};
use tearline::lab::bugs::IdStyle;
use tearline::lab::{self, LabConfig};
use tearline::load::Target;
use tearline::load::eventsource::{EventSourceConfig, run as run_eventsource};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::vocab::CutAction;
use tearline::wire::{ObservationSink, SseClass, http1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const FEED: &str = "/events";

/// The lab (plain feed) behind a proxy whose first `cut_conns` connections are cut inside
/// events `events` of the feed.
struct Bench {
    proxy_addr: SocketAddr,
    proxy: Arc<Proxy>,
    auditor: Arc<Auditor>,
    token: CancellationToken,
}

async fn start(
    ids: IdStyle,
    priming: bool,
    action: CutAction,
    class: SseClass,
    events: (u64, u64),
    cut_conns: u64,
) -> Bench {
    let token = CancellationToken::new();
    let lab_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind lab");
    let lab_addr = lab_listener.local_addr().expect("lab addr");
    let cfg = LabConfig {
        ids,
        plain_path: Some(FEED.to_owned()),
        plain_priming: priming,
        ..LabConfig::default()
    };
    tokio::spawn(lab::serve(lab_listener, cfg, token.clone()));
    let cut: Arc<dyn FaultFactory> = sse_cut::factory(SseCutConfig {
        at: CutTarget::Classes(vec![(class, 1.0)]),
        // First legs only: the resumes are what the audit judges.
        leg: sse_cut::Leg::First,
        range: (0, 0),
        events: Some(events),
        nth: None,
        method: Some("GET".to_owned()),
        path: None,
        action,
        stall: None,
        outage: None,
        probability: 1.0,
    });
    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    let proxy = Proxy::with_faults(
        ProxyConfig::new("sessionless", lab_addr.to_string()),
        vec![OnConnections::new(cut, (0..cut_conns).collect())],
    );
    let sink: Arc<dyn ObservationSink> = auditor.clone();
    let obs = sink.clone();
    proxy.set_observer_factory(Arc::new(move |conn| {
        http1::observer_pair(conn, obs.clone())
    }));
    proxy.set_sink(Some(sink));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let proxy_addr = listener.local_addr().expect("proxy addr");
    tokio::spawn(proxy::run(listener, Arc::clone(&proxy), token.clone()));
    Bench {
        proxy_addr,
        proxy,
        auditor,
        token,
    }
}

impl Bench {
    fn target(&self) -> Target {
        Target {
            host: self.proxy_addr.ip().to_string(),
            port: self.proxy_addr.port(),
            path: FEED.to_owned(),
            tls: None,
            h2: None,
        }
    }

    /// Waits (bounded) until every client connection closed, stops, finishes the audit and
    /// returns the finding counts.
    async fn verdict(self) -> BTreeMap<K, usize> {
        for _ in 0..500 {
            if self.proxy.stats().snapshot().connections_open == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.token.cancel();
        self.auditor.finish();
        let mut out = BTreeMap::new();
        for f in self.auditor.findings() {
            *out.entry(f.kind).or_insert(0) += 1;
        }
        out
    }
}

/// Only `torn-cut` and `replay-exact`, and one `replay-exact` per resume.
fn assert_only_exact(counts: &BTreeMap<K, usize>, resumes: usize, what: &str) {
    let wrong: Vec<&K> = counts
        .keys()
        .filter(|k| !matches!(k, K::TornCut | K::ReplayExact))
        .collect();
    assert!(wrong.is_empty(), "{what}: {counts:?}");
    assert_eq!(
        counts.get(&K::ReplayExact).copied().unwrap_or(0),
        resumes,
        "{what}: {counts:?}"
    );
}

/// Runs `n` npm `eventsource` clients on the feed; returns their JSON reports.
async fn npm_clients(url: &str, n: usize) -> Vec<serde_json::Value> {
    let out = tokio::process::Command::from(crate::common::peers::node())
        .arg(crate::common::peers::dir().join("js/eventsource_clients.mjs"))
        .arg(url)
        .arg(n.to_string())
        .arg("20000")
        .output()
        .await
        .expect("run node");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "eventsource clients did not finish: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .map(|l| serde_json::from_str(l).expect("one JSON report a line"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_feed_clients_of_npm_eventsource_cut_and_resumed_yield_only_torn_cut_and_replay_exact()
 {
    let n = 3;
    let b = start(
        IdStyle::Counter,
        false,
        CutAction::Reset,
        SseClass::MidValue,
        (4, 9),
        n,
    )
    .await;
    let url = format!("http://{}{FEED}", b.proxy_addr);
    let reports = npm_clients(&url, n as usize).await;
    for r in &reports {
        assert_eq!(r["complete"], true, "{r}");
        assert_eq!(
            r["ids"].as_array().map(Vec::len),
            Some(16),
            "each event once: {r}"
        );
    }
    let counts = b.verdict().await;
    assert_only_exact(&counts, n as usize, "npm eventsource, broadcast");
    assert_eq!(counts.get(&K::TornCut), Some(&(n as usize)), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_feed_clients_of_tearlines_eventsource_cut_and_resumed_yield_only_torn_cut_and_replay_exact()
 {
    for (ids, action) in [
        (IdStyle::Counter, CutAction::Reset),
        (IdStyle::Opaque, CutAction::Reset),
        (IdStyle::Counter, CutAction::Fin),
        (IdStyle::Opaque, CutAction::CleanEnd),
    ] {
        let n = 3u64;
        let b = start(ids, false, action, SseClass::MidValue, (3, 10), n).await;
        let clients: Vec<_> = (0..n)
            .map(|_| {
                let cfg = EventSourceConfig {
                    url: b.target(),
                    side_path: Some("/favicon.ico".to_owned()),
                    max_connections: 4,
                    timeout: Duration::from_secs(10),
                    backoff: Duration::from_millis(10),
                    truth: None,
                };
                tokio::spawn(async move { run_eventsource(&cfg).await })
            })
            .collect();
        for c in clients {
            let outcome = c.await.expect("client task");
            assert!(outcome.complete, "{outcome:?}");
            assert_eq!(outcome.events, 16, "{outcome:?}");
        }
        let counts = b.verdict().await;
        // A client may reconnect before another's first request reaches the proxy, so not
        // every client's first connection is among the cut ones: one resume per cut.
        let cuts = counts.get(&K::TornCut).copied().unwrap_or(0);
        assert!(cuts >= 1, "{ids:?} {action:?}: {counts:?}");
        assert_only_exact(&counts, cuts, &format!("{ids:?} {action:?}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_starting_with_a_priming_event_repeating_the_cursor_is_no_fresh_stream() {
    // npm eventsource: the priming event is dispatched with empty data and ignored.
    let b = start(
        IdStyle::Counter,
        true,
        CutAction::Reset,
        SseClass::Boundary,
        (5, 8),
        1,
    )
    .await;
    let url = format!("http://{}{FEED}", b.proxy_addr);
    let reports = npm_clients(&url, 1).await;
    assert_eq!(reports[0]["complete"], true, "{}", reports[0]);
    assert_eq!(reports[0]["empty"], 1, "one priming event: {}", reports[0]);
    let counts = b.verdict().await;
    assert_only_exact(&counts, 1, "npm eventsource, priming repeats the cursor");
    // tearline's client, opaque ids.
    let b = start(
        IdStyle::Opaque,
        true,
        CutAction::Fin,
        SseClass::MidValue,
        (5, 8),
        1,
    )
    .await;
    let cfg = EventSourceConfig {
        url: b.target(),
        side_path: None,
        max_connections: 4,
        timeout: Duration::from_secs(10),
        backoff: Duration::from_millis(10),
        truth: None,
    };
    let outcome = run_eventsource(&cfg).await;
    assert!(outcome.complete, "{outcome:?}");
    let counts = b.verdict().await;
    assert_only_exact(
        &counts,
        1,
        "tearline eventsource, priming repeats the cursor",
    );
}

/// Reads one byte at a time until the event whose data holds `"tick":k` was read whole.
async fn read_through_tick(s: &mut TcpStream, k: u64) -> Vec<u8> {
    let needle = format!("\"tick\":{k},");
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    let mut seen_at = None;
    while got.len() < 1 << 16 {
        match s.read(&mut byte).await {
            Ok(1) => got.push(byte[0]),
            _ => break,
        }
        if seen_at.is_none() && got.ends_with(needle.as_bytes()) {
            seen_at = Some(got.len());
        }
        if seen_at.is_some_and(|at| got.len() > at && got.ends_with(b"\n\n")) {
            break;
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_that_stopped_reading_before_a_reset_and_resumes_from_what_it_read_is_exact() {
    let b = start(
        IdStyle::Counter,
        false,
        CutAction::Reset,
        SseClass::MidValue,
        (10, 11),
        1,
    )
    .await;
    let mut s = TcpStream::connect(b.proxy_addr).await.expect("connect");
    s.write_all(
        format!("GET {FEED} HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n").as_bytes(),
    )
    .await
    .expect("request");
    let read = read_through_tick(&mut s, 3).await;
    assert!(String::from_utf8_lossy(&read).contains("id: 3"));
    // The client stops reading; the proxy delivers events 4..9 into its kernel buffer and then
    // resets inside event 10. Wait (bounded) until the proxy has cut the connection.
    for _ in 0..500 {
        if b.proxy.stats().snapshot().connections_open == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        b.proxy.stats().snapshot().connections_open,
        0,
        "the cut happened"
    );
    drop(s);
    // It resumes from the last event it read.
    let mut s = TcpStream::connect(b.proxy_addr).await.expect("connect");
    s.write_all(
        format!("GET {FEED} HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\nLast-Event-ID: 3\r\n\r\n")
            .as_bytes(),
    )
    .await
    .expect("resume");
    let rest = read_through_tick(&mut s, 15).await;
    assert!(String::from_utf8_lossy(&rest).contains("\"last\":true"));
    drop(s);
    let counts = b.verdict().await;
    assert_only_exact(&counts, 1, "stopped reading before a reset");
    assert_eq!(counts.get(&K::TornCut), Some(&1), "{counts:?}");
}
