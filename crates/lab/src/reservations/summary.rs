//! What a `triage lab reservations` run measured, summarized: `summary.json` ([`Summary`]),
//! what the reservation kept (from the medians and paired with the point alone beside each
//! point), the goals, `raw.csv` and the table on stdout.

use serde::Serialize;

use super::opts::ReservationsOpts;
use super::plan::{Params, Variant, SITE_A, SITE_B};
use crate::cgi::{Bound, Figure, WindowStats};
use crate::harness::Env;
use crate::results::{csv_field, Goal};
use crate::testbed::TestbedInfo;
use crate::util::median;

/// One measured point: one variant, one competing-client count, one repetition.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// The variant.
    pub variant: String,
    /// The repetition (0-based).
    pub rep: usize,
    /// Position of the point within its repetition and variant (0 = first measured).
    pub seq: usize,
    /// Clients of the competing site.
    pub competitors: usize,
    /// The window as measured (s).
    pub window_s: f64,
    /// The site of interest.
    pub a: WindowStats,
    /// The competing site.
    pub b: WindowStats,
    /// The reference twin's site of interest over the same window (alone, on its own side;
    /// `None` with `--no-twin`): the machine's speed at this point.
    pub twin_a: Option<WindowStats>,
    /// CPU of the sites' CGI containers over the window, in % of the server side's capacity
    /// (triage with separate containers only).
    pub a_cpu_pct: Option<f64>,
    /// The same for the competing site.
    pub b_cpu_pct: Option<f64>,
    /// The server process's own CPU (request handling, starting scripts, relaying output;
    /// triage only) and the whole server side's usage, in % of its capacity.
    pub server_cpu_pct: Option<f64>,
    /// The whole server side's usage, in % of its capacity.
    pub side_cpu_pct: f64,
    /// The server process's context switches per request of both sites (voluntary,
    /// involuntary; triage only).
    pub server_switches_per_req: Option<(f64, f64)>,
    /// Scripts still running 2 s after their clients went away, killed by the lab.
    pub strays_killed: usize,
}

/// Medians over repetitions, one value per competing-client count.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    /// The variant.
    pub variant: String,
    /// The competitor counts.
    pub competitors: Vec<usize>,
    /// The site of interest's requests per second.
    pub a_rps: Vec<f64>,
    /// Its mean response time (ms).
    pub a_mean_ms: Vec<f64>,
    /// Its 90th percentile response time (ms).
    pub a_p90_ms: Vec<f64>,
    /// The competing site's requests per second.
    pub b_rps: Vec<f64>,
    /// `a_rps / (0.5 * a_rps at 0 competitors) * 100`.
    pub kept_pct: Vec<f64>,
    /// The same on the site's throughput over the reference twin's in the same window
    /// (medians over repetitions; empty without the twin): the machine's drift taken out.
    pub kept_pct_vs_twin: Vec<f64>,
    /// Paired: each point's `a_rps / (0.5 * a_rps of the point alone next to it) * 100`,
    /// median over repetitions (`paired`); NaN at 0.
    pub kept_pct_paired: Vec<f64>,
    /// CPU of the site of interest's container per request (ms), median over repetitions.
    pub a_cpu_ms_per_req: Vec<f64>,
    /// Paired: that CPU per request over the one of the point alone next to it, median over
    /// repetitions; NaN at 0.
    pub a_cpu_per_req_ratio_paired: Vec<f64>,
    /// The server process's own CPU in % of the server side, median over repetitions.
    pub server_cpu_pct: Vec<f64>,
}

/// What seed 000 reports (§6.1; the figures' data are not in the seed).
#[derive(Debug, Clone, Serialize)]
pub struct Paper {
    /// The paper's setup.
    pub setup: &'static str,
    /// What a 50% reservation did.
    pub reserve_50: &'static str,
    /// What a 99% reservation did.
    pub reserve_99: &'static str,
    /// What both sites in one reservation did.
    pub same_reservation: &'static str,
}

/// Seed 000's description of Fig. 4 and 5.
pub const PAPER: Paper = Paper {
    setup: "site of interest with 10 clients, competing site 0.. clients, CGI of half a million \
            rand() and a 1 KB reply, averages over three minutes",
    reserve_50: "gets essentially all the CPU without other load; with other load throughput \
                 halves and response time doubles, then both stay constant as load grows",
    reserve_99: "essentially unaffected by other load",
    same_reservation: "roughly the same as FreeBSD (time-sharing): throughput decreases and \
                       response time grows without bound",
};

/// `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// `reservations`.
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
    /// Under the 50% reservation: min over competitor counts >= 1 of the site of interest's
    /// throughput / (0.5 x its throughput with no competitor) x 100, on `kept_basis`.
    pub reserved_kept_pct: Option<f64>,
    /// What the kept figures read: `vs_twin` (the site's throughput over the reference
    /// twin's in the same window, when every point had one) or `raw` (requests per second).
    pub kept_basis: &'static str,
    /// `reserved_kept_pct` on the raw throughput, whatever the basis.
    pub reserved_kept_pct_raw: Option<f64>,
    /// The same for Apache httpd (time-sharing), on `kept_basis`.
    pub apache_kept_pct: Option<f64>,
    /// The same for both sites in one container.
    pub shared_kept_pct: Option<f64>,
    /// Drift-corrected `reserved_kept_pct` (not the goal's figure; the goal is judged on
    /// `reserved_kept_pct`): the smallest over competitor counts >= 1 of the median over
    /// repetitions of throughput / (0.5 x the throughput of the point alone measured next to
    /// it in the same repetition) x 100.
    pub reserved_kept_pct_paired: Option<f64>,
    /// The same for Apache httpd.
    pub apache_kept_pct_paired: Option<f64>,
    /// Under the 50% reservation: the largest, over competitor counts >= 1, of the paired
    /// ratio of the site of interest's CPU per request under competition to alone.
    pub reserved_cpu_per_req_ratio_paired: Option<f64>,
    /// The reservation itself, in CPU rather than requests: the smallest over competitor
    /// counts >= 1 of the site of interest's container CPU (median over repetitions) / (0.5 x
    /// its CPU alone) x 100, under the 50% reservation (`cpu_kept`).
    pub reserved_cpu_kept_pct: Option<f64>,
    /// Mean response time of the site of interest under the 50% reservation at the largest
    /// competitor count / at none.
    pub reserved_response_ratio: Option<f64>,
    /// CPU time of one rand.pl request (ms), from the site of interest's container with no
    /// competitor (triage-res50).
    pub cgi_cpu_ms_per_request: Option<f64>,
    /// The figures above with their 95% intervals (`ci95: [low, high]`) over the points they
    /// rest on, each paired with the point alone measured beside it in its repetition, their
    /// goals and whether the interval clears them: see [`figures`].
    pub figures: Vec<Figure>,
    /// The lab's goals and whether they were met.
    pub goals: Vec<Goal>,
    /// Per variant, medians per competitor count.
    pub curves: Vec<Curve>,
    /// Every point measured.
    pub points: Vec<Point>,
    /// Variants not measured and why.
    pub skipped: Vec<String>,
    /// Everything weaker than asked.
    pub notes: Vec<String>,
    /// The paper's statements.
    pub paper: Paper,
}

/// The lab's title.
pub const TITLE: &str =
    "Seed 000 (CPU reservations): a site's throughput and response time against a growing competing site";

/// The site of interest's throughput in a point on the kept figures' basis: over the twin's
/// (`vs_twin`) or as measured.
pub(crate) fn a_value(x: &Point, vs_twin: bool) -> Option<f64> {
    if vs_twin {
        x.twin_a
            .as_ref()
            .filter(|t| t.rps > 0.0)
            .map(|t| x.a.rps / t.rps)
    } else {
        Some(x.a.rps)
    }
    .filter(|v| v.is_finite())
}

/// The site of interest's CPU per request in a point (ms), from its container's share.
pub(crate) fn cpu_ms_per_req(x: &Point, capacity: f64) -> Option<f64> {
    let cpu_s = x.a_cpu_pct? / 100.0 * capacity * x.window_s;
    (x.a.completed > 0).then(|| cpu_s / x.a.completed as f64 * 1e3)
}

/// Paired ratios per competitor count: every point of `variant` with competitors is divided by
/// the point alone (0 competitors) of the same repetition nearest to it in measuring order
/// (`seq`; ties: the earlier one), both through `f`; the median over the repetitions is taken
/// per count. NaN where no pair exists (and at count 0).
pub(crate) fn paired(
    points: &[Point],
    variant: &str,
    counts: &[usize],
    f: &dyn Fn(&Point) -> Option<f64>,
) -> Vec<f64> {
    counts
        .iter()
        .map(|&n| {
            if n == 0 {
                return f64::NAN;
            }
            let ratios: Vec<f64> = points
                .iter()
                .filter(|x| x.variant == variant && x.competitors == n)
                .filter_map(|x| {
                    let alone = points
                        .iter()
                        .filter(|y| y.variant == variant && y.rep == x.rep && y.competitors == 0)
                        .min_by_key(|y| (y.seq.abs_diff(x.seq), y.seq))?;
                    let (a, b) = (f(x)?, f(alone)?);
                    (a.is_finite() && b.is_finite() && b > 0.0).then(|| a / b)
                })
                .collect();
            median(&ratios)
        })
        .collect()
}

/// Every point of `variant` with competitors (`only`: at that count) divided by the point
/// alone nearest to it in its repetition, both through `f`: the samples of a paired figure.
pub(crate) fn paired_samples(
    points: &[Point],
    variant: &str,
    only: Option<usize>,
    f: &dyn Fn(&Point) -> Option<f64>,
) -> Vec<f64> {
    points
        .iter()
        .filter(|x| x.variant == variant && x.competitors >= 1)
        .filter(|x| only.is_none_or(|n| x.competitors == n))
        .filter_map(|x| {
            let alone = points
                .iter()
                .filter(|y| y.variant == variant && y.rep == x.rep && y.competitors == 0)
                .min_by_key(|y| (y.seq.abs_diff(x.seq), y.seq))?;
            let (a, b) = (f(x)?, f(alone)?);
            (a.is_finite() && b.is_finite() && b > 0.0).then(|| a / b)
        })
        .collect()
}

/// The figures with their intervals (one sample per point with competitors, paired with the
/// point alone beside it): what the 50% reservation kept of half the throughput alone (goal:
/// at least 95%), the same for Apache (goal: visibly less, at most 95%) and for both sites in
/// one container, the reservation's CPU kept, and the response time at the most competitors
/// over alone (goal: at most 2.3).
pub(crate) fn figures(points: &[Point], counts: &[usize], vs_twin: bool) -> Vec<Figure> {
    let over = if vs_twin {
        "points with competitors (all counts and repetitions), each over the point alone \
         beside it, both over the reference twin's throughput in the same window"
    } else {
        "points with competitors (all counts and repetitions), each over the point alone \
         beside it"
    };
    let kept = |v: &str| {
        paired_samples(points, v, None, &|x| a_value(x, vs_twin))
            .into_iter()
            .map(|r| r * 200.0)
            .collect::<Vec<f64>>()
    };
    let mut out = vec![
        Figure::of(
            "reserved_kept_pct triage-res50",
            over,
            &kept("triage-res50"),
            Some(Bound::AtLeast(95.0)),
        ),
        Figure::of(
            "apache_kept_pct apache",
            over,
            &kept("apache"),
            Some(Bound::AtMost(95.0)),
        ),
        Figure::of(
            "shared_kept_pct triage-shared",
            over,
            &kept("triage-shared"),
            None,
        ),
        Figure::of(
            "reserved_cpu_kept_pct triage-res50",
            over,
            &paired_samples(points, "triage-res50", None, &|x| x.a_cpu_pct)
                .into_iter()
                .map(|r| r * 200.0)
                .collect::<Vec<f64>>(),
            None,
        ),
    ];
    let maxn = counts.iter().copied().max().unwrap_or(0);
    if maxn > 0 {
        out.push(Figure::of(
            "reserved_response_ratio triage-res50",
            &format!(
                "points with {maxn} competitors (all repetitions): mean response time over the \
                 point alone beside it"
            ),
            &paired_samples(points, "triage-res50", Some(maxn), &|x| Some(x.a.mean_ms)),
            Some(Bound::AtMost(2.3)),
        ));
    }
    out.retain(|f| f.n > 0);
    out
}

pub(crate) fn min_at_competitors(competitors: &[usize], v: &[f64]) -> Option<f64> {
    competitors
        .iter()
        .zip(v)
        .filter(|(&n, k)| n >= 1 && k.is_finite())
        .map(|(_, &k)| k)
        .fold(None, |m: Option<f64>, k| Some(m.map_or(k, |m| m.min(k))))
}

/// `min over n >= 1 of median(a_cpu_pct at n) / (0.5 x median(a_cpu_pct at 0)) x 100` for
/// `variant`: what the weights guarantee, free of the work each request needs.
pub(crate) fn cpu_kept(points: &[Point], variant: &str, counts: &[usize]) -> Option<f64> {
    let med = |n: usize| {
        median(
            &points
                .iter()
                .filter(|x| x.variant == variant && x.competitors == n)
                .filter_map(|x| x.a_cpu_pct)
                .collect::<Vec<_>>(),
        )
    };
    let alone = med(0);
    if !alone.is_finite() || alone <= 0.0 {
        return None;
    }
    let v: Vec<f64> = counts
        .iter()
        .map(|&n| med(n) / (0.5 * alone) * 100.0)
        .collect();
    min_at_competitors(counts, &v)
}

pub(crate) fn kept(c: &Curve) -> Option<f64> {
    min_at_competitors(&c.competitors, &c.kept_pct)
}

/// The summary of a run: curves (medians per competitor count), what the reservation kept,
/// the paired (drift-corrected) forms, and the goals.
pub fn summarize(
    o: &ReservationsOpts,
    p: &Params,
    variants: &[Variant],
    env: &Env<'_>,
    points: Vec<Point>,
) -> Summary {
    let tb = env.tb;
    let mut notes = env.notes.clone();
    let mut curves = Vec::new();
    for v in variants {
        let mut c = Curve {
            variant: v.name.clone(),
            competitors: p.counts.clone(),
            a_rps: Vec::new(),
            a_mean_ms: Vec::new(),
            a_p90_ms: Vec::new(),
            b_rps: Vec::new(),
            kept_pct: Vec::new(),
            kept_pct_vs_twin: Vec::new(),
            kept_pct_paired: Vec::new(),
            a_cpu_ms_per_req: Vec::new(),
            a_cpu_per_req_ratio_paired: Vec::new(),
            server_cpu_pct: Vec::new(),
        };
        let capacity = tb.server_capacity();
        for &n in &p.counts {
            let sel: Vec<&Point> = points
                .iter()
                .filter(|x| x.variant == v.name && x.competitors == n)
                .collect();
            let get = |f: fn(&Point) -> f64| median(&sel.iter().map(|x| f(x)).collect::<Vec<_>>());
            c.a_rps.push(get(|x| x.a.rps));
            c.a_mean_ms.push(get(|x| x.a.mean_ms));
            c.a_p90_ms.push(get(|x| x.a.p90_ms));
            c.b_rps.push(get(|x| x.b.rps));
            c.a_cpu_ms_per_req.push(median(
                &sel.iter()
                    .filter_map(|x| cpu_ms_per_req(x, capacity))
                    .collect::<Vec<_>>(),
            ));
            c.server_cpu_pct.push(median(
                &sel.iter()
                    .filter_map(|x| x.server_cpu_pct)
                    .collect::<Vec<_>>(),
            ));
        }
        if points
            .iter()
            .any(|x| x.variant == v.name && x.twin_a.is_some())
        {
            let r: Vec<f64> = p
                .counts
                .iter()
                .map(|&n| {
                    median(
                        &points
                            .iter()
                            .filter(|x| x.variant == v.name && x.competitors == n)
                            .filter_map(|x| a_value(x, true))
                            .collect::<Vec<_>>(),
                    )
                })
                .collect();
            let base = p.counts.iter().position(|&n| n == 0).map(|i| r[i]);
            c.kept_pct_vs_twin = r
                .iter()
                .map(|&x| match base {
                    Some(b) if b > 0.0 => x / (0.5 * b) * 100.0,
                    _ => f64::NAN,
                })
                .collect();
        }
        c.kept_pct_paired = paired(&points, &v.name, &p.counts, &|x| Some(x.a.rps))
            .iter()
            .map(|r| r * 200.0)
            .collect();
        c.a_cpu_per_req_ratio_paired = paired(&points, &v.name, &p.counts, &|x| {
            cpu_ms_per_req(x, capacity)
        });
        let base = p.counts.iter().position(|&n| n == 0).map(|i| c.a_rps[i]);
        c.kept_pct = c
            .a_rps
            .iter()
            .map(|&r| match base {
                Some(b) if b > 0.0 => r / (0.5 * b) * 100.0,
                _ => f64::NAN,
            })
            .collect();
        curves.push(c);
    }
    let curve = |name: &str| curves.iter().find(|c| c.variant == name);
    // The twin's ratio when every point of the reserving variant had one.
    let vs_twin = {
        let res: Vec<&Point> = points
            .iter()
            .filter(|x| x.variant == "triage-res50")
            .collect();
        !res.is_empty()
            && res
                .iter()
                .all(|x| a_value(x, true).is_some_and(|v| v > 0.0))
    };
    let kept_on = |c: &Curve| {
        if vs_twin && !c.kept_pct_vs_twin.is_empty() {
            min_at_competitors(&c.competitors, &c.kept_pct_vs_twin)
        } else {
            kept(c)
        }
    };
    let reserved = curve("triage-res50").and_then(kept_on);
    let reserved_raw = curve("triage-res50").and_then(kept);
    let apache = curve("apache").and_then(kept_on);
    let shared = curve("triage-shared").and_then(kept_on);
    let reserved_paired =
        curve("triage-res50").and_then(|c| min_at_competitors(&c.competitors, &c.kept_pct_paired));
    let apache_paired =
        curve("apache").and_then(|c| min_at_competitors(&c.competitors, &c.kept_pct_paired));
    let cpu_kept_res50 = cpu_kept(&points, "triage-res50", &p.counts);
    let cost_ratio = curve("triage-res50").and_then(|c| {
        c.competitors
            .iter()
            .zip(&c.a_cpu_per_req_ratio_paired)
            .filter(|(&n, r)| n >= 1 && r.is_finite())
            .map(|(_, &r)| r)
            .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))))
    });
    let ratio = curve("triage-res50").and_then(|c| {
        let i0 = c.competitors.iter().position(|&n| n == 0)?;
        let (im, _) = c.competitors.iter().enumerate().max_by_key(|(_, &n)| n)?;
        let (a, b) = (c.a_mean_ms[i0], c.a_mean_ms[im]);
        (a > 0.0 && b.is_finite() && im != i0).then(|| b / a)
    });
    let cpu_per_req = {
        let sel: Vec<f64> = points
            .iter()
            .filter(|x| x.variant == "triage-res50" && x.competitors == 0 && x.a.completed > 0)
            .filter_map(|x| cpu_ms_per_req(x, tb.server_capacity()))
            .collect();
        let m = median(&sel);
        m.is_finite().then_some(m)
    };
    let maxn = p.counts.iter().copied().max().unwrap_or(0);
    let figs = figures(&points, &p.counts, vs_twin);
    let fig_text = |prefix: &str, unit: &str| {
        figs.iter()
            .find(|f| f.name.starts_with(prefix))
            .map_or("-".to_owned(), |f| f.text(unit))
    };
    let mut goals = Vec::new();
    match reserved {
        Some(k) => goals.push(Goal {
            goal: "under the 50% reservation the site of interest keeps >= 95% of half its \
                   throughput alone, whatever the competitor does"
                .into(),
            met: k >= 95.0,
            detail: format!(
                "reserved_kept_pct = {k:.1}% (lowest over 1..{maxn} competitors, medians{}; \
                 raw req/s: {}; paired with the point alone beside each point: {}; the \
                 container's CPU instead of requests: {}; CPU per request under competition / \
                 alone, paired: up to {})",
                if vs_twin {
                    ", the site's throughput over the reference twin's in the same windows"
                } else {
                    ""
                },
                reserved_raw.map_or("-".into(), |v| format!("{v:.1}%")),
                reserved_paired.map_or("-".into(), |v| format!("{v:.1}%")),
                cpu_kept_res50.map_or("-".into(), |v| format!("{v:.1}%")),
                cost_ratio.map_or("-".into(), |v| format!("{v:.3}"))
            ) + &format!(
                "; every point paired with the one alone beside it: {}",
                fig_text("reserved_kept_pct", "%")
            ),
        }),
        None => notes.push(
            "triage-res50 not measured with a competitor: reserved_kept_pct not computed".into(),
        ),
    }
    if let Some(r) = ratio {
        goals.push(Goal {
            goal: "bounded response time under the 50% reservation (at most about twice the \
                   response time alone, as halving the CPU implies)"
                .into(),
            met: r <= 2.3,
            detail: format!(
                "mean response time with {maxn} competitors / alone = {r:.2}; paired per point: {}",
                fig_text("reserved_response_ratio", "")
            ),
        });
    }
    if let Some(k) = apache {
        goals.push(Goal {
            goal: "time-sharing (Apache httpd) visibly loses under the same load".into(),
            met: k < 95.0,
            detail: format!(
                "apache_kept_pct = {k:.1}% (paired: {}); every point paired: {}",
                apache_paired.map_or("-".into(), |v| format!("{v:.1}%")),
                fig_text("apache_kept_pct", "%")
            ),
        });
    }
    if points.iter().any(|x| x.a.failed + x.b.failed > 0) {
        notes.push("some CGI requests failed (see raw.csv)".into());
    }
    Summary {
        lab: "reservations",
        title: TITLE,
        command: o.command.clone(),
        started_utc: env.started_utc.clone(),
        duration_s: env.started.elapsed().as_secs_f64(),
        params: p.clone(),
        testbed: tb.info().clone(),
        reserved_kept_pct: reserved,
        kept_basis: if vs_twin { "vs_twin" } else { "raw" },
        reserved_kept_pct_raw: reserved_raw,
        apache_kept_pct: apache,
        shared_kept_pct: shared,
        reserved_kept_pct_paired: reserved_paired,
        apache_kept_pct_paired: apache_paired,
        reserved_cpu_per_req_ratio_paired: cost_ratio,
        reserved_cpu_kept_pct: cpu_kept_res50,
        reserved_response_ratio: ratio,
        cgi_cpu_ms_per_request: cpu_per_req,
        figures: figs,
        goals,
        curves,
        points,
        skipped: env.skipped.clone(),
        notes,
        paper: PAPER,
    }
}

const RAW_HEADER: &str = "variant,rep,seq,competitors,site,window_s,completed,failed,rps,mean_ms,\
median_ms,p90_ms,max_ms,cpu_pct,server_cpu_pct,side_cpu_pct,strays_killed";

/// `raw.csv`: one row per point and site (`twin-site-a`: the reference twin's site of interest
/// in the same window, its own side).
pub fn raw_csv(points: &[Point]) -> String {
    let mut s = String::from(RAW_HEADER);
    s.push('\n');
    let f = |v: f64| {
        if v.is_finite() {
            format!("{v:.3}")
        } else {
            String::new()
        }
    };
    for x in points {
        let twin = x.twin_a.as_ref().map(|t| ("twin-site-a", t, None));
        for (site, w, cpu) in [(SITE_A, &x.a, x.a_cpu_pct), (SITE_B, &x.b, x.b_cpu_pct)]
            .into_iter()
            .chain(twin)
        {
            s.push_str(&format!(
                "{},{},{},{},{},{:.3},{},{},{},{},{},{},{},{},{},{},{}\n",
                csv_field(&x.variant),
                x.rep,
                x.seq,
                x.competitors,
                site,
                x.window_s,
                w.completed,
                w.failed,
                f(w.rps),
                f(w.mean_ms),
                f(w.median_ms),
                f(w.p90_ms),
                f(w.max_ms),
                cpu.map_or(String::new(), f),
                x.server_cpu_pct.map_or(String::new(), f),
                f(x.side_cpu_pct),
                x.strays_killed
            ));
        }
    }
    s
}

/// The table on stdout.
pub fn print_table(s: &Summary) {
    println!("{}", s.title);
    let mut head = format!("{:<16}", "competitors");
    if let Some(c) = s.curves.first() {
        for n in &c.competitors {
            head.push_str(&format!("{n:>16}"));
        }
    }
    println!("{head}");
    for c in &s.curves {
        let mut l = format!("{:<16}", c.variant);
        for i in 0..c.competitors.len() {
            l.push_str(&format!("{:>7.1} {:>6.0}ms", c.a_rps[i], c.a_mean_ms[i]));
        }
        println!("{l}");
    }
    println!("(site of interest: req/s and mean response time, medians)");
    let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
    println!(
        "reserved_kept_pct = {}, apache_kept_pct = {}, shared_kept_pct = {}, CGI {} ms CPU/request",
        f(s.reserved_kept_pct),
        f(s.apache_kept_pct),
        f(s.shared_kept_pct),
        f(s.cgi_cpu_ms_per_request)
    );
    println!(
        "paired with the point alone beside each point: reserved_kept_pct_paired = {}, \
         apache_kept_pct_paired = {}, CPU per request under competition / alone up to {}; \
         reserved_cpu_kept_pct = {}",
        f(s.reserved_kept_pct_paired),
        f(s.apache_kept_pct_paired),
        s.reserved_cpu_per_req_ratio_paired
            .map_or("-".into(), |v| format!("{v:.3}")),
        f(s.reserved_cpu_kept_pct)
    );
}
