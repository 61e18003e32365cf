//! Least-squares lines, as seed 002 fitted CPU time against the request rate: slope,
//! intercept and the correlation coefficient r, and the X-intercept of the idle line (the
//! rate at which idle time reaches zero: the predicted peak rate). Pure arithmetic, tested on
//! known data.

use serde::Serialize;

/// The fewest points a fit is made from (two points always lie on a line: r says nothing).
pub const MIN_POINTS: usize = 3;

/// `y = slope * x + intercept`, fitted by least squares on `n` points, with Pearson's `r`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fit {
    /// Change of y per unit of x (percent of the CPU per request/s).
    pub slope: f64,
    /// y at x = 0 (percent of the CPU with no request).
    pub intercept: f64,
    /// Pearson's correlation coefficient of the points (-1..1); `0` when y is constant.
    pub r: f64,
    /// Points fitted.
    pub n: usize,
}

impl Fit {
    /// y on the line at `x`.
    pub fn at(&self, x: f64) -> f64 {
        self.slope * x + self.intercept
    }

    /// Where the line crosses y = 0, if it falls towards it from a positive intercept (the
    /// idle line's predicted peak rate); `None` for a flat or rising line, or one already
    /// below zero at x = 0, which predict nothing.
    pub fn x_intercept(&self) -> Option<f64> {
        (self.slope < 0.0 && self.intercept > 0.0).then(|| -self.intercept / self.slope)
    }
}

/// The least-squares line through `(x, y)` points; `None` with fewer than [`MIN_POINTS`] points,
/// a non-finite value, or no spread in x (every point at one rate).
pub fn fit(points: &[(f64, f64)]) -> Option<Fit> {
    let n = points.len();
    if n < MIN_POINTS || points.iter().any(|(x, y)| !x.is_finite() || !y.is_finite()) {
        return None;
    }
    let nf = n as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let my = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let (mut sxx, mut syy, mut sxy) = (0.0, 0.0, 0.0);
    for (x, y) in points {
        let (dx, dy) = (x - mx, y - my);
        sxx += dx * dx;
        syy += dy * dy;
        sxy += dx * dy;
    }
    if sxx <= f64::EPSILON * nf * mx.abs().max(1.0) {
        return None;
    }
    let slope = sxy / sxx;
    let r = if syy > 0.0 {
        (sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0)
    } else {
        0.0
    };
    Some(Fit {
        slope,
        intercept: my - slope * mx,
        r,
        n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_line_is_found_with_r_minus_one() {
        // Idle falls 1.5 points per request/s from 90%: zero at 60 req/s.
        let pts: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64 * 5.0, 90.0 - 1.5 * i as f64 * 5.0))
            .collect();
        let f = fit(&pts).unwrap();
        assert!((f.slope + 1.5).abs() < 1e-12 && (f.intercept - 90.0).abs() < 1e-9);
        assert!((f.r + 1.0).abs() < 1e-12, "{f:?}");
        assert!((f.x_intercept().unwrap() - 60.0).abs() < 1e-9);
        assert_eq!(f.n, 10);
        assert!((f.at(20.0) - 60.0).abs() < 1e-9);
    }

    #[test]
    fn known_noisy_data() {
        // x = 1..5, y = 2, 4, 5, 4, 5: slope 0.6, intercept 2.2, r = 0.7746.
        let pts = [(1.0, 2.0), (2.0, 4.0), (3.0, 5.0), (4.0, 4.0), (5.0, 5.0)];
        let f = fit(&pts).unwrap();
        assert!((f.slope - 0.6).abs() < 1e-12, "{f:?}");
        assert!((f.intercept - 2.2).abs() < 1e-12, "{f:?}");
        assert!((f.r - 0.774_596_669).abs() < 1e-6, "{f:?}");
        // A rising line predicts no peak.
        assert_eq!(f.x_intercept(), None);
    }

    #[test]
    fn degenerate_inputs_give_no_fit() {
        assert!(fit(&[(1.0, 1.0), (2.0, 2.0)]).is_none());
        assert!(fit(&[(3.0, 1.0), (3.0, 2.0), (3.0, 5.0)]).is_none());
        assert!(fit(&[(1.0, 1.0), (2.0, f64::NAN), (3.0, 2.0)]).is_none());
        // Constant y: a flat line, r = 0, no X-intercept.
        let f = fit(&[(1.0, 7.0), (2.0, 7.0), (3.0, 7.0)]).unwrap();
        assert_eq!((f.slope, f.r), (0.0, 0.0));
        assert_eq!(f.x_intercept(), None);
        // Already below zero at x = 0.
        let f = fit(&[(1.0, -1.0), (2.0, -2.0), (3.0, -3.0)]).unwrap();
        assert_eq!(f.x_intercept(), None);
    }
}
