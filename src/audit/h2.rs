//! HTTP/2 on the audit: what a connection's protocol, an endpoint's `RST_STREAM` and a `GOAWAY`
//! mean for the exchanges (streams) they touch.
//!
//! Why: on an HTTP/2 connection (announced once by `Observation::Protocol`) every `seq` is a
//! stream id, exchanges interleave, and a stream can end without its connection — by the
//! proxy's stream-scoped cut (`events`), by an endpoint's `RST_STREAM`, or because the server's
//! `GOAWAY` says it will never process it. Everything else (resume legs matched by session and
//! `Last-Event-ID` across streams and connections, re-sends, the replay verdicts) is the same
//! audit as for HTTP/1.1; this file maps the HTTP/2-only facts onto the judgements that
//! already exist, so an HTTP/1.1 connection (never announced) is judged exactly as before.
//!
//! Precise rules:
//! - A reset written by the proxy (`by_proxy`) is not judged here: the proxy's fault records
//!   its own `Cut` naming the stream, and that cut is judged (`torn-cut`, resume, `abandoned`).
//!   Except a refusal: `RST_STREAM(REFUSED_STREAM)` the proxy wrote to the client on a stream
//!   that had no response (an h2 kind — `refuse_streams`, or `goaway`'s late stream — records
//!   no `Cut`): reported `stream-reset` naming the proxy, then not processed, as a server's
//!   refusal is (below), so the user learns the stream was refused and whether it was re-sent.
//! - An endpoint's reset of a stream whose exchange is still open is reported `stream-reset`
//!   (class info: who sent it, its code), then:
//!   - sent by the client: the client gave up on that stream, as a client that closes its
//!     connection today (the leg ends, not cleanly, not as a cut: no `abandoned` wait) —
//!     reported only while a call of the stream is unanswered or with an error code other
//!     than `CANCEL`/`NO_ERROR`: a client cancels the body of a stream it has its answers
//!     from (hyper, `fetch` and Go do when they stop reading before `END_STREAM`), which is
//!     no more a finding than closing a connection after the response;
//!   - sent by the server with `REFUSED_STREAM`: not processed (below);
//!   - sent by the server with any other code: the server ended the stream abnormally, judged
//!     as a server-side cut (no event torn by the proxy; its calls wait for an answer, a resume
//!     or a proven re-send, else `abandoned`, exactly as a cut call's).
//! - Not processed (`REFUSED_STREAM`, or a stream above the `last_stream` of a `GOAWAY` the
//!   client received, whether the server or the proxy wrote it): the stream ends as a cut does
//!   (its calls wait), with the reason kept on the stream (`Stream::h2_end`), so a call the
//!   client never re-sends is `abandoned` (class loss) and its detail says it was not
//!   processed; a proven re-send is `reissued` (the legitimate retry), and since nothing of a
//!   refused stream reached the client, never `reexecuted`. A request of a stream above that
//!   `last_stream` seen after the `GOAWAY` (sent before the client read it) is not processed
//!   either. Streams at or below it go on and are judged normally.
//! - A `GOAWAY` the client sent (towards the server) concerns server-initiated streams only:
//!   nothing of an exchange changes.
//!
//! Invariant: the per-connection state (`Ledger::protocols`, `Ledger::goaways`) is dropped when the
//! connection closes; findings keep the protocol in their `StreamRef`.

use super::engine::Engine;
use super::finding::FindingKind;
use super::ledger::Ledger;
use crate::vocab::{CutAction, Direction, WireProtocol};
use crate::wire::CutPoint;
use crate::wire::h2::ErrorCode;
use tokio::time::Instant;

impl Ledger {
    /// The protocol of connection `conn` (HTTP/1.1 unless announced).
    pub fn protocol(&self, conn: u64) -> WireProtocol {
        self.protocols
            .get(&conn)
            .copied()
            .unwrap_or(WireProtocol::Http1)
    }
}

/// The name of an error code as RFC 9113 spells it (`CANCEL`, `0x1a` for an unknown one).
fn code_name(code: u32) -> String {
    ErrorCode(code).name().to_ascii_uppercase()
}

impl Engine {
    /// Connection `conn` speaks `protocol` (announced before its first request).
    pub fn on_protocol(&mut self, conn: u64, protocol: WireProtocol) {
        if protocol == WireProtocol::Http1 {
            self.l.protocols.remove(&conn);
        } else {
            self.l.protocols.insert(conn, protocol);
        }
    }

    /// True if and only if `conn` was announced as HTTP/2.
    pub fn is_h2(&self, conn: u64) -> bool {
        self.l.protocols.contains_key(&conn)
    }

    /// Connection `conn` closed: its HTTP/2 state goes.
    pub fn h2_closed(&mut self, conn: u64) {
        self.l.protocols.remove(&conn);
        self.l.goaways.remove(&conn);
    }

    /// `RST_STREAM` of stream `seq` on `conn` (see the module doc).
    pub fn on_stream_reset(
        &mut self,
        now: Instant,
        conn: u64,
        seq: u64,
        direction: Direction,
        code: u32,
        by_proxy: bool,
    ) {
        let refused = direction == Direction::Downstream && code == ErrorCode::REFUSED_STREAM.0;
        let Some(leg) = self.l.legs.get(&(conn, seq)) else {
            return;
        };
        // Above a GOAWAY's last stream it is already judged not processed (`on_goaway`).
        let above_goaway = self.l.goaways.get(&conn).is_some_and(|last| seq > *last);
        if by_proxy && !(refused && leg.status.is_none() && !above_goaway) {
            return;
        }
        let key = leg.stream;
        // The client dropping a stream it has its answers from (hyper, `fetch` and Go cancel a
        // response body they stop reading before `END_STREAM`): done with it, as a client that
        // closes a connection after its response; nothing to report.
        let done = direction == Direction::Upstream
            && (code == ErrorCode::CANCEL.0 || code == ErrorCode::NO_ERROR.0)
            && self
                .l
                .streams
                .get(&key)
                .is_none_or(|s| s.unanswered().next().is_none());
        if done {
            self.end_leg(now, conn, seq, false, false);
            return;
        }
        let name = code_name(code);
        let (who, meaning) = match direction {
            Direction::Downstream if by_proxy => (
                "proxy (an h2 fault refused it)",
                "the server never processed this stream: its calls are the client's to re-send",
            ),
            Direction::Upstream => (
                "client",
                "the client gave up on this stream (judged as a client that closes its \
                 connection)",
            ),
            Direction::Downstream if code == ErrorCode::REFUSED_STREAM.0 => (
                "server",
                "the server did not process this stream: its calls are the client's to re-send",
            ),
            Direction::Downstream => (
                "server",
                "the server ended this stream abnormally (judged as a server-side cut)",
            ),
        };
        let f = self
            .l
            .finding(FindingKind::StreamReset, key, now)
            .detail(format!(
                "RST_STREAM({name}) sent by the {who} on h2 stream {seq} of connection {conn}: \
                 {meaning}"
            ));
        self.l.emit(f);
        match direction {
            Direction::Upstream => self.end_leg(now, conn, seq, false, false),
            Direction::Downstream if refused => {
                let by = if by_proxy { "the proxy" } else { "the server" };
                self.stream_ended_by(
                    now,
                    conn,
                    seq,
                    format!(
                        "not processed: {by} refused h2 stream {seq} (RST_STREAM(REFUSED_STREAM)), \
                         and the client never re-sent it"
                    ),
                )
            }
            Direction::Downstream => self.stream_ended_by(
                now,
                conn,
                seq,
                format!("the server reset h2 stream {seq} (RST_STREAM({name}))"),
            ),
        }
    }

    /// A `GOAWAY` on `conn` (see the module doc).
    pub fn on_goaway(
        &mut self,
        now: Instant,
        conn: u64,
        direction: Direction,
        last_stream: u64,
        code: u32,
        by_proxy: bool,
    ) {
        if direction == Direction::Upstream {
            return;
        }
        let last = self.l.goaways.entry(conn).or_insert(last_stream);
        *last = (*last).min(last_stream);
        let last = *last;
        let above: Vec<u64> = self
            .l
            .legs
            .range((conn, last.saturating_add(1))..=(conn, u64::MAX))
            .map(|(k, _)| k.1)
            .collect();
        let from = if by_proxy { "the proxy" } else { "the server" };
        let name = code_name(code);
        for seq in above {
            self.stream_ended_by(
                now,
                conn,
                seq,
                format!(
                    "not processed: {from} sent GOAWAY({name}) with last stream {last} below \
                     h2 stream {seq}, and the client never re-sent it"
                ),
            );
        }
    }

    /// The request of stream `seq` on `conn` was just applied: above a `GOAWAY`'s last stream
    /// it is not processed.
    pub fn h2_request_applied(&mut self, now: Instant, conn: u64, seq: u64) {
        let Some(last) = self.l.goaways.get(&conn).copied() else {
            return;
        };
        if seq > last {
            self.stream_ended_by(
                now,
                conn,
                seq,
                format!(
                    "not processed: h2 stream {seq} was opened after a GOAWAY with last stream \
                     {last}, and the client never re-sent it"
                ),
            );
        }
    }

    /// Stream `seq` on `conn` ended without the proxy cutting it (`why`): judged as a cut
    /// that tore nothing, so its calls wait for an answer, a resume or a proven re-send.
    fn stream_ended_by(&mut self, now: Instant, conn: u64, seq: u64, why: String) {
        let Some(key) = self.l.legs.get(&(conn, seq)).map(|l| l.stream) else {
            return;
        };
        if let Some(s) = self.l.streams.get_mut(&key) {
            s.h2_end = Some(why);
        }
        let point = CutPoint {
            h2_stream: Some(seq),
            ..CutPoint::default()
        };
        // `Upstream`: no body of the proxy's was in flight, nothing is torn.
        self.on_cut(now, conn, Direction::Upstream, CutAction::Reset, point);
    }
}
