//! Requests and responses: opening streams, mapping a resume's cursor to its stream, reading
//! JSON-RPC calls and answers, and noticing re-opens and re-issues after a cut.
//!
//! Invariants:
//! - A POST carrying requests (or a body too large to read) opens a stream that owns its calls;
//!   a GET without `Last-Event-ID` opens a standalone stream; a GET with it is a resume leg of
//!   the stream that delivered or tore that id, or `unknown` when no single stream did.
//! - The cursor is judged once, at the resume request, by rule `cursor` (`cursor-ahead`,
//!   `cursor-behind`), after the resume leg is open with what the replay owes.
//! - A response is matched to its call by JSON-RPC id within the session; the first answer
//!   records `final-response` latency; every answer is handed to the rules (a second one is
//!   rule `duplicate_response`'s).

use super::engine::Engine;
use super::finding::FindingKind;
use super::finding::StreamRef;
use super::judge::Resume;
use super::ledger::{Ledger, Leg};
use super::rpc::{self, RpcMessage};
use super::rule::{AnswerSeen, NewCall, RequestView, ResumeOpened};
use super::stream::{Call, Origin, Stream, StreamKey};
use bytes::Bytes;
use tokio::time::Instant;

/// The facts of a request head the ledger uses.
#[derive(Debug)]
pub struct RequestFacts {
    pub conn: u64,
    pub seq: u64,
    pub method: String,
    pub path: String,
    pub session: Option<String>,
    pub last_event_id: Option<String>,
    pub protocol_version: Option<String>,
    pub body: Option<Bytes>,
    /// The JSON-RPC id the wire reported at a cut, when the request itself was never seen.
    pub rpc_id_hint: Option<String>,
    /// The `Idempotency-Key` header, if any.
    pub idempotency_key: Option<String>,
    /// See `Observation::Request::accepts_event_stream`.
    pub accepts_event_stream: bool,
}

impl Engine {
    pub fn on_request(&mut self, now: Instant, r: RequestFacts) {
        let msgs = match (&r.body, r.method.as_str()) {
            (Some(b), "POST") => rpc::parse(b),
            _ => Vec::new(),
        };
        let init_version = msgs.iter().find_map(|m| match m {
            RpcMessage::Request {
                method,
                protocol_version,
                ..
            } if method == "initialize" => protocol_version.clone(),
            _ => None,
        });
        let session = self.l.session_mut(&r.session, now);
        if let Some(v) = r.protocol_version.clone().or(init_version) {
            session.version = Some(v);
        }
        let version = session.version.clone();
        let view = RequestView {
            now,
            conn: r.conn,
            seq: r.seq,
            method: &r.method,
            path: &r.path,
            session: &r.session,
            last_event_id: r.last_event_id.as_deref(),
            msgs: &msgs,
            body: r.body.as_ref(),
            idempotency_key: r.idempotency_key.as_deref(),
            accepts_event_stream: r.accepts_event_stream,
        };
        self.rules.on_request(&mut self.l, &view);
        let reference = StreamRef {
            request: format!("{} {}", r.method, crate::wire::redact::target(&r.path)),
            rpc_ids: Vec::new(),
            conn: r.conn,
            seq: r.seq,
            ..StreamRef::default()
        }
        .on(self.l.protocol(r.conn));
        match (r.method.as_str(), &r.last_event_id) {
            ("GET", Some(cursor)) => self.on_resume(now, &r, cursor.clone(), reference, version),
            ("GET", None) => {
                let s = self.new_stream(&r, reference, Origin::Get, version, now);
                let key = self.l.add_stream(s, now);
                self.l.open_leg(&r, key, now, None, false);
            }
            ("POST", _) => {
                let calls: Vec<Call> = msgs
                    .iter()
                    .filter_map(|m| match m {
                        RpcMessage::Request {
                            id,
                            method,
                            params_hash,
                            progress_token,
                            ..
                        } => {
                            let mut c =
                                unanswered_call(id.clone(), method.clone(), *params_hash, &r);
                            c.progress_token = progress_token.clone();
                            Some(c)
                        }
                        _ => None,
                    })
                    .collect();
                let mut calls = calls;
                if let (true, Some(id)) = (calls.is_empty(), &r.rpc_id_hint) {
                    calls.push(unanswered_call(
                        id.clone(),
                        "(request not seen)".into(),
                        0,
                        &r,
                    ));
                }
                if calls.is_empty() && r.body.is_some() {
                    return;
                }
                let mut reference = reference;
                reference.rpc_ids = calls.iter().map(|c| c.id.clone()).collect();
                let mut s = self.new_stream(&r, reference, Origin::Post, version, now);
                s.calls = calls;
                let ids: Vec<String> = s.calls.iter().map(|c| c.id.clone()).collect();
                let seen = r.body.is_some();
                for c in s.calls.iter().filter(|_| seen) {
                    let call = NewCall {
                        now,
                        session: &r.session,
                        id: &c.id,
                        method: &c.method,
                        params_hash: c.params_hash,
                        key: r.idempotency_key.as_deref(),
                        conn: r.conn,
                        seq: r.seq,
                    };
                    self.rules.on_call(&mut self.l, &call);
                }
                let key = self.l.add_stream(s, now);
                self.rules.on_stream_opened(&mut self.l, key, &view);
                let session = self.l.session_mut(&r.session, now);
                for id in ids {
                    session.calls.insert(id, key);
                }
                self.l.open_leg(&r, key, now, None, false);
            }
            _ => {}
        }
    }

    /// A stream of `origin` for request `r`'s session, its id window the configured one.
    fn new_stream(
        &self,
        r: &RequestFacts,
        reference: StreamRef,
        origin: Origin,
        version: Option<String>,
        now: Instant,
    ) -> Stream {
        let mut s = Stream::new(
            r.session.clone(),
            reference,
            origin,
            version,
            now,
            self.l.cfg.ids_per_stream,
        );
        s.target = target_hash(&r.path);
        s
    }

    /// A resume GET: map the cursor, judge it, open the replay leg.
    fn on_resume(
        &mut self,
        now: Instant,
        r: &RequestFacts,
        cursor: String,
        reference: StreamRef,
        version: Option<String>,
    ) {
        let owners = self
            .l
            .sessions
            .get(&r.session)
            .and_then(|s| s.ids.get(&cursor))
            .cloned()
            .unwrap_or_default();
        // Without a session a resume is a GET of the same URL: a stream of another path (a
        // `favicon.ico` answered with the feed) is never the one resumed.
        let all = owners.len();
        let owners: Vec<StreamKey> = if r.session.is_none() {
            owners
                .into_iter()
                .filter(|k| self.l.same_path(*k, &r.path))
                .collect()
        } else {
            owners
        };
        let key = match owners.as_slice() {
            [k] => Some(*k),
            [] => None,
            many => self.l.pick_owner(many, &r.path, &cursor),
        };
        let Some(key) = key.filter(|k| self.l.streams.contains_key(k)) else {
            let here = if r.session.is_some() {
                "this session".to_string()
            } else {
                format!(
                    "a session-less stream of GET {}",
                    crate::wire::redact::target(&r.path)
                )
            };
            let reason = if owners.len() > 1 {
                format!("{} streams of {here} delivered id {cursor}", owners.len())
            } else if all > owners.len() {
                format!(
                    "id {cursor} was delivered only on session-less streams of another path, \
                     not on {here}"
                )
            } else if let Some(other) = self
                .l
                .opaque
                .get(&cursor)
                .and_then(|k| self.l.streams.get(k))
            {
                format!(
                    "id {cursor} was delivered on session {:?}, not on this one",
                    other.session
                )
            } else {
                format!(
                    "id {cursor} was never delivered on {here} as far as the proxy saw \
                     (traffic before it started, an id older than the events a stream keeps — \
                     the newest {} while it is open, {} and those since its last cursor once \
                     it ended — or an invented id)",
                    self.l.cfg.ids_per_stream, self.l.cfg.ended_events
                )
            };
            let s = self.new_stream(r, reference, Origin::Get, version, now);
            let key = self.l.add_stream(s, now);
            let f = self
                .l
                .finding(FindingKind::Unknown, key, now)
                .ids(vec![cursor])
                .detail(format!("resume not judged: {reason}"));
            self.l.emit(f);
            self.l.open_leg(r, key, now, None, true);
            return;
        };
        self.rules.on_resume(&mut self.l, key, &r.session);
        let Some(stream) = self.l.streams.get_mut(&key) else {
            return;
        };
        stream.deferred.clear();
        self.l.deferring.remove(&key);
        let unread = stream.unread.take();
        stream.hold_from = None;
        if stream.awaiting_reconnect {
            stream.awaiting_reconnect = false;
            if let Some(cut) = stream.cut_at {
                self.l
                    .histos
                    .record("client-reconnect", now.saturating_duration_since(cut));
            }
        }
        // A cursor inside a reset's unread window: the client never read what followed it,
        // so those events are undelivered again (owed by this resume and the next).
        let held = self
            .l
            .streams
            .get(&key)
            .and_then(|s| s.entry_of(&cursor))
            .map(|e| e.ordinal)
            .filter(|o| {
                unread.is_some_and(|(from, through)| from.is_none_or(|f| *o >= f) && *o < through)
            });
        if let Some(ordinal) = held {
            self.l.roll_back(key, ordinal);
        }
        let Some(stream) = self.l.streams.get(&key) else {
            return;
        };
        let snapshot = stream.last_ordinal();
        let torn = stream.torn.clone();
        let entry = stream.entry_of(&cursor).map(|e| e.ordinal);
        let resume = match entry {
            // The id is owned by this stream but not delivered: it is the torn event's (rule
            // `cursor`: `cursor-ahead`); nothing is owed from an unknown position.
            None => Resume::new(cursor.clone(), None, snapshot, Vec::new()),
            Some(ordinal) => {
                let mut owed = stream.owed_between(ordinal, snapshot);
                // A torn priming event (empty data) is never dispatched, so never owed.
                if let Some(tid) = torn
                    .filter(|t| t.cut.class != Some(crate::wire::SseClass::Priming))
                    .and_then(|t| t.id)
                    .filter(|t| !owed.contains(t))
                {
                    owed.push(tid);
                }
                Resume::new(cursor.clone(), Some(ordinal), snapshot, owed)
            }
        };
        self.l.open_leg(r, key, now, Some(resume), false);
        let opened = ResumeOpened {
            now,
            key,
            conn: r.conn,
            seq: r.seq,
            cursor: &cursor,
            entry,
            snapshot,
            unread,
        };
        self.rules.on_resume_leg(&mut self.l, &opened);
    }

    /// Matches JSON-RPC messages from the server (SSE data or a JSON body) to calls.
    pub fn on_server_messages(
        &mut self,
        now: Instant,
        key: StreamKey,
        data: &[u8],
        whole: bool,
        replayed_copy: bool,
    ) {
        let Some(session) = self.l.streams.get(&key).map(|s| s.session.clone()) else {
            return;
        };
        self.rules.on_delivery(&mut self.l, now, key, data, whole);
        let messages = if whole {
            rpc::parse(data)
        } else {
            rpc::parse_head(data).into_iter().collect()
        };
        for m in messages {
            let RpcMessage::Response {
                id,
                protocol_version,
                ..
            } = m
            else {
                continue;
            };
            // The stream's own call first: session-less clients reuse ids across streams.
            let own = self
                .l
                .streams
                .get(&key)
                .is_some_and(|s| s.calls.iter().any(|c| c.id == id));
            let owner = if own {
                Some(key)
            } else {
                self.l
                    .sessions
                    .get(&session)
                    .and_then(|s| s.calls.get(&id))
                    .copied()
            };
            let Some(owner) = owner else { continue };
            let Some(stream) = self.l.streams.get_mut(&owner) else {
                continue;
            };
            let opened = stream.opened_at;
            let Some(call) = stream.calls.iter_mut().find(|c| c.id == id) else {
                continue;
            };
            call.answers = call.answers.saturating_add(1);
            let answers = call.answers;
            let initialize = call.method == "initialize";
            if answers == 1 {
                // A request seen after its response (see `order`) has no latency to give.
                if let Some(d) = now.checked_duration_since(opened) {
                    self.l.histos.record("final-response", d);
                }
            }
            if initialize && let Some(v) = protocol_version {
                self.l.session_mut(&session, now).version = Some(v.clone());
                if let Some(s) = self.l.streams.get_mut(&owner) {
                    s.version = Some(v);
                }
            }
            let answer = AnswerSeen {
                now,
                key: owner,
                id: &id,
                answers,
                replayed_copy,
            };
            self.rules.on_answer(&mut self.l, &answer);
        }
    }
}

impl Ledger {
    pub fn open_leg(
        &mut self,
        r: &RequestFacts,
        key: StreamKey,
        now: Instant,
        resume: Option<Resume>,
        unmapped: bool,
    ) {
        if let Some(s) = self.streams.get_mut(&key) {
            if s.open_legs == 0 && s.ended_at.is_some() {
                self.ended.left();
            }
            s.open_legs += 1;
            s.ended_at = None;
        }
        let leg = Leg {
            stream: key,
            requested_at: now,
            status: None,
            sse: false,
            first_event: false,
            last_event_at: None,
            resume,
            unmapped_resume: unmapped,
            body_broken: false,
            late: false,
            blind: false,
        };
        self.legs.insert((r.conn, r.seq), leg);
    }

    /// True if and only if stream `key` was opened by a request for `path` (the raw target,
    /// query values included: the recorded `reference.request` names the parameters only).
    pub fn same_path(&self, key: StreamKey, path: &str) -> bool {
        self.streams
            .get(&key)
            .is_some_and(|s| s.target == target_hash(path))
    }

    /// Several streams of one session delivered the cursor's id (plain EventSource streams have
    /// no session, and counter ids repeat in every stream): the resume continues the stream of
    /// the same URL whose client holds that id as its cursor, preferring one awaiting a
    /// reconnect, then the one cut last. `None` when that leaves more than one.
    pub fn pick_owner(&self, owners: &[StreamKey], path: &str, cursor: &str) -> Option<StreamKey> {
        let same_url: Vec<StreamKey> = owners
            .iter()
            .copied()
            .filter(|k| self.same_path(*k, path))
            .collect();
        let narrow = |keys: Vec<StreamKey>, keep: &dyn Fn(&Stream) -> bool| {
            let kept: Vec<StreamKey> = keys
                .iter()
                .copied()
                .filter(|k| self.streams.get(k).is_some_and(keep))
                .collect();
            if kept.is_empty() { keys } else { kept }
        };
        let exact = |s: &Stream| s.last_event_id.as_deref() == Some(cursor);
        let holding = if same_url
            .iter()
            .any(|k| self.streams.get(k).is_some_and(exact))
        {
            narrow(same_url, &exact)
        } else {
            // A client cut by a reset may hold an earlier id of what the cut leg delivered.
            narrow(same_url, &|s| {
                s.unread.is_some_and(|(from, through)| {
                    s.entry_of(cursor).is_some_and(|e| {
                        from.is_none_or(|f| e.ordinal >= f) && e.ordinal <= through
                    })
                })
            })
        };
        let waiting = narrow(holding, &|s| s.awaiting_reconnect);
        match waiting.as_slice() {
            [k] => Some(*k),
            [] => None,
            many => {
                let latest = many
                    .iter()
                    .filter_map(|k| self.streams.get(k).and_then(|s| s.cut_at).map(|t| (t, *k)))
                    .max()?;
                let ties: Vec<StreamKey> = many
                    .iter()
                    .copied()
                    .filter(|k| self.streams.get(k).and_then(|s| s.cut_at) == Some(latest.0))
                    .collect();
                if let [one] = ties.as_slice() {
                    return Some(*one);
                }
                // Session-less twins (a broadcast feed: the same ids and data on every stream)
                // are interchangeable for the judgement: take the first.
                let hash = |k: &StreamKey| {
                    self.streams
                        .get(k)
                        .filter(|s| s.session.is_none())
                        .and_then(|s| s.entry_of(cursor))
                        .map(|e| e.hash)
                };
                let first = hash(ties.first()?)?;
                ties.iter()
                    .all(|k| hash(k) == Some(first))
                    .then(|| ties.iter().copied().min())
                    .flatten()
            }
        }
    }

    /// Moves stream `key` (opened without a session) into the session its response assigned.
    pub fn rehome(&mut self, key: StreamKey, session: Option<String>, now: Instant) {
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        let old = std::mem::replace(&mut stream.session, session.clone());
        let calls: Vec<String> = stream.calls.iter().map(|c| c.id.clone()).collect();
        let version = stream.version.clone();
        if let Some(s) = self.sessions.get_mut(&old) {
            s.streams = s.streams.saturating_sub(1);
            for id in &calls {
                if s.calls.get(id) == Some(&key) {
                    s.calls.remove(id);
                }
            }
        }
        let s = self.session_mut(&session, now);
        s.streams += 1;
        if s.version.is_none() {
            s.version = version;
        }
        for id in calls {
            s.calls.insert(id, key);
        }
    }
}

/// A call of request `r` that nothing has answered yet.
fn unanswered_call(id: String, method: String, params_hash: u64, r: &RequestFacts) -> Call {
    Call {
        id,
        method,
        params_hash,
        answers: 0,
        reported: false,
        replaced: false,
        key: r.idempotency_key.clone(),
        started: None,
        progress_token: None,
    }
}

/// The hash a stream keeps of the raw request target that opened it (never `0`).
fn target_hash(path: &str) -> u64 {
    crate::wire::http1::data_hash(path.as_bytes()).max(1)
}
