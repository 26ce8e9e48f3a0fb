//! A cut budget: a positioned fault (`sse_cut`) on every connection of a run, cutting at most
//! `n` streams in all.
//!
//! Why: on HTTP/1.1 the rig names the connections to cut ([`super::run::OnConnections`]), since
//! every later leg opens a connection of its own. On HTTP/2 one connection carries a session's
//! POST, its resumes and its re-issues, so a per-connection choice would cut a re-issued call
//! again; the contract's premise is one cut per logical stream, so the run grants `n` cuts,
//! whichever streams and connections they fall on.
//! The budget's lock is held while the inner fault decides (a test rig's few connections).
//!
//! Invariants: the wrapped factory's HTTP/2 keys pass through (so the stream relay engages as
//! it would for the bare fault); once the budget is spent no instance shows the inner fault
//! another chunk, so no stream is cut after the `n`-th cut.

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::fault::{Chunk, ConnRng, Deadline, Fault, FaultFactory, Plan, h2};
use crate::vocab::Direction;

/// `inner` on every connection, at most `n` cuts over all of them.
pub struct CutBudget {
    inner: Arc<dyn FaultFactory>,
    left: Arc<Mutex<usize>>,
}

impl CutBudget {
    /// `inner`, cutting at most `n` streams in all.
    pub fn new(inner: Arc<dyn FaultFactory>, n: usize) -> Arc<Self> {
        Arc::new(CutBudget {
            inner,
            left: Arc::new(Mutex::new(n)),
        })
    }
}

impl FaultFactory for CutBudget {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn direction(&self) -> Direction {
        self.inner.direction()
    }

    fn instantiate(&self, rng: &mut ConnRng, now: Instant) -> Option<Box<dyn Fault>> {
        let inner = self.inner.instantiate(rng, now)?;
        Some(Box::new(Budgeted {
            inner,
            left: Arc::clone(&self.left),
        }))
    }

    fn h2_body_cut(&self) -> Option<h2::BodyCut> {
        self.inner.h2_body_cut()
    }

    fn h2(&self) -> Option<&dyn h2::H2FaultFactory> {
        self.inner.h2()
    }
}

/// One connection's instance: the inner fault while the shared budget lasts.
struct Budgeted {
    inner: Box<dyn Fault>,
    left: Arc<Mutex<usize>>,
}

impl Fault for Budgeted {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, rng: &mut ConnRng) {
        // Held across the inner decision, so two connections never both spend the last cut.
        let mut left = self.left.lock().unwrap_or_else(|p| p.into_inner());
        if *left == 0 {
            return;
        }
        let before = plan.cut();
        self.inner.on_chunk(chunk, plan, rng);
        if plan.cut() != before {
            *left -= 1;
        }
    }

    fn deadline(&self) -> Option<Deadline> {
        self.inner.deadline()
    }

    fn on_eof(&mut self, now: Instant) -> Instant {
        self.inner.on_eof(now)
    }

    fn rebase(&mut self, offset: u64) {
        self.inner.rebase(offset);
    }
}
