//! `GET /metrics`: Prometheus text exposition format 0.0.4.
//!
//! Invariants of the output: every metric family has exactly one `# HELP` and one `# TYPE`
//! line, before its samples, and its samples are contiguous; label values are escaped
//! (`\\`, `\"`, `\n`); histogram buckets are cumulative, their bounds increase, and the
//! `le="+Inf"` bucket equals `_count`. Families are written even when they have no samples, so
//! a scraper sees every name from the start.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::hub::{CutCount, HistogramSnapshot, ProxyStats};

/// Requests answered by the API, by route and status.
#[derive(Debug, Default)]
pub struct ApiCounters {
    by_route: Mutex<BTreeMap<(&'static str, u16), u64>>,
    evicted: AtomicU64,
}

impl ApiCounters {
    /// Counts one answered request.
    pub fn record(&self, route: &'static str, status: u16) {
        if let Ok(mut m) = self.by_route.lock() {
            *m.entry((route, status)).or_insert(0) += 1;
        }
    }

    /// Counts one connection evicted from its slot; returns the total so far.
    pub fn note_evicted(&self) -> u64 {
        self.evicted.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Connections evicted from their slot so far.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    fn snapshot(&self) -> Vec<((&'static str, u16), u64)> {
        self.by_route
            .lock()
            .map(|m| m.iter().map(|(k, v)| (*k, *v)).collect())
            .unwrap_or_default()
    }
}

/// Everything one scrape shows.
pub struct Scrape<'a> {
    /// Per-proxy counters from the hub.
    pub proxies: &'a [ProxyStats],
    /// Cuts by SSE class and action, when cut records are attached.
    pub cut_positions: Option<&'a [CutCount]>,
    /// Findings by kind, when the audit is attached.
    pub findings: Option<&'a [(String, u64)]>,
    /// Observations the audit dropped (intake queue full), when the audit is attached.
    pub audit_dropped: Option<u64>,
    /// Entries held per audit store, when the audit is attached.
    pub audit_tracked: Option<&'a [(&'static str, u64)]>,
    /// Ended streams the audit forgot early (cap), when an audit runs.
    pub audit_evicted: Option<u64>,
    /// The API's own request counters.
    pub api: &'a ApiCounters,
}

/// Escapes a label value.
fn esc(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A family with one sample per proxy: `name{proxy="…"} value`.
fn per_proxy(
    out: &mut String,
    proxies: &[ProxyStats],
    (name, kind, help): (&str, &str, &str),
    value: impl Fn(&ProxyStats) -> u64,
) {
    family(out, name, kind, help);
    for p in proxies {
        let _ = writeln!(out, "{name}{{proxy=\"{}\"}} {}", esc(&p.name), value(p));
    }
}

/// A counter family with one sample per proxy and key of a per-proxy list:
/// `name{proxy="…",LABEL="key"} value`.
fn per_proxy_by(
    out: &mut String,
    proxies: &[ProxyStats],
    (name, help, label): (&str, &str, &str),
    list: impl Fn(&ProxyStats) -> &[(String, u64)],
) {
    family(out, name, "counter", help);
    for p in proxies {
        for (key, v) in list(p) {
            let _ = writeln!(
                out,
                "{name}{{proxy=\"{}\",{label}=\"{}\"}} {v}",
                esc(&p.name),
                esc(key)
            );
        }
    }
}

/// A float as Prometheus writes it.
fn num(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else if v.is_nan() {
        "NaN".to_owned()
    } else {
        format!("{v}")
    }
}

fn histogram(out: &mut String, name: &str, labels: &str, h: &HistogramSnapshot) {
    let mut last = 0u64;
    for (bound, count) in &h.buckets {
        last = last.max(*count).min(h.count);
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels},le=\"{}\"}} {last}",
            num(*bound)
        );
    }
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", num(h.sum_seconds));
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
}

/// Toxiproxy's proxy metrics (`-proxy-metrics`), with its names and labels: bytes read from
/// the source before toxics (`received`) and written to the destination (`sent`), by
/// direction, listener, proxy and upstream. Toxiproxy adds a connection's bytes when the
/// direction ends; these counters move as bytes pass.
fn toxiproxy(out: &mut String, proxies: &[ProxyStats]) {
    for (name, help, pick) in [
        (
            "toxiproxy_proxy_received_bytes_total",
            "Bytes a proxy read from the client (upstream) or the server (downstream), before toxics.",
            (|p: &ProxyStats| (p.received_upstream, p.received_downstream))
                as fn(&ProxyStats) -> (u64, u64),
        ),
        (
            "toxiproxy_proxy_sent_bytes_total",
            "Bytes a proxy wrote to the server (upstream) or the client (downstream).",
            |p: &ProxyStats| (p.bytes_upstream, p.bytes_downstream),
        ),
    ] {
        family(out, name, "counter", help);
        for p in proxies {
            let (up, down) = pick(p);
            for (dir, v) in [("downstream", down), ("upstream", up)] {
                let _ = writeln!(
                    out,
                    "{name}{{direction=\"{dir}\",listener=\"{}\",proxy=\"{}\",upstream=\"{}\"}} {v}",
                    esc(&p.listen),
                    esc(&p.name),
                    esc(&p.upstream)
                );
            }
        }
    }
}

/// Renders one scrape.
pub fn render(s: &Scrape<'_>) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "tearline_proxy_bytes_total",
        "counter",
        "Bytes forwarded by a proxy, by direction (upstream = client to server).",
    );
    for p in s.proxies {
        let n = esc(&p.name);
        for (dir, v) in [
            ("upstream", p.bytes_upstream),
            ("downstream", p.bytes_downstream),
        ] {
            let _ = writeln!(
                out,
                "tearline_proxy_bytes_total{{proxy=\"{n}\",direction=\"{dir}\"}} {v}"
            );
        }
    }
    per_proxy(
        &mut out,
        s.proxies,
        (
            "tearline_proxy_connections_open",
            "gauge",
            "Client connections a proxy holds open now.",
        ),
        |p| p.connections_open,
    );
    per_proxy(
        &mut out,
        s.proxies,
        (
            "tearline_proxy_connections_total",
            "counter",
            "Client connections a proxy accepted.",
        ),
        |p| p.connections_total,
    );
    per_proxy(
        &mut out,
        s.proxies,
        (
            "tearline_proxy_connections_refused_total",
            "counter",
            "Client connections a proxy refused at once (disabled, outage, upstream unreachable).",
        ),
        |p| p.connections_refused,
    );
    per_proxy(
        &mut out,
        s.proxies,
        (
            "tearline_proxy_connections_over_limit_total",
            "counter",
            "Client connections a proxy refused (RST) because it served max_connections already or \
             the process was out of file descriptors.",
        ),
        |p| p.connections_over_limit,
    );
    toxiproxy(&mut out, s.proxies);
    per_proxy_by(
        &mut out,
        s.proxies,
        (
            "tearline_proxy_cuts_total",
            "Connections cut by a fault, by action (reset, fin, clean-end).",
            "action",
        ),
        |p| &p.cuts_by_action,
    );
    per_proxy_by(
        &mut out,
        s.proxies,
        (
            "tearline_fault_activations_total",
            "Faults that fired on a connection, by fault kind.",
            "kind",
        ),
        |p| &p.fault_activations,
    );
    family(
        &mut out,
        "tearline_proxy_residence_seconds",
        "histogram",
        "Time bytes stayed inside tearline when no fault delayed them.",
    );
    for p in s.proxies {
        histogram(
            &mut out,
            "tearline_proxy_residence_seconds",
            &format!("proxy=\"{}\"", esc(&p.name)),
            &p.residence,
        );
    }
    family(
        &mut out,
        "tearline_cuts_total",
        "counter",
        "Cuts by SSE position class and action.",
    );
    for c in s.cut_positions.into_iter().flatten() {
        let _ = writeln!(
            out,
            "tearline_cuts_total{{class=\"{}\",action=\"{}\"}} {}",
            esc(&c.class),
            esc(&c.action),
            c.count
        );
    }
    family(
        &mut out,
        "tearline_findings_total",
        "counter",
        "Audit findings, by kind.",
    );
    for (kind, v) in s.findings.into_iter().flatten() {
        let _ = writeln!(out, "tearline_findings_total{{kind=\"{}\"}} {v}", esc(kind));
    }
    if let Some(n) = s.audit_dropped {
        family(
            &mut out,
            "tearline_audit_dropped_total",
            "counter",
            "Observations the audit dropped because its queue was full (the relay never waits).",
        );
        let _ = writeln!(out, "tearline_audit_dropped_total {n}");
    }
    if let Some(n) = s.audit_evicted {
        family(
            &mut out,
            "tearline_audit_evicted_total",
            "counter",
            "Ended streams the audit forgot before their grace because it holds at most \
             max_ended_streams of them (a late resume of one is judged unknown).",
        );
        let _ = writeln!(out, "tearline_audit_evicted_total {n}");
    }
    if let Some(stores) = s.audit_tracked {
        family(
            &mut out,
            "tearline_audit_tracked",
            "gauge",
            "Entries the audit holds now, by store (live, or ended less than its grace ago).",
        );
        for (store, v) in stores {
            let _ = writeln!(
                out,
                "tearline_audit_tracked{{store=\"{}\"}} {v}",
                esc(store)
            );
        }
    }
    family(
        &mut out,
        "tearline_api_requests_total",
        "counter",
        "Control API requests answered, by route and status.",
    );
    for ((route, status), v) in s.api.snapshot() {
        let _ = writeln!(
            out,
            "tearline_api_requests_total{{route=\"{route}\",status=\"{status}\"}} {v}"
        );
    }
    family(
        &mut out,
        "tearline_api_connections_evicted_total",
        "counter",
        "Control API connections closed to make room for a new one (all slots taken; the one \
         that waited longest without a complete request goes).",
    );
    let _ = writeln!(
        out,
        "tearline_api_connections_evicted_total {}",
        s.api.evicted()
    );
    for (name, kind, help, v) in super::process::read() {
        family(&mut out, name, kind, help);
        let _ = writeln!(out, "{name} {}", num(v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(esc("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_at_count() {
        let h = HistogramSnapshot {
            buckets: vec![(0.001, 2), (0.01, 1), (0.1, 9)],
            sum_seconds: 0.5,
            count: 5,
        };
        let mut out = String::new();
        histogram(&mut out, "x", "proxy=\"p\"", &h);
        let counts: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("x_bucket"))
            .filter_map(|l| l.rsplit(' ').next())
            .collect();
        assert_eq!(counts, ["2", "2", "5", "5"]);
    }
}
