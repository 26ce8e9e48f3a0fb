//! Signals for the long-running programs: the first SIGINT or SIGTERM starts a drain.
//!
//! Why one place: `proxy`, `serve`, `load` and `replay` all stop the same way, so a user's Ctrl-C
//! means the same thing everywhere (stop accepting, let work drain, write what was measured).

use tokio_util::sync::CancellationToken;

/// Cancels `shutdown` at the first SIGINT or SIGTERM. Fails only if a handler cannot be
/// installed.
pub fn spawn_signal_watch(shutdown: CancellationToken) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
            tracing::info!("signal received; draining");
            shutdown.cancel();
        });
    }
    #[cfg(not(unix))]
    {
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                shutdown.cancel();
            }
        });
    }
    Ok(())
}
