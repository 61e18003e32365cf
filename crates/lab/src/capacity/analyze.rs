//! Seed 002's method on any server: buckets of (rate, user%, kernel%, idle%), linear
//! regressions of each share against the rate over all buckets and over the busy range (at or
//! above a low-rate cut, saturated buckets left out: [`busy_range`]), the idle line's
//! X-intercept as the predicted peak rate (from the busy range when a cut is given), the
//! headroom left above the busiest bucket, and warnings when the figures should not be
//! trusted. Pure. `triage lab events` predicts with the same functions, so the lab and the
//! tool differ only in how their points were made (rate windows against time buckets).

use std::fmt::Write as _;

use serde::Serialize;

use super::bucket::{utc, Bucket, Bucketed};
use super::regress::{fit, Fit, MIN_POINTS};

/// Below this |r| the idle line is too weak to predict anything (the seed's full-day idle fits
/// had r = -0.85 and -0.90).
pub const DEFAULT_MIN_R: f64 = 0.8;

/// A point (bucket or rate window) whose idle share is below this (%) has run out of CPU: its
/// rate is what the server could do there, not a point on the idle line (which would go on
/// below zero), so the busy-range fit leaves it out (censored), as it leaves out the rates
/// below the cut.
pub const SATURATED_IDLE_PCT: f64 = 3.0;

/// Which of equally good splits [`run_out_split`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tie {
    /// The lowest: where the CPU first ran out (the measured crossing).
    Lowest,
    /// The highest: points are left out of a fit as past the knee only when fewer points
    /// disagree with that than with any split above them (the fit's knee until 2026-11-27).
    Highest,
}

/// Where points sorted by rate split between those with CPU left and those out of it
/// (`(rate, out)`): the split that the fewest points disagree with (out of CPU below it, CPU
/// left above it), of equally good ones the one `tie` says. Returns the highest rate below
/// it, the lowest above it (`None`: no point on that side) and how many points disagree;
/// `None` without points. Equal rates sort with CPU left first.
pub fn run_out_split(
    points: &[(f64, bool)],
    tie: Tie,
) -> Option<(Option<f64>, Option<f64>, usize)> {
    if points.is_empty() {
        return None;
    }
    let mut v = points.to_vec();
    v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    // Split at i: points [0, i) below, [i, n) above.
    let mut out_below = 0;
    let mut left_above = v.iter().filter(|r| !r.1).count();
    let mut best = (left_above, 0);
    for (i, r) in v.iter().enumerate() {
        if r.1 {
            out_below += 1;
        } else {
            left_above -= 1;
        }
        let d = out_below + left_above;
        if d < best.0 || (d == best.0 && tie == Tie::Highest) {
            best = (d, i + 1);
        }
    }
    let (disagreeing, i) = best;
    Some((
        i.checked_sub(1).map(|j| v[j].0),
        v.get(i).map(|r| r.0),
        disagreeing,
    ))
}

/// Whether a point (rate, user %, kernel %, idle %) ran out of CPU on its idle share alone:
/// idle under `saturated_idle_pct`, or unknown (NaN).
fn idle_out(p: &(f64, f64, f64, f64), saturated_idle_pct: f64) -> bool {
    p.3.is_nan() || p.3 < saturated_idle_pct
}

/// Each point's place in the ladder's offered order, and whether it ran out of CPU:
/// `(order key, out)`, one per point, the knee split on the keys ([`knee_in_order`]).
pub type Order = Vec<(f64, bool)>;

/// The order when nothing but the points is known: each point's rate served, out of CPU on
/// idle alone (under `saturated_idle_pct`, or unknown). A run that fell behind sits here
/// lower than the rate it was offered.
pub fn served_order(points: &[(f64, f64, f64, f64)], saturated_idle_pct: f64) -> Order {
    points
        .iter()
        .map(|p| (p.0, idle_out(p, saturated_idle_pct)))
        .collect()
}

/// Two runs of a load test are one rate run twice when their rates offered lie within this
/// fraction of each other, and a step rises above the ladder only by more than this. A run
/// that kept up serves its rate to within about 1% (the lab's repeats of a rate served within
/// 1.8% of each other), so a log ([`offered_rate`]) cannot tell a run of a rate from one 2%
/// away; the lab, which knows its rates offered exactly, groups its runs the same way, so
/// that both fit the same points (a probe bisecting next to a ladder rate is that rate's run
/// in both).
pub const REPEAT_REL: f64 = 0.02;

/// The order key of a run that is no step of the ladder ([`Role::Repeat`], [`Role::Check`]):
/// past every step, so that it is never fitted and never moves the knee itself.
pub const REPEAT_KEY: f64 = f64::INFINITY;

/// A rate's verdict from its runs' votes (out of CPU or not), the first run's first: the
/// majority; on a tie the first run's. As the measured crossing votes (`events::runout`), so
/// that no single run sets the fit's knee where other runs at its rate disagree.
pub fn majority(votes: &[bool]) -> Option<bool> {
    let out = votes.iter().filter(|&&v| v).count();
    let left = votes.len() - out;
    match out.cmp(&left) {
        std::cmp::Ordering::Greater => Some(true),
        std::cmp::Ordering::Less => Some(false),
        std::cmp::Ordering::Equal => votes.first().copied(),
    }
}

/// What one run of a load test is to the fit ([`ladder_roles`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A step of the rising ladder: a point of the line.
    Step,
    /// A later run of the ladder step at this index (its rate again): a vote on whether that
    /// rate ran out of CPU, and averaged into that step's point ([`ladder_fit`]).
    Repeat(usize),
    /// A later run at a rate the ladder did not run (a probe between two rates): neither a
    /// point nor a vote. Near the crossing only the runs that happened to be cheap keep idle
    /// left, so such runs as points would lean the line towards them.
    Check,
}

/// The roles of a load test's runs, in time order, from their rates offered: the **ladder**
/// is the runs up to the first that does not rise above every earlier one by more than
/// `within` (a fraction, [`REPEAT_REL`] for the lab and the tool); every run from that one on
/// checks the ladder: a [`Role::Repeat`] of the ladder step whose rate offered lies within
/// `within` of its own (the nearest), else a [`Role::Check`]. The lab's ladder rises and its probes come after it, so a log of the lab's
/// runs gives the lab's own roles: a probe that runs a rate of the ladder again votes on it,
/// and a probe between two rates is neither point nor vote, in the lab and in the tool alike.
pub fn ladder_roles(offered: &[f64], within: f64) -> Vec<Role> {
    let mut roles: Vec<Role> = Vec::with_capacity(offered.len());
    let mut top = f64::NEG_INFINITY;
    let mut ended = false;
    for &x in offered {
        if !ended && (top == f64::NEG_INFINITY || x > top * (1.0 + within)) {
            top = x;
            roles.push(Role::Step);
            continue;
        }
        ended = true;
        let near = (0..roles.len())
            .filter(|&i| roles[i] == Role::Step)
            .filter(|&i| (x - offered[i]).abs() <= within * offered[i])
            .min_by(|&a, &b| (x - offered[a]).abs().total_cmp(&(x - offered[b]).abs()));
        roles.push(near.map_or(Role::Check, Role::Repeat));
    }
    roles
}

/// The order the knee of a load test's runs is split in ([`knee_in_order`]), one entry per
/// run in time order, from each run's rate **offered** and whether it ran out of CPU (`out`:
/// its idle under the threshold, or it fell behind its rate; as the lab's measured crossing
/// counts a run, `events::runout`). A ladder step is keyed by its rate offered, its verdict
/// the [`majority`] of its own run and its repeats ([`ladder_roles`]); a repeat or a check is
/// keyed [`REPEAT_KEY`], out. The lab calls it on its rates and probes with their rates
/// offered, `triage capacity --steps` on the steps of a log with their rates offered estimated
/// from their drains ([`offered_rate`]), both `within` [`REPEAT_REL`]: one rule, so the two
/// differ only in how their points and rates were measured.
pub fn ladder_order(offered: &[f64], out: &[bool], within: f64) -> Order {
    let n = offered.len().min(out.len());
    order_of_roles(
        &ladder_roles(&offered[..n], within),
        &offered[..n],
        &out[..n],
    )
}

/// [`ladder_order`] from the runs' roles, one entry each.
fn order_of_roles(roles: &[Role], offered: &[f64], out: &[bool]) -> Order {
    let n = roles.len();
    (0..n)
        .map(|i| match roles[i] {
            Role::Step => {
                let votes: Vec<bool> = std::iter::once(out[i])
                    .chain(
                        (i + 1..n)
                            .filter(|&j| roles[j] == Role::Repeat(i))
                            .map(|j| out[j]),
                    )
                    .collect();
                (offered[i], majority(&votes).unwrap_or(out[i]))
            }
            Role::Repeat(_) | Role::Check => (REPEAT_KEY, true),
        })
        .collect()
}

/// A point of the fit: (rate served, user %, kernel %, idle %).
pub type Point = (f64, f64, f64, f64);

/// A load test's runs as the fit takes them ([`ladder_roles`], [`ladder_order`]): each ladder
/// step's point is the mean of its own run's and its repeats' (rate served, user, kernel and
/// idle shares), so a rate run three times is one point whose idle share varies 1/√3 as much
/// as one run's (a run's cost per request moves by 3-7% from one run to the next on this
/// host); a repeat or a check keeps its own point, keyed past every step. Every run at the
/// rate counts, out of CPU or not: a mean over the runs that kept idle would lean towards the
/// cheap ones. `points`, `offered` and `out` one entry per run, in time order.
pub fn ladder_fit(
    points: &[Point],
    offered: &[f64],
    out: &[bool],
    within: f64,
) -> (Vec<Point>, Order) {
    let n = points.len().min(offered.len()).min(out.len());
    let roles = ladder_roles(&offered[..n], within);
    let fit_points = (0..n)
        .map(|i| {
            if roles[i] != Role::Step {
                return points[i];
            }
            let at: Vec<&Point> = std::iter::once(i)
                .chain((i + 1..n).filter(|&j| roles[j] == Role::Repeat(i)))
                .map(|j| &points[j])
                .collect();
            let k = at.len() as f64;
            let mean = |f: fn(&Point) -> f64| at.iter().map(|p| f(p)).sum::<f64>() / k;
            (mean(|p| p.0), mean(|p| p.1), mean(|p| p.2), mean(|p| p.3))
        })
        .collect();
    (fit_points, order_of_roles(&roles, &offered[..n], &out[..n]))
}

/// The rate step `b` was offered: its rate served, grossed up by its drain (the requests it
/// left queued, served in the second after it) when it fell behind
/// ([`super::steps::fell_behind`]); a step that kept up was offered what it served.
pub fn offered_rate(b: &Bucket) -> f64 {
    if super::steps::fell_behind(b) && b.requests > 0 {
        b.rate * (b.requests + b.drain_requests) as f64 / b.requests as f64
    } else {
        b.rate
    }
}

/// The order key from which points are past the knee: the lowest key above the split of
/// [`run_out_split`] on `order`; of equally good splits the lowest, where the CPU first ran
/// out, as the lab's measured crossing takes it (`events::runout`); `None` when no point ran
/// out. The lab's keys are the rates offered and the tool's the steps' time order, so both
/// split the ladder where the crossing splits its runs (before, both split by the rate
/// served: [`served_order`]).
pub fn knee_in_order(order: &[(f64, bool)]) -> Option<f64> {
    run_out_split(order, Tie::Lowest)?.1
}

/// The rate from which `points` (rate, user %, kernel %, idle %) are past the knee, split by
/// the rate served ([`served_order`], [`knee_in_order`]). A point at or above it that shows
/// idle CPU again was served after the CPU ran out (under a CPU quota: a run that stayed
/// unthrottled above a rate whose run was throttled through), not a point on the line the seed
/// fits: its server had run out of CPU at a lower rate. Until 2026-11-27 (cap7) the fit took
/// the highest of equal splits and kept such a point (docs/results-log.md).
pub fn knee_from(points: &[(f64, f64, f64, f64)], saturated_idle_pct: f64) -> Option<f64> {
    knee_in_order(&served_order(points, saturated_idle_pct))
}

/// The busy range of `points` (rate, user %, kernel %, idle %): those at or above `cut`
/// requests/s whose idle share is at least `saturated_idle_pct`, before the knee of `order`
/// ([`knee_in_order`]; one entry per point). At low rates the cost of a request is dominated
/// by waking an idle server (seed 002's night-time housekeeping played the same part), a
/// saturated point lies off the line, and so does a point past the knee: the idle line's slope
/// near the peak is measured between them.
pub fn busy_range(
    points: &[(f64, f64, f64, f64)],
    order: &[(f64, bool)],
    cut: f64,
    saturated_idle_pct: f64,
) -> Vec<(f64, f64, f64, f64)> {
    let knee = knee_in_order(order).unwrap_or(f64::INFINITY);
    points
        .iter()
        .zip(order)
        .filter(|(p, o)| p.0 >= cut && p.3 >= saturated_idle_pct && o.0 < knee)
        .map(|(p, _)| *p)
        .collect()
}

/// Which points the prediction was fitted on ([`prediction_fit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Range {
    /// The busy range: at or above the cut, saturated points left out.
    Busy,
    /// Every unsaturated point (no cut, or too few points above it).
    Unsaturated,
    /// Every point (too few unsaturated ones).
    All,
}

impl Range {
    /// How a report names it.
    pub fn describe(self) -> &'static str {
        match self {
            Range::Busy => "busy range",
            Range::Unsaturated => "every unsaturated point",
            Range::All => "every point",
        }
    }
}

/// The fit the prediction is read from: the busy range ([`busy_range`]) when it holds a line
/// (at least [`MIN_POINTS`] points with spread in rate), else every unsaturated point, else
/// every point; the knee from `order` (one entry per point). The lab and `triage capacity`
/// both predict through it.
pub fn prediction_fit(
    points: &[(f64, f64, f64, f64)],
    order: &[(f64, bool)],
    cut: Option<f64>,
    saturated_idle_pct: f64,
) -> (Range, Fits) {
    if let Some(c) = cut {
        let f = fits_of(&busy_range(points, order, c, saturated_idle_pct));
        if f.idle.is_some() {
            return (Range::Busy, f);
        }
    }
    let f = fits_of(&busy_range(
        points,
        order,
        f64::NEG_INFINITY,
        saturated_idle_pct,
    ));
    if f.idle.is_some() {
        return (Range::Unsaturated, f);
    }
    (Range::All, fits_of(points))
}

/// The three lines of one set of buckets (`None`: too few buckets or no spread in rate).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fits {
    /// Buckets fitted.
    pub buckets: usize,
    /// Idle % against the rate.
    pub idle: Option<Fit>,
    /// Kernel-mode % against the rate.
    pub kernel: Option<Fit>,
    /// User-mode % against the rate.
    pub user: Option<Fit>,
    /// The idle line's X-intercept (requests/s).
    pub predicted_peak_rps: Option<f64>,
}

/// Fit the three lines on `buckets` as (rate, share) points.
pub fn fits_of(points: &[(f64, f64, f64, f64)]) -> Fits {
    let line = |k: usize| {
        let v: Vec<(f64, f64)> = points.iter().map(|p| (p.0, [p.1, p.2, p.3][k])).collect();
        fit(&v)
    };
    let idle = line(2);
    Fits {
        buckets: points.len(),
        idle,
        kernel: line(1),
        user: line(0),
        predicted_peak_rps: idle.and_then(|f| f.x_intercept()),
    }
}

/// The points the prediction of `buckets` (in time order) is fitted on and the order their
/// knee is split in: the steps of a load test by their rates offered, each ladder step's
/// point the mean of its runs ([`ladder_fit`]); fixed-width buckets of a day's traffic are no
/// ladder: each its own point, split by its rate ([`served_order`]).
pub fn bucket_fit(buckets: &[Bucket], steps: bool, saturated_idle_pct: f64) -> (Vec<Point>, Order) {
    let pts = points(buckets);
    if steps {
        let out: Vec<bool> = buckets
            .iter()
            .zip(&pts)
            .map(|(b, p)| super::steps::fell_behind(b) || idle_out(p, saturated_idle_pct))
            .collect();
        let offered: Vec<f64> = buckets.iter().map(offered_rate).collect();
        ladder_fit(&pts, &offered, &out, REPEAT_REL)
    } else {
        let order = served_order(&pts, saturated_idle_pct);
        (pts, order)
    }
}

/// The buckets as (rate, user %, kernel %, idle %) points, in time order.
pub fn points(b: &[Bucket]) -> Vec<(f64, f64, f64, f64)> {
    b.iter()
        .map(|b| (b.rate, b.user_pct, b.kernel_pct, b.idle_pct))
        .collect()
}

/// How to analyse.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Also fit the busy range: the buckets at or above this rate (requests/s), as the seed's
    /// Table 5, less the saturated ones; when given, the prediction comes from that fit.
    pub low_rate_cut: Option<f64>,
    /// Buckets with less idle than this (%) are saturated: left out of the busy-range fit.
    pub saturated_idle_pct: f64,
    /// Warn when the idle line's |r| is below this.
    pub min_r: f64,
}

/// The whole analysis (`triage capacity --json` prints it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    /// Bucket width (s); with `steps`, the shortest step kept.
    pub bucket_s: u64,
    /// The buckets are the steps of a rate ladder (`--steps`), each with its own width.
    pub steps: bool,
    /// The buckets.
    pub buckets: Vec<Bucket>,
    /// Requests counted in buckets.
    pub requests_used: u64,
    /// Requests outside every bucket.
    pub requests_outside: u64,
    /// Log lines skipped as malformed.
    pub malformed_lines: u64,
    /// Regressions over every bucket (the seed's Table 4).
    pub all: Fits,
    /// The cut and the regressions over the busy range (Table 5: at or above the cut, the
    /// saturated buckets left out).
    pub above_cut: Option<(f64, Fits)>,
    /// Buckets at or above the cut left out as saturated.
    pub saturated_buckets: usize,
    /// The buckets the prediction was fitted on ([`prediction_fit`]).
    pub prediction_range: Range,
    /// The predicted peak rate (req/s): the idle X-intercept of [`prediction_fit`] (the busy
    /// range when a cut is given and it holds a line).
    pub predicted_peak_rps: Option<f64>,
    /// The busiest bucket's rate (req/s).
    pub busiest_rps: f64,
    /// Its CPU use (100 - idle %).
    pub busiest_cpu_pct: f64,
    /// Room above the busiest bucket: (predicted - busiest) / busiest (%).
    pub headroom_pct: Option<f64>,
    /// Why a figure should not be trusted, one sentence each.
    pub warnings: Vec<String>,
    /// What was skipped, one sentence each.
    pub notes: Vec<String>,
}

/// Analyse bucketed data; `malformed` lines of the log were skipped (`note` says how).
pub fn analyze(b: &Bucketed, malformed: u64, malformed_note: &str, o: &Options) -> Analysis {
    let pts = points(&b.buckets);
    let (fit_pts, order) = bucket_fit(&b.buckets, b.steps, o.saturated_idle_pct);
    let all = fits_of(&pts);
    let above_cut = o.low_rate_cut.map(|cut| {
        (
            cut,
            fits_of(&busy_range(&fit_pts, &order, cut, o.saturated_idle_pct)),
        )
    });
    let saturated_buckets = o.low_rate_cut.map_or(0, |cut| {
        pts.iter()
            .filter(|p| p.0 >= cut && p.3 < o.saturated_idle_pct)
            .count()
    });
    let busiest = b
        .buckets
        .iter()
        .max_by(|x, y| x.rate.total_cmp(&y.rate))
        .copied();
    let busiest_rps = busiest.map_or(0.0, |x| x.rate);
    let busiest_cpu_pct = busiest.map_or(0.0, |x| 100.0 - x.idle_pct);
    let (range, pf) = prediction_fit(&fit_pts, &order, o.low_rate_cut, o.saturated_idle_pct);
    let (line, predicted) = (pf.idle, pf.predicted_peak_rps);
    let headroom_pct = predicted
        .filter(|_| busiest_rps > 0.0)
        .map(|p| (p - busiest_rps) / busiest_rps * 100.0);
    let mut warnings = Vec::new();
    match line {
        None => warnings.push(format!(
            "no idle line: the {} buckets all have the same rate",
            b.buckets.len()
        )),
        Some(f) => {
            if f.r.abs() < o.min_r {
                warnings.push(format!(
                    "the idle line's r = {:.2} is too weak to trust (|r| < {:.2}): the predicted \
                     peak is not a measurement; record longer or over a wider range of rates",
                    f.r, o.min_r
                ));
            }
            if predicted.is_none() {
                warnings.push(format!(
                    "idle time does not fall with the rate (slope {:.4} %/(req/s), intercept \
                     {:.1} %): no peak rate can be predicted",
                    f.slope, f.intercept
                ));
            }
        }
    }
    if let Some(p) = predicted {
        if p < busiest_rps {
            warnings.push(format!(
                "the busiest bucket ({busiest_rps:.1} req/s) is above the predicted peak \
                 ({p:.1} req/s): CPU per request is not constant across the rates"
            ));
        }
    }
    if let Some((cut, f)) = &above_cut {
        if f.buckets < MIN_POINTS {
            warnings.push(format!(
                "only {} unsaturated bucket(s) at or above {cut} req/s: no fit above the cut",
                f.buckets
            ));
        }
    }
    let mut notes = Vec::new();
    if malformed > 0 {
        notes.push(malformed_note.to_owned());
    }
    if b.requests_outside > 0 {
        notes.push(if b.steps {
            format!(
                "{} logged requests fall outside the CPU samples or between the steps (runs \
                 shorter than {} s) and were not used",
                b.requests_outside, b.width_s
            )
        } else {
            format!(
                "{} logged requests fall outside the CPU samples' whole buckets and were not used",
                b.requests_outside
            )
        });
    }
    if b.steps {
        let offered: Vec<f64> = b.buckets.iter().map(offered_rate).collect();
        let roles = ladder_roles(&offered, REPEAT_REL);
        let repeats = roles
            .iter()
            .filter(|r| matches!(r, Role::Repeat(_)))
            .count();
        let checks = roles.iter().filter(|r| **r == Role::Check).count();
        if repeats + checks > 0 {
            notes.push(format!(
                "the ladder is the first {} step(s), each rising above the one before by more \
                 than {:.0}%; of the {} after it, {repeats} ran a ladder step's rate again \
                 (each voted on whether that rate ran out of CPU, the majority of its runs \
                 deciding, and is averaged into that step's point) and {checks} ran a rate \
                 the ladder did not (neither point nor vote)",
                roles.len() - repeats - checks,
                REPEAT_REL * 100.0,
                repeats + checks
            ));
        }
    }
    Analysis {
        bucket_s: b.width_s,
        steps: b.steps,
        requests_used: b.buckets.iter().map(|x| x.requests).sum(),
        requests_outside: b.requests_outside,
        malformed_lines: malformed,
        buckets: b.buckets.clone(),
        all,
        above_cut,
        saturated_buckets,
        prediction_range: range,
        predicted_peak_rps: predicted,
        busiest_rps,
        busiest_cpu_pct,
        headroom_pct,
        warnings,
        notes,
    }
}

fn row(name: &str, f: &Option<Fit>) -> String {
    match f {
        Some(f) => format!(
            "  {name:<8} {:>12.4} {:>10.2} {:>7.3}{}",
            f.slope,
            f.intercept,
            f.r,
            if name == "idle" {
                f.x_intercept()
                    .map_or("   (none)".into(), |x| format!("   {x:>10.1}"))
            } else {
                String::new()
            }
        ),
        None => format!("  {name:<8} (no fit)"),
    }
}

fn table(title: &str, f: &Fits) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{title} ({} buckets)", f.buckets);
    let _ = writeln!(
        s,
        "  {:<8} {:>12} {:>10} {:>7}   {:>10}",
        "mode", "slope %/rps", "intercept", "r", "X-int rps"
    );
    for (n, x) in [("idle", &f.idle), ("kernel", &f.kernel), ("user", &f.user)] {
        let _ = writeln!(s, "{}", row(n, x));
    }
    s
}

/// The analysis as text: the tables, the prediction, the headroom, warnings and notes.
pub fn text(a: &Analysis) -> String {
    let mut s = String::new();
    if let (Some(f), Some(l)) = (a.buckets.first(), a.buckets.last()) {
        let what = if a.steps {
            let lo = a.buckets.iter().map(|b| b.width_s).min().unwrap_or(0);
            let hi = a.buckets.iter().map(|b| b.width_s).max().unwrap_or(0);
            format!("steady-rate steps of {lo}-{hi} s")
        } else {
            format!("buckets of {} s", a.bucket_s)
        };
        let _ = writeln!(
            s,
            "{} {what} from {} to {}, {} requests",
            a.buckets.len(),
            utc(f.start_unix as f64),
            utc((l.start_unix + l.width_s as i64) as f64),
            a.requests_used
        );
    }
    s.push_str(&table(
        "Linear regressions of CPU % against requests/s, all buckets",
        &a.all,
    ));
    if let Some((cut, f)) = &a.above_cut {
        s.push_str(&table(
            &format!(
                "Busy range: at or above {cut} requests/s, {} saturated bucket(s) (idle < {}%) \
                 left out",
                a.saturated_buckets, SATURATED_IDLE_PCT
            ),
            f,
        ));
    }
    let over = a.prediction_range.describe();
    match a.predicted_peak_rps {
        Some(p) => {
            let _ = writeln!(
                s,
                "predicted peak rate (idle X-intercept, {over}): {p:.1} req/s"
            );
        }
        None => {
            let _ = writeln!(s, "predicted peak rate: none (see the warnings)");
        }
    }
    let _ = writeln!(
        s,
        "busiest bucket: {:.1} req/s at {:.1}% CPU",
        a.busiest_rps, a.busiest_cpu_pct
    );
    if let Some(h) = a.headroom_pct {
        let _ = writeln!(s, "headroom above the busiest bucket: {h:+.0}%");
    }
    for w in &a.warnings {
        let _ = writeln!(s, "WARNING: {w}");
    }
    for n in &a.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_past_the_knee_is_left_out_even_with_idle() {
        // cap6-quick's triage at 0 cold: idle 19.6, 18.7, 10.8% up to 7673 req/s, out of CPU
        // at 8688 and 9642, then 5.0% at 10647 (batched past the knee): not on the line.
        let p = |r: f64, i: f64| (r, 50.0, 50.0 - i, i);
        let pts = [
            p(5645.0, 19.6),
            p(6670.0, 18.7),
            p(7673.0, 10.8),
            p(8688.0, 2.1),
            p(9642.0, 0.1),
            p(10647.0, 5.0),
        ];
        assert_eq!(knee_from(&pts, SATURATED_IDLE_PCT), Some(8688.0));
        let busy = busy_range(
            &pts,
            &served_order(&pts, SATURATED_IDLE_PCT),
            4000.0,
            SATURATED_IDLE_PCT,
        );
        assert_eq!(
            busy.iter().map(|p| p.0).collect::<Vec<_>>(),
            [5645.0, 6670.0, 7673.0]
        );
        // Nothing out of CPU: no knee, every point above the cut.
        assert_eq!(knee_from(&pts[..3], SATURATED_IDLE_PCT), None);
        assert_eq!(
            busy_range(
                &pts[..3],
                &served_order(&pts[..3], SATURATED_IDLE_PCT),
                0.0,
                SATURATED_IDLE_PCT
            )
            .len(),
            3
        );
        // The split: fewest disagreeing, the lowest of equal ones.
        let s = |v: &[(f64, bool)]| run_out_split(v, Tie::Lowest);
        assert_eq!(s(&[]), None);
        let tied = [(1.0, false), (2.0, true), (3.0, false), (4.0, true)];
        assert_eq!(s(&tied), Some((Some(1.0), Some(2.0), 1)));
        assert_eq!(
            run_out_split(&tied, Tie::Highest),
            Some((Some(3.0), Some(4.0), 1))
        );
        // A tie ends the fit where the CPU first ran out: the point with idle above it is
        // left out (cap7-quick's nginx at 0 cold: out at 5842 req/s, idle 9.0% at 6440).
        let tp = [p(1.0, 10.0), p(2.0, 1.0), p(3.0, 9.0), p(4.0, 1.0)];
        assert_eq!(knee_from(&tp, SATURATED_IDLE_PCT), Some(2.0));
        let ng = [
            p(3398.0, 22.4),
            p(4004.0, 22.2),
            p(4621.0, 17.6),
            p(5232.0, 6.3),
            p(5842.0, 2.2),
            p(6440.0, 9.0),
        ];
        assert_eq!(knee_from(&ng, SATURATED_IDLE_PCT), Some(5842.0));
        assert_eq!(
            busy_range(
                &ng,
                &served_order(&ng, SATURATED_IDLE_PCT),
                2721.0,
                SATURATED_IDLE_PCT
            )
            .len(),
            4
        );
        // An unknown idle share counts as out of CPU.
        let unknown = [p(1.0, 10.0), p(2.0, f64::NAN), p(3.0, 9.0), p(4.0, 8.0)];
        assert_eq!(knee_from(&unknown, SATURATED_IDLE_PCT), None);
        assert_eq!(knee_from(&unknown[..2], SATURATED_IDLE_PCT), Some(2.0));
        assert_eq!(
            s(&[
                (1.0, false),
                (2.0, true),
                (3.0, false),
                (4.0, false),
                (5.0, true)
            ]),
            Some((Some(4.0), Some(5.0), 1))
        );
        assert_eq!(s(&[(1.0, true)]), Some((None, Some(1.0), 0)));
        assert_eq!(s(&[(1.0, false)]), Some((Some(1.0), None, 0)));
    }

    fn bucket(rate: f64, idle: f64) -> Bucket {
        let busy = 100.0 - idle;
        Bucket {
            start_unix: 0,
            width_s: 900,
            edge_s: 0.0,
            requests: rate as u64,
            drain_requests: 0,
            rate,
            user_pct: busy * 0.7,
            kernel_pct: busy * 0.3,
            idle_pct: idle,
        }
    }

    fn bucketed(b: Vec<Bucket>) -> Bucketed {
        Bucketed {
            width_s: 900,
            steps: false,
            buckets: b,
            requests_outside: 0,
        }
    }

    const O: Options = Options {
        low_rate_cut: Some(20.0),
        min_r: DEFAULT_MIN_R,
        saturated_idle_pct: SATURATED_IDLE_PCT,
    };

    #[test]
    fn the_seeds_new_kernel_line_predicts_its_peak() {
        // Idle = 95 - 1.377 * rate: X-intercept 69 req/s (seed 002's new kernel).
        let b: Vec<Bucket> = (1..=12)
            .map(|i| {
                let r = 4.0 * i as f64;
                bucket(r, 95.0 - 95.0 / 69.0 * r)
            })
            .collect();
        let a = analyze(&bucketed(b), 0, "", &O);
        assert!((a.predicted_peak_rps.unwrap() - 69.0).abs() < 1e-6);
        let f = a.all.idle.unwrap();
        assert!((f.r + 1.0).abs() < 1e-9);
        let k = a.all.kernel.unwrap();
        assert!((k.slope - 0.3 * 95.0 / 69.0).abs() < 1e-9);
        let (cut, above) = a.above_cut.unwrap();
        assert_eq!((cut, above.buckets), (20.0, 8));
        assert!((above.predicted_peak_rps.unwrap() - 69.0).abs() < 1e-6);
        assert_eq!(a.busiest_rps, 48.0);
        assert!((a.headroom_pct.unwrap() - (69.0 - 48.0) / 48.0 * 100.0).abs() < 1e-6);
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
        let t = text(&a);
        assert!(t.contains("69.0 req/s") && t.contains("headroom"), "{t}");
    }

    #[test]
    fn weak_or_flat_lines_warn_instead_of_predicting_silently() {
        // Scattered idle: r is weak.
        let idle = [80.0, 40.0, 75.0, 45.0, 70.0, 50.0];
        let b: Vec<Bucket> = idle
            .iter()
            .enumerate()
            .map(|(i, &x)| bucket(10.0 + i as f64, x))
            .collect();
        let a = analyze(&bucketed(b), 2, "2 of 8 log lines", &O);
        assert!(
            a.warnings.iter().any(|w| w.contains("too weak")),
            "{:?}",
            a.warnings
        );
        assert!(a.notes.iter().any(|n| n.contains("2 of 8")));
        // Idle rising with the rate: nothing predicted, said so.
        let b: Vec<Bucket> = (1..5).map(|i| bucket(i as f64, 50.0 + i as f64)).collect();
        let a = analyze(&bucketed(b), 0, "", &O);
        assert_eq!(a.predicted_peak_rps, None);
        assert_eq!(a.headroom_pct, None);
        assert!(a.warnings.iter().any(|w| w.contains("does not fall")));
        assert!(a
            .warnings
            .iter()
            .any(|w| w.contains("above 20") || w.contains("at or above 20")));
        assert!(text(&a).contains("none (see the warnings)"));
    }

    #[test]
    fn a_step_below_the_ladder_ends_it_and_is_no_point() {
        // Steps in time order: rising rates with idle falling, then one that served less than
        // the step before it with idle left (9%) and no drain: the ladder ended there, and the
        // step is a check, neither point nor vote; split by the rate served it would sit below
        // 3500 with idle left, and the fit would go on through it.
        let p = |rate: f64, idle: f64| (rate, 0.0, 100.0 - idle, idle);
        let pts = [
            p(1000.0, 70.0),
            p(2000.0, 50.0),
            p(3000.0, 30.0),
            p(3500.0, 20.0),
            p(3200.0, 9.0),
        ];
        let offered: Vec<f64> = pts.iter().map(|p| p.0).collect();
        assert_eq!(
            ladder_roles(&offered, REPEAT_REL),
            [Role::Step, Role::Step, Role::Step, Role::Step, Role::Check]
        );
        let order = ladder_order(&offered, &[false; 5], REPEAT_REL);
        assert_eq!(
            order,
            [
                (1000.0, false),
                (2000.0, false),
                (3000.0, false),
                (3500.0, false),
                (REPEAT_KEY, true)
            ]
        );
        let busy = busy_range(&pts, &order, 0.0, SATURATED_IDLE_PCT);
        assert_eq!(busy.len(), 4);
        let by_rate = served_order(&pts, SATURATED_IDLE_PCT);
        assert_eq!(knee_in_order(&by_rate), None);
        assert_eq!(busy_range(&pts, &by_rate, 0.0, SATURATED_IDLE_PCT).len(), 5);
        // A step that served more than the one before it but left a queue behind it (its
        // drain: it fell behind, `steps::fell_behind`) is out of CPU, and ends the fit there
        // (cap11-quick2's nginx at 10000 cold: offered 7390 req/s, served 7049 with 4.9% idle).
        let drained = ladder_order(&offered[..4], &[false, false, true, false], REPEAT_REL);
        assert_eq!(knee_in_order(&drained), Some(3000.0));
        assert_eq!(
            busy_range(&pts[..4], &drained, 0.0, SATURATED_IDLE_PCT).len(),
            2
        );
        // A step within 2% above the ladder's top runs the top's rate again; the lab's exact
        // rates offered (within 0) rise by any amount.
        assert_eq!(
            ladder_roles(&[100.0, 200.0, 203.0], REPEAT_REL),
            [Role::Step, Role::Step, Role::Repeat(1)]
        );
        assert_eq!(
            ladder_roles(&[100.0, 200.0, 203.0, 200.0, 150.0], 0.0),
            [
                Role::Step,
                Role::Step,
                Role::Step,
                Role::Repeat(1),
                Role::Check
            ]
        );
    }

    #[test]
    fn a_rates_verdict_is_the_majority_of_its_runs_the_first_on_a_tie() {
        assert_eq!(majority(&[]), None);
        assert_eq!(majority(&[true]), Some(true));
        assert_eq!(majority(&[true, false, false]), Some(false));
        assert_eq!(majority(&[false, true, true]), Some(true));
        assert_eq!(majority(&[true, false]), Some(true));
        assert_eq!(majority(&[false, true]), Some(false));
    }

    #[test]
    fn a_step_run_again_votes_with_its_first_and_is_no_point_of_its_own() {
        // idle = 100 - 0.1 * rate; the ladder's 500 read 2% (a dear run), 600 out. Two later
        // steps at 500 (within 2% of it, kept up) read idle left: 500's verdict is idle left
        // and the knee moves to 600. The step at 520 (4% away) is no repeat: a check, neither
        // point nor vote; the one at 590 fell behind (drained), offered 640, above the
        // ladder's top but after its end: a check too.
        let p = |rate: f64, idle: f64| (rate, 0.0, 100.0 - idle, idle);
        let pts = [
            p(100.0, 90.0),
            p(200.0, 80.0),
            p(300.0, 70.0),
            p(400.0, 60.0),
            p(500.0, 2.0),
            p(600.0, 1.0),
            p(499.0, 50.0),
            p(505.0, 49.0),
            p(520.0, 48.0),
            p(590.0, 1.0),
        ];
        let drained = [
            false, false, false, false, false, false, false, false, false, true,
        ];
        let offered = [
            100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 499.0, 505.0, 520.0, 640.0,
        ];
        let out: Vec<bool> = pts
            .iter()
            .zip(drained)
            .map(|(p, d)| d || idle_out(p, SATURATED_IDLE_PCT))
            .collect();
        let ladder = ladder_order(&offered[..6], &out[..6], REPEAT_REL);
        assert_eq!(knee_in_order(&ladder), Some(500.0));
        assert_eq!(
            ladder_roles(&offered, REPEAT_REL)[6..],
            [Role::Repeat(4), Role::Repeat(4), Role::Check, Role::Check]
        );
        let order = ladder_order(&offered, &out, REPEAT_REL);
        assert_eq!(order[4], (500.0, false));
        assert_eq!(order[6..], [(REPEAT_KEY, true); 4]);
        assert_eq!(knee_in_order(&order), Some(600.0));
        // The repeats are votes, not points: the busy range is the ladder's below 600 with
        // idle left (500's own 2% is still saturated).
        let busy = busy_range(&pts, &order, 0.0, SATURATED_IDLE_PCT);
        assert_eq!(
            busy.iter().map(|p| p.0).collect::<Vec<_>>(),
            [100.0, 200.0, 300.0, 400.0]
        );
        // One repeat against the first run: a tie, the first run's verdict stands.
        let one = ladder_order(&offered[..7], &out[..7], REPEAT_REL);
        assert_eq!(one[4], (500.0, true));
        assert_eq!(knee_in_order(&one), Some(500.0));
        // Without later runs, every step is keyed by its rate offered, its own verdict.
        assert_eq!(
            ladder,
            offered[..6]
                .iter()
                .zip(&out[..6])
                .map(|(&x, &o)| (x, o))
                .collect::<Vec<_>>()
        );
        // The analysis of such steps says how many voted, and fits the ladder's 100-400 and
        // 500 as the mean of its three runs (501.3 req/s, 33.7% idle), not the repeats alone.
        let mut b = bucketed(pts[..8].iter().map(|p| bucket(p.0, p.3)).collect());
        b.steps = true;
        let o = Options {
            low_rate_cut: None,
            ..O
        };
        let a = analyze(&b, 0, "", &o);
        assert!(
            a.notes
                .iter()
                .any(|n| n.starts_with("the ladder is the first 6 step(s)")
                    && n.contains("2 ran a ladder step's rate again")
                    && n.contains("0 ran a rate the ladder did not")),
            "{:?}",
            a.notes
        );
        assert_eq!(a.prediction_range, Range::Unsaturated);
        let x = a.predicted_peak_rps.expect("a line");
        let mut expect = pts[..4].to_vec();
        expect.push((
            (500.0 + 499.0 + 505.0) / 3.0,
            0.0,
            100.0 - (2.0 + 50.0 + 49.0) / 3.0,
            (2.0 + 50.0 + 49.0) / 3.0,
        ));
        let want = fits_of(&expect).predicted_peak_rps.unwrap();
        assert!((x - want).abs() < 1e-6, "{x} against {want}");
        assert!(x < 1000.0, "the dear run at 500 pulls the line down: {x}");
    }

    #[test]
    fn a_step_that_fell_behind_votes_for_the_rate_it_was_offered() {
        // A ladder to 212 with idle left, then a probe at 247 that kept up (10% idle) and two
        // more at the same rate that fell behind (served 231, drained: offered 251, within 2%
        // of 247): the rate ran out by two votes to one, and 247 is past the knee (the lab's
        // vote by the rate offered; lead-evq3, nginx at 0).
        let p = |rate: f64, idle: f64| (rate, 0.0, 100.0 - idle, idle);
        let pts = [
            p(112.0, 55.0),
            p(152.0, 28.0),
            p(192.0, 16.0),
            p(212.0, 12.6),
            p(247.3, 9.8),
            p(231.3, 0.2),
            p(231.0, 1.2),
        ];
        let drained = [false, false, false, false, false, true, true];
        let offered = [112.0, 152.0, 192.0, 212.0, 247.3, 250.7, 250.7];
        let out = |pts: &[(f64, f64, f64, f64)], drained: &[bool]| -> Vec<bool> {
            pts.iter()
                .zip(drained)
                .map(|(p, &d)| d || idle_out(p, SATURATED_IDLE_PCT))
                .collect()
        };
        let order = ladder_order(&offered, &out(&pts, &drained), REPEAT_REL);
        assert_eq!(order[4], (247.3, true), "247 ran out by the majority");
        assert_eq!(order[5], (REPEAT_KEY, true));
        assert_eq!(order[6], (REPEAT_KEY, true));
        let busy = busy_range(&pts, &order, 0.0, SATURATED_IDLE_PCT);
        assert_eq!(busy.last().map(|p| p.0), Some(212.0));
        // Read by the rates served (the steps' old reading), the two that fell behind were no
        // repeats and 247 stayed in the line.
        let served = ladder_order(
            &[112.0, 152.0, 192.0, 212.0, 247.3, 231.3, 231.0],
            &out(&pts, &drained),
            REPEAT_REL,
        );
        assert_eq!(served[4], (247.3, false));
        // A first run that fell behind (served 182.6 of 192 offered) and two later runs at 192
        // that kept up with idle left: the rate has idle left and its first run is a point of
        // the line (lead-evq2, nginx at 10k).
        let pts = [
            p(141.2, 32.7),
            p(166.6, 20.4),
            p(182.6, 3.9),
            p(214.1, 0.1),
            p(192.0, 8.0),
            p(191.9, 3.1),
        ];
        let drained = [false, false, true, true, false, false];
        let offered = [141.2, 166.6, 191.5, 240.0, 192.0, 191.9];
        let order = ladder_order(&offered, &out(&pts, &drained), REPEAT_REL);
        assert_eq!(order[2], (191.5, false), "idle left by the majority");
        assert_eq!(order[4], (REPEAT_KEY, true));
        assert_eq!(order[5], (REPEAT_KEY, true));
        let busy = busy_range(&pts, &order, 0.0, SATURATED_IDLE_PCT);
        assert_eq!(
            busy.iter().map(|p| p.0).collect::<Vec<_>>(),
            [141.2, 166.6, 182.6]
        );
    }

    #[test]
    fn the_busy_range_predicts_from_above_the_cut_without_saturated_buckets() {
        // Waking an idle server costs extra at low rates (idle 90 -> 70 from 1 to 10 req/s),
        // then idle = 100 - 1.0 * rate: X-intercept 100; two saturated buckets at 100 and 110
        // req/s with idle 0 would bend the line.
        let mut b = vec![bucket(1.0, 90.0), bucket(10.0, 70.0)];
        b.extend([30.0, 50.0, 70.0, 90.0].map(|r| bucket(r, 100.0 - r)));
        b.extend([bucket(100.0, 0.0), bucket(110.0, 1.0)]);
        let o = Options {
            low_rate_cut: Some(25.0),
            ..O
        };
        let a = analyze(&bucketed(b.clone()), 0, "", &o);
        let (_, f) = a.above_cut.unwrap();
        assert_eq!((f.buckets, a.saturated_buckets), (4, 2));
        assert!(
            (a.predicted_peak_rps.unwrap() - 100.0).abs() < 1e-6,
            "{a:?}"
        );
        assert_eq!(a.prediction_range, Range::Busy);
        // All buckets: a shallower line, a different figure.
        let all = a.all.predicted_peak_rps.unwrap();
        assert!((all - 100.0).abs() > 5.0, "{all}");
        assert!(text(&a).contains("busy range"), "{}", text(&a));
        // No cut: every unsaturated bucket (the wake-up points included), not the saturated.
        let no_cut = Options {
            low_rate_cut: None,
            ..O
        };
        let none = analyze(&bucketed(b.clone()), 0, "", &no_cut);
        assert_eq!(none.prediction_range, Range::Unsaturated);
        assert_eq!(none.saturated_buckets, 0);
        let p = none.predicted_peak_rps.unwrap();
        assert!(p != all && (p - 100.0).abs() > 1.0, "{p}");
        // A cut above all but two unsaturated buckets: no busy line, the fallback is used.
        let high_cut = Options {
            low_rate_cut: Some(60.0),
            ..O
        };
        let high = analyze(&bucketed(b), 0, "", &high_cut);
        assert_eq!(high.prediction_range, Range::Unsaturated);
        assert_eq!(high.predicted_peak_rps, Some(p));
    }
}
