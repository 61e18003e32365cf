//! # units: one way to write a duration, a size and a rate
//!
//! Every flag of every `triage` subcommand and every field of every TOML file parses its
//! durations, sizes and rates here, so `5s` and `16KiB` mean the same thing everywhere.
//!
//! The rules (also in the README):
//! - **A duration always carries its unit**: `ns`, `us` (or `µs`), `ms`, `s`, `m` (or `min`),
//!   `h`; a fraction is allowed (`1.5s`). A bare number is an error, because nginx reads `5`
//!   as seconds and HAProxy as milliseconds, and triage's own subcommands used to disagree too.
//! - **A size is bytes unless it says otherwise**: a bare number is bytes; `KB`, `MB`, `GB`,
//!   `TB` (also `kB`) are powers of 1000; `KiB`, `MiB`, `GiB`, `TiB` (also `Ki`, `Mi`, ...)
//!   are powers of 1024. A bare `k`, `m` or `g` is an error that names both readings, since
//!   nginx reads `16k` as 16384 and a network tool as 16000.
//! - **A rate** is a size per second (`200KB/s`, `1MiB/s`) or bits per second (`10Mbit`,
//!   `10Mbit/s`, `10Mbps`), decimal prefixes for bits as every network tool does.
//!
//! [`serde`] holds the deserializers for TOML fields: a string uses the rules above; an
//! integer is accepted for a size (bytes) and refused for a duration, with a message saying
//! how to write it.

#![warn(missing_docs)]

use std::fmt;
use std::time::Duration;

pub mod serde;

/// Why a string is not a duration, size or rate. The message quotes the input and says how
/// to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(String);

impl UnitError {
    fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

/// The longest duration accepted: about 31 years, far beyond any timeout or run, and small
/// enough that nanoseconds fit in a `u64`.
pub const MAX_DURATION: Duration = Duration::from_secs(1_000_000_000);

/// Split `s` into its leading number and the rest (the unit, trimmed).
fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    (num, unit.trim())
}

/// A decimal number as written: integer digits and fraction digits, kept exact.
struct Decimal<'a> {
    int: &'a str,
    frac: &'a str,
}

impl Decimal<'_> {
    /// `self * scale`, rounded to the nearest integer; `None` on overflow.
    fn times(&self, scale: u128) -> Option<u128> {
        let int: u128 = if self.int.is_empty() {
            0
        } else {
            self.int.parse().ok()?
        };
        let mut out = int.checked_mul(scale)?;
        if !self.frac.is_empty() {
            let digits = self.frac.len().min(30) as u32;
            let frac: u128 = self.frac[..digits as usize].parse().ok()?;
            let den = 10u128.checked_pow(digits)?;
            out = out.checked_add((frac.checked_mul(scale)? + den / 2) / den)?;
        }
        Some(out)
    }
}

fn number<'a>(
    num: &'a str,
    whole: &str,
    what: &str,
    example: &str,
) -> Result<Decimal<'a>, UnitError> {
    if whole.starts_with('-') {
        return Err(UnitError::new(format!(
            "`{whole}`: a {what} cannot be negative"
        )));
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(UnitError::new(format!(
            "`{whole}` is not a {what} (e.g. {example})"
        )));
    }
    Ok(Decimal { int, frac })
}

/// Parse a duration such as `500ms`, `2s`, `1.5m`, `250us`. The unit is required.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let t = s.trim();
    let (num, unit) = split_number(t);
    let v = number(num, t, "duration", "500ms, 2s, 1.5m")?;
    let scale: u128 = match unit {
        "" => {
            return Err(UnitError::new(format!(
                "`{t}` has no unit: write `{t}ms` or `{t}s` (units: ns, us, ms, s, m, h)"
            )))
        }
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        u => {
            return Err(UnitError::new(format!(
                "`{t}`: unknown duration unit `{u}` (units: ns, us, ms, s, m, h)"
            )))
        }
    };
    match v.times(scale) {
        Some(ns) if ns <= MAX_DURATION.as_nanos() => Ok(Duration::from_nanos(ns as u64)),
        _ => Err(UnitError::new(format!("`{t}` is out of range"))),
    }
}

/// Parse `off` (no duration) or a duration.
pub fn parse_opt_duration(s: &str) -> Result<Option<Duration>, UnitError> {
    if s.trim() == "off" {
        return Ok(None);
    }
    parse_duration(s).map(Some)
}

/// A duration that must be longer than zero (timeouts, periods, run lengths).
pub fn parse_positive_duration(s: &str) -> Result<Duration, UnitError> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(UnitError::new(format!(
            "`{}` must be longer than zero",
            s.trim()
        )));
    }
    Ok(d)
}

/// The multiplier of a size prefix (`K`, `Ki`, ...; without the `B`), or an error message.
fn size_scale(prefix: &str, whole: &str) -> Result<u128, UnitError> {
    Ok(match prefix {
        "" => 1,
        "K" | "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" | "ki" | "KI" => 1 << 10,
        "Mi" | "MI" => 1 << 20,
        "Gi" | "GI" => 1 << 30,
        "Ti" | "TI" => 1 << 40,
        u => {
            return Err(UnitError::new(format!(
                "`{whole}`: unknown size unit `{u}` (bytes, or KB/MB/GB = 1000^n, KiB/MiB/GiB = 1024^n)"
            )))
        }
    })
}

/// Parse a size in bytes: `8192`, `16KiB` (16384), `64KB` (64000), `1.5MiB`.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    let (num, unit) = split_number(t);
    let v = number(num, t, "size", "8192, 16KiB, 64KB")?;
    let prefix = match unit {
        "k" | "K" | "m" | "M" | "g" | "G" | "t" | "T" => {
            let upper = unit.to_ascii_uppercase();
            return Err(UnitError::new(format!(
                "`{t}` is ambiguous: write `{num}{upper}iB` ({}) or `{num}{upper}B` ({})",
                v.times(size_scale(&format!("{upper}i"), t)?)
                    .unwrap_or(u128::MAX),
                v.times(size_scale(&upper, t)?).unwrap_or(u128::MAX),
            )));
        }
        u => u
            .strip_suffix('B')
            .or_else(|| u.strip_suffix("bytes"))
            .or_else(|| u.strip_suffix('b').filter(|_| u == "b"))
            .unwrap_or(u),
    };
    let prefix = if prefix == "m" { "M" } else { prefix };
    match v.times(size_scale(prefix, t)?) {
        Some(b) if b <= u64::MAX as u128 => Ok(b as u64),
        _ => Err(UnitError::new(format!("`{t}` is out of range"))),
    }
}

/// Parse a rate in bytes per second: `200KB/s`, `1MiB/s`, `10Mbit`, `10Mbit/s`, `10Mbps`, or
/// a bare number of bytes per second. Bits use decimal prefixes and are divided by 8.
pub fn parse_rate(s: &str) -> Result<f64, UnitError> {
    let t = s.trim();
    let body = t.strip_suffix("/s").unwrap_or(t);
    let (body, bits) = if let Some(b) = body.strip_suffix("bps") {
        (b, true)
    } else if let Some(b) = body.strip_suffix("bit") {
        (b, true)
    } else {
        (body, false)
    };
    let v = if bits {
        let (num, prefix) = split_number(body.trim());
        let n = number(num, t, "rate", "10Mbit, 200KB/s")?;
        let scale: u128 = match prefix {
            "" => 1,
            "k" | "K" => 1_000,
            "M" => 1_000_000,
            "G" => 1_000_000_000,
            u => {
                return Err(UnitError::new(format!(
                    "`{t}`: unknown bit-rate prefix `{u}` (k, M, G)"
                )))
            }
        };
        n.times(scale)
            .ok_or_else(|| UnitError::new(format!("`{t}` is out of range")))? as f64
            / 8.0
    } else {
        parse_size(body).map_err(|e| UnitError::new(format!("rate {e}")))? as f64
    };
    if v < 1.0 {
        return Err(UnitError::new(format!(
            "`{t}`: a rate must be at least 1 byte/s"
        )));
    }
    Ok(v)
}

/// A duration written the way [`parse_duration`] reads it back, in the largest unit that
/// keeps it whole (`1500ms`, `2s`, `250us`).
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, per) in [
        ("h", 3_600_000_000_000u128),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns != 0 && ns.is_multiple_of(per) {
            return format!("{}{unit}", ns / per);
        }
    }
    format!("{ns}ns")
}

/// A size written the way [`parse_size`] reads it back, in the largest binary unit that keeps
/// it whole (`16KiB`, `4096` stays `4KiB`, `1000` stays `1000`).
pub fn format_size(bytes: u64) -> String {
    for (unit, per) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes != 0 && bytes.is_multiple_of(per) {
            return format!("{}{unit}", bytes / per);
        }
    }
    bytes.to_string()
}

/// A [`Duration`] that displays as [`format_duration`] writes it and parses from a string with
/// [`parse_duration`]; handy as a clap argument type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(pub Duration);

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

impl std::str::FromStr for Dur {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_duration(s).map(Dur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration(" 1.5m ").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("250µs").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("7ns").unwrap(), Duration::from_nanos(7));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("0.1s").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
        let e = parse_duration("5").unwrap_err().to_string();
        assert!(
            e.contains("no unit") && e.contains("5ms") && e.contains("5s"),
            "{e}"
        );
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-1s")
            .unwrap_err()
            .to_string()
            .contains("negative"));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("1e99h").is_err());
    }

    #[test]
    fn off_and_positive_durations() {
        assert_eq!(parse_opt_duration("off").unwrap(), None);
        assert_eq!(
            parse_opt_duration("3s").unwrap(),
            Some(Duration::from_secs(3))
        );
        assert!(parse_positive_duration("0s").is_err());
        assert!(parse_positive_duration("1ms").is_ok());
    }

    #[test]
    fn sizes_decimal_binary_and_the_ambiguous_k() {
        assert_eq!(parse_size("8192").unwrap(), 8192);
        assert_eq!(parse_size("16KiB").unwrap(), 16384);
        assert_eq!(parse_size("16Ki").unwrap(), 16384);
        assert_eq!(parse_size("64KB").unwrap(), 64000);
        assert_eq!(parse_size("64kB").unwrap(), 64000);
        assert_eq!(parse_size("1.5MiB").unwrap(), 1_572_864);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("10B").unwrap(), 10);
        assert_eq!(parse_size("0").unwrap(), 0);
        let e = parse_size("16k").unwrap_err().to_string();
        assert!(
            e.contains("16KiB") && e.contains("16384") && e.contains("16000"),
            "{e}"
        );
        assert!(parse_size("1m").is_err());
        assert!(parse_size("12 furlongs").is_err());
        assert!(parse_size("-3").is_err());
        assert!(parse_size("99999999999TiB").is_err());
    }

    #[test]
    fn rates_in_bytes_or_bits() {
        assert_eq!(parse_rate("10Mbit").unwrap(), 1_250_000.0);
        assert_eq!(parse_rate("10Mbit/s").unwrap(), 1_250_000.0);
        assert_eq!(parse_rate("10Mbps").unwrap(), 1_250_000.0);
        assert_eq!(parse_rate("200KB/s").unwrap(), 200_000.0);
        assert_eq!(parse_rate("64KiB/s").unwrap(), 65_536.0);
        assert_eq!(parse_rate("5000").unwrap(), 5000.0);
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("10k/s").is_err());
    }

    #[test]
    fn formats_read_back() {
        for d in [
            Duration::from_millis(1500),
            Duration::from_secs(2),
            Duration::from_micros(250),
            Duration::from_nanos(3),
            Duration::from_secs(7200),
            Duration::ZERO,
        ] {
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        for b in [0, 1000, 4096, 16384, 3 << 20, 5 << 30, 12345] {
            assert_eq!(parse_size(&format_size(b)).unwrap(), b);
        }
        assert_eq!(format_size(16384), "16KiB");
        let d: Dur = "3s".parse().unwrap();
        assert_eq!(d.to_string(), "3s");
    }

    proptest::proptest! {
        #[test]
        fn every_formatted_duration_parses_back(ns in 0u64..=1_000_000_000_000_000_000u64) {
            let d = Duration::from_nanos(ns);
            proptest::prop_assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }

        #[test]
        fn every_formatted_size_parses_back(b in 0u64..(1u64 << 50)) {
            proptest::prop_assert_eq!(parse_size(&format_size(b)).unwrap(), b);
        }

        #[test]
        fn no_input_panics(s in "\\PC{0,12}") {
            let _ = parse_duration(&s);
            let _ = parse_size(&s);
            let _ = parse_rate(&s);
        }
    }
}
