//! `report.html` of a `triage lab reservations` run: conditions, goals, seed 000's Fig. 4 and 5
//! redrawn from our data beside the paper's shapes, and every point.

use super::summary::{Summary, PAPER};
use crate::report::{lines, Report, Series};

/// The HTML report.
pub fn report(s: &Summary) -> String {
    let mut r = Report::new(s.title);
    r.p(&format!(
        "Started {} (UTC), {:.0} s. Command (repeat it to reproduce; its only randomness is \
         the order of the points, seeded with {}):",
        s.started_utc, s.duration_s, s.params.seed
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
                    "server and CGI pinned to CPU {} in one cgroup ({}) with a CPU quota of {} \
                     (period {} ms); CPU shares are fractions of that capacity",
                    tb.server_cpu.map_or("any".into(), |c| c.to_string()),
                    tb.cgroup,
                    tb.quota
                        .map_or("none".into(), |q| format!("{:.0}% of a CPU", q * 100.0)),
                    tb.period_ms
                ),
            ],
            vec![
                "CGI".into(),
                format!(
                    "{}; {} of CPU per request measured",
                    p.cgi_script,
                    s.cgi_cpu_ms_per_request
                        .map_or("-".into(), |v| format!("{v:.1} ms"))
                ),
            ],
            vec![
                "load".into(),
                format!(
                    "{} closed-loop clients of the site of interest and 0..{} of the competing \
                     site (threads of the lab on CPU {}), one request in flight each; {:.0} s \
                     measured after {:.1} s of warm-up",
                    p.clients,
                    p.counts.iter().max().unwrap_or(&0),
                    tb.client_cpu.map_or("any".into(), |c| c.to_string()),
                    p.window_s,
                    p.warmup_s
                ),
            ],
            vec![
                "reservations".into(),
                "cgroup CPU weights of the sites' CGI containers: 50 vs 49 (triage-res50), 99 vs \
                 1 (triage-res99); triage-shared runs both sites' scripts in one container; \
                 Apache httpd (prefork + mod_cgi, two virtual hosts) time-shares"
                    .into(),
            ],
            vec!["network".into(), format!("{} ({})", tb.network, tb.shaping)],
            vec![
                "repetitions".into(),
                format!(
                    "{} (medians shown); order: {} (seed {})",
                    p.reps, p.order, p.seed
                ),
            ],
        ],
    );
    for n in &s.notes {
        r.p(&format!("Note: {n}"));
    }
    for k in &s.skipped {
        r.p(&format!("Skipped: {k}"));
    }
    if p.twin {
        r.p(&format!(
            "A reference twin ran beside every variant: a second triage serving the site of \
             interest alone to {} clients, in its own cgroup on the same CPU with half the \
             quota, loaded in the same windows. The kept figures read the site's throughput \
             over the twin's (basis: {}; raw requests per second: reserved_kept_pct {}), \
             which takes out the machine's speed drift between a point with competitors and \
             the point alone.",
            p.clients,
            s.kept_basis,
            s.reserved_kept_pct_raw
                .map_or("-".into(), |v| format!("{v:.1}%"))
        ));
    }
    r.h2("Goals");
    for g in &s.goals {
        r.verdict(g.met, &format!("{}: {}", g.goal, g.detail));
    }
    crate::cgi::figure::report_table(&mut r, &s.figures);
    let xs: Vec<f64> = s
        .curves
        .first()
        .map(|c| c.competitors.iter().map(|&n| n as f64).collect())
        .unwrap_or_default();
    r.h2("Throughput of the site of interest (seed 000 Fig. 4)");
    // The paper's shapes first (drawn under the measured curves), scaled to this run's
    // throughput alone (triage-res50 with no competitor).
    let mut series: Vec<Series> = Vec::new();
    if let Some(c) = s.curves.iter().find(|c| c.variant == "triage-res50") {
        if let Some(i0) = c.competitors.iter().position(|&n| n == 0) {
            let alone = c.a_rps[i0];
            let clients = p.clients as f64;
            series.push((
                "paper shape: 50% reservation (half, then constant)".into(),
                xs.iter()
                    .map(|&x| if x == 0.0 { alone } else { alone / 2.0 })
                    .collect(),
            ));
            series.push((
                format!(
                    "paper shape: time-sharing ({}/({}+n) of it)",
                    p.clients, p.clients
                ),
                xs.iter()
                    .map(|&x| alone * clients / (clients + x))
                    .collect(),
            ));
        }
    }
    series.extend(
        s.curves
            .iter()
            .map(|c| (c.variant.clone(), c.a_rps.clone())),
    );
    r.figure(
        &lines(
            "Site of interest: throughput vs competing clients",
            "clients of the competing site",
            "requests/s",
            &xs,
            &series,
        ),
        &format!(
            "Medians over repetitions. Seed 000 gives no data points, only the shapes: with a \
             50% reservation the site {}; with 99% it is {}; in one shared reservation it is {}. \
             The two dashed shapes are those statements applied to this run's throughput alone.",
            PAPER.reserve_50, PAPER.reserve_99, PAPER.same_reservation
        ),
    );
    r.h2("Response time of the site of interest (seed 000 Fig. 5)");
    let series: Vec<Series> = s
        .curves
        .iter()
        .map(|c| (c.variant.clone(), c.a_mean_ms.clone()))
        .collect();
    r.figure(
        &lines(
            "Site of interest: mean response time vs competing clients",
            "clients of the competing site",
            "ms",
            &xs,
            &series,
        ),
        "Mean time from sending a request to the end of its response, requests completed \
         inside the window.",
    );
    r.h2("Throughput of the competing site");
    let series: Vec<Series> = s
        .curves
        .iter()
        .map(|c| (c.variant.clone(), c.b_rps.clone()))
        .collect();
    r.figure(
        &lines(
            "Competing site: throughput vs its clients",
            "clients of the competing site",
            "requests/s",
            &xs,
            &series,
        ),
        "Work conservation: what the site of interest does not use goes to the competitor.",
    );
    r.h2("Per point");
    let f = |v: f64| {
        if v.is_finite() {
            format!("{v:.1}")
        } else {
            "-".into()
        }
    };
    let rows: Vec<Vec<String>> = s
        .points
        .iter()
        .map(|x| {
            vec![
                x.variant.clone(),
                x.rep.to_string(),
                x.seq.to_string(),
                x.competitors.to_string(),
                f(x.a.rps),
                f(x.a.mean_ms),
                f(x.a.p90_ms),
                f(x.b.rps),
                x.a_cpu_pct.map_or("-".into(), f),
                x.b_cpu_pct.map_or("-".into(), f),
                x.server_cpu_pct.map_or("-".into(), f),
                f(x.side_cpu_pct),
                (x.a.failed + x.b.failed).to_string(),
            ]
        })
        .collect();
    r.table(
        &[
            "variant",
            "rep",
            "order",
            "competitors",
            "interest req/s",
            "interest mean ms",
            "interest p90 ms",
            "competitor req/s",
            "interest CPU %",
            "competitor CPU %",
            "server process CPU %",
            "server side CPU %",
            "failed",
        ],
        &rows,
    );
    r.to_html()
}
