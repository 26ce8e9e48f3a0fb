//! `refuse_streams`: an HTTP/2 server or gateway at its concurrency limit, which refuses new
//! streams with `RST_STREAM(REFUSED_STREAM)` — "not processed, safe to retry".
//!
//! Observable effect on the wire, on an h2 connection the stream relay carries: while
//! `max_concurrent` client streams are open (open or half-closed: not yet ended in both
//! directions nor reset), a new client stream is answered with `RST_STREAM(id, REFUSED_STREAM)`
//! to the client and is never started at the server (its request is not processed; its later
//! frames are dropped, their flow-control credit returned to the client). Refused streams do not
//! count as open. A stream that closes frees its place for the next one.
//!
//! Profile keys: `max_concurrent` (required; 0 refuses every stream), plus `probability`.
//!
//! The decision is [`RefuseStreams`], a pure state machine over (new stream, END_STREAM,
//! RST_STREAM) → forward or refuse.

use super::keys::{FaultConfigError, KeyReader};
use crate::vocab::Direction;

/// Configuration of `refuse_streams`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefuseStreamsConfig {
    /// Open client streams allowed at once.
    pub max_concurrent: u32,
}

impl RefuseStreamsConfig {
    /// Reads `max_concurrent`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let n = r
            .u64("max_concurrent", "open streams")?
            .ok_or_else(|| r.missing("max_concurrent"))?;
        let max_concurrent = u32::try_from(n).map_err(|_| {
            r.invalid(
                "max_concurrent",
                &format!("max_concurrent must be at most {}, got {n}", u32::MAX),
            )
        })?;
        Ok(RefuseStreamsConfig { max_concurrent })
    }
}

/// What happens to a new client stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// It reaches the server.
    Forward,
    /// `RST_STREAM(id, REFUSED_STREAM)` to the client; never started at the server.
    Refuse,
}

#[derive(Debug, Clone, Copy)]
struct Open {
    id: u32,
    /// The client ended its side (END_STREAM upstream).
    client_done: bool,
    /// The server ended its side (END_STREAM downstream).
    server_done: bool,
}

/// One connection's `refuse_streams`. Memory: one entry per open admitted stream, at most
/// `max_concurrent`.
#[derive(Debug)]
pub struct RefuseStreams {
    cfg: RefuseStreamsConfig,
    open: Vec<Open>,
    refused: u64,
}

impl RefuseStreams {
    /// The fault of one connection.
    pub fn new(cfg: RefuseStreamsConfig) -> Self {
        RefuseStreams {
            cfg,
            open: Vec::new(),
            refused: 0,
        }
    }

    /// The client opened stream `id` (its first `HEADERS`); `end_stream` if that block ends
    /// the client's side.
    pub fn on_client_stream(&mut self, id: u32, end_stream: bool) -> Admission {
        if self.open.len() >= self.cfg.max_concurrent as usize {
            self.refused += 1;
            return Admission::Refuse;
        }
        self.open.push(Open {
            id,
            client_done: end_stream,
            server_done: false,
        });
        Admission::Forward
    }

    /// `END_STREAM` on stream `id` travelled in `direction` (Upstream: the client's side ended).
    pub fn on_end_stream(&mut self, id: u32, direction: Direction) {
        if let Some(o) = self.open.iter_mut().find(|o| o.id == id) {
            match direction {
                Direction::Upstream => o.client_done = true,
                Direction::Downstream => o.server_done = true,
            }
        }
        self.open.retain(|o| !(o.client_done && o.server_done));
    }

    /// Stream `id` was reset (by either end or by the proxy).
    pub fn on_reset(&mut self, id: u32) {
        self.open.retain(|o| o.id != id);
    }

    /// Client streams open now.
    pub fn open(&self) -> usize {
        self.open.len()
    }

    /// Streams refused so far on this connection.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::keys::FaultDef;

    fn read(v: Option<toml::Value>) -> Result<RefuseStreamsConfig, FaultConfigError> {
        let def = FaultDef::from_pairs(v.map(|v| ("max_concurrent", v)));
        let mut r = KeyReader::new(&def, "refuse_streams");
        RefuseStreamsConfig::read(&mut r)
    }

    #[test]
    fn max_concurrent_is_required_and_a_non_negative_integer() {
        assert_eq!(
            read(Some(toml::Value::Integer(2))).expect("valid"),
            RefuseStreamsConfig { max_concurrent: 2 }
        );
        let e = read(None).expect_err("missing");
        assert!(
            e.message.contains("missing required key 'max_concurrent'"),
            "{e:?}"
        );
        let e = read(Some(toml::Value::Integer(-1))).expect_err("negative");
        assert!(e.message.contains("non-negative integer"), "{e:?}");
        let e = read(Some(toml::Value::Integer(1 << 40))).expect_err("too big");
        assert!(e.message.contains("at most"), "{e:?}");
    }

    #[test]
    fn the_stream_past_the_limit_is_refused_and_a_closed_one_frees_its_place() {
        let mut f = RefuseStreams::new(RefuseStreamsConfig { max_concurrent: 2 });
        assert_eq!(f.on_client_stream(1, true), Admission::Forward);
        assert_eq!(f.on_client_stream(3, false), Admission::Forward);
        assert_eq!(f.on_client_stream(5, true), Admission::Refuse);
        assert_eq!(f.open(), 2, "a refused stream does not count");
        f.on_end_stream(1, Direction::Downstream);
        assert_eq!(f.open(), 1, "stream 1 ended both ways");
        assert_eq!(f.on_client_stream(7, true), Admission::Forward);
        assert_eq!(f.on_client_stream(9, true), Admission::Refuse);
        f.on_end_stream(3, Direction::Downstream);
        assert_eq!(
            f.on_client_stream(11, true),
            Admission::Refuse,
            "half-closed (the client has not ended stream 3) still counts"
        );
        f.on_reset(3);
        assert_eq!(f.on_client_stream(13, true), Admission::Forward);
        assert_eq!(f.refused(), 3);
    }

    #[test]
    fn zero_refuses_every_stream() {
        let mut f = RefuseStreams::new(RefuseStreamsConfig { max_concurrent: 0 });
        assert_eq!(f.on_client_stream(1, true), Admission::Refuse);
        assert_eq!(f.open(), 0);
    }
}
