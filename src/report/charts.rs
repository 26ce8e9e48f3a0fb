//! SVG charts for `report.html`, drawn with plotters' SVG backend.
//!
//! Why: a person sees the tail, the cut mix and the run's rhythm faster in a picture than in a
//! table; SVG text embeds in one HTML file and needs no script or network.
//! Invariants: every function returns one complete `<svg>` element as a string; text drawn
//! into it is escaped by plotters' SVG backend; the percentile chart's x axis is
//! log10(1/(1-p)) (0 = 0%, 1 = 90%, 2 = 99%, 3 = 99.9%, …) as in HdrHistogram's plotter, its
//! y axis milliseconds; empty inputs give a chart with a "no data" caption instead of an error.

use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentValue;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::ReportError;
use super::hgrm;
use super::model::{TimelineEntry, TimelineKind};

/// Timeline entries drawn at most (the SVG grows with each).
pub const MAX_TIMELINE_MARKS: usize = 5_000;

/// Width of every chart in pixels.
pub const WIDTH: u32 = 860;

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

pub(super) fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

pub(super) fn chart_error(chart: &str, e: impl std::fmt::Display) -> ReportError {
    ReportError::Chart {
        chart: chart.to_owned(),
        message: e.to_string(),
    }
}

/// One complete `<svg>` of `size`: a white area that `draw` fills, then closed.
pub(super) fn svg_chart(
    title: &str,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), ReportError>,
) -> Result<String, ReportError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| chart_error(title, e))?;
        draw(&root)?;
        root.present().map_err(|e| chart_error(title, e))?;
    }
    Ok(svg)
}

/// The caption over a chart: its title, with `(note)` after it when it has nothing to show.
pub(super) fn captioned(title: &str, empty: bool, note: &str) -> String {
    if empty {
        format!("{title} ({note})")
    } else {
        title.to_owned()
    }
}

/// The x-axis label of log10(1/(1-p)) = `x`: `0%`, `90%`, `99%`, `99.9%`, ….
fn percentile_label(x: f64) -> String {
    if (x - x.round()).abs() > 1e-9 || x < 0.0 {
        return String::new();
    }
    let k = x.round() as i32;
    if k == 0 {
        return "0%".to_owned();
    }
    let p = 100.0 - 100.0 / 10f64.powi(k);
    format!("{p:.*}%", (k - 2).max(0) as usize)
}

/// Percentile curves, one series per `(label, histogram)`; values µs, drawn in ms.
pub fn percentile_curves(
    title: &str,
    series: &[(String, &Histogram<u64>)],
) -> Result<String, ReportError> {
    let lines: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .filter(|(_, h)| !h.is_empty())
        .map(|(label, h)| {
            let points = hgrm::rows(h, 1000.0)
                .into_iter()
                .filter(|r| r.percentile < 1.0)
                .map(|r| ((1.0 / (1.0 - r.percentile)).log10(), r.value))
                .collect();
            (label.clone(), points)
        })
        .collect();
    let x_max = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| *x))
        .fold(2.0f64, f64::max)
        .ceil()
        .min(6.0);
    let y_max = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .fold(0.0f64, f64::max)
        .max(0.001)
        * 1.1;
    svg_chart(title, (WIDTH, 360), |root| {
        let caption = captioned(title, lines.is_empty(), "no data");
        let mut chart = latency_area(root, title, caption, (x_max, y_max), "percentile")?;
        for (i, (label, points)) in lines.into_iter().enumerate() {
            draw_line(&mut chart, title, points, color(i).stroke_width(2), label)?;
        }
        legend_box(&mut chart, title)
    })
}

/// A latency chart's plotting area: x and y in `f64` (milliseconds on y).
pub(super) type LatencyChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The area of a latency line chart on `root`, with its grid drawn: x from 0 to `x_max`,
/// milliseconds from 0 to `y_max`. An x axis named `percentile` gets one label per nine
/// ([`percentile_label`]); any other gets plotters' numbers.
pub(super) fn latency_area<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    caption: String,
    (x_max, y_max): (f64, f64),
    x_desc: &str,
) -> Result<LatencyChart<'a, 'b>, ReportError> {
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .margin_right(36)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(|e| chart_error(title, e))?;
    let mut mesh = chart.configure_mesh();
    if x_desc == "percentile" {
        mesh.x_labels(x_max as usize + 1)
            .x_label_formatter(&|x| percentile_label(*x));
    }
    mesh.x_label_style(("sans-serif", 13))
        .y_label_style(("sans-serif", 13))
        .light_line_style(RGBColor(235, 235, 235))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .x_desc(x_desc)
        .y_desc("latency (ms)")
        .draw()
        .map_err(|e| chart_error(title, e))?;
    Ok(chart)
}

/// One labelled line in `style`, with a short stroke of the same style in the legend.
pub(super) fn draw_line(
    chart: &mut LatencyChart<'_, '_>,
    title: &str,
    points: Vec<(f64, f64)>,
    style: ShapeStyle,
    label: String,
) -> Result<(), ReportError> {
    chart
        .draw_series(LineSeries::new(points, style))
        .map_err(|e| chart_error(title, e))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    Ok(())
}

/// The series' labels in a box at the upper left.
pub(super) fn legend_box<'a, 'b: 'a>(
    chart: &mut LatencyChart<'a, 'b>,
    title: &str,
) -> Result<(), ReportError> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| chart_error(title, e))
}

/// Horizontal bars, one per `(name, count)`, the largest on top.
pub fn bars(title: &str, items: &[(String, u64)]) -> Result<String, ReportError> {
    let mut sorted = items.to_vec();
    sorted.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)));
    let items = sorted.as_slice();
    let n = items.len().max(1);
    let x_max = items.iter().map(|(_, v)| *v).max().unwrap_or(0).max(1);
    let x_max = x_max.saturating_add(x_max / 8).saturating_add(1);
    let height = 80 + 28 * n as u32;
    svg_chart(title, (WIDTH, height), |root| {
        let caption = captioned(title, items.is_empty(), "none");
        let mut chart = ChartBuilder::on(root)
            .caption(caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(150)
            .build_cartesian_2d(0u64..x_max, (0usize..n).into_segmented())
            .map_err(|e| chart_error(title, e))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(WHITE)
            .y_labels(n)
            .y_label_style(("sans-serif", 14))
            .x_label_style(("sans-serif", 13))
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => items
                    .get(*i)
                    .map(|(name, _)| name.clone())
                    .unwrap_or_default(),
                SegmentValue::Last => String::new(),
            })
            .draw()
            .map_err(|e| chart_error(title, e))?;
        chart
            .draw_series(
                plotters::series::Histogram::horizontal(&chart)
                    .style(color(0).filled())
                    .margin(4)
                    .data(items.iter().enumerate().map(|(i, (_, v))| (i, *v))),
            )
            .map_err(|e| chart_error(title, e))?;
        chart
            .draw_series(items.iter().enumerate().map(|(i, (_, v))| {
                Text::new(
                    format!(" {v}"),
                    (*v, SegmentValue::CenterOf(i)),
                    ("sans-serif", 13),
                )
            }))
            .map_err(|e| chart_error(title, e))?;
        Ok(())
    })
}

/// The timeline: one row per [`TimelineKind`], ticks for instants, bars for outages.
pub fn timeline(entries: &[TimelineEntry], run_ms: u64) -> Result<String, ReportError> {
    let shown = &entries[..entries.len().min(MAX_TIMELINE_MARKS)];
    let title = if shown.len() < entries.len() {
        format!(
            "Timeline of cuts, outages, reconnects and resumes (first {} of {})",
            shown.len(),
            entries.len()
        )
    } else {
        "Timeline of cuts, outages, reconnects and resumes".to_owned()
    };
    let title = title.as_str();
    let end_ms = shown
        .iter()
        .map(|e| e.t_ms.saturating_add(e.duration_ms))
        .max()
        .unwrap_or(0)
        .max(run_ms)
        .max(1);
    let x_max = end_ms as f64 / 1000.0;
    let tick = (x_max / 600.0).max(0.0005);
    let rows = TimelineKind::ALL;
    svg_chart(title, (WIDTH, 240), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(90)
            .build_cartesian_2d(0f64..x_max, (0usize..rows.len()).into_segmented())
            .map_err(|e| chart_error(title, e))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(WHITE)
            .y_labels(rows.len())
            .y_label_style(("sans-serif", 14))
            .x_label_style(("sans-serif", 13))
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => rows
                    .get(*i)
                    .map(|k| k.as_str().to_owned())
                    .unwrap_or_default(),
                SegmentValue::Last => String::new(),
            })
            .x_desc("seconds since start")
            .draw()
            .map_err(|e| chart_error(title, e))?;
        chart
            .draw_series(shown.iter().map(|e| {
                let row = rows.iter().position(|k| *k == e.kind).unwrap_or(0);
                let start = e.t_ms as f64 / 1000.0;
                let end = (start + e.duration_ms as f64 / 1000.0).max(start + tick);
                Rectangle::new(
                    [
                        (start, SegmentValue::Exact(row)),
                        (end, SegmentValue::Exact(row + 1)),
                    ],
                    color(row).mix(0.7).filled(),
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
    fn percentile_axis_labels_name_nines() {
        assert_eq!(percentile_label(0.0), "0%");
        assert_eq!(percentile_label(1.0), "90%");
        assert_eq!(percentile_label(2.0), "99%");
        assert_eq!(percentile_label(3.0), "99.9%");
        assert_eq!(percentile_label(4.0), "99.99%");
        assert_eq!(percentile_label(1.5), "");
    }
}
