//! Unit tests of `hold_headers`: its keys, and its decision as a pure function of (response
//! facts, clock) → hold or not, on the relay's frames.

use super::*;
use crate::fault::keys::FaultDef;
use crate::wire::h2::FrameHeader;

fn read(pairs: Vec<(&str, toml::Value)>) -> Result<HoldHeadersConfig, FaultConfigError> {
    let def = FaultDef::from_pairs(pairs);
    let mut r = KeyReader::new(&def, "hold_headers");
    HoldHeadersConfig::read(&mut r)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
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
    assert_eq!(
        read(vec![("hold_ms", toml::Value::Integer(5))])
            .expect("valid")
            .until,
        HoldUntil::FirstData(Some(ms(5))),
        "hold_ms with first-data is a cap"
    );
    let e = read(vec![("until", toml::Value::String("time".into()))]).expect_err("no hold_ms");
    assert_eq!(e.key.as_deref(), Some("hold_ms"), "{e:?}");
    let e = read(vec![("until", toml::Value::String("eof".into()))]).expect_err("until");
    assert!(e.message.contains("'first-data' or 'time'"), "{e:?}");
    let e = read(vec![("only_sse", toml::Value::Integer(1))]).expect_err("only_sse");
    assert!(e.message.contains("true or false"), "{e:?}");
}

#[test]
fn only_the_start_of_a_response_with_a_body_to_come_is_held() {
    let t = Instant::now();
    let sse = HoldHeadersConfig {
        until: HoldUntil::FirstData(None),
        only_sse: true,
    };
    assert_eq!(
        decide(&sse, true, false, false, t),
        Some(Hold::FirstData { deadline: None })
    );
    assert_eq!(decide(&sse, false, false, false, t), None, "not SSE");
    assert_eq!(decide(&sse, true, true, false, t), None, "trailers");
    assert_eq!(
        decide(&sse, true, false, true, t),
        None,
        "END_STREAM: no body to wait for"
    );
    let any = HoldHeadersConfig {
        until: HoldUntil::Time(ms(200)),
        only_sse: false,
    };
    assert_eq!(
        decide(&any, false, false, false, t),
        Some(Hold::Until(t + ms(200)))
    );
    let capped = HoldHeadersConfig {
        until: HoldUntil::FirstData(Some(ms(50))),
        only_sse: true,
    };
    assert_eq!(
        decide(&capped, true, false, false, t),
        Some(Hold::FirstData {
            deadline: Some(t + ms(50))
        })
    );
}

fn frame(direction: Direction, kind: FrameType, flags: u8) -> FrameView<'static> {
    FrameView {
        direction,
        header: FrameHeader {
            len: 1,
            kind,
            flags,
            stream: 1,
        },
        payload: &[0x88],
    }
}

#[test]
fn on_the_relay_a_response_headers_frame_is_held_and_nothing_else_is() {
    let t = Instant::now();
    let cfg = HoldHeadersConfig {
        until: HoldUntil::FirstData(None),
        only_sse: true,
    };
    let mut f = cfg.make(Common::default(), t);
    let mut rng = crate::fault::conn_rng(1, "p", 0);
    let mut a = H2Actions::default();
    let sse = StreamFacts {
        response_sse: true,
        ..StreamFacts::default()
    };
    let headers = flags::END_HEADERS;
    let cases = [
        (
            frame(Direction::Downstream, FrameType::Headers, headers),
            sse,
            true,
        ),
        (
            frame(Direction::Downstream, FrameType::Headers, headers),
            StreamFacts::default(),
            false,
        ),
        (
            frame(Direction::Upstream, FrameType::Headers, headers),
            sse,
            false,
        ),
        (frame(Direction::Downstream, FrameType::Data, 0), sse, false),
        (
            frame(
                Direction::Downstream,
                FrameType::Headers,
                headers | flags::END_STREAM,
            ),
            sse,
            false,
        ),
        (
            frame(Direction::Downstream, FrameType::Headers, headers),
            StreamFacts {
                reset_by_proxy: true,
                ..sse
            },
            false,
        ),
    ];
    for (i, (fr, facts, held)) in cases.iter().enumerate() {
        a.clear();
        f.on_frame(fr, facts, t, &mut rng, &mut a);
        let want = if *held {
            Verdict::Hold(Hold::FirstData { deadline: None })
        } else {
            Verdict::Forward
        };
        assert_eq!(a.verdict, want, "case {i}");
        assert!(a.inject.is_empty() && a.close.is_none(), "case {i}");
    }
}
