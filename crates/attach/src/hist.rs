//! A fixed log-scale histogram of durations (microsecond buckets doubling from 1 us to about
//! 1 s), for the wake-up-to-lever latency and the event delivery delay: constant memory,
//! Prometheus-style cumulative buckets, quantiles by bucket upper bound.

/// Number of buckets: upper bounds 1, 2, 4, ... 2^20 us, then +Inf.
pub const BUCKETS: usize = 22;

/// See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hist {
    counts: [u64; BUCKETS],
    sum_ns: u128,
}

impl Default for Hist {
    fn default() -> Self {
        Self {
            counts: [0; BUCKETS],
            sum_ns: 0,
        }
    }
}

impl Hist {
    /// Upper bound of bucket `i` in microseconds (`None`: +Inf).
    pub fn bound_us(i: usize) -> Option<u64> {
        (i + 1 < BUCKETS).then(|| 1u64 << i)
    }

    /// Count one duration of `ns` nanoseconds.
    pub fn record(&mut self, ns: u64) {
        let us = ns.div_ceil(1000);
        let i = (0..BUCKETS - 1)
            .find(|&i| us <= 1u64 << i)
            .unwrap_or(BUCKETS - 1);
        self.counts[i] += 1;
        self.sum_ns += ns as u128;
    }

    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Sum of the durations (ns).
    pub fn sum_ns(&self) -> u128 {
        self.sum_ns
    }

    /// The upper bound (us) of the bucket holding quantile `q` (0..=1); `None` if empty or
    /// in the +Inf bucket.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let want = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut acc = 0;
        for (i, c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= want {
                return Self::bound_us(i);
            }
        }
        None
    }

    /// Cumulative counts per bucket (Prometheus `le` buckets).
    pub fn cumulative(&self) -> Vec<(Option<u64>, u64)> {
        let mut acc = 0;
        self.counts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                acc += c;
                (Self::bound_us(i), acc)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_quantiles() {
        let mut h = Hist::default();
        assert_eq!(h.quantile_us(0.99), None);
        for ns in [
            500,
            1000,
            1500,
            60_000,
            70_000,
            75_000,
            80_000,
            3_000_000_000,
        ] {
            h.record(ns);
        }
        assert_eq!(h.count(), 8);
        assert_eq!(h.quantile_us(0.0), Some(1));
        assert_eq!(h.quantile_us(0.25), Some(1), "500 ns and 1 us fit 1 us");
        assert_eq!(h.quantile_us(0.5), Some(64), "60 us");
        assert_eq!(h.quantile_us(0.75), Some(128));
        assert_eq!(h.quantile_us(1.0), None, "3 s is past the last bound");
        let c = h.cumulative();
        assert_eq!(c.last(), Some(&(None, 8)));
        assert_eq!(c[0], (Some(1), 2));
    }
}
