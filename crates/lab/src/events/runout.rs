//! Where the server's CPU runs out ([`RunOut`]): seed 002's capacity, measured. The seed reads
//! the peak rate off the idle line's X-intercept, the rate at which the server's idle time runs
//! out; it says that the one-second peaks it saw were well above it (the server serves more
//! than the line implies once it is busy: several requests per wake-up). So the measurement
//! the prediction is checked against is the lowest offered rate at which the server has no
//! idle CPU left, not the highest rate it can be pushed to. Under the lab's CPU quota that
//! difference is large: past the rate where the quota runs out, the requests that arrive in
//! each throttled gap are served as one batch, cheaper per request, and the server sustains up
//! to 1.5x more (docs/events.md).
//!
//! A run *ran out* of CPU when its idle share of the quota fell under
//! [`SATURATED_IDLE_PCT`](crate::capacity::analyze::SATURATED_IDLE_PCT) (the threshold below
//! which the fit leaves a rate out as saturated) or when it did not sustain its rate (a server
//! that falls behind has no CPU to spare). The runs near the crossing are noisy (idle moves by
//! a few points between runs at one rate), so the crossing is the split of the runs, in rising
//! rate, that the fewest runs disagree with (a run out of CPU below it, or one with idle above
//! it); of equally good splits the lowest, where the CPU first ran out. Its bracket is the
//! highest rate below the split and the lowest above; the probes bisect it (geometric
//! midpoint), and the measured rate is its geometric midpoint. Pure: tested on a model
//! server.

use serde::Serialize;

use super::search::{Trial, GROW};
use crate::capacity::analyze::{run_out_split, Tie, SATURATED_IDLE_PCT};

/// Whether a run ran out of CPU: idle under [`SATURATED_IDLE_PCT`] of the quota (or unknown),
/// or its rate not sustained.
pub fn ran_out(t: &Trial) -> bool {
    !t.sustained() || t.idle_pct.is_nan() || t.idle_pct < SATURATED_IDLE_PCT
}

/// The open-loop runs of one cold count, in the order run, and where their CPU ran out.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunOut {
    /// Every run: (rate offered, ran out of CPU).
    pub runs: Vec<(f64, bool)>,
}

/// The split of the runs: the bracket around the rate at which the CPU ran out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Split {
    /// The highest rate below the split (req/s): `None` when every run ran out.
    pub below: Option<f64>,
    /// The lowest rate above it (req/s): `None` when none ran out.
    pub above: Option<f64>,
    /// Runs on the wrong side of it (noise): out of CPU below it, idle left above it.
    pub disagreeing: usize,
}

impl RunOut {
    /// Add a run.
    pub fn record(&mut self, t: &Trial) {
        if t.offered.is_finite() && t.offered > 0.0 {
            self.runs.push((t.offered, ran_out(t)));
        }
    }

    /// The split that the fewest runs disagree with (the lowest of equally good ones); `None`
    /// before any run. The fit's knee splits the ladder's rates the same way, by the rate
    /// offered ([`crate::capacity::analyze::knee_in_order`]).
    pub fn split(&self) -> Option<Split> {
        let (below, above, disagreeing) = run_out_split(&self.runs, Tie::Lowest)?;
        Some(Split {
            below,
            above,
            disagreeing,
        })
    }

    /// The measured rate at which the CPU ran out (req/s): the geometric midpoint of the
    /// split's bracket; `None` without a run on each side.
    pub fn measured(&self) -> Option<f64> {
        let s = self.split()?;
        Some((s.below? * s.above?).sqrt())
    }

    /// The bracket's width over its lower end (fraction): how far the measured rate may be
    /// from the crossing.
    pub fn resolution(&self) -> Option<f64> {
        let s = self.split()?;
        Some(s.above? / s.below? - 1.0)
    }

    /// The next rate to try: the bracket's geometric midpoint; [`GROW`] times the highest rate
    /// with nothing ran out; the lowest rate over [`GROW`] with everything ran out.
    pub fn next(&self) -> Option<f64> {
        let s = self.split()?;
        Some(match (s.below, s.above) {
            (Some(lo), Some(hi)) => (lo * hi).sqrt(),
            (Some(lo), None) => lo * GROW,
            (None, Some(hi)) => hi / GROW,
            (None, None) => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model server whose CPU runs out at `knee` req/s (idle falls linearly from 80% at
    /// rate 0 to 0 there) and that, batching under its quota, sustains up to `held` > `knee`:
    /// between the two it is served with no idle left.
    fn model(knee: f64, held: f64, offered: f64) -> Trial {
        let idle = (80.0 * (1.0 - offered / knee)).max(0.0);
        let ok = offered <= held;
        Trial {
            offered,
            served: if ok { offered } else { held },
            p99_ms: if ok { 20.0 } else { 900.0 },
            idle_pct: idle,
        }
    }

    /// The lab's order: the overload run, the ladder's fractions of what it served, probes.
    fn search(knee: f64, held: f64, probes: usize) -> RunOut {
        let mut s = RunOut::default();
        let o = model(knee, held, 1.25 * held);
        s.record(&o);
        for f in [0.1, 0.3, 0.5, 0.59, 0.68, 0.77, 0.86, 0.95] {
            s.record(&model(knee, held, f * o.served));
        }
        for _ in 0..probes {
            let r = s.next().unwrap();
            s.record(&model(knee, held, r));
        }
        s
    }

    #[test]
    fn a_run_ran_out_without_idle_or_when_it_fell_behind() {
        let t = |idle_pct, served| Trial {
            offered: 1000.0,
            served,
            p99_ms: 10.0,
            idle_pct,
        };
        assert!(!ran_out(&t(3.0, 1000.0)));
        assert!(ran_out(&t(2.9, 1000.0)));
        assert!(ran_out(&t(-0.2, 1000.0)));
        assert!(ran_out(&t(f64::NAN, 1000.0)));
        assert!(ran_out(&t(20.0, 900.0)), "a rate not sustained");
    }

    #[test]
    fn the_probes_find_where_the_cpu_ran_out_not_what_batching_holds() {
        // The CPU runs out at 8000 req/s; batching past it holds 12000 (cap5-quick2's triage
        // at 0 cold: idle ran out at 8102, sustained 11987). The ladder (fractions of the
        // overload run's 12000) brackets 8000 between 0.59 and 0.68 of it; three probes leave
        // under 2%, around 8000 (idle under 3% from 7700).
        let s = search(8000.0, 12_000.0, 3);
        let m = s.measured().unwrap();
        assert!((7500.0..8100.0).contains(&m), "{m}");
        assert!(s.resolution().unwrap() < 0.02, "{:?}", s.resolution());
        assert_eq!(s.split().unwrap().disagreeing, 0);
        // Without batching past the knee the answer is the same.
        let t = search(8000.0, 8000.0, 3).measured().unwrap();
        assert!((t / m - 1.0).abs() < 0.03, "{t} {m}");
    }

    #[test]
    fn noise_is_outvoted_and_ties_take_the_first_crossing() {
        let mut s = RunOut::default();
        let run = |offered, idle_pct| Trial {
            offered,
            served: offered,
            p99_ms: 10.0,
            idle_pct,
        };
        // cap5-quick's triage at 0 cold: a dip at 8063, idle again at 9006 and 9948.
        for (r, i) in [
            (7121.0, 16.0),
            (8063.0, 1.3),
            (9006.0, 5.3),
            (9948.0, 8.0),
            (10914.0, 2.6),
            (11432.0, 0.4),
        ] {
            s.record(&run(r, i));
        }
        let sp = s.split().unwrap();
        assert_eq!(
            (sp.below, sp.above, sp.disagreeing),
            (Some(9948.0), Some(10914.0), 1)
        );
        // One more run with idle below the dip makes the two splits equal: the lower wins.
        let mut t = RunOut::default();
        for (r, i) in [(7000.0, 10.0), (8000.0, 1.0), (9000.0, 6.0), (10000.0, 1.0)] {
            t.record(&run(r, i));
        }
        let sp = t.split().unwrap();
        assert_eq!(
            (sp.below, sp.above, sp.disagreeing),
            (Some(7000.0), Some(8000.0), 1)
        );
        assert_eq!(t.next(), Some((7000.0f64 * 8000.0).sqrt()));
    }

    #[test]
    fn one_sided_runs_grow_or_shrink_and_measure_nothing() {
        let mut s = RunOut::default();
        assert_eq!((s.split(), s.next(), s.measured()), (None, None, None));
        let run = |offered, idle_pct| Trial {
            offered,
            served: offered,
            p99_ms: 10.0,
            idle_pct,
        };
        s.record(&run(1000.0, 50.0));
        assert_eq!(s.next(), Some(1000.0 * GROW));
        assert_eq!(s.measured(), None);
        let mut s = RunOut::default();
        s.record(&run(1000.0, 0.5));
        assert_eq!(s.next(), Some(1000.0 / GROW));
        assert_eq!((s.measured(), s.resolution()), (None, None));
        // Two runs at one rate, one out, one not: the split falls between them.
        s.record(&run(1000.0, 10.0));
        assert_eq!(s.measured(), Some(1000.0));
    }
}
