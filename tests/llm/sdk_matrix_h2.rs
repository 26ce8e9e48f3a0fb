//! The truncation matrix over HTTP/2 (issue 36): every truncation kind × Python SDK client
//! (`openai`, `anthropic`, each API and call style) × text/tool answer, the SDK speaking h2c
//! (prior knowledge) through the `httpx.Client(http2=True, http1=False)` an app hands it, to
//! tearline's stream relay, which makes each cut the h2 way (`RST_STREAM` or `END_STREAM` on
//! the one stream; a TCP `FIN`/reset where the kind is one). tearline's observation and its
//! verdicts (the `llm-*` findings) are scored against the same truth as on HTTP/1.1: on h2 the
//! cut, the retry and the client giving up look different on the wire, and must still read as
//! the same facts.
//!
//! Only the Python SDKs: the Node SDKs' `fetch` has no h2 switch an app can turn on. The h2
//! form of each cut is in `support::matrix` (`h2_form`): a stall holds the whole connection,
//! because a stream-scope stall is recorded by the relay as ended when it begins (the
//! `StreamEnd` is observed at the cut's decision, the `RST_STREAM` leaves `stall_ms` later), so
//! the verdicts never see the silence. `TEARLINE_H2_DUMP=1` adds every observation of a
//! misjudged cell to the failure message.

use crate::support::drivers::Mode;
use crate::support::matrix::{self, Matrix};
use crate::support::table::{Key, Kind};
use crate::support::truth::{self, Fact, Score};
use crate::support::{Wire, judged, observed};

/// Runs in flight per SDK driver.
const PARALLEL: usize = 8;

/// Every cell's expected facts, and what the observer and the verdicts stated.
struct Scored {
    key: Key,
    expected: Vec<Fact>,
    observed: Vec<Fact>,
    judged: Vec<Fact>,
}

fn score(m: &Matrix) -> Vec<Scored> {
    m.cells
        .iter()
        .map(|c| {
            let tool = c.key.mode == Mode::Tool;
            Scored {
                key: c.key.clone(),
                expected: truth::truth(c.key.kind, c.key.mode, c.fault.is_some(), c.requests),
                observed: observed::facts(&c.observations, tool),
                judged: judged::facts(&c.findings, tool),
            }
        })
        .collect()
}

/// Each fact's true positives, false positives and false negatives over all cells, with how
/// many cells expected it and how many did not (a fact no cell rules out is not tested).
fn per_fact(
    cells: &[Scored],
    expected: impl Fn(&Scored) -> Vec<Fact>,
    stated: impl Fn(&Scored) -> Vec<Fact>,
) -> String {
    let mut facts: Vec<Fact> = cells.iter().flat_map(&expected).collect();
    facts.sort();
    facts.dedup();
    let mut out = String::from("| fact | TP | FP | FN | cells with | cells without |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for f in facts {
        let (mut s, mut with, mut without) = (Score::default(), 0, 0);
        for c in cells {
            let e: Vec<Fact> = expected(c).into_iter().filter(|x| *x == f).collect();
            let r: Vec<Fact> = stated(c).into_iter().filter(|x| *x == f).collect();
            s.add(Score::of(&e, &r));
            if e.is_empty() {
                without += 1;
            } else {
                with += 1;
            }
        }
        out.push_str(&format!(
            "| {f:?} | {} | {} | {} | {with} | {without} |\n",
            s.tp, s.fp, s.fn_
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdks_over_h2_get_every_cut_and_tearline_states_the_wire_facts() {
    let started = std::time::Instant::now();
    let (lab, stop) = crate::sdk::lab().await;
    let m = matrix::run(lab, Wire::H2, |_: &Key| true, PARALLEL).await;
    stop.cancel();
    // One cut per attempt the client made (its own count: a reset can end an attempt before
    // its body reached the lab, which then counts no request).
    for c in &m.cells {
        let attempts = c
            .outcome
            .requests
            .expect("the h2 driver counts its requests");
        assert!(c.requests <= attempts, "{:?}: {:?}", c.key, c.outcome);
        assert_eq!(
            c.cuts.len() as u64,
            u64::from(c.fault.is_some()) * attempts,
            "{:?}: {:?} fault {:?} cuts {:?}",
            c.key,
            c.outcome,
            c.fault,
            c.cuts
        );
    }
    // Every client got its whole answer over h2 without a fault (the reference a cut is read
    // against), and every stream-scope cut fell in an h2 stream: the runs really were HTTP/2.
    // (A `fin`, a `reset` fault and a stall end the TCP connection: their cut points name no
    // stream.)
    for ((client, mode), full) in &m.full {
        assert!(
            full.finish.is_some(),
            "{client:?} {mode:?} over h2: {full:?}"
        );
    }
    let connection_scope =
        |k: Kind| matches!(k, Kind::ResetBeforeResponse | Kind::Fin | Kind::Stall);
    for c in m.cells.iter().filter(|c| !connection_scope(c.key.kind)) {
        assert!(
            c.cuts.iter().all(|p| p.h2_stream.is_some()),
            "{:?}: a cut outside an h2 stream: {:?}",
            c.key,
            c.cuts
        );
    }
    let cells = score(&m);
    // The observer cannot state a stall (a judgement over time): it is scored without them.
    let no_stall =
        |v: &[Fact]| -> Vec<Fact> { v.iter().copied().filter(|f| *f != Fact::Stalled).collect() };
    let mut wrong = Vec::new();
    let mut obs_rows = Vec::new();
    let mut judged_rows = Vec::new();
    for c in &cells {
        let expected = no_stall(&c.expected);
        let o = Score::of(&expected, &c.observed);
        let j = Score::of(&c.expected, &c.judged);
        if o.fp + o.fn_ > 0 {
            wrong.push(format!(
                "observer {:?}: expected {expected:?}, observed {:?}",
                c.key, c.observed
            ));
        }
        if j.fp + j.fn_ > 0 {
            let cell = m.cells.iter().find(|x| x.key == c.key).expect("its cell");
            let llm: Vec<String> = cell
                .findings
                .iter()
                .filter(|f| f.kind.as_str().starts_with("llm-"))
                .map(|f| format!("{}: {}", f.kind, f.detail))
                .collect();
            wrong.push(format!(
                "verdicts {:?}: expected {:?}, stated {:?} (requests at the lab {}, outcome {:?})\n  {}",
                c.key,
                c.expected,
                c.judged,
                cell.requests,
                cell.outcome,
                llm.join("\n  ")
            ));
            if std::env::var_os("TEARLINE_H2_DUMP").is_some() {
                for o in &cell.observations {
                    wrong.push(format!("    {o:?}"));
                }
            }
        }
        obs_rows.push((c.key.kind, c.key.client.sdk, o, expected.len() as u64));
        judged_rows.push((c.key.kind, c.key.client.sdk, j, c.expected.len() as u64));
    }
    eprintln!(
        "h2: tearline's LLM observation vs the wire (precision / recall):\n{}\n{}",
        truth::score_table(&obs_rows),
        per_fact(&cells, |c| no_stall(&c.expected), |c| c.observed.clone())
    );
    eprintln!(
        "h2: tearline's LLM verdicts vs the wire (precision / recall):\n{}\n{}",
        truth::score_table(&judged_rows),
        per_fact(&cells, |c| c.expected.clone(), |c| c.judged.clone())
    );
    eprintln!(
        "h2 matrix: {} cells in {:.1} s",
        m.cells.len(),
        started.elapsed().as_secs_f64()
    );
    // Each fact the verdicts state must be required in some cell and ruled out in another.
    for f in [
        Fact::Truncated {
            tool_complete: None,
        },
        Fact::Truncated {
            tool_complete: Some(false),
        },
        Fact::Truncated {
            tool_complete: Some(true),
        },
        Fact::TerminalMissing,
        Fact::Stalled,
        Fact::Retried,
    ] {
        let with = cells.iter().filter(|c| c.expected.contains(&f)).count();
        assert!(
            with > 0 && with < cells.len(),
            "{f:?} is expected in {with} of {} cells: the matrix does not test it",
            cells.len()
        );
    }
    assert!(
        m.cells.iter().any(|c| c.key.kind == Kind::Stall),
        "no stall cell"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
