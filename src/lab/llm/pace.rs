//! Timing of a streamed LLM answer: the body task that hands the answer's events to the HTTP
//! body on the schedule the knobs describe.
//!
//! Schedule (offsets from the response head): every event before the first delta at 0; the
//! first delta (or, in an answer without deltas, the first event after the preamble) at `ttft`;
//! each later delta `gap` after the previous one; every other event right after the event
//! before it. Deadlines are absolute (no drift under load). Invariants: events go out in
//! order, whole, per the lab's `chunking` (one HTTP chunk per event, per line, or every event
//! due at one instant in one chunk); the task ends when the answer is out, the client is gone
//! or the server shuts down.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::frame::{Frame, Part};
use crate::lab::config::Chunking;
use crate::lab::sse_body::{LabBody, lines};

/// When each frame is due, as offsets from the start.
pub fn schedule(frames: &[Frame], ttft: Duration, gap: Duration) -> Vec<Duration> {
    let mut at = Duration::ZERO;
    let mut started = false;
    frames
        .iter()
        .map(|f| {
            if !started && f.part != Part::Preamble {
                started = true;
                at = ttft;
            } else if started && f.part.is_delta() {
                // A delta after the first one.
                at += gap;
            }
            at
        })
        .collect()
}

/// Starts the task sending `frames` and returns the body it feeds.
pub fn spawn(
    tasks: &tokio_util::task::TaskTracker,
    shutdown: CancellationToken,
    frames: Vec<Frame>,
    ttft: Duration,
    gap: Duration,
    chunking: Chunking,
) -> LabBody {
    let (tx, rx) = mpsc::channel(16);
    tasks.spawn(async move {
        tokio::select! {
            () = run(frames, ttft, gap, chunking, tx) => {}
            () = shutdown.cancelled() => {}
        }
    });
    LabBody::Stream(rx)
}

async fn run(
    frames: Vec<Frame>,
    ttft: Duration,
    gap: Duration,
    chunking: Chunking,
    tx: mpsc::Sender<Bytes>,
) {
    let due = schedule(&frames, ttft, gap);
    let start = Instant::now();
    let mut pending = BytesMut::new();
    for (frame, at) in frames.into_iter().zip(due) {
        let deadline = start + at;
        if deadline > Instant::now() {
            if !pending.is_empty() && tx.send(pending.split().freeze()).await.is_err() {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
        let sent = match chunking {
            Chunking::PerEvent => tx.send(frame.bytes).await.is_ok(),
            Chunking::PerLine => {
                let mut ok = true;
                for line in lines(&frame.bytes) {
                    if tx.send(line).await.is_err() {
                        ok = false;
                        break;
                    }
                }
                ok
            }
            Chunking::Coalesce => {
                pending.extend_from_slice(&frame.bytes);
                true
            }
        };
        if !sent {
            return;
        }
    }
    if !pending.is_empty() {
        let _ = tx.send(pending.freeze()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(part: Part) -> Frame {
        Frame {
            part,
            bytes: Bytes::new(),
        }
    }

    #[test]
    fn preamble_at_zero_first_delta_at_ttft_then_one_gap_per_delta() {
        let frames = [
            f(Part::Preamble),
            f(Part::Preamble),
            f(Part::Delta),
            f(Part::Delta),
            f(Part::Delta),
            f(Part::Completion),
            f(Part::Terminal),
        ];
        let ms = Duration::from_millis;
        assert_eq!(
            schedule(&frames, ms(100), ms(10)),
            [ms(0), ms(0), ms(100), ms(110), ms(120), ms(120), ms(120)]
        );
    }

    #[test]
    fn an_answer_without_deltas_still_waits_ttft_before_its_completion() {
        let frames = [f(Part::Preamble), f(Part::Completion), f(Part::Terminal)];
        let ms = Duration::from_millis;
        assert_eq!(schedule(&frames, ms(50), ms(10)), [ms(0), ms(50), ms(50)]);
    }
}
