//! One 2026-07-28 accuracy run, in process on 127.0.0.1 port 0: the lab in stateless mode
//! (recording its execution counter) behind `tearline::proxy` with the scripted [`CallCut`]
//! and the HTTP/1 observer feeding an [`Auditor`], and in front the client — an SDK app driver
//! (a `node` or `python3` process writing its own truth) or tearline's load client (recording
//! truth per leg).
//!
//! Invariants:
//! - The cut hits the first attempt of logical call [`CUT_CALL`] and nothing else; every other
//!   attempt runs uncut (one cut per run).
//! - The seed (mixed with the cell's label) picks the line ending (LF or CRLF), the cut action
//!   (`reset`, `fin`, and for SSE also `clean-end`) and, through the proxy's connection RNG,
//!   the cut's class and offset.
//! - The observed kinds are the auditor's counts after the client finished, the proxy drained
//!   and stopped, and [`Auditor::finish`] ran (default `abandon_after`: a short run judges its
//!   unanswered calls at the end), plus the facet [`expect::UNPROVEN_VISIBLE`] when an
//!   `unproven-resend` finding names a visible start; the expected ones come from the truth
//!   only ([`expect`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::cell::{CALLS, CUT_CALL, Client, ModernCell, Spot, Workload};
use super::cut::{CallCut, CutAim, SseAim};
use super::expect::{self, ModernTruth};
use super::truth::{self as client_truth, Attempt};
use crate::accuracy::RunResult;
use crate::accuracy::rig::{self, bind};
use crate::audit::{AuditConfig, Auditor, FindingKind};
use crate::fault::FaultFactory;
use crate::lab::truth::LabTruth;
use crate::lab::{LabConfig, LineEnding, ProtocolVersion};
use crate::load::truth::ClientTruth;
use crate::load::{LoadConfig, Stop, Target};
use crate::vocab::CutAction;

/// How long an SDK app waits for one call (the TypeScript client fails a cut SSE call only at
/// its request timeout).
pub const SDK_CALL_TIMEOUT_MS: u64 = 2000;
/// Longest an app driver may run.
const DRIVER_BUDGET: Duration = Duration::from_secs(60);

/// The seed mixed with the cell's label, so one seed varies the line ending and the action
/// across the cells of a run set.
fn mix(cell: &ModernCell, seed: u64) -> u64 {
    cell.label()
        .bytes()
        .fold(seed ^ 0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

fn aim(cell: &ModernCell, mixed: u64, eol: LineEnding) -> CutAim {
    let result = cell.tool.result_event();
    let events = match cell.spot {
        // Progress events while the tool still has events to send.
        Spot::ProgressEvent => Some((0, result.saturating_sub(2))),
        Spot::ResultEvent => Some((result, result)),
        Spot::JsonBody => None,
    };
    let sse = events.map(|events| SseAim {
        classes: rig::cut_classes(eol, false),
        events,
    });
    let actions: &[CutAction] = match cell.spot {
        Spot::JsonBody => &[CutAction::Reset, CutAction::Fin],
        _ => &[CutAction::Reset, CutAction::Fin, CutAction::CleanEnd],
    };
    CutAim {
        target: CUT_CALL,
        sse,
        action: actions[(mixed % actions.len() as u64) as usize],
    }
}

/// Runs `cell` once with `seed`.
pub async fn run(cell: ModernCell, seed: u64) -> RunResult {
    let outcome = run_inner(&cell, seed)
        .await
        .and_then(|(truth, observed)| Ok((expect::expected(&truth)?, observed)));
    rig::result(cell.label(), false, seed, None, outcome)
}

async fn run_inner(
    cell: &ModernCell,
    seed: u64,
) -> Result<(ModernTruth, BTreeSet<String>), String> {
    let token = CancellationToken::new();
    let _stop = token.clone().drop_guard();
    let mixed = mix(cell, seed);
    let eol = if (mixed >> 8).is_multiple_of(2) {
        LineEnding::Lf
    } else {
        LineEnding::Crlf
    };
    let lab_truth = Arc::new(LabTruth::default());
    let lab_listener = bind().await?;
    let lab_addr = lab_listener.local_addr().map_err(|e| e.to_string())?;
    let lab_cfg = LabConfig {
        protocol: ProtocolVersion::V2026_07_28,
        narrow: true,
        line_ending: eol,
        json_results: cell.spot == Spot::JsonBody,
        truth: Some(Arc::clone(&lab_truth)),
        ..LabConfig::default()
    };
    let lab = tokio::spawn(crate::lab::serve(lab_listener, lab_cfg, token.clone()));

    let cut = CallCut::new(aim(cell, mixed, eol));
    let faults: Vec<Arc<dyn FaultFactory>> = vec![cut.clone()];
    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    let running = rig::start_proxy(
        "accuracy-2026",
        lab_addr,
        seed,
        faults,
        &auditor,
        &token,
        None,
    )
    .await?;
    let proxy_addr = running.addr;
    let url = format!("http://{proxy_addr}/mcp");

    let attempts = match cell.client {
        Client::TsSdk | Client::PySdk | Client::PySdkH2 => drive_sdk(cell, &url, seed).await?,
        Client::Tearline(policy) | Client::TearlineH2(policy) => {
            let truth = Arc::new(ClientTruth::default());
            let h2 = matches!(cell.client, Client::TearlineH2(_))
                .then(|| crate::load::h2::H2Pool::plain(1));
            let target = Target {
                host: proxy_addr.ip().to_string(),
                port: proxy_addr.port(),
                path: "/mcp".to_owned(),
                tls: None,
                h2,
            };
            let mut c = LoadConfig::new(target, cell.tool.name(), cell.tool.args());
            c.policy = policy;
            c.stop = Stop::Calls(CALLS);
            c.max_attempts = 3;
            c.backoff = Duration::from_millis(10);
            c.max_backoff = Duration::from_millis(50);
            c.call_timeout = Duration::from_secs(5);
            c.connect_timeout = Duration::from_secs(5);
            c.era = crate::load::era::EraChoice::Modern;
            c.distinct_args = cell.workload == Workload::Distinct;
            c.truth = Some(Arc::clone(&truth));
            crate::load::run(c, token.child_token())
                .await
                .map_err(|e| e.to_string())?;
            // The load client's arguments: the tool's, plus `item: <call index>` when distinct.
            let distinct = cell.workload == Workload::Distinct;
            client_truth::from_client_legs(&truth.legs(), |call| {
                let mut a = cell.tool.args();
                if let (true, Some(o)) = (distinct, a.as_object_mut()) {
                    o.insert("item".to_owned(), call.into());
                }
                a
            })
        }
    };
    let mut observed = rig::settle(running, lab, &token, &auditor).await;
    if auditor
        .findings()
        .iter()
        .any(|f| f.kind == FindingKind::UnprovenResend && f.visible_start.is_some())
    {
        observed.insert(expect::UNPROVEN_VISIBLE.to_owned());
    }
    let fact = cut.fact().ok_or_else(|| {
        format!(
            "the scripted cut never fell ({} call responses relayed)",
            cut.responses()
        )
    })?;
    let repeat_safe = crate::lab::tools::list()["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == cell.tool.name()))
        .is_some_and(|t| {
            t["annotations"]["readOnlyHint"] == true || t["annotations"]["idempotentHint"] == true
        });
    let truth = ModernTruth {
        attempts,
        cut: fact,
        executions: lab_truth.executions(),
        repeat_safe,
    };
    if std::env::var_os("ACCURACY_DUMP")
        .is_some_and(|v| cell.label().contains(&*v.to_string_lossy()))
    {
        let mut out = rig::dump_findings(&cell.label(), seed, &auditor);
        out.push_str(&format!("truth {truth:?}\n"));
        eprint!("{out}");
    }
    Ok((truth, observed))
}

/// Runs the cell's SDK app driver against `url` and reads the truth it wrote.
async fn drive_sdk(cell: &ModernCell, url: &str, seed: u64) -> Result<Vec<Attempt>, String> {
    let (what, script) = match cell.client {
        Client::TsSdk => ("node", "js/app_driver.mjs"),
        _ => ("python", "py/app_driver.py"),
    };
    tokio::task::spawn_blocking(move || super::super::peers::provision(what))
        .await
        .map_err(|e| e.to_string())??;
    let file = std::env::temp_dir().join(format!(
        "tearline-accuracy-{}-{}-{seed}.jsonl",
        std::process::id(),
        cell.label().replace('/', "_")
    ));
    let mut cmd = match cell.client {
        Client::TsSdk => super::super::peers::node(),
        _ => super::super::peers::python(),
    };
    cmd.arg(super::super::peers::dir().join(script))
        .arg(url)
        .arg(cell.workload.as_str())
        .arg(CALLS.to_string())
        .arg(cell.tool.name())
        .arg(cell.tool.args().to_string())
        .arg(&file)
        .arg(SDK_CALL_TIMEOUT_MS.to_string());
    if cell.client == Client::PySdkH2 {
        cmd.arg("h2");
    }
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    let out = tokio::time::timeout(DRIVER_BUDGET, cmd.output())
        .await
        .map_err(|_| format!("the {what} app driver ran over {DRIVER_BUDGET:?}"))?
        .map_err(|e| format!("cannot run the {what} app driver: {e}"))?;
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_file(&file);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        return Err(format!(
            "the {what} app driver failed ({}): {}",
            out.status,
            lines[lines.len().saturating_sub(4)..].join(" | ")
        ));
    }
    client_truth::from_driver_jsonl(&text)
}
