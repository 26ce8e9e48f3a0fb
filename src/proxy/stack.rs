//! What `tearline proxy` runs around the relays: a profile's proxies and faults, the HTTP/SSE
//! observer feeding the audit and the cut records, the profile's outage schedules, and the
//! Toxiproxy-compatible control API.
//!
//! Why here and not in the relay: the relay ([`super::run`]) knows nothing of profiles, audits
//! or HTTP APIs; this is the one place the command line composes them. Invariants: every proxy
//! is bound before anything is served (all or none); the control API listens on loopback unless
//! told otherwise; the audit summary is printed at shutdown and on every SIGUSR1.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Proxy, ProxySpec};
use crate::audit::{AuditConfig, Auditor};
use crate::control::catalog::RegistryCatalog;
use crate::control::runtime::RuntimeHub;
use crate::control::sources::{AuditFindings, CutBook, CutBooks};
use crate::control::{ApiConfig, ApiState};
use crate::fault::outage::OutageSchedule;
use crate::wire::ObservationSink;
use crate::wire::observe::FanOut;
use crate::wire::record::CutLog;

use super::cli::CliError;

/// Whether the proxies parse HTTP/SSE (positions, audit) or relay bytes only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Observe {
    /// HTTP/1.1 and SSE aware: SSE cuts aim at positions, the audit judges resumes.
    Http,
    /// Bytes only: the cheapest relay; SSE-position faults have nothing to aim at.
    Bytes,
}

/// Everything around the relays.
pub struct Stack {
    /// One proxy to start, with its outage schedules and whether it starts enabled.
    pub proxies: Vec<(ProxySpec, Vec<OutageSchedule>, bool)>,
    /// The run's seed (printed).
    pub seed: u64,
    /// HTTP/SSE observation or bytes only.
    pub observe: Observe,
    /// Control API address, `None` = off.
    pub api: Option<SocketAddr>,
    /// Bearer token the API requires, if any.
    pub api_token: Option<String>,
    /// JSONL file of cut records.
    pub cuts_log: Option<PathBuf>,
    /// JSONL file of audit findings.
    pub findings_log: Option<PathBuf>,
}

/// Binds every proxy, starts observers, audit, outages and the API, serves until SIGINT or
/// SIGTERM, drains, prints the audit summary.
pub async fn serve(stack: Stack) -> Result<(), CliError> {
    let template = stack.proxies.first().map(|(s, _, _)| s.config.clone());
    let mut schedules = Vec::new();
    let mut specs = Vec::new();
    for (spec, outages, enabled) in stack.proxies {
        schedules.push((outages, enabled));
        specs.push(spec);
    }
    let bound = super::bind_all(specs).await?;

    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    if let Some(path) = &stack.findings_log {
        auditor.log_to_file(path).map_err(CliError::FindingsLog)?;
    }
    let mut books = Vec::new();
    for ((_, proxy), (_, enabled)) in bound.iter().zip(&schedules) {
        let book = Arc::new(CutBook::new(proxy.name()));
        books.push(book.clone());
        let mut sinks: Vec<Arc<dyn ObservationSink>> = vec![book];
        if let Some(path) = &stack.cuts_log {
            let log = CutLog::open(&cut_log_path(path, proxy.name(), bound.len()), proxy.name())
                .map_err(CliError::CutLog)?;
            sinks.push(Arc::new(log));
        }
        if stack.observe == Observe::Http {
            sinks.push(auditor.clone());
            let sink: Arc<dyn ObservationSink> = Arc::new(FanOut(sinks));
            let observer_sink = sink.clone();
            proxy.set_observer_factory(Arc::new(move |conn| {
                crate::wire::http1::observer_pair(conn, observer_sink.clone())
            }));
            proxy.set_sink(Some(sink));
        } else {
            proxy.set_sink(Some(Arc::new(FanOut(sinks))));
        }
        proxy.set_enabled(*enabled);
    }

    println!(
        "tearline proxy: seed {} (reproduce with --seed {})",
        stack.seed, stack.seed
    );
    for (l, p) in &bound {
        if let Ok(addr) = l.local_addr() {
            println!(
                "tearline proxy: {} listening on {addr} → {}",
                p.name(),
                p.upstream()
            );
        }
    }
    let shutdown = CancellationToken::new();
    super::cli::spawn_signal_watch(shutdown.clone())?;
    if stack.observe == Observe::Http {
        spawn_summary_on_usr1(auditor.clone(), shutdown.clone());
    }
    let started = Instant::now();
    for ((_, proxy), (outages, _)) in bound.iter().zip(schedules) {
        if !outages.is_empty() {
            tokio::spawn(super::schedule::drive_outages(
                proxy.clone(),
                outages,
                started,
                shutdown.clone(),
            ));
        }
    }

    match (stack.api, template) {
        (Some(api_addr), Some(template)) => {
            let api_listener =
                TcpListener::bind(api_addr)
                    .await
                    .map_err(|source| CliError::ApiBind {
                        addr: api_addr,
                        source,
                    })?;
            let hub = Arc::new(RuntimeHub::new(template, shutdown.clone()));
            let mut config = ApiConfig::new(hub.clone(), Arc::new(RegistryCatalog));
            config.token = stack.api_token;
            config.cuts = Some(Arc::new(CutBooks(books)));
            if stack.observe == Observe::Http {
                config.findings = Some(Arc::new(AuditFindings(auditor.clone())));
            }
            let state = ApiState::new(config);
            for (listener, proxy) in bound {
                adopt(&state, &hub, listener, proxy).await?;
            }
            println!("tearline proxy: control API on http://{api_addr}");
            let api = tokio::spawn(crate::control::server::serve_api(
                api_listener,
                state,
                shutdown.clone(),
            ));
            shutdown.cancelled().await;
            hub.wait().await;
            let _ = api.await;
        }
        _ => super::run_bound(bound, shutdown).await?,
    }
    if stack.observe == Observe::Http {
        auditor.finish();
        eprintln!("{}", auditor.summary());
    }
    Ok(())
}

/// Prints the audit summary to stderr at every SIGUSR1 until `shutdown` (Unix only).
fn spawn_summary_on_usr1(auditor: Arc<Auditor>, shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
            tracing::warn!(
                "cannot install the SIGUSR1 handler; the summary prints at shutdown only"
            );
            return;
        };
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    got = usr1.recv() => {
                        if got.is_none() {
                            return;
                        }
                        eprintln!("{}", auditor.summary());
                    }
                }
            }
        });
    }
    #[cfg(not(unix))]
    {
        let _ = (auditor, shutdown);
    }
}

async fn adopt(
    state: &ApiState,
    hub: &RuntimeHub,
    listener: TcpListener,
    proxy: Arc<Proxy>,
) -> Result<(), CliError> {
    let listen = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let (name, upstream) = (proxy.name().to_owned(), proxy.upstream());
    hub.run_existing(listener, proxy);
    state
        .adopt_proxy(&name, &listen, &upstream)
        .await
        .map_err(CliError::Api)
}

/// One cut log per proxy: the path as given for one proxy, `<stem>-<name>.<ext>` for several.
fn cut_log_path(path: &std::path::Path, proxy: &str, proxies: usize) -> PathBuf {
    if proxies <= 1 {
        return path.to_path_buf();
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("cuts");
    let ext = path.extension().and_then(|s| s.to_str()).unwrap_or("jsonl");
    path.with_file_name(format!("{stem}-{proxy}.{ext}"))
}
