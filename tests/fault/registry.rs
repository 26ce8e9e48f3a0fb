//! The registry: probability and seeded determinism of instantiation, the Toxiproxy
//! constructor, outage schedules, and the precise errors of bad definitions.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tearline::fault::keys::FaultDef;
use tearline::fault::outage::OutageSchedule;
use tearline::fault::registry::{Built, KINDS, build, from_toxiproxy};
use tearline::fault::{Chunk, FaultFactory, Plan, conn_rng};
use tearline::vocab::Direction;
use tearline::vocab::OutageMode;
use tokio::time::Instant;

fn def(pairs: &[(&str, toml::Value)]) -> FaultDef {
    FaultDef::from_pairs(pairs.iter().map(|(k, v)| (*k, v.clone())))
}

fn conn(pairs: &[(&str, toml::Value)]) -> Arc<dyn FaultFactory> {
    match build(&def(pairs)) {
        Ok(Built::Conn(f)) => f,
        other => panic!("expected a connection fault, got {other:?}"),
    }
}

fn s(v: &str) -> toml::Value {
    toml::Value::String(v.into())
}

fn i(v: i64) -> toml::Value {
    toml::Value::Integer(v)
}

fn f(v: f64) -> toml::Value {
    toml::Value::Float(v)
}

/// For connections `0..n` of proxy `proxy` under `seed`: `None` if the fault does not fire,
/// else the stream offset of its cut (chunks of 1,000 bytes).
fn decisions(factory: &Arc<dyn FaultFactory>, seed: u64, n: u64) -> Vec<Option<u64>> {
    let buf = vec![0u8; 1000];
    let now = Instant::now();
    (0..n)
        .map(|index| {
            let mut rng = conn_rng(seed, "api", index);
            let mut fault = factory.instantiate(&mut rng, now)?;
            let mut plan = Plan::default();
            for k in 0..10_000u64 {
                plan.reset(buf.len(), now);
                let chunk = Chunk {
                    bytes: &buf,
                    offset: k * 1000,
                    arrived: now,
                    direction: Direction::Downstream,
                    positions: None,
                };
                fault.on_chunk(&chunk, &mut plan, &mut rng);
                if let Some(c) = plan.cut() {
                    return Some(k * 1000 + c.at as u64);
                }
            }
            Some(u64::MAX)
        })
        .collect()
}

fn reset_in_range(probability: f64) -> Arc<dyn FaultFactory> {
    conn(&[
        ("kind", s("reset")),
        ("probability", f(probability)),
        ("range", toml::Value::Array(vec![i(0), i(4_194_304)])),
    ])
}

#[test]
fn probability_zero_never_instantiates() {
    let factory = reset_in_range(0.0);
    assert!(decisions(&factory, 7, 1000).iter().all(Option::is_none));
}

#[test]
fn probability_point_three_fires_on_thirty_percent_of_connections() {
    let factory = reset_in_range(0.3);
    let fired = decisions(&factory, 7, 1000)
        .iter()
        .filter(|d| d.is_some())
        .count();
    assert!((250..=350).contains(&fired), "fired on {fired} of 1000");
}

#[test]
fn same_seed_gives_same_decisions_and_different_seeds_differ() {
    let factory = reset_in_range(0.5);
    let a = decisions(&factory, 42, 200);
    let b = decisions(&factory, 42, 200);
    let c = decisions(&factory, 43, 200);
    assert_eq!(a, b, "same seed, same connections fire at the same offsets");
    assert_ne!(a, c, "a different seed decides differently");
    let which = |d: &[Option<u64>]| d.iter().map(Option::is_some).collect::<Vec<_>>();
    assert_ne!(
        which(&a),
        which(&c),
        "different seeds pick different connections"
    );
}

#[test]
fn every_listed_kind_is_accepted_by_build() {
    let minimal: &[(&str, &[(&str, toml::Value)])] = &[
        ("latency", &[("latency_ms", i(1))]),
        ("bandwidth", &[("rate", i(1))]),
        ("slicer", &[("average_size", i(1))]),
        ("slow_close", &[("delay_ms", i(1))]),
        ("timeout", &[("timeout_ms", i(0))]),
        ("reset", &[("bytes", i(1))]),
        ("limit_data", &[("bytes", i(1))]),
        ("stall", &[("at_byte", i(1)), ("duration_ms", i(1))]),
        ("outage", &[("duration_ms", i(250))]),
        (
            "sse_cut",
            &[
                ("at", s("any-byte")),
                ("range", toml::Value::Array(vec![i(0), i(9)])),
                ("action", s("reset")),
            ],
        ),
        ("idle", &[("idle_ms", i(1))]),
        ("buffer", &[("flush_ms", i(1))]),
        ("goaway", &[("after_ms", i(1))]),
        ("hold_headers", &[]),
        ("flow_stall", &[("stall_ms", i(1))]),
        ("refuse_streams", &[("max_concurrent", i(1))]),
    ];
    assert_eq!(KINDS.len(), minimal.len());
    for (info, (kind, keys)) in KINDS.iter().zip(minimal) {
        assert_eq!(info.name, *kind);
        let mut pairs = vec![("kind", s(kind))];
        pairs.extend(keys.iter().cloned());
        let built = build(&def(&pairs)).unwrap_or_else(|e| panic!("{kind}: {e}"));
        if let Built::Conn(c) = built {
            assert_eq!(c.kind(), *kind);
            assert_eq!(
                c.direction(),
                Direction::Downstream,
                "downstream by default"
            );
        }
    }
}

#[test]
fn build_errors_name_the_key_and_what_is_allowed() {
    let cases: Vec<(Vec<(&str, toml::Value)>, &str)> = vec![
        (
            vec![("kind", s("latncy"))],
            "unknown fault kind 'latncy'; known: latency, bandwidth, slicer, slow_close, timeout, reset, limit_data, stall, outage, sse_cut, idle, buffer, goaway, hold_headers, flow_stall, refuse_streams",
        ),
        (
            vec![
                ("kind", s("latency")),
                ("latency_ms", i(5)),
                ("probability", f(1.5)),
            ],
            "probability must be between 0 and 1, got 1.5",
        ),
        (
            vec![("kind", s("latency")), ("latency", i(5))],
            "unknown key 'latency' for kind latency; known: kind, name, proxy, direction, probability, latency_ms, jitter_ms",
        ),
        (
            vec![("kind", s("bandwidth"))],
            "missing required key 'rate' for kind bandwidth",
        ),
        (
            vec![("kind", s("latency")), ("latency_ms", s("100"))],
            "latency_ms must be a non-negative integer (milliseconds), got a string",
        ),
        (
            vec![("kind", s("reset")), ("bytes", i(1)), ("after_ms", i(5))],
            "reset takes exactly one of 'bytes', 'range' or 'after_ms'; 'after_ms' conflicts with 'bytes'",
        ),
        (
            vec![
                ("kind", s("slicer")),
                ("average_size", i(10)),
                ("size_variation", i(10)),
            ],
            "size_variation must be less than average_size (10), got 10",
        ),
        (
            vec![
                ("kind", s("outage")),
                ("duration_ms", i(250)),
                ("mode", s("drop")),
            ],
            "mode must be one of 'refuse' or 'hold', got 'drop'",
        ),
    ];
    for (pairs, expected) in cases {
        let err = build(&def(&pairs)).expect_err(expected);
        assert_eq!(err.to_string(), expected);
    }
}

#[test]
fn outage_windows_follow_the_schedule() {
    let once = OutageSchedule {
        start: Duration::from_millis(100),
        duration: Duration::from_millis(250),
        every: None,
        count: None,
        mode: OutageMode::Refuse,
    };
    assert_eq!(
        once.windows().collect::<Vec<_>>(),
        vec![(Duration::from_millis(100), Duration::from_millis(250))]
    );
    let Ok(Built::Outage(rep)) = build(&def(&[
        ("kind", s("outage")),
        ("duration_ms", i(250)),
        ("every_ms", i(1000)),
        ("count", i(3)),
        ("mode", s("hold")),
    ])) else {
        panic!("outage builds a schedule");
    };
    assert_eq!(rep.mode, OutageMode::Hold);
    let starts: Vec<u128> = rep.windows().map(|(s, _)| s.as_millis()).collect();
    assert_eq!(starts, vec![0, 1000, 2000]);
    let forever = OutageSchedule { count: None, ..rep };
    assert_eq!(forever.windows().take(1000).count(), 1000);
}

#[test]
fn toxiproxy_attributes_build_the_same_faults() {
    let lat = from_toxiproxy(
        "latency",
        &json!({"latency": 100, "jitter": 10}),
        Direction::Upstream,
        1.0,
    );
    let lat = lat.expect("latency");
    assert_eq!(
        (lat.kind(), lat.direction()),
        ("latency", Direction::Upstream)
    );
    for (t, attrs) in [
        ("bandwidth", json!({"rate": 100})),
        ("slow_close", json!({"delay": 10})),
        ("timeout", json!({"timeout": 0})),
        ("reset_peer", json!({"timeout": 0})),
        (
            "slicer",
            json!({"average_size": 64, "size_variation": 32, "delay": 10}),
        ),
        ("limit_data", json!({"bytes": 1024})),
    ] {
        from_toxiproxy(t, &attrs, Direction::Downstream, 0.5)
            .unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    let errs = [
        (
            from_toxiproxy("latncy", &json!({}), Direction::Downstream, 1.0),
            "unknown toxic type 'latncy'; known: latency, bandwidth, slicer, slow_close, timeout, reset_peer, limit_data",
        ),
        (
            from_toxiproxy(
                "latency",
                &json!({"latency": -5}),
                Direction::Downstream,
                1.0,
            ),
            "latency must be a non-negative integer (milliseconds), got -5",
        ),
        (
            from_toxiproxy(
                "latency",
                &json!({"latency": 5, "jiter": 1}),
                Direction::Downstream,
                1.0,
            ),
            "unknown key 'jiter' for kind latency; known: latency, jitter",
        ),
        (
            from_toxiproxy("bandwidth", &json!({"rate": 0}), Direction::Downstream, 1.0),
            "rate must be > 0 KB/s",
        ),
        (
            from_toxiproxy(
                "timeout",
                &json!({"timeout": 1}),
                Direction::Downstream,
                2.0,
            ),
            "probability must be between 0 and 1, got 2",
        ),
    ];
    for (result, expected) in errs {
        assert_eq!(
            result.err().map(|e| e.to_string()).as_deref(),
            Some(expected)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn toxiproxy_bandwidth_rate_is_in_kilobytes_per_second() {
    let bw =
        from_toxiproxy("bandwidth", &json!({"rate": 1}), Direction::Downstream, 1.0).expect("bw");
    let mut rng = conn_rng(1, "api", 0);
    let now = Instant::now();
    let mut fault = bw.instantiate(&mut rng, now).expect("fires");
    let buf = [0u8; 1000];
    let mut plan = Plan::default();
    plan.reset(buf.len(), now);
    let chunk = Chunk {
        bytes: &buf,
        offset: 0,
        arrived: now,
        direction: Direction::Downstream,
        positions: None,
    };
    fault.on_chunk(&chunk, &mut plan, &mut rng);
    // 1 KB/s = 1,000 B/s: 10-byte slices every 10 ms, the last at 990 ms.
    assert_eq!(
        plan.slices().last().map(|s| s.at),
        Some(now + Duration::from_millis(990))
    );
}

/// Which faults of `factories` fire on each of 300 connections, and the first `u64` each
/// connection's RNG yields afterwards (which exposes any draw a fault made).
fn profile_decisions(factories: &[Arc<dyn FaultFactory>], seed: u64) -> Vec<(Vec<bool>, u64)> {
    use rand::RngExt;
    let now = Instant::now();
    (0..300)
        .map(|index| {
            let mut rng = conn_rng(seed, "api", index);
            let fired = factories
                .iter()
                .map(|f| f.instantiate(&mut rng, now).is_some())
                .collect();
            (fired, rng.random())
        })
        .collect()
}

#[test]
fn same_seed_and_profile_give_the_same_decisions() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/flaky-mobile.toml");
    let a = tearline::profile::load(&path).expect("valid");
    let b = tearline::profile::load(&path).expect("valid");
    let (fa, fb) = (a.factories_for(None), b.factories_for(None));
    assert_eq!(profile_decisions(&fa, 9), profile_decisions(&fb, 9));
    assert_ne!(profile_decisions(&fa, 9), profile_decisions(&fa, 10));
    let resets = profile_decisions(&fa, 9)
        .iter()
        .filter(|(f, _)| f[3])
        .count();
    assert!(
        (3..=30).contains(&resets),
        "the 5% reset fired on {resets} of 300"
    );
}
