//! The registry of rules: the only importer of the rule files, one line per rule, in the order
//! they run (every hook runs the rules in this order; where two rules emit findings from the
//! same hook, this order is the order of their findings).
//!
//! What the engine itself still decides (which stream a replayed event belongs to, what a
//! resume owes) is listed in the module doc of `audit`.

mod abandoned;
mod cursor;
mod cursor_missing;
mod duplicate_response;
mod llm;
mod pending;
mod reissue;
mod replay;
mod stateless;
mod torn;
mod truncation;

pub use reissue::HOLD as RESEND_HOLD;

use crate::audit::ledger::Ledger;
use crate::audit::rule::{
    AnswerSeen, CrossEvent, CutSeen, LegEnded, NewCall, ReplayEnded, RequestView, ResumeAnswered,
    ResumeOpened, Rule,
};
use crate::audit::stream::StreamKey;
use crate::wire::Observation;
use tokio::time::Instant;

/// Every rule, in the order it runs.
#[derive(Debug)]
pub struct Rules {
    rules: Vec<Box<dyn Rule>>,
    /// Indices (into `rules`, in order) of the rules that read observations: `on_observation`
    /// runs for every observation, so it skips the rules that do not.
    readers: Vec<usize>,
}

impl Default for Rules {
    fn default() -> Self {
        Rules::new(vec![
            Box::new(torn::TornCut),
            Box::new(pending::PendingCall),
            Box::new(cursor::Cursor),
            Box::new(replay::Replay),
            Box::new(duplicate_response::DuplicateResponse),
            Box::new(cursor_missing::CursorMissing::default()),
            Box::new(reissue::Reissue::default()),
            Box::new(abandoned::Abandoned::default()),
            Box::new(stateless::Stateless::default()),
            Box::new(truncation::TruncationAccepted::default()),
            Box::new(llm::LlmRule::default()),
        ])
    }
}

impl Rules {
    fn new(rules: Vec<Box<dyn Rule>>) -> Self {
        let readers = rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.reads_observations())
            .map(|(i, _)| i)
            .collect();
        Rules { rules, readers }
    }

    /// The rules' names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.rules.iter().map(|r| r.name()).collect()
    }

    pub fn on_request(&mut self, l: &mut Ledger, r: &RequestView<'_>) {
        for rule in &mut self.rules {
            rule.on_request(l, r);
        }
    }

    /// A new call: the rules that prove re-sends run; then each re-send proven is handed to
    /// every rule (`on_resent`), or, if none was and no rule holds the call's link (see
    /// `reissue`), the call is `on_unproven`.
    pub fn on_call(&mut self, l: &mut Ledger, c: &NewCall<'_>) {
        for rule in &mut self.rules {
            rule.on_call(l, c);
        }
        let held = std::mem::take(&mut l.call_held);
        if l.resent.is_empty() && !held {
            for rule in &mut self.rules {
                rule.on_unproven(l, c);
            }
        }
        self.dispatch(l);
    }

    /// Hands every re-send proven, and every call whose held link was dropped, to every rule.
    fn dispatch(&mut self, l: &mut Ledger) {
        if l.resent.is_empty() && l.unproven.is_empty() {
            return;
        }
        let resent = std::mem::take(&mut l.resent);
        for r in &resent {
            for rule in &mut self.rules {
                rule.on_resent(l, r);
            }
        }
        let unproven = std::mem::take(&mut l.unproven);
        for h in &unproven {
            let c = NewCall::from(h);
            for rule in &mut self.rules {
                rule.on_unproven(l, &c);
            }
        }
    }

    /// Settles the held re-send links due at `now` (every one when `finish`), if any is.
    pub fn settle_held(&mut self, l: &mut Ledger, now: Instant, finish: bool) {
        if !l.held_due.is_some_and(|t| finish || now >= t) {
            return;
        }
        for rule in &mut self.rules {
            rule.on_held_due(l, now, finish);
        }
        self.dispatch(l);
    }

    pub fn on_stream_opened(&mut self, l: &mut Ledger, key: StreamKey, r: &RequestView<'_>) {
        for rule in &mut self.rules {
            rule.on_stream_opened(l, key, r);
        }
    }

    pub fn on_resume(&mut self, l: &mut Ledger, key: StreamKey, session: &Option<String>) {
        for rule in &mut self.rules {
            rule.on_resume(l, key, session);
        }
    }

    pub fn on_resume_leg(&mut self, l: &mut Ledger, r: &ResumeOpened<'_>) {
        for rule in &mut self.rules {
            rule.on_resume_leg(l, r);
        }
    }

    pub fn on_observation(&mut self, l: &mut Ledger, now: Instant, obs: &Observation) {
        for &i in &self.readers {
            if let Some(rule) = self.rules.get_mut(i) {
                rule.on_observation(l, now, obs);
            }
        }
    }

    pub fn on_conn_closed(&mut self, l: &mut Ledger, now: Instant, conn: u64) {
        for rule in &mut self.rules {
            rule.on_conn_closed(l, now, conn);
        }
    }

    pub fn on_delivery(
        &mut self,
        l: &mut Ledger,
        now: Instant,
        key: StreamKey,
        data: &[u8],
        whole: bool,
    ) {
        for rule in &mut self.rules {
            rule.on_delivery(l, now, key, data, whole);
        }
    }

    pub fn on_answer(&mut self, l: &mut Ledger, a: &AnswerSeen<'_>) {
        for rule in &mut self.rules {
            rule.on_answer(l, a);
        }
        self.dispatch(l);
    }

    pub fn on_cross_event(&mut self, l: &mut Ledger, c: &CrossEvent<'_>) {
        for rule in &mut self.rules {
            rule.on_cross_event(l, c);
        }
    }

    pub fn on_cut(&mut self, l: &mut Ledger, c: &CutSeen<'_>) {
        for rule in &mut self.rules {
            rule.on_cut(l, c);
        }
    }

    pub fn on_resume_answered(&mut self, l: &mut Ledger, r: &ResumeAnswered<'_>) {
        for rule in &mut self.rules {
            rule.on_resume_answered(l, r);
        }
    }

    pub fn on_replay_end(&mut self, l: &mut Ledger, e: &ReplayEnded<'_>) {
        for rule in &mut self.rules {
            rule.on_replay_end(l, e);
        }
    }

    pub fn on_leg_end(&mut self, l: &mut Ledger, e: &LegEnded) {
        for rule in &mut self.rules {
            rule.on_leg_end(l, e);
        }
    }

    pub fn on_closing(&mut self, l: &mut Ledger, now: Instant) {
        for rule in &mut self.rules {
            rule.on_closing(l, now);
        }
    }

    pub fn on_sweep(&mut self, l: &mut Ledger, now: Instant, finish: bool) {
        for rule in &mut self.rules {
            rule.on_sweep(l, now, finish);
        }
    }

    pub fn on_forget(&mut self, l: &mut Ledger, now: Instant, key: StreamKey) {
        for rule in &mut self.rules {
            rule.on_forget(l, now, key);
        }
        self.dispatch(l);
    }

    /// True if any rule still waits on something of `session`.
    pub fn holds_session(&self, session: &Option<String>) -> bool {
        self.rules.iter().any(|r| r.holds_session(session))
    }

    pub fn shrink(&mut self) {
        for rule in &mut self.rules {
            rule.shrink();
        }
    }

    /// Entries of store `name` over all rules (0 if no rule keeps such a store).
    pub fn size(&self, name: &str) -> u64 {
        self.rules
            .iter()
            .flat_map(|r| r.sizes())
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| v)
            .sum()
    }
}
