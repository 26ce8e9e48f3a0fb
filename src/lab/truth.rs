//! What the lab emitted, per stream and leg, and which bug it injected: one half of the ground
//! truth the audit is measured against (the other half is [`crate::load::truth`]).
//!
//! Invariants:
//! - Recording is off unless [`crate::lab::LabConfig::truth`] holds a [`LabTruth`]; then every
//!   leg (a POST's stream, a resume GET, a plain-SSE GET) gets one [`LabLeg`] before its first
//!   byte is handed to the body, and every event is recorded in the order it is handed over.
//! - "Emitted" means handed to the HTTP body; whether it reached the client is the client's
//!   record. Nothing here is derived from the audit.
//! - Event classes come from the lab's own bytes (it wrote them): priming (empty data),
//!   progress (token and value), response (JSON-RPC id), other.
//! - The execution counter: every `tools/call` the lab starts running gets one [`Execution`]
//!   (in start order) at the moment its tool starts (for `append`, just before its side
//!   effect), and it is marked finished when the tool's result exists (handed to the SSE body,
//!   or written as the JSON body). How many times a call ran is the number of executions of
//!   its request ids; a call cut before it finished, and cancelled by the closed stream, stays
//!   unfinished.

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use serde_json::Value;

/// How the lab answered a leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    /// A POST's own stream.
    Stream,
    /// A resume served from the event after the cursor.
    Replay,
    /// `on-evicted = fresh`: a new priming event and a greeting, no replay.
    Fresh,
    /// `on-evicted = replay-from-oldest`: a replay starting after a silent gap.
    ReplayFromOldest,
    /// HTTP 410: the cursor was evicted.
    Gone,
    /// A plain-SSE GET (no MCP).
    Plain,
}

/// A deviation the lab injected on purpose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "bug")]
pub enum Injected {
    /// These sequence numbers went out in this (wrong) order.
    Reordered {
        /// Sequence numbers in the order sent.
        seqs: Vec<u64>,
    },
    /// This event went out twice.
    Duplicated {
        /// Its sequence number.
        seq: u64,
    },
    /// These events were never sent on the leg.
    Dropped {
        /// Their sequence numbers.
        seqs: Vec<u64>,
    },
    /// The leg was served from another session's stream.
    CrossSession {
        /// The session the events belong to.
        session: String,
        /// Its stream.
        stream: u64,
    },
    /// The response was dropped and the body ended cleanly.
    FinalLost {
        /// The response's sequence number.
        seq: u64,
    },
}

/// The class of an emitted event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "class")]
pub enum EventClass {
    /// `id` + empty data: never dispatched, never owed.
    Priming,
    /// A `notifications/progress`.
    Progress {
        /// The progress value.
        value: f64,
    },
    /// A JSON-RPC response.
    Response {
        /// Its id (JSON text).
        id: String,
    },
    /// Anything else (greeting, error, end, plain-SSE data).
    Other,
}

/// One event handed to a body.
#[derive(Debug, Clone, Serialize)]
pub struct Emitted {
    /// The `id:` value, if any.
    pub id: Option<String>,
    /// The session the event belongs to (may differ from the leg's: shared store).
    pub session: String,
    /// The stream it belongs to.
    pub stream: u64,
    /// Its position in that stream.
    pub seq: u64,
    /// Its class.
    pub class: EventClass,
    /// XXH3-64 of its data (data lines joined with LF), as a client computes it.
    pub data_hash: u64,
}

/// One leg as the lab served it.
#[derive(Debug, Clone, Serialize)]
pub struct LabLeg {
    /// The session the request named (empty: none).
    pub session: String,
    /// `POST` or `GET`.
    pub method: &'static str,
    /// The stream the leg continues (POST: the stream it opened).
    pub stream: u64,
    /// JSON-RPC ids of the POST's calls (JSON text).
    pub request_ids: Vec<String>,
    /// The `Last-Event-ID` of a resume.
    pub cursor: Option<String>,
    /// How the lab answered.
    pub answer: Answer,
    /// Deviations injected on this leg.
    pub injected: Vec<Injected>,
    /// Events in the order handed to the body.
    pub emitted: Vec<Emitted>,
}

/// One run of a tool: the lab's execution counter (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Execution {
    /// The JSON-RPC id of the request that ran it (JSON text).
    pub request_id: String,
    /// The tool's name.
    pub tool: String,
    /// Whether the tool's result exists (it was not cancelled first).
    pub finished: bool,
}

/// The lab's record of every leg and every tool execution (shared by all connections of one
/// server).
#[derive(Debug, Default)]
pub struct LabTruth {
    legs: Mutex<Vec<LabLeg>>,
    executions: Mutex<Vec<Execution>>,
}

/// A handle on one leg's record.
#[derive(Debug, Clone)]
pub struct LegHandle {
    truth: Arc<LabTruth>,
    index: usize,
}

impl LabTruth {
    fn lock(&self) -> MutexGuard<'_, Vec<LabLeg>> {
        self.legs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens the record of a new leg.
    pub fn open(self: &Arc<Self>, leg: LabLeg) -> LegHandle {
        let mut legs = self.lock();
        legs.push(leg);
        LegHandle {
            truth: Arc::clone(self),
            index: legs.len() - 1,
        }
    }

    /// A copy of every leg so far.
    pub fn legs(&self) -> Vec<LabLeg> {
        self.lock().clone()
    }

    /// Records that the tool `tool` started running for request `request_id` (JSON text).
    pub fn started(&self, request_id: &str, tool: &str) {
        self.runs().push(Execution {
            request_id: request_id.to_owned(),
            tool: tool.to_owned(),
            finished: false,
        });
    }

    /// Marks the latest unfinished execution of `request_id` finished (its result exists).
    pub fn finished(&self, request_id: &str) {
        let mut runs = self.runs();
        if let Some(e) = runs
            .iter_mut()
            .rev()
            .find(|e| e.request_id == request_id && !e.finished)
        {
            e.finished = true;
        }
    }

    /// A copy of every execution so far, in start order.
    pub fn executions(&self) -> Vec<Execution> {
        self.runs().clone()
    }

    fn runs(&self) -> MutexGuard<'_, Vec<Execution>> {
        self.executions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes every leg as one JSON line.
    pub fn write_jsonl(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for leg in self.lock().iter() {
            serde_json::to_writer(&mut *out, leg)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }
}

impl LegHandle {
    fn with(&self, f: impl FnOnce(&mut LabLeg)) {
        if let Some(leg) = self.truth.lock().get_mut(self.index) {
            f(leg);
        }
    }

    /// Records an injected deviation.
    pub fn inject(&self, what: Injected) {
        self.with(|l| l.injected.push(what));
    }

    /// Records the event `bytes` (`seq` of `stream` of `session`) as handed to the body.
    pub fn emit(&self, session: &str, stream: u64, seq: u64, bytes: &[u8]) {
        let (id, data) = parse_event(bytes);
        let class = classify(id.is_some(), &data);
        let e = Emitted {
            id,
            session: session.to_owned(),
            stream,
            seq,
            class,
            data_hash: xxhash_rust::xxh3::xxh3_64(&data),
        };
        self.with(|l| l.emitted.push(e));
    }
}

/// The `id` and the data (lines joined with LF) of one encoded event.
pub fn parse_event(bytes: &[u8]) -> (Option<String>, Vec<u8>) {
    let mut id = None;
    let mut data: Vec<u8> = Vec::new();
    let mut first = true;
    for line in bytes.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let (name, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"id" => id = Some(String::from_utf8_lossy(value).into_owned()),
            b"data" => {
                if !first {
                    data.push(b'\n');
                }
                first = false;
                data.extend_from_slice(value);
            }
            _ => {}
        }
    }
    (id, data)
}

fn classify(has_id: bool, data: &[u8]) -> EventClass {
    if data.is_empty() {
        return if has_id {
            EventClass::Priming
        } else {
            EventClass::Other
        };
    }
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return EventClass::Other;
    };
    if v.get("method").and_then(Value::as_str) == Some("notifications/progress") {
        let value = v["params"]["progress"].as_f64().unwrap_or(f64::NAN);
        return EventClass::Progress { value };
    }
    match v.get("id") {
        Some(id) if v.get("result").is_some() || v.get("error").is_some() => {
            EventClass::Response { id: id.to_string() }
        }
        _ => EventClass::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_parsed_and_classified_in_both_line_endings() {
        let (id, data) =
            parse_event(b"event: message\r\nid: 1-2\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n");
        assert_eq!(
            (id.as_deref(), &data[..]),
            (Some("1-2"), &b"{\"a\":\n1}"[..])
        );
        assert_eq!(classify(true, b""), EventClass::Priming);
        let p = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":3}}"#;
        assert_eq!(classify(true, p), EventClass::Progress { value: 3.0 });
        let r = br#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        assert_eq!(classify(true, r), EventClass::Response { id: "7".into() });
    }

    #[test]
    fn the_execution_counter_records_each_run_and_finishes_the_latest() {
        let t = LabTruth::default();
        t.started("7", "append");
        t.finished("7");
        t.started("8", "append");
        t.started("7", "append");
        t.finished("7");
        let runs = t.executions();
        let of7: Vec<bool> = runs
            .iter()
            .filter(|e| e.request_id == "7")
            .map(|e| e.finished)
            .collect();
        assert_eq!(of7, [true, true]);
        assert_eq!(runs.len(), 3);
        assert!(!runs[1].finished, "id 8 never finished");
    }
}
