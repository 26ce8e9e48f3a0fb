//! Opening a leg: the truth record it writes ([`super::truth`]) and the bug it runs
//! ([`super::bugs`]). The only place the lab's handlers touch either.
//!
//! Invariants: a POST leg never runs a bug (a stream's first leg is always correct); a resume
//! leg runs [`crate::lab::LabConfig::bug`]; with the shared-store bug every POST is indexed by
//! its request ids; with truth recording off, nothing is recorded and nothing allocated.

use std::sync::Arc;

use super::bugs::{LegShape, ServerBug};
use super::session::Session;
use super::shared::Shared;
use super::tools::Step;
use super::truth::{Answer, Injected, LabLeg};

/// The shape of a POST's own stream `stream` answering `steps`.
pub fn post_leg(shared: &Shared, session: &Session, stream: u64, steps: &[Step]) -> LegShape {
    let ids = super::tools::call_ids(steps);
    if shared.cfg.bug == ServerBug::SharedStore {
        shared.bugs.register(&session.id, stream, &ids);
    }
    let leg = shared.cfg.truth.as_ref().map(|t| {
        t.open(LabLeg {
            session: session.id.clone(),
            method: "POST",
            stream,
            request_ids: ids,
            cursor: None,
            answer: Answer::Stream,
            injected: Vec::new(),
            emitted: Vec::new(),
        })
    });
    LegShape::new(ServerBug::None, leg)
}

/// Shared store: the session and stream a resume of `stream` of `session` is served from,
/// when the bug is on and the store's entry belongs to another stream that holds `seq`.
pub fn shared_source(
    shared: &Shared,
    session: &Arc<Session>,
    stream: u64,
    seq: u64,
) -> Option<(Arc<Session>, u64)> {
    if shared.cfg.bug != ServerBug::SharedStore {
        return None;
    }
    let (sid, sstream) = shared.bugs.shared_source(&session.id, stream)?;
    if sid == session.id && sstream == stream {
        return None;
    }
    let other = shared.sessions.get(&sid)?;
    other
        .stream_state(sstream)
        .filter(|&(next, _, _)| seq < next)
        .map(|_| (other, sstream))
}

/// The shape of a resume of `stream` of `session` from `cursor`, answered as `answer`.
pub fn resume_leg(
    shared: &Shared,
    session: &str,
    stream: u64,
    cursor: &str,
    answer: Answer,
    served_from: Option<(&str, u64)>,
) -> LegShape {
    let leg = shared.cfg.truth.as_ref().map(|t| {
        let mut injected = Vec::new();
        if let Some((s, st)) = served_from {
            injected.push(Injected::CrossSession {
                session: s.to_owned(),
                stream: st,
            });
        }
        t.open(LabLeg {
            session: session.to_owned(),
            method: "GET",
            stream,
            request_ids: Vec::new(),
            cursor: Some(cursor.to_owned()),
            answer,
            injected,
            emitted: Vec::new(),
        })
    });
    LegShape::new(shared.cfg.bug, leg)
}
