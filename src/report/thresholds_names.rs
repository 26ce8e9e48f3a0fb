//! The metric names a report has (or a run will have), for checking `--fail-on` before a run
//! and for listing them (`tearline report show` prints them).
//!
//! Why: a threshold naming a histogram or policy the run never produces used to be found only
//! after the whole run (exit 2 after minutes). `replay` and `load` know their policies and the
//! histograms each phase records before they start, so they build a [`Vocabulary`] up front and
//! reject an unknown name at once, with the list of valid ones.
//! Invariants: [`Vocabulary::check`] accepts a threshold exactly when evaluating it on a report
//! with these policies and histograms finds its names (the same lookup rules as
//! [`Threshold::measure`]); the listing names every form the parser takes.

use super::model::{Counters, Report};
use super::thresholds::{CUT_ACTIONS, FINDING_KINDS, Metric, Threshold, ThresholdError, join};

/// The policies and histogram labels of a report (or of a run before it starts).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Vocabulary {
    /// Policies (phase labels), in run order.
    pub policies: Vec<String>,
    /// Histogram labels as the report shows them: `POLICY.NAME` and `proxy.NAME` (a replay's
    /// proxy histograms are per phase: `proxy.POLICY.NAME`).
    pub histograms: Vec<String>,
    /// Cut classes or positions the report counted (`cut.CLASS` with a non-zero count).
    pub cut_classes: Vec<String>,
}

impl Vocabulary {
    /// The names `report` has.
    pub fn of_report(report: &Report) -> Vocabulary {
        Vocabulary {
            policies: report.policies.keys().cloned().collect(),
            histograms: report
                .latencies()
                .into_iter()
                .map(|(label, _)| label)
                .collect(),
            cut_classes: report.cuts.by_class.keys().cloned().collect(),
        }
    }

    /// The names a run of `policies` will have, each policy recording the client histograms
    /// `client` and, when `proxy` is not empty, the proxy's per-phase histograms
    /// `proxy.POLICY.NAME` (replay's audit).
    pub fn of_run(policies: &[&str], client: &[&str], proxy: &[&str]) -> Vocabulary {
        let mut histograms = Vec::new();
        for p in policies {
            histograms.extend(client.iter().map(|n| format!("{p}.{n}")));
        }
        for p in policies {
            histograms.extend(proxy.iter().map(|n| format!("proxy.{p}.{n}")));
        }
        Vocabulary {
            policies: policies.iter().map(|p| (*p).to_owned()).collect(),
            histograms,
            cut_classes: Vec::new(),
        }
    }

    fn has_histogram(&self, name: &str) -> bool {
        if self.histograms.iter().any(|h| h == name) {
            return true;
        }
        // A bare NAME merges the policies' histograms of that name, else the proxy's.
        !name.contains('.')
            && (self.histograms.contains(&format!("proxy.{name}"))
                || self
                    .policies
                    .iter()
                    .any(|p| self.histograms.contains(&format!("{p}.{name}"))))
    }

    /// Ok when evaluating `t` on a report with these names finds them; else the error
    /// evaluation would give, naming the valid ones.
    pub fn check(&self, t: &Threshold) -> Result<(), ThresholdError> {
        match &t.metric {
            Metric::Count {
                scope: Some(policy),
                ..
            } if policy != "cut" && policy != "finding" => {
                if self.policies.iter().any(|p| p == policy) {
                    Ok(())
                } else {
                    Err(ThresholdError::UnknownPolicy {
                        expr: t.expr.clone(),
                        policy: policy.clone(),
                        known: join(&self.policies),
                    })
                }
            }
            Metric::Count { .. } => Ok(()),
            Metric::Latency { histogram, .. } => {
                if self.has_histogram(histogram) {
                    Ok(())
                } else {
                    Err(ThresholdError::UnknownHistogram {
                        expr: t.expr.clone(),
                        name: histogram.clone(),
                        known: join(&self.histograms),
                    })
                }
            }
        }
    }

    /// Checks every threshold; the first unknown name is the error.
    pub fn check_all(&self, thresholds: &[Threshold]) -> Result<(), ThresholdError> {
        thresholds.iter().try_for_each(|t| self.check(t))
    }

    /// The metric names, one group a line, for users writing thresholds.
    pub fn listing(&self) -> String {
        let mut out = String::new();
        let line = |out: &mut String, what: &str, names: String| {
            out.push_str(&format!("  {what:<22}{names}\n"));
        };
        line(
            &mut out,
            "counts (all policies)",
            join(Counters::NAMES.iter().chain(["cuts"].iter())),
        );
        let scoped: Vec<String> = self
            .policies
            .iter()
            .map(|p| format!("{p}.COUNTER"))
            .collect();
        line(&mut out, "one policy's counts", join(scoped));
        line(
            &mut out,
            "findings",
            join(FINDING_KINDS.iter().map(|k| format!("finding.{k}"))),
        );
        let classes = crate::wire::position::SseClass::ALL.map(|c| c.as_str());
        let llm = crate::wire::LlmPos::ALL.map(crate::wire::LlmPos::as_str);
        line(
            &mut out,
            "cuts",
            join(
                classes
                    .iter()
                    .chain(llm.iter())
                    .chain(CUT_ACTIONS.iter())
                    .map(|c| format!("cut.{c}")),
            ),
        );
        if !self.cut_classes.is_empty() {
            line(
                &mut out,
                "cuts in this report",
                join(self.cut_classes.iter().map(|c| format!("cut.{c}"))),
            );
        }
        line(
            &mut out,
            "histograms (pNN, max)",
            join(&self.histograms) + " (latencies need a unit: p99(H)>2s)",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Vocabulary;
    use crate::report::Threshold;

    fn t(s: &str) -> Threshold {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn replay() -> Vocabulary {
        Vocabulary::of_run(
            &["strict", "naive"],
            &["call", "first-event"],
            &["client-reconnect"],
        )
    }

    #[test]
    fn names_a_run_produces_pass_the_check() {
        let v = replay();
        for ok in [
            "p99(call)>2s",
            "p99(strict.call)>2s",
            "max(proxy.naive.client-reconnect)>1s",
            "naive.silent-loss>0",
            "finding.llm-truncated>0",
            "cut.mid-delta>0",
            "silent-loss>0",
        ] {
            assert!(v.check(&t(ok)).is_ok(), "{ok}");
        }
    }

    #[test]
    fn names_a_run_does_not_produce_fail_the_check_listing_the_valid_ones() {
        let v = replay();
        let e = v
            .check(&t("max(proxy.client-reconnect)>1s"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("proxy.naive.client-reconnect"), "{e}");
        assert!(v.check(&t("p99(retry.call)>1s")).is_err());
        assert!(v.check(&t("p99(colll)>1s")).is_err());
        let e = v
            .check(&t("retry.silent-loss>0"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("strict, naive"), "{e}");
    }

    #[test]
    fn only_proxy_histograms_take_a_third_name_part() {
        assert!("max(strict.call.extra)>1s".parse::<Threshold>().is_err());
        assert!(
            "max(proxy.naive.client-reconnect.x)>1s"
                .parse::<Threshold>()
                .is_err()
        );
        assert!(
            "max(proxy.naive.client-reconnect)>1s"
                .parse::<Threshold>()
                .is_ok()
        );
    }

    #[test]
    fn the_listing_names_histograms_policies_findings_and_cut_positions() {
        let l = replay().listing();
        for name in [
            "proxy.naive.client-reconnect",
            "strict.call",
            "naive.COUNTER",
            "finding.llm-truncated",
            "cut.mid-delta",
            "silent-loss",
        ] {
            assert!(l.contains(name), "{name} missing from\n{l}");
        }
        assert!(!l.contains("retry."), "{l}");
    }
}
