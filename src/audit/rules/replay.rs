//! Rule `replay`: the verdict on a resume leg — `replay-exact`, `replay-gap`,
//! `replay-duplicate`, `replay-reorder`, `fresh-stream`, `cross-stream`, `explicit-loss`,
//! `silent-empty`.
//!
//! The rules themselves are pure and live in `judge` (its module doc states them precisely:
//! what is owed, how each replayed event is classified, the verdict when the leg ends); the
//! engine fixes what the resume owes when it opens and classifies each replayed event against
//! the stream (`events`: the ledger facts). This rule reports:
//! - at the response head of a resume: `explicit-loss` for a status other than 200, `unknown`
//!   for a 200 that is not an event stream (nothing to judge);
//! - when a resume leg the observer followed ends: the verdict's findings, `silent-empty`
//!   deferred on the stream (a later resume drops it), the others at once; what it signalled
//!   goes to the ledger (`Ledger::replay_signal`) for `pending-call` and `abandoned`.
//!
//! State: none (the resume's facts are the leg's, in the ledger).

use crate::audit::finding::FindingKind;
use crate::audit::ledger::Ledger;
use crate::audit::rule::{ReplayEnded, ResumeAnswered, Rule};

/// The replay verdict rule.
#[derive(Debug, Default)]
pub struct Replay;

impl Rule for Replay {
    fn name(&self) -> &'static str {
        "replay"
    }

    fn on_resume_answered(&mut self, l: &mut Ledger, r: &ResumeAnswered<'_>) {
        let status = r.status;
        if status != 200 {
            let f = l
                .finding(FindingKind::ExplicitLoss, r.key, r.now)
                .detail(format!("resume answered with status {status}"));
            l.emit(f);
        } else if !r.sse {
            let f = l.finding(FindingKind::Unknown, r.key, r.now).detail(format!(
                "replay not judged: resume answered 200 with content-type {:?}, not an event stream",
                r.content_type
            ));
            l.emit(f);
        }
    }

    fn on_replay_end(&mut self, l: &mut Ledger, e: &ReplayEnded<'_>) {
        for (kind, ids, detail) in e.resume.verdict(e.end) {
            l.replay_signal.signalled |=
                matches!(kind, FindingKind::SilentEmpty | FindingKind::ExplicitLoss);
            l.replay_signal.explicit |= kind == FindingKind::ExplicitLoss;
            let f = l.finding(kind, e.key, e.now).ids(ids).detail(detail);
            if kind == FindingKind::SilentEmpty {
                l.defer(e.key, f);
            } else {
                l.emit(f);
            }
        }
    }
}
