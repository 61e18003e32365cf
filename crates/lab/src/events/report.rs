//! `report.html` of a `triage lab events` run: conditions, goals, seed 002's Fig. 9 redrawn
//! (idle and kernel CPU against the rate, one scatter and its regression line per server and
//! cold count), Tables 4 and 5 (the regressions over all rates and above the cut), predicted
//! against measured peaks, CPU per request at each cold count, memory per idle connection,
//! and `triage capacity`'s prediction from the access logs beside the lab's.

use plotters::prelude::*;

use super::summary::{fmt_opt as o, FitRow, Summary, KNEE_IDLE_PCT};
use crate::capacity::Fits;
use crate::report::{color, esc, Report};

/// One scatter with its fitted line: name, points (rate, %), line (slope, intercept).
pub type Scatter = (String, Vec<(f64, f64)>, Option<(f64, f64)>);

/// Fig. 9's form: points and their regression lines, y in % (0..100) against the rate; filled
/// circles for the idle share, squares for the kernel share when `squares` is set.
pub fn scatter_lines(title: &str, x_label: &str, series: &[Scatter], squares: bool) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (820, 440)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let xmax = series
            .iter()
            .flat_map(|s| s.1.iter().map(|p| p.0))
            .filter(|x| x.is_finite())
            .fold(0.0, f64::max)
            .max(1.0)
            * 1.1;
        let chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..xmax, 0.0..100.0);
        let Ok(mut chart) = chart else {
            return format!("<p>{}: no data</p>", esc(title));
        };
        let _ = chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc("% of the server side's CPU")
            .draw();
        for (i, (name, pts, line)) in series.iter().enumerate() {
            let c = color(i);
            let pts: Vec<(f64, f64)> = pts
                .iter()
                .copied()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .collect();
            if squares {
                let _ = chart.draw_series(pts.iter().map(|&(x, y)| {
                    Rectangle::new(
                        [(x - xmax * 0.004, y - 1.0), (x + xmax * 0.004, y + 1.0)],
                        c.filled(),
                    )
                }));
            } else {
                let _ = chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())));
            }
            if let Some((slope, icpt)) = line {
                let ys = |x: f64| slope * x + icpt;
                let seg: Vec<(f64, f64)> = (0..=40)
                    .map(|k| xmax * k as f64 / 40.0)
                    .map(|x| (x, ys(x)))
                    .filter(|p| (0.0..=100.0).contains(&p.1))
                    .collect();
                if let Ok(a) = chart.draw_series(LineSeries::new(seg, c.stroke_width(2))) {
                    a.label(name.clone())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
                }
            }
        }
        let _ = chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw();
        let _ = root.present();
    }
    svg
}

fn fit_cells(f: &Fits) -> Vec<String> {
    let cell = |x: &Option<crate::capacity::Fit>| match x {
        Some(f) => format!("{:.4} / {:.1} / {:.3}", f.slope, f.intercept, f.r),
        None => "-".into(),
    };
    vec![
        f.buckets.to_string(),
        cell(&f.idle),
        cell(&f.kernel),
        cell(&f.user),
        o(f.predicted_peak_rps, 0),
    ]
}

fn table45(r: &mut Report, rows: &[&FitRow], above: bool) {
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|f| {
            let mut v = vec![f.server.clone(), f.cold_held.to_string(), f.rep.to_string()];
            v.extend(fit_cells(if above { &f.above_cut } else { &f.all }));
            v
        })
        .collect();
    r.table(
        &[
            "server",
            "cold held",
            "rep",
            "points",
            "idle: slope / intercept / r",
            "kernel: slope / intercept / r",
            "user: slope / intercept / r",
            "idle X-intercept (req/s)",
        ],
        &body,
    );
}

/// The HTML report.
pub fn report(s: &Summary) -> String {
    let mut r = Report::new(s.title);
    r.p(&format!(
        "Started {} (UTC), {:.0} s. Command:",
        s.started_utc, s.duration_s
    ));
    r.pre(&s.command);
    r.h2("Conditions");
    let p = &s.params;
    r.p(&format!(
        "Each server runs alone on CPU {} in a cgroup, {} (CPU shares below are of that \
         capacity, from the cgroup's accounting). What was requested and on what budget: {}. \
         Per cold count (connected keep-alive connections, each served \
         one request, then idle), wrk measures the peak with {} connections (closed loop, {} s), \
         loadgen's open loop (coordinated omission corrected) offered 1.25x that peak measures \
         the saturation of its own traffic, then runs {} rates from {:.0}% to {:.0}% of that \
         saturation for {} s each; at a cold count above 0, {} pairs of {} s wrk runs alternate \
         between the server and its twin (same configuration, same cgroup, no cold \
         connection). Servers: {}. Figures are noisy: other jobs share the machine.",
        s.testbed.server_cpu.map_or("any".into(), |c| c.to_string()),
        match p.quota {
            Some(_) => format!(
                "on {}: a slower CPU the client side can saturate",
                super::plan::budget(p.quota, p.period_ms)
            ),
            None => "on the whole CPU, no quota: the page's compression is the work the client \
                     side saturates it with"
                .to_string(),
        },
        p.page_and_budget(),
        p.hot_conns,
        p.window_s,
        p.fracs.len(),
        p.fracs.first().copied().unwrap_or(0.0) * 100.0,
        p.fracs.last().copied().unwrap_or(0.0) * 100.0,
        p.window_s,
        p.pairs,
        p.pair_window_s,
        p.servers
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    r.h2("Goals");
    for g in &s.goals {
        r.verdict(g.met, &format!("{}: {}", g.goal, g.detail));
    }
    r.h2("Fig. 9: CPU against the request rate");
    let reps0: Vec<&FitRow> = s.fits.iter().filter(|f| f.rep == 0).collect();
    for (title, idle) in [("Idle CPU", true), ("Kernel-mode CPU", false)] {
        let series: Vec<Scatter> = reps0
            .iter()
            .map(|f| {
                let pts = s
                    .points
                    .iter()
                    .filter(|m| {
                        m.server == f.server && m.rep == 0 && m.cold == f.cold && m.step == "rate"
                    })
                    .map(|m| (m.rps, if idle { m.idle_pct } else { m.kernel_pct }))
                    .collect();
                let line = if idle {
                    f.prediction.idle
                } else {
                    f.prediction.kernel
                };
                (
                    format!("{} cold {}", f.server, f.cold_held),
                    pts,
                    line.map(|l| (l.slope, l.intercept)),
                )
            })
            .collect();
        r.figure(
            &scatter_lines(title, "requests/s", &series, !idle),
            &format!(
                "{title} against the rate, one point per rate, lines are the busy-range \
                 regressions (seed 002 Fig. 9: circles idle, squares kernel)."
            ),
        );
    }
    r.h2("Table 4: regressions over all rates");
    let all: Vec<&FitRow> = s.fits.iter().collect();
    table45(&mut r, &all, false);
    r.h2(&format!(
        "Table 5: regressions over the busy range ({:.0}% of the measured saturation and \
         above, saturated rates left out)",
        super::summary::CUT_FRAC * 100.0
    ));
    table45(&mut r, &all, true);
    r.h2("Predicted against measured peak");
    r.p(&format!(
        "The prediction is the idle line's X-intercept over the busy range (Table 5: rates at \
         or above the cut, those with less than {KNEE_IDLE_PCT}% idle left out as saturated, \
         ending where idle first ran out; with fewer than 3 such rates, every unsaturated \
         rate; the range fitted is given), \
         against the measured saturation, by --saturation: 'cpu' (the default), seed 002's \
         capacity, the rate at which the server's CPU ran out (each rate offered the \
         majority of its runs, the rates split where the fewest disagree: idle under \
         {KNEE_IDLE_PCT}% of the quota or the rate not sustained above, idle left below; the \
         probes first run again a rate without a majority and an edge of the bracket that \
         rests on one run, then bisect it; the rate is its geometric midpoint), or 'sustained', the highest rate the same open loop sustained \
         (served at least 97% of it with a p99 under 250 ms), which past the CPU's running \
         out the quota's batching of each throttled gap's arrivals lets reach up to 1.5x \
         higher. Both readings are given, each with the prediction's error against it; \
         beside them the old reading, what one \
         overload run served when offered 1.25x wrk's peak (the ladder's reference). Seed 002's reading over every rate (Table 4) \
         is given beside it: a straight idle line assumes a constant CPU cost per request, \
         and at a low rate every request wakes an idle server (the column 'CPU/req' gives the \
         cost at the lowest rate against wrk's saturation), which bends the line over every \
         rate. wrk's peak is a cheaper traffic (its one thread serves many responses per \
         wake-up) and is not what the rates' line extrapolates to. 'Idle ran out at' is the \
         rate at which the open loop's idle CPU fell below {KNEE_IDLE_PCT}%, interpolated. \
         The seed's assumption, checked: the mean CPU per request over the fitted rates \
         against what a request cost in the overload run; 1 where the assumption holds, above \
         1 the server got cheaper per request past the fitted range (several requests per \
         wake-up, a batch after each throttled period) and serves more than the line's \
         X-intercept. 'triage capacity' is the \
         tool run on the server's access log and CPU samples with --steps (one bucket per \
         step of the rate ladder, read off the log) and the same cut."
    ));
    let rows: Vec<Vec<String>> = s
        .fits
        .iter()
        .map(|f| {
            vec![
                f.server.clone(),
                f.cold_held.to_string(),
                f.rep.to_string(),
                format!("{:.0}", f.wrk_peak_rps),
                match (f.measured_rps, &f.not_bracketed) {
                    (Some(m), _) => format!("{m:.0} ({})", f.measured_by.name()),
                    (None, Some(why)) => format!("none ({}): {why}", f.measured_by.name()),
                    (None, None) => format!("none ({})", f.measured_by.name()),
                },
                format!(
                    "{} [{}, {}] ({} disagree): {}",
                    o(f.cpu_out_rps, 0),
                    o(f.cpu_out_bracket.0, 0),
                    o(f.cpu_out_bracket.1, 0),
                    f.cpu_out_disagreeing,
                    o(f.error_vs_cpu_out_pct, 1)
                ),
                format!(
                    "{}{}: {}",
                    o(f.sustained_rps, 0),
                    f.sustained_resolution_pct
                        .map_or(String::new(), |r| format!(" (+{r:.1}% failed)")),
                    o(f.error_vs_sustained_pct, 1)
                ),
                format!(
                    "{} ({:.0}% idle): {}",
                    o(f.overload_rps, 0),
                    f.measured_idle_pct,
                    o(f.error_vs_overload_pct, 1)
                ),
                format!(
                    "{}: {}",
                    f.prediction_range.describe(),
                    f.fitted_rps
                        .map_or("-".into(), |(a, b)| format!("{a:.0}-{b:.0}"))
                ),
                f.saturated_points.to_string(),
                o(f.predicted_rps, 0),
                o(f.error_pct, 1),
                o(f.prediction.idle.map(|x| x.r), 3),
                o(f.all_points_predicted_rps, 0),
                o(f.all_points_error_pct, 1),
                o(f.all.idle.map(|x| x.r), 3),
                o(f.knee_rps, 0),
                o(f.predicted_vs_knee_pct, 1),
                format!(
                    "{} / {:.1}",
                    o(f.cpu_per_req_lowest_rate_us, 1),
                    f.cpu_per_req_us
                ),
                format!(
                    "{} / {} ({})",
                    o(f.fitted_cpu_per_req_us, 1),
                    o(f.saturation_cpu_per_req_us, 1),
                    o(f.cost_ratio_fitted_vs_saturation, 2)
                ),
                o(f.tool_predicted_rps, 0),
                o(f.tool_r, 3),
                o(f.tool_vs_lab_pct, 1),
                f.tool_error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    r.table(
        &[
            "server",
            "cold held",
            "rep",
            "wrk peak",
            "measured saturation (by)",
            "CPU ran out at [bracket] (runs disagreeing): error %",
            "highest sustained (next failure above): error %",
            "overload run (old reading): error %",
            "rates fitted",
            "saturated left out",
            "predicted",
            "error %",
            "idle r",
            "every rate (Table 4)",
            "error %",
            "idle r",
            "idle ran out at",
            "predicted vs that %",
            "CPU/req us: lowest rate / wrk's saturation",
            "CPU/req us: the fitted rates / the measured saturation (ratio)",
            "triage capacity (log)",
            "its r",
            "tool vs lab %",
            "tool note",
        ],
        &rows,
    );
    r.p(
        "The saturation search, per row: the run at the highest rate sustained and the lowest \
         run above it that was not, with the criterion it failed (served under 97% of the rate \
         over its window, drain included; p99 over 250 ms), the server's idle share of its \
         quota and its throttled periods, and the client side's own CPU (loadgen's thread or \
         wrk, % of one CPU) and its CPU's busy share (every task on it). A failure with the \
         server's quota idle and the client's CPU busy is the client's.",
    );
    let rows: Vec<Vec<String>> = s
        .fits
        .iter()
        .map(|f| {
            vec![
                f.server.clone(),
                f.cold_held.to_string(),
                f.at_saturation
                    .as_ref()
                    .map_or("-".into(), super::summary::describe_run),
                f.next_failure
                    .as_ref()
                    .map_or("-".into(), super::summary::describe_run),
            ]
        })
        .collect();
    r.table(
        &[
            "server",
            "cold held",
            "sustained (the measured saturation)",
            "next failure above",
        ],
        &rows,
    );
    r.h2("CPU per request against no cold connection");
    r.p(
        "From the pairs: short wrk runs alternating (ABBA) between the server holding the cold \
         connections and its twin holding none, seconds apart in the same cgroup; the ratio is \
         the pairs' typical ratio (the Hodges-Lehmann estimate of their log ratios: one pair the \
         host slowed by 15-30% moves it little) with its seeded bootstrap ci95, and beside it \
         the mean of the pairs' ratios, which one slowed pair moves by 3-4%. 'Unpaired' divides wrk's \
         saturation runs at the two counts, measured minutes apart, as the lab did before.",
    );
    let rows: Vec<Vec<String>> = s
        .cpu_per_req
        .iter()
        .map(|c| {
            vec![
                c.server.clone(),
                c.cold.to_string(),
                c.cold_held.to_string(),
                format!("{:.0}", c.peak_rps),
                format!("{:.2}", c.cpu_per_req_us),
                format!(
                    "{} / {}",
                    o(c.paired_cpu_per_req_us, 2),
                    o(c.twin_cpu_per_req_us, 2)
                ),
                c.pairs.to_string(),
                o(c.ratio_vs_0, 3),
                c.ci95
                    .map_or("-".into(), |x| format!("[{:.3}, {:.3}]", x.low, x.high)),
                o(c.mean_pair_ratio, 3),
                o(c.unpaired_ratio_vs_0, 3),
            ]
        })
        .collect();
    r.table(
        &[
            "server",
            "cold",
            "held",
            "peak req/s",
            "CPU/req us (wrk's saturation)",
            "pairs: CPU/req us server / twin",
            "pairs",
            "x at 0",
            "ci95",
            "mean of the pairs' ratios",
            "unpaired x",
        ],
        &rows,
    );
    r.h2("Memory per idle connection");
    let rows: Vec<Vec<String>> = s
        .rss
        .iter()
        .map(|x| {
            vec![
                x.server.clone(),
                x.held.to_string(),
                x.added.to_string(),
                x.rss_before_kib.to_string(),
                x.rss_after_kib.to_string(),
                format!("{:.2}", x.kib_per_conn),
                format!("{:.2}", x.kib_per_conn_soon),
            ]
        })
        .collect();
    r.table(
        &[
            "server",
            "held",
            "added",
            "RSS before KiB",
            "RSS after KiB (3.5 s)",
            "KiB per conn",
            "KiB per conn at 0.3 s",
        ],
        &rows,
    );
    if !s.skipped.is_empty() || !s.notes.is_empty() {
        r.h2("Skipped and notes");
        for x in s.skipped.iter().chain(&s.notes) {
            r.p(x);
        }
    }
    r.h2("Every point");
    r.pre(&super::summary::raw_csv(&s.points));
    r.to_html()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_and_lines_render() {
        let svg = scatter_lines(
            "idle",
            "req/s",
            &[(
                "a".into(),
                vec![(10.0, 80.0), (20.0, 60.0)],
                Some((-2.0, 100.0)),
            )],
            false,
        );
        assert!(
            svg.contains("<circle") && svg.contains("<polyline"),
            "{svg}"
        );
        let sq = scatter_lines("k", "req/s", &[("a".into(), vec![(1.0, 5.0)], None)], true);
        assert!(sq.contains("<rect"));
    }
}
