//! The truth → expected-findings contract of the 2026-07-28 era: from what the client sent
//! and got ([`Attempt`]s), where the scripted cut fell ([`CutFact`]) and how often the lab ran
//! each call (its execution counter, [`Execution`]), the finding kinds a correct audit must
//! report for a run. Never from the audit's output.
//!
//! Facts (per run; one cut, in one attempt `A` of one logical call `L`):
//! - `A` is the k-th attempt when the cut hit the k-th call response the proxy relayed: calls
//!   run one after another, so the client's k-th attempt is the lab's k-th execution (their
//!   ids must agree) and the k-th response.
//! - *Answered*: the client got `A`'s response (the SDK call resolved; the load client held the
//!   response for its id). A cut inside the response event or body leaves it unanswered.
//! - *Proven re-send* of `A`: a later attempt of `L` carrying the same non-empty
//!   `Idempotency-Key` as `A` (or the same JSON-RPC id, method and params from the same client:
//!   never the case here — each client gives every POST a new id; a Python app that reopens its
//!   client after the SDK died on a cut JSON body reuses ids, but from another client, and a
//!   later call that gets the cut call's id that way is not its re-send). An app re-send without
//!   the key is a re-send in the app's truth but not on the wire: nothing there tells it from
//!   the app's next identical call.
//! - *Visible first execution*: some payload byte of `A`'s response reached the client before
//!   the cut (a progress or result event, or part of one, or the JSON body's first bytes).
//! - *Ran again*: the lab's execution counter shows `L` ran at least twice (the executions of
//!   all its attempts).
//! - *Identical later call*: an attempt sent after `A` (any logical call, any id) with the same
//!   tool arguments as `A`, as the client recorded them (every run calls one tool).
//! - *Repeat-safe*: the lab's `tools/list` (which every client here fetched on the wire before
//!   calling) annotates the tool `readOnlyHint` or `idempotentHint` true.
//!
//! What the truth says each kind must be (presence per run, as [`super::super::table`] scores):
//! - `torn-cut` iff the cut delivered bytes of an SSE event that was not dispatched (any class
//!   but `boundary`; a JSON body is no event).
//! - `unproven-resend` (class ambiguous) iff `A` is unanswered, has no proven re-send and an
//!   identical later call followed it — an app re-send without the marker, or the app's next
//!   identical call: the wire cannot tell which, and that is the verdict. (The lab's counter
//!   says whether `L` ran twice; the audit can only say it may have, when the first execution
//!   was visible.)
//! - `unproven-resend:visible` (a facet, scored as a kind) iff `unproven-resend` and the
//!   first execution was visible: the finding must then say the tool may have run twice (its
//!   `visible_start`), and only then. Every double execution the lab's counter shows behind an
//!   `unproven-resend` whose first execution was visible is warned of this way.
//! - `abandoned` (the unanswered-call kind, class loss) iff `A` is unanswered, has no proven
//!   re-send and no identical later call — the client gave up, failed it visibly, took the
//!   truncated stream as the answer, or re-sent it with other arguments — judged at the latest
//!   when the run ends, however short the wait.
//! - `reissued` iff `A` is unanswered and has a proven re-send (`Idempotency-Key`).
//! - `reexecuted` iff `reissued`, the first execution was visible, the tool is not repeat-safe,
//!   and the lab ran `L` again. A re-sent `append` cut before any byte reached the client ran
//!   twice (the counter says so) but the wire cannot show it: not `reexecuted`.
//! - An identical later call without proof never makes any of `reissued`, `reexecuted`, or
//!   "recovered": an answered call needs nothing.
//! - Nothing else is ever expected (`pending-call`, `cursor-*`, `replay-*`, `fresh-stream`,
//!   `sent-after-cancel`, `duplicate-response`, `unknown`, …): the lab is correct and nothing
//!   of 2026-07-28 is resumable.

use std::collections::BTreeSet;

use super::cut::CutFact;
use super::truth::Attempt;
use crate::lab::truth::Execution;

/// The unanswered-call kind (the audit/accuracy contract, COORDINATION.md): no identical call
/// followed the cut call.
pub const UNANSWERED: &str = "abandoned";
/// The kind of a cut call an identical call followed without proof (class ambiguous).
pub const UNPROVEN: &str = "unproven-resend";
/// A facet scored like a kind: an `unproven-resend` whose finding says the first execution
/// had visibly started (`visible_start`: the tool may have run twice).
pub const UNPROVEN_VISIBLE: &str = "unproven-resend:visible";

/// The ground truth of one 2026-07-28 run.
#[derive(Debug, Clone)]
pub struct ModernTruth {
    /// The client's attempts, in send order.
    pub attempts: Vec<Attempt>,
    /// Where the cut fell.
    pub cut: CutFact,
    /// The lab's executions, in start order.
    pub executions: Vec<Execution>,
    /// Whether the called tool is repeat-safe per the lab's `tools/list`.
    pub repeat_safe: bool,
}

/// The cut attempt, or why a run's truth cannot be judged (a harness failure, never scored):
/// the lab must have run exactly the attempts the client sent, in the same order and with the
/// same ids (calls run one after another; a client may reuse ids after a restart, so the order
/// pairs them, the ids only confirm it), and only the cut attempt may have failed.
pub fn check(t: &ModernTruth) -> Result<&Attempt, String> {
    if t.executions.len() != t.attempts.len() {
        return Err(format!(
            "the client sent {} calls, the lab ran {}",
            t.attempts.len(),
            t.executions.len()
        ));
    }
    if let Some((a, e)) = t
        .attempts
        .iter()
        .zip(&t.executions)
        .find(|(a, e)| a.rpc_id != e.request_id)
    {
        return Err(format!(
            "the client sent id {} where the lab ran id {}",
            a.rpc_id, e.request_id
        ));
    }
    let k = usize::try_from(t.cut.target).unwrap_or(usize::MAX);
    let cut = t
        .attempts
        .get(k)
        .ok_or_else(|| format!("the cut hit call response {k}, beyond the client's calls"))?;
    if let Some((_, a)) = t
        .attempts
        .iter()
        .enumerate()
        .find(|(i, a)| !a.answered && *i != k)
    {
        return Err(format!(
            "attempt {} of call {} (id {}) failed without a cut: {}",
            a.attempt,
            a.call,
            a.rpc_id,
            a.error.as_deref().unwrap_or("no reason given")
        ));
    }
    Ok(cut)
}

/// The finding kinds the truth requires (see the module doc).
pub fn expected(t: &ModernTruth) -> Result<BTreeSet<String>, String> {
    let cut = check(t)?;
    let mut out = BTreeSet::new();
    let mut say = |k: &str| {
        out.insert(k.to_owned());
    };
    if t.cut.torn {
        say("torn-cut");
    }
    if cut.answered {
        return Ok(out);
    }
    let proven = t.attempts.iter().any(|a| {
        a.call == cut.call
            && a.attempt > cut.attempt
            && cut.key.as_deref().is_some_and(|k| !k.is_empty())
            && a.key == cut.key
    });
    if !proven {
        let k = usize::try_from(t.cut.target).unwrap_or(usize::MAX);
        let Some(args) = cut.args.as_ref() else {
            return Err(format!(
                "the client recorded no arguments for the cut call (id {})",
                cut.rpc_id
            ));
        };
        let identical = t
            .attempts
            .iter()
            .skip(k.saturating_add(1))
            .any(|a| a.args.as_ref() == Some(args));
        say(if identical { UNPROVEN } else { UNANSWERED });
        if identical && t.cut.visible {
            say(UNPROVEN_VISIBLE);
        }
        return Ok(out);
    }
    say("reissued");
    let runs = t
        .attempts
        .iter()
        .zip(&t.executions)
        .filter(|(a, _)| a.call == cut.call)
        .count();
    if t.cut.visible && !t.repeat_safe && runs >= 2 {
        say("reexecuted");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(call: u64, attempt: u32, id: u64, key: Option<&str>, answered: bool) -> Attempt {
        Attempt {
            call,
            attempt,
            rpc_id: id.to_string(),
            key: key.map(str::to_owned),
            args: Some(serde_json::json!({"amount": 1})),
            answered,
            error: None,
        }
    }

    /// `a` with other arguments.
    fn other_args(a: Attempt, n: u64) -> Attempt {
        Attempt {
            args: Some(serde_json::json!({"amount": 1, "item": n})),
            ..a
        }
    }

    fn run(id: u64) -> Execution {
        Execution {
            request_id: id.to_string(),
            tool: "append".into(),
            finished: true,
        }
    }

    fn truth(attempts: Vec<Attempt>, visible: bool, repeat_safe: bool) -> ModernTruth {
        let executions = attempts
            .iter()
            .map(|a| run(a.rpc_id.parse().unwrap_or(0)))
            .collect();
        ModernTruth {
            attempts,
            cut: CutFact {
                target: 1,
                class: None,
                event_index: None,
                visible,
                torn: false,
            },
            executions,
            repeat_safe,
        }
    }

    fn kinds(t: &ModernTruth) -> Vec<String> {
        expected(t).expect("judgeable").into_iter().collect()
    }

    #[test]
    fn an_identical_call_after_a_cut_makes_the_cut_call_an_unproven_resend() {
        let t = truth(
            vec![
                attempt(0, 0, 1, None, true),
                attempt(1, 0, 2, None, false),
                attempt(2, 0, 3, None, true),
            ],
            true,
            false,
        );
        assert_eq!(kinds(&t), [UNPROVEN, UNPROVEN_VISIBLE]);
        let unseen = ModernTruth {
            cut: CutFact {
                visible: false,
                ..t.cut.clone()
            },
            ..t.clone()
        };
        assert_eq!(kinds(&unseen), [UNPROVEN], "no visible start, no warning");
        // An identical call before the cut one is no candidate.
        let before = truth(
            vec![attempt(0, 0, 1, None, true), attempt(1, 0, 2, None, false)],
            true,
            false,
        );
        assert_eq!(kinds(&before), [UNANSWERED]);
    }

    #[test]
    fn a_retry_with_other_arguments_leaves_the_cut_call_abandoned() {
        let t = truth(
            vec![
                other_args(attempt(0, 0, 1, None, true), 0),
                other_args(attempt(1, 0, 2, None, false), 1),
                other_args(attempt(1, 1, 3, None, true), 11),
                other_args(attempt(2, 0, 4, None, true), 2),
            ],
            true,
            false,
        );
        assert_eq!(kinds(&t), [UNANSWERED]);
        let mut unknown = t.clone();
        unknown.attempts[1].args = None;
        assert!(expected(&unknown).is_err(), "no arguments, no judgement");
    }

    #[test]
    fn an_unmarked_app_resend_is_unproven_and_a_marked_one_is_reissued() {
        let unmarked = truth(
            vec![
                attempt(0, 0, 1, None, true),
                attempt(1, 0, 2, None, false),
                attempt(1, 1, 3, None, true),
            ],
            true,
            false,
        );
        assert_eq!(kinds(&unmarked), [UNPROVEN, UNPROVEN_VISIBLE]);
        let marked = truth(
            vec![
                attempt(0, 0, 1, Some("a"), true),
                attempt(1, 0, 2, Some("b"), false),
                attempt(1, 1, 3, Some("b"), true),
            ],
            true,
            false,
        );
        assert_eq!(kinds(&marked), ["reexecuted", "reissued"]);
        let safe = ModernTruth {
            repeat_safe: true,
            ..marked.clone()
        };
        assert_eq!(kinds(&safe), ["reissued"]);
        let unseen = ModernTruth {
            cut: CutFact {
                visible: false,
                ..marked.cut.clone()
            },
            ..marked
        };
        assert_eq!(kinds(&unseen), ["reissued"]);
    }

    #[test]
    fn a_failure_without_a_cut_is_a_harness_error() {
        let t = truth(
            vec![attempt(0, 0, 1, None, false), attempt(1, 0, 2, None, false)],
            true,
            false,
        );
        assert!(expected(&t).is_err());
    }
}
