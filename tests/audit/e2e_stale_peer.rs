//! The real Python `mcp` 2.3 client's stale cursor (issue 34), over loopback through the proxy:
//! a small MCP server streams a tool call's events 15 ms apart, the proxy resets the POST
//! stream at event 6 and the client's first resume at event 13; the client read events 6–12
//! of that broken leg, yet resumes with the leg's own starting cursor (`e5`) again ~100 ms
//! later, and the server replays correctly. The client gets every event, 6–12 twice: the
//! audit reports the stale cursor (`cursor-behind`, naming the duplicated events), no loss and
//! no `unknown`. The twin: with `rst_unread` wider than the broken leg, the audit takes those
//! events as possibly discarded and judges the resume from `e5` (no `cursor-behind`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tearline::audit::{AuditConfig, Auditor, FindingClass, FindingKind as K};
use tearline::fault::{Chunk, ConnRng, Cut, Fault, FaultFactory, Plan};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::vocab::{CutAction, Direction};
use tearline::wire::{ObservationSink, http1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::common::peers;

/// Events of the tool call before its result.
const EVENTS: u64 = 20;
const GAP: Duration = Duration::from_millis(15);

/// Resets a downstream inside the first event carrying each marker, once per marker, in order.
struct CutAtMarkers(Arc<Mutex<Vec<&'static str>>>);

struct MarkerFault(Arc<Mutex<Vec<&'static str>>>);

impl FaultFactory for CutAtMarkers {
    fn kind(&self) -> &'static str {
        "cut-at-markers"
    }
    fn direction(&self) -> Direction {
        Direction::Downstream
    }
    fn instantiate(&self, _rng: &mut ConnRng, _now: Instant) -> Option<Box<dyn Fault>> {
        Some(Box::new(MarkerFault(self.0.clone())))
    }
}

impl Fault for MarkerFault {
    fn kind(&self) -> &'static str {
        "cut-at-markers"
    }
    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, _rng: &mut ConnRng) {
        let mut markers = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Some(marker) = markers.first().copied() else {
            return;
        };
        let Some(pos) = chunk
            .bytes
            .windows(marker.len())
            .position(|w| w == marker.as_bytes())
        else {
            return;
        };
        markers.remove(0);
        // Inside the event's `data:` value: the event is torn.
        let at = (pos + marker.len() + 12).min(chunk.bytes.len());
        plan.cut_at(Cut {
            at,
            action: CutAction::Reset,
            outage: None,
            by: "cut-at-markers",
        });
    }
}

/// One request: method, `Last-Event-ID`, body.
async fn read_request(s: &mut TcpStream) -> Option<(String, Option<String>, String)> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = s.read(&mut tmp).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let len: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = s.read(&mut tmp).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&tmp[..n]);
    }
    let method = head.split(' ').next()?.to_string();
    let body = String::from_utf8_lossy(&buf[head_end..head_end + len]).to_string();
    Some((method, header("last-event-id"), body))
}

fn event(n: u64, data: &str) -> String {
    format!("id: e{n}\ndata: {data}\n\n")
}

fn note(n: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"event {n}"}}}}"#
    )
}

/// Streams events `from..=EVENTS` `GAP` apart, then the result of call `id`, chunked.
async fn stream(s: &mut TcpStream, from: u64, id: &serde_json::Value) -> std::io::Result<()> {
    s.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\
          Mcp-Session-Id: s1\r\nConnection: close\r\n\r\n",
    )
    .await?;
    let chunk = |text: String| format!("{:x}\r\n{text}\r\n", text.len());
    if from == 1 {
        s.write_all(chunk("retry: 100\n\n".into()).as_bytes())
            .await?;
    }
    for n in from..=EVENTS {
        s.write_all(chunk(event(n, &note(n))).as_bytes()).await?;
        tokio::time::sleep(GAP).await;
    }
    let result = serde_json::json!({"jsonrpc": "2.0", "id": id,
        "result": {"content": [{"type": "text", "text": "ok"}]}});
    s.write_all(chunk(event(EVENTS + 1, &result.to_string())).as_bytes())
        .await?;
    s.write_all(b"0\r\n\r\n").await
}

async fn json(s: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Mcp-Session-Id: s1\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).await
}

/// A minimal MCP 2025-11-25 server: one tool whose call streams; a resume replays after its
/// cursor. Every response closes its connection.
async fn serve(s: &mut TcpStream, call_id: &Mutex<serde_json::Value>) -> std::io::Result<()> {
    let Some((method, cursor, body)) = read_request(s).await else {
        return Ok(());
    };
    if method == "GET" {
        let from = cursor
            .and_then(|c| c.strip_prefix('e').and_then(|n| n.parse::<u64>().ok()))
            .map(|n| n + 1);
        let id = call_id.lock().unwrap_or_else(|p| p.into_inner()).clone();
        return match from {
            Some(from) => stream(s, from, &id).await,
            None => json(s, "405 Method Not Allowed", "").await,
        };
    }
    if method != "POST" {
        return json(s, "200 OK", "").await;
    }
    let msg: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let Some(id) = msg.get("id").cloned() else {
        return json(s, "202 Accepted", "").await;
    };
    let result = match msg.get("method").and_then(|m| m.as_str()) {
        Some("initialize") => serde_json::json!({"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "stale", "version": "1"}}),
        Some("tools/list") => serde_json::json!({"tools": [{"name": "stream",
            "inputSchema": {"type": "object"}}]}),
        Some("tools/call") => {
            *call_id.lock().unwrap_or_else(|p| p.into_inner()) = id.clone();
            return stream(s, 1, &id).await;
        }
        _ => serde_json::json!({}),
    };
    let reply = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result});
    json(s, "200 OK", &reply.to_string()).await
}

async fn server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind server");
    let addr = listener.local_addr().expect("server addr");
    let call_id = Arc::new(Mutex::new(serde_json::Value::Null));
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let call_id = call_id.clone();
            tokio::spawn(async move {
                let _ = serve(&mut s, &call_id).await;
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

/// Runs the client through the proxy; returns the auditor (finished) and the client's line.
async fn run(cfg: AuditConfig) -> (Arc<Auditor>, serde_json::Value) {
    let upstream = server().await;
    let auditor = Arc::new(Auditor::new(cfg));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let addr = listener.local_addr().expect("proxy addr");
    let proxy = Proxy::new(ProxyConfig::new("stale-peer", upstream.to_string()));
    let sink: Arc<dyn ObservationSink> = auditor.clone();
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| {
        http1::observer_pair(conn, sink.clone())
    }));
    let markers = Arc::new(Mutex::new(vec!["id: e6\n", "id: e13\n"]));
    proxy.set_faults(vec![Arc::new(CutAtMarkers(markers))]);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));
    let mut cmd = peers::python();
    cmd.arg(peers::dir().join("py/stale_resume.py"))
        .arg(format!("http://{addr}/mcp"));
    let out = tokio::time::timeout(
        Duration::from_secs(40),
        tokio::process::Command::from(cmd).output(),
    )
    .await
    .expect("the client finishes within 40 s")
    .expect("the client runs");
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the client prints one JSON line");
    shutdown.cancel();
    let _ = task.await;
    auditor.finish();
    (auditor, line)
}

/// How many times the client received each event (1..=EVENTS).
fn received(line: &serde_json::Value) -> Vec<usize> {
    let got: Vec<String> = line["messages"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| m.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    (1..=EVENTS)
        .map(|n| got.iter().filter(|m| **m == format!("event {n}")).count())
        .collect()
}

#[tokio::test]
async fn python_client_stale_cursor_after_a_broken_resume_leg_is_duplicates_not_loss() {
    let (auditor, line) = run(AuditConfig::default()).await;
    let counts = received(&line);
    assert_eq!(line["text"], "ok", "{line}");
    assert!(
        counts.iter().all(|n| *n >= 1),
        "every event came: {counts:?}"
    );
    assert!(
        counts.iter().any(|n| *n >= 2),
        "the stale cursor made duplicates: {counts:?}"
    );
    let f = auditor.findings();
    let kinds: Vec<K> = f.iter().map(|f| f.kind).collect();
    assert!(kinds.contains(&K::CursorBehind), "{f:#?}");
    assert!(
        f.iter()
            .all(|f| f.class != FindingClass::Loss && f.kind != K::Unknown),
        "{f:#?}"
    );
}

#[tokio::test]
async fn python_client_stale_cursor_inside_a_wide_unread_window_is_judged_from_it() {
    let cfg = AuditConfig {
        rst_unread: Duration::from_secs(30),
        ..AuditConfig::default()
    };
    let (auditor, line) = run(cfg).await;
    assert_eq!(line["text"], "ok", "{line}");
    let f = auditor.findings();
    let kinds: Vec<K> = f.iter().map(|f| f.kind).collect();
    assert!(
        !kinds.contains(&K::CursorBehind) && kinds.contains(&K::ReplayExact),
        "{f:#?}"
    );
    assert!(
        f.iter()
            .all(|f| f.class != FindingClass::Loss && f.kind != K::Unknown),
        "{f:#?}"
    );
}
