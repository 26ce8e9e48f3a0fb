//! The report model: everything one run (`tearline replay`, or a proxy + load run) learned.
//!
//! Why: one value that every output (terminal summary, `report.json`, `.hgrm`, `.hlog`, HTML)
//! and every `--fail-on` threshold reads, so they cannot disagree.
//! Invariants: `schema_version` is [`SCHEMA_VERSION`] for reports built here and is checked on
//! load; histogram values are microseconds; counters, finding kinds, cut classes and actions use
//! the kebab-case vocabulary of the design note (the same words thresholds use); maps are
//! ordered (`BTreeMap`) so every output is deterministic for a given run; a finding kind keeps
//! at most [`MAX_EXAMPLES`] examples while its count keeps counting.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub use super::counters::Counters;
use super::latency::{Latency, safe_name};

/// Version of the `report.json` layout; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 4;

/// Examples kept per finding kind.
pub const MAX_EXAMPLES: usize = 3;

/// What was tested and how: enough to rerun it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunFacts {
    /// `tearline`.
    pub tool: String,
    /// The crate version that produced the report.
    pub tool_version: String,
    /// The run's seed (every connection's RNG derives from it).
    pub seed: u64,
    /// Profile name, e.g. `reset-250ms`.
    pub profile_name: String,
    /// The profile's TOML text as used.
    pub profile_text: String,
    /// What the proxy fronted.
    pub target: Target,
    /// Start of the run, RFC 3339 UTC.
    pub started_at: String,
    /// Wall-clock length of the run in milliseconds.
    pub duration_ms: u64,
    /// The command line, one argument per element.
    pub command_line: Vec<String>,
    /// The execution segment of a load agent (`2/8`), or the segments a merged report joins
    /// (`1/4+2/4+3/4+4/4`); absent for a run of the whole plan on one machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<String>,
    /// Set when a signal stopped the run before it was done: what ran and what did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interruption>,
    /// The run id an LLM load run names its requests with (`tl-llm-<run id>-…` keys), 16 hex
    /// digits; absent for other runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// How a run was cut short by a signal (SIGINT, SIGTERM): the report holds what was measured
/// up to then; calls in flight at the interrupt are in no counter and no finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interruption {
    /// `SIGINT` or `SIGTERM`.
    pub signal: String,
    /// Milliseconds after the start of the run when it came.
    pub at_ms: u64,
    /// The phase (client policy) that was running, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during: Option<String>,
    /// Phases that never ran, in run order.
    #[serde(default)]
    pub not_run: Vec<String>,
}

impl Interruption {
    /// One line for summaries: "interrupted by SIGINT at 3.2 s during naive; not run: retry".
    pub fn line(&self) -> String {
        let mut s = format!(
            "INTERRUPTED by {} at {:.1} s",
            self.signal,
            self.at_ms as f64 / 1000.0
        );
        if let Some(p) = &self.during {
            s.push_str(&format!(" during {p}"));
        }
        if self.not_run.is_empty() {
            s.push_str("; every phase started");
        } else {
            s.push_str(&format!("; phases not run: {}", self.not_run.join(", ")));
        }
        s.push_str(
            "; calls in flight at the interrupt are in no counter and their judgements were not \
             made",
        );
        s
    }
}

impl RunFacts {
    /// Facts for a run starting now, with this process's command line and the crate version;
    /// `duration_ms` starts at 0 and `profile_text` empty (set the fields directly).
    pub fn new(seed: u64, profile_name: impl Into<String>, target: Target) -> RunFacts {
        RunFacts {
            tool: "tearline".to_owned(),
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            seed,
            profile_name: profile_name.into(),
            profile_text: String::new(),
            target,
            started_at: super::clock::rfc3339(SystemTime::now()),
            duration_ms: 0,
            command_line: std::env::args().collect(),
            segment: None,
            interrupted: None,
            run_id: None,
        }
    }
}

/// The server under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Target {
    /// tearline's own lab server.
    Lab {
        /// Its listening address.
        address: String,
        /// Its mode, e.g. `ring=64 on-evicted=fresh`.
        server_mode: String,
    },
    /// The user's own server (`--upstream`).
    User {
        /// `HOST:PORT`.
        address: String,
        /// The MCP endpoint path.
        path: String,
    },
}

/// Cuts the proxy made, counted two ways.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cuts {
    /// Total cuts.
    pub total: u64,
    /// Count per SSE position class (`mid-value`, `after-id`, …).
    pub by_class: BTreeMap<String, u64>,
    /// Count per action (`reset`, `fin`, `clean-end`, `stall`).
    pub by_action: BTreeMap<String, u64>,
}

/// Evidence of one finding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FindingExample {
    /// `Mcp-Session-Id` (or the connection when there is none).
    pub session: String,
    /// Stream within the session (request id or connection index).
    pub stream: String,
    /// Event ids involved (cursor, last complete id, …).
    pub ids: Vec<String>,
    /// One line: what was seen, with raw offsets.
    pub detail: String,
}

/// All findings of one kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FindingGroup {
    /// How many.
    pub count: u64,
    /// The first few (at most [`MAX_EXAMPLES`]).
    pub examples: Vec<FindingExample>,
}

/// What one client policy (`strict`, `naive`, …) experienced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyOutcome {
    /// Outcome counters.
    pub counters: Counters,
    /// Latency histograms by name (`call`, `first-event`, …).
    pub histograms: BTreeMap<String, Latency>,
}

/// One fact both the client and the audit count, for one policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactCounts {
    /// The client's counter.
    pub client: u64,
    /// The audit's findings of that kind.
    pub audit: u64,
    /// Calls whose two counts differ.
    pub calls_differ: u64,
}

/// The client's and the audit's counts of the same facts for one policy's phase, reconciled
/// call by call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reconciliation {
    /// Per fact ([`Counters::SHARED`]): both counts over the whole phase.
    pub facts: BTreeMap<String, FactCounts>,
    /// Calls compared one by one (the client keeps a bounded number of calls' facts).
    pub calls_compared: u64,
    /// Why counts differ: one line per call that differs (at most [`MAX_RECONCILE_NOTES`]),
    /// then one per audit finding that names no call of the client.
    pub notes: Vec<String>,
}

/// Notes kept per policy in [`Reconciliation::notes`].
pub const MAX_RECONCILE_NOTES: usize = 50;

/// What a timeline entry marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimelineKind {
    /// The proxy cut a connection.
    Cut,
    /// The proxy refused or dropped connections for a while.
    Outage,
    /// A client opened a new connection after a cut.
    Reconnect,
    /// A client resumed a stream with `Last-Event-ID`.
    Resume,
}

impl TimelineKind {
    /// Every kind, in chart row order.
    pub const ALL: [TimelineKind; 4] = [
        TimelineKind::Cut,
        TimelineKind::Outage,
        TimelineKind::Reconnect,
        TimelineKind::Resume,
    ];

    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            TimelineKind::Cut => "cut",
            TimelineKind::Outage => "outage",
            TimelineKind::Reconnect => "reconnect",
            TimelineKind::Resume => "resume",
        }
    }
}

/// One dated event of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineEntry {
    /// Milliseconds since the run started.
    pub t_ms: u64,
    /// What happened.
    pub kind: TimelineKind,
    /// How long it lasted (0 for instants; an outage's length).
    pub duration_ms: u64,
    /// One line of detail (session, class, offset, …).
    pub detail: String,
}

/// One interval histogram for `report.hlog` (optional; without any, the log holds one interval
/// per histogram covering the whole run).
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// The hlog tag (see [`Report::policy_tag`], [`Report::proxy_tag`]).
    pub tag: String,
    /// Start, measured from the run's start.
    pub start: Duration,
    /// Length.
    pub length: Duration,
    /// Values recorded in the interval (µs).
    pub histogram: Histogram<u64>,
}

/// Everything a run reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Run facts.
    pub facts: RunFacts,
    /// Cuts by class and action.
    pub cuts: Cuts,
    /// The proxy's audit findings by kind (`torn-cut`, `cursor-ahead`, …).
    pub findings: BTreeMap<String, FindingGroup>,
    /// Client outcomes per policy.
    pub policies: BTreeMap<String, PolicyOutcome>,
    /// Histograms measured by the proxy (`client-reconnect`, `server-replay`, …).
    pub proxy_histograms: BTreeMap<String, Latency>,
    /// Dated cuts, outages, reconnects and resumes, in time order.
    pub timeline: Vec<TimelineEntry>,
    /// One affected session told step by step.
    pub story: Vec<String>,
    /// Per policy: the client's and the audit's counts of the facts both see
    /// ([`Counters::SHARED`]), and why they differ, call by call (`replay` only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reconciliation: BTreeMap<String, Reconciliation>,
    /// Interval histograms for `report.hlog` (not part of the JSON).
    #[serde(skip)]
    pub intervals: Vec<Interval>,
}

impl Report {
    /// An empty report for `facts`.
    pub fn new(facts: RunFacts) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            facts,
            cuts: Cuts::default(),
            findings: BTreeMap::new(),
            policies: BTreeMap::new(),
            proxy_histograms: BTreeMap::new(),
            timeline: Vec::new(),
            story: Vec::new(),
            reconciliation: BTreeMap::new(),
            intervals: Vec::new(),
        }
    }

    /// The hlog tag of a policy histogram: `policy.name`, made tag-safe.
    pub fn policy_tag(policy: &str, name: &str) -> String {
        format!("{}.{}", safe_name(policy), safe_name(name))
    }

    /// The hlog tag of a proxy histogram: `proxy.name`, made tag-safe.
    pub fn proxy_tag(name: &str) -> String {
        format!("proxy.{}", safe_name(name))
    }

    /// Counts one cut of `class` done by `action`.
    pub fn add_cut(&mut self, class: &str, action: &str) {
        self.cuts.total = self.cuts.total.saturating_add(1);
        let class = self.cuts.by_class.entry(class.to_owned()).or_default();
        *class = class.saturating_add(1);
        let action = self.cuts.by_action.entry(action.to_owned()).or_default();
        *action = action.saturating_add(1);
    }

    /// Sets the cut counts from maps (the total is the sum by class).
    pub fn set_cuts(&mut self, by_class: BTreeMap<String, u64>, by_action: BTreeMap<String, u64>) {
        self.cuts.total = by_class.values().fold(0u64, |a, b| a.saturating_add(*b));
        self.cuts.by_class = by_class;
        self.cuts.by_action = by_action;
    }

    /// Counts one finding of `kind`, keeping `example` if fewer than [`MAX_EXAMPLES`] are kept.
    pub fn add_finding(&mut self, kind: &str, example: FindingExample) {
        let group = self.findings.entry(kind.to_owned()).or_default();
        group.count = group.count.saturating_add(1);
        if group.examples.len() < MAX_EXAMPLES {
            group.examples.push(example);
        }
    }

    /// Sets the findings of `kind` at once (examples beyond [`MAX_EXAMPLES`] are dropped).
    pub fn set_findings(&mut self, kind: &str, count: u64, mut examples: Vec<FindingExample>) {
        examples.truncate(MAX_EXAMPLES);
        self.findings
            .insert(kind.to_owned(), FindingGroup { count, examples });
    }

    /// Adds (or replaces) the outcome of a client policy; `histograms` is any map or list of
    /// (name, µs histogram), e.g. a `BTreeMap<String, Histogram<u64>>` or
    /// `BTreeMap<&str, Histogram<u64>>`.
    pub fn add_policy<K: AsRef<str>>(
        &mut self,
        name: &str,
        counters: Counters,
        histograms: impl IntoIterator<Item = (K, Histogram<u64>)>,
    ) {
        let histograms = histograms
            .into_iter()
            .map(|(h, histogram)| {
                let h = h.as_ref().to_owned();
                let tag = Report::policy_tag(name, &h);
                let latency = Latency {
                    histogram,
                    hgrm: format!("{tag}.hgrm"),
                    tag,
                };
                (h, latency)
            })
            .collect();
        self.policies.insert(
            name.to_owned(),
            PolicyOutcome {
                counters,
                histograms,
            },
        );
    }

    /// Adds (or replaces) a proxy histogram.
    pub fn add_proxy_histogram(&mut self, name: &str, histogram: Histogram<u64>) {
        let tag = Report::proxy_tag(name);
        let latency = Latency {
            histogram,
            hgrm: format!("{tag}.hgrm"),
            tag,
        };
        self.proxy_histograms.insert(name.to_owned(), latency);
    }

    /// Adds (or replaces) several proxy histograms, e.g. the audit's snapshot.
    pub fn add_proxy_histograms<K: AsRef<str>>(
        &mut self,
        histograms: impl IntoIterator<Item = (K, Histogram<u64>)>,
    ) {
        for (name, histogram) in histograms {
            self.add_proxy_histogram(name.as_ref(), histogram);
        }
    }

    /// Adds an interval histogram for `report.hlog`.
    pub fn add_interval(
        &mut self,
        tag: String,
        start: Duration,
        length: Duration,
        histogram: Histogram<u64>,
    ) {
        self.intervals.push(Interval {
            tag,
            start,
            length,
            histogram,
        });
    }

    /// Appends a timeline entry, keeping the timeline in time order.
    pub fn add_timeline(&mut self, t_ms: u64, kind: TimelineKind, duration_ms: u64, detail: &str) {
        let entry = TimelineEntry {
            t_ms,
            kind,
            duration_ms,
            detail: detail.to_owned(),
        };
        let at = self.timeline.partition_point(|e| e.t_ms <= t_ms);
        self.timeline.insert(at, entry);
    }

    /// The client counters as a table: the header (`counter`, then one column per policy) and
    /// one row per counter in [`super::counters::Counters::NAMES`] order (0 where a policy
    /// lacks it).
    pub fn policy_counter_rows(&self) -> (Vec<&str>, Vec<Vec<String>>) {
        let mut header = vec!["counter"];
        header.extend(self.policies.keys().map(String::as_str));
        let rows = super::counters::Counters::NAMES
            .iter()
            .map(|name| {
                let mut row = vec![(*name).to_owned()];
                row.extend(
                    self.policies
                        .values()
                        .map(|p| p.counters.get(name).unwrap_or(0).to_string()),
                );
                row
            })
            .collect();
        (header, rows)
    }

    /// Every histogram with its display label (`strict.call`, `proxy.first-event`), policies
    /// first.
    pub fn latencies(&self) -> Vec<(String, &Latency)> {
        let mut all = Vec::new();
        for (policy, outcome) in &self.policies {
            for (name, latency) in &outcome.histograms {
                all.push((format!("{policy}.{name}"), latency));
            }
        }
        for (name, latency) in &self.proxy_histograms {
            all.push((format!("proxy.{name}"), latency));
        }
        all
    }

    /// The sum of counter `name` over all policies.
    pub fn counter_total(&self, name: &str) -> Option<u64> {
        self.policies.values().try_fold(0u64, |sum, p| {
            Some(sum.saturating_add(p.counters.get(name)?))
        })
    }

    /// How many findings of `kind` (0 when none).
    pub fn finding_count(&self, kind: &str) -> u64 {
        self.findings.get(kind).map_or(0, |g| g.count)
    }
}
