//! End to end: a scripted raw-byte server and client over real loopback sockets, through the
//! proxy with the HTTP/1.1 wire observer and the auditor as its sink. Each scenario cuts the
//! first response at an exact byte offset and checks the findings are exactly the expected ones.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tearline::audit::{AuditConfig, Auditor, FindingKind as K};
use tearline::fault::{Chunk, ConnRng, Cut, CutAction, Fault, FaultFactory, Plan};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::{Direction, Observation, ObservationSink, http1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{Instant, timeout};

/// Forwards observations to the auditor and counts closed connections.
struct Tap {
    auditor: Auditor,
    closed: watch::Sender<u64>,
}

impl ObservationSink for Tap {
    fn record(&self, obs: Observation) {
        let closed = matches!(obs, Observation::ConnClosed { .. });
        self.auditor.record(obs);
        if closed {
            self.closed.send_modify(|n| *n += 1);
        }
    }
}

/// Cuts the first connection's downstream after exactly `at` bytes.
struct CutOnce {
    armed: AtomicBool,
    at: u64,
    action: CutAction,
}

struct CutFault {
    at: u64,
    action: CutAction,
    done: bool,
}

impl FaultFactory for CutOnce {
    fn kind(&self) -> &'static str {
        "cut-once"
    }
    fn direction(&self) -> Direction {
        Direction::Downstream
    }
    fn instantiate(&self, _rng: &mut ConnRng, _now: Instant) -> Option<Box<dyn Fault>> {
        self.armed.swap(false, Ordering::SeqCst).then(|| {
            Box::new(CutFault {
                at: self.at,
                action: self.action,
                done: false,
            }) as Box<dyn Fault>
        })
    }
}

impl Fault for CutFault {
    fn kind(&self) -> &'static str {
        "cut-once"
    }
    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, _rng: &mut ConnRng) {
        let (off, len) = (chunk.offset, chunk.bytes.len() as u64);
        if !self.done && self.at >= off && self.at <= off + len {
            self.done = true;
            plan.cut_at(Cut {
                at: (self.at - off) as usize,
                action: self.action,
                outage: None,
                by: "cut-once",
            });
        }
    }
}

/// The bytes a scripted server writes on one connection, in separate writes.
#[derive(Default, Clone)]
struct Script {
    writes: Vec<Vec<u8>>,
}

impl Script {
    fn sse(extra_headers: &str) -> Self {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n{extra_headers}\r\n"
        );
        Script {
            writes: vec![head.into_bytes()],
        }
    }

    fn raw(bytes: &str) -> Self {
        Script {
            writes: vec![bytes.as_bytes().to_vec()],
        }
    }

    /// One HTTP chunk carrying `text`.
    fn chunk(mut self, text: &str) -> Self {
        self.writes
            .push(format!("{:x}\r\n{text}\r\n", text.len()).into_bytes());
        self
    }

    /// The chunked body's end.
    fn end(mut self) -> Self {
        self.writes.push(b"0\r\n\r\n".to_vec());
        self
    }

    fn bytes(&self) -> Vec<u8> {
        self.writes.concat()
    }

    /// Offset of the `nth` (0-based) occurrence of `needle` in the script, plus `plus`.
    fn offset_of(&self, needle: &str, nth: usize, plus: u64) -> u64 {
        let all = self.bytes();
        let n = needle.as_bytes();
        let pos = all
            .windows(n.len())
            .enumerate()
            .filter(|(_, w)| *w == n)
            .nth(nth)
            .map(|(i, _)| i)
            .expect("needle in script");
        pos as u64 + plus
    }
}

/// A server that answers its `k`-th accepted connection with `scripts[k]` after reading one
/// request, then closes.
async fn server(scripts: Vec<Script>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind server");
    let addr = listener.local_addr().expect("server addr");
    tokio::spawn(async move {
        for script in scripts {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                read_request(&mut s).await;
                for w in &script.writes {
                    if s.write_all(w).await.is_err() {
                        return;
                    }
                    let _ = s.flush().await;
                    tokio::task::yield_now().await;
                }
                let _ = s.shutdown().await;
                let mut sink = [0u8; 1024];
                while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

/// Reads one request head and its `Content-Length` body.
async fn read_request(s: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return;
            }
        }
        match s.read(&mut tmp).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

/// Sends one request through the proxy, half-closes, and reads until EOF, reset or error.
///
/// The half-close makes the HTTP/1.1 observer release the request head at once (it releases
/// upstream observations on the next chunk or EOF); the auditor also copes without it (see
/// `audit::order`), but a cut connection's request would then be known only from the cut
/// record.
async fn client(proxy: SocketAddr, request: String) -> Vec<u8> {
    let mut s = TcpStream::connect(proxy).await.expect("connect proxy");
    s.write_all(request.as_bytes())
        .await
        .expect("write request");
    let _ = s.shutdown().await;
    let mut out = Vec::new();
    let mut tmp = [0u8; 4096];
    while let Ok(n) = s.read(&mut tmp).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&tmp[..n]);
    }
    out
}

fn post(session: Option<&str>, version: Option<&str>, body: &str) -> String {
    let mut h = String::new();
    if let Some(s) = session {
        h += &format!("Mcp-Session-Id: {s}\r\n");
    }
    if let Some(v) = version {
        h += &format!("MCP-Protocol-Version: {v}\r\n");
    }
    format!(
        "POST /mcp HTTP/1.1\r\nHost: t\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\n{h}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn resume(session: &str, cursor: &str) -> String {
    format!(
        "GET /mcp HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\
         Last-Event-ID: {cursor}\r\n\r\n"
    )
}

fn ev(eol: &str, id: Option<&str>, kind: Option<&str>, data: &[&str]) -> String {
    let mut s = String::new();
    if let Some(k) = kind {
        s += &format!("event: {k}{eol}");
    }
    if let Some(i) = id {
        s += &format!("id: {i}{eol}");
    }
    for d in data {
        s += &format!("data: {d}{eol}");
    }
    s + eol
}

fn progress(n: u64) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progress":{n}}}}}"#)
}

fn result(id: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#)
}

fn call(id: &str, tool: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}"}}}}"#)
}

/// Runs `requests` one after the other through a proxy that cuts the first response after
/// `cut` bytes, against a server answering with `scripts`; returns the findings' kinds after
/// every connection closed and the auditor finished.
async fn run(
    scripts: Vec<Script>,
    cut: u64,
    action: CutAction,
    requests: Vec<String>,
) -> (Vec<K>, Arc<Tap>) {
    let upstream = server(scripts).await;
    let (tx, mut rx) = watch::channel(0u64);
    let tap = Arc::new(Tap {
        auditor: Auditor::new(AuditConfig::default()),
        closed: tx,
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let addr = listener.local_addr().expect("proxy addr");
    let proxy = Proxy::new(ProxyConfig::new("audit-e2e", upstream.to_string()));
    let sink: Arc<dyn ObservationSink> = tap.clone();
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| {
        http1::observer_pair(conn, sink.clone())
    }));
    proxy.set_faults(vec![Arc::new(CutOnce {
        armed: AtomicBool::new(true),
        at: cut,
        action,
    })]);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));
    let n = requests.len() as u64;
    for r in requests {
        client(addr, r).await;
    }
    rx.wait_for(|closed| *closed >= n)
        .await
        .expect("close count");
    shutdown.cancel();
    let _ = task.await;
    tap.auditor.finish();
    let kinds = tap.auditor.findings().iter().map(|f| f.kind).collect();
    (kinds, tap)
}

fn within<F: std::future::Future>(f: F) -> tokio::time::Timeout<F> {
    timeout(Duration::from_secs(20), f)
}

#[tokio::test]
async fn e2e_clean_resume_across_chunk_boundaries_yields_only_replay_exact() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(lf, Some("2"), None, &[&progress(2)]))
            .chunk(&ev(lf, Some("3"), None, &[&progress(3)]))
            .end();
        // Cut right after event 2's blank line: a boundary.
        let cut = first.offset_of("id: 3", 0, 0) - 2 - "\r\n".len() as u64;
        let e3 = ev(lf, Some("3"), None, &[&progress(3)]);
        let (a, b) = e3.split_at(9);
        let replay = Script::sse("")
            .chunk(a)
            .chunk(b)
            .chunk(&ev(lf, Some("4"), None, &[&result("7")]))
            .end();
        let (kinds, tap) = run(
            vec![first, replay],
            cut,
            CutAction::Reset,
            vec![
                post(Some("s-1"), None, &call("7", "search")),
                resume("s-1", "2"),
            ],
        )
        .await;
        assert_eq!(kinds, vec![K::ReplayExact], "{:#?}", tap.auditor.findings());
        assert_eq!(tap.auditor.histograms()["server-replay"].len(), 1);
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_seed_004_yields_torn_cut_cursor_ahead_fresh_stream() {
    within(async {
        let crlf = "\r\n";
        let e42 = ev(
            crlf,
            Some("42"),
            None,
            &[
                r#"{"jsonrpc":"2.0","id":7,"#,
                r#""result":{"content":"#,
                r#"[]}}"#,
            ],
        );
        let first = Script::sse("")
            .chunk(&ev(crlf, Some("40"), None, &[&progress(40)]))
            .chunk(&ev(crlf, Some("41"), None, &[&progress(41)]))
            .chunk(&e42)
            .end();
        let cut = first.offset_of("data: {\"jsonrpc\":\"2.0\",\"id\":7", 0, 14);
        let fresh = Script::sse("")
            .chunk(&ev(crlf, Some("1"), None, &[""]))
            .chunk(&ev(crlf, Some("2"), None, &[&result("7")]))
            .end();
        let (kinds, tap) = run(
            vec![first, fresh],
            cut,
            CutAction::Reset,
            vec![
                post(Some("s-1"), None, &call("7", "fetch")),
                resume("s-1", "42"),
            ],
        )
        .await;
        let f = tap.auditor.findings();
        assert_eq!(
            kinds,
            vec![K::TornCut, K::CursorAhead, K::FreshStream],
            "{f:#?}"
        );
        assert_eq!(f[0].class.as_deref(), Some("mid-value"));
        assert_eq!(f[0].data_line, Some(1));
        assert_eq!(f[0].raw_offsets, vec![cut]);
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_seed_000_yields_pending_call() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some("40"), None, &[&progress(40)]))
            .chunk(&ev(lf, Some("41"), None, &[&progress(41)]))
            .chunk(&ev(lf, Some("42"), None, &[&progress(42)]))
            .end();
        let cut = first.offset_of("id: 42", 0, 0) - 2 - 2;
        let mut replay = Script::sse("");
        for i in 42..=46u64 {
            replay = replay.chunk(&ev(lf, Some(&i.to_string()), None, &[&progress(i)]));
        }
        let replay = replay
            .chunk(&ev(lf, Some("47"), None, &[&result("1")]))
            .chunk(&ev(lf, None, Some("end"), &["{}"]))
            .end();
        let batch = format!("[{},{}]", call("1", "search"), call("2", "fetch"));
        let (kinds, tap) = run(
            vec![first, replay],
            cut,
            CutAction::Reset,
            vec![post(Some("s-1"), None, &batch), resume("s-1", "41")],
        )
        .await;
        assert_eq!(kinds, vec![K::PendingCall], "{:#?}", tap.auditor.findings());
        assert_eq!(tap.auditor.findings()[0].ids, vec!["2".to_string()]);
    })
    .await
    .expect("timeout");
}

const U: [&str; 4] = [
    "7f3c2a10-5b7e-4c1a-9d2e-0a1b2c3d4e5f_1_x",
    "7f3c2a10-5b7e-4c1a-9d2e-0a1b2c3d4e5f_2_y",
    "7f3c2a10-5b7e-4c1a-9d2e-0a1b2c3d4e5f_3_z",
    "7f3c2a10-5b7e-4c1a-9d2e-0a1b2c3d4e5f_4_w",
];

#[tokio::test]
async fn e2e_torn_event_missing_from_replay_yields_replay_gap() {
    within(async {
        let crlf = "\r\n";
        let first = Script::sse("")
            .chunk(&ev(crlf, Some(U[0]), None, &[&progress(1)]))
            .chunk(&ev(crlf, Some(U[1]), None, &[&progress(2)]))
            .chunk(&ev(crlf, Some(U[2]), None, &[&progress(3)]))
            .end();
        let cut = first.offset_of("data: ", 2, 10);
        let replay = Script::sse("")
            .chunk(&ev(crlf, Some(U[3]), None, &[&result("7")]))
            .end();
        let (kinds, tap) = run(
            vec![first, replay],
            cut,
            CutAction::Fin,
            vec![
                post(Some("s-9"), None, &call("7", "search")),
                resume("s-9", U[1]),
            ],
        )
        .await;
        let f = tap.auditor.findings();
        assert_eq!(kinds, vec![K::TornCut, K::ReplayGap], "{f:#?}");
        assert_eq!(f[1].ids, vec![U[2].to_string()]);
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_refused_resume_yields_explicit_loss() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(lf, Some("2"), None, &[&progress(2)]))
            .end();
        let cut = first.offset_of("id: 2", 0, 0) - 2 - 2;
        let refused =
            Script::raw("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        let (kinds, tap) = run(
            vec![first, refused],
            cut,
            CutAction::Reset,
            vec![
                post(Some("s-1"), None, &call("7", "search")),
                resume("s-1", "1"),
            ],
        )
        .await;
        assert_eq!(
            kinds,
            vec![K::ExplicitLoss],
            "{:#?}",
            tap.auditor.findings()
        );
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_empty_replay_yields_silent_empty() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(lf, Some("2"), None, &[&progress(2)]))
            .end();
        let cut = first.offset_of("id: 2", 0, 0) - 2 - 2;
        let empty = Script::sse("").end();
        let (kinds, tap) = run(
            vec![first, empty],
            cut,
            CutAction::CleanEnd,
            vec![
                post(Some("s-1"), None, &call("7", "search")),
                resume("s-1", "1"),
            ],
        )
        .await;
        assert_eq!(kinds, vec![K::SilentEmpty], "{:#?}", tap.auditor.findings());
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_stateless_call_sent_again_yields_reissued() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, None, None, &[&progress(1)]))
            .chunk(&ev(lf, None, None, &[&progress(2)]))
            .end();
        let cut = first.offset_of("data: ", 1, 8);
        let again = Script::sse("")
            .chunk(&ev(lf, None, None, &[&result("8")]))
            .end();
        let v = Some("2026-07-28");
        let (kinds, tap) = run(
            vec![first, again],
            cut,
            CutAction::Reset,
            vec![
                post(None, v, &call("7", "search")),
                post(None, v, &call("8", "search")),
            ],
        )
        .await;
        assert_eq!(
            kinds,
            vec![K::TornCut, K::Reissued],
            "{:#?}",
            tap.auditor.findings()
        );
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_delivered_event_sent_again_yields_replay_duplicate() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some(U[0]), None, &[&progress(1)]))
            .chunk(&ev(lf, Some(U[1]), None, &[&progress(2)]))
            .chunk(&ev(lf, Some(U[2]), None, &[&progress(3)]))
            .end();
        let cut = first.offset_of("id: ", 2, 0) - 2 - 2;
        let replay = Script::sse("")
            .chunk(&ev(lf, Some(U[1]), None, &[&progress(2)]))
            .chunk(&ev(lf, Some(U[2]), None, &[&progress(3)]))
            .chunk(&ev(lf, Some(U[3]), None, &[&result("7")]))
            .end();
        let (kinds, tap) = run(
            vec![first, replay],
            cut,
            CutAction::Fin,
            vec![
                post(Some("s-3"), None, &call("7", "search")),
                resume("s-3", U[1]),
            ],
        )
        .await;
        let f = tap.auditor.findings();
        assert_eq!(kinds, vec![K::ReplayDuplicate], "{f:#?}");
        assert_eq!(f[0].ids, vec![U[1].to_string()]);
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_older_cursor_yields_only_cursor_behind() {
    within(async {
        let crlf = "\r\n";
        let first = Script::sse("")
            .chunk(&ev(crlf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(crlf, Some("2"), None, &[&progress(2)]))
            .chunk(&ev(crlf, Some("3"), None, &[&progress(3)]))
            .end();
        // Right after event 2's blank line, before its HTTP chunk's trailing CRLF.
        let cut = first.offset_of("id: 3", 0, 0) - 4 - 2;
        let replay = Script::sse("")
            .chunk(&ev(crlf, Some("2"), None, &[&progress(2)]))
            .chunk(&ev(crlf, Some("3"), None, &[&result("7")]))
            .end();
        let (kinds, tap) = run(
            vec![first, replay],
            cut,
            CutAction::Reset,
            vec![
                post(Some("s-1"), None, &call("7", "search")),
                resume("s-1", "1"),
            ],
        )
        .await;
        assert_eq!(
            kinds,
            vec![K::CursorBehind],
            "{:#?}",
            tap.auditor.findings()
        );
    })
    .await
    .expect("timeout");
}
