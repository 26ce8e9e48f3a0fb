//! `sse_cut`: one cut per SSE response stream at a chosen SSE position (or payload byte), then
//! RST, FIN or a clean end of the chunked body.
//!
//! Observable effect (downstream): when a new SSE response stream begins (a new response on the
//! connection), the fault decides from the connection RNG, in this order: whether it fires on
//! this stream (`probability`, one `f64` draw), the target class (by `at` weights, one `f64`
//! draw; none for `any-byte`), a payload offset `U` uniform in `range` (both ends included;
//! default `[0, 0]`), and an event index `E` uniform in `events` (default: no limit). It then
//! cuts at the FIRST cut point of that stream whose class is the target class (any payload cut
//! point for `any-byte`, chunk framing excluded), whose payload offset is at least `U`, and whose
//! event index is in `E..=M`. The client receives exactly the bytes before that point, then the
//! `action`. A stream that ends before such a point is not cut; the next stream on the
//! connection decides afresh.
//!
//! Position and leg are two dimensions. A class names a position on every leg of a logical
//! stream: `at = "mid-value"` cuts the first leg (the response to the POST or first GET) and
//! every resume leg (the response to a request carrying `Last-Event-ID`) alike, judged by the
//! structural class of the cut point ([`crate::wire::PositionRun::base`]). `leg` restricts the
//! legs: `"first"`, `"resume"` or `"any"` (default). `at = "during-replay"` keeps its meaning: a
//! cut point inside an event (any class that tears it) of a resume leg, i.e. the tearing classes
//! with `leg = "resume"`; the observer records every tearing cut on a resume leg with class
//! `during-replay`, whichever class aimed it.
//!
//! LLM positions ([`LlmPos`]: `before-first-delta`, `mid-delta`, `mid-tool-args`,
//! `before-completion`, `after-completion`) are targets like classes, on streams of a known LLM
//! API only (see `wire::llm` for where each lies); chunk framing is never one of their cut
//! points. `mid-delta` and `mid-tool-args` aim anywhere inside the answer or the arguments:
//! after the other draws, an occurrence index `D` uniform in `nth` (both ends included; default
//! `[0, 7]` for deltas, `[0, 3]` for argument pieces), and the cut falls in the stream's `D`-th event (0 = first) holding that
//! position — a text delta, an argument piece (or the gap after one while the arguments are
//! unfinished); a stream with fewer such events is not cut. A table of weights names either SSE classes or LLM positions, not both (two faults
//! combine them). With `stall_ms = S`, the bytes before the cut leave on time and
//! the action follows S ms after the chunk arrived (a zero-length slice at that time, which the
//! pump waits for before cutting). With `outage_ms = D` the cut opens a D ms proxy outage.
//! Streams are matched by their request: `method` exactly, `path` exactly or, when it ends in
//! `*`, by prefix.
//!
//! Profile keys: `at` (required: a table of class weights such as `{ mid-value = 3,
//! after-id = 1 }`, a single class name, or `"any-byte"`), `leg` (`any` default, `first`,
//! `resume`), `range = [a, b]` (payload offsets; required for `any-byte`), `events = [n, m]`,
//! `nth = [a, b]` (`mid-delta` / `mid-tool-args` only),
//! `method`, `path`, `action` (`reset` default, `fin`, `clean-end`), `stall_ms`, `outage_ms`,
//! `probability` (per stream, default 1), `direction` (only `downstream`).
//!
//! On HTTP/2 two more keys apply, `scope` and `h2_error`: see [`super::sse_cut_h2`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::RngExt;
use tokio::time::Instant;

use super::h2::{BodyCut, CutScope};
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{Built, KindInfo, Scope, params_as};
pub use super::sse_cut_h2::H2Keys;
use super::{Chunk, ConnRng, Cut, Fault, FaultFactory, Plan, Slice};
use crate::vocab::CutAction;
use crate::vocab::{Direction, StreamInfo};
use crate::wire::h2::ErrorCode;
use crate::wire::position::UnknownClass;
use crate::wire::{ChunkPositions, LlmPos, SseClass};

/// The fault kind's name.
pub const NAME: &str = "sse_cut";

/// Why an `sse_cut` definition is invalid.
#[derive(Debug, thiserror::Error)]
pub enum SseCutError {
    /// A class name in `at` is not a known class.
    #[error("sse_cut 'at': {0}")]
    UnknownClass(#[source] UnknownClass),
    /// No class weight is positive (or one is negative or not finite).
    #[error("sse_cut 'at' needs at least one positive weight, and no negative or non-finite one")]
    BadWeights,
    /// `any-byte` without `range`.
    #[error("sse_cut at = \"any-byte\" needs 'range = [a, b]' (payload byte offsets)")]
    MissingRange,
    /// A range whose start exceeds its end.
    #[error("sse_cut '{key}' must be [a, b] with a <= b, got [{a}, {b}]")]
    BadRange { key: &'static str, a: u64, b: u64 },
    /// A table of weights mixes SSE classes and LLM positions.
    #[error(
        "sse_cut 'at' mixes SSE classes and LLM positions in one table; use one sse_cut for each"
    )]
    Mixed,
    /// Probability outside 0..=1.
    #[error("sse_cut 'probability' must be between 0 and 1, got {0}")]
    BadProbability(f64),
    /// `direction = "upstream"`: there are no SSE positions upstream.
    #[error("sse_cut acts on the downstream direction only (SSE responses)")]
    Upstream,
}

/// Which legs of a logical stream a cut may hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Leg {
    /// Every leg.
    #[default]
    Any,
    /// Only first legs: responses to requests without `Last-Event-ID`.
    First,
    /// Only resume legs: responses to requests carrying `Last-Event-ID`.
    Resume,
}

impl Leg {
    /// The names `leg` accepts.
    pub const NAMES: [&'static str; 3] = ["any", "first", "resume"];

    /// True if and only if a stream (`resume` or not) is one of these legs.
    pub fn admits(self, resume: bool) -> bool {
        match self {
            Leg::Any => true,
            Leg::First => !resume,
            Leg::Resume => resume,
        }
    }
}

/// Where the cut aims.
#[derive(Debug, Clone, PartialEq)]
pub enum CutTarget {
    /// Uniform over payload byte offsets in `range`.
    AnyByte,
    /// One class per stream, chosen with these weights (positive, sorted by class).
    Classes(Vec<(SseClass, f64)>),
    /// One LLM position per stream, chosen with these weights (positive, sorted).
    Llm(Vec<(LlmPos, f64)>),
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum RawTarget {
    Name(String),
    Weights(BTreeMap<String, f64>),
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    at: RawTarget,
    leg: Option<Leg>,
    range: Option<[u64; 2]>,
    events: Option<[u64; 2]>,
    nth: Option<[u64; 2]>,
    method: Option<String>,
    path: Option<String>,
    action: Option<CutAction>,
    stall_ms: Option<u64>,
    outage_ms: Option<u64>,
    probability: Option<f64>,
    direction: Option<Direction>,
}

/// The validated configuration of `sse_cut` (see the module doc for the keys).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(try_from = "RawConfig")]
pub struct SseCutConfig {
    /// Where the cut aims.
    pub at: CutTarget,
    /// Which legs it may hit.
    pub leg: Leg,
    /// Payload offsets the cut is drawn from (inclusive).
    pub range: (u64, u64),
    /// Event indexes the cut may fall in (inclusive), if limited.
    pub events: Option<(u64, u64)>,
    /// `mid-delta` / `mid-tool-args`: which of the stream's events at that position is cut
    /// (0 = the first; inclusive range the index is drawn from); `None`: the position's
    /// default ([`default_nth`]).
    pub nth: Option<(u64, u64)>,
    /// Only streams whose request has this method.
    pub method: Option<String>,
    /// Only streams whose request path is this (or has this prefix, when it ends in `*`).
    pub path: Option<String>,
    /// How the connection ends.
    pub action: CutAction,
    /// Pause before the action.
    pub stall: Option<Duration>,
    /// Proxy outage opened by the cut.
    pub outage: Option<Duration>,
    /// Chance per stream that the fault fires.
    pub probability: f64,
}

impl TryFrom<RawConfig> for SseCutConfig {
    type Error = SseCutError;

    fn try_from(raw: RawConfig) -> Result<Self, SseCutError> {
        if raw.direction == Some(Direction::Upstream) {
            return Err(SseCutError::Upstream);
        }
        let at = match raw.at {
            RawTarget::Name(n) if n == "any-byte" => CutTarget::AnyByte,
            RawTarget::Name(n) => match n.parse::<LlmPos>() {
                Ok(p) => CutTarget::Llm(vec![(p, 1.0)]),
                Err(()) => {
                    CutTarget::Classes(vec![(n.parse().map_err(SseCutError::UnknownClass)?, 1.0)])
                }
            },
            RawTarget::Weights(w) => {
                let (mut classes, mut llm) = (Vec::new(), Vec::new());
                for (name, weight) in w {
                    if !weight.is_finite() || weight < 0.0 {
                        return Err(SseCutError::BadWeights);
                    }
                    match name.parse::<LlmPos>() {
                        Ok(p) => llm.push((p, weight)),
                        Err(()) => {
                            let class: SseClass =
                                name.parse().map_err(SseCutError::UnknownClass)?;
                            classes.push((class, weight));
                        }
                    }
                }
                if !classes.is_empty() && !llm.is_empty() {
                    return Err(SseCutError::Mixed);
                }
                classes.retain(|c| c.1 > 0.0);
                llm.retain(|c| c.1 > 0.0);
                if !llm.is_empty() {
                    llm.sort_by_key(|c| c.0);
                    CutTarget::Llm(llm)
                } else if !classes.is_empty() {
                    classes.sort_by_key(|c| c.0);
                    CutTarget::Classes(classes)
                } else {
                    return Err(SseCutError::BadWeights);
                }
            }
        };
        let range = match (raw.range, &at) {
            (None, CutTarget::AnyByte) => return Err(SseCutError::MissingRange),
            (None, _) => (0, 0),
            (Some([a, b]), _) if a > b => return Err(SseCutError::BadRange { key: "range", a, b }),
            (Some([a, b]), _) => (a, b),
        };
        let events = match raw.events {
            Some([a, b]) if a > b => {
                return Err(SseCutError::BadRange {
                    key: "events",
                    a,
                    b,
                });
            }
            e => e.map(|[a, b]| (a, b)),
        };
        let nth = match raw.nth {
            Some([a, b]) if a > b => return Err(SseCutError::BadRange { key: "nth", a, b }),
            n => n.map(|[a, b]| (a, b)),
        };
        let probability = raw.probability.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&probability) {
            return Err(SseCutError::BadProbability(probability));
        }
        Ok(SseCutConfig {
            at,
            leg: raw.leg.unwrap_or_default(),
            range,
            events,
            nth,
            method: raw.method,
            path: raw.path,
            action: raw.action.unwrap_or(CutAction::Reset),
            stall: raw.stall_ms.map(Duration::from_millis),
            outage: raw.outage_ms.map(Duration::from_millis),
            probability,
        })
    }
}

/// The occurrences a position's cut is drawn from by default: the first eight text deltas,
/// the first four argument pieces (a short call's arguments come in a few), else the first.
pub fn default_nth(at: LlmPos) -> (u64, u64) {
    match at {
        LlmPos::MidDelta => (0, 7),
        LlmPos::MidToolArgs => (0, 3),
        _ => (0, 0),
    }
}

impl SseCutConfig {
    fn matches(&self, s: &StreamInfo) -> bool {
        let method = self.method.as_ref().is_none_or(|m| *m == s.method);
        let path = self
            .path
            .as_ref()
            .is_none_or(|p| match p.strip_suffix('*') {
                Some(prefix) => s.path.starts_with(prefix),
                None => *p == s.path,
            });
        method && path && self.leg.admits(s.resume)
    }
}

/// Checks the names of an `at` value (a name or a table of weights); the error names the bad
/// one and lists every name `at` accepts.
pub fn check_target(at: &toml::Value) -> Result<(), String> {
    let bad = |given: &str| {
        let known: Vec<&str> = SseClass::ALL.iter().map(|c| c.as_str()).collect();
        let llm: Vec<&str> = LlmPos::ALL.iter().map(|c| c.as_str()).collect();
        format!(
            "sse_cut 'at': unknown position '{given}'; known: {}; LLM streams: {}; or \"any-byte\" alone",
            known.join(", "),
            llm.join(", ")
        )
    };
    let known = |n: &str| n.parse::<SseClass>().is_ok() || n.parse::<LlmPos>().is_ok();
    match at {
        toml::Value::String(n) if n == "any-byte" => Ok(()),
        toml::Value::String(n) if known(n) => Ok(()),
        toml::Value::String(n) => Err(bad(n)),
        toml::Value::Table(t) => t
            .keys()
            .try_for_each(|n| if known(n) { Ok(()) } else { Err(bad(n)) }),
        _ => {
            Err("sse_cut 'at' must be a position name, a table of weights, or \"any-byte\"".into())
        }
    }
}

/// The `sse_cut` factory for `cfg`, with the HTTP/2 defaults (stream scope, `CANCEL`).
pub fn factory(cfg: SseCutConfig) -> Arc<dyn FaultFactory> {
    factory_h2(cfg, H2Keys::default())
}

/// The `sse_cut` factory for `cfg` with its HTTP/2 keys.
pub fn factory_h2(cfg: SseCutConfig, h2: H2Keys) -> Arc<dyn FaultFactory> {
    Arc::new(SseCutFactory(Arc::new(cfg), h2))
}

struct SseCutFactory(Arc<SseCutConfig>, H2Keys);

impl FaultFactory for SseCutFactory {
    fn kind(&self) -> &'static str {
        NAME
    }

    fn direction(&self) -> Direction {
        Direction::Downstream
    }

    fn instantiate(&self, _rng: &mut ConnRng, _now: Instant) -> Option<Box<dyn Fault>> {
        Some(Box::new(SseCut {
            cfg: self.0.clone(),
            stream: None,
            aim: None,
        }))
    }

    fn fingerprint(&self) -> String {
        format!("{NAME}{:?}{:?}", self.0, self.1)
    }

    fn h2_body_cut(&self) -> Option<BodyCut> {
        // HTTP/2 has no orderly end of one stream but END_STREAM: `fin` ends the connection.
        let scope = if self.0.action == CutAction::Fin {
            CutScope::Connection
        } else {
            self.1.scope
        };
        Some(BodyCut {
            scope,
            client_code: self.1.h2_error.unwrap_or(ErrorCode::CANCEL),
        })
    }
}

/// The position one stream aims at.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    /// Any payload byte.
    Byte,
    /// An SSE class.
    Class(SseClass),
    /// An LLM position.
    Llm(LlmPos),
}

/// What one stream aims at.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Aim {
    class: Target,
    min_payload: u64,
    events: (u64, u64),
    /// Events at the target position to let pass before the one cut (`nth`).
    nth: u64,
    /// Events at the target position met so far, and the index of the last one.
    met: u64,
    last_event: Option<u64>,
}

/// One connection's `sse_cut`.
pub struct SseCut {
    cfg: Arc<SseCutConfig>,
    /// Sequence number of the current stream.
    stream: Option<u64>,
    /// The current stream's target, until it is cut.
    aim: Option<Aim>,
}

impl SseCut {
    /// The decisions for a new stream, in the documented draw order.
    fn begin(&mut self, s: &StreamInfo, rng: &mut ConnRng) {
        self.stream = Some(s.seq);
        let cfg = &*self.cfg;
        let fire = rng.random::<f64>() < cfg.probability;
        let class = match &cfg.at {
            CutTarget::AnyByte => Some(Target::Byte),
            CutTarget::Classes(w) => pick(w, rng.random::<f64>()).map(Target::Class),
            CutTarget::Llm(w) => pick(w, rng.random::<f64>()).map(Target::Llm),
        };
        let min_payload = rng.random_range(cfg.range.0..=cfg.range.1);
        let events = match cfg.events {
            Some((n, m)) => (rng.random_range(n..=m), m),
            None => (0, u64::MAX),
        };
        let nth = match class {
            Some(Target::Llm(p @ (LlmPos::MidDelta | LlmPos::MidToolArgs))) => {
                let (a, b) = cfg.nth.unwrap_or_else(|| default_nth(p));
                rng.random_range(a..=b)
            }
            _ => 0,
        };
        self.aim = class.filter(|_| fire && cfg.matches(s)).map(|class| Aim {
            class,
            min_payload,
            events,
            nth,
            met: 0,
            last_event: None,
        });
    }

    /// The first cut point of `pos` the current aim accepts (starting new streams as met).
    fn find(&mut self, pos: &ChunkPositions, rng: &mut ConnRng) -> Option<usize> {
        for run in &pos.runs {
            if let Some(s) = pos.stream_at(run.start)
                && self.stream != Some(s.seq)
            {
                self.begin(s, rng);
            }
            let Some(aim) = self.aim.as_mut() else {
                continue;
            };
            // A class is a position on every leg (the structural class); `during-replay` names
            // the tearing positions of resume legs.
            let class_ok = match aim.class {
                Target::Class(SseClass::DuringReplay) => run.class == SseClass::DuringReplay,
                Target::Class(c) => run.base == c,
                Target::Llm(p) => run.llm == Some(p) && run.class != SseClass::ChunkFraming,
                Target::Byte => run.class != SseClass::ChunkFraming,
            };
            if !class_ok || run.event_index < aim.events.0 || run.event_index > aim.events.1 {
                continue;
            }
            let framing = run.class == SseClass::ChunkFraming;
            let last_payload = if framing {
                run.payload_offset
            } else {
                run.payload_offset + (run.end - run.start - 1) as u64
            };
            if last_payload < aim.min_payload {
                continue;
            }
            if aim.last_event != Some(run.event_index) {
                aim.last_event = Some(run.event_index);
                aim.met += 1;
            }
            if aim.met <= aim.nth {
                continue;
            }
            let skip = aim.min_payload.saturating_sub(run.payload_offset);
            let k = if framing {
                run.start
            } else {
                run.start + skip as usize
            };
            self.aim = None;
            return Some(k);
        }
        None
    }
}

/// The target whose cumulative weight first exceeds `u` × total (`None` without weights).
fn pick<T: Copy>(weights: &[(T, f64)], u: f64) -> Option<T> {
    let total: f64 = weights.iter().map(|w| w.1).sum();
    let mut x = u * total;
    for &(c, w) in weights {
        if x < w {
            return Some(c);
        }
        x -= w;
    }
    weights.last().map(|w| w.0)
}

impl Fault for SseCut {
    fn kind(&self) -> &'static str {
        NAME
    }

    /// The current stream and its decision: an edited `sse_cut` applies from the next stream,
    /// so one stream is never aimed at twice (nor cut twice).
    fn hand_over(&mut self) -> Option<Box<dyn std::any::Any + Send>> {
        Some(Box::new((self.stream, self.aim)))
    }

    fn take_over(&mut self, state: Box<dyn std::any::Any + Send>) {
        if let Ok(s) = state.downcast::<(Option<u64>, Option<Aim>)>() {
            (self.stream, self.aim) = *s;
        }
    }

    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, rng: &mut ConnRng) {
        let Some(pos) = chunk.positions else { return };
        let Some(k) = self.find(pos, rng) else { return };
        plan.cut_at(Cut {
            at: k,
            action: self.cfg.action,
            outage: self.cfg.outage,
            by: NAME,
        });
        if let Some(stall) = self.cfg.stall
            && plan.cut().is_some_and(|c| c.at == k)
        {
            let last = plan.slices().last().map(|s| s.at);
            let until = last.map_or(chunk.arrived + stall, |t| t.max(chunk.arrived + stall));
            plan.slices_mut().push(Slice {
                start: k,
                end: k,
                at: until,
            });
        }
    }
}

/// `sse_cut` in the registry (no Toxiproxy counterpart).
pub const KIND: KindInfo = KindInfo {
    name: NAME,
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
        (
            "nth",
            "[a, b]: mid-delta / mid-tool-args: which delta or argument piece (0 = first; default [0, 7] / [0, 3])",
        ),
        ("method", "only streams whose request has this method"),
        (
            "path",
            "only streams whose request path is this (prefix when it ends in *)",
        ),
        ("action", "\"reset\" (default), \"fin\" or \"clean-end\""),
        ("stall_ms", "pause before the action"),
        ("outage_ms", "proxy outage opened by the cut"),
        (
            "scope",
            "HTTP/2: \"stream\" (default: the stream is reset or ended, the connection lives) or \"connection\"",
        ),
        (
            "h2_error",
            "HTTP/2: error code of the RST_STREAM sent to the client (default \"cancel\")",
        ),
    ],
    read: read_def,
    toxic: None,
};

/// A profile definition of `sse_cut`: names are checked first so their errors point at the
/// value and list what is allowed; the fault then validates its keys itself (direction and
/// probability included).
fn read_def(r: &mut KeyReader<'_>) -> Result<Built, FaultConfigError> {
    r.choice("leg", &Leg::NAMES)?;
    if let Some(p) = r.raw("at") {
        check_target(&p.value).map_err(|m| FaultConfigError::at_value(p, m))?;
    }
    let h2 = H2Keys::read(r)?;
    let cfg = params_as::<SseCutConfig>(&super::sse_cut_h2::without_h2_keys(r.def()))?;
    Ok(Built::Conn(factory_h2(cfg, h2)))
}

#[cfg(test)]
#[path = "sse_cut_tests.rs"]
mod tests;
