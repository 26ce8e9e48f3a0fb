//! Judging one resume: what the client's cursor owed, and what the replay leg delivered.
//!
//! At the resume request the ledger fixes what is *owed*: the remembered events with an id
//! after the cursor (in order), then the torn event's id if the client did not claim it. Every
//! event the replay leg delivers is classified against the stream as it was at the resume:
//!
//! - owed: its id is owed (rank = its position in the owed list);
//! - duplicate: its id was delivered at or before the cursor with the same data hash, or it
//!   already came earlier on this leg;
//! - reused: its id was delivered at or before the cursor with a *different* data hash (the
//!   server reused the id for another event: a restarted counter, or a store replaying its
//!   first event with other data);
//! - cross: its id belongs to another stream of the session, or (for ids that look globally
//!   unique: 16+ characters, not a counter — see `ledger::is_globally_unique`) to a stream of
//!   another session; or its message names a call of another session (a response id or
//!   progress token only that session declared), or the leg was proven so and the event is
//!   that session's stream's (see `leak`). Identical content alone is never evidence: sessions
//!   of one client count alike and a deterministic tool answers alike. Without a session
//!   (plain EventSource, MCP 2026-07-28) nothing is: broadcast feeds, several tabs and a
//!   favicon answered with the feed carry the same ids and data on every stream;
//! - priming: the leg's first event carries the cursor's own id and empty data (a server that
//!   starts each resume with a priming event repeating the cursor): ignored by every rule below;
//! - unseen: an id (or no id) the stream never delivered; `resent` if its non-empty data hash
//!   equals an event the stream already delivered, `empty` if its data is empty.
//!
//! Verdict when the leg ends (precise rules):
//! - `explicit-loss` if and only if the status was not 200 or an `event: error` came; it
//!   suppresses `replay-gap` and `silent-empty` (the loss was signalled).
//! - `cross-stream` iff any cross event; `replay-duplicate` iff any duplicate.
//! - `fresh-stream` iff (a) any reused id, or (b) any unseen event that is `resent` (earlier
//!   content under a new or no id), or (c) the first event is unseen with an id and empty data
//!   (a new stream's priming event), events with data followed, and no owed event came.
//! - `replay-reorder` iff the owed events came in a different order, or a non-empty unseen
//!   (newer) event came before an owed one.
//! - `silent-empty` iff the leg ended cleanly (not by the proxy: its framing's normal end),
//!   delivered no event with data, and the stream's call is unanswered.
//! - `replay-gap` iff no `explicit-loss`, `fresh-stream`, `cross-stream` or `silent-empty`
//!   covers the leg, and: the leg ended cleanly (not by the proxy) with some owed event
//!   missing, or counter ids skipped values on the leg that never came later on it (certain; see
//!   `sequence`), or else, with opaque ids, a progress value jumped after constant steps
//!   (suspected: the detail says so). Owed events are the dispatched, non-empty events after
//!   the cursor plus the torn one: priming events are never owed. The finding lists the
//!   missing ids (or progress values).
//! - `replay-reorder` also iff an event of the stream was first delivered after a later one
//!   (counter ids, or progress values of one token; across all legs, so also when the cut fell
//!   before the torn event's `id:` line and nothing was owed).
//! - `fresh-stream` is withheld when the leg carried another stream's events (`cross-stream`
//!   explains the content); a `fresh-stream` leg is judged for no reorder and no gap (a
//!   continuation has its own order and skips by definition).
//! - `replay-exact` iff none of the above, the cursor was right (no `cursor-ahead` or
//!   `cursor-behind`: the resume as a whole was not clean), the proxy did not cut the leg, the
//!   leg did not break (end uncleanly) before every owed event came nor before its first
//!   event, and it did not end cleanly with a `tools/call` still unanswered (then
//!   `pending-call` is the finding, unless `explicit-loss` or `silent-empty` already says it).
//!
//! A leg cut by the proxy is judged only for what it showed wrong; its completeness is judged
//! by the next resume. Unseen ids after the owed ones are the normal continuation: the proxy
//! cannot know events the server produced but never sent before the cut.

use super::finding::FindingKind;
use super::sequence::SeqFact;
use std::collections::{HashMap, HashSet};

/// At most this many replayed events are classified per leg; later ones only count.
pub const MAX_CLASSIFIED: usize = 4096;

/// The class of one replayed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayClass {
    /// An owed id; `rank` is its position in the owed list.
    Owed { id: String, rank: usize },
    /// Sent again although delivered at or before the cursor (or earlier on this leg).
    Duplicate { id: String },
    /// An id delivered at or before the cursor, now with different data.
    Reused { id: String },
    /// An id of another stream or session.
    Cross { id: String },
    /// The leg's first event repeats the cursor's id with empty data: the server's priming
    /// event (a cursor for the client), not a restart and not a replayed event.
    Priming { id: String },
    /// An id (or none) this stream never delivered.
    Unseen {
        id: Option<String>,
        resent: bool,
        empty: bool,
    },
}

/// What the ledger fixed at the resume request, and what the replay leg delivered so far.
#[derive(Debug, Default)]
pub struct Resume {
    /// The client's `Last-Event-ID`.
    pub cursor: String,
    /// Ordinal of the cursor's event in the stream (`None` if it was never delivered, i.e.
    /// cursor-ahead: nothing remembered is owed).
    pub cursor_ordinal: Option<u64>,
    /// Last ordinal of the stream at the resume request.
    pub snapshot: Option<u64>,
    owed_rank: HashMap<String, usize>,
    owed: Vec<String>,
    got: HashSet<usize>,
    leg_ids: HashSet<String>,
    classes: Vec<ReplayClass>,
    /// Events delivered on the leg with non-empty data.
    pub with_data: u64,
    /// An `event: error` came on the leg.
    pub error_event: bool,
    /// `explicit-loss` was already reported (at the status).
    pub explicit_reported: bool,
    /// The cursor was judged wrong (`cursor-ahead` or `cursor-behind`).
    pub cursor_wrong: bool,
    /// Order and gap facts the leg's events proved across all legs of the stream
    /// ([`super::sequence`]).
    pub seq_facts: Vec<SeqFact>,
    /// The other session's stream the leg was proven to replay: an event of the leg named one
    /// of its calls ([`super::leak`]).
    pub leaked_from: Option<super::leak::Named>,
}

/// How a replay leg ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegEnd {
    /// The proxy cut it.
    pub cut: bool,
    /// Its HTTP framing ended normally.
    pub clean: bool,
    /// The response status.
    pub status: Option<u16>,
    /// The stream still has an unanswered call.
    pub call_unanswered: bool,
    /// The stream still has an unanswered `tools/call`.
    pub tools_call_unanswered: bool,
}

/// One conclusion of the verdict: kind, ids, detail.
pub type Conclusion = (FindingKind, Vec<String>, String);

impl Resume {
    /// A resume owing `owed` (ids in stream order) after `cursor`.
    pub fn new(
        cursor: String,
        cursor_ordinal: Option<u64>,
        snapshot: Option<u64>,
        owed: Vec<String>,
    ) -> Self {
        let owed_rank = owed
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i))
            .collect();
        Resume {
            cursor,
            cursor_ordinal,
            snapshot,
            owed_rank,
            owed,
            ..Resume::default()
        }
    }

    /// The rank of `id` in the owed list, if owed.
    pub fn owed_rank(&self, id: &str) -> Option<usize> {
        self.owed_rank.get(id).copied()
    }

    /// True if and only if nothing was classified on the leg yet.
    pub fn nothing_yet(&self) -> bool {
        self.classes.is_empty()
    }

    /// True if and only if `id` already came on this leg.
    pub fn seen_on_leg(&self, id: &str) -> bool {
        self.leg_ids.contains(id)
    }

    /// Records one classified event.
    pub fn add(&mut self, class: ReplayClass, has_data: bool) {
        if has_data {
            self.with_data += 1;
        }
        let id = match &class {
            ReplayClass::Owed { id, rank } => {
                self.got.insert(*rank);
                Some(id)
            }
            ReplayClass::Duplicate { id }
            | ReplayClass::Reused { id }
            | ReplayClass::Cross { id } => Some(id),
            ReplayClass::Unseen { id, .. } => id.as_ref(),
            ReplayClass::Priming { .. } => None,
        };
        if let Some(id) = id
            && self.leg_ids.len() < MAX_CLASSIFIED
        {
            self.leg_ids.insert(id.clone());
        }
        if self.classes.len() < MAX_CLASSIFIED {
            self.classes.push(class);
        }
    }

    /// The conclusions for the leg, by the rules of the module doc.
    pub fn verdict(&self, end: LegEnd) -> Vec<Conclusion> {
        let mut out: Vec<Conclusion> = Vec::new();
        let explicit = end.status.is_some_and(|s| s != 200) || self.error_event;
        if explicit && !self.explicit_reported {
            out.push((
                FindingKind::ExplicitLoss,
                vec![self.cursor.clone()],
                match end.status {
                    Some(s) if s != 200 => format!("resume answered with status {s}"),
                    _ => "the replay carried `event: error`".to_string(),
                },
            ));
        }
        let pick = |f: &dyn Fn(&ReplayClass) -> Option<String>| -> Vec<String> {
            self.classes.iter().filter_map(f).collect()
        };
        let cross = pick(&|c| match c {
            ReplayClass::Cross { id } => Some(id.clone()),
            _ => None,
        });
        let has_cross = !cross.is_empty();
        if has_cross {
            let why = match &self.leaked_from {
                Some(n) => format!(
                    "a replayed message names {}, a call only another session declared",
                    n.name
                ),
                None => "their ids are another stream's of this session, or globally unique \
                         ids of another session"
                    .to_owned(),
            };
            out.push((
                FindingKind::CrossStream,
                cross,
                format!("replayed events belong to another stream or session ({why})"),
            ));
        }
        let dups = pick(&|c| match c {
            ReplayClass::Duplicate { id } => Some(id.clone()),
            _ => None,
        });
        if !dups.is_empty() {
            out.push((
                FindingKind::ReplayDuplicate,
                dups,
                format!(
                    "events delivered at or before cursor {} were sent again",
                    self.cursor
                ),
            ));
        }
        // Content of another stream under ids new to this one is that stream's, not a restart.
        let fresh = if has_cross { None } else { self.fresh() };
        let is_fresh = fresh.is_some();
        if let Some(c) = fresh {
            out.push(c);
        }
        // A continuation starts its own order (ids may restart): no reorder against the cut one.
        if !is_fresh && let Some(c) = self.reorder() {
            out.push(c);
        }
        let finished = !end.cut;
        // Silent only when the client saw a normal end: a leg whose connection broke under it
        // (not by the proxy) told the client it failed; its call is `abandoned`'s to judge.
        if finished && end.clean && !explicit && self.with_data == 0 && end.call_unanswered {
            out.push((
                FindingKind::SilentEmpty,
                vec![self.cursor.clone()],
                format!(
                    "status 200, nothing replayed after {}, call still unanswered",
                    self.cursor
                ),
            ));
        } else if !explicit && !is_fresh && !has_cross {
            // A continuation instead of a replay is `fresh-stream`, a replay of another stream
            // `cross-stream`: the events missing from this one are part of that finding.
            if let Some(c) = self.gap(finished && end.clean) {
                out.push(c);
            }
        }
        // A leg that broke under the client (not by the proxy) before every owed event came
        // shows neither a gap (the server skipped nothing the wire saw) nor an exact replay;
        // nor does one that broke before its first event, owed or not: it replayed nothing.
        let broke_short =
            !end.clean && (self.missing_owed().next().is_some() || self.classes.is_empty());
        let withheld = explicit
            || end.cut
            || broke_short
            || self.cursor_wrong
            || (end.clean && end.tools_call_unanswered);
        if out.is_empty() && !withheld {
            out.push((
                FindingKind::ReplayExact,
                vec![self.cursor.clone()],
                format!(
                    "{} owed event(s) replayed in order after cursor {}, {} event(s) in all",
                    self.owed.len(),
                    self.cursor,
                    self.classes.len()
                ),
            ));
        }
        out
    }

    fn fresh(&self) -> Option<Conclusion> {
        let mut ids = Vec::new();
        let mut why = "";
        for c in &self.classes {
            match c {
                ReplayClass::Reused { id } => {
                    ids.push(id.clone());
                    why = "ids already delivered came again with different data (the server \
                           reused ids for other events)";
                }
                ReplayClass::Unseen {
                    id, resent: true, ..
                } => {
                    ids.push(id.clone().unwrap_or_else(|| "(no id)".into()));
                    if why.is_empty() {
                        why = "content already delivered came again under new ids";
                    }
                }
                _ => {}
            }
        }
        if ids.is_empty()
            && self.got.is_empty()
            && self.with_data > 0
            && let Some(ReplayClass::Unseen {
                id: Some(id),
                empty: true,
                ..
            }) = self.classes.first()
        {
            ids.push(id.clone());
            why = "the replay began with a new priming event and no owed event came";
        }
        (!ids.is_empty()).then(|| {
            (
                FindingKind::FreshStream,
                ids,
                format!("{why}; cursor {}", self.cursor),
            )
        })
    }

    /// The owed events (ids) that have not come on this leg, in stream order.
    fn missing_owed(&self) -> impl Iterator<Item = &String> {
        (0..self.owed.len())
            .filter(|r| !self.got.contains(r))
            .filter_map(|r| self.owed.get(r))
    }

    /// Owed events that never came (only when the leg finished) and skipped counter values
    /// (certain); else a gap inferred from progress values (suspected).
    fn gap(&self, finished: bool) -> Option<Conclusion> {
        let mut missing: Vec<String> = Vec::new();
        if finished {
            missing.extend(self.missing_owed().cloned());
        }
        let mut details = Vec::new();
        if !missing.is_empty() {
            details.push(format!(
                "owed events after cursor {} never came back",
                self.cursor
            ));
        }
        let mut suspected = None;
        let reordered = self
            .seq_facts
            .iter()
            .any(|f| matches!(f, SeqFact::Reorder { .. }));
        for f in &self.seq_facts {
            if let SeqFact::Gap {
                missing: m,
                certain,
                detail,
                ..
            } = f
            {
                if *certain {
                    // An id skipped and delivered later on the leg is a reorder, not a gap.
                    let still: Vec<&String> = m.iter().filter(|id| !self.seen_on_leg(id)).collect();
                    if still.is_empty() {
                        continue;
                    }
                    for id in still {
                        if !missing.contains(id) {
                            missing.push(id.clone());
                        }
                    }
                    details.push(detail.clone());
                } else if suspected.is_none() && !reordered {
                    suspected = Some((m.clone(), detail.clone()));
                }
            }
        }
        if !missing.is_empty() {
            return Some((FindingKind::ReplayGap, missing, details.join("; ")));
        }
        suspected.map(|(m, d)| (FindingKind::ReplayGap, m, d))
    }

    fn reorder(&self) -> Option<Conclusion> {
        for f in &self.seq_facts {
            if let SeqFact::Reorder { id, after } = f {
                return Some((
                    FindingKind::ReplayReorder,
                    vec![id.clone(), after.clone()],
                    format!("{id} was first delivered after {after}, a later event of the stream"),
                ));
            }
        }
        let mut max_rank: Option<usize> = None;
        let mut newer_seen: Option<String> = None;
        for c in &self.classes {
            match c {
                ReplayClass::Owed { id, rank } => {
                    if max_rank.is_some_and(|m| *rank < m) {
                        return Some((
                            FindingKind::ReplayReorder,
                            vec![id.clone()],
                            format!("owed event {id} came after a later owed event"),
                        ));
                    }
                    if let Some(newer) = &newer_seen {
                        return Some((
                            FindingKind::ReplayReorder,
                            vec![id.clone(), newer.clone()],
                            format!("owed event {id} came after newer event {newer}"),
                        ));
                    }
                    max_rank = max_rank.max(Some(*rank));
                }
                ReplayClass::Unseen {
                    id: Some(id),
                    empty: false,
                    resent: false,
                } if newer_seen.is_none() => newer_seen = Some(id.clone()),
                _ => {}
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(status: u16, clean: bool) -> LegEnd {
        LegEnd {
            cut: false,
            clean,
            status: Some(status),
            call_unanswered: false,
            tools_call_unanswered: false,
        }
    }

    fn kinds(r: &Resume, e: LegEnd) -> Vec<FindingKind> {
        r.verdict(e).into_iter().map(|c| c.0).collect()
    }

    #[test]
    fn refused_resume_is_only_explicit_loss_even_with_calls_answered() {
        let r = Resume::new("1".into(), Some(0), Some(0), vec!["2".into()]);
        assert_eq!(kinds(&r, end(404, true)), vec![FindingKind::ExplicitLoss]);
    }

    #[test]
    fn owed_in_order_then_newer_is_exact_and_reversed_is_reorder() {
        let mut r = Resume::new("1".into(), Some(0), Some(2), vec!["2".into(), "3".into()]);
        r.add(
            ReplayClass::Owed {
                id: "2".into(),
                rank: 0,
            },
            true,
        );
        r.add(
            ReplayClass::Owed {
                id: "3".into(),
                rank: 1,
            },
            true,
        );
        r.add(
            ReplayClass::Unseen {
                id: Some("4".into()),
                resent: false,
                empty: false,
            },
            true,
        );
        assert_eq!(kinds(&r, end(200, true)), vec![FindingKind::ReplayExact]);
        let mut r = Resume::new("1".into(), Some(0), Some(2), vec!["2".into(), "3".into()]);
        r.add(
            ReplayClass::Owed {
                id: "3".into(),
                rank: 1,
            },
            true,
        );
        r.add(
            ReplayClass::Owed {
                id: "2".into(),
                rank: 0,
            },
            true,
        );
        assert_eq!(kinds(&r, end(200, true)), vec![FindingKind::ReplayReorder]);
    }

    #[test]
    fn cut_leg_withholds_gap_and_exact() {
        let r = Resume::new("1".into(), Some(0), Some(0), vec!["2".into()]);
        let mut e = end(200, false);
        e.cut = true;
        assert!(kinds(&r, e).is_empty());
        assert_eq!(kinds(&r, end(200, true)), vec![FindingKind::ReplayGap]);
        // Broken under the client, not by the proxy: the server skipped nothing the wire saw,
        // and the replay is not whole either.
        assert!(kinds(&r, end(200, false)).is_empty());
    }

    #[test]
    fn an_empty_replay_whose_connection_broke_is_neither_silent_nor_exact() {
        let r = Resume::new("1".into(), Some(0), Some(0), Vec::new());
        let mut e = end(200, false);
        e.call_unanswered = true;
        assert!(kinds(&r, e).is_empty());
        // Nothing owed and nothing came: broken, it replayed nothing; ended, it was exact.
        assert!(kinds(&r, end(200, false)).is_empty());
        assert_eq!(kinds(&r, end(200, true)), vec![FindingKind::ReplayExact]);
        let mut e = end(200, true);
        e.call_unanswered = true;
        assert_eq!(kinds(&r, e), vec![FindingKind::SilentEmpty]);
    }

    #[test]
    fn priming_alone_is_silent_empty_not_fresh_stream() {
        let mut r = Resume::new("1".into(), Some(0), Some(0), Vec::new());
        r.add(
            ReplayClass::Unseen {
                id: Some("p".into()),
                resent: false,
                empty: true,
            },
            false,
        );
        let mut e = end(200, true);
        e.call_unanswered = true;
        assert_eq!(kinds(&r, e), vec![FindingKind::SilentEmpty]);
    }
}
