//! `blob`'s `hold_ms`/`gate` (for memory benches): the result event stops mid-way through its
//! last data line until the gate opens (N streams paused at once) and `hold_ms` passed, then
//! the rest follows; the bytes are those of the same call without a hold.

use std::time::{Duration, Instant};

use crate::common::lab_client::{ACCEPT_BOTH, Conn, JSON, Lab, call, scan, within};
use serde_json::Value;
use tearline::lab::{Chunking, LabConfig, LineEnding};

/// Starts a `blob` call with `args` on a new session; returns the connection after the head.
async fn start_blob(lab: &Lab, args: &str) -> Conn {
    let sid = lab.session(&[]).await;
    let mut c = lab.connect().await;
    let h = [ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())];
    c.send("POST", "/mcp", &h, &call(1, "blob", args)).await;
    assert_eq!(c.head().await.status, 200);
    c
}

/// Reads HTTP chunks until one holds the start of the result (`"result"`); returns them all.
async fn until_result(c: &mut Conn) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    while let Some(ch) = c.chunk().await {
        let result = ch.windows(8).any(|w| w == b"\"result\"");
        chunks.push(ch);
        if result {
            return chunks;
        }
    }
    panic!("the body ended before the result began");
}

async fn rest(c: &mut Conn) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    while let Some(ch) = c.chunk().await {
        chunks.push(ch);
    }
    chunks
}

/// The data of the last event of `chunks`, parsed.
fn result_of(chunks: &[Vec<u8>]) -> Value {
    let events = scan(chunks);
    let last = events.last().expect("events");
    serde_json::from_slice(&last.data).expect("the result is JSON")
}

/// The result event's bytes: from its `event:` line to the end of the body.
fn result_event(body: &[u8]) -> &[u8] {
    let at = body
        .windows(14)
        .rposition(|w| w == b"event: message")
        .expect("an event");
    &body[at..]
}

#[tokio::test]
async fn a_gated_blob_pauses_mid_way_through_its_last_data_line_until_the_gate_opens() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let args = r#"{"size":3000,"lines":3,"gate":2}"#;
        let mut a = start_blob(&lab, args).await;
        let mut a_chunks = until_result(&mut a).await;
        let before = a_chunks.last().cloned().unwrap_or_default();
        assert!(!before.ends_with(b"\n"), "the pause falls inside a line");
        // One stream alone does not open a gate of two.
        let alone = tokio::time::timeout(Duration::from_millis(300), a.chunk()).await;
        assert!(alone.is_err(), "nothing follows before the gate opens");

        let mut b = start_blob(&lab, args).await;
        let b_chunks = [until_result(&mut b).await, rest(&mut b).await].concat();
        a_chunks.extend(rest(&mut a).await);

        let mut plain = start_blob(&lab, r#"{"size":3000,"lines":3}"#).await;
        let plain_chunks = [until_result(&mut plain).await, rest(&mut plain).await].concat();
        for chunks in [&a_chunks, &b_chunks] {
            let body = chunks.concat();
            // Same event as without a hold, except its id line (another session).
            let strip_id = |ev: &[u8]| -> Vec<u8> {
                String::from_utf8_lossy(ev)
                    .lines()
                    .filter(|l| !l.starts_with("id: "))
                    .collect::<Vec<_>>()
                    .join("\n")
                    .into_bytes()
            };
            let plain_body = plain_chunks.concat();
            assert_eq!(
                strip_id(result_event(&body)),
                strip_id(result_event(&plain_body))
            );
            let v = result_of(chunks);
            assert_eq!(v["result"]["structuredContent"]["size"], 3000);
        }
        // The chunk before the pause ends mid-way through the last data value; the rest of the
        // event (its second half and the blank line) is the next chunk.
        let body = a_chunks.concat();
        let event = result_event(&body);
        let last = event
            .split(|&b| b == b'\n')
            .rfind(|l| l.starts_with(b"data: "))
            .expect("a data line")
            .len()
            - b"data: ".len();
        let at = event.len() - ((last - last / 2) + 2);
        assert_eq!(
            &before[..],
            &event[..at],
            "the pause falls mid-way through the value"
        );
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_held_blob_without_a_gate_pauses_hold_ms_and_per_line_chunks_keep_every_byte() {
    within(async {
        let cfg = LabConfig {
            chunking: Chunking::PerLine,
            line_ending: LineEnding::Crlf,
            ..LabConfig::default()
        };
        let lab = Lab::start(cfg).await;
        let mut a = start_blob(&lab, r#"{"size":999,"lines":2,"hold_ms":500}"#).await;
        let mut chunks = until_result(&mut a).await;
        // Per-line chunking: the part of the line before the pause goes out as its own chunk.
        loop {
            let ch = a.chunk().await.expect("the event goes on");
            let partial = !ch.ends_with(b"\n");
            chunks.push(ch);
            if partial {
                break;
            }
        }
        let paused_at = Instant::now();
        let next = a.chunk().await.expect("the rest of the line");
        let waited = paused_at.elapsed();
        assert!(
            waited >= Duration::from_millis(300),
            "the pause lasted {waited:?}, not hold_ms"
        );
        assert!(next.ends_with(b"\r\n"), "the rest of the line follows");
        chunks.push(next);
        chunks.extend(rest(&mut a).await);
        let v = result_of(&chunks);
        assert_eq!(v["result"]["structuredContent"]["size"], 999);
        let text: String = v["result"]["content"]
            .as_array()
            .expect("content")
            .iter()
            .filter_map(|i| i["text"].as_str())
            .collect();
        assert_eq!(text.len(), 999);
        lab.stop().await;
    })
    .await;
}
