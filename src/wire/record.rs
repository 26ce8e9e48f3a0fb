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

use super::{CutPoint, Observation, ObservationSink};
use crate::vocab::CutAction;
use crate::vocab::Direction;

/// Records waiting for the writer thread; beyond this, records are dropped and counted.
pub const QUEUE_LIMIT: usize = 4096;

/// The request whose stream a cut fell in (the record's `stream` object); every field `null`
/// when the cut fell in no response's bytes (before the first head, exactly at or after a
/// body's end, in the next response's head), whichever read held it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CutRequest {
    /// Request method, if known.
    pub method: Option<String>,
    /// Request path, if known.
    pub path: Option<String>,
    /// JSON-RPC id of the request (JSON text), if visible.
    pub rpc_id: Option<String>,
}

/// One cut, as written to the cuts log (one JSON object per line): who, when and which
/// connection and request, then the pump's [`CutPoint`] itself, flattened (its fields are the
/// record's: `raw_offset`, `class`, `torn_bytes`, `by`, `llm_position`, …).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CutRecord {
    /// Wall-clock time of the cut, Unix milliseconds.
    pub time_ms: u64,
    /// The proxy's name.
    pub proxy: String,
    /// Connection index within the proxy.
    pub conn: u64,
    /// The direction that was cut.
    pub direction: Direction,
    /// `reset`, `fin` or `clean-end` (as carried out).
    pub action: CutAction,
    /// The stream's request.
    pub stream: CutRequest,
    /// Where the cut fell and what decided it (`session`, offsets, class, ids, `by`, …).
    #[serde(flatten)]
    pub point: CutPoint,
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
            action: *action,
            stream: CutRequest {
                method,
                path,
                rpc_id: point.rpc_id.clone(),
            },
            point: point.clone(),
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
    fn cuts_only(&self) -> bool {
        true
    }

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
                exchange: Some(2),
                tls_end: None,
                outage_ms: Some(250),
                llm: None,
                by: Some("sse_cut"),
                h2_stream: None,
                with_connection: false,
            },
        }
    }

    #[test]
    fn record_carries_every_fact_of_the_cut() {
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123);
        let r = CutRecord::from_observation(&cut(), "api", t).expect("a cut");
        assert_eq!(r.time_ms, 1_700_000_000_123);
        assert_eq!(
            (r.proxy.as_str(), r.conn, r.point.raw_offset),
            ("api", 4, 1234)
        );
        assert_eq!(r.stream.method.as_deref(), Some("POST"));
        assert_eq!(r.stream.path.as_deref(), Some("/mcp"));
        assert_eq!(r.stream.rpc_id.as_deref(), Some("7"));
        let Observation::Cut { point, .. } = cut() else {
            panic!("cut() builds a cut")
        };
        assert_eq!(
            r.point, point,
            "the record carries the pump's cut point whole"
        );
        let json = serde_json::to_value(&r).expect("serializes");
        assert_eq!(json["action"], "reset");
        assert_eq!(json["direction"], "downstream");
        let other = Observation::ConnClosed { conn: 1 };
        assert!(CutRecord::from_observation(&other, "api", t).is_none());
    }

    #[test]
    fn cut_log_line_names_every_fact_once_with_absent_ones_null() {
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123);
        let r = CutRecord::from_observation(&cut(), "api", t).expect("a cut");
        let json = serde_json::to_value(&r).expect("serializes");
        let expected = serde_json::json!({
            "time_ms": 1_700_000_000_123u64, "proxy": "api", "conn": 4,
            "direction": "downstream", "action": "reset",
            "stream": {"method": "POST", "path": "/mcp", "rpc_id": "7"},
            "session": "s1", "raw_offset": 1234, "payload_offset": 1000,
            "class": "mid-value", "event_index": 41, "pending_id": "42",
            "last_committed_id": "41", "torn_bytes": 77, "body_bytes": null,
            "data_line": 1, "tls_end": null, "outage_ms": 250,
            "llm_position": null, "by": "sse_cut", "h2_stream": null,
            "with_connection": false
        });
        assert_eq!(json, expected);
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
            let r: serde_json::Value = serde_json::from_str(l).expect("a JSON object per line");
            assert_eq!(r["class"], "mid-value");
            assert_eq!(r["by"], "sse_cut");
        }
    }
}
