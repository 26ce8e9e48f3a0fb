//! The files `write_all` produces: JSON against its schema, `.hgrm`, `.hlog`, HTML.

use crate::common;
use std::collections::BTreeMap;
use std::path::Path;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use tearline::report::{self, Summary, hlog, json, write_all};

fn same_counts(a: &Histogram<u64>, b: &Histogram<u64>) -> bool {
    let counts = |h: &Histogram<u64>| -> BTreeMap<u64, u64> {
        h.iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    };
    a.len() == b.len() && counts(a) == counts(b)
}

/// Validates each instance against the report schema with the pinned Python `jsonschema`
/// (Draft 2020-12, the schema's dialect; a real validator nobody here wrote); returns, per
/// instance, its violations.
fn schema_violations(dir: &Path, instances: &[&serde_json::Value]) -> Vec<Vec<String>> {
    let schema_path = dir.join("schema.json");
    std::fs::write(&schema_path, json::SCHEMA).expect("write schema");
    let mut args = vec![schema_path.display().to_string()];
    for (i, v) in instances.iter().enumerate() {
        let p = dir.join(format!("instance-{i}.json"));
        std::fs::write(&p, v.to_string()).expect("write instance");
        args.push(p.display().to_string());
    }
    const CHECK: &str = r#"
import json, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
v = Draft202012Validator(schema)
for path in sys.argv[2:]:
    errors = [f"{e.message} at /{'/'.join(map(str, e.absolute_path))}" for e in v.iter_errors(json.load(open(path)))]
    print(json.dumps(errors))
"#;
    let out = common::peers::python()
        .arg("-c")
        .arg(CHECK)
        .args(&args)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "schema check failed to run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON list per instance"))
        .collect()
}

#[test]
fn json_validates_against_the_schema_and_round_trips() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original = common::report::report(1);
    let written = write_all(&original, dir.path()).expect("write_all");
    let text = std::fs::read_to_string(&written.json).expect("report.json");
    let instance: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let mut broken = instance.clone();
    broken["policies"]["naive"]["counters"]["silent-loss"] = serde_json::json!(-1);
    // A run a signal cut short records it in its facts.
    let mut cut_short = original.clone();
    cut_short.facts.interrupted = Some(tearline::report::Interruption {
        signal: "SIGTERM".into(),
        at_ms: 1234,
        during: Some("strict".into()),
        not_run: vec!["naive".into()],
    });
    let cut_short_json: serde_json::Value =
        serde_json::from_str(&json::to_json(&cut_short).expect("serialises")).expect("JSON");
    let mut bad_signal = cut_short_json.clone();
    bad_signal["facts"]["interrupted"]["signal"] = serde_json::json!("SIGKILL");
    let verdicts = schema_violations(
        dir.path(),
        &[&instance, &broken, &cut_short_json, &bad_signal],
    );
    assert!(
        verdicts[0].is_empty(),
        "schema violations: {:#?}",
        verdicts[0]
    );
    assert!(!verdicts[1].is_empty(), "schema rejects a negative count");
    assert!(verdicts[2].is_empty(), "{:#?}", verdicts[2]);
    assert!(
        !verdicts[3].is_empty(),
        "only SIGINT and SIGTERM interrupt a run"
    );
    let back = json::from_json(&cut_short_json.to_string(), dir.path()).expect("loads");
    assert_eq!(back, cut_short, "the interruption round-trips");

    let loaded = json::load(&written.json).expect("loads");
    assert_eq!(loaded, original, "JSON round trip is lossless");
    assert_eq!(json::to_json(&loaded).expect("serialises"), text);
}

#[test]
fn json_with_another_schema_version_is_refused_by_version() {
    let mut value = serde_json::to_value(common::report::report(1)).expect("serialises");
    value["schema_version"] = serde_json::json!(99);
    let err = json::from_json(&value.to_string(), Path::new("r.json")).expect_err("refused");
    assert!(err.to_string().contains("schema_version 99"), "{err}");
}

#[test]
fn hgrm_percentiles_are_monotone_and_footer_matches_histogram() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = common::report::report(1);
    let written = write_all(&r, dir.path()).expect("write_all");
    assert_eq!(written.hgrm.len(), r.latencies().len());
    let call = &r.policies["strict"].histograms["call"];
    let text = std::fs::read_to_string(dir.path().join(&call.hgrm)).expect("hgrm exists");
    let h = &call.histogram;

    let mut lines = text.lines();
    let header = lines.next().expect("header");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
    );
    assert_eq!(lines.next(), Some(""));
    let (mut last_value, mut last_pct, mut last_count, mut rows) = (0.0f64, 0.0f64, 0u64, 0);
    let mut footer = Vec::new();
    for line in lines {
        if line.starts_with('#') {
            footer.push(line);
            continue;
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols.len(), 4, "{line}");
        let value: f64 = cols[0].parse().expect("value");
        let pct: f64 = cols[1].parse().expect("percentile");
        let count: u64 = cols[2].parse().expect("count");
        assert!(
            value >= last_value && pct >= last_pct && count >= last_count,
            "{line}"
        );
        (last_value, last_pct, last_count) = (value, pct, count);
        rows += 1;
    }
    assert!(rows > 20, "a full distribution, got {rows} rows");
    assert_eq!(last_pct, 1.0);
    assert_eq!(last_count, h.len());
    assert!((last_value - h.max() as f64 / 1000.0).abs() < 0.0011);

    let number = |line: &str, key: &str| -> f64 {
        let rest = &line[line.find(key).expect("key") + key.len()..];
        let rest = rest.trim_start_matches([' ', '=']);
        let end = rest.find([',', ']']).expect("end");
        rest[..end].trim().parse().expect("number")
    };
    assert_eq!(footer.len(), 3, "{footer:?}");
    assert!((number(footer[0], "Mean") - h.mean() / 1000.0).abs() < 0.0006);
    assert!((number(footer[0], "StdDeviation") - h.stdev() / 1000.0).abs() < 0.0006);
    assert!((number(footer[1], "Max") - h.max() as f64 / 1000.0).abs() < 0.0006);
    assert_eq!(number(footer[1], "Total count") as u64, h.len());
    assert_eq!(number(footer[2], "Buckets") as u8, h.buckets());
    assert_eq!(number(footer[2], "SubBuckets"), 2048.0);
}

#[test]
fn hlog_reads_back_with_the_crate_iterator_and_merge_equals_recording_both() {
    let (a_dir, b_dir) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let (a, b) = (common::report::report(1), common::report::report(500));
    let a_files = write_all(&a, a_dir.path()).expect("write a");
    let b_files = write_all(&b, b_dir.path()).expect("write b");

    // The crate's own iterator reads every interval, tagged, and each decodes.
    let bytes = std::fs::read(&a_files.hlog).expect("hlog");
    let mut tags = Vec::new();
    for entry in IntervalLogIterator::new(&bytes) {
        if let LogEntry::Interval(i) = entry.expect("parses") {
            tags.push(i.tag().expect("tagged").as_str().to_owned());
            let decoded = report::latency::decode(i.encoded_histogram()).expect("decodes");
            let source = a
                .latencies()
                .into_iter()
                .find(|(_, l)| Some(l.tag.as_str()) == tags.last().map(String::as_str))
                .expect("tag names a histogram");
            assert!(same_counts(&decoded, &source.1.histogram), "{tags:?}");
        }
    }
    assert_eq!(tags.len(), a.latencies().len());
    assert!(tags.contains(&"strict.call".to_owned()), "{tags:?}");
    assert!(
        tags.contains(&"proxy.client-reconnect".to_owned()),
        "{tags:?}"
    );

    let logs = [
        hlog::load(&a_files.hlog).expect("a"),
        hlog::load(&b_files.hlog).expect("b"),
    ];
    let merged = hlog::merge(&logs).expect("merge");
    let totals = hlog::parse(&merged, Path::new("merged"))
        .expect("parses")
        .totals()
        .expect("adds");
    for ((label, la), (_, lb)) in a.latencies().into_iter().zip(b.latencies()) {
        let mut both = la.histogram.clone();
        both.add(&lb.histogram).expect("adds");
        let got = totals.get(&la.tag).expect("tag survives merge");
        assert!(
            same_counts(got, &both),
            "{label}: merged log != recording both"
        );
        assert_eq!(Summary::of(got), Summary::of(&both));
    }
}

#[test]
fn html_embeds_the_svg_charts_escapes_text_and_has_no_script_or_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let written = write_all(&common::report::report(1), dir.path()).expect("write_all");
    let html = std::fs::read_to_string(&written.html).expect("html");
    // call + first-event curves, proxy curves, cuts bars, cut timeline, findings bars,
    // timeline (no per-second intervals: no latency-over-time chart).
    assert_eq!(html.matches("<svg").count(), 7, "seven charts");
    assert_eq!(html.matches("</svg>").count(), 7);
    assert!(html.contains("class=\"headline"), "headline verdict");
    let lower = html.to_lowercase();
    assert!(!lower.contains("<script"), "no scripts");
    assert!(
        lower.contains("&lt;script&gt;alert(1)"),
        "profile text escaped"
    );
    assert!(
        lower.contains("&lt;b&gt;&amp;&lt;/b&gt;"),
        "finding detail escaped"
    );
    for external in [
        "src=", "href=", "url(", "@import", "<link", "<iframe", "<img",
    ] {
        assert!(!lower.contains(external), "found {external}");
    }
    for word in [
        "mid-value",
        "torn-cut",
        "strict",
        "naive",
        "99.9%",
        "Last-Event-ID: 41",
    ] {
        assert!(html.contains(word), "missing {word}");
    }
}

#[test]
fn summary_lists_cuts_findings_outcomes_and_percentiles_with_units() {
    let dir = tempfile::tempdir().expect("tempdir");
    let written = write_all(&common::report::report(1), dir.path()).expect("write_all");
    let text = std::fs::read_to_string(&written.summary).expect("summary.txt");
    assert!(text.contains("seed 42"), "{text}");
    assert!(text.contains("Cuts (48 total)"), "{text}");
    let lost = text
        .lines()
        .find(|l| l.trim_start().starts_with("silent-loss"))
        .expect("silent-loss row");
    assert_eq!(
        lost.split_whitespace().collect::<Vec<_>>(),
        ["silent-loss", "12", "0"]
    );
    let call = text
        .lines()
        .find(|l| l.trim_start().starts_with("strict.call"))
        .expect("latency row");
    let cells: Vec<&str> = call.split_whitespace().skip(2).collect();
    assert_eq!(cells.len(), 5, "p50 p90 p99 p99.9 max: {call}");
    for cell in cells {
        let number = cell.trim_end_matches(['µ', 'm', 's']);
        assert!(number.len() < cell.len(), "unit missing in {cell}");
        number.parse::<f64>().expect("a number before the unit");
    }
}

#[test]
fn default_out_dir_is_under_tearline_report_with_a_utc_stamp() {
    let dir = report::default_out_dir();
    assert!(dir.starts_with("tearline-report"));
    let stamp = dir.file_name().and_then(|s| s.to_str()).expect("stamp");
    assert_eq!(stamp.len(), 16, "{stamp}");
    assert!(
        stamp.ends_with('Z') && stamp.as_bytes()[8] == b'T',
        "{stamp}"
    );
}

#[test]
fn unproven_resends_are_noted_apart_from_loss_in_summary_and_html() {
    let mut report = common::report::report(1);
    let note = "not counted as loss";
    let summary = tearline::report::summary::render(&report);
    assert!(!summary.contains(note), "{summary}");
    report.add_finding(
        "unproven-resend",
        tearline::report::FindingExample {
            session: "s1".into(),
            ..Default::default()
        },
    );
    let summary = tearline::report::summary::render(&report);
    assert!(summary.contains(note), "{summary}");
    assert!(
        summary.contains("unproven-resend: 1 cut call(s)"),
        "{summary}"
    );
    let html = tearline::report::html::render(&report).expect("renders");
    assert!(html.contains(note), "no note in the HTML");
}

#[test]
fn report_html_puts_the_findings_and_outcomes_before_any_chart() {
    let html = tearline::report::html::render(&common::report::report(1)).expect("renders");
    let findings = html.find("Proxy findings").expect("a findings section");
    let outcomes = html
        .find("Client outcomes per policy")
        .expect("an outcomes section");
    let first_chart = html.find("<svg").expect("charts");
    assert!(
        findings < first_chart,
        "the findings come before every chart"
    );
    // Before the clients' outcomes, only the findings' own chart (counts by kind).
    assert_eq!(html[..outcomes].matches("<svg").count(), 1);
    let latency = html.find("<h2>Latency</h2>").expect("a latency section");
    assert!(outcomes < latency, "latency charts after the outcomes");
}
