//! Outcome counters of one client policy.
//!
//! Why: the load client's outcomes (calls, ok, failed, silently lost, detections, …) are the
//! numbers that show the documents' failure and its fix; their names are shared by the JSON
//! keys and the `--fail-on` metrics.
//! Invariants: [`Counters::NAMES`], [`Counters::get`], [`Counters::set`] and the serde keys
//! (kebab-case of the field names) name the same eleven counters.

use serde::{Deserialize, Serialize};

/// Outcome counters of one client policy. JSON keys (kebab-case) are the metric names of
/// thresholds: `calls`, `ok`, `failed`, `silent-loss`, ….
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Counters {
    /// `tools/call` requests issued.
    pub calls: u64,
    /// Calls that got a complete, verified result.
    pub ok: u64,
    /// Calls that ended in an error the client saw (explicit or transport, after retries).
    pub failed: u64,
    /// Calls the client counted as done whose result was lost or corrupt (found only by the
    /// harness's verification): the documents' failure.
    pub silent_loss: u64,
    /// Partly received events the client detected and discarded at a cut.
    pub torn_detections: u64,
    /// Resumptions with `Last-Event-ID`.
    pub resumes: u64,
    /// New sessions or re-issued requests after a resume was refused.
    pub renegotiations: u64,
    /// Events received twice.
    pub duplicates: u64,
    /// Missing event ids detected.
    pub gaps: u64,
    /// Events received out of order.
    pub reorders: u64,
    /// Explicit server errors (non-200 on resume, `event: error`).
    pub explicit_errors: u64,
}

impl Counters {
    /// Metric names, in JSON order.
    pub const NAMES: [&'static str; 11] = [
        "calls",
        "ok",
        "failed",
        "silent-loss",
        "torn-detections",
        "resumes",
        "renegotiations",
        "duplicates",
        "gaps",
        "reorders",
        "explicit-errors",
    ];

    /// Sets the counter called `name`; false (and nothing set) if there is no such counter.
    pub fn set(&mut self, name: &str, value: u64) -> bool {
        let slot = match name {
            "calls" => &mut self.calls,
            "ok" => &mut self.ok,
            "failed" => &mut self.failed,
            "silent-loss" => &mut self.silent_loss,
            "torn-detections" => &mut self.torn_detections,
            "resumes" => &mut self.resumes,
            "renegotiations" => &mut self.renegotiations,
            "duplicates" => &mut self.duplicates,
            "gaps" => &mut self.gaps,
            "reorders" => &mut self.reorders,
            "explicit-errors" => &mut self.explicit_errors,
            _ => return false,
        };
        *slot = value;
        true
    }

    /// The counter called `name` (one of [`Counters::NAMES`]).
    pub fn get(&self, name: &str) -> Option<u64> {
        Some(match name {
            "calls" => self.calls,
            "ok" => self.ok,
            "failed" => self.failed,
            "silent-loss" => self.silent_loss,
            "torn-detections" => self.torn_detections,
            "resumes" => self.resumes,
            "renegotiations" => self.renegotiations,
            "duplicates" => self.duplicates,
            "gaps" => self.gaps,
            "reorders" => self.reorders,
            "explicit-errors" => self.explicit_errors,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_gets_and_sets_its_own_counter_and_matches_the_json_key() {
        let mut c = Counters::default();
        for (i, name) in Counters::NAMES.iter().enumerate() {
            assert!(c.set(name, i as u64 + 1), "{name}");
        }
        assert!(!c.set("bogus", 1));
        let json = serde_json::to_value(c).expect("serialises");
        for (i, name) in Counters::NAMES.iter().enumerate() {
            assert_eq!(c.get(name), Some(i as u64 + 1), "{name}");
            assert_eq!(json[name], i as u64 + 1, "{name}");
        }
        assert_eq!(
            json.as_object().map(|o| o.len()),
            Some(Counters::NAMES.len())
        );
    }
}
