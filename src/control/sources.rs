//! Live sources for `GET /cuts`, `GET /findings` and the cut and finding counters of
//! `/metrics`: a bounded book of cut records fed by the proxies' observation sink, and the
//! auditor's findings.
//!
//! Invariant: the cut book keeps at most [`MAX_CUTS`] records (counters see every cut), so a
//! long-running proxy's memory does not grow with its cuts.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use super::hub::{CutCount, CutsSource, FindingsSource};
use crate::audit::Auditor;
use crate::wire::record::CutRecord;
use crate::wire::{Observation, ObservationSink};

/// Cut records kept for `GET /cuts`.
pub const MAX_CUTS: usize = 10_000;

#[derive(Default)]
struct Book {
    records: Vec<CutRecord>,
    counts: BTreeMap<(String, String), u64>,
}

/// Records the cuts of one proxy (an [`ObservationSink`]) for the API.
pub struct CutBook {
    proxy: String,
    book: Mutex<Book>,
}

impl CutBook {
    /// An empty book for the proxy named `proxy`.
    pub fn new(proxy: impl Into<String>) -> Self {
        CutBook {
            proxy: proxy.into(),
            book: Mutex::new(Book::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ObservationSink for CutBook {
    fn cuts_only(&self) -> bool {
        true
    }

    fn record(&self, obs: Observation) {
        let Some(rec) = CutRecord::from_observation(&obs, &self.proxy, SystemTime::now()) else {
            return;
        };
        let Observation::Cut { action, point, .. } = &obs else {
            return;
        };
        let class = point.class.map_or("none", |c| c.as_str()).to_owned();
        let mut book = self.lock();
        *book
            .counts
            .entry((class, action.as_str().to_owned()))
            .or_default() += 1;
        if book.records.len() < MAX_CUTS {
            book.records.push(rec);
        }
    }
}

/// Every proxy's cut book, for the API.
pub struct CutBooks(pub Vec<Arc<CutBook>>);

impl CutsSource for CutBooks {
    fn cuts(&self) -> serde_json::Value {
        let all: Vec<CutRecord> = self
            .0
            .iter()
            .flat_map(|b| b.lock().records.clone())
            .collect();
        serde_json::to_value(all).unwrap_or(serde_json::Value::Array(Vec::new()))
    }

    fn counts(&self) -> Vec<CutCount> {
        let mut merged: BTreeMap<(String, String), u64> = BTreeMap::new();
        for b in &self.0 {
            for (k, v) in &b.lock().counts {
                *merged.entry(k.clone()).or_default() += v;
            }
        }
        merged
            .into_iter()
            .map(|((class, action), count)| CutCount {
                class,
                action,
                count,
            })
            .collect()
    }
}

/// The auditor as the API's findings source.
pub struct AuditFindings(pub Arc<Auditor>);

impl FindingsSource for AuditFindings {
    fn findings(&self) -> serde_json::Value {
        serde_json::to_value(self.0.findings()).unwrap_or(serde_json::Value::Array(Vec::new()))
    }

    fn counts(&self) -> Vec<(String, u64)> {
        self.0.counts().into_iter().collect()
    }

    fn dropped(&self) -> u64 {
        self.0.dropped()
    }

    fn tracked(&self) -> Vec<(&'static str, u64)> {
        self.0.store_sizes()
    }

    fn evicted(&self) -> u64 {
        self.0.evicted()
    }
}
