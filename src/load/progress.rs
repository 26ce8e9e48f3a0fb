//! A live progress bar on stderr, shown if and only if stderr is a terminal and the caller
//! asked for it; quiet otherwise (logs and pipes stay clean).
//!
//! Session tasks bump relaxed atomics once per finished call; the bar reads them on its own
//! tick, so progress never slows the calls.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;

use super::config::{ProgressNote, Stop};
use super::stats::CallEnd;

/// Call totals shared by the session tasks and the bar.
#[derive(Debug, Default)]
pub struct Tally {
    done: AtomicU64,
    ok: AtomicU64,
    lost: AtomicU64,
}

impl Tally {
    /// Notes one finished call.
    pub fn note(&self, end: CallEnd) {
        self.done.fetch_add(1, Ordering::Relaxed);
        match end {
            CallEnd::Ok => self.ok.fetch_add(1, Ordering::Relaxed),
            CallEnd::SilentlyLost => self.lost.fetch_add(1, Ordering::Relaxed),
            CallEnd::Failed => 0,
        };
    }
}

/// Starts the bar if stderr is a terminal; it stops when `stop` is cancelled.
pub fn spawn(
    tally: Arc<Tally>,
    limit: Stop,
    label: &'static str,
    note: Option<ProgressNote>,
    stop: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let (bar, by_time) = match limit {
        Stop::Calls(n) => (ProgressBar::new(n), false),
        Stop::Duration(d) => (ProgressBar::new(d.as_secs().max(1)), true),
    };
    let template = if by_time {
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len}s {msg}"
    } else {
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} calls {msg}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.set_prefix(label);
    Some(tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let done = tally.done.load(Ordering::Relaxed);
            if by_time {
                bar.set_position(start.elapsed().as_secs());
            } else {
                bar.set_position(done);
            }
            let extra = note
                .as_ref()
                .map(|n| format!(" {}", (n.0)()))
                .unwrap_or_default();
            bar.set_message(format!(
                "done {done} ok {} silently lost {}{extra}",
                tally.ok.load(Ordering::Relaxed),
                tally.lost.load(Ordering::Relaxed)
            ));
        }
        bar.finish_and_clear();
    }))
}
