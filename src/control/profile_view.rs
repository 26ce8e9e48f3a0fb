//! A profile's faults as the API lists them: toxics with `"source": "profile"`, so `GET
//! /proxies` and `GET /proxies/{name}/toxics` show every fault acting on a proxy, not only the
//! toxics added through the API.
//!
//! Invariants: a per-connection profile fault is listed if and only if it is in the proxy's
//! profile layer now (the current phase's faults, with phases; none after `/reset` detached the
//! profile), named as in the profile, with its kind as `type`, its direction as `stream`, its
//! `probability` as `toxicity` and its other keys, as written at start, as `attributes`. A
//! profile outage schedule (proxy-wide) is listed while the profile is attached. Profile
//! toxics come first (the profile's faults act before the API's toxics).

use serde_json::{Map, Value};

use super::hub::ProxyHub;
use super::model::ToxicDoc;
use crate::fault::registry::Built;
use crate::profile::Profile;
use crate::vocab::Direction;

/// The value of `source` on a toxic that comes from the profile.
pub const PROFILE_SOURCE: &str = "profile";

/// Keys of a profile fault that are not attributes: they are the toxic's other fields.
const NOT_ATTRIBUTES: &[&str] = &["kind", "name", "proxy", "direction", "probability"];

/// One profile fault of one proxy, as written at start.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileToxic {
    /// The fault's name in the profile.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// The direction it acts on (proxy-wide outages: downstream).
    pub stream: Direction,
    /// Its `probability` (1 when absent).
    pub toxicity: f64,
    /// Its other keys, as JSON.
    pub attributes: Map<String, Value>,
    /// A proxy-wide outage schedule rather than a per-connection fault.
    pub outage: bool,
}

/// The faults of `profile` that apply to `proxy` (its `[[proxy]]` name; `None`: the command
/// line's proxy), in declaration order.
pub fn profile_toxics(profile: &Profile, proxy: Option<&str>) -> Vec<ProfileToxic> {
    profile
        .faults_for(proxy)
        .map(|f| {
            let (stream, outage) = match &f.built {
                Built::Conn(c) => (c.direction(), false),
                Built::Outage(_) => (Direction::Downstream, true),
            };
            let toxicity = f
                .def
                .get("probability")
                .and_then(|p| {
                    p.value
                        .as_float()
                        .or(p.value.as_integer().map(|i| i as f64))
                })
                .unwrap_or(1.0);
            let attributes = f
                .def
                .params
                .iter()
                .filter(|p| !NOT_ATTRIBUTES.contains(&p.key.as_str()))
                .filter_map(|p| Some((p.key.clone(), serde_json::to_value(&p.value).ok()?)))
                .collect();
            ProfileToxic {
                name: f.name.clone(),
                kind: f.kind.clone(),
                stream,
                toxicity,
                attributes,
                outage,
            }
        })
        .collect()
}

impl ProfileToxic {
    fn doc(&self) -> ToxicDoc {
        ToxicDoc {
            attributes: self.attributes.clone(),
            name: self.name.clone(),
            type_: self.kind.clone(),
            stream: self.stream.as_str().to_owned(),
            toxicity: self.toxicity,
            source: Some(PROFILE_SOURCE),
        }
    }
}

/// The profile toxics acting on proxy `name` now (see the module doc), given what the profile
/// wrote for it (`described`).
pub(super) fn listed(hub: &dyn ProxyHub, name: &str, described: &[ProfileToxic]) -> Vec<ToxicDoc> {
    if described.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<ToxicDoc> = hub
        .profile_faults(name)
        .iter()
        .map(|f| {
            let fault_name = f.name().unwrap_or(f.kind());
            match described.iter().find(|d| !d.outage && d.name == fault_name) {
                Some(d) => d.doc(),
                // Not in the profile read at start (a `--watch` reload added it).
                None => ToxicDoc {
                    attributes: Map::new(),
                    name: fault_name.to_owned(),
                    type_: f.kind().to_owned(),
                    stream: f.direction().as_str().to_owned(),
                    toxicity: 1.0,
                    source: Some(PROFILE_SOURCE),
                },
            }
        })
        .collect();
    if !hub.profile_detached(name) {
        out.extend(described.iter().filter(|d| d.outage).map(ProfileToxic::doc));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(text: &str) -> Profile {
        crate::profile::parse(text, "test.toml").expect("a valid profile")
    }

    #[test]
    fn profile_faults_become_toxics_with_their_keys_as_attributes() {
        let p = profile(
            "[[fault]]\nname = \"slow\"\nkind = \"latency\"\nlatency_ms = 300\nprobability = 0.5\n\n\
             [[fault]]\nkind = \"outage\"\nevery_ms = 1000\nduration_ms = 100\n",
        );
        let t = profile_toxics(&p, None);
        assert_eq!(t.len(), 2, "{t:?}");
        assert_eq!(t[0].name, "slow");
        assert_eq!(t[0].kind, "latency");
        assert_eq!(t[0].toxicity, 0.5);
        assert!(!t[0].outage);
        assert_eq!(
            Value::Object(t[0].attributes.clone()),
            serde_json::json!({"latency_ms": 300})
        );
        assert!(t[1].outage);
        let doc = serde_json::to_value(t[0].doc()).expect("json");
        assert_eq!(doc["source"], "profile");
    }

    #[test]
    fn a_fault_for_another_proxy_is_not_listed() {
        let p = profile(
            "[[proxy]]\nname = \"a\"\nlisten = \"127.0.0.1:0\"\nupstream = \"127.0.0.1:1\"\n\n\
             [[proxy]]\nname = \"b\"\nlisten = \"127.0.0.1:0\"\nupstream = \"127.0.0.1:1\"\n\n\
             [[fault]]\nkind = \"latency\"\nproxy = \"b\"\nlatency_ms = 5\n",
        );
        assert!(profile_toxics(&p, Some("a")).is_empty());
        assert_eq!(profile_toxics(&p, Some("b")).len(), 1);
    }
}
