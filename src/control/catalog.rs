//! [`RegistryCatalog`]: the [`FaultCatalog`] over tearline's fault registry.
//!
//! Toxiproxy's types (`latency`, `bandwidth`, `slow_close`, `timeout`, `reset_peer`, `slicer`,
//! `limit_data`) take Toxiproxy's attribute names and units
//! ([`from_toxiproxy`](crate::fault::registry::from_toxiproxy)); tearline's own per-connection
//! kinds (`reset`, `stall`, `sse_cut`, …) take their profile keys as attributes, with the
//! toxic's `stream` as `direction` and its `toxicity` as `probability`; the proxy-wide
//! `outage` takes its profile keys and becomes a schedule whose clock starts when the toxic is
//! added (or the proxy enabled). A name both know
//! (`latency`) means Toxiproxy's type. Invariant: [`FaultCatalog::known_types`] lists exactly
//! the types [`FaultCatalog::build`] and [`FaultCatalog::build_outage`] accept.

use std::sync::Arc;

use super::hub::{CatalogError, FaultCatalog};
use crate::fault::FaultFactory;
use crate::fault::keys::FaultDef;
use crate::fault::outage::OutageSchedule;
use crate::fault::registry::{Built, KINDS, Scope, build, from_toxiproxy, toxic, toxics};
use crate::vocab::Direction;

/// Keys a toxic sets from its own fields; attributes may not repeat them.
const RESERVED: &[&str] = &["kind", "name", "proxy", "direction", "probability"];

/// Toxics built by the fault registry.
#[derive(Debug, Default, Clone, Copy)]
pub struct RegistryCatalog;

fn is_toxiproxy(type_: &str) -> bool {
    toxic(type_).is_some()
}

fn own_kind(type_: &str) -> bool {
    !is_toxiproxy(type_)
        && KINDS
            .iter()
            .any(|k| k.name == type_ && k.scope == Scope::Connection)
}

/// A JSON attribute as a profile value.
fn toml_value(key: &str, v: &serde_json::Value) -> Result<toml::Value, CatalogError> {
    use serde_json::Value as J;
    Ok(match v {
        J::Bool(b) => toml::Value::Boolean(*b),
        J::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => toml::Value::Integer(i),
            (None, Some(f)) => toml::Value::Float(f),
            (None, None) => {
                return Err(CatalogError::Invalid(format!(
                    "attribute '{key}' is out of range: {n}"
                )));
            }
        },
        J::String(s) => toml::Value::String(s.clone()),
        J::Array(items) => toml::Value::Array(
            items
                .iter()
                .map(|i| toml_value(key, i))
                .collect::<Result<_, _>>()?,
        ),
        J::Null | J::Object(_) => {
            return Err(CatalogError::Invalid(format!(
                "attribute '{key}' must be a number, string, boolean or array, got {v}"
            )));
        }
    })
}

impl FaultCatalog for RegistryCatalog {
    fn build(
        &self,
        type_: &str,
        attributes: &serde_json::Value,
        stream: Direction,
        toxicity: f64,
    ) -> Result<Arc<dyn FaultFactory>, CatalogError> {
        if is_toxiproxy(type_) {
            return from_toxiproxy(type_, attributes, stream, toxicity)
                .map_err(|e| CatalogError::Invalid(e.to_string()));
        }
        if !own_kind(type_) {
            return Err(CatalogError::UnknownType {
                type_: type_.to_owned(),
                known: self.known_types().join(", "),
            });
        }
        let mut pairs = vec![
            ("kind".to_owned(), toml::Value::String(type_.to_owned())),
            (
                "direction".to_owned(),
                toml::Value::String(stream.as_str().to_owned()),
            ),
            ("probability".to_owned(), toml::Value::Float(toxicity)),
        ];
        if let Some(map) = attributes.as_object() {
            for (k, v) in map {
                if RESERVED.contains(&k.as_str()) {
                    return Err(CatalogError::Invalid(format!(
                        "attribute '{k}' is set by the toxic itself (stream → direction, \
                         toxicity → probability); remove it from attributes"
                    )));
                }
                pairs.push((k.clone(), toml_value(k, v)?));
            }
        }
        match build(&FaultDef::from_pairs(pairs)) {
            Ok(Built::Conn(f)) => Ok(f),
            Ok(Built::Outage(_)) => Err(CatalogError::Invalid(format!(
                "'{type_}' is proxy-wide and cannot be a toxic"
            ))),
            Err(e) => Err(CatalogError::Invalid(e.to_string())),
        }
    }

    fn build_outage(
        &self,
        type_: &str,
        attributes: &serde_json::Value,
    ) -> Option<Result<OutageSchedule, CatalogError>> {
        if is_toxiproxy(type_)
            || !KINDS
                .iter()
                .any(|k| k.name == type_ && k.scope == Scope::Proxy)
        {
            return None;
        }
        let mut pairs = vec![("kind".to_owned(), toml::Value::String(type_.to_owned()))];
        if let Some(map) = attributes.as_object() {
            for (k, v) in map {
                if RESERVED.contains(&k.as_str()) {
                    return Some(Err(CatalogError::Invalid(format!(
                        "attribute '{k}' does not apply to the proxy-wide '{type_}'"
                    ))));
                }
                match toml_value(k, v) {
                    Ok(v) => pairs.push((k.clone(), v)),
                    Err(e) => return Some(Err(e)),
                }
            }
        }
        Some(match build(&FaultDef::from_pairs(pairs)) {
            Ok(Built::Outage(s)) => Ok(s),
            Ok(Built::Conn(_)) => Err(CatalogError::Invalid(format!(
                "'{type_}' is not proxy-wide"
            ))),
            Err(e) => Err(CatalogError::Invalid(e.to_string())),
        })
    }

    fn known_types(&self) -> Vec<String> {
        let mut known: Vec<String> = toxics()
            .map(|t| t.type_.to_owned())
            .chain(KINDS.iter().map(|k| k.name.to_owned()))
            .collect();
        known.sort();
        known.dedup();
        known
    }
}
