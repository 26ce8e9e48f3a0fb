//! Toxiproxy compatibility: a toxic's JSON `attributes` as a definition the kinds' Toxiproxy
//! readers take (each kind declares its Toxiproxy type in its own file, see [`super::kind`]).
//!
//! Exists so the control API accepts what Toxiproxy clients send, with Toxiproxy's attribute
//! names and units (ms; `rate` in KB/s, 1 KB = 1,000 bytes; slicer `delay` in µs), and with the
//! same validation as profiles. Differences, by design: `toxicity` is a per-connection
//! probability drawn from the seeded connection RNG; `reset_peer` with `timeout` > 0 resets that
//! long after the connection opened (Toxiproxy: after the first chunk), and with 0 on the first
//! byte; unknown attributes are rejected, naming the known ones. Missing attributes take
//! Toxiproxy's zero defaults.

use super::keys::{FaultConfigError, FaultDef};

/// Toxiproxy attributes as a definition without spans.
pub fn json_def(attributes: &serde_json::Value) -> Result<FaultDef, FaultConfigError> {
    let map = match attributes {
        serde_json::Value::Null => return Ok(FaultDef::default()),
        serde_json::Value::Object(m) => m,
        other => {
            return Err(FaultConfigError {
                key: Some("attributes".into()),
                span: None,
                message: format!("attributes must be an object, got {other}"),
            });
        }
    };
    let mut pairs = Vec::with_capacity(map.len());
    for (k, v) in map {
        let value = match v {
            serde_json::Value::Bool(b) => toml::Value::Boolean(*b),
            serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => toml::Value::Integer(i),
                (None, Some(f)) => toml::Value::Float(f),
                (None, None) => toml::Value::String(n.to_string()),
            },
            serde_json::Value::String(s) => toml::Value::String(s.clone()),
            other => {
                return Err(FaultConfigError {
                    key: Some(k.clone()),
                    span: None,
                    message: format!("attribute '{k}' must be a number, got {other}"),
                });
            }
        };
        pairs.push((k.clone(), value));
    }
    Ok(FaultDef::from_pairs(pairs))
}
