//! 95% confidence intervals for the improvements every lab reports.
//!
//! One way to write an interval, used by every lab: a percentile bootstrap, seeded so a report
//! is reproducible. An improvement is the paper's `(a - b) / a` of two means (`a` the
//! baseline, `b` the variant): [`improvement_ci95`] resamples the two samples independently
//! (pages of two variants are independent draws); [`mean_ci95`] resamples one sample (for
//! example one improvement per repetition, when pages within a repetition are not independent).
//! [`Ci95::clears`] says whether a whole interval is on the right side of a goal, and
//! [`reps_for_width`] how many samples a target width needs.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// Resamples per interval: enough for stable 2.5/97.5 percentiles, cheap next to a lab run.
pub const RESAMPLES: usize = 2000;

/// A 95% interval `[low, high]`; serialized as a two-element array (`"ci95": [low, high]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ci95 {
    /// The 2.5th percentile of the bootstrap distribution.
    pub low: f64,
    /// The 97.5th percentile of the bootstrap distribution.
    pub high: f64,
}

impl Serialize for Ci95 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        [self.low, self.high].serialize(s)
    }
}

impl Ci95 {
    /// Whether the whole interval is at or above `goal` (the goal is met with 95% confidence).
    pub fn clears(&self, goal: f64) -> bool {
        self.low >= goal
    }

    /// Whether the interval excludes 0 (the sign of the effect is settled).
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }

    /// `high - low`.
    pub fn width(&self) -> f64 {
        self.high - self.low
    }

    /// `[low, high]` as percentages with one decimal, for reports: `[+12.3%, +40.1%]`.
    pub fn pct(&self) -> String {
        format!("[{:+.1}%, {:+.1}%]", self.low * 100.0, self.high * 100.0)
    }
}

/// The mean of `v`, or NaN when empty (an interval of nothing is not zero).
fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// One resample of `v` with replacement, summed (its mean is `sum / v.len()`).
fn resample_mean(v: &[f64], rng: &mut ChaCha8Rng) -> f64 {
    let sum: f64 = (0..v.len()).map(|_| v[rng.gen_range(0..v.len())]).sum();
    sum / v.len() as f64
}

/// The 2.5th and 97.5th percentiles of `draws` (sorted here), NaNs dropped.
fn percentiles(mut draws: Vec<f64>) -> Option<Ci95> {
    draws.retain(|x| x.is_finite());
    if draws.is_empty() {
        return None;
    }
    draws.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| draws[((draws.len() - 1) as f64 * q).round() as usize];
    Some(Ci95 {
        low: at(0.025),
        high: at(0.975),
    })
}

/// The 95% interval of `(mean(a) - mean(b)) / mean(a)`, resampling `a` and `b` independently;
/// `None` when either sample is empty or every resample has a zero baseline.
pub fn improvement_ci95(a: &[f64], b: &[f64], seed: u64) -> Option<Ci95> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let draws = (0..RESAMPLES)
        .map(|_| {
            let ma = resample_mean(a, &mut rng);
            let mb = resample_mean(b, &mut rng);
            (ma - mb) / ma
        })
        .collect();
    percentiles(draws)
}

/// The 95% interval of the mean of `v` (for example one improvement per repetition); `None`
/// when `v` is empty.
pub fn mean_ci95(v: &[f64], seed: u64) -> Option<Ci95> {
    if v.is_empty() {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    percentiles((0..RESAMPLES).map(|_| resample_mean(v, &mut rng)).collect())
}

/// The 95% interval of `stat` over `v`, resampled with replacement (for a statistic other
/// than the mean: [`mean_ci95`] is the same for the mean without a vector per resample);
/// `None` when `v` is empty.
pub fn statistic_ci95(v: &[f64], seed: u64, stat: impl Fn(&[f64]) -> f64) -> Option<Ci95> {
    if v.is_empty() {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    percentiles(
        (0..RESAMPLES)
            .map(|_| {
                let s: Vec<f64> = (0..v.len()).map(|_| v[rng.gen_range(0..v.len())]).collect();
                stat(&s)
            })
            .collect(),
    )
}

/// How many samples an interval of `width` needs, from one measured with `n` samples and
/// width `measured` (an interval narrows as `1/sqrt(n)`); `None` when either width is not
/// positive.
pub fn reps_for_width(n: usize, measured: f64, width: f64) -> Option<usize> {
    if !(measured > 0.0 && width > 0.0) || n == 0 {
        return None;
    }
    Some(((n as f64) * (measured / width).powi(2)).ceil() as usize)
}

/// One cluster of paired observations for [`paired_cluster_improvement_ci95`]: the baseline's
/// and the variant's values measured on the same arrivals (one burst of one repetition).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PairedCluster {
    /// The baseline's values in this cluster (for example fifo's t1 of the burst's pages).
    pub a: Vec<f64>,
    /// The variant's values in this cluster.
    pub b: Vec<f64>,
}

/// The statistic an improvement compares ([`paired_cluster_improvement_ci95`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    /// The mean of the pooled values.
    Mean,
    /// The median of the pooled values.
    Median,
}

impl Stat {
    /// This statistic of `v` (NaN when empty).
    pub fn of(self, v: &[f64]) -> f64 {
        match self {
            Stat::Mean => mean(v),
            Stat::Median => {
                if v.is_empty() {
                    return f64::NAN;
                }
                let mut s = v.to_vec();
                s.sort_by(|a, b| a.total_cmp(b));
                let n = s.len();
                if n % 2 == 1 {
                    s[n / 2]
                } else {
                    (s[n / 2 - 1] + s[n / 2]) / 2.0
                }
            }
        }
    }
}

/// The 95% interval of `(stat(a) - stat(b)) / stat(a)` over pooled clusters, resampling whole
/// clusters with replacement and keeping each cluster's two sides together: the bootstrap for
/// pages that are not independent (pages of one burst queue behind each other) but whose
/// clusters are (bursts of different repetitions, or far apart), and for variants that saw the
/// same arrivals (common random numbers: the pairing removes the arrivals' own spread). `None`
/// when there is no cluster with values on both sides.
pub fn paired_cluster_improvement_ci95(
    clusters: &[PairedCluster],
    stat: Stat,
    seed: u64,
) -> Option<Ci95> {
    let full: Vec<&PairedCluster> = clusters
        .iter()
        .filter(|c| !c.a.is_empty() && !c.b.is_empty())
        .collect();
    if full.is_empty() {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let draws = (0..RESAMPLES)
        .map(|_| {
            a.clear();
            b.clear();
            for _ in 0..full.len() {
                let c = full[rng.gen_range(0..full.len())];
                a.extend_from_slice(&c.a);
                b.extend_from_slice(&c.b);
            }
            let (sa, sb) = (stat.of(&a), stat.of(&b));
            (sa - sb) / sa
        })
        .collect();
    percentiles(draws)
}

/// The point estimate `(mean(a) - mean(b)) / mean(a)` that an interval of [`improvement_ci95`] surrounds.
pub fn point_improvement(a: &[f64], b: &[f64]) -> f64 {
    let ma = mean(a);
    (ma - mean(b)) / ma
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clear_improvement_has_an_interval_above_zero_around_the_point() {
        let a: Vec<f64> = (0..200).map(|i| 100.0 + (i % 7) as f64).collect();
        let b: Vec<f64> = (0..200).map(|i| 50.0 + (i % 5) as f64).collect();
        let ci = improvement_ci95(&a, &b, 1).unwrap();
        let p = point_improvement(&a, &b);
        assert!(
            ci.low > 0.4 && ci.low <= p && p <= ci.high && ci.high < 0.6,
            "{ci:?} {p}"
        );
        assert!(ci.excludes_zero());
        assert!(ci.clears(0.4) && !ci.clears(0.5));
    }

    #[test]
    fn identical_samples_give_an_interval_around_zero() {
        let a: Vec<f64> = (0..100).map(|i| (i * 37 % 101) as f64).collect();
        let ci = improvement_ci95(&a, &a, 7).unwrap();
        assert!(ci.low < 0.0 && ci.high > 0.0, "{ci:?}");
        assert!(!ci.excludes_zero());
    }

    #[test]
    fn the_interval_is_reproducible_from_its_seed_and_varies_with_it() {
        let a: Vec<f64> = (0..30).map(|i| (i * i % 17) as f64 + 1.0).collect();
        let b: Vec<f64> = (0..30).map(|i| (i % 11) as f64 + 1.0).collect();
        assert_eq!(improvement_ci95(&a, &b, 3), improvement_ci95(&a, &b, 3));
        assert_ne!(improvement_ci95(&a, &b, 3), improvement_ci95(&a, &b, 4));
    }

    #[test]
    fn empty_samples_have_no_interval() {
        assert_eq!(improvement_ci95(&[], &[1.0], 1), None);
        assert_eq!(mean_ci95(&[], 1), None);
    }

    #[test]
    fn mean_interval_contains_the_mean_and_narrows_with_more_samples() {
        let small: Vec<f64> = (0..10).map(|i| (i % 5) as f64).collect();
        let large: Vec<f64> = (0..1000).map(|i| (i % 5) as f64).collect();
        let s = mean_ci95(&small, 1).unwrap();
        let l = mean_ci95(&large, 1).unwrap();
        assert!(s.low <= 2.0 && 2.0 <= s.high);
        assert!(l.width() < s.width() / 3.0, "{s:?} {l:?}");
    }

    #[test]
    fn quadrupling_the_samples_halves_the_width() {
        assert_eq!(reps_for_width(10, 0.2, 0.1), Some(40));
        assert_eq!(reps_for_width(10, 0.0, 0.1), None);
    }

    #[test]
    fn paired_clusters_keep_the_pairing_and_settle_a_consistent_gain() {
        // Every burst's baseline differs a lot (the arrivals), the variant is always 30% less:
        // paired, the interval is tight around 0.3; unpaired it would be wide.
        let clusters: Vec<PairedCluster> = (0..12)
            .map(|i| {
                let base = 10.0 + 20.0 * (i % 4) as f64;
                PairedCluster {
                    a: vec![base, base * 1.1],
                    b: vec![base * 0.7, base * 1.1 * 0.7],
                }
            })
            .collect();
        let ci = paired_cluster_improvement_ci95(&clusters, Stat::Mean, 1).unwrap();
        assert!(
            (ci.low - 0.3).abs() < 1e-9 && (ci.high - 0.3).abs() < 1e-9,
            "{ci:?}"
        );
        // A gain in half the bursts and a loss in the other half: the interval spans 0.
        let mixed: Vec<PairedCluster> = (0..12u32)
            .map(|i| PairedCluster {
                a: vec![10.0],
                b: vec![if i.is_multiple_of(2) { 5.0 } else { 15.0 }],
            })
            .collect();
        let ci = paired_cluster_improvement_ci95(&mixed, Stat::Mean, 1).unwrap();
        assert!(paired_cluster_improvement_ci95(&mixed, Stat::Median, 1).is_some());
        assert!(!ci.excludes_zero(), "{ci:?}");
        assert_eq!(
            paired_cluster_improvement_ci95(&[PairedCluster::default()], Stat::Mean, 1),
            None
        );
        assert_eq!(Stat::Median.of(&[3.0, 1.0, 2.0, 10.0]), 2.5);
    }

    #[test]
    fn serializes_as_a_pair() {
        let ci = Ci95 {
            low: 0.25,
            high: 0.5,
        };
        assert_eq!(serde_json::to_string(&ci).unwrap(), "[0.25,0.5]");
        assert_eq!(ci.pct(), "[+25.0%, +50.0%]");
    }
}
