//! A real MCP SDK client (TypeScript SDK, pinned in tests/peers) against the lab through the
//! proxy with an `sse_cut` fault, over plain HTTP and over `--tls-self-signed` (the client
//! trusts the printed CA through `NODE_EXTRA_CA_CERTS`): the cuts land at the requested SSE
//! class and the audit's findings are the same both ways.

use crate::common;
use std::sync::Arc;
use std::time::Duration;

use crate::common::tls::{Recorder, terminator};
use tearline::audit::{AuditConfig, Auditor};
use tearline::fault::sse_cut::{SseCutConfig, factory};
use tearline::lab::{LabConfig, serve};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::tls::TlsEnd;
use tearline::wire::{Observation, ObservationSink, SseClass};
use tokio::net::TcpListener;

/// Records observations and feeds the auditor.
struct Both(Arc<Recorder>, Arc<Auditor>);

impl ObservationSink for Both {
    fn record(&self, obs: Observation) {
        self.0.record(obs.clone());
        self.1.record(obs);
    }
}

struct Run {
    client: String,
    cuts: Vec<(Option<SseClass>, Option<TlsEnd>)>,
    findings: Vec<String>,
}

async fn one_run(tls: bool) -> Run {
    let node = common::peers::node();
    let lab = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let lab_addr = lab.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(serve(lab, LabConfig::default(), stop.clone()));

    // One cut per connection, in the third event's data value (priming is event 0).
    let cut: SseCutConfig =
        toml::from_str("at = \"mid-value\"\nleg = \"first\"\naction = \"reset\"\nevents = [2, 2]")
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ProxyConfig::new("sdk", lab_addr.to_string());
    if tls {
        cfg.tls.client = Some(terminator(dir.path()));
    }
    let ca = cfg
        .tls
        .client
        .as_ref()
        .and_then(|t| t.ca_file().map(ToOwned::to_owned));
    let proxy = Proxy::with_faults(cfg, vec![factory(cut)]);
    let rec = Arc::new(Recorder::default());
    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    let sink: Arc<dyn ObservationSink> = Arc::new(Both(rec.clone(), auditor.clone()));
    let s2 = sink.clone();
    proxy.set_observer_factory(Arc::new(move |conn| {
        tearline::wire::http1::observer_pair(conn, s2.clone())
    }));
    proxy.set_sink(Some(sink));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(proxy::run(listener, proxy.clone(), stop.clone()));

    let scheme = if tls { "https" } else { "http" };
    let mut cmd = node;
    cmd.current_dir(common::peers::dir())
        .arg("js/sdk_progress_call.mjs")
        .arg(format!("{scheme}://localhost:{port}/mcp"));
    if let Some(ca) = &ca {
        cmd.env("NODE_EXTRA_CA_CERTS", ca);
    }
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the SDK client finishes")
        .expect("node starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stop.cancel();
    auditor.finish();
    let cuts = rec
        .0
        .lock()
        .unwrap()
        .iter()
        .filter_map(|o| match o {
            Observation::Cut { point, .. } => Some((point.class, point.tls_end)),
            _ => None,
        })
        .collect();
    let mut findings: Vec<String> = auditor
        .counts()
        .into_iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    findings.sort();
    Run {
        client: String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        cuts,
        findings,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_client_through_tls_sees_the_same_cuts_and_findings_as_plain() {
    let plain = one_run(false).await;
    let tls = one_run(true).await;
    assert!(!plain.cuts.is_empty(), "no cut over plain HTTP");
    for (class, end) in &plain.cuts {
        assert_eq!((*class, *end), (Some(SseClass::MidValue), None));
    }
    assert_eq!(
        tls.cuts.len(),
        plain.cuts.len(),
        "{:?} vs {:?}",
        tls.cuts,
        plain.cuts
    );
    for (class, end) in &tls.cuts {
        assert_eq!(
            (*class, *end),
            (Some(SseClass::MidValue), Some(TlsEnd::Truncated))
        );
    }
    assert_eq!(tls.findings, plain.findings, "audit findings differ");
    assert!(!plain.findings.is_empty());
    assert_eq!(tls.client, plain.client, "the client's outcome differs");
    eprintln!("client: {} findings: {:?}", tls.client, tls.findings);
}
