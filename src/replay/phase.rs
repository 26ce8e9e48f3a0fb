//! One phase of a replay: one client policy against a fresh stack (lab server unless the user
//! brings one, a proxy with the profile's faults and the HTTP/SSE observer, an auditor), torn
//! down when the load finishes.
//!
//! Why a fresh stack per policy: findings, cuts and histograms are then attributable to one
//! policy without guessing, and one policy's sessions cannot evict the other's ring buffers.
//! Both phases use the same proxy name and seed, so connection `i` of each phase draws the same
//! fault decisions.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::tap::Tap;
use super::{ReplayConfig, ReplayError};
use crate::audit::{AuditConfig, Auditor};
use crate::lab::LabConfig;
use crate::load::{LoadConfig, LoadOutcome, Policy, Target};
use crate::profile::Profile;
use crate::proxy::{Proxy, ProxyConfig, StatsSnapshot};

/// Name of the replay's proxy (it feeds the per-connection RNG derivation).
pub const PROXY_NAME: &str = "replay";

/// Calls whose facts a phase keeps for the reconciliation (later calls are counted only).
pub const KEEP_CALLS: usize = 10_000;

/// Attempts (requests) a call may use unless its scenario says otherwise. Half the streams are
/// cut and a cut costs two (the resume, then the re-issue if the cursor is gone), so a correct
/// client still fails about one call in 16, loudly: the phase line says how many ran out.
pub const DEFAULT_ATTEMPTS: u32 = 8;

/// How long a phase's servers may take to stop after the load finished.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// What one phase produced.
pub struct PhaseOutcome {
    /// The client policy.
    pub policy: Policy,
    /// The phase's name in reports (see `scenario::PhasePlan`).
    pub label: &'static str,
    /// The tool the phase called.
    pub tool: &'static str,
    /// How much the lab's side-effect counter (the `append` tool's) moved during the phase:
    /// the ground truth of how many times a side effect ran (0 against the user's server).
    pub side_effects: u64,
    /// The load client's outcome.
    pub load: LoadOutcome,
    /// The proxy's audit of the phase.
    pub auditor: Arc<Auditor>,
    /// Cuts and resumes as the proxy saw them.
    pub tap: Arc<Tap>,
    /// The server the proxy relayed to.
    pub upstream: String,
    /// The proxy's counters at the end.
    pub proxy_stats: StatsSnapshot,
    /// What an LLM phase measured beyond the load outcome (tokens, every request's attempts).
    pub llm: Option<crate::load::llm::LlmExtras>,
    /// A signal stopped the phase before its load was done (its audit was not closed).
    pub interrupted: bool,
}

/// Runs one policy's phase to completion.
pub async fn run_phase(
    cfg: &ReplayConfig,
    profile: &Profile,
    plan: &super::scenario::PhasePlan,
    findings_log: Option<PathBuf>,
    shutdown: &CancellationToken,
) -> Result<PhaseOutcome, ReplayError> {
    let policy = plan.policy;
    let counted_before = cfg.lab.side_effects.get();
    // The servers (lab, proxy) stop when the load has stopped, never before it: at an interrupt
    // the load client stops first (its calls in flight are counted nowhere) and only then are
    // the proxy and the lab torn down, so no call fails visibly because its server went away.
    let token = CancellationToken::new();
    let load_token = shutdown.child_token();
    let mut servers = Vec::new();

    let tls = cfg.tls_ca_dir.as_deref().map(tls_legs).transpose()?;
    let upstream = match &cfg.upstream {
        Some(addr) => addr.clone(),
        None => {
            let lab_tls = tls.as_ref().map(|t| t.lab.clone());
            let (addr, task) = start_lab(cfg.lab.clone(), lab_tls, token.clone()).await?;
            servers.push(task);
            addr.to_string()
        }
    };

    let mut audit = AuditConfig::default();
    if let Some(d) = cfg.abandon_after {
        audit.abandon_after = d;
    }
    if let Some(d) = cfg.rst_unread {
        audit.rst_unread = d;
    }
    let auditor = Arc::new(Auditor::new(audit));
    if let Some(path) = &findings_log {
        auditor
            .log_to_file(path)
            .map_err(|source| ReplayError::Audit { source })?;
    }
    let tap = Arc::new(Tap::new(auditor.clone()));

    let mut pcfg = ProxyConfig::new(PROXY_NAME, upstream.clone());
    pcfg.seed = cfg.seed;
    if let Some(t) = &tls {
        pcfg.tls = t.proxy.clone();
    }
    let proxy = Proxy::with_faults(pcfg, profile.factories_for(None));
    proxy.observe_http(tap.clone());
    let listener = bind_loopback().await?;
    let proxy_addr = local_addr(&listener)?;
    {
        let proxy = proxy.clone();
        let token = token.clone();
        servers.push(tokio::spawn(async move {
            if let Err(e) = crate::proxy::run(listener, proxy, token).await {
                tracing::warn!(error = %e, "replay proxy ended with an error");
            }
        }));
    }
    tokio::spawn(crate::proxy::schedule::drive_outages(
        proxy.clone(),
        profile.outages_for(None),
        Instant::now(),
        token.clone(),
    ));
    tokio::spawn(crate::proxy::schedule::drive_phases(
        proxy.clone(),
        profile.phase_plan(None),
        Instant::now(),
        token.clone(),
    ));

    let target = Target {
        host: proxy_addr.ip().to_string(),
        port: proxy_addr.port(),
        path: cfg.target_path.clone(),
        tls: tls.map(|t| t.client),
        h2: None,
    };
    let target = if cfg.http2 {
        let ca: Vec<PathBuf> = cfg
            .tls_ca_dir
            .as_deref()
            .map(|d| vec![crate::tls::ca::LocalCa::open_or_create(d).map(|ca| ca.cert_path())])
            .into_iter()
            .flatten()
            .collect::<Result<_, _>>()?;
        target
            .with_http2(cfg.sessions.div_ceil(100).max(1), &ca)
            .map_err(|e| ReplayError::Http2(e.to_string()))?
    } else {
        target
    };
    let args = plan
        .args
        .clone()
        .unwrap_or_else(|| serde_json::json!({ "size": cfg.size, "lines": cfg.lines }));
    let mut lcfg = LoadConfig::new(target, plan.tool, args);
    lcfg.token = plan.token.map(str::to_owned);
    lcfg.resume_token = plan.resume_token.map(str::to_owned);
    lcfg.sessions = cfg.sessions;
    lcfg.stop = cfg.stop;
    lcfg.policy = policy;
    // The seed documents are 2025-era stories (resumption): speak 2025-11-25 unless the
    // scenario made the lab 2026-07-28-only (`--scenario stateless`; see scenario.rs).
    lcfg.era = if cfg.lab.protocol == crate::lab::ProtocolVersion::V2026_07_28 {
        crate::load::era::EraChoice::Auto
    } else {
        crate::load::era::EraChoice::Legacy
    };
    lcfg.call_timeout = cfg.call_timeout;
    lcfg.max_attempts = plan.attempts.unwrap_or(DEFAULT_ATTEMPTS);
    lcfg.head_timeout = plan.head_timeout;
    lcfg.progress = cfg.progress;
    // The calls' facts, for reconciling the client's counts with the audit's call by call.
    lcfg.keep_calls = KEEP_CALLS;
    let cuts = tap.clone();
    lcfg.progress_note = Some(crate::load::config::ProgressNote(Arc::new(move || {
        format!("cuts {}", cuts.cuts())
    })));
    let (load, llm) = if cfg.scenario.is_llm() {
        match super::llm::run_load(cfg, policy, lcfg.target.clone(), &load_token).await {
            Ok((o, x)) => (Ok(o), Some(x)),
            Err(e) => (Err(e), None),
        }
    } else {
        (crate::load::run(lcfg, load_token.clone()).await, None)
    };
    let interrupted = shutdown.is_cancelled();

    token.cancel();
    for task in servers {
        // A server that does not stop in time is abandoned; the process exits anyway.
        let _ = tokio::time::timeout(STOP_TIMEOUT, task).await;
    }
    let load = load.map_err(|source| ReplayError::Load { source })?;
    // An interrupted phase is not closed: the judgements still waiting (a cut call's resume or
    // re-send) are of calls in flight at the interrupt, which the run did not finish.
    if !interrupted {
        auditor.finish();
    }
    Ok(PhaseOutcome {
        policy,
        label: plan.label,
        tool: plan.tool,
        side_effects: cfg.lab.side_effects.get().saturating_sub(counted_before),
        load,
        auditor,
        tap,
        upstream,
        proxy_stats: proxy.stats().snapshot(),
        llm,
        interrupted,
    })
}

/// The TLS configuration of every leg of a `--tls` replay.
struct TlsLegs {
    lab: Arc<crate::tls::Terminator>,
    proxy: crate::tls::ProxyTls,
    client: crate::load::config::TargetTls,
}

fn tls_legs(dir: &std::path::Path) -> Result<TlsLegs, crate::tls::TlsError> {
    use crate::tls::{Terminator, Upstream, UpstreamOptions};
    let names = crate::tls::ca::listen_names(std::net::Ipv4Addr::LOCALHOST.into(), &[]);
    let terminator = || Terminator::self_signed(dir, &names).map(Arc::new);
    let lab = terminator()?;
    let ca = lab
        .ca_file()
        .map(|p| vec![p.to_owned()])
        .unwrap_or_default();
    let upstream = Upstream::new(&UpstreamOptions {
        ca: ca.clone(),
        ..UpstreamOptions::default()
    })?;
    Ok(TlsLegs {
        lab,
        proxy: crate::tls::ProxyTls {
            client: Some(terminator()?),
            upstream: Some(Arc::new(upstream)),
            ..crate::tls::ProxyTls::default()
        },
        client: crate::load::config::TargetTls::new(&ca)?,
    })
}

async fn start_lab(
    config: LabConfig,
    tls: Option<Arc<crate::tls::Terminator>>,
    token: CancellationToken,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), ReplayError> {
    let listener = bind_loopback().await?;
    let addr = local_addr(&listener)?;
    let task = tokio::spawn(async move {
        if let Err(e) = crate::lab::serve_tls(listener, config, tls, token).await {
            tracing::warn!(error = %e, "lab server ended with an error");
        }
    });
    Ok((addr, task))
}

async fn bind_loopback() -> Result<TcpListener, ReplayError> {
    // The proxy's deep backlog: a burst of clients is queued, never answered with SYN cookies.
    crate::proxy::listen(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .map_err(|source| ReplayError::Bind { source })
}

fn local_addr(listener: &TcpListener) -> Result<SocketAddr, ReplayError> {
    listener
        .local_addr()
        .map_err(|source| ReplayError::Bind { source })
}
