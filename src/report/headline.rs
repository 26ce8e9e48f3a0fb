//! The headline verdict at the top of `report.html`: did any client policy lose calls silently,
//! and did the torn cuts the proxy made get detected?
//!
//! Why: the first screen of the report must answer the question the run was for, before any
//! chart: a first-time reader sees "naive lost 37 of 100 calls silently" without scrolling.
//! Invariants: every figure is a counter or finding count of the report (nothing estimated); the
//! verdict is `silent loss` if and only if some policy's `silent-loss` counter is above 0; all
//! text goes through [`super::html::escape`].

use std::fmt::Write as _;

use super::html::escape;
use super::model::Report;

/// CSS of the headline block (added to the page's style sheet).
pub const STYLE: &str = ".headline{border-radius:6px;padding:10px 16px;margin:12px 0 20px}\
.headline.bad{background:#fdecea;border-left:6px solid #c62828}\
.headline.good{background:#e8f5e9;border-left:6px solid #2e7d32}\
.headline .verdict{font-size:20px;font-weight:bold;margin-bottom:6px}\
.headline ul{margin:4px 0;padding-left:20px}.headline li{font-size:14px;margin:2px 0}";

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// The verdict sentence and whether it is bad news.
pub fn verdict(report: &Report) -> (String, bool) {
    let lossy: Vec<String> = report
        .policies
        .iter()
        .filter(|(_, p)| p.counters.silent_loss > 0)
        .map(|(name, p)| {
            format!(
                "{name} lost {} of {} calls silently",
                p.counters.silent_loss, p.counters.calls
            )
        })
        .collect();
    if !lossy.is_empty() {
        return (format!("Silent loss: {}", lossy.join("; ")), true);
    }
    let calls = report.counter_total("calls").unwrap_or(0);
    let failed = report.counter_total("failed").unwrap_or(0);
    if failed > 0 {
        (
            format!("No silent loss; {failed} of {calls} calls failed visibly"),
            false,
        )
    } else {
        (
            format!("No silent loss: all {calls} calls completed with their result"),
            false,
        )
    }
}

/// The headline block (HTML).
pub fn render(report: &Report) -> String {
    let (sentence, bad) = verdict(report);
    let mut out = String::new();
    let _ = write!(
        out,
        "<div class=\"headline {}\"><div class=\"verdict\">{}</div><ul>",
        if bad { "bad" } else { "good" },
        escape(&sentence)
    );
    for (name, p) in &report.policies {
        let c = &p.counters;
        let line = format!(
            "{name}: {} calls — ok {}, failed {}, silently lost {} ({}); torn boundaries detected by the client: {}",
            c.calls,
            c.ok,
            c.failed,
            c.silent_loss,
            pct(c.silent_loss, c.calls),
            c.torn_cut
        );
        let _ = write!(out, "<li>{}</li>", escape(&line));
    }
    let torn = report.finding_count("torn-cut");
    let detected = report.counter_total("torn-detections").unwrap_or(0);
    let line = format!(
        "proxy: {} cuts, {torn} torn (an event partly delivered); clients detected {detected} torn boundaries",
        report.cuts.total
    );
    let _ = write!(out, "<li>{}</li>", escape(&line));
    if let Some(segment) = &report.facts.segment {
        let _ = write!(out, "<li>{}</li>", escape(&format!("segments: {segment}")));
    }
    out.push_str("</ul></div>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Counters, RunFacts, Target};
    use std::collections::BTreeMap;

    fn report(naive_lost: u64) -> Report {
        let facts = RunFacts::new(
            1,
            "p",
            Target::User {
                address: "a:1".into(),
                path: "/mcp".into(),
            },
        );
        let mut r = Report::new(facts);
        let h: BTreeMap<&str, hdrhistogram::Histogram<u64>> = BTreeMap::new();
        let c = Counters::from_pairs([
            ("calls", 10),
            ("ok", 10 - naive_lost),
            ("silent-loss", naive_lost),
        ])
        .expect("known counters");
        r.add_policy("naive", c, h.clone());
        r.add_policy(
            "strict",
            Counters::from_pairs([("calls", 10), ("ok", 10)]).expect("known"),
            h,
        );
        r
    }

    #[test]
    fn verdict_names_the_policy_that_lost_calls_silently() {
        let (text, bad) = verdict(&report(3));
        assert!(bad);
        assert_eq!(text, "Silent loss: naive lost 3 of 10 calls silently");
        let (text, bad) = verdict(&report(0));
        assert!(!bad, "{text}");
        assert!(render(&report(0)).contains("headline good"));
    }
}
