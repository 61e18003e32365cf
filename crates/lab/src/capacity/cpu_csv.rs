//! The CPU samples file `triage capacity sample` writes and `triage capacity` reads: CSV with
//! cumulative seconds of CPU by mode at each instant, so that any bucket's user, kernel and
//! idle shares are differences of two interpolated readings.
//!
//! ```text
//! # triage capacity sample: cgroup /sys/fs/cgroup/cpuacct/web (1 CPU), every 1s
//! unix_s,user_s,system_s,idle_s
//! 1764144000.000,12.310,4.020,0.000
//! ```
//!
//! For a cgroup or a process `idle_s` is what the CPUs it may use left unused since the first
//! sample (capacity times the elapsed time, less what it used).

use std::fmt::Write as _;

use super::CapacityError;

/// The header line (after any `#` comment lines).
pub const HEADER: &str = "unix_s,user_s,system_s,idle_s";

/// One reading: cumulative CPU seconds by mode at a wall-clock instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuSample {
    /// When (seconds since the Unix epoch, UTC): lines up the samples with the log's clock.
    pub unix_s: f64,
    /// User-mode seconds so far.
    pub user_s: f64,
    /// Kernel-mode seconds so far.
    pub system_s: f64,
    /// Idle seconds so far.
    pub idle_s: f64,
}

impl CpuSample {
    /// Every field of `self` minus `other`'s (the counters over an interval).
    pub fn minus(&self, other: &CpuSample) -> CpuSample {
        CpuSample {
            unix_s: self.unix_s - other.unix_s,
            user_s: self.user_s - other.user_s,
            system_s: self.system_s - other.system_s,
            idle_s: self.idle_s - other.idle_s,
        }
    }
}

/// One data line (no newline).
pub fn format_line(s: &CpuSample) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "{:.3},{:.6},{:.6},{:.6}",
        s.unix_s, s.user_s, s.system_s, s.idle_s
    );
    o
}

/// Parse a samples file: `#` comments, the [`HEADER`], then one reading per line, in time
/// order with counters that never go backwards. Every problem is an error naming the line.
pub fn parse_cpu_csv(text: &str) -> Result<Vec<CpuSample>, CapacityError> {
    let err = |line: usize, msg: String| CapacityError::CpuCsv { line, msg };
    let mut out: Vec<CpuSample> = Vec::new();
    let mut header = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if !header {
            if l != HEADER {
                return Err(err(
                    n,
                    format!("expected the header `{HEADER}`, found `{l}`"),
                ));
            }
            header = true;
            continue;
        }
        let f: Vec<&str> = l.split(',').collect();
        if f.len() != 4 {
            return Err(err(
                n,
                format!("expected 4 fields, found {}: `{l}`", f.len()),
            ));
        }
        let mut v = [0.0; 4];
        for (k, t) in f.iter().enumerate() {
            v[k] = t
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| err(n, format!("`{t}` is not a number")))?;
        }
        let s = CpuSample {
            unix_s: v[0],
            user_s: v[1],
            system_s: v[2],
            idle_s: v[3],
        };
        if let Some(p) = out.last() {
            if s.unix_s <= p.unix_s {
                return Err(err(
                    n,
                    format!(
                        "time {:.3} is not after the previous sample's {:.3}",
                        s.unix_s, p.unix_s
                    ),
                ));
            }
            if s.user_s < p.user_s || s.system_s < p.system_s {
                return Err(err(
                    n,
                    "a CPU counter went backwards (the sampled cgroup or process was replaced?)"
                        .into(),
                ));
            }
        }
        out.push(s);
    }
    if !header {
        return Err(err(
            0,
            format!("no header `{HEADER}`: not a CPU samples file"),
        ));
    }
    if out.len() < 2 {
        return Err(err(
            0,
            format!(
                "{} sample(s): at least two are needed to measure anything",
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// The counters at instant `t` (within the samples' span), linearly interpolated between
/// the two samples around it.
pub fn at(samples: &[CpuSample], t: f64) -> Option<CpuSample> {
    let first = samples.first()?;
    let last = samples.last()?;
    if t < first.unix_s || t > last.unix_s {
        return None;
    }
    let k = samples.partition_point(|s| s.unix_s < t);
    if k == 0 {
        return Some(*first);
    }
    let (a, b) = (samples[k - 1], samples[k]);
    let w = (t - a.unix_s) / (b.unix_s - a.unix_s);
    let lerp = |x: f64, y: f64| x + (y - x) * w;
    Some(CpuSample {
        unix_s: t,
        user_s: lerp(a.user_s, b.user_s),
        system_s: lerp(a.system_s, b.system_s),
        idle_s: lerp(a.idle_s, b.idle_s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: f64, u: f64, k: f64, i: f64) -> CpuSample {
        CpuSample {
            unix_s: t,
            user_s: u,
            system_s: k,
            idle_s: i,
        }
    }

    #[test]
    fn round_trip_and_interpolation() {
        let v = [s(100.0, 1.0, 2.0, 3.0), s(102.0, 3.0, 2.5, 4.0)];
        let text = format!(
            "# a comment\n{HEADER}\n{}\n{}\n",
            format_line(&v[0]),
            format_line(&v[1])
        );
        assert_eq!(parse_cpu_csv(&text).unwrap(), v);
        let m = at(&v, 101.0).unwrap();
        assert_eq!((m.user_s, m.system_s, m.idle_s), (2.0, 2.25, 3.5));
        assert!(at(&v, 99.0).is_none() && at(&v, 102.5).is_none());
        assert_eq!(at(&v, 100.0).unwrap(), v[0]);
    }

    #[test]
    fn bad_files_name_the_line() {
        let e = |t: &str| parse_cpu_csv(t).unwrap_err().to_string();
        assert!(e("").contains("no header"));
        assert!(e("time,cpu\n1,2\n").contains("line 1"));
        let h = format!("{HEADER}\n");
        assert!(e(&format!("{h}1,2,3\n")).contains("line 2: expected 4 fields"));
        assert!(e(&format!("{h}1,2,x,4\n")).contains("`x` is not a number"));
        assert!(e(&format!("{h}5,1,1,1\n4,2,2,2\n")).contains("line 3: time 4.000"));
        assert!(e(&format!("{h}5,3,1,1\n6,2,2,2\n")).contains("went backwards"));
        assert!(e(&format!("{h}5,3,1,1\n")).contains("1 sample(s)"));
    }
}
