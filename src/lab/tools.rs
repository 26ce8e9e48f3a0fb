//! The lab's tools and the producer task that turns one POST's requests into stream events.
//!
//! Invariants:
//! - A producer pushes into the session ring independently of any connection; it stops only
//!   when its calls are done or the session/server (or, in 2026-07-28 mode, the response
//!   stream) is cancelled, and it always marks its stream finished.
//! - Every event of a tool call carries that tool's resource indicator (see [`super::auth`]);
//!   the priming event and replies to non-tool requests carry none.
//! - The `blob` result is ONE event whose JSON text is split across `lines` `data:` lines
//!   only right after a `,` between `content` items, so the LF a client inserts when joining
//!   data lines is JSON whitespace. Its exact shape is documented in [`crate::lab`].
//! - `blob`'s `hold_ms`/`gate` change only when its result's bytes leave (see [`super::hold`]),
//!   never the bytes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::auth;
use super::config::SideEffects;
use super::hold::Hold;
use super::session::Session;
use super::sse_body::SseEncoder;
use super::truth::LabTruth;

/// The bytes of the `blob` text repeat this alphabet: byte `i` is `ALPHABET[i % 26]`.
pub const ALPHABET: &[u8; 26] = b"abcdefghijklmnopqrstuvwxyz";
/// Progress notifications the `blob` tool sends before its result.
pub const BLOB_PROGRESS: u64 = 3;
const MAX_LINES: u64 = 4096;
const MAX_COUNT: u64 = 10_000_000;
const MAX_INTERVAL_MS: u64 = 3_600_000;
const MAX_GATE: u64 = 1_000_000;

/// A validated tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum Tool {
    /// `blob {"size", "lines", "hold_ms", "gate"}`.
    Blob {
        /// Bytes of text in the result.
        size: usize,
        /// `data:` lines the result event spans.
        lines: usize,
        /// Pause the result mid-way through its last data line (`None`: no pause).
        hold: Option<BlobHold>,
    },
    /// `progress {"n", "interval"}`.
    Progress {
        /// Notifications before the result.
        n: u64,
        /// Pause before each notification.
        interval: Duration,
    },
    /// `search {"query", "n"}`.
    Search {
        /// Echoed in the result.
        query: String,
        /// Progress notifications before the result.
        n: u64,
    },
    /// `fetch {"url", "n"}`.
    Fetch {
        /// Echoed in the result.
        url: String,
        /// Progress notifications before the result.
        n: u64,
    },
    /// `append {"amount", "pad"}`: the non-idempotent tool. Adds `amount` to the server's
    /// [`SideEffects`] counter FIRST (the side effect), then sends one progress notification
    /// and a result carrying the new value (text `appended: <value>` plus `pad` filler bytes).
    Append {
        /// Added to the counter.
        amount: u64,
        /// Filler bytes in the result text (a larger result is easier to cut mid-event).
        pad: usize,
        /// The server's counter (set by the server after parsing; see [`Tool::with_counter`]).
        counter: SideEffects,
    },
}

/// `blob`'s pause: `hold_ms` and `gate` (see [`super::hold`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobHold {
    /// How long the pause lasts (after the gate opened).
    pub wait: Duration,
    /// Streams that must be paused at once before `wait` starts (0: no gate).
    pub gate: usize,
}

fn arg_u64(args: &Value, key: &str, default: u64, max: u64) -> Result<u64, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if n <= max => Ok(n),
            _ => Err(format!("argument {key:?} must be an integer in 0..={max}")),
        },
    }
}

fn arg_str(args: &Value, key: &str) -> Result<String, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("argument {key:?} must be a string")),
    }
}

impl Tool {
    /// Validates a `tools/call`'s `name` and `arguments`; `Err` carries the JSON-RPC message.
    pub fn parse(name: &str, args: &Value, max_blob: usize) -> Result<Tool, String> {
        if !(args.is_object() || args.is_null()) {
            return Err("arguments must be an object".to_owned());
        }
        match name {
            "blob" => {
                let wait = Duration::from_millis(arg_u64(args, "hold_ms", 0, MAX_INTERVAL_MS)?);
                let gate = arg_u64(args, "gate", 0, MAX_GATE)? as usize;
                Ok(Tool::Blob {
                    size: arg_u64(args, "size", 4_194_304, max_blob as u64)? as usize,
                    lines: arg_u64(args, "lines", 3, MAX_LINES)?.max(1) as usize,
                    hold: (!wait.is_zero() || gate > 0).then_some(BlobHold { wait, gate }),
                })
            }
            "progress" => Ok(Tool::Progress {
                n: arg_u64(args, "n", 10, MAX_COUNT)?,
                interval: Duration::from_millis(arg_u64(args, "interval", 0, MAX_INTERVAL_MS)?),
            }),
            "search" => Ok(Tool::Search {
                query: arg_str(args, "query")?,
                n: arg_u64(args, "n", 0, MAX_COUNT)?,
            }),
            "fetch" => Ok(Tool::Fetch {
                url: arg_str(args, "url")?,
                n: arg_u64(args, "n", 0, MAX_COUNT)?,
            }),
            "append" => Ok(Tool::Append {
                amount: arg_u64(args, "amount", 1, MAX_COUNT)?,
                pad: arg_u64(args, "pad", 0, max_blob as u64)? as usize,
                counter: SideEffects::default(),
            }),
            _ => Err(format!("unknown tool {name:?}")),
        }
    }

    /// The tool's name, as `tools/call` names it.
    pub fn name(&self) -> &'static str {
        match self {
            Tool::Blob { .. } => "blob",
            Tool::Progress { .. } => "progress",
            Tool::Search { .. } => "search",
            Tool::Fetch { .. } => "fetch",
            Tool::Append { .. } => "append",
        }
    }

    /// The resource indicator a token must name to run this tool and receive its events.
    pub fn resource(&self) -> &'static str {
        match self {
            Tool::Blob { .. } => auth::BLOB,
            Tool::Progress { .. } => auth::PROGRESS,
            Tool::Search { .. } => auth::SEARCH,
            Tool::Fetch { .. } => auth::FETCH,
            Tool::Append { .. } => auth::APPEND,
        }
    }

    /// The same call, adding to `counter` if it is an `append`.
    pub fn with_counter(self, counter: &SideEffects) -> Tool {
        match self {
            Tool::Append { amount, pad, .. } => Tool::Append {
                amount,
                pad,
                counter: counter.clone(),
            },
            other => other,
        }
    }
}

/// The `tools/list` result. Annotations tell clients which calls are safe to repeat: every
/// tool but `append` is read-only and idempotent; `append` is neither (a repeat adds again).
pub fn list() -> Value {
    let tool = |name: &str, desc: &str, props: Value| {
        let repeat_safe = name != "append";
        json!({"name": name, "description": desc,
               "inputSchema": {"type": "object", "properties": props},
               "annotations": {"readOnlyHint": repeat_safe, "destructiveHint": false,
                               "idempotentHint": repeat_safe, "openWorldHint": false}})
    };
    let int = json!({"type": "integer", "minimum": 0});
    json!({"tools": [
        tool("blob", "A large result: `size` text bytes split over `lines` data: lines. \
              `hold_ms` pauses the result mid-way through its last data line for that long; \
              with `gate` = N the pause starts counting only once N streams of this server \
              are paused at once (for memory benches: every stream open and mid-event).",
             json!({"size": int, "lines": int, "hold_ms": int, "gate": int})),
        tool("progress", "`n` progress notifications, `interval` ms apart, then a small result.",
             json!({"n": int, "interval": int})),
        tool("search", "A small result; requires https://lab/tools/search.",
             json!({"query": {"type": "string"}, "n": int})),
        tool("fetch", "A small result; requires https://lab/tools/fetch.",
             json!({"url": {"type": "string"}, "n": int})),
        tool("append", "NOT idempotent: adds `amount` (default 1) to a server-side counter, \
              then returns the new value (`pad` filler bytes make the result larger).",
             json!({"amount": int, "pad": int})),
    ]})
}

/// One request answered on a POST's stream, in order.
#[derive(Debug, Clone)]
pub enum Step {
    /// A tool call.
    Call {
        /// The JSON-RPC request id.
        id: Value,
        /// `params._meta.progressToken`, or the request id when absent.
        token: Value,
        /// The validated call.
        tool: Tool,
    },
    /// A complete JSON-RPC message sent as one event (replies to other requests, errors).
    Reply(Value),
}

/// The JSON-RPC ids of the calls among `steps`, in order, as text.
pub fn call_ids(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Call { id, .. } => Some(id.to_string()),
            Step::Reply(_) => None,
        })
        .collect()
}

/// Produces the events of `steps` on `stream`, then marks it finished.
///
/// `cancel` (a child of the session's token) stops it early: `notifications/cancelled` for
/// one of its requests, the end of the session, or in 2026-07-28 mode the response stream
/// closing. A cancelled call gets no response. With `truth`, each call's start and finish go
/// to the execution counter ([`super::truth::LabTruth::started`]).
pub async fn produce(
    session: Arc<Session>,
    stream: u64,
    steps: Vec<Step>,
    enc: SseEncoder,
    retry: Duration,
    cancel: CancellationToken,
    truth: Option<Arc<LabTruth>>,
) {
    let ids = call_ids(&steps);
    for id in &ids {
        session.track(id.clone(), cancel.clone());
    }
    if session.version.primes() {
        session.push(stream, None, |id| {
            enc.priming(id.unwrap_or(""), Some(retry))
        });
    }
    // The steps first: a cancel that came before this task ran (the client gone right after
    // the response head) still lets each call start, so a side effect (`append` adds before
    // its first await) happens for every call whose head was sent, whichever branch tokio
    // would have polled first.
    tokio::select! {
        biased;
        _ = run_steps(&session, stream, steps, enc, truth.as_deref()) => {}
        _ = cancel.cancelled() => {}
    }
    for id in &ids {
        session.untrack(id);
    }
    session.finish(stream);
}

/// Pushes one call's events, holding back while the attached reader lags (see
/// [`Session::room`]).
struct Emitter<'a> {
    session: &'a Session,
    stream: u64,
    enc: SseEncoder,
    limit: u64,
}

impl Emitter<'_> {
    async fn emit(&self, resource: Option<&Arc<str>>, lines: &[&[u8]]) {
        self.emit_held(resource, lines, None).await;
    }

    /// [`Emitter::emit`], pausing mid-way through the last data line as `hold` says.
    async fn emit_held(
        &self,
        resource: Option<&Arc<str>>,
        lines: &[&[u8]],
        hold: Option<BlobHold>,
    ) {
        self.session.room(self.stream, self.limit).await;
        let enc = self.enc;
        let hold = hold.map(|h| Hold {
            tail: enc.tail_after_mid_value(lines.last().map_or(0, |l| l.len())),
            wait: h.wait,
            gate: h.gate,
        });
        self.session
            .push_held(self.stream, resource.cloned(), hold, |id| {
                enc.message(id, lines)
            });
    }
}

async fn run_steps(
    session: &Session,
    stream: u64,
    steps: Vec<Step>,
    enc: SseEncoder,
    truth: Option<&LabTruth>,
) {
    let out = Emitter {
        session,
        stream,
        enc,
        limit: (session.capacity() as u64 / 2).max(1),
    };
    for step in steps {
        match step {
            Step::Reply(msg) => out.emit(None, &[msg.to_string().as_bytes()]).await,
            Step::Call { id, token, tool } => {
                let id_text = id.to_string();
                if let Some(t) = truth {
                    t.started(&id_text, tool.name());
                }
                let finished = || {
                    if let Some(t) = truth {
                        t.finished(&id_text);
                    }
                };
                let res: Arc<str> = Arc::from(tool.resource());
                let res = Some(&res);
                let progress = |i: u64, total: u64| {
                    json!({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": i, "total": total}})
                    .to_string()
                };
                // 2026-07-28 results must say `resultType` (real clients reject them without).
                let modern = !session.version.resumable();
                let tag = |mut v: Value| {
                    if modern {
                        v["result"]["resultType"] = json!("complete");
                    }
                    v.to_string()
                };
                let small = |text: String| {
                    tag(json!({"jsonrpc": "2.0", "id": id, "result": {
                        "content": [{"type": "text", "text": text}], "isError": false}}))
                };
                let (n, interval, last) = match tool {
                    Tool::Blob { size, lines, hold } => {
                        for i in 1..=BLOB_PROGRESS {
                            out.emit(res, &[progress(i, BLOB_PROGRESS).as_bytes()])
                                .await;
                        }
                        let (mut json, cuts) = blob_json(&id, size, lines);
                        if modern && json.ends_with(b"}}") {
                            // Appended at the end so the data-line cut offsets stay valid.
                            json.truncate(json.len() - 2);
                            json.extend_from_slice(br#","resultType":"complete"}}"#);
                        }
                        out.emit_held(res, &split_at(&json, &cuts), hold).await;
                        finished();
                        continue;
                    }
                    Tool::Progress { n, interval } => (n, interval, format!("progress done: {n}")),
                    Tool::Search { query, n } => {
                        (n, Duration::ZERO, format!("search results for {query:?}"))
                    }
                    Tool::Fetch { url, n } => (n, Duration::ZERO, format!("fetched {url:?}")),
                    Tool::Append {
                        amount,
                        pad,
                        counter,
                    } => {
                        // The side effect happens before anything is sent: once any byte of
                        // this call reached the client, the counter has moved.
                        let value = counter.add(amount);
                        out.emit(res, &[progress(1, 1).as_bytes()]).await;
                        let mut text = format!("appended: {value}");
                        if pad > 0 {
                            text.push(' ');
                            fill_pattern_str(&mut text, pad);
                        }
                        let json = tag(json!({"jsonrpc": "2.0", "id": id, "result": {
                            "content": [{"type": "text", "text": text}],
                            "structuredContent": {"value": value}, "isError": false}}));
                        out.emit(res, &[json.as_bytes()]).await;
                        finished();
                        continue;
                    }
                };
                for i in 1..=n {
                    if !interval.is_zero() {
                        tokio::time::sleep(interval).await;
                    } else if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                    out.emit(res, &[progress(i, n).as_bytes()]).await;
                }
                out.emit(res, &[small(last).as_bytes()]).await;
                finished();
            }
        }
        tokio::task::yield_now().await;
    }
}

/// The response to one 2026-07-28 call answered with a single `application/json` body
/// ([`super::LabConfig::json_results`]): the same result the call's SSE stream would end with
/// (`resultType: "complete"`), computed after the same waits (`progress`'s `interval`s) and
/// side effect (`append` adds first); no progress notification is sent (a JSON body holds one
/// message). With `truth`, the start and the finish go to the execution counter.
pub async fn answer_json(id: &Value, tool: Tool, truth: Option<&LabTruth>) -> Value {
    let id_text = id.to_string();
    if let Some(t) = truth {
        t.started(&id_text, tool.name());
    }
    let text = |text: String| json!({"content": [{"type": "text", "text": text}]});
    let mut result = match tool {
        Tool::Blob { size, lines, .. } => {
            let (json, _) = blob_json(id, size, lines);
            serde_json::from_slice::<Value>(&json)
                .map(|mut v| v["result"].take())
                .unwrap_or(Value::Null)
        }
        Tool::Progress { n, interval } => {
            for _ in 0..n {
                if !interval.is_zero() {
                    tokio::time::sleep(interval).await;
                }
            }
            text(format!("progress done: {n}"))
        }
        Tool::Search { query, .. } => text(format!("search results for {query:?}")),
        Tool::Fetch { url, .. } => text(format!("fetched {url:?}")),
        Tool::Append {
            amount,
            pad,
            counter,
        } => {
            let value = counter.add(amount);
            let mut t = format!("appended: {value}");
            if pad > 0 {
                t.push(' ');
                fill_pattern_str(&mut t, pad);
            }
            let mut r = text(t);
            r["structuredContent"] = json!({"value": value});
            r
        }
    };
    result["isError"] = json!(false);
    result["resultType"] = json!("complete");
    if let Some(t) = truth {
        t.finished(&id_text);
    }
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn split_at<'a>(json: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut parts = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for &c in cuts {
        parts.push(&json[start..c]);
        start = c;
    }
    parts.push(&json[start..]);
    parts
}

fn fill_pattern_str(out: &mut String, len: usize) {
    out.extend((0..len).map(|i| ALPHABET[i % ALPHABET.len()] as char));
}

fn fill_pattern(out: &mut Vec<u8>, mut offset: usize, mut len: usize) {
    while len > 0 {
        let from = offset % ALPHABET.len();
        let n = (ALPHABET.len() - from).min(len);
        out.extend_from_slice(&ALPHABET[from..from + n]);
        offset += n;
        len -= n;
    }
}

/// The blob response's JSON text and the byte offsets where data lines start (after the
/// first). See the module doc of [`crate::lab`] for the shape.
pub fn blob_json(id: &Value, size: usize, lines: usize) -> (Vec<u8>, Vec<usize>) {
    let lines = lines.max(1);
    let mut out = Vec::with_capacity(size + 128 + 32 * lines);
    out.extend_from_slice(
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":["#).as_bytes(),
    );
    let mut cuts = Vec::with_capacity(lines - 1);
    for k in 0..lines {
        // u128: `size * lines` must not overflow whatever the configured maximum.
        let at = |k: usize| (size as u128 * k as u128 / lines as u128) as usize;
        let (from, to) = (at(k), at(k + 1));
        if k > 0 {
            out.push(b',');
            cuts.push(out.len());
        }
        out.extend_from_slice(br#"{"type":"text","text":""#);
        fill_pattern(&mut out, from, to - from);
        out.extend_from_slice(br#""}"#);
    }
    out.extend_from_slice(
        format!(r#"],"structuredContent":{{"size":{size},"lines":{lines}}},"isError":false}}}}"#)
            .as_bytes(),
    );
    (out, cuts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_lines_rejoined_with_lf_are_valid_json_of_exact_size() {
        for (size, lines) in [(0, 1), (10, 3), (1000, 3), (5, 7), (4096, 1)] {
            let (json, cuts) = blob_json(&json!(7), size, lines);
            let joined = split_at(&json, &cuts).join(&b'\n');
            let v: Value = serde_json::from_slice(&joined).unwrap_or(Value::Null);
            let items = v["result"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert_eq!(items.len(), lines);
            let text: String = items.iter().filter_map(|i| i["text"].as_str()).collect();
            assert_eq!(text.len(), size);
            assert!(text.bytes().enumerate().all(|(i, b)| b == ALPHABET[i % 26]));
            assert_eq!(v["result"]["structuredContent"]["size"], json!(size));
        }
    }

    #[test]
    fn bad_arguments_are_rejected_not_clamped() {
        assert!(Tool::parse("blob", &json!({"size": -1}), 100).is_err());
        assert!(Tool::parse("blob", &json!({"size": 101}), 100).is_err());
        assert!(Tool::parse("progress", &json!({"n": "x"}), 100).is_err());
        assert!(Tool::parse("nope", &json!({}), 100).is_err());
        assert!(Tool::parse("blob", &json!([1]), 100).is_err());
        assert_eq!(
            Tool::parse("blob", &Value::Null, usize::MAX),
            Ok(Tool::Blob {
                size: 4_194_304,
                lines: 3,
                hold: None
            })
        );
        assert_eq!(
            Tool::parse("blob", &json!({"hold_ms": 5, "gate": 2}), 100).map(|t| match t {
                Tool::Blob { hold, .. } => hold,
                _ => None,
            }),
            Ok(Some(BlobHold {
                wait: Duration::from_millis(5),
                gate: 2
            }))
        );
        assert!(Tool::parse("blob", &json!({"gate": -1}), 100).is_err());
    }
}
