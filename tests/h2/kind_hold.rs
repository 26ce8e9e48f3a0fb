//! `hold_headers` between real peers through the proxy: a buffering hop that keeps an SSE
//! response's HEADERS until its first DATA. A server that answers at once and sends its first
//! event later is the case that hurts: through the hold, the client has no response at all
//! until that event, and a client whose timeout is shorter than the server's first event hangs
//! until it gives up — Node's `http2`, httpx and Go's `net/http` ("awaiting headers") each log
//! exactly that, curl reports no response code at its `--max-time`, and Chromium's EventSource
//! only opens with its first message. Each is contrasted with the same exchange through the same
//! kind of hop without the fault, where the response arrives at once.
//!
//! What the audit says: the `response-head` latency (request → response head delivered to the
//! client) holds the held time; without the hold it stays near zero.

use std::time::Duration;

use serde_json::Value;
use tearline::audit::Auditor;

use crate::kind_common::*;
use crate::support::certs::Certs;
use crate::support::check::events;
use crate::support::launch::{self, Ask};
use crate::support::peer::{Peer, Server};

const HOLD: [(&str, &str); 2] = [("kind", "hold_headers"), ("until", "first-data")];

fn hold_def() -> Vec<(&'static str, toml::Value)> {
    HOLD.iter().map(|(k, v)| (*k, s(v))).collect()
}

fn hold() -> Vec<std::sync::Arc<dyn tearline::fault::FaultFactory>> {
    vec![fault(&hold_def())]
}

/// One stream whose server answers at once and waits `first_delay` ms before its first event;
/// the client gives up after `timeout_ms`.
fn ask(first_delay: u64, timeout_ms: u64) -> Ask<'static> {
    Ask {
        streams: &["a"],
        n: 2,
        query: format!("first_delay={first_delay}&interval=10"),
        resume: 0,
        timeout_ms,
    }
}

/// `response-head` as the auditor measured it: (largest, count).
fn response_head(auditor: &Auditor) -> (u64, u64) {
    histo_max_ms(auditor, "response-head")
}

#[tokio::test]
async fn held_headers_reach_the_node_client_only_with_the_first_event_and_the_audit_shows_the_hold()
{
    let server = Server::start("node-server", launch::node_server(None)).await;
    let ask = ask(800, 15_000);
    let gap = |log: &[Value]| {
        let t = |ev: &str| times(log, ev, "a").first().copied();
        match (t("response"), t("message")) {
            (Some(r), Some(m)) => m - r,
            _ => panic!("no response or message on a: {}", show(log)),
        }
    };

    let (plain, plain_audit) = audited_hop(&server, None, never(&hold_def())).await;
    let cmd = launch::node_client(&plain.url("http"), None, &ask);
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    assert!(
        gap(&log) >= 500,
        "without the hold, the response came {} ms before the first event (want ≥ 500):\n{}",
        gap(&log),
        show(&log)
    );
    let (head, n) = response_head(&plain_audit);
    assert!(
        n == 1 && head < 300,
        "without the hold the audit's response-head is small: {head} ms over {n}"
    );

    let (held, held_audit) = audited_hop(&server, None, hold()).await;
    let cmd = launch::node_client(&held.url("http"), None, &ask);
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    assert!(
        gap(&log) < 300,
        "held, the response should reach the client with its first event, not {} ms before:\n{}",
        gap(&log),
        show(&log)
    );
    let resp = times(&log, "response", "a")[0];
    let session = first(&log, "session").unwrap_or(0);
    assert!(
        resp - session >= 600,
        "held, the response came {} ms after the session opened (the server waited 800):\n{}",
        resp - session,
        show(&log)
    );
    let (head, n) = response_head(&held_audit);
    assert!(
        n == 1 && head >= 700,
        "held, the audit's response-head shows the hold: {head} ms over {n}"
    );
}

/// Runs `client` through the same hop with the fault never firing and one with it; the server's first event
/// (5 s) comes after the client's timeout (1.5 s). Returns the two logs and the held hop's
/// auditor.
async fn hangs(
    server: &Server,
    certs: Option<&Certs>,
    client: impl Fn(&str) -> (&'static str, std::process::Command),
) -> (Vec<Value>, Vec<Value>, std::sync::Arc<Auditor>) {
    let scheme = if certs.is_some() { "https" } else { "http" };
    let (plain, _) = audited_hop(server, certs, never(&hold_def())).await;
    let (name, cmd) = client(&plain.url(scheme));
    let (_, direct) = Peer::spawn(name, cmd).finish(LIMIT).await;
    let (held, auditor) = audited_hop(server, certs, hold()).await;
    let (name, cmd) = client(&held.url(scheme));
    let started = tokio::time::Instant::now();
    let (code, log) = Peer::spawn(name, cmd).finish(LIMIT).await;
    assert_eq!(code, Some(1), "{name} held: it failed:\n{}", show(&log));
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "{name} held: it gave up only at its timeout"
    );
    (direct, log, auditor)
}

/// The client logged its response without the hold, and none through it, then gave up.
fn no_response_through_the_hold(name: &str, direct: &[Value], held: &[Value]) {
    assert_eq!(
        events(direct, "response").len(),
        1,
        "{name} without the hold: the response came at once:\n{}",
        show(direct)
    );
    assert!(
        events(held, "response").is_empty() && events(held, "message").is_empty(),
        "{name} held: nothing reached the client:\n{}",
        show(held)
    );
    let done = events(held, "done");
    assert!(
        done.len() == 1 && done[0]["complete"] == false,
        "{name} held: it ended incomplete:\n{}",
        show(held)
    );
}

/// The audit saw no response head reach the client while it waited: none at all, or only the
/// one the proxy let go when the client's connection ended (the client waited 1.5 s from its
/// start, its request left a little later; without the hold the head comes within
/// milliseconds).
fn audit_saw_no_head_in_time(name: &str, auditor: &Auditor) {
    let (head, n) = response_head(auditor);
    assert!(
        n == 0 || head >= 1000,
        "{name} held: the audit measured a response head at {head} ms (of {n}), while the client waited"
    );
}

#[tokio::test]
async fn a_held_headers_only_sse_response_leaves_the_node_client_hanging_until_its_timeout() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let (direct, held, auditor) = hangs(&server, None, |url| {
        (
            "node-client",
            launch::node_client(url, None, &ask(5_000, 1_500)),
        )
    })
    .await;
    no_response_through_the_hold("node client", &direct, &held);
    assert_eq!(events(&held, "done")[0]["reason"], "timeout", "{held:?}");
    audit_saw_no_head_in_time("node client", &auditor);
}

#[tokio::test]
async fn a_held_headers_only_sse_response_leaves_httpx_hanging_until_its_timeout() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let (direct, held, auditor) = hangs(&server, None, |url| {
        (
            "py-client",
            launch::py_client(url, None, &ask(5_000, 1_500)),
        )
    })
    .await;
    no_response_through_the_hold("httpx", &direct, &held);
    assert_eq!(events(&held, "done")[0]["reason"], "timeout", "{held:?}");
    audit_saw_no_head_in_time("httpx", &auditor);
}

#[tokio::test]
async fn a_held_headers_only_sse_response_leaves_the_go_client_awaiting_headers_until_its_timeout()
{
    let certs = Certs::new();
    let server = Server::start("node-server", launch::node_server(Some(&certs))).await;
    let (direct, held, auditor) = hangs(&server, Some(&certs), |url| {
        (
            "go-client",
            launch::go_client(url, &certs, &ask(5_000, 1_500)),
        )
    })
    .await;
    no_response_through_the_hold("Go client", &direct, &held);
    assert!(
        events(&held, "error").iter().any(|v| v["message"]
            .as_str()
            .is_some_and(|m| m.contains("awaiting headers"))),
        "Go client held: net/http timed out awaiting headers:\n{}",
        show(&held)
    );
    audit_saw_no_head_in_time("Go client", &auditor);
}

#[tokio::test]
async fn curl_gets_no_response_code_through_the_hold_before_its_max_time() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let run = |url: String| async move {
        let out = tempfile::NamedTempFile::new().unwrap();
        let url = format!("{url}/sse?stream=c&n=2&first_delay=5000");
        let (_, log) = Peer::spawn("curl", launch::curl(&url, None, out.path(), 2))
            .finish(LIMIT)
            .await;
        log.first().cloned().unwrap_or(Value::Null)
    };
    let (plain, _) = audited_hop(&server, None, never(&hold_def())).await;
    let direct = run(plain.url("http")).await;
    let (held, auditor) = audited_hop(&server, None, hold()).await;
    let report = run(held.url("http")).await;
    // 28: operation timed out, both times; only without the hold had the response begun.
    assert_eq!(direct["exitcode"], 28, "curl without the hold: {direct}");
    assert_eq!(
        direct["response_code"], 200,
        "curl without the hold: {direct}"
    );
    assert_eq!(report["exitcode"], 28, "curl held: {report}");
    assert_eq!(
        report["response_code"], 0,
        "curl held: no response at all: {report}"
    );
    audit_saw_no_head_in_time("curl", &auditor);
}

#[tokio::test]
async fn chromium_eventsource_opens_only_with_its_first_message_through_the_hold() {
    let certs = Certs::new();
    let server = Server::start("node-server", launch::node_server(Some(&certs))).await;
    let page = |url: String| format!("{url}/page?streams=a&n=2&first_delay=1500&interval=10");
    let open_to_message = |log: &[Value]| {
        let t = |ev: &str| times(log, ev, "a").first().copied();
        match (t("open"), t("message")) {
            (Some(o), Some(m)) => m - o,
            _ => panic!("no open or message: {}", show(log)),
        }
    };
    let (plain, _) = audited_hop(&server, Some(&certs), never(&hold_def())).await;
    let cmd = launch::chromium(&page(plain.url("https")), 20_000);
    let log = Peer::spawn("chromium", cmd).succeed(LIMIT).await;
    assert!(
        open_to_message(&log) >= 1000,
        "Chromium without the hold: the EventSource opened at once:\n{}",
        show(&log)
    );
    let (held, auditor) = audited_hop(&server, Some(&certs), hold()).await;
    let cmd = launch::chromium(&page(held.url("https")), 20_000);
    let log = Peer::spawn("chromium", cmd).succeed(LIMIT).await;
    assert!(
        open_to_message(&log) < 300,
        "Chromium held: the EventSource opened only with its first message:\n{}",
        show(&log)
    );
    // The page itself is not SSE (only_sse): only the event stream's head was held.
    let (head, n) = response_head(&auditor);
    assert!(
        n >= 2 && head >= 1200,
        "Chromium held: the audit's response-head shows the hold: {head} ms over {n}"
    );
}
