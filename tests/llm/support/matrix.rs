//! The truncation matrix: every kind × client × mode through its own tearline proxy with one
//! `sse_cut` fault, all runs of one SDK in one driver process, beside each client's no-fault
//! answer (the reference a cut answer is compared with).
//!
//! Invariants: a cell's proxy, fault, auditor and request counter serve that cell only; the
//! cut of kind K lands at the same event of the answer for every client (placed by [`layout`],
//! from the lab's own bytes); every cell yields exactly one [`CellRun`].

use std::collections::BTreeMap;
use std::net::SocketAddr;

use std::sync::Arc;

use tearline::audit::Finding;
use tearline::fault::FaultFactory;
use tearline::fault::keys::FaultDef;
use tearline::fault::registry::{Built, build};
use tearline::wire::{CutPoint, Observation};

use super::drivers::{Api, Client, Job, Mode, Outcome, Sdk, clients, run_jobs};
use super::layout::{Layout, layout};
use super::table::{Full, Key, Kind};
use super::{CellProxy, RequestCounter, Wire, h2_head};

/// The SDK's `timeout` option and the driver's watchdog in stall cells: Python and Vercel give
/// up at the timeout; the Node SDKs' timers stop once headers arrive, so they are still waiting
/// at the watchdog.
/// Stall runs start last (after every other run of their SDK), when the machine is least busy:
/// a loaded machine must not make Vercel's total timeout fire before the stream reaches the
/// cut, nor Python's read timeout fire after the watchdog.
pub const STALL_TIMEOUT_MS: u64 = 3_000;
pub const STALL_DEADLINE_MS: u64 = 10_000;
/// How long the proxy holds a stalled stream before it resets it (past the watchdog).
const STALL_HOLD_MS: u64 = 12_000;
/// Outside stall cells nothing may take this long (a run that does is a failure, not a hang).
const TIMEOUT_MS: u64 = 20_000;
const DEADLINE_MS: u64 = 30_000;

/// The fault (a profile's `[[fault]]` table, as a user writes it) that makes `kind` on an answer
/// laid out as `l`, or `None` when the stream has no such place (the Responses API has no
/// terminal event after its completion signal).
pub fn fault(kind: Kind, api: Api, l: &Layout) -> Option<String> {
    let mid = l.middle();
    let (at, event, action, stall) = match kind {
        // The first response byte is never delivered: the connection is reset instead.
        Kind::ResetBeforeResponse => {
            return Some("kind = \"reset\"\ndirection = \"downstream\"\nbytes = 0\n".into());
        }
        // Before the first delta's event: the head and the opening events arrived, no token.
        Kind::ResetBeforeFirstToken => ("boundary", l.deltas[0], "reset", None),
        // A `boundary` cut point with event index E lies before event E. Here: every delta
        // arrived, the signal did not.
        Kind::CleanBeforeSignal => ("boundary", l.signal, "clean-end", None),
        Kind::CleanMidData => ("mid-value", mid, "clean-end", None),
        Kind::Reset => ("mid-value", mid, "reset", None),
        Kind::Fin => ("mid-value", mid, "fin", None),
        // At the first delta: the stall starts as early in the answer as a delta can be.
        Kind::Stall => ("mid-value", l.deltas[0], "reset", Some(STALL_HOLD_MS)),
        Kind::AfterSignal if api == Api::Responses => return None,
        Kind::AfterSignal => ("boundary", l.signal + 1, "clean-end", None),
        // Between two argument deltas: the arguments so far are well-formed events, unfinished.
        Kind::MidToolArgs => ("boundary", mid, "clean-end", None),
    };
    let mut t = format!(
        "kind = \"sse_cut\"\ndirection = \"downstream\"\nat = \"{at}\"\naction = \"{action}\"\n\
         events = [{event}, {event}]\nmethod = \"POST\"\n"
    );
    if let Some(ms) = stall {
        t.push_str(&format!("stall_ms = {ms}\n"));
    }
    Some(t)
}

/// The fault table of `kind` as it runs on `wire`. On HTTP/2 (`head`: the bytes the lab
/// writes before its first response head, see [`h2_head`]): "RST before the response" resets
/// the connection at the response head's first byte (the server speaks first on h2, so byte 0
/// is its `SETTINGS`, written before the request is read); a stall holds the whole connection
/// (`scope = "connection"`), as on HTTP/1.1 — a stream-scope stall is recorded as ended when
/// it begins (see the h2 matrix test); every other kind keeps its table (an `sse_cut` ends
/// the one stream it cuts, `fin` the connection).
fn h2_form(table: String, kind: Kind, wire: Wire, head: u64) -> String {
    match (wire, kind) {
        (Wire::H2, Kind::ResetBeforeResponse) => {
            table.replace("bytes = 0\n", &format!("bytes = {head}\n"))
        }
        (Wire::H2, Kind::Stall) => format!("{table}scope = \"connection\"\n"),
        _ => table,
    }
}

/// The fault factory a `[[fault]]` table defines (through the registry, as profiles are read).
fn build_fault(table: &str) -> Arc<dyn FaultFactory> {
    let t: toml::Table = toml::from_str(table).expect("a fault table");
    match build(&FaultDef::from_pairs(t)) {
        Ok(Built::Conn(f)) => f,
        other => panic!("{table} is not a connection fault: {other:?}"),
    }
}

/// One cell's run: what the SDK did and what tearline saw.
pub struct CellRun {
    pub key: Key,
    pub outcome: Outcome,
    /// Requests the lab received for this cell (the retry ground truth).
    pub requests: u64,
    pub findings: Vec<Finding>,
    pub cuts: Vec<CutPoint>,
    /// Everything the cell's proxy observed, in order.
    pub observations: Vec<Observation>,
    /// The fault table used (`None`: no such place in this stream, no fault).
    pub fault: Option<String>,
}

/// What one matrix run produced.
pub struct Matrix {
    pub full: BTreeMap<(Client, Mode), Full>,
    pub layouts: BTreeMap<(Api, Mode), Layout>,
    pub cells: Vec<CellRun>,
}

/// The clients that can speak `wire`: every client on HTTP/1.1; on HTTP/2 the Python SDKs
/// (an `httpx.Client(http2=True)` is their documented way there; the Node SDKs' `fetch` has
/// none).
pub fn clients_on(wire: Wire) -> Vec<Client> {
    clients()
        .into_iter()
        .filter(|c| wire == Wire::H1 || matches!(c.sdk, Sdk::PyOpenai | Sdk::PyAnthropic))
        .collect()
}

/// Runs every cell `keep` selects (and each client's no-fault reference run) against `lab`,
/// every client speaking `wire` (HTTP/2: prior knowledge, to the lab and to each cell's proxy).
/// The fault tables are the same on both: on HTTP/2 an `sse_cut` ends the stream it cuts
/// (`scope = "stream"`, the default: `reset` → `RST_STREAM`, `clean-end` → `END_STREAM`) and a
/// `fin` or a `reset` fault ends the TCP connection, as those kinds need.
pub async fn run(
    lab: SocketAddr,
    wire: Wire,
    keep: impl Fn(&Key) -> bool,
    parallel: usize,
) -> Matrix {
    let mut layouts = BTreeMap::new();
    for api in [Api::Chat, Api::Responses, Api::Messages] {
        for mode in Mode::ALL {
            layouts.insert((api, mode), layout(lab, api, mode).await);
        }
    }
    let head = match wire {
        Wire::H2 => h2_head::lab_bytes_before_response(lab).await,
        Wire::H1 => 0,
    };
    let mut jobs = Vec::new();
    let mut reference = BTreeMap::new();
    struct Pending {
        key: Key,
        job: usize,
        proxy: CellProxy,
        counter: RequestCounter,
        fault: Option<String>,
    }
    let mut pending = Vec::new();
    for mode in Mode::ALL {
        for client in clients_on(wire) {
            reference.insert((client, mode), jobs.len());
            jobs.push(Job {
                id: jobs.len(),
                base: format!("http://{lab}"),
                client,
                mode,
                timeout_ms: TIMEOUT_MS,
                deadline_ms: DEADLINE_MS,
                h2: wire == Wire::H2,
            });
            for kind in Kind::ALL {
                let key = Key { mode, client, kind };
                if !kind.applies(mode) || !keep(&key) {
                    continue;
                }
                let fault = fault(kind, client.api, &layouts[&(client.api, mode)])
                    .map(|t| h2_form(t, kind, wire, head));
                let faults = fault.iter().map(|t| build_fault(t)).collect();
                let counter = RequestCounter::start_on(lab, wire).await;
                let proxy = CellProxy::start("llm-cell", counter.addr, faults).await;
                let (timeout_ms, deadline_ms) = if kind == Kind::Stall {
                    (STALL_TIMEOUT_MS, STALL_DEADLINE_MS)
                } else {
                    (TIMEOUT_MS, DEADLINE_MS)
                };
                pending.push(Pending {
                    key,
                    job: jobs.len(),
                    proxy,
                    counter,
                    fault,
                });
                jobs.push(Job {
                    id: jobs.len(),
                    base: pending.last().map(|p| p.proxy.base()).unwrap_or_default(),
                    client,
                    mode,
                    timeout_ms,
                    deadline_ms,
                    h2: wire == Wire::H2,
                });
            }
        }
    }
    // Stall runs last (stable: everything else keeps its order).
    jobs.sort_by_key(|j| j.timeout_ms == STALL_TIMEOUT_MS);
    let mut out = run_jobs(&jobs, parallel).await;
    futures_util::future::join_all(pending.iter().map(|p| p.proxy.settle())).await;
    let full = reference
        .into_iter()
        .map(|(k, id)| (k, Full::of(&out[&id])))
        .collect();
    let cells = pending
        .into_iter()
        .map(|p| {
            let observations = p.proxy.observations();
            let cuts = observations
                .iter()
                .filter_map(|o| match o {
                    Observation::Cut { point, .. } => Some(point.clone()),
                    _ => None,
                })
                .collect();
            CellRun {
                key: p.key,
                outcome: out.remove(&p.job).expect("an outcome per job"),
                requests: p.counter.requests(),
                findings: p.proxy.findings(),
                cuts,
                observations,
                fault: p.fault,
            }
        })
        .collect();
    Matrix {
        full,
        layouts,
        cells,
    }
}
