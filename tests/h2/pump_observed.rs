//! HTTP/2 through an observing proxy with no h2 fault: the connection goes through the byte
//! pumps (not the stream relay, which only h2 faults call for), with the h2 observer the
//! client's preface picks. It must see what it sees on HTTP/1.1 — per stream the request, the
//! response head, every SSE event the client got, and the stream's clean end — and the real
//! auditor behind it must hold every stream, judged, with no finding (a clean run gives none).
//!
//! Why real peers: an h2 server sends its `SETTINGS` the moment it accepts, usually before the
//! client's preface reaches the proxy; only real peers give that order (it once left the
//! observer on HTTP/1.1 for the whole connection, recording requests and nothing else).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tearline::audit::Auditor;
use tearline::vocab::WireProtocol;
use tearline::wire::Observation;

use crate::support::audited;
use crate::support::certs::Certs;
use crate::support::check::{complete_and_exact, messages};
use crate::support::launch::{self, Ask};
use crate::support::peer::{Peer, Server};
use crate::support::route::{self, Hop, Route};

const LIMIT: Duration = Duration::from_secs(20);
const STREAMS: [&str; 2] = ["a", "b"];
const N: u64 = 5;
const SIZE: usize = 300;

fn ask() -> Ask<'static> {
    Ask {
        streams: &STREAMS,
        n: N,
        query: format!("interval=10&size={SIZE}"),
        resume: 0,
        timeout_ms: 15_000,
    }
}

/// Waits (bounded) until the proxy recorded the close of the connection that carried the
/// requests, so that everything the observer holds was released; returns that connection.
async fn closed_conn(hop: &Hop, what: &str) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let obs = hop.observations();
        let conn = obs.iter().find_map(|o| match o {
            Observation::Request { conn, .. } => Some(*conn),
            _ => None,
        });
        if let Some(c) = conn
            && obs
                .iter()
                .any(|o| matches!(o, Observation::ConnClosed { conn } if *conn == c))
        {
            return c;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: no request seen on a closed connection:\n{obs:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The observations of `conn` about stream `seq`, in order.
fn of_stream(obs: &[Observation], conn: u64, seq: u64) -> Vec<&Observation> {
    obs.iter()
        .filter(|o| match o {
            Observation::Request {
                conn: c, seq: s, ..
            }
            | Observation::Response {
                conn: c, seq: s, ..
            }
            | Observation::ResponseBody {
                conn: c, seq: s, ..
            }
            | Observation::SseEvent {
                conn: c, seq: s, ..
            }
            | Observation::StreamEnd {
                conn: c, seq: s, ..
            }
            | Observation::StreamReset {
                conn: c, seq: s, ..
            }
            | Observation::ObserverGaveUp {
                conn: c, seq: s, ..
            } => *c == conn && *s == seq,
            _ => false,
        })
        .collect()
}

/// Per stream the client followed: one request, then its `200 text/event-stream` head, one
/// event per message the client logged (same ids, same data lengths, in order), and one clean
/// end after them — nothing else; and the connection announced as `protocol`, never cut.
fn every_stream_observed(
    what: &str,
    log: &[Value],
    obs: &[Observation],
    conn: u64,
    protocol: WireProtocol,
) {
    assert!(
        obs.iter()
            .any(|o| matches!(o, Observation::Protocol { conn: c, protocol: p } if *c == conn && *p == protocol)),
        "{what}: connection {conn} announced as {protocol:?}:\n{obs:#?}"
    );
    assert!(
        !obs.iter()
            .any(|o| matches!(o, Observation::Cut { .. } | Observation::StreamReset { .. })),
        "{what}: nothing was cut or reset:\n{obs:#?}"
    );
    for s in STREAMS {
        let want = messages(log, s);
        assert_eq!(want.len() as u64, N, "{what}: the client got stream {s}");
        let marker = format!("stream={s}&");
        let seqs: Vec<u64> = obs
            .iter()
            .filter_map(|o| match o {
                Observation::Request {
                    conn: c, seq, path, ..
                } if *c == conn && path.contains(&marker) => Some(*seq),
                _ => None,
            })
            .collect();
        assert_eq!(
            seqs.len(),
            1,
            "{what}: one request for stream {s}:\n{obs:#?}"
        );
        let seq = seqs[0];
        assert_eq!(
            seq % 2,
            1,
            "{what}: an h2 exchange is keyed by its (odd) stream id"
        );
        let seen = of_stream(obs, conn, seq);
        let show = format!("{seen:#?}");
        let [request, response, rest @ ..] = &seen[..] else {
            panic!("{what}: stream {s} has no request and response:\n{show}");
        };
        assert!(
            matches!(request, Observation::Request { method, .. } if method == "GET"),
            "{what}: {show}"
        );
        assert!(
            matches!(response, Observation::Response { status: 200, content_type: Some(ct), .. }
                if ct.starts_with("text/event-stream")),
            "{what}: stream {s} response head:\n{show}"
        );
        let [events @ .., end] = rest else {
            panic!("{what}: stream {s} has no end:\n{show}");
        };
        assert!(
            matches!(end, Observation::StreamEnd { clean: true, .. }),
            "{what}: stream {s} ends clean, last:\n{show}"
        );
        let got: Vec<(Option<String>, u64)> = events
            .iter()
            .map(|o| match o {
                Observation::SseEvent { id, data_len, .. } => (id.clone(), *data_len),
                other => {
                    panic!("{what}: stream {s}: only events between head and end, got {other:?}")
                }
            })
            .collect();
        let want: Vec<(Option<String>, u64)> = want
            .iter()
            .map(|(id, data)| (Some(id.clone()), data.len() as u64))
            .collect();
        assert_eq!(
            got, want,
            "{what}: stream {s}: the events the client logged"
        );
    }
}

/// The auditor holds both streams, ended and judged, every event of both, the latencies of
/// both, and found nothing.
fn audit_clean(what: &str, auditor: &Auditor) {
    auditor.finish();
    assert!(
        auditor.findings().is_empty(),
        "{what}: findings:\n{}",
        audited::show(auditor)
    );
    assert_eq!(
        auditor.tracked_streams(),
        STREAMS.len(),
        "{what}: {}",
        auditor.summary()
    );
    let events = STREAMS.len() * N as usize;
    assert_eq!(
        auditor.remembered_events(),
        events,
        "{what}: {}",
        auditor.summary()
    );
    let histos = auditor.histograms();
    for (name, n) in [
        ("response-head", STREAMS.len() as u64),
        ("first-event", STREAMS.len() as u64),
        ("event-gap", (events - STREAMS.len()) as u64),
    ] {
        assert_eq!(
            histos[name].len(),
            n,
            "{what}: {name}: {}",
            auditor.summary()
        );
    }
}

/// Runs `client` (its command made for the hop's URL) through an observing proxy to `server`
/// with no fault, a real auditor behind it, and checks the client, the observations and the
/// audit.
async fn observed_without_faults(
    what: &str,
    server: &Server,
    certs: Option<&Certs>,
    protocol: WireProtocol,
    client: impl FnOnce(&str) -> std::process::Command,
) {
    let (r, scheme) = match certs {
        Some(_) => (Route::Terminated, "https"),
        None => (Route::Observed, "http"),
    };
    let hop = route::open(r, server.addr(), certs, |_| {}).await;
    let auditor: Arc<Auditor> = audited::audit(&hop);
    let log = Peer::spawn(what, client(&hop.url(scheme)))
        .succeed(LIMIT)
        .await;
    complete_and_exact(what, &log, &STREAMS, N, SIZE);
    let conn = closed_conn(&hop, what).await;
    every_stream_observed(what, &log, &hop.observations(), conn, protocol);
    audit_clean(what, &auditor);
}

#[tokio::test]
async fn node_h2c_through_the_observing_pumps_observes_every_stream_and_the_audit_finds_nothing() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    observed_without_faults(
        "node client, h2c",
        &server,
        None,
        WireProtocol::H2c,
        |url| launch::node_client(url, None, &ask()),
    )
    .await;
}

#[tokio::test]
async fn h2_over_tls_through_the_terminating_pumps_observes_every_stream_and_the_audit_finds_nothing()
 {
    let certs = Certs::new();
    let server = Server::start("node-server", launch::node_server(Some(&certs))).await;
    observed_without_faults(
        "go client, h2 over TLS",
        &server,
        Some(&certs),
        WireProtocol::H2,
        |url| launch::go_client(url, &certs, &ask()),
    )
    .await;
    observed_without_faults(
        "node client, h2 over TLS",
        &server,
        Some(&certs),
        WireProtocol::H2,
        |url| launch::node_client(url, Some(&certs), &ask()),
    )
    .await;
}
