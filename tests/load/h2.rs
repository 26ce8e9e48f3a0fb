//! The load client over HTTP/2 (`--http2`): many sessions multiplexed over a small pool of
//! h2c connections against the lab directly (every call answered, the client's record of
//! what it dispatched equal to the lab's record of what it sent) and through `tearline proxy`
//! relaying bytes; and, against a bare h2 server, END_STREAM read as a clean end and a stream
//! reset as a broken one that keeps its RST_STREAM code.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tearline::lab::truth::LabTruth;
use tearline::lab::{LabConfig, serve};
use tearline::load::era::EraChoice;
use tearline::load::http::{Conn, HttpError, Next, Request};
use tearline::load::truth::ClientTruth;
use tearline::load::{self, LoadConfig, LoadOutcome, Policy, Stop, Target};
use tearline::wire::h2::frame::ErrorCode;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

async fn lab(config: LabConfig, shutdown: &CancellationToken) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, config, shutdown.clone()));
    addr
}

/// A TCP relay to `upstream` that counts the connections it accepted.
async fn counting_relay(upstream: SocketAddr, count: Arc<AtomicUsize>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut down, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut up) = TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                }
            });
        }
    });
    addr
}

fn h2_target(addr: SocketAddr, connections: usize) -> Target {
    Target::parse(&format!("http://{addr}/mcp"))
        .unwrap()
        .with_http2(connections, &[])
        .unwrap()
}

async fn run(mut cfg: LoadConfig) -> LoadOutcome {
    cfg.era = EraChoice::Legacy;
    cfg.call_timeout = Duration::from_secs(10);
    tokio::time::timeout(
        Duration::from_secs(40),
        load::run(cfg, CancellationToken::new()),
    )
    .await
    .expect("run finishes")
    .expect("lab accepts sessions")
}

fn assert_all_ok(o: &LoadOutcome, calls: u64) {
    let c = o.counters;
    assert!(c.is_balanced());
    assert_eq!((c.calls, c.ok), (calls, calls), "{c:?} {:?}", o.errors);
    assert_eq!(
        (c.torn_cut, c.resumes, c.reissued, c.silent_loss),
        (0, 0, 0, 0)
    );
    assert!(o.errors.is_empty(), "{:?}", o.errors);
}

#[tokio::test]
async fn forty_sessions_share_two_h2_connections_every_call_is_answered_and_truth_matches_the_lab()
{
    let shutdown = CancellationToken::new();
    let lab_truth = Arc::new(LabTruth::default());
    let config = LabConfig {
        truth: Some(Arc::clone(&lab_truth)),
        ..LabConfig::default()
    };
    let lab = lab(config, &shutdown).await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let relay = counting_relay(lab, Arc::clone(&accepted)).await;

    let client_truth = Arc::new(ClientTruth::default());
    let mut cfg = LoadConfig::new(
        h2_target(relay, 2),
        "progress",
        serde_json::json!({"n": 5, "interval": 0}),
    );
    cfg.sessions = 40;
    cfg.stop = Stop::Calls(200);
    cfg.truth = Some(Arc::clone(&client_truth));
    let o = run(cfg).await;
    assert_all_ok(&o, 200);
    assert_eq!(o.counters.events, 200 * 7, "priming, 5 progress, result");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "40 sessions multiplexed over the pool's two connections"
    );

    // Every call's POST: what the client dispatched is, event for event, what the lab sent.
    let served: HashMap<(String, String), Vec<(String, u64)>> = lab_truth
        .legs()
        .into_iter()
        .filter(|l| l.method == "POST" && l.request_ids.len() == 1)
        .map(|l| {
            let events = l
                .emitted
                .iter()
                .map(|e| (e.id.clone().unwrap_or_default(), e.data_hash))
                .collect();
            ((l.session, l.request_ids[0].clone()), events)
        })
        .collect();
    let calls: Vec<_> = client_truth
        .legs()
        .into_iter()
        .filter(|l| l.method == "POST" && !l.dispatched.is_empty())
        .collect();
    assert_eq!(calls.len(), 200);
    for leg in calls {
        let key = (leg.session.clone(), leg.request_id.unwrap().to_string());
        let got: Vec<(String, u64)> = leg
            .dispatched
            .iter()
            .map(|d| (d.id.clone(), d.data_hash))
            .collect();
        assert_eq!(served.get(&key), Some(&got), "call {key:?}");
    }
    shutdown.cancel();
}

#[tokio::test]
async fn http2_load_through_the_proxy_relaying_bytes_is_clean_for_both_policies() {
    let shutdown = CancellationToken::new();
    let lab = lab(LabConfig::default(), &shutdown).await;
    let proxy = crate::common::proxy::start_proxy(lab, |_| {}).await;
    let target = h2_target(proxy.addr, 1);
    for policy in [Policy::Strict, Policy::Naive] {
        let mut cfg = LoadConfig::new(
            target.clone(),
            "blob",
            serde_json::json!({"size": 65536, "lines": 3}),
        );
        cfg.policy = policy;
        cfg.sessions = 8;
        cfg.stop = Stop::Calls(40);
        let o = run(cfg).await;
        assert_all_ok(&o, 40);
        assert_eq!(o.counters.events, 40 * 5, "{policy}");
    }
    proxy.shutdown.cancel();
    shutdown.cancel();
}

/// A bare h2 server answering one request with `first` as one DATA frame, then either
/// END_STREAM, or (`reset`) RST_STREAM with that code once `go` fires (after the client read
/// the DATA: a reset arriving with the head would end the request before its response).
async fn h2_server(
    first: &'static [u8],
    reset: Option<(h2::Reason, tokio::sync::oneshot::Receiver<()>)>,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut conn = h2::server::handshake(tcp).await.unwrap();
        let Some(Ok((_req, mut respond))) = conn.accept().await else {
            return;
        };
        // The connection is driven while the stream is answered.
        tokio::spawn(async move { while conn.accept().await.is_some() {} });
        let resp = http::Response::builder()
            .header("content-type", "text/event-stream")
            .body(())
            .unwrap();
        let mut send = respond.send_response(resp, false).unwrap();
        send.send_data(bytes::Bytes::from_static(first), reset.is_none())
            .unwrap();
        if let Some((code, go)) = reset {
            let _ = go.await;
            send.send_reset(code);
        }
    });
    addr
}

/// Reads one response of the server at `addr` to its stop; `after_first` runs once the first
/// body bytes are in hand.
async fn read_to_stop(
    addr: SocketAddr,
    after_first: impl FnOnce(),
) -> (Vec<u8>, Result<(), HttpError>) {
    let target = h2_target(addr, 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    let conn = Conn::connect(&target, Duration::from_secs(5))
        .await
        .unwrap();
    let req = Request {
        method: "GET",
        headers: &[("Accept", "text/event-stream")],
        body: b"",
    };
    let mut resp = conn.send(&target, &req, deadline).await.unwrap();
    assert_eq!(resp.status, 200);
    assert!(resp.is_event_stream());
    let mut got = Vec::new();
    let mut after_first = Some(after_first);
    loop {
        match resp.body.next(deadline).await {
            Ok(Next::Data(d)) => {
                got.extend_from_slice(d);
                if let Some(f) = after_first.take() {
                    f();
                }
            }
            Ok(Next::End) => return (got, Ok(())),
            Err(e) => return (got, Err(e)),
        }
    }
}

#[tokio::test]
async fn end_stream_is_a_clean_end_and_a_cancel_reset_is_a_cut_that_keeps_its_code() {
    let clean = h2_server(b"id: 1\ndata: a\n\n", None).await;
    let (got, end) = read_to_stop(clean, || {}).await;
    assert_eq!(got, b"id: 1\ndata: a\n\n");
    assert!(end.is_ok(), "{end:?}");

    let (go, wait) = tokio::sync::oneshot::channel();
    let cut = h2_server(
        b"id: 1\ndata: a\n\nid: 2\nda",
        Some((h2::Reason::CANCEL, wait)),
    )
    .await;
    let (got, end) = read_to_stop(cut, move || {
        let _ = go.send(());
    })
    .await;
    assert_eq!(got, b"id: 1\ndata: a\n\nid: 2\nda");
    let err = end.expect_err("a reset stream is not a clean end");
    assert!(
        matches!(err, HttpError::Reset { code } if code == ErrorCode::CANCEL),
        "{err:?}"
    );
    assert_eq!(err.kind(), "h2-reset-cancel");
}

#[tokio::test]
async fn http2_load_over_tls_negotiates_h2_by_alpn_and_answers_every_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let terminator = crate::common::tls::terminator(dir.path());
    let ca = terminator.ca_file().expect("local CA file").to_path_buf();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shutdown = CancellationToken::new();
    tokio::spawn(tearline::lab::serve_tls(
        listener,
        LabConfig::default(),
        Some(terminator),
        shutdown.clone(),
    ));
    let url = format!("https://localhost:{port}/mcp");
    let target = Target::parse_with_ca(&url, std::slice::from_ref(&ca))
        .unwrap()
        .with_http2(1, std::slice::from_ref(&ca))
        .unwrap();
    let mut cfg = LoadConfig::new(
        target,
        "blob",
        serde_json::json!({"size": 65536, "lines": 3}),
    );
    cfg.sessions = 4;
    cfg.stop = Stop::Calls(20);
    let o = run(cfg).await;
    assert_all_ok(&o, 20);
    shutdown.cancel();
}

#[tokio::test]
async fn an_https_server_that_does_not_pick_h2_is_named_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    let terminator = crate::common::tls::terminator(dir.path());
    let ca = terminator.ca_file().expect("local CA file").to_path_buf();
    // The test HTTPS server of tests/common/tls accepts ALPN http/1.1 only.
    let addr = crate::common::tls::tls_server(terminator).await;
    let url = format!("https://localhost:{}/mcp", addr.port());
    let target = Target::parse_with_ca(&url, std::slice::from_ref(&ca))
        .unwrap()
        .with_http2(1, std::slice::from_ref(&ca))
        .unwrap();
    let err = Conn::connect(&target, Duration::from_secs(5))
        .await
        .expect_err("no h2 without ALPN h2");
    assert!(
        err.to_string().contains("does not speak HTTP/2 over TLS"),
        "{err}"
    );
}
