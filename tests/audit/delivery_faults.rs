//! Delivery truth under every fault kind: between the lab server and the strict load client,
//! with `sse_cut` cutting streams at SSE positions and one other fault kind acting on the same
//! connections, the SSE events the audit records as delivered (id and raw offset of the
//! dispatching byte, per connection) are exactly those the bytes the client received dispatch,
//! and no request stays unreleased (`unknown` "never reached the auditor"). Each kind runs LF
//! and CRLF, small events and 4 MiB events, seeded.

use std::sync::Arc;

use crate::common::delivery::*;
use tearline::fault::FaultFactory;
use tearline::lab::LineEnding;

/// `sse_cut` with a mix of classes, a payload offset in `range`, firing on a share `p` of
/// streams.
fn sse_cut(range: (i64, i64), action: &str, p: f64) -> Arc<dyn FaultFactory> {
    let mut at = toml::map::Map::new();
    for (class, w) in [
        ("mid-value", 3),
        ("before-dispatch", 1),
        ("boundary", 1),
        ("after-id", 1),
        ("cr-lf", 1),
        ("before-eol", 1),
    ] {
        at.insert(class.into(), i(w));
    }
    fault(&[
        ("kind", s("sse_cut")),
        ("direction", s("downstream")),
        ("at", toml::Value::Table(at)),
        ("range", toml::Value::Array(vec![i(range.0), i(range.1)])),
        ("action", s(action)),
        ("probability", f(p)),
    ])
}

/// Runs the four variants (LF/CRLF × small/4 MiB) with `others(big)` next to `sse_cut`.
async fn each_variant(kind: &str, others: impl Fn(bool) -> Vec<Arc<dyn FaultFactory>>) {
    for (n, (eol, big)) in [
        (LineEnding::Lf, false),
        (LineEnding::Crlf, false),
        (LineEnding::Lf, true),
        (LineEnding::Crlf, true),
    ]
    .into_iter()
    .enumerate()
    {
        // Offsets inside the stream (a small call's stream is about 1 KB): with the share below,
        // a run without any cut is about one in 10^4 (connections take RNG streams in accept
        // order, which timing decides, so the seed alone does not fix which streams are cut).
        let range = if big { (0, 4_000_000) } else { (0, 700) };
        let action = ["reset", "fin", "clean-end"][n % 3];
        let mut faults = vec![sse_cut(range, action, if big { 0.9 } else { 0.8 })];
        faults.extend(others(big));
        let traffic = if big {
            Traffic::big(eol)
        } else {
            Traffic::small(eol)
        };
        let r = run(0x5eed + n as u64, faults, traffic).await;
        let label = format!("{kind} {eol:?} big={big} {action}");
        assert_delivery_truth(&r, &label);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_match_the_client_under_latency() {
    each_variant("latency", |_| {
        vec![
            fault(&[
                ("kind", s("latency")),
                ("direction", s("downstream")),
                ("latency_ms", i(30)),
            ]),
            fault(&[
                ("kind", s("latency")),
                ("direction", s("upstream")),
                ("latency_ms", i(20)),
            ]),
        ]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_match_the_client_under_jitter() {
    each_variant("jitter", |_| {
        vec![fault(&[
            ("kind", s("latency")),
            ("direction", s("downstream")),
            ("latency_ms", i(20)),
            ("jitter_ms", i(15)),
        ])]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_match_the_client_under_bandwidth() {
    each_variant("bandwidth", |_| {
        vec![
            fault(&[
                ("kind", s("bandwidth")),
                ("direction", s("downstream")),
                ("rate", i(60_000_000)),
            ]),
            fault(&[
                ("kind", s("bandwidth")),
                ("direction", s("upstream")),
                ("rate", i(20_000)),
            ]),
        ]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_match_the_client_under_slicer() {
    each_variant("slicer", |big| {
        vec![fault(&[
            ("kind", s("slicer")),
            ("direction", s("downstream")),
            ("average_size", i(if big { 60_000 } else { 40 })),
            ("size_variation", i(if big { 20_000 } else { 30 })),
            ("delay_us", i(200)),
        ])]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_match_the_client_under_slow_close() {
    each_variant("slow_close", |_| {
        vec![fault(&[
            ("kind", s("slow_close")),
            ("direction", s("downstream")),
            ("delay_ms", i(50)),
        ])]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_match_the_client_under_timeout() {
    each_variant("timeout", |_| {
        vec![
            fault(&[
                ("kind", s("timeout")),
                ("direction", s("downstream")),
                ("timeout_ms", i(200)),
                ("probability", f(0.3)),
            ]),
            fault(&[
                ("kind", s("timeout")),
                ("direction", s("upstream")),
                ("timeout_ms", i(200)),
                ("probability", f(0.2)),
            ]),
        ]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_match_the_client_under_limit_data() {
    each_variant("limit_data", |big| {
        vec![fault(&[
            ("kind", s("limit_data")),
            ("direction", s("downstream")),
            ("bytes", i(if big { 2_500_000 } else { 1_800 })),
            ("probability", f(0.5)),
        ])]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_match_the_client_under_stall() {
    each_variant("stall", |big| {
        vec![fault(&[
            ("kind", s("stall")),
            ("direction", s("downstream")),
            ("duration_ms", i(80)),
            ("at_byte", i(if big { 1_000_000 } else { 1_200 })),
        ])]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_match_the_client_under_reset() {
    each_variant("reset", |big| {
        let range = if big {
            (1_000, 3_000_000)
        } else {
            (300, 2_500)
        };
        vec![fault(&[
            ("kind", s("reset")),
            ("direction", s("downstream")),
            ("range", toml::Value::Array(vec![i(range.0), i(range.1)])),
            ("probability", f(0.5)),
        ])]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_match_the_client_under_outage() {
    each_variant("outage", |big| {
        let range = if big {
            (1_000, 3_000_000)
        } else {
            (300, 2_500)
        };
        vec![fault(&[
            ("kind", s("reset")),
            ("direction", s("downstream")),
            ("range", toml::Value::Array(vec![i(range.0), i(range.1)])),
            ("outage_ms", i(100)),
            ("probability", f(0.4)),
        ])]
    })
    .await;
}

/// Every shipped profile's faults, plus `sse_cut`, small events (the profiles' bandwidths make
/// 4 MiB events take tens of seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_match_the_client_under_each_shipped_profile() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    names.sort();
    assert!(!names.is_empty());
    for (n, path) in names.iter().enumerate() {
        let profile = tearline::profile::load(path).expect("shipped profile loads");
        // profiles/llm-*.toml aim only at LLM streams (`path = "/v1/*"`, LLM positions): on
        // this MCP traffic their faults must not act, and only the test's own cut can, so it
        // fires on every stream there (at 0.6 a seed could leave the run without any cut).
        let llm_only = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("llm-"));
        let share = if llm_only { 1.0 } else { 0.6 };
        let mut faults = vec![sse_cut((0, 1_500), "reset", share)];
        for spec in profile.faults_for(None) {
            if let tearline::fault::registry::Built::Conn(f) = &spec.built {
                faults.push(f.clone());
            }
        }
        let eol = if n % 2 == 0 {
            LineEnding::Lf
        } else {
            LineEnding::Crlf
        };
        let r = run(0xfeed + n as u64, faults, Traffic::small(eol)).await;
        assert_delivery_truth(&r, &path.display().to_string());
    }
}
