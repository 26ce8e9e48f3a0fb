//! `goaway` between real peers through the proxy: a gateway (an idle timeout, a rolling
//! deploy) that sends `GOAWAY` and then closes. What each client does is read from its own log,
//! what the proxy did and what the audit made of it from the observations through a real
//! auditor:
//!
//! - graceful (`NO_ERROR`, close after a drain), to the client: Node's `http2` keeps reading
//!   through the drain, then reconnects and resumes with `Last-Event-ID`; Go's `net/http`
//!   likewise, and names the GOAWAY in the error the close gives it; httpx (Python `h2`) ends
//!   both streams at the GOAWAY itself — `h2` closes its connection state on a GOAWAY, so even
//!   the streams the GOAWAY lets finish fail (with h2's own `ProtocolError`, not an httpx
//!   error, when more frames arrive in the same read) — and resumes them on a new connection.
//! - an error code (`ENHANCE_YOUR_CALM`, closed at once): curl, which does not retry a
//!   transfer, loses it: it exits with an error and holds only the events before the GOAWAY.
//! - to the server: Node's server logs the GOAWAY; the close then ends the client's streams.
//!
//! Meaningless here: Chromium (its EventSource reconnects from any close, GOAWAY or not: the
//! Node and Go clients already show the reconnect with `Last-Event-ID`), and a stream above the
//! GOAWAY's last stream id with these clients: every one of them opens its streams before the
//! server's SETTINGS arrive or after its GOAWAY was read, never in between, so the refusal of
//! such a stream is shown by the frame-level test in `tests/proxy/h2_kinds.rs` and the audit's
//! judgement of it in `tests/audit/h2.rs`.

use serde_json::Value;
use tearline::audit::FindingClass;
use tearline::vocab::{CutAction, Direction};
use tearline::wire::Observation;

use crate::kind_common::*;
use crate::support::certs::Certs;
use crate::support::check::{self, events, messages};
use crate::support::launch::{self, Ask};
use crate::support::peer::{Peer, Server};

const N: u64 = 12;
const SIZE: usize = 50;
const DRAIN_MS: i64 = 300;

/// A graceful GOAWAY to the client 250 ms into each connection, closed 300 ms later.
fn graceful() -> Vec<std::sync::Arc<dyn tearline::fault::FaultFactory>> {
    vec![fault(&[
        ("kind", s("goaway")),
        ("to", s("client")),
        ("after_ms", i(250)),
        ("code", s("no_error")),
        ("drain_ms", i(DRAIN_MS)),
    ])]
}

/// Two streams of `N` events, 60 ms apart: the GOAWAY falls in the middle of both.
fn ask() -> Ask<'static> {
    Ask {
        streams: &["a", "b"],
        n: N,
        query: format!("interval=60&size={SIZE}"),
        resume: 3,
        timeout_ms: 20_000,
    }
}

/// Every stream complete, each event exactly once, in order.
fn complete(what: &str, log: &[Value]) {
    for st in ["a", "b"] {
        let want: Vec<(String, String)> = (1..=N)
            .map(|k| (k.to_string(), check::data(st, k, SIZE)))
            .collect();
        assert!(
            messages(log, st) == want,
            "{what}: stream {st} complete, each event once:\n{}",
            show(log)
        );
        assert!(
            events(log, "resume").iter().any(|v| v["stream"] == st),
            "{what}: {st} resumed with Last-Event-ID:\n{}",
            show(log)
        );
    }
}

/// The proxy's own GOAWAY to the client, as the auditor received it.
fn proxy_goaway(obs: &[Observation], code: u32, last: u64) -> bool {
    obs.iter().any(|o| {
        matches!(
            o,
            Observation::GoAway {
                direction: Direction::Downstream,
                by_proxy: true,
                code: c,
                last_stream: l,
                ..
            } if *c == code && *l == last
        )
    })
}

/// The close after the GOAWAY, as the proxy recorded it (a FIN, no event torn).
fn closed_by_proxy(obs: &[Observation]) -> bool {
    obs.iter().any(|o| {
        matches!(
            o,
            Observation::Cut {
                action: CutAction::Fin,
                ..
            }
        )
    })
}

/// The audit found nothing lost: the clients resumed. (It does not judge these resumes: both
/// streams number their events 1..N, so a `Last-Event-ID` names an event of either stream and
/// the audit says `unknown`, "resume not judged", rather than guess.)
fn audit_found_no_loss(what: &str, auditor: &tearline::audit::Auditor) {
    let lost: Vec<_> = auditor
        .findings()
        .into_iter()
        .filter(|f| f.class == FindingClass::Loss)
        .collect();
    assert!(lost.is_empty(), "{what}: the audit found a loss: {lost:?}");
}

#[tokio::test]
async fn a_graceful_goaway_lets_the_node_client_drain_then_reconnect_and_resume_both_streams() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let (hop, auditor) = audited_hop(&server, None, graceful()).await;
    let cmd = launch::node_client(&hop.url("http"), None, &ask());
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    let what = "node client after a GOAWAY(NO_ERROR)";
    let goaways = events(&log, "goaway");
    assert!(
        !goaways.is_empty() && goaways[0]["code"] == "NO_ERROR" && goaways[0]["last_stream"] == 3,
        "{what}: the client logged GOAWAY(NO_ERROR, last stream 3):\n{}",
        show(&log)
    );
    // The drain: events still arrive on the first session's streams after the GOAWAY.
    let at = goaways[0]["t_ms"].as_i64().unwrap_or(i64::MAX);
    let drained = events(&log, "message")
        .iter()
        .filter(|v| {
            v["t_ms"].as_i64().is_some_and(|t| t > at) && v["h2_stream"].as_u64() <= Some(3)
        })
        .count();
    assert!(
        drained >= 1,
        "{what}: nothing read in the drain:\n{}",
        show(&log)
    );
    assert!(
        !events(&log, "reconnect").is_empty() && events(&log, "session").len() >= 2,
        "{what}: the client opened a new session:\n{}",
        show(&log)
    );
    complete(what, &log);
    assert!(
        events(&log, "reset").is_empty(),
        "{what}: no RST_STREAM:\n{}",
        show(&log)
    );
    let obs = hop.observations();
    assert!(
        proxy_goaway(&obs, 0, 3),
        "{what}: the proxy's GOAWAY: {obs:?}"
    );
    assert!(closed_by_proxy(&obs), "{what}: the close: {obs:?}");
    audit_found_no_loss(what, &auditor);
    let slog = server.peer.log();
    assert!(
        events(&slog, "request")
            .iter()
            .filter(|v| v["last_event_id"] != "")
            .count()
            >= 2,
        "{what}: the server got both resumes:\n{}",
        show(&slog)
    );
}

#[tokio::test]
async fn httpx_fails_both_streams_at_a_graceful_goaway_and_resumes_them_on_a_new_connection() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let (hop, auditor) = audited_hop(&server, None, graceful()).await;
    let cmd = launch::py_client(&hop.url("http"), None, &ask());
    let log = Peer::spawn("py-client", cmd).succeed(LIMIT).await;
    let what = "httpx after a GOAWAY(NO_ERROR)";
    for st in ["a", "b"] {
        // How h2 fails a stream at a GOAWAY: the GOAWAY itself (httpcore's error carries h2's
        // ConnectionTerminated), or, when more frames came in the same read, h2's own
        // ProtocolError for a frame received "in state ConnectionState.CLOSED" — either way
        // h2 closed its connection state at the GOAWAY.
        let failed = log
            .iter()
            .find(|v| {
                v["stream"] == st
                    && ((v["event"] == "goaway"
                        && v["code"] == "NO_ERROR"
                        && v["last_stream"] == 3)
                        || (v["event"] == "error"
                            && v["message"]
                                .as_str()
                                .is_some_and(|m| m.contains("ConnectionState.CLOSED"))))
            })
            .unwrap_or_else(|| {
                panic!(
                    "{what}: {st} did not fail with the GOAWAY (NO_ERROR, last stream 3):\n{}",
                    show(&log)
                )
            });
        // Not one more event on the failed stream: it ended at the GOAWAY, not at the close,
        // although its stream id is at the GOAWAY's last stream.
        let at = failed["t_ms"].as_i64().unwrap_or(0);
        let resumed = times(&log, "resume", st);
        assert!(
            resumed
                .first()
                .is_some_and(|&t| t >= at && t - at < DRAIN_MS),
            "{what}: {st} resumed at once, before the close:\n{}",
            show(&log)
        );
        let answered = times(&log, "response", st)
            .into_iter()
            .find(|&t| t >= at)
            .unwrap_or(i64::MAX);
        assert!(
            !times(&log, "message", st)
                .iter()
                .any(|&t| t > at && t < answered),
            "{what}: {st} read on after the GOAWAY:\n{}",
            show(&log)
        );
    }
    complete(what, &log);
    let obs = hop.observations();
    assert!(
        proxy_goaway(&obs, 0, 3),
        "{what}: the proxy's GOAWAY: {obs:?}"
    );
    audit_found_no_loss(what, &auditor);
}

#[tokio::test]
async fn the_go_client_reads_through_the_drain_and_resumes_when_the_go_server_is_closed_away() {
    let certs = Certs::new();
    let server = Server::start("go-server", launch::go_server(&certs)).await;
    let (hop, auditor) = audited_hop(&server, Some(&certs), graceful()).await;
    let cmd = launch::go_client(&hop.url("https"), &certs, &ask());
    let log = Peer::spawn("go-client", cmd).succeed(LIMIT).await;
    let what = "Go client after a GOAWAY(NO_ERROR)";
    let goaways = events(&log, "goaway");
    assert!(
        goaways.len() >= 2
            && goaways
                .iter()
                .all(|v| v["code"] == "NO_ERROR" && v["last_stream"] == 3),
        "{what}: both streams ended naming the GOAWAY (NO_ERROR, last stream 3):\n{}",
        show(&log)
    );
    let msg = goaways[0]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("sent GOAWAY and closed the connection"),
        "{what}: net/http says the GOAWAY came with the close: {msg}"
    );
    complete(what, &log);
    let obs = hop.observations();
    assert!(
        proxy_goaway(&obs, 0, 3),
        "{what}: the proxy's GOAWAY: {obs:?}"
    );
    assert!(closed_by_proxy(&obs), "{what}: the close: {obs:?}");
    audit_found_no_loss(what, &auditor);
    // The Go server's side of the close: its handlers saw their requests cancelled.
    let slog = server.peer.log();
    assert!(
        events(&slog, "cancelled").len() >= 2,
        "{what}: the Go server's handlers were cancelled by the close:\n{}",
        show(&slog)
    );
}

#[tokio::test]
async fn curl_loses_its_transfer_at_an_error_goaway_and_holds_only_the_events_before_it() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let calm = fault(&[
        ("kind", s("goaway")),
        ("after_ms", i(300)),
        ("code", s("enhance_your_calm")),
    ]);
    let (hop, _auditor) = audited_hop(&server, None, vec![calm]).await;
    let out = tempfile::NamedTempFile::new().unwrap();
    let url = format!(
        "{}/sse?stream=c&n={N}&interval=60&size={SIZE}",
        hop.url("http")
    );
    let (code, log) = Peer::spawn("curl", launch::curl(&url, None, out.path(), 15))
        .finish(LIMIT)
        .await;
    let what = "curl after a GOAWAY(ENHANCE_YOUR_CALM)";
    let report = log.first().cloned().unwrap_or(Value::Null);
    assert_ne!(code, Some(0), "{what}: curl said it succeeded: {report}");
    assert_ne!(report["exitcode"], 0, "{what}: {report}");
    assert_eq!(report["response_code"], 200, "{what}: {report}");
    let body = std::fs::read_to_string(out.path()).unwrap();
    let whole = check::body("c", N, SIZE);
    assert!(
        !body.is_empty() && body.len() < whole.len() && whole.starts_with(&body),
        "{what}: curl holds a prefix of the stream, not all of it ({} of {} bytes)",
        body.len(),
        whole.len()
    );
    let obs = hop.observations();
    assert!(
        proxy_goaway(&obs, 11, 1),
        "{what}: the proxy's GOAWAY(ENHANCE_YOUR_CALM, last stream 1): {obs:?}"
    );
    assert!(closed_by_proxy(&obs), "{what}: closed at once: {obs:?}");
}

#[tokio::test]
async fn a_goaway_to_the_server_is_logged_by_the_node_server_and_the_close_makes_the_client_resume()
{
    let server = Server::start("node-server", launch::node_server(None)).await;
    let to_server = fault(&[
        ("kind", s("goaway")),
        ("to", s("server")),
        ("after_ms", i(250)),
        ("drain_ms", i(150)),
    ]);
    let (hop, auditor) = audited_hop(&server, None, vec![to_server]).await;
    let cmd = launch::node_client(&hop.url("http"), None, &ask());
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    let what = "a GOAWAY(NO_ERROR) to the Node server";
    let slog = server.peer.log();
    let goaways = events(&slog, "goaway");
    assert!(
        goaways
            .iter()
            .any(|v| v["code"] == "NO_ERROR" && v["last_stream"] == 0),
        "{what}: the server logged GOAWAY(NO_ERROR, last stream 0: it pushed nothing):\n{}",
        show(&slog)
    );
    assert!(
        events(&log, "goaway").iter().all(|v| v["last_stream"] != 0),
        "{what}: the client never saw the proxy's GOAWAY:\n{}",
        show(&log)
    );
    complete(what, &log);
    let obs = hop.observations();
    assert!(
        obs.iter().any(|o| matches!(
            o,
            Observation::GoAway {
                direction: Direction::Upstream,
                by_proxy: true,
                last_stream: 0,
                code: 0,
                ..
            }
        )),
        "{what}: the proxy's GOAWAY to the server: {obs:?}"
    );
    audit_found_no_loss(what, &auditor);
}
