//! The in-process rig both accuracy eras run a cell on: listeners on 127.0.0.1 port 0, the
//! proxy in front of the lab with the run's faults and the auditor observing it, the drain
//! before the audit closes its judgements, and the run's result from its outcome.
//!
//! Why one file: the legacy run ([`super::run`]) and the 2026-07-28 run
//! ([`super::modern::run`]) differ in their lab, faults, clients and truth, not in how the
//! proxy and the audit are set up and stopped; a change to that order is made once.
//! Invariants: the observed kinds are read only after the client's connections are gone (or 3 s
//! passed), the proxy and the lab stopped, and [`Auditor::finish`] ran; a harness error leaves
//! `expected` and `observed` empty.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::RunResult;
use crate::audit::Auditor;
use crate::fault::FaultFactory;
use crate::lab::LineEnding;
use crate::proxy::{Proxy, ProxyConfig};
use crate::wire::SseClass;

/// A listener on 127.0.0.1, port 0.
pub(super) async fn bind() -> Result<TcpListener, String> {
    // The proxy's deep backlog: a burst of clients is queued, never answered with SYN cookies.
    crate::proxy::listen(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .map_err(|e| format!("cannot bind 127.0.0.1:0: {e}"))
}

/// The proxy of one run, serving until its token is cancelled.
pub(super) struct RunningProxy {
    /// The proxy (its stats show the connections still open).
    pub proxy: Arc<Proxy>,
    /// Where clients reach it.
    pub addr: SocketAddr,
    task: JoinHandle<Result<(), crate::proxy::ProxyError>>,
}

/// Starts proxy `name` in front of `lab_addr` with `faults` and the connection RNG seeded with
/// `seed`, its HTTP observer feeding `auditor` (and writing its wire into `book`, if given).
pub(super) async fn start_proxy(
    name: &str,
    lab_addr: SocketAddr,
    seed: u64,
    faults: Vec<Arc<dyn FaultFactory>>,
    auditor: &Arc<Auditor>,
    token: &CancellationToken,
    book: Option<&Arc<super::trace::TraceBook>>,
) -> Result<RunningProxy, String> {
    let mut pcfg = ProxyConfig::new(name, lab_addr.to_string());
    pcfg.seed = seed;
    let proxy = Proxy::with_faults(pcfg, faults);
    match book {
        Some(book) => super::trace::observe_traced(&proxy, auditor.clone(), book.clone()),
        None => proxy.observe_http(auditor.clone()),
    }
    let listener = bind().await?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let task = tokio::spawn(crate::proxy::run(
        listener,
        Arc::clone(&proxy),
        token.clone(),
    ));
    Ok(RunningProxy { proxy, addr, task })
}

/// Waits (bounded) until the proxy holds no connection, stops the proxy and the lab, finishes
/// the audit, and returns the finding kinds it reported at least once.
pub(super) async fn settle<T>(
    running: RunningProxy,
    lab: JoinHandle<T>,
    token: &CancellationToken,
    auditor: &Auditor,
) -> BTreeSet<String> {
    // The proxy drains (delayed bytes, closes) before the audit closes its judgements.
    let drained = Instant::now() + Duration::from_secs(3);
    while running.proxy.stats().snapshot().connections_open > 0 && Instant::now() < drained {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    token.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), running.task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), lab).await;
    auditor.finish();
    auditor
        .counts()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, _)| k)
        .collect()
}

/// The result of one run from its outcome: `Ok((expected, observed))`, or why the harness
/// failed.
pub(super) fn result(
    label: String,
    clean: bool,
    seed: u64,
    profile: Option<String>,
    outcome: Result<(BTreeSet<String>, BTreeSet<String>), String>,
) -> RunResult {
    let (expected, observed, harness_error) = match outcome {
        Ok((expected, observed)) => (expected, observed, None),
        Err(e) => (BTreeSet::new(), BTreeSet::new(), Some(e)),
    };
    RunResult {
        label,
        clean,
        seed,
        profile,
        expected,
        observed,
        harness_error,
    }
}

/// The SSE classes a scripted cut aims at, with their weights: those of ids only in streams
/// that carry ids, those of CRLF output only with CRLF (`dispatch-cr-lf` only with ids too: in
/// a stream without them the event it dispatches ends the response, so a cut there is after
/// the response, not in it).
pub(super) fn cut_classes(eol: LineEnding, ids: bool) -> Vec<(SseClass, f64)> {
    let mut v = vec![
        (SseClass::Boundary, 1.0),
        (SseClass::FieldName, 1.0),
        (SseClass::AfterColon, 1.0),
        (SseClass::MidValue, 2.0),
        (SseClass::BeforeEol, 1.0),
        (SseClass::BeforeDispatch, 1.0),
    ];
    if ids {
        v.extend([(SseClass::AfterId, 1.0), (SseClass::MidId, 1.0)]);
    }
    if eol == LineEnding::Crlf {
        v.push((SseClass::CrLf, 1.0));
        if ids {
            v.push((SseClass::DispatchCrLf, 1.0));
        }
    }
    v
}

/// The first line of an `ACCURACY_DUMP` and one line per finding the audit reported.
pub(super) fn dump_findings(label: &str, seed: u64, auditor: &Auditor) -> String {
    let mut out = format!("=== {label} seed {seed}\n");
    for f in auditor.findings() {
        out.push_str(&format!(
            "finding {}\n",
            serde_json::to_string(&f).unwrap_or_default()
        ));
    }
    out
}
