//! The server's request and connection counters, and the Prometheus text exposition of
//! them and of the gate served on the admin address (`/metrics`), plus a JSON view of recent
//! PL/LRQ samples (`/samples`).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use gate::shard::{Counter, Gauge};
use gate::Gate;

/// The statuses of nearly every response: counted per serving thread (`gate::shard`), so that
/// a response writes no cache line that another core writes too; the others in one shared
/// table.
const HOT: [u16; 6] = [200, 206, 304, 404, 400, 503];

/// Request and connection counters, written through its methods.
#[derive(Debug)]
pub struct Metrics {
    /// Responses of the [`HOT`] statuses, per thread.
    hot_requests: [Counter; HOT.len()],
    /// Body bytes of the [`HOT`] statuses' responses, per thread.
    hot_bytes: [Counter; HOT.len()],
    requests: Vec<AtomicU64>,
    bytes: Vec<AtomicU64>,
    conns_accepted: AtomicU64,
    conns_refused: AtomicU64,
    conns_timed_out: AtomicU64,
    conns_reclaimed: AtomicU64,
    conns_peak: AtomicU64,
    conns_open: AtomicU64,
    /// Open connections parked (idle, without HTTP state or buffers), for operators and for
    /// the tests that check parking happens. Per thread: a connection parks after every
    /// response.
    conns_parked: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            hot_requests: Default::default(),
            hot_bytes: Default::default(),
            requests: (0..600).map(|_| AtomicU64::new(0)).collect(),
            bytes: (0..600).map(|_| AtomicU64::new(0)).collect(),
            conns_accepted: AtomicU64::new(0),
            conns_refused: AtomicU64::new(0),
            conns_timed_out: AtomicU64::new(0),
            conns_reclaimed: AtomicU64::new(0),
            conns_peak: AtomicU64::new(0),
            conns_open: AtomicU64::new(0),
            conns_parked: Gauge::default(),
        }
    }
}

impl Metrics {
    /// A connection was accepted: it is open until [`Metrics::conn_closed`].
    pub fn conn_accepted(&self) {
        self.conns_accepted.fetch_add(1, Relaxed);
        let open = self.conns_open.fetch_add(1, Relaxed) + 1;
        self.conns_peak.fetch_max(open, Relaxed);
    }

    /// An accepted connection was closed.
    pub fn conn_closed(&self) {
        self.conns_open.fetch_sub(1, Relaxed);
    }

    /// A connection was refused (over `max_conns`).
    pub fn conn_refused(&self) {
        self.conns_refused.fetch_add(1, Relaxed);
    }

    /// A connection was closed by a timeout (it is still counted open until closed).
    pub fn conn_timed_out(&self) {
        self.conns_timed_out.fetch_add(1, Relaxed);
    }

    /// An idle connection was closed to make room for a newcomer (at `max_conns`).
    pub fn conn_reclaimed(&self) {
        self.conns_reclaimed.fetch_add(1, Relaxed);
    }

    /// The most connections open at once since the last call, which starts a new period at
    /// the connections open now.
    pub fn take_peak_conns(&self) -> u64 {
        let open = self.conns_open.load(Relaxed);
        self.conns_peak.swap(open, Relaxed).max(open)
    }

    /// Connections open now.
    pub fn open_conns(&self) -> u64 {
        self.conns_open.load(Relaxed)
    }

    /// A connection was parked (it is idle and holds no HTTP state).
    pub fn conn_parked(&self) {
        self.conns_parked.add(1);
    }

    /// A parked connection woke up (bytes arrived) or closed.
    pub fn conn_unparked(&self) {
        self.conns_parked.add(-1);
    }

    /// Connections parked now.
    pub fn parked_conns(&self) -> u64 {
        self.conns_parked.get()
    }

    /// One finished response.
    pub fn record(&self, status: u16, bytes: u64) {
        if let Some(h) = HOT.iter().position(|&s| s == status) {
            self.hot_requests[h].add(1);
            self.hot_bytes[h].add(bytes);
            return;
        }
        let i = (status as usize).min(599);
        self.requests[i].fetch_add(1, Relaxed);
        self.bytes[i].fetch_add(bytes, Relaxed);
    }

    /// Responses with `status` so far.
    pub fn requests(&self, status: u16) -> u64 {
        match HOT.iter().position(|&s| s == status) {
            Some(h) => self.hot_requests[h].get(),
            None => self.requests[(status as usize).min(599)].load(Relaxed),
        }
    }

    /// Body bytes of the responses with `status` so far.
    fn bytes(&self, status: u16) -> u64 {
        match HOT.iter().position(|&s| s == status) {
            Some(h) => self.hot_bytes[h].get(),
            None => self.bytes[(status as usize).min(599)].load(Relaxed),
        }
    }

    /// All responses so far.
    pub fn total_requests(&self) -> u64 {
        let hot: u64 = self.hot_requests.iter().map(Counter::get).sum();
        hot + self.requests.iter().map(|a| a.load(Relaxed)).sum::<u64>()
    }
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The Prometheus text exposition.
pub fn render(gate: &Gate, m: &Metrics) -> String {
    let snap = gate.snapshot();
    let s = gate.samples();
    let counters = gate.counters();
    let mut o = String::with_capacity(4096);
    let policy = gate.policy_name();
    macro_rules! metric {
        ($name:expr, $kind:expr, $help:expr, $val:expr) => {
            let _ = writeln!(
                o,
                "# HELP {} {}\n# TYPE {} {}\n{} {}",
                $name, $help, $name, $kind, $name, $val
            );
        };
    }
    let _ = writeln!(
        o,
        "# HELP triage_info Server configuration.\n# TYPE triage_info gauge\ntriage_info{{policy=\"{policy}\",gate=\"{}\"}} 1",
        if gate.enabled() { "on" } else { "off" }
    );
    metric!(
        "triage_slots",
        "gauge",
        "CPU slots of the gate.",
        snap.slots
    );
    metric!("triage_pl", "gauge", "PL: slots busy now.", snap.busy);
    metric!(
        "triage_lrq",
        "gauge",
        "LRQ: workers in the ready queue now.",
        snap.queued
    );
    metric!(
        "triage_pl_samples_total",
        "counter",
        "PL/LRQ samples taken (every 10 ms).",
        s.count()
    );
    metric!(
        "triage_pl_busy_sum",
        "counter",
        "Sum of busy slots over all samples (PL).",
        s.sum_busy()
    );
    metric!(
        "triage_lrq_sum",
        "counter",
        "Sum of ready-queue lengths over all samples (LRQ).",
        s.sum_queued()
    );
    metric!(
        "triage_bottleneck_samples_total",
        "counter",
        "Samples with more workers wanting a slot than slots, and more than one ready.",
        s.bottleneck()
    );
    let slp = snap
        .stats
        .slp
        .map_or("NaN".to_string(), |v| secs(v).to_string());
    metric!(
        "triage_slp_seconds",
        "gauge",
        "Current SLP (long-wait threshold); NaN if the policy has none.",
        slp
    );
    let rw = snap.stats.rw.map_or("NaN".to_string(), |v| v.to_string());
    metric!(
        "triage_rw",
        "gauge",
        "Current RW (run/wait change threshold); NaN if the policy has none.",
        rw
    );
    metric!(
        "triage_policy_promotions_total",
        "counter",
        "Workers placed at the head of the ready queue.",
        snap.stats.promotions
    );
    metric!(
        "triage_policy_demotions_total",
        "counter",
        "Marked workers sent to the back.",
        snap.stats.demotions
    );
    metric!(
        "triage_policy_starvation_rescues_total",
        "counter",
        "Workers served out of policy order by the starvation guard.",
        snap.stats.starvation_rescues
    );
    metric!(
        "triage_bursts_total",
        "counter",
        "Bursts run (slots granted).",
        counters.bursts
    );
    metric!(
        "triage_queued_bursts_total",
        "counter",
        "Bursts that waited in the ready queue.",
        counters.queued_bursts
    );
    metric!(
        "triage_rounds_total",
        "counter",
        "Scheduling rounds opened (an idle gate collecting every worker ready at once).",
        counters.rounds
    );
    metric!(
        "triage_streak_bursts_total",
        "counter",
        "Acquisitions that continued a streak (no real wait) without opening a round.",
        counters.streak_bursts
    );
    metric!(
        "triage_slot_moves_total",
        "counter",
        "CPU slots moved between the gate's lanes (per-core ready queues).",
        counters.slot_moves
    );
    metric!(
        "triage_gate_lanes",
        "gauge",
        "Lanes of the gate (per-core ready queues).",
        gate.lanes()
    );
    metric!(
        "triage_boost_errors_total",
        "counter",
        "Kernel priority changes that failed.",
        counters.boost_errors
    );
    metric!(
        "triage_workers",
        "gauge",
        "Workers in existence, busy or idle (prefork pool size; idle ones a crowd left behind are forgotten).",
        gate.workers()
    );
    metric!(
        "triage_connections_open",
        "gauge",
        "Open client connections.",
        m.conns_open.load(Relaxed)
    );
    metric!(
        "triage_connections_parked",
        "gauge",
        "Open connections parked: idle, holding no HTTP state or buffers.",
        m.conns_parked.get()
    );
    metric!(
        "triage_connections_accepted_total",
        "counter",
        "Accepted client connections.",
        m.conns_accepted.load(Relaxed)
    );
    metric!(
        "triage_connections_refused_total",
        "counter",
        "Connections refused with 503 (max_conns).",
        m.conns_refused.load(Relaxed)
    );
    metric!(
        "triage_connections_timed_out_total",
        "counter",
        "Connections closed by a header, keep-alive or send timeout.",
        m.conns_timed_out.load(Relaxed)
    );
    metric!(
        "triage_connections_reclaimed_total",
        "counter",
        "Idle connections closed to make room at max_conns.",
        m.conns_reclaimed.load(Relaxed)
    );
    let _ = writeln!(
        o,
        "# HELP triage_requests_total Responses by status.\n# TYPE triage_requests_total counter"
    );
    for i in 0..m.requests.len() as u16 {
        let v = m.requests(i);
        if v > 0 {
            let _ = writeln!(o, "triage_requests_total{{status=\"{i}\"}} {v}");
        }
    }
    let cpu = os::cpusplit::self_split();
    let _ = writeln!(
        o,
        "# HELP triage_process_cpu_seconds_total CPU time of the server process by mode \
         (triage capacity sample --metrics reads it).\n# TYPE triage_process_cpu_seconds_total counter"
    );
    for (mode, d) in [("user", cpu.user), ("system", cpu.system)] {
        let _ = writeln!(
            o,
            "triage_process_cpu_seconds_total{{mode=\"{mode}\"}} {:.6}",
            d.as_secs_f64()
        );
    }
    let _ = writeln!(o, "# HELP triage_response_bytes_total Body bytes sent by status.\n# TYPE triage_response_bytes_total counter");
    for i in 0..m.bytes.len() as u16 {
        let v = m.bytes(i);
        if m.requests(i) > 0 {
            let _ = writeln!(o, "triage_response_bytes_total{{status=\"{i}\"}} {v}");
        }
    }
    o
}

/// Recent PL/LRQ samples as JSON: `{"slots":1,"samples":[[t_ns,busy,queued],...]}`.
pub fn samples_json(gate: &Gate) -> String {
    let r = gate.samples().recent();
    let mut o = String::with_capacity(32 + r.len() * 24);
    let _ = write!(o, "{{\"slots\":{},\"samples\":[", gate.slots());
    for (i, s) in r.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        let _ = write!(o, "[{},{},{}]", s.t_ns, s.busy, s.queued);
    }
    o.push_str("]}");
    o
}
