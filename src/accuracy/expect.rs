//! The truth → expected-findings contract: from what the lab emitted ([`LabLeg`]) and what each
//! client dispatched ([`ClientLeg`]), the finding kinds a correct audit must report for a run.
//! Never from the audit's output.
//!
//! Legs are matched by what both sides know: a POST by (session, request id), a resume by
//! (session, `Last-Event-ID`), in order (of several lab legs for one request — a sending lost
//! with its connection may have reached the lab first — the one that emitted the client's first
//! dispatched event); a plain GET by its cursor. A dispatched event gets the
//! lab's identity (session, stream, seq, class) by matching, in order, its id and data hash
//! against the events the lab handed to that leg. A logical stream is one client request (a
//! POST and its resumes) or, for the EventSource-like client, one URL.
//!
//! Rules (per logical stream unless said otherwise):
//! - `torn-cut`: a leg stopped by its connection (error or clean end) with bytes of an
//!   undispatched event in hand.
//! - `replay-exact`: a resume the lab answered with a replay (no injected bug, or only a drop
//!   no observer can see: opaque ids and no later progress value; a replay from
//!   the oldest retained event counts when nothing between the cursor and it was lost), sent
//!   with the client's newest cursor, not cut, that delivered at least one event and everything
//!   the lab handed to it, with nothing wrong found on it.
//! - `explicit-loss`: a resume answered 410, or an `event: error` dispatched.
//! - `fresh-stream`: a resume the lab answered as a fresh stream.
//! - `cursor-ahead` / `cursor-behind`: a resume whose cursor names an id the client never fully
//!   got / an event older than the newest one it fully got (dispatched, or committed: priming) —
//!   except in the unread window of a reset: after a leg ended by a connection reset, a cursor
//!   that is that leg's own cursor or an id it dispatched is not behind (the client's kernel
//!   may have discarded what the proxy wrote after it); the replay is then judged from that
//!   cursor (what the reset leg delivered after it is owed again, not a duplicate). The client
//!   records no read times, so the window is the whole leg, and the rig runs the audit with an
//!   `rst_unread` longer than any run to match (`run`).
//! - `replay-reorder`: an event dispatched for the first time after a later event of the
//!   same stream.
//! - `replay-duplicate`: an event dispatched again within one leg, or at/before the leg's
//!   cursor (a repeat caused by a stale cursor is the client's: `cursor-behind` only).
//! - `replay-gap`: on a replay leg, an event between the cursor and the newest event the leg
//!   delivered that the client never got (priming is never owed); with opaque ids only when at
//!   least two progress values came before it (the constant step) and a later one jumps over
//!   it (progress need not reach its total, so a response right after the gap shows nothing).
//! - `cross-stream`: an event of another session's or stream's store dispatched, when the wire
//!   can show it by a name unique by construction, never by content: the event is of another
//!   stream of the same session (ids are unique per session), or its id is one of the lab's
//!   opaque ids (uuid-like, unique across sessions), or it is a progress notification of
//!   another session (its token names another client's call: tearline's load client makes
//!   tokens unique per worker, and each client here is its own worker). Another session's
//!   response or greeting alone is invisible: its id may equal one of this session's.
//! - `duplicate-response`: one response event dispatched twice (over all clients), or two
//!   responses for one request.
//! - `silent-empty`: a 200 replay that handed over nothing, ended cleanly, the call unanswered.
//! - `pending-call`: a call without any response dispatched whose last leg ended cleanly (the
//!   body's end, or the client stopping at a discontinuity) with no response handed to it, and
//!   the client sent nothing afterwards (no resume, no re-issue).
//! - `reissued`: a call that never had a response dispatched (a lost call) is re-sent, and a
//!   later POST of the client proves it: it carries the call's non-empty `Idempotency-Key` (the
//!   strict client sends one per logical call, the same on a re-issue in a renegotiated
//!   session). A call re-sent after its response arrived (e.g. to retry an invalid result) is
//!   not a re-issue; without the marker nothing on the wire proves a re-send; nor is a call
//!   whose first POST never reached the server (lost in flight with its connection).
//! - `abandoned`: a call whose POST stream reached the client (a head) and never had a
//!   response dispatched, whose last leg did not end cleanly (a cut, a failed resume), and
//!   that the client never sent again (its attempts ran out: on h2, the sendings lost with a
//!   connection another session's cut took down count too).
//! - Nothing else is ever expected (`cursor-missing`, `unknown`, `unproven-resend`).

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::lab::truth::{Answer, Emitted, EventClass, LabLeg};
use crate::load::truth::ClientLeg;

/// The ground truth of one run.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    /// Every leg the lab served.
    pub lab: Vec<LabLeg>,
    /// Every leg of every client, per client, in send order.
    pub clients: Vec<Vec<ClientLeg>>,
    /// The harness's cuts end connections with a TCP reset (an HTTP/1.1 or connection-scope
    /// cut whose action is `reset`): a leg they ended with any I/O error ended by that reset,
    /// whatever the client's stack made of it (hyper's h2 client reports a reset it meets while
    /// writing as a broken pipe, `io-closed`), and the kernel discarded what it had not read.
    pub tcp_resets: bool,
}

/// Whether the wire can show that `e`, an event of another stream dispatched on a stream of
/// session `home_session`, is not that stream's (the `cross-stream` rule of the module doc).
fn shows_cross(e: &Emitted, home_session: &str) -> bool {
    let opaque = |id: &str| id.len() >= 16 && !id.bytes().all(|b| b.is_ascii_digit());
    e.session == home_session
        || matches!(e.class, EventClass::Progress { .. })
        || e.id.as_deref().is_some_and(opaque)
}

/// The client's stop when its connection was reset (an I/O error: ECONNRESET; an orderly close
/// in mid-body is `truncated` or, on HTTP/2, `io-closed`; an h2 stream reset `h2-reset-<code>`).
const RESET_STOP: &str = "io";

/// The client's stop for an I/O error other than a reset (see [`Truth::tcp_resets`]).
const CLOSED_STOP: &str = "io-closed";

/// True if leg `c` ended by a TCP reset (see [`Truth::tcp_resets`]).
fn reset_ended(t: &Truth, c: &ClientLeg) -> bool {
    c.stop == RESET_STOP || (t.tcp_resets && c.stop == CLOSED_STOP)
}

/// Stops that mean the client, not the connection, ended the leg.
const CLIENT_STOPS: [&str; 7] = [
    "answered",
    "complete",
    "discontinuity",
    "error-event",
    "json",
    "refused",
    "side",
];

struct Matched<'a> {
    client: &'a ClientLeg,
    lab: Option<&'a LabLeg>,
    ident: Vec<Option<&'a Emitted>>,
}

fn match_client<'a>(
    legs: &'a [ClientLeg],
    lab: &'a [LabLeg],
    used: &mut [bool],
) -> Vec<Matched<'a>> {
    legs.iter()
        .map(|c| {
            let fits = |i: usize, l: &LabLeg| {
                !used[i]
                    && l.session == c.session
                    && l.method == c.method
                    && match c.method.as_str() {
                        "POST" => c
                            .request_id
                            .is_some_and(|r| l.request_ids.contains(&r.to_string())),
                        _ => l.cursor == c.cursor,
                    }
            };
            // Of the lab's legs for this request (a sending lost with its connection may have
            // reached the lab before this one), the one that emitted what the client got first.
            let first = c.dispatched.first();
            let emitted_first = |l: &LabLeg| {
                first.is_none_or(|d| {
                    l.emitted.iter().any(|e| {
                        e.data_hash == d.data_hash && e.id.as_ref().is_none_or(|id| *id == d.id)
                    })
                })
            };
            let found = c.status.and_then(|_| {
                let mut fitting = lab.iter().enumerate().filter(|(i, l)| fits(*i, l));
                let first_fit = fitting.clone().next().map(|(i, _)| i);
                fitting
                    .find(|(_, l)| emitted_first(l))
                    .map(|(i, _)| i)
                    .or(first_fit)
            });
            if let Some(i) = found {
                used[i] = true;
            }
            let l = found.map(|i| &lab[i]);
            let mut at = 0;
            let ident = c
                .dispatched
                .iter()
                .map(|d| {
                    let l = l?;
                    let j = l.emitted[at.min(l.emitted.len())..].iter().position(|e| {
                        e.class != EventClass::Priming
                            && e.data_hash == d.data_hash
                            && e.id.as_ref().is_none_or(|id| *id == d.id)
                    })? + at;
                    at = j + 1;
                    Some(&l.emitted[j])
                })
                .collect();
            Matched {
                client: c,
                lab: l,
                ident,
            }
        })
        .collect()
}

fn counter_like(id: &str) -> bool {
    id.bytes().any(|b| b.is_ascii_digit()) && id.bytes().all(|b| b.is_ascii_digit() || b == b'-')
}

type Key<'a> = (&'a str, u64, u64);

fn key(e: &Emitted) -> Key<'_> {
    (e.session.as_str(), e.stream, e.seq)
}

/// The finding kinds the truth requires.
pub fn expected(t: &Truth) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut used = vec![false; t.lab.len()];
    let mut response_hits: HashMap<Key<'_>, u32> = HashMap::new();
    let matched: Vec<Vec<Matched<'_>>> = t
        .clients
        .iter()
        .map(|legs| match_client(legs, &t.lab, &mut used))
        .collect();
    for legs in &matched {
        let mut streams: Vec<(Option<u64>, String, Vec<usize>)> = Vec::new();
        for (i, m) in legs.iter().enumerate() {
            let rid = m.client.request_id;
            let path = &m.client.path;
            let open = m.client.method == "POST" || rid.is_none() && m.client.cursor.is_none();
            match streams
                .iter_mut()
                .rev()
                .find(|s| s.0 == rid && s.1 == *path)
            {
                Some(s) if !open => s.2.push(i),
                _ => streams.push((rid, path.clone(), vec![i])),
            }
        }
        let last_leg = legs.len().saturating_sub(1);
        for (rid, _, idx) in &streams {
            let answered = stream_rules(t, legs, idx, *rid, last_leg, &mut out, &mut response_hits);
            let last = idx.last().copied().unwrap_or(0);
            let key = idx
                .first()
                .and_then(|&i| legs[i].client.idempotency_key.as_deref())
                .filter(|k| !k.is_empty());
            // A re-send proves only what reached the server: one lost in flight with its
            // connection (on HTTP/2 another session's cut may take it down) is not on the wire.
            let proven = key.is_some_and(|k| {
                legs[last + 1..].iter().any(|m| {
                    m.client.method == "POST"
                        && m.client.idempotency_key.as_deref() == Some(k)
                        && reached_server(t, legs, m.client)
                })
            });
            // The lost call itself must be on the wire: a POST the server never received (a
            // connection cut while it was in flight, on HTTP/2 by another stream's cut) shows
            // no call to the proxy, so its re-send re-issues nothing the wire saw.
            let first = idx.first().map(|&i| legs[i].client);
            let reached = first.is_some_and(|c| reached_server(t, legs, c));
            if rid.is_some() && !answered && proven && reached {
                out.insert("reissued".to_owned());
            }
            // Given up after a cut: the call's stream reached the client (a head), it never
            // had an answer, its last leg did not end cleanly (a cut, a failed resume), and
            // the client sent nothing more for it (its attempts ran out).
            let given_up = first.is_some_and(|c| c.method == "POST" && c.status.is_some())
                && !legs[last].client.answered
                && !matches!(
                    legs[last].client.stop.as_str(),
                    "clean-end" | "discontinuity" | "answered"
                );
            if rid.is_some() && !answered && !proven && given_up {
                out.insert("abandoned".to_owned());
            }
        }
    }
    if response_hits.values().any(|&n| n > 1) {
        out.insert("duplicate-response".to_owned());
    }
    out
}

/// Whether a client's POST `c` reached the server: it got a head, or the lab served more POSTs
/// of its (session, request id) than the client got heads for (a sending whose connection
/// died after the lab took it).
fn reached_server(t: &Truth, legs: &[Matched<'_>], c: &ClientLeg) -> bool {
    if c.status.is_some() {
        return true;
    }
    let Some(rid) = c.request_id.map(|r| r.to_string()) else {
        return false;
    };
    let served = t
        .lab
        .iter()
        .filter(|l| l.method == "POST" && l.session == c.session)
        .filter(|l| l.request_ids.contains(&rid))
        .count();
    let answered_posts = legs
        .iter()
        .map(|m| m.client)
        .filter(|l| l.method == "POST" && l.status.is_some())
        .filter(|l| l.session == c.session && l.request_id == c.request_id)
        .count();
    served > answered_posts
}

#[allow(clippy::too_many_arguments)]
fn stream_rules<'a>(
    t: &'a Truth,
    legs: &[Matched<'a>],
    idx: &[usize],
    rid: Option<u64>,
    last_leg: usize,
    out: &mut BTreeSet<String>,
    response_hits: &mut HashMap<Key<'a>, u32>,
) -> bool {
    let mut say = |k: &str| {
        out.insert(k.to_owned());
    };
    let Some(home) = idx
        .iter()
        .find_map(|&i| legs[i].lab)
        .map(|l| (l.session.as_str(), l.stream))
    else {
        for &i in idx {
            let c = legs[i].client;
            if c.partial && !CLIENT_STOPS.contains(&c.stop.as_str()) {
                say("torn-cut");
            }
        }
        return false;
    };
    let id_seq: HashMap<&str, u64> = t
        .lab
        .iter()
        .flat_map(|l| l.emitted.iter())
        .filter(|e| (e.session.as_str(), e.stream) == home)
        .filter_map(|e| e.id.as_deref().map(|id| (id, e.seq)))
        .collect();
    let mut got_ids: HashSet<&str> = HashSet::new();
    let mut max_got: Option<u64> = None;
    let mut seen: HashSet<Key<'a>> = HashSet::new();
    let mut max_first: Option<u64> = None;
    let mut progress_seqs: Vec<u64> = Vec::new();
    let mut responses: HashSet<Key<'a>> = HashSet::new();
    let mut answered = false;
    let rid_text = rid.map(|r| r.to_string());
    // After a leg ended by a reset: its own cursor and the ids it dispatched (a resume from
    // any of them is judged from there, not as behind), and the events it delivered.
    let mut rst_window: Option<HashSet<&'a str>> = None;
    let mut rst_delivered: HashSet<Key<'a>> = HashSet::new();
    for &i in idx {
        let m = &legs[i];
        let c = m.client;
        let answer = m.lab.map(|l| l.answer);
        let injected = m.lab.is_some_and(|l| !l.injected.is_empty());
        let cursor_seq = c.cursor.as_deref().and_then(|cur| id_seq.get(cur).copied());
        let mut wrong = false;
        let mut stale = false;
        if let Some(cur) = c.cursor.as_deref()
            && c.status.is_some()
        {
            if !got_ids.contains(cur) {
                say("cursor-ahead");
                wrong = true;
            }
            if let (Some(cs), Some(mg)) = (cursor_seq, max_got)
                && cs < mg
            {
                if rst_window.as_ref().is_some_and(|w| w.contains(cur)) {
                    // The unread window of a reset: what the cut leg delivered after the
                    // cursor may never have reached the client; it is owed again.
                    seen.retain(|k| k.2 <= cs || (k.0, k.1) != home);
                    for (k, n) in response_hits.iter_mut() {
                        if k.2 > cs && (k.0, k.1) == home && *n > 0 && rst_delivered.contains(k) {
                            *n -= 1;
                        }
                    }
                    responses.retain(|k| !rst_delivered.contains(k));
                    max_first = max_first.map(|m| m.min(cs));
                    max_got = Some(cs);
                    progress_seqs.retain(|&s| s <= cs);
                } else {
                    say("cursor-behind");
                    stale = true;
                }
            }
            match answer {
                Some(Answer::Gone) => say("explicit-loss"),
                Some(Answer::Fresh) => say("fresh-stream"),
                _ => {}
            }
        }
        let mut in_leg: HashSet<Key<'a>> = HashSet::new();
        let mut leg_max: Option<u64> = None;
        for (d, e) in c.dispatched.iter().zip(&m.ident) {
            if d.event_type == "error" {
                say("explicit-loss");
            }
            if !d.id.is_empty() {
                got_ids.insert(d.id.as_str());
            }
            let Some(e) = e else { continue };
            let k = key(e);
            if let EventClass::Response { id } = &e.class {
                *response_hits.entry(k).or_insert(0) += 1;
                responses.insert(k);
                if Some(id) == rid_text.as_ref() {
                    answered = true;
                }
            }
            if (e.session.as_str(), e.stream) != home {
                if shows_cross(e, home.0) {
                    say("cross-stream");
                }
                wrong = true;
                continue;
            }
            if seen.contains(&k) {
                let server_made = in_leg.contains(&k) || cursor_seq.is_some_and(|cs| e.seq <= cs);
                if server_made || !stale {
                    say("replay-duplicate");
                    wrong = true;
                }
            } else {
                if max_first.is_some_and(|mf| e.seq < mf) {
                    say("replay-reorder");
                    wrong = true;
                }
                max_first = max_first.max(Some(e.seq));
                if matches!(e.class, EventClass::Progress { .. }) {
                    progress_seqs.push(e.seq);
                }
            }
            seen.insert(k);
            in_leg.insert(k);
            leg_max = leg_max.max(Some(e.seq));
            max_got = max_got.max(Some(e.seq));
        }
        if !c.committed.is_empty() {
            got_ids.insert(c.committed.as_str());
            if let Some(&s) = id_seq.get(c.committed.as_str()) {
                max_got = max_got.max(Some(s));
            }
        }
        let replay = matches!(
            answer,
            Some(Answer::Replay | Answer::ReplayFromOldest | Answer::Plain)
        );
        let mut hidden_gap = false;
        if replay && let (Some(cs), Some(lm)) = (cursor_seq, leg_max) {
            let missing = (cs + 1..lm).find(|s| !seen.contains(&(home.0, home.1, *s)));
            if let Some(gap) = missing {
                // Opaque ids hide a gap unless progress values show it: a constant step
                // before it and a later progress value jumping over it (a response right
                // after the gap proves nothing: progress need not reach its total).
                let visible = c.cursor.as_deref().is_some_and(counter_like)
                    || progress_seqs.iter().filter(|&&s| s < gap).count() >= 2
                        && progress_seqs.iter().any(|&s| s > gap);
                if visible {
                    say("replay-gap");
                    wrong = true;
                } else {
                    hidden_gap = true;
                }
            }
        }
        // A gap no observer of the wire can see leaves the replay exact as far as the wire
        // shows: `replay-exact` is then expected (the lab's drop is its only deviation).
        let injected = injected
            && !(hidden_gap
                && m.lab.is_some_and(|l| {
                    l.injected
                        .iter()
                        .all(|i| matches!(i, crate::lab::truth::Injected::Dropped { .. }))
                }));
        let cut = c.partial || !CLIENT_STOPS.contains(&c.stop.as_str()) && c.stop != "clean-end";
        if c.partial && !CLIENT_STOPS.contains(&c.stop.as_str()) {
            say("torn-cut");
        }
        let handed = m.lab.map_or(0, |l| {
            l.emitted
                .iter()
                .filter(|e| e.class != EventClass::Priming)
                .count()
        });
        let got = m.ident.iter().filter(|e| e.is_some()).count();
        if c.cursor.is_some()
            && replay
            && !injected
            && !wrong
            && !stale
            && !cut
            && got > 0
            && got == handed
        {
            say("replay-exact");
        }
        if c.cursor.is_some()
            && matches!(answer, Some(Answer::Replay | Answer::ReplayFromOldest))
            && handed == 0
            && c.stop == "clean-end"
            && !answered
        {
            say("silent-empty");
        }
        if reset_ended(t, c) {
            let mut w: HashSet<&'a str> = c.dispatched.iter().map(|d| d.id.as_str()).collect();
            w.extend(c.cursor.as_deref());
            rst_window = Some(w);
            rst_delivered = in_leg;
        } else {
            rst_window = None;
            rst_delivered.clear();
        }
    }
    if responses.len() > 1 {
        say("duplicate-response");
    }
    let last = idx.last().map(|&i| &legs[i]);
    if let (Some(_), Some(m)) = (rid, last) {
        let lab_sent_response = m.lab.is_some_and(|l| {
            l.emitted
                .iter()
                .any(|e| matches!(e.class, EventClass::Response { .. }))
        });
        let ended_cleanly = m.client.status == Some(200)
            && matches!(m.client.stop.as_str(), "clean-end" | "discontinuity")
            && !m.client.partial;
        let nothing_after = idx.last() == Some(&last_leg);
        if !answered && ended_cleanly && !lab_sent_response && nothing_after {
            say("pending-call");
        }
    }
    answered
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::truth::Dispatched;

    fn ev(seq: u64) -> Emitted {
        let class = match seq {
            0 => EventClass::Priming,
            5 => EventClass::Response { id: "1".into() },
            s => EventClass::Progress { value: s as f64 },
        };
        Emitted {
            id: Some(format!("1-{seq}")),
            session: "s".into(),
            stream: 1,
            seq,
            class,
            data_hash: seq,
        }
    }

    fn lab(method: &'static str, cursor: Option<&str>, seqs: &[u64]) -> LabLeg {
        LabLeg {
            session: "s".into(),
            method,
            stream: 1,
            request_ids: if method == "POST" {
                vec!["1".into()]
            } else {
                vec![]
            },
            cursor: cursor.map(str::to_owned),
            answer: if method == "POST" {
                Answer::Stream
            } else {
                Answer::Replay
            },
            injected: Vec::new(),
            emitted: seqs.iter().map(|&s| ev(s)).collect(),
        }
    }

    fn client(
        method: &str,
        cursor: Option<&str>,
        seqs: &[u64],
        partial: bool,
        stop: &str,
    ) -> ClientLeg {
        let dispatched: Vec<Dispatched> = seqs
            .iter()
            .filter(|&&s| s != 0)
            .map(|&s| Dispatched {
                id: format!("1-{s}"),
                has_id: true,
                event_type: "message".into(),
                data_hash: s,
            })
            .collect();
        ClientLeg {
            session: "s".into(),
            method: method.into(),
            path: "/mcp".into(),
            request_id: Some(1),
            cursor: cursor.map(str::to_owned),
            status: Some(200),
            committed: seqs.last().map(|s| format!("1-{s}")).unwrap_or_default(),
            dispatched,
            partial,
            stop: stop.into(),
            ..ClientLeg::default()
        }
    }

    /// A POST cut (partial event in hand) after events 0..=2, then a resume from `1-2` whose
    /// lab leg hands over `replayed` and whose client dispatches `got`.
    fn run(replayed: &[u64], got: &[u64], stop: &str) -> BTreeSet<String> {
        let mut resume = lab("GET", Some("1-2"), replayed);
        if replayed != [3, 4, 5] {
            resume
                .injected
                .push(crate::lab::truth::Injected::Dropped { seqs: vec![] });
        }
        let t = Truth {
            lab: vec![lab("POST", None, &[0, 1, 2, 3]), resume],
            clients: vec![vec![
                client("POST", None, &[0, 1, 2], true, "reset"),
                client("GET", Some("1-2"), got, false, stop),
            ]],
            tcp_resets: false,
        };
        expected(&t)
    }

    fn set(kinds: &[&str]) -> BTreeSet<String> {
        kinds.iter().map(|k| (*k).to_owned()).collect()
    }

    #[test]
    fn another_sessions_event_is_visible_only_by_a_name_unique_by_construction() {
        let other = |seq: u64, id: &str| Emitted {
            id: Some(id.to_owned()),
            session: "a".into(),
            ..ev(seq)
        };
        // Its progress token names the other client's call; a uuid-like id is unique.
        assert!(shows_cross(&other(3, "1-3"), "b"));
        assert!(shows_cross(
            &other(5, "9b2f4c1e-7d3a-4e0b-8c55-1f2e3d4c5b6a"),
            "b"
        ));
        // Its response under a per-session counter id: the ids may equal this session's.
        assert!(!shows_cross(&other(5, "1-5"), "b"));
        // Another stream of the same session: ids are unique per session.
        assert!(shows_cross(&other(5, "1-5"), "a"));
    }

    /// A call sent, lost with its connection (no answer: the client sends it again on a fresh
    /// one, with the same `Idempotency-Key`), then answered on stream 2; the lab served the
    /// lost sending too when `lost_reached`.
    fn resent(lost_reached: bool) -> BTreeSet<String> {
        let on_two = |mut e: Emitted| {
            e.stream = 2;
            e.id = Some(format!("2-{}", e.seq));
            e
        };
        let mut answered = lab("POST", None, &[0, 1, 2, 3, 4, 5]);
        answered.stream = 2;
        answered.emitted = answered.emitted.into_iter().map(on_two).collect();
        let mut lab_legs = vec![answered];
        if lost_reached {
            lab_legs.insert(0, lab("POST", None, &[0, 1]));
        }
        let key = Some("k-1".to_owned());
        let lost = ClientLeg {
            status: None,
            dispatched: Vec::new(),
            committed: String::new(),
            idempotency_key: key.clone(),
            ..client("POST", None, &[], false, "resent")
        };
        let mut got = client("POST", None, &[0, 1, 2, 3, 4, 5], false, "answered");
        got.idempotency_key = key;
        for d in &mut got.dispatched {
            d.id = d.id.replacen("1-", "2-", 1);
        }
        expected(&Truth {
            lab: lab_legs,
            clients: vec![vec![lost, got]],
            tcp_resets: false,
        })
    }

    #[test]
    fn a_cut_call_the_client_never_resumes_or_resends_is_abandoned() {
        let cut_only = |stop: &str, partial: bool| {
            expected(&Truth {
                lab: vec![lab("POST", None, &[0, 1, 2, 3])],
                clients: vec![vec![client("POST", None, &[0, 1, 2], partial, stop)]],
                tcp_resets: false,
            })
        };
        assert!(cut_only("io-closed", true).contains("abandoned"));
        assert!(cut_only("io", false).contains("abandoned"));
        // Resumed and answered: not abandoned.
        assert!(!run(&[3, 4, 5], &[3, 4, 5], "answered").contains("abandoned"));
        // A clean end without the response is a pending call, not a cut one given up.
        let clean = cut_only("clean-end", false);
        assert!(
            !clean.contains("abandoned") && clean.contains("pending-call"),
            "{clean:?}"
        );
    }

    #[test]
    fn a_resent_call_is_reissued_only_if_its_lost_sending_reached_the_server() {
        assert_eq!(resent(true), set(&["reissued"]));
        assert_eq!(resent(false), set(&[]));
    }

    /// A POST cut after events 0..=2 and re-sent as request 2 with the same key; the lab served
    /// the re-send when `resend_reached` (else it was lost in flight with its connection).
    fn cut_then_resent(resend_reached: bool) -> BTreeSet<String> {
        let key = Some("k-1".to_owned());
        let mut cut = client("POST", None, &[0, 1, 2], true, "io-closed");
        cut.idempotency_key = key.clone();
        let mut again = ClientLeg {
            request_id: Some(2),
            status: None,
            dispatched: Vec::new(),
            committed: String::new(),
            idempotency_key: key,
            ..client("POST", None, &[], false, "closed-before-head")
        };
        let mut lab_legs = vec![lab("POST", None, &[0, 1, 2, 3])];
        if resend_reached {
            let mut served = lab("POST", None, &[0]);
            served.request_ids = vec!["2".into()];
            lab_legs.push(served);
            again.stop = "io".into();
        }
        expected(&Truth {
            lab: lab_legs,
            clients: vec![vec![cut, again]],
            tcp_resets: false,
        })
    }

    #[test]
    fn a_resend_lost_in_flight_proves_nothing_and_the_cut_call_is_abandoned() {
        let lost = cut_then_resent(false);
        assert!(
            lost.contains("abandoned") && !lost.contains("reissued"),
            "{lost:?}"
        );
        let reached = cut_then_resent(true);
        assert!(
            reached.contains("reissued") && !reached.contains("abandoned"),
            "{reached:?}"
        );
    }

    /// A POST that dispatched 1-1 … 1-3 and ended with `stop`, then a resume from the stale
    /// cursor `1-1` answered with a replay of 2 … 5.
    fn stale_after(stop: &str, tcp_resets: bool) -> BTreeSet<String> {
        expected(&Truth {
            lab: vec![
                lab("POST", None, &[0, 1, 2, 3]),
                lab("GET", Some("1-1"), &[2, 3, 4, 5]),
            ],
            clients: vec![vec![
                client("POST", None, &[0, 1, 2, 3], false, stop),
                client("GET", Some("1-1"), &[2, 3, 4, 5], false, "answered"),
            ]],
            tcp_resets,
        })
    }

    #[test]
    fn a_stale_cursor_after_a_tcp_reset_is_not_behind_however_the_client_named_the_error() {
        // Outside a reset's unread window the stale cursor is the client's bug.
        assert!(stale_after("io-closed", false).contains("cursor-behind"));
        // A reset the client's stack reported as ECONNRESET or, met while writing, as a
        // broken pipe: the kernel may have discarded 1-2 and 1-3, so they are owed again.
        for stop in ["io", "io-closed"] {
            let got = stale_after(stop, true);
            assert!(!got.contains("cursor-behind"), "{stop}: {got:?}");
            assert!(got.contains("replay-exact"), "{stop}: {got:?}");
        }
        // A clean end discards nothing, reset or not.
        assert!(stale_after("clean-end", true).contains("cursor-behind"));
    }

    #[test]
    fn a_correct_replay_after_a_torn_cut_is_exact() {
        assert_eq!(
            run(&[3, 4, 5], &[3, 4, 5], "answered"),
            set(&["replay-exact", "torn-cut"])
        );
    }

    #[test]
    fn reordered_dropped_and_lost_replays_are_named() {
        assert_eq!(
            run(&[4, 3, 5], &[4, 3, 5], "answered"),
            set(&["replay-reorder", "torn-cut"])
        );
        assert_eq!(
            run(&[3, 5], &[3, 5], "answered"),
            set(&["replay-gap", "torn-cut"])
        );
        assert_eq!(
            run(&[3, 3, 4, 5], &[3, 3, 4, 5], "answered"),
            set(&["replay-duplicate", "torn-cut"])
        );
        assert_eq!(
            run(&[3, 4], &[3, 4], "clean-end"),
            set(&["pending-call", "torn-cut"])
        );
    }
}
