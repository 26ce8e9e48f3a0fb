//! Charts over the run's time for `report.html`: latency per second (from the report's
//! per-second intervals) and the cut timeline (each cut by class, colored by the outcome of the
//! call it hit).
//!
//! Why: a percentile curve hides *when* latency rose; a per-second p50/p99 line and a dot per
//! cut show whether the tail follows the cuts, an outage or a ramp.
//! Invariants: every function returns one complete `<svg>` (plotters' SVG backend escapes
//! text); empty inputs give a captioned "no data" chart, never an error; values are µs in,
//! milliseconds drawn; a second without samples draws no point (it is not a zero latency).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use super::ReportError;
use super::charts::{
    WIDTH, captioned, chart_error, color, draw_line, latency_area, legend_box, svg_chart,
};
use super::model::{Interval, TimelineEntry, TimelineKind};

/// One second of latency: (seconds since start, p50 ms, p99 ms).
pub type SecondPoint = (f64, f64, f64);

/// A labelled line of [`SecondPoint`]s.
pub type SecondSeries = (String, Vec<SecondPoint>);

/// One point per second: (seconds since start, p50 ms, p99 ms); seconds without samples are
/// skipped. Intervals of `tag` that share a second are added.
pub fn per_second(intervals: &[Interval], tag: &str) -> Vec<SecondPoint> {
    let mut by_second: BTreeMap<u64, Histogram<u64>> = BTreeMap::new();
    for i in intervals.iter().filter(|i| i.tag == tag) {
        let h = by_second
            .entry(i.start.as_secs())
            .or_insert_with(super::latency::new_histogram);
        // Both sides auto-resize: addition cannot fail for lack of range.
        let _ = h.add(&i.histogram);
    }
    by_second
        .into_iter()
        .filter(|(_, h)| !h.is_empty())
        .map(|(s, h)| {
            let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
            (s as f64 + 0.5, ms(0.5), ms(0.99))
        })
        .collect()
}

/// p50 and p99 per second, one pair of lines per `(label, points)` (points from
/// [`per_second`]).
pub fn latency_over_time(title: &str, series: &[SecondSeries]) -> Result<String, ReportError> {
    let x_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _, _)| *x + 0.5))
        .fold(1.0f64, f64::max);
    let y_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, _, p99)| *p99))
        .fold(0.001f64, f64::max)
        * 1.1;
    let empty = series.iter().all(|(_, p)| p.is_empty());
    svg_chart(title, (WIDTH, 320), |root| {
        let caption = captioned(title, empty, "no data");
        let mut chart = latency_area(root, title, caption, (x_max, y_max), "seconds since start")?;
        for (i, (label, points)) in series.iter().enumerate() {
            let c = color(i);
            let p99: Vec<(f64, f64)> = points.iter().map(|(x, _, y)| (*x, *y)).collect();
            let p50: Vec<(f64, f64)> = points.iter().map(|(x, y, _)| (*x, *y)).collect();
            draw_line(
                &mut chart,
                title,
                p99,
                c.stroke_width(2),
                format!("{label} p99"),
            )?;
            let light = c.mix(0.45).stroke_width(2);
            draw_line(&mut chart, title, p50, light, format!("{label} p50"))?;
        }
        if !empty {
            legend_box(&mut chart, title)?;
        }
        Ok(())
    })
}

/// A cut read back from a timeline entry: `"… ACTION at CLASS … -> call OUTCOME"` (the form
/// `tearline replay` and `tearline report merge` write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutMark {
    /// Milliseconds since the start.
    pub t_ms: u64,
    /// SSE position class (`mid-value`, …), `?` when the detail does not say.
    pub class: String,
    /// `reset`, `fin`, `clean-end`, `stall`, `?` when unknown.
    pub action: String,
    /// `ok`, `failed`, `silently-lost`, or `-` when the affected call is not known.
    pub outcome: String,
}

/// The cuts of a timeline, with class, action and the affected call's outcome when known.
pub fn cut_marks(timeline: &[TimelineEntry]) -> Vec<CutMark> {
    timeline
        .iter()
        .filter(|e| e.kind == TimelineKind::Cut)
        .map(|e| {
            let words: Vec<&str> = e.detail.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "at");
            let word = |i: Option<usize>| {
                i.and_then(|i| words.get(i))
                    .map_or("?".to_owned(), |w| w.trim_end_matches(',').to_owned())
            };
            let outcome = e
                .detail
                .split_once("-> call ")
                .map_or("-".to_owned(), |(_, o)| o.trim().to_owned());
            CutMark {
                t_ms: e.t_ms,
                class: word(at.map(|i| i + 1)),
                action: word(at.and_then(|i| i.checked_sub(1))),
                outcome,
            }
        })
        .collect()
}

fn outcome_color(outcome: &str) -> RGBColor {
    match outcome {
        "ok" => RGBColor(44, 160, 44),
        "failed" => RGBColor(255, 127, 14),
        "silently-lost" => RGBColor(214, 39, 40),
        _ => RGBColor(120, 120, 120),
    }
}

/// One dot per cut: x = time, row = SSE position class, color = outcome of the affected call
/// (green ok, orange failed, red silently lost, grey unknown).
pub fn cut_timeline(marks: &[CutMark], run_ms: u64) -> Result<String, ReportError> {
    let title = "Cut timeline: class of each cut, colored by the affected call's outcome";
    let mut classes: Vec<&str> = marks.iter().map(|m| m.class.as_str()).collect();
    classes.sort_unstable();
    classes.dedup();
    let rows = classes.len().max(1);
    let x_max = (marks
        .iter()
        .map(|m| m.t_ms)
        .max()
        .unwrap_or(0)
        .max(run_ms)
        .max(1)) as f64
        / 1000.0;
    svg_chart(title, (WIDTH, 90 + 30 * rows as u32), |root| {
        let caption = captioned(title, marks.is_empty(), "no cuts");
        let mut chart = ChartBuilder::on(root)
            .caption(caption, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(130)
            .build_cartesian_2d(0f64..x_max, (0usize..rows).into_segmented())
            .map_err(|e| chart_error(title, e))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(RGBColor(240, 240, 240))
            .y_labels(rows)
            .y_label_style(("sans-serif", 13))
            .x_label_style(("sans-serif", 13))
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    classes.get(*i).map(|c| (*c).to_owned()).unwrap_or_default()
                }
                SegmentValue::Last => String::new(),
            })
            .x_desc("seconds since start")
            .draw()
            .map_err(|e| chart_error(title, e))?;
        chart
            .draw_series(marks.iter().map(|m| {
                let row = classes.iter().position(|c| *c == m.class).unwrap_or(0);
                Circle::new(
                    (m.t_ms as f64 / 1000.0, SegmentValue::CenterOf(row)),
                    4,
                    outcome_color(&m.outcome).mix(0.8).filled(),
                )
            }))
            .map_err(|e| chart_error(title, e))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_marks_read_class_action_and_outcome_from_details() {
        let entry = |detail: &str| TimelineEntry {
            t_ms: 1_250,
            kind: TimelineKind::Cut,
            duration_ms: 0,
            detail: detail.to_owned(),
        };
        let marks = cut_marks(&[
            entry("[a] reset at mid-value, session s, request 7 -> call silently-lost"),
            entry("[naive] fin at after-id, raw offset 10, pending id 3"),
        ]);
        assert_eq!(
            (
                marks[0].class.as_str(),
                marks[0].action.as_str(),
                marks[0].outcome.as_str()
            ),
            ("mid-value", "reset", "silently-lost")
        );
        assert_eq!(
            (
                marks[1].class.as_str(),
                marks[1].action.as_str(),
                marks[1].outcome.as_str()
            ),
            ("after-id", "fin", "-")
        );
    }
}
