//! Cut records: one JSON object per cut the proxy made, for `--cuts-log FILE`, the audit and the
//! reports.
//!
//! It exists so that every cut can be traced to its exact place on the wire and in the SSE
//! event (raw and payload offsets, class, event index, pending and committed ids, bytes of the
//! torn event delivered) and to its stream (session, request, JSON-RPC id).
//!
//! Invariants: a [`CutRecord`] is built only from an [`Observation::Cut`] and the facts given
//! with it; field names are stable (`snake_case`, absent facts are `null`). [`CutLog`] never
//! blocks the pump on I/O: `record` only sends the line to a bounded channel read by a writer
//! thread that appends and flushes; when the channel is full the record is counted as dropped
//! (see [`CutLog::dropped`]) rather than waited for.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Observation, ObservationSink};
use crate::vocab::CutAction;
use crate::vocab::Direction;

/// Records waiting for the writer thread; beyond this, records are dropped and counted.
pub const QUEUE_LIMIT: usize = 4096;

/// The stream a cut fell in.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StreamRef {
    /// Request method, if known.
    pub method: Option<String>,
    /// Request path, if known.
    pub path: Option<String>,
    /// JSON-RPC id of the request (JSON text), if visible.
    pub rpc_id: Option<String>,
}

/// One cut, as written to the cuts log (one JSON object per line).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CutRecord {
    /// Wall-clock time of the cut, Unix milliseconds.
    pub time_ms: u64,
    /// The proxy's name.
    pub proxy: String,
    /// Connection index within the proxy.
    pub conn: u64,
    /// The direction that was cut.
    pub direction: Direction,
    /// `Mcp-Session-Id`, if any.
    pub session: Option<String>,
    /// The stream's request.
    pub stream: StreamRef,
    /// Bytes of the direction delivered before the cut.
    pub raw_offset: u64,
    /// Decoded SSE payload bytes delivered before the cut, inside an SSE body.
    pub payload_offset: Option<u64>,
    /// SSE position class (kebab-case), inside an SSE body.
    pub class: Option<String>,
    /// Events dispatched in the stream before the cut.
    pub event_index: Option<u64>,
    /// Id of the event in progress whose id line was complete (not committed).
    pub pending_id: Option<String>,
    /// Last committed event id before the cut.
    pub last_committed_id: Option<String>,
    /// Bytes of the torn event delivered (0 at a boundary).
    pub torn_bytes: u64,
    /// Which `data:` line of the event the cut fell in (1-based).
    pub data_line: Option<u32>,
    /// `reset`, `fin` or `clean-end` (as carried out).
    pub action: CutAction,
    /// The fault kind that decided the cut, if known.
    pub by: Option<String>,
    /// `close-notify` or `truncated` when the client side speaks TLS, else `null`.
    #[serde(default)]
    pub tls_end: Option<crate::tls::TlsEnd>,
    /// The outage window the cut opened (new connections held), in milliseconds.
    #[serde(default)]
    pub outage_ms: Option<u64>,
    /// The LLM position of the cut (`mid-delta`, `before-completion`, …), in a stream of a
    /// known LLM API.
    #[serde(default)]
    pub llm_position: Option<String>,
}

impl CutRecord {
    /// Builds the record of `obs` if it is a [`Observation::Cut`] (the fault that cut is the
    /// one the pump named in its cut point).
    pub fn from_observation(obs: &Observation, proxy: &str, time: SystemTime) -> Option<CutRecord> {
        let Observation::Cut {
            conn,
            direction,
            action,
            point,
        } = obs
        else {
            return None;
        };
        let (method, path) = match point.request.as_deref().and_then(|r| r.split_once(' ')) {
            Some((m, p)) => (Some(m.to_string()), Some(p.to_string())),
            None => (point.request.clone(), None),
        };
        Some(CutRecord {
            time_ms: time
                .duration_since(UNIX_EPOCH)
                .map_or(0, crate::units::millis),
            proxy: proxy.to_string(),
            conn: *conn,
            direction: *direction,
            session: point.session.clone(),
            stream: StreamRef {
                method,
                path,
                rpc_id: point.rpc_id.clone(),
            },
            raw_offset: point.raw_offset,
            payload_offset: point.payload_offset,
            class: point.class.map(|c| c.as_str().to_string()),
            event_index: point.event_index,
            pending_id: point.pending_id.clone(),
            last_committed_id: point.last_committed_id.clone(),
            torn_bytes: point.torn_bytes,
            data_line: point.data_line,
            action: *action,
            by: point.by.map(str::to_string),
            tls_end: point.tls_end,
            outage_ms: point.outage_ms,
            llm_position: point.llm.map(|p| p.as_str().to_string()),
        })
    }
}

/// Why the cuts log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum CutLogError {
    /// Creating or opening the file failed.
    #[error("cannot open cuts log {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The writer thread could not be started.
    #[error("cannot start the cuts log writer")]
    Spawn(#[source] std::io::Error),
}

/// An [`ObservationSink`] that appends every `Cut` observation as a JSONL [`CutRecord`].
pub struct CutLog {
    proxy: String,
    tx: Option<SyncSender<String>>,
    writer: Option<JoinHandle<()>>,
    dropped: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
}

impl CutLog {
    /// Opens `path` for appending (created if missing); records carry `proxy` as the proxy name.
    pub fn open(path: &Path, proxy: &str) -> Result<CutLog, CutLogError> {
        let file = File::options()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| CutLogError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        let (tx, rx) = sync_channel(QUEUE_LIMIT);
        let failed = Arc::new(AtomicU64::new(0));
        let f = failed.clone();
        let writer = std::thread::Builder::new()
            .name("cuts-log".into())
            .spawn(move || write_lines(rx, BufWriter::new(file), &f))
            .map_err(CutLogError::Spawn)?;
        Ok(CutLog {
            proxy: proxy.to_string(),
            tx: Some(tx),
            writer: Some(writer),
            dropped: Arc::default(),
            failed,
        })
    }

    /// Records dropped because the writer fell [`QUEUE_LIMIT`] records behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Records the writer failed to write (I/O errors).
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Flushes and closes the file, waiting for the writer.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        drop(self.tx.take());
        if let Some(w) = self.writer.take() {
            // A panicked writer has nothing left to flush.
            let _ = w.join();
        }
    }
}

impl Drop for CutLog {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn write_lines(rx: Receiver<String>, mut out: BufWriter<File>, failed: &AtomicU64) {
    let write = |out: &mut BufWriter<File>, line: &str| {
        if out.write_all(line.as_bytes()).is_err() {
            failed.fetch_add(1, Ordering::Relaxed);
        }
    };
    while let Ok(line) = rx.recv() {
        write(&mut out, &line);
        while let Ok(line) = rx.try_recv() {
            write(&mut out, &line);
        }
        // Flush when idle, so a reader of the file sees every cut soon after it happened.
        if out.flush().is_err() {
            failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl ObservationSink for CutLog {
    fn record(&self, obs: Observation) {
        let Some(rec) = CutRecord::from_observation(&obs, &self.proxy, SystemTime::now()) else {
            return;
        };
        let Ok(mut line) = serde_json::to_string(&rec) else {
            return;
        };
        line.push('\n');
        if let Some(tx) = &self.tx
            && let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = tx.try_send(line)
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{CutPoint, SseClass};

    fn cut() -> Observation {
        Observation::Cut {
            conn: 4,
            direction: Direction::Downstream,
            action: CutAction::Reset,
            point: CutPoint {
                class: Some(SseClass::MidValue),
                raw_offset: 1234,
                payload_offset: Some(1000),
                event_index: Some(41),
                pending_id: Some("42".into()),
                last_committed_id: Some("41".into()),
                torn_bytes: 77,
                body_bytes: None,
                data_line: Some(1),
                request: Some("POST /mcp".into()),
                session: Some("s1".into()),
                rpc_id: Some("7".into()),
                tls_end: None,
                outage_ms: Some(250),
                llm: None,
                by: Some("sse_cut"),
            },
        }
    }

    #[test]
    fn record_carries_every_fact_of_the_cut() {
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123);
        let r = CutRecord::from_observation(&cut(), "api", t).expect("a cut");
        assert_eq!(r.time_ms, 1_700_000_000_123);
        assert_eq!((r.proxy.as_str(), r.conn, r.raw_offset), ("api", 4, 1234));
        assert_eq!(r.stream.method.as_deref(), Some("POST"));
        assert_eq!(r.stream.path.as_deref(), Some("/mcp"));
        assert_eq!(r.stream.rpc_id.as_deref(), Some("7"));
        assert_eq!(r.class.as_deref(), Some("mid-value"));
        assert_eq!(
            (r.event_index, r.torn_bytes, r.data_line),
            (Some(41), 77, Some(1))
        );
        assert_eq!(r.pending_id.as_deref(), Some("42"));
        assert_eq!(r.last_committed_id.as_deref(), Some("41"));
        assert_eq!(r.by.as_deref(), Some("sse_cut"));
        let json = serde_json::to_value(&r).expect("serializes");
        assert_eq!(json["action"], "reset");
        assert_eq!(json["direction"], "downstream");
        let other = Observation::ConnClosed { conn: 1 };
        assert!(CutRecord::from_observation(&other, "api", t).is_none());
    }

    #[test]
    fn cut_log_appends_one_json_line_per_cut() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cuts.jsonl");
        let log = CutLog::open(&path, "api").expect("opens");
        log.record(cut());
        log.record(Observation::ConnClosed { conn: 4 });
        log.record(cut());
        assert_eq!(log.dropped(), 0);
        log.close();
        let text = std::fs::read_to_string(&path).expect("written");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        for l in lines {
            let r: CutRecord = serde_json::from_str(l).expect("a CutRecord per line");
            assert_eq!(r.class.as_deref(), Some("mid-value"));
        }
    }
}
