//! What the front end counts, as a snapshot a program can read ([`FrontMetrics`], also JSON)
//! and as the Prometheus text of the admin listener's `/metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use serde::Serialize;

use crate::backends::Backends;
use crate::dispatcher::Dispatcher;

/// The front end's own counters (the back ends' are in their table).
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests answered, by status class: 1xx..5xx.
    pub by_class: [AtomicU64; 5],
    /// Requests whose client went away before an answer (status 0).
    pub aborted: AtomicU64,
    /// Tries on another back end after a failure before any response byte.
    pub retries: AtomicU64,
    /// Requests answered 503 because no back end was up.
    pub no_backend: AtomicU64,
    /// Requests answered 504 because a back end went silent.
    pub timeouts: AtomicU64,
    /// Requests answered 502 because a back end answered garbage or vanished.
    pub bad_gateway: AtomicU64,
    /// Requests sent with `X-Triage-Forward` (back-end forwarding).
    pub forwarded: AtomicU64,
    /// Client connections pinned anew because their back end went down.
    pub repinned: AtomicU64,
    /// Requests waiting for admission now.
    pub admission_waiting: AtomicU64,
    /// Sum of the response times of answered requests, µs.
    pub latency_us_sum: AtomicU64,
    /// Requests between their head and their log line now.
    pub live: AtomicUsize,
}

impl Counters {
    /// Count an answered request.
    pub fn answered(&self, status: u16, took: Duration) {
        match status {
            100..=599 => {
                self.by_class[usize::from(status / 100 - 1)].fetch_add(1, Relaxed);
                self.latency_us_sum
                    .fetch_add(took.as_micros() as u64, Relaxed);
            }
            _ => {
                self.aborted.fetch_add(1, Relaxed);
            }
        }
    }

    /// Requests answered with any status.
    pub fn requests(&self) -> u64 {
        self.by_class.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// One back end in a snapshot.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BackendMetrics {
    /// Its address.
    pub addr: String,
    /// Whether it takes requests now.
    pub up: bool,
    /// Whether it left the configuration.
    pub removed: bool,
    /// Requests in flight now.
    pub load: u32,
    /// Its disk queue as last reported.
    pub disk_queue: u32,
    /// Requests the policy gave it.
    pub chosen: u64,
    /// Requests forwarded to it through another back end.
    pub forwarded_to: u64,
    /// Requests that could not reach it.
    pub failures: u64,
    /// Responses it sent.
    pub responses: u64,
}

/// Everything the front end counts, at one moment.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FrontMetrics {
    /// Distribution policy.
    pub policy: String,
    /// Mechanism for persistent connections.
    pub mechanism: String,
    /// Requests answered.
    pub requests: u64,
    /// Answered requests by status class, 1xx..5xx.
    pub by_class: [u64; 5],
    /// Requests whose client left before an answer.
    pub aborted: u64,
    /// Tries on another back end.
    pub retries: u64,
    /// 503s for want of a back end.
    pub no_backend: u64,
    /// 504s (a silent back end).
    pub timeouts: u64,
    /// 502s (garbage, or a back end gone mid-response).
    pub bad_gateway: u64,
    /// Requests sent with back-end forwarding.
    pub forwarded: u64,
    /// Connections pinned anew.
    pub repinned: u64,
    /// Requests waiting for admission.
    pub admission_waiting: u64,
    /// Mean response time of answered requests, ms.
    pub mean_ms: f64,
    /// Targets the policy holds state for (LARD's table size).
    pub lard_targets: usize,
    /// Targets moved (LARD) or given another back end (LARD/R, extended LARD).
    pub lard_reassignments: u64,
    /// Assignments dropped because their back end went down.
    pub lard_forgotten: u64,
    /// Times the policy was rebuilt for new back ends.
    pub policy_rebuilds: u64,
    /// CPU time of the front end's runtime threads, s.
    pub cpu_seconds: f64,
    /// CPU time of the whole process, s (the front end's alone when it runs as its own
    /// process).
    pub process_cpu_seconds: f64,
    /// The back ends, by number.
    pub backends: Vec<BackendMetrics>,
}

impl FrontMetrics {
    /// Gather a snapshot.
    pub fn gather(
        c: &Counters,
        backends: &Backends,
        d: &Dispatcher,
        mechanism: &str,
        cpu: Duration,
    ) -> Self {
        let (stats, rebuilds) = d.stats();
        let requests = c.requests();
        let by_class = std::array::from_fn(|i| c.by_class[i].load(Relaxed));
        Self {
            policy: d.name().to_owned(),
            mechanism: mechanism.to_owned(),
            requests,
            by_class,
            aborted: c.aborted.load(Relaxed),
            retries: c.retries.load(Relaxed),
            no_backend: c.no_backend.load(Relaxed),
            timeouts: c.timeouts.load(Relaxed),
            bad_gateway: c.bad_gateway.load(Relaxed),
            forwarded: c.forwarded.load(Relaxed),
            repinned: c.repinned.load(Relaxed),
            admission_waiting: c.admission_waiting.load(Relaxed),
            mean_ms: if requests == 0 {
                0.0
            } else {
                c.latency_us_sum.load(Relaxed) as f64 / requests as f64 / 1000.0
            },
            lard_targets: stats.targets,
            lard_reassignments: stats.reassignments,
            lard_forgotten: stats.forgotten,
            policy_rebuilds: rebuilds,
            cpu_seconds: cpu.as_secs_f64(),
            process_cpu_seconds: os::process_cpu_time().as_secs_f64(),
            backends: backends
                .all()
                .iter()
                .map(|b| BackendMetrics {
                    addr: b.addr.to_string(),
                    up: b.is_up(),
                    removed: b.is_removed(),
                    load: b.load(),
                    disk_queue: b.disk(),
                    chosen: b.chosen.load(Relaxed),
                    forwarded_to: b.forwarded_to.load(Relaxed),
                    failures: b.failures.load(Relaxed),
                    responses: b.responses.load(Relaxed),
                })
                .collect(),
        }
    }

    /// The Prometheus text exposition.
    pub fn prometheus(&self) -> String {
        let mut o = String::with_capacity(4096);
        let fam = |o: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        fam(
            &mut o,
            "triage_front_info",
            "gauge",
            "Front end configuration.",
        );
        let _ = writeln!(
            o,
            "triage_front_info{{policy=\"{}\",mechanism=\"{}\"}} 1",
            self.policy, self.mechanism
        );
        fam(
            &mut o,
            "triage_front_requests_total",
            "counter",
            "Requests answered, by status class.",
        );
        for (i, n) in self.by_class.iter().enumerate() {
            let _ = writeln!(
                o,
                "triage_front_requests_total{{class=\"{}xx\"}} {n}",
                i + 1
            );
        }
        for (name, kind, help, v) in [
            (
                "triage_front_aborted_total",
                "counter",
                "Requests whose client left before an answer.",
                self.aborted as f64,
            ),
            (
                "triage_front_retries_total",
                "counter",
                "Tries on another back end after a failure before any response byte.",
                self.retries as f64,
            ),
            (
                "triage_front_no_backend_total",
                "counter",
                "Requests answered 503 because no back end was up.",
                self.no_backend as f64,
            ),
            (
                "triage_front_timeouts_total",
                "counter",
                "Requests answered 504 because a back end went silent.",
                self.timeouts as f64,
            ),
            (
                "triage_front_bad_gateway_total",
                "counter",
                "Requests answered 502 (garbage from a back end, or gone mid-response).",
                self.bad_gateway as f64,
            ),
            (
                "triage_front_forwarded_total",
                "counter",
                "Requests sent with back-end forwarding.",
                self.forwarded as f64,
            ),
            (
                "triage_front_repinned_total",
                "counter",
                "Client connections pinned anew because their back end went down.",
                self.repinned as f64,
            ),
            (
                "triage_front_admission_waiting",
                "gauge",
                "Requests waiting for admission.",
                self.admission_waiting as f64,
            ),
            (
                "triage_front_lard_targets",
                "gauge",
                "Targets the policy holds state for (LARD's table size).",
                self.lard_targets as f64,
            ),
            (
                "triage_front_lard_reassignments_total",
                "counter",
                "Targets moved to another back end (LARD) or given one more (LARD/R).",
                self.lard_reassignments as f64,
            ),
            (
                "triage_front_lard_forgotten_total",
                "counter",
                "Assignments dropped because their back end went down.",
                self.lard_forgotten as f64,
            ),
            (
                "triage_front_cpu_seconds_total",
                "counter",
                "CPU time of the front end's runtime threads.",
                self.cpu_seconds,
            ),
            (
                "triage_front_process_cpu_seconds_total",
                "counter",
                "CPU time of the whole process.",
                self.process_cpu_seconds,
            ),
        ] {
            fam(&mut o, name, kind, help);
            let _ = writeln!(o, "{name} {v}");
        }
        type Pick = fn(&BackendMetrics) -> f64;
        let per: [(&str, &str, &str, Pick); 7] = [
            (
                "triage_front_backend_up",
                "gauge",
                "Whether the back end takes requests.",
                |b| f64::from(u8::from(b.up)),
            ),
            (
                "triage_front_backend_load",
                "gauge",
                "Requests in flight on the back end.",
                |b| f64::from(b.load),
            ),
            (
                "triage_front_backend_disk_queue",
                "gauge",
                "The back end's disk queue as it last reported it.",
                |b| f64::from(b.disk_queue),
            ),
            (
                "triage_front_backend_chosen_total",
                "counter",
                "Requests the policy gave the back end.",
                |b| b.chosen as f64,
            ),
            (
                "triage_front_backend_forwarded_to_total",
                "counter",
                "Requests forwarded to the back end through another.",
                |b| b.forwarded_to as f64,
            ),
            (
                "triage_front_backend_failures_total",
                "counter",
                "Requests that could not reach the back end.",
                |b| b.failures as f64,
            ),
            (
                "triage_front_backend_responses_total",
                "counter",
                "Responses the back end sent.",
                |b| b.responses as f64,
            ),
        ];
        for (name, kind, help, pick) in per {
            fam(&mut o, name, kind, help);
            for b in &self.backends {
                let _ = writeln!(o, "{name}{{backend=\"{}\"}} {}", b.addr, pick(b));
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn snapshot_and_text_agree() {
        let b = Arc::new(Backends::new(&["127.0.0.1:9".parse().unwrap()], 1, 1));
        let d = Dispatcher::new("lard", Default::default(), b.clone()).unwrap();
        let c = Counters::default();
        c.answered(200, Duration::from_millis(2));
        c.answered(503, Duration::from_millis(4));
        c.answered(0, Duration::ZERO);
        d.choose(7).unwrap();
        let m = FrontMetrics::gather(&c, &b, &d, "relay", Duration::from_millis(5));
        assert_eq!(m.requests, 2);
        assert_eq!(m.by_class, [0, 1, 0, 0, 1]);
        assert_eq!(m.aborted, 1);
        assert_eq!(m.lard_targets, 1);
        assert_eq!(m.backends[0].chosen, 1);
        let t = m.prometheus();
        assert!(
            t.contains("triage_front_requests_total{class=\"5xx\"} 1"),
            "{t}"
        );
        assert!(t.contains("triage_front_lard_targets 1"), "{t}");
        assert!(
            t.contains("triage_front_backend_chosen_total{backend=\"127.0.0.1:9\"} 1"),
            "{t}"
        );
        assert!(t.contains("policy=\"lard\",mechanism=\"relay\""), "{t}");
    }
}
