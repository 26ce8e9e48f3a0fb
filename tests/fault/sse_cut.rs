//! `sse_cut` over real sockets: for each SSE position class, a client behind the proxy receives
//! exactly the bytes up to the first cut point of that class, then RST, FIN or a clean end of the
//! chunked body; the cut is recorded with that class.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tearline::fault::sse_cut::{SseCutConfig, factory};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::vocab::CutAction;
use tearline::wire::http1::observer_pair;
use tearline::wire::{Observation, ObservationSink, SseClass};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Default)]
struct Recorder(Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        if let Ok(mut v) = self.0.lock() {
            v.push(obs);
        }
    }
}

const REQUEST: &str = "POST /mcp HTTP/1.1\r\nHost: t\r\nContent-Length: 46\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\"}";

fn response() -> Vec<u8> {
    let payload = "\u{feff}id: p0\ndata:\n\n: keepalive\nevent: m\nid: e1\ndata: {\"a\":\"\u{e9}\"}\r\ndata: x\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n: bye\n\n";
    let mut body = String::new();
    for part in payload.split_inclusive("\n\n") {
        body.push_str(&format!("{:x};e=1\r\n{part}\r\n", part.len()));
    }
    format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{body}0\r\n\r\n")
        .into_bytes()
}

/// The raw offset of the first cut point of `class` (from a whole-response observation).
fn first_point(class: SseClass) -> usize {
    let (mut u, mut d) = observer_pair(0, Arc::new(Recorder::default()));
    u.observe(REQUEST.as_bytes());
    let resp = response();
    let pos = d.observe(&resp).cloned().unwrap_or_default();
    pos.runs
        .iter()
        .find(|r| r.class == class)
        .map(|r| r.start)
        .unwrap_or_else(|| panic!("{class} not in the response"))
}

/// What the client saw: the bytes, and how the connection ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Fin,
    Reset,
}

async fn one_cut(class: SseClass, action: &str) -> (Vec<u8>, End, Vec<Observation>) {
    let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = server.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = server.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; REQUEST.len()];
                if s.read_exact(&mut buf).await.is_ok() {
                    let resp = response();
                    // Several writes, so the proxy reads the response in several chunks.
                    for part in resp.chunks(29) {
                        if s.write_all(part).await.is_err() {
                            return;
                        }
                        tokio::task::yield_now().await;
                    }
                    let mut rest = Vec::new();
                    let _ = s.read_to_end(&mut rest).await;
                }
            });
        }
    });
    let cfg: SseCutConfig =
        toml::from_str(&format!("at = \"{class}\"\naction = \"{action}\"")).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let proxy = Proxy::with_faults(
        ProxyConfig::new("t", upstream.to_string()),
        vec![factory(cfg)],
    );
    let rec = Arc::new(Recorder::default());
    let sink: Arc<dyn ObservationSink> = rec.clone();
    let s2 = sink.clone();
    proxy.set_observer_factory(Arc::new(move |conn| observer_pair(conn, s2.clone())));
    proxy.set_sink(Some(sink));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(REQUEST.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        match c.read(&mut buf).await {
            Ok(0) => break End::Fin,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => break End::Reset,
        }
    };
    shutdown.cancel();
    let _ = task.await;
    let obs = rec.0.lock().map(|v| v.clone()).unwrap_or_default();
    (got, end, obs)
}

fn recorded_cut(obs: &[Observation]) -> (Option<SseClass>, u64, CutAction) {
    obs.iter()
        .find_map(|o| match o {
            Observation::Cut { point, action, .. } => {
                Some((point.class, point.raw_offset, *action))
            }
            _ => None,
        })
        .expect("a cut was recorded")
}

/// Every class the wire produces on a fresh stream (`during-replay` needs a resume request:
/// tests/delivery_replay.rs).
fn classes() -> impl Iterator<Item = SseClass> {
    SseClass::ALL
        .into_iter()
        .filter(|c| *c != SseClass::DuringReplay)
}

#[tokio::test]
async fn reset_delivers_exactly_the_bytes_before_each_class() {
    tokio::time::timeout(Duration::from_secs(30), async {
        let resp = response();
        for class in classes() {
            let k = first_point(class);
            let (got, end, obs) = one_cut(class, "reset").await;
            assert_eq!(end, End::Reset, "{class}");
            assert_eq!(got, &resp[..k], "{class}: bytes up to the cut point");
            assert_eq!(
                recorded_cut(&obs),
                (Some(class), k as u64, CutAction::Reset)
            );
        }
    })
    .await
    .expect("no hang");
}

#[tokio::test]
async fn fin_delivers_the_bytes_then_an_orderly_close() {
    tokio::time::timeout(Duration::from_secs(30), async {
        let resp = response();
        for class in [
            SseClass::MidValue,
            SseClass::AfterId,
            SseClass::DispatchCrLf,
        ] {
            let k = first_point(class);
            let (got, end, obs) = one_cut(class, "fin").await;
            assert_eq!((got.as_slice(), end), (&resp[..k], End::Fin), "{class}");
            assert_eq!(recorded_cut(&obs), (Some(class), k as u64, CutAction::Fin));
        }
    })
    .await
    .expect("no hang");
}

#[tokio::test]
async fn clean_end_terminates_the_chunked_body() {
    tokio::time::timeout(Duration::from_secs(30), async {
        let resp = response();
        for class in [
            SseClass::Boundary,
            SseClass::MidValue,
            SseClass::BeforeDispatch,
        ] {
            let k = first_point(class);
            let (got, end, obs) = one_cut(class, "clean-end").await;
            assert_eq!(end, End::Fin, "{class}");
            assert_eq!(&got[..k], &resp[..k], "{class}");
            let tail = &got[k..];
            assert!(
                tail.ends_with(b"0\r\n\r\n"),
                "{class}: {:?}",
                String::from_utf8_lossy(tail)
            );
            assert!(
                tail[..tail.len() - 5]
                    .iter()
                    .all(|b| matches!(b, b' ' | b':' | b'\r' | b'\n')),
                "{class}: only inert filler (spaces, or a comment line at a line start) and the chunk CRLF before the terminator"
            );
            assert_eq!(
                recorded_cut(&obs),
                (Some(class), k as u64, CutAction::CleanEnd)
            );
        }
    })
    .await
    .expect("no hang");
}
