//! Verdicts are a function of the wire (issue 34, item 1): the wire traces of real accuracy
//! runs (lab + proxy + strict, stale-cursor and EventSource-like clients, every scenario,
//! every cut action), and the same traces with the first connection cut instead in the head
//! of a later response on it, replayed through fresh observers and a fresh auditor with random
//! read splits and random causally valid interleavings of the connections
//! (`tearline::accuracy::trace_replay`), give the findings of the recorded reads in the
//! recorded order: the same kinds with the same evidence (session, stream, ids, raw offsets,
//! cut, proof, candidates). Times and texts are not compared (an observation that arrives
//! late takes a later time).

use std::time::Duration;

use futures_util::StreamExt;
use tearline::accuracy::trace::{Trace, TraceBook};
use tearline::accuracy::trace_replay::replay;
use tearline::accuracy::{Cell, Scenario, matrix, run};
use tearline::audit::{AuditConfig, Auditor, Finding};
use tearline::vocab::CutAction;
use tearline::wire::{Observation, ObservationSink};
use tokio::time::Instant;

/// Random replays per trace.
const VARIANTS: u64 = 24;

/// What a finding says about the wire (not when it was found, not its text).
fn key(f: &Finding) -> String {
    let cands: Vec<_> = f
        .candidates
        .iter()
        .map(|c| (c.id.clone(), c.session.clone(), c.conn, c.seq))
        .collect();
    format!(
        "{} session={:?} stream={:?} ids={:?} raw={:?} cut={:?} proof={:?} candidates={:?}",
        f.kind.as_str(),
        f.session,
        f.stream,
        f.ids,
        f.raw_offsets,
        f.cut,
        f.proof,
        cands
    )
}

/// The findings (sorted keys) an auditor reports when fed `obs` at their times, then finished.
fn judge(obs: &[(Duration, Observation)]) -> Vec<String> {
    let mut keys: Vec<String> = judge_full(obs).iter().map(key).collect();
    keys.sort();
    keys
}

/// The findings an auditor reports when fed `obs` at their times, then finished.
fn judge_full(obs: &[(Duration, Observation)]) -> Vec<Finding> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a paused runtime");
    rt.block_on(async {
        let auditor = Auditor::new(AuditConfig::default());
        let base = Instant::now();
        for (at, o) in obs {
            let due = base + *at;
            let now = Instant::now();
            if due > now {
                tokio::time::advance(due - now).await;
            }
            auditor.record(o.clone());
        }
        auditor.finish();
        auditor.findings()
    })
}

/// One cell of every scenario, the cut actions, line endings and id styles taken in turn,
/// plus the cells the issue names.
fn cells() -> Vec<(Cell, u64)> {
    let all = matrix();
    let mut out: Vec<(Cell, u64)> = Scenario::ALL
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let of: Vec<&Cell> = all.iter().filter(|c| c.scenario == *s).collect();
            of.get((i * 5) % of.len().max(1))
                .map(|c| (**c, 7 + i as u64))
        })
        .collect();
    for (label, seed) in [
        ("evicted-from-oldest/counter/lf/clean-end", 8),
        ("reorder/counter/crlf/fin", 1001),
    ] {
        if let Some(c) = all.iter().find(|c| c.label() == label) {
            out.push((*c, seed));
        }
    }
    out
}

/// The traces of real runs of `cells()`, recorded 6 at a time.
fn record() -> Vec<(String, Trace)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let runs = futures_util::stream::iter(cells())
            .map(|(cell, seed)| async move {
                let book = std::sync::Arc::new(TraceBook::default());
                let r = run::run_traced(cell, seed, None, Some(book.clone())).await;
                assert!(
                    r.harness_error.is_none(),
                    "{}: {:?}",
                    r.label,
                    r.harness_error
                );
                (format!("{} seed {seed}", r.label), book.trace())
            })
            .buffer_unordered(6)
            .collect::<Vec<_>>();
        tokio::time::timeout(Duration::from_secs(60), runs)
            .await
            .expect("the traced runs must finish within 60 s")
    })
}

/// Raw offsets on connection `conn`'s downstream in the heads of its second and later
/// responses: the first byte, one inside, the last; and the last byte of the body before.
fn head_cuts(trace: &Trace, conn: u64) -> Vec<u64> {
    let down = trace.downstream(conn);
    let starts: Vec<usize> = down
        .windows(9)
        .enumerate()
        .filter(|(_, w)| *w == b"HTTP/1.1 ")
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    for &h in starts.iter().skip(1) {
        let Some(len) = down[h..].windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        out.extend([h, h + 1, h + len / 2, h + len + 3].map(|x| x as u64));
    }
    out
}

/// Every variant of `trace` gives the findings of its recorded replay.
fn check(label: &str, trace: &Trace) -> usize {
    let want = judge(&replay(trace, None));
    for v in 0..VARIANTS {
        let got = judge(&replay(trace, Some(v)));
        assert_eq!(
            got, want,
            "{label}: variant {v} (random reads and interleaving) judged otherwise than the \
             recorded reads"
        );
    }
    want.len()
}

#[test]
fn findings_are_the_same_whatever_the_read_splits_and_the_interleaving() {
    let traces = record();
    assert!(
        traces.len() >= Scenario::ALL.len(),
        "{} traces",
        traces.len()
    );
    let mut findings = 0;
    let mut moved = 0;
    for (label, trace) in &traces {
        findings += check(label, trace);
        // The first connection cut in a later response's head, each action.
        for (i, x) in head_cuts(trace, 0).into_iter().enumerate() {
            let action = [CutAction::Reset, CutAction::Fin][i % 2];
            if let Some(t) = trace.with_cut(0, x, action) {
                check(&format!("{label}, cut at {x} ({action:?})"), &t);
                moved += 1;
            }
        }
    }
    assert!(
        findings > traces.len(),
        "the traces gave {findings} findings"
    );
    assert!(moved >= traces.len(), "only {moved} cuts in a later head");
}

#[test]
fn a_replay_keeps_every_observation_and_each_direction_in_order() {
    // The replay itself: the random interleavings hold every observation of the recorded one,
    // each connection's requests in their order, and times never go back.
    let traces = record_one();
    let whole = replay(&traces, None);
    for v in 0..8 {
        let got = replay(&traces, Some(v));
        assert_eq!(got.len(), whole.len(), "variant {v}");
        assert!(
            got.windows(2).all(|w| w[0].0 <= w[1].0),
            "variant {v}: time"
        );
        let seqs = |obs: &[(Duration, Observation)]| -> Vec<(u64, u64)> {
            obs.iter()
                .filter_map(|(_, o)| match o {
                    Observation::Request { conn, seq, .. } => Some((*conn, *seq)),
                    _ => None,
                })
                .collect()
        };
        let (mut a, b) = (seqs(&got), seqs(&whole));
        a.sort();
        let mut b_sorted = b.clone();
        b_sorted.sort();
        assert_eq!(a, b_sorted, "variant {v}: the same requests");
    }
    // Not the recorded order every time: the interleavings do differ.
    let orders: std::collections::BTreeSet<String> = (0..8)
        .map(|v| {
            format!(
                "{:?}",
                replay(&traces, Some(v))
                    .iter()
                    .map(|o| &o.1)
                    .collect::<Vec<_>>()
            )
        })
        .collect();
    assert!(orders.len() > 1, "every variant had the same order");
}

/// The trace of one run with a cut and a resume on a second connection.
fn record_one() -> Trace {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let cell = matrix()
        .into_iter()
        .find(|c| c.label() == "clean/counter/lf/reset")
        .expect("the cell");
    rt.block_on(async {
        let book = std::sync::Arc::new(TraceBook::default());
        let r = run::run_traced(cell, 3, None, Some(book.clone())).await;
        assert!(r.harness_error.is_none(), "{:?}", r.harness_error);
        book.trace()
    })
}
