//! Resumption against the lab server over raw sockets: eviction under each `on_evicted` mode,
//! the seed 004 sequence (torn result event, evicted ring, `fresh`), and the seed 000
//! sequence (narrowed token on resume) under each `on_unauthorized` mode.

use crate::common::lab_client::{
    ACCEPT_BOTH, ACCEPT_SSE, Full, JSON, Lab, call, event_id, scan, within,
};
use serde_json::Value;
use tearline::lab::{LabConfig, OnEvicted, OnUnauthorized};

fn small_ring(on_evicted: OnEvicted) -> LabConfig {
    LabConfig {
        buffer: 4,
        on_evicted,
        ..LabConfig::default()
    }
}

async fn resume(lab: &Lab, sid: &str, last: &str, extra: &[(&str, &str)]) -> Full {
    let mut c = lab.connect().await;
    let mut h = vec![ACCEPT_SSE, ("Mcp-Session-Id", sid), ("Last-Event-ID", last)];
    h.extend_from_slice(extra);
    c.request("GET", "/mcp", &h, b"").await
}

async fn post(lab: &Lab, sid: &str, body: &[u8], extra: &[(&str, &str)]) -> Full {
    let mut c = lab.connect().await;
    let mut h = vec![ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid)];
    h.extend_from_slice(extra);
    c.request("POST", "/mcp", &h, body).await
}

/// A session whose stream 1 (a `progress` call with n = 10: ids 1-0 … 1-11) has been read to
/// its end, in a ring of 4 events: 1-8 … 1-11 remain.
async fn evicted_progress_stream(lab: &Lab) -> (String, Vec<Vec<u8>>) {
    let sid = lab.session(&[]).await;
    let full = post(lab, &sid, &call(1, "progress", r#"{"n":10}"#), &[]).await;
    assert_eq!(full.status, 200);
    assert_eq!(full.chunks.len(), 12);
    (sid, full.chunks)
}

#[tokio::test]
async fn evicted_cursor_with_error_mode_answers_410_naming_the_lost_range() {
    within(async {
        let lab = Lab::start(small_ring(OnEvicted::Error)).await;
        let (sid, chunks) = evicted_progress_stream(&lab).await;
        let r = resume(&lab, &sid, "1-3", &[]).await;
        assert_eq!(r.status, 410);
        let v = r.json();
        assert_eq!(v["error"]["code"], -32010);
        assert_eq!(v["error"]["data"]["last_event_id"], "1-3");
        assert_eq!(v["error"]["data"]["lost"]["from"], "1-4");
        assert_eq!(v["error"]["data"]["lost"]["to"], "1-7");
        // A retained cursor still replays exactly.
        let r = resume(&lab, &sid, "1-9", &[]).await;
        assert_eq!((r.status, r.chunks), (200, chunks[10..].to_vec()));
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn evicted_cursor_with_fresh_mode_silently_starts_a_fresh_stream() {
    within(async {
        let lab = Lab::start(small_ring(OnEvicted::Fresh)).await;
        let (sid, _) = evicted_progress_stream(&lab).await;
        let r = resume(&lab, &sid, "1-3", &[]).await;
        assert_eq!(r.status, 200);
        assert_eq!(
            r.chunks,
            [
                b"id: 1-12\nretry: 1000\ndata: \n\n".to_vec(),
                greeting("1-13")
            ]
        );
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn evicted_cursor_with_replay_from_oldest_mode_replays_after_a_silent_gap() {
    within(async {
        let lab = Lab::start(small_ring(OnEvicted::ReplayFromOldest)).await;
        let (sid, chunks) = evicted_progress_stream(&lab).await;
        let r = resume(&lab, &sid, "1-3", &[]).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.chunks, chunks[8..].to_vec());
        lab.stop().await;
    })
    .await;
}

/// Seed 004: the client holds event 1-4 (the blob result) up to the end of data line 1 of 3,
/// the connection drops, another call evicts the ring, and the resume names 1-4.
async fn seed_004(on_evicted: OnEvicted) -> Full {
    let lab = Lab::start(small_ring(on_evicted)).await;
    let sid = lab.session(&[]).await;
    let mut c = lab.connect().await;
    let h = [ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())];
    c.send(
        "POST",
        "/mcp",
        &h,
        &call(1, "blob", r#"{"size":3000,"lines":3}"#),
    )
    .await;
    let head = c.head().await;
    assert_eq!(head.status, 200);
    let marker = b"event: message\nid: 1-4\ndata: ";
    let held = c
        .body_until(|b| {
            b.windows(marker.len())
                .position(|w| w == marker)
                .is_some_and(|at| b[at + marker.len()..].contains(&b'\n'))
        })
        .await;
    let torn = &held[held.len() - 1100..];
    assert!(
        torn.ends_with(b"\"},\n"),
        "held data line 1 of 3, then stopped"
    );
    drop(c);
    // Another call of the same session fills the ring: stream 1 is evicted once it is read.
    let other = post(&lab, &sid, &call(2, "progress", r#"{"n":8}"#), &[]).await;
    assert_eq!(other.chunks.len(), 10);
    let r = resume(&lab, &sid, "1-4", &[]).await;
    lab.stop().await;
    r
}

#[tokio::test]
async fn seed_004_sequence_with_fresh_mode_yields_a_fresh_stream_instead_of_replay() {
    within(async {
        let r = seed_004(OnEvicted::Fresh).await;
        assert_eq!(r.status, 200);
        assert_eq!(
            r.chunks,
            [
                b"id: 1-5\nretry: 1000\ndata: \n\n".to_vec(),
                greeting("1-6")
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn seed_004_sequence_with_error_mode_reports_the_evicted_cursor() {
    within(async {
        let r = seed_004(OnEvicted::Error).await;
        assert_eq!(r.status, 410);
        assert_eq!(r.json()["error"]["data"]["last_event_id"], "1-4");
    })
    .await;
}

const AGGREGATE: (&str, &str) = ("Authorization", "Bearer aud=https://lab");
const SEARCH_ONLY: (&str, &str) = ("Authorization", "Bearer aud=https://lab/tools/search");

/// Seed 000: one stream carries a `search` and a `fetch` call (a batch), read under an
/// aggregate token; the resume after 1-1 presents a search-only token.
async fn seed_000(on_unauthorized: OnUnauthorized) -> (Lab, String, Vec<Vec<u8>>, Full) {
    let cfg = LabConfig {
        auth: true,
        on_unauthorized,
        ..LabConfig::default()
    };
    let lab = Lab::start(cfg).await;
    let sid = lab.session(&[AGGREGATE]).await;
    let search = String::from_utf8(call(1, "search", r#"{"query":"q","n":2}"#)).expect("utf8");
    let fetch = String::from_utf8(call(2, "fetch", r#"{"url":"u","n":2}"#)).expect("utf8");
    let batch = format!("[{search},{fetch}]");
    let narrow = post(&lab, &sid, batch.as_bytes(), &[SEARCH_ONLY]).await;
    assert_eq!(
        narrow.status, 403,
        "a call outside the audience is refused up front"
    );
    let full = post(&lab, &sid, batch.as_bytes(), &[AGGREGATE]).await;
    assert_eq!(full.status, 200);
    let ids: Vec<String> = full.chunks.iter().filter_map(|c| event_id(c)).collect();
    assert_eq!(ids, ["1-0", "1-1", "1-2", "1-3", "1-4", "1-5", "1-6"]);
    let no_token = resume(&lab, &sid, "1-1", &[]).await;
    assert_eq!(no_token.status, 401);
    let r = resume(&lab, &sid, "1-1", &[SEARCH_ONLY]).await;
    (lab, sid, full.chunks, r)
}

#[tokio::test]
async fn seed_000_with_error_mode_names_the_offending_event_and_keeps_the_cursor() {
    within(async {
        let (lab, sid, chunks, r) = seed_000(OnUnauthorized::Error).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.chunks.len(), 3);
        assert_eq!(r.chunks[..2], chunks[2..4]);
        let events = scan(&r.chunks);
        let err = &events[2];
        assert_eq!(
            (err.event_type.as_str(), err.id.as_deref()),
            ("error", None)
        );
        assert_eq!(
            err.last_event_id, "1-3",
            "the error does not move the cursor"
        );
        let v: Value = serde_json::from_slice(&err.data).expect("JSON");
        assert_eq!(v["event_id"], "1-4");
        assert_eq!(v["resource"], "https://lab/tools/fetch");
        assert_eq!(v["last_delivered"], "1-3");
        // Re-authorized with a superset audience, the resume from the last delivered id
        // delivers the fetch events exactly.
        let again = resume(&lab, &sid, "1-3", &[AGGREGATE]).await;
        assert_eq!((again.status, again.chunks), (200, chunks[4..].to_vec()));
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn seed_000_with_silent_end_mode_ends_cleanly_at_the_unauthorized_event() {
    within(async {
        let (lab, _sid, chunks, r) = seed_000(OnUnauthorized::SilentEnd).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.chunks.len(), 3);
        assert_eq!(r.chunks[..2], chunks[2..4]);
        assert_eq!(r.chunks[2], b"event: end\ndata: {}\n\n");
        let events = scan(&r.chunks);
        assert_eq!(events.len(), 3);
        assert_eq!(
            (
                events[2].event_type.as_str(),
                events[2].last_event_id.as_str()
            ),
            ("end", "1-3")
        );
        lab.stop().await;
    })
    .await;
}

/// The event a `fresh` resume sends after its priming event (a new stream's greeting).
fn greeting(id: &str) -> Vec<u8> {
    format!(
        "event: message\nid: {id}\ndata: {}\n\n",
        tearline::lab::FRESH_STREAM_GREETING
    )
    .into_bytes()
}
