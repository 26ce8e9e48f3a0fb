//! What `tearline proxy` runs around the relays: a profile's proxies and faults, the HTTP/SSE
//! observer feeding the audit and the cut records, the profile's outage schedules, and the
//! Toxiproxy-compatible control API.
//!
//! Why here and not in the relay: the relay ([`crate::proxy::run`]) knows nothing of profiles, audits
//! or HTTP APIs; this is the one place the command line composes them. Invariants: every proxy
//! is bound before anything is served (all or none); the control API listens on loopback unless
//! told otherwise; the audit summary is printed at shutdown and on every SIGUSR1.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::profile_watch::Watched;
use crate::audit::{AuditConfig, Auditor};
use crate::control::catalog::RegistryCatalog;
use crate::control::runtime::RuntimeHub;
use crate::control::sources::{AuditFindings, CutBook, CutBooks};
use crate::control::{ApiConfig, ApiState};
use crate::proxy::{Proxy, ProxyConfig, ProxyError, ProxySpec};
use crate::wire::ObservationSink;
use crate::wire::observe::FanOut;
use crate::wire::record::CutLog;

use super::CliError;

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
    /// One proxy to start, with its `[[proxy]]` name in the profile (`None`: the command
    /// line's proxy) and whether it starts enabled (a disabled one is not bound: it listens
    /// once the control API enables it).
    pub proxies: Vec<(ProxySpec, Option<String>, bool)>,
    /// The profile: outage schedules and phases of each proxy.
    pub profile: Option<crate::profile::Profile>,
    /// Reload the profile from this file when it changes (`--watch`).
    pub watch: Option<PathBuf>,
    /// Limits and seed of the proxies the control API creates (name and upstream replaced).
    pub template: ProxyConfig,
    /// The run's seed (printed).
    pub seed: u64,
    /// HTTP/SSE observation or bytes only.
    pub observe: Observe,
    /// Control API address, `None` = off.
    pub api: Option<SocketAddr>,
    /// Bearer token the API requires, if any.
    pub api_token: Option<String>,
    /// Extra `Host` names the control API accepts (`--api-allow-host`).
    pub api_allow_hosts: Vec<String>,
    /// A Toxiproxy JSON file of proxies to create at start (`--populate`).
    pub populate: Option<std::path::PathBuf>,
    /// JSONL file of cut records.
    pub cuts_log: Option<PathBuf>,
    /// JSONL file of audit findings.
    pub findings_log: Option<PathBuf>,
    /// The audit's `abandon_after` (`--abandon-after`).
    pub abandon_after: std::time::Duration,
    /// The audit's intake queue (`--audit-queue`).
    pub audit_queue: usize,
    /// The audit's `rst_unread` (`--rst-unread`).
    pub rst_unread: std::time::Duration,
    /// Declared LLM routes (`--llm-route`, then the profile's `[[llm_route]]`).
    pub llm_routes: Arc<crate::wire::llm_routes::LlmRoutes>,
}

/// One proxy of the stack once built: bound (enabled) or not (disabled).
struct Built {
    listener: Option<TcpListener>,
    proxy: Arc<Proxy>,
    /// The address it is bound to, or will bind when enabled.
    listen: SocketAddr,
    /// Its `[[proxy]]` name in the profile.
    profile_name: Option<String>,
    /// The profile's faults as written, handed to the API, which lists them as toxics.
    profile_toxics: Vec<crate::control::profile_view::ProfileToxic>,
}

/// Binds every enabled proxy, builds the disabled ones, starts observers, audit, outages and
/// the API, serves until SIGINT or SIGTERM, drains, prints the audit summary. With the API on
/// and no proxy at all it is an API-only server (Toxiproxy's `toxiproxy-server` role).
pub async fn serve(stack: Stack) -> Result<(), CliError> {
    if stack.api.is_none() && !stack.proxies.iter().any(|(_, _, enabled)| *enabled) {
        return Err(CliError::NothingToServe);
    }
    let mut names = std::collections::HashSet::new();
    for (spec, _, _) in &stack.proxies {
        if !names.insert(spec.config.name.clone()) {
            return Err(ProxyError::DuplicateName(spec.config.name.clone()).into());
        }
    }
    let mut built = Vec::with_capacity(stack.proxies.len());
    for (spec, profile_name, enabled) in stack.proxies {
        let listen = spec.listen;
        let profile_toxics = stack.profile.as_ref().map_or_else(Vec::new, |p| {
            crate::control::profile_view::profile_toxics(p, profile_name.as_deref())
        });
        let (listener, proxy) = if enabled {
            let (l, p) = crate::proxy::bind(spec).await?;
            (Some(l), p)
        } else {
            (None, crate::proxy::build(spec)?)
        };
        built.push(Built {
            listener,
            proxy,
            listen,
            profile_name,
            profile_toxics,
        });
    }
    let multi = built.len();

    let auditor = Arc::new(Auditor::new(AuditConfig {
        abandon_after: stack.abandon_after,
        queue: stack.audit_queue,
        rst_unread: stack.rst_unread,
        ..AuditConfig::default()
    }));
    if let Some(path) = &stack.findings_log {
        auditor.log_to_file(path).map_err(CliError::FindingsLog)?;
    }
    let mut books = Vec::new();
    for b in &built {
        let proxy = &b.proxy;
        let book = Arc::new(CutBook::new(proxy.name()));
        books.push(book.clone());
        let mut sinks: Vec<Arc<dyn ObservationSink>> = vec![book];
        if let Some(path) = &stack.cuts_log {
            let log = CutLog::open(&cut_log_path(path, proxy.name(), multi), proxy.name())
                .map_err(CliError::CutLog)?;
            sinks.push(Arc::new(log));
        }
        if stack.observe == Observe::Http {
            sinks.push(auditor.clone());
            proxy.observe_http_routed(Arc::new(FanOut(sinks)), stack.llm_routes.clone());
        } else {
            proxy.set_sink(Some(Arc::new(FanOut(sinks))));
        }
        proxy.set_enabled(b.listener.is_some());
    }

    println!(
        "tearline proxy: seed {} (reproduce with --seed {})",
        stack.seed, stack.seed
    );
    for b in &built {
        let (name, upstream) = (b.proxy.name(), b.proxy.upstream());
        match b.listener.as_ref().and_then(|l| l.local_addr().ok()) {
            Some(addr) => println!("tearline proxy: {name} listening on {addr} → {upstream}"),
            None if stack.api.is_some() => println!(
                "tearline proxy: {name} disabled (not listening); enabling it through the control API binds {} → {upstream}",
                b.listen
            ),
            None => println!(
                "tearline proxy: {name} disabled (not listening, and stays so: the control API is off)"
            ),
        }
    }
    let shutdown = CancellationToken::new();
    let drain = format!(
        "no new connections; open ones drain for up to {:?} (--drain-timeout), then close",
        stack.template.drain_timeout
    );
    crate::cmd::signals::spawn_signal_watch(shutdown.clone(), drain).map_err(CliError::Signals)?;
    if stack.observe == Observe::Http {
        spawn_summary_on_usr1(auditor.clone(), shutdown.clone());
    }
    if let Some(profile) = stack.profile {
        let watched: Vec<Watched> = built
            .iter()
            .map(|b| Watched {
                name: b.profile_name.clone(),
                proxy: b.proxy.clone(),
            })
            .collect();
        let schedules = shutdown.child_token();
        super::profile_watch::start_schedules(&profile, &watched, Instant::now(), &schedules);
        if let Some(path) = stack.watch {
            println!("tearline proxy: watching {} for changes", path.display());
            tokio::spawn(super::profile_watch::watch(
                path,
                profile,
                watched,
                schedules,
                shutdown.clone(),
            ));
        }
    }

    match stack.api {
        Some(api_addr) => {
            let api_listener =
                TcpListener::bind(api_addr)
                    .await
                    .map_err(|source| CliError::ApiBind {
                        addr: api_addr,
                        source,
                    })?;
            let api_bound = api_listener.local_addr().unwrap_or(api_addr);
            let hub = Arc::new(RuntimeHub::new(stack.template, shutdown.clone()));
            let mut config = ApiConfig::new(hub.clone(), Arc::new(RegistryCatalog));
            config.token = stack.api_token;
            config.allowed_hosts = stack.api_allow_hosts;
            config.cuts = Some(Arc::new(CutBooks(books)));
            if stack.observe == Observe::Http {
                config.findings = Some(Arc::new(AuditFindings(auditor.clone())));
            }
            let state = ApiState::new(config);
            let empty = built.is_empty() && stack.populate.is_none();
            for b in built {
                adopt(&state, &hub, b).await?;
            }
            if let Some(file) = &stack.populate {
                populate_from(&state, file).await;
            }
            println!("tearline proxy: control API on http://{api_bound}");
            if empty {
                println!(
                    "tearline proxy: no proxies yet; create them through the API (POST /proxies, POST /populate)"
                );
            }
            let api = tokio::spawn(crate::control::server::serve_api(
                api_listener,
                state,
                shutdown.clone(),
            ));
            shutdown.cancelled().await;
            hub.wait().await;
            let _ = api.await;
        }
        None => {
            let bound = built
                .into_iter()
                .filter_map(|b| b.listener.map(|l| (l, b.proxy)))
                .collect();
            crate::proxy::run_bound(bound, shutdown).await?;
        }
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

/// Creates the proxies of a Toxiproxy JSON file (`toxiproxy-server -config`): like Toxiproxy,
/// a failure is logged and the server keeps the proxies it could create.
async fn populate_from(state: &ApiState, file: &std::path::Path) {
    let text = match std::fs::read(file) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(config = %file.display(), error = %e, "error reading config file");
            return;
        }
    };
    let inputs: Vec<crate::control::model::ProxyInput> = match serde_json::from_slice(&text) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(
                config = %file.display(),
                error = %e,
                "failed to populate proxies from file: not a JSON array of proxies \
                 ([{{\"name\": …, \"listen\": …, \"upstream\": …}}])"
            );
            return;
        }
    };
    match state.populate(inputs).await {
        (done, None) => {
            tracing::info!(proxies = done, config = %file.display(), "populated proxies from file");
        }
        (done, Some(e)) => tracing::error!(
            config = %file.display(),
            created = done,
            error = %e,
            "failed to populate proxies from file"
        ),
    }
}

async fn adopt(state: &ApiState, hub: &RuntimeHub, b: Built) -> Result<(), CliError> {
    let (name, upstream) = (b.proxy.name().to_owned(), b.proxy.upstream());
    let (listen, enabled) = match b.listener {
        Some(listener) => {
            let listen = listener.local_addr().unwrap_or(b.listen).to_string();
            hub.run_existing(listener, b.proxy);
            (listen, true)
        }
        None => {
            hub.adopt_stopped(b.proxy);
            (b.listen.to_string(), false)
        }
    };
    state
        .adopt_proxy(&name, &listen, &upstream, enabled, b.profile_toxics)
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
