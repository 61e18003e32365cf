//! The measured crossing on a seeded model server with the host's measured noise: the earlier
//! method (every run one vote, the probes only bisect) against [`RunOut`]'s (a rate's
//! verdict the majority of its runs, a bracket's edge that rests on one run run again before
//! the probes bisect). Tests only: how the method was chosen (docs/results-log.md).
//!
//! The model: the CPU runs out (idle under 3%) at `KNEE` req/s, the CPU per request falling
//! 4% through the ladder as it does on the servers measured; the overload run, the ladder's
//! reference, serves 0.97-1.15x the knee (56 gzip-page rows: 0.97-1.31, median 1.06); a run
//! offered more than its CPU holds serves what it holds.
//! Each 3 s run costs its rate's CPU per request times `1 + e`, `e` drawn from [`noise`]: the
//! residuals of 393 runs against their neighbours in seven gzip-page quick runs
//! (`scripts/events-run-noise.py`: 8.4% of runs 5% or more dearer, 1.3% 10% or more, 6.1%
//! 5% or more cheaper). A prediction leaning +3.4% with a 1.5% spread (the gzip-page runs')
//! turns each row's measured crossing into a row's error.

use super::plan::QUICK_FRACS;
use super::runout::RunOut;
use super::search::{Trial, GROW};
use crate::capacity::analyze::{run_out_split, Tie};

/// Where the model's CPU runs out (req/s).
const KNEE: f64 = 1000.0;

/// A seeded generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Normal with mean 0 and deviation `sd` (Box-Muller).
    fn normal(&mut self, sd: f64) -> f64 {
        let u = 1.0 - self.unit();
        let v = self.unit();
        sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// One run's CPU per request over its rate's (fraction): 2.5% of spread, one run in 17 5-13%
/// dearer, one in 33 5-10% cheaper.
fn noise(g: &mut Rng) -> f64 {
    let u = g.unit();
    if u < 0.06 {
        g.uniform(0.05, 0.13)
    } else if u < 0.09 {
        -g.uniform(0.05, 0.10)
    } else {
        g.normal(0.025)
    }
}

/// A model server: its CPU runs out at [`KNEE`]; overloaded, it serves `held` req/s.
struct Model {
    held: f64,
    g: Rng,
}

impl Model {
    fn new(seed: u64) -> Model {
        let mut g = Rng(seed);
        let held = KNEE * g.uniform(0.97, 1.15);
        Model { held, g }
    }

    /// One 3 s run at `offered` req/s.
    fn run(&mut self, offered: f64) -> Trial {
        // us per request: the CPU is 97% busy at the knee, 4% dearer at rate 0.
        let cost = 0.97e6 / KNEE * (1.0 + 0.04 * (1.0 - offered / KNEE));
        let busy = offered * cost * (1.0 + noise(&mut self.g)) / 1e6;
        Trial {
            offered,
            served: if busy > 1.0 { offered / busy } else { offered },
            p99_ms: if busy > 1.0 { 900.0 } else { 20.0 },
            idle_pct: (100.0 * (1.0 - busy)).max(0.0),
        }
    }
}

/// The lab's order: the overload run (what it serves is the ladder's reference), the quick
/// ladder's 7 rates, then `probes` probes asked of `next`; the measured crossing from
/// `measure`.
fn row(
    seed: u64,
    probes: usize,
    next: fn(&[Trial], &RunOut) -> Option<f64>,
    measure: fn(&[Trial], &RunOut) -> Option<f64>,
) -> Option<f64> {
    let mut m = Model::new(seed);
    let mut runs = Vec::new();
    let mut s = RunOut::default();
    let over = Trial {
        offered: 1.3 * m.held,
        served: m.held,
        p99_ms: 900.0,
        idle_pct: 0.0,
    };
    s.record_overload(&over);
    runs.push(over);
    for f in QUICK_FRACS {
        let t = m.run(f * m.held);
        s.record(&t);
        runs.push(t);
    }
    for _ in 0..probes {
        let t = m.run(next(&runs, &s)?);
        s.record(&t);
        runs.push(t);
    }
    measure(&runs, &s)
}

/// The earlier method's split: every run one vote, the lowest of equally good splits.
fn split_of_runs(runs: &[Trial]) -> Option<(Option<f64>, Option<f64>)> {
    let v: Vec<(f64, bool)> = runs
        .iter()
        .map(|t| (t.offered, super::runout::ran_out(t)))
        .collect();
    run_out_split(&v, Tie::Lowest).map(|(lo, hi, _)| (lo, hi))
}

/// The earlier method's probes: the bracket's geometric midpoint, or a step of [`GROW`].
fn bisect_only(runs: &[Trial], _: &RunOut) -> Option<f64> {
    Some(match split_of_runs(runs)? {
        (Some(lo), Some(hi)) => (lo * hi).sqrt(),
        (Some(lo), None) => lo * GROW,
        (None, Some(hi)) => hi / GROW,
        (None, None) => return None,
    })
}

fn measured_of_runs(runs: &[Trial], _: &RunOut) -> Option<f64> {
    match split_of_runs(runs)? {
        (Some(lo), Some(hi)) => Some((lo * hi).sqrt()),
        _ => None,
    }
}

fn with_repeats(_: &[Trial], s: &RunOut) -> Option<f64> {
    s.next()
}

fn measured_by_majority(_: &[Trial], s: &RunOut) -> Option<f64> {
    s.measured()
}

/// Over `n` seeded rows: the share of rows measured more than 7% from the knee, the share
/// measured more than 5% under it, and the share of rows whose prediction (the knee x
/// 1.034, 1.5% spread, seeded) is more than 10% from the measured crossing.
struct Tally {
    far: f64,
    low: f64,
    missed: f64,
}

fn tally(n: u64, probes: usize, repeats: bool) -> Tally {
    let (mut far, mut low, mut missed) = (0, 0, 0);
    for seed in 0..n {
        let m = if repeats {
            row(seed, probes, with_repeats, measured_by_majority)
        } else {
            row(seed, probes, bisect_only, measured_of_runs)
        };
        let m = m.expect("every model row is bracketed");
        let e = m / KNEE - 1.0;
        far += usize::from(e.abs() > 0.07);
        low += usize::from(e < -0.05);
        let predicted = KNEE * (1.034 + Rng(seed ^ 0x5eed).normal(0.015));
        missed += usize::from((predicted / m - 1.0).abs() > 0.10);
    }
    let share = |k: usize| k as f64 / n as f64;
    Tally {
        far: share(far),
        low: share(low),
        missed: share(missed),
    }
}

#[test]
fn the_model_noise_has_the_measured_tails() {
    // scripts/events-run-noise.py on cap12-quick1..5, lead-quick-final, lead-quick-pq100:
    // 8.4% of runs 5% or more dearer than their neighbours, 1.3% 10% or more, 6.1% 5% or
    // more cheaper, 0.5% 10% or more.
    let mut g = Rng(1);
    let e: Vec<f64> = (0..100_000).map(|_| noise(&mut g)).collect();
    let share = |f: &dyn Fn(f64) -> bool| e.iter().filter(|&&x| f(x)).count() as f64 / 1e5;
    let dear5 = share(&|x| x >= 0.05);
    let dear10 = share(&|x| x >= 0.10);
    let cheap5 = share(&|x| x <= -0.05);
    assert!((0.07..0.10).contains(&dear5), "{dear5}");
    assert!((0.01..0.03).contains(&dear10), "{dear10}");
    assert!((0.04..0.07).contains(&cheap5), "{cheap5}");
}

#[test]
fn repeating_one_run_edges_cuts_the_rows_measured_far_off() {
    let n = 4000;
    let before = tally(n, 3, false);
    let before5 = tally(n, 5, false);
    let now = tally(n, 5, true);
    for (name, t) in [
        ("bisect only, 3 probes", &before),
        ("bisect only, 5 probes", &before5),
        ("repeats, 5 probes", &now),
        ("repeats, 6 probes", &tally(n, 6, true)),
    ] {
        println!(
            "{name}: measured >7% off {:.2}%, >5% under {:.2}%, rows missing 10% {:.2}% \
             (a run of 7 rows within 10%: {:.1}%)",
            100.0 * t.far,
            100.0 * t.low,
            100.0 * t.missed,
            100.0 * (1.0 - t.missed).powi(7)
        );
    }
    // Against the lab until now (3 probes, bisecting only) the repeats with 5 probes take
    // the rows measured more than 7% off from 3.2% to 1.2%, those measured more than 5% low
    // (the side the prediction's lean makes a miss of) from 4.1% to 1.8%, the rows missing
    // 10% from 3.1% to 1.4%; two more probes bisecting do less (2.0%, 3.2%, 2.5%).
    assert!(
        before.far > 0.025 && before5.far > 0.018,
        "{} {}",
        before.far,
        before5.far
    );
    assert!(now.far < 0.7 * before5.far, "{} {}", now.far, before5.far);
    assert!(now.low < 0.6 * before5.low, "{} {}", now.low, before5.low);
    assert!(
        now.missed < 0.6 * before5.missed && now.missed < 0.5 * before.missed,
        "{} {} {}",
        now.missed,
        before5.missed,
        before.missed
    );
    assert!((1.0 - now.missed).powi(7) > 0.88, "{}", now.missed);
}
