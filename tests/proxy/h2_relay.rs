//! The HTTP/2 stream relay between real peers: hyper's http2 server and client (h2c, prior
//! knowledge) through the proxy, two SSE streams multiplexed on one connection.
//!
//! The stream is reset by a test h2 fault (`RST_STREAM(CANCEL)` to the client after the
//! stream's first `DATA`), which exercises what every stream-scope fault relies on: the client
//! sees the reset on that stream only, the server's later `DATA` on it is dropped and credited
//! back (the connection window is small, so a missing credit stalls the sibling stream), the
//! sibling stays byte-exact, and the connection takes new requests.

use std::collections::HashMap;
use std::convert::Infallible;
use std::error::Error as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tearline::fault::h2::{FrameView, H2Actions, H2Fault, H2FaultFactory, Inject, StreamFacts};
use tearline::fault::{ConnRng, Fault, FaultFactory};
use tearline::vocab::{Direction, WireProtocol};
use tearline::wire::h2::{ErrorCode, FrameType};
use tearline::wire::{Observation, ObservationSink};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};

use crate::common::proxy::start_proxy;

type Chunks = mpsc::Sender<Result<Frame<Bytes>, Infallible>>;

/// An h2c server whose response bodies the test writes: one channel per path, handed over
/// when the request arrives.
async fn h2_server() -> (SocketAddr, mpsc::Receiver<(String, Chunks)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                    let tx = tx.clone();
                    async move {
                        let (body_tx, body_rx) = mpsc::channel(64);
                        let _ = tx.send((req.uri().path().to_owned(), body_tx)).await;
                        let stream = futures_util::stream::unfold(body_rx, |mut rx| async move {
                            rx.recv().await.map(|c| (c, rx))
                        });
                        let resp = hyper::Response::builder()
                            .header("content-type", "text/event-stream")
                            .body(StreamBody::new(stream))
                            .unwrap();
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    (addr, rx)
}

/// Resets stream 1 towards the client right after its first `DATA` frame (the server is not
/// told, so it keeps sending on it).
struct ResetFirst;

impl H2Fault for ResetFirst {
    fn kind(&self) -> &'static str {
        "test-reset-first"
    }

    fn on_frame(
        &mut self,
        frame: &FrameView<'_>,
        facts: &StreamFacts<'_>,
        _now: Instant,
        _rng: &mut ConnRng,
        actions: &mut H2Actions,
    ) {
        let h = frame.header;
        if frame.direction == Direction::Downstream
            && h.kind == FrameType::Data
            && h.stream == 1
            && !facts.response_data_seen
        {
            actions.inject.push(Inject::RstStream {
                to: Direction::Downstream,
                stream: 1,
                code: ErrorCode::CANCEL,
            });
        }
    }
}

struct ResetFirstFactory;

impl H2FaultFactory for ResetFirstFactory {
    fn instantiate_h2(&self, _rng: &mut ConnRng, _now: Instant) -> Option<Box<dyn H2Fault>> {
        Some(Box::new(ResetFirst))
    }
}

impl FaultFactory for ResetFirstFactory {
    fn kind(&self) -> &'static str {
        "test-reset-first"
    }

    fn direction(&self) -> Direction {
        Direction::Downstream
    }

    fn instantiate(&self, _rng: &mut ConnRng, _now: Instant) -> Option<Box<dyn Fault>> {
        None
    }

    fn h2(&self) -> Option<&dyn H2FaultFactory> {
        Some(self)
    }
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        self.0.lock().unwrap().push(obs);
    }
}

fn event(i: usize) -> Bytes {
    let pad = "p".repeat(80);
    Bytes::from(format!(
        "id: {i}\ndata: {{\"n\":{i},\"pad\":\"{pad}\"}}\n\n"
    ))
}

async fn send(tx: &Chunks, b: Bytes) {
    tx.send(Ok(Frame::data(b))).await.unwrap();
}

/// Reads `n` bytes of body (or fails after the deadline).
async fn read_n(body: &mut hyper::body::Incoming, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < n {
        let f = body
            .frame()
            .await
            .expect("body ended early")
            .expect("body error");
        if let Ok(d) = f.into_data() {
            got.extend_from_slice(&d);
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_stream_leaves_its_sibling_flowing_byte_exact_and_the_connection_usable() {
    timeout(Duration::from_secs(60), async {
        let (server, mut requests) = h2_server().await;
        let p = start_proxy(server, |_| {}).await;
        let rec = Arc::new(Recorder::default());
        p.proxy.observe_http(rec.clone());
        p.proxy.set_faults(vec![Arc::new(ResetFirstFactory)]);

        let tcp = TcpStream::connect(p.addr).await.unwrap();
        let (mut send_req, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(65_535)
            .adaptive_window(false)
            .handshake::<_, Empty<Bytes>>(TokioIo::new(tcp))
            .await
            .unwrap();
        tokio::spawn(conn);
        let get = |path: &str| {
            hyper::Request::get(format!("http://test{path}"))
                .body(Empty::<Bytes>::new())
                .unwrap()
        };
        let mut bodies: HashMap<String, Chunks> = HashMap::new();
        let resp_a = send_req.send_request(get("/a"));
        let resp_b = {
            let mut s = send_req.clone();
            s.send_request(get("/b"))
        };
        for _ in 0..2 {
            let (path, tx) = requests.recv().await.unwrap();
            bodies.insert(path, tx);
        }
        let (a, b) = (bodies["/a"].clone(), bodies["/b"].clone());
        send(&a, event(0)).await;
        send(&b, event(0)).await;
        let mut a_body = resp_a.await.unwrap().into_body();
        let mut b_body = resp_b.await.unwrap().into_body();

        // Stream 1: its first event arrives, then the reset (CANCEL) on it alone.
        assert_eq!(read_n(&mut a_body, event(0).len()).await, event(0));
        let err = loop {
            match a_body.frame().await {
                Some(Err(e)) => break e,
                Some(Ok(_)) => continue,
                None => panic!("stream 1 ended cleanly; expected a reset"),
            }
        };
        let h2 = err
            .source()
            .and_then(|s| s.downcast_ref::<h2::Error>())
            .expect("an h2 error");
        assert_eq!(h2.reason(), Some(h2::Reason::CANCEL), "{err:?}");

        // The server, not told, fills stream 1's window (all dropped by the relay): without the
        // relay's credit the connection window (64 KiB) would be spent and stream 3 stall.
        let filler = Bytes::from(vec![b'x'; 1024]);
        for _ in 0..63 {
            send(&a, filler.clone()).await;
        }
        let mut sent_b = event(0).to_vec();
        let mut expected_len = event(0).len();
        let mut got_b = read_n(&mut b_body, expected_len).await;
        // Stream 3: 200 KiB of events after the reset, every byte as sent.
        for i in 1..=2000 {
            let e = event(i);
            sent_b.extend_from_slice(&e);
            expected_len += e.len();
            send(&b, e).await;
            if i % 100 == 0 {
                let more = read_n(&mut b_body, expected_len - got_b.len()).await;
                got_b.extend_from_slice(&more);
            }
        }
        assert!(got_b.len() > 64 * 1024);
        assert_eq!(got_b, sent_b, "stream 3 is byte-exact");

        // A new request on the same connection is answered.
        let resp_c = send_req.send_request(get("/c"));
        let (path, c) = requests.recv().await.unwrap();
        assert_eq!(path, "/c");
        send(&c, event(7)).await;
        drop(c);
        let body_c = resp_c.await.unwrap().into_body().collect().await.unwrap();
        assert_eq!(body_c.to_bytes(), event(7));

        let obs = rec.0.lock().unwrap().clone();
        assert!(obs.iter().any(|o| matches!(
            o,
            Observation::Protocol {
                protocol: WireProtocol::H2c,
                ..
            }
        )));
        let resets: Vec<_> = obs
            .iter()
            .filter_map(|o| match o {
                Observation::StreamReset {
                    seq,
                    direction,
                    code,
                    by_proxy,
                    ..
                } => Some((*seq, *direction, *code, *by_proxy)),
                _ => None,
            })
            .collect();
        assert_eq!(
            resets,
            vec![(1, Direction::Downstream, ErrorCode::CANCEL.0, true)]
        );

        // The connection ends with the client; the relay's gauges come back to zero.
        drop((send_req, a_body, b_body, bodies, a, b));
        let deadline = Instant::now() + Duration::from_secs(10);
        let stats = p.proxy.stats();
        while stats.connections_open() > 0 || stats.bytes_buffered() > 0 {
            assert!(Instant::now() < deadline, "the connection did not end");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(stats.snapshot().bytes_downstream > 200_000);
        p.shutdown.cancel();
    })
    .await
    .unwrap();
}
