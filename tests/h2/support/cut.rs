//! A stream cut mid-event, made with the stream relay's own surgery (`RST_STREAM` injected to
//! both ends, the stream's later `DATA` dropped and credited back) and aimed by content: the
//! first `DATA` frame from the server that starts event `event` of SSE stream `stream` but does
//! not finish it (the servers' `split` parameter writes each event in two frames, torn inside
//! its data value). It is forwarded — the client holds a torn event — and then the stream is
//! reset with `code`, once per factory (a replay of the same event on a later stream passes).
//!
//! Why a test fault: `sse_cut` with `scope = "stream"` aims by SSE position, which needs the h2
//! observer; this one aims by the bytes the servers are known to write, so the relay's cut and
//! the real peers' reaction to it are tested now.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tearline::fault::h2::{FrameView, H2Actions, H2Fault, H2FaultFactory, Inject, StreamFacts};
use tearline::fault::{ConnRng, Fault, FaultFactory};
use tearline::vocab::Direction;
use tearline::wire::h2::frame::data_body;
use tearline::wire::h2::{ErrorCode, FrameType};
use tokio::time::Instant;

pub struct TearEvent {
    prefix: Vec<u8>,
    code: ErrorCode,
    fired: Arc<AtomicBool>,
}

impl TearEvent {
    /// Tears event `event` of SSE stream `stream` and resets its h2 stream with `code`.
    pub fn new(stream: &str, event: u64, code: ErrorCode) -> Arc<TearEvent> {
        Arc::new(TearEvent {
            prefix: format!("id: {event}\ndata: {{\"stream\":\"{stream}\"").into_bytes(),
            code,
            fired: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Whether it cut.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

struct Instance {
    prefix: Vec<u8>,
    code: ErrorCode,
    fired: Arc<AtomicBool>,
}

impl H2Fault for Instance {
    fn kind(&self) -> &'static str {
        "test-tear-event"
    }

    fn on_frame(
        &mut self,
        frame: &FrameView<'_>,
        _facts: &StreamFacts<'_>,
        _now: Instant,
        _rng: &mut ConnRng,
        actions: &mut H2Actions,
    ) {
        let h = frame.header;
        if frame.direction != Direction::Downstream || h.kind != FrameType::Data {
            return;
        }
        let Some(body) = data_body(&h, frame.payload) else {
            return;
        };
        let body = &frame.payload[body];
        if body.starts_with(&self.prefix)
            && !body.ends_with(b"\n\n")
            && !self.fired.swap(true, Ordering::SeqCst)
        {
            for to in [Direction::Downstream, Direction::Upstream] {
                actions.inject.push(Inject::RstStream {
                    to,
                    stream: h.stream,
                    code: self.code,
                });
            }
        }
    }
}

impl H2FaultFactory for TearEvent {
    fn instantiate_h2(&self, _rng: &mut ConnRng, _now: Instant) -> Option<Box<dyn H2Fault>> {
        Some(Box::new(Instance {
            prefix: self.prefix.clone(),
            code: self.code,
            fired: self.fired.clone(),
        }))
    }
}

impl FaultFactory for TearEvent {
    fn kind(&self) -> &'static str {
        "test-tear-event"
    }

    fn direction(&self) -> Direction {
        Direction::Downstream
    }

    fn instantiate(&self, _rng: &mut ConnRng, _now: Instant) -> Option<Box<dyn Fault>> {
        None
    }

    fn h2(&self) -> Option<&dyn H2FaultFactory> {
        Some(self)
    }
}
