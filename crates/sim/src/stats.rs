//! Summaries as the papers report them: min, max, mean, median, range; improvement `(a-b)/a`.

use serde::Serialize;

/// Min / max / mean / median / range of a sample (seconds or any unit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Sample size.
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// `max - min`.
    pub range: f64,
}

impl Summary {
    /// Summary of `xs` (all zero when empty).
    pub fn of(xs: &[f64]) -> Self {
        if xs.is_empty() {
            return Self {
                n: 0,
                min: 0.0,
                max: 0.0,
                mean: 0.0,
                median: 0.0,
                range: 0.0,
            };
        }
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Self {
            n,
            min: v[0],
            max: v[n - 1],
            mean: v.iter().sum::<f64>() / n as f64,
            median,
            range: v[n - 1] - v[0],
        }
    }
}

/// Seed 001's improvement `(a - b) / a` in percent (`a` the baseline); 0 when `a` is 0.
pub fn improvement(a: f64, b: f64) -> f64 {
    if a == 0.0 {
        0.0
    } else {
        (a - b) / a * 100.0
    }
}

/// Round to `digits` decimals (keeps the JSON short and stable).
pub fn round(x: f64, digits: i32) -> f64 {
    let k = 10f64.powi(digits);
    (x * k).round() / k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_and_improvement() {
        let s = Summary::of(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.min, s.max, s.median, s.range), (1.0, 10.0, 2.5, 9.0));
        assert_eq!(s.mean, 4.0);
        assert_eq!(Summary::of(&[5.0]).median, 5.0);
        assert_eq!(improvement(4.0, 3.0), 25.0);
        assert_eq!(improvement(0.0, 3.0), 0.0);
        assert_eq!(round(1.23456, 2), 1.23);
    }
}
