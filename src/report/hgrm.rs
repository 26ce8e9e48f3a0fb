//! `.hgrm` files: HdrHistogram's percentile-distribution text, exactly as wrk2 prints it.
//!
//! Why: the `.hgrm` layout is what HdrHistogram's plotter (`plotFiles.html`) and many scripts
//! read; producing it byte-for-byte like wrk2 (HdrHistogram_c's `hdr_percentiles_print`,
//! CLASSIC format, 5 ticks per half distance) lets users drop our files into those tools.
//! Invariants: one row per step of the quantile iterator (5 ticks per half distance to 100%);
//! columns: value (histogram value divided by the value-unit ratio, printed with as many
//! decimals as the histogram has significant digits), percentile as a fraction (`%12f`),
//! cumulative count, and 1/(1-percentile) (`inf` on the 100% row); the three `#[…]` footer lines
//! carry mean, standard deviation, max, total count, bucket and sub-bucket counts.
//! Report histograms are in microseconds and are written with ratio
//! [`WRK2_VALUE_UNIT_RATIO`] = 1000, so `.hgrm` values are milliseconds, as in wrk2.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// Ticks per half distance to 100% (wrk2 and HdrHistogram's default).
pub const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// µs → ms, the ratio wrk2 passes to `hdr_percentiles_print`.
pub const WRK2_VALUE_UNIT_RATIO: f64 = 1000.0;

/// One data row of an `.hgrm`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// Value, already divided by the value-unit ratio.
    pub value: f64,
    /// Percentile as a fraction in [0, 1].
    pub percentile: f64,
    /// Values recorded up to and including this row.
    pub total_count: u64,
}

/// The rows of `h`'s percentile distribution (empty for an empty histogram).
///
/// This is HdrHistogram_c's (and Java's) percentile iteration, done in percent as they do it
/// (the Rust crate's quantile iterator steps in fractions, and its float rounding moves some
/// rows one bucket away from wrk2's): a row is reported at a bucket when the cumulative
/// percentile reaches the next reporting level; levels advance by
/// 100 / (ticks · 2^(⌊log2(100 / (100 − level))⌋ + 1)); the bucket holding the largest value
/// reports at most one level, then the 100 % row repeats it.
pub fn rows(h: &Histogram<u64>, value_unit_ratio: f64) -> Vec<Row> {
    let total = h.len();
    let mut rows = Vec::new();
    if total == 0 {
        return rows;
    }
    let mut level = 0.0f64;
    let mut cumulative = 0u64;
    let mut value = 0u64;
    let row = |value: u64, level: f64, cumulative: u64| Row {
        value: value as f64 / value_unit_ratio,
        percentile: level / 100.0,
        total_count: cumulative,
    };
    for v in h.iter_recorded() {
        cumulative = cumulative.saturating_add(v.count_at_value());
        value = h.highest_equivalent(v.value_iterated_to());
        let current = 100.0 * cumulative as f64 / total as f64;
        let last_bucket = cumulative >= total;
        while level <= current && level < 100.0 {
            rows.push(row(value, level, cumulative));
            let halvings = (100.0 / (100.0 - level)).log2().floor() + 1.0;
            let ticks = f64::from(TICKS_PER_HALF_DISTANCE) * 2f64.powf(halvings);
            level += 100.0 / ticks;
            if last_bucket {
                break;
            }
        }
    }
    rows.push(row(value, 100.0, cumulative));
    rows
}

/// Sub-buckets per bucket for `sigfig` significant digits: the smallest power of two ≥
/// 2·10^sigfig (HdrHistogram's definition).
fn sub_bucket_count(sigfig: u8) -> u64 {
    (2 * 10u64.pow(u32::from(sigfig))).next_power_of_two()
}

/// The `.hgrm` text of `h` with values divided by `value_unit_ratio`.
pub fn render(h: &Histogram<u64>, value_unit_ratio: f64) -> String {
    let digits = usize::from(h.sigfig());
    let mut out = String::new();
    let _ = write!(
        out,
        "{:>12} {:>12} {:>12} {:>12}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    for row in rows(h, value_unit_ratio) {
        let inverted = 1.0 / (1.0 - row.percentile);
        let inverted = if inverted.is_finite() {
            format!("{inverted:>12.2}")
        } else {
            format!("{:>12}", "inf")
        };
        let _ = writeln!(
            out,
            "{:>12.digits$} {:>12.6} {:>12} {inverted}",
            row.value, row.percentile, row.total_count
        );
    }
    let (mean, stdev, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (h.mean(), h.stdev(), h.max() as f64)
    };
    let _ = writeln!(
        out,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        mean / value_unit_ratio,
        stdev / value_unit_ratio
    );
    let _ = writeln!(
        out,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        max / value_unit_ratio,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        sub_bucket_count(h.sigfig())
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_buckets_match_hdrhistogram_for_three_digits() {
        assert_eq!(sub_bucket_count(3), 2048);
        assert_eq!(sub_bucket_count(2), 256);
    }

    #[test]
    fn rows_report_at_the_exact_percentile_like_hdrhistogram_c_and_java() {
        // 1..=2000 µs are exact buckets: the 65 % row must be 1300 at count 1300 (the crate's
        // fractional quantile iterator, 0.6 + 0.05 > 0.65, would report 1301).
        let mut h = Histogram::<u64>::new(3).expect("valid precision");
        for v in 1..=2000u64 {
            h.record(v).expect("records");
        }
        let rows = rows(&h, 1.0);
        let at = |p: f64| {
            rows.iter()
                .find(|r| (r.percentile - p).abs() < 1e-12)
                .map(|r| (r.value, r.total_count))
        };
        assert_eq!(at(0.0), Some((1.0, 1)));
        assert_eq!(at(0.65), Some((1300.0, 1300)));
        assert_eq!(at(0.9), Some((1800.0, 1800)));
        let tail: Vec<(f64, f64, u64)> = rows[rows.len() - 2..]
            .iter()
            .map(|r| (r.value, r.percentile, r.total_count))
            .collect();
        assert_eq!(
            tail[1],
            (2000.0, 1.0, 2000),
            "the 100 % row repeats the max"
        );
        assert_eq!(tail[0].0, 2000.0);
        assert!(rows.windows(2).all(|w| w[0].percentile < w[1].percentile));
    }

    #[test]
    fn last_row_is_the_max_at_percentile_one_with_inf() {
        let mut h = Histogram::<u64>::new(3).expect("valid precision");
        for v in 1..=1000u64 {
            h.record(v * 10).expect("auto-resize histogram records");
        }
        let text = render(&h, 1000.0);
        let last = text
            .lines()
            .rfind(|l| !l.starts_with('#'))
            .expect("has rows");
        assert!(last.ends_with("inf"), "{last}");
        assert!(last.contains("1.000000"), "{last}");
        assert!(text.starts_with("       Value   Percentile   TotalCount 1/(1-Percentile)\n\n"));
    }
}
