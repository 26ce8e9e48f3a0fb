//! What the fault-kind peer tests share: a fault built as a profile would define it, a proxy
//! hop carrying it with the real auditor behind it, the times and lines a peer logged, and curl
//! fetching several URLs at once on one HTTP/2 connection.
//!
//! Why apart from `support/`: these are the kinds' own vocabulary (a fault definition, an
//! audited hop); `support/` stays the peers' plumbing shared with the other h2 tests.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tearline::audit::Auditor;
use tearline::fault::FaultFactory;
use tearline::fault::keys::FaultDef;
use tearline::fault::registry::{Built, build};

use crate::peers;
use crate::support::audited;
use crate::support::certs::Certs;
use crate::support::check::events;
use crate::support::peer::Server;
use crate::support::route::{self, Hop, Route};

/// How long any one peer may run in these tests.
pub const LIMIT: Duration = Duration::from_secs(30);

/// A fault as a profile would define it.
pub fn fault(pairs: &[(&str, toml::Value)]) -> Arc<dyn FaultFactory> {
    let def = FaultDef::from_pairs(pairs.iter().map(|(k, v)| (*k, v.clone())));
    match build(&def) {
        Ok(Built::Conn(f)) => f,
        other => panic!("expected a connection fault, got {other:?}"),
    }
}

pub fn s(v: &str) -> toml::Value {
    toml::Value::String(v.into())
}

pub fn i(v: i64) -> toml::Value {
    toml::Value::Integer(v)
}

/// A peer's log, one JSON line per entry (long `data` values shortened), for failure messages.
pub fn show(log: &[Value]) -> String {
    log.iter()
        .map(|v| {
            let line = v.to_string();
            if line.len() > 400 {
                let cut = (0..=400).rev().find(|&i| line.is_char_boundary(i));
                format!("{}…", &line[..cut.unwrap_or(0)])
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// curl's `--write-out %{json}` reports in `log`, each cut to the fields a test reads (the
/// rest — certificates, timings — would bury them in a failure message).
pub fn curl_reports(log: &[Value]) -> Vec<Value> {
    const KEEP: [&str; 7] = [
        "exitcode",
        "errormsg",
        "response_code",
        "http_version",
        "url_effective",
        "num_connects",
        "size_download",
    ];
    log.iter()
        .filter_map(Value::as_object)
        .map(|o| {
            KEEP.iter()
                .filter_map(|k| o.get(*k).map(|v| ((*k).to_owned(), v.clone())))
                .collect::<serde_json::Map<_, _>>()
                .into()
        })
        .collect()
}

/// `t_ms` of the lines of `log` with `"event" == event` on `stream`.
pub fn times(log: &[Value], event: &str, stream: &str) -> Vec<i64> {
    events(log, event)
        .into_iter()
        .filter(|v| v["stream"] == stream)
        .filter_map(|v| v["t_ms"].as_i64())
        .collect()
}

/// `t_ms` of the first line of `log` with `"event" == event` (on any stream).
pub fn first(log: &[Value], event: &str) -> Option<i64> {
    events(log, event).first().and_then(|v| v["t_ms"].as_i64())
}

/// `faults` with probability 0: the same hop (h2 connections still go to the stream relay,
/// which carries h2 kinds), the faults never firing — the control a fault's effect is judged
/// against.
pub fn never(pairs: &[(&str, toml::Value)]) -> Vec<Arc<dyn FaultFactory>> {
    let mut pairs = pairs.to_vec();
    pairs.push(("probability", toml::Value::Float(0.0)));
    vec![fault(&pairs)]
}

/// A proxy in front of `server` observing HTTP/2 (terminating TLS when `certs` is given, so
/// that a TLS-only peer's frames are seen), with `faults` and a real auditor behind it.
pub async fn audited_hop(
    server: &Server,
    certs: Option<&Certs>,
    faults: Vec<Arc<dyn FaultFactory>>,
) -> (Hop, Arc<Auditor>) {
    let r = if certs.is_some() {
        Route::Terminated
    } else {
        Route::Observed
    };
    let hop = route::open_with_faults(r, server.addr(), certs, |_| {}, faults).await;
    let auditor = audited::audit(&hop);
    (hop, auditor)
}

/// The largest value of the auditor's histogram `name`, in milliseconds, and its count.
pub fn histo_max_ms(auditor: &Auditor, name: &str) -> (u64, u64) {
    let all = auditor.histograms();
    let h = all
        .get(name)
        .unwrap_or_else(|| panic!("the auditor has no {name} histogram"));
    (h.max() / 1000, h.len())
}

/// curl fetching every `(url, out)` at once (`--parallel`: several transfers, multiplexed on
/// one HTTP/2 connection when they can be), each body into its `out`, one `--write-out
/// %{json}` line per transfer on stdout.
pub fn curl_parallel(urls: &[(String, &Path)], ca: Option<&Certs>, max_secs: u64) -> Command {
    let mut cmd = peers::curl();
    cmd.args([
        "--silent",
        "--no-buffer",
        "--parallel",
        "--max-time",
        &max_secs.to_string(),
        "--write-out",
        "%{json}\n",
    ]);
    if urls.iter().all(|(u, _)| u.starts_with("http://")) {
        cmd.arg("--http2-prior-knowledge");
    } else {
        cmd.arg("--http2");
    }
    if let Some(c) = ca {
        cmd.arg("--cacert").arg(&c.ca);
    }
    for (url, out) in urls {
        cmd.arg("--output").arg(out).arg(url);
    }
    cmd
}
