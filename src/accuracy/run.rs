//! One accuracy run, in-process on 127.0.0.1 port 0: the lab (recording truth) behind
//! `tearline::proxy` with an `sse_cut` fault (plus an optional profile's faults) and the HTTP/1
//! observer feeding an [`Auditor`], and the load client (recording truth) in front.
//!
//! An h2 cell ([`Transport::H2`]) runs the same scenario over h2c: every client of the run
//! shares one pool of connections (its sessions multiplexed on them), the cut ends the stream
//! (through the proxy's stream relay) or the whole connection, and the legs it hits are named
//! by a cut budget instead of by connection ([`CutBudget`]).
//!
//! Invariants:
//! - The scripted cut hits only the connections the scenario names ([`OnConnections`]): the
//!   first call's POST stream (a second client's, for the shared store; every client's, for
//!   several sessions at once), and for the
//!   stale-cursor client also its first resume; every later leg (resumes, re-issues) is uncut
//!   unless a profile adds faults. One logical stream, one cut — the contract's premise.
//! - The cut lands on a message event at least three events into the stream and at least two
//!   events before its end, at a class drawn from the seeded RNG.
//! - The observed kinds are the auditor's counts after the proxy has drained and stopped and
//!   [`Auditor::finish`] ran; the expected ones come from the truth records only
//!   ([`super::expect`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::budget::CutBudget;
use super::cell::{Cell, Scenario, Transport};
use super::expect::{self, Truth};
use super::rig::{self, bind};
use crate::audit::{AuditConfig, Auditor};

/// The audit's `rst_unread` in the rig: longer than any run, so every event of a reset leg may
/// be unread, as the truth's convention has it.
const RIG_RST_UNREAD: Duration = Duration::from_secs(3600);
use crate::fault::h2::CutScope;
use crate::fault::sse_cut::{CutTarget, H2Keys, SseCutConfig};
use crate::fault::{ConnRng, Fault, FaultFactory};
use crate::lab::bugs::ServerBug;
use crate::lab::truth::LabTruth;
use crate::lab::{LabConfig, OnEvicted};
use crate::load::eventsource::{EventSourceConfig, run as run_eventsource};
use crate::load::h2::H2Pool;
use crate::load::truth::ClientTruth;
use crate::load::{LoadConfig, Target};
use crate::profile::Profile;
use crate::vocab::{CutAction, Direction};

/// Progress notifications per call (a shared-store run's first client uses fewer, so the two
/// sessions' events differ).
pub const PROGRESS_N: u64 = 12;
/// Path of the lab's plain-SSE endpoint in EventSource runs.
pub const PLAIN_PATH: &str = "/events";

/// What one run produced (of either era).
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The cell's label (`scenario/ids/eol/action`, or `2026/client/workload/tool/spot`).
    pub label: String,
    /// Whether the cell's server and client are both correct: only `torn-cut` and
    /// `replay-exact` may be reported.
    pub clean: bool,
    /// The seed.
    pub seed: u64,
    /// The profile's name, if one was added.
    pub profile: Option<String>,
    /// Finding kinds the truth says must be reported.
    pub expected: BTreeSet<String>,
    /// Finding kinds the audit reported.
    pub observed: BTreeSet<String>,
    /// Why the harness itself failed (no truth to judge against), if it did.
    pub harness_error: Option<String>,
}

/// Instantiates `inner` only on the connections whose accept index is in `conns`.
pub struct OnConnections {
    inner: Arc<dyn FaultFactory>,
    conns: Vec<u64>,
    next: AtomicU64,
}

impl OnConnections {
    /// `inner`, on connections `conns` (0 = the first one the proxy accepts).
    pub fn new(inner: Arc<dyn FaultFactory>, conns: Vec<u64>) -> Arc<Self> {
        Arc::new(OnConnections {
            inner,
            conns,
            next: AtomicU64::new(0),
        })
    }
}

impl FaultFactory for OnConnections {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn direction(&self) -> Direction {
        self.inner.direction()
    }

    fn instantiate(&self, rng: &mut ConnRng, now: Instant) -> Option<Box<dyn Fault>> {
        let index = self.next.fetch_add(1, Ordering::SeqCst);
        if self.conns.contains(&index) {
            self.inner.instantiate(rng, now)
        } else {
            None
        }
    }

    fn h2_body_cut(&self) -> Option<crate::fault::h2::BodyCut> {
        self.inner.h2_body_cut()
    }

    fn h2(&self) -> Option<&dyn crate::fault::h2::H2FaultFactory> {
        self.inner.h2()
    }
}

fn scripted_cut(cell: &Cell, method: &str, events: (u64, u64)) -> Arc<dyn FaultFactory> {
    let scope = match cell.transport {
        Transport::H2 { scope, .. } => scope,
        Transport::H1 => CutScope::Stream,
    };
    let keys = H2Keys {
        scope,
        h2_error: None,
    };
    crate::fault::sse_cut::factory_h2(
        SseCutConfig {
            at: CutTarget::Classes(rig::cut_classes(cell.eol, true)),
            // Every leg: a scripted cut of a resume GET tears its replayed events too.
            leg: crate::fault::sse_cut::Leg::Any,
            range: (0, 0),
            events: Some(events),
            nth: None,
            method: Some(method.to_owned()),
            path: None,
            action: cell.action,
            stall: None,
            outage: None,
            probability: 1.0,
        },
        keys,
    )
}

/// The scripted cuts of an h2 cell: the same legs as on HTTP/1.1 ([`h1_cuts`]), named by
/// budget rather than by connection, since one h2 connection carries a session's POST, its
/// resumes and its re-issues ([`CutBudget`]).
fn h2_cuts(cell: &Cell) -> Vec<Arc<dyn FaultFactory>> {
    let n_end = PROGRESS_N - 2;
    match cell.scenario {
        // The second client's own pool dials the second connection; the first runs uncut.
        Scenario::Server(ServerBug::SharedStore) => vec![OnConnections::new(
            CutBudget::new(scripted_cut(cell, "POST", (3, n_end)), 1),
            vec![1],
        )],
        Scenario::StaleCursor => vec![
            CutBudget::new(scripted_cut(cell, "POST", (3, n_end)), 1),
            CutBudget::new(scripted_cut(cell, "GET", (1, 2)), 1),
        ],
        Scenario::Sessions(n) => vec![CutBudget::new(scripted_cut(cell, "POST", (3, n_end)), n)],
        _ => vec![CutBudget::new(scripted_cut(cell, "POST", (3, n_end)), 1)],
    }
}

/// The scripted cuts of an HTTP/1.1 cell, by the connections they hit.
fn h1_cuts(cell: &Cell) -> Vec<Arc<dyn FaultFactory>> {
    let n_end = PROGRESS_N - 2;
    match cell.scenario {
        Scenario::Server(ServerBug::SharedStore) => {
            vec![OnConnections::new(
                scripted_cut(cell, "POST", (3, n_end)),
                vec![1],
            )]
        }
        Scenario::StaleCursor => vec![
            OnConnections::new(scripted_cut(cell, "POST", (3, n_end)), vec![0]),
            OnConnections::new(scripted_cut(cell, "GET", (1, 2)), vec![1]),
        ],
        Scenario::EventSource => vec![OnConnections::new(
            scripted_cut(cell, "GET", (3, 12)),
            vec![0],
        )],
        // Whichever connections carry the calls' POSTs (the sessions connect in any order);
        // resumes are GETs, never cut.
        Scenario::Sessions(n) => vec![OnConnections::new(
            scripted_cut(cell, "POST", (3, n_end)),
            (0..4 * n as u64).collect(),
        )],
        _ => vec![OnConnections::new(
            scripted_cut(cell, "POST", (3, n_end)),
            vec![0],
        )],
    }
}

fn lab_config(cell: &Cell, truth: &Arc<LabTruth>) -> LabConfig {
    let mut lab = LabConfig {
        line_ending: cell.eol,
        ids: cell.ids,
        retry: Duration::from_millis(10),
        truth: Some(Arc::clone(truth)),
        ..LabConfig::default()
    };
    match cell.scenario {
        Scenario::Server(bug) => lab.bug = bug,
        Scenario::Evicted(mode) => {
            lab.on_evicted = mode;
            lab.buffer = 4;
        }
        Scenario::StaleCursor | Scenario::Sessions(_) => {}
        Scenario::EventSource => lab.plain_path = Some(PLAIN_PATH.to_owned()),
    }
    lab
}

fn client(target: Target, n: u64, attempts: u32, truth: &Arc<ClientTruth>) -> LoadConfig {
    let mut c = LoadConfig::new(
        target,
        "progress",
        serde_json::json!({"n": n, "interval": 0}),
    );
    c.max_attempts = attempts;
    c.backoff = Duration::from_millis(10);
    c.max_backoff = Duration::from_millis(50);
    c.call_timeout = Duration::from_secs(10);
    c.connect_timeout = Duration::from_secs(5);
    c.truth = Some(Arc::clone(truth));
    // The matrix judges resumption (2025-11-25): the dual-era lab would otherwise serve the
    // client's `server/discover` statelessly.
    c.era = crate::load::era::EraChoice::Legacy;
    c
}

/// Runs `cell` once with `seed`, adding `profile`'s faults when given.
pub async fn run(cell: Cell, seed: u64, profile: Option<(&str, &Profile)>) -> RunResult {
    run_traced(cell, seed, profile, None).await
}

/// [`run`], writing the wire of every connection into `book` when given (see
/// [`super::trace`]).
pub async fn run_traced(
    cell: Cell,
    seed: u64,
    profile: Option<(&str, &Profile)>,
    book: Option<Arc<super::trace::TraceBook>>,
) -> RunResult {
    let outcome = run_inner(&cell, seed, profile.map(|p| p.1), book.as_ref())
        .await
        .map(|(truth, observed)| (expect::expected(&truth), observed));
    rig::result(
        cell.label(),
        cell.scenario.is_clean(),
        seed,
        profile.map(|p| p.0.to_owned()),
        outcome,
    )
}

async fn run_inner(
    cell: &Cell,
    seed: u64,
    profile: Option<&Profile>,
    book: Option<&Arc<super::trace::TraceBook>>,
) -> Result<(Truth, BTreeSet<String>), String> {
    let token = CancellationToken::new();
    let _stop = token.clone().drop_guard();
    let lab_truth = Arc::new(LabTruth::default());
    let lab_listener = bind().await?;
    let lab_addr = lab_listener.local_addr().map_err(|e| e.to_string())?;
    let lab = tokio::spawn(crate::lab::serve(
        lab_listener,
        lab_config(cell, &lab_truth),
        token.clone(),
    ));

    let mut faults = match cell.transport {
        Transport::H1 => h1_cuts(cell),
        Transport::H2 { .. } => h2_cuts(cell),
    };
    if let Some(p) = profile {
        faults.extend(p.factories_for(None));
    }
    // The truth's unread window of a reset is the whole cut leg (`expect`): the rig's client
    // records no read times, so the audit takes the whole leg too, whatever the machine's load
    // made of the leg's timing (the time bound itself is tested on a paused clock).
    let auditor = Arc::new(Auditor::new(AuditConfig {
        rst_unread: RIG_RST_UNREAD,
        ..AuditConfig::default()
    }));
    let running =
        rig::start_proxy("accuracy", lab_addr, seed, faults, &auditor, &token, book).await?;
    let proxy_addr = running.addr;

    // Every client of an h2 cell shares one pool: their sessions multiplex on its connections.
    let pool = match cell.transport {
        Transport::H2 { connections, .. } => Some(H2Pool::plain(connections)),
        Transport::H1 => None,
    };
    let target = |path: &str| Target {
        host: proxy_addr.ip().to_string(),
        port: proxy_addr.port(),
        path: path.to_owned(),
        tls: None,
        h2: pool.clone(),
    };
    let mut clients = Vec::new();
    match cell.scenario {
        Scenario::EventSource => {
            let truth = Arc::new(ClientTruth::default());
            let cfg = EventSourceConfig {
                url: target(PLAIN_PATH),
                side_path: Some("/favicon.ico".to_owned()),
                max_connections: 4,
                timeout: Duration::from_secs(10),
                backoff: Duration::from_millis(10),
                truth: Some(Arc::clone(&truth)),
            };
            run_eventsource(&cfg).await;
            clients.push(truth);
        }
        Scenario::Sessions(n) => {
            let truths: Vec<_> = (0..n).map(|_| Arc::new(ClientTruth::default())).collect();
            let runs = truths.iter().map(|t| async {
                let open = || client(target("/mcp"), PROGRESS_N, 4, t);
                let mut r = crate::load::run(open(), token.child_token()).await;
                // On h2 a connection cut of another session's call also breaks a session still
                // opening on that connection: it opens again, as an app would (no call was
                // made, so the truth holds nothing of it).
                for _ in 0..3 {
                    if !matches!(r, Err(crate::load::LoadError::Target { .. }))
                        || !t.legs().is_empty()
                    {
                        break;
                    }
                    r = crate::load::run(open(), token.child_token()).await;
                }
                r
            });
            for r in futures_util::future::join_all(runs).await {
                r.map_err(|e| e.to_string())?;
            }
            clients.extend(truths);
        }
        scenario => {
            if scenario == Scenario::Server(ServerBug::SharedStore) {
                // The first session's call runs uncut to its end; the store now holds it.
                let first = Arc::new(ClientTruth::default());
                let mut own = target("/mcp");
                // On h2 its own connection, so the cut falls on the second client's.
                own.h2 = pool.as_ref().map(|_| H2Pool::plain(1));
                let c = client(own, PROGRESS_N - 2, 4, &first);
                crate::load::run(c, token.child_token())
                    .await
                    .map_err(|e| e.to_string())?;
                clients.push(first);
            }
            let attempts = match scenario {
                Scenario::Server(ServerBug::LoseFinal) | Scenario::Evicted(OnEvicted::Fresh) => 2,
                _ => 4,
            };
            let truth = Arc::new(ClientTruth::default());
            let mut c = client(target("/mcp"), PROGRESS_N, attempts, &truth);
            c.stale_cursor = scenario == Scenario::StaleCursor;
            crate::load::run(c, token.child_token())
                .await
                .map_err(|e| e.to_string())?;
            clients.push(truth);
        }
    }
    // The clients' h2 connections close with their pool, so the drain need not time out.
    drop(pool);
    let observed = rig::settle(running, lab, &token, &auditor).await;
    let truth = Truth {
        lab: lab_truth.legs(),
        clients: clients.iter().map(|c| c.legs()).collect(),
        tcp_resets: cell.action == CutAction::Reset
            && !matches!(
                cell.transport,
                Transport::H2 {
                    scope: CutScope::Stream,
                    ..
                }
            ),
    };
    if std::env::var_os("ACCURACY_DUMP")
        .is_some_and(|v| cell.label().contains(&*v.to_string_lossy()))
    {
        dump(cell, seed, &auditor, &truth);
    }
    Ok((truth, observed))
}

/// `ACCURACY_DUMP=<label substring>`: prints each matching run's findings and truth to stderr
/// (for finding out why a kind is missed or reported without cause).
fn dump(cell: &Cell, seed: u64, auditor: &Auditor, truth: &Truth) {
    let mut out = rig::dump_findings(&cell.label(), seed, auditor);
    for leg in &truth.lab {
        out.push_str(&format!(
            "lab {}\n",
            serde_json::to_string(leg).unwrap_or_default()
        ));
    }
    for (i, legs) in truth.clients.iter().enumerate() {
        for leg in legs {
            out.push_str(&format!("client{i} {leg:?}\n"));
        }
    }
    eprint!("{out}");
}
