//! `report.html` of a `triage lab cluster` run: conditions, goals, every variant at the
//! headline, throughput against the back-end count, the agreement with the simulator, every
//! point.

use super::summary::Summary;
use crate::report::{grouped_bars, lines, Report, Series};

fn f(x: f64, d: usize) -> String {
    if x.is_finite() {
        format!("{x:.d$}")
    } else {
        "-".into()
    }
}

/// The HTML report.
pub fn report(s: &Summary) -> String {
    let mut r = Report::new(s.title);
    r.p(&format!(
        "Started {} (UTC), {:.0} s. Command (the trace is seeded; the timing is this machine's):",
        s.started_utc, s.duration_s
    ));
    r.pre(&s.command);
    r.h2("Conditions");
    let p = &s.params;
    let w = &s.workload;
    let tb = &s.testbed;
    r.table(
        &["what", "value"],
        &[
            vec![
                "workload".into(),
                format!(
                    "{} ({}): {} files, {:.1} MiB, {} requests, mean request {:.1} KB; {} log \
                     lines left out",
                    w.kind,
                    w.detail,
                    w.files,
                    w.working_set as f64 / (1 << 20) as f64,
                    w.requests,
                    w.mean_request_bytes / 1000.0,
                    w.skipped_lines
                ),
            ],
            vec![
                "back ends".into(),
                format!(
                    "triage serve, LRU content cache of {:.2} MiB each (the working set is {:.1}x \
                     one cache; `fits` points: a cache holding everything), the LARD paper's disk \
                     (28 ms + 410 us per 4 KB + 14 ms per further 44 KB) at scale {} on a miss",
                    p.cache_exceeds as f64 / (1 << 20) as f64,
                    w.working_set as f64 / p.cache_exceeds as f64,
                    p.disk_scale
                ),
            ],
            vec![
                "load".into(),
                format!(
                    "wrk, one thread on CPU {}, replaying the trace in order, closed loop with \
                     LARD's admission limit of connections unless --conns; {} requests per \
                     connection on average (`close` points: 1); {:.0} s warm-up then a {:.0} s \
                     window per point; {} repetitions of the headline",
                    tb.client_cpu.map_or("any".into(), |c| c.to_string()),
                    p.per_conn,
                    p.warmup_s,
                    p.window_s,
                    p.reps
                ),
            ],
            vec![
                "server side".into(),
                format!(
                    "back ends and front end (triage front with one thread, HAProxy with \
                     nbthread 1, nginx as one process) on CPU {}; network {} ({}); triage: {}",
                    tb.server_cpu.map_or("any".into(), |c| c.to_string()),
                    tb.network,
                    tb.shaping,
                    s.build.line()
                ),
            ],
        ],
    );
    r.h2("Goals");
    for g in &s.goals {
        r.verdict(g.met, &format!("{}: {}", g.goal, g.detail));
    }
    for n in &s.notes {
        r.p(&format!("Note: {n}"));
    }
    for n in &s.skipped {
        r.p(&format!("Skipped: {n}"));
    }
    r.h2("Every variant, largest back-end count, working set above one cache");
    let rows: Vec<Vec<String>> = s
        .variants
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                v.reps.to_string(),
                f(v.rps, 0),
                v.rps_ci95
                    .as_ref()
                    .map_or("-".into(), |c| format!("[{:.0}, {:.0}]", c.low, c.high)),
                f(v.hit_ratio * 100.0, 1),
                f(v.balance, 2),
                f(v.latency_p50_ms, 1),
                f(v.latency_p99_ms, 1),
                f(v.front_cpu_us_per_req, 1),
                v.failed.to_string(),
            ]
        })
        .collect();
    r.table(
        &[
            "variant",
            "reps",
            "req/s",
            "ci95",
            "hit %",
            "max/mean",
            "p50 ms",
            "p99 ms",
            "front CPU us/req",
            "failed",
        ],
        &rows,
    );
    let names: Vec<String> = s.variants.iter().map(|v| v.name.clone()).collect();
    let series: Vec<Series> = vec![("req/s".into(), s.variants.iter().map(|v| v.rps).collect())];
    r.figure(
        &grouped_bars(
            "Throughput at the largest back-end count",
            "req/s",
            &names,
            &series,
        ),
        "Mean throughput of each variant (triage front's policies, HAProxy, nginx).",
    );
    let xs: Vec<f64> = p.nodes.iter().map(|&n| n as f64).collect();
    let curve = |v: &str| -> Series {
        (
            v.into(),
            p.nodes
                .iter()
                .map(|&n| {
                    s.scale
                        .iter()
                        .find(|x| x.0 == v && x.1 == n)
                        .map_or(f64::NAN, |x| x.2)
                })
                .collect(),
        )
    };
    r.figure(
        &lines(
            "Throughput against back ends",
            "back ends",
            "req/s",
            &xs,
            &[curve("wrr"), curve("lard")],
        ),
        "WRR and LARD, working set above one back end's cache (seed 004 Fig. 13's form).",
    );
    r.h2("Agreement with the simulator (triage sim lard's model on the same requests)");
    let c = &s.sim_check;
    r.verdict(
        c.ok,
        &format!(
            "tolerance: hit ratio within {:.2}, balance (max/mean) within {:.2}",
            c.hit_tolerance, c.balance_tolerance
        ),
    );
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .map(|x| {
            vec![
                x.variant.clone(),
                x.role.name().into(),
                x.nodes.to_string(),
                (x.rep + 1).to_string(),
                f(x.hit_ratio, 3),
                f(x.sim_hit_ratio, 3),
                f(x.balance, 2),
                f(x.sim_balance, 2),
                if x.ok { "ok" } else { "FAILED" }.into(),
            ]
        })
        .collect();
    r.table(
        &[
            "variant",
            "role",
            "nodes",
            "rep",
            "hit",
            "sim hit",
            "balance",
            "sim balance",
            "",
        ],
        &rows,
    );
    r.h2("Every point");
    let rows: Vec<Vec<String>> = s
        .points
        .iter()
        .map(|x| {
            vec![
                x.variant.clone(),
                x.role.name().into(),
                x.nodes.to_string(),
                x.per_conn.to_string(),
                x.conns.to_string(),
                (x.rep + 1).to_string(),
                f(x.rps, 0),
                f(x.hit_ratio * 100.0, 1),
                f(x.balance, 2),
                f(x.latency_p99_ms, 1),
                f(x.front_cpu_us_per_req, 1),
                x.failed.to_string(),
            ]
        })
        .collect();
    r.table(
        &[
            "variant",
            "role",
            "nodes",
            "req/conn",
            "conns",
            "rep",
            "req/s",
            "hit %",
            "max/mean",
            "p99 ms",
            "CPU us/req",
            "failed",
        ],
        &rows,
    );
    r.to_html()
}
