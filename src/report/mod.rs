//! Reports: terminal summary, `report.json`, `.hgrm` files, a `.hlog` interval log, a
//! self-contained `report.html`, and `--fail-on` thresholds.
//!
//! Why: a chaos run is only useful if its outcome can be read by a person (summary, HTML), by a
//! machine (JSON with a versioned schema, see `SCHEMA.md` and `report.schema.json` beside this
//! file), by HdrHistogram's own tools (`.hgrm`, `.hlog`), and by CI (thresholds, exit 99).
//! Invariants: every output is rendered from one [`Report`]; [`write_all`] writes every file or
//! returns the first error, and never writes outside the directory it is given; nothing here
//! reaches the network (the HTML embeds its SVG charts and has no scripts).
//!
//! Exit convention of commands that evaluate thresholds: 0 when every threshold holds, 99 when
//! at least one fails (k6's convention), 2 on any error (unreadable input, malformed threshold).
//!
//! Filling a report (what `tearline replay` does) and writing every file:
//! ```no_run
//! use std::collections::BTreeMap;
//! use hdrhistogram::Histogram;
//! use tearline::report::{self, Counters, FindingExample, Report, RunFacts, Target, TimelineKind};
//!
//! let target = Target::Lab { address: "127.0.0.1:40000".into(), server_mode: "ring=64".into() };
//! let mut facts = RunFacts::new(42, "reset-250ms", target);
//! facts.duration_ms = 41_000;
//! let mut r = Report::new(facts);
//! r.add_cut("mid-value", "reset");
//! r.add_finding("torn-cut", FindingExample { session: "s1".into(), ..Default::default() });
//! let counters = Counters::from_pairs([("calls", 10), ("ok", 9), ("silent_loss", 1)])?;
//! let histograms: BTreeMap<&str, Histogram<u64>> = BTreeMap::new();
//! r.add_policy("naive", counters, histograms);
//! r.add_timeline(1_250, TimelineKind::Cut, 0, "s1: mid-value, data line 1, byte 1000");
//! r.story.push("event id 42: the reset fell in data line 1 of 3".into());
//! let written = report::write_all(&r, &report::default_out_dir())?;
//! println!("report: {}", written.dir.display());
//! let thresholds = vec!["naive.silent-loss>0".parse::<report::Threshold>()?];
//! let exit = tearline::cmd::report::show(&r, &thresholds)?; // prints the summary; 99 if one fails
//! # let _ = exit;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod charts;
pub mod clock;
pub mod counters;
pub mod headline;
pub mod hgrm;
pub mod hlog;
pub mod html;
pub mod json;
pub mod latency;
pub mod merge;
pub mod model;
pub mod names;
pub mod summary;
mod threshold_parse;
pub mod thresholds;
pub mod thresholds_names;
pub mod time_charts;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub use latency::{Latency, Summary};
pub use model::{
    Counters, Cuts, FactCounts, FindingExample, FindingGroup, Interruption, Interval,
    MAX_RECONCILE_NOTES, PolicyOutcome, Reconciliation, Report, RunFacts, SCHEMA_VERSION, Target,
    TimelineEntry, TimelineKind,
};
pub use thresholds::{Threshold, ThresholdError, Verdict};

/// Exit code when every threshold holds.
pub const EXIT_OK: u8 = 0;
/// Exit code when at least one threshold fails (k6's convention).
pub const EXIT_THRESHOLD_FAILED: u8 = 99;
/// Exit code on errors.
pub const EXIT_ERROR: u8 = 2;

/// Errors of building, writing or reading reports.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file or directory could not be read or written.
    #[error("cannot access {}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `report.json` could not be produced or parsed.
    #[error("{}: invalid report JSON", path.display())]
    Json {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The JSON has a schema version this build does not read.
    #[error("{}: schema_version {found} is not supported (this build reads {SCHEMA_VERSION})", path.display())]
    SchemaVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u64,
    },
    /// A histogram could not be encoded or decoded.
    #[error("histogram {name}")]
    Histogram {
        /// Tag or name of the histogram.
        name: String,
        /// The cause.
        #[source]
        source: latency::CodecError,
    },
    /// An interval log could not be parsed.
    #[error("{}: interval log does not parse at byte {offset}", path.display())]
    HlogParse {
        /// The file.
        path: PathBuf,
        /// Byte offset of the first unparsable line.
        offset: usize,
    },
    /// An interval log could not be written.
    #[error("interval log cannot be written")]
    HlogWrite(
        #[source]
        hdrhistogram::serialization::interval_log::IntervalLogWriterError<
            hdrhistogram::serialization::V2DeflateSerializeError,
        >,
    ),
    /// Two histograms with one tag could not be added.
    #[error("histograms tagged {tag} cannot be merged")]
    Merge {
        /// The tag.
        tag: String,
        /// The cause.
        #[source]
        source: hdrhistogram::AdditionError,
    },
    /// A chart could not be drawn.
    #[error("chart {chart}: {message}")]
    Chart {
        /// Which chart.
        chart: String,
        /// The drawing error, as text (plotters' error type is generic over the backend).
        message: String,
    },
    /// `report merge` was given a mix of directories and files, or options only directories
    /// take.
    #[error(
        "report merge takes either report directories (written by `tearline load --report-dir`) or .hlog files, not both; --cuts, --findings and --fail-on need directories"
    )]
    MergeInputs,
    /// A threshold is malformed or names an unknown metric.
    #[error(transparent)]
    Threshold(#[from] ThresholdError),
}

impl ReportError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> ReportError {
        ReportError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// Paths of the files [`write_all`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The directory.
    pub dir: PathBuf,
    /// `report.json`.
    pub json: PathBuf,
    /// `report.html`.
    pub html: PathBuf,
    /// `report.hlog`.
    pub hlog: PathBuf,
    /// `summary.txt` (the terminal summary).
    pub summary: PathBuf,
    /// One `.hgrm` per histogram.
    pub hgrm: Vec<PathBuf>,
}

/// `./tearline-report/<UTC timestamp>`, the default output directory.
pub fn default_out_dir() -> PathBuf {
    PathBuf::from("tearline-report").join(clock::compact(SystemTime::now()))
}

/// `name` reduced to one safe path component (no separators, not `.` or `..`).
fn file_name(name: &str) -> String {
    let safe = latency::safe_name(name);
    if safe.chars().all(|c| c == '.') {
        format!("_{safe}")
    } else {
        safe
    }
}

/// Writes every report file into `dir` (created with its parents if missing): `report.json`,
/// `summary.txt`, one `.hgrm` per histogram, `report.hlog`, `report.html`.
pub fn write_all(report: &Report, dir: &Path) -> Result<Written, ReportError> {
    std::fs::create_dir_all(dir).map_err(|e| ReportError::io(dir, e))?;
    let write = |name: &str, bytes: &[u8]| -> Result<PathBuf, ReportError> {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|e| ReportError::io(&path, e))?;
        Ok(path)
    };
    let json = write("report.json", json::to_json(report)?.as_bytes())?;
    let summary = write("summary.txt", summary::render(report).as_bytes())?;
    let mut hgrm = Vec::new();
    for (_, latency) in report.latencies() {
        let text = hgrm::render(&latency.histogram, hgrm::WRK2_VALUE_UNIT_RATIO);
        hgrm.push(write(&file_name(&latency.hgrm), text.as_bytes())?);
    }
    let hlog = write("report.hlog", &hlog::render(report)?)?;
    let html = write("report.html", html::render(report)?.as_bytes())?;
    Ok(Written {
        dir: dir.to_owned(),
        json,
        html,
        hlog,
        summary,
        hgrm,
    })
}
