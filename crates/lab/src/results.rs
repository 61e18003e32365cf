//! Measurements in and out: the load generator's `pages.csv`, the paper's statistics, the
//! lab's `raw.csv`, and JSON writing.
//!
//! Statistics follow seed 001 §4.2: min, max, mean, median (computed directly from the
//! per-page times, not from per-URL averages), range = max - min, and the improvement of a
//! variant `b` over a baseline `a` is `(a - b) / a` in percent (positive = `b` is faster).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{LabError, Result};

/// The paper's statistics of one set of times (milliseconds), in the shape `triage load`
/// writes them in its summary.json (`t1`, `t2`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// How many values.
    pub n: usize,
    /// The smallest.
    pub min_ms: f64,
    /// The largest.
    pub max_ms: f64,
    /// The mean.
    pub mean_ms: f64,
    /// The median.
    pub median_ms: f64,
    /// The 90th percentile (nearest rank).
    pub p90_ms: f64,
    /// The 99th percentile (nearest rank).
    pub p99_ms: f64,
    /// max - min.
    pub range_ms: f64,
}

/// Statistics of `values` (non-finite values are ignored); `None` if there is none.
pub fn stats(values: &[f64]) -> Option<Stats> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Stats {
        n,
        min_ms: v[0],
        max_ms: v[n - 1],
        mean_ms: mean,
        median_ms: median,
        p90_ms: nearest_rank(&v, 0.90),
        p99_ms: nearest_rank(&v, 0.99),
        range_ms: v[n - 1] - v[0],
    })
}

/// Nearest-rank percentile of sorted `v` (`q` in 0..=1).
pub fn nearest_rank(v: &[f64], q: f64) -> f64 {
    let rank = (q * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// Seed 001's improvement of `b` over baseline `a`: `(a - b) / a * 100` (positive = better).
/// `None` when `a` is not a positive finite number.
pub fn improvement_pct(a: f64, b: f64) -> Option<f64> {
    if a.is_finite() && b.is_finite() && a > 0.0 {
        Some((a - b) / a * 100.0)
    } else {
        None
    }
}

/// `b / a`, when both are positive finite numbers.
pub fn ratio(b: f64, a: f64) -> Option<f64> {
    (a.is_finite() && b.is_finite() && a > 0.0).then(|| b / a)
}

/// One page as the load generator reports it (a row of `pages.csv`, the type `triage load`
/// writes it with).
pub type Page = loadgen::PageRow;

pub use loadgen::pages::csv_field;

/// Parse `pages.csv` as `triage load --out` writes it.
pub fn parse_pages_csv(text: &str) -> Result<Vec<Page>> {
    loadgen::pages::read_csv(text).map_err(LabError::Results)
}

/// One row of the lab's `raw.csv`: one page of one variant in one repetition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RawRow {
    /// The experiment.
    pub exp: String,
    /// The variant.
    pub variant: String,
    /// The repetition (0-based).
    pub rep: usize,
    /// Simultaneous browsers.
    pub browsers: usize,
    /// Which page of this browser in this run (0, 1, ...), in start order.
    pub page: usize,
    /// The page.
    #[serde(flatten)]
    pub p: Page,
}

/// Header of `raw.csv`.
pub const RAW_HEADER: &str =
    "exp,variant,rep,browsers,browser,page,start_ms,t1_first_ms,t1_ms,t2_ms,bytes,status,error";

fn opt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.3}")).unwrap_or_default()
}

/// Render rows as `raw.csv`.
pub fn raw_csv(rows: &[RawRow]) -> String {
    let mut s = String::from(RAW_HEADER);
    s.push('\n');
    for r in rows {
        let start = if r.p.start_ms.is_finite() {
            format!("{:.3}", r.p.start_ms)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&r.exp),
            csv_field(&r.variant),
            r.rep,
            r.browsers,
            r.p.browser,
            r.page,
            start,
            opt(r.p.t1_first_ms),
            opt(r.p.t1_ms),
            opt(r.p.t2_ms),
            r.p.bytes,
            r.p.status,
            csv_field(&r.p.error)
        );
    }
    s
}

/// Number each browser's pages in start order (the `page` column of `raw.csv`).
pub fn page_numbers(pages: &[Page]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..pages.len()).collect();
    order.sort_by(|&a, &b| {
        (pages[a].browser, pages[a].start_ms)
            .partial_cmp(&(pages[b].browser, pages[b].start_ms))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
    let mut out = vec![0; pages.len()];
    for i in order {
        let k = seen.entry(pages[i].browser).or_insert(0);
        out[i] = *k;
        *k += 1;
    }
    out
}

/// Write `data` to `path`, naming the file on error.
pub fn write_file(path: &Path, data: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| LabError::io("creating", dir, e))?;
    }
    std::fs::write(path, data).map_err(|e| LabError::io("writing", path, e))
}

/// Write `value` as pretty JSON.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let s = serde_json::to_string_pretty(value)
        .map_err(|e| LabError::Results(format!("serializing {}: {e}", path.display())))?;
    write_file(path, s.as_bytes())
}

/// A goal of a lab and whether this run met it (every lab's `summary.json` carries a list).
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    /// The goal, in words.
    pub goal: String,
    /// Whether this run met it.
    pub met: bool,
    /// The figures behind the verdict.
    pub detail: String,
}

/// Print a lab's goals and where its report is (the last lines of every lab).
pub fn print_goals(goals: &[Goal], out: &Path) {
    for g in goals {
        println!(
            "goal {}: {} ({})",
            if g.met { "MET" } else { "NOT MET" },
            g.goal,
            g.detail
        );
    }
    println!("report: {}", out.join("report.html").display());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn improvement_is_the_papers_formula() {
        assert_eq!(improvement_pct(200.0, 150.0), Some(25.0));
        assert!((improvement_pct(100.0, 133.8).unwrap() + 33.8).abs() < 1e-9);
        assert!((improvement_pct(3.0, 1.986).unwrap() - 33.8).abs() < 1e-9);
        assert_eq!(improvement_pct(0.0, 1.0), None);
        assert_eq!(improvement_pct(f64::NAN, 1.0), None);
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(3.0, 0.0), None);
    }

    #[test]
    fn stats_min_max_mean_median_range() {
        let s = stats(&[5.0, 1.0, 3.0, 9.0]).unwrap();
        assert_eq!(s.n, 4);
        assert_eq!(s.min_ms, 1.0);
        assert_eq!(s.max_ms, 9.0);
        assert_eq!(s.mean_ms, 4.5);
        assert_eq!(s.median_ms, 4.0);
        assert_eq!(s.range_ms, 8.0);
        let odd = stats(&[2.0, f64::NAN, 7.0, 1.0]).unwrap();
        assert_eq!((odd.n, odd.median_ms), (3, 2.0));
        assert!(stats(&[]).is_none());
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = stats(&v).unwrap();
        assert_eq!((s.p90_ms, s.p99_ms), (90.0, 99.0));
    }

    #[test]
    fn pages_csv_round_trip_with_quotes_and_errors() {
        let text = "browser,start,t1_first_ms,t1_ms,t2_ms,bytes,status,error\n\
                    0,0.5,1.0,2.0,10.0,1000,200,\n\
                    1,0.7,,,,0,0,\"connect: refused, \"\"x\"\"\"\n";
        let p = parse_pages_csv(text).unwrap();
        assert_eq!(p.len(), 2);
        assert!(p[0].ok());
        assert_eq!(p[0].t1_ms, Some(2.0));
        assert!(!p[1].ok());
        assert_eq!(p[1].error, "connect: refused, \"x\"");
        let rows: Vec<RawRow> = p
            .iter()
            .map(|p| RawRow {
                exp: "1".into(),
                variant: "fifo".into(),
                rep: 0,
                browsers: 2,
                page: 0,
                p: p.clone(),
            })
            .collect();
        let csv = raw_csv(&rows);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], RAW_HEADER);
        assert_eq!(lines.len(), 3);
        let back = loadgen::pages::split_csv_line(lines[2]);
        assert_eq!(back.len(), RAW_HEADER.split(',').count());
        assert_eq!(back[12], "connect: refused, \"x\"");
    }

    #[test]
    fn pages_csv_without_required_column_names_it() {
        let e = parse_pages_csv("browser,t1_ms\n0,1\n").unwrap_err();
        assert!(e.to_string().contains("t2_ms"), "{e}");
        assert!(parse_pages_csv("").is_err());
    }

    #[test]
    fn page_numbers_follow_start_order_per_browser() {
        let mk = |browser, start_ms| Page {
            browser,
            start_ms,
            t1_first_ms: None,
            t1_ms: Some(1.0),
            t2_ms: Some(1.0),
            bytes: 0,
            status: 200,
            error: String::new(),
        };
        let p = vec![mk(0, 50.0), mk(1, 0.0), mk(0, 10.0), mk(0, 30.0)];
        assert_eq!(page_numbers(&p), vec![2, 0, 0, 1]);
    }
}
