//! Buckets of wall-clock time (seed 002: 15 minutes), each with its request rate (from the
//! access log's timestamps) and its user, kernel and idle shares of the CPU (from the CPU
//! samples): the points the regressions are fitted on. Pure.
//!
//! Buckets start at whole multiples of their width since the Unix epoch, inside the span
//! both sources cover; a log timestamp (whole seconds, as Combined Log Format writes it)
//! counts in the bucket holding that second.

use serde::Serialize;

use super::cpu_csv::{at, CpuSample};
use super::regress::MIN_POINTS;
use super::CapacityError;

/// One bucket: its rate and CPU shares.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bucket {
    /// Start (seconds since the Unix epoch).
    pub start_unix: i64,
    /// Its width (s): the bucket width, or a step's whole seconds (`--steps`).
    pub width_s: u64,
    /// A step's partial first and last seconds counted in, as the fraction of a second they
    /// stand for (`--steps`; 0 for fixed buckets): the bucket spans `width_s + edge_s`.
    pub edge_s: f64,
    /// Requests logged in it.
    pub requests: u64,
    /// A step's drain (`--steps`; 0 for fixed buckets): the requests logged in the second
    /// after it, beyond what its own partial last second would hold. An open-loop step the
    /// server kept up with ends with its rate; one it fell behind leaves a queue that is
    /// served after the rate ended ([`super::steps::fell_behind`]).
    pub drain_requests: u64,
    /// `requests` per second of the bucket (over `width_s + edge_s`).
    pub rate: f64,
    /// User-mode share of the CPU (%).
    pub user_pct: f64,
    /// Kernel-mode share (%).
    pub kernel_pct: f64,
    /// Idle share (%).
    pub idle_pct: f64,
}

/// The buckets of a log and its CPU samples, and what fell outside them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bucketed {
    /// Width of every bucket (s); with `steps`, the shortest step kept.
    pub width_s: u64,
    /// The buckets are the steps of a rate ladder ([`super::steps`]), each with its own
    /// width, not fixed-width buckets.
    pub steps: bool,
    /// The buckets, in time order.
    pub buckets: Vec<Bucket>,
    /// Requests logged outside every bucket (before the CPU samples start, after they end,
    /// or in a partial bucket at either end): counted, not used.
    pub requests_outside: u64,
}

/// Seconds since the epoch, as `2026-11-26 09:15:00 UTC`.
pub fn utc(unix: f64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix.floor() as i64)
        .map(|t| {
            format!(
                "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
                t.year(),
                t.month() as u8,
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            )
        })
        .unwrap_or_else(|_| format!("{unix} s"))
}

/// Where the log's requests and the CPU samples overlap (unix seconds), and both spans for the
/// error that says they do not.
pub(super) struct Overlap {
    /// Start of the overlap.
    pub start: f64,
    /// End of the overlap.
    pub end: f64,
    /// The log's span: its first request's second to the end of its last's.
    log: (f64, f64),
    /// The CPU samples' span.
    cpu: (f64, f64),
}

impl Overlap {
    /// The overlap of `times` (request seconds) and `samples`; an error if either is empty.
    pub fn of(times: &[i64], samples: &[CpuSample]) -> Result<Self, CapacityError> {
        let (Some(&lo), Some(&hi)) = (times.iter().min(), times.iter().max()) else {
            return Err(CapacityError::Config("the log has no request".into()));
        };
        let cpu = match (samples.first(), samples.last()) {
            (Some(a), Some(b)) => (a.unix_s, b.unix_s),
            _ => return Err(CapacityError::Config("no CPU sample".into())),
        };
        let log = (lo as f64, (hi + 1) as f64);
        Ok(Self {
            start: log.0.max(cpu.0),
            end: log.1.min(cpu.1),
            log,
            cpu,
        })
    }

    /// The error for spans that do not overlap (enough).
    pub fn none(&self) -> CapacityError {
        CapacityError::NoOverlap {
            log: format!("{} .. {}", utc(self.log.0), utc(self.log.1)),
            cpu: format!("{} .. {}", utc(self.cpu.0), utc(self.cpu.1)),
        }
    }
}

/// Bucket the request `times` (seconds since the epoch, any order) against the CPU
/// `samples` (time order). Errors: clocks that do not overlap, fewer than
/// [`MIN_POINTS`] whole buckets in the overlap.
pub fn bucketize(
    times: &[i64],
    samples: &[CpuSample],
    width_s: u64,
) -> Result<Bucketed, CapacityError> {
    if width_s == 0 {
        return Err(CapacityError::Config("--bucket must be at least 1s".into()));
    }
    let ov = Overlap::of(times, samples)?;
    let (o0, o1) = (ov.start, ov.end);
    if o0 >= o1 {
        return Err(ov.none());
    }
    let w = width_s as i64;
    let first = (o0.ceil() as i64).div_euclid(w) * w;
    let first = if (first as f64) < o0 {
        first + w
    } else {
        first
    };
    let mut starts = Vec::new();
    let mut s = first;
    while ((s + w) as f64) <= o1 {
        starts.push(s);
        s += w;
    }
    if starts.len() < MIN_POINTS {
        return Err(CapacityError::TooFewBuckets {
            got: starts.len(),
            need: MIN_POINTS,
            width_s,
            overlap_s: o1 - o0,
        });
    }
    let mut counts = vec![0u64; starts.len()];
    let mut outside = 0;
    for &t in times {
        let k = (t - first).div_euclid(w);
        if t >= first && (k as usize) < counts.len() {
            counts[k as usize] += 1;
        } else {
            outside += 1;
        }
    }
    let mut buckets = Vec::with_capacity(starts.len());
    for (k, &s) in starts.iter().enumerate() {
        let a = at(samples, s as f64).expect("inside the samples' span");
        let b = at(samples, (s + w) as f64).expect("inside the samples' span");
        let d = b.minus(&a);
        let total = d.user_s + d.system_s + d.idle_s;
        let pct = |x: f64| if total > 0.0 { 100.0 * x / total } else { 0.0 };
        buckets.push(Bucket {
            start_unix: s,
            width_s,
            edge_s: 0.0,
            requests: counts[k],
            drain_requests: 0,
            rate: counts[k] as f64 / width_s as f64,
            user_pct: pct(d.user_s),
            kernel_pct: pct(d.system_s),
            idle_pct: pct(d.idle_s),
        });
    }
    Ok(Bucketed {
        width_s,
        steps: false,
        buckets,
        requests_outside: outside,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sample a second from t0 for `n` seconds; in second k the CPU is busy `busy(k)`
    /// (of one CPU), a quarter of it in the kernel.
    fn samples(t0: i64, n: usize, busy: impl Fn(usize) -> f64) -> Vec<CpuSample> {
        let mut v = vec![CpuSample {
            unix_s: t0 as f64,
            user_s: 0.0,
            system_s: 0.0,
            idle_s: 0.0,
        }];
        for k in 0..n {
            let p = *v.last().unwrap();
            let b = busy(k);
            v.push(CpuSample {
                unix_s: p.unix_s + 1.0,
                user_s: p.user_s + 0.75 * b,
                system_s: p.system_s + 0.25 * b,
                idle_s: p.idle_s + 1.0 - b,
            });
        }
        v
    }

    #[test]
    fn rates_and_shares_per_bucket() {
        // 12 s of samples from t = 1000; 10 requests a second in 1000..1004, 30 after.
        let cpu = samples(1000, 12, |k| if k < 4 { 0.2 } else { 0.6 });
        let mut times = Vec::new();
        for s in 1000..1012 {
            let n = if s < 1004 { 10 } else { 30 };
            times.extend(std::iter::repeat_n(s, n));
        }
        times.extend([990, 1013]); // outside the samples
        let b = bucketize(&times, &cpu, 4).unwrap();
        assert_eq!(b.buckets.len(), 3);
        assert_eq!(b.requests_outside, 2);
        let b0 = b.buckets[0];
        assert_eq!((b0.start_unix, b0.requests, b0.rate), (1000, 40, 10.0));
        assert!((b0.idle_pct - 80.0).abs() < 1e-9 && (b0.user_pct - 15.0).abs() < 1e-9);
        assert!((b0.kernel_pct - 5.0).abs() < 1e-9);
        let b1 = b.buckets[1];
        assert_eq!((b1.start_unix, b1.rate), (1004, 30.0));
        assert!((b1.idle_pct - 40.0).abs() < 1e-9);
    }

    #[test]
    fn buckets_align_to_whole_widths_and_drop_partial_ones() {
        let cpu = samples(1001, 20, |_| 0.5);
        let times: Vec<i64> = (1001..1021).collect();
        let b = bucketize(&times, &cpu, 5).unwrap();
        let starts: Vec<i64> = b.buckets.iter().map(|b| b.start_unix).collect();
        assert_eq!(starts, [1005, 1010, 1015]);
        assert_eq!(b.requests_outside, 5); // 1001..1004 and 1020
    }

    #[test]
    fn clocks_that_do_not_overlap_and_too_few_buckets_are_errors() {
        let cpu = samples(1000, 10, |_| 0.5);
        let e = bucketize(&[5000, 5001], &cpu, 1).unwrap_err().to_string();
        assert!(e.contains("do not overlap") && e.contains("UTC"), "{e}");
        let e = bucketize(&[1000, 1009], &cpu, 4).unwrap_err().to_string();
        assert!(e.contains("2 bucket"), "{e}");
        assert!(bucketize(&[], &cpu, 1).is_err());
        assert!(bucketize(&[1000], &cpu, 0).is_err());
    }
}
