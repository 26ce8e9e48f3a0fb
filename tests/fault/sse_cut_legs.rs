//! Position and leg are two dimensions, on real sockets (lab server → proxy → strict load
//! client): `at = "mid-value"` cuts resume legs (responses to requests carrying
//! `Last-Event-ID`) as well as first legs, and `leg` restricts it to one kind of leg.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::delivery::*;
use tearline::fault::FaultFactory;
use tearline::lab::LineEnding;
use tearline::wire::{Observation, SseClass};

fn mid_value(leg: Option<&str>, p: f64) -> Arc<dyn FaultFactory> {
    let mut pairs = vec![
        ("kind", s("sse_cut")),
        ("at", s("mid-value")),
        ("range", toml::Value::Array(vec![i(0), i(300)])),
        ("action", s("reset")),
        ("probability", f(p)),
    ];
    if let Some(leg) = leg {
        pairs.push(("leg", s(leg)));
    }
    fault(&pairs)
}

/// (cuts on first legs, cuts on resume legs, resume requests seen), each cut checked to tear
/// its event (a resume-leg tear is recorded as `during-replay`).
fn cuts_by_leg(all: &[Observation]) -> (usize, usize, usize) {
    let mut resume_of: BTreeMap<u64, bool> = BTreeMap::new();
    let (mut first, mut resume, mut resumes) = (0, 0, 0);
    for o in all {
        match o {
            Observation::Request {
                conn,
                last_event_id,
                ..
            } => {
                resume_of.insert(*conn, last_event_id.is_some());
                resumes += usize::from(last_event_id.is_some());
            }
            Observation::Cut { conn, point, .. } => {
                if resume_of.get(conn).copied().unwrap_or(false) {
                    assert_eq!(point.class, Some(SseClass::DuringReplay), "{point:?}");
                    resume += 1;
                } else {
                    assert_eq!(point.class, Some(SseClass::MidValue), "{point:?}");
                    first += 1;
                }
                assert!(point.torn_bytes > 0, "{point:?}");
            }
            _ => {}
        }
    }
    (first, resume, resumes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_value_cuts_resume_legs_as_well_as_first_legs() {
    let run = run(
        21,
        vec![mid_value(None, 0.6)],
        Traffic::small(LineEnding::Lf),
    )
    .await;
    assert_delivery_truth(&run, "any leg");
    let (first, resume, _) = cuts_by_leg(&run.recorder.all());
    assert!(first > 0, "no first leg was cut mid-value");
    assert!(
        resume > 0,
        "no resume leg was cut mid-value ({first} first-leg cuts)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leg_first_never_cuts_a_resume_leg() {
    let run = run(
        21,
        vec![mid_value(Some("first"), 1.0)],
        Traffic::small(LineEnding::Lf),
    )
    .await;
    let (first, resume, resumes) = cuts_by_leg(&run.recorder.all());
    assert!(first > 0 && resumes > 0, "{first} cuts, {resumes} resumes");
    assert_eq!(resume, 0, "a resume leg was cut despite leg = \"first\"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leg_resume_cuts_only_resume_legs() {
    // The first fault tears first legs only (so the client resumes); the second aims at
    // resume legs only, and ends them with FIN to tell its cuts apart.
    let run = run(
        22,
        vec![
            mid_value(Some("first"), 1.0),
            fault(&[
                ("kind", s("sse_cut")),
                ("at", s("before-dispatch")),
                ("leg", s("resume")),
                ("action", s("fin")),
                ("probability", f(0.7)),
            ]),
        ],
        Traffic::small(LineEnding::Lf),
    )
    .await;
    let all = run.recorder.all();
    let mut resume_of: BTreeMap<u64, bool> = BTreeMap::new();
    let mut fin_cuts = 0;
    for o in &all {
        match o {
            Observation::Request {
                conn,
                last_event_id,
                ..
            } => {
                resume_of.insert(*conn, last_event_id.is_some());
            }
            Observation::Cut {
                conn,
                action,
                point,
                ..
            } if *action == tearline::vocab::CutAction::Fin => {
                assert_eq!(resume_of.get(conn), Some(&true), "{point:?}");
                assert_eq!(point.class, Some(SseClass::DuringReplay), "{point:?}");
                fin_cuts += 1;
            }
            _ => {}
        }
    }
    assert!(fin_cuts > 0, "the resume-only fault cut no resume leg");
}
