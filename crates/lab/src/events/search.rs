//! The measured saturation, found by a search ([`SatSearch`]): the highest open-loop rate the
//! server *sustained* (served at least [`SUSTAIN_SERVED`] of what was offered, with a p99
//! latency under [`SUSTAIN_P99_MS`]: a queue that did not grow through the window), rather
//! than what one overload run happened to serve. Every open-loop run of a cold count is a
//! trial (the overload run, the ladder's rates); the probes after the ladder bisect between
//! the highest rate sustained and the lowest rate above it that was not (geometric midpoint),
//! or grow by [`GROW`] while nothing above it failed. Pure: tested on a model server.

use serde::Serialize;

/// A run sustained its rate when it served at least this share of the rate offered.
pub const SUSTAIN_SERVED: f64 = 0.97;

/// ... and its p99 latency (from the scheduled send) stayed under this (ms). Over capacity by
/// 3% for a 3 s window the queue reaches about 90 ms of arrivals; the servers' p99 at
/// sustained rates on a 10% quota reaches 65-215 ms (throttled periods), so the bound is
/// above that.
pub const SUSTAIN_P99_MS: f64 = 250.0;

/// With no failed rate above the highest sustained one, the next probe offers this many
/// times it.
pub const GROW: f64 = 1.15;

/// One open-loop run: the rate offered, the rate served, the p99 latency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Trial {
    /// Rate offered (req/s).
    pub offered: f64,
    /// Rate served: completed requests per second of the run (req/s).
    pub served: f64,
    /// p99 latency from the scheduled send (ms; NaN: none measured).
    pub p99_ms: f64,
    /// The server side's idle share of its CPU quota over the run (%; NaN: not measured),
    /// for [`super::runout`]: where the CPU ran out.
    pub idle_pct: f64,
}

impl Trial {
    /// Which criterion a run that did not sustain its rate failed: `served` (under
    /// [`SUSTAIN_SERVED`] of the rate), `p99` (over [`SUSTAIN_P99_MS`], or none measured), or
    /// `served+p99`; `None` when it sustained it.
    pub fn failed_on(&self) -> Option<&'static str> {
        if self.sustained() {
            return None;
        }
        let served = self.served < SUSTAIN_SERVED * self.offered;
        let p99 = !(self.p99_ms.is_finite() && self.p99_ms <= SUSTAIN_P99_MS);
        Some(match (served, p99) {
            (true, true) => "served+p99",
            (true, false) => "served",
            _ => "p99",
        })
    }

    /// Whether the server kept up with the rate (see the module's criterion).
    pub fn sustained(&self) -> bool {
        self.offered > 0.0
            && self.served >= SUSTAIN_SERVED * self.offered
            && self.p99_ms.is_finite()
            && self.p99_ms <= SUSTAIN_P99_MS
    }
}

/// The trials of one cold count, and the next rate to try.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SatSearch {
    /// Every trial, in the order run.
    pub trials: Vec<Trial>,
}

impl SatSearch {
    /// Add a trial.
    pub fn record(&mut self, t: Trial) {
        if t.offered.is_finite() && t.offered > 0.0 {
            self.trials.push(t);
        }
    }

    /// The highest rate offered that was sustained (req/s): the measured saturation.
    pub fn best(&self) -> Option<f64> {
        self.trials
            .iter()
            .filter(|t| t.sustained())
            .map(|t| t.offered)
            .fold(None, |m, x| Some(m.map_or(x, |m: f64| m.max(x))))
    }

    /// The lowest rate offered above [`best`](Self::best) that was not sustained (req/s); with
    /// nothing sustained, the lowest rate that failed.
    pub fn failed_above(&self) -> Option<f64> {
        let lo = self.best().unwrap_or(0.0);
        self.trials
            .iter()
            .filter(|t| !t.sustained() && t.offered > lo)
            .map(|t| t.offered)
            .fold(None, |m, x| Some(m.map_or(x, |m: f64| m.min(x))))
    }

    /// Failed trials below the best sustained rate: noise (a run that fell behind at a rate
    /// the server kept up with elsewhere), counted for the report.
    pub fn failed_below(&self) -> usize {
        let Some(lo) = self.best() else { return 0 };
        self.trials
            .iter()
            .filter(|t| !t.sustained() && t.offered < lo)
            .count()
    }

    /// The resolution of [`best`](Self::best): how far above it the next failure lies, as a
    /// fraction (`None`: nothing failed above it).
    pub fn resolution(&self) -> Option<f64> {
        Some(self.failed_above()? / self.best()? - 1.0)
    }

    /// The next rate to try: the geometric midpoint of the bracket, [`GROW`] times the best
    /// with nothing failed above it, the lowest failure over [`GROW`] with nothing sustained;
    /// `None` before any trial.
    pub fn next(&self) -> Option<f64> {
        match (self.best(), self.failed_above()) {
            (Some(lo), Some(hi)) => Some((lo * hi).sqrt()),
            (Some(lo), None) => Some(lo * GROW),
            (None, Some(hi)) => Some(hi / GROW),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model server of capacity `cap` req/s: below it everything is served with a short
    /// latency; above it the queue grows, it serves `cap` and the latency grows with the
    /// excess over a 3 s window. By the criterion it sustains up to `cap / SUSTAIN_SERVED`
    /// (3% over, a queue of 90 ms at the end of the window).
    fn model(cap: f64, offered: f64) -> Trial {
        if offered <= cap {
            Trial {
                offered,
                served: offered * 0.995,
                p99_ms: 20.0,
                idle_pct: 10.0,
            }
        } else {
            Trial {
                offered,
                served: cap,
                p99_ms: 3000.0 * (1.0 - cap / offered),
                idle_pct: 0.0,
            }
        }
    }

    /// The lab's order: an overload run at `over`, the ladder's fractions of what it served,
    /// then `probes` probes.
    fn search(cap: f64, over: f64, probes: usize) -> SatSearch {
        let mut s = SatSearch::default();
        let o = model(cap, over);
        s.record(o);
        for f in [0.1, 0.3, 0.5, 0.59, 0.68, 0.77, 0.86, 0.95] {
            s.record(model(cap, f * o.served));
        }
        for _ in 0..probes {
            let r = s.next().unwrap();
            s.record(model(cap, r));
        }
        s
    }

    #[test]
    fn criterion() {
        let t = |served, p99_ms| Trial {
            offered: 1000.0,
            served,
            p99_ms,
            idle_pct: 5.0,
        };
        assert!(t(970.0, 250.0).sustained());
        assert_eq!(t(970.0, 250.0).failed_on(), None);
        assert_eq!(t(969.0, 10.0).failed_on(), Some("served"));
        assert_eq!(t(1000.0, 251.0).failed_on(), Some("p99"));
        assert_eq!(t(900.0, f64::NAN).failed_on(), Some("served+p99"));
        assert!(!t(969.0, 10.0).sustained());
        assert!(!t(1000.0, 251.0).sustained());
        assert!(!t(1000.0, f64::NAN).sustained());
    }

    #[test]
    fn bisects_above_the_ladder_to_the_capacity() {
        // The overload run served the capacity: the ladder's top (95%) is sustained, the
        // overload rate is not; three probes bisect [0.95, 1.25] x cap to within 4%.
        let s = search(4000.0, 5000.0, 3);
        let (best, hi) = (s.best().unwrap(), s.failed_above().unwrap());
        let edge = 4000.0 / SUSTAIN_SERVED;
        assert!(best <= edge && hi > edge, "{best} {hi}");
        assert!(best > edge / 1.04, "{best}");
        assert!(s.resolution().unwrap() < 0.04);
        // The one overload run read the capacity here; each probe halves the bracket.
        assert!(search(4000.0, 5000.0, 4).resolution().unwrap() < s.resolution().unwrap());
    }

    #[test]
    fn an_overload_run_that_fell_short_does_not_set_the_saturation() {
        // The overload run served 70% of the capacity (connections timing out): the ladder's
        // rates are fractions of too low a reading and all sustained; the probes grow past it
        // until one fails, then bisect.
        let mut s = SatSearch::default();
        s.record(Trial {
            offered: 6000.0,
            served: 2800.0,
            p99_ms: 900.0,
            idle_pct: 0.0,
        });
        for f in [0.5, 0.77, 0.95] {
            s.record(model(4000.0, f * 2800.0));
        }
        assert!(s.best().unwrap() < 2700.0);
        assert_eq!(s.next(), Some((s.best().unwrap() * 6000.0).sqrt()));
        for _ in 0..5 {
            let r = s.next().unwrap();
            s.record(model(4000.0, r));
        }
        let best = s.best().unwrap();
        assert!(best <= 4000.0 / SUSTAIN_SERVED && best > 3800.0, "{best}");
    }

    #[test]
    fn growth_without_a_failure_and_noise_below() {
        let mut s = SatSearch::default();
        assert_eq!(s.next(), None);
        s.record(model(10_000.0, 1000.0));
        assert_eq!(s.next(), Some(1000.0 * GROW));
        // A failure below the best sustained rate is noise: counted, not a bound.
        s.record(model(10_000.0, 2000.0));
        s.record(Trial {
            offered: 1500.0,
            served: 1300.0,
            p99_ms: 400.0,
            idle_pct: 0.0,
        });
        assert_eq!(
            (s.best(), s.failed_above(), s.failed_below()),
            (Some(2000.0), None, 1)
        );
        // Nothing sustained: below the lowest failure.
        let mut s = SatSearch::default();
        s.record(model(100.0, 230.0));
        assert_eq!(s.next(), Some(230.0 / GROW));
        assert_eq!(s.resolution(), None);
    }
}
