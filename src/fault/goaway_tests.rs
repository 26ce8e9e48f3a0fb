//! Unit tests of `goaway`: its keys, and its decisions as a pure function of (new streams,
//! clock) → actions.

use super::*;
use crate::fault::h2::Verdict;
use crate::fault::keys::FaultDef;

fn read(pairs: Vec<(&str, toml::Value)>) -> Result<GoawayConfig, FaultConfigError> {
    let def = FaultDef::from_pairs(pairs);
    let mut r = KeyReader::new(&def, "goaway");
    GoawayConfig::read(&mut r)
}

fn int(v: i64) -> toml::Value {
    toml::Value::Integer(v)
}

fn s(v: &str) -> toml::Value {
    toml::Value::String(v.into())
}

fn cfg(to: GoawayTo, trigger: GoawayTrigger, code: ErrorCode) -> GoawayConfig {
    GoawayConfig {
        to,
        trigger,
        code,
        drain: if code == ErrorCode::NO_ERROR {
            DEFAULT_DRAIN
        } else {
            Duration::ZERO
        },
    }
}

#[test]
fn keys_default_to_a_graceful_goaway_to_the_client_drained_for_a_second() {
    let c = read(vec![("after_ms", int(500))]).expect("valid");
    assert_eq!(
        c,
        GoawayConfig {
            to: GoawayTo::Client,
            trigger: GoawayTrigger::After(Duration::from_millis(500)),
            code: ErrorCode::NO_ERROR,
            drain: Duration::from_millis(1000),
        }
    );
    let c = read(vec![
        ("after_streams", int(3)),
        ("to", s("both")),
        ("code", s("enhance_your_calm")),
    ])
    .expect("valid");
    assert_eq!(c.trigger, GoawayTrigger::Streams(3));
    assert_eq!(c.to, GoawayTo::Both);
    assert_eq!(c.code, ErrorCode::ENHANCE_YOUR_CALM);
    assert_eq!(c.drain, Duration::ZERO);
}

#[test]
fn bad_keys_say_what_is_allowed() {
    let e = read(vec![]).expect_err("no trigger");
    assert!(e.message.contains("'after_ms' or 'after_streams'"), "{e:?}");
    let e = read(vec![("after_ms", int(1)), ("after_streams", int(1))]).expect_err("two");
    assert!(e.message.contains("exactly one"), "{e:?}");
    let e = read(vec![("after_streams", int(0))]).expect_err("zero streams");
    assert!(e.message.contains("at least 1"), "{e:?}");
    let e = read(vec![("after_ms", int(1)), ("code", s("oops"))]).expect_err("code");
    assert!(
        e.message.contains("'no_error'") && e.message.contains("'cancel'"),
        "{e:?}"
    );
    let e = read(vec![("after_ms", int(1)), ("to", s("peer"))]).expect_err("to");
    assert!(e.message.contains("'client', 'server' or 'both'"), "{e:?}");
    let e = read(vec![
        ("after_ms", int(1)),
        ("code", s("internal_error")),
        ("drain_ms", int(5)),
    ])
    .expect_err("drain with an error code");
    assert_eq!(e.key.as_deref(), Some("drain_ms"));
}

#[test]
fn a_timed_graceful_goaway_names_the_highest_forwarded_stream_then_closes_after_the_drain() {
    let t0 = Instant::now();
    let c = cfg(
        GoawayTo::Client,
        GoawayTrigger::After(Duration::from_millis(100)),
        ErrorCode::NO_ERROR,
    );
    let mut g = Goaway::new(c, t0);
    let mut out = Vec::new();
    g.on_server_settings(t0, &mut out);
    assert_eq!(g.on_client_stream(1, t0, &mut out), NewStream::Forward);
    assert_eq!(g.on_client_stream(3, t0, &mut out), NewStream::Forward);
    assert!(out.is_empty());
    assert_eq!(g.next_timer(), Some(t0 + Duration::from_millis(100)));
    g.on_timer(t0 + Duration::from_millis(99), &mut out);
    assert!(out.is_empty() && !g.fired(), "fired early");
    let fire = t0 + Duration::from_millis(100);
    g.on_timer(fire, &mut out);
    assert_eq!(
        out,
        [
            GoawayAction::Send {
                direction: Direction::Downstream,
                last_stream: 3,
                code: ErrorCode::NO_ERROR
            },
            GoawayAction::CloseAt(fire + DEFAULT_DRAIN)
        ]
    );
    out.clear();
    assert_eq!(g.next_timer(), None, "fires once");
    g.on_timer(fire + DEFAULT_DRAIN, &mut out);
    assert!(out.is_empty());
}

#[test]
fn a_stream_the_client_opens_after_the_goaway_never_reaches_the_server() {
    let t0 = Instant::now();
    let c = cfg(
        GoawayTo::Client,
        GoawayTrigger::Streams(2),
        ErrorCode::NO_ERROR,
    );
    let mut g = Goaway::new(c, t0);
    let mut out = Vec::new();
    g.on_server_settings(t0, &mut out);
    assert_eq!(g.on_client_stream(1, t0, &mut out), NewStream::Forward);
    assert!(out.is_empty());
    assert_eq!(g.on_client_stream(3, t0, &mut out), NewStream::Forward);
    assert_eq!(
        out,
        [
            GoawayAction::Send {
                direction: Direction::Downstream,
                last_stream: 3,
                code: ErrorCode::NO_ERROR
            },
            GoawayAction::CloseAt(t0 + DEFAULT_DRAIN)
        ],
        "the GOAWAY follows the second stream and names it"
    );
    assert_eq!(g.on_client_stream(5, t0, &mut out), NewStream::Unprocessed);
    assert_eq!(out.len(), 2, "fires once");
}

#[test]
fn an_error_goaway_to_both_ends_closes_at_once() {
    let t0 = Instant::now();
    let c = cfg(
        GoawayTo::Both,
        GoawayTrigger::After(Duration::ZERO),
        ErrorCode::INTERNAL_ERROR,
    );
    let mut g = Goaway::new(c, t0);
    g.on_push_stream(2);
    let mut out = Vec::new();
    g.on_server_settings(t0, &mut out);
    g.on_timer(t0, &mut out);
    assert_eq!(
        out,
        [
            GoawayAction::Send {
                direction: Direction::Downstream,
                last_stream: 0,
                code: ErrorCode::INTERNAL_ERROR
            },
            GoawayAction::Send {
                direction: Direction::Upstream,
                last_stream: 2,
                code: ErrorCode::INTERNAL_ERROR
            },
            GoawayAction::CloseAt(t0)
        ],
        "an error code closes at once"
    );
    assert_eq!(g.next_timer(), None);
}

#[test]
fn a_goaway_to_the_server_alone_leaves_new_client_streams_flowing() {
    let t0 = Instant::now();
    let c = cfg(
        GoawayTo::Server,
        GoawayTrigger::Streams(1),
        ErrorCode::NO_ERROR,
    );
    let mut g = Goaway::new(c, t0);
    let mut out = Vec::new();
    g.on_server_settings(t0, &mut out);
    assert_eq!(g.on_client_stream(1, t0, &mut out), NewStream::Forward);
    assert_eq!(
        out,
        [
            GoawayAction::Send {
                direction: Direction::Upstream,
                last_stream: 0,
                code: ErrorCode::NO_ERROR
            },
            GoawayAction::CloseAt(t0 + DEFAULT_DRAIN)
        ]
    );
    assert_eq!(g.on_client_stream(3, t0, &mut out), NewStream::Forward);
}

fn frame(direction: Direction, kind: FrameType, stream: u32, payload: &[u8]) -> FrameView<'_> {
    FrameView {
        direction,
        header: FrameHeader {
            len: u32::try_from(payload.len()).expect("small"),
            kind,
            flags: flags::END_HEADERS,
            stream,
        },
        payload,
    }
}

#[test]
fn on_the_relay_new_streams_trigger_the_goaway_and_a_late_stream_is_refused_not_dropped() {
    let t0 = Instant::now();
    let c = cfg(
        GoawayTo::Client,
        GoawayTrigger::Streams(2),
        ErrorCode::NO_ERROR,
    );
    let mut f = c.make(Common::default(), t0);
    let mut rng = crate::fault::conn_rng(1, "p", 0);
    let mut a = H2Actions::default();
    let facts = StreamFacts::default();
    let settings = frame(Direction::Downstream, FrameType::Settings, 0, &[]);
    f.on_frame(&settings, &facts, t0, &mut rng, &mut a);
    let up = |kind, stream| frame(Direction::Upstream, kind, stream, &[0x82]);
    f.on_frame(&up(FrameType::Headers, 1), &facts, t0, &mut rng, &mut a);
    assert!(a.inject.is_empty() && a.close.is_none());
    a.clear();
    f.on_frame(&up(FrameType::Data, 1), &facts, t0, &mut rng, &mut a);
    f.on_frame(&up(FrameType::Headers, 1), &facts, t0, &mut rng, &mut a);
    assert!(a.inject.is_empty(), "trailers and DATA open nothing");
    let t1 = t0 + Duration::from_millis(7);
    f.on_frame(&up(FrameType::Headers, 3), &facts, t1, &mut rng, &mut a);
    assert_eq!(a.verdict, Verdict::Forward);
    assert_eq!(
        a.inject,
        [Inject::GoAway {
            to: Direction::Downstream,
            last_stream: 3,
            code: ErrorCode::NO_ERROR
        }]
    );
    assert_eq!(a.close, Some((t1 + DEFAULT_DRAIN, CutAction::Fin)));
    a.clear();
    f.on_frame(&up(FrameType::Headers, 5), &facts, t1, &mut rng, &mut a);
    assert_eq!(
        a.verdict,
        Verdict::Forward,
        "a header block is never dropped (HPACK)"
    );
    assert_eq!(
        a.inject,
        [
            Inject::RstStream {
                to: Direction::Upstream,
                stream: 5,
                code: ErrorCode::CANCEL
            },
            Inject::RstStream {
                to: Direction::Downstream,
                stream: 5,
                code: ErrorCode::REFUSED_STREAM
            }
        ]
    );
    assert_eq!(f.next_timer(), None);
}

#[test]
fn a_goaway_to_the_server_names_the_highest_promised_stream() {
    let t0 = Instant::now();
    let c = cfg(
        GoawayTo::Server,
        GoawayTrigger::After(Duration::from_millis(10)),
        ErrorCode::NO_ERROR,
    );
    let mut f = c.make(Common::default(), t0);
    let mut rng = crate::fault::conn_rng(1, "p", 0);
    let mut a = H2Actions::default();
    let settings = frame(Direction::Downstream, FrameType::Settings, 0, &[]);
    f.on_frame(&settings, &StreamFacts::default(), t0, &mut rng, &mut a);
    let promise = [0, 0, 0, 4, 0x82];
    let push = frame(Direction::Downstream, FrameType::PushPromise, 1, &promise);
    f.on_frame(&push, &StreamFacts::default(), t0, &mut rng, &mut a);
    assert_eq!(f.next_timer(), Some(t0 + Duration::from_millis(10)));
    f.on_timer(t0 + Duration::from_millis(10), &mut rng, &mut a);
    assert_eq!(
        a.inject,
        [Inject::GoAway {
            to: Direction::Upstream,
            last_stream: 4,
            code: ErrorCode::NO_ERROR
        }]
    );
}

#[test]
fn a_goaway_due_before_the_servers_preface_waits_for_its_settings_and_drains_from_then() {
    let t0 = Instant::now();
    let c = cfg(
        GoawayTo::Client,
        GoawayTrigger::Streams(1),
        ErrorCode::NO_ERROR,
    );
    let mut f = c.make(Common::default(), t0);
    let mut rng = crate::fault::conn_rng(1, "p", 0);
    let mut a = H2Actions::default();
    let facts = StreamFacts::default();
    // The first request comes before the server's SETTINGS can: the trigger is due, nothing
    // may go to the client yet.
    let req = frame(Direction::Upstream, FrameType::Headers, 1, &[0x82]);
    f.on_frame(&req, &facts, t0, &mut rng, &mut a);
    assert!(a.inject.is_empty() && a.close.is_none(), "{a:?}");
    assert_eq!(f.next_timer(), None, "waits for a frame, not a time");
    // A SETTINGS ACK from the server is not its preface.
    let mut ack = frame(Direction::Downstream, FrameType::Settings, 0, &[]);
    ack.header.flags = flags::ACK;
    f.on_frame(&ack, &facts, t0, &mut rng, &mut a);
    assert!(a.inject.is_empty(), "an ACK is not the preface");
    let t1 = t0 + Duration::from_millis(3);
    let settings = frame(Direction::Downstream, FrameType::Settings, 0, &[]);
    a.clear();
    f.on_frame(&settings, &facts, t1, &mut rng, &mut a);
    assert_eq!(
        a.verdict,
        Verdict::Forward,
        "the SETTINGS itself passes first"
    );
    assert_eq!(
        a.inject,
        [Inject::GoAway {
            to: Direction::Downstream,
            last_stream: 1,
            code: ErrorCode::NO_ERROR
        }],
        "right after the server's preface, naming the stream forwarded"
    );
    assert_eq!(a.close, Some((t1 + DEFAULT_DRAIN, CutAction::Fin)));
    a.clear();
    f.on_frame(&settings, &facts, t1, &mut rng, &mut a);
    assert!(a.inject.is_empty() && a.close.is_none(), "fires once");
}

#[test]
fn a_timed_goaway_before_the_servers_preface_fires_with_it() {
    let t0 = Instant::now();
    let c = cfg(
        GoawayTo::Client,
        GoawayTrigger::After(Duration::ZERO),
        ErrorCode::NO_ERROR,
    );
    let mut g = Goaway::new(c, t0);
    let mut out = Vec::new();
    g.on_timer(t0, &mut out);
    assert!(out.is_empty() && !g.fired(), "not before the preface");
    assert_eq!(g.next_timer(), None);
    g.on_server_settings(t0 + Duration::from_millis(2), &mut out);
    assert!(g.fired());
    assert_eq!(
        out.last(),
        Some(&GoawayAction::CloseAt(
            t0 + Duration::from_millis(2) + DEFAULT_DRAIN
        ))
    );
}
