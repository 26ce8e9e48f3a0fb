//! Several sessions at once, from scripted observations: identical calls in 4 and 16
//! concurrent sessions of a correct server (per-session counter ids, identical greetings and
//! results, sessions that differ at some id) raise no `cross-stream`; a store shared across
//! sessions keyed by request id is found by the progress token it replays, which only the other
//! session declared, and its response counts as delivered twice.

use crate::common::audit::{Eol, Wire, call_with_token, event, progress_of, result};
use tearline::audit::FindingKind as K;
use tearline::vocab::CutAction;

const EOL: Eol = Eol::Lf;
const GREETING: &str = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello"}}"#;

fn msg(id: &str, data: &str) -> String {
    event(EOL, Some(id), Some("message"), &[data])
}

/// A progress token unique to session `i` (as tearline's load client makes them).
fn token(i: usize) -> String {
    format!("tl-{i:016x}-1")
}

fn session(i: usize) -> Option<String> {
    Some(format!("sess-{i}"))
}

/// `n` sessions each call request id 1 with their own token; each stream is cut after its
/// first event and resumed from it; the server replays each session's own events, of which
/// the greeting and the result are identical in every session.
fn concurrent_sessions(n: usize) -> Wire {
    let mut w = Wire::new();
    for i in 0..n {
        let conn = 2 * i as u64 + 1;
        w.post(
            conn,
            0,
            session(i).as_deref(),
            &call_with_token("1", "progress", &token(i)),
        );
        w.sse_ok(conn, 0);
        let body = msg("1-1", &progress_of(&token(i), 1));
        w.deliver(conn, 0, &body, Some(body.len()), CutAction::Reset);
    }
    for i in 0..n {
        let conn = 2 * i as u64 + 2;
        w.resume(conn, 0, session(i).as_deref(), "1-1");
        w.sse_ok(conn, 0);
        let replay = msg("1-2", &progress_of(&token(i), 2))
            + &msg("1-3", GREETING)
            + &msg("1-4", &result("1", "ok"));
        w.stream_clean(conn, 0, &replay);
    }
    w.auditor.finish();
    w
}

fn count(w: &Wire, kind: K) -> usize {
    w.auditor
        .findings()
        .into_iter()
        .filter(|f| f.kind == kind)
        .count()
}

#[tokio::test(start_paused = true)]
async fn identical_calls_in_4_and_16_concurrent_sessions_raise_no_cross_stream() {
    for n in [4, 16] {
        let w = concurrent_sessions(n);
        let kinds = w.kinds();
        assert!(
            !kinds.contains(&K::CrossStream) && !kinds.contains(&K::DuplicateResponse),
            "{n} sessions: {:#?}",
            w.auditor.findings()
        );
        // Every replay was judged (and found exact): the rule had its chance to fire.
        assert_eq!(
            count(&w, K::ReplayExact),
            n,
            "{n} sessions: {:#?}",
            w.auditor.findings()
        );
    }
}

/// Session A's call 1 ran to its end; session B's call 1 (same request id, its own token) is
/// cut, and its resume is served from A's stream (a store keyed by request id). A's progress
/// token names a call only session A declared.
fn shared_store(b_token: &str) -> Wire {
    let mut w = Wire::new();
    let a = session(0);
    let b = session(1);
    w.post(
        1,
        0,
        a.as_deref(),
        &call_with_token("1", "progress", &token(0)),
    );
    w.sse_ok(1, 0);
    let a_events = msg("1-1", &progress_of(&token(0), 1))
        + &msg("1-2", &progress_of(&token(0), 2))
        + &msg("1-3", &result("1", "a"));
    w.stream_clean(1, 0, &a_events);
    w.post(
        2,
        0,
        b.as_deref(),
        &call_with_token("1", "progress", b_token),
    );
    w.sse_ok(2, 0);
    let body = msg("1-1", &progress_of(b_token, 1));
    w.deliver(2, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(3, 0, b.as_deref(), "1-1");
    w.sse_ok(3, 0);
    let replay = msg("1-2", &progress_of(&token(0), 2)) + &msg("1-3", &result("1", "a"));
    w.stream_clean(3, 0, &replay);
    w.auditor.finish();
    w
}

#[tokio::test(start_paused = true)]
async fn a_store_shared_across_sessions_is_cross_stream_by_the_token_it_replays() {
    let w = shared_store(&token(1));
    assert_eq!(count(&w, K::CrossStream), 1, "{:#?}", w.auditor.findings());
    let cross = w
        .auditor
        .findings()
        .into_iter()
        .find(|f| f.kind == K::CrossStream)
        .expect("cross-stream");
    assert!(
        cross.detail.contains(&token(0)),
        "the finding names the call: {}",
        cross.detail
    );
    // A's response event (its JSON-RPC id equals B's own) reached B's client too.
    let dup: Vec<_> = w
        .auditor
        .findings()
        .into_iter()
        .filter(|f| f.kind == K::DuplicateResponse)
        .collect();
    assert_eq!(dup.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(dup[0].ids, vec!["1".to_string(), "1-3".to_string()]);
}

#[tokio::test(start_paused = true)]
async fn a_shared_store_is_invisible_when_both_sessions_declared_the_same_token() {
    // Tokens that repeat in every session (a client whose token is its request id) name no
    // session: the replay looks like B's own, and nothing says otherwise.
    let w = shared_store(&token(0));
    let kinds = w.kinds();
    assert!(
        !kinds.contains(&K::CrossStream) && !kinds.contains(&K::DuplicateResponse),
        "{:#?}",
        w.auditor.findings()
    );
}
