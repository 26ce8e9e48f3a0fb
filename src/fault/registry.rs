//! The registry of fault kinds: what each one does, its keys, and how a definition becomes a
//! factory (per connection) or a schedule (per proxy).
//!
//! One path validates every definition: profiles and the Toxiproxy JSON API both go through the
//! kinds' `read` functions, so a key means the same everywhere and every error names the key and
//! what is allowed. A kind is one file that declares itself (`pub const KIND`, see
//! [`super::kind`]) plus one line in [`KINDS`]; its Toxiproxy type, if any, is part of that
//! declaration. Invariant: [`KINDS`] lists exactly the kinds [`build`] accepts and
//! [`toxics`] exactly the Toxiproxy types [`from_toxiproxy`] accepts, in the order error
//! messages list them; an unknown name is an error, never a fallback.
//!
//! `down` is not a fault kind: a proxy is down while it is disabled (`enabled = false` on a
//! `[[proxy]]` in a profile, or toggled through the control API); its listener is closed and its
//! connections are closed until it is enabled again.

use std::sync::Arc;

use super::FaultFactory;
use super::common::Common;
use super::keys::{FaultConfigError, FaultDef, KeyReader};
use super::toxiproxy::json_def;
use super::{
    bandwidth, buffer, flow_stall, goaway, hold_headers, idle, latency, limit_data, outage,
    refuse_streams, reset, slicer, slow_close, sse_cut, stall, timeout,
};
use crate::vocab::Direction;

pub use super::kind::{Built, KindInfo, Scope, Toxic};

/// Keys every fault definition may have.
pub const DEF_KEYS: &[(&str, &str)] = &[
    ("kind", "the fault kind (required)"),
    ("name", "unique per proxy; defaults to the kind"),
    ("proxy", "the [[proxy]] it applies to; absent = every proxy"),
];

/// Keys every per-connection kind has.
pub const COMMON_KEYS: &[(&str, &str)] = &[
    (
        "direction",
        "\"upstream\" (client→server) or \"downstream\" (default)",
    ),
    (
        "probability",
        "chance per connection that it fires, 0..1 (default 1)",
    ),
];

/// Every kind, in the order messages list them: one line per kind.
pub const KINDS: &[KindInfo] = &[
    latency::KIND,
    bandwidth::KIND,
    slicer::KIND,
    slow_close::KIND,
    timeout::KIND,
    reset::KIND,
    limit_data::KIND,
    stall::KIND,
    outage::KIND,
    sse_cut::KIND,
    idle::KIND,
    buffer::KIND,
    goaway::KIND,
    hold_headers::KIND,
    flow_stall::KIND,
    refuse_streams::KIND,
];

/// The names of every kind, comma-separated.
pub fn known_kinds() -> String {
    KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// The Toxiproxy toxic types tearline answers, in [`KINDS`] order.
pub fn toxics() -> impl Iterator<Item = &'static Toxic> {
    KINDS.iter().filter_map(|k| k.toxic.as_ref())
}

/// The Toxiproxy toxic of type `type_`, if tearline answers it.
pub fn toxic(type_: &str) -> Option<&'static Toxic> {
    toxics().find(|t| t.type_ == type_)
}

/// Builds one definition (a profile's `[[fault]]` table): validates every key.
pub fn build(def: &FaultDef) -> Result<Built, FaultConfigError> {
    let Some(kind_param) = def.get("kind") else {
        return Err(FaultConfigError::at_def(
            def,
            Some("kind"),
            format!(
                "missing required key 'kind'; known kinds: {}",
                known_kinds()
            ),
        ));
    };
    let toml::Value::String(kind) = &kind_param.value else {
        return Err(FaultConfigError::at_value(
            kind_param,
            format!("kind must be a string; known kinds: {}", known_kinds()),
        ));
    };
    let Some(info) = KINDS.iter().find(|k| k.name == kind) else {
        let hint = if kind == "down" {
            " ('down' is a proxy state: set `enabled = false` on the [[proxy]])"
        } else {
            ""
        };
        return Err(FaultConfigError::at_value(
            kind_param,
            format!(
                "unknown fault kind '{kind}'; known: {}{hint}",
                known_kinds()
            ),
        ));
    };
    let mut r = KeyReader::new(def, info.name);
    let common: &[(&str, &str)] = match info.scope {
        Scope::Connection => COMMON_KEYS,
        Scope::Proxy => &[],
    };
    let keys: Vec<&'static str> = DEF_KEYS
        .iter()
        .chain(common)
        .chain(info.keys)
        .map(|(k, _)| *k)
        .collect();
    r.declare(&keys)?;
    r.raw("kind");
    r.str("name")?;
    r.str("proxy")?;
    let built = (info.read)(&mut r).map_err(|e| locate(def, e))?;
    r.finish()?;
    Ok(built)
}

/// Points an error a kind's reader made about the definition as a whole at the key it is
/// about: the key the message names (`'events'`, `idle_ms`), or the one holding the value serde
/// calls an unknown variant (`action = "explode"`), whose message then lists what is allowed.
/// Errors already at a key are kept.
fn locate(def: &FaultDef, mut e: FaultConfigError) -> FaultConfigError {
    if e.key.is_some() && e.span != def.span {
        return e;
    }
    let variant = e
        .message
        .strip_prefix("unknown variant `")
        .and_then(|rest| rest.split_once('`'));
    if let Some((value, rest)) = variant {
        let param = def
            .params
            .iter()
            .find(|p| p.key != "kind" && matches!(&p.value, toml::Value::String(v) if v == value));
        if let Some(p) = param {
            let allowed = rest
                .trim_start_matches(", expected one of ")
                .trim_start_matches(", expected ")
                .replace('`', "");
            return FaultConfigError::at_value(
                p,
                format!("{} '{value}' is not allowed; allowed: {allowed}", p.key),
            );
        }
    }
    let word = |key: &str| {
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        e.message.match_indices(key).find_map(|(i, _)| {
            let before = e.message[..i].chars().next_back();
            let after = e.message[i + key.len()..].chars().next();
            (!before.is_some_and(ident) && !after.is_some_and(ident)).then_some(i)
        })
    };
    let named = def
        .params
        .iter()
        .filter(|p| p.key != "kind")
        .filter_map(|p| word(&p.key).map(|i| (i, p)))
        .min_by_key(|(i, _)| *i);
    if let Some((_, p)) = named {
        let message = std::mem::take(&mut e.message);
        return FaultConfigError::at_value(p, message);
    }
    e
}

/// Builds a factory from a Toxiproxy toxic: its `type`, `attributes` (Toxiproxy's names and
/// units: ms, KB/s for `rate`, µs for slicer `delay`), `stream` and `toxicity`. Missing
/// attributes take Toxiproxy's zero defaults (see [`super::toxiproxy`]).
pub fn from_toxiproxy(
    type_: &str,
    attributes: &serde_json::Value,
    stream: Direction,
    toxicity: f64,
) -> Result<Arc<dyn FaultFactory>, FaultConfigError> {
    let common = Common::checked(stream, toxicity)?;
    let def = json_def(attributes)?;
    let mut r = KeyReader::new(&def, type_);
    let Some(toxic) = toxic(type_) else {
        return Err(FaultConfigError {
            key: Some("type".into()),
            span: None,
            message: format!(
                "unknown toxic type '{type_}'; known: {}",
                toxics().map(|t| t.type_).collect::<Vec<_>>().join(", ")
            ),
        });
    };
    r.declare(toxic.attributes.iter())?;
    let factory = (toxic.read)(&mut r, common)?;
    r.finish()?;
    Ok(factory)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_and_toxiproxy_types_are_each_listed_once() {
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KINDS.len(), "a kind name is listed twice");
        let mut types: Vec<&str> = toxics().map(|t| t.type_).collect();
        types.sort_unstable();
        types.dedup();
        assert_eq!(
            types.len(),
            toxics().count(),
            "a toxic type is listed twice"
        );
        assert_eq!(
            types,
            [
                "bandwidth",
                "latency",
                "limit_data",
                "reset_peer",
                "slicer",
                "slow_close",
                "timeout"
            ],
            "Toxiproxy's seven types with attributes (noop is the API's own)"
        );
    }

    #[test]
    fn an_unknown_kind_is_an_error_never_a_fallback() {
        let def = FaultDef::from_pairs(vec![
            ("kind", toml::Value::String("stal".into())),
            ("duration_ms", toml::Value::Integer(5)),
        ]);
        let err = build(&def).expect_err("an unknown kind must not build");
        assert!(err.message.contains("unknown fault kind 'stal'"), "{err:?}");
        assert!(
            from_toxiproxy(
                "stall",
                &serde_json::Value::Null,
                Direction::Downstream,
                1.0
            )
            .is_err()
        );
    }
}
