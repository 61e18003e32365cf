//! Where the server's CPU runs out ([`RunOut`]): seed 002's capacity, measured. The seed reads
//! the peak rate off the idle line's X-intercept, the rate at which the server's idle time runs
//! out; it says that the one-second peaks it saw were well above it (the server serves more
//! than the line implies once it is busy: several requests per wake-up). So the measurement
//! the prediction is checked against is the lowest offered rate at which the server has no
//! idle CPU left, not the highest rate it can be pushed to. Under the lab's CPU quota that
//! difference is large: past the rate where the quota runs out, the requests that arrive in
//! each throttled gap are served as one batch, cheaper per request, and the server sustains up
//! to 1.5x more (docs/results-log.md).
//!
//! A run *ran out* of CPU when its idle share of the quota fell under
//! [`SATURATED_IDLE_PCT`](crate::capacity::analyze::SATURATED_IDLE_PCT) (the threshold below
//! which the fit leaves a rate out as saturated) or when it did not sustain its rate (a server
//! that falls behind has no CPU to spare). Each run is a vote at the rate it was offered; a
//! rate's verdict is the majority of its runs (a rate with as many runs each way has none
//! yet). The crossing is the split of the rates with a verdict, in rising rate, that the
//! fewest disagree with (a rate out of CPU below it, one with idle left above it); of equally
//! good splits the lowest. Its bracket is the highest rate below the split and the lowest
//! above, and the measured rate is the bracket's geometric midpoint.
//!
//! One 3 s run in twelve costs 5% or more above its neighbours' CPU per request (the host's
//! noise; docs/results-log.md), enough to read out of CPU 10% below the crossing, so no
//! single run may set the bracket: before the probes bisect it, a probe runs again a rate
//! without a verdict, then an edge of the bracket that rests on one run (the rate above, then
//! the rate below), unless that run was *clear*: a run about 8% dearer or cheaper would have
//! read the same (idle at least [`CLEAR_IDLE_PCT`], or served under [`CLEAR_SERVED_FRAC`] of
//! its rate) and no one-run rate beyond it on the wrong side of the split contradicts it (a
//! clear run can still be an outlier: one 22% dearer than its neighbours fell far behind),
//! then such a run on the wrong side itself. The overload run is a vote but is never repeated: it was offered far above the
//! crossing. Pure: tested on a model server, and on a seeded model with the measured noise
//! against the method before the repeats.

use serde::Serialize;

use super::search::{Trial, GROW};
use crate::capacity::analyze::{run_out_split, Tie, SATURATED_IDLE_PCT};

/// Whether a run ran out of CPU: idle under [`SATURATED_IDLE_PCT`] of the quota (or unknown),
/// or its rate not sustained.
pub fn ran_out(t: &Trial) -> bool {
    !t.sustained() || t.idle_pct.is_nan() || t.idle_pct < SATURATED_IDLE_PCT
}

/// A run with idle left is clear (its rate needs no second run at the bracket's edge) when its
/// idle share was at least this (%): to have read out of CPU (idle under 3%) it would have had
/// to cost about 8% more CPU per request, which one run in fifty does (docs/results-log.md).
pub const CLEAR_IDLE_PCT: f64 = 10.0;

/// A run out of CPU is clear when it served under this share of the rate offered: its server
/// needed over 1/0.95 of its CPU, and a run 8% cheaper would have run out as well.
pub const CLEAR_SERVED_FRAC: f64 = 0.95;

/// One open-loop run: its vote at the rate it was offered.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Vote {
    /// Rate offered (req/s).
    pub rate: f64,
    /// Whether it ran out of CPU ([`ran_out`]).
    pub out: bool,
    /// Whether a run about 8% dearer or cheaper would have read the same: idle at least
    /// [`CLEAR_IDLE_PCT`] with idle left, served under [`CLEAR_SERVED_FRAC`] of the rate out
    /// of CPU. Its rate needs no second run at the bracket's edge.
    pub clear: bool,
    /// Whether a probe may run its rate again: every run but the overload run.
    pub repeatable: bool,
}

/// The open-loop runs of one cold count, in the order run, and where their CPU ran out.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunOut {
    /// Every run, in the order run.
    pub runs: Vec<Vote>,
}

/// The split of the runs: the bracket around the rate at which the CPU ran out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Split {
    /// The highest rate below the split (req/s): `None` when every rate ran out.
    pub below: Option<f64>,
    /// The lowest rate above it (req/s): `None` when none ran out.
    pub above: Option<f64>,
    /// Runs on the wrong side of it (noise): out of CPU at or below `below`, idle left at or
    /// above `above` (a repeated rate's outvoted runs among them).
    pub disagreeing: usize,
}

/// One rate offered and its runs.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rate {
    rate: f64,
    left: usize,
    out: usize,
    repeatable: bool,
}

impl Rate {
    /// The majority of its runs: `Some(true)` out of CPU, `None` as many each way.
    fn verdict(&self) -> Option<bool> {
        (self.left != self.out).then_some(self.out > self.left)
    }
}

impl RunOut {
    /// Add a run (a ladder rate or a probe).
    pub fn record(&mut self, t: &Trial) {
        self.push(t, true);
    }

    /// Add the overload run: a vote like the others, never repeated.
    pub fn record_overload(&mut self, t: &Trial) {
        self.push(t, false);
    }

    fn push(&mut self, t: &Trial, repeatable: bool) {
        if t.offered.is_finite() && t.offered > 0.0 {
            let out = ran_out(t);
            let clear = if out {
                t.served < CLEAR_SERVED_FRAC * t.offered
            } else {
                t.idle_pct >= CLEAR_IDLE_PCT
            };
            self.runs.push(Vote {
                rate: t.offered,
                out,
                clear,
                repeatable,
            });
        }
    }

    /// The rates offered, ascending, each with its runs (a repeat offers the same rate).
    fn rates(&self) -> Vec<Rate> {
        let mut v: Vec<Rate> = Vec::new();
        for r in &self.runs {
            match v.iter_mut().find(|x| x.rate == r.rate) {
                Some(x) => {
                    x.left += usize::from(!r.out);
                    x.out += usize::from(r.out);
                    x.repeatable |= r.repeatable;
                }
                None => v.push(Rate {
                    rate: r.rate,
                    left: usize::from(!r.out),
                    out: usize::from(r.out),
                    repeatable: r.repeatable,
                }),
            }
        }
        v.sort_by(|a, b| a.rate.total_cmp(&b.rate));
        v
    }

    /// The split of the rates with a verdict that the fewest disagree with (the lowest of
    /// equally good ones); `None` before any rate has one. The fit's knee splits the ladder's
    /// rates (one run each) the same way, by the rate offered
    /// ([`crate::capacity::analyze::knee_in_order`]).
    pub fn split(&self) -> Option<Split> {
        let decided: Vec<(f64, bool)> = self
            .rates()
            .iter()
            .filter_map(|r| r.verdict().map(|out| (r.rate, out)))
            .collect();
        let (below, above, _) = run_out_split(&decided, Tie::Lowest)?;
        let disagreeing = self
            .runs
            .iter()
            .filter(|r| {
                (r.out && below.is_some_and(|b| r.rate <= b))
                    || (!r.out && above.is_some_and(|a| r.rate >= a))
            })
            .count();
        Some(Split {
            below,
            above,
            disagreeing,
        })
    }

    /// The measured rate at which the CPU ran out (req/s): the geometric midpoint of the
    /// split's bracket; `None` without a rate on each side.
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

    /// The next rate to try. First a rate without a verdict (as many runs each way; the one
    /// nearest the bracket), then, with a rate on each side, an edge that rests on one run
    /// that was not clear ([`Vote::clear`]) or that a one-run rate on the wrong side beyond it
    /// contradicts: the rate above, then the rate below; then such a run on the wrong side
    /// itself (the one nearest the bracket). Else the
    /// bracket's geometric midpoint; [`GROW`] times the highest rate with nothing
    /// ran out; the lowest rate over [`GROW`] with everything ran out. `None` before any run.
    pub fn next(&self) -> Option<f64> {
        let rates = self.rates();
        let split = self.split();
        let centre = match split.map(|s| (s.below, s.above)) {
            Some((Some(lo), Some(hi))) => (lo * hi).sqrt(),
            Some((Some(x), None) | (None, Some(x))) => x,
            _ => rates.first()?.rate,
        };
        if let Some(t) = rates
            .iter()
            .filter(|r| r.repeatable && r.verdict().is_none())
            .min_by(|a, b| {
                let d = |r: &Rate| (r.rate / centre).ln().abs();
                d(a).total_cmp(&d(b))
            })
        {
            return Some(t.rate);
        }
        let s = split?;
        // A rate of one run on the wrong side of the split (out of CPU at or below its lower
        // edge, idle left at or above its upper edge): either that run was noise or the split
        // is, and more runs say which.
        let single = |r: &&Rate| r.repeatable && r.left + r.out == 1;
        let wrong_above = |r: &&Rate| r.left == 1 && s.above.is_some_and(|a| r.rate >= a);
        let wrong_below = |r: &&Rate| r.out == 1 && s.below.is_some_and(|b| r.rate <= b);
        // An edge whose rate has one run, which may be run again and was not clear, or that a
        // run on the wrong side beyond it contradicts, clear or not (a run 22% dearer than its
        // neighbours fell far behind, clear, below a rate with idle left, and set a crossing
        // 10% low).
        let doubtful = |rate: f64, contested: bool| {
            let mut at = self.runs.iter().filter(|r| r.rate == rate);
            match (at.next(), at.next()) {
                (Some(r), None) => r.repeatable && (!r.clear || contested),
                _ => false,
            }
        };
        let contested_above = rates.iter().filter(single).any(|r| wrong_above(&r));
        let contested_below = rates.iter().filter(single).any(|r| wrong_below(&r));
        match (s.below, s.above) {
            (Some(_), Some(hi)) if doubtful(hi, contested_above) => return Some(hi),
            (Some(lo), Some(_)) if doubtful(lo, contested_below) => return Some(lo),
            _ => {}
        }
        // Then the run on the wrong side itself, the nearest the bracket first.
        if let Some(r) = rates
            .iter()
            .filter(single)
            .filter(|r| wrong_above(r) || wrong_below(r))
            .min_by(|a, b| {
                let d = |r: &Rate| (r.rate / centre).ln().abs();
                d(a).total_cmp(&d(b))
            })
        {
            return Some(r.rate);
        }
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
        s.record_overload(&o);
        for f in [0.1, 0.3, 0.5, 0.59, 0.68, 0.77, 0.86, 0.95] {
            s.record(&model(knee, held, f * o.served));
        }
        for _ in 0..probes {
            let r = s.next().unwrap();
            s.record(&model(knee, held, r));
        }
        s
    }

    /// A run: offered, served (req/s), p99 (ms), idle (%).
    fn trial(offered: f64, served: f64, p99_ms: f64, idle_pct: f64) -> Trial {
        Trial {
            offered,
            served,
            p99_ms,
            idle_pct,
        }
    }

    /// A run that served its rate with `idle_pct` left.
    fn run(offered: f64, idle_pct: f64) -> Trial {
        trial(offered, offered, 10.0, idle_pct)
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
        // overload run's 12000) brackets 8000 between 0.59 and 0.68 of it (7080, 8160).
        let mut s = search(8000.0, 12_000.0, 0);
        let (lo, hi) = (0.59 * 12_000.0, 0.68 * 12_000.0);
        let sp = s.split().unwrap();
        assert_eq!((sp.below, sp.above), (Some(lo), Some(hi)));
        // Each edge rests on one run: the probes run the one above again, then the one below
        // (idle 9.2%, under CLEAR_IDLE_PCT), and only then bisect.
        assert_eq!(s.next(), Some(hi));
        s.record(&model(8000.0, 12_000.0, hi));
        assert_eq!(s.next(), Some(lo));
        s.record(&model(8000.0, 12_000.0, lo));
        assert_eq!(s.next(), Some((lo * hi).sqrt()));
        // The lab's five probes leave the bracket under 4% wide, around 8000 (idle under 3%
        // from 7700).
        let s = search(8000.0, 12_000.0, 5);
        let m = s.measured().unwrap();
        assert!((7600.0..8100.0).contains(&m), "{m}");
        assert!(s.resolution().unwrap() < 0.04, "{:?}", s.resolution());
        assert_eq!(s.split().unwrap().disagreeing, 0);
        // Without batching past the knee the answer is the same.
        let t = search(8000.0, 8000.0, 5).measured().unwrap();
        assert!((t / m - 1.0).abs() < 0.03, "{t} {m}");
    }

    #[test]
    fn one_dear_run_at_the_edge_is_run_again_and_outvoted() {
        // `lead-quick-final`'s lighttpd on poll at 0 cold: the ladder's 263.1 req/s read 1.47%
        // idle (3747 us per request against its neighbours' 3100-3470), 293.8 read 5.77%.
        // Before the repeats that one run set the crossing: two splits with one run against
        // each, the lowest taken, 261 req/s.
        let ladder = [
            (102.5, 65.0),
            (170.8, 42.9),
            (201.6, 30.0),
            (232.3, 27.8),
            (263.1, 1.47),
            (293.8, 5.77),
        ];
        let mut s = RunOut::default();
        s.record_overload(&trial(411.8, 341.7, 1481.7, 0.0));
        for (r, i) in ladder {
            s.record(&run(r, i));
        }
        s.record(&Trial {
            offered: 324.6,
            served: 310.5,
            p99_ms: 1147.9,
            idle_pct: 0.08,
        });
        let sp = s.split().unwrap();
        assert_eq!(
            (sp.below, sp.above, sp.disagreeing),
            (Some(232.3), Some(263.1), 1)
        );
        // Its rate is run again; the second run has idle left (as the probes at 247-259 did,
        // 12-17%): one vote each way, no verdict, so it is run a third time.
        assert_eq!(s.next(), Some(263.1));
        s.record(&run(263.1, 12.0));
        assert_eq!(
            s.split().unwrap().above,
            Some(324.6),
            "263.1 has no verdict"
        );
        assert_eq!(s.next(), Some(263.1));
        s.record(&run(263.1, 11.0));
        // Two runs to one: idle left at 263.1. The bracket is [293.8, 324.6], the dear run
        // outvoted; its one run counts as disagreeing.
        let sp = s.split().unwrap();
        assert_eq!(
            (sp.below, sp.above, sp.disagreeing),
            (Some(293.8), Some(324.6), 1)
        );
        // Then the edges: 324.6 rests on one run, then 293.8 (idle 5.77%).
        assert_eq!(s.next(), Some(324.6));
        s.record(&run(324.6, 0.1));
        assert_eq!(s.next(), Some(293.8));
        s.record(&run(293.8, 6.0));
        assert_eq!(s.next(), Some((293.8f64 * 324.6).sqrt()));
    }

    #[test]
    fn an_edge_with_idle_to_spare_and_the_overload_run_are_not_repeated() {
        // `lead-quick-final`'s nginx at 10000 cold: its ladder's 294.7 req/s left 13.1% idle,
        // 324.5 ran out. The rate above is run again; the one below is clear.
        let mut s = RunOut::default();
        s.record_overload(&trial(430.1, 342.6, 707.6, 0.0));
        for (r, i) in [(233.0, 27.8), (263.8, 19.4), (294.7, 13.1), (324.5, 0.09)] {
            s.record(&run(r, i));
        }
        assert_eq!(s.next(), Some(324.5));
        s.record(&run(324.5, 0.5));
        assert_eq!(s.next(), Some((294.7f64 * 324.5).sqrt()));
        // With nothing out but the overload run, the probes bisect below it at once.
        let mut s = RunOut::default();
        s.record_overload(&trial(430.1, 342.6, 707.6, 0.0));
        s.record(&run(325.0, 12.0));
        assert_eq!(s.next(), Some((325.0f64 * 430.1).sqrt()));
    }

    #[test]
    fn a_run_that_fell_far_behind_is_clear() {
        // `cap14-quick1`'s triage at 0 cold: the ladder's top, 602.2 req/s, left 3.70% idle
        // and nothing above it ran out but the overload run (never repeated): 602.2 is run
        // again. The next probe, 695.2 req/s, served 629.7 (90.6%): out of CPU even 8%
        // cheaper, so the probes bisect on.
        let mut s = RunOut::default();
        s.record_overload(&trial(802.5, 633.9, 644.1, 0.1));
        s.record(&run(545.2, 10.83));
        s.record(&run(602.2, 3.70));
        assert_eq!(s.next(), Some(602.2));
        s.record(&run(602.2, 4.67));
        let mid = (602.2f64 * 802.5).sqrt();
        assert_eq!(s.next(), Some(mid));
        s.record(&Trial {
            offered: mid,
            served: 629.7,
            p99_ms: 302.8,
            idle_pct: 0.07,
        });
        assert!(s.runs.last().unwrap().clear);
        assert_eq!(s.next(), Some((602.2 * mid).sqrt()));
        // Served at 95.7% of its rate it would not have been clear (`lead-quick-final`'s
        // lighttpd on poll at 324.6 req/s, 310.5 served).
        s.record(&Trial {
            offered: 324.6,
            served: 310.5,
            p99_ms: 1147.9,
            idle_pct: 0.08,
        });
        assert!(!s.runs.last().unwrap().clear);
    }

    #[test]
    fn a_run_on_the_wrong_side_is_run_again_even_when_clear() {
        // lead-evq6's triage at 10000 cold: the ladder's 317.2 req/s cost 22% more per request
        // than its neighbours and fell far behind (served 296.3: clear), its 350.4 kept 3.5%
        // idle. Two splits with one run against each, the lowest taken: [284.0, 317.2], both
        // edges clear. The probes bisected it (300-316 req/s, all with 10-19% idle) and the
        // crossing read 316.6 against a prediction of 381. 350.4, idle left above that
        // split, contradicts its upper edge: the edge is run again first, clear or not.
        let mut s = RunOut::default();
        s.record_overload(&trial(501.2, 368.8, 900.0, -0.04));
        for (r, i) in [
            (36.9, 88.54),
            (184.4, 48.48),
            (217.6, 32.69),
            (250.8, 30.51),
            (284.0, 23.75),
        ] {
            s.record(&run(r, i));
        }
        s.record(&trial(317.2, 296.3, 400.0, 0.31));
        s.record(&run(350.4, 3.53));
        let sp = s.split().unwrap();
        assert_eq!(
            (sp.below, sp.above, sp.disagreeing),
            (Some(284.0), Some(317.2), 1)
        );
        assert!(s.runs.iter().all(|r| r.rate != 317.2 || r.clear));
        assert_eq!(s.next(), Some(317.2));
        // It keeps idle this time: one run each way, no verdict, so it is run a third time.
        s.record(&run(317.2, 12.0));
        assert_eq!(s.next(), Some(317.2));
        s.record(&run(317.2, 9.0));
        // Idle left by two to one: the split moves above 350.4, whose one run is now on the
        // right side.
        let sp = s.split().unwrap();
        assert_eq!((sp.below, sp.above), (Some(350.4), Some(501.2)));
        // Then its lower edge, 350.4, rests on one run with 3.5% idle (not clear).
        assert_eq!(s.next(), Some(350.4));
    }

    #[test]
    fn noise_is_outvoted_and_ties_take_the_first_crossing() {
        let mut s = RunOut::default();
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
        // One more run with idle below the dip makes the two splits equal: the lower wins,
        // and the run that set it is the next one run again.
        let mut t = RunOut::default();
        for (r, i) in [(7000.0, 10.0), (8000.0, 1.0), (9000.0, 6.0), (10000.0, 1.0)] {
            t.record(&run(r, i));
        }
        let sp = t.split().unwrap();
        assert_eq!(
            (sp.below, sp.above, sp.disagreeing),
            (Some(7000.0), Some(8000.0), 1)
        );
        assert_eq!(t.next(), Some(8000.0));
    }

    #[test]
    fn one_sided_runs_grow_or_shrink_and_measure_nothing() {
        let mut s = RunOut::default();
        assert_eq!((s.split(), s.next(), s.measured()), (None, None, None));
        s.record(&run(1000.0, 50.0));
        assert_eq!(s.next(), Some(1000.0 * GROW));
        assert_eq!(s.measured(), None);
        let mut s = RunOut::default();
        s.record(&run(1000.0, 0.5));
        assert_eq!(s.next(), Some(1000.0 / GROW));
        assert_eq!((s.measured(), s.resolution()), (None, None));
        // Two runs at one rate, one out, one not: no verdict, nothing measured; it is run
        // again.
        s.record(&run(1000.0, 10.0));
        assert_eq!((s.split(), s.measured()), (None, None));
        assert_eq!(s.next(), Some(1000.0));
        s.record(&run(1000.0, 11.0));
        assert_eq!(s.split().unwrap().below, Some(1000.0));
        assert_eq!(s.next(), Some(1000.0 * GROW));
    }
}
