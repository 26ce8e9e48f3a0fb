//! Unit tests of `order`: exchange order, requests waiting for the response before them,
//! and cuts waiting for their exchange's request.

use super::*;
use crate::audit::AuditConfig;

fn request(conn: u64, seq: u64) -> Observation {
    Observation::Request {
        conn,
        seq,
        method: "GET".into(),
        path: "/sse".into(),
        session: None,
        last_event_id: None,
        protocol_version: None,
        has_authorization: false,
        idempotency_key: None,
        accepts_event_stream: true,
        body: None,
    }
}

fn end(conn: u64, seq: u64) -> Observation {
    Observation::StreamEnd {
        conn,
        seq,
        clean: false,
    }
}

fn held(e: &Engine, conn: u64) -> usize {
    e.order.get(&conn).map_or(0, |c| c.early.len())
}

#[test]
fn an_exchange_after_the_last_request_seen_waits_even_right_after_its_connections_run() {
    let now = Instant::now();
    let mut e = Engine::new(AuditConfig::default(), now);
    e.arrive(now, request(1, 0));
    e.arrive(now, end(1, 0));
    assert_eq!(held(&e, 1), 0, "exchange 0's request was seen");
    e.arrive(now, end(1, 1));
    assert_eq!(held(&e, 1), 1, "exchange 1's request was not");
    e.arrive(now, request(1, 1));
    assert_eq!(held(&e, 1), 0, "its request releases it");
}

#[test]
fn a_closed_connections_later_observations_wait_for_their_request_again() {
    let now = Instant::now();
    let mut e = Engine::new(AuditConfig::default(), now);
    e.arrive(now, request(7, 0));
    e.arrive(now, end(7, 0));
    e.arrive(now, Observation::ConnClosed { conn: 7 });
    // The connection's ordering state is gone: nothing of it is known to be requested.
    e.arrive(now, end(7, 0));
    assert_eq!(held(&e, 7), 1);
}

fn waiting(e: &Engine, conn: u64) -> usize {
    e.order.get(&conn).map_or(0, |c| c.waiting.len())
}

fn requested(e: &Engine, conn: u64) -> u64 {
    e.order.get(&conn).map_or(0, |c| c.requests)
}

fn post(conn: u64, seq: u64) -> Observation {
    Observation::Request {
        conn,
        seq,
        method: "POST".into(),
        path: "/mcp".into(),
        session: None,
        last_event_id: None,
        protocol_version: None,
        has_authorization: false,
        idempotency_key: None,
        accepts_event_stream: true,
        body: Some(bytes::Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
        )),
    }
}

fn response(conn: u64, seq: u64) -> Observation {
    Observation::Response {
        conn,
        seq,
        status: 200,
        content_type: Some("text/event-stream".into()),
        session: None,
    }
}

fn cut(conn: u64, exchange: Option<u64>) -> Observation {
    Observation::Cut {
        conn,
        direction: crate::vocab::Direction::Downstream,
        action: crate::vocab::CutAction::Reset,
        point: CutPoint {
            raw_offset: 10,
            request: Some("POST /mcp".into()),
            exchange,
            ..CutPoint::default()
        },
    }
}

fn unknowns(e: &Engine) -> Vec<String> {
    e.l.findings
        .iter()
        .filter(|f| f.kind == FindingKind::Unknown)
        .map(|f| f.detail.clone())
        .collect()
}

#[test]
fn a_request_waits_until_the_response_before_it_ended() {
    let now = Instant::now();
    let mut e = Engine::new(AuditConfig::default(), now);
    e.arrive(now, request(1, 0));
    e.arrive(now, response(1, 0));
    // The client sent request 1 after response 0 ended; its pump ran first.
    e.arrive(now, request(1, 1));
    assert_eq!(waiting(&e, 1), 1, "request 1 waits for response 0's end");
    assert_eq!(requested(&e, 1), 1);
    e.arrive(now, end(1, 0));
    assert_eq!(waiting(&e, 1), 0, "response 0's end lets it in");
    assert_eq!(requested(&e, 1), 2);
    // Once the response before it ended, a request is applied at once.
    e.arrive(now, end(1, 1));
    e.arrive(now, request(1, 2));
    assert_eq!((waiting(&e, 1), requested(&e, 1)), (0, 3));
}

#[test]
fn a_waiting_request_is_applied_at_its_connections_cut() {
    let now = Instant::now();
    let mut e = Engine::new(AuditConfig::default(), now);
    e.arrive(now, request(2, 0));
    e.arrive(now, response(2, 0));
    e.arrive(now, request(2, 1));
    assert_eq!(waiting(&e, 2), 1);
    e.arrive(now, cut(2, Some(0)));
    assert_eq!((waiting(&e, 2), requested(&e, 2)), (0, 2));
}

#[test]
fn a_cut_before_its_exchanges_request_waits_for_it_and_holds_the_other_connections() {
    let now = Instant::now();
    let mut e = Engine::new(AuditConfig::default(), now);
    e.arrive(now, response(3, 0));
    e.arrive(now, end(3, 0));
    e.arrive(now, cut(3, Some(0)));
    assert!(e.held.is_some(), "the cut waits for request 0");
    // Another connection's traffic waits behind it.
    e.arrive(now, request(4, 0));
    assert_eq!(requested(&e, 4), 0, "connection 4 waits behind the cut");
    e.arrive(now, post(3, 0));
    assert!(e.held.is_none(), "the request lifts the cut");
    assert_eq!(requested(&e, 4), 1, "then connection 4 is applied");
    assert!(
        unknowns(&e).is_empty(),
        "nothing unknown: {:?}",
        unknowns(&e)
    );
    // A cut with nothing waiting for a request is applied at once.
    e.arrive(now, request(5, 0));
    e.arrive(now, cut(5, Some(0)));
    assert!(e.held.is_none());
}

#[test]
fn a_cut_whose_request_never_came_opens_only_the_exchange_it_fell_in() {
    let now = Instant::now();
    let mut e = Engine::new(AuditConfig::default(), now);
    e.arrive(now, response(6, 0));
    e.arrive(now, cut(6, Some(0)));
    e.arrive(now, Observation::ConnClosed { conn: 6 });
    let u = unknowns(&e);
    assert_eq!(u.len(), 1, "{u:?}");
    assert!(u[0].contains("never reached the auditor"), "{u:?}");
    // A cut that fell in no exchange's response (a later head) opens nothing from its facts.
    let mut e = Engine::new(AuditConfig::default(), now);
    e.arrive(now, response(7, 0));
    e.arrive(now, cut(7, None));
    e.arrive(now, Observation::ConnClosed { conn: 7 });
    let u = unknowns(&e);
    assert_eq!(u.len(), 1, "{u:?}");
    assert!(u[0].contains("arrived without their request"), "{u:?}");
}
