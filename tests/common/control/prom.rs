//! A strict parser of the Prometheus text exposition format 0.0.4, for tests.

use std::collections::{BTreeMap, BTreeSet};

/// One family: its type and samples (`(sample name, labels) → value`).
#[derive(Debug, Default)]
pub struct Family {
    pub kind: String,
    pub help: bool,
    pub samples: BTreeMap<(String, BTreeMap<String, String>), f64>,
}

fn valid_metric_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

fn valid_label_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

fn value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => s.parse::<f64>().map_err(|_| format!("bad value '{s}'")),
    }
}

/// Parses `name{a="b",…}` into the name and labels.
fn series(s: &str) -> Result<(String, BTreeMap<String, String>), String> {
    let Some(open) = s.find('{') else {
        return Ok((s.to_owned(), BTreeMap::new()));
    };
    let name = &s[..open];
    let rest = s[open + 1..]
        .strip_suffix('}')
        .ok_or_else(|| format!("unclosed labels in '{s}'"))?;
    let mut labels = BTreeMap::new();
    let mut chars = rest.chars().peekable();
    while chars.peek().is_some() {
        let mut lname = String::new();
        for c in chars.by_ref() {
            if c == '=' {
                break;
            }
            lname.push(c);
        }
        if !valid_label_name(&lname) {
            return Err(format!("bad label name '{lname}' in '{s}'"));
        }
        if chars.next() != Some('"') {
            return Err(format!("label value not quoted in '{s}'"));
        }
        let mut v = String::new();
        loop {
            match chars.next() {
                Some('\\') => match chars.next() {
                    Some('\\') => v.push('\\'),
                    Some('"') => v.push('"'),
                    Some('n') => v.push('\n'),
                    other => return Err(format!("bad escape {other:?} in '{s}'")),
                },
                Some('"') => break,
                Some(c) => v.push(c),
                None => return Err(format!("unterminated label value in '{s}'")),
            }
        }
        if labels.insert(lname.clone(), v).is_some() {
            return Err(format!("duplicate label '{lname}' in '{s}'"));
        }
        match chars.next() {
            Some(',') | None => {}
            Some(c) => return Err(format!("unexpected '{c}' after label in '{s}'")),
        }
    }
    Ok((name.to_owned(), labels))
}

fn family_of(sample: &str, families: &BTreeMap<String, Family>) -> String {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = sample.strip_suffix(suffix)
            && families.get(base).is_some_and(|f| f.kind == "histogram")
        {
            return base.to_owned();
        }
    }
    sample.to_owned()
}

/// Parses and checks a whole exposition.
pub fn parse(text: &str) -> Result<BTreeMap<String, Family>, String> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut finished: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    if !text.ends_with('\n') {
        return Err("exposition must end with a newline".into());
    }
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (Some(kw), Some(name)) = (parts.next(), parts.next()) else {
                continue;
            };
            if kw != "HELP" && kw != "TYPE" {
                continue;
            }
            if !valid_metric_name(name) {
                return Err(format!("bad metric name '{name}'"));
            }
            if finished.contains(name) {
                return Err(format!("{kw} for '{name}' after its samples"));
            }
            if current.as_deref() != Some(name)
                && let Some(c) = current.take()
            {
                finished.insert(c);
            }
            let f = families.entry(name.to_owned()).or_default();
            if kw == "HELP" {
                if f.help {
                    return Err(format!("second HELP for '{name}'"));
                }
                f.help = true;
            } else {
                if !f.kind.is_empty() {
                    return Err(format!("second TYPE for '{name}'"));
                }
                let kind = parts.next().unwrap_or_default();
                if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                    return Err(format!("bad type '{kind}' for '{name}'"));
                }
                if !f.samples.is_empty() {
                    return Err(format!("TYPE for '{name}' after samples"));
                }
                f.kind = kind.to_owned();
            }
            current = Some(name.to_owned());
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut parts = line.split(' ');
        let (Some(s), Some(v)) = (parts.next(), parts.next()) else {
            return Err(format!("bad sample line '{line}'"));
        };
        if parts.next().is_some_and(|t| t.parse::<i64>().is_err()) || parts.next().is_some() {
            return Err(format!("trailing garbage in '{line}'"));
        }
        let (name, labels) = series(s)?;
        if !valid_metric_name(&name) {
            return Err(format!("bad metric name '{name}'"));
        }
        let fam = family_of(&name, &families);
        if finished.contains(&fam) {
            return Err(format!("samples of '{fam}' are not contiguous"));
        }
        if current.as_deref() != Some(fam.as_str())
            && let Some(c) = current.take()
        {
            finished.insert(c);
        }
        current = Some(fam.clone());
        let f = families.entry(fam).or_default();
        let v = value(v)?;
        if f.kind == "counter" && (v.is_nan() || v < 0.0) {
            return Err(format!("negative counter in '{line}'"));
        }
        if f.samples.insert((name, labels), v).is_some() {
            return Err(format!("duplicate series '{line}'"));
        }
    }
    for (name, f) in &families {
        if f.kind == "histogram" {
            check_histogram(name, f)?;
        }
    }
    Ok(families)
}

fn check_histogram(name: &str, f: &Family) -> Result<(), String> {
    let mut groups: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
    for ((sample, labels), v) in &f.samples {
        if sample == &format!("{name}_bucket") {
            let mut key = labels.clone();
            let le = key
                .remove("le")
                .ok_or_else(|| format!("bucket of {name} without le"))?;
            groups.entry(key).or_default().push((value(&le)?, *v));
        }
    }
    for (labels, mut buckets) in groups {
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        if buckets.windows(2).any(|w| w[1].1 < w[0].1) {
            return Err(format!("{name} {labels:?}: buckets not cumulative"));
        }
        let inf = buckets.last().filter(|b| b.0.is_infinite()).map(|b| b.1);
        let count = f.samples.get(&(format!("{name}_count"), labels.clone()));
        if inf.is_none() || inf != count.copied() {
            return Err(format!(
                "{name} {labels:?}: +Inf bucket {inf:?} != count {count:?}"
            ));
        }
        if !f
            .samples
            .contains_key(&(format!("{name}_sum"), labels.clone()))
        {
            return Err(format!("{name} {labels:?}: no _sum"));
        }
    }
    Ok(())
}

/// The value of one series, if present.
pub fn get(
    families: &BTreeMap<String, Family>,
    sample: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    let fam = family_of(sample, families);
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    families
        .get(&fam)?
        .samples
        .get(&(sample.to_owned(), labels))
        .copied()
}
