//! What a fault kind declares about itself, so that adding a kind is one file plus one line in
//! [`super::registry::KINDS`]: its name and keys, how a definition becomes what it builds, and
//! which Toxiproxy toxic type (if any) it answers, with that type's attribute names.
//!
//! Why a table of plain data and function pointers: profiles, `tearline profiles`, the control
//! API and error messages all read the same entries, so a kind cannot be known to one of them
//! and unknown to another, and an unknown name is always an error (never a fallback kind).
//!
//! Invariant: a kind's `read` validates every key it declares in `keys` (the registry has
//! already rejected undeclared keys and read `kind`, `name` and `proxy`); a toxic's `read` gets
//! the attributes under Toxiproxy's names, declared from `attributes`.

use std::sync::Arc;

use super::FaultFactory;
use super::common::Common;
use super::keys::{FaultConfigError, KeyReader};
use super::outage::OutageSchedule;

/// Whether a kind acts on one connection's direction or on the whole proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One direction of one connection; has `direction` and `probability`.
    Connection,
    /// The whole proxy (a schedule the runtime drives).
    Proxy,
}

/// What a definition builds.
#[derive(Clone)]
pub enum Built {
    /// A per-connection fault.
    Conn(Arc<dyn FaultFactory>),
    /// A proxy-level outage schedule.
    Outage(OutageSchedule),
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Built::Conn(c) => write!(f, "Conn({} {})", c.kind(), c.direction()),
            Built::Outage(o) => write!(f, "Outage({o:?})"),
        }
    }
}

/// Reads a definition's own keys (the common ones included, for a connection kind).
pub type ReadDef = fn(&mut KeyReader<'_>) -> Result<Built, FaultConfigError>;

/// Reads a Toxiproxy toxic's attributes; `stream` and `toxicity` arrive as [`Common`].
pub type ReadToxic =
    fn(&mut KeyReader<'_>, Common) -> Result<Arc<dyn FaultFactory>, FaultConfigError>;

/// The Toxiproxy toxic type a kind answers.
#[derive(Debug, Clone, Copy)]
pub struct Toxic {
    /// Toxiproxy's `type`.
    pub type_: &'static str,
    /// Its attribute names (Toxiproxy's units: ms, KB/s, µs for slicer `delay`).
    pub attributes: &'static [&'static str],
    /// Builds the fault from them.
    pub read: ReadToxic,
}

/// A kind as the registry lists it.
#[derive(Debug, Clone, Copy)]
pub struct KindInfo {
    /// The name used in profiles.
    pub name: &'static str,
    /// Connection or proxy.
    pub scope: Scope,
    /// One line: the observable effect.
    pub summary: &'static str,
    /// Its own keys (common keys excluded), with a short description.
    pub keys: &'static [(&'static str, &'static str)],
    /// Builds a profile definition of it.
    pub read: ReadDef,
    /// The Toxiproxy toxic it answers, if any.
    pub toxic: Option<Toxic>,
}

/// A connection kind's definition: [`Common`] first, then the kind's own keys.
pub fn conn<C: super::common::KindConfig>(
    r: &mut KeyReader<'_>,
    own: fn(&mut KeyReader<'_>) -> Result<C, FaultConfigError>,
) -> Result<Built, FaultConfigError> {
    let common = Common::read(r)?;
    Ok(Built::Conn(super::common::Factory::shared(common, own(r)?)))
}

/// A Toxiproxy attribute in milliseconds; absent is 0, as Toxiproxy's zero default.
pub fn toxic_ms(
    r: &mut KeyReader<'_>,
    key: &'static str,
) -> Result<std::time::Duration, FaultConfigError> {
    r.millis(key).map(Option::unwrap_or_default)
}

/// Deserializes a definition's keys (all of them, common keys included) into a serde type;
/// errors carry the span of the whole definition.
pub fn params_as<T: serde::de::DeserializeOwned>(
    def: &super::keys::FaultDef,
) -> Result<T, FaultConfigError> {
    let table: toml::Table = def
        .params
        .iter()
        .filter(|p| !matches!(p.key.as_str(), "kind" | "name" | "proxy"))
        .map(|p| (p.key.clone(), p.value.clone()))
        .collect();
    T::deserialize(table).map_err(|e| FaultConfigError {
        key: None,
        span: def.span.clone(),
        message: e.message().to_owned(),
    })
}
