//! Shared harness of the LLM tests: the lab (with its LLM endpoints) behind a tearline proxy
//! whose faults come from profile-style key/value pairs, the HTTP observer feeding a recorder,
//! and a raw client that sends one LLM request and reads what reached it, decoded the way a
//! client decodes it (HTTP/1.1 chunked body, WHATWG SSE, the API's events).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tearline::fault::FaultFactory;
use tearline::fault::keys::FaultDef;
use tearline::fault::registry::{Built, build};
use tearline::lab::{LabConfig, serve};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::vocab::LlmApi;
use tearline::wire::llm_args::ArgsStatus;
use tearline::wire::sse::SseScanner;
use tearline::wire::{Observation, ObservationSink, http1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Every observation the proxy's observer released, in order.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        if let Ok(mut v) = self.0.lock() {
            v.push(obs);
        }
    }
}

impl Recorder {
    pub fn all(&self) -> Vec<Observation> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// A fault from `(key, value)` pairs, as a profile would define it.
pub fn fault(pairs: &[(&str, toml::Value)]) -> Arc<dyn FaultFactory> {
    let def = FaultDef::from_pairs(pairs.iter().map(|(k, v)| (*k, v.clone())));
    match build(&def) {
        Ok(Built::Conn(f)) => f,
        other => panic!("expected a connection fault, got {other:?}"),
    }
}

pub fn s(v: &str) -> toml::Value {
    toml::Value::String(v.into())
}

pub fn i(v: i64) -> toml::Value {
    toml::Value::Integer(v)
}

/// The lab and a proxy in front of it.
pub struct Rig {
    pub lab: SocketAddr,
    pub proxy: SocketAddr,
    pub recorder: Arc<Recorder>,
    stop: CancellationToken,
}

impl Rig {
    /// Starts the lab (`cfg`) and a proxy with `faults`, seeded with `seed`.
    pub async fn start(cfg: LabConfig, faults: Vec<Arc<dyn FaultFactory>>, seed: u64) -> Rig {
        let stop = CancellationToken::new();
        let lab = TcpListener::bind("127.0.0.1:0").await.expect("bind lab");
        let lab_addr = lab.local_addr().expect("lab addr");
        tokio::spawn(serve(lab, cfg, stop.child_token()));
        let mut pc = ProxyConfig::new("llm", lab_addr.to_string());
        pc.seed = seed;
        pc.drain_timeout = Duration::from_secs(2);
        let p = Proxy::new(pc);
        let recorder = Arc::new(Recorder::default());
        let sink: Arc<dyn ObservationSink> = recorder.clone();
        p.set_sink(Some(sink.clone()));
        p.set_observer_factory(Arc::new(move |conn| {
            http1::observer_pair(conn, sink.clone())
        }));
        p.set_faults(faults);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let proxy_addr = listener.local_addr().expect("proxy addr");
        tokio::spawn(proxy::run(listener, p, stop.child_token()));
        Rig {
            lab: lab_addr,
            proxy: proxy_addr,
            recorder,
            stop,
        }
    }

    /// Sends one request through the proxy and reads until the connection ends.
    pub async fn ask(&self, api: LlmApi, body: &str) -> Reply {
        ask(self.proxy, api, body, &[]).await
    }

    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What reached the client.
#[derive(Debug, Clone)]
pub struct Reply {
    pub raw: Vec<u8>,
    /// The read ended with this error (a reset), else EOF.
    pub error: Option<std::io::ErrorKind>,
    pub status: u16,
    /// The chunked body ended with its terminator (`0\r\n\r\n`).
    pub body_complete: bool,
    pub seen: Seen,
}

/// What a client made of the events it received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    pub events: usize,
    pub deltas: u64,
    pub args: Option<(u64, ArgsStatus)>,
    pub tool_name: Option<String>,
    pub completion: Option<String>,
    pub terminal: bool,
    /// The body ended inside an event (a torn event the client discards).
    pub torn: bool,
}

/// The request body an SDK sends (stream, a user message; a `get_weather` tool when `tool`).
pub fn request_body(api: LlmApi, tool: bool) -> String {
    let schema = r#"{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}"#;
    let tools = match (api, tool) {
        (_, false) => String::new(),
        (LlmApi::ChatCompletions, true) => format!(
            r#","tools":[{{"type":"function","function":{{"name":"get_weather","parameters":{schema}}}}}]"#
        ),
        (LlmApi::Responses, true) => {
            format!(
                r#","tools":[{{"type":"function","name":"get_weather","parameters":{schema}}}]"#
            )
        }
        (LlmApi::Messages, true) => {
            format!(r#","tools":[{{"name":"get_weather","input_schema":{schema}}}]"#)
        }
    };
    let input = match api {
        LlmApi::Responses => r#""input":"weather in Paris?""#,
        _ => r#""messages":[{"role":"user","content":"weather in Paris?"}]"#,
    };
    format!(
        r#"{{"model":"lab","stream":true,"max_tokens":1000,"stream_options":{{"include_usage":true}},{input}{tools}}}"#
    )
}

/// Sends one request to `addr` (extra headers `extra`) and reads until the connection ends.
pub async fn ask(addr: SocketAddr, api: LlmApi, body: &str, extra: &[(&str, &str)]) -> Reply {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut req = format!(
        "POST {} HTTP/1.1\r\nHost: lab\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-test-planted\r\nConnection: close\r\nContent-Length: {}\r\n",
        api.endpoint(),
        body.len()
    );
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let error = loop {
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
            Err(_) => panic!("no end within 10 s"),
            Ok(Ok(0)) => break None,
            Ok(Ok(n)) => raw.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => break Some(e.kind()),
        }
    };
    decode(api, raw, error)
}

/// Decodes a raw HTTP/1.1 response as a client would.
pub fn decode(api: LlmApi, raw: Vec<u8>, error: Option<std::io::ErrorKind>) -> Reply {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let Ok(httparse::Status::Complete(n)) = resp.parse(&raw) else {
        return Reply {
            raw,
            error,
            status: 0,
            body_complete: false,
            seen: Seen::default(),
        };
    };
    let status = resp.code.unwrap_or(0);
    let mut scanner = SseScanner::new();
    scanner.set_llm(api);
    let mut seen = Seen::default();
    let mut pos = n;
    let mut body_complete = false;
    let mut on = |e: &tearline::wire::sse::SseEvent<'_>| {
        seen.events += 1;
        if let Some(f) = e.llm {
            seen.deltas += u64::from(f.text);
            if let Some(a) = f.args {
                seen.args = Some((a.bytes, a.status));
            }
            if let Some(t) = &f.tool_start {
                seen.tool_name = t.name.clone();
            }
            if f.completion.is_some() {
                seen.completion = f.completion.clone();
            }
            seen.terminal |= f.terminal;
        }
    };
    while let Some(eol) = raw[pos..].windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&raw[pos..pos + eol])
            .ok()
            .and_then(|t| usize::from_str_radix(t.split(';').next().unwrap_or("").trim(), 16).ok());
        let Some(size) = size else { break };
        pos += eol + 2;
        if size == 0 {
            body_complete = raw[pos..].starts_with(b"\r\n");
            break;
        }
        let avail = size.min(raw.len() - pos);
        scanner.feed(&raw[pos..pos + avail], &mut on);
        pos += avail;
        if avail < size || raw.len() < pos + 2 {
            break;
        }
        pos += 2;
    }
    seen.torn = scanner.has_partial_event();
    Reply {
        raw,
        error,
        status,
        body_complete,
        seen,
    }
}

/// The cut observations the recorder holds.
pub fn cuts(all: &[Observation]) -> Vec<tearline::wire::CutPoint> {
    all.iter()
        .filter_map(|o| match o {
            Observation::Cut { point, .. } => Some(point.clone()),
            _ => None,
        })
        .collect()
}

/// The lab's frames for one request (`tokens` tokens, or a tool call), the request bytes an
/// SDK sends (with `extra` headers) and the response bytes (one HTTP chunk per event), and the
/// raw offset just after each frame's bytes in the response.
pub fn wire_conversation(
    api: LlmApi,
    tool: bool,
    tokens: u32,
    extra: &[(&str, &str)],
) -> (
    Vec<tearline::lab::llm::frame::Frame>,
    Vec<u8>,
    Vec<u8>,
    Vec<usize>,
) {
    use tearline::lab::llm::answer::Answer;
    use tearline::lab::llm::knobs::Knobs;
    use tearline::lab::llm::request::LlmRequest;
    let body = request_body(api, tool);
    let req = LlmRequest::parse(api, body.as_bytes()).expect("request");
    let knobs = Knobs {
        tokens,
        args_chunk: 6,
        ..Knobs::default()
    };
    let a = Answer::plan(&req, &knobs, 1).expect("answer");
    let frames = tearline::lab::llm::frames(&req, &a, &knobs, b"\n");
    let mut up = format!(
        "POST {} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-planted\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        api.endpoint(),
        body.len()
    );
    for (k, v) in extra {
        up.push_str(&format!("{k}: {v}\r\n"));
    }
    up.push_str("\r\n");
    up.push_str(&body);
    let mut down = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let mut ends = Vec::new();
    for f in &frames {
        down.extend_from_slice(format!("{:x}\r\n", f.bytes.len()).as_bytes());
        down.extend_from_slice(&f.bytes);
        ends.push(down.len());
        down.extend_from_slice(b"\r\n");
    }
    down.extend_from_slice(b"0\r\n\r\n");
    (frames, up.into_bytes(), down, ends)
}
