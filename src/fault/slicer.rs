//! `slicer`: chunks are cut into small slices sent `delay_us` apart.
//!
//! Observable effect: the peer receives the bytes unchanged and in order, in writes of
//! `average_size ± size_variation` bytes (never more than `average_size + size_variation`),
//! each write at least `delay_us` after the previous one. With `delay_us > 0` the peer's reads
//! never exceed one slice; with 0 the kernel may coalesce slices.
//!
//! Profile keys: `average_size` (required, bytes, > 0), `size_variation` (bytes, default 0, less
//! than `average_size`), `delay_us` (microseconds between slices, default 0), plus `direction`
//! and `probability`.

use std::time::Duration;

use rand::RngExt;
use tokio::time::Instant;

use super::common::Factory;
use super::common::KindConfig;
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope, Toxic, conn};
use super::{Chunk, ConnRng, Fault, Plan, Slice};

/// Configuration of `slicer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlicerConfig {
    /// Mean slice size in bytes (> 0).
    pub average_size: usize,
    /// Slices are `average_size ± size_variation` bytes (`size_variation < average_size`).
    pub size_variation: usize,
    /// Time between slices.
    pub delay: Duration,
}

impl SlicerConfig {
    /// Checks the sizes; `average_key`/`variation_key` name the keys in messages.
    pub fn checked(
        r: &mut KeyReader<'_>,
        average_key: &'static str,
        variation_key: &'static str,
        average_size: u64,
        size_variation: u64,
        delay: Duration,
    ) -> Result<Self, FaultConfigError> {
        let to_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        if average_size == 0 {
            return Err(at(
                r,
                average_key,
                format!("{average_key} must be > 0, got 0"),
            ));
        }
        if size_variation >= average_size {
            return Err(at(
                r,
                variation_key,
                format!(
                    "{variation_key} must be less than {average_key} ({average_size}), got {size_variation}"
                ),
            ));
        }
        Ok(SlicerConfig {
            average_size: to_usize(average_size),
            size_variation: to_usize(size_variation),
            delay,
        })
    }

    /// Reads `average_size`, `size_variation` and `delay_us`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let average = r
            .u64("average_size", "bytes")?
            .ok_or_else(|| r.missing("average_size"))?;
        let variation = r.u64("size_variation", "bytes")?.unwrap_or(0);
        let delay = r.micros("delay_us")?.unwrap_or_default();
        Self::checked(
            r,
            "average_size",
            "size_variation",
            average,
            variation,
            delay,
        )
    }

    /// The largest slice this configuration makes.
    pub fn max_slice(&self) -> usize {
        self.average_size + self.size_variation
    }
}

fn at(r: &mut KeyReader<'_>, key: &'static str, message: String) -> FaultConfigError {
    match r.raw(key) {
        Some(p) => FaultConfigError::at_value(p, message),
        None => FaultConfigError::at_def(r.def(), Some(key), message),
    }
}

impl KindConfig for SlicerConfig {
    const KIND: &'static str = "slicer";

    fn make(&self, _rng: &mut ConnRng, _now: Instant) -> Box<dyn Fault> {
        Box::new(Slicer {
            cfg: *self,
            last: None,
            scratch: Vec::new(),
        })
    }
}

/// One connection's `slicer`.
#[derive(Debug)]
pub struct Slicer {
    cfg: SlicerConfig,
    /// Departure time of the previous slice.
    last: Option<Instant>,
    scratch: Vec<Slice>,
}

impl Fault for Slicer {
    fn kind(&self) -> &'static str {
        SlicerConfig::KIND
    }

    fn on_chunk(&mut self, _chunk: &Chunk<'_>, plan: &mut Plan, rng: &mut ConnRng) {
        let lo = self.cfg.average_size - self.cfg.size_variation;
        let hi = self.cfg.max_slice();
        self.scratch.clear();
        for s in plan.slices() {
            let mut start = s.start;
            while start < s.end {
                let size = if lo == hi {
                    lo
                } else {
                    rng.random_range(lo..=hi)
                };
                let end = (start + size).min(s.end);
                let at = match self.last {
                    Some(last) => s.at.max(last + self.cfg.delay),
                    None => s.at,
                };
                self.last = Some(at);
                self.scratch.push(Slice { start, end, at });
                start = end;
            }
        }
        std::mem::swap(plan.slices_mut(), &mut self.scratch);
    }
}

/// `slicer` in the registry; Toxiproxy's `slicer` (`average_size`, `size_variation` in bytes,
/// `delay` in µs).
pub const KIND: KindInfo = KindInfo {
    name: "slicer",
    scope: Scope::Connection,
    summary: "chunks cut into slices of average ± variation bytes, delay between them",
    keys: &[
        ("average_size", "bytes, > 0 (required)"),
        ("size_variation", "bytes, < average_size (default 0)"),
        ("delay_us", "microseconds between slices (default 0)"),
    ],
    read: |r| conn(r, SlicerConfig::read),
    toxic: Some(Toxic {
        type_: "slicer",
        attributes: &["average_size", "size_variation", "delay"],
        read: |r, common| {
            let avg = r.u64("average_size", "bytes")?.unwrap_or(0);
            let var = r.u64("size_variation", "bytes")?.unwrap_or(0);
            let delay = r.micros("delay")?.unwrap_or_default();
            let cfg = SlicerConfig::checked(r, "average_size", "size_variation", avg, var, delay)?;
            Ok(Factory::shared(common, cfg))
        },
    }),
};
