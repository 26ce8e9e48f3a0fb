//! Unit tests of `flow_stall`: its keys, and its decisions as a pure function of (DATA,
//! WINDOW_UPDATE, stream end, clock) → forward, withhold, release summed credit.

use super::*;
use crate::fault::keys::FaultDef;

fn read(pairs: Vec<(&str, toml::Value)>) -> Result<FlowStallConfig, FaultConfigError> {
    let def = FaultDef::from_pairs(pairs);
    let mut r = KeyReader::new(&def, "flow_stall");
    FlowStallConfig::read(&mut r)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn s(v: &str) -> toml::Value {
    toml::Value::String(v.into())
}

#[test]
fn keys_default_to_sse_stream_windows_from_their_first_data() {
    assert_eq!(
        read(vec![("stall_ms", toml::Value::Integer(300))]).expect("valid"),
        FlowStallConfig {
            target: StallTarget::Streams { sse_only: true },
            stall: ms(300),
            after_bytes: 0
        }
    );
    let c = read(vec![
        ("stall_ms", toml::Value::Integer(1)),
        ("target", s("connection")),
        ("after_bytes", toml::Value::Integer(4096)),
    ])
    .expect("valid");
    assert_eq!(c.target, StallTarget::Connection);
    assert_eq!(c.after_bytes, 4096);
    let e = read(vec![]).expect_err("no stall_ms");
    assert!(
        e.message.contains("missing required key 'stall_ms'"),
        "{e:?}"
    );
    let e = read(vec![("stall_ms", toml::Value::Integer(0))]).expect_err("zero");
    assert!(e.message.contains("greater than 0"), "{e:?}");
    let e = read(vec![
        ("stall_ms", toml::Value::Integer(5)),
        ("target", s("connection")),
        ("stream", s("all")),
    ])
    .expect_err("stream with connection");
    assert_eq!(e.key.as_deref(), Some("stream"), "{e:?}");
    let e = read(vec![
        ("stall_ms", toml::Value::Integer(5)),
        ("stream", s("json")),
    ])
    .expect_err("stream value");
    assert!(e.message.contains("'sse' or 'all'"), "{e:?}");
}

#[test]
fn an_sse_stream_credit_is_withheld_for_the_stall_then_released_summed() {
    let t = Instant::now();
    let mut f = FlowStall::new(FlowStallConfig {
        target: StallTarget::Streams { sse_only: true },
        stall: ms(100),
        after_bytes: 1000,
    });
    assert_eq!(f.on_window_update(1, 10, t), CreditVerdict::Forward);
    f.on_data(1, 600, true, t);
    f.on_data(3, 5000, false, t);
    assert_eq!(
        f.on_window_update(1, 600, t),
        CreditVerdict::Forward,
        "before after_bytes"
    );
    assert_eq!(
        f.on_window_update(3, 5000, t),
        CreditVerdict::Forward,
        "not an SSE stream"
    );
    let start = t + ms(5);
    f.on_data(1, 600, true, start);
    assert_eq!(f.next_timer(), Some(start + ms(100)));
    assert_eq!(f.on_window_update(1, 600, start), CreditVerdict::Withhold);
    assert_eq!(
        f.on_window_update(0, 1200, start),
        CreditVerdict::Forward,
        "the connection's credit keeps flowing"
    );
    assert_eq!(
        f.on_window_update(1, 400, start + ms(50)),
        CreditVerdict::Withhold
    );
    let mut out = Vec::new();
    f.on_timer(start + ms(99), &mut out);
    assert!(out.is_empty());
    f.on_timer(start + ms(100), &mut out);
    assert_eq!(
        out,
        [Credit {
            stream: 1,
            increment: 1000
        }]
    );
    assert_eq!(f.next_timer(), None);
    f.on_data(1, 5000, true, start + ms(200));
    assert_eq!(
        f.on_window_update(1, 5000, start + ms(200)),
        CreditVerdict::Forward,
        "a stream stalls once"
    );
}

#[test]
fn a_connection_stall_withholds_only_stream_zero_credit() {
    let t = Instant::now();
    let mut f = FlowStall::new(FlowStallConfig {
        target: StallTarget::Connection,
        stall: ms(10),
        after_bytes: 0,
    });
    f.on_data(1, 100, false, t);
    assert_eq!(f.on_window_update(0, 100, t), CreditVerdict::Withhold);
    assert_eq!(f.on_window_update(1, 100, t), CreditVerdict::Forward);
    f.on_stream_closed(1);
    let mut out = Vec::new();
    f.on_timer(t + ms(10), &mut out);
    assert_eq!(
        out,
        [Credit {
            stream: 0,
            increment: 100
        }]
    );
}

#[test]
fn credit_of_a_stream_that_closed_while_stalled_is_dropped() {
    let t = Instant::now();
    let mut f = FlowStall::new(FlowStallConfig {
        target: StallTarget::Streams { sse_only: false },
        stall: ms(10),
        after_bytes: 0,
    });
    f.on_data(1, 100, false, t);
    assert_eq!(f.on_window_update(1, 100, t), CreditVerdict::Withhold);
    f.on_stream_closed(1);
    assert_eq!(f.next_timer(), None);
    let mut out = Vec::new();
    f.on_timer(t + ms(10), &mut out);
    assert!(out.is_empty());
}

#[test]
fn withheld_credit_above_the_largest_increment_leaves_in_several_updates() {
    let t = Instant::now();
    let mut f = FlowStall::new(FlowStallConfig {
        target: StallTarget::Connection,
        stall: ms(1),
        after_bytes: 0,
    });
    f.on_data(1, 1, false, t);
    let max = u32::try_from(MAX_INCREMENT).expect("fits");
    f.on_window_update(0, max, t);
    f.on_window_update(0, 5, t);
    let mut out = Vec::new();
    f.on_timer(t + ms(1), &mut out);
    assert_eq!(
        out,
        [
            Credit {
                stream: 0,
                increment: max
            },
            Credit {
                stream: 0,
                increment: 5
            }
        ]
    );
}
