//! What `triage bench static` measures and reports: one wrk run ([`Sample`]), the cost of idle
//! connections ([`IdleResult`]), and `summary.json` ([`StaticSummary`]) with the medians and
//! ratios; the table on stdout.

use std::path::Path;

use serde::Serialize;

use super::opts::StaticOpts;
use crate::util::{median, median_opt};

/// What one point measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaticPoint {
    /// One wrk run against target `target` (an index into the plan's targets) in round `round`.
    Round {
        /// The round (0-based).
        round: usize,
        /// The target.
        target: usize,
        /// Server cores (N workers/slots) of the run (1 without `--cores`).
        cores: usize,
    },
    /// CPU per request with no idle connection and with `--idle` of them, and memory per idle
    /// connection, of target `target`.
    Idle {
        /// The target.
        target: usize,
    },
}

impl StaticPoint {
    /// The server cores of the point (1 for an idle-connection measurement).
    pub fn cores(&self) -> usize {
        match *self {
            StaticPoint::Round { cores, .. } => cores,
            StaticPoint::Idle { .. } => 1,
        }
    }
}

/// One wrk measurement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Requests per second.
    pub rps: f64,
    /// 99th percentile latency (ms).
    pub p99_ms: f64,
    /// Requests completed.
    pub requests: u64,
    /// CPU seconds the server used meanwhile.
    pub cpu_s: f64,
}

impl Sample {
    /// CPU seconds per request.
    pub fn cpu_per_req_s(&self) -> f64 {
        self.cpu_s / self.requests.max(1) as f64
    }
}

/// The cost of idle connections to one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleResult {
    /// The target.
    pub target: String,
    /// CPU per request with no idle connection (µs).
    pub cpu_per_req_us_0_idle: f64,
    /// CPU per request with `--idle` connections held open (µs).
    pub cpu_per_req_us_n_idle: f64,
    /// The second over the first.
    pub cpu_per_req_ratio: f64,
    /// Resident memory before opening the idle connections (KiB).
    pub rss_kib_before: u64,
    /// Resident memory with them open, 300 ms after the last was served (KiB): what the
    /// burst of opening them still holds.
    pub rss_kib_at_open: u64,
    /// Resident memory with them open and at rest, 2.5 s after the last was served (KiB): a
    /// server may give back the memory of the burst by then (triage trims its heap when a
    /// crowd of connections goes idle).
    pub rss_kib_after: u64,
    /// The difference per idle connection at rest (KiB): `rss_kib_after` over
    /// `rss_kib_before`.
    pub rss_kib_per_idle_conn: f64,
    /// Requests per second with no idle connection.
    pub rps_0_idle: f64,
    /// Requests per second with them.
    pub rps_n_idle: f64,
}

/// What one point measured.
#[derive(Debug, Clone)]
pub enum StaticMeasured {
    /// A round's wrk run.
    Round(Sample),
    /// An idle-connection measurement.
    Idle(IdleResult),
}

/// One round of one target in `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct TargetSummary {
    /// The target.
    pub target: String,
    /// Median requests per second over the rounds.
    pub rps_median: f64,
    /// Median p99 latency (ms).
    pub p99_ms_median: f64,
    /// Median CPU per request (µs).
    pub cpu_per_req_us_median: f64,
    /// Every round.
    pub rounds: Vec<Sample>,
}

/// Ratios measured side by side: each the median over the rounds of the ratio within a round
/// (see [`round_ratios`]).
#[derive(Debug, Clone, Serialize)]
pub struct Ratios {
    /// triage-fifo's req/s over nginx's.
    pub fifo_vs_nginx_rps: Option<f64>,
    /// triage-pos's req/s over nginx's.
    pub pos_vs_nginx_rps: Option<f64>,
    /// triage-fifo's p99 over nginx's.
    pub fifo_vs_nginx_p99: Option<f64>,
    /// triage-pos's p99 over nginx's.
    pub pos_vs_nginx_p99: Option<f64>,
    /// 1 - triage-fifo's req/s over triage-gate-off's: what the gate costs.
    pub gate_cost: Option<f64>,
}

/// The figures of one core count (`--cores`; without it, the one entry of 1 core). Each ratio
/// is the median over the rounds of the ratio within a round ([`round_ratios`]).
#[derive(Debug, Clone, Serialize)]
pub struct CoresSummary {
    /// N: server CPUs, nginx workers, triage slots.
    pub cores: usize,
    /// triage-fifo's req/s over nginx's (goal >= 1.0).
    pub fifo_vs_nginx_rps: Option<f64>,
    /// triage-pos's req/s over triage-fifo's (goal >= 0.9).
    pub pos_vs_fifo_rps: Option<f64>,
    /// triage-fifo's p99 over nginx's (goal <= 1.2).
    pub fifo_vs_nginx_p99: Option<f64>,
    /// triage-pos's CPU per request over triage-fifo's (lower is better; the goal "pos at
    /// least 0.9x fifo's efficiency" is <= 1/0.9 = 1.11).
    pub pos_vs_fifo_cpu_per_req: Option<f64>,
    /// triage-pos's req/s over nginx's.
    pub pos_vs_nginx_rps: Option<f64>,
    /// Every round's ratios, in round order: the spread behind the medians above.
    pub per_round: PerRound,
    /// The same ratios taken between the targets' medians over the rounds (the estimator
    /// before pairing; shown beside for comparison).
    pub of_medians: OfMedians,
    /// Per target, medians over the rounds at this core count.
    pub targets: Vec<TargetSummary>,
}

/// Every round's ratios of one core count (a round missing a target has none).
#[derive(Debug, Clone, Serialize)]
pub struct PerRound {
    /// triage-fifo's req/s over nginx's, per round.
    pub fifo_vs_nginx_rps: Vec<f64>,
    /// triage-pos's req/s over triage-fifo's, per round.
    pub pos_vs_fifo_rps: Vec<f64>,
    /// triage-pos's CPU per request over triage-fifo's, per round.
    pub pos_vs_fifo_cpu_per_req: Vec<f64>,
}

/// Ratios of the targets' medians over the rounds.
#[derive(Debug, Clone, Serialize)]
pub struct OfMedians {
    /// triage-fifo's median req/s over nginx's.
    pub fifo_vs_nginx_rps: Option<f64>,
    /// triage-pos's median req/s over triage-fifo's.
    pub pos_vs_fifo_rps: Option<f64>,
    /// triage-fifo's median p99 over nginx's.
    pub fifo_vs_nginx_p99: Option<f64>,
    /// triage-pos's median CPU per request over triage-fifo's.
    pub pos_vs_fifo_cpu_per_req: Option<f64>,
}

/// The goals the figures are read against.
#[derive(Debug, Clone, Serialize)]
pub struct TargetsGoal {
    /// triage's req/s at least this share of nginx's.
    pub rps_vs_nginx_min: f64,
    /// The gate costs at most this share of req/s.
    pub gate_cost_max: f64,
    /// Idle connections raise CPU per request by at most this factor.
    pub idle_cpu_ratio_max: f64,
    /// Memory per idle connection at most this (KiB).
    pub rss_kib_per_idle_conn_max: f64,
}

/// `summary.json` of `triage bench static`.
#[derive(Debug, Clone, Serialize)]
pub struct StaticSummary {
    /// `static`.
    pub bench: &'static str,
    /// Size of the file served.
    pub file_bytes: usize,
    /// gzip level, if the file was compressed on the fly.
    pub gzip_level: Option<u32>,
    /// Seconds per measurement.
    pub duration_s: u64,
    /// Rounds.
    pub rounds: usize,
    /// wrk connections.
    pub connections: usize,
    /// Idle connections of the idle-cost measurement.
    pub idle_connections: usize,
    /// The servers' CPU.
    pub server_cpu: usize,
    /// wrk's CPU.
    pub client_cpu: usize,
    /// Whether this is a debug build (figures of one mean little).
    pub debug_build: bool,
    /// Per target.
    pub targets: Vec<TargetSummary>,
    /// The ratios.
    pub ratios: Ratios,
    /// Per target, the cost of idle connections.
    pub idle: Vec<IdleResult>,
    /// Per core count measured, its ratios (`--cores`; one entry of 1 core without it). The
    /// top-level `targets` and `ratios` are those of the first core count.
    pub per_cores: Vec<CoresSummary>,
    /// The goals.
    pub targets_goal: TargetsGoal,
}

/// Per target, the medians of its rounds at `cores` server cores.
fn target_summaries(
    targets: &[(&'static str, &'static [&'static str])],
    done: &[(StaticPoint, StaticMeasured)],
    cores: usize,
) -> Vec<TargetSummary> {
    let samples = |i: usize| -> Vec<Sample> {
        done.iter()
            .filter_map(|(p, m)| match (p, m) {
                (
                    StaticPoint::Round {
                        target, cores: c, ..
                    },
                    StaticMeasured::Round(s),
                ) if *target == i && *c == cores => Some(*s),
                _ => None,
            })
            .collect()
    };
    targets
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            let s = samples(i);
            let med = |f: fn(&Sample) -> f64| median(&s.iter().map(f).collect::<Vec<_>>());
            TargetSummary {
                target: (*name).into(),
                rps_median: med(|s| s.rps),
                p99_ms_median: med(|s| s.p99_ms),
                cpu_per_req_us_median: med(|s| s.cpu_per_req_s() * 1e6),
                rounds: s,
            }
        })
        .collect()
}

/// `a / b` when both are there and `b` is positive.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() => Some(a / b),
        _ => None,
    }
}

/// A target's median of `f`, if the target was measured.
fn get(per_target: &[TargetSummary], n: &str, f: fn(&TargetSummary) -> f64) -> Option<f64> {
    per_target.iter().find(|t| t.target == n).map(f)
}

/// Per round at `cores` cores, target `a`'s `f` over target `b`'s, in round order, for the
/// rounds that measured both. The servers of a round run back to back, so what a machine's
/// speed does between rounds (on the 16-core device machine it moved 1.5x between runs a few
/// seconds apart) is common to both sides of a round's ratio and leaves it; the median of
/// these is the ratio every summary reports.
pub fn round_ratios(
    targets: &[(&'static str, &'static [&'static str])],
    done: &[(StaticPoint, StaticMeasured)],
    cores: usize,
    (a, b): (&str, &str),
    f: fn(&Sample) -> f64,
) -> Vec<f64> {
    let index = |n: &str| targets.iter().position(|(t, _)| *t == n);
    let (Some(ia), Some(ib)) = (index(a), index(b)) else {
        return Vec::new();
    };
    let in_round = |i: usize, r: usize| {
        done.iter().find_map(|(p, m)| match (p, m) {
            (
                StaticPoint::Round {
                    round,
                    target,
                    cores: c,
                },
                StaticMeasured::Round(s),
            ) if *round == r && *target == i && *c == cores => Some(f(s)),
            _ => None,
        })
    };
    let last = done
        .iter()
        .filter_map(|(p, _)| match p {
            StaticPoint::Round { round, .. } => Some(*round),
            StaticPoint::Idle { .. } => None,
        })
        .max();
    (0..last.map_or(0, |l| l + 1))
        .filter_map(|r| ratio(in_round(ia, r), in_round(ib, r)))
        .collect()
}

/// Target `a`'s `f` over target `b`'s at `cores` cores: the median of the rounds' ratios.
fn paired(
    targets: &[(&'static str, &'static [&'static str])],
    done: &[(StaticPoint, StaticMeasured)],
    cores: usize,
    pair: (&str, &str),
    f: fn(&Sample) -> f64,
) -> Option<f64> {
    median_opt(&round_ratios(targets, done, cores, pair, f))
}

fn rps(s: &Sample) -> f64 {
    s.rps
}

fn p99(s: &Sample) -> f64 {
    s.p99_ms
}

fn cpu_per_req(s: &Sample) -> f64 {
    s.cpu_per_req_s()
}

/// The ratios of one core count.
fn cores_summary(
    targets: &[(&'static str, &'static [&'static str])],
    done: &[(StaticPoint, StaticMeasured)],
    cores: usize,
) -> CoresSummary {
    let per_target = target_summaries(targets, done, cores);
    let pair = |a, b, f| paired(targets, done, cores, (a, b), f);
    let rounds = |a, b, f| round_ratios(targets, done, cores, (a, b), f);
    let med_rps = |n: &str| get(&per_target, n, |t| t.rps_median);
    let med_p99 = |n: &str| get(&per_target, n, |t| t.p99_ms_median);
    let med_cpr = |n: &str| get(&per_target, n, |t| t.cpu_per_req_us_median);
    let (fifo, pos) = ("triage-fifo", "triage-pos");
    CoresSummary {
        cores,
        fifo_vs_nginx_rps: pair(fifo, "nginx", rps),
        pos_vs_fifo_rps: pair(pos, fifo, rps),
        fifo_vs_nginx_p99: pair(fifo, "nginx", p99),
        pos_vs_fifo_cpu_per_req: pair(pos, fifo, cpu_per_req),
        pos_vs_nginx_rps: pair(pos, "nginx", rps),
        per_round: PerRound {
            fifo_vs_nginx_rps: rounds(fifo, "nginx", rps),
            pos_vs_fifo_rps: rounds(pos, fifo, rps),
            pos_vs_fifo_cpu_per_req: rounds(pos, fifo, cpu_per_req),
        },
        of_medians: OfMedians {
            fifo_vs_nginx_rps: ratio(med_rps(fifo), med_rps("nginx")),
            pos_vs_fifo_rps: ratio(med_rps(pos), med_rps(fifo)),
            fifo_vs_nginx_p99: ratio(med_p99(fifo), med_p99("nginx")),
            pos_vs_fifo_cpu_per_req: ratio(med_cpr(pos), med_cpr(fifo)),
        },
        targets: per_target,
    }
}

/// The summary of the rounds and idle measurements in `done`.
pub fn summarize(
    o: &StaticOpts,
    targets: &[(&'static str, &'static [&'static str])],
    done: &[(StaticPoint, StaticMeasured)],
) -> StaticSummary {
    let mut core_counts: Vec<usize> = Vec::new();
    for (p, _) in done {
        if let StaticPoint::Round { cores, .. } = p {
            if !core_counts.contains(cores) {
                core_counts.push(*cores);
            }
        }
    }
    let first = core_counts.first().copied().unwrap_or(1);
    let per_target = target_summaries(targets, done, first);
    let pair = |a, b, f| paired(targets, done, first, (a, b), f);
    StaticSummary {
        bench: "static",
        file_bytes: o.size,
        gzip_level: o.gzip,
        duration_s: o.duration.as_secs(),
        rounds: o.rounds,
        connections: o.connections,
        idle_connections: o.idle,
        server_cpu: o.server_cpu,
        client_cpu: o.client_cpu,
        debug_build: cfg!(debug_assertions),
        ratios: Ratios {
            fifo_vs_nginx_rps: pair("triage-fifo", "nginx", rps),
            pos_vs_nginx_rps: pair("triage-pos", "nginx", rps),
            fifo_vs_nginx_p99: pair("triage-fifo", "nginx", p99),
            pos_vs_nginx_p99: pair("triage-pos", "nginx", p99),
            gate_cost: pair("triage-fifo", "triage-gate-off", rps).map(|r| 1.0 - r),
        },
        targets: per_target,
        idle: done
            .iter()
            .filter_map(|(_, m)| match m {
                StaticMeasured::Idle(r) => Some(r.clone()),
                StaticMeasured::Round(_) => None,
            })
            .collect(),
        per_cores: core_counts
            .iter()
            .map(|&n| cores_summary(targets, done, n))
            .collect(),
        targets_goal: TargetsGoal {
            rps_vs_nginx_min: 0.9,
            gate_cost_max: 0.05,
            idle_cpu_ratio_max: 1.1,
            rss_kib_per_idle_conn_max: 4.0,
        },
    }
}

/// The table and the ratios on stdout, and where `summary.json` is.
pub fn print(s: &StaticSummary, idle: usize, out: &Path) {
    println!(
        "{:<16} {:>12} {:>10} {:>14}",
        "target", "req/s", "p99 ms", "cpu/req us"
    );
    for t in &s.targets {
        println!(
            "{:<16} {:>12.0} {:>10.3} {:>14.2}",
            t.target, t.rps_median, t.p99_ms_median, t.cpu_per_req_us_median
        );
    }
    let show = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.3}"));
    let r = &s.ratios;
    println!(
        "triage-fifo / nginx req/s: {} (goal >= 0.9)",
        show(r.fifo_vs_nginx_rps)
    );
    println!("triage-pos  / nginx req/s: {}", show(r.pos_vs_nginx_rps));
    println!("triage-fifo / nginx p99:   {}", show(r.fifo_vs_nginx_p99));
    println!("triage-pos  / nginx p99:   {}", show(r.pos_vs_nginx_p99));
    println!(
        "gate cost (1 - fifo/gate-off req/s): {} (goal <= 0.05)",
        show(r.gate_cost)
    );
    for r in &s.idle {
        println!(
            "{:<16} idle x{idle}: cpu/req ratio {:.3} (goal <= 1.1), rss {:.2} KiB per idle conn (goal <= {})",
            r.target, r.cpu_per_req_ratio, r.rss_kib_per_idle_conn, s.targets_goal.rss_kib_per_idle_conn_max
        );
    }
    if s.per_cores.len() > 1 || s.per_cores.first().is_some_and(|c| c.cores > 1) {
        println!(
            "{:>5} {:<12} {:>12} {:>10} {:>12}",
            "cores", "target", "req/s", "p99 ms", "cpu/req us"
        );
        for c in &s.per_cores {
            for t in &c.targets {
                println!(
                    "{:>5} {:<12} {:>12.0} {:>10.3} {:>12.2}",
                    c.cores, t.target, t.rps_median, t.p99_ms_median, t.cpu_per_req_us_median
                );
            }
        }
    }
    let spread = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if v.is_empty() {
            String::new()
        } else {
            format!(" [rounds {lo:.3}-{hi:.3}]")
        }
    };
    println!("(each ratio: the median over the rounds of the ratio within a round)");
    for c in &s.per_cores {
        println!(
            "{} core(s): fifo/nginx req/s {}{} (goal >= 1.0), fifo/nginx p99 {} (goal <= 1.2), \
             pos/fifo req/s {}{} (goal >= 0.9), pos/fifo CPU per request {} (goal <= 1.11)",
            c.cores,
            show(c.fifo_vs_nginx_rps),
            spread(&c.per_round.fifo_vs_nginx_rps),
            show(c.fifo_vs_nginx_p99),
            show(c.pos_vs_fifo_rps),
            spread(&c.per_round.pos_vs_fifo_rps),
            show(c.pos_vs_fifo_cpu_per_req),
        );
    }
    println!("wrote {}", out.join("summary.json").display());
}
