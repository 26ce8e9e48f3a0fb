//! The factory every HTTP/2 fault kind (`goaway`, `hold_headers`, `flow_stall`,
//! `refuse_streams`) shares: the common keys, the per-connection probability draw, and the
//! kind's [`H2Fault`] for each connection the stream relay carries.
//!
//! Why apart from [`super::common::Factory`]: an h2 kind acts on frames, never on a byte chunk,
//! so its byte instance is always `None` (on an HTTP/1.1 connection it does nothing, and the
//! byte pump never sees it) and its work goes through [`FaultFactory::h2`]. Invariant, as for
//! byte kinds: [`H2FaultFactory::instantiate_h2`] draws exactly one `f64` from the connection
//! RNG for the probability before the kind draws anything; probability 0 never fires, 1 always.
//!
//! Also here: [`refuse`], how a kind keeps a client stream from being processed (`goaway`'s
//! late streams, `refuse_streams`) without dropping its header block, which HPACK forbids.

use std::sync::Arc;

use rand::RngExt;
use tokio::time::Instant;

use super::common::Common;
use super::h2::{H2Actions, H2Fault, H2FaultFactory, Inject};
use super::keys::{FaultConfigError, KeyReader};
use super::kind::Built;
use super::{ConnRng, Fault, FaultFactory};
use crate::vocab::Direction;
use crate::wire::h2::ErrorCode;

/// An h2 kind's validated configuration, which makes one [`H2Fault`] per connection.
pub trait H2KindConfig: std::fmt::Debug + Send + Sync + 'static {
    /// The kind's name.
    const KIND: &'static str;
    /// A fault for an h2 connection opened at `now` (the probability already fired).
    fn make(&self, common: Common, now: Instant) -> Box<dyn H2Fault>;
}

/// The factory of every h2 kind.
#[derive(Debug, Clone)]
pub struct H2Factory<C> {
    /// Direction and probability.
    pub common: Common,
    /// The kind's configuration.
    pub config: C,
}

impl<C: H2KindConfig> FaultFactory for H2Factory<C> {
    fn kind(&self) -> &'static str {
        C::KIND
    }

    fn direction(&self) -> Direction {
        self.common.direction
    }

    /// Never a byte fault: an h2 kind has nothing to do on a connection that is not h2.
    fn instantiate(&self, _rng: &mut ConnRng, _now: Instant) -> Option<Box<dyn Fault>> {
        None
    }

    fn fingerprint(&self) -> String {
        format!("{}{:?}{:?}", C::KIND, self.common, self.config)
    }

    fn h2(&self) -> Option<&dyn H2FaultFactory> {
        Some(self)
    }
}

impl<C: H2KindConfig> H2FaultFactory for H2Factory<C> {
    fn instantiate_h2(&self, rng: &mut ConnRng, now: Instant) -> Option<Box<dyn H2Fault>> {
        let draw: f64 = rng.random();
        (draw < self.common.probability).then(|| self.config.make(self.common, now))
    }
}

/// An h2 kind's definition: [`Common`] first, then the kind's own keys.
pub fn h2_conn<C: H2KindConfig>(
    r: &mut KeyReader<'_>,
    own: fn(&mut KeyReader<'_>) -> Result<C, FaultConfigError>,
) -> Result<Built, FaultConfigError> {
    let common = Common::read(r)?;
    let config = own(r)?;
    Ok(Built::Conn(Arc::new(H2Factory { common, config })))
}

/// Rejects `direction = "upstream"` for a kind that has no direction of its own (it acts on
/// the whole connection, or on responses only): `why` says what it acts on instead.
pub fn downstream_only(r: &mut KeyReader<'_>, why: &str) -> Result<(), FaultConfigError> {
    match r.raw("direction") {
        Some(p) if matches!(&p.value, toml::Value::String(s) if s == "upstream") => {
            Err(FaultConfigError::at_value(
                p,
                format!("direction must be \"downstream\" (the default): {why}"),
            ))
        }
        _ => Ok(()),
    }
}

/// A client stream that must not be processed: its header block still reaches the server (the
/// HPACK tables must stay in step, so no header block is ever dropped), immediately followed by
/// `RST_STREAM(CANCEL)` so the server abandons it; the client gets `RST_STREAM(REFUSED_STREAM)`
/// (not processed, safe to retry), and the relay drops the server's later `DATA` on it.
pub fn refuse(stream: u32, actions: &mut H2Actions) {
    abandon_at_server(stream, actions);
    refused_to_client(stream, actions);
}

/// The server half of [`refuse`]: `RST_STREAM(CANCEL)` right after the stream's header block.
pub fn abandon_at_server(stream: u32, actions: &mut H2Actions) {
    actions.inject.push(Inject::RstStream {
        to: Direction::Upstream,
        stream,
        code: ErrorCode::CANCEL,
    });
}

/// The client half of [`refuse`]: `RST_STREAM(REFUSED_STREAM)`. Never before the server's
/// connection preface (its first `SETTINGS`) reached the client: a kind that refuses earlier
/// keeps the id and sends this once that `SETTINGS` passed.
pub fn refused_to_client(stream: u32, actions: &mut H2Actions) {
    actions.inject.push(Inject::RstStream {
        to: Direction::Downstream,
        stream,
        code: ErrorCode::REFUSED_STREAM,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::conn_rng;

    #[derive(Debug)]
    struct Probe;

    struct Nothing;

    impl H2Fault for Nothing {
        fn kind(&self) -> &'static str {
            "probe"
        }
        fn on_frame(
            &mut self,
            _frame: &super::super::h2::FrameView<'_>,
            _facts: &super::super::h2::StreamFacts<'_>,
            _now: Instant,
            _rng: &mut ConnRng,
            _actions: &mut super::super::h2::H2Actions,
        ) {
        }
    }

    impl H2KindConfig for Probe {
        const KIND: &'static str = "probe";
        fn make(&self, _common: Common, _now: Instant) -> Box<dyn H2Fault> {
            Box::new(Nothing)
        }
    }

    fn factory(probability: f64) -> H2Factory<Probe> {
        H2Factory {
            common: Common {
                direction: Direction::Downstream,
                probability,
            },
            config: Probe,
        }
    }

    #[test]
    fn an_h2_kind_is_never_a_byte_fault_and_draws_its_probability_once() {
        let now = Instant::now();
        let mut rng = conn_rng(1, "p", 0);
        assert!(factory(1.0).instantiate(&mut rng, now).is_none());
        let fired = (0..200)
            .filter(|i| {
                let mut rng = conn_rng(1, "p", *i);
                factory(0.5).instantiate_h2(&mut rng, now).is_some()
            })
            .count();
        assert!((60..140).contains(&fired), "{fired} of 200 at p = 0.5");
        let mut a = conn_rng(3, "p", 0);
        let mut b = conn_rng(3, "p", 0);
        assert!(factory(0.0).instantiate_h2(&mut a, now).is_none());
        assert!(factory(1.0).instantiate_h2(&mut b, now).is_some());
        let (x, y): (u64, u64) = (a.random(), b.random());
        assert_eq!(x, y, "one draw whatever the probability");
        assert!(factory(1.0).h2().is_some());
    }

    #[test]
    fn a_kind_without_a_direction_rejects_upstream_and_flow_stall_takes_it() {
        use crate::fault::keys::FaultDef;
        use crate::fault::registry::{Built, build};
        let def = |kind: &str, key: &str, v: i64| {
            FaultDef::from_pairs(vec![
                ("kind", toml::Value::String(kind.into())),
                ("direction", toml::Value::String("upstream".into())),
                (key, toml::Value::Integer(v)),
            ])
        };
        for (kind, key) in [
            ("goaway", "after_ms"),
            ("hold_headers", "hold_ms"),
            ("refuse_streams", "max_concurrent"),
        ] {
            let e = build(&def(kind, key, 1)).expect_err(kind);
            assert_eq!(e.key.as_deref(), Some("direction"), "{kind}: {e:?}");
            assert!(e.message.contains("\"downstream\""), "{kind}: {e:?}");
        }
        match build(&def("flow_stall", "stall_ms", 5)) {
            Ok(Built::Conn(c)) => {
                assert_eq!(c.direction(), Direction::Upstream);
                assert!(c.h2().is_some(), "an h2 kind");
            }
            other => panic!("flow_stall upstream: {other:?}"),
        }
    }
}
