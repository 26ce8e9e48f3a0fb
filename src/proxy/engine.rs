//! The relay engine's one decision: which path carries a direction's next bytes.
//!
//! It exists so the choice between the zero-copy path ([`super::splice`], socket → pipe →
//! socket inside the kernel) and the copying pump (read buffer, observer, fault plan, timed
//! queue) is made in one visible place, from the inspection side's own declarations: the
//! observer's [`WireObserver::is_opaque`] and each fault's [`Fault::unseen`].
//!
//! Invariants:
//! - A direction goes zero-copy if and only if zero-copy is enabled and available, the pump
//!   holds nothing (no chunk in flight, empty timed queue), the observer is opaque, and no fault
//!   of the chain must see the next byte. It then moves at most [`budget`] bytes before it hands
//!   back, so a byte-offset cut still fires on the copying path at exactly its offset.
//! - A handback happens only with the pipe empty: every byte taken from the source was written
//!   to the destination first, so bytes are never lost or reordered across paths.

use crate::fault::{Deadline, Fault, Unseen};
use crate::wire::WireObserver;

/// How many bytes from stream offset `offset` may go zero-copy, or `None` if the next byte
/// must be read by the copying pump (the observer still parses, a fault edits bytes, or a byte
/// cut falls on the next byte).
pub(crate) fn budget(
    faults: &[Box<dyn Fault>],
    observer: &dyn WireObserver,
    offset: u64,
) -> Option<u64> {
    if !observer.is_opaque() {
        return None;
    }
    let mut limit = u64::MAX;
    for f in faults {
        match f.unseen() {
            Unseen::Never => return None,
            Unseen::Before(at) => limit = limit.min(at),
            Unseen::Always => {}
        }
    }
    let left = limit.saturating_sub(offset);
    (left > 0).then_some(left)
}

/// Why the zero-copy path gave the direction back. Every variant is returned with the pipe
/// empty; `moved` bytes were read from the source and delivered to the destination.
#[derive(Debug)]
pub(crate) enum Handback {
    /// The copying pump takes over (budget spent, fault list changed, splice unusable).
    Copy { moved: u64 },
    /// The source sent EOF.
    Eof { moved: u64 },
    /// A fault's deadline fired.
    Deadline { moved: u64, deadline: Deadline },
}

impl Handback {
    /// Bytes moved socket to socket before the handback.
    pub(crate) fn moved(&self) -> u64 {
        match *self {
            Handback::Copy { moved }
            | Handback::Eof { moved }
            | Handback::Deadline { moved, .. } => moved,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{Chunk, ConnRng, Plan};
    use crate::wire::observe::NoObserver;

    struct F(Unseen);
    impl Fault for F {
        fn kind(&self) -> &'static str {
            "test"
        }
        fn on_chunk(&mut self, _: &Chunk<'_>, _: &mut Plan, _: &mut ConnRng) {}
        fn unseen(&self) -> Unseen {
            self.0
        }
    }

    fn chain(u: &[Unseen]) -> Vec<Box<dyn Fault>> {
        u.iter()
            .map(|&u| Box::new(F(u)) as Box<dyn Fault>)
            .collect()
    }

    #[test]
    fn no_faults_and_an_opaque_observer_go_zero_copy_without_limit() {
        assert_eq!(budget(&[], &NoObserver::default(), 10), Some(u64::MAX - 10));
    }

    #[test]
    fn one_fault_that_must_see_bytes_keeps_the_copying_path() {
        let c = chain(&[Unseen::Always, Unseen::Never]);
        assert_eq!(budget(&c, &NoObserver::default(), 0), None);
    }

    #[test]
    fn the_nearest_byte_limit_bounds_the_budget_and_zero_means_copy() {
        let c = chain(&[Unseen::Before(100), Unseen::Before(40), Unseen::Always]);
        assert_eq!(budget(&c, &NoObserver::default(), 0), Some(40));
        assert_eq!(budget(&c, &NoObserver::default(), 39), Some(1));
        assert_eq!(budget(&c, &NoObserver::default(), 40), None);
        assert_eq!(budget(&c, &NoObserver::default(), 70), None);
    }
}
