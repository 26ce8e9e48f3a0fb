//! The findings log (`--findings-log FILE`): each finding as one JSON line.
//!
//! Invariants: one line per finding, in the order found, written and flushed by a writer
//! thread, so the audit never does file I/O itself; the line is handed over through a bounded
//! channel (when it is full the line is dropped and counted, never waited for). A write error
//! disables the log (reported once through `tracing`). [`FindingsLog::sync`] waits until every
//! line handed over so far is written and flushed (the end of a run calls it); dropping the log
//! writes what is queued, then ends the thread.

use super::finding::Finding;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

/// Lines waiting for the writer; beyond this, lines are dropped and counted.
pub const QUEUE_LIMIT: usize = 16_384;

enum Msg {
    Line(Vec<u8>),
    Sync(SyncSender<()>),
}

/// A JSONL sink for findings, written by its own thread.
pub struct FindingsLog {
    tx: Option<SyncSender<Msg>>,
    thread: Option<JoinHandle<()>>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for FindingsLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FindingsLog")
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .finish()
    }
}

fn run(mut out: Box<dyn Write + Send>, rx: Receiver<Msg>) {
    let mut failed = false;
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Line(line) if !failed => {
                if let Err(e) = out.write_all(&line).and_then(|()| out.flush()) {
                    failed = true;
                    tracing::warn!(error = %e, "findings log write failed; log disabled");
                }
            }
            Msg::Line(_) => {}
            Msg::Sync(done) => {
                let _ = done.send(());
            }
        }
    }
}

impl FindingsLog {
    /// Writes findings to `out` from a new writer thread.
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        let (tx, rx) = sync_channel(QUEUE_LIMIT);
        let thread = std::thread::Builder::new()
            .name("tearline-findings-log".into())
            .spawn(move || run(out, rx))
            .map_err(|e| tracing::warn!(error = %e, "cannot start the findings log writer"))
            .ok();
        FindingsLog {
            tx: thread.is_some().then_some(tx),
            thread,
            dropped: Arc::default(),
        }
    }

    /// Hands one finding to the writer as a JSON line.
    pub fn write(&mut self, finding: &Finding) {
        let Some(tx) = &self.tx else {
            return;
        };
        let Ok(mut line) = serde_json::to_vec(finding) else {
            return;
        };
        line.push(b'\n');
        match tx.try_send(Msg::Line(line)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => self.tx = None,
        }
    }

    /// Waits until every line handed over so far is written and flushed.
    pub fn sync(&self) {
        let Some(tx) = &self.tx else {
            return;
        };
        let (done_tx, done_rx) = sync_channel(1);
        if tx.send(Msg::Sync(done_tx)).is_ok() {
            let _ = done_rx.recv();
        }
    }

    /// Lines dropped because the writer's queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for FindingsLog {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
