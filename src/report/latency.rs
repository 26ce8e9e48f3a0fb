//! One latency histogram of a report, with its JSON form.
//!
//! Why: the report must carry full HdrHistograms (for `.hgrm`, `.hlog`, charts and any `pNN`
//! threshold evaluated later by `tearline report show`) while `report.json` stays readable.
//! Invariants: values are microseconds recorded with 3 significant digits; the JSON form holds a
//! readable summary *and* the histogram itself (`encoded`: V2 deflate, base64, the same encoding
//! as an `.hlog` line), and deserialising reads only `encoded`, so a JSON round trip is
//! lossless; the summary is always recomputed from the histogram, never trusted from input.

use std::io::Cursor;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

/// Significant decimal digits of every report histogram.
pub const SIGFIG: u8 = 3;

/// Errors of encoding or decoding a histogram.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The base64 text is not valid base64.
    #[error("histogram is not valid base64")]
    Base64(#[source] base64::DecodeError),
    /// The bytes are not a V2 (deflate) histogram.
    #[error("histogram bytes do not decode")]
    Decode(#[source] hdrhistogram::serialization::DeserializeError),
    /// Serialisation failed.
    #[error("histogram does not encode")]
    Encode(#[source] hdrhistogram::serialization::V2DeflateSerializeError),
}

/// An empty histogram of microseconds (auto-resizing, 3 significant digits).
pub fn new_histogram() -> Histogram<u64> {
    // Creation fails only for more than 5 significant digits; SIGFIG is a constant 3.
    Histogram::new(SIGFIG).expect("3 significant digits are a valid histogram precision")
}

/// Encodes `h` as base64 of its V2 deflate serialisation (as in `.hlog` lines).
pub fn encode(h: &Histogram<u64>) -> Result<String, CodecError> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(CodecError::Encode)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Decodes base64 V2 (deflate or plain) into a histogram.
pub fn decode(text: &str) -> Result<Histogram<u64>, CodecError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(CodecError::Base64)?;
    let mut h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut Cursor::new(bytes))
        .map_err(CodecError::Decode)?;
    h.auto(true);
    Ok(h)
}

/// A named latency histogram and the `.hgrm` file that shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Latency {
    /// The recorded values in microseconds.
    pub histogram: Histogram<u64>,
    /// File name (no directory) of its `.hgrm` in the report directory.
    pub hgrm: String,
    /// Tag of its intervals in `report.hlog`.
    pub tag: String,
}

/// The readable numbers of a histogram, all in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Recorded values.
    pub count: u64,
    /// Smallest value (0 when empty).
    pub min: u64,
    /// Arithmetic mean (0 when empty).
    pub mean: f64,
    /// 50th percentile.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    #[serde(rename = "p99.9")]
    pub p99_9: u64,
    /// Largest value (highest equivalent value of its bucket).
    pub max: u64,
}

impl Summary {
    /// The summary of `h`; all zeros when `h` is empty.
    pub fn of(h: &Histogram<u64>) -> Summary {
        if h.is_empty() {
            return Summary {
                count: 0,
                min: 0,
                mean: 0.0,
                p50: 0,
                p90: 0,
                p99: 0,
                p99_9: 0,
                max: 0,
            };
        }
        Summary {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p99_9: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// The JSON shape of a [`Latency`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LatencyJson {
    unit: String,
    #[serde(flatten)]
    summary: Summary,
    hgrm: String,
    tag: String,
    encoded: String,
}

impl Serialize for Latency {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let encoded = encode(&self.histogram).map_err(serde::ser::Error::custom)?;
        LatencyJson {
            unit: "us".to_owned(),
            summary: Summary::of(&self.histogram),
            hgrm: self.hgrm.clone(),
            tag: self.tag.clone(),
            encoded,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Latency {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let json = LatencyJson::deserialize(d)?;
        if json.unit != "us" {
            return Err(serde::de::Error::custom(format!(
                "histogram unit must be \"us\", found {:?}",
                json.unit
            )));
        }
        let histogram = decode(&json.encoded).map_err(serde::de::Error::custom)?;
        Ok(Latency {
            histogram,
            hgrm: json.hgrm,
            tag: json.tag,
        })
    }
}

/// Turns a free name into a file-name and hlog-tag safe word: ASCII letters, digits, `-`, `_`
/// and `.` are kept, anything else becomes `_`.
pub fn safe_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "_".to_owned() } else { s }
}

/// Formats microseconds with a readable unit (µs below 1 ms, ms below 1 s, else s).
pub fn human_us(us: f64) -> String {
    if us < 1_000.0 {
        format!("{us:.0}µs")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1_000.0)
    } else {
        format!("{:.2}s", us / 1_000_000.0)
    }
}
