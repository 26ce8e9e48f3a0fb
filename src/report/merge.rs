//! `tearline report merge DIR…`: the report of a whole plan from its agents' report directories
//! and its proxies' cut and findings logs.
//!
//! Why: a load that outgrows one machine runs as N agents (`tearline load --segment I/N
//! --report-dir DIR`) through one or more proxies; only the merged data says whether the plan
//! passed (a p99 over all agents is not any agent's p99), so thresholds are judged here.
//! Invariants:
//! - Exact: each merged histogram is the sum of the agents' histograms of that name (HdrHistogram
//!   addition, no rounding), so its count is the sum of their counts; counters are summed.
//! - One timeline: every agent's `.hlog` intervals are placed on the plan's clock (second 0 =
//!   the earliest agent's start) and intervals of one tag that fall on the same second are added;
//!   agents started together (`--start-at`) therefore add second by second.
//! - Proxies' cuts (`--cuts-log` lines or `GET /cuts`) become cuts by class and action and dated
//!   timeline entries naming the outcome of the call they cut when an agent's `calls.jsonl`
//!   knows it; proxies' findings (`--findings-log` lines or `GET /findings`) are counted by kind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::Value;

use super::latency::new_histogram;
use super::model::{Counters, FindingExample, Report, RunFacts, TimelineKind};
use super::{ReportError, clock, hlog, json};

/// One agent's report directory, read.
#[derive(Debug)]
pub struct AgentDir {
    /// The directory.
    pub dir: PathBuf,
    /// Its `report.json`.
    pub report: Report,
    /// Its `report.hlog`.
    pub log: hlog::Log,
    /// Outcome by JSON-RPC request id, from `calls.jsonl` (empty when absent).
    pub outcomes: BTreeMap<String, String>,
}

/// Reads `dir/report.json`, `dir/report.hlog` and `dir/calls.jsonl` (optional).
pub fn load_dir(dir: &Path) -> Result<AgentDir, ReportError> {
    let report = json::load(&dir.join("report.json"))?;
    let log = hlog::load(&dir.join("report.hlog"))?;
    let mut outcomes = BTreeMap::new();
    let calls = dir.join("calls.jsonl");
    if calls.exists() {
        for v in json_records(&calls)? {
            let id = v.get("request_id").map(Value::to_string);
            let outcome = v.get("outcome").and_then(Value::as_str);
            if let (Some(id), Some(outcome)) = (id, outcome) {
                outcomes.insert(id, outcome.replace('_', "-"));
            }
        }
    }
    Ok(AgentDir {
        dir: dir.to_owned(),
        report,
        log,
        outcomes,
    })
}

/// The objects of a JSON Lines file or of a file holding one JSON array of objects.
pub fn json_records(path: &Path) -> Result<Vec<Value>, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::io(path, e))?;
    let bad = |source| ReportError::Json {
        path: path.to_owned(),
        source,
    };
    if text.trim_start().starts_with('[') {
        return match serde_json::from_str::<Value>(&text).map_err(bad)? {
            Value::Array(items) => Ok(items),
            other => Ok(vec![other]),
        };
    }
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(bad))
        .collect()
}

/// What the proxies logged.
#[derive(Debug, Default)]
pub struct ProxyLogs {
    /// Cut records (`wire::record::CutRecord` as JSON).
    pub cuts: Vec<Value>,
    /// Findings (`audit::Finding` as JSON).
    pub findings: Vec<Value>,
}

impl ProxyLogs {
    /// Reads every cuts file and findings file.
    pub fn load(cuts: &[PathBuf], findings: &[PathBuf]) -> Result<ProxyLogs, ReportError> {
        let mut logs = ProxyLogs::default();
        for p in cuts {
            logs.cuts.extend(json_records(p)?);
        }
        for p in findings {
            logs.findings.extend(json_records(p)?);
        }
        Ok(logs)
    }
}

fn add(into: &mut Histogram<u64>, h: &Histogram<u64>, tag: &str) -> Result<(), ReportError> {
    into.add(h).map_err(|source| ReportError::Merge {
        tag: tag.to_owned(),
        source,
    })
}

/// The segments of `agents` joined with `+` in order (`1/4+2/4+…`), when every agent has one.
fn segments(agents: &[AgentDir]) -> Option<String> {
    let mut all: Vec<(u32, u32)> = Vec::new();
    for a in agents {
        let s = a.report.facts.segment.as_deref()?;
        for part in s.split('+') {
            let (i, n) = part.split_once('/')?;
            all.push((i.parse().ok()?, n.parse().ok()?));
        }
    }
    all.sort_by_key(|&(i, n)| (n, i));
    let parts: Vec<String> = all.iter().map(|(i, n)| format!("{i}/{n}")).collect();
    Some(parts.join("+"))
}

/// What is wrong with the segments of a merge (`None` when they cover one plan exactly once).
pub fn segment_gaps(agents: &[AgentDir]) -> Option<String> {
    let joined = segments(agents)?;
    let parts: Vec<&str> = joined.split('+').collect();
    let count = parts.first()?.split_once('/')?.1.to_owned();
    let expected: Vec<String> = (1..=count.parse::<u32>().ok()?)
        .map(|i| format!("{i}/{count}"))
        .collect();
    (parts != expected).then(|| {
        format!("segments {joined} do not cover the plan of {count} exactly once (each of 1/{count}..{count}/{count} once)")
    })
}

/// Merges agents' reports and the proxies' logs into one report of the plan.
pub fn merge(agents: &[AgentDir], proxies: &ProxyLogs) -> Result<Report, ReportError> {
    let starts: Vec<f64> = agents
        .iter()
        .map(|a| clock::parse_rfc3339(&a.report.facts.started_at).unwrap_or(0.0))
        .collect();
    let origin = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let origin = if origin.is_finite() { origin } else { 0.0 };
    let end = agents
        .iter()
        .zip(&starts)
        .map(|(a, s)| s + a.report.facts.duration_ms as f64 / 1000.0)
        .fold(origin, f64::max);
    let first = agents.first().map(|a| &a.report.facts);
    let mut facts = match first {
        Some(f) => RunFacts {
            command_line: std::env::args().collect(),
            ..f.clone()
        },
        None => RunFacts::new(
            0,
            "",
            super::Target::User {
                address: String::new(),
                path: String::new(),
            },
        ),
    };
    facts.profile_name = format!("merged: {} agents", agents.len());
    facts.started_at = clock::rfc3339(std::time::UNIX_EPOCH + secs(origin));
    facts.duration_ms = ((end - origin) * 1000.0).round() as u64;
    facts.segment = segments(agents);
    // A merge of runs one of which a signal cut short is itself incomplete.
    facts.interrupted = agents
        .iter()
        .find_map(|a| a.report.facts.interrupted.clone());
    let mut report = Report::new(facts);

    // Counters and histograms per policy; proxy histograms; findings; cuts; timeline.
    let mut policy_histos: BTreeMap<String, BTreeMap<String, Histogram<u64>>> = BTreeMap::new();
    let mut counters: BTreeMap<String, Counters> = BTreeMap::new();
    let mut proxy_histos: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    for (a, start) in agents.iter().zip(&starts) {
        for (policy, outcome) in &a.report.policies {
            let c = counters.entry(policy.clone()).or_default();
            for name in Counters::NAMES {
                let sum = c.get(name).unwrap_or(0) + outcome.counters.get(name).unwrap_or(0);
                c.set(name, sum);
            }
            let hs = policy_histos.entry(policy.clone()).or_default();
            for (name, l) in &outcome.histograms {
                add(
                    hs.entry(name.clone()).or_insert_with(new_histogram),
                    &l.histogram,
                    &l.tag,
                )?;
            }
        }
        for (name, l) in &a.report.proxy_histograms {
            add(
                proxy_histos
                    .entry(name.clone())
                    .or_insert_with(new_histogram),
                &l.histogram,
                &l.tag,
            )?;
        }
        for (kind, g) in &a.report.findings {
            for e in &g.examples {
                report.add_finding(kind, e.clone());
            }
            let extra = g.count.saturating_sub(g.examples.len() as u64);
            if let Some(group) = report.findings.get_mut(kind) {
                group.count = group.count.saturating_add(extra);
            }
        }
        for (class, n) in &a.report.cuts.by_class {
            *report.cuts.by_class.entry(class.clone()).or_default() += n;
        }
        for (action, n) in &a.report.cuts.by_action {
            *report.cuts.by_action.entry(action.clone()).or_default() += n;
        }
        report.cuts.total += a.report.cuts.total;
        let shift = ((start - origin) * 1000.0).round() as u64;
        for e in &a.report.timeline {
            report.add_timeline(e.t_ms + shift, e.kind, e.duration_ms, &e.detail);
        }
    }
    for (policy, c) in counters {
        let hs = policy_histos.remove(&policy).unwrap_or_default();
        report.add_policy(&policy, c, hs);
    }
    report.add_proxy_histograms(proxy_histos);
    add_intervals(&mut report, agents, origin)?;
    add_proxy_logs(&mut report, agents, proxies, origin);
    report.story = agents
        .iter()
        .find(|a| !a.report.story.is_empty())
        .map(|a| a.report.story.clone())
        .unwrap_or_default();
    Ok(report)
}

/// Adds every agent's intervals on the plan's clock, summing one tag's intervals per second.
fn add_intervals(report: &mut Report, agents: &[AgentDir], origin: f64) -> Result<(), ReportError> {
    let mut slots: BTreeMap<(String, u64), (f64, Histogram<u64>)> = BTreeMap::new();
    for a in agents {
        for i in &a.log.intervals {
            let tag = i.tag.clone().unwrap_or_default();
            let second = (i.start - origin).max(0.0).round() as u64;
            let slot = slots
                .entry((tag.clone(), second))
                .or_insert_with(|| (i.length, new_histogram()));
            slot.0 = slot.0.max(i.length);
            add(&mut slot.1, &i.histogram, &tag)?;
        }
    }
    for ((tag, second), (length, h)) in slots {
        report.add_interval(tag, Duration::from_secs(second), secs(length), h);
    }
    Ok(())
}

/// Counts the proxies' cuts and findings and dates the cuts on the plan's clock.
fn add_proxy_logs(report: &mut Report, agents: &[AgentDir], proxies: &ProxyLogs, origin: f64) {
    let origin_ms = (origin * 1000.0).round() as u64;
    for cut in &proxies.cuts {
        let text = |k: &str| cut.get(k).and_then(Value::as_str).map(str::to_owned);
        // An LLM stream's cut is filed under its LLM position (`mid-delta`, …).
        let class = text("llm_position")
            .or_else(|| text("class"))
            .unwrap_or_else(|| "outside-sse".to_owned());
        let action = text("action").unwrap_or_else(|| "unknown".to_owned());
        report.add_cut(&class, &action);
        // A cut record names its stream's request by `rpc_id` (JSON text of the id).
        let ids: Vec<String> = cut
            .pointer("/stream/rpc_id")
            .and_then(Value::as_str)
            .map(|id| vec![id.to_owned()])
            .unwrap_or_default();
        let outcome = ids
            .iter()
            .find_map(|id| agents.iter().find_map(|a| a.outcomes.get(id)))
            .map_or("not traced", String::as_str);
        let t_ms = cut
            .get("time_ms")
            .and_then(Value::as_u64)
            .map_or(0, |t| t.saturating_sub(origin_ms));
        let detail = format!(
            "[{}] {action} at {class}, session {}, request {} -> call {outcome}",
            text("proxy").unwrap_or_default(),
            text("session").unwrap_or_else(|| "-".to_owned()),
            if ids.is_empty() {
                "-".to_owned()
            } else {
                ids.join(",")
            },
        );
        report.add_timeline(t_ms, TimelineKind::Cut, 0, &detail);
    }
    for f in &proxies.findings {
        let Some(kind) = f.get("kind").and_then(Value::as_str) else {
            continue;
        };
        let text = |p: &str| {
            f.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let rpc = strings(f.pointer("/stream/rpc_ids"));
        let ids = strings(f.get("ids"));
        report.add_finding(
            kind,
            FindingExample {
                session: text("/session"),
                stream: crate::audit::finding::label(
                    &text("/stream/request"),
                    &rpc.join(","),
                    &text("/stream/protocol"),
                    f.pointer("/stream/h2_stream").and_then(Value::as_u64),
                ),
                ids,
                detail: text("/detail"),
            },
        );
    }
}

fn secs(x: f64) -> Duration {
    Duration::try_from_secs_f64(x).unwrap_or_default()
}

/// The strings of a JSON array (other items skipped); empty when `v` is absent or no array.
fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
