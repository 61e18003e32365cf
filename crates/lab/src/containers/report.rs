//! `report.html` of a `triage lab containers` run: conditions, goals, seed 003's Fig. 12 and 13
//! redrawn from our data beside the paper's statements, and every point.

use super::summary::{Summary, PAPER};
use crate::report::{lines, Report, Series};

/// The HTML report.
pub fn report(s: &Summary) -> String {
    let mut r = Report::new(s.title);
    r.p(&format!(
        "Started {} (UTC), {:.0} s. Command (repeat it to reproduce; the lab has no randomness):",
        s.started_utc, s.duration_s
    ));
    r.pre(&s.command);
    r.h2("Conditions");
    let tb = &s.testbed;
    let p = &s.params;
    r.table(
        &["what", "value"],
        &[
            vec![
                "server side".into(),
                format!(
                    "server under test and its CGI pinned to CPU {} in one cgroup ({}) with a \
                     CPU quota of {} (period {} ms) emulating a slower CPU; caps and CPU shares \
                     below are fractions of that capacity",
                    tb.server_cpu.map_or("any".into(), |c| c.to_string()),
                    tb.cgroup,
                    tb.quota.map_or("none (the whole CPU)".into(), |q| format!(
                        "{:.0}% of a CPU",
                        q * 100.0
                    )),
                    tb.period_ms
                ),
            ],
            vec![
                "load".into(),
                format!(
                    "wrk on CPU {}: {} connections fetching a {} B static document during {:.1} s \
                     per point; k closed-loop clients (threads of the lab, same CPU) keeping k \
                     CGI requests in flight (each burns {} s of CPU, {}), started {:.1} s before",
                    tb.client_cpu.map_or("any".into(), |c| c.to_string()),
                    p.static_conns,
                    p.static_doc_bytes,
                    p.window_s,
                    p.cgi_cpu_s,
                    p.cgi_script,
                    p.warmup_s
                ),
            ],
            vec!["network".into(), format!("{} ({})", tb.network, tb.shaping)],
            vec!["repetitions".into(), format!("{} (medians shown)", p.reps)],
            vec![
                "CPU share".into(),
                "from the server-side cgroup's usage minus the server processes' own CPU time \
                 (the same for triage and Apache); triage also from its CGI container's usage"
                    .into(),
            ],
        ],
    );
    for n in &s.notes {
        r.p(&format!("Note: {n}"));
    }
    for k in &s.skipped {
        r.p(&format!("Skipped: {k}"));
    }
    r.h2("Goals");
    for g in &s.goals {
        r.verdict(g.met, &format!("{}: {}", g.goal, g.detail));
    }
    crate::cgi::figure::report_table(&mut r, &s.figures);
    let xs: Vec<f64> = s
        .curves
        .first()
        .map(|c| c.cgi.iter().map(|&k| k as f64).collect())
        .unwrap_or_default();
    let paper_point = |at: usize, v: f64| -> Vec<f64> {
        xs.iter()
            .map(|&x| if x as usize == at { v } else { f64::NAN })
            .collect()
    };
    r.h2("Static throughput (seed 003 Fig. 12)");
    let mut series: Vec<Series> = s
        .curves
        .iter()
        .map(|c| (c.variant.clone(), c.static_rps.clone()))
        .collect();
    r.figure(
        &lines(
            "Static 1 KB throughput vs concurrent CGI requests",
            "concurrent CGI requests",
            "requests/s",
            &xs,
            &series,
        ),
        "Medians over repetitions.",
    );
    r.figure(
        &lines(
            "Static throughput, drift between repetitions removed",
            "concurrent CGI requests",
            "requests/s",
            &xs,
            &s.curves
                .iter()
                .map(|c| (c.variant.clone(), c.static_rps_blocked.clone()))
                .collect::<Vec<Series>>(),
        ),
        &format!(
            "Each repetition of a variant (all CGI counts back to back with one server, about \
             20 s) is a block: its points divided by the block's mean, the median ratio over \
             the blocks, times the median block mean. On a shared machine the server's requests \
             per CPU-millisecond drift with other tenants' work on the same CPUs (see the \
             per-point columns). Under the 30% cap, raw req/s: spread {} over the medians.",
            s.static_spread_pct_cap30_raw
                .map_or("-".into(), |v| format!("{v:.1}%")),
        ),
    );
    let twin: Vec<Series> = s
        .curves
        .iter()
        .filter(|c| !c.static_vs_twin.is_empty())
        .map(|c| (c.variant.clone(), c.static_vs_twin.clone()))
        .collect();
    if !twin.is_empty() {
        r.figure(
            &lines(
                "Static throughput over the reference twin's in the same windows",
                "concurrent CGI requests",
                "ratio",
                &xs,
                &twin,
            ),
            &format!(
                "A capped variant runs beside a twin: a second triage with the same \
                 configuration in its own cgroup (same quota, same CPU), holding {} CGI \
                 requests, loaded in the same windows. This machine's speed moves by 10-20% \
                 between windows and both servers with it, so the ratio is the server's \
                 throughput with the machine taken out. Medians over repetitions.",
                s.params.twin_cgi.map_or("-".into(), |k| k.to_string())
            ),
        );
    }
    r.p(&format!(
        "The spread goal reads {}. Under the 30% cap: spread {} (blocks: {}), trend from 1 to 5 \
         CGI within repetitions {}, one point's noise {}.",
        match s.spread_basis {
            "vs_twin" => "static throughput over the twin's",
            _ => "the raw static throughput",
        },
        s.static_spread_pct_cap30
            .map_or("-".into(), |v| format!("{v:.1}%")),
        s.static_spread_pct_cap30_blocked
            .map_or("-".into(), |v| format!("{v:.1}%")),
        match (s.static_trend_pct_cap30, s.static_trend_se_pct_cap30) {
            (Some(t), Some(e)) => format!("{t:+.1}% +- {e:.1}% (one standard error)"),
            _ => "-".into(),
        },
        s.static_point_noise_pct_cap30
            .map_or("-".into(), |v| format!("{v:.1}%"))
    ));
    // The paper's marks first, so that the measured curves are drawn over them.
    series = vec![(
        "paper: unmodified system (44% at 4 CGI)".into(),
        paper_point(4, PAPER.unmodified_cgi4_static_rel_pct),
    )];
    series.extend(
        s.curves
            .iter()
            .map(|c| (c.variant.clone(), c.static_rel_pct.clone())),
    );
    r.figure(
        &lines(
            "Static throughput relative to no CGI",
            "concurrent CGI requests",
            "% of the same server without CGI",
            &xs,
            &series,
        ),
        "The paper gives one number for its unmodified system: with 4 concurrent CGI requests \
         the server got 40% of the CPU and static throughput dropped to 44% of its maximum; \
         with the CGI-parent container capped at 30% or 10%, static throughput stayed almost \
         constant from 1 to 5 CGI requests.",
    );
    r.h2("CPU share of the CGI requests (seed 003 Fig. 13)");
    let mut series: Vec<Series> = Vec::new();
    for cap in PAPER.caps_pct {
        series.push((
            format!("paper: cap {cap:.0}% (enforced almost exactly)"),
            xs.iter()
                .map(|&x| if x >= 1.0 { cap } else { f64::NAN })
                .collect(),
        ));
    }
    series.push((
        "paper: unmodified (server 40% at 4 CGI)".into(),
        paper_point(4, 100.0 - PAPER.unmodified_cgi4_server_cpu_pct),
    ));
    series.extend(
        s.curves
            .iter()
            .map(|c| (c.variant.clone(), c.cgi_share_pct.clone())),
    );
    r.figure(
        &lines(
            "CGI CPU share vs concurrent CGI requests",
            "concurrent CGI requests",
            "% of the server side's CPU (its quota)",
            &xs,
            &series,
        ),
        "Measured CGI share (cgroup usage minus the server processes). The paper's caps are \
         drawn where they apply (1 CGI or more).",
    );
    r.h2("Per point");
    let rows: Vec<Vec<String>> = s
        .points
        .iter()
        .map(|x| {
            vec![
                x.variant.clone(),
                x.rep.to_string(),
                x.cgi.to_string(),
                format!("{:.0}", x.static_rps),
                format!("{:.2}", x.static_latency_mean_ms),
                format!("{:.1}", x.server_share_pct),
                format!("{:.1}", x.cgi_share_pct),
                x.cgi_share_metrics_pct
                    .map_or("-".into(), |v| format!("{v:.1}")),
                x.strays_killed.to_string(),
                format!("{:.1}", x.static_per_server_cpu_ms),
                format!("{:.0}", x.cpu0_other_pct),
                format!("{:.0}", x.cpu1_busy_pct),
                format!("{:.0}", x.steal0_pct),
                format!("{:.3}", x.server_preempt_per_req),
                format!("{:.3}", x.server_sleeps_per_req),
            ]
        })
        .collect();
    r.table(
        &[
            "variant",
            "rep",
            "CGI",
            "static req/s",
            "static mean ms",
            "server CPU %",
            "CGI CPU %",
            "CGI container %",
            "strays killed",
            "req per server CPU ms",
            "server CPU: others %",
            "client CPU busy %",
            "steal %",
            "server preemptions per request",
            "server sleeps per request",
        ],
        &rows,
    );
    r.to_html()
}
