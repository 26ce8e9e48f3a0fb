//! What one load run is asked to do: the target, how many sessions, when to stop, which tool,
//! the pacing and the client policy.
//!
//! Invariants: a [`Target`] always names an `http://` or `https://` authority with an explicit
//! or default port (80, 443) and an absolute path; an `https://` target carries its TLS client
//! configuration (system roots, plus `--cacert`); a [`LoadConfig`] built by [`LoadConfig::new`] has sane
//! defaults (closed loop, strict policy, 5 attempts, 30 s per call), so callers only override
//! what they need.

use std::fmt;
use std::time::Duration;

use thiserror::Error;

/// The MCP protocol revision the client offers in `initialize`.
pub const OFFERED_PROTOCOL_VERSION: &str = "2025-11-25";

/// The TLS client of an `https://` target (ALPN http/1.1; certificate checked for the host).
#[derive(Clone)]
pub struct TargetTls(pub std::sync::Arc<crate::tls::Upstream>);

impl TargetTls {
    /// Trusts the system roots and every file of `cacert`.
    pub fn new(cacert: &[std::path::PathBuf]) -> Result<Self, crate::tls::TlsError> {
        let opts = crate::tls::UpstreamOptions {
            ca: cacert.to_vec(),
            ..crate::tls::UpstreamOptions::default()
        };
        Ok(TargetTls(std::sync::Arc::new(crate::tls::Upstream::new(
            &opts,
        )?)))
    }
}

impl fmt::Debug for TargetTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TargetTls")
    }
}

impl PartialEq for TargetTls {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for TargetTls {}

/// An MCP endpoint: `http://host:port/path` or `https://host:port/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Host name or address, as given (used for connecting and for the `Host` header).
    pub host: String,
    /// TCP port (80 when the URL has none).
    pub port: u16,
    /// Absolute path of the MCP endpoint, e.g. `/mcp`.
    pub path: String,
    /// TLS client, for an `https://` target.
    pub tls: Option<TargetTls>,
    /// The HTTP/2 connection pool, when the target is spoken to over HTTP/2 (h2c by prior
    /// knowledge on `http://`, ALPN `h2` on `https://`); `None`: HTTP/1.1.
    pub h2: Option<super::h2::H2Pool>,
}

/// Why a target URL was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TargetError {
    /// Only `http://` and `https://` are spoken.
    #[error("target {0:?} is not an http:// or https:// URL")]
    Scheme(String),
    /// The TLS client could not be configured.
    #[error("TLS for target {0:?}: {1}")]
    Tls(String, String),
    /// The authority part is empty or has a bad port.
    #[error("target {0:?} has no valid host:port")]
    Authority(String),
}

impl Target {
    /// Parses `http[s]://host[:port][/path]`; the path defaults to `/mcp`. An `https://`
    /// target trusts the system roots (see [`Target::parse_with_ca`]).
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        Self::parse_with_ca(url, &[])
    }

    /// Parses like [`Target::parse`]; an `https://` target also trusts the CA certificates
    /// in `cacert` (PEM files). `cacert` with an `http://` URL is an error.
    pub fn parse_with_ca(url: &str, cacert: &[std::path::PathBuf]) -> Result<Target, TargetError> {
        let (rest, https) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(r), _) => (r, false),
            (_, Some(r)) => (r, true),
            _ => return Err(TargetError::Scheme(url.to_string())),
        };
        if !https && !cacert.is_empty() {
            return Err(TargetError::Tls(
                url.to_string(),
                "--cacert needs an https:// target".into(),
            ));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/mcp"),
        };
        let bad = || TargetError::Authority(url.to_string());
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                (h, p.parse::<u16>().map_err(|_| bad())?)
            }
            _ => (authority, if https { 443 } else { 80 }),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || port == 0 {
            return Err(bad());
        }
        let tls = if https {
            let t = TargetTls::new(cacert)
                .map_err(|e| TargetError::Tls(url.to_string(), e.to_string()))?;
            Some(t)
        } else {
            None
        };
        Ok(Target {
            host: host.to_string(),
            port,
            path: path.to_string(),
            tls,
            h2: None,
        })
    }

    /// This target over HTTP/2 through a pool of at most `connections` connections; an
    /// `https://` target's pool offers ALPN `h2` and trusts the system roots and `cacert`.
    pub fn with_http2(
        self,
        connections: usize,
        cacert: &[std::path::PathBuf],
    ) -> Result<Target, TargetError> {
        let pool = if self.tls.is_some() {
            super::h2::H2Pool::tls(connections, cacert)
                .map_err(|e| TargetError::Tls(self.to_string(), e.to_string()))?
        } else {
            super::h2::H2Pool::plain(connections)
        };
        Ok(Target {
            h2: Some(pool),
            ..self
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        write!(f, "{scheme}://{}:{}{}", self.host, self.port, self.path)
    }
}

/// How a client treats cursors, disconnects, stream ends and re-sends: the one policy enum of
/// `load`, `replay` and the reports (a run's phases, `--policy`, `--fail-on 'strict.…'`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Cursor = last dispatched id; a partial event at a disconnect is a torn-boundary
    /// detection; replays are verified; a call completes only with its verified result. A cut
    /// MCP 2026-07-28 call is re-sent only when its tool is declared idempotent.
    Strict,
    /// Cursor = last `id:` line seen; resumes with it and accepts whatever comes; a clean
    /// stream end counts as completion. Never re-sends.
    Naive,
    /// Strict, plus a retry layer that re-sends a cut MCP 2026-07-28 call whatever its tool's
    /// annotations say (a repeated side effect is then possible: the audit's `reexecuted`).
    Retry,
}

impl Policy {
    /// Every policy, in the order of `--policy` help.
    pub const ALL: [Policy; 3] = [Policy::Strict, Policy::Naive, Policy::Retry];

    /// `"strict"`, `"naive"` or `"retry"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Strict => "strict",
            Policy::Naive => "naive",
            Policy::Retry => "retry",
        }
    }

    /// True for the policies that verify what they get (strict and retry): resume from the
    /// last dispatched id, count torn events, never take a truncated stream as the answer, and
    /// mark every call with a fresh `Idempotency-Key` repeated on its re-sends.
    pub fn verifies(self) -> bool {
        self != Policy::Naive
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Policy {
    type Err = String;

    fn from_str(s: &str) -> Result<Policy, String> {
        Policy::ALL
            .into_iter()
            .find(|p| p.as_str() == s.trim())
            .ok_or_else(|| {
                format!("unknown policy {s:?}: use strict, naive, retry, a comma-separated list, or both")
            })
    }
}

/// The policies a run executes, in order (`--policy strict,naive`; `both` is strict then
/// naive). Never empty, no policy twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyList(pub Vec<Policy>);

impl std::str::FromStr for PolicyList {
    type Err = String;

    fn from_str(s: &str) -> Result<PolicyList, String> {
        let mut out: Vec<Policy> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let add: &[Policy] = match part {
                "both" => &[Policy::Strict, Policy::Naive],
                p => &[p.parse::<Policy>()?],
            };
            for p in add {
                if out.contains(p) {
                    return Err(format!("policy {p} is named twice in {s:?}"));
                }
                out.push(*p);
            }
        }
        if out.is_empty() {
            return Err("name at least one policy: strict, naive or retry".to_owned());
        }
        Ok(PolicyList(out))
    }
}

impl fmt::Display for PolicyList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|p| p.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

/// When a run stops issuing calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this many calls in total (over all sessions).
    Calls(u64),
    /// After this long; calls in flight at the end are finished.
    Duration(Duration),
}

/// One load run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The MCP endpoint.
    pub target: Target,
    /// Concurrent sessions (each runs its calls one after another).
    pub sessions: usize,
    /// When to stop.
    pub stop: Stop,
    /// Tool name for `tools/call`.
    pub tool: String,
    /// Tool arguments (a JSON object).
    pub args: serde_json::Value,
    /// Open-loop rate in calls/s over all sessions; `None` = closed loop.
    pub rate: Option<f64>,
    /// Client policy.
    pub policy: Policy,
    /// Connections (POSTs and resume GETs) one call may use before it fails.
    pub max_attempts: u32,
    /// Wall-clock budget of one call, from its intended start.
    pub call_timeout: Duration,
    /// Budget for TCP connect and for the response head.
    pub connect_timeout: Duration,
    /// Budget for the response head of a call's POST, from its send (`None`: the call's own
    /// deadline, which is how Node's `http2`, httpx and Go's default `Transport` wait). Behind
    /// a hop that holds response headers until the first event, a head that does not come on a
    /// live connection is the only sign: with a budget the client gives up on it (error
    /// `head-timeout`) and re-sends under the same `Idempotency-Key` while attempts remain,
    /// instead of hanging until the call's timeout.
    pub head_timeout: Option<Duration>,
    /// Reconnect delay when the server sent no `retry:`.
    pub backoff: Duration,
    /// Upper bound of any reconnect delay (a server's `retry:` included).
    pub max_backoff: Duration,
    /// At most this many disconnect stories are kept in the outcome.
    pub max_traces: usize,
    /// Show a progress bar on stderr (only if stderr is a terminal).
    pub progress: bool,
    /// Extra text the progress bar appends (e.g. the proxy's cuts so far), read at each tick.
    pub progress_note: Option<ProgressNote>,
    /// The share of the plan (`sessions`, `stop`, `rate`) this agent runs ([`Segment::WHOLE`]
    /// by default).
    pub segment: super::segment::Segment,
    /// Wall-clock time at which the load starts (shared by a plan's agents), if any; the
    /// target is probed before it.
    pub start_at: Option<std::time::SystemTime>,
    /// Which MCP era to speak (default: detect with `server/discover`, fall back to
    /// `initialize`).
    pub era: super::era::EraChoice,
    /// A bearer token sent on every request (`Authorization: Bearer <token>`), e.g. a lab
    /// audience token `aud=https://lab/tools/search`.
    pub token: Option<String>,
    /// Each call's arguments made distinct: `"item": <call index>` is added to `args` (the
    /// session's k-th call gets k), so no two calls of a session are identical. Off by default
    /// (every call identical, as apps repeat calls).
    pub distinct_args: bool,
    /// Seed 000: the token presented on a call's first resume GET after a cut — a refreshed
    /// token whose audience was narrowed (e.g. `aud=https://lab/tools/search` while the call is
    /// `fetch`). The strict client, seeing that resume end cleanly with its call pending,
    /// re-authorizes with `token` and resumes again from its cursor; the naive one takes the
    /// clean end as completion. `None`: every request carries `token`.
    pub resume_token: Option<String>,
    /// Client bug `stale-cursor`: after a resume is cut, resume again with the cursor that
    /// resume used (not the newer one it reached).
    pub stale_cursor: bool,
    /// Records what the client dispatched per leg (see [`crate::load::truth`]).
    pub truth: Option<std::sync::Arc<super::truth::ClientTruth>>,
    /// Keep this many finished calls' facts (requests and counter shares) in the outcome
    /// ([`super::LoadOutcome::calls`]); 0 (the default) keeps none.
    pub keep_calls: usize,
}

/// Text a caller adds to the progress bar, computed at each tick.
#[derive(Clone)]
pub struct ProgressNote(pub std::sync::Arc<dyn Fn() -> String + Send + Sync>);

impl std::fmt::Debug for ProgressNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressNote")
    }
}

impl LoadConfig {
    /// A closed-loop strict run of `calls` calls of `tool` over `sessions` sessions.
    pub fn new(target: Target, tool: &str, args: serde_json::Value) -> LoadConfig {
        LoadConfig {
            target,
            sessions: 1,
            stop: Stop::Calls(1),
            tool: tool.to_string(),
            args,
            rate: None,
            policy: Policy::Strict,
            max_attempts: 5,
            call_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            head_timeout: None,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            max_traces: 16,
            progress: false,
            progress_note: None,
            segment: super::segment::Segment::WHOLE,
            start_at: None,
            era: super::era::EraChoice::Auto,
            token: None,
            distinct_args: false,
            resume_token: None,
            stale_cursor: false,
            truth: None,
            keep_calls: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_parses_host_port_and_path() {
        let t = Target::parse("http://127.0.0.1:7000/mcp").expect("valid");
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("127.0.0.1", 7000, "/mcp")
        );
        let t = Target::parse("http://example").expect("valid");
        assert_eq!((t.port, t.path.as_str()), (80, "/mcp"));
        let t = Target::parse("http://[::1]:9/x").expect("valid");
        assert_eq!((t.host.as_str(), t.port), ("::1", 9));
    }

    #[test]
    fn policy_lists_parse_names_lists_and_both_and_refuse_repeats() {
        let parse = |s: &str| s.parse::<PolicyList>().map(|l| l.0);
        assert_eq!(parse("strict"), Ok(vec![Policy::Strict]));
        assert_eq!(parse("both"), Ok(vec![Policy::Strict, Policy::Naive]));
        assert_eq!(
            parse("naive, retry"),
            Ok(vec![Policy::Naive, Policy::Retry])
        );
        assert!(parse("both,strict").is_err());
        assert!(parse("").is_err());
        let err = parse("lenient").expect_err("unknown");
        assert!(err.contains("strict, naive, retry"), "{err}");
    }

    #[test]
    fn target_rejects_other_schemes_and_bad_ports() {
        assert!(matches!(
            Target::parse("ftp://a/"),
            Err(TargetError::Scheme(_))
        ));
        assert!(matches!(
            Target::parse("http://a:x/"),
            Err(TargetError::Authority(_))
        ));
        assert!(matches!(
            Target::parse("http://:80/"),
            Err(TargetError::Authority(_))
        ));
    }
}
