//! What every per-connection kind shares: `direction`, `probability`, and the factory that
//! decides, from the connection RNG, whether a fault fires on a connection.
//!
//! Invariant: [`Factory::instantiate`] draws exactly one `f64` from the connection RNG for the
//! probability before the kind draws anything, whatever the probability, so the decisions of one
//! seed do not shift when a probability changes; probability 0 never fires, 1 always fires. A
//! live edit re-makes a changed fault with the draw the connection already made
//! ([`FaultFactory::instantiate_drawn`]): the draw is never rolled again.

use std::sync::Arc;

use rand::RngExt;
use tokio::time::Instant;

use super::keys::{FaultConfigError, KeyReader};
use super::{Chunk, ConnRng, Fault, FaultFactory};
use crate::vocab::Direction;

/// The keys every per-connection kind has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Common {
    /// The direction the fault acts on (default downstream).
    pub direction: Direction,
    /// Chance, per connection, that the fault fires (0..=1, default 1).
    pub probability: f64,
}

impl Default for Common {
    fn default() -> Self {
        Common {
            direction: Direction::Downstream,
            probability: 1.0,
        }
    }
}

impl Common {
    /// Reads `direction` and `probability`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Common, FaultConfigError> {
        let direction = match r.choice("direction", &["upstream", "downstream"])? {
            Some("upstream") => Direction::Upstream,
            _ => Direction::Downstream,
        };
        let probability = match r.f64("probability")? {
            None => 1.0,
            Some((p, _)) if (0.0..=1.0).contains(&p) => p,
            Some((p, param)) => {
                return Err(FaultConfigError::at_value(
                    param,
                    format!("probability must be between 0 and 1, got {p}"),
                ));
            }
        };
        Ok(Common {
            direction,
            probability,
        })
    }

    /// Checks a probability given in code or JSON.
    pub fn checked(direction: Direction, probability: f64) -> Result<Common, FaultConfigError> {
        if !(0.0..=1.0).contains(&probability) {
            return Err(FaultConfigError {
                key: Some("probability".into()),
                span: None,
                message: format!("probability must be between 0 and 1, got {probability}"),
            });
        }
        Ok(Common {
            direction,
            probability,
        })
    }
}

/// A kind's validated configuration, which makes one fault per connection.
pub trait KindConfig: std::fmt::Debug + Send + Sync + 'static {
    /// The kind's name.
    const KIND: &'static str;
    /// A fault for a connection opened at `now` (the probability already fired).
    fn make(&self, rng: &mut ConnRng, now: Instant) -> Box<dyn Fault>;
}

/// The factory of every per-connection kind.
#[derive(Debug, Clone)]
pub struct Factory<C> {
    /// Direction and probability.
    pub common: Common,
    /// The kind's configuration.
    pub config: C,
}

impl<C: KindConfig> Factory<C> {
    /// Shares a factory.
    pub fn shared(common: Common, config: C) -> Arc<dyn FaultFactory> {
        Arc::new(Factory { common, config })
    }
}

impl<C: KindConfig> FaultFactory for Factory<C> {
    fn kind(&self) -> &'static str {
        C::KIND
    }

    fn direction(&self) -> Direction {
        self.common.direction
    }

    fn instantiate(&self, rng: &mut ConnRng, now: Instant) -> Option<Box<dyn Fault>> {
        self.instantiate_drawn(None, rng, now).1
    }

    fn instantiate_drawn(
        &self,
        draw: Option<f64>,
        rng: &mut ConnRng,
        now: Instant,
    ) -> (Option<f64>, Option<Box<dyn Fault>>) {
        let draw: f64 = draw.unwrap_or_else(|| rng.random());
        let fault = (draw < self.common.probability).then(|| self.config.make(rng, now));
        (Some(draw), fault)
    }

    fn fingerprint(&self) -> String {
        format!("{}{:?}{:?}", C::KIND, self.common, self.config)
    }
}

/// Where absolute stream offset `n` falls in `chunk`, as a cut point (bytes of the chunk before
/// it): `Some(k)` if and only if `offset <= n <= offset + len`.
pub fn cut_point(n: u64, chunk: &Chunk<'_>) -> Option<usize> {
    let k = n.checked_sub(chunk.offset)?;
    let k = usize::try_from(k).ok()?;
    (k <= chunk.bytes.len()).then_some(k)
}
