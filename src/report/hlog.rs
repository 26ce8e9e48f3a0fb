//! `.hlog` interval logs: writing a report's histograms, reading logs, merging logs.
//!
//! Why: the interval log is HdrHistogram's exchange format between machines and tools
//! (`HistogramLogProcessor`, the crate's `IntervalLogIterator`); a test that outgrows one
//! machine merges the logs of every load machine into one with `tearline report merge`.
//! Invariants: histograms are written V2 deflate, base64, one line per interval, tagged
//! `policy.name` or `proxy.name`, in start-time order; the header carries the Java writer's
//! version comment, `StartTime` and `BaseTime` (the run's start, so interval timestamps are
//! seconds since the run started), the legend line, and `MaxValueDivisor` 1000 (the
//! `Interval_Max` column is in ms; encoded values stay µs). Merging keeps every interval of
//! every input (lossless: the per-tag sum of the merged log equals the per-tag sum of the
//! inputs), re-based onto the earliest input's base time.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};

use super::latency::{self, safe_name};
use super::model::Report;
use super::{ReportError, clock};

/// The legend line HdrHistogram's Java `HistogramLogWriter` writes.
const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n";

/// One interval read from a log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogInterval {
    /// Its tag, if any.
    pub tag: Option<String>,
    /// Start in seconds since the epoch (or since an unknown origin when the log has neither
    /// `BaseTime` nor `StartTime` and uses small timestamps).
    pub start: f64,
    /// Length in seconds.
    pub length: f64,
    /// The values.
    pub histogram: Histogram<u64>,
}

/// A parsed interval log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Log {
    /// The first `StartTime` header, seconds since the epoch.
    pub start_time: Option<f64>,
    /// Every interval, in file order.
    pub intervals: Vec<LogInterval>,
}

impl Log {
    /// The sum of all intervals per tag (untagged intervals under `""`).
    pub fn totals(&self) -> Result<BTreeMap<String, Histogram<u64>>, ReportError> {
        let mut totals: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
        for i in &self.intervals {
            let tag = i.tag.clone().unwrap_or_default();
            let total = totals
                .entry(tag.clone())
                .or_insert_with(latency::new_histogram);
            total
                .add(&i.histogram)
                .map_err(|source| ReportError::Merge { tag, source })?;
        }
        Ok(totals)
    }
}

/// `x` seconds as a duration; negative, NaN or out-of-range values become 0.
fn secs(x: f64) -> Duration {
    Duration::try_from_secs_f64(x).unwrap_or_default()
}

/// Writes `intervals` (start seconds since `base`) as a log whose origin is `base` seconds
/// since the epoch.
fn write_log(
    comment: &str,
    start_time: f64,
    base: f64,
    intervals: &[(Option<String>, f64, f64, &Histogram<u64>)],
) -> Result<Vec<u8>, ReportError> {
    let as_time = |x: f64| {
        std::time::UNIX_EPOCH
            .checked_add(secs(x))
            .unwrap_or(std::time::UNIX_EPOCH)
    };
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    IntervalLogWriterBuilder::new()
        .add_comment(comment)
        .add_comment("[Histogram log format version 1.3]")
        .with_start_time(as_time(start_time))
        .with_base_time(as_time(base))
        .begin_log_with(&mut out, &mut serializer)
        .map_err(|e| ReportError::io(Path::new("<hlog>"), e))?;
    out.extend_from_slice(LEGEND.as_bytes());
    let mut writer = IntervalLogWriterBuilder::new()
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut out, &mut serializer)
        .map_err(|e| ReportError::io(Path::new("<hlog>"), e))?;
    for (tag, start, length, h) in intervals {
        let safe = tag.as_deref().map(safe_name);
        writer
            .write_histogram(
                h,
                secs(*start),
                secs(*length),
                safe.as_deref().and_then(Tag::new),
            )
            .map_err(ReportError::HlogWrite)?;
    }
    Ok(out)
}

/// The `report.hlog` of `report`: its interval histograms (one per second per client histogram
/// for `replay` and `load --report-dir`), or, when it has none, one interval per histogram
/// covering the whole run.
pub fn render(report: &Report) -> Result<Vec<u8>, ReportError> {
    let start = clock::parse_rfc3339(&report.facts.started_at).unwrap_or(0.0);
    let whole = report.facts.duration_ms as f64 / 1000.0;
    let mut intervals: Vec<(Option<String>, f64, f64, &Histogram<u64>)> =
        if report.intervals.is_empty() {
            report
                .latencies()
                .into_iter()
                .map(|(_, l)| (Some(l.tag.clone()), 0.0, whole, &l.histogram))
                .collect()
        } else {
            report
                .intervals
                .iter()
                .map(|i| {
                    let (s, l) = (i.start.as_secs_f64(), i.length.as_secs_f64());
                    (Some(i.tag.clone()), s, l, &i.histogram)
                })
                .collect()
        };
    intervals.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let comment = format!(
        "tearline {} interval log; values in microseconds; seed {}",
        report.facts.tool_version, report.facts.seed
    );
    write_log(&comment, start, start, &intervals)
}

/// Parses an interval log; `path` only labels errors.
pub fn parse(bytes: &[u8], path: &Path) -> Result<Log, ReportError> {
    const YEAR_SECS: f64 = 365.25 * 86_400.0;
    let mut log = Log::default();
    let mut base: Option<f64> = None;
    for entry in IntervalLogIterator::new(bytes) {
        let entry = entry.map_err(|e| match e {
            hdrhistogram::serialization::interval_log::LogIteratorError::ParseError { offset } => {
                ReportError::HlogParse {
                    path: path.to_owned(),
                    offset,
                }
            }
        })?;
        match entry {
            LogEntry::StartTime(t) => {
                log.start_time.get_or_insert(t.as_secs_f64());
            }
            LogEntry::BaseTime(t) => base = Some(t.as_secs_f64()),
            LogEntry::Interval(i) => {
                let ts = i.start_timestamp().as_secs_f64();
                // Java HistogramLogReader's rule: with BaseTime, timestamps are deltas; with
                // only StartTime, they are deltas if more than a year before it.
                let origin = match (base, log.start_time) {
                    (Some(b), _) => b,
                    (None, Some(s)) if ts < s - YEAR_SECS => s,
                    _ => 0.0,
                };
                let tag = i.tag().map(|t| t.as_str().to_owned());
                let histogram = latency::decode(i.encoded_histogram()).map_err(|source| {
                    ReportError::Histogram {
                        name: format!("{} ({})", tag.as_deref().unwrap_or(""), path.display()),
                        source,
                    }
                })?;
                log.intervals.push(LogInterval {
                    tag,
                    start: origin + ts,
                    length: i.duration().as_secs_f64(),
                    histogram,
                });
            }
        }
    }
    Ok(log)
}

/// Reads and parses the log at `path`.
pub fn load(path: &Path) -> Result<Log, ReportError> {
    let bytes = std::fs::read(path).map_err(|e| ReportError::io(path, e))?;
    parse(&bytes, path)
}

/// Merges `logs` into one log text keeping every interval and tag, ordered by start time.
pub fn merge(logs: &[Log]) -> Result<Vec<u8>, ReportError> {
    let all: Vec<&LogInterval> = logs.iter().flat_map(|l| &l.intervals).collect();
    let base = all
        .iter()
        .map(|i| i.start)
        .min_by(f64::total_cmp)
        .unwrap_or(0.0);
    let start_time = logs
        .iter()
        .filter_map(|l| l.start_time)
        .min_by(f64::total_cmp)
        .unwrap_or(base);
    let mut intervals: Vec<(Option<String>, f64, f64, &Histogram<u64>)> = all
        .iter()
        .map(|i| (i.tag.clone(), i.start - base, i.length, &i.histogram))
        .collect();
    intervals.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let comment = format!(
        "tearline {} merged interval log of {} inputs; values in microseconds",
        env!("CARGO_PKG_VERSION"),
        logs.len()
    );
    write_log(&comment, start_time, base, &intervals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[u64]) -> Histogram<u64> {
        let mut h = latency::new_histogram();
        for v in values {
            h.record(*v).expect("auto-resizing histogram records");
        }
        h
    }

    #[test]
    fn merge_rebases_logs_of_different_start_times_onto_the_earliest() {
        let (a, b) = (histogram(&[100, 200]), histogram(&[300]));
        let log_a =
            write_log("a", 1_000.0, 1_000.0, &[(Some("x".into()), 2.0, 1.0, &a)]).expect("writes");
        let log_b =
            write_log("b", 1_010.0, 1_010.0, &[(Some("x".into()), 0.5, 1.0, &b)]).expect("writes");
        let logs = [
            parse(&log_a, Path::new("a")).expect("a parses"),
            parse(&log_b, Path::new("b")).expect("b parses"),
        ];
        assert_eq!(logs[0].intervals[0].start, 1_002.0);
        assert_eq!(logs[1].intervals[0].start, 1_010.5);
        let merged = parse(&merge(&logs).expect("merges"), Path::new("m")).expect("parses");
        assert_eq!(merged.start_time, Some(1_000.0));
        let starts: Vec<f64> = merged.intervals.iter().map(|i| i.start).collect();
        assert_eq!(
            starts,
            [1_002.0, 1_010.5],
            "absolute times survive the merge"
        );
        let x = &merged.totals().expect("adds")["x"];
        assert_eq!((x.len(), x.min(), x.max()), (3, 100, 300));
    }

    #[test]
    fn garbage_is_a_parse_error_with_its_offset() {
        let err = parse(b"#ok\nnot a log line\n", Path::new("g.hlog")).expect_err("garbage");
        assert!(
            matches!(err, ReportError::HlogParse { offset: 4, .. }),
            "{err:?}"
        );
    }
}
