//! PL and LRQ, seed 001 §4.3, sampled every 10 ms while a run is under load.
//!
//! Two views, both reported:
//! - [`CpuSampler`], the same for every server (triage and peers): every 10 ms it reads the
//!   server-side cgroup's CPU usage and the states of all its threads. PL sample = the share
//!   of the server side's CPU capacity (its quota) used in the last interval (the mean over a
//!   run is capped at 1 = the emulated CPU was busy the whole time; single samples are not
//!   capped, because CFS grants the quota in bursts, one per period, that a 10 ms window may
//!   catch twice or not at all); LRQ sample = threads in state `R`
//!   beyond the one that can run (the server side has one CPU), i.e. ready and waiting. These
//!   are proxies of the paper's "processor busy" and "processes in the ready queue" at the
//!   granularity the kernel exposes; the CPU hog counts as a ready process, as in the paper.
//! - [`GatePoller`], triage only: the gate's own PL/LRQ counters from `/metrics`
//!   (`triage_pl_busy_sum`, `triage_lrq_sum`, `triage_pl_samples_total`, also sampled every
//!   10 ms by the server), and SLP/RW as predicted over time.
//!
//! Cgroup membership and thread states come from the `os` crate.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::testbed::{http_get, Testbed};

/// Sampling interval of the paper.
pub const INTERVAL: Duration = Duration::from_millis(10);

/// PL/LRQ summary of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PlLrq {
    /// Samples taken.
    pub samples: u64,
    /// Sum of PL samples (the paper's PL counter).
    pub pl_sum: f64,
    /// Sum of LRQ samples (the paper's LRQ).
    pub lrq_sum: f64,
    /// `pl_sum / samples`: fraction of time the server side's CPU was busy.
    pub pl_mean: f64,
    /// `lrq_sum / samples`: mean number of ready, waiting threads.
    pub lrq_mean: f64,
    /// CPU seconds the server side used during the run.
    pub cpu_s: f64,
    /// Time the server side's cgroup was throttled during the run (s; its `cpu.stat`): with
    /// the CPU the bottleneck, about (1 - quota) of the busy time.
    pub throttled_s: f64,
    /// Quota periods in which the group hit its quota / periods it was runnable in.
    pub throttled_periods: f64,
    /// Quota periods the kernel counted for the group during the run (`nr_periods` of its
    /// `cpu.stat`: the periods in which it had runnable tasks).
    pub quota_periods: u64,
    /// How long the run was sampled (s): the span of `quota_periods`.
    pub sampled_s: f64,
}

impl PlLrq {
    /// The quota period the kernel applied, as seen in the run (ms): the sampled span over
    /// the periods counted. With a task always runnable in the group (exp 1's hog) every
    /// period counts and this is the period set; `None` without a count.
    pub fn period_seen_ms(&self) -> Option<f64> {
        (self.quota_periods > 0 && self.sampled_s > 0.0)
            .then(|| self.sampled_s * 1e3 / self.quota_periods as f64)
    }
}

/// State letters of the threads of `pids` (`os::procfs::thread_states`).
pub fn thread_states(pids: &[i32]) -> Vec<char> {
    pids.iter()
        .flat_map(|&p| os::procfs::thread_states(p))
        .collect()
}

/// LRQ sample from thread states: runnable threads beyond the `cpus` that can run.
pub fn lrq_sample(states: &[char], cpus: usize) -> usize {
    let r = states.iter().filter(|&&c| c == 'R').count();
    r.saturating_sub(cpus)
}

/// Samples the server-side cgroup every [`INTERVAL`] on its own thread.
pub struct CpuSampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<PlLrq>>,
}

impl CpuSampler {
    /// Start sampling `cg` whose capacity is `capacity` CPUs (its quota).
    pub fn start(cg: Option<os::Cgroup>, capacity: f64) -> CpuSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("lab-cpu-sampler".into())
            .spawn(move || {
                let mut out = PlLrq::default();
                let Some(cg) = cg else { return out };
                let t_first = Instant::now();
                let first = cg.cpu_usage().unwrap_or_default();
                let stat0 = cg.cpu_stat().ok();
                let mut last = first;
                let mut last_t = Instant::now();
                let mut next = last_t + INTERVAL;
                while !s2.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if now < next {
                        std::thread::sleep(next - now);
                        continue;
                    }
                    next += INTERVAL;
                    if next < now {
                        next = now + INTERVAL; // fell behind: do not burst
                    }
                    let usage = cg.cpu_usage().unwrap_or(last);
                    let t = Instant::now();
                    let dt = (t - last_t).as_secs_f64();
                    let du = usage.saturating_sub(last).as_secs_f64();
                    // Not clamped per sample: the quota is granted in bursts (one per CFS
                    // period), so a 10 ms window may hold two bursts or none.
                    let pl = if dt > 0.0 { du / (dt * capacity) } else { 0.0 };
                    let pids = cg.all_pids().unwrap_or_default();
                    let lrq = lrq_sample(&thread_states(&pids), 1);
                    out.samples += 1;
                    out.pl_sum += pl;
                    out.lrq_sum += lrq as f64;
                    last = usage;
                    last_t = t;
                }
                out.cpu_s = last.saturating_sub(first).as_secs_f64();
                if let (Some(a), Ok(b)) = (stat0, cg.cpu_stat()) {
                    out.throttled_s = b.throttled.saturating_sub(a.throttled).as_secs_f64();
                    let periods = b.nr_periods.saturating_sub(a.nr_periods);
                    out.quota_periods = periods;
                    if periods > 0 {
                        out.throttled_periods =
                            b.nr_throttled.saturating_sub(a.nr_throttled) as f64 / periods as f64;
                    }
                }
                if out.samples > 0 {
                    // Busy share over the whole run (usage / (time x capacity)): robust to
                    // late wake-ups of this thread.
                    let span = (last_t - t_first).as_secs_f64();
                    out.sampled_s = span;
                    out.pl_mean = if span > 0.0 {
                        (out.cpu_s / (span * capacity)).min(1.0)
                    } else {
                        0.0
                    };
                    out.pl_sum = out.pl_mean * out.samples as f64;
                    out.lrq_mean = out.lrq_sum / out.samples as f64;
                }
                out
            })
            .ok();
        CpuSampler { stop, handle }
    }

    /// Stop and return the summary.
    pub fn finish(mut self) -> PlLrq {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for CpuSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// triage's own gate view of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GateStats {
    /// Gate samples (every 10 ms) during the run.
    pub samples: f64,
    /// Mean busy slots.
    pub pl_mean: f64,
    /// Mean ready-queue length.
    pub lrq_mean: f64,
    /// Share of samples in seed 001's bottleneck (all slots busy, more than one ready).
    pub bottleneck_frac: f64,
    /// Workers the policy put at the head.
    pub promotions: f64,
    /// Workers the policy took off the head.
    pub demotions: f64,
    /// Workers the starvation guard served ahead of the policy.
    pub starvation_rescues: f64,
    /// SLP (s) and RW over time: (seconds since start, slp_s, rw); NaN when the policy has none.
    pub series: Vec<(f64, f64, f64)>,
    /// CGI scripts started raised by the server's CGI lever (`cgi_lever`), all sites.
    pub scripts_raised: f64,
    /// Raised scripts restored while running (their worker lost POS's mark).
    pub scripts_lowered: f64,
    /// Of these, those restored because their own CPU time passed the text budget.
    pub scripts_lowered_budget: f64,
    /// Where completed CGI requests' time went (the server's `triage_cgi_time_seconds_total`):
    /// `<class>.<part>` -> mean ms per request of the class (`<class>.n`: requests;
    /// `<class>.raised`: the share started raised), all sites.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cgi_times: BTreeMap<String, f64>,
}

/// [`GateStats::cgi_times`] from two scrapes of `/metrics`.
pub fn cgi_times(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let sum = |m: &BTreeMap<String, f64>, name: &str, labels: &[String]| -> f64 {
        m.iter()
            .filter(|(k, _)| {
                k.starts_with(&format!("{name}{{")) && labels.iter().all(|l| k.contains(l.as_str()))
            })
            .map(|(_, v)| v)
            .sum()
    };
    let mut out = BTreeMap::new();
    for class in ["text", "media", "unknown"] {
        let c = format!("class=\"{class}\"");
        let n = sum(b, "triage_cgi_timed_total", std::slice::from_ref(&c))
            - sum(a, "triage_cgi_timed_total", std::slice::from_ref(&c));
        if n <= 0.0 {
            continue;
        }
        out.insert(format!("{class}.n"), n);
        let raised = sum(b, "triage_cgi_timed_raised_total", std::slice::from_ref(&c))
            - sum(a, "triage_cgi_timed_raised_total", std::slice::from_ref(&c));
        out.insert(format!("{class}.raised"), raised / n);
        for part in [
            "gate",
            "start",
            "run",
            "runq",
            "blocked",
            "relay",
            "total",
            "thr_gate",
            "thr_start",
            "thr_life",
            "thr_relay",
            "thr_total",
        ] {
            let l = [c.clone(), format!("part=\"{part}\"")];
            let s = sum(b, "triage_cgi_time_seconds_total", &l)
                - sum(a, "triage_cgi_time_seconds_total", &l);
            out.insert(format!("{class}.{part}"), s * 1e3 / n);
        }
    }
    out
}

/// Parse the Prometheus text format into `name -> value`; a labelled series is keyed by its
/// name with its labels as written (`triage_cgi_total{site="a",outcome="raised"}`).
pub fn parse_prometheus(text: &str) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        if l.starts_with('#') {
            continue;
        }
        let mut it = match l.rfind('}') {
            Some(end) => {
                let (k, v) = l.split_at(end + 1);
                std::iter::once(k).chain(v.split_whitespace())
            }
            None => {
                let mut w = l.split_whitespace();
                let k = w.next().unwrap_or("");
                std::iter::once(k).chain(w)
            }
        };
        if let (Some(k), Some(v)) = (it.next(), it.next()) {
            let v = if v.eq_ignore_ascii_case("nan") {
                f64::NAN
            } else {
                match v.parse() {
                    Ok(x) => x,
                    Err(_) => continue,
                }
            };
            m.insert(k.to_owned(), v);
        }
    }
    m
}

/// Polls triage's `/metrics` every `every` from the server namespace.
pub struct GatePoller {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Option<GateStats>>>,
}

fn gate_delta(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>, k: &str) -> f64 {
    b.get(k).copied().unwrap_or(0.0) - a.get(k).copied().unwrap_or(0.0)
}

/// The sum of `triage_cgi_total` over sites for one outcome.
fn cgi_outcome(m: &BTreeMap<String, f64>, outcome: &str) -> f64 {
    let label = format!("outcome=\"{outcome}\"");
    m.iter()
        .filter(|(k, _)| k.starts_with("triage_cgi_total{") && k.contains(&label))
        .map(|(_, v)| v)
        .sum()
}

impl GatePoller {
    /// Start polling `admin` (the server's admin address).
    pub fn start(tb: &Testbed, admin: SocketAddr, every: Duration) -> GatePoller {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let entered = tb.enter_server_ns_fn();
        let handle = std::thread::Builder::new()
            .name("lab-gate-poller".into())
            .spawn(move || {
                entered().ok()?;
                let get = || {
                    http_get(admin, "/metrics", Duration::from_secs(2))
                        .ok()
                        .map(|t| parse_prometheus(&t))
                };
                let first = get()?;
                let t0 = Instant::now();
                let mut series = Vec::new();
                let mut last = first.clone();
                loop {
                    let stopping = s2.load(Ordering::Relaxed);
                    if let Some(m) = get() {
                        series.push((
                            t0.elapsed().as_secs_f64(),
                            m.get("triage_slp_seconds").copied().unwrap_or(f64::NAN),
                            m.get("triage_rw").copied().unwrap_or(f64::NAN),
                        ));
                        last = m;
                    }
                    if stopping {
                        break;
                    }
                    let end = Instant::now() + every;
                    while Instant::now() < end && !s2.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                let samples = gate_delta(&first, &last, "triage_pl_samples_total");
                let per = |k: &str| {
                    if samples > 0.0 {
                        gate_delta(&first, &last, k) / samples
                    } else {
                        0.0
                    }
                };
                Some(GateStats {
                    samples,
                    pl_mean: per("triage_pl_busy_sum"),
                    lrq_mean: per("triage_lrq_sum"),
                    bottleneck_frac: per("triage_bottleneck_samples_total"),
                    promotions: gate_delta(&first, &last, "triage_policy_promotions_total"),
                    demotions: gate_delta(&first, &last, "triage_policy_demotions_total"),
                    starvation_rescues: gate_delta(
                        &first,
                        &last,
                        "triage_policy_starvation_rescues_total",
                    ),
                    series,
                    scripts_raised: cgi_outcome(&last, "raised") - cgi_outcome(&first, "raised"),
                    scripts_lowered: cgi_outcome(&last, "lowered") - cgi_outcome(&first, "lowered"),
                    scripts_lowered_budget: cgi_outcome(&last, "lowered_budget")
                        - cgi_outcome(&first, "lowered_budget"),
                    cgi_times: cgi_times(&first, &last),
                })
            })
            .ok();
        GatePoller { stop, handle }
    }

    /// Stop (after one last poll) and return the summary, if the server answered.
    pub fn finish(mut self) -> Option<GateStats> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().and_then(|h| h.join().ok()).flatten()
    }
}

impl Drop for GatePoller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lrq_counts_runnable_threads_beyond_the_cpu() {
        assert_eq!(lrq_sample(&['R', 'S', 'R', 'R', 'D'], 1), 2);
        assert_eq!(lrq_sample(&['S'], 1), 0);
        assert_eq!(lrq_sample(&[], 1), 0);
    }

    #[test]
    fn the_period_seen_is_the_span_over_the_periods_counted() {
        let run = |quota_periods, sampled_s| PlLrq {
            quota_periods,
            sampled_s,
            ..Default::default()
        };
        // 12 s sampled, 120 periods: 100 ms; 1200 periods: 10 ms.
        assert!((run(120, 12.0).period_seen_ms().unwrap() - 100.0).abs() < 1e-9);
        assert!((run(1200, 12.0).period_seen_ms().unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(run(0, 12.0).period_seen_ms(), None);
        assert_eq!(run(10, 0.0).period_seen_ms(), None);
    }

    #[test]
    fn prometheus_unlabelled_values() {
        let m = parse_prometheus(
            "# HELP x y\n# TYPE x counter\ntriage_pl_busy_sum 12\ntriage_slp_seconds NaN\n\
             triage_requests_total{status=\"200\"} 5\n",
        );
        assert_eq!(m["triage_pl_busy_sum"], 12.0);
        assert!(m["triage_slp_seconds"].is_nan());
        assert!(!m.contains_key("triage_requests_total"));
        assert_eq!(m["triage_requests_total{status=\"200\"}"], 5.0);
        let cgi = parse_prometheus(
            "triage_cgi_total{site=\"a\",outcome=\"raised\"} 3\n\
             triage_cgi_total{site=\"b\",outcome=\"raised\"} 4\n\
             triage_cgi_total{site=\"a\",outcome=\"lowered\"} 1\n",
        );
        assert_eq!(cgi_outcome(&cgi, "raised"), 7.0);
        assert_eq!(cgi_outcome(&cgi, "lowered"), 1.0);
    }

    #[test]
    fn cgi_times_are_means_per_request_of_the_class() {
        let a = parse_prometheus(
            "triage_cgi_timed_total{site=\"a\",class=\"media\"} 2\n\
             triage_cgi_time_seconds_total{site=\"a\",class=\"media\",part=\"runq\"} 0.1\n",
        );
        let b = parse_prometheus(
            "triage_cgi_timed_total{site=\"a\",class=\"media\"} 6\n\
             triage_cgi_timed_raised_total{site=\"a\",class=\"media\"} 2\n\
             triage_cgi_time_seconds_total{site=\"a\",class=\"media\",part=\"runq\"} 0.5\n",
        );
        let t = cgi_times(&a, &b);
        assert_eq!(t["media.n"], 4.0);
        assert!((t["media.runq"] - 100.0).abs() < 1e-9, "{t:?}");
        assert_eq!(t["media.raised"], 0.5);
        assert!(!t.contains_key("text.n"), "no text request: no entry");
    }

    #[test]
    fn own_threads_are_visible() {
        let me = std::process::id() as i32;
        let states = thread_states(&[me]);
        assert!(!states.is_empty());
        assert!(states.contains(&'R'), "{states:?}"); // this thread is running
    }
}
