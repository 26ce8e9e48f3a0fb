//! A synthetic report shared by the report tests: two policies, proxy histograms, cuts,
//! findings (with markup in their text, to test escaping), a timeline and a story.
#![allow(dead_code)]

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use tearline::report::{Counters, FindingExample, Report, RunFacts, Target, TimelineKind};

/// A deterministic spread of latencies in µs around `base_us`, with a tail.
pub fn latencies(seed: u64, n: usize, base_us: u64) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(3).expect("valid precision");
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let jitter = (x >> 33) % base_us.max(1);
        let tail = if i % 97 == 0 { base_us * 20 } else { 0 };
        h.record(base_us + jitter + tail)
            .expect("auto-resizing histogram");
    }
    h
}

/// The synthetic report; `seed` varies the histogram values.
pub fn report(seed: u64) -> Report {
    let mut facts = RunFacts::new(
        42,
        "reset-250ms",
        Target::Lab {
            address: "127.0.0.1:40000".into(),
            server_mode: "ring=64 on-evicted=fresh".into(),
        },
    );
    facts.duration_ms = 12_345;
    facts.profile_text = "[[cut]]\nat = \"random\" # <script>alert(1)</script>\n".into();
    facts.command_line = vec![
        "tearline".into(),
        "replay".into(),
        "--seed".into(),
        "42".into(),
    ];
    let mut r = Report::new(facts);
    for _ in 0..40 {
        r.add_cut("mid-value", "reset");
    }
    for _ in 0..7 {
        r.add_cut("before-dispatch", "reset");
    }
    r.add_cut("after-id", "fin");
    for i in 0..48 {
        r.add_finding(
            "torn-cut",
            FindingExample {
                session: format!("s{i}"),
                stream: "1".into(),
                ids: vec!["42".into()],
                detail: "cut in data line 1 of 3 after 1000 bytes <b>&</b>".into(),
            },
        );
    }
    r.set_findings("cursor-ahead", 12, vec![FindingExample::default()]);
    r.set_findings("fresh-stream", 12, vec![]);
    let strict = Counters {
        calls: 100,
        ok: 100,
        torn_cut: 24,
        resumes: 24,
        ..Counters::default()
    };
    let naive = Counters {
        calls: 100,
        ok: 88,
        silent_loss: 12,
        resumes: 24,
        ..Counters::default()
    };
    let hs = |s: u64| {
        BTreeMap::from([
            ("call".to_owned(), latencies(seed + s, 2_000, 180_000)),
            (
                "first-event".to_owned(),
                latencies(seed + s + 1, 2_000, 2_000),
            ),
        ])
    };
    r.add_policy("strict", strict, hs(1));
    r.add_policy("naive", naive, hs(2));
    r.add_proxy_histogram("client-reconnect", latencies(seed + 9, 48, 250_000));
    r.add_proxy_histogram("server-replay", Histogram::new(3).expect("valid precision"));
    for i in 0..48u64 {
        r.add_timeline(i * 250, TimelineKind::Cut, 0, &format!("s{i} mid-value"));
        r.add_timeline(i * 250, TimelineKind::Outage, 250, "reset, 250 ms");
        r.add_timeline(i * 250 + 251, TimelineKind::Reconnect, 0, "");
        r.add_timeline(i * 250 + 252, TimelineKind::Resume, 0, "Last-Event-ID: 42");
    }
    r.story = vec![
        "session s7, stream 1: event id 42 carried 3 data lines".into(),
        "the reset fell in data line 1 after 1000 of 1398 bytes".into(),
        "strict client discarded the partial event and resumed with Last-Event-ID: 41".into(),
    ];
    r
}
