//! Wire traces of accuracy runs: every call the pumps made on the HTTP/1.1 observers (the
//! chunks read, delivered-through offsets, drops, clean ends, cuts, EOFs), and the
//! connection-level observations the proxy recorded (opened, cut, closed), with their times.
//!
//! Why: a verdict must be a function of the wire, not of how the reads fell or which pump's
//! task ran first. A trace holds the wire of a real run (lab + proxy + client); `trace_replay`
//! feeds it again through fresh observers and a fresh auditor with other read splits and other
//! interleavings of the connections' observations, and the findings must not change.
//!
//! Invariants: recording never changes what the run does but for one thing: the traced
//! observer never reports itself opaque (the pump then shows it every chunk, so the trace
//! holds every byte); an opaque HTTP/1.1 observer ignores what it is shown, so the facts are
//! the same. Entries are kept in the order their calls were made (one lock), so a cut's
//! entry precedes the connections the client opened after learning of it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::audit::Auditor;
use crate::proxy::Proxy;
use crate::vocab::Direction;
use crate::wire::http1::observer_pair;
use crate::wire::{ChunkPositions, CutPoint, Observation, ObservationSink, WireObserver};

/// One call a pump made on an observer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `observe(chunk)`.
    Observe(Vec<u8>),
    /// `delivered_through(x)`.
    Delivered(u64),
    /// `dropped(a, b)`.
    Dropped(u64, u64),
    /// `clean_end_at(x)`.
    CleanEndAt(u64),
    /// `cut_at(x)`.
    CutAt(u64),
    /// `eof()`.
    Eof,
}

/// One entry of a trace.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A call on the observer of one direction of a connection.
    Call {
        conn: u64,
        dir: Direction,
        call: Call,
    },
    /// A connection-level observation the proxy recorded (`ConnOpened`, `Cut`, `ConnClosed`).
    Conn(Box<Observation>),
}

/// The trace of one run: entries with their times since the book was opened.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub entries: Vec<(Duration, Entry)>,
}

/// Where a traced proxy writes its trace.
#[derive(Debug)]
pub struct TraceBook {
    start: Instant,
    entries: Mutex<Vec<(Duration, Entry)>>,
}

impl Default for TraceBook {
    fn default() -> Self {
        TraceBook {
            start: Instant::now(),
            entries: Mutex::new(Vec::new()),
        }
    }
}

impl TraceBook {
    fn push(&self, entry: Entry) {
        let at = self.start.elapsed();
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((at, entry));
    }

    /// The trace so far.
    pub fn trace(&self) -> Trace {
        Trace {
            entries: self
                .entries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }
}

/// An observer that writes every call into a book, then makes it on the real one.
struct Traced {
    inner: Box<dyn WireObserver>,
    conn: u64,
    dir: Direction,
    book: Arc<TraceBook>,
}

impl Traced {
    fn note(&self, call: Call) {
        self.book.push(Entry::Call {
            conn: self.conn,
            dir: self.dir,
            call,
        });
    }
}

impl WireObserver for Traced {
    fn observe(&mut self, chunk: &[u8]) -> Option<&ChunkPositions> {
        self.note(Call::Observe(chunk.to_vec()));
        self.inner.observe(chunk)
    }

    fn cut_point(&mut self, delivered: usize) -> CutPoint {
        self.inner.cut_point(delivered)
    }

    fn eof(&mut self) {
        self.note(Call::Eof);
        self.inner.eof();
    }

    fn delivered_through(&mut self, raw: u64) {
        self.note(Call::Delivered(raw));
        self.inner.delivered_through(raw);
    }

    fn held_bytes(&self) -> usize {
        self.inner.held_bytes()
    }

    fn dropped(&mut self, start: u64, end: u64) {
        self.note(Call::Dropped(start, end));
        self.inner.dropped(start, end);
    }

    fn cut_at(&mut self, raw: u64) -> CutPoint {
        self.note(Call::CutAt(raw));
        self.inner.cut_at(raw)
    }

    fn clean_end(&mut self, delivered: usize) -> crate::wire::CleanEnd {
        self.inner.clean_end(delivered)
    }

    fn clean_end_at(&mut self, raw: u64) -> crate::wire::CleanEnd {
        self.note(Call::CleanEndAt(raw));
        self.inner.clean_end_at(raw)
    }
}

/// A sink that writes the connection-level observations into a book, then passes everything
/// on.
struct TracedSink {
    inner: Arc<dyn ObservationSink>,
    book: Arc<TraceBook>,
}

impl TracedSink {
    fn note(&self, obs: &Observation) {
        if matches!(
            obs,
            Observation::ConnOpened { .. }
                | Observation::ConnClosed { .. }
                | Observation::Cut { .. }
        ) {
            self.book.push(Entry::Conn(Box::new(obs.clone())));
        }
    }
}

impl ObservationSink for TracedSink {
    fn record(&self, obs: Observation) {
        self.note(&obs);
        self.inner.record(obs);
    }

    fn record_all(&self, batch: &mut dyn Iterator<Item = Observation>) {
        let mut batch = batch.inspect(|o| self.note(o));
        self.inner.record_all(&mut batch);
    }

    fn cuts_only(&self) -> bool {
        self.inner.cuts_only()
    }
}

/// Makes `proxy` observe HTTP/1.1 into `auditor` (as `Proxy::observe_http` does) and write its
/// wire into `book`.
pub fn observe_traced(proxy: &Proxy, auditor: Arc<Auditor>, book: Arc<TraceBook>) {
    let (sink, obs_book): (Arc<dyn ObservationSink>, _) = (auditor, book.clone());
    let observer_sink = sink.clone();
    proxy.set_observer_factory(Arc::new(move |conn| {
        let (up, down) = observer_pair(conn, observer_sink.clone());
        let wrap = |inner, dir| -> Box<dyn WireObserver> {
            Box::new(Traced {
                inner,
                conn,
                dir,
                book: obs_book.clone(),
            })
        };
        (
            wrap(up, Direction::Upstream),
            wrap(down, Direction::Downstream),
        )
    }));
    proxy.set_sink(Some(Arc::new(TracedSink { inner: sink, book })));
}

impl Trace {
    /// The downstream byte stream of connection `conn` (every chunk its observer was shown).
    pub fn downstream(&self, conn: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for (_, e) in &self.entries {
            if let Entry::Call {
                conn: c,
                dir: Direction::Downstream,
                call: Call::Observe(b),
            } = e
                && *c == conn
            {
                out.extend_from_slice(b);
            }
        }
        out
    }

    /// This trace with connection `conn` cut downstream at raw offset `x` (`action`) instead:
    /// its downstream reads up to the one holding byte `x` are kept (that read whole), its
    /// deliveries clipped to `x`, then the cut; its upstream calls after that read, its
    /// downstream calls after it and its recorded cut are left out. `None` if the connection
    /// never read past `x`. Other connections are kept as recorded.
    pub fn with_cut(&self, conn: u64, x: u64, action: crate::vocab::CutAction) -> Option<Trace> {
        let mine = |c: &u64| *c == conn;
        let mut read = 0u64;
        let mut at = None;
        for (i, (_, e)) in self.entries.iter().enumerate() {
            if let Entry::Call {
                conn: c,
                dir: Direction::Downstream,
                call: Call::Observe(b),
            } = e
                && mine(c)
            {
                read += b.len() as u64;
                if read > x {
                    at = Some(i);
                    break;
                }
            }
        }
        let at = at?;
        let time = self.entries[at].0;
        let mut out = Trace::default();
        for (i, (t, e)) in self.entries.iter().enumerate() {
            let keep = match e {
                Entry::Call { conn: c, call, .. } if mine(c) => {
                    if i > at {
                        false
                    } else if let Call::Delivered(d) = call {
                        *d <= x
                    } else {
                        !matches!(call, Call::CutAt(_) | Call::CleanEndAt(_) | Call::Eof)
                    }
                }
                Entry::Conn(obs) => !matches!(&**obs, Observation::Cut { conn: c, .. } if mine(c)),
                _ => true,
            };
            if keep {
                out.entries.push((*t, e.clone()));
            }
            if i == at {
                let dir = Direction::Downstream;
                for call in [Call::Delivered(x), Call::CutAt(x)] {
                    out.entries.push((time, Entry::Call { conn, dir, call }));
                }
                let cut = Observation::Cut {
                    conn,
                    direction: dir,
                    action,
                    point: CutPoint {
                        raw_offset: x,
                        by: Some("trace"),
                        ..CutPoint::default()
                    },
                };
                out.entries.push((time, Entry::Conn(Box::new(cut))));
            }
        }
        Some(out)
    }
}
