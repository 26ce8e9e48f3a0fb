//! Event ids of the lab: `<stream>-<seq>` counters or opaque UUID-like names, and the
//! per-session namer that maps either back to `(stream, seq)`.
//!
//! Why a file of its own: sessions name every event they store, and the scripted bugs and the
//! plain feed need the same names; keeping ids below all three lets each import them without
//! importing one another.
//!
//! Invariants:
//! - A counter id is `<stream>-<seq>`; [`parse_event_id`] accepts exactly those.
//! - Opaque ids ([`IdStyle::Opaque`]) are random UUID-like strings (version-4 layout, the last
//!   group starting with a letter so no client mistakes them for `<stream>-<seq>`), unique per
//!   session, and the same string every time one event's id is asked for.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::config::IdStyle;

/// The event id of event `seq` of `stream`.
pub fn event_id(stream: u64, seq: u64) -> String {
    format!("{stream}-{seq}")
}

/// Parses an event id of the form `<stream>-<seq>`.
pub fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (stream, seq) = id.trim().split_once('-')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

/// A random UUID-like id whose last group starts with a letter.
pub fn opaque_id() -> String {
    let v: u128 = rand::random();
    let hex = format!("{v:032x}");
    let last = &hex[20..32];
    let letter = b"abcdef"[usize::from(last.as_bytes()[0]) % 6] as char;
    format!(
        "{}-{}-4{}-a{}-{letter}{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &last[1..]
    )
}

/// Opaque names of one session, both ways.
#[derive(Debug, Default)]
struct Names {
    by_name: HashMap<String, (u64, u64)>,
    by_pos: HashMap<(u64, u64), String>,
}

/// Names the events of one session and maps names back to `(stream, seq)`.
#[derive(Debug, Default)]
pub struct IdNamer {
    style: IdStyle,
    names: Mutex<Names>,
}

impl IdNamer {
    /// A namer of `style`.
    pub fn new(style: IdStyle) -> Self {
        IdNamer {
            style,
            ..IdNamer::default()
        }
    }

    /// The id of event `seq` of `stream` (the same string every time it is asked).
    pub fn name(&self, stream: u64, seq: u64) -> String {
        match self.style {
            IdStyle::Counter => event_id(stream, seq),
            IdStyle::Opaque => {
                let mut n = lock(&self.names);
                if let Some(name) = n.by_pos.get(&(stream, seq)) {
                    return name.clone();
                }
                let name = loop {
                    let id = opaque_id();
                    if !n.by_name.contains_key(&id) {
                        break id;
                    }
                };
                n.by_name.insert(name.clone(), (stream, seq));
                n.by_pos.insert((stream, seq), name.clone());
                name
            }
        }
    }

    /// The `(stream, seq)` an id names, if it is one of this session's ids.
    pub fn parse(&self, id: &str) -> Option<(u64, u64)> {
        match self.style {
            IdStyle::Counter => parse_event_id(id),
            IdStyle::Opaque => lock(&self.names).by_name.get(id.trim()).copied(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_round_trip_and_reject_garbage() {
        assert_eq!(parse_event_id(&event_id(7, 42)), Some((7, 42)));
        for bad in ["", "7", "7-", "-3", "a-1", "1-b", "1-2-3"] {
            assert_eq!(parse_event_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn opaque_ids_are_unique_stable_and_not_counters() {
        let n = IdNamer::new(IdStyle::Opaque);
        let a = n.name(1, 0);
        assert_eq!(n.name(1, 0), a);
        assert_ne!(n.name(1, 1), a);
        assert_eq!(n.parse(&a), Some((1, 0)));
        assert_eq!(a.len(), 36);
        let last = a.rsplit('-').next().unwrap_or("");
        assert!(last.as_bytes()[0].is_ascii_lowercase(), "{a}");
        assert_eq!(IdNamer::new(IdStyle::Counter).parse("3-4"), Some((3, 4)));
    }
}
