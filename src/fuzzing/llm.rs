//! Fuzz target `llm`: the LLM stream reader (`wire::llm`) and its argument tracker
//! (`wire::llm_args`).
//!
//! Input: control byte 1 picks the mode — `% 4` = 0, 1, 2: an SSE stream of Chat Completions,
//! Responses or Messages (the payload); 3: tool-call argument text (the payload). Control byte 0
//! drives the chunking (see [`super::splits`]).
//!
//! Invariants checked:
//! - stream modes: every dispatched event's LLM facts and every payload cut point's LLM
//!   position are the same under every chunking, and with the JSON reader's path filter off;
//!   positions depend only on the bytes before the cut point (the positions of a prefix's cut
//!   points equal the whole stream's); no event reports argument bytes beyond what the stream
//!   carried;
//! - argument mode: the status is `complete` if and only if `serde_json` parses the text
//!   (unless nested beyond the tracker's stack: `unknown`), `empty` if and only if the text is
//!   whitespace; a prefix of a complete text is never `invalid`; once `invalid`, every
//!   extension stays `invalid`; the status is the same under every chunking.

use crate::vocab::LlmApi;
use crate::wire::llm::LlmEventFacts;
use crate::wire::llm_args::{ArgsJson, ArgsStatus};
use crate::wire::position::LlmPos;
use crate::wire::sse::SseScanner;
use crate::wire::sse_class::Classified;

use super::{Input, chunkings, pieces};

/// Runs the target on `data`.
pub fn fuzz(data: &[u8]) {
    let input = Input::new(data);
    match input.byte(1) % 4 {
        0 => stream(&input, LlmApi::ChatCompletions),
        1 => stream(&input, LlmApi::Responses),
        2 => stream(&input, LlmApi::Messages),
        _ => args(&input),
    }
}

type Read = (Vec<LlmEventFacts>, Vec<Option<LlmPos>>);

/// Facts of every dispatched event and the LLM position of every payload cut point.
fn read(api: LlmApi, parts: &[&[u8]]) -> Read {
    read_with(api, parts, false)
}

/// [`read`], with the JSON reader reporting every path when `every_path` (see
/// `LlmTracker::reading_every_path`).
fn read_with(api: LlmApi, parts: &[&[u8]], every_path: bool) -> Read {
    let mut sc = SseScanner::bounded(4096, 1 << 16);
    if every_path {
        sc.set_llm_reading_every_path(api);
    } else {
        sc.set_llm(api);
    }
    let mut facts = Vec::new();
    let mut out = Classified::default();
    let mut marks: Vec<Option<LlmPos>> = Vec::new();
    for p in parts {
        sc.feed_classified(
            p,
            &mut |e, _| {
                facts.push(e.llm.cloned().unwrap_or_default());
                false
            },
            &mut out,
        );
        collect(&mut out, &mut marks);
    }
    sc.flush_pending(&mut out);
    collect(&mut out, &mut marks);
    (facts, marks)
}

fn collect(out: &mut Classified, marks: &mut Vec<Option<LlmPos>>) {
    for r in &out.runs {
        assert_eq!(
            r.start as usize,
            marks.len(),
            "cut points classified in order, once"
        );
        marks.extend((r.start..r.end).map(|_| r.llm));
    }
    out.clear();
}

fn stream(input: &Input<'_>, api: LlmApi) {
    let payload = input.payload;
    let whole = read(api, &[payload]);
    // The JSON reader's path filter changes no fact and no position.
    assert_eq!(
        read_with(api, &[payload], true),
        whole,
        "{api}: the path filter changed what was read"
    );
    for bounds in chunkings(input.control, payload.len()) {
        let got = read(api, &pieces(payload, &bounds));
        assert_eq!(got, whole, "{api}: chunking {bounds:?}");
    }
    // A prefix's positions are the whole stream's (nothing depends on later bytes), except the
    // prefix's last cut point, whose class may wait for its next byte.
    let half = payload.len() / 2;
    let (_, prefix_marks) = read(api, &[&payload[..half]]);
    let n = prefix_marks.len().saturating_sub(1).min(whole.1.len());
    assert_eq!(
        &prefix_marks[..n],
        &whole.1[..n],
        "{api}: prefix of {half} bytes"
    );
    for f in &whole.0 {
        if let Some(a) = f.args {
            assert!(a.bytes <= payload.len() as u64, "{api}: {a:?}");
        }
    }
}

fn status(parts: &[&[u8]]) -> ArgsStatus {
    let mut a = ArgsJson::default();
    for p in parts {
        a.feed(p);
    }
    a.status()
}

fn args(input: &Input<'_>) {
    let text = input.payload;
    let s = status(&[text]);
    for bounds in chunkings(input.control, text.len()) {
        assert_eq!(status(&pieces(text, &bounds)), s, "chunking {bounds:?}");
    }
    if s != ArgsStatus::Unknown {
        // As a client parses it: its SSE decoder (WHATWG) replaced invalid UTF-8 with U+FFFD.
        let parses =
            serde_json::from_str::<serde_json::Value>(&String::from_utf8_lossy(text)).is_ok();
        assert_eq!(s == ArgsStatus::Complete, parses, "{s:?} vs serde {parses}");
    }
    let blank = text
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    assert_eq!(s == ArgsStatus::Empty, blank);
    let mut a = ArgsJson::default();
    let mut was_invalid = false;
    for (i, &b) in text.iter().enumerate() {
        a.feed(&[b]);
        let now = a.status();
        if was_invalid {
            assert_eq!(
                now,
                ArgsStatus::Invalid,
                "invalid, then {now:?} at byte {i}"
            );
        }
        if s == ArgsStatus::Complete {
            assert_ne!(
                now,
                ArgsStatus::Invalid,
                "a prefix of valid JSON at byte {i}"
            );
        }
        was_invalid = now == ArgsStatus::Invalid;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_of_each_mode_pass() {
        let chat = b"\x07\x00..data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
        fuzz(chat);
        fuzz(b"\x03\x03..{\"a\": [1, 2.5e3, \"x\\u00e9\", null]}");
        fuzz(b"\x03\x03..{\"a\": [1,");
        fuzz(b"\x03\x03..{\"a\" 1}");
    }
}
