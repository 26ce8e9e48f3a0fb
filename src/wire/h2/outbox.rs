//! Observations of one direction of an h2 connection, held until the bytes that produced them
//! are delivered — the delivery contract of [`crate::wire::WireObserver`], per stream.
//!
//! Why not the HTTP/1.1 outbox: on h2 one stream can end (the proxy resets it) while the others
//! flow on, so what a stream cut discards must be that stream's observations only.
//!
//! Invariants: observations are released in the order they were held, each once every byte
//! before its offset was delivered; a connection end at `x` discards everything held past `x`;
//! a stream end at `x` discards that stream's observations past `x` only. Memory: what the
//! observed but undelivered bytes produced (bounded by the pump's reads in flight).

use std::collections::VecDeque;

use crate::wire::http1::size_of_obs;
use crate::wire::{Observation, ObservationSink};

/// The stream tag of connection-level observations (`Protocol`, `GoAway`).
pub(super) const CONNECTION: u32 = 0;

#[derive(Default)]
pub(super) struct Outbox {
    /// (raw offset just after the producing bytes, stream, observation).
    held: VecDeque<(u64, u32, Observation)>,
    through: u64,
    /// Nothing at or after this offset will be delivered.
    end: Option<u64>,
    bytes: usize,
}

impl Outbox {
    /// Holds `obs` (of `stream`) until the bytes before raw offset `at` are delivered.
    pub(super) fn hold(&mut self, at: u64, stream: u32, obs: Observation) {
        if self.end.is_none_or(|end| at <= end) {
            self.bytes += size_of_obs(&obs);
            self.held.push_back((at, stream, obs));
        }
    }

    /// Every byte before `raw` was delivered: releases what they produced, in order.
    pub(super) fn release(&mut self, raw: u64, sink: &dyn ObservationSink) {
        self.through = self.through.max(raw);
        let through = self.through;
        if self.held.front().is_none_or(|(at, ..)| *at > through) {
            return;
        }
        let (held, bytes) = (&mut self.held, &mut self.bytes);
        sink.record_all(&mut std::iter::from_fn(|| {
            if held.front().is_none_or(|(at, ..)| *at > through) {
                return None;
            }
            let (_, _, obs) = held.pop_front()?;
            *bytes = bytes.saturating_sub(size_of_obs(&obs));
            Some(obs)
        }));
        if self.held.is_empty() && self.held.capacity() > 64 {
            self.held = VecDeque::new();
        }
    }

    /// Nothing at or after `raw` will be delivered (a drop or a connection cut): discards what
    /// those bytes produced, appending to `lost` the streams whose `StreamEnd` was discarded
    /// (they end unclean instead) — unless their `Response` was discarded too: a stream whose
    /// head never reaches the client never began for it, and gets no end.
    pub(super) fn end_at(&mut self, raw: u64, lost: &mut Vec<u32>) {
        let end = self.end.map_or(raw, |e| e.min(raw));
        self.end = Some(end);
        let mut headless = Vec::new();
        for (at, s, obs) in &self.held {
            if *at <= end {
                continue;
            }
            match obs {
                Observation::Response { .. } => headless.push(*s),
                Observation::StreamEnd { .. } if !headless.contains(s) => lost.push(*s),
                _ => {}
            }
        }
        self.discard(|at, _| at > end);
    }

    /// Stream `stream` ended at `raw`: its observations produced past `raw` never will be.
    pub(super) fn end_stream_at(&mut self, stream: u32, raw: u64) {
        self.discard(|at, s| s == stream && at > raw);
    }

    fn discard(&mut self, gone: impl Fn(u64, u32) -> bool) {
        let bytes = &mut self.bytes;
        self.held.retain(|(at, s, obs)| {
            let keep = !gone(*at, *s);
            if !keep {
                *bytes = bytes.saturating_sub(size_of_obs(obs));
            }
            keep
        });
    }

    pub(super) fn through(&self) -> u64 {
        self.through
    }

    pub(super) fn held_bytes(&self) -> usize {
        self.bytes
    }
}
