//! The validity period of an X.509 certificate, read from its DER, for the one check a pinned
//! certificate still gets besides its name (see [`super::pin`]): webpki reads the period only
//! inside a chain verification, which a pinned self-signed CA certificate never passes.
//!
//! Invariant: only the path `Certificate → tbsCertificate → validity` is read, with definite
//! DER lengths; anything else (a long form over four bytes, a wrong tag, a short input, an
//! impossible date) is `None`, never a panic.

/// `(notBefore, notAfter)` of the DER certificate `cert`, in seconds since the Unix epoch
/// (dates before 1970 count as 0).
pub(super) fn validity(cert: &[u8]) -> Option<(u64, u64)> {
    let (tag, body, _) = tlv(cert)?;
    expect(tag, 0x30)?;
    let (tag, tbs, _) = tlv(body)?;
    expect(tag, 0x30)?;
    let mut rest = tbs;
    // `[0] EXPLICIT Version`, absent in v1 certificates.
    if let Some((0xA0, _, after)) = tlv(rest) {
        rest = after;
    }
    // serialNumber INTEGER, signature AlgorithmIdentifier, issuer Name.
    for want in [0x02, 0x30, 0x30] {
        let (tag, _, after) = tlv(rest)?;
        expect(tag, want)?;
        rest = after;
    }
    let (tag, period, _) = tlv(rest)?;
    expect(tag, 0x30)?;
    let (t1, not_before, after) = tlv(period)?;
    let (t2, not_after, _) = tlv(after)?;
    Some((time(t1, not_before)?, time(t2, not_after)?))
}

fn expect(tag: u8, want: u8) -> Option<()> {
    (tag == want).then_some(())
}

/// One DER element: `(tag, value, rest)`.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let (bytes, rest) = rest.split_at_checked(n)?;
        let len = bytes.iter().fold(0usize, |a, &b| (a << 8) | usize::from(b));
        (len, rest)
    };
    let (value, rest) = rest.split_at_checked(len)?;
    Some((tag, value, rest))
}

/// A `UTCTime` (tag 0x17, `YYMMDDHHMMSSZ`, years 1950–2049) or `GeneralizedTime` (tag 0x18,
/// `YYYYMMDDHHMMSSZ`), as RFC 5280 §4.1.2.5 requires them, in seconds since the epoch.
fn time(tag: u8, v: &[u8]) -> Option<u64> {
    let (year, rest) = match (tag, v.len()) {
        (0x17, 13) => {
            let yy = digits(&v[..2])?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &v[2..])
        }
        (0x18, 15) => (digits(&v[..4])?, &v[4..]),
        _ => return None,
    };
    if rest[10] != b'Z' {
        return None;
    }
    let month = digits(&rest[0..2])?;
    let day = digits(&rest[2..4])?;
    let hour = digits(&rest[4..6])?;
    let minute = digits(&rest[6..8])?;
    let second = digits(&rest[8..10])?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // RFC 5280 allows a leap second only as 59; a 60 is taken as it is written.
    if second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second;
    Some(u64::try_from(secs).unwrap_or(0))
}

fn digits(s: &[u8]) -> Option<i64> {
    s.iter().try_fold(0i64, |a, &b| {
        b.is_ascii_digit().then(|| a * 10 + i64::from(b - b'0'))
    })
}

/// Days from 1970-01-01 to the proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(not_before: (i32, u8, u8), not_after: (i32, u8, u8)) -> Vec<u8> {
        let mut p = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        p.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
        p.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        let key = rcgen::KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn utc_and_generalized_times_give_the_dates_written() {
        // rcgen writes UTCTime up to 2049 and GeneralizedTime from 2050 on.
        let der = cert((2024, 2, 29), (2051, 1, 1));
        assert_eq!(validity(&der), Some((1_709_164_800, 2_556_144_000)));
    }

    #[test]
    fn dates_before_1970_count_as_zero() {
        let der = cert((1960, 1, 1), (1971, 1, 1));
        assert_eq!(validity(&der), Some((0, 31_536_000)));
    }

    #[test]
    fn every_truncation_of_a_certificate_is_none_and_no_panic() {
        let der = cert((2024, 1, 1), (2025, 1, 1));
        assert!(validity(&der).is_some());
        for n in 0..der.len() {
            assert_eq!(validity(&der[..n]), None, "cut at {n}");
        }
        assert_eq!(validity(b"\x30\x85\x00\x00\x00\x00\x01"), None);
    }

    #[test]
    fn impossible_dates_are_refused() {
        assert_eq!(time(0x17, b"241301000000Z"), None);
        assert_eq!(time(0x17, b"240100000000Z"), None);
        assert_eq!(time(0x17, b"24010100000Z0"), None);
        assert_eq!(time(0x18, b"2024010100000Z"), None);
        assert_eq!(time(0x17, b"700101000001Z"), Some(1));
    }
}
