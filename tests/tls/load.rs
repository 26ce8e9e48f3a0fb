//! The load client over HTTPS: through `proxy` terminating TLS with a local-CA certificate, in
//! front of the lab, a `fin` cut at `before-dispatch` ends the TLS session without
//! `close_notify`; the strict client never counts such a call complete, and the cuts are
//! recorded as truncations.

use std::time::Duration;

use crate::common::tls::*;
use tearline::fault::sse_cut::{SseCutConfig, factory};
use tearline::lab::{LabConfig, serve};
use tearline::load::{self, LoadConfig, Policy, Stop, Target};
use tearline::tls::TlsEnd;
use tearline::wire::{Observation, SseClass};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

async fn lab() -> (std::net::SocketAddr, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(listener, LabConfig::default(), shutdown.clone()));
    (addr, shutdown)
}

#[tokio::test]
async fn load_reaches_the_lab_over_https_with_cacert() {
    let (lab, stop) = lab().await;
    let proxy_ca = tempfile::tempdir().unwrap();
    let t = terminator(proxy_ca.path());
    let ca = t.ca_file().unwrap().to_owned();
    let p = start_proxy(&lab.to_string(), |c| c.tls.client = Some(t), Vec::new()).await;
    let url = format!("https://localhost:{}/mcp", p.addr.port());
    let target = Target::parse_with_ca(&url, &[ca]).unwrap();
    assert_eq!(target.to_string(), url);
    let mut cfg = LoadConfig::new(
        target,
        "blob",
        serde_json::json!({"size": 65536, "lines": 3}),
    );
    cfg.sessions = 2;
    cfg.stop = Stop::Calls(6);
    cfg.call_timeout = Duration::from_secs(10);
    let o = tokio::time::timeout(
        Duration::from_secs(30),
        load::run(cfg, CancellationToken::new()),
    )
    .await
    .expect("run finishes")
    .expect("the lab answers over TLS");
    assert_eq!((o.counters.calls, o.counters.ok), (6, 6), "{:?}", o.errors);
    stop.cancel();
}

#[tokio::test]
async fn load_without_the_ca_fails_with_an_unknown_issuer_error() {
    let (lab, stop) = lab().await;
    let proxy_ca = tempfile::tempdir().unwrap();
    let t = terminator(proxy_ca.path());
    let p = start_proxy(&lab.to_string(), |c| c.tls.client = Some(t), Vec::new()).await;
    let url = format!("https://localhost:{}/mcp", p.addr.port());
    let cfg = LoadConfig::new(Target::parse(&url).unwrap(), "blob", serde_json::json!({}));
    let err = tokio::time::timeout(
        Duration::from_secs(20),
        load::run(cfg, CancellationToken::new()),
    )
    .await
    .expect("run finishes")
    .expect_err("an untrusted certificate must stop the run");
    let chain = format!("{:#}", anyhow_chain(&err));
    assert!(chain.contains("unknown issuer"), "{chain}");
    stop.cancel();
}

fn anyhow_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[tokio::test]
async fn strict_client_never_counts_a_truncated_before_dispatch_call_complete() {
    let (lab, stop) = lab().await;
    let proxy_ca = tempfile::tempdir().unwrap();
    let t = terminator(proxy_ca.path());
    let ca = t.ca_file().unwrap().to_owned();
    let cut: SseCutConfig = toml::from_str("at = \"before-dispatch\"\naction = \"fin\"").unwrap();
    let p = start_proxy(
        &lab.to_string(),
        |c| c.tls.client = Some(t),
        vec![factory(cut)],
    )
    .await;
    let url = format!("https://localhost:{}/mcp", p.addr.port());
    let mut cfg = LoadConfig::new(
        Target::parse_with_ca(&url, &[ca]).unwrap(),
        "blob",
        serde_json::json!({"size": 4096, "lines": 3}),
    );
    cfg.policy = Policy::Strict;
    cfg.sessions = 1;
    cfg.stop = Stop::Calls(2);
    cfg.max_attempts = 3;
    cfg.call_timeout = Duration::from_secs(5);
    let o = tokio::time::timeout(
        Duration::from_secs(30),
        load::run(cfg, CancellationToken::new()),
    )
    .await
    .expect("run finishes")
    .expect("the lab answers over TLS");
    let c = o.counters;
    assert_eq!(c.calls, 2, "{c:?}");
    assert_eq!(
        (c.ok, c.silent_loss),
        (0, 0),
        "every stream is cut: {c:?} {:?}",
        o.errors
    );
    let cuts: Vec<_> = p
        .rec
        .0
        .lock()
        .unwrap()
        .iter()
        .filter_map(|o| match o {
            Observation::Cut { point, .. } => Some((point.class, point.tls_end)),
            _ => None,
        })
        .collect();
    assert!(!cuts.is_empty());
    for cut in cuts {
        assert_eq!(
            cut,
            (Some(SseClass::BeforeDispatch), Some(TlsEnd::Truncated))
        );
    }
    stop.cancel();
}
