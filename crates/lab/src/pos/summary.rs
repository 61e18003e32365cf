//! What a `triage lab pos` run measured, summarized: `summary.json` ([`Summary`]), the goal
//! of experiment 1, `raw.csv`'s rows and the table on stdout.

use std::collections::BTreeMap;

use serde::Serialize;

use super::opts::PosOpts;
use super::plan::{title, Params};
use crate::harness::Env;
use crate::results::{improvement_pct, page_numbers, ratio, stats, Goal, Page, RawRow, Stats};
use crate::runner::{RunOutcome, Variant};
use crate::sampler::{GateStats, PlLrq};
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
}

fn spread(v: &[f64]) -> Option<Spread> {
    let s = stats(v)?;
    Some(Spread {
        min: s.min_ms,
        median: s.median_ms,
        max: s.max_ms,
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
    /// Per-repetition improvement of mean t1 against fifo of the same repetition.
    pub t1_rep_improvement_pct: Option<Spread>,
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
    /// triage's gate view (mean over repetitions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateStats>,
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
    })
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
                rep_t1_mean_ms: rep_mean(|p| p.t1_ms),
                rep_t2_mean_ms: rep_mean(|p| p.t2_ms),
                pl: mean(&cpu.iter().map(|c| c.pl_mean).collect::<Vec<_>>()),
                lrq: mean(&cpu.iter().map(|c| c.lrq_mean).collect::<Vec<_>>()),
                cpu_s: mean(&cpu.iter().map(|c| c.cpu_s).collect::<Vec<_>>()),
                server_cpu_s: mean(&cpu.iter().map(|c| c.cpu_s).collect::<Vec<_>>()),
                gate: mean_gate(&gates),
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
    let goals = goals(p, &vs);
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
        notes: env.notes.clone(),
        goals,
        pl_ratio,
        lrq_ratio,
        paper: PAPER,
    }
}

fn goals(p: &Params, vs: &[VariantSummary]) -> Vec<Goal> {
    let mut out = Vec::new();
    if p.exp != 1 {
        return out;
    }
    let pos: Vec<&VariantSummary> = vs.iter().filter(|v| v.name.starts_with("pos")).collect();
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

/// The columns of the results table.
pub const TABLE_HEADER: [&str; 16] = [
    "variant",
    "browsers",
    "pages",
    "errors",
    "t1 mean ms",
    "t1 median ms",
    "t1 max ms",
    "t1 mean impr %",
    "t1 median impr %",
    "t2 mean ms",
    "t2 mean impr %",
    "PL",
    "LRQ",
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
                f1(v.t1_median_improvement_pct),
                f1(v.t2.map(|t| t.mean_ms)),
                f1(v.t2_mean_improvement_pct),
                f2(Some(v.pl)),
                f2(Some(v.lrq)),
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
