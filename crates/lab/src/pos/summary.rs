//! What a `triage lab pos` run measured, summarized: `summary.json` ([`Summary`]), the goal
//! of experiment 1, `raw.csv`'s rows and the table on stdout.

use std::collections::BTreeMap;

use serde::Serialize;

use super::opts::PosOpts;
use super::plan::{title, Params};
use crate::harness::Env;
use crate::results::{improvement_pct, page_numbers, ratio, stats, Goal, Page, RawRow, Stats};
use crate::runner::{RunOutcome, Variant};
use crate::sampler::{GateStats, PlLrq, INTERVAL};
use crate::stats::{paired_cluster_improvement_ci95, reps_for_width, Ci95, PairedCluster, Stat};
use crate::testbed::{LinkCounters, TestbedInfo};
use crate::util::{mean, pct};

/// All runs of one variant at one browser count.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The variant.
    pub variant: Variant,
    /// Simultaneous browsers.
    pub browsers: usize,
    /// Its runs: (repetition, what it measured), in measuring order.
    pub runs: Vec<(usize, RunOutcome)>,
}

/// The spread of a per-repetition quantity.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    /// The smallest.
    pub min: f64,
    /// The median.
    pub median: f64,
    /// The largest.
    pub max: f64,
    /// 95% interval of the mean of the per-repetition values, in their unit (bootstrap over
    /// repetitions, `lab::stats::mean_ci95`); null with a single repetition.
    pub ci95: Option<Ci95>,
}

fn spread(v: &[f64]) -> Option<Spread> {
    let s = stats(v)?;
    Some(Spread {
        min: s.min_ms,
        median: s.median_ms,
        max: s.max_ms,
        ci95: (v.len() > 1)
            .then(|| crate::stats::mean_ci95(v, CI_SEED))
            .flatten(),
    })
}

/// Seed of every bootstrap of the pos lab (reproducible reports).
pub const CI_SEED: u64 = 0x5eed_0001;

/// Width of the interval the report says how many repetitions would reach (10 points).
pub const TARGET_WIDTH: f64 = 0.10;

/// An improvement against fifo with its 95% interval.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Improvement {
    /// The paper's `(a - b) / a` with `a` fifo's statistic and `b` this variant's (a fraction).
    pub value: f64,
    /// Its 95% interval (fractions): a percentile bootstrap over bursts (all pages of one
    /// burst of one repetition resampled together, paired with fifo's pages of the same burst:
    /// pages of a burst queue behind each other and are not independent, bursts are).
    pub ci95: Option<Ci95>,
    /// What was resampled: `bursts`.
    pub resampled: &'static str,
    /// Bursts (repetition x page round) behind the interval.
    pub clusters: usize,
    /// Repetitions an interval [`TARGET_WIDTH`] wide would need at this run's spread
    /// (`lab::stats::reps_for_width`, the width shrinking as 1/sqrt(bursts)).
    pub reps_for_10pt_width: Option<usize>,
}

/// PL and LRQ while pages were open (the paper's bursts), estimated per run from the run's
/// samples and the union of its pages' open intervals `[start, start + t2]`, on the assumption
/// that the server uses no CPU and queues nothing while no page is open; mean over runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BurstLoad {
    /// Seconds per run with at least one page open.
    pub open_s: f64,
    /// Share of that time the server side's CPU (its quota) was busy.
    pub pl: f64,
    /// Mean runnable threads beyond the one running over that time (the kernel's view).
    pub lrq: f64,
    /// triage only: mean length of the gate's ready queue over that time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate_lrq: Option<f64>,
}

/// The union length (ms) of the pages' open intervals.
fn open_ms(pages: &[Page]) -> f64 {
    let mut iv: Vec<(f64, f64)> = pages
        .iter()
        .filter(|p| p.start_ms.is_finite())
        .filter_map(|p| {
            let end = p.t2_ms.or(p.t1_ms)?;
            Some((p.start_ms, p.start_ms + end))
        })
        .collect();
    iv.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut total, mut cur): (f64, Option<(f64, f64)>) = (0.0, None);
    for (s, e) in iv {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    total + cur.map_or(0.0, |(s, e)| e - s)
}

/// One run's burst figures: open seconds, PL, LRQ, the gate's LRQ.
type BurstRun = (f64, f64, f64, Option<f64>);

fn burst_load(runs: &[(usize, RunOutcome)]) -> Option<BurstLoad> {
    let per: Vec<BurstRun> = runs
        .iter()
        .filter_map(|(_, r)| {
            let open = open_ms(&r.pages);
            let slots = open / INTERVAL.as_secs_f64() / 1e3;
            (slots >= 1.0).then(|| {
                (
                    open / 1e3,
                    (r.cpu.pl_sum / slots).min(1.0),
                    r.cpu.lrq_sum / slots,
                    r.gate.as_ref().map(|g| g.lrq_mean * g.samples / slots),
                )
            })
        })
        .collect();
    if per.is_empty() {
        return None;
    }
    let m = |f: fn(&BurstRun) -> f64| mean(&per.iter().map(f).collect::<Vec<_>>());
    let gates: Vec<f64> = per.iter().filter_map(|x| x.3).collect();
    Some(BurstLoad {
        open_s: m(|x| x.0),
        pl: m(|x| x.1),
        lrq: m(|x| x.2),
        gate_lrq: (!gates.is_empty()).then(|| mean(&gates)),
    })
}

/// The bursts of two cells as paired clusters: for every repetition both ran, the pages of
/// each page round (a browser's k-th page: the k-th burst), t1 or t2 as `f` picks.
pub fn burst_clusters(a: &Cell, b: &Cell, f: fn(&Page) -> Option<f64>) -> Vec<PairedCluster> {
    let rounds = |r: &RunOutcome| -> BTreeMap<usize, Vec<f64>> {
        let mut m: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
        for (p, k) in r.pages.iter().zip(page_numbers(&r.pages)) {
            if let Some(x) = Some(p).filter(|p| p.ok()).and_then(f) {
                m.entry(k).or_default().push(x);
            }
        }
        m
    };
    let mut out = Vec::new();
    for (rep, ra) in &a.runs {
        let Some((_, rb)) = b.runs.iter().find(|(r, _)| r == rep) else {
            continue;
        };
        let (ma, mut mb) = (rounds(ra), rounds(rb));
        for (k, va) in ma {
            out.push(PairedCluster {
                a: va,
                b: mb.remove(&k).unwrap_or_default(),
            });
        }
    }
    out
}

/// The improvement of `stat` of `f` from cell `a` (fifo) to `b`, with its interval.
pub fn improvement(
    a: &Cell,
    b: &Cell,
    f: fn(&Page) -> Option<f64>,
    stat: Stat,
) -> Option<Improvement> {
    let cl = burst_clusters(a, b, f);
    let pool = |side: fn(&PairedCluster) -> &Vec<f64>| -> Vec<f64> {
        cl.iter()
            .filter(|c| !c.a.is_empty() && !c.b.is_empty())
            .flat_map(|c| side(c).iter().copied())
            .collect()
    };
    let (pa, pb) = (pool(|c| &c.a), pool(|c| &c.b));
    if pa.is_empty() || pb.is_empty() {
        return None;
    }
    let (sa, sb) = (stat.of(&pa), stat.of(&pb));
    let value = (sa - sb) / sa;
    let ci95 = paired_cluster_improvement_ci95(&cl, stat, CI_SEED);
    let clusters = cl
        .iter()
        .filter(|c| !c.a.is_empty() && !c.b.is_empty())
        .count();
    let reps = a.runs.len().max(1);
    let per_rep = (clusters as f64 / reps as f64).max(1.0);
    let reps_for_10pt_width = ci95
        .and_then(|ci| reps_for_width(clusters, ci.width(), TARGET_WIDTH))
        .map(|bursts| (bursts as f64 / per_rep).ceil() as usize);
    Some(Improvement {
        value,
        ci95,
        resampled: "bursts",
        clusters,
        reps_for_10pt_width,
    })
}

/// One variant at one browser count, over all repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct VariantSummary {
    /// The variant's name.
    pub name: String,
    /// Simultaneous browsers.
    pub browsers: usize,
    /// What the variant runs.
    #[serde(flatten)]
    pub variant: Variant,
    /// Pages measured over all repetitions.
    pub pages: usize,
    /// Pages that failed.
    pub errors: usize,
    /// t1 (until the whole HTML arrived).
    pub t1: Option<Stats>,
    /// t2 (until all images arrived).
    pub t2: Option<Stats>,
    /// t1 until the first byte of the HTML.
    pub t1_first: Option<Stats>,
    /// Improvement of mean t1 against fifo at the same browser count (%).
    pub t1_mean_improvement_pct: Option<f64>,
    /// Improvement of median t1 against fifo (%).
    pub t1_median_improvement_pct: Option<f64>,
    /// Improvement of mean t2 against fifo (%).
    pub t2_mean_improvement_pct: Option<f64>,
    /// Per-repetition improvement of mean t1 against fifo of the same repetition (%).
    pub t1_rep_improvement_pct: Option<Spread>,
    /// Improvement of mean t1 against fifo (fraction) with its 95% interval.
    pub t1_mean_improvement: Option<Improvement>,
    /// Improvement of median t1 against fifo (fraction) with its 95% interval.
    pub t1_median_improvement: Option<Improvement>,
    /// Improvement of mean t2 against fifo (fraction) with its 95% interval.
    pub t2_mean_improvement: Option<Improvement>,
    /// PL and LRQ while pages were open (the bursts), not only over the run.
    pub burst: Option<BurstLoad>,
    /// Mean t1 of each repetition.
    pub rep_t1_mean_ms: Vec<f64>,
    /// Mean t2 of each repetition.
    pub rep_t2_mean_ms: Vec<f64>,
    /// PL from the cgroup (mean over repetitions).
    pub pl: f64,
    /// LRQ from the cgroup (mean over repetitions).
    pub lrq: f64,
    /// CPU seconds of the server side per run (mean).
    pub cpu_s: f64,
    /// The same, under the name the checks read: the server, its children and the
    /// hog in the server side's one CPU budget (a `+pos` daemon runs on the client side).
    pub server_cpu_s: f64,
    /// The quota period the kernel applied to the server side, as its `cpu.stat` counted
    /// them: the runs' sampled time over their periods (ms, mean over repetitions; the
    /// hog keeps the group runnable, so every period counts). Null without a quota.
    pub quota_period_seen_ms: Option<f64>,
    /// Share of those periods in which the server side used its whole quota and was
    /// throttled (mean over repetitions).
    pub throttled_period_share: f64,
    /// triage's gate view (mean over repetitions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateStats>,
    /// The `+pos` variants: the `triage pos attach` daemon's own CPU, marks, raises and
    /// wake-up-to-lever latency (mean over repetitions; the latency the worst run's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon: Option<crate::daemon_stats::DaemonStats>,
    /// The `+pos` variants: improvements against the same server without the daemon (its
    /// baseline, `apache` or `php-fpm`), with their intervals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_baseline: Option<super::attach::VsBaseline>,
    /// The `+pos` variants of php-fpm: marked service episodes (from php-fpm's access log and
    /// the daemon's decisions) and the share of them that served text, over all repetitions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marking: Option<crate::marking::MarkingReport>,
    /// The link towards the browsers (server side tbf), mean per run; only with namespaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkSummary>,
    /// Mean t1 over nginx's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t1_ratio_vs_nginx: Option<f64>,
    /// Mean t1 over Apache's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t1_ratio_vs_apache: Option<f64>,
    /// Mean t2 over nginx's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t2_ratio_vs_nginx: Option<f64>,
    /// Mean t2 over Apache's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t2_ratio_vs_apache: Option<f64>,
}

/// The server side's tbf over a run, mean over repetitions: whether the link, and not only the
/// CPU, was a bottleneck (drops: its queue was full).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LinkSummary {
    /// Megabytes sent.
    pub mbytes: f64,
    /// Packets sent.
    pub packets: f64,
    /// Packets dropped (the queue was full).
    pub dropped: f64,
    /// Times a packet waited for tokens.
    pub overlimits: f64,
}

fn link_summary(runs: &[LinkCounters]) -> Option<LinkSummary> {
    if runs.is_empty() {
        return None;
    }
    let m =
        |f: fn(&LinkCounters) -> u64| mean(&runs.iter().map(|l| f(l) as f64).collect::<Vec<_>>());
    Some(LinkSummary {
        mbytes: m(|l| l.sent_bytes) / 1e6,
        packets: m(|l| l.packets),
        dropped: m(|l| l.dropped),
        overlimits: m(|l| l.overlimits),
    })
}

/// The paper's own figures, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct PaperFigures {
    /// Exp 1, mean t1 improvement at RW 3, 6, 9 (%).
    pub exp1_t1_mean_improvement_pct: [f64; 3],
    /// Exp 1, median t1 improvement at RW 3, 6, 9 (%).
    pub exp1_t1_median_improvement_pct: [f64; 3],
    /// Exp 3, mean t1 improvement at RW 3, 6, 9 (%).
    pub exp3_t1_mean_improvement_pct: [f64; 3],
    /// Exp 3, median t1 improvement at RW 3, 6, 9 (%).
    pub exp3_t1_median_improvement_pct: [f64; 3],
    /// Fig. 7: the best mean t1 improvement at 3, 6, 9, 12 browsers (%).
    pub fig7_best_mean_improvement_pct: [f64; 4],
    /// Fig. 6: PL ratio to 3 browsers.
    pub fig6_pl_ratio: [f64; 4],
    /// Fig. 6: LRQ ratio to 3 browsers.
    pub fig6_lrq_ratio: [f64; 4],
}

/// Seed 001's numbers (RW = 3, 6, 9; browsers = 3, 6, 9, 12).
pub const PAPER: PaperFigures = PaperFigures {
    exp1_t1_mean_improvement_pct: [33.8, 21.3, 26.6],
    exp1_t1_median_improvement_pct: [44.7, 22.8, 37.7],
    exp3_t1_mean_improvement_pct: [22.2, 17.9, 6.7],
    exp3_t1_median_improvement_pct: [44.6, 13.0, 19.3],
    fig7_best_mean_improvement_pct: [65.7, 44.4, 24.2, 22.3],
    fig6_pl_ratio: [1.0, 2.52, 3.54, 5.44],
    fig6_lrq_ratio: [1.0, 2.46, 3.54, 8.0],
};

/// `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// `pos`.
    pub lab: &'static str,
    /// The experiment.
    pub exp: u8,
    /// Its title.
    pub title: String,
    /// The command line (repeat it to reproduce).
    pub command: String,
    /// When it started (UTC).
    pub started_utc: String,
    /// How long it took.
    pub duration_s: f64,
    /// The resolved parameters.
    pub params: Params,
    /// Server-side CPU quota (fraction of one CPU) actually applied; null without cgroups.
    pub quota: Option<f64>,
    /// The load, in words.
    pub load: String,
    /// What the testbed was.
    pub testbed: TestbedInfo,
    /// Per variant and browser count.
    pub variants: Vec<VariantSummary>,
    /// Variants not measured and why.
    pub skipped: Vec<String>,
    /// Everything weaker than asked (testbed and load), said plainly.
    pub notes: Vec<String>,
    /// The lab's goals and whether they were met.
    pub goals: Vec<Goal>,
    /// Exp 4: PL and LRQ ratios against the smallest browser count (fifo), paper Fig. 6.
    /// `null` where the baseline is 0 (no ratio).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pl_ratio: Vec<Option<f64>>,
    /// Exp 4: LRQ ratios, as `pl_ratio`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lrq_ratio: Vec<Option<f64>>,
    /// The paper's figures.
    pub paper: PaperFigures,
}

fn mean_gate(g: &[&GateStats]) -> Option<GateStats> {
    if g.is_empty() {
        return None;
    }
    let m = |f: fn(&GateStats) -> f64| mean(&g.iter().map(|x| f(x)).collect::<Vec<_>>());
    Some(GateStats {
        samples: m(|x| x.samples),
        pl_mean: m(|x| x.pl_mean),
        lrq_mean: m(|x| x.lrq_mean),
        bottleneck_frac: m(|x| x.bottleneck_frac),
        promotions: m(|x| x.promotions),
        demotions: m(|x| x.demotions),
        starvation_rescues: m(|x| x.starvation_rescues),
        series: g[0].series.clone(),
        scripts_raised: m(|x| x.scripts_raised),
        scripts_lowered: m(|x| x.scripts_lowered),
        scripts_lowered_budget: m(|x| x.scripts_lowered_budget),
        cgi_times: mean_times(g),
    })
}

/// The mean over runs of every `cgi_times` entry (weighted by each run's requests of the
/// class, so a mean per request stays one).
fn mean_times(g: &[&GateStats]) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    let keys: std::collections::BTreeSet<&String> =
        g.iter().flat_map(|x| x.cgi_times.keys()).collect();
    for k in keys {
        let class = k.split('.').next().unwrap_or("");
        let n_key = format!("{class}.n");
        let (mut sum, mut n) = (0.0, 0.0);
        for x in g {
            let (Some(v), Some(w)) = (x.cgi_times.get(k), x.cgi_times.get(&n_key)) else {
                continue;
            };
            if *k == n_key {
                sum += v;
                n += 1.0;
            } else {
                sum += v * w;
                n += w;
            }
        }
        if n > 0.0 {
            out.insert(k.clone(), sum / n);
        }
    }
    out
}

/// The summary of a run: per variant and browser count, the paper's statistics, the
/// comparisons with fifo and the peers, PL/LRQ, and the goals.
pub fn summarize(o: &PosOpts, p: &Params, env: &Env<'_>, cells: &[Cell]) -> Summary {
    let tb = env.tb;
    let mut vs: Vec<VariantSummary> = cells
        .iter()
        .map(|c| {
            let pages: Vec<&Page> = c.runs.iter().flat_map(|(_, r)| r.pages.iter()).collect();
            let ok: Vec<&&Page> = pages.iter().filter(|p| p.ok()).collect();
            let t1: Vec<f64> = ok.iter().filter_map(|p| p.t1_ms).collect();
            let t2: Vec<f64> = ok.iter().filter_map(|p| p.t2_ms).collect();
            let tf: Vec<f64> = ok.iter().filter_map(|p| p.t1_first_ms).collect();
            let rep_mean = |f: fn(&Page) -> Option<f64>| -> Vec<f64> {
                c.runs
                    .iter()
                    .filter_map(|(_, r)| {
                        let v: Vec<f64> = r.pages.iter().filter(|p| p.ok()).filter_map(f).collect();
                        stats(&v).map(|s| s.mean_ms)
                    })
                    .collect()
            };
            let cpu: Vec<&PlLrq> = c.runs.iter().map(|(_, r)| &r.cpu).collect();
            let gates: Vec<&GateStats> =
                c.runs.iter().filter_map(|(_, r)| r.gate.as_ref()).collect();
            let links: Vec<LinkCounters> = c.runs.iter().filter_map(|(_, r)| r.link).collect();
            VariantSummary {
                name: c.variant.name.clone(),
                browsers: c.browsers,
                variant: c.variant.clone(),
                pages: pages.len(),
                errors: pages.len() - ok.len(),
                t1: stats(&t1),
                t2: stats(&t2),
                t1_first: stats(&tf),
                t1_mean_improvement_pct: None,
                t1_median_improvement_pct: None,
                t2_mean_improvement_pct: None,
                t1_rep_improvement_pct: None,
                t1_mean_improvement: None,
                t1_median_improvement: None,
                t2_mean_improvement: None,
                burst: burst_load(&c.runs),
                rep_t1_mean_ms: rep_mean(|p| p.t1_ms),
                rep_t2_mean_ms: rep_mean(|p| p.t2_ms),
                pl: mean(&cpu.iter().map(|c| c.pl_mean).collect::<Vec<_>>()),
                lrq: mean(&cpu.iter().map(|c| c.lrq_mean).collect::<Vec<_>>()),
                cpu_s: mean(&cpu.iter().map(|c| c.cpu_s).collect::<Vec<_>>()),
                server_cpu_s: mean(&cpu.iter().map(|c| c.cpu_s).collect::<Vec<_>>()),
                quota_period_seen_ms: {
                    let seen: Vec<f64> = cpu.iter().filter_map(|c| c.period_seen_ms()).collect();
                    (!seen.is_empty()).then(|| mean(&seen))
                },
                throttled_period_share: mean(
                    &cpu.iter().map(|c| c.throttled_periods).collect::<Vec<_>>(),
                ),
                gate: mean_gate(&gates),
                daemon: crate::daemon_stats::DaemonStats::mean(
                    &c.runs
                        .iter()
                        .filter_map(|(_, r)| r.daemon.as_ref())
                        .collect::<Vec<_>>(),
                ),
                vs_baseline: super::attach::vs_baseline(c, cells),
                marking: c
                    .runs
                    .iter()
                    .filter_map(|(_, r)| r.marking)
                    .reduce(crate::marking::MarkingAccuracy::plus)
                    .map(Into::into),
                link: link_summary(&links),
                t1_ratio_vs_nginx: None,
                t1_ratio_vs_apache: None,
                t2_ratio_vs_nginx: None,
                t2_ratio_vs_apache: None,
            }
        })
        .collect();
    // Comparisons within each browser count.
    let find = |vs: &[VariantSummary], name: &str, b: usize| {
        vs.iter()
            .find(|x| x.name == name && x.browsers == b)
            .cloned()
    };
    let rep_means = |c: &Cell| -> BTreeMap<usize, f64> {
        c.runs
            .iter()
            .filter_map(|(rep, r)| {
                let v: Vec<f64> = r
                    .pages
                    .iter()
                    .filter(|p| p.ok())
                    .filter_map(|p| p.t1_ms)
                    .collect();
                stats(&v).map(|s| (*rep, s.mean_ms))
            })
            .collect()
    };
    let snapshot = vs.clone();
    for (i, v) in vs.iter_mut().enumerate() {
        let b = v.browsers;
        if let Some(f) = find(&snapshot, "fifo", b) {
            if let (Some(a), Some(x)) = (f.t1, v.t1) {
                v.t1_mean_improvement_pct = improvement_pct(a.mean_ms, x.mean_ms);
                v.t1_median_improvement_pct = improvement_pct(a.median_ms, x.median_ms);
            }
            if let (Some(a), Some(x)) = (f.t2, v.t2) {
                v.t2_mean_improvement_pct = improvement_pct(a.mean_ms, x.mean_ms);
            }
            if let Some(fc) = cells
                .iter()
                .find(|c| c.variant.name == "fifo" && c.browsers == b)
            {
                let t1 = |p: &Page| p.t1_ms;
                let t2 = |p: &Page| p.t2_ms;
                v.t1_mean_improvement = improvement(fc, &cells[i], t1, Stat::Mean);
                v.t1_median_improvement = improvement(fc, &cells[i], t1, Stat::Median);
                v.t2_mean_improvement = improvement(fc, &cells[i], t2, Stat::Mean);
                let fm = rep_means(fc);
                let mine = rep_means(&cells[i]);
                let imps: Vec<f64> = mine
                    .iter()
                    .filter_map(|(rep, m)| fm.get(rep).and_then(|a| improvement_pct(*a, *m)))
                    .collect();
                v.t1_rep_improvement_pct = spread(&imps);
            }
        }
        for (peer, t1r, t2r) in [
            ("nginx", &mut v.t1_ratio_vs_nginx, &mut v.t2_ratio_vs_nginx),
            (
                "apache",
                &mut v.t1_ratio_vs_apache,
                &mut v.t2_ratio_vs_apache,
            ),
        ] {
            if let Some(pv) = find(&snapshot, peer, b) {
                if let (Some(a), Some(x)) = (pv.t1, v.t1) {
                    *t1r = ratio(x.mean_ms, a.mean_ms);
                }
                if let (Some(a), Some(x)) = (pv.t2, v.t2) {
                    *t2r = ratio(x.mean_ms, a.mean_ms);
                }
            }
        }
    }
    let mut goals = goals(p, &vs);
    goals.extend(super::attach::goals(&vs, p.quota, p.period_ms));
    if p.exp == 4 {
        goals.push(pooled_goal(p, &vs, cells));
    }
    let (mut pl_ratio, mut lrq_ratio) = (Vec::new(), Vec::new());
    if p.exp == 4 {
        let fifo: Vec<&VariantSummary> = p
            .browser_counts
            .iter()
            .filter_map(|&b| vs.iter().find(|x| x.name == "fifo" && x.browsers == b))
            .collect();
        if let Some(first) = fifo.first() {
            for f in &fifo {
                pl_ratio.push(ratio(f.pl, first.pl));
                lrq_ratio.push(ratio(f.lrq, first.lrq));
            }
        }
    }
    let load = format!(
        "{} browsers, {} arrivals every {:.1} s{}, {} pages each, K={} connections, page {} KB \
         ({} B HTML + {} images), gzip {}, {}",
        p.browser_counts
            .iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join("/"),
        p.arrivals,
        p.interval_s,
        match p.stagger_ms {
            Some(s) if s > 0.0 => format!(" staggered by {s:.0} ms"),
            Some(_) if p.arrivals == "burst" => " all at the same instant".into(),
            _ => String::new(),
        },
        p.pages_per_browser,
        p.parallel,
        p.page_bytes / 1000,
        p.site.html_bytes,
        p.site.image_bytes.len(),
        match (p.gzip_level, p.gzip_effective) {
            (Some(l), true) => format!("level {l} on text/html and image/bmp"),
            (Some(l), false) => format!("level {l} configured but not requested by the client"),
            (None, _) => "off".into(),
        },
        if p.hog {
            "a CPU-bound process in the server cgroup"
        } else {
            "no CPU hog"
        }
    );
    let notes = env
        .notes
        .iter()
        .cloned()
        .chain(super::attach::references(&vs))
        .collect();
    Summary {
        lab: "pos",
        exp: p.exp,
        title: title(p.exp).into(),
        command: o.command.clone(),
        started_utc: env.started_utc.clone(),
        duration_s: env.started.elapsed().as_secs_f64(),
        params: p.clone(),
        quota: tb.info().quota,
        load,
        testbed: tb.info().clone(),
        variants: vs,
        skipped: env.skipped.clone(),
        notes,
        goals,
        pl_ratio,
        lrq_ratio,
        paper: PAPER,
    }
}

/// `[+a%, +b%]`, or `no interval`.
fn ci_text(i: Option<&Improvement>) -> String {
    i.and_then(|i| i.ci95)
        .map_or("no interval".into(), |c| format!("ci95 {}", c.pct()))
}

/// Exp 2-4: per browser count, the best POS variant (highest mean t1 gain among those with
/// mean t2 at most 10% worse than fifo's, else of all) and whether its interval clears 0.
fn random_goals(p: &Params, vs: &[VariantSummary]) -> Vec<Goal> {
    let mut out = Vec::new();
    for &b in &p.browser_counts {
        let pos: Vec<&VariantSummary> = vs
            .iter()
            .filter(|v| v.browsers == b && v.name.starts_with("pos"))
            .filter(|v| v.t1_mean_improvement.is_some())
            .collect();
        let t1 = |v: &VariantSummary| v.t1_mean_improvement.map_or(f64::NEG_INFINITY, |i| i.value);
        let t2_ok = |v: &VariantSummary| v.t2_mean_improvement.is_some_and(|i| i.value >= -0.10);
        let best = pos
            .iter()
            .filter(|v| t2_ok(v))
            .max_by(|a, b| t1(a).total_cmp(&t1(b)))
            .or_else(|| pos.iter().max_by(|a, b| t1(a).total_cmp(&t1(b))));
        let goal = if p.exp == 2 {
            format!(
                "exp 2 ({b} browsers): the best POS variant's mean t1 change over fifo with its 95% \
                 interval (the paper: no consistent improvement with SLP fixed)"
            )
        } else {
            format!(
                "exp {} ({b} browsers): the best POS variant improves mean t1 over fifo with a 95% \
                 interval above 0, mean t2 at most 10% worse",
                p.exp
            )
        };
        let Some(best) = best else {
            out.push(Goal {
                goal,
                met: false,
                detail: "no POS variant with measured pages".into(),
            });
            continue;
        };
        let i1 = best.t1_mean_improvement;
        let clears = i1
            .and_then(|i| i.ci95)
            .is_some_and(|c| c.clears(0.0) && c.low > 0.0);
        let met = clears && t2_ok(best) && best.gate.as_ref().is_some_and(|g| g.promotions > 0.0);
        let all: Vec<String> = pos
            .iter()
            .map(|v| {
                format!(
                    "{} {:+.1}% t1 ({}) / {:+.1}% t2",
                    v.name,
                    t1(v) * 100.0,
                    ci_text(v.t1_mean_improvement.as_ref()),
                    v.t2_mean_improvement.map_or(f64::NAN, |i| i.value * 100.0)
                )
            })
            .collect();
        let reps = i1
            .and_then(|i| i.reps_for_10pt_width)
            .map_or(String::new(), |r| {
                format!("; an interval 10 points wide would need about {r} repetitions")
            });
        out.push(Goal {
            goal,
            met,
            detail: format!(
                "{}: mean t1 {:+.1}%, {} ({} bursts, resampled with fifo's pages of the same \
                 burst), the interval {} 0; mean t2 {:+.1}%; gate promotions per run {:.0}{reps}; \
                 all: {}",
                best.name,
                t1(best) * 100.0,
                ci_text(i1.as_ref()),
                i1.map_or(0, |i| i.clusters),
                if clears { "clears" } else { "does not clear" },
                best.t2_mean_improvement
                    .map_or(f64::NAN, |i| i.value * 100.0),
                best.gate.as_ref().map_or(0.0, |g| g.promotions),
                all.join(", ")
            ),
        });
    }
    out
}

/// Exp 4 over all browser counts: for each POS variant the improvement of its mean t1 over all
/// pages against fifo's over the same bursts, with an interval over the bursts of every count
/// (each browser count's burst paired with fifo's); the best variant whose mean t2 over all
/// pages is at most 10% worse, and whether its interval clears 0.
fn pooled_goal(p: &Params, vs: &[VariantSummary], cells: &[Cell]) -> Goal {
    let goal =
        "exp 4 (all browser counts pooled): the best POS variant improves mean t1 over fifo \
                with a 95% interval above 0, mean t2 at most 10% worse"
            .to_string();
    let names: Vec<String> = vs
        .iter()
        .filter(|v| v.name.starts_with("pos"))
        .map(|v| v.name.clone())
        .fold(Vec::new(), |mut acc, n| {
            if !acc.contains(&n) {
                acc.push(n);
            }
            acc
        });
    let pooled = |name: &str, f: fn(&Page) -> Option<f64>| -> Vec<PairedCluster> {
        p.browser_counts
            .iter()
            .filter_map(|&b| {
                let fc = cells
                    .iter()
                    .find(|c| c.variant.name == "fifo" && c.browsers == b)?;
                let vc = cells
                    .iter()
                    .find(|c| c.variant.name == name && c.browsers == b)?;
                Some(burst_clusters(fc, vc, f))
            })
            .flatten()
            .collect()
    };
    let point = |cl: &[PairedCluster]| -> Option<f64> {
        let full = || cl.iter().filter(|c| !c.a.is_empty() && !c.b.is_empty());
        let a: Vec<f64> = full().flat_map(|c| c.a.iter().copied()).collect();
        let b: Vec<f64> = full().flat_map(|c| c.b.iter().copied()).collect();
        (!a.is_empty()).then(|| (Stat::Mean.of(&a) - Stat::Mean.of(&b)) / Stat::Mean.of(&a))
    };
    let mut rows: Vec<(String, f64, Option<Ci95>, f64, usize)> = Vec::new();
    for n in &names {
        let c1 = pooled(n, |p| p.t1_ms);
        let c2 = pooled(n, |p| p.t2_ms);
        let (Some(i1), Some(i2)) = (point(&c1), point(&c2)) else {
            continue;
        };
        let ci = paired_cluster_improvement_ci95(&c1, Stat::Mean, CI_SEED);
        let k = c1
            .iter()
            .filter(|c| !c.a.is_empty() && !c.b.is_empty())
            .count();
        rows.push((n.clone(), i1, ci, i2, k));
    }
    let best = rows
        .iter()
        .filter(|r| r.3 >= -0.10)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .or_else(|| rows.iter().max_by(|a, b| a.1.total_cmp(&b.1)));
    let Some(best) = best else {
        return Goal {
            goal,
            met: false,
            detail: "no POS variant with measured pages".into(),
        };
    };
    let clears = best.2.is_some_and(|c| c.low > 0.0);
    let all: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {:+.1}% t1 ({}) / {:+.1}% t2",
                r.0,
                r.1 * 100.0,
                r.2.map_or("no interval".into(), |c| format!("ci95 {}", c.pct())),
                r.3 * 100.0
            )
        })
        .collect();
    Goal {
        goal,
        met: clears && best.3 >= -0.10,
        detail: format!(
            "{}: mean t1 {:+.1}%, {} over {} bursts of {} browser counts, the interval {} 0; \
             mean t2 {:+.1}%; all: {}",
            best.0,
            best.1 * 100.0,
            best.2
                .map_or("no interval".into(), |c| format!("ci95 {}", c.pct())),
            best.4,
            p.browser_counts.len(),
            if clears { "clears" } else { "does not clear" },
            best.3 * 100.0,
            all.join(", ")
        ),
    }
}

fn goals(p: &Params, vs: &[VariantSummary]) -> Vec<Goal> {
    if p.site_kind == super::opts::SiteKind::Cgi {
        return super::cgi::goals(vs);
    }
    let mut out = Vec::new();
    if p.exp != 1 {
        return random_goals(p, vs);
    }
    let pos: Vec<&VariantSummary> = vs.iter().filter(|v| v.name.starts_with("pos")).collect();
    if pos.is_empty() && !vs.iter().any(|v| v.name == "fifo") {
        // Only unmodified servers were named (`--variants apache,apache+pos,...`): their
        // goals are the attach variants' (`super::attach::goals`).
        return out;
    }
    // The goal holds for a variant that meets both bounds: the best t1 among the variants that
    // do; if none does, the best t1 of all (reported as not met).
    let by_t1 = |a: &&&VariantSummary, b: &&&VariantSummary| {
        a.t1_mean_improvement_pct
            .unwrap_or(f64::NEG_INFINITY)
            .total_cmp(&b.t1_mean_improvement_pct.unwrap_or(f64::NEG_INFINITY))
    };
    let measured = || pos.iter().filter(|v| v.t1_mean_improvement_pct.is_some());
    let best = measured()
        .filter(|v| {
            v.t2_mean_improvement_pct.is_some_and(|t2| t2 >= -10.0)
                && v.t1_mean_improvement_pct.is_some_and(|t1| t1 >= 50.0)
        })
        .max_by(by_t1)
        .or_else(|| measured().max_by(by_t1));
    let goal = "exp 1: POS improves mean t1 by >= 50% over fifo with mean t2 at most 10% worse";
    match best {
        Some(b) => {
            let t1 = b.t1_mean_improvement_pct.unwrap_or(f64::NAN);
            let t2 = b.t2_mean_improvement_pct.unwrap_or(f64::NAN);
            let promotions = b.gate.as_ref().map_or(0.0, |g| g.promotions);
            let bottleneck = b.gate.as_ref().map_or(0.0, |g| g.bottleneck_frac);
            // A difference POS did not cause is not POS's improvement.
            let caused = promotions > 0.0;
            let met = t1 >= 50.0 && t2 >= -10.0 && caused;
            let spread = b.t1_rep_improvement_pct.map_or(String::new(), |sp| {
                format!(" (per repetition {:.1} .. {:.1}%)", sp.min, sp.max)
            });
            let i1 = b.t1_mean_improvement;
            let clears = i1.and_then(|i| i.ci95).is_some_and(|c| c.clears(0.5));
            let spread = format!(
                "{spread}, {}: the interval {} the 50% goal{}",
                ci_text(i1.as_ref()),
                if clears { "clears" } else { "does not clear" },
                i1.and_then(|i| i.reps_for_10pt_width)
                    .map_or(String::new(), |r| format!(
                        " (an interval 10 points wide would need about {r} repetitions)"
                    ))
            );
            let cause = if caused {
                format!(
                    "; triage's gate promoted {promotions:.0} workers per run and was in a \
                     bottleneck in {:.0}% of its samples",
                    bottleneck * 100.0
                )
            } else {
                format!(
                    "; but triage's gate never promoted a worker (0 promotions, bottleneck in \
                     {:.0}% of its samples): it had no ready queue to reorder, so the difference \
                     is run-to-run variation, not POS",
                    bottleneck * 100.0
                )
            };
            let others: Vec<String> = pos
                .iter()
                .map(|v| {
                    format!(
                        "{} {:+.1}% t1 / {:+.1}% t2",
                        v.name,
                        v.t1_mean_improvement_pct.unwrap_or(f64::NAN),
                        v.t2_mean_improvement_pct.unwrap_or(f64::NAN)
                    )
                })
                .collect();
            out.push(Goal {
                goal: goal.into(),
                met,
                detail: format!(
                    "best (highest t1 gain among the variants within both bounds, if any; \
                     else of all): {} improves mean t1 by {t1:.1}%{spread} and mean t2 by \
                     {t2:.1}%{cause}; all: {}",
                    b.name,
                    others.join(", ")
                ),
            });
        }
        None => out.push(Goal {
            goal: goal.into(),
            met: false,
            detail: "no POS variant with measured pages".into(),
        }),
    }
    for peer in ["nginx", "apache"] {
        let Some(pv) = vs.iter().find(|v| v.name == peer) else {
            continue;
        };
        let Some(best) = best else { continue };
        let r = match peer {
            "nginx" => best.t1_ratio_vs_nginx,
            _ => best.t1_ratio_vs_apache,
        };
        out.push(Goal {
            goal: format!("exp 1: report mean t1 of the best POS variant against {peer}"),
            met: r.is_some(),
            detail: match (r, pv.t1) {
                (Some(r), Some(s)) => format!(
                    "{} mean t1 = {r:.2} x {peer}'s ({:.1} ms)",
                    best.name, s.mean_ms
                ),
                _ => format!("{peer} has no measured pages"),
            },
        });
    }
    out
}

/// One decimal, `-` when missing.
pub fn f1(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.1}"))
}

/// Two decimals, `-` when missing.
pub fn f2(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.2}"))
}

/// An improvement's interval as a table cell (percent), `-` when missing.
pub fn ci_cell(i: Option<&Improvement>) -> String {
    i.and_then(|i| i.ci95).map_or("-".into(), |c| c.pct())
}

/// The columns of the results table.
pub const TABLE_HEADER: [&str; 20] = [
    "variant",
    "browsers",
    "pages",
    "errors",
    "t1 mean ms",
    "t1 median ms",
    "t1 max ms",
    "t1 mean impr %",
    "t1 mean impr ci95",
    "t1 median impr %",
    "t2 mean ms",
    "t2 mean impr %",
    "t2 mean impr ci95",
    "PL",
    "LRQ",
    "burst PL",
    "burst LRQ",
    "link drops/run",
    "t1 / nginx",
    "t1 / apache",
];

/// The rows of the results table.
pub fn table_rows(s: &Summary) -> Vec<Vec<String>> {
    s.variants
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                v.browsers.to_string(),
                v.pages.to_string(),
                v.errors.to_string(),
                f1(v.t1.map(|t| t.mean_ms)),
                f1(v.t1.map(|t| t.median_ms)),
                f1(v.t1.map(|t| t.max_ms)),
                f1(v.t1_mean_improvement_pct),
                ci_cell(v.t1_mean_improvement.as_ref()),
                f1(v.t1_median_improvement_pct),
                f1(v.t2.map(|t| t.mean_ms)),
                f1(v.t2_mean_improvement_pct),
                ci_cell(v.t2_mean_improvement.as_ref()),
                f2(Some(v.pl)),
                f2(Some(v.lrq)),
                f2(v.burst.map(|b| b.pl)),
                f2(v.burst.map(|b| b.gate_lrq.unwrap_or(b.lrq))),
                f1(v.link.map(|l| l.dropped)),
                f2(v.t1_ratio_vs_nginx),
                f2(v.t1_ratio_vs_apache),
            ]
        })
        .collect()
}

/// Print the results table on stdout.
pub fn print_table(s: &Summary) {
    let rows = table_rows(s);
    let mut w: Vec<usize> = TABLE_HEADER.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    println!("{}", s.title);
    println!("quota: {}; load: {}", quota_text(s.quota), s.load);
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i == 0 {
                out.push_str(&format!("{:<w$}", c, w = w[i]));
            } else {
                out.push_str(&format!("  {:>w$}", c, w = w[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    line(TABLE_HEADER.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r);
    }
}

/// The quota as the table and the report state it.
pub fn quota_text(q: Option<f64>) -> String {
    q.map_or("none (no cgroup)".into(), |q| {
        format!("{}% of one CPU for the whole server side", pct(q))
    })
}

/// The rows of `raw.csv`: every page of every run, cell by cell.
pub fn raw_rows(exp: u8, cells: &[Cell]) -> Vec<RawRow> {
    let mut rows = Vec::new();
    for c in cells {
        for (rep, r) in &c.runs {
            let nums = page_numbers(&r.pages);
            for (p, k) in r.pages.iter().zip(nums) {
                rows.push(RawRow {
                    exp: exp.to_string(),
                    variant: c.variant.name.clone(),
                    rep: *rep,
                    browsers: c.browsers,
                    page: k,
                    p: p.clone(),
                });
            }
        }
    }
    rows
}
