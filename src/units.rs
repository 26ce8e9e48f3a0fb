//! Human units on the command line: durations (`250ms`, `1.5s`, `2m`, `1h`) and sizes
//! (`4096`, `64KiB`, `1MiB`), parsed the same way by every subcommand.
//!
//! Why one module: three subcommands once had three parsers that disagreed on what a bare
//! number meant; a duration without a unit is now an error that says how to write one. The
//! one small, stable hash (FNV-1a) lives here too, at the bottom of the layers, for the two
//! places that need a hash fixed across runs and platforms (the per-connection RNG's seed
//! mix, the audit's params fingerprint).

use std::time::Duration;

/// A duration in whole milliseconds, saturating at `u64::MAX` (the one conversion reports,
/// records and logs use, so no two of them round or overflow differently).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// FNV-1a, 64 bits: stable across runs, platforms and versions (seeds depend on it).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Parses `250ms`, `1.5s`, `2m` (or `2min`), `1h` into a duration. A unit is required.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (examples: 250ms, 5s, 2m)"))?;
    let secs = match unit.trim() {
        "ms" => value / 1000.0,
        "s" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        "" => return Err(format!("'{s}' needs a unit (examples: {s}ms, {s}s)")),
        _ => {
            return Err(format!(
                "'{s}' has an unknown duration unit (use ms, s, m, h)"
            ));
        }
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("'{s}' is out of range"))
}

/// Parses `64KiB`, `1MiB`, `4096`, `8K`, `2MB` (binary multiples) into bytes (at least 1).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 4096, 64KiB, 1MiB)"))?;
    let mult: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        "g" | "gb" | "gib" => 1024 * 1024 * 1024,
        _ => {
            return Err(format!(
                "'{s}' has an unknown size unit (use B, KiB, MiB, GiB)"
            ));
        }
    };
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))?;
    if bytes == 0 {
        return Err(format!("'{s}' must be at least 1 byte"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn durations_need_a_known_unit() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        let bare = parse_duration("250").unwrap_err();
        assert!(bare.contains("needs a unit"), "{bare}");
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn sizes_take_binary_multiples() {
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12parsecs").is_err());
    }
}
