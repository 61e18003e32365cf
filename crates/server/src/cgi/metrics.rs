//! The Prometheus lines of every site's CGI: outcomes, waiting requests, container CPU time.

use std::sync::atomic::Ordering::Relaxed;

use super::handler::Cgi;

/// Prometheus lines for the CGI counters and container CPU time of every site that has CGI
/// (site name, its handler).
pub fn render_metrics(with: &[(&str, &Cgi)]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if with.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "# HELP triage_cgi_total CGI requests by outcome.\n# TYPE triage_cgi_total counter"
    );
    for (name, c) in with {
        let s = c.stats();
        for (outcome, v) in [
            ("started", &s.started),
            ("completed", &s.completed),
            ("rejected", &s.rejected),
            ("spawn_failed", &s.spawn_failed),
            ("malformed", &s.malformed),
            ("timeout", &s.timeouts),
            ("output_limited", &s.output_limited),
            ("client_gone", &s.client_gone),
            ("in_cgroup", &s.in_cgroup),
            ("queued", &s.queued),
            ("queue_timeout", &s.queue_timeouts),
            ("raised", &s.raised),
            ("lowered", &s.lowered),
            ("lever_error", &s.lever_errors),
            ("lowered_budget", &s.lowered_budget),
            ("tail_head", &s.tail_heads),
            ("predicted_long", &s.predicted_long),
        ] {
            let _ = writeln!(
                out,
                "triage_cgi_total{{site=\"{name}\",outcome=\"{outcome}\"}} {}",
                v.load(Relaxed)
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP triage_cgi_waiting Requests waiting for a place under cgi.max_running.\n\
         # TYPE triage_cgi_waiting gauge"
    );
    for (name, c) in with {
        let _ = writeln!(
            out,
            "triage_cgi_waiting{{site=\"{name}\"}} {}",
            c.stats().waiting.load(Relaxed)
        );
    }
    let _ = writeln!(
        out,
        "# HELP triage_cgi_time_seconds_total Where completed CGI requests' time went, by the \
         class the script served and part (gate, start, run, runq, blocked, relay, total).\n\
         # TYPE triage_cgi_time_seconds_total counter"
    );
    for (name, c) in with {
        super::timing::render(&mut out, name, &c.stats().times);
    }
    let _ = writeln!(
        out,
        "# HELP triage_cgi_cpu_seconds_total CPU time of the site's CGI container (running \
         scripts included).\n# TYPE triage_cgi_cpu_seconds_total counter"
    );
    for (name, c) in with {
        if let Some(Ok(d)) = c.container().map(|cg| cg.cpu_usage()) {
            let _ = writeln!(
                out,
                "triage_cgi_cpu_seconds_total{{site=\"{name}\"}} {:.6}",
                d.as_secs_f64()
            );
        }
    }
    out
}
