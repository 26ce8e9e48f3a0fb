//! The raw profile → a valid [`Profile`]: every fault built by the registry, proxies checked,
//! references resolved.
//!
//! Rules (each broken rule is one precise error): proxy names are non-empty and unique;
//! `listen` and `upstream` are `host:port` with a port in 0..=65535; a fault's `proxy` names a
//! defined proxy; fault names (default: the kind) are unique among the faults that apply to the
//! same proxy; a profile defines at least one proxy or one fault; phase names are unique, every
//! phase but the last has a positive `duration_ms`, and a phase names only defined
//! per-connection faults (outages keep their own schedule).

use std::ops::Range;

use toml::Spanned;

use super::model::{FaultSpec, PhaseSpec, Profile, ProxyDef};
use super::parse::{RawPhase, RawProfile, SpanError, fault_def};
use crate::fault::keys::FaultConfigError;
use crate::fault::registry;
use crate::wire::llm_routes::{api_named, check_pattern};

fn err(span: Range<usize>, key: &str, message: String) -> SpanError {
    SpanError {
        span: Some(span),
        key: Some(key.to_owned()),
        message,
    }
}

impl From<FaultConfigError> for SpanError {
    fn from(e: FaultConfigError) -> Self {
        SpanError {
            span: e.span,
            key: e.key,
            message: e.message,
        }
    }
}

/// Validates `raw`, parsed from `text`; `origin` is recorded in the profile.
pub fn profile(raw: RawProfile, text: &str, origin: &str) -> Result<Profile, SpanError> {
    let line_of = |span: &Range<usize>| super::line_col(text, span.start).0;
    if raw.proxy.is_empty() && raw.fault.is_empty() && raw.llm_route.is_empty() {
        return Err(SpanError {
            span: None,
            key: None,
            message: "the profile defines no [[proxy]] and no [[fault]]".into(),
        });
    }
    let seed = match raw.seed {
        None => None,
        Some(v) => match v.get_ref() {
            toml::Value::Integer(i) if *i >= 0 => Some(i.unsigned_abs()),
            other => {
                return Err(err(
                    v.span(),
                    "seed",
                    format!("seed must be a non-negative integer, got {other}"),
                ));
            }
        },
    };
    let mut proxies: Vec<(ProxyDef, Range<usize>)> = Vec::with_capacity(raw.proxy.len());
    for p in &raw.proxy {
        let p = p.get_ref();
        let name = p.name.get_ref();
        if name.trim().is_empty() {
            return Err(err(
                p.name.span(),
                "name",
                "proxy name must not be empty".into(),
            ));
        }
        if let Some((_, first)) = proxies.iter().find(|(q, _)| &q.name == name) {
            return Err(err(
                p.name.span(),
                "name",
                format!(
                    "duplicate proxy name '{name}' (first at line {})",
                    line_of(first)
                ),
            ));
        }
        check_addr(&p.listen, "listen")?;
        check_addr(&p.upstream, "upstream")?;
        let listen = p.listen.get_ref();
        if let Some((q, first)) = proxies.iter().find(|(q, _)| same_listen(&q.listen, listen)) {
            return Err(err(
                p.listen.span(),
                "listen",
                format!(
                    "proxy '{name}' listens on {listen}, as proxy '{}' (line {}) does: two \
                     proxies cannot bind one address; give each its own port (or port 0)",
                    q.name,
                    line_of(first)
                ),
            ));
        }
        proxies.push((
            ProxyDef {
                name: name.clone(),
                listen: p.listen.get_ref().clone(),
                upstream: p.upstream.get_ref().clone(),
                enabled: p.enabled.as_ref().is_none_or(|e| *e.get_ref()),
            },
            p.name.span(),
        ));
    }
    let mut faults: Vec<(FaultSpec, Range<usize>)> = Vec::with_capacity(raw.fault.len());
    for table in &raw.fault {
        let def = fault_def(table);
        let built = registry::build(&def)?;
        let kind = match def.get("kind").map(|p| &p.value) {
            Some(toml::Value::String(k)) => k.clone(),
            _ => String::new(),
        };
        let name_param = def.get("name");
        let name = match name_param.map(|p| &p.value) {
            Some(toml::Value::String(n)) => n.clone(),
            _ => kind.clone(),
        };
        let proxy_param = def.get("proxy");
        let proxy = match proxy_param.map(|p| (&p.value, p)) {
            Some((toml::Value::String(n), p)) => {
                if !proxies.iter().any(|(q, _)| &q.name == n) {
                    let defined: Vec<&str> = proxies.iter().map(|(q, _)| q.name.as_str()).collect();
                    let known = if defined.is_empty() {
                        "no [[proxy]] is defined".to_owned()
                    } else {
                        format!("defined: {}", defined.join(", "))
                    };
                    return Err(FaultConfigError::at_value(
                        p,
                        format!("fault '{name}' names proxy '{n}', which is not defined; {known}"),
                    )
                    .into());
                }
                Some(n.clone())
            }
            _ => None,
        };
        let span = name_param
            .and_then(|p| p.value_span.clone())
            .or_else(|| def.span.clone())
            .unwrap_or_default();
        let spec = FaultSpec {
            name,
            kind,
            proxy,
            built,
            line: def.span.as_ref().map_or(0, line_of),
            def,
        };
        if let Some((other, _)) = faults.iter().find(|(o, _)| {
            o.name == spec.name
                && (o.proxy.is_none() || spec.proxy.is_none() || o.proxy == spec.proxy)
        }) {
            return Err(err(
                span,
                "name",
                format!(
                    "duplicate fault name '{}' (also used by the fault at line {}; a name defaults to the kind); give one a distinct `name`",
                    spec.name, other.line
                ),
            ));
        }
        faults.push((spec, span));
    }
    let faults: Vec<FaultSpec> = faults.into_iter().map(|(f, _)| f).collect();
    let phases = phases(&raw.phase, &faults)?;
    let mut llm_routes = Vec::new();
    for r in &raw.llm_route {
        let r = r.get_ref();
        check_pattern(r.path.get_ref()).map_err(|m| err(r.path.span(), "path", m))?;
        let api = api_named(r.api.get_ref()).map_err(|m| err(r.api.span(), "api", m))?;
        llm_routes.push((r.path.get_ref().clone(), api));
    }
    Ok(Profile {
        origin: origin.to_owned(),
        description: raw.description.map(Spanned::into_inner),
        seed,
        proxies: proxies.into_iter().map(|(p, _)| p).collect(),
        faults,
        phases,
        llm_routes,
    })
}

/// Checks the `[[phase]]` tables against the faults.
fn phases(raw: &[Spanned<RawPhase>], faults: &[FaultSpec]) -> Result<Vec<PhaseSpec>, SpanError> {
    let mut out: Vec<PhaseSpec> = Vec::with_capacity(raw.len());
    for (i, p) in raw.iter().enumerate() {
        let p = p.get_ref();
        let name = p.name.get_ref();
        if name.trim().is_empty() || out.iter().any(|q| &q.name == name) {
            return Err(err(
                p.name.span(),
                "name",
                format!("phase names must be non-empty and unique, got '{name}'"),
            ));
        }
        let last = i + 1 == raw.len();
        let duration = match &p.duration_ms {
            Some(v) => match v.get_ref() {
                toml::Value::Integer(ms) if *ms > 0 => {
                    Some(std::time::Duration::from_millis(ms.unsigned_abs()))
                }
                other => {
                    return Err(err(
                        v.span(),
                        "duration_ms",
                        format!(
                            "duration_ms must be a positive integer (milliseconds), got {other}"
                        ),
                    ));
                }
            },
            None if last => None,
            None => {
                return Err(err(
                    p.name.span(),
                    "duration_ms",
                    format!(
                        "phase '{name}' needs duration_ms (only the last phase may omit it: it lasts until the end)"
                    ),
                ));
            }
        };
        let mut names = Vec::with_capacity(p.faults.get_ref().len());
        for f in p.faults.get_ref() {
            let wanted = f.get_ref();
            match faults.iter().find(|s| &s.name == wanted) {
                None => {
                    let known: Vec<&str> = faults.iter().map(|s| s.name.as_str()).collect();
                    return Err(err(
                        f.span(),
                        "faults",
                        format!(
                            "phase '{name}' names fault '{wanted}', which is not defined; defined: {}",
                            if known.is_empty() {
                                "none".to_owned()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                }
                Some(s) if matches!(s.built, registry::Built::Outage(_)) => {
                    return Err(err(
                        f.span(),
                        "faults",
                        format!(
                            "fault '{wanted}' is an outage: it follows its own start_ms/every_ms schedule; leave it out of phases"
                        ),
                    ));
                }
                Some(_) => names.push(wanted.clone()),
            }
        }
        out.push(PhaseSpec {
            name: name.clone(),
            duration,
            faults: names,
        });
    }
    Ok(out)
}

/// Checks `host:port` (IPv6 hosts in brackets).
fn check_addr(addr: &Spanned<String>, key: &str) -> Result<(), SpanError> {
    let a = addr.get_ref();
    let bad = |why: &str| {
        err(
            addr.span(),
            key,
            format!("{key} must be host:port (e.g. 127.0.0.1:7000), got '{a}': {why}"),
        )
    };
    let Some((host, port)) = a.rsplit_once(':') else {
        return Err(bad("no port"));
    };
    if port.parse::<u16>().is_err() {
        return Err(bad("the port must be a number in 0..=65535"));
    }
    if host.is_empty() {
        return Err(bad("no host"));
    }
    if let Some(inner) = host.strip_prefix('[') {
        let ok = inner
            .strip_suffix(']')
            .is_some_and(|v6| v6.parse::<std::net::Ipv6Addr>().is_ok());
        if !ok {
            return Err(bad("an IPv6 host must be a bracketed IPv6 address"));
        }
    } else if host.contains(':') || host.contains(char::is_whitespace) {
        return Err(bad(
            "the host is not a name or an address (IPv6 needs brackets)",
        ));
    }
    Ok(())
}

/// True if and only if binding `a` and then `b` must fail: the same port (not 0) on the same
/// host, or on a wildcard host (`0.0.0.0`, `[::]`, empty) beside any host.
fn same_listen(a: &str, b: &str) -> bool {
    fn split(s: &str) -> Option<(&str, &str)> {
        let (host, port) = s.trim().rsplit_once(':')?;
        Some((host.trim_start_matches('[').trim_end_matches(']'), port))
    }
    let (Some((ha, pa)), Some((hb, pb))) = (split(a), split(b)) else {
        return false;
    };
    let wild = |h: &str| matches!(h, "" | "0.0.0.0" | "::");
    pa == pb && pa != "0" && (ha.eq_ignore_ascii_case(hb) || wild(ha) || wild(hb))
}

#[cfg(test)]
mod listen_tests {
    use super::same_listen;

    #[test]
    fn two_binds_of_one_port_clash_and_port_zero_or_other_ports_do_not() {
        assert!(same_listen("127.0.0.1:7000", "127.0.0.1:7000"));
        assert!(same_listen("0.0.0.0:7000", "127.0.0.1:7000"));
        assert!(same_listen("127.0.0.1:7000", "[::]:7000"));
        assert!(!same_listen("127.0.0.1:0", "127.0.0.1:0"));
        assert!(!same_listen("127.0.0.1:7000", "127.0.0.1:7001"));
        assert!(!same_listen("127.0.0.1:7000", "127.0.0.2:7000"));
    }
}
