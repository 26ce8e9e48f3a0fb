//! A plain-feed knob (off by default): every resume starts with a priming event that repeats
//! the client's cursor — `id: 22` and an empty `data:` line after `Last-Event-ID: 22` — then
//! replays the events after it, as some real servers do.
//!
//! Why: the event carries no message and moves no cursor (it names the id the client already
//! holds); nothing restarted. The audit must judge such a resume as a replay, never as a fresh
//! stream, and this knob lets the tests drive it over real sockets with real clients.
//!
//! Invariant: the knob changes only resumes of the plain feed (a GET with `Last-Event-ID`
//! naming an event of the feed); the first GET and every event of the feed are unchanged, and
//! the priming event is not recorded as an emitted event in the lab's truth (it has no data).

use bytes::Bytes;

use super::sse_body::SseEncoder;

/// The priming event a resume from `cursor` starts with, if the knob is on.
pub fn resume_priming(on: bool, enc: &SseEncoder, cursor: Option<&str>) -> Option<Bytes> {
    let cursor = cursor.filter(|_| on)?.trim();
    Some(enc.priming(cursor, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::config::LineEnding;

    #[test]
    fn only_a_resume_with_the_knob_on_gets_a_priming_event_repeating_its_cursor() {
        let enc = SseEncoder::new(LineEnding::Lf);
        assert_eq!(
            resume_priming(true, &enc, Some("22")).as_deref(),
            Some(&b"id: 22\ndata: \n\n"[..])
        );
        assert_eq!(resume_priming(false, &enc, Some("22")), None);
        assert_eq!(resume_priming(true, &enc, None), None);
    }
}
