//! Reads one SSE response body (the POST's stream or a resume GET's) for one request and says
//! why it stopped, with the cursor each policy would resume from.
//!
//! Invariants:
//! - One scanner per connection (a new connection is a new event stream); the cursor is
//!   carried across connections by the caller.
//! - Strict (and retry) cursor = the scanner's committed last event id (advances only at
//!   dispatch); naive
//!   cursor = the id line of the event in progress if one was seen, else the committed id.
//! - Naive only: a stream ended by the close after a `GOAWAY(NO_ERROR)` is a clean end (the
//!   graceful shutdown taken as the server's normal end); every other policy sees it broken.
//! - `partial` is the scanner's `has_partial_event()` at the stop: bytes of an event that was
//!   never dispatched — the torn-boundary condition.
//! - With truth recording on, every dispatched event is recorded, also those after the strict
//!   client decided the stream is discontinuous (it then drains the body briefly first).
//! - Latencies are recorded as events are dispatched: first event of the call (from the
//!   intended start), first event after a resume (from the disconnect), gaps between events.

use tokio::time::{Duration, Instant};

use super::config::Policy;
use super::histo::{self, Histograms};
use super::http::{HttpError, Next, Response};
use super::policy::{IdVerdict, RequestStream};
use super::stats::Counters;
use super::tail::{self, Tail};
use super::truth::Dispatched;
use crate::wire::sse::{SseEvent, SseScanner};

/// How long the client waits for a body's end after the call's response arrived, hoping to
/// keep the connection for the next request.
const LINGER_AFTER_RESPONSE: Duration = Duration::from_millis(100);

/// Why a stream stopped being read.
#[derive(Debug)]
pub enum Stop {
    /// The response for the request arrived.
    Answered,
    /// The body ended by its framing without the response.
    CleanEnd,
    /// The body broke (EOF or reset inside it, timeout).
    Broken(HttpError),
    /// The strict client gave up on this stream: it does not continue the call's stream
    /// (a fresh stream or a gap answered a resume).
    Discontinuity,
    /// The strict client gave up on this stream: the server sent `event: error`.
    ErrorEvent,
}

impl Stop {
    /// A stable label (`clean-end`, an HTTP error kind, …).
    pub fn label(&self) -> &'static str {
        match self {
            Stop::Answered => "answered",
            Stop::CleanEnd => "clean-end",
            Stop::Broken(e) => e.kind(),
            Stop::Discontinuity => "discontinuity",
            Stop::ErrorEvent => "error-event",
        }
    }
}

/// What a stream left behind.
#[derive(Debug)]
pub struct Consumed {
    /// Why reading stopped.
    pub stop: Stop,
    /// The cursor of the policy (empty: none).
    pub cursor: String,
    /// The committed id at the stop.
    pub committed: String,
    /// The id line of the event in progress, if any.
    pub pending: Option<String>,
    /// True if a partial event was in hand.
    pub partial: bool,
    /// Facts about the partial event.
    pub tail: Tail,
    /// The server's `retry:` in ms, if sent.
    pub retry: Option<u64>,
    /// The first id committed on this stream, if any.
    pub first_id: Option<String>,
    /// When the stop was observed.
    pub at: Instant,
    /// True if the body ended cleanly (the connection may be reused).
    pub reusable: bool,
}

/// Timing context of the call for latency recording.
#[derive(Debug)]
pub struct Clock {
    /// The call's intended start.
    pub intended: Instant,
    /// The call's deadline.
    pub deadline: Instant,
    /// True once the call's first event was recorded.
    pub first_event_seen: bool,
    /// The disconnect this stream resumes from, if it is a resume.
    pub resumed_from: Option<Instant>,
    /// The first disconnect of the call not yet followed by a non-priming event.
    pub recovering_from: Option<Instant>,
    /// When the call's last non-priming event arrived.
    pub last_event_at: Option<Instant>,
}

/// Reads `resp` to a stop, feeding every event to `req`.
pub async fn consume(
    resp: &mut Response,
    policy: Policy,
    prev_cursor: &str,
    req: &mut RequestStream,
    clock: &mut Clock,
    counters: &mut Counters,
    histos: &mut Histograms,
) -> Consumed {
    let mut scanner = SseScanner::new();
    let mut tail = Tail::new();
    let mut last_event_at: Option<Instant> = None;
    let mut stream_first: Option<Instant> = None;
    let mut stream_events: u32 = 0;
    let mut max_gap: Option<std::time::Duration> = None;
    // The first non-priming event after a cut; counted as the recovery only if this stream is
    // not then abandoned as discontinuous.
    let mut recovered_at: Option<Instant> = None;
    let mut first_id: Option<String> = None;
    let mut deadline = clock.deadline;
    let mut reusable = false;
    if clock.resumed_from.is_some() {
        req.begin_resume();
    }
    let stop = loop {
        let chunk = match resp.body.next(deadline).await {
            Ok(Next::Data(d)) => d,
            Ok(Next::End) => {
                reusable = true;
                break if req.has_response() {
                    Stop::Answered
                } else {
                    Stop::CleanEnd
                };
            }
            Err(_) if req.has_response() => break Stop::Answered,
            // The naive client takes a graceful GOAWAY as the server's normal end, as clients
            // that treat GOAWAY(NO_ERROR) as "done" do: the stream it cut is taken as ended.
            Err(HttpError::GoAway { code })
                if policy == Policy::Naive && code == crate::wire::h2::ErrorCode::NO_ERROR =>
            {
                break Stop::CleanEnd;
            }
            Err(e) => break Stop::Broken(e),
        };
        if req.has_response() {
            // Bytes after the response: nothing to judge, only drained for reuse.
            continue;
        }
        let mut verdict = IdVerdict::New;
        let mut on_event = |ev: &SseEvent<'_>| {
            if let Some(tape) = &mut req.tape {
                tape.push(Dispatched::of(ev));
            }
            if verdict == IdVerdict::Discontinuity {
                return;
            }
            let now = Instant::now();
            let priming = ev.data.is_empty();
            if !priming {
                if !clock.first_event_seen {
                    clock.first_event_seen = true;
                    histos.record(histo::FIRST_EVENT, now - clock.intended);
                }
                if clock.recovering_from.is_some() {
                    recovered_at.get_or_insert(now);
                }
                clock.last_event_at = Some(now);
            }
            if let Some(from) = clock.resumed_from.take() {
                histos.record(histo::RESUME, now - from);
            }
            if let Some(prev) = last_event_at {
                let gap = now - prev;
                histos.record(histo::INTER_EVENT, gap);
                max_gap = Some(max_gap.map_or(gap, |m| m.max(gap)));
            }
            last_event_at = Some(now);
            stream_first.get_or_insert(now);
            stream_events += 1;
            if first_id.is_none() && !ev.last_event_id.is_empty() {
                first_id = Some(ev.last_event_id.to_string());
            }
            if req.on_event(ev, counters) == IdVerdict::Discontinuity {
                verdict = IdVerdict::Discontinuity;
            }
        };
        tail::feed(&mut scanner, &mut tail, chunk, &mut on_event);
        let committed = scanner.last_event_id();
        if first_id.is_none() && !committed.is_empty() {
            first_id = Some(committed.to_string());
        }
        if verdict != IdVerdict::Discontinuity
            && req.observe_id(committed, counters) == IdVerdict::Discontinuity
        {
            verdict = IdVerdict::Discontinuity;
        }
        if policy.verifies() {
            if verdict == IdVerdict::Discontinuity {
                if let Some(tape) = &mut req.tape {
                    drain(resp, &mut scanner, tape, deadline).await;
                }
                break Stop::Discontinuity;
            }
            if req.error_event {
                break Stop::ErrorEvent;
            }
        }
        if req.has_response() {
            deadline = deadline.min(Instant::now() + LINGER_AFTER_RESPONSE);
        }
    };
    if let Some(gap) = max_gap {
        histos.record(histo::MAX_GAP, gap);
    }
    if let Some(at) = recovered_at
        && !matches!(stop, Stop::Discontinuity | Stop::ErrorEvent)
        && let Some(from) = clock.recovering_from.take()
    {
        histos.record(histo::RECOVERY, at - from);
    }
    if let (Some(first), Some(last)) = (stream_first, last_event_at)
        && stream_events >= 2
    {
        histos.record(histo::STREAM_INTERVAL, (last - first) / (stream_events - 1));
    }
    let committed = scanner.last_event_id().to_string();
    let pending = scanner.pending_id().map(str::to_string);
    let cursor = match policy {
        Policy::Naive => match pending.as_deref().filter(|p| !p.is_empty()) {
            Some(p) => p.to_string(),
            None if !committed.is_empty() => committed.clone(),
            None => prev_cursor.to_string(),
        },
        Policy::Strict | Policy::Retry if !committed.is_empty() => committed.clone(),
        Policy::Strict | Policy::Retry => prev_cursor.to_string(),
    };
    Consumed {
        partial: scanner.has_partial_event(),
        retry: scanner.retry(),
        stop,
        cursor,
        committed,
        pending,
        tail,
        first_id,
        at: Instant::now(),
        reusable,
    }
}

/// Truth recording only: after the strict client gave up on a stream, records the events that
/// still reach it (until the body ends, breaks, or [`LINGER_AFTER_RESPONSE`] passes), so the
/// record says what reached the client, not only what it chose to process.
async fn drain(
    resp: &mut Response,
    scanner: &mut SseScanner,
    tape: &mut Vec<Dispatched>,
    deadline: Instant,
) {
    let until = deadline.min(Instant::now() + LINGER_AFTER_RESPONSE);
    while let Ok(Next::Data(d)) = resp.body.next(until).await {
        scanner.feed(d, &mut |ev| tape.push(Dispatched::of(ev)));
    }
}
