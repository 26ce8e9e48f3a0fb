//! `limit_data`: the direction is closed with an orderly FIN after exactly `bytes` bytes.
//!
//! Observable effect: the peer receives exactly the first `bytes` bytes, then a clean EOF, and
//! the connection is closed; a connection that ends before that closes normally.
//!
//! Profile keys: `bytes` (required, integer), plus `direction` and `probability`.

use tokio::time::Instant;

use super::common::Factory;
use super::common::KindConfig;
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope, Toxic, conn};
use super::reset::ByteCut;
use super::{ConnRng, Fault};
use crate::vocab::CutAction;

/// Configuration of `limit_data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitDataConfig {
    /// Bytes delivered before the FIN.
    pub bytes: u64,
}

impl LimitDataConfig {
    /// Reads `bytes`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let bytes = r.u64("bytes", "bytes")?.ok_or_else(|| r.missing("bytes"))?;
        Ok(LimitDataConfig { bytes })
    }
}

impl KindConfig for LimitDataConfig {
    const KIND: &'static str = "limit_data";

    fn make(&self, _rng: &mut ConnRng, _now: Instant) -> Box<dyn Fault> {
        Box::new(ByteCut::new(self.bytes, CutAction::Fin, None, Self::KIND))
    }
}

/// `limit_data` in the registry; Toxiproxy's `limit_data` (`bytes`).
pub const KIND: KindInfo = KindInfo {
    name: "limit_data",
    scope: Scope::Connection,
    summary: "orderly FIN after exactly N bytes",
    keys: &[("bytes", "bytes delivered before the FIN (required)")],
    read: |r| conn(r, LimitDataConfig::read),
    toxic: Some(Toxic {
        type_: "limit_data",
        attributes: &["bytes"],
        read: |r, common| {
            let bytes = r.u64("bytes", "bytes")?.unwrap_or(0);
            Ok(Factory::shared(common, LimitDataConfig { bytes }))
        },
    }),
};
