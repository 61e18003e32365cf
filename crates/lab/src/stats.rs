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

/// How many samples an interval of `width` needs, from one measured with `n` samples and
/// width `measured` (an interval narrows as `1/sqrt(n)`); `None` when either width is not
/// positive.
pub fn reps_for_width(n: usize, measured: f64, width: f64) -> Option<usize> {
    if !(measured > 0.0 && width > 0.0) || n == 0 {
        return None;
    }
    Some(((n as f64) * (measured / width).powi(2)).ceil() as usize)
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
    fn serializes_as_a_pair() {
        let ci = Ci95 {
            low: 0.25,
            high: 0.5,
        };
        assert_eq!(serde_json::to_string(&ci).unwrap(), "[0.25,0.5]");
        assert_eq!(ci.pct(), "[+25.0%, +50.0%]");
    }
}
