//! A figure of a CGI lab's summary with its 95% interval ([`Figure`]): the value, `ci95:
//! [low, high]` from [`crate::stats::mean_ci95`] over the samples it rests on (repetitions, or
//! points paired within a repetition, never requests of one window: those are not
//! independent), the goal it is judged against and whether the whole interval is on the
//! goal's side.

use serde::Serialize;

use crate::stats::{mean_ci95, reps_for_width, Ci95};

/// Seed of every CGI lab interval (a report is reproducible from its raw data).
pub const SEED: u64 = 0x5eed_0003;

/// Which side of a goal a figure must be on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// At most this value.
    AtMost(f64),
    /// At least this value.
    AtLeast(f64),
    /// Within `[-x, x]`.
    Within(f64),
}

impl Bound {
    fn holds(&self, v: f64) -> bool {
        match *self {
            Bound::AtMost(x) => v <= x,
            Bound::AtLeast(x) => v >= x,
            Bound::Within(x) => v.abs() <= x,
        }
    }

    /// Whether every value of `ci` is on the goal's side.
    pub fn cleared_by(&self, ci: &Ci95) -> bool {
        self.holds(ci.low) && self.holds(ci.high)
    }

    /// The goal in symbols (`<= 5`).
    pub fn text(&self) -> String {
        match *self {
            Bound::AtMost(x) => format!("<= {x}"),
            Bound::AtLeast(x) => format!(">= {x}"),
            Bound::Within(x) => format!("within +-{x}"),
        }
    }
}

/// One figure and its interval, as `summary.json` carries it.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// What it is (the scalar field of the summary it goes with, and the variant).
    pub name: String,
    /// The mean of the samples (NaN-free; `None` without samples).
    pub value: Option<f64>,
    /// 95% interval of that mean, seeded percentile bootstrap over the samples; `None` with
    /// fewer than two samples (one sample has no spread to resample).
    pub ci95: Option<Ci95>,
    /// How many samples.
    pub n: usize,
    /// What one sample is.
    pub over: String,
    /// The goal, if the figure has one.
    pub goal: Option<Bound>,
    /// Whether the whole interval is on the goal's side (`None`: no goal or no interval).
    pub clears: Option<bool>,
    /// Samples an interval half as wide would need (`None`: no interval).
    pub samples_for_half_width: Option<usize>,
}

impl Figure {
    /// The figure `name` from `samples` (non-finite ones dropped), judged against `goal`.
    pub fn of(name: &str, over: &str, samples: &[f64], goal: Option<Bound>) -> Figure {
        let v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        let value = (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        let ci95 = if v.len() >= 2 {
            mean_ci95(&v, SEED)
        } else {
            None
        };
        Figure {
            name: name.to_owned(),
            value,
            ci95,
            n: v.len(),
            over: over.to_owned(),
            goal,
            clears: match (goal, ci95) {
                (Some(g), Some(c)) => Some(g.cleared_by(&c)),
                _ => None,
            },
            samples_for_half_width: ci95
                .and_then(|c| reps_for_width(v.len(), c.width(), c.width() / 2.0)),
        }
    }

    /// `value [low, high] (n samples over ...)`, and whether the interval clears the goal, for
    /// goal lines and reports.
    pub fn text(&self, unit: &str) -> String {
        let v = self
            .value
            .map_or("-".to_owned(), |v| format!("{v:.2}{unit}"));
        let ci = match self.ci95 {
            Some(c) => format!("ci95 [{:.2}, {:.2}]{unit}", c.low, c.high),
            None => "no ci95 (fewer than 2 samples)".to_owned(),
        };
        let clears = match (self.goal, self.clears) {
            (Some(g), Some(true)) => format!("; the interval clears the goal ({})", g.text()),
            (Some(g), Some(false)) => {
                format!("; the interval does NOT clear the goal ({})", g.text())
            }
            _ => String::new(),
        };
        let more = self
            .samples_for_half_width
            .map_or(String::new(), |n| format!("; half the width needs {n}"));
        format!("{v}, {ci} over {} {}{clears}{more}", self.n, self.over)
    }
}

/// The figures as a report table: name, value, interval, samples, goal, verdict.
pub fn report_table(r: &mut crate::report::Report, figs: &[Figure]) {
    if figs.is_empty() {
        return;
    }
    let f2 = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
    let rows: Vec<Vec<String>> = figs
        .iter()
        .map(|f| {
            vec![
                f.name.clone(),
                f2(f.value),
                f.ci95
                    .map_or("-".to_owned(), |c| format!("[{:.2}, {:.2}]", c.low, c.high)),
                format!("{} ({})", f.n, f.over),
                f.goal.map_or("-".to_owned(), |g| g.text()),
                match f.clears {
                    Some(true) => "clears".to_owned(),
                    Some(false) => "does not clear".to_owned(),
                    None => "-".to_owned(),
                },
                f.samples_for_half_width
                    .map_or("-".to_owned(), |n| n.to_string()),
            ]
        })
        .collect();
    r.h2("Figures with 95% intervals");
    r.p(
        "Seeded percentile bootstrap of the mean over the samples named (lab::stats); a goal \
         is cleared when the whole interval is on its side. The last column: samples an \
         interval half as wide would need.",
    );
    r.table(
        &[
            "figure",
            "mean",
            "ci95",
            "samples",
            "goal",
            "interval",
            "n for half width",
        ],
        &rows,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_and_goals() {
        let f = Figure::of(
            "cap_error_pp",
            "points",
            &[0.5, -0.2, 0.1, 0.3, f64::NAN],
            Some(Bound::Within(2.0)),
        );
        assert_eq!(f.n, 4);
        let c = f.ci95.unwrap();
        assert!(c.low <= f.value.unwrap() && f.value.unwrap() <= c.high);
        assert_eq!(f.clears, Some(true));
        assert!(
            f.text("pp").contains("clears the goal (within +-2)"),
            "{}",
            f.text("pp")
        );
        // An interval straddling the goal does not clear it, whatever the point estimate.
        let g = Figure::of("x", "reps", &[1.0, 9.0, 4.0, 6.0], Some(Bound::AtMost(5.0)));
        assert_eq!(g.value, Some(5.0));
        assert_eq!(g.clears, Some(false));
        assert!(g.text("%").contains("does NOT clear"));
        // One sample: a value, no interval.
        let h = Figure::of("x", "reps", &[3.0], Some(Bound::AtLeast(1.0)));
        assert_eq!(
            (h.value, h.ci95.is_none(), h.clears),
            (Some(3.0), true, None)
        );
        let j = serde_json::to_value(&g).unwrap();
        assert!(j["ci95"].is_array(), "{j}");
        assert_eq!(j["goal"]["at_most"], 5.0);
    }
}
