//! What a `triage pos attach` daemon did during one run ([`DaemonStats`]), read from its
//! `/metrics` just before the lab stops it: its own CPU, POS's marks and demotions, the raises
//! it applied and the wake-up-to-lever latency (docs/kpos.md names every metric).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::sampler::parse_prometheus;

/// One daemon's counters over a run (or their mean over runs, [`DaemonStats::mean`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DaemonStats {
    /// The logger it used (`bpf`, `proc-poll`), from the metrics' header line.
    pub logger: String,
    /// Its own CPU (s): the issue bounds it at 2% of one CPU.
    pub cpu_s: f64,
    /// Its own CPU as a share of one CPU over its life.
    pub cpu_share: f64,
    /// POS's characteristic 1 marks.
    pub marks: f64,
    /// POS's characteristic 2 demotions.
    pub demotions: f64,
    /// Tasks raised by the lever.
    pub raises: f64,
    /// Tasks restored by the lever.
    pub lowers: f64,
    /// Wake-ups of tasks that were raised before they woke.
    pub raised_before_wake: f64,
    /// Raised tasks lowered because their marked episode ran past the CPU budget.
    pub budget_lowers: f64,
    /// The episode's CPU budget in force at the end (ms; 0 when off or not learnt).
    pub budget_ms: f64,
    /// Times a task was raised as the tail's head.
    pub tail_head_raises: f64,
    /// Marked episodes found to be companions (not held raised as text).
    pub companions: f64,
    /// Transitions received from the kernel.
    pub events: f64,
    /// Transitions the kernel dropped (ring buffer full).
    pub dropped: f64,
    /// Lever calls that failed.
    pub lever_errors: f64,
    /// Wake-up-to-lever latency, 50th percentile (us; the upper bound of its bucket; 0 when
    /// raised before the wake-up); null without a raised wake-up.
    pub wake_to_lever_p50_us: Option<f64>,
    /// Wake-up-to-lever latency, 99th percentile (us, as the p50).
    pub wake_to_lever_p99_us: Option<f64>,
    /// Time one lever call took (a raise, a restore, a change of level: `setpriority`, or
    /// the weight lever's cgroup write), 50th percentile (us, the upper bound of its bucket);
    /// null without a call or from a daemon that does not report it.
    pub lever_call_p50_us: Option<f64>,
    /// Time one lever call took, 99th percentile (us, as the p50).
    pub lever_call_p99_us: Option<f64>,
}

/// The upper bound (us) of the first bucket of histogram `name` holding the `q` quantile.
fn quantile_us(m: &BTreeMap<String, f64>, name: &str, q: f64) -> Option<f64> {
    let count = *m.get(&format!("{name}_count"))?;
    if count <= 0.0 {
        return None;
    }
    let prefix = format!("{name}_bucket{{le=\"");
    let mut buckets: Vec<(f64, f64)> = m
        .iter()
        .filter_map(|(k, &c)| {
            let le = k.strip_prefix(&prefix)?.strip_suffix("\"}")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse::<f64>().ok()?
            };
            Some((le, c))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
        .iter()
        .find(|(_, c)| *c >= q * count)
        .map(|(le, _)| le * 1e6)
}

impl DaemonStats {
    /// Read the daemon's `/metrics` text; `None` if it is not the daemon's.
    pub fn from_metrics(text: &str) -> Option<DaemonStats> {
        let m = parse_prometheus(text);
        let g = |k: &str| m.get(&format!("triage_attach_{k}")).copied();
        let logger = text
            .lines()
            .find_map(|l| l.strip_prefix("# triage pos attach (logger "))
            .and_then(|r| r.split(',').next())
            .unwrap_or("")
            .to_owned();
        let h = "triage_attach_wake_to_lever_seconds";
        Some(DaemonStats {
            logger,
            cpu_s: g("cpu_seconds_total")?,
            cpu_share: g("cpu_share").unwrap_or(0.0),
            marks: g("marks_total").unwrap_or(0.0),
            demotions: g("demotions_total").unwrap_or(0.0),
            raises: g("raises_total").unwrap_or(0.0),
            lowers: g("lowers_total").unwrap_or(0.0),
            raised_before_wake: g("raised_before_wake_total").unwrap_or(0.0),
            budget_lowers: g("budget_lowers_total").unwrap_or(0.0),
            budget_ms: g("budget_seconds").unwrap_or(0.0) * 1e3,
            tail_head_raises: g("tail_head_raises_total").unwrap_or(0.0),
            companions: g("companions_total").unwrap_or(0.0),
            events: g("events_total").unwrap_or(0.0),
            dropped: g("events_dropped_total").unwrap_or(0.0),
            lever_errors: g("lever_errors_total").unwrap_or(0.0),
            wake_to_lever_p50_us: quantile_us(&m, h, 0.5),
            wake_to_lever_p99_us: quantile_us(&m, h, 0.99),
            lever_call_p50_us: quantile_us(&m, "triage_attach_lever_call_seconds", 0.5),
            lever_call_p99_us: quantile_us(&m, "triage_attach_lever_call_seconds", 0.99),
        })
    }

    /// The mean of the counters over runs; the latency percentiles are the worst run's.
    pub fn mean(runs: &[&DaemonStats]) -> Option<DaemonStats> {
        let n = runs.len() as f64;
        let first = runs.first()?;
        let m = |f: fn(&DaemonStats) -> f64| runs.iter().map(|r| f(r)).sum::<f64>() / n;
        let worst =
            |f: fn(&DaemonStats) -> Option<f64>| runs.iter().filter_map(|r| f(r)).reduce(f64::max);
        Some(DaemonStats {
            logger: first.logger.clone(),
            cpu_s: m(|r| r.cpu_s),
            cpu_share: m(|r| r.cpu_share),
            marks: m(|r| r.marks),
            demotions: m(|r| r.demotions),
            raises: m(|r| r.raises),
            lowers: m(|r| r.lowers),
            raised_before_wake: m(|r| r.raised_before_wake),
            budget_lowers: m(|r| r.budget_lowers),
            budget_ms: m(|r| r.budget_ms),
            tail_head_raises: m(|r| r.tail_head_raises),
            companions: m(|r| r.companions),
            events: m(|r| r.events),
            dropped: m(|r| r.dropped),
            lever_errors: m(|r| r.lever_errors),
            wake_to_lever_p50_us: worst(|r| r.wake_to_lever_p50_us),
            wake_to_lever_p99_us: worst(|r| r.wake_to_lever_p99_us),
            lever_call_p50_us: worst(|r| r.lever_call_p50_us),
            lever_call_p99_us: worst(|r| r.lever_call_p99_us),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# triage pos attach (logger bpf, lever nice)\n\
        triage_attach_marks_total 12\ntriage_attach_demotions_total 3\n\
        triage_attach_raises_total 10\ntriage_attach_cpu_seconds_total 0.05\n\
        triage_attach_cpu_share 0.005\n\
        triage_attach_budget_seconds 0.0004\ntriage_attach_budget_lowers_total 7\n\
        triage_attach_wake_to_lever_seconds_bucket{le=\"0\"} 80\n\
        triage_attach_wake_to_lever_seconds_bucket{le=\"0.000064\"} 95\n\
        triage_attach_wake_to_lever_seconds_bucket{le=\"0.000128\"} 100\n\
        triage_attach_wake_to_lever_seconds_bucket{le=\"+Inf\"} 100\n\
        triage_attach_wake_to_lever_seconds_sum 0.004\n\
        triage_attach_wake_to_lever_seconds_count 100\n\
        triage_attach_lever_call_seconds_bucket{le=\"0.000002\"} 0\n\
        triage_attach_lever_call_seconds_bucket{le=\"0.000004\"} 60\n\
        triage_attach_lever_call_seconds_bucket{le=\"0.000256\"} 100\n\
        triage_attach_lever_call_seconds_bucket{le=\"+Inf\"} 100\n\
        triage_attach_lever_call_seconds_count 100\n";

    #[test]
    fn counters_and_latency_percentiles_from_the_daemons_metrics() {
        let s = DaemonStats::from_metrics(TEXT).unwrap();
        assert_eq!(s.logger, "bpf");
        assert_eq!((s.marks, s.demotions, s.raises), (12.0, 3.0, 10.0));
        assert_eq!(s.budget_lowers, 7.0);
        assert!((s.budget_ms - 0.4).abs() < 1e-9);
        assert_eq!(s.wake_to_lever_p50_us, Some(0.0));
        assert!((s.wake_to_lever_p99_us.unwrap() - 128.0).abs() < 1e-6);
        assert!((s.lever_call_p50_us.unwrap() - 4.0).abs() < 1e-6);
        assert!((s.lever_call_p99_us.unwrap() - 256.0).abs() < 1e-6);
        assert!(DaemonStats::from_metrics("triage_pl_busy_sum 1\n").is_none());
        let mut b = s.clone();
        b.marks = 20.0;
        b.wake_to_lever_p99_us = Some(64.0);
        let m = DaemonStats::mean(&[&s, &b]).unwrap();
        assert_eq!(m.marks, 16.0);
        assert!(
            (m.wake_to_lever_p99_us.unwrap() - 128.0).abs() < 1e-6,
            "the worst run's"
        );
        assert!(DaemonStats::mean(&[]).is_none());
    }
}
