//! `report.html`: the report as one self-contained page.
//!
//! Why: a person opens one file from a CI artifact or a laptop and sees the run: facts, the
//! story of one affected session, charts and tables.
//! Invariants: one file with inline CSS and inline SVG; no `<script>`, no external resource
//! (no `src`/`href` to anything, no `url(`), so it renders offline and with scripts disabled;
//! every piece of report text embedded in it goes through [`escape`].

use std::fmt::Write as _;

use super::ReportError;
use super::charts;
use super::headline;
use super::latency::Summary;
use super::model::Report;
use super::summary::{STREAM_RATE_HEADER, latency_rows, stream_rate_rows, target_line};
use super::time_charts;

/// Timeline rows listed in the table (the chart shows all).
const TIMELINE_ROWS: usize = 100;

const STYLE: &str = "body{font-family:sans-serif;margin:24px auto;max-width:900px;color:#222}\
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border:1px solid #ddd;\
text-align:left;font-size:13px}td.n{text-align:right;font-variant-numeric:tabular-nums}\
th{background:#f3f3f3}pre{background:#f7f7f7;padding:8px;font-size:12px;overflow-x:auto}\
.story{background:#fff8e6;border-left:4px solid #e0a800;padding:8px 12px;font-family:monospace;\
font-size:13px;white-space:pre-wrap}.chart{margin:12px 0}";

/// `text` with `& < > " '` replaced by character references.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// True if `cell` reads as a number, optionally with a unit or `%` (or is `-`): such cells
/// are right-aligned.
fn is_number(cell: &str) -> bool {
    let n = cell.trim_end_matches(['µ', 'm', 's', '%']);
    cell == "-" || (!n.is_empty() && n.parse::<f64>().is_ok())
}

/// An HTML table of escaped cells.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let class = if is_number(cell) { " class=\"n\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>\n");
    out
}

/// The first [`TIMELINE_ROWS`] of `items` in a collapsed table: `t (s)` (from the row's
/// milliseconds), then `columns`. The summary reads `{lead}first N of M {what}`.
fn timeline_table<T>(
    out: &mut String,
    items: &[T],
    (lead, what): (&str, &str),
    columns: [&str; 3],
    row: impl Fn(&T) -> (u64, [String; 3]),
) {
    let rows: Vec<Vec<String>> = items
        .iter()
        .take(TIMELINE_ROWS)
        .map(|item| {
            let (t_ms, cells) = row(item);
            let mut r = vec![format!("{:.3}", t_ms as f64 / 1000.0)];
            r.extend(cells);
            r
        })
        .collect();
    let _ = writeln!(
        out,
        "<details><summary>{lead}first {} of {} {what}</summary>",
        rows.len(),
        items.len()
    );
    let mut header = vec!["t (s)"];
    header.extend(columns);
    out.push_str(&table(&header, &rows));
    out.push_str("</details>\n");
}

fn section(out: &mut String, title: &str) {
    let _ = writeln!(out, "<h2>{}</h2>", escape(title));
}

fn chart(out: &mut String, svg: &str) {
    let _ = writeln!(out, "<div class=\"chart\">{svg}</div>");
}

/// The client histogram names of every policy, sorted, each once.
fn histogram_names(report: &Report) -> Vec<&String> {
    let mut names: Vec<&String> = report
        .policies
        .values()
        .flat_map(|p| p.histograms.keys())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Latency charts: one per histogram name shared by the policies (one curve per policy), then
/// one with every proxy histogram.
fn latency_charts(report: &Report, out: &mut String) -> Result<(), ReportError> {
    for name in histogram_names(report) {
        let series: Vec<(String, &hdrhistogram::Histogram<u64>)> = report
            .policies
            .iter()
            .filter_map(|(policy, p)| {
                p.histograms
                    .get(name)
                    .map(|l| (policy.clone(), &l.histogram))
            })
            .collect();
        let title = format!("{name} latency by percentile, per policy");
        chart(out, &charts::percentile_curves(&title, &series)?);
    }
    if !report.proxy_histograms.is_empty() {
        let series: Vec<(String, &hdrhistogram::Histogram<u64>)> = report
            .proxy_histograms
            .iter()
            .map(|(n, l)| (n.clone(), &l.histogram))
            .collect();
        chart(
            out,
            &charts::percentile_curves("proxy-measured latencies by percentile", &series)?,
        );
    }
    Ok(())
}

/// Latency over time: for each client histogram name, p50 and p99 per second per policy (from
/// the report's per-second intervals; nothing when it has none).
fn latency_over_time(report: &Report, out: &mut String) -> Result<(), ReportError> {
    if report.intervals.is_empty() {
        return Ok(());
    }
    for name in histogram_names(report) {
        let series: Vec<time_charts::SecondSeries> = report
            .policies
            .iter()
            .filter_map(|(policy, p)| {
                let l = p.histograms.get(name)?;
                Some((
                    policy.clone(),
                    time_charts::per_second(&report.intervals, &l.tag),
                ))
            })
            .filter(|(_, points)| !points.is_empty())
            .collect();
        if series.is_empty() {
            continue;
        }
        let title = format!("{name} latency over time (p50, p99 per second)");
        chart(out, &time_charts::latency_over_time(&title, &series)?);
    }
    Ok(())
}

/// The cut timeline: a dot per cut (class row, outcome color) and a table of the first cuts.
fn cut_timeline(report: &Report, out: &mut String) -> Result<(), ReportError> {
    let marks = time_charts::cut_marks(&report.timeline);
    if marks.is_empty() {
        return Ok(());
    }
    chart(
        out,
        &time_charts::cut_timeline(&marks, report.facts.duration_ms)?,
    );
    timeline_table(
        out,
        &marks,
        (
            "cut timeline: ",
            "cuts (outcome of the affected call: ok, failed, silently-lost, or - when the cut leg's call is not known)",
        ),
        ["class", "action", "call outcome"],
        |m| {
            (
                m.t_ms,
                [m.class.clone(), m.action.clone(), m.outcome.clone()],
            )
        },
    );
    Ok(())
}

/// The whole page.
pub fn render(report: &Report) -> Result<String, ReportError> {
    let f = &report.facts;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>tearline report {}</title><style>{STYLE}{}</style></head><body>\n",
        escape(&f.started_at),
        headline::STYLE
    );
    let _ = writeln!(
        out,
        "<h1>tearline report — {}</h1>",
        escape(&f.profile_name)
    );
    if let Some(i) = &f.interrupted {
        let _ = writeln!(
            out,
            "<div class=\"headline bad\"><strong>{}</strong></div>",
            escape(&i.line())
        );
    }
    out.push_str(&headline::render(report));
    let facts = vec![
        vec!["tool".to_owned(), format!("{} {}", f.tool, f.tool_version)],
        vec!["started".to_owned(), f.started_at.clone()],
        vec![
            "duration".to_owned(),
            format!("{:.1} s", f.duration_ms as f64 / 1000.0),
        ],
        vec!["seed".to_owned(), f.seed.to_string()],
        vec!["profile".to_owned(), f.profile_name.clone()],
        vec!["target".to_owned(), target_line(&f.target)],
        vec!["command".to_owned(), f.command_line.join(" ")],
    ];
    let mut facts = facts;
    if let Some(segment) = &f.segment {
        facts.push(vec!["segment".to_owned(), segment.clone()]);
    }
    out.push_str(&table(&["fact", "value"], &facts));

    if !report.story.is_empty() {
        section(&mut out, "One affected session");
        let lines: Vec<String> = report.story.iter().map(|l| escape(l)).collect();
        let _ = writeln!(out, "<div class=\"story\">{}</div>", lines.join("\n"));
    }

    // What went wrong comes first: the findings and the clients' counts, then the charts.
    section(&mut out, "Proxy findings");
    let kinds: Vec<(String, u64)> = report
        .findings
        .iter()
        .map(|(k, g)| (k.clone(), g.count))
        .collect();
    chart(&mut out, &charts::bars("Findings by kind", &kinds)?);
    let examples: Vec<Vec<String>> = report
        .findings
        .iter()
        .flat_map(|(kind, g)| {
            g.examples.iter().map(move |e| {
                vec![
                    kind.clone(),
                    e.session.clone(),
                    e.stream.clone(),
                    e.ids.join(", "),
                    e.detail.clone(),
                ]
            })
        })
        .collect();
    out.push_str(&table(
        &["kind", "session", "stream", "ids", "detail"],
        &examples,
    ));
    if let Some(note) = super::summary::unproven_note(report) {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(&note));
    }

    section(&mut out, "Client outcomes per policy");
    let (header, rows) = report.policy_counter_rows();
    out.push_str(&table(&header, &rows));

    section(&mut out, "Latency");
    latency_over_time(report, &mut out)?;
    latency_charts(report, &mut out)?;
    out.push_str(&table(
        &["histogram", "count", "p50", "p90", "p99", "p99.9", "max"],
        &latency_rows(report),
    ));
    let rates = stream_rate_rows(report);
    if !rates.is_empty() {
        section(&mut out, "Stream rate");
        out.push_str(&table(&STREAM_RATE_HEADER, &rates));
    }
    let files: Vec<Vec<String>> = report
        .latencies()
        .into_iter()
        .map(|(label, l)| {
            let s = Summary::of(&l.histogram);
            vec![
                label,
                l.hgrm.clone(),
                l.tag.clone(),
                format!("{:.1}", s.mean),
            ]
        })
        .collect();
    out.push_str(&table(
        &["histogram", ".hgrm file", ".hlog tag", "mean µs"],
        &files,
    ));

    section(&mut out, &format!("Cuts ({} total)", report.cuts.total));
    let by_class: Vec<(String, u64)> = report
        .cuts
        .by_class
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    chart(
        &mut out,
        &charts::bars("Cuts by SSE position class", &by_class)?,
    );
    let by_action: Vec<Vec<String>> = report
        .cuts
        .by_action
        .iter()
        .map(|(k, v)| vec![k.clone(), v.to_string()])
        .collect();
    out.push_str(&table(&["action", "cuts"], &by_action));
    cut_timeline(report, &mut out)?;

    section(&mut out, "Timeline");
    chart(
        &mut out,
        &charts::timeline(&report.timeline, f.duration_ms)?,
    );
    timeline_table(
        &mut out,
        &report.timeline,
        ("", "entries"),
        ["kind", "duration (ms)", "detail"],
        |e| {
            (
                e.t_ms,
                [
                    e.kind.as_str().to_owned(),
                    e.duration_ms.to_string(),
                    e.detail.clone(),
                ],
            )
        },
    );

    section(&mut out, "Profile");
    let _ = writeln!(
        out,
        "<details><summary>profile text</summary><pre>{}</pre></details>",
        escape(&f.profile_text)
    );
    out.push_str("</body></html>\n");
    Ok(out)
}
