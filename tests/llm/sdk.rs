//! The five LLM SDKs of issue 27 (PyPI `openai`, `anthropic`; npm `openai`, `@anthropic-ai/sdk`,
//! `ai` with `@ai-sdk/openai` and `@ai-sdk/anthropic`; pinned in tests/peers) against the lab's
//! LLM endpoints: every client (SDK × API × call style) gets complete answers — text and a tool
//! call — directly and through tearline with no fault, and the audit finds nothing there.
//!
//! All runs of one SDK go to one driver process (the SDK is loaded once), the five processes
//! side by side, each with a bounded number of runs in flight.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::support::CellProxy;
use crate::support::drivers::{Job, Mode, Outcome, clients, run_jobs};
use tearline::lab::{LabConfig, serve};
use tearline::proxy::CancellationToken;
use tokio::net::TcpListener;

/// Runs in flight per SDK driver.
const PARALLEL: usize = 6;

/// The lab (its LLM endpoints with their defaults) on a port the OS picks.
pub async fn lab() -> (SocketAddr, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the lab");
    let addr = listener.local_addr().expect("lab address");
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, LabConfig::default(), stop.clone()));
    (addr, stop)
}

/// The finish reasons of a complete answer, per client family and mode.
fn normal_finish(o: &Outcome, mode: Mode) -> bool {
    let f = o.finish.as_deref().unwrap_or("");
    match mode {
        Mode::Text => ["stop", "completed", "end_turn"].contains(&f),
        Mode::Tool => ["tool_calls", "completed", "tool_use", "tool-calls"].contains(&f),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sdk_gets_complete_text_and_tool_answers_directly_and_through_the_proxy() {
    let (lab, stop) = lab().await;
    let mut jobs = Vec::new();
    let mut proxies = Vec::new();
    for client in clients() {
        for mode in Mode::ALL {
            let proxy = CellProxy::start("llm-sdk", lab, Vec::new()).await;
            for base in [format!("http://{lab}"), proxy.base()] {
                jobs.push(Job {
                    id: jobs.len(),
                    base,
                    client,
                    mode,
                    timeout_ms: 20_000,
                    deadline_ms: 40_000,
                    h2: false,
                });
            }
            proxies.push(proxy);
        }
    }
    let out = run_jobs(&jobs, PARALLEL).await;
    let mut texts = BTreeMap::new();
    let mut args = BTreeMap::new();
    for pair in jobs.chunks(2) {
        let (direct, proxied) = (&out[&pair[0].id], &out[&pair[1].id]);
        let (client, mode) = (pair[0].client, pair[0].mode);
        for (how, o) in [("directly", direct), ("through tearline", proxied)] {
            let at = format!("{client:?} {mode:?} {how}: {o:?}");
            assert!(o.raised.is_none() && !o.hung, "{at}");
            assert!(normal_finish(o, mode), "{at}");
            match mode {
                Mode::Text => {
                    assert!(!o.text.is_empty() && o.tool.is_none(), "{at}");
                    texts.entry(o.text.clone()).or_insert(at);
                }
                Mode::Tool => {
                    let tool = o.tool.as_ref().expect("a tool call");
                    assert_eq!(tool.name.as_deref(), Some("get_weather"), "{at}");
                    assert!(tool.parsed && !tool.invalid && o.tool_calls == 1, "{at}");
                    let v = tool.value().expect("arguments parse");
                    assert!(v["city"].is_string() && v["unit"].is_string(), "{at}");
                    args.entry(v.to_string()).or_insert(at);
                }
            }
        }
        assert_eq!(direct.text, proxied.text, "{client:?} {mode:?}");
        assert_eq!(direct.finish, proxied.finish, "{client:?} {mode:?}");
    }
    // The lab is deterministic: one text and one set of arguments, whatever the API and SDK.
    assert_eq!(texts.len(), 1, "different texts: {texts:#?}");
    assert_eq!(args.len(), 1, "different arguments: {args:#?}");
    for p in &proxies {
        p.settle().await;
        let findings = p.findings();
        assert!(
            findings.is_empty(),
            "findings without a fault: {findings:?}"
        );
    }
    stop.cancel();
}
