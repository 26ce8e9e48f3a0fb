//! Signals for the long-running programs: the first SIGINT or SIGTERM starts a drain, a second
//! one ends the process at once.
//!
//! Why one place: `proxy`, `serve`, `load` and `replay` all stop the same way, so a user's Ctrl-C
//! means the same thing everywhere (stop accepting, let work drain, write what was measured),
//! and a run stopped by a signal says so: [`Interrupt`] remembers which signal came when, so a
//! program can mark its report interrupted and exit as shells and k6 do (128 + the signal's
//! number: 130 for SIGINT, 143 for SIGTERM). A second signal during the drain exits with the
//! same code straight away: the user asked twice.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

/// The signal that stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Int,
    /// SIGTERM (what a CI timeout or `kill` sends).
    Term,
}

impl Signal {
    /// `SIGINT` or `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        }
    }

    /// The exit code of a run the signal stopped: 128 + its number.
    pub fn exit_code(self) -> u8 {
        match self {
            Signal::Int => 130,
            Signal::Term => 143,
        }
    }
}

/// The first signal a program received, if any (cheap to clone; shared with the watcher).
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<OnceLock<(Signal, Instant)>>);

impl Interrupt {
    /// The signal and when it came, once one did.
    pub fn caught(&self) -> Option<(Signal, Instant)> {
        self.0.get().copied()
    }

    /// Records `signal` (the first one only) and cancels `shutdown`; returns false when a
    /// signal had already come (the caller then ends the process).
    pub fn catch(&self, signal: Signal, shutdown: &CancellationToken) -> bool {
        let first = self.0.set((signal, Instant::now())).is_ok();
        shutdown.cancel();
        first
    }
}

/// Cancels `shutdown` at the first SIGINT or SIGTERM, after printing `drain` (what the program
/// does now, and how long it may take) on stderr; ends the process with the first signal's exit
/// code at the second. Fails only if a handler cannot be installed.
pub fn spawn_signal_watch(
    shutdown: CancellationToken,
    drain: String,
) -> std::io::Result<Interrupt> {
    let interrupt = Interrupt::default();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let caught = interrupt.clone();
        tokio::spawn(async move {
            loop {
                let got = tokio::select! {
                    Some(()) = term.recv() => Signal::Term,
                    Some(()) = int.recv() => Signal::Int,
                    else => return,
                };
                if caught.catch(got, &shutdown) {
                    eprintln!(
                        "tearline: {} received: {drain} (a second Ctrl-C or SIGTERM stops at once)",
                        got.name()
                    );
                    tracing::info!(signal = got.name(), "signal received; draining");
                } else {
                    let first = caught.caught().map_or(got, |(s, _)| s);
                    eprintln!("tearline: {} again: stopping now", got.name());
                    std::process::exit(i32::from(first.exit_code()));
                }
            }
        });
    }
    #[cfg(not(unix))]
    {
        let caught = interrupt.clone();
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                if caught.catch(Signal::Int, &shutdown) {
                    eprintln!("tearline: Ctrl-C received: {drain}");
                } else {
                    std::process::exit(i32::from(Signal::Int.exit_code()));
                }
            }
        });
    }
    Ok(interrupt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_signal_is_kept_and_cancels_and_a_second_is_reported_as_such() {
        let shutdown = CancellationToken::new();
        let i = Interrupt::default();
        assert!(i.caught().is_none());
        assert!(i.catch(Signal::Term, &shutdown));
        assert!(shutdown.is_cancelled());
        assert!(!i.catch(Signal::Int, &shutdown), "a second signal");
        assert_eq!(i.caught().map(|(s, _)| s), Some(Signal::Term));
        assert_eq!(Signal::Term.exit_code(), 143);
        assert_eq!(Signal::Int.exit_code(), 130);
    }
}
