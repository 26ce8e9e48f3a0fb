//! Drives a profile's proxy-level outage schedules: at each window's start the proxy resets its
//! open connections and refuses or holds new ones for the window's length.
//!
//! Why a separate task: outage windows are wall-clock events, not reactions to bytes, so no
//! pump sees them; the schedule itself is pure ([`OutageSchedule::windows`]) and this is the one
//! place that turns it into timers. Invariant: windows fire in order, each at most once, and the
//! driver ends when the schedule is exhausted or `shutdown` fires.

use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::state::Proxy;
use crate::fault::outage::OutageSchedule;
use crate::vocab::OutageMode;

/// Runs every window of `schedules` (a profile's) against `proxy`, measured from `start`, until
/// all windows fired or `shutdown` fires; a window that starts while the proxy's profile is
/// detached (the API's `/reset`) is skipped.
pub async fn drive_outages(
    proxy: Arc<Proxy>,
    schedules: Vec<OutageSchedule>,
    start: Instant,
    shutdown: CancellationToken,
) {
    let drivers = schedules.into_iter().map(|schedule| {
        let proxy = proxy.clone();
        let shutdown = shutdown.clone();
        async move {
            let mode: OutageMode = schedule.mode;
            for (at, length) in schedule.windows() {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep_until(start + at) => {}
                }
                if proxy.profile_detached() {
                    tracing::debug!(proxy = %proxy.name(), "profile detached by /reset: outage window skipped");
                    continue;
                }
                tracing::info!(proxy = %proxy.name(), length_ms = length.as_millis() as u64, mode = ?mode, "outage window");
                proxy.begin_outage(length, mode);
            }
        }
    });
    futures_util::future::join_all(drivers).await;
}

/// Runs a profile's phase timeline against `proxy`, measured from `start`: at each step the
/// proxy's fault chain becomes the step's (new connections use it; live ones switch within
/// their next two chunks per direction — the read already awaited is planned with the old
/// chain — and bytes already planned keep their timing). Ends after the last step or when
/// `shutdown` fires.
pub async fn drive_phases(
    proxy: Arc<Proxy>,
    steps: Vec<crate::profile::PhaseStep>,
    start: Instant,
    shutdown: CancellationToken,
) {
    for step in steps {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep_until(start + step.at) => {}
        }
        tracing::info!(proxy = %proxy.name(), phase = %step.name, faults = step.faults.len(), "phase begins");
        proxy.set_faults(step.faults);
    }
}
