//! `refuse_streams` between real peers through the proxy: a gateway at its concurrency limit
//! (`max_concurrent = 1`) that answers the second stream with `RST_STREAM(REFUSED_STREAM)` —
//! "not processed, safe to retry". Each client opens two SSE streams at once (httpx: the second
//! right after the first's response) and shows what it does with the refusal:
//!
//! - Node's `http2` and httpx surface the refusal to the application (`reset`,
//!   `REFUSED_STREAM`), which retries here after a back-off (`--retry-delay`) once the first
//!   stream is done;
//! - Go's `net/http` retries a refused stream by itself (its HTTP/2 transport backs off and
//!   re-sends; `GODEBUG=http2debug=1` makes it say so), the application never sees it;
//! - curl (`--parallel`, both transfers multiplexed on one connection) retries the refused
//!   transfer by itself on a new connection ("retrying a fresh connect").
//!
//! What the audit says: `stream-reset` naming the proxy's refusal of that h2 stream (the audit
//! judges it not processed; these streams carry no JSON-RPC call, so there is no call to be
//! `abandoned` or `reissued` — that judgement is `tests/audit/h2.rs`'s), and nothing of the kind
//! when the limit is not reached. Chromium is left out: it queues streams at the server's
//! announced limit, and the proxy's limit is below it, which only shows as another client's
//! refusal.

use serde_json::Value;
use tearline::audit::{Auditor, FindingKind};
use tearline::vocab::Direction;
use tearline::wire::Observation;

use crate::kind_common::*;
use crate::support::audited;
use crate::support::certs::Certs;
use crate::support::check::{self, complete_and_exact, events};
use crate::support::launch::{self, Ask};
use crate::support::peer::{Peer, Server};

const N: u64 = 6;

fn refuse(max: i64) -> Vec<std::sync::Arc<dyn tearline::fault::FaultFactory>> {
    vec![fault(&[
        ("kind", s("refuse_streams")),
        ("max_concurrent", i(max)),
    ])]
}

/// Two streams of `N` events 50 ms apart, each retried up to five times.
fn ask() -> Ask<'static> {
    Ask {
        streams: &["a", "b"],
        n: N,
        query: "interval=50".into(),
        resume: 5,
        timeout_ms: 20_000,
    }
}

/// The proxy refused h2 stream `stream` of connection `conn` (as the auditor received it).
fn refused_by_proxy(obs: &[Observation], conn: u64, stream: u64) -> bool {
    obs.iter().any(|o| {
        matches!(
            o,
            Observation::StreamReset {
                conn: c,
                seq,
                direction: Direction::Downstream,
                code: 7,
                by_proxy: true,
            } if *c == conn && *seq == stream
        )
    })
}

/// The audit's `stream-reset` findings that name the proxy's refusal.
fn refusals(auditor: &Auditor) -> Vec<(u64, Option<u64>)> {
    audited::of(auditor, FindingKind::StreamReset)
        .into_iter()
        .filter(|f| {
            f.detail
                .contains("RST_STREAM(REFUSED_STREAM) sent by the proxy")
                && f.detail.contains("never processed")
        })
        .map(|f| (f.stream.conn, f.stream.h2_stream))
        .collect()
}

/// The client logged `REFUSED_STREAM` on stream `b`, retried it after `a` ended, and completed
/// both; the server was told to abandon the refused stream and wrote nothing on it.
fn refused_then_retried(what: &str, log: &[Value], server: &Server) -> u64 {
    // b is refused at least once (again if a retry comes while a is still open), a never.
    let resets = events(log, "reset");
    assert!(
        !resets.is_empty()
            && resets
                .iter()
                .all(|r| r["stream"] == "b" && r["code"] == "REFUSED_STREAM"),
        "{what}: the client saw b refused:\n{}",
        show(log)
    );
    let refused = resets[0]["h2_stream"].as_u64().unwrap_or(0);
    let a_end = times(log, "end", "a").first().copied().unwrap_or(i64::MAX);
    let b_ok = events(log, "response")
        .into_iter()
        .find(|v| v["stream"] == "b" && v["status"] == 200)
        .unwrap_or_else(|| panic!("{what}: b was never answered:\n{}", show(log)));
    assert!(
        b_ok["t_ms"].as_i64().is_some_and(|t| t >= a_end)
            && b_ok["h2_stream"].as_u64() > Some(refused),
        "{what}: b's retry came on a later stream once a was done:\n{}",
        show(log)
    );
    for st in ["a", "b"] {
        let want: Vec<(String, String)> = (1..=N)
            .map(|k| (k.to_string(), check::data(st, k, 0)))
            .collect();
        assert_eq!(check::messages(log, st), want, "{what}: stream {st}");
    }
    let slog = server.peer.log();
    assert!(
        events(&slog, "reset")
            .iter()
            .any(|v| v["h2_stream"].as_u64() == Some(refused) && v["code"] == "CANCEL"),
        "{what}: the server was told to abandon stream {refused}:\n{}",
        show(&slog)
    );
    assert!(
        !events(&slog, "end")
            .iter()
            .any(|v| v["h2_stream"].as_u64() == Some(refused)),
        "{what}: the server served the refused stream:\n{}",
        show(&slog)
    );
    refused
}

#[tokio::test]
async fn the_node_client_sees_refused_stream_and_its_retry_after_the_first_stream_is_served() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let (hop, auditor) = audited_hop(&server, None, refuse(1)).await;
    let mut cmd = launch::node_client(&hop.url("http"), None, &ask());
    cmd.args(["--retry-delay", "300"]);
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    let what = "node client at max_concurrent = 1";
    let refused = refused_then_retried(what, &log, &server);
    assert!(
        refused_by_proxy(&hop.observations(), 0, refused),
        "{what}: the proxy's refusal"
    );
    assert!(
        refusals(&auditor).contains(&(0, Some(refused))),
        "{what}: the audit names the refusal:\n{}",
        audited::show(&auditor)
    );
}

#[tokio::test]
async fn httpx_sees_refused_stream_and_its_retry_after_the_first_stream_is_served() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let (hop, auditor) = audited_hop(&server, None, refuse(1)).await;
    let mut cmd = launch::py_client(&hop.url("http"), None, &ask());
    cmd.args(["--retry-delay", "300"]);
    let log = Peer::spawn("py-client", cmd).succeed(LIMIT).await;
    let what = "httpx at max_concurrent = 1";
    let refused = refused_then_retried(what, &log, &server);
    assert_eq!(
        events(&log, "reset")[0]["remote"],
        true,
        "{what}: from the wire"
    );
    assert!(
        refused_by_proxy(&hop.observations(), 0, refused),
        "{what}: the proxy's refusal"
    );
    assert!(
        refusals(&auditor).contains(&(0, Some(refused))),
        "{what}: the audit names the refusal:\n{}",
        audited::show(&auditor)
    );
}

#[tokio::test]
async fn the_go_client_retries_a_refused_stream_by_itself_against_the_go_server() {
    let certs = Certs::new();
    let server = Server::start("go-server", launch::go_server(&certs)).await;
    let (hop, auditor) = audited_hop(&server, Some(&certs), refuse(1)).await;
    let mut cmd = launch::go_client(&hop.url("https"), &certs, &ask());
    cmd.env("GODEBUG", "http2debug=1");
    let peer = Peer::spawn("go-client", cmd);
    let stderr = peer.stderr();
    let log = peer.succeed(LIMIT).await;
    let what = "Go client at max_concurrent = 1";
    for st in ["a", "b"] {
        let want: Vec<(String, String)> = (1..=N)
            .map(|k| (k.to_string(), check::data(st, k, 0)))
            .collect();
        assert_eq!(check::messages(&log, st), want, "{what}: stream {st}");
    }
    let done = events(&log, "done");
    assert!(
        done.len() == 1 && done[0]["complete"] == true,
        "{what}: {}",
        show(&log)
    );
    // The proxy forwards a refused stream's header block to the server (HPACK) and cancels
    // it; a server that answers before it reads the CANCEL (Go's does, at times) has its
    // response HEADERS reach the client after the REFUSED_STREAM, and net/http then returns
    // that response and fails reading its body with the refusal: the application sees a
    // reset, and retries it here. Any reset it saw is that refusal, never another.
    assert!(
        events(&log, "reset")
            .iter()
            .all(|r| r["code"] == "REFUSED_STREAM"),
        "{what}: {}",
        show(&log)
    );
    let said = stderr.lock().unwrap().clone();
    assert!(
        said.contains("retrying after failure") && said.contains("REFUSED_STREAM"),
        "{what}: net/http's transport retried the refused stream itself:\n{said}"
    );
    // The refusal and the re-send, as the proxy saw them: a request for one of the streams
    // refused, then the same path again on a later stream.
    let obs = hop.observations();
    let refused: Vec<u64> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::StreamReset {
                seq,
                direction: Direction::Downstream,
                code: 7,
                by_proxy: true,
                ..
            } => Some(*seq),
            _ => None,
        })
        .collect();
    assert!(!refused.is_empty(), "{what}: the proxy refused: {obs:?}");
    let requests: Vec<(u64, String)> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::Request { seq, path, .. } => Some((*seq, path.clone())),
            _ => None,
        })
        .collect();
    let path = &requests
        .iter()
        .find(|(s, _)| *s == refused[0])
        .unwrap_or_else(|| panic!("{what}: no request of the refused stream: {obs:?}"))
        .1;
    assert!(
        requests.iter().filter(|(_, p)| p == path).count() >= 2,
        "{what}: the refused request was sent again: {requests:?}"
    );
    assert!(
        !refusals(&auditor).is_empty(),
        "{what}: the audit names the refusal:\n{}",
        audited::show(&auditor)
    );
}

#[tokio::test]
async fn curl_retries_the_refused_one_of_two_parallel_transfers_on_a_new_connection() {
    // Over TLS: curl 7.88 fails the second of two `--parallel` transfers over h2c prior
    // knowledge even without a proxy, so only h2 by ALPN shows what a refusal does to it.
    let certs = Certs::new();
    let server = Server::start("node-server", launch::node_server(Some(&certs))).await;
    let (hop, auditor) = audited_hop(&server, Some(&certs), refuse(1)).await;
    let outs = [
        tempfile::NamedTempFile::new().unwrap(),
        tempfile::NamedTempFile::new().unwrap(),
    ];
    let urls: Vec<(String, &std::path::Path)> = ["c", "d"]
        .iter()
        .zip(&outs)
        .map(|(st, out)| {
            (
                format!("{}/sse?stream={st}&n={N}&interval=50", hop.url("https")),
                out.path(),
            )
        })
        .collect();
    let mut cmd = curl_parallel(&urls, Some(&certs), 15);
    cmd.args(["--verbose", "--stderr", "-"]);
    let (code, log) = Peer::spawn("curl", cmd).finish(LIMIT).await;
    let what = "curl --parallel at max_concurrent = 1";
    let reports = curl_reports(&log);
    let said: Vec<&str> = log.iter().filter_map(Value::as_str).collect();
    // curl waits for the server's SETTINGS, multiplexes both transfers on that connection,
    // and the second is refused: curl says it retries it, on a connection of its own.
    assert!(
        said.iter().any(|l| l.contains("retrying a fresh connect")),
        "{what}: curl said it retried:\n{}",
        said.join("\n")
    );
    assert_eq!(code, Some(0), "{what}: {reports:?}");
    assert!(
        reports.len() == 2
            && reports.iter().all(|r| r["exitcode"] == 0
                && r["response_code"] == 200
                && r["http_version"] == "2"
                && r["num_connects"] == 1),
        "{what}: both served over h2, each on a connection it opened: {reports:?}"
    );
    for (st, out) in ["c", "d"].iter().zip(&outs) {
        let body = std::fs::read_to_string(out.path()).unwrap();
        assert!(body == check::body(st, N, 0), "{what}: {st}'s body");
    }
    let obs = hop.observations();
    let opened = obs
        .iter()
        .filter(|o| matches!(o, Observation::ConnOpened { .. }))
        .count();
    assert_eq!(opened, 2, "{what}: the retry's own connection: {obs:?}");
    assert!(
        refused_by_proxy(&obs, 0, 3),
        "{what}: the second stream refused: {obs:?}"
    );
    assert_eq!(
        refusals(&auditor),
        [(0, Some(3))],
        "{what}: the audit names the refusal:\n{}",
        audited::show(&auditor)
    );
}

#[tokio::test]
async fn under_the_limit_nothing_is_refused_and_the_audit_says_nothing_of_it() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let (hop, auditor) = audited_hop(&server, None, refuse(2)).await;
    let cmd = launch::node_client(&hop.url("http"), None, &ask());
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    complete_and_exact("node client at max_concurrent = 2", &log, &["a", "b"], N, 0);
    // `findings` applies everything recorded so far before it answers.
    assert!(
        audited::of(&auditor, FindingKind::StreamReset).is_empty(),
        "no refusal, no stream-reset:\n{}",
        audited::show(&auditor)
    );
    assert!(
        !hop.observations()
            .iter()
            .any(|o| matches!(o, Observation::StreamReset { .. })),
        "nothing was reset"
    );
}
