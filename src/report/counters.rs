//! The client's counters: ONE type for the load client (which counts), the reports (which keep
//! and merge them) and `--fail-on` (which names them).
//!
//! Why one vocabulary: a fact the client and the proxy's audit both see has one name, the
//! audit's finding kind (`torn-cut`, `replay-gap`, `replay-duplicate`, `replay-reorder`,
//! `fresh-stream`, `explicit-loss`, `reissued`, `abandoned`), so `replay` can set the client's
//! count beside the audit's and reconcile them call by call. The other counters are the
//! client's own (`calls`, `ok`, `failed`, `silent-loss`, `resumes`, `renegotiations`,
//! `explicit-errors`, `events`).
//!
//! Invariants: [`Counters::NAMES`], [`Counters::get`], [`Counters::set`] and the serde keys
//! (kebab-case of the field names) name the same sixteen counters; every finished call lands
//! in exactly one of `ok`, `failed`, `silent-loss` ([`Counters::is_balanced`]); lookups and
//! report files of schema version 2 also accept the former names (`torn-detections`,
//! `reissues`, `gaps`, `duplicates`, `reorders`, `fresh-streams`, `silently_lost`, and any
//! snake_case spelling), see [`Counters::canonical`]. Counters are plain integers owned by one
//! session task and summed at the end: recording never contends.

use serde::{Deserialize, Serialize};

/// A counter name that is not one of [`Counters::NAMES`] (nor an accepted spelling of one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown counter `{name}`; known: {}", Counters::NAMES.join(", "))]
pub struct UnknownCounter {
    /// The name given.
    pub name: String,
}

/// Counts over a client run (or one session of it). JSON keys (kebab-case) are the metric names
/// of thresholds: `calls`, `ok`, `failed`, `silent-loss`, `torn-cut`, ….
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
    #[serde(alias = "silently-lost")]
    pub silent_loss: u64,
    /// Connections that stopped while the client held part of an undispatched event (the
    /// audit's `torn-cut`, seen from the client).
    #[serde(alias = "torn-detections")]
    pub torn_cut: u64,
    /// Resume GETs sent with `Last-Event-ID`.
    pub resumes: u64,
    /// Fresh sessions negotiated to replace one that could not continue.
    pub renegotiations: u64,
    /// Calls re-sent (a new JSON-RPC id, the call's `Idempotency-Key`) after their request
    /// reached the server without an answer (the audit's `reissued`).
    #[serde(alias = "reissues")]
    pub reissued: u64,
    /// Events whose id was already delivered in the same call (the audit's `replay-duplicate`).
    #[serde(alias = "duplicates")]
    pub replay_duplicate: u64,
    /// Resumed streams that skipped owed events: a forward jump in `<stream>-<seq>` ids (the
    /// audit's `replay-gap`).
    #[serde(alias = "gaps")]
    pub replay_gap: u64,
    /// Sequence steps backwards within a stream not explained as duplicates (the audit's
    /// `replay-reorder`).
    #[serde(alias = "reorders")]
    pub replay_reorder: u64,
    /// Failures the server signalled: non-2xx, `event: error`, JSON-RPC error.
    pub explicit_errors: u64,
    /// Resumes the server refused (non-200) or answered with `event: error`: the loss said
    /// out loud (the audit's `explicit-loss`).
    #[serde(default)]
    pub explicit_loss: u64,
    /// Resumes answered with a fresh stream instead of a replay: another stream's ids, or a new
    /// priming event that skips the owed events (the audit's `fresh-stream`).
    #[serde(alias = "fresh-streams")]
    pub fresh_stream: u64,
    /// Calls that ended without their answer right after a cut (the connection broke on their
    /// last request) with nothing sent for them afterwards: no resume, no re-send (the audit's
    /// `abandoned`).
    #[serde(default)]
    pub abandoned: u64,
    /// Events dispatched to the client.
    pub events: u64,
}

impl Counters {
    /// Metric names, in JSON order.
    pub const NAMES: [&'static str; 16] = [
        "calls",
        "ok",
        "failed",
        "silent-loss",
        "torn-cut",
        "resumes",
        "renegotiations",
        "reissued",
        "replay-duplicate",
        "replay-gap",
        "replay-reorder",
        "explicit-errors",
        "explicit-loss",
        "fresh-stream",
        "abandoned",
        "events",
    ];

    /// The counters that count a fact the audit also reports, by the same name.
    pub const SHARED: [&'static str; 8] = [
        "torn-cut",
        "replay-gap",
        "replay-duplicate",
        "replay-reorder",
        "fresh-stream",
        "explicit-loss",
        "reissued",
        "abandoned",
    ];

    /// The metric name `name` stands for: `_` read as `-`, and the former names
    /// (`silently-lost`, `torn-detections`, `reissues`, `duplicates`, `gaps`, `reorders`,
    /// `fresh-streams`) as today's; `None` when it names no counter.
    pub fn canonical(name: &str) -> Option<&'static str> {
        let kebab = name.replace('_', "-");
        let kebab = match kebab.as_str() {
            "silently-lost" => "silent-loss",
            "torn-detections" => "torn-cut",
            "reissues" => "reissued",
            "duplicates" => "replay-duplicate",
            "gaps" => "replay-gap",
            "reorders" => "replay-reorder",
            "fresh-streams" => "fresh-stream",
            k => k,
        };
        Counters::NAMES.iter().copied().find(|n| *n == kebab)
    }

    fn slot(&mut self, name: &str) -> Option<&mut u64> {
        Some(match Counters::canonical(name)? {
            "calls" => &mut self.calls,
            "ok" => &mut self.ok,
            "failed" => &mut self.failed,
            "silent-loss" => &mut self.silent_loss,
            "torn-cut" => &mut self.torn_cut,
            "resumes" => &mut self.resumes,
            "renegotiations" => &mut self.renegotiations,
            "reissued" => &mut self.reissued,
            "replay-duplicate" => &mut self.replay_duplicate,
            "replay-gap" => &mut self.replay_gap,
            "replay-reorder" => &mut self.replay_reorder,
            "explicit-errors" => &mut self.explicit_errors,
            "explicit-loss" => &mut self.explicit_loss,
            "fresh-stream" => &mut self.fresh_stream,
            "abandoned" => &mut self.abandoned,
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

    /// Counters from `(name, value)` pairs; counters not named stay 0.
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

    /// (name, value) pairs in [`Counters::NAMES`] order.
    pub fn pairs(&self) -> [(&'static str, u64); 16] {
        Counters::NAMES.map(|n| (n, self.get(n).unwrap_or(0)))
    }

    /// Adds `other` into `self`, counter by counter.
    pub fn merge(&mut self, other: &Counters) {
        for name in Counters::NAMES {
            let sum = self.get(name).unwrap_or(0) + other.get(name).unwrap_or(0);
            self.set(name, sum);
        }
    }

    /// `self - before`, counter by counter (saturating): what happened in between.
    pub fn since(&self, before: &Counters) -> Counters {
        let mut d = Counters::default();
        for name in Counters::NAMES {
            let v = self
                .get(name)
                .unwrap_or(0)
                .saturating_sub(before.get(name).unwrap_or(0));
            d.set(name, v);
        }
        d
    }

    /// True if and only if `calls == ok + failed + silent-loss`.
    pub fn is_balanced(&self) -> bool {
        self.calls == self.ok + self.failed + self.silent_loss
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
        for shared in Counters::SHARED {
            assert!(Counters::NAMES.contains(&shared), "{shared}");
        }
    }

    #[test]
    fn former_and_snake_case_names_are_accepted_in_lookups_and_files() {
        let c = Counters::from_pairs([("silently_lost", 3), ("torn_detections", 2), ("gaps", 1)])
            .expect("known names");
        assert_eq!((c.silent_loss, c.torn_cut, c.replay_gap), (3, 2, 1));
        assert_eq!(c.get("reissues"), Some(0));
        let err = Counters::from_pairs([("lost", 1)]).expect_err("unknown");
        assert!(err.to_string().contains("silent-loss"), "{err}");
        let v2 = r#"{"calls":2,"ok":1,"failed":0,"silent-loss":1,"torn-detections":1,
            "resumes":1,"renegotiations":0,"reissues":1,"duplicates":0,"gaps":1,"reorders":0,
            "explicit-errors":0,"fresh-streams":0,"events":9}"#;
        let old: Counters = serde_json::from_str(v2).expect("a version-2 file reads");
        assert_eq!((old.torn_cut, old.reissued, old.replay_gap), (1, 1, 1));
        assert_eq!((old.explicit_loss, old.abandoned), (0, 0));
    }

    #[test]
    fn merged_counters_stay_balanced_and_since_gives_the_difference() {
        let a = Counters {
            calls: 3,
            ok: 2,
            failed: 1,
            ..Counters::default()
        };
        let b = Counters {
            calls: 2,
            ok: 1,
            silent_loss: 1,
            ..Counters::default()
        };
        let mut m = a;
        m.merge(&b);
        assert!(m.is_balanced());
        assert_eq!((m.calls, m.ok, m.failed, m.silent_loss), (5, 3, 1, 1));
        assert_eq!(m.since(&a), b);
        let bad = Counters {
            calls: 1,
            ..Counters::default()
        };
        assert!(!bad.is_balanced());
    }
}
