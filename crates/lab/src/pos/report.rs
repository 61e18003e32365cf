//! `report.html` of a `triage lab pos` run: conditions, goals, the results table, the paper's
//! figures beside ours, and the paper's figures redrawn from our data (Fig. 2-7).

use policy::registry::PosTail;

use super::summary::{
    f1, f2, quota_text, table_rows, Cell, Summary, VariantSummary, PAPER, TABLE_HEADER,
};
use crate::report::{dots, grouped_bars, lines, Report, Series};
use crate::results::{stats, Stats};

fn stat_series(vs: &[&VariantSummary], f: fn(&VariantSummary) -> Option<Stats>) -> Vec<Series> {
    let get = |g: fn(&Stats) -> f64| -> Vec<f64> {
        vs.iter()
            .map(|v| f(v).map_or(f64::NAN, |s| g(&s)))
            .collect()
    };
    vec![
        ("min".into(), get(|s| s.min_ms)),
        ("max".into(), get(|s| s.max_ms)),
        ("mean".into(), get(|s| s.mean_ms)),
        ("median".into(), get(|s| s.median_ms)),
        ("range".into(), get(|s| s.range_ms)),
    ]
}

/// The HTML report.
/// The HTML report: conditions, goals, results, the paper's figures beside ours, and the
/// paper's figures redrawn from our data.
pub fn report(s: &Summary, cells: &[Cell]) -> String {
    let mut r = Report::new(&s.title);
    r.p(&format!(
        "Started {} (UTC), {:.0} s. Command (repeat it to reproduce; seed {}):",
        s.started_utc, s.duration_s, s.params.seed
    ));
    r.pre(&s.command);
    conditions(&mut r, s);
    goals(&mut r, s);
    results(&mut r, s);
    paper_beside_ours(&mut r, s);
    r.h2("Every figure of seed 001");
    r.p("One row per figure: the paper's number (or its words where it gives none) and this run's, or the experiment that measures it.");
    let rows: Vec<Vec<String>> = super::figures::rows(s)
        .into_iter()
        .map(|r| r.to_vec())
        .collect();
    r.table(&["figure", "what it shows", "paper", "ours"], &rows);
    figures(&mut r, s, cells);
    if s.exp == 4 {
        figures_exp4(&mut r, s);
    }
    r.h2("Files");
    r.p("raw.csv: one row per page per variant per repetition; summary.json: the numbers above.");
    r.to_html()
}

/// The periods the kernel applied, from the server side's `cpu.stat` in every variant's runs
/// (its sampled time over its periods), and the share throttled: "-" without a quota.
fn period_seen_text(s: &Summary) -> String {
    let range = |v: Vec<f64>| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (!v.is_empty()).then_some((lo, hi))
    };
    let seen = range(
        s.variants
            .iter()
            .filter_map(|v| v.quota_period_seen_ms)
            .collect(),
    );
    let throttled = range(
        s.variants
            .iter()
            .map(|v| v.throttled_period_share)
            .collect(),
    );
    match (seen, throttled) {
        (Some((lo, hi)), Some((tlo, thi))) => format!(
            "{lo:.1}-{hi:.1} ms (the server side's cpu.stat: sampled time over periods, every \
             variant), {:.0}-{:.0}% of them throttled",
            tlo * 100.0,
            thi * 100.0
        ),
        _ => "-".into(),
    }
}

/// The conditions of the run, and what it could not do as asked.
fn conditions(r: &mut Report, s: &Summary) {
    r.h2("Conditions");
    let tb = &s.testbed;
    r.table(
        &["what", "value"],
        &[
            vec!["CPU quota of the server side".into(), quota_text(s.quota)],
            vec!["quota period".into(), format!("{} ms", s.params.period_ms)],
            vec!["quota period seen".into(), period_seen_text(s)],
            vec!["load".into(), s.load.clone()],
            vec![
                "POS tail order".into(),
                match s.params.pos_tail {
                    PosTail::Episode => {
                        "episode (triage's: what is not at the head is served in the order its \
                         episode began)"
                            .into()
                    }
                    PosTail::Fifo => "fifo (the paper's: by ready time)".into(),
                },
            ],
            vec!["network".into(), format!("{} ({})", tb.network, tb.shaping)],
            vec![
                "CPUs".into(),
                format!(
                    "server side on CPU {}, load generator on CPU {} ({} CPUs)",
                    tb.server_cpu.map_or("any".into(), |c| c.to_string()),
                    tb.client_cpu.map_or("any".into(), |c| c.to_string()),
                    tb.cpus
                ),
            ],
            vec![
                "SLP".into(),
                s.params.slp_s.map_or_else(
                    || {
                        format!(
                            "predicted every 500 ms, at least {:.0} ms (--slp-floor)",
                            s.params.slp_floor_s.unwrap_or(0.0) * 1e3
                        )
                    },
                    |v| format!("fixed {:.3} s", v),
                ),
            ],
            vec![
                "repetitions".into(),
                format!("{} (interleaved)", s.params.reps),
            ],
            vec![
                "triage flags added".into(),
                if s.params.triage_extra.is_empty() {
                    "none (server defaults)".into()
                } else {
                    s.params.triage_extra.join(" ")
                },
            ],
        ],
    );
    for n in &s.notes {
        r.verdict(false, &format!("Note: {n}"));
    }
    for sk in &s.skipped {
        r.verdict(false, &format!("Not measured: {sk}"));
    }
}

/// The goals and whether they were met.
fn goals(r: &mut Report, s: &Summary) {
    if !s.goals.is_empty() {
        r.h2("Goals");
        for g in &s.goals {
            r.verdict(
                g.met,
                &format!(
                    "{}: {} — {}",
                    if g.met { "MET" } else { "NOT MET" },
                    g.goal,
                    g.detail
                ),
            );
        }
    }
}

/// The results table and the spread over repetitions.
fn results(r: &mut Report, s: &Summary) {
    r.h2("Results");
    r.p(
        "Improvements are the paper's (a-b)/a against fifo in the same run (positive = faster). \
         PL = share of the server side's CPU quota in use, LRQ = runnable server-side threads \
         waiting for the CPU, both sampled every 10 ms from the cgroup, the same way for every \
         server. t1 / nginx is this variant's mean t1 divided by nginx's.",
    );
    r.table(&TABLE_HEADER, &table_rows(s));
    // Per-repetition spread.
    let spread_rows: Vec<Vec<String>> = s
        .variants
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                v.browsers.to_string(),
                v.rep_t1_mean_ms
                    .iter()
                    .map(|x| format!("{x:.1}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                v.t1_rep_improvement_pct.map_or("-".into(), |sp| {
                    format!("{:.1} / {:.1} / {:.1}", sp.min, sp.median, sp.max)
                }),
                v.gate.as_ref().map_or("-".into(), |g| {
                    format!(
                        "PL {:.2}, LRQ {:.2}, bottleneck {:.0}%, promoted {:.0}, demoted {:.0}, rescued {:.0}",
                        g.pl_mean,
                        g.lrq_mean,
                        g.bottleneck_frac * 100.0,
                        g.promotions,
                        g.demotions,
                        g.starvation_rescues
                    )
                }),
            ]
        })
        .collect();
    r.h3("Spread over repetitions and triage's gate");
    r.table(
        &[
            "variant",
            "browsers",
            "mean t1 per repetition (ms)",
            "t1 mean improvement per rep min / median / max %",
            "triage gate (mean per run)",
        ],
        &spread_rows,
    );
}

/// The paper's figures beside ours.
fn paper_beside_ours(r: &mut Report, s: &Summary) {
    r.h2("The paper's figures beside ours");
    let ours = |name: &str, b: Option<usize>| -> (Option<f64>, Option<f64>) {
        s.variants
            .iter()
            .find(|v| v.name == name && b.is_none_or(|b| v.browsers == b))
            .map_or((None, None), |v| {
                (v.t1_mean_improvement_pct, v.t1_median_improvement_pct)
            })
    };
    match s.exp {
        1 | 3 => {
            let (pm, pmed, prefix) = if s.exp == 1 {
                (
                    PAPER.exp1_t1_mean_improvement_pct,
                    PAPER.exp1_t1_median_improvement_pct,
                    "pos",
                )
            } else {
                (
                    PAPER.exp3_t1_mean_improvement_pct,
                    PAPER.exp3_t1_median_improvement_pct,
                    "pos-auto",
                )
            };
            let rows: Vec<Vec<String>> = [3u32, 6, 9]
                .iter()
                .enumerate()
                .map(|(i, rw)| {
                    let (m, md) = ours(&format!("{prefix}-rw{rw}"), None);
                    vec![
                        format!("RW = {rw}"),
                        format!("{:.1}", pm[i]),
                        f1(m),
                        format!("{:.1}", pmed[i]),
                        f1(md),
                    ]
                })
                .collect();
            r.table(
                &[
                    "",
                    "paper mean t1 impr %",
                    "ours",
                    "paper median t1 impr %",
                    "ours",
                ],
                &rows,
            );
        }
        2 => {
            r.p("The paper reports no consistent improvement in experiment 2 (fixed SLP with random arrivals): the idle waits of text workers are not longer than SLP.");
        }
        _ => {
            let rows: Vec<Vec<String>> = s
                .params
                .browser_counts
                .iter()
                .enumerate()
                .map(|(i, &b)| {
                    let best = s
                        .variants
                        .iter()
                        .filter(|v| v.browsers == b && v.name.starts_with("pos"))
                        .filter_map(|v| v.t1_mean_improvement_pct)
                        .fold(f64::NEG_INFINITY, f64::max);
                    vec![
                        b.to_string(),
                        PAPER
                            .fig7_best_mean_improvement_pct
                            .get(i)
                            .map_or("-".into(), |v| format!("{v:.1}")),
                        f1(best.is_finite().then_some(best)),
                        PAPER
                            .fig6_pl_ratio
                            .get(i)
                            .map_or("-".into(), |v| format!("{v:.2}")),
                        f2(s.pl_ratio.get(i).copied().flatten()),
                        PAPER
                            .fig6_lrq_ratio
                            .get(i)
                            .map_or("-".into(), |v| format!("{v:.2}")),
                        f2(s.lrq_ratio.get(i).copied().flatten()),
                    ]
                })
                .collect();
            r.table(
                &[
                    "browsers",
                    "paper best mean t1 impr %",
                    "ours",
                    "paper PL ratio",
                    "ours (fifo)",
                    "paper LRQ ratio",
                    "ours (fifo)",
                ],
                &rows,
            );
        }
    }
}

/// Fig. 2-5 and the predicted SLP, at the largest browser count.
fn figures(r: &mut Report, s: &Summary, cells: &[Cell]) {
    r.h2("Figures");
    let bmax = *s.params.browser_counts.iter().max().unwrap_or(&1);
    let at_b: Vec<&VariantSummary> = s.variants.iter().filter(|v| v.browsers == bmax).collect();
    let names: Vec<String> = at_b.iter().map(|v| v.name.clone()).collect();
    // Fig. 2: per-URL mean t1.
    let per_url: Vec<Series> = cells
        .iter()
        .filter(|c| c.browsers == bmax)
        .filter(|c| c.variant.name == "fifo" || c.variant.name.starts_with("pos"))
        .map(|c| {
            let vals: Vec<f64> = (0..bmax)
                .map(|b| {
                    let v: Vec<f64> = c
                        .runs
                        .iter()
                        .flat_map(|(_, r)| r.pages.iter())
                        .filter(|p| p.browser == b && p.ok())
                        .filter_map(|p| p.t1_ms)
                        .collect();
                    stats(&v).map_or(f64::NAN, |s| s.mean_ms)
                })
                .collect();
            (c.variant.name.clone(), vals)
        })
        .collect();
    let urls: Vec<String> = (1..=bmax).map(|i| format!("URL {i}")).collect();
    r.figure(
        &dots("Response time of text data per URL (cf. Fig. 2)", "mean t1 (ms)", &urls, &per_url),
        &format!("Mean t1 of each browser's unique URL over all its pages and repetitions ({bmax} browsers)."),
    );
    r.figure(
        &grouped_bars(
            "Response time of text data, t1 (cf. Fig. 3-5 (a))",
            "t1 (ms)",
            &names,
            &stat_series(&at_b, |v| v.t1),
        ),
        "Minimum, maximum, mean, median and range of t1 over all pages and repetitions.",
    );
    r.figure(
        &grouped_bars(
            "Response time of image data, t2 (cf. Fig. 3-5 (b))",
            "t2 (ms)",
            &names,
            &stat_series(&at_b, |v| v.t2),
        ),
        "Minimum, maximum, mean, median and range of t2 over all pages and repetitions.",
    );
    r.figure(
        &grouped_bars(
            "PL and LRQ (cgroup, every 10 ms)",
            "mean",
            &names,
            &[
                ("PL".into(), at_b.iter().map(|v| v.pl).collect()),
                ("LRQ".into(), at_b.iter().map(|v| v.lrq).collect()),
            ],
        ),
        "Mean PL (share of the quota in use) and LRQ (runnable threads waiting) per variant.",
    );
    let auto: Vec<Series> = s
        .variants
        .iter()
        .filter(|v| v.browsers == bmax)
        .filter_map(|v| {
            let g = v.gate.as_ref()?;
            let vals: Vec<f64> = g.series.iter().map(|x| x.1 * 1e3).collect();
            (vals.iter().any(|x| x.is_finite()) && v.name.contains("auto"))
                .then(|| (format!("{} SLP", v.name), vals))
        })
        .collect();
    if !auto.is_empty() {
        let n = auto.iter().map(|a| a.1.len()).max().unwrap_or(0);
        let xs: Vec<f64> = (0..n).map(|i| i as f64 * 0.5).collect();
        r.figure(
            &lines(
                "Predicted SLP over one run",
                "s since start",
                "SLP (ms)",
                &xs,
                &auto,
            ),
            "SLP as predicted by pos every 500 ms (first repetition).",
        );
    }
}

/// Exp 4: Fig. 6 and 7 against the browser count.
fn figures_exp4(r: &mut Report, s: &Summary) {
    let xs: Vec<f64> = s.params.browser_counts.iter().map(|&b| b as f64).collect();
    let mut fig6 = vec![
        (
            "PL ratio (ours, fifo)".into(),
            s.pl_ratio.iter().map(|x| x.unwrap_or(f64::NAN)).collect(),
        ),
        (
            "LRQ ratio (ours, fifo)".into(),
            s.lrq_ratio.iter().map(|x| x.unwrap_or(f64::NAN)).collect(),
        ),
    ];
    if s.params.browser_counts == [3, 6, 9, 12] {
        fig6.push(("PL ratio (paper)".into(), PAPER.fig6_pl_ratio.to_vec()));
        fig6.push(("LRQ ratio (paper)".into(), PAPER.fig6_lrq_ratio.to_vec()));
    }
    r.figure(
        &lines(
            "PL and LRQ ratios vs simultaneous browsers (cf. Fig. 6)",
            "browsers",
            "ratio to the first",
            &xs,
            &fig6,
        ),
        "Ratios of PL and LRQ to those at the smallest browser count.",
    );
    let mut seen: Vec<String> = Vec::new();
    for v in &s.variants {
        if !seen.contains(&v.name) {
            seen.push(v.name.clone());
        }
    }
    let fig7: Vec<Series> = seen
        .iter()
        .map(|n| {
            let vals = s
                .params
                .browser_counts
                .iter()
                .map(|&b| {
                    s.variants
                        .iter()
                        .find(|v| &v.name == n && v.browsers == b)
                        .and_then(|v| v.t1)
                        .map_or(f64::NAN, |t| t.mean_ms)
                })
                .collect();
            (n.clone(), vals)
        })
        .collect();
    r.figure(
        &lines(
            "Mean t1 vs simultaneous browsers (cf. Fig. 7)",
            "browsers",
            "mean t1 (ms)",
            &xs,
            &fig7,
        ),
        "Mean response time of text data per variant and browser count.",
    );
}
