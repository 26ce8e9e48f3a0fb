//! Outcome counters of one client policy.
//!
//! Why: the load client's outcomes (calls, ok, failed, silently lost, detections, …) are the
//! numbers that show the documents' failure and its fix; their names are shared by the JSON
//! keys and the `--fail-on` metrics.
//! Invariants: [`Counters::NAMES`], [`Counters::get`], [`Counters::set`] and the serde keys
//! (kebab-case of the field names) name the same fourteen counters; lookups also accept the
//! load client's snake_case names (`silently_lost`, `torn_detections`, …), see
//! [`Counters::canonical`].

use serde::{Deserialize, Serialize};

/// A counter name that is not one of [`Counters::NAMES`] (nor an accepted spelling of one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown counter `{name}`; known: {}", Counters::NAMES.join(", "))]
pub struct UnknownCounter {
    /// The name given.
    pub name: String,
}

/// Outcome counters of one client policy. JSON keys (kebab-case) are the metric names of
/// thresholds: `calls`, `ok`, `failed`, `silent-loss`, ….
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Counters {
    /// Calls finished; each is exactly one of ok, failed, silent-loss.
    pub calls: u64,
    /// Calls completed with their verified result (or JSON-RPC error) for their id.
    pub ok: u64,
    /// Calls that ended in a failure the client knew about (attempts or time exhausted,
    /// explicit failure).
    pub failed: u64,
    /// Calls the client took as complete without a valid result: the documents' failure.
    pub silent_loss: u64,
    /// Disconnects while a partial event was in hand, detected by the client.
    pub torn_detections: u64,
    /// Resume GETs sent with `Last-Event-ID`.
    pub resumes: u64,
    /// Fresh sessions negotiated to replace one that could not continue.
    pub renegotiations: u64,
    /// Calls re-sent as a new request with a new JSON-RPC id.
    pub reissues: u64,
    /// Events whose id was already delivered in the same call.
    pub duplicates: u64,
    /// Sequence jumps forward within a stream.
    pub gaps: u64,
    /// Sequence steps backwards within a stream not explained as duplicates.
    pub reorders: u64,
    /// Explicit failures the server signalled: non-2xx, `event: error`, JSON-RPC error.
    pub explicit_errors: u64,
    /// Fresh streams served in answer to a resume (continuation instead of replay).
    pub fresh_streams: u64,
    /// Events dispatched to the client.
    pub events: u64,
}

impl Counters {
    /// Metric names, in JSON order.
    pub const NAMES: [&'static str; 14] = [
        "calls",
        "ok",
        "failed",
        "silent-loss",
        "torn-detections",
        "resumes",
        "renegotiations",
        "reissues",
        "duplicates",
        "gaps",
        "reorders",
        "explicit-errors",
        "fresh-streams",
        "events",
    ];

    /// The metric name `name` stands for: `_` read as `-`, and `silently-lost` as
    /// `silent-loss`; `None` when it names no counter.
    pub fn canonical(name: &str) -> Option<&'static str> {
        let kebab = name.replace('_', "-");
        let kebab = if kebab == "silently-lost" {
            "silent-loss"
        } else {
            kebab.as_str()
        };
        Counters::NAMES.iter().copied().find(|n| *n == kebab)
    }

    fn slot(&mut self, name: &str) -> Option<&mut u64> {
        Some(match Counters::canonical(name)? {
            "calls" => &mut self.calls,
            "ok" => &mut self.ok,
            "failed" => &mut self.failed,
            "silent-loss" => &mut self.silent_loss,
            "torn-detections" => &mut self.torn_detections,
            "resumes" => &mut self.resumes,
            "renegotiations" => &mut self.renegotiations,
            "reissues" => &mut self.reissues,
            "duplicates" => &mut self.duplicates,
            "gaps" => &mut self.gaps,
            "reorders" => &mut self.reorders,
            "explicit-errors" => &mut self.explicit_errors,
            "fresh-streams" => &mut self.fresh_streams,
            "events" => &mut self.events,
            _ => return None,
        })
    }

    /// Sets the counter called `name`; false (and nothing set) if there is no such counter.
    pub fn set(&mut self, name: &str, value: u64) -> bool {
        match self.slot(name) {
            Some(slot) => {
                *slot = value;
                true
            }
            None => false,
        }
    }

    /// The counter called `name` (see [`Counters::canonical`] for accepted spellings).
    pub fn get(&self, name: &str) -> Option<u64> {
        let mut copy = *self;
        copy.slot(name).map(|v| *v)
    }

    /// Counters from `(name, value)` pairs, e.g. the load client's `Counters::pairs()`;
    /// counters not named stay 0.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Result<Counters, UnknownCounter> {
        let mut c = Counters::default();
        for (name, value) in pairs {
            if !c.set(name, value) {
                return Err(UnknownCounter {
                    name: name.to_owned(),
                });
            }
        }
        Ok(c)
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

    #[test]
    fn the_load_clients_snake_case_names_are_accepted() {
        let c = Counters::from_pairs([("silently_lost", 3), ("torn_detections", 2)])
            .expect("known names");
        assert_eq!((c.silent_loss, c.torn_detections), (3, 2));
        assert_eq!(c.get("silently_lost"), Some(3));
        let err = Counters::from_pairs([("lost", 1)]).expect_err("unknown");
        assert!(err.to_string().contains("silent-loss"), "{err}");
    }
}
