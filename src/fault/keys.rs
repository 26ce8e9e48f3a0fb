//! The keys of one fault definition and a typed reader over them.
//!
//! Exists so that profiles (TOML, with source spans) and the Toxiproxy JSON API (no spans) share
//! one validation path: every kind reads its keys through [`KeyReader`], which produces a
//! [`FaultConfigError`] naming the key, what is allowed and, when known, the byte span of the
//! offending text. Invariant: a key is read at most once, and [`KeyReader::finish`] rejects every
//! key no reader asked for, listing the keys the kind knows.

use std::ops::Range;
use std::time::Duration;

/// One key of a fault definition, with the spans of its key and value in the source text.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The key as written.
    pub key: String,
    /// Byte span of the key in the source, if the source has spans.
    pub key_span: Option<Range<usize>>,
    /// The value.
    pub value: toml::Value,
    /// Byte span of the value in the source, if the source has spans.
    pub value_span: Option<Range<usize>>,
}

/// A fault as written: every key of its table (common keys included), in source order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultDef {
    /// Span of the whole definition (for "missing key" errors), if known.
    pub span: Option<Range<usize>>,
    /// The keys.
    pub params: Vec<Param>,
}

impl FaultDef {
    /// A definition without spans (built in code or from JSON).
    pub fn from_pairs<I, K>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, toml::Value)>,
        K: Into<String>,
    {
        FaultDef {
            span: None,
            params: pairs
                .into_iter()
                .map(|(k, v)| Param {
                    key: k.into(),
                    key_span: None,
                    value: v,
                    value_span: None,
                })
                .collect(),
        }
    }

    /// The first param named `key`.
    pub fn get(&self, key: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.key == key)
    }
}

/// A fault definition is invalid: which key, why, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FaultConfigError {
    /// The key at fault, if one is.
    pub key: Option<String>,
    /// Byte span in the source text, if known.
    pub span: Option<Range<usize>>,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl FaultConfigError {
    /// An error about `param`'s value.
    pub fn at_value(param: &Param, message: impl Into<String>) -> Self {
        FaultConfigError {
            key: Some(param.key.clone()),
            span: param.value_span.clone().or_else(|| param.key_span.clone()),
            message: message.into(),
        }
    }

    /// An error about the definition as a whole (a missing key, conflicting keys).
    pub fn at_def(def: &FaultDef, key: Option<&str>, message: impl Into<String>) -> Self {
        FaultConfigError {
            key: key.map(str::to_owned),
            span: def.span.clone(),
            message: message.into(),
        }
    }
}

/// The TOML type name of a value, for "wrong type" messages.
pub fn type_name(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a datetime",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

/// Longest duration a key may hold: keeps every `Instant + duration` of the kinds far from
/// overflow.
pub const MAX_DURATION_SECS: u64 = 365 * 86_400;

/// Reads typed keys of one definition and remembers which were read.
#[derive(Debug)]
pub struct KeyReader<'a> {
    def: &'a FaultDef,
    /// The kind, for messages (`"for kind latency"`).
    kind: &'a str,
    known: Vec<&'static str>,
    seen: Vec<bool>,
}

impl<'a> KeyReader<'a> {
    /// A reader over `def` for a fault of `kind`.
    pub fn new(def: &'a FaultDef, kind: &'a str) -> Self {
        KeyReader {
            def,
            kind,
            known: Vec::new(),
            seen: vec![false; def.params.len()],
        }
    }

    /// The definition being read.
    pub fn def(&self) -> &'a FaultDef {
        self.def
    }

    /// Declares `key` known and returns its param, if present.
    pub fn raw(&mut self, key: &'static str) -> Option<&'a Param> {
        if !self.known.contains(&key) {
            self.known.push(key);
        }
        let i = self.def.params.iter().position(|p| p.key == key)?;
        self.seen[i] = true;
        Some(&self.def.params[i])
    }

    /// A non-negative integer.
    pub fn u64(&mut self, key: &'static str, what: &str) -> Result<Option<u64>, FaultConfigError> {
        let Some(p) = self.raw(key) else {
            return Ok(None);
        };
        match p.value {
            toml::Value::Integer(i) if i >= 0 => Ok(Some(i.unsigned_abs())),
            toml::Value::Integer(i) => Err(FaultConfigError::at_value(
                p,
                format!("{key} must be a non-negative integer ({what}), got {i}"),
            )),
            ref v => Err(FaultConfigError::at_value(
                p,
                format!(
                    "{key} must be a non-negative integer ({what}), got {}",
                    type_name(v)
                ),
            )),
        }
    }

    /// Milliseconds as a non-negative integer, at most one year.
    pub fn millis(&mut self, key: &'static str) -> Result<Option<Duration>, FaultConfigError> {
        self.duration(key, "milliseconds", 1_000)
    }

    /// Microseconds as a non-negative integer, at most one year.
    pub fn micros(&mut self, key: &'static str) -> Result<Option<Duration>, FaultConfigError> {
        self.duration(key, "microseconds", 1_000_000)
    }

    fn duration(
        &mut self,
        key: &'static str,
        unit: &str,
        per_second: u64,
    ) -> Result<Option<Duration>, FaultConfigError> {
        let Some(v) = self.u64(key, unit)? else {
            return Ok(None);
        };
        let max = MAX_DURATION_SECS * per_second;
        if v > max {
            let p = self.raw(key);
            let msg = format!("{key} must be at most {max} {unit} (one year), got {v}");
            return Err(match p {
                Some(p) => FaultConfigError::at_value(p, msg),
                None => FaultConfigError::at_def(self.def, Some(key), msg),
            });
        }
        let nanos_per = 1_000_000_000 / per_second;
        Ok(Some(Duration::from_nanos(v * nanos_per)))
    }

    /// A number (integer or float).
    pub fn f64(&mut self, key: &'static str) -> Result<Option<(f64, &'a Param)>, FaultConfigError> {
        let Some(p) = self.raw(key) else {
            return Ok(None);
        };
        match p.value {
            toml::Value::Float(f) if f.is_finite() => Ok(Some((f, p))),
            #[allow(clippy::cast_precision_loss)]
            toml::Value::Integer(i) => Ok(Some((i as f64, p))),
            ref v => Err(FaultConfigError::at_value(
                p,
                format!("{key} must be a number, got {}", type_name(v)),
            )),
        }
    }

    /// A string.
    pub fn str(
        &mut self,
        key: &'static str,
    ) -> Result<Option<(&'a str, &'a Param)>, FaultConfigError> {
        let Some(p) = self.raw(key) else {
            return Ok(None);
        };
        match &p.value {
            toml::Value::String(s) => Ok(Some((s.as_str(), p))),
            v => Err(FaultConfigError::at_value(
                p,
                format!("{key} must be a string, got {}", type_name(v)),
            )),
        }
    }

    /// One of `allowed` (a string).
    pub fn choice(
        &mut self,
        key: &'static str,
        allowed: &[&'static str],
    ) -> Result<Option<&'static str>, FaultConfigError> {
        let Some((s, p)) = self.str(key)? else {
            return Ok(None);
        };
        match allowed.iter().find(|a| **a == s) {
            Some(a) => Ok(Some(a)),
            None => Err(FaultConfigError::at_value(
                p,
                format!("{key} must be one of {}, got '{s}'", quoted(allowed)),
            )),
        }
    }

    /// An inclusive range `[a, b]` of non-negative integers with `a <= b`.
    pub fn range(&mut self, key: &'static str) -> Result<Option<(u64, u64)>, FaultConfigError> {
        let Some(p) = self.raw(key) else {
            return Ok(None);
        };
        let bad = || {
            FaultConfigError::at_value(
                p,
                format!(
                    "{key} must be [a, b] with integers 0 <= a <= b, got {}",
                    p.value
                ),
            )
        };
        let toml::Value::Array(items) = &p.value else {
            return Err(bad());
        };
        match items.as_slice() {
            [toml::Value::Integer(a), toml::Value::Integer(b)] if 0 <= *a && a <= b => {
                Ok(Some((a.unsigned_abs(), b.unsigned_abs())))
            }
            _ => Err(bad()),
        }
    }

    /// The error for `key`'s value (at the value when it is present, else at the definition).
    pub fn invalid(&mut self, key: &'static str, message: &str) -> FaultConfigError {
        match self.raw(key) {
            Some(p) => FaultConfigError::at_value(p, message),
            None => FaultConfigError::at_def(self.def, Some(key), message),
        }
    }

    /// The error for a required key that is absent.
    pub fn missing(&self, key: &str) -> FaultConfigError {
        FaultConfigError::at_def(
            self.def,
            Some(key),
            format!("missing required key '{key}' for kind {}", self.kind),
        )
    }

    /// Declares `keys` known and rejects, before any value is read, every key not among the
    /// declared ones (so a misspelt key is reported as unknown, not as a missing one).
    pub fn declare<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k &'static str>,
    ) -> Result<(), FaultConfigError> {
        for k in keys {
            if !self.known.contains(k) {
                self.known.push(k);
            }
        }
        self.check_unknown()
    }

    /// Rejects every key that was not declared, naming the known keys.
    pub fn finish(self) -> Result<(), FaultConfigError> {
        self.check_unknown()
    }

    fn check_unknown(&self) -> Result<(), FaultConfigError> {
        for (p, seen) in self.def.params.iter().zip(&self.seen) {
            if !seen && !self.known.contains(&p.key.as_str()) {
                return Err(FaultConfigError {
                    key: Some(p.key.clone()),
                    span: p.key_span.clone(),
                    message: format!(
                        "unknown key '{}' for kind {}; known: {}",
                        p.key,
                        self.kind,
                        self.known.join(", ")
                    ),
                });
            }
        }
        Ok(())
    }
}

/// `'a', 'b' or 'c'`.
pub fn quoted(items: &[&str]) -> String {
    let q: Vec<String> = items.iter().map(|s| format!("'{s}'")).collect();
    match q.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}
