//! Toxiproxy compatibility: a toxic's JSON `type` and `attributes` → a fault factory.
//!
//! Exists so the control API accepts what Toxiproxy clients send, with Toxiproxy's attribute
//! names and units (ms; `rate` in KB/s, 1 KB = 1,000 bytes; slicer `delay` in µs), and with the
//! same validation as profiles. Differences, by design: `toxicity` is a per-connection
//! probability drawn from the seeded connection RNG; `reset_peer` with `timeout` > 0 resets that
//! long after the connection opened (Toxiproxy: after the first chunk), and with 0 on the first
//! byte; unknown attributes are rejected, naming the known ones. Missing attributes take
//! Toxiproxy's zero defaults.

use std::sync::Arc;

use super::FaultFactory;
use super::bandwidth::BandwidthConfig;
use super::common::{Common, Factory};
use super::keys::{FaultConfigError, FaultDef, KeyReader};
use super::latency::LatencyConfig;
use super::limit_data::LimitDataConfig;
use super::reset::{ResetConfig, ResetTrigger};
use super::slicer::SlicerConfig;
use super::slow_close::SlowCloseConfig;
use super::timeout::TimeoutConfig;
use crate::vocab::Direction;

/// Toxiproxy toxic types, in the order messages list them.
pub const TOXIPROXY_TYPES: &[(&str, &[&str])] = &[
    ("latency", &["latency", "jitter"]),
    ("bandwidth", &["rate"]),
    ("slow_close", &["delay"]),
    ("timeout", &["timeout"]),
    ("reset_peer", &["timeout"]),
    ("slicer", &["average_size", "size_variation", "delay"]),
    ("limit_data", &["bytes"]),
];

/// Builds a factory from a Toxiproxy toxic: its `type`, `attributes` (Toxiproxy's names and
/// units: ms, KB/s for `rate`, µs for slicer `delay`), `stream` and `toxicity`. Missing
/// attributes take Toxiproxy's zero defaults; `reset_peer` with `timeout` 0 resets on the first
/// byte, otherwise `timeout` ms after the connection opened.
pub fn from_toxiproxy(
    type_: &str,
    attributes: &serde_json::Value,
    stream: Direction,
    toxicity: f64,
) -> Result<Arc<dyn FaultFactory>, FaultConfigError> {
    let common = Common::checked(stream, toxicity)?;
    let def = json_def(attributes)?;
    let mut r = KeyReader::new(&def, type_);
    if let Some((_, attrs)) = TOXIPROXY_TYPES.iter().find(|(t, _)| *t == type_) {
        r.declare(attrs.iter())?;
    }
    let ms = |r: &mut KeyReader<'_>, key| r.millis(key).map(Option::unwrap_or_default);
    let factory = match type_ {
        "latency" => {
            let latency = ms(&mut r, "latency")?;
            let jitter = ms(&mut r, "jitter")?;
            Factory::shared(common, LatencyConfig { latency, jitter })
        }
        "bandwidth" => {
            let kbps = r.u64("rate", "KB/s")?.unwrap_or(0);
            if kbps == 0 {
                return Err(attr_error(&mut r, "rate", "rate must be > 0 KB/s"));
            }
            Factory::shared(
                common,
                BandwidthConfig {
                    rate: kbps.saturating_mul(1000),
                },
            )
        }
        "slow_close" => Factory::shared(
            common,
            SlowCloseConfig {
                delay: ms(&mut r, "delay")?,
            },
        ),
        "timeout" => Factory::shared(
            common,
            TimeoutConfig {
                timeout: ms(&mut r, "timeout")?,
            },
        ),
        "reset_peer" => {
            let t = ms(&mut r, "timeout")?;
            let trigger = if t.is_zero() {
                ResetTrigger::Bytes(0)
            } else {
                ResetTrigger::After(t)
            };
            Factory::shared(
                common,
                ResetConfig {
                    trigger,
                    outage: None,
                },
            )
        }
        "slicer" => {
            let avg = r.u64("average_size", "bytes")?.unwrap_or(0);
            let var = r.u64("size_variation", "bytes")?.unwrap_or(0);
            let delay = r.micros("delay")?.unwrap_or_default();
            let cfg =
                SlicerConfig::checked(&mut r, "average_size", "size_variation", avg, var, delay)?;
            Factory::shared(common, cfg)
        }
        "limit_data" => {
            let bytes = r.u64("bytes", "bytes")?.unwrap_or(0);
            Factory::shared(common, LimitDataConfig { bytes })
        }
        other => {
            return Err(FaultConfigError {
                key: Some("type".into()),
                span: None,
                message: format!(
                    "unknown toxic type '{other}'; known: {}",
                    TOXIPROXY_TYPES
                        .iter()
                        .map(|(t, _)| *t)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    };
    r.finish()?;
    Ok(factory)
}

fn attr_error(r: &mut KeyReader<'_>, key: &'static str, message: &str) -> FaultConfigError {
    match r.raw(key) {
        Some(p) => FaultConfigError::at_value(p, message),
        None => FaultConfigError::at_def(r.def(), Some(key), message),
    }
}

/// Toxiproxy attributes as a definition without spans.
fn json_def(attributes: &serde_json::Value) -> Result<FaultDef, FaultConfigError> {
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
