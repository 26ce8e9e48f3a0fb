//! The auditor's bookkeeping: bounded memory, forgetting after the grace period, the JSONL
//! findings log, the latency histograms and the summary.

use crate::common::audit::{Eol, Wire, call, event, progress, result};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tearline::audit::{AuditConfig, FindingKind};
use tearline::vocab::CutAction;

fn ev(id: &str, data: &str) -> String {
    event(Eol::Lf, Some(id), None, &[data])
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_streams_leave_no_growth_after_grace() {
    let cfg = AuditConfig {
        grace: Duration::from_secs(10),
        ..AuditConfig::default()
    };
    let mut w = Wire::with(cfg);
    for round in 0..2u64 {
        for i in 0..5_000u64 {
            let conn = round * 10_000 + i;
            let session = format!("s-{conn}");
            w.post(conn, 0, Some(&session), &call("1", "search"));
            w.sse_ok(conn, 0);
            let body = ev(&format!("{conn}-1"), &progress(1))
                + &ev(&format!("{conn}-2"), &result("1", "ok"));
            w.stream_clean(conn, 0, &body);
            w.rec(tearline::wire::Observation::ConnClosed { conn });
        }
        assert_eq!(w.auditor.tracked_streams(), 5_000);
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(w.auditor.tracked_streams(), 0, "round {round}");
        assert_eq!(w.auditor.tracked_sessions(), 0, "round {round}");
        assert_eq!(w.auditor.remembered_events(), 0);
    }
    assert_eq!(w.kinds(), Vec::<FindingKind>::new());
}

#[tokio::test(start_paused = true)]
async fn ids_kept_per_stream_are_capped_and_evicted_cursor_is_unknown() {
    let cfg = AuditConfig {
        ids_per_stream: 64,
        ..AuditConfig::default()
    };
    let mut w = Wire::with(cfg);
    w.post(1, 0, Some("s"), &call("1", "search"));
    w.sse_ok(1, 0);
    let mut body = String::new();
    for i in 0..1_000u64 {
        body += &ev(&i.to_string(), &progress(i));
    }
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    assert_eq!(w.auditor.remembered_events(), 64);
    w.resume(2, 0, Some("s"), "10");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &ev("1000", &result("1", "ok")));
    assert_eq!(w.kinds(), vec![FindingKind::Unknown]);
    let detail = &w.auditor.findings()[0].detail;
    assert!(
        detail.contains("the newest 64 while it is open"),
        "{detail}"
    );
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn findings_log_has_one_json_line_per_finding_with_evidence() {
    let mut w = Wire::new();
    let out = Shared::default();
    w.auditor.log_to(Box::new(out.clone()));
    w.post(1, 0, Some("s"), &call("7", "search"));
    w.sse_ok(1, 0);
    let pre = ev("41", &progress(41));
    let torn = event(Eol::Lf, Some("42"), None, &["{\"a\":", "1}"]);
    let cut = pre.len() + torn.find("data").unwrap_or(0) + 8;
    let offset = w.deliver(1, 0, &(pre + &torn), Some(cut), CutAction::Reset);
    w.resume(2, 0, Some("s"), "42");
    w.response(2, 0, 410, "text/plain", None);
    // The log is written by its own thread: wait until it has caught up.
    w.auditor.flush_log();
    let text =
        String::from_utf8(out.0.lock().map(|v| v.clone()).unwrap_or_default()).unwrap_or_default();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or(serde_json::Value::Null))
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0]["kind"], "torn-cut");
    assert_eq!(lines[0]["session"], "s");
    assert_eq!(lines[0]["stream"]["request"], "POST /mcp");
    assert_eq!(lines[0]["stream"]["rpc_ids"][0], "7");
    assert_eq!(lines[0]["raw_offsets"][0], offset);
    assert_eq!(lines[0]["cut_class"], "mid-value");
    assert_eq!(lines[0]["data_line"], 1);
    assert_eq!(lines[1]["kind"], "cursor-ahead");
    assert_eq!(lines[2]["kind"], "explicit-loss");
    assert_eq!(w.auditor.counts().get("explicit-loss"), Some(&1));
}

#[tokio::test(start_paused = true)]
async fn log_file_is_created_and_unwritable_path_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let w = Wire::new();
    let path = dir.path().join("findings.jsonl");
    assert!(w.auditor.log_to_file(&path).is_ok());
    assert!(path.exists());
    let bad = dir.path().join("no-such-dir").join("f.jsonl");
    let err = w
        .auditor
        .log_to_file(&bad)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("no-such-dir"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn histograms_measure_reconnect_replay_first_event_and_final_response() {
    let mut w = Wire::new();
    w.post(1, 0, Some("s"), &call("7", "search"));
    w.sse_ok(1, 0);
    tokio::time::advance(Duration::from_millis(5)).await;
    let body = ev("1", &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    tokio::time::advance(Duration::from_millis(250)).await;
    w.resume(2, 0, Some("s"), "1");
    w.sse_ok(2, 0);
    tokio::time::advance(Duration::from_millis(20)).await;
    w.stream_clean(2, 0, &ev("2", &result("7", "ok")));
    let h = w.auditor.histograms();
    let near = |name: &str, ms: u64| {
        let v = h[name].value_at_quantile(1.0);
        assert!(
            h[name].equivalent(v, ms * 1000),
            "{name}: {v} µs, expected {ms} ms"
        );
    };
    near("client-reconnect", 250);
    near("server-replay", 20);
    assert_eq!(h["first-event"].len(), 2);
    near("final-response", 275);
    let summary = w.auditor.summary();
    assert!(summary.contains("replay-exact"), "{summary}");
    assert!(summary.contains("client-reconnect"), "{summary}");
}
