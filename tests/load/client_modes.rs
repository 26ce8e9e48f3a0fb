//! `tearline load`'s client modes a user needs to check an audit (issue 13): `--client-bug
//! stale-cursor` reaches the MCP client's configuration, and `--client eventsource` (through
//! the binary) reads a plain SSE feed the proxy cuts mid-event, resumes it by `Last-Event-ID`
//! with a 404 side request on the same pool, and the audit of that traffic says only
//! `torn-cut` and `replay-exact`. Real sockets on 127.0.0.1 port 0.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use tearline::accuracy::run::OnConnections;
use tearline::audit::{AuditConfig, Auditor};
use tearline::cmd::load::{Args, ClientBug, ClientKind};
use tearline::fault::sse_cut::{CutTarget, SseCutConfig};
use tearline::lab::{LabConfig, serve};
use tearline::proxy::{Proxy, ProxyConfig};
use tearline::vocab::CutAction;
use tearline::wire::{ObservationSink, SseClass};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Load {
    #[command(flatten)]
    args: Args,
}

fn parse(argv: &[&str]) -> Args {
    Load::try_parse_from(std::iter::once("load").chain(argv.iter().copied()))
        .expect("flags parse")
        .args
}

#[test]
fn client_bug_stale_cursor_sets_the_mcp_clients_bug_and_is_off_by_default() {
    let a = parse(&["--client-bug", "stale-cursor"]);
    assert_eq!(a.client_bug, Some(ClientBug::StaleCursor));
    assert!(tearline::cmd::load::config(&a).unwrap().stale_cursor);
    let a = parse(&[]);
    assert_eq!(a.client, ClientKind::Mcp);
    assert!(!tearline::cmd::load::config(&a).unwrap().stale_cursor);
}

#[test]
fn eventsource_client_rejects_mcp_only_flags() {
    let a = parse(&["--client", "eventsource", "--client-bug", "stale-cursor"]);
    let e = tearline::cmd::load::eventsource::config(&a).unwrap_err();
    assert!(e.to_string().contains("--client-bug"), "{e}");
    let a = parse(&["--client", "eventsource", "--side-path", "/favicon.ico"]);
    let c = tearline::cmd::load::eventsource::config(&a).unwrap();
    assert_eq!(c.side_path.as_deref(), Some("/favicon.ico"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventsource_binary_resumes_a_cut_plain_feed_and_the_audit_says_only_torn_cut_and_replay_exact()
 {
    let token = CancellationToken::new();
    let _stop = token.clone().drop_guard();
    let lab_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let lab_addr = lab_listener.local_addr().unwrap();
    let lab = LabConfig {
        plain_path: Some("/events".to_owned()),
        retry: Duration::from_millis(10),
        ..LabConfig::default()
    };
    tokio::spawn(serve(lab_listener, lab, token.clone()));

    // The first connection's stream is cut inside a data value of its fourth or later event.
    let cut = tearline::fault::sse_cut::factory(SseCutConfig {
        at: CutTarget::Classes(vec![(SseClass::MidValue, 1.0)]),
        leg: tearline::fault::sse_cut::Leg::First,
        range: (0, 0),
        events: Some((3, 12)),
        nth: None,
        method: Some("GET".to_owned()),
        path: None,
        action: CutAction::Reset,
        stall: None,
        outage: None,
        probability: 1.0,
    });
    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    let proxy = Proxy::with_faults(
        ProxyConfig::new("es", lab_addr.to_string()),
        vec![OnConnections::new(cut, vec![0])],
    );
    let sink: Arc<dyn ObservationSink> = auditor.clone();
    let obs = sink.clone();
    proxy.set_observer_factory(Arc::new(move |conn| {
        tearline::wire::http1::observer_pair(conn, obs.clone())
    }));
    proxy.set_sink(Some(sink));
    let proxy_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_addr = proxy_listener.local_addr().unwrap();
    tokio::spawn(tearline::proxy::run(
        proxy_listener,
        Arc::clone(&proxy),
        token.clone(),
    ));

    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tearline"))
            .args([
                "load",
                "--client",
                "eventsource",
                "--target",
                &format!("http://{proxy_addr}/events"),
                "--side-path",
                "/favicon.ico",
                "--max-attempts",
                "4",
                "--timeout",
                "10s",
                "--backoff",
                "10ms",
                "--json",
            ])
            .output(),
    )
    .await
    .expect("the client finishes within 30 s")
    .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON outcome");
    assert_eq!(v["complete"], true, "{v}");
    assert_eq!(
        v["events"],
        tearline::lab::plain::PLAIN_EVENTS,
        "every event once: {v}"
    );
    assert!(v["connections"].as_u64() >= Some(2), "it resumed: {v}");

    // Bounded wait for the proxy to see the client's connections go, then judge.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while proxy.stats().snapshot().connections_open > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    auditor.finish();
    let kinds: BTreeSet<String> = auditor
        .counts()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, _)| k)
        .collect();
    let want: BTreeSet<String> = ["torn-cut", "replay-exact"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(kinds, want, "{:#?}", auditor.findings());
}
