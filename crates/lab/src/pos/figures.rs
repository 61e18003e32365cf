//! One row for every figure of seed 001 (Fig. 1-7) in a `triage lab pos` report: what the
//! figure shows, the paper's number (or its words, where it gives none), and ours from this run,
//! or the command that measures it when this experiment does not.

use super::summary::{Summary, VariantSummary, PAPER};

/// A row of the table: figure, what it shows, the paper, ours.
pub type FigureRow = [String; 4];

/// Where a figure is measured when this run's experiment is not the one.
fn elsewhere(exp: u8) -> String {
    format!("measured by `triage lab pos --exp {exp}`")
}

/// `+a / +b / +c` of `f` for the POS variants `prefix-rw3`, `-rw6`, `-rw9` at the largest
/// browser count; `-` for one that did not run.
fn per_rw(s: &Summary, prefix: &str, f: fn(&VariantSummary) -> Option<f64>) -> String {
    let b = s.params.browser_counts.iter().max().copied();
    [3, 6, 9]
        .iter()
        .map(|rw| {
            s.variants
                .iter()
                .find(|v| v.name == format!("{prefix}-rw{rw}") && Some(v.browsers) == b)
                .and_then(f)
                .map_or("-".into(), |x| format!("{x:+.1}"))
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// `a / b / c` of three numbers with `d` decimals.
fn join(v: &[f64], d: usize) -> String {
    v.iter()
        .map(|x| format!("{x:.d$}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The paper's mean and median improvements, `a / b / c / median d / e / f` (RW 3 / 6 / 9).
fn mean_median(mean: &[f64], median: &[f64]) -> String {
    format!("{} / median {}", join(mean, 1), join(median, 1))
}

/// Fig. 2 from this run: fifo's min and max t1 against the POS variants' (RW 3 / 6 / 9).
fn fig2(s: &Summary, prefix: &str) -> String {
    let stat = |name: &str, f: fn(&crate::results::Stats) -> f64| {
        s.variants
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.t1)
            .map_or("-".into(), |t| format!("{:.0}", f(&t)))
    };
    let rws = |f: fn(&crate::results::Stats) -> f64| {
        [3, 6, 9]
            .iter()
            .map(|rw| stat(&format!("{prefix}-rw{rw}"), f))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    format!(
        "min {} vs {} ms; max {} vs {} ms",
        stat("fifo", |t| t.min_ms),
        rws(|t| t.min_ms),
        stat("fifo", |t| t.max_ms),
        rws(|t| t.max_ms)
    )
}

/// The rows for every figure of seed 001, for the report of `s`.
pub fn rows(s: &Summary) -> Vec<FigureRow> {
    let row = |f: &str, what: &str, paper: String, ours: String| -> FigureRow {
        [f.into(), what.into(), paper, ours]
    };
    let prefix = if s.params.slp_s.is_some() {
        "pos"
    } else {
        "pos-auto"
    };
    let here = |exp: u8, ours: String| if s.exp == exp { ours } else { elsewhere(exp) };
    let mean = |v: &VariantSummary| v.t1_mean_improvement_pct;
    let median = |v: &VariantSummary| v.t1_median_improvement_pct;
    let t2 = |v: &VariantSummary| v.t2_mean_improvement_pct;
    let ours_mean_median = || {
        format!(
            "{} / median {}",
            per_rw(s, prefix, mean),
            per_rw(s, prefix, median)
        )
    };
    let mut out = vec![row(
        "Fig. 1",
        "A / B processing times (s), timesharing and POS (the example of §2)",
        "5.5 / 4.1 and 5.5 / 3.1".into(),
        "not a server experiment: `triage sim pos-fig1` (5.5 / 4.1 and 5.5 / 3.1)".into(),
    )];
    out.push(row(
        "Fig. 2",
        "exp 1, per-URL t1: min and max, fifo vs RW = 3 / 6 / 9",
        "min and max better with RW = 3, 6, 9; extreme values pressed down".into(),
        here(1, fig2(s, prefix)),
    ));
    out.push(row(
        "Fig. 3(a)",
        "exp 1, mean / median t1 improvement (%), RW = 3 / 6 / 9",
        mean_median(
            &PAPER.exp1_t1_mean_improvement_pct,
            &PAPER.exp1_t1_median_improvement_pct,
        ),
        here(1, ours_mean_median()),
    ));
    out.push(row(
        "Fig. 3(b)",
        "exp 1, mean t2 improvement (%), RW = 3 / 6 / 9",
        "negative: image data not as fast as without POS".into(),
        here(1, per_rw(s, prefix, t2)),
    ));
    out.push(row(
        "Fig. 4(a)",
        "exp 2 (SLP fixed), mean t1 improvement (%), RW = 3 / 6 / 9",
        "no consistent improvement (RW = 9 a little faster)".into(),
        here(2, per_rw(s, prefix, mean)),
    ));
    out.push(row(
        "Fig. 4(b)",
        "exp 2, mean t2 improvement (%), RW = 3 / 6 / 9",
        "mean and median of image data improved".into(),
        here(2, per_rw(s, prefix, t2)),
    ));
    out.push(row(
        "Fig. 5(a)",
        "exp 3 (SLP predicted), mean / median t1 improvement (%), RW = 3 / 6 / 9",
        mean_median(
            &PAPER.exp3_t1_mean_improvement_pct,
            &PAPER.exp3_t1_median_improvement_pct,
        ),
        here(3, ours_mean_median()),
    ));
    out.push(row(
        "Fig. 5(b)",
        "exp 3, mean t2 improvement (%), RW = 3 / 6 / 9",
        "mean not so different from without POS, median smaller".into(),
        here(3, per_rw(s, prefix, t2)),
    ));
    let ratios = |v: &[Option<f64>]| {
        v.iter()
            .map(|x| x.map_or("-".into(), |x| format!("{x:.2}")))
            .collect::<Vec<_>>()
            .join(" : ")
    };
    out.push(row(
        "Fig. 6",
        "exp 4, PL ratio / LRQ ratio (fifo), 3 / 6 / 9 / 12 browsers",
        format!(
            "{} / LRQ {}",
            join(&PAPER.fig6_pl_ratio, 2).replace(" / ", " : "),
            join(&PAPER.fig6_lrq_ratio, 2).replace(" / ", " : ")
        ),
        here(
            4,
            format!("{} / LRQ {}", ratios(&s.pl_ratio), ratios(&s.lrq_ratio)),
        ),
    ));
    let best = |b: usize| {
        s.variants
            .iter()
            .filter(|v| v.browsers == b && v.name.starts_with("pos"))
            .filter_map(|v| v.t1_mean_improvement_pct)
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
            .map_or("-".into(), |x| format!("{x:+.1}"))
    };
    out.push(row(
        "Fig. 7",
        "exp 4, best POS variant's mean t1 improvement (%), 3 / 6 / 9 / 12 browsers",
        join(&PAPER.fig7_best_mean_improvement_pct, 1),
        here(
            4,
            s.params
                .browser_counts
                .iter()
                .map(|&b| best(b))
                .collect::<Vec<_>>()
                .join(" / "),
        ),
    ));
    out
}
