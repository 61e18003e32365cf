//! What a `triage lab containers` run measured, summarized: `summary.json` ([`Summary`]), the
//! goals, the drift-free estimates of static throughput, `raw.csv` and the table on stdout.

use serde::Serialize;

use super::opts::ContainersOpts;
use super::plan::{Kind, Params, Variant};
use crate::cgi::{Bound, Figure};
use crate::harness::Env;
use crate::results::{csv_field, Goal};
use crate::testbed::TestbedInfo;
use crate::util::median;

/// One measured point.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// The variant.
    pub variant: String,
    /// The repetition (0-based).
    pub rep: usize,
    /// Concurrent CGI requests.
    pub cgi: usize,
    /// The window as measured (s).
    pub window_s: f64,
    /// Static requests completed in the window.
    pub static_requests: u64,
    /// Static requests per second.
    pub static_rps: f64,
    /// Mean latency of the static requests (ms).
    pub static_latency_mean_ms: f64,
    /// 99th percentile latency of the static requests (ms).
    pub static_latency_p99_ms: f64,
    /// Static requests that failed (socket errors and non-2xx answers).
    pub static_errors: u64,
    /// CGI requests that completed during the point (each burns `cgi_cpu_s`).
    pub cgi_completed: u64,
    /// CPU share of the server's own processes during the window, in % of the server side's
    /// capacity (its quota, or one CPU).
    pub server_share_pct: f64,
    /// CPU share of the CGI processes (cgroup total minus the server processes).
    pub cgi_share_pct: f64,
    /// triage only: the CGI container's usage from `/metrics` over the window.
    pub cgi_share_metrics_pct: Option<f64>,
    /// Scripts still running 2 s after their clients went away, killed by the lab (Apache
    /// does not kill a script whose client went away; triage does).
    pub strays_killed: usize,
    /// Static requests served per millisecond of the server's own CPU (its efficiency).
    pub static_per_server_cpu_ms: f64,
    /// CGI requests the reference twin kept in flight (`None`: no twin for this variant).
    pub twin_cgi: Option<usize>,
    /// The twin's static requests per second over the same window (same configuration, own
    /// cgroup with the same quota, same CPU): the machine's speed at this point.
    pub twin_static_rps: Option<f64>,
    /// The twin's server CPU share (% of its side).
    pub twin_server_share_pct: Option<f64>,
    /// The twin's CGI CPU share (% of its side).
    pub twin_cgi_share_pct: Option<f64>,
    /// The server CPU's busy time outside the server side(s) (other tenants of a shared
    /// machine), in % of one CPU, from `/proc/stat` (10 ms ticks).
    pub cpu0_other_pct: f64,
    /// The client CPU's busy time (wrk, the CGI clients and anything else), % of one CPU.
    pub cpu1_busy_pct: f64,
    /// The hypervisor's steal time on the server CPU, % of one CPU.
    pub steal0_pct: f64,
    /// The server's involuntary context switches (preempted: by its CGI or by other tenants
    /// of the CPU) per static request.
    pub server_preempt_per_req: f64,
    /// The server's voluntary context switches (it went to sleep waiting for requests) per
    /// static request.
    pub server_sleeps_per_req: f64,
}

/// Medians over repetitions, one value per CGI count.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    /// The variant.
    pub variant: String,
    /// Its cap of the CGI container (with `budget`: of the site's work and CGI together).
    pub cap: Option<f64>,
    /// One budget: the cap covers the site's static work and its CGI together.
    pub budget: bool,
    /// The CGI counts.
    pub cgi: Vec<usize>,
    /// Static requests per second.
    pub static_rps: Vec<f64>,
    /// Static throughput relative to the same variant without CGI (%).
    pub static_rel_pct: Vec<f64>,
    /// CPU share of the CGI processes (% of the server side).
    pub cgi_share_pct: Vec<f64>,
    /// CPU share of the server's own processes (% of the server side).
    pub server_share_pct: Vec<f64>,
    /// Spread of the repetitions' static throughput at each count ((max-min)/median, %).
    pub static_rep_spread_pct: Vec<f64>,
    /// Static throughput with the machine's drift between repetitions removed: each
    /// repetition's points (all CGI counts, measured back to back with one server) divided by
    /// that repetition's mean, the median of those ratios over the repetitions, times the median
    /// of the repetitions' means. See `blocked`.
    pub static_rps_blocked: Vec<f64>,
    /// Static throughput over the reference twin's in the same windows (medians over the
    /// repetitions; empty without a twin): the machine's speed drift taken out.
    pub static_vs_twin: Vec<f64>,
}

/// What seed 003 reports (text of §5.6; the figures' curves are not in the seed).
#[derive(Debug, Clone, Serialize)]
pub struct Paper {
    /// The unmodified system's server CPU share with 4 CGI requests (%).
    pub unmodified_cgi4_server_cpu_pct: f64,
    /// Its static throughput with 4 CGI requests, relative to none (%).
    pub unmodified_cgi4_static_rel_pct: f64,
    /// The caps of the paper's CGI container (%).
    pub caps_pct: [f64; 2],
    /// What the paper says of the caps.
    pub caps: &'static str,
    /// What it says of static throughput under them.
    pub static_with_caps: &'static str,
}

/// Seed 003's numbers.
pub const PAPER: Paper = Paper {
    unmodified_cgi4_server_cpu_pct: 40.0,
    unmodified_cgi4_static_rel_pct: 44.0,
    caps_pct: [30.0, 10.0],
    caps: "the CPU limits are enforced almost exactly (Fig. 13)",
    static_with_caps: "static throughput remains almost constant as concurrent CGI requests \
                       grow from 1 to 5 (Fig. 12)",
};

/// `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// `containers`.
    pub lab: &'static str,
    /// The title.
    pub title: &'static str,
    /// The command line (repeat it to reproduce).
    pub command: String,
    /// When it started (UTC).
    pub started_utc: String,
    /// How long it took.
    pub duration_s: f64,
    /// The resolved parameters.
    pub params: Params,
    /// What the testbed was.
    pub testbed: TestbedInfo,
    /// Largest gap (percentage points) between a cap and the CGI CPU share measured under it
    /// (medians, CGI counts >= 1).
    pub cap_error_pp: Option<f64>,
    /// (max - min) / max of static throughput (%) from 1 to 5 CGI under the 30% cap (medians
    /// over the repetitions: the goal), read from `spread_basis`.
    pub static_spread_pct_cap30: Option<f64>,
    /// What the spread and its estimates below read: `vs_twin` (static throughput over the
    /// reference twin's in the same windows, when every point of the variant had one) or `raw`.
    pub spread_basis: &'static str,
    /// The same spread on the raw throughput (medians of req/s), whatever the basis.
    pub static_spread_pct_cap30_raw: Option<f64>,
    /// The same over the block estimate (`Curve::static_rps_blocked`): what is left once the
    /// machine's drift between repetitions is taken out.
    pub static_spread_pct_cap30_blocked: Option<f64>,
    /// The goal's formula on the server process's CPU share instead of its static throughput:
    /// (max - min) / max (%) of the median server share from 1 to 5 CGI under the 30% cap. The
    /// sand-box in CPU terms, free of the machine's drift in requests per CPU-millisecond (not
    /// the goal's figure).
    pub server_share_spread_pct_cap30: Option<f64>,
    /// Under the 30% cap: the change of static throughput from 1 to 5 CGI (%) fitted within
    /// the repetitions (least squares over the ratios to each repetition's mean), and its
    /// standard error: whether the CGI count itself moves static throughput.
    pub static_trend_pct_cap30: Option<f64>,
    /// Its standard error.
    pub static_trend_se_pct_cap30: Option<f64>,
    /// Standard deviation (%) of a single point's static throughput around its repetition's
    /// mean under the 30% cap: the machine's noise at one window.
    pub static_point_noise_pct_cap30: Option<f64>,
    /// Static throughput with 4 CGI relative to none (%), per variant (the paper: 44% for the
    /// unmodified system).
    pub static_rel_pct_cgi4: Vec<(String, f64)>,
    /// Every figure above (and per variant) with its 95% interval over the points or
    /// repetitions it rests on (`ci95: [low, high]`), its goal and whether the interval clears
    /// it: see [`figures`].
    pub figures: Vec<Figure>,
    /// The lab's goals and whether they were met.
    pub goals: Vec<Goal>,
    /// Per variant, medians per CGI count.
    pub curves: Vec<Curve>,
    /// Every point measured.
    pub points: Vec<Point>,
    /// Variants not measured and why.
    pub skipped: Vec<String>,
    /// Everything weaker than asked.
    pub notes: Vec<String>,
    /// The paper's figures.
    pub paper: Paper,
}

/// The lab's title.
pub const TITLE: &str =
    "Seed 003 (resource containers): static throughput and CGI CPU share under a capped CGI container";

/// Which static throughput an estimate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Throughput {
    /// Requests per second as measured.
    Raw,
    /// Requests per second over the reference twin's in the same window: the machine's speed
    /// drift taken out (see `run`).
    VsTwin,
}

impl Throughput {
    /// The value of point `x` (`None`: not measured, not positive or not finite).
    pub(crate) fn of(self, x: &Point) -> Option<f64> {
        match self {
            Throughput::Raw => Some(x.static_rps),
            Throughput::VsTwin => x
                .twin_static_rps
                .filter(|&t| t > 0.0)
                .map(|t| x.static_rps / t),
        }
        .filter(|v| v.is_finite() && *v > 0.0)
    }
}

/// (max - min) / max in % of `rps` over CGI counts 1..=5 (`None` without such a count).
pub(crate) fn spread_1_to_5(cgi: &[usize], rps: &[f64]) -> Option<f64> {
    let v: Vec<f64> = cgi
        .iter()
        .zip(rps)
        .filter(|(&k, r)| (1..=5).contains(&k) && r.is_finite())
        .map(|(_, &r)| r)
        .collect();
    let mx = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mn = v.iter().copied().fold(f64::INFINITY, f64::min);
    (!v.is_empty() && mx > 0.0).then(|| (mx - mn) / mx * 100.0)
}

/// Static throughput per CGI count with the drift between repetitions removed (a randomized
/// block estimate). On a shared machine the server's requests per CPU-millisecond drift over
/// tens of seconds (other tenants' work on the same CPUs), while the points of one repetition
/// of a variant are measured back to back with one server (about 20 s). So each
/// repetition is a block: its points are divided by the block's mean (complete blocks only:
/// every count measured), the median ratio per count is taken over the blocks, and multiplied
/// by the median block mean to give the unit of `tp` again (requests/s, or a ratio to the
/// twin).
pub(crate) fn blocked(
    points: &[Point],
    variant: &str,
    counts: &[usize],
    tp: Throughput,
) -> Vec<f64> {
    let reps: std::collections::BTreeSet<usize> = points
        .iter()
        .filter(|x| x.variant == variant)
        .map(|x| x.rep)
        .collect();
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); counts.len()];
    let mut means = Vec::new();
    for r in reps {
        let row: Vec<Option<f64>> = counts
            .iter()
            .map(|&k| {
                points
                    .iter()
                    .find(|x| x.variant == variant && x.rep == r && x.cgi == k)
                    .and_then(|x| tp.of(x))
            })
            .collect();
        if row.iter().any(|v| v.is_none()) {
            continue;
        }
        let m = row.iter().flatten().sum::<f64>() / row.len() as f64;
        means.push(m);
        for (i, v) in row.iter().enumerate() {
            ratios[i].push(v.unwrap_or(f64::NAN) / m);
        }
    }
    let level = median(&means);
    ratios.iter().map(|r| median(r) * level).collect()
}

/// The trend of static throughput from 1 to 5 CGI within the repetitions: the least-squares
/// slope of each complete repetition's ratios (point / the repetition's mean over counts
/// 1..=5) against the CGI count, times 4 (the change from 1 to 5 CGI, in %), and its standard
/// error. `None` with fewer than two counts or three points.
pub(crate) fn trend_1_to_5(
    points: &[Point],
    variant: &str,
    counts: &[usize],
    tp: Throughput,
) -> Option<(f64, f64)> {
    let ks: Vec<usize> = counts
        .iter()
        .copied()
        .filter(|k| (1..=5).contains(k))
        .collect();
    let reps: std::collections::BTreeSet<usize> = points
        .iter()
        .filter(|x| x.variant == variant)
        .map(|x| x.rep)
        .collect();
    let mut xy = Vec::new();
    for r in reps {
        let row: Vec<Option<f64>> = ks
            .iter()
            .map(|&k| {
                points
                    .iter()
                    .find(|x| x.variant == variant && x.rep == r && x.cgi == k)
                    .and_then(|x| tp.of(x))
            })
            .collect();
        if row.iter().any(|v| v.is_none()) {
            continue;
        }
        let m = row.iter().flatten().sum::<f64>() / row.len() as f64;
        for (k, v) in ks.iter().zip(row.iter().flatten()) {
            xy.push((*k as f64, v / m));
        }
    }
    let n = xy.len() as f64;
    if ks.len() < 2 || xy.len() < 3 {
        return None;
    }
    let mx = xy.iter().map(|p| p.0).sum::<f64>() / n;
    let my = xy.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = xy.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let b = xy.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
    let rss: f64 = xy
        .iter()
        .map(|p| (p.1 - (my + b * (p.0 - mx))).powi(2))
        .sum();
    let se = (rss / (n - 2.0) / sxx).sqrt();
    Some((b * 400.0, se * 400.0))
}

/// Standard deviation (%) of the points' ratios to their repetition's mean (complete
/// repetitions over counts 1..=5).
pub(crate) fn point_noise(
    points: &[Point],
    variant: &str,
    counts: &[usize],
    tp: Throughput,
) -> Option<f64> {
    let ks: Vec<usize> = counts
        .iter()
        .copied()
        .filter(|k| (1..=5).contains(k))
        .collect();
    let reps: std::collections::BTreeSet<usize> = points
        .iter()
        .filter(|x| x.variant == variant)
        .map(|x| x.rep)
        .collect();
    let mut r = Vec::new();
    for rep in reps {
        let row: Vec<f64> = ks
            .iter()
            .filter_map(|&k| {
                points
                    .iter()
                    .find(|x| x.variant == variant && x.rep == rep && x.cgi == k)
                    .and_then(|x| tp.of(x))
            })
            .collect();
        if row.len() != ks.len() || ks.len() < 2 {
            continue;
        }
        let m = row.iter().sum::<f64>() / row.len() as f64;
        r.extend(row.iter().map(|v| v / m - 1.0));
    }
    if r.len() < 3 {
        return None;
    }
    // The ratios of a repetition sum to zero: n - reps degrees of freedom.
    let reps = r.len() / ks.len();
    let dof = (r.len() - reps).max(1) as f64;
    Some((r.iter().map(|x| x * x).sum::<f64>() / dof).sqrt() * 100.0)
}

/// Per repetition of `variant`: (max - min) / max in % of static throughput over CGI counts
/// 1..=5 (complete repetitions only): the spread goal's samples.
pub(crate) fn spread_per_rep(
    points: &[Point],
    variant: &str,
    counts: &[usize],
    tp: Throughput,
) -> Vec<f64> {
    let ks: Vec<usize> = counts
        .iter()
        .copied()
        .filter(|k| (1..=5).contains(k))
        .collect();
    let reps: std::collections::BTreeSet<usize> = points
        .iter()
        .filter(|x| x.variant == variant)
        .map(|x| x.rep)
        .collect();
    reps.into_iter()
        .filter_map(|r| {
            let row: Vec<f64> = ks
                .iter()
                .filter_map(|&k| {
                    points
                        .iter()
                        .find(|x| x.variant == variant && x.rep == r && x.cgi == k)
                        .and_then(|x| tp.of(x))
                })
                .collect();
            (row.len() == ks.len()).then(|| spread_1_to_5(&ks, &row))?
        })
        .collect()
}

/// The figures with their intervals: per capped variant the CGI share's error against the cap
/// (one sample per point with CGI, in percentage points; goal within +-2), the spread of
/// static throughput under the 30% cap (one sample per repetition; goal <= 5%), and per
/// variant static throughput at the largest CGI count relative to none (one sample per
/// repetition, paired within it).
pub(crate) fn figures(
    curves: &[Curve],
    points: &[Point],
    counts: &[usize],
    tp: Throughput,
) -> Vec<Figure> {
    let mut out = Vec::new();
    for c in curves {
        let Some(cap) = c.cap else { continue };
        if c.budget {
            let total: Vec<f64> = points
                .iter()
                .filter(|x| x.variant == c.variant && x.cgi >= 1)
                .map(|x| x.server_share_pct + x.cgi_share_pct)
                .collect();
            out.push(Figure::of(
                &format!("budget_total_pct {}", c.variant),
                "points with CGI (all repetitions): server work + CGI, % of the server side",
                &total,
                Some(Bound::AtMost(cap * 100.0 + 2.0)),
            ));
            continue;
        }
        let e: Vec<f64> = points
            .iter()
            .filter(|x| x.variant == c.variant && x.cgi >= 1)
            .map(|x| x.cgi_share_pct - cap * 100.0)
            .collect();
        out.push(Figure::of(
            &format!("cap_error_pp {}", c.variant),
            "points with CGI (all repetitions): CGI share - cap, percentage points",
            &e,
            Some(Bound::Within(2.0)),
        ));
    }
    if let Some(c) = curves
        .iter()
        .find(|c| !c.budget && c.cap.is_some_and(|x| (x - 0.3).abs() < 1e-9))
    {
        out.push(Figure::of(
            "static_spread_pct_cap30",
            match tp {
                Throughput::Raw => {
                    "repetitions: (max - min) / max of static req/s over 1..5 CGI, %"
                }
                Throughput::VsTwin => {
                    "repetitions: (max - min) / max of static req/s over the twin's in the same \
                     window, over 1..5 CGI, %"
                }
            },
            &spread_per_rep(points, &c.variant, counts, tp),
            Some(Bound::AtMost(5.0)),
        ));
    }
    let kmax = counts.iter().copied().max().unwrap_or(0);
    if kmax > 0 && counts.contains(&0) {
        for c in curves {
            let reps: std::collections::BTreeSet<usize> = points
                .iter()
                .filter(|x| x.variant == c.variant)
                .map(|x| x.rep)
                .collect();
            let at = |r: usize, k: usize| {
                points
                    .iter()
                    .find(|x| x.variant == c.variant && x.rep == r && x.cgi == k)
                    .map(|x| x.static_rps)
            };
            let rel: Vec<f64> = reps
                .into_iter()
                .filter_map(|r| match (at(r, kmax), at(r, 0)) {
                    (Some(a), Some(b)) if b > 0.0 => Some(a / b * 100.0),
                    _ => None,
                })
                .collect();
            out.push(Figure::of(
                &format!("static_rel_pct_cgi{kmax} {}", c.variant),
                "repetitions: static req/s with the most CGI / with none in the same repetition, %",
                &rel,
                None,
            ));
        }
    }
    out
}

/// The summary of a run: curves (medians per CGI count), the cap's accuracy, the spread of
/// static throughput under the 30% cap, and the goals.
pub fn summarize(
    o: &ContainersOpts,
    p: &Params,
    variants: &[Variant],
    env: &Env<'_>,
    points: Vec<Point>,
) -> Summary {
    let mut notes = env.notes.clone();
    let mut curves = Vec::new();
    for v in variants {
        let (cap, budget) = match v.kind {
            Kind::Triage { cap, budget, .. } => (cap, budget),
            Kind::Apache => (None, false),
        };
        let mut c = Curve {
            variant: v.name.clone(),
            cap,
            budget,
            cgi: p.counts.clone(),
            static_rps: Vec::new(),
            static_rel_pct: Vec::new(),
            cgi_share_pct: Vec::new(),
            server_share_pct: Vec::new(),
            static_rep_spread_pct: Vec::new(),
            static_rps_blocked: Vec::new(),
            static_vs_twin: Vec::new(),
        };
        for &k in &p.counts {
            let sel: Vec<&Point> = points
                .iter()
                .filter(|x| x.variant == v.name && x.cgi == k)
                .collect();
            let rps: Vec<f64> = sel.iter().map(|x| x.static_rps).collect();
            let med = median(&rps);
            let (mn, mx) = rps
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            c.static_rep_spread_pct.push(if med > 0.0 && mx >= mn {
                (mx - mn) / med * 100.0
            } else {
                f64::NAN
            });
            c.static_rps.push(med);
            c.cgi_share_pct.push(median(
                &sel.iter().map(|x| x.cgi_share_pct).collect::<Vec<_>>(),
            ));
            c.server_share_pct.push(median(
                &sel.iter().map(|x| x.server_share_pct).collect::<Vec<_>>(),
            ));
        }
        c.static_rps_blocked = blocked(&points, &v.name, &p.counts, Throughput::Raw);
        if points
            .iter()
            .any(|x| x.variant == v.name && x.twin_static_rps.is_some())
        {
            c.static_vs_twin = p
                .counts
                .iter()
                .map(|&k| {
                    median(
                        &points
                            .iter()
                            .filter(|x| x.variant == v.name && x.cgi == k)
                            .filter_map(|x| Throughput::VsTwin.of(x))
                            .collect::<Vec<_>>(),
                    )
                })
                .collect();
        }
        let base = p
            .counts
            .iter()
            .position(|&k| k == 0)
            .map(|i| c.static_rps[i]);
        c.static_rel_pct = c
            .static_rps
            .iter()
            .map(|&r| match base {
                Some(b) if b > 0.0 => r / b * 100.0,
                _ => f64::NAN,
            })
            .collect();
        curves.push(c);
    }
    // Cap accuracy: medians at CGI counts >= 1.
    let mut cap_error: Option<f64> = None;
    for c in curves.iter().filter(|c| !c.budget) {
        let Some(cap) = c.cap else { continue };
        for (i, &k) in c.cgi.iter().enumerate() {
            let s = c.cgi_share_pct[i];
            if k >= 1 && s.is_finite() {
                let e = (s - cap * 100.0).abs();
                cap_error = Some(cap_error.map_or(e, |m: f64| m.max(e)));
            }
        }
    }
    let cap30 = curves
        .iter()
        .find(|c| !c.budget && c.cap.is_some_and(|x| (x - 0.3).abs() < 1e-9));
    // The twin's ratio when every point of the variant with CGI 1..5 has one.
    let tp = match cap30 {
        Some(c)
            if points
                .iter()
                .filter(|x| x.variant == c.variant && (1..=5).contains(&x.cgi))
                .all(|x| Throughput::VsTwin.of(x).is_some())
                && !c.static_vs_twin.is_empty() =>
        {
            Throughput::VsTwin
        }
        _ => Throughput::Raw,
    };
    let spread_raw = cap30.and_then(|c| spread_1_to_5(&c.cgi, &c.static_rps));
    let spread = match tp {
        Throughput::Raw => spread_raw,
        Throughput::VsTwin => cap30.and_then(|c| spread_1_to_5(&c.cgi, &c.static_vs_twin)),
    };
    let spread_blocked =
        cap30.and_then(|c| spread_1_to_5(&c.cgi, &blocked(&points, &c.variant, &p.counts, tp)));
    let trend = cap30.and_then(|c| trend_1_to_5(&points, &c.variant, &p.counts, tp));
    let noise = cap30.and_then(|c| point_noise(&points, &c.variant, &p.counts, tp));
    let rel4: Vec<(String, f64)> = curves
        .iter()
        .filter_map(|c| {
            let i = c.cgi.iter().position(|&k| k == 4)?;
            let v = c.static_rel_pct[i];
            v.is_finite().then(|| (c.variant.clone(), v))
        })
        .collect();
    let figs = figures(&curves, &points, &p.counts, tp);
    let fig_text = |prefix: &str, unit: &str| {
        figs.iter()
            .filter(|f| f.name.starts_with(prefix))
            .map(|f| format!("{}: {}", f.name, f.text(unit)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mut goals = Vec::new();
    match cap_error {
        Some(e) => goals.push(Goal {
            goal: "CGI CPU share within 2 percentage points of the cap".into(),
            met: e <= 2.0,
            detail: format!(
                "largest gap {e:.2} pp (medians); mean errors: {}",
                fig_text("cap_error_pp", " pp")
            ),
        }),
        None => notes.push("no capped variant with CGI load: cap_error_pp not measured".into()),
    }
    match spread {
        Some(s) => {
            let n = cap30.map_or(0, |c| c.cgi.iter().filter(|k| (1..=5).contains(*k)).count());
            goals.push(Goal {
                goal: "static throughput under the 30% cap within 5% from 1 to 5 CGI".into(),
                met: s <= 5.0,
                detail: format!(
                    "(max-min)/max = {s:.2}% over {n} CGI counts ({}medians over repetitions; \
                     {} with the drift between repetitions removed; raw req/s {}; trend from \
                     1 to 5 CGI within repetitions {}; one point's noise {}); per repetition: {}",
                    match tp {
                        Throughput::VsTwin => "static req/s over the reference twin's in the \
                                               same windows, "
                            .to_owned(),
                        Throughput::Raw => String::new(),
                    },
                    spread_blocked.map_or("-".into(), |b| format!("{b:.2}%")),
                    spread_raw.map_or("-".into(), |b| format!("{b:.2}%")),
                    trend.map_or("-".into(), |(t, se)| format!("{t:+.1}% +- {se:.1}%")),
                    noise.map_or("-".into(), |x| format!("{x:.1}%")),
                    fig_text("static_spread_pct_cap30", "%")
                ),
            });
        }
        None => notes.push("no 30% cap variant: static_spread_pct_cap30 not measured".into()),
    }
    for f in figs
        .iter()
        .filter(|f| f.name.starts_with("budget_total_pct"))
    {
        let (Some(v), Some(Bound::AtMost(limit))) = (f.value, f.goal) else {
            continue;
        };
        goals.push(Goal {
            goal: format!(
                "one budget: the site capped at {:.0}% spends at most {:.0}% + 2 points on its \
                 static work and its CGI together",
                limit - 2.0,
                limit - 2.0
            ),
            met: v <= limit,
            detail: format!("{}: {}", f.name, f.text("%")),
        });
    }
    if points.iter().any(|x| x.static_errors > 0) {
        notes.push("some static requests failed (see raw.csv static_errors)".into());
    }
    Summary {
        lab: "containers",
        title: TITLE,
        command: o.command.clone(),
        started_utc: env.started_utc.clone(),
        duration_s: env.started.elapsed().as_secs_f64(),
        params: p.clone(),
        testbed: env.tb.info().clone(),
        cap_error_pp: cap_error,
        static_spread_pct_cap30: spread,
        spread_basis: match tp {
            Throughput::Raw => "raw",
            Throughput::VsTwin => "vs_twin",
        },
        static_spread_pct_cap30_raw: spread_raw,
        static_spread_pct_cap30_blocked: spread_blocked,
        server_share_spread_pct_cap30: cap30
            .and_then(|c| spread_1_to_5(&c.cgi, &c.server_share_pct)),
        static_trend_pct_cap30: trend.map(|t| t.0),
        static_trend_se_pct_cap30: trend.map(|t| t.1),
        static_point_noise_pct_cap30: noise,
        static_rel_pct_cgi4: rel4,
        figures: figs,
        goals,
        curves,
        points,
        skipped: env.skipped.clone(),
        notes,
        paper: PAPER,
    }
}

const RAW_HEADER: &str =
    "variant,rep,cgi,window_s,static_requests,static_rps,static_latency_mean_ms,\
static_latency_p99_ms,static_errors,cgi_completed,server_share_pct,cgi_share_pct,\
cgi_share_metrics_pct,strays_killed,static_per_server_cpu_ms,cpu0_other_pct,cpu1_busy_pct,\
steal0_pct,server_preempt_per_req,server_sleeps_per_req,twin_cgi,twin_static_rps,\
twin_server_share_pct,twin_cgi_share_pct";

/// `raw.csv`: one row per point.
pub fn raw_csv(points: &[Point]) -> String {
    let mut s = String::from(RAW_HEADER);
    s.push('\n');
    for x in points {
        s.push_str(&format!(
            "{},{},{},{:.3},{},{:.1},{:.3},{:.3},{},{},{:.2},{:.2},{},{},{:.2},{:.1},{:.1},{:.1},{:.4},{:.4},{},{},{},{}\n",
            csv_field(&x.variant),
            x.rep,
            x.cgi,
            x.window_s,
            x.static_requests,
            x.static_rps,
            x.static_latency_mean_ms,
            x.static_latency_p99_ms,
            x.static_errors,
            x.cgi_completed,
            x.server_share_pct,
            x.cgi_share_pct,
            x.cgi_share_metrics_pct
                .map_or(String::new(), |v| format!("{v:.2}")),
            x.strays_killed,
            x.static_per_server_cpu_ms,
            x.cpu0_other_pct,
            x.cpu1_busy_pct,
            x.steal0_pct,
            x.server_preempt_per_req,
            x.server_sleeps_per_req,
            x.twin_cgi.map_or(String::new(), |k| k.to_string()),
            x.twin_static_rps.map_or(String::new(), |v| format!("{v:.1}")),
            x.twin_server_share_pct
                .map_or(String::new(), |v| format!("{v:.2}")),
            x.twin_cgi_share_pct
                .map_or(String::new(), |v| format!("{v:.2}")),
        ));
    }
    s
}

/// The table on stdout.
pub fn print_table(s: &Summary) {
    println!("{}", s.title);
    let mut head = format!("{:<18}", "variant \\ CGI");
    if let Some(c) = s.curves.first() {
        for k in &c.cgi {
            head.push_str(&format!("{k:>16}"));
        }
    }
    println!("{head}");
    for c in &s.curves {
        let mut l = format!("{:<18}", c.variant);
        for i in 0..c.cgi.len() {
            l.push_str(&format!(
                "{:>9.0} {:>5.1}%",
                c.static_rps[i], c.cgi_share_pct[i]
            ));
        }
        println!("{l}");
    }
    println!("(static req/s and CGI CPU share, medians)");
    println!(
        "cap_error_pp = {}, static_spread_pct_cap30 = {} ({}; blocked: {}; raw req/s: {}; the \
         server's CPU share instead of its throughput: {})",
        s.cap_error_pp.map_or("-".into(), |v| format!("{v:.2}")),
        s.static_spread_pct_cap30
            .map_or("-".into(), |v| format!("{v:.2}")),
        s.spread_basis,
        s.static_spread_pct_cap30_blocked
            .map_or("-".into(), |v| format!("{v:.2}")),
        s.static_spread_pct_cap30_raw
            .map_or("-".into(), |v| format!("{v:.2}")),
        s.server_share_spread_pct_cap30
            .map_or("-".into(), |v| format!("{v:.2}"))
    );
}
