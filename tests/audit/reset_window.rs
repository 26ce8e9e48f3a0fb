//! What a reset discards (issue 34): the unread window is bounded by time (`rst_unread`), not
//! by a count; a resume from inside it is judged from its cursor and what followed it is owed
//! again (no false duplicate on the next resume); a stale cursor behind it (the Python `mcp`
//! 2.3 client after a broken resume leg) is reported as the duplicates it causes, never as a
//! loss; a session-less resume is matched by path; a client that may have read nothing is no
//! client bug. Every case has its twin where the finding must appear.

use crate::common::audit::{Eol, Wire, call_with_token, event, progress_of, result};
use std::ops::RangeInclusive;
use std::time::Duration;
use tearline::audit::{AuditConfig, FindingClass, FindingKind as K};
use tearline::vocab::CutAction;

const S: Option<&str> = Some("s-1");
/// The Python client's case: events 15 ms apart, the stale resume ~100 ms after the cut.
const GAP: Duration = Duration::from_millis(15);
const LATER: Duration = Duration::from_millis(100);

fn prog(n: u64) -> String {
    event(
        Eol::Lf,
        Some(&n.to_string()),
        Some("message"),
        &[&progress_of("t", n)],
    )
}

fn tick(n: u64) -> String {
    event(Eol::Lf, Some(&n.to_string()), None, &[&format!("tick {n}")])
}

/// Delivers `ids` on `(conn, 0)` `gap` apart (paused clock), then event `torn` cut inside its
/// data by `action`, at the same instant as the last event.
async fn paced(
    w: &mut Wire,
    conn: u64,
    ids: RangeInclusive<u64>,
    gap: Duration,
    torn: u64,
    action: CutAction,
    ev: fn(u64) -> String,
) {
    let last = *ids.end();
    for n in ids {
        if n == last {
            break;
        }
        w.deliver(conn, 0, &ev(n), None, CutAction::Reset);
        tokio::time::advance(gap).await;
    }
    let (tail, t) = (ev(last), ev(torn));
    let cut = tail.len() + t.len() - 6;
    w.deliver(conn, 0, &(tail + &t), Some(cut), action);
}

/// The Python `mcp` 2.3 client: its first resume leg (from 5) and its second are reset after
/// delivering events `gap` apart, and each time it resumes with that leg's own starting cursor
/// (5) again; the server replays correctly, and the last replay ends with `missing` left out.
async fn stale_resumes(cfg: AuditConfig, gap: Duration, missing: Option<u64>) -> Wire {
    let mut w = Wire::with(cfg);
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    paced(&mut w, 1, 1..=5, gap, 6, CutAction::Reset, prog).await;
    tokio::time::advance(LATER).await;
    w.resume(2, 0, S, "5");
    w.sse_ok(2, 0);
    paced(&mut w, 2, 6..=12, gap, 13, CutAction::Reset, prog).await;
    tokio::time::advance(LATER).await;
    w.resume(3, 0, S, "5");
    w.sse_ok(3, 0);
    paced(&mut w, 3, 6..=14, gap, 15, CutAction::Reset, prog).await;
    tokio::time::advance(LATER).await;
    w.resume(4, 0, S, "5");
    w.sse_ok(4, 0);
    let body: String = (6..=20)
        .filter(|n| Some(*n) != missing)
        .map(prog)
        .collect::<String>()
        + &event(Eol::Lf, Some("21"), None, &[&result("7", "ok")]);
    w.stream_clean(4, 0, &body);
    w.auditor.finish();
    w
}

#[tokio::test(start_paused = true)]
async fn stale_cursor_after_a_broken_resume_leg_read_long_before_the_reset_is_duplicates_not_loss()
{
    let w = stale_resumes(AuditConfig::default(), GAP, None).await;
    let f = w.auditor.findings();
    assert_eq!(
        w.kinds(),
        vec![
            K::TornCut,
            K::TornCut,
            K::CursorBehind,
            K::TornCut,
            K::CursorBehind
        ],
        "{f:#?}"
    );
    assert!(
        f.iter()
            .all(|f| f.class != FindingClass::Loss && f.kind != K::Unknown),
        "{f:#?}"
    );
    let behind = &f[2];
    assert_eq!(behind.ids[0], "5");
    assert!(
        behind.detail.contains("ids 6 … 12") && behind.detail.contains("duplicates them"),
        "{}",
        behind.detail
    );
}

#[tokio::test(start_paused = true)]
async fn stale_cursor_replay_that_really_misses_an_event_is_still_a_gap() {
    let w = stale_resumes(AuditConfig::default(), GAP, Some(9)).await;
    let f = w.auditor.findings();
    let gaps: Vec<_> = f.iter().filter(|f| f.kind == K::ReplayGap).collect();
    assert_eq!(gaps.len(), 1, "{f:#?}");
    assert_eq!(gaps[0].ids, vec!["9".to_string()], "{f:#?}");
}

#[tokio::test(start_paused = true)]
async fn same_cursor_after_a_burst_the_reset_discarded_is_judged_from_it_and_exact() {
    // Every event of the broken legs was written at the instant of the reset: the client may
    // have read none of them, so resuming from 5 again is right.
    let w = stale_resumes(AuditConfig::default(), Duration::ZERO, None).await;
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::TornCut, K::TornCut, K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
    // A wider window (`--rst-unread 1s`) takes the paced legs as possibly unread too.
    let wide = AuditConfig {
        rst_unread: Duration::from_secs(1),
        ..AuditConfig::default()
    };
    let w = stale_resumes(wide, GAP, None).await;
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::TornCut, K::TornCut, K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
}

/// A browser's feed: 200 events in one burst, reset; the browser resumes from 100 (it
/// discarded the rest); the replay leg is cut by `second` after 101..150; the browser resumes
/// from 120; the server replays everything after it.
async fn browser_resumes(first_age: Duration, second: CutAction) -> Wire {
    let mut w = Wire::new();
    w.get_url(1, 0, "/events", None);
    w.sse_ok(1, 0);
    let body: String = (1..=200).map(tick).collect();
    w.deliver(1, 0, &body, None, CutAction::Reset);
    tokio::time::advance(first_age).await;
    let torn = tick(201);
    w.deliver(1, 0, &torn, Some(torn.len() - 3), CutAction::Reset);
    w.get_url(2, 0, "/events", Some("100"));
    w.sse_ok(2, 0);
    paced(&mut w, 2, 101..=150, Duration::ZERO, 151, second, tick).await;
    w.get_url(3, 0, "/events", Some("120"));
    w.sse_ok(3, 0);
    let rest: String = (121..=210).map(tick).collect();
    w.stream_clean(3, 0, &rest);
    w.auditor.finish();
    w
}

#[tokio::test(start_paused = true)]
async fn resume_from_100_events_back_after_a_reset_is_judged_and_the_next_resume_has_no_false_duplicate()
 {
    let w = browser_resumes(Duration::ZERO, CutAction::Reset).await;
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::TornCut, K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn resume_behind_events_the_client_read_is_cursor_behind_never_unknown() {
    // The replay leg ends by FIN: the browser read 101..150, so 120 is stale.
    let w = browser_resumes(Duration::ZERO, CutAction::Fin).await;
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::TornCut, K::CursorBehind],
        "{:#?}",
        w.auditor.findings()
    );
    // The 200 events were written a second before the reset: the browser read them, so a
    // resume from 100 is stale too (and judged, although the ended stream is past 64 events).
    let w = browser_resumes(Duration::from_secs(1), CutAction::Reset).await;
    let kinds = w.kinds();
    assert_eq!(kinds[..2], [K::TornCut, K::CursorBehind], "{kinds:?}");
    assert!(!kinds.contains(&K::Unknown), "{:#?}", w.auditor.findings());
}

/// A session-less feed cut by a reset `age` after it delivered 1..3; the client reconnects
/// without `Last-Event-ID`.
async fn reopened_after(age: Duration) -> Vec<K> {
    let mut w = Wire::new();
    w.get_url(1, 0, "/events", None);
    w.sse_ok(1, 0);
    let body: String = (1..=3).map(tick).collect();
    w.deliver(1, 0, &body, None, CutAction::Reset);
    tokio::time::advance(age).await;
    let torn = tick(4);
    w.deliver(1, 0, &torn, Some(torn.len() - 3), CutAction::Reset);
    w.get_url(2, 0, "/events", None);
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &(tick(5) + &tick(6)));
    w.auditor.finish();
    w.kinds()
}

#[tokio::test(start_paused = true)]
async fn client_that_may_have_read_nothing_reconnecting_without_cursor_is_no_client_bug() {
    assert_eq!(reopened_after(Duration::ZERO).await, vec![K::TornCut]);
    assert_eq!(
        reopened_after(Duration::from_secs(1)).await,
        vec![K::TornCut, K::CursorMissing]
    );
}

/// A `favicon.ico` answered with the feed delivered 1..5 and was cut; no stream of `/events`
/// was seen. The client resumes `path` from 3.
fn resume_beside_a_favicon(path: &str) -> Wire {
    let mut w = Wire::new();
    w.get_url(1, 0, "/favicon.ico", None);
    w.sse_ok(1, 0);
    let body: String = (1..=5).map(tick).collect();
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Fin);
    w.get_url(2, 0, path, Some("3"));
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &(tick(4) + &tick(5) + &tick(6)));
    w.auditor.finish();
    w
}

#[tokio::test(start_paused = true)]
async fn sessionless_resume_is_never_filed_under_a_stream_of_another_path() {
    let w = resume_beside_a_favicon("/events");
    let f = w.auditor.findings();
    assert_eq!(w.kinds(), vec![K::Unknown], "{f:#?}");
    assert_eq!(f[0].stream.request, "GET /events");
    assert!(
        f[0].detail.contains("another path") && !f[0].detail.contains("this session"),
        "{}",
        f[0].detail
    );
    // The same resume of the favicon's own path continues it.
    let w = resume_beside_a_favicon("/favicon.ico");
    assert_eq!(
        w.kinds(),
        vec![K::CursorBehind],
        "{:#?}",
        w.auditor.findings()
    );
}

/// A session-less call (2026-07-28) cut, then sent again with the same `Idempotency-Key`
/// (`again`) or under another key.
fn sessionless_resend(again: &str) -> Wire {
    let v = Some("2026-07-28");
    let mut w = Wire::new();
    w.post_keyed(1, 0, None, v, "k-1", &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let body = prog(1);
    w.deliver(1, 0, &body, Some(body.len() - 4), CutAction::Reset);
    w.post_keyed(2, 0, None, v, again, &call_with_token("8", "search", "t"));
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &event(Eol::Lf, None, None, &[&result("8", "ok")]));
    w.auditor.finish();
    w
}

#[tokio::test(start_paused = true)]
async fn a_sessionless_reissue_names_no_session() {
    let w = sessionless_resend("k-1");
    let f = w.auditor.findings();
    let re: Vec<_> = f.iter().filter(|f| f.kind == K::Reissued).collect();
    assert_eq!(re.len(), 1, "{f:#?}");
    assert!(
        re[0].detail.contains("without a session")
            && !re[0].detail.contains("(none)")
            && !re[0].detail.contains("same session"),
        "{}",
        re[0].detail
    );
    // Another key proves nothing: no re-send named at all.
    let w = sessionless_resend("k-2");
    assert!(
        !w.kinds().contains(&K::Reissued),
        "{:#?}",
        w.auditor.findings()
    );
}

/// A `favicon.ico` answered with the feed delivered 1..3 and was cut by FIN (read: the client
/// holds 3); another tab then fetches `/favicon.ico`, its `Accept` naming an event stream or
/// not (a browser's favicon fetch sends `image/…,*/*`).
fn second_tab_favicon(accepts_event_stream: bool) -> Vec<K> {
    let mut w = Wire::new();
    w.get_url(1, 0, "/favicon.ico", None);
    w.sse_ok(1, 0);
    let body: String = (1..=3).map(tick).collect();
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Fin);
    w.rec(tearline::wire::Observation::Request {
        conn: 2,
        seq: 0,
        method: "GET".into(),
        path: "/favicon.ico".into(),
        session: None,
        last_event_id: None,
        protocol_version: None,
        has_authorization: false,
        idempotency_key: None,
        accepts_event_stream,
        body: None,
    });
    w.response(2, 0, 404, "text/html", None);
    w.auditor.finish();
    w.kinds()
}

#[tokio::test(start_paused = true)]
async fn a_second_tabs_plain_favicon_request_is_no_cursor_missing() {
    assert_eq!(second_tab_favicon(false), Vec::<K>::new());
    assert_eq!(second_tab_favicon(true), vec![K::CursorMissing]);
}
