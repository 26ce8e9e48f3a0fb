//! Beyond one machine: a plan split into execution segments run by separate agents against the
//! lab, each agent's report directory, and `tearline report merge` of those directories through
//! the real binary (exact histogram sums, counters, timelines, thresholds judged on the merged
//! data with exit 99).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use tearline::lab::{LabConfig, serve};
use tearline::load::segment::Segment;
use tearline::load::{self, LoadConfig, LoadOutcome, Stop, Target};
use tearline::report::{self, Counters, Report, RunFacts, hlog, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Runs the binary with `args`, killing it if it has not finished within 60 s.
fn tearline(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tearline {args:?} did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

const PLAN_SESSIONS: usize = 8;
const PLAN_CALLS: u64 = 80;
const PLAN_RATE: f64 = 40.0;

async fn agent(target: Target, segment: Segment, start_at: SystemTime) -> LoadOutcome {
    let mut cfg = LoadConfig::new(
        target,
        "blob",
        serde_json::json!({"size": 2048, "lines": 3}),
    );
    cfg.sessions = PLAN_SESSIONS;
    cfg.stop = Stop::Calls(PLAN_CALLS);
    cfg.rate = Some(PLAN_RATE);
    cfg.call_timeout = Duration::from_secs(10);
    cfg.segment = segment;
    cfg.start_at = Some(start_at);
    tokio::time::timeout(
        Duration::from_secs(30),
        load::run(cfg, CancellationToken::new()),
    )
    .await
    .expect("agent finishes")
    .expect("lab accepts sessions")
}

fn histogram_counts(r: &Report) -> Vec<(String, u64)> {
    r.latencies()
        .into_iter()
        .map(|(label, l)| (label, l.histogram.len()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_segments_run_the_plan_exactly_and_merge_into_its_report() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(listener, LabConfig::default(), shutdown.clone()));
    let target = Target::parse(&format!("http://127.0.0.1:{port}/mcp")).expect("url");

    // Four agents of one plan, sharing a start second, as four machines would.
    let start_at = SystemTime::now() + Duration::from_millis(500);
    let segments: Vec<Segment> = (1..=4)
        .map(|i| Segment::new(i, 4).expect("valid"))
        .collect();
    let runs = segments
        .iter()
        .map(|s| tokio::spawn(agent(target.clone(), *s, start_at)));
    let mut outcomes = Vec::new();
    for r in runs {
        outcomes.push(r.await.expect("agent task"));
    }
    shutdown.cancel();

    // The union of the segments is the plan: calls and sessions add up, labels never overlap.
    let calls: u64 = outcomes.iter().map(|o| o.counters.calls).sum();
    assert_eq!(calls, PLAN_CALLS, "the agents' calls add up to the plan");
    for o in &outcomes {
        assert_eq!(o.counters.calls, PLAN_CALLS / 4, "segment {}", o.segment);
        assert_eq!(
            o.counters.ok, o.counters.calls,
            "the lab answers every call"
        );
    }
    let mut sessions = BTreeSet::new();
    let mut labels = BTreeSet::new();
    for o in &outcomes {
        for g in o.sessions.clone() {
            assert!(sessions.insert(g), "session {g} run by two agents");
            assert!(labels.insert(Segment::session_label(g)));
            assert_eq!(
                Segment::session_of_request(Segment::request_id_base(g) + 1),
                g
            );
        }
    }
    assert_eq!(
        sessions,
        (0..PLAN_SESSIONS).collect(),
        "every session of the plan ran once"
    );

    // Each agent writes its report directory; the merge is exact.
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut dirs: Vec<PathBuf> = Vec::new();
    for o in &outcomes {
        let dir = tmp.path().join(format!("agent-{}", o.segment.index));
        tearline::cmd::load::agent::write(std::slice::from_ref(o), &target, 7, None, None, &dir)
            .expect("agent report");
        dirs.push(dir);
    }
    let agents: Vec<Report> = dirs
        .iter()
        .map(|d| json::load(&d.join("report.json")).expect("agent report.json"))
        .collect();
    for (a, o) in agents.iter().zip(&outcomes) {
        assert_eq!(
            a.facts.segment.as_deref(),
            Some(o.segment.to_string().as_str())
        );
        assert_eq!(a.facts.seed, 7);
        // At least one interval per second of the run, per histogram tag.
        let log =
            hlog::load(&dirs[o.segment.index as usize - 1].join("report.hlog")).expect("hlog");
        let seconds = (a.facts.duration_ms as f64 / 1000.0).ceil() as usize;
        assert!(
            seconds >= 2,
            "the paced plan lasts about 2 s, not {} ms",
            a.facts.duration_ms
        );
        let per_tag = log
            .intervals
            .iter()
            .filter(|i| i.tag.as_deref() == Some("strict.call"))
            .count();
        assert!(
            per_tag >= seconds,
            "{per_tag} intervals for a run of {seconds} s"
        );
        let total = &log.totals().expect("decodes")["strict.call"];
        assert_eq!(
            total.len(),
            a.policies["strict"].histograms["call"].histogram.len()
        );
    }

    let merged_dir = tmp.path().join("merged");
    let mut args = vec!["report", "merge"];
    args.extend(dirs.iter().map(|d| path(d)));
    args.extend(["-o", path(&merged_dir), "--fail-on", "calls!=80"]);
    let out = tearline(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let merged = json::load(&merged_dir.join("report.json")).expect("merged report.json");
    assert_eq!(merged.facts.segment.as_deref(), Some("1/4+2/4+3/4+4/4"));
    assert_eq!(merged.counter_total("calls"), Some(PLAN_CALLS));
    for (label, count) in histogram_counts(&merged) {
        let sum: u64 = agents
            .iter()
            .flat_map(histogram_counts)
            .filter(|(l, _)| *l == label)
            .map(|(_, c)| c)
            .sum();
        assert_eq!(count, sum, "merged {label} holds every agent's samples");
    }
    // The merged log adds the agents' seconds: one interval per second and tag, same totals.
    let log = hlog::load(&merged_dir.join("report.hlog")).expect("merged hlog");
    let starts: BTreeSet<u64> = log
        .intervals
        .iter()
        .filter(|i| i.tag.as_deref() == Some("strict.call"))
        .map(|i| (i.start * 1000.0).round() as u64)
        .collect();
    let n = log
        .intervals
        .iter()
        .filter(|i| i.tag.as_deref() == Some("strict.call"))
        .count();
    assert_eq!(starts.len(), n, "one merged interval per second");
    assert_eq!(
        log.totals().expect("decodes")["strict.call"].len(),
        merged.policies["strict"].histograms["call"].histogram.len()
    );
    let html = std::fs::read_to_string(merged_dir.join("report.html")).expect("html");
    assert!(
        html.contains("class=\"headline good\""),
        "headline verdict on top"
    );
    assert!(
        html.contains("call latency over time"),
        "latency over time chart"
    );
    assert!(!html.contains("<script"), "the page stays script-free");
}

/// A synthetic agent report: `calls` calls at 1 ms of which `slow` took 200 ms and `lost` were
/// lost silently, started at `start` (Unix seconds).
fn synthetic(calls: u64, slow: u64, lost: u64, segment: &str, start: u64) -> Report {
    let mut facts = RunFacts::new(
        7,
        "none (load agent)",
        report::Target::User {
            address: "127.0.0.1:1".into(),
            path: "/mcp".into(),
        },
    );
    facts.started_at = report::clock::rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(start));
    facts.duration_ms = 3_000;
    facts.segment = Some(segment.to_owned());
    let mut r = Report::new(facts);
    let mut h: Histogram<u64> = report::latency::new_histogram();
    h.record_n(1_000, calls - slow).expect("records");
    h.record_n(200_000, slow).expect("records");
    // One interval per second: the slow calls in second 1, the rest spread over 0 and 2.
    let mut seconds = [
        report::latency::new_histogram(),
        report::latency::new_histogram(),
        report::latency::new_histogram(),
    ];
    let fast = calls - slow;
    seconds[0].record_n(1_000, fast / 2).expect("records");
    seconds[2]
        .record_n(1_000, fast - fast / 2)
        .expect("records");
    seconds[1].record_n(200_000, slow).expect("records");
    for (s, sh) in seconds.into_iter().enumerate() {
        r.add_interval(
            Report::policy_tag("strict", "call"),
            Duration::from_secs(s as u64),
            Duration::from_secs(1),
            sh,
        );
    }
    let c = Counters::from_pairs([
        ("calls", calls),
        ("ok", calls - lost),
        ("silent-loss", lost),
    ])
    .expect("known counters");
    r.add_policy("strict", c, [("call", h)]);
    r
}

#[test]
fn thresholds_are_judged_on_the_merged_data_with_exit_99() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Four agents, each losing one call silently and each passing `silent-loss>2` alone; agent
    // 4 alone fails `p99(call)>100ms` (2 slow calls of 50), the plan as a whole does not
    // (2 slow of 200).
    let plan = [(50, 0, 1), (50, 0, 1), (50, 0, 1), (50, 2, 1)];
    let mut dirs = Vec::new();
    for (k, (calls, slow, lost)) in plan.into_iter().enumerate() {
        let dir = tmp.path().join(format!("agent-{}", k + 1));
        let r = synthetic(calls, slow, lost, &format!("{}/4", k + 1), 1_700_000_000);
        report::write_all(&r, &dir).expect("write");
        dirs.push(dir);
    }
    for (k, d) in dirs.iter().enumerate() {
        let out = tearline(&["report", "show", path(d), "--fail-on", "silent-loss>2"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "agent {} alone passes: {}",
            k + 1,
            text(&out)
        );
    }
    let out = tearline(&[
        "report",
        "show",
        path(&dirs[3]),
        "--fail-on",
        "p99(call)>100ms",
    ]);
    assert_eq!(
        out.status.code(),
        Some(99),
        "agent 4 alone fails its p99: {}",
        text(&out)
    );

    let merged = tmp.path().join("merged");
    let mut args = vec!["report", "merge"];
    args.extend(dirs.iter().map(|d| path(d)));
    args.extend([
        "-o",
        path(&merged),
        "--fail-on",
        "silent-loss>2",
        "--fail-on",
        "p99(call)>100ms",
    ]);
    let out = tearline(&args);
    let printed = text(&out);
    assert_eq!(
        out.status.code(),
        Some(99),
        "the plan lost 4 calls: {printed}"
    );
    assert!(printed.contains("silent-loss>2"), "{printed}");
    let r = json::load(&merged.join("report.json")).expect("merged");
    assert_eq!(r.counter_total("silent-loss"), Some(4));
    let h = &r.policies["strict"].histograms["call"].histogram;
    assert_eq!(h.len(), 200);
    assert!(
        h.value_at_quantile(0.99) < 100_000,
        "the plan's p99 is fast"
    );
    // Agents started together: their seconds add up, one merged interval per second.
    let log = hlog::load(&merged.join("report.hlog")).expect("merged hlog");
    let counts: Vec<(f64, u64)> = log
        .intervals
        .iter()
        .map(|i| (i.start - log.intervals[0].start, i.histogram.len()))
        .collect();
    assert_eq!(counts, [(0.0, 99), (1.0, 2), (2.0, 99)]);
}

#[test]
fn merging_agents_started_apart_keeps_both_timelines() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    report::write_all(&synthetic(10, 1, 0, "1/2", 1_700_000_000), &a).expect("write a");
    report::write_all(&synthetic(10, 1, 0, "2/2", 1_700_000_010), &b).expect("write b");
    // A proxy's cut log: one cut 10.5 s after the first agent started.
    let cuts = tmp.path().join("cuts.jsonl");
    let cut = serde_json::json!({
        "time_ms": 1_700_000_010_500u64, "proxy": "edge", "conn": 3, "direction": "server-to-client",
        "session": "s-1", "stream": {"method": "POST", "path": "/mcp", "rpc_id": "4294967297"},
        "raw_offset": 900, "payload_offset": 800, "class": "mid-value", "event_index": 2,
        "pending_id": "7", "last_committed_id": "6", "torn_bytes": 100, "data_line": 1,
        "action": "reset", "by": "sse_cut"
    });
    std::fs::write(&cuts, format!("{cut}\n")).expect("cuts log");
    let merged = tmp.path().join("m");
    let out = tearline(&[
        "report",
        "merge",
        path(&a),
        path(&b),
        "-o",
        path(&merged),
        "--cuts",
        path(&cuts),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let log = hlog::load(&merged.join("report.hlog")).expect("hlog");
    let starts: Vec<f64> = log
        .intervals
        .iter()
        .map(|i| i.start - 1_700_000_000.0)
        .collect();
    assert_eq!(
        starts,
        [0.0, 1.0, 2.0, 10.0, 11.0, 12.0],
        "both agents' seconds, on one clock"
    );
    let r = json::load(&merged.join("report.json")).expect("merged");
    assert_eq!(r.facts.duration_ms, 13_000);
    assert_eq!((r.cuts.total, r.cuts.by_class["mid-value"]), (1, 1));
    let cut = &r.timeline[0];
    assert_eq!(cut.t_ms, 10_500);
    assert!(cut.detail.contains("reset at mid-value"), "{}", cut.detail);
    assert!(cut.detail.contains("request 4294967297"), "{}", cut.detail);
    let html = std::fs::read_to_string(merged.join("report.html")).expect("html");
    assert!(html.contains("Cut timeline"), "cut timeline chart");
}

#[test]
fn rehearsal_script_runs_two_agents_through_two_proxies_and_merges() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out_dir = tmp.path().join("rehearsal");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/rehearse.sh");
    let mut child = Command::new("bash")
        .arg(&script)
        .env("AGENTS", "2")
        .env("SESSIONS", "8")
        .env("CALLS", "40")
        .env("SIZE", "8192")
        .env("FAIL_ON", "calls!=40;silent-loss>0")
        .env("OUT", &out_dir)
        .env("TEARLINE", env!("CARGO_BIN_EXE_tearline"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash runs the script");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("bench/rehearse.sh did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let merged = json::load(&out_dir.join("merged/report.json")).expect("merged report");
    assert_eq!(merged.facts.segment.as_deref(), Some("1/2+2/2"));
    assert_eq!(merged.counter_total("calls"), Some(40));
    // Every cut both proxies logged is in the merged report, dated on the plan's clock.
    let logged: usize = (1..=2)
        .map(|p| {
            std::fs::read_to_string(out_dir.join(format!("proxy-{p}/cuts.jsonl")))
                .expect("cuts log")
                .lines()
                .count()
        })
        .sum();
    assert_eq!(merged.cuts.total, logged as u64);
    let timeline_cuts = merged
        .timeline
        .iter()
        .filter(|e| e.kind == report::TimelineKind::Cut)
        .count();
    assert_eq!(timeline_cuts, logged);
    // Cuts of POST streams name the outcome of the call they cut, from the agents' calls.jsonl.
    assert!(
        logged == 0
            || merged
                .timeline
                .iter()
                .any(|e| e.detail.contains("-> call ok")),
        "{:?}",
        merged.timeline
    );
    let printed = text(&out);
    assert!(
        printed.contains("agent-1") && printed.contains("merged"),
        "{printed}"
    );
}
