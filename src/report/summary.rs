//! The terminal summary: the report as aligned plain-text tables.
//!
//! Why: the first thing a person reads after a run (printed by `tearline replay` and
//! `tearline report show`, saved as `summary.txt`).
//! Invariants: plain ASCII layout (no colour, no terminal control codes); columns are aligned by
//! character count; the first column is left-aligned and the others right-aligned; every
//! latency carries its unit; the output depends only on the report.

use std::fmt::Write as _;

use super::latency::{Summary, human_us};
use super::model::{Counters, FindingExample, Report, Target};

/// The finding kind that is counted apart from loss (class ambiguous in the audit).
pub const UNPROVEN_RESEND: &str = "unproven-resend";

/// The note the summary and the HTML report print under the findings when the audit found
/// unproven re-sends: they are neither recovered nor lost, and not counted as loss.
pub fn unproven_note(report: &Report) -> Option<String> {
    let n = report.finding_count(UNPROVEN_RESEND);
    (n > 0).then(|| {
        format!(
            "{UNPROVEN_RESEND}: {n} cut call(s) followed by an identical call without proof of \
             being its re-send; the wire cannot tell recovered from lost, so they are ambiguous, \
             not counted as loss (an Idempotency-Key header on the call and its re-send makes \
             the wire tell)"
        )
    })
}

/// Lays out `rows` under `header`: column 0 left-aligned, the rest right-aligned, two spaces
/// between columns, each line indented by two spaces.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    table_aligned(header, rows, 1)
}

/// Like [`table`], with the first `left` columns left-aligned and the last column also
/// left-aligned when `left` is 0 (free text at the end of a row).
pub fn table_aligned(header: &[&str], rows: &[Vec<String>], left: usize) -> String {
    let cols = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(cols) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::from(" ");
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            l.push(' ');
            let last_text = left == 0 && i + 1 == cols && i > 0;
            if i == 0 || i < left || last_text {
                if i > 0 {
                    l.push(' ');
                }
                l.push_str(cell);
                l.extend(std::iter::repeat_n(' ', pad));
            } else {
                l.push(' ');
                l.extend(std::iter::repeat_n(' ', pad));
                l.push_str(cell);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// Header of the stream-rate table.
pub const STREAM_RATE_HEADER: [&str; 5] =
    ["policy", "streams", "median events/s", "slowest", "fastest"];

/// Events per second per stream, by policy (from each policy's `stream-interval` histogram:
/// the rate is the inverse of a stream's mean interval, so the slowest stream is the largest
/// interval).
pub fn stream_rate_rows(report: &Report) -> Vec<Vec<String>> {
    let rate = |us: u64| format!("{:.1}", super::names::events_per_s(us));
    report
        .policies
        .iter()
        .filter_map(|(policy, p)| {
            let h = &p.histograms.get(super::names::STREAM_INTERVAL)?.histogram;
            (!h.is_empty()).then(|| {
                vec![
                    policy.clone(),
                    h.len().to_string(),
                    rate(h.value_at_quantile(0.5)),
                    rate(h.max()),
                    rate(h.min()),
                ]
            })
        })
        .collect()
}

/// The latency table rows: label, count, p50, p90, p99, p99.9, max.
pub fn latency_rows(report: &Report) -> Vec<Vec<String>> {
    report
        .latencies()
        .into_iter()
        .map(|(label, l)| {
            let s = Summary::of(&l.histogram);
            let mut row = vec![label, s.count.to_string()];
            for v in [s.p50, s.p90, s.p99, s.p99_9, s.max] {
                row.push(if s.count == 0 {
                    "-".to_owned()
                } else {
                    human_us(v as f64)
                });
            }
            row
        })
        .collect()
}

/// The target as one line.
pub fn target_line(target: &Target) -> String {
    match target {
        Target::Lab {
            address,
            server_mode,
        } => format!("lab server {address} ({server_mode})"),
        Target::User { address, path } => format!("user server {address}{path}"),
    }
}

/// One finding example as one line, leaving out empty fields.
pub fn example_line(e: &FindingExample) -> String {
    let mut parts = Vec::new();
    if !e.session.is_empty() {
        parts.push(format!("session {}", e.session));
    }
    if !e.stream.is_empty() {
        parts.push(format!("stream {}", e.stream));
    }
    if !e.ids.is_empty() {
        parts.push(format!("ids {}", e.ids.join(",")));
    }
    let head = parts.join(" ");
    match (head.is_empty(), e.detail.is_empty()) {
        (true, _) => e.detail.clone(),
        (false, true) => head,
        (false, false) => format!("{head}: {}", e.detail),
    }
}

/// The whole summary.
pub fn render(report: &Report) -> String {
    let f = &report.facts;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {} — started {}, ran {:.1} s, seed {}",
        f.tool,
        f.tool_version,
        f.started_at,
        f.duration_ms as f64 / 1000.0,
        f.seed
    );
    let _ = writeln!(out, "  profile  {}", f.profile_name);
    let _ = writeln!(out, "  target   {}", target_line(&f.target));
    let _ = writeln!(out, "  command  {}", f.command_line.join(" "));
    if let Some(i) = &f.interrupted {
        let _ = writeln!(out, "\n{}", i.line());
    }

    if !report.story.is_empty() {
        let _ = writeln!(out, "\nOne affected session");
        for line in &report.story {
            let _ = writeln!(out, "  {line}");
        }
    }

    let total = report.cuts.total;
    let _ = writeln!(out, "\nCuts ({total} total)");
    let rows: Vec<Vec<String>> = report
        .cuts
        .by_class
        .iter()
        .map(|(k, v)| vec![k.clone(), v.to_string(), percent(*v, total)])
        .collect();
    out.push_str(&table(&["class", "cuts", "share"], &rows));
    out.push('\n');
    let rows: Vec<Vec<String>> = report
        .cuts
        .by_action
        .iter()
        .map(|(k, v)| vec![k.clone(), v.to_string(), percent(*v, total)])
        .collect();
    out.push_str(&table(&["action", "cuts", "share"], &rows));

    let _ = writeln!(out, "\nProxy findings");
    if report.findings.is_empty() {
        let _ = writeln!(out, "  none");
    } else {
        let rows: Vec<Vec<String>> = report
            .findings
            .iter()
            .map(|(k, g)| {
                let example = g.examples.first().map_or(String::new(), example_line);
                vec![k.clone(), g.count.to_string(), example]
            })
            .collect();
        out.push_str(&table_aligned(
            &["kind", "count", "first example"],
            &rows,
            0,
        ));
        if let Some(note) = unproven_note(report) {
            let _ = writeln!(out, "  {note}");
        }
    }

    let _ = writeln!(out, "\nClient outcomes per policy");
    if report.policies.is_empty() {
        let _ = writeln!(out, "  none");
    } else {
        let (header, rows) = report.policy_counter_rows();
        out.push_str(&table(&header, &rows));
    }

    reconciliation(report, &mut out);

    let _ = writeln!(out, "\nLatency");
    let rows = latency_rows(report);
    if rows.is_empty() {
        let _ = writeln!(out, "  none");
    } else {
        out.push_str(&table(
            &["histogram", "count", "p50", "p90", "p99", "p99.9", "max"],
            &rows,
        ));
    }
    let rates = stream_rate_rows(report);
    if !rates.is_empty() {
        let _ = writeln!(
            out,
            "\nStream rate (first-event excludes priming; last-event, recovery and max-gap are above)"
        );
        out.push_str(&table(&STREAM_RATE_HEADER, &rates));
    }
    out
}

/// Notes shown per policy in the summary (the report keeps more).
pub const NOTES_SHOWN: usize = 8;

/// The client's and the audit's counts of the same facts, per policy, and the first notes on
/// the calls where they differ (nothing when the report has no reconciliation).
fn reconciliation(report: &Report, out: &mut String) {
    if report.reconciliation.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nClient and audit, same facts (client / audit; calls whose counts differ in brackets)"
    );
    let mut header = vec!["fact"];
    header.extend(report.reconciliation.keys().map(String::as_str));
    let rows: Vec<Vec<String>> = Counters::SHARED
        .iter()
        .map(|fact| {
            let mut row = vec![(*fact).to_owned()];
            for r in report.reconciliation.values() {
                let f = r.facts.get(*fact).copied().unwrap_or_default();
                row.push(if f.calls_differ == 0 {
                    format!("{} / {}", f.client, f.audit)
                } else {
                    format!("{} / {} ({})", f.client, f.audit, f.calls_differ)
                });
            }
            row
        })
        .collect();
    out.push_str(&table(&header, &rows));
    for (policy, r) in &report.reconciliation {
        for note in r.notes.iter().take(NOTES_SHOWN) {
            let _ = writeln!(out, "  {policy} {note}");
        }
        if r.notes.len() > NOTES_SHOWN {
            let _ = writeln!(
                out,
                "  {policy}: {} more note(s) in report.json (reconciliation)",
                r.notes.len() - NOTES_SHOWN
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_first_column_left_and_others_right() {
        let t = table(
            &["name", "n"],
            &[
                vec!["a".into(), "10".into()],
                vec!["long-name".into(), "7".into()],
            ],
        );
        assert_eq!(t, "  name        n\n  a          10\n  long-name   7\n");
        let t = table_aligned(
            &["kind", "n", "text"],
            &[vec!["a".into(), "10".into(), "x".into()]],
            0,
        );
        assert_eq!(t, "  kind   n  text\n  a     10  x\n");
    }
}
