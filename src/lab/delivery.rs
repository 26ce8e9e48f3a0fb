//! Delivery: copies one stream's events from the session ring into one HTTP response body.
//!
//! A delivery task belongs to a connection, a producer to a call; they share only the ring.
//! Invariants:
//! - Events go out in sequence order (unless a scripted bug of [`super::bugs`] reorders,
//!   repeats or skips some on a resume leg), each exactly as stored, cut into HTTP chunks per the
//!   `chunking` knob; the cursor advances only past events handed to the body.
//! - An event whose resource indicator the reader's audience does not cover is never sent:
//!   `on_unauthorized = error` sends `event: error` (offending id, required indicator, no id
//!   field), `silent-end` sends `event: end`; either way the body then ends.
//! - While a delivery runs, its reader is attached to the stream: the stream's producer stays
//!   less than half a ring ahead of it, so a connected client is not outrun by its own call.
//! - A live reader that still falls behind the ring (other streams of the session evicted) (its next event was evicted) gets `event: error`
//!   naming the lost range under `on_evicted = error`; the other modes skip the range silently.
//! - An event with a [`Hold`] is sent in two parts, split where the hold says, with the pause
//!   between them (the first part flushed, and taken by the body, before the pause begins).
//! - The task ends when the stream is finished and fully sent, when the body is dropped (the
//!   client went away: the producer keeps running), or when the session or server ends.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio_util::sync::DropGuard;

use super::auth::Audience;
use super::bugs::LegShape;
use super::config::{Chunking, OnEvicted, OnUnauthorized};
use super::hold::Hold;
use super::ring::Next;
use super::session::Session;
use super::shared::Shared;
use super::sse_body::{LabBody, lines};

/// What one response body delivers.
#[derive(Debug)]
pub struct Delivery {
    /// The session holding the ring.
    pub session: Arc<Session>,
    /// The stream to deliver.
    pub stream: u64,
    /// Last event already delivered (`None`: start at the stream's first event).
    pub cursor: Option<u64>,
    /// The reader's audience when auth is on.
    pub audience: Option<Audience>,
    /// Dropped when delivery ends; in 2026-07-28 mode it cancels the producer (closing the
    /// response stream cancels the request).
    pub guard: Option<DropGuard>,
    /// The leg's scripted bug and truth record ([`super::bugs`]).
    pub shape: LegShape,
}

/// Starts delivering `d` and returns the response body it feeds.
/// The reader is attached before this returns, so a producer spawned afterwards already
/// waits for it.
pub fn spawn(shared: &Arc<Shared>, d: Delivery) -> LabBody {
    let (tx, rx) = mpsc::channel(4);
    let reader = d.session.attach(d.stream, d.cursor.map_or(0, |c| c + 1));
    let attached = Attached {
        session: Arc::clone(&d.session),
        stream: d.stream,
        reader,
    };
    shared.tasks.spawn(run(Arc::clone(shared), d, attached, tx));
    LabBody::Stream(rx)
}

struct Out {
    tx: mpsc::Sender<Bytes>,
    chunking: Chunking,
    pending: BytesMut,
}

impl Out {
    /// Queues an event; `Err` once the body is gone.
    async fn event(&mut self, bytes: Bytes) -> Result<(), ()> {
        match self.chunking {
            Chunking::PerEvent => self.tx.send(bytes).await.map_err(drop),
            Chunking::PerLine => {
                let mut sent = 0;
                for line in lines(&bytes) {
                    sent += line.len();
                    self.tx.send(line).await.map_err(drop)?;
                }
                // The part of a held event before its pause ends mid-line.
                if sent < bytes.len() {
                    self.tx.send(bytes.slice(sent..)).await.map_err(drop)?;
                }
                Ok(())
            }
            Chunking::Coalesce => {
                self.pending.extend_from_slice(&bytes);
                Ok(())
            }
        }
    }

    /// Queues an event whose delivery pauses as `hold` says; `Err` once the body is gone or
    /// the session or server ended during the pause.
    async fn held(
        &mut self,
        bytes: Bytes,
        hold: Hold,
        shared: &Shared,
        session: &Session,
    ) -> Result<(), ()> {
        let at = hold.split(bytes.len());
        self.event(bytes.slice(..at)).await?;
        self.flush().await?;
        let tx = &self.tx;
        let paused = async {
            // Every frame before the pause taken by the body: its bytes are the server's to
            // write, so a gate counts only streams whose first part is on its way.
            drop(tx.reserve_many(tx.max_capacity()).await.map_err(drop)?);
            hold.pause(&shared.gate).await;
            Ok(())
        };
        tokio::select! {
            r = paused => r?,
            () = tx.closed() => return Err(()),
            () = session.cancel.cancelled() => return Err(()),
            () = shared.shutdown.cancelled() => return Err(()),
        }
        self.event(bytes.slice(at..)).await
    }

    async fn flush(&mut self) -> Result<(), ()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let b = self.pending.split().freeze();
        self.tx.send(b).await.map_err(drop)
    }
}

/// Detaches the reader when the delivery ends, however it ends.
struct Attached {
    session: Arc<Session>,
    stream: u64,
    reader: u64,
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.session.detach(self.stream, self.reader);
    }
}

async fn run(shared: Arc<Shared>, d: Delivery, attached: Attached, tx: mpsc::Sender<Bytes>) {
    let _guard = d.guard;
    let mut shape = d.shape;
    let session = d.session;
    let reader = attached.reader;
    let _attached = attached;
    let cfg = &shared.cfg;
    let enc = shared.enc;
    let mut cursor = d.cursor;
    let mut out = Out {
        tx,
        chunking: cfg.chunking,
        pending: BytesMut::new(),
    };
    let mut changes = session.subscribe();
    let limit = if cfg.chunking == Chunking::Coalesce {
        64
    } else {
        8
    };
    loop {
        changes.borrow_and_update();
        match session.next_after(d.stream, cursor, limit) {
            Next::Events(events) => {
                let newest = events.iter().map(|e| e.seq).max();
                let shaped = shape.shape(events);
                for ev in shaped.events {
                    if let (Some(aud), Some(res)) = (&d.audience, &ev.resource)
                        && !aud.covers(res)
                    {
                        let bytes = match cfg.on_unauthorized {
                            OnUnauthorized::Error => {
                                let data = serde_json::json!({
                                    "error": "unauthorized-event",
                                    "event_id": session.event_id(ev.stream, ev.seq),
                                    "resource": &**res,
                                    "last_delivered": cursor.map(|c| session.event_id(ev.stream, c)),
                                });
                                enc.named("error", data.to_string().as_bytes())
                            }
                            OnUnauthorized::SilentEnd => enc.named("end", b"{}"),
                        };
                        let _ = out.flush().await;
                        let _ = out.tx.send(bytes).await;
                        return;
                    }
                    if let Some(leg) = &shape.leg {
                        leg.emit(&session.id, ev.stream, ev.seq, &ev.bytes);
                    }
                    let seq = ev.seq;
                    let sent = match ev.hold {
                        None => out.event(ev.bytes).await,
                        Some(h) => out.held(ev.bytes, h, &shared, &session).await,
                    };
                    if sent.is_err() {
                        return;
                    }
                    cursor = Some(seq);
                }
                // A shaped batch may reorder or skip events: the cursor is past all of them.
                cursor = newest.or(cursor);
                if out.flush().await.is_err() || shaped.end {
                    return;
                }
                if let Some(c) = cursor {
                    session.advance(d.stream, reader, c + 1);
                }
            }
            Next::Lost { from, to } => match cfg.on_evicted {
                OnEvicted::Error => {
                    let data = serde_json::json!({
                        "error": "events-evicted",
                        "lost_from": session.event_id(d.stream, from),
                        "lost_to": session.event_id(d.stream, to),
                    });
                    let _ = out
                        .tx
                        .send(enc.named("error", data.to_string().as_bytes()))
                        .await;
                    return;
                }
                OnEvicted::Fresh | OnEvicted::ReplayFromOldest => {
                    cursor = Some(to);
                    session.advance(d.stream, reader, to + 1);
                }
            },
            Next::Wait => {
                let keepalive = cfg.keepalive;
                tokio::select! {
                    r = changes.changed() => if r.is_err() { return },
                    _ = sleep_opt(keepalive) => {
                        if out.tx.send(enc.comment("keepalive")).await.is_err() {
                            return;
                        }
                    }
                    _ = session.cancel.cancelled() => return,
                    _ = shared.shutdown.cancelled() => return,
                    _ = out.tx.closed() => return,
                }
            }
            Next::Finished | Next::Unknown => return,
        }
    }
}

async fn sleep_opt(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}
