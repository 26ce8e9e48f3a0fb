//! The registry of fault kinds: what each one does, its keys, and how a definition becomes a
//! factory (per connection) or a schedule (per proxy).
//!
//! One path validates every definition: profiles and the Toxiproxy JSON API both go through the
//! kinds' `read` functions, so a key means the same everywhere and every error names the key and
//! what is allowed. Invariant: [`KINDS`] lists exactly the kinds [`build`] accepts, in the order
//! error messages list them.
//!
//! `down` is not a fault kind: a proxy is down while it is disabled (`enabled = false` on a
//! `[[proxy]]` in a profile, or toggled through the control API); its listener is closed and its
//! connections are closed until it is enabled again.

use std::sync::Arc;

use super::FaultFactory;
use super::bandwidth::BandwidthConfig;
use super::buffer::BufferConfig;
use super::common::{Common, Factory};
use super::idle::IdleConfig;
use super::keys::{FaultConfigError, FaultDef, KeyReader};
use super::latency::LatencyConfig;
use super::limit_data::LimitDataConfig;
use super::outage::OutageSchedule;
use super::reset::ResetConfig;
use super::slicer::SlicerConfig;
use super::slow_close::SlowCloseConfig;
use super::stall::StallConfig;
use super::timeout::TimeoutConfig;

pub use super::toxiproxy::{TOXIPROXY_TYPES, from_toxiproxy};

/// Whether a kind acts on one connection's direction or on the whole proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One direction of one connection; has `direction` and `probability`.
    Connection,
    /// The whole proxy (a schedule the runtime drives).
    Proxy,
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
}

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

/// Every kind, in the order messages list them.
pub const KINDS: &[KindInfo] = &[
    KindInfo {
        name: "latency",
        scope: Scope::Connection,
        summary: "each chunk leaves latency ± jitter later; order kept, throughput not capped",
        keys: &[
            ("latency_ms", "delay (required)"),
            ("jitter_ms", "± uniform jitter (default 0)"),
        ],
    },
    KindInfo {
        name: "bandwidth",
        scope: Scope::Connection,
        summary: "token bucket: at most `rate` bytes per second, smooth",
        keys: &[("rate", "bytes per second, > 0 (required)")],
    },
    KindInfo {
        name: "slicer",
        scope: Scope::Connection,
        summary: "chunks cut into slices of average ± variation bytes, delay between them",
        keys: &[
            ("average_size", "bytes, > 0 (required)"),
            ("size_variation", "bytes, < average_size (default 0)"),
            ("delay_us", "microseconds between slices (default 0)"),
        ],
    },
    KindInfo {
        name: "slow_close",
        scope: Scope::Connection,
        summary: "the EOF is passed on delay_ms late",
        keys: &[("delay_ms", "hold of the EOF (required)")],
    },
    KindInfo {
        name: "timeout",
        scope: Scope::Connection,
        summary: "blackhole: drop every byte, FIN after timeout_ms (0 = never)",
        keys: &[("timeout_ms", "time to the close, 0 = never (required)")],
    },
    KindInfo {
        name: "reset",
        scope: Scope::Connection,
        summary: "RST after N bytes, at a random byte in a range, or after a time",
        keys: &[
            ("bytes", "reset after exactly this many bytes"),
            (
                "range",
                "[a, b]: reset at a byte drawn uniformly per connection",
            ),
            ("after_ms", "reset this long after the connection opened"),
            (
                "outage_ms",
                "proxy outage opened by the cut (with bytes or range)",
            ),
        ],
    },
    KindInfo {
        name: "limit_data",
        scope: Scope::Connection,
        summary: "orderly FIN after exactly N bytes",
        keys: &[("bytes", "bytes delivered before the FIN (required)")],
    },
    KindInfo {
        name: "stall",
        scope: Scope::Connection,
        summary: "nothing leaves for duration_ms from a byte or a time, then it resumes",
        keys: &[
            ("duration_ms", "length of the stall (required)"),
            ("at_byte", "stall before this byte offset"),
            ("after_ms", "stall this long after the connection opened"),
        ],
    },
    KindInfo {
        name: "outage",
        scope: Scope::Proxy,
        summary: "proxy-level window: open connections reset, new ones refused or held",
        keys: &[
            ("duration_ms", "window length, > 0 (required)"),
            (
                "start_ms",
                "first window, since the proxy started (default 0)",
            ),
            ("every_ms", "repeat period (default: once)"),
            (
                "count",
                "number of windows when repeating (default: forever)",
            ),
            ("mode", "\"refuse\" (default) or \"hold\""),
        ],
    },
    KindInfo {
        name: "sse_cut",
        scope: Scope::Connection,
        summary: "one cut per SSE stream at a chosen SSE position or byte, then reset/fin/clean-end",
        keys: &[
            (
                "at",
                "class, { class = weight, … }, or \"any-byte\" (required)",
            ),
            (
                "leg",
                "\"any\" (default), \"first\" or \"resume\": which legs of a stream are cut",
            ),
            ("range", "[a, b]: payload offsets the cut is drawn from"),
            ("events", "[n, m]: event indexes the cut may fall in"),
            ("method", "only streams whose request has this method"),
            (
                "path",
                "only streams whose request path is this (prefix when it ends in *)",
            ),
            ("action", "\"reset\" (default), \"fin\" or \"clean-end\""),
            ("stall_ms", "pause before the action"),
            ("outage_ms", "proxy outage opened by the cut"),
        ],
    },
    KindInfo {
        name: "idle",
        scope: Scope::Connection,
        summary: "a gateway's idle timeout: FIN (or RST) once nothing flowed for idle_ms",
        keys: &[
            (
                "idle_ms",
                "quiet time that ends the connection, > 0 (required)",
            ),
            ("action", "\"fin\" (default) or \"reset\""),
        ],
    },
    KindInfo {
        name: "buffer",
        scope: Scope::Connection,
        summary: "a buffering intermediary: bytes held and flushed together every flush_ms",
        keys: &[("flush_ms", "length of a buffering window, > 0 (required)")],
    },
];

/// The names of every kind, comma-separated.
pub fn known_kinds() -> String {
    KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
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
    if info.scope == Scope::Proxy {
        let schedule = OutageSchedule::read(&mut r)?;
        r.finish()?;
        return Ok(Built::Outage(schedule));
    }
    if info.name == "sse_cut" {
        let factory = sse_cut_slot(&mut r)?;
        r.finish()?;
        return Ok(Built::Conn(factory));
    }
    let common = Common::read(&mut r)?;
    let factory = match info.name {
        "latency" => Factory::shared(common, LatencyConfig::read(&mut r)?),
        "bandwidth" => Factory::shared(common, BandwidthConfig::read(&mut r)?),
        "slicer" => Factory::shared(common, SlicerConfig::read(&mut r)?),
        "slow_close" => Factory::shared(common, SlowCloseConfig::read(&mut r)?),
        "timeout" => Factory::shared(common, TimeoutConfig::read(&mut r)?),
        "reset" => Factory::shared(common, ResetConfig::read(&mut r)?),
        "limit_data" => Factory::shared(common, LimitDataConfig::read(&mut r)?),
        "idle" => Factory::shared(common, IdleConfig::read(&mut r)?),
        "buffer" => Factory::shared(common, BufferConfig::read(&mut r)?),
        _ => Factory::shared(common, StallConfig::read(&mut r)?),
    };
    r.finish()?;
    Ok(Built::Conn(factory))
}

/// The `sse_cut` kind: the SSE-position fault of [`crate::fault::sse_cut`].
fn sse_cut_slot(r: &mut KeyReader<'_>) -> Result<Arc<dyn FaultFactory>, FaultConfigError> {
    // Names are checked here first so their errors point at the value and list what is
    // allowed; the fault then validates its keys itself (direction and probability included).
    r.choice("leg", &crate::fault::sse_cut::Leg::NAMES)?;
    if let Some(p) = r.raw("at") {
        crate::fault::sse_cut::check_target(&p.value)
            .map_err(|m| FaultConfigError::at_value(p, m))?;
    }
    let cfg = params_as::<crate::fault::sse_cut::SseCutConfig>(r.def())?;
    Ok(crate::fault::sse_cut::factory(cfg))
}

/// Deserializes a definition's keys (all of them, common keys included) into a serde type;
/// errors carry the span of the whole definition.
pub fn params_as<T: serde::de::DeserializeOwned>(def: &FaultDef) -> Result<T, FaultConfigError> {
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
