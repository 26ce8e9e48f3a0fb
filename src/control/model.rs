//! Toxiproxy's JSON shapes: what clients send (proxy and toxic inputs) and what they read back
//! (proxy and toxic documents), plus the attribute table of Toxiproxy's own toxic types.
//!
//! Inputs reject unknown fields (400 naming the field and the known ones), except `toxics` on a
//! proxy, which Toxiproxy's clients send back on save and Toxiproxy ignores. For Toxiproxy's
//! toxic types every attribute is an integer and a read-back always lists all of the type's
//! attributes (absent ones are 0, as in Toxiproxy); other types keep their attributes as given.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::errors::ApiError;
use crate::fault::registry::toxic;
use crate::vocab::Direction;

/// Body of `POST /proxies` and one element of `POST /populate`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyInput {
    /// Unique name.
    #[serde(default)]
    pub name: Option<String>,
    /// `host:port` to listen on (`127.0.0.1:0` picks a port).
    #[serde(default)]
    pub listen: Option<String>,
    /// `host:port` to relay to.
    #[serde(default)]
    pub upstream: Option<String>,
    /// Whether the proxy listens (default true).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Ignored (clients send the document they read back).
    #[serde(default)]
    pub toxics: Option<serde::de::IgnoredAny>,
}

/// Body of `PATCH /proxies/{name}`: absent fields keep their value. `name` is ignored, as in
/// Toxiproxy.
pub type ProxyPatch = ProxyInput;

/// Body of `POST /proxies/{name}/toxics` and `PATCH …/toxics/{toxic}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToxicInput {
    /// Unique name within the proxy (default `<type>_<stream>`).
    #[serde(default)]
    pub name: Option<String>,
    /// The toxic type.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// `upstream` or `downstream` (default downstream).
    #[serde(default)]
    pub stream: Option<String>,
    /// Probability that the toxic applies to a connection (default 1.0).
    #[serde(default)]
    pub toxicity: Option<f64>,
    /// Type-specific settings.
    #[serde(default)]
    pub attributes: Option<Value>,
}

/// A toxic as Toxiproxy renders it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToxicDoc {
    /// Type-specific settings.
    pub attributes: Map<String, Value>,
    /// Name.
    pub name: String,
    /// Type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `upstream` or `downstream`.
    pub stream: String,
    /// Probability per connection.
    pub toxicity: f64,
    /// `"profile"` for a fault of the profile the proxy was started with (not in Toxiproxy's
    /// shape; absent on toxics added through the API).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
}

/// A proxy as Toxiproxy renders it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProxyDoc {
    /// Name.
    pub name: String,
    /// The bound address when enabled, else the address as configured.
    pub listen: String,
    /// Where connections are relayed.
    pub upstream: String,
    /// Whether it listens.
    pub enabled: bool,
    /// Upstream toxics first, then downstream ones, each in the order they were added.
    pub toxics: Vec<ToxicDoc>,
}

/// The attribute names of a Toxiproxy type (the fault registry's table, plus `noop`), if it is
/// one.
pub fn toxiproxy_attributes(type_: &str) -> Option<&'static [&'static str]> {
    if type_ == "noop" {
        return Some(&[]);
    }
    toxic(type_).map(|t| t.attributes)
}

/// Parses `stream` as Toxiproxy does: case-insensitive; absent or empty means downstream.
pub fn parse_stream(stream: Option<&str>) -> Result<Direction, ApiError> {
    match stream.map(str::to_ascii_lowercase).as_deref() {
        None | Some("") | Some("downstream") => Ok(Direction::Downstream),
        Some("upstream") => Ok(Direction::Upstream),
        Some(_) => Err(ApiError::invalid_stream()),
    }
}

/// Checks a toxicity: a finite number in 0..=1.
pub fn check_toxicity(t: f64) -> Result<f64, ApiError> {
    if t.is_finite() && (0.0..=1.0).contains(&t) {
        Ok(t)
    } else {
        Err(ApiError::bad_body(format!(
            "toxicity must be a number from 0 to 1, got {t}"
        )))
    }
}

/// Merges `given` attributes over `base` (the toxic's current ones, or the type's defaults when
/// `base` is `None`) and checks them against the type's attribute table when it has one.
pub fn merge_attributes(
    type_: &str,
    base: Option<&Map<String, Value>>,
    given: Option<&Value>,
) -> Result<Map<String, Value>, ApiError> {
    let given = match given {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(other) => {
            return Err(ApiError::bad_body(format!(
                "attributes must be a JSON object, got {other}"
            )));
        }
    };
    let known = toxiproxy_attributes(type_);
    let mut out = match (base, known) {
        (Some(b), _) => b.clone(),
        (None, Some(names)) => names
            .iter()
            .map(|n| ((*n).to_owned(), Value::from(0)))
            .collect(),
        (None, None) => Map::new(),
    };
    for (k, v) in given.into_iter().flatten() {
        if let Some(names) = known {
            if !names.contains(&k.as_str()) {
                return Err(ApiError::bad_body(format!(
                    "unknown attribute '{k}' for toxic type '{type_}'; known: {}",
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                )));
            }
            out.insert(k.clone(), Value::from(integer(type_, k, v)?));
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    Ok(out)
}

/// An integer attribute value; integral floats (`100.0`) are accepted.
fn integer(type_: &str, key: &str, v: &Value) -> Result<i64, ApiError> {
    if let Some(i) = v.as_i64() {
        return Ok(i);
    }
    if let Some(f) = v.as_f64()
        && f.fract() == 0.0
        && f.abs() < 9.0e15
    {
        return Ok(f as i64);
    }
    Err(ApiError::bad_body(format!(
        "attribute '{key}' of toxic type '{type_}' must be an integer, got {v}"
    )))
}

/// Checks a `host:port` address; `what` names the field in the error.
pub fn check_address(what: &str, addr: &str) -> Result<(), ApiError> {
    let bad = |why: &str| ApiError::bad_body(format!("invalid {what} address '{addr}': {why}"));
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(bad("expected host:port"));
    };
    if host.is_empty() {
        return Err(bad("missing host (use 127.0.0.1:PORT)"));
    }
    if port.parse::<u16>().is_err() {
        return Err(bad("port must be a number from 0 to 65535"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toxiproxy_types_get_all_attributes_with_zero_defaults() {
        let m = merge_attributes("latency", None, Some(&serde_json::json!({"latency": 100})))
            .unwrap_or_default();
        assert_eq!(
            Value::Object(m),
            serde_json::json!({"latency": 100, "jitter": 0})
        );
    }

    #[test]
    fn unknown_attribute_names_the_known_ones() {
        let e = merge_attributes("latency", None, Some(&serde_json::json!({"latncy": 1})))
            .err()
            .map(|e| e.message);
        assert_eq!(
            e.as_deref(),
            Some(
                "bad request body: unknown attribute 'latncy' for toxic type 'latency'; known: latency, jitter"
            )
        );
    }

    #[test]
    fn fractional_attribute_is_refused_and_integral_float_accepted() {
        assert!(
            merge_attributes("latency", None, Some(&serde_json::json!({"latency": 1.5}))).is_err()
        );
        let m = merge_attributes("latency", None, Some(&serde_json::json!({"latency": 2.0})))
            .unwrap_or_default();
        assert_eq!(m.get("latency"), Some(&Value::from(2)));
    }

    #[test]
    fn stream_parsing_matches_toxiproxy() {
        assert_eq!(parse_stream(None).ok(), Some(Direction::Downstream));
        assert_eq!(
            parse_stream(Some("UpStream")).ok(),
            Some(Direction::Upstream)
        );
        assert!(parse_stream(Some("walrustream")).is_err());
    }

    #[test]
    fn addresses_need_host_and_numeric_port() {
        assert!(check_address("listen", "127.0.0.1:0").is_ok());
        assert!(check_address("upstream", "localhost:8080").is_ok());
        assert!(check_address("upstream", ":8080").is_err());
        assert!(check_address("upstream", "localhost").is_err());
        assert!(check_address("upstream", "localhost:99999").is_err());
    }
}
