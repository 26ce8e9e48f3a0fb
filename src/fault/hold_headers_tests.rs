//! Unit tests of `hold_headers`: its keys, and its decisions as a pure function of (header
//! block, DATA, stream end, clock) → released blocks in HPACK order.

use super::*;
use crate::fault::keys::FaultDef;

fn read(pairs: Vec<(&str, toml::Value)>) -> Result<HoldHeadersConfig, FaultConfigError> {
    let def = FaultDef::from_pairs(pairs);
    let mut r = KeyReader::new(&def, "hold_headers");
    HoldHeadersConfig::read(&mut r)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn first_data() -> HoldHeaders {
    HoldHeaders::new(HoldHeadersConfig {
        until: HoldUntil::FirstData(None),
        only_sse: true,
    })
}

#[test]
fn keys_default_to_sse_responses_held_until_their_first_data() {
    assert_eq!(
        read(vec![]).expect("valid"),
        HoldHeadersConfig {
            until: HoldUntil::FirstData(None),
            only_sse: true
        }
    );
    assert_eq!(
        read(vec![
            ("until", toml::Value::String("time".into())),
            ("hold_ms", toml::Value::Integer(250)),
            ("only_sse", toml::Value::Boolean(false)),
        ])
        .expect("valid"),
        HoldHeadersConfig {
            until: HoldUntil::Time(ms(250)),
            only_sse: false
        }
    );
    let e = read(vec![("until", toml::Value::String("time".into()))]).expect_err("no hold_ms");
    assert_eq!(e.key.as_deref(), Some("hold_ms"), "{e:?}");
    let e = read(vec![("until", toml::Value::String("eof".into()))]).expect_err("until");
    assert!(e.message.contains("'first-data' or 'time'"), "{e:?}");
    let e = read(vec![("only_sse", toml::Value::Integer(1))]).expect_err("only_sse");
    assert!(e.message.contains("true or false"), "{e:?}");
}

#[test]
fn sse_headers_leave_just_before_the_first_data_and_other_responses_pass() {
    let t = Instant::now();
    let mut h = first_data();
    let mut out = Vec::new();
    assert_eq!(
        h.on_header_block(1, true, false, false, t),
        HoldVerdict::Forward,
        "a JSON response is not held"
    );
    assert_eq!(
        h.on_header_block(3, true, true, false, t),
        HoldVerdict::Wait
    );
    assert_eq!(h.next_timer(), None, "no time limit by default");
    h.on_timer(t + ms(60_000), &mut out);
    assert!(out.is_empty(), "still held without data");
    assert_eq!(h.on_data(1, t, &mut out), HoldVerdict::Forward);
    assert!(out.is_empty(), "another stream's data releases nothing");
    assert_eq!(h.on_data(3, t, &mut out), HoldVerdict::Forward);
    assert_eq!(out, [Released { stream: 3 }]);
    assert!(!h.holding());
}

#[test]
fn a_later_header_block_waits_behind_a_held_one_and_leaves_in_encoding_order() {
    let t = Instant::now();
    let mut h = first_data();
    let mut out = Vec::new();
    assert_eq!(
        h.on_header_block(1, true, true, false, t),
        HoldVerdict::Wait
    );
    assert_eq!(
        h.on_header_block(3, true, false, false, t),
        HoldVerdict::Wait,
        "HPACK order: a JSON response's headers wait behind the held SSE headers"
    );
    assert_eq!(
        h.on_data(3, t, &mut out),
        HoldVerdict::Wait,
        "its data waits behind its own headers"
    );
    assert!(out.is_empty());
    assert_eq!(h.on_data(1, t, &mut out), HoldVerdict::Forward);
    assert_eq!(out, [Released { stream: 1 }, Released { stream: 3 }]);
}

#[test]
fn a_second_held_block_keeps_its_own_hold_after_the_first_leaves() {
    let t = Instant::now();
    let mut h = first_data();
    let mut out = Vec::new();
    h.on_header_block(1, true, true, false, t);
    h.on_header_block(3, true, true, false, t);
    assert_eq!(h.on_data(3, t, &mut out), HoldVerdict::Wait);
    assert!(out.is_empty(), "3 is ready but 1 is still held before it");
    assert_eq!(h.on_data(1, t, &mut out), HoldVerdict::Forward);
    assert_eq!(out, [Released { stream: 1 }, Released { stream: 3 }]);
    h.on_header_block(5, true, true, false, t);
    h.on_header_block(7, true, true, false, t);
    out.clear();
    assert_eq!(h.on_data(5, t, &mut out), HoldVerdict::Forward);
    assert_eq!(out, [Released { stream: 5 }], "7 still waits for its data");
    assert!(h.holding());
}

#[test]
fn a_timed_hold_releases_at_its_deadline_and_holds_data_until_then() {
    let t = Instant::now();
    let mut h = HoldHeaders::new(HoldHeadersConfig {
        until: HoldUntil::Time(ms(200)),
        only_sse: false,
    });
    let mut out = Vec::new();
    assert_eq!(
        h.on_header_block(1, true, false, false, t),
        HoldVerdict::Wait
    );
    assert_eq!(h.next_timer(), Some(t + ms(200)));
    assert_eq!(h.on_data(1, t + ms(10), &mut out), HoldVerdict::Wait);
    h.on_timer(t + ms(199), &mut out);
    assert!(out.is_empty());
    h.on_timer(t + ms(200), &mut out);
    assert_eq!(out, [Released { stream: 1 }]);
    assert_eq!(h.next_timer(), None);
}

#[test]
fn a_capped_first_data_hold_leaves_at_the_cap_when_no_data_comes() {
    let t = Instant::now();
    let mut h = HoldHeaders::new(HoldHeadersConfig {
        until: HoldUntil::FirstData(Some(ms(50))),
        only_sse: true,
    });
    let mut out = Vec::new();
    h.on_header_block(1, true, true, false, t);
    h.on_timer(t + ms(50), &mut out);
    assert_eq!(out, [Released { stream: 1 }]);
}

#[test]
fn a_response_that_ends_without_data_is_not_held_forever() {
    let t = Instant::now();
    let mut h = first_data();
    let mut out = Vec::new();
    assert_eq!(
        h.on_header_block(1, true, true, true, t),
        HoldVerdict::Forward,
        "END_STREAM on the headers: no body to wait for"
    );
    h.on_header_block(3, true, true, false, t);
    assert_eq!(h.on_stream_end(3, t, &mut out), HoldVerdict::Forward);
    assert_eq!(
        out,
        [Released { stream: 3 }],
        "the server's reset flushes it"
    );
}

#[test]
fn trailers_are_never_held_for_themselves() {
    let t = Instant::now();
    let mut h = HoldHeaders::new(HoldHeadersConfig {
        until: HoldUntil::FirstData(None),
        only_sse: false,
    });
    assert_eq!(
        h.on_header_block(1, false, true, true, t),
        HoldVerdict::Forward
    );
}
