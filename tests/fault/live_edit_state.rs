//! Fault state across live edits, over real sockets and the real control API: an edit keeps the
//! state of the faults it does not change (a `timeout` still closes at its time, a `limit_data`
//! at its byte), a changed fault keeps the connection's probability draw, and an edited
//! `sse_cut` never re-aims the stream in progress.

use std::time::Duration;

use crate::common::control::live::{create, start_live};
use crate::common::control::{call, echo_server};
use http::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, timeout};

const LIMIT: Duration = Duration::from_secs(30);

fn toxic(name: &str, type_: &str, stream: &str, toxicity: f64, attributes: Value) -> Value {
    json!({"name": name, "type": type_, "stream": stream, "toxicity": toxicity,
           "attributes": attributes})
}

async fn add(api: std::net::SocketAddr, proxy: &str, t: Value) {
    let r = call(
        api,
        Method::POST,
        &format!("/proxies/{proxy}/toxics"),
        Some(t),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

async fn update(api: std::net::SocketAddr, proxy: &str, name: &str, t: Value) {
    let path = format!("/proxies/{proxy}/toxics/{name}");
    let r = call(api, Method::POST, &path, Some(t)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_still_closes_at_its_time_after_an_unrelated_toxic_is_added_mid_stream() {
    timeout(LIMIT, async {
        let live = start_live().await;
        let listen = create(live.addr, "t", echo_server().await).await;
        let t = toxic(
            "blackhole",
            "timeout",
            "downstream",
            1.0,
            json!({"timeout": 1200}),
        );
        add(live.addr, "t", t).await;
        let opened = Instant::now();
        let mut c = TcpStream::connect(&listen).await.expect("connect");
        c.write_all(b"first").await.expect("write");
        tokio::time::sleep(Duration::from_millis(600)).await;
        let lat = toxic("lat", "latency", "upstream", 1.0, json!({"latency": 1}));
        add(live.addr, "t", lat).await;
        // Data after the edit: the pumps see the new chain on their next chunk.
        c.write_all(b"second").await.expect("write");
        let mut buf = [0u8; 64];
        let n = c.read(&mut buf).await.expect("read to the close");
        let closed = opened.elapsed();
        assert_eq!(n, 0, "the blackhole delivered nothing, then FIN");
        // Never before its time; that it is not restarted by the edit (which would close at
        // ~1800 ms) is checked on paused time in `proxy::chain`'s tests, not by a wall clock.
        assert!(
            closed >= Duration::from_millis(1150),
            "closed after {closed:?}, before the timeout's 1200 ms"
        );
        live.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

/// A connection relayed zero-copy and idle when a `timeout` is added: the edit wakes it, so it
/// closes at the timeout's time without waiting for a byte (before, it never closed, and the
/// first byte after a later edit restarted the timeout from there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_added_live_to_an_idle_connection_closes_it_without_another_byte() {
    timeout(LIMIT, async {
        let live = start_live().await;
        let listen = create(live.addr, "t", echo_server().await).await;
        let mut c = TcpStream::connect(&listen).await.expect("connect");
        c.write_all(b"ping").await.expect("write");
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).await.expect("echo before the edit");
        let t = toxic(
            "blackhole",
            "timeout",
            "downstream",
            1.0,
            json!({"timeout": 300}),
        );
        let added = Instant::now();
        add(live.addr, "t", t).await;
        let lat = toxic("lat", "latency", "downstream", 1.0, json!({"latency": 1}));
        add(live.addr, "t", lat).await;
        let n = timeout(Duration::from_secs(10), c.read(&mut buf))
            .await
            .expect("the idle connection was never closed")
            .expect("FIN, not a reset");
        assert_eq!(n, 0);
        assert!(
            added.elapsed() >= Duration::from_millis(300),
            "closed early"
        );
        live.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

/// An upstream that writes `total` bytes in `step`-byte writes, one every 5 ms.
async fn paced_server(total: usize, step: usize) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind server");
    let addr = l.local_addr().expect("server addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let block = vec![b'x'; step];
                let mut sent = 0;
                while sent < total {
                    if s.write_all(&block).await.is_err() {
                        return;
                    }
                    sent += step;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_data_still_closes_at_its_byte_after_an_unrelated_toxic_is_added_mid_stream() {
    timeout(LIMIT, async {
        let live = start_live().await;
        let listen = create(live.addr, "l", paced_server(1 << 20, 1000).await).await;
        let t = toxic(
            "cap",
            "limit_data",
            "downstream",
            1.0,
            json!({"bytes": 150_000}),
        );
        add(live.addr, "l", t).await;
        let mut c = TcpStream::connect(&listen).await.expect("connect");
        let mut got = 0usize;
        let mut edited = false;
        let mut buf = vec![0u8; 16 << 10];
        loop {
            let n = c.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            got += n;
            if !edited && got >= 40_000 {
                let lat = toxic("lat", "latency", "downstream", 1.0, json!({"latency": 2}));
                add(live.addr, "l", lat).await;
                let bw = toxic("bw", "bandwidth", "upstream", 1.0, json!({"rate": 1000}));
                add(live.addr, "l", bw).await;
                edited = true;
            }
        }
        assert!(edited, "the edit happened mid-stream");
        assert_eq!(got, 150_000, "FIN after exactly the limit");
        live.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

/// Whether one echo round trip on `c` takes longer than `slow` (a latency toxic fired).
async fn is_slow(c: &mut TcpStream, slow: Duration) -> bool {
    let t = Instant::now();
    c.write_all(b"ping").await.expect("write ping");
    let mut buf = [0u8; 4];
    c.read_exact(&mut buf).await.expect("read pong");
    t.elapsed() >= slow
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connections_probability_draw_is_not_rolled_again_by_edits() {
    timeout(LIMIT, async {
        const CONNS: usize = 24;
        let live = start_live().await;
        let listen = create(live.addr, "p", echo_server().await).await;
        let lat =
            |ms: u64, p: f64| toxic("lat", "latency", "downstream", p, json!({"latency": ms}));
        add(live.addr, "p", lat(300, 0.5)).await;
        let mut conns = Vec::new();
        for _ in 0..CONNS {
            conns.push(TcpStream::connect(&listen).await.expect("connect"));
        }
        let slow = Duration::from_millis(250);
        let round = |mut conns: Vec<TcpStream>| async move {
            let tasks: Vec<_> = conns
                .drain(..)
                .map(|mut c| {
                    tokio::spawn(async move {
                        let s = is_slow(&mut c, slow).await;
                        (c, s)
                    })
                })
                .collect();
            let mut out = (Vec::new(), Vec::new());
            for t in tasks {
                let (c, s) = t.await.expect("round trip");
                out.0.push(c);
                out.1.push(s);
            }
            out
        };
        let (conns, first) = round(conns).await;
        let fired = first.iter().filter(|s| **s).count();
        assert!(
            fired > 0 && fired < CONNS,
            "toxicity 0.5 fires on some of {CONNS} connections, fired on {fired}"
        );
        // The toxic itself changes (a new latency), an unrelated toxic comes and goes.
        update(live.addr, "p", "lat", lat(320, 0.5)).await;
        add(
            live.addr,
            "p",
            toxic("other", "latency", "upstream", 1.0, json!({"latency": 1})),
        )
        .await;
        let (conns, second) = round(conns).await;
        assert_eq!(second, first, "same connections slowed after the edits");
        // Toxicity 1 fires everywhere; back at 0.5, the first draws decide again.
        update(live.addr, "p", "lat", lat(300, 1.0)).await;
        let (conns, all) = round(conns).await;
        assert!(
            all.iter().all(|s| *s),
            "toxicity 1 fires on every connection"
        );
        update(live.addr, "p", "lat", lat(300, 0.5)).await;
        let (_conns, back) = round(conns).await;
        assert_eq!(back, first, "the draws were kept, not rolled again");
        live.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

const REQUEST: &str = "POST /mcp HTTP/1.1\r\nHost: t\r\nContent-Length: 46\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\"}";
const EVENTS: usize = 20;

/// An SSE upstream: each request gets EVENTS events, one chunk each, 15 ms apart, then the
/// end of the chunked body; the connection stays open for the next request.
async fn sse_server() -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind sse server");
    let addr = l.local_addr().expect("sse server addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut req = vec![0u8; REQUEST.len()];
                while s.read_exact(&mut req).await.is_ok() {
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
                    if s.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    for i in 0..EVENTS {
                        let event = format!("data: {i}\n\n");
                        let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                        if s.write_all(chunk.as_bytes()).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(15)).await;
                    }
                    if s.write_all(b"0\r\n\r\n").await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

struct Discard;

impl tearline::wire::ObservationSink for Discard {
    fn record(&self, _obs: tearline::wire::Observation) {}
}

fn sse_cut(events: &str) -> std::sync::Arc<dyn tearline::fault::FaultFactory> {
    let cfg: tearline::fault::sse_cut::SseCutConfig = toml::from_str(&format!(
        "at = \"any-byte\"\nrange = [0, 0]\nevents = {events}"
    ))
    .expect("sse_cut config");
    tearline::fault::named("cut", tearline::fault::sse_cut::factory(cfg))
}

/// Reads one response's body (until the chunked terminator); `None` when the connection
/// ended first. Calls `on_event` with the number of events read so far.
async fn read_stream(c: &mut TcpStream, mut on_event: impl FnMut(usize)) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut seen = 0;
    loop {
        match c.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        let events = got.windows(6).filter(|w| w == b"data: ").count();
        if events > seen {
            seen = events;
            on_event(seen);
        }
        if got.ends_with(b"0\r\n\r\n") {
            return Some(got);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_sse_cut_never_re_aims_the_stream_in_progress_and_applies_from_the_next() {
    use std::sync::Arc;
    use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
    timeout(LIMIT, async {
        let upstream = sse_server().await;
        // Aimed at event 1000 of each stream: never reached.
        let proxy = Proxy::with_faults(
            ProxyConfig::new("sse", upstream.to_string()),
            vec![sse_cut("[1000, 1000]")],
        );
        let sink: Arc<dyn tearline::wire::ObservationSink> = Arc::new(Discard);
        proxy.set_observer_factory(Arc::new(move |conn| {
            tearline::wire::http1::observer_pair(conn, sink.clone())
        }));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let shutdown = CancellationToken::new();
        tokio::spawn(proxy::run(listener, Arc::clone(&proxy), shutdown.clone()));

        let mut c = TcpStream::connect(addr).await.expect("connect");
        c.write_all(REQUEST.as_bytes()).await.expect("request 1");
        let mut edited = false;
        let first = read_stream(&mut c, |events| {
            if events >= 2 && !edited {
                // Mid-stream (before event 5): now aimed at event 5, plus an unrelated fault.
                let latency = tearline::fault::latency::LatencyConfig {
                    latency: Duration::from_millis(1),
                    jitter: Duration::ZERO,
                };
                let lat = tearline::fault::named(
                    "lat",
                    tearline::fault::common::Factory::shared(Default::default(), latency),
                );
                proxy.set_faults(vec![sse_cut("[5, 5]"), lat]);
                edited = true;
            }
        })
        .await;
        assert!(edited, "the edit happened mid-stream");
        let first = first.expect("the stream in progress is not cut by the edit");
        let events = first.windows(6).filter(|w| w == b"data: ").count();
        assert_eq!(events, EVENTS);
        // The next stream on the connection gets the edited aim: cut before event 5.
        c.write_all(REQUEST.as_bytes()).await.expect("request 2");
        let mut last = 0;
        let second = read_stream(&mut c, |events| last = events).await;
        assert!(second.is_none(), "the next stream is cut");
        assert_eq!(last, 5, "cut before event 5");
        shutdown.cancel();
    })
    .await
    .expect("test timed out");
}
