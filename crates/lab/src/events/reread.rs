//! `triage lab events --reread DIR`: a saved run's regressions made again by the method as it is
//! now. The run's `raw.csv` gives every open-loop run (the overload run, the ladder, the probes)
//! and wrk's saturation run; its `logs/` and `cpu/` give what `triage capacity` reads. Each
//! server, cold count and repetition is fitted by [`super::summary::fit_row`], the function
//! the lab itself calls, so a change to the fit, the knee or the measured crossing can be
//! judged on every run already made, not only on the next one. Nothing is measured again: the
//! pairs, the memory and the cold connections are the run's own (its `summary.json`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::opts::Saturation;
use super::run::Measured;
use super::summary::{fit_row, fmt_opt, maxf, FitRow};
use crate::error::{LabError, Result};

/// What a re-read gives: each group's fit and the run's two capacity figures.
#[derive(Debug, Clone, Serialize)]
pub struct Reread {
    /// The run's directory.
    pub dir: PathBuf,
    /// Largest |predicted - measured| / measured over the groups (%): the run's
    /// `capacity_error_pct_max` on today's method.
    pub capacity_error_pct_max: Option<f64>,
    /// Largest difference of `triage capacity` to the lab's prediction (%): the run's
    /// `tool_vs_lab_pct_max` on today's method.
    pub tool_vs_lab_pct_max: Option<f64>,
    /// Every group's fit.
    pub fits: Vec<FitRow>,
}

/// One field of a raw.csv row by its column name.
struct Row<'a> {
    head: &'a [&'a str],
    cells: Vec<&'a str>,
    line: usize,
}

impl Row<'_> {
    fn cell(&self, name: &str) -> Result<&str> {
        let i = self
            .head
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| LabError::Results(format!("raw.csv has no column {name:?}")))?;
        self.cells.get(i).copied().ok_or_else(|| {
            LabError::Results(format!("raw.csv line {}: no field {name:?}", self.line))
        })
    }

    fn num(&self, name: &str) -> Result<f64> {
        let s = self.cell(name)?;
        if s.is_empty() {
            return Ok(f64::NAN);
        }
        s.parse().map_err(|_| {
            LabError::Results(format!(
                "raw.csv line {}: {name} {s:?} is not a number",
                self.line
            ))
        })
    }

    fn opt(&self, name: &str) -> Result<Option<f64>> {
        Ok(Some(self.num(name)?).filter(|x| !x.is_nan()))
    }

    fn count(&self, name: &str) -> Result<u64> {
        let x = self.num(name)?;
        Ok(if x.is_finite() && x >= 0.0 {
            x as u64
        } else {
            0
        })
    }
}

/// The points of `dir/raw.csv` as the lab measured them, with each group's access log and CPU
/// samples from `dir/logs` and `dir/cpu` (absent files: `triage capacity` is not run there).
pub fn read_points(dir: &Path) -> Result<Vec<Measured>> {
    let path = dir.join("raw.csv");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| LabError::io("reading a saved run", &path, e))?;
    let mut lines = text.lines();
    let head: Vec<&str> = lines
        .next()
        .ok_or_else(|| LabError::Results(format!("{} is empty", path.display())))?
        .split(',')
        .collect();
    let mut points = Vec::new();
    for (i, l) in lines.enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let r = Row {
            head: &head,
            cells: l.split(',').collect(),
            line: i + 2,
        };
        let server = r.cell("server")?.to_string();
        let rep = r.count("rep")? as usize;
        let cold = r.count("cold")? as usize;
        let cpu = dir
            .join("cpu")
            .join(format!("{server}-r{rep}-cold{cold}.csv"));
        points.push(Measured {
            access_log: dir.join("logs").join(format!("{server}-r{rep}.access.log")),
            cpu_csv: cpu.exists().then_some(cpu),
            server,
            rep,
            cold,
            cold_held: r.count("cold_held")? as usize,
            step: r.cell("step")?.to_string(),
            frac: r.opt("frac")?,
            target_rps: r.num("target_rps")?,
            rps: r.num("rps")?,
            requests: r.count("requests")?,
            errors: r.count("errors")?,
            window_s: r.num("window_s")?,
            cpu_s: r.num("cpu_s")?,
            user_pct: r.num("user_pct")?,
            kernel_pct: r.num("kernel_pct")?,
            idle_pct: r.num("idle_pct")?,
            throttled_pct: r.opt("throttled_pct")?,
            cpu_per_req_us: r.num("cpu_per_req_us")?,
            p50_ms: r.num("p50_ms")?,
            p90_ms: r.num("p90_ms")?,
            p99_ms: r.num("p99_ms")?,
            rss_kib: r.count("rss_kib")?,
            sustained: match r.cell("sustained")? {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            },
            failed_on: None,
            client_cpu_pct: r.opt("client_cpu_pct")?,
            client_cpu_busy_pct: r.opt("client_cpu_busy_pct")?,
            client_fifo: r.cell("client_fifo")? == "true",
            server_cpu_others_pct: r.opt("server_cpu_others_pct")?,
            cold_step: None,
            cold_alive: None,
            pairs: Vec::new(),
            note: None,
            page: if r.cell("page")? == "small" {
                "small"
            } else {
                "gzip"
            },
            quota_pct: r.opt("quota_pct")?,
            body_bytes_per_req: r.opt("body_bytes_per_req")?,
            decoded_bytes_per_req: r.opt("decoded_bytes_per_req")?,
        });
    }
    Ok(points)
}

/// The regressions of the run saved in `dir`, by today's method, against the crossing its
/// runs measure (`--saturation cpu`).
pub fn reread(dir: &Path) -> Result<Reread> {
    let points = read_points(dir)?;
    let mut groups: Vec<(String, usize, usize)> = Vec::new();
    for m in &points {
        let k = (m.server.clone(), m.rep, m.cold);
        if m.step == "saturate" && !groups.contains(&k) {
            groups.push(k);
        }
    }
    let mut fits = Vec::new();
    for (server, rep, cold) in groups {
        let g: Vec<&Measured> = points
            .iter()
            .filter(|m| m.server == server && m.rep == rep && m.cold == cold)
            .collect();
        let step =
            |s: &str| -> Vec<&Measured> { g.iter().filter(|m| m.step == s).copied().collect() };
        let Some(sat) = step("saturate").first().copied() else {
            continue;
        };
        let over = step("overload").first().copied();
        let rates = step("rate");
        let probes = step("probe");
        // The window as the run was planned: its rates' windows, to the whole second.
        let window_s = rates
            .iter()
            .map(|m| m.window_s.round() as u64)
            .min()
            .unwrap_or(3);
        fits.push(fit_row(
            sat,
            over,
            &rates,
            &probes,
            window_s,
            Saturation::Cpu,
        ));
    }
    if fits.is_empty() {
        return Err(LabError::Results(format!(
            "{}: no saturation run in raw.csv, nothing to fit",
            dir.display()
        )));
    }
    Ok(Reread {
        dir: dir.to_path_buf(),
        capacity_error_pct_max: maxf(fits.iter().filter_map(|f| f.error_pct.map(f64::abs))),
        tool_vs_lab_pct_max: maxf(fits.iter().filter_map(|f| f.tool_vs_lab_pct)),
        fits,
    })
}

/// One line per group: the prediction, the measured crossing, the error, the tool's.
pub fn print(r: &Reread) {
    let o = fmt_opt;
    println!("{} (today's method):", r.dir.display());
    println!(
        "{:<15} {:>6} {:>10} {:>10} {:>8} {:>10} {:>12}",
        "server", "cold", "predicted", "measured", "error%", "tool", "tool-vs-lab%"
    );
    for f in &r.fits {
        println!(
            "{:<15} {:>6} {:>10} {:>10} {:>8} {:>10} {:>12}",
            f.server,
            f.cold,
            o(f.predicted_rps, 1),
            o(f.measured_rps, 1),
            o(f.error_pct, 1),
            o(f.tool_predicted_rps, 1),
            o(f.tool_vs_lab_pct, 2)
        );
    }
    println!(
        "capacity_error_pct_max {}, tool_vs_lab_pct_max {}",
        o(r.capacity_error_pct_max, 2),
        o(r.tool_vs_lab_pct_max, 2)
    );
}
