//! Scripted observation sequences for the audit tests: a tiny WHATWG SSE reader turns raw
//! response bytes (LF or CRLF) into the `SseEvent`s and the `CutPoint` the wire observer would
//! report for the bytes delivered before a cut.
#![allow(dead_code)]

pub mod e2e;

use bytes::Bytes;
use tearline::audit::{AuditConfig, Auditor, FindingKind};
use tearline::vocab::CutAction;
use tearline::vocab::Direction;
use tearline::wire::{CutPoint, Observation, ObservationSink, SseClass};

/// FNV-1a 64, as the wire observer hashes data buffers.
pub fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Line ending of a scripted server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eol {
    Lf,
    CrLf,
}

impl Eol {
    pub fn as_str(self) -> &'static str {
        match self {
            Eol::Lf => "\n",
            Eol::CrLf => "\r\n",
        }
    }
}

/// One SSE event as a server writes it.
pub fn event(eol: Eol, id: Option<&str>, kind: Option<&str>, data_lines: &[&str]) -> String {
    let e = eol.as_str();
    let mut s = String::new();
    if let Some(k) = kind {
        s.push_str(&format!("event: {k}{e}"));
    }
    if let Some(id) = id {
        s.push_str(&format!("id: {id}{e}"));
    }
    for d in data_lines {
        s.push_str(&format!("data: {d}{e}"));
    }
    s.push_str(e);
    s
}

/// A JSON-RPC progress notification (data of a non-response event).
pub fn progress(n: u64) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progress":{n}}}}}"#)
}

/// A JSON-RPC result for request id `id` (JSON text).
pub fn result(id: &str, text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
    )
}

/// A progress notification carrying its token, as MCP servers send them.
pub fn progress_of(token: &str, n: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"{token}","progress":{n}}}}}"#
    )
}

/// A `tools/call` request body with a progress token in `_meta` (a new one per request, as
/// real clients send).
pub fn call_with_token(id: &str, tool: &str, token: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"n":3}},"_meta":{{"progressToken":"{token}"}}}}}}"#
    )
}

/// A `tools/call` request body.
pub fn call(id: &str, tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
    )
}

/// Feeds observations to an auditor and keeps per-connection raw offsets.
pub struct Wire {
    pub auditor: Auditor,
    raw: std::collections::HashMap<u64, u64>,
    /// How the TLS client session ends at the cuts `deliver` reports (`None`: plain TCP).
    pub tls_end: Option<tearline::tls::TlsEnd>,
}

/// The reader state of one response body.
#[derive(Default)]
struct Reader {
    index: u64,
    committed: Option<String>,
}

impl Wire {
    pub fn new() -> Self {
        Wire::with(AuditConfig::default())
    }

    pub fn with(cfg: AuditConfig) -> Self {
        Wire::of(Auditor::new(cfg))
    }

    /// A wire feeding `auditor` (one made with a small queue, say).
    pub fn of(auditor: Auditor) -> Self {
        Wire {
            auditor,
            raw: Default::default(),
            tls_end: None,
        }
    }

    pub fn rec(&self, obs: Observation) {
        self.auditor.record(obs);
    }

    pub fn kinds(&self) -> Vec<FindingKind> {
        self.auditor.findings().iter().map(|f| f.kind).collect()
    }

    /// A request head; the arguments mirror `Observation::Request`'s fields.
    #[allow(clippy::too_many_arguments)]
    pub fn request(
        &self,
        conn: u64,
        seq: u64,
        method: &str,
        session: Option<&str>,
        last_event_id: Option<&str>,
        version: Option<&str>,
        body: Option<&str>,
    ) {
        self.rec(Observation::Request {
            conn,
            seq,
            method: method.into(),
            path: "/mcp".into(),
            session: session.map(str::to_string),
            last_event_id: last_event_id.map(str::to_string),
            protocol_version: version.map(str::to_string),
            has_authorization: false,
            idempotency_key: None,
            accepts_event_stream: true,
            body: body.map(|b| Bytes::from(b.to_string())),
        });
    }

    /// A GET of `path` without a session (plain EventSource), with an optional cursor.
    pub fn get_url(&self, conn: u64, seq: u64, path: &str, last_event_id: Option<&str>) {
        self.rec(Observation::Request {
            conn,
            seq,
            method: "GET".into(),
            path: path.into(),
            session: None,
            last_event_id: last_event_id.map(str::to_string),
            protocol_version: None,
            has_authorization: false,
            idempotency_key: None,
            accepts_event_stream: true,
            body: None,
        });
    }

    pub fn post(&self, conn: u64, seq: u64, session: Option<&str>, body: &str) {
        self.request(conn, seq, "POST", session, None, None, Some(body));
    }

    /// A POST carrying `Idempotency-Key: key` (and MCP protocol `version`, if any).
    pub fn post_keyed(
        &self,
        conn: u64,
        seq: u64,
        session: Option<&str>,
        version: Option<&str>,
        key: &str,
        body: &str,
    ) {
        self.rec(Observation::Request {
            conn,
            seq,
            method: "POST".into(),
            path: "/mcp".into(),
            session: session.map(str::to_string),
            last_event_id: None,
            protocol_version: version.map(str::to_string),
            has_authorization: false,
            idempotency_key: Some(key.to_string()),
            accepts_event_stream: true,
            body: Some(Bytes::from(body.to_string())),
        });
    }

    pub fn resume(&self, conn: u64, seq: u64, session: Option<&str>, cursor: &str) {
        self.request(conn, seq, "GET", session, Some(cursor), None, None);
    }

    pub fn response(&mut self, conn: u64, seq: u64, status: u16, ct: &str, session: Option<&str>) {
        self.raw.entry(conn).or_insert(120);
        self.rec(Observation::Response {
            conn,
            seq,
            status,
            content_type: Some(ct.into()),
            session: session.map(str::to_string),
        });
    }

    pub fn sse_ok(&mut self, conn: u64, seq: u64) {
        self.response(conn, seq, 200, "text/event-stream", None);
    }

    pub fn end(&self, conn: u64, seq: u64, clean: bool) {
        self.rec(Observation::StreamEnd { conn, seq, clean });
    }

    /// Delivers `body` (whole events) on the exchange, then ends it cleanly.
    pub fn stream_clean(&mut self, conn: u64, seq: u64, body: &str) {
        self.deliver(conn, seq, body, None, CutAction::Reset);
        self.end(conn, seq, true);
    }

    /// Delivers the first `cut` bytes of `body` (all of it if `None`) on the exchange: the
    /// dispatched events become `SseEvent`s; with a cut, a `Cut` describes the event in
    /// progress. Returns the raw offset of the cut.
    pub fn deliver(
        &mut self,
        conn: u64,
        seq: u64,
        body: &str,
        cut: Option<usize>,
        action: CutAction,
    ) -> u64 {
        self.deliver_scoped(conn, seq, body, cut, action, false)
    }

    /// As [`Wire::deliver`] on an HTTP/2 connection (`seq` is the stream id): a cut ends
    /// stream `seq` only (`h2_stream`), and the connection stays open.
    pub fn deliver_h2(
        &mut self,
        conn: u64,
        stream: u64,
        body: &str,
        cut: Option<usize>,
        action: CutAction,
    ) -> u64 {
        self.deliver_scoped(conn, stream, body, cut, action, true)
    }

    fn deliver_scoped(
        &mut self,
        conn: u64,
        seq: u64,
        body: &str,
        cut: Option<usize>,
        action: CutAction,
        h2: bool,
    ) -> u64 {
        let base = *self.raw.entry(conn).or_insert(120);
        let bytes = body.as_bytes();
        let limit = cut.unwrap_or(bytes.len()).min(bytes.len());
        let mut rd = Reader::default();
        let (mut data, mut kind, mut idbuf) = (String::new(), None::<String>, None::<String>);
        let mut own_id: Option<String> = None;
        let mut data_lines = 0u32;
        let mut ev_start = 0usize;
        let mut pos = 0usize;
        let mut last_line: Option<String> = None;
        loop {
            let rest = &bytes[pos..limit];
            let Some(nl) = rest.iter().position(|b| *b == b'\n') else {
                break;
            };
            let mut line = &rest[..nl];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = String::from_utf8_lossy(line).to_string();
            let next = pos + nl + 1;
            if line.is_empty() {
                if let Some(i) = &idbuf {
                    rd.committed = Some(i.clone());
                }
                if !data.is_empty() {
                    data.pop();
                    self.rec(Observation::SseEvent {
                        conn,
                        seq,
                        index: rd.index,
                        id: own_id.clone(),
                        last_event_id: rd.committed.clone(),
                        event_type: kind.clone().map(Into::into),
                        data_hash: fnv(data.as_bytes()),
                        data_len: data.len() as u64,
                        data: Some(Bytes::from(data.clone())),
                        data_lines: 1,
                        raw_start: base + ev_start as u64,
                        raw_end: base + next as u64,
                    });
                }
                rd.index += 1;
                data.clear();
                kind = None;
                own_id = None;
                idbuf = None;
                data_lines = 0;
                ev_start = next;
                last_line = None;
            } else {
                let (name, value) = match line.split_once(':') {
                    Some((n, v)) => (n.to_string(), v.strip_prefix(' ').unwrap_or(v).to_string()),
                    None => (line.clone(), String::new()),
                };
                match name.as_str() {
                    "data" => {
                        data.push_str(&value);
                        data.push('\n');
                        data_lines += 1;
                    }
                    "event" => kind = Some(value),
                    "id" => {
                        idbuf = Some(value.clone());
                        own_id = Some(value);
                    }
                    _ => {}
                }
                last_line = Some(name);
            }
            pos = next;
        }
        self.raw.insert(conn, base + limit as u64);
        let Some(cut) = cut else {
            return base + limit as u64;
        };
        let partial = &bytes[pos..limit];
        if partial == b"\r" && pos > ev_start {
            // The CR of the blank line ended it: the event IS dispatched (dispatch-cr-lf).
            if let Some(i) = &idbuf {
                rd.committed = Some(i.clone());
            }
            if !data.is_empty() {
                data.pop();
                self.rec(Observation::SseEvent {
                    conn,
                    seq,
                    index: rd.index,
                    id: own_id.clone(),
                    last_event_id: rd.committed.clone(),
                    event_type: kind.clone().map(Into::into),
                    data_hash: fnv(data.as_bytes()),
                    data_len: data.len() as u64,
                    data: Some(Bytes::from(data.clone())),
                    data_lines: 1,
                    raw_start: base + ev_start as u64,
                    raw_end: base + limit as u64,
                });
            }
            self.end(conn, seq, false);
            self.rec(Observation::Cut {
                conn,
                direction: Direction::Downstream,
                action,
                point: CutPoint {
                    class: Some(SseClass::DispatchCrLf),
                    raw_offset: base + limit as u64,
                    last_committed_id: rd.committed.clone(),
                    event_index: Some(rd.index),
                    h2_stream: h2.then_some(seq),
                    ..CutPoint::default()
                },
            });
            if !h2 {
                self.rec(Observation::ConnClosed { conn });
            }
            return base + limit as u64;
        }
        let torn = (limit - ev_start) as u64;
        let partial_text = String::from_utf8_lossy(partial).to_string();
        let class = if torn == 0 {
            SseClass::Boundary
        } else if partial.is_empty() {
            if last_line.as_deref() == Some("id") {
                SseClass::AfterId
            } else {
                SseClass::BeforeDispatch
            }
        } else if partial.ends_with(b"\r") {
            SseClass::CrLf
        } else if partial_text.starts_with("data:") && partial_text.trim_end_matches(' ').len() == 5
        {
            SseClass::AfterColon
        } else if partial_text.starts_with("data:") {
            SseClass::MidValue
        } else if partial_text.starts_with("id:") {
            SseClass::MidId
        } else {
            SseClass::FieldName
        };
        let in_data = partial_text.starts_with("data:");
        // The wire observer reports the broken body end before the pump reports the cut.
        self.end(conn, seq, false);
        self.rec(Observation::Cut {
            conn,
            direction: Direction::Downstream,
            action,
            point: CutPoint {
                class: Some(class),
                raw_offset: base + cut as u64,
                payload_offset: Some(cut as u64),
                event_index: Some(rd.index),
                pending_id: if class.tears_event() {
                    idbuf.clone()
                } else {
                    None
                },
                last_committed_id: rd.committed.clone(),
                torn_bytes: if class.tears_event() { torn } else { 0 },
                body_bytes: None,
                data_line: in_data.then_some(data_lines + 1),
                request: None,
                session: None,
                rpc_id: None,
                exchange: Some(seq),
                tls_end: self.tls_end,
                outage_ms: None,
                by: None,
                llm: None,
                h2_stream: h2.then_some(seq),
                with_connection: false,
            },
        });
        if !h2 {
            self.rec(Observation::ConnClosed { conn });
        }
        base + cut as u64
    }
}
