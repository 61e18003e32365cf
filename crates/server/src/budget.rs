//! One budget per capped resource container (seed 003): the mechanism of `policy::budget`.
//!
//! Every [`PERIOD`] the server measures, per container of [`Containers::budgeted`], what the
//! period used on its behalf: the server's own work (the gate's thread-CPU account of its
//! subtree's bursts, scaled by the process's CPU over all bursts' CPU, so that the runtime's
//! work outside bursts is charged in proportion) and its processes (its cgroup's usage, read
//! through `os`). `policy::budget::split` divides the cap between the two for the next period;
//! the server's part becomes the container's cap in the gate ([`gate::Gate::set_cap`]: divided
//! by the same scale into burst CPU, then multiplied by the slot time the container's bursts
//! held per CPU they got ([`gate::Gate::slot_time_in`]), as the gate counts its caps in slot
//! time, which a burst preempted by the scripts or throttled by a quota holds longer than it
//! runs), the processes' part its cgroup's `cpu.max`.
//!
//! The kernel refills a cgroup's quota whenever `cpu.max` is written, even with the same value:
//! rewriting it every period let the processes spend up to twice their part (a container capped
//! at 0.3 CPU spent 0.46). So the processes' part is written only when it moves, and then at
//! most every `policy::budget::MIN_WRITE_PERIODS` periods (`policy::budget::settle`), and what
//! both sides spend above the cap all the same is a debt the next periods pay back
//! (`policy::budget::Ledger`). The scale and the slot time per CPU are read over the recent
//! periods (`policy::budget::RecentRatio`): a 1 KB page's burst is a few microseconds, so a
//! single period under a small cap says nothing. Whether a side was held back by its
//! part (the gate's [`gate::Gate::held_back_in`], the cgroup's `nr_throttled`) tells the split
//! that it wants more even when the CPU it got says otherwise.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use gate::{CpuAccount, Gate};
use policy::budget::{settle, split, Ledger, RecentRatio, Split, Used, Written};

use crate::containers::{Containers, CPU_PERIOD};

/// How often the budget is split again (the cgroup cap's period).
pub const PERIOD: Duration = CPU_PERIOD;

/// The process CPU charged per unit of burst CPU is kept within `1..=MAX_SCALE`. A 1 KB page's
/// burst is a cache lookup, a few microseconds, while the page costs the process several
/// times that (parsing, writing, polling): 4 to 6 in the containers lab.
const MAX_SCALE: f64 = 16.0;

/// The gate's slot time charged per unit of the bursts' thread CPU is kept within
/// `1..=MAX_SLOT_PER_CPU` (a burst preempted or throttled holds its slot longer than it runs:
/// about 10 in the containers lab, whose server side has a 20% quota on a busy CPU).
const MAX_SLOT_PER_CPU: f64 = 32.0;

/// Both ratios are read once the decayed sum of their denominator (burst CPU) reaches this
/// ([`RecentRatio`]): a period of 1 KB pages under a small cap has a fraction of it.
const MIN_BURST_CPU_S: f64 = 0.5e-3;

/// One capped container whose cap is one budget.
#[derive(Debug)]
struct Item {
    /// Its id.
    id: u32,
    /// Its cap (CPUs).
    cap: f64,
    /// Its subtree's ids (the server's work below it counts too).
    ids: Vec<u32>,
    /// Its cgroup (its processes, children included).
    cg: os::Cgroup,
    /// The split in force.
    last: Split,
    /// Burst CPU of its subtree at the last step.
    server0: Duration,
    /// Its cgroup's usage at the last step.
    procs0: Duration,
    /// What both sides spent above the cap, to pay back.
    ledger: Ledger,
    /// The processes' part last written to the cgroup's `cpu.max` and its age, if any.
    written: Option<Written>,
    /// The gate's count of the container's work held back at its cap, at the last step.
    held0: u64,
    /// The cgroup's count of throttled periods, at the last step.
    throttled0: u64,
    /// Slot time of its subtree's bursts in the gate, at the last step.
    slot0: Duration,
    /// Slot time per burst CPU of its bursts over the recent periods: the gate counts its cap
    /// in slot time, the budget in CPU.
    slot_per_cpu: RecentRatio,
}

/// The state of the budget loop (see the module docs).
#[derive(Debug)]
pub struct OneBudget {
    items: Vec<Item>,
    /// Every container id (for the scale: all bursts against the process's CPU).
    all: Vec<u32>,
    at: Instant,
    process0: Duration,
    bursts0: Duration,
    /// Process CPU per burst CPU over the recent periods.
    scale: RecentRatio,
}

fn sum(acc: &CpuAccount, ids: &[u32]) -> Duration {
    ids.iter().map(|&i| acc.get(i)).sum()
}

impl OneBudget {
    /// The budget loop of `c`, if a container's cap is one budget ([`Containers::budgeted`]).
    pub fn new(c: &Containers) -> Option<Mutex<OneBudget>> {
        let acc = c.account();
        let items: Vec<Item> = c
            .budgeted()
            .into_iter()
            .map(|(id, cap, ids, cg)| Item {
                id,
                cap,
                server0: sum(acc, &ids),
                procs0: cg.cpu_usage().unwrap_or_default(),
                throttled0: cg_throttled(&cg),
                ids,
                cg,
                last: Split::even(cap),
                ledger: Ledger::default(),
                written: None,
                held0: 0,
                slot0: Duration::ZERO,
                slot_per_cpu: RecentRatio::new(1.0),
            })
            .collect();
        if items.is_empty() {
            return None;
        }
        for it in &items {
            tracing::info!(
                "containers: `{}` caps its sites' server work and its processes together at {} \
                 CPU (one budget, split every {PERIOD:?})",
                c.tree().name(it.id).unwrap_or("?"),
                it.cap
            );
        }
        let all = (0..=c.tree().max_id()).collect::<Vec<_>>();
        Some(Mutex::new(OneBudget {
            bursts0: sum(acc, &all),
            all,
            items,
            at: Instant::now(),
            process0: os::process_cpu_time(),
            scale: RecentRatio::new(1.0),
        }))
    }

    /// Measure the period that ended, split every budget again and apply the splits.
    pub fn step(&mut self, acc: &CpuAccount, gate: &Gate) {
        let now = Instant::now();
        let dt = now.duration_since(self.at).as_secs_f64();
        // A tick late by most of a period is followed by one right after it (the interval
        // keeps its schedule): a period of a few milliseconds reads as idle on both sides and
        // would swing the split. It is folded into the next.
        if dt < PERIOD.as_secs_f64() / 2.0 {
            return;
        }
        self.at = now;
        let process = os::process_cpu_time();
        let bursts = sum(acc, &self.all);
        let (dp, db) = (
            process.saturating_sub(self.process0),
            bursts.saturating_sub(self.bursts0),
        );
        self.process0 = process;
        self.bursts0 = bursts;
        let scale = self.scale.add(
            dp.as_secs_f64(),
            db.as_secs_f64(),
            MIN_BURST_CPU_S,
            1.0,
            MAX_SCALE,
        );
        for it in &mut self.items {
            let server = sum(acc, &it.ids);
            let procs = it.cg.cpu_usage().unwrap_or(it.procs0);
            let slot = gate.slot_time_in(it.id).unwrap_or_default();
            let (ds, dc) = (
                slot.saturating_sub(it.slot0).as_secs_f64(),
                server.saturating_sub(it.server0).as_secs_f64(),
            );
            let slot_per_cpu = it
                .slot_per_cpu
                .add(ds, dc, MIN_BURST_CPU_S, 1.0, MAX_SLOT_PER_CPU);
            it.slot0 = slot;
            let held = gate.held_back_in(it.id).unwrap_or(0);
            let throttled = cg_throttled(&it.cg);
            let used = Used {
                server: server.saturating_sub(it.server0).as_secs_f64() * scale / dt,
                procs: procs.saturating_sub(it.procs0).as_secs_f64() / dt,
                server_held: held > it.held0,
                procs_held: throttled > it.throttled0,
            };
            it.held0 = held;
            it.throttled0 = throttled;
            it.server0 = server;
            it.procs0 = procs;
            it.ledger.record(it.cap, used, dt);
            let fair = split(it.cap, it.last, used);
            let budget = it.ledger.budget(it.cap, PERIOD.as_secs_f64());
            let next = settle(it.cap, budget, fair, it.written, used);
            if next.write {
                if let Err(e) = it.cg.set_cpu_max(Some(next.split.procs), CPU_PERIOD) {
                    tracing::debug!("containers: budget of {}: {e}", it.cg.path().display());
                }
                it.written = Some(Written {
                    part: next.split.procs,
                    age: 0,
                });
            } else if let Some(w) = &mut it.written {
                w.age = w.age.saturating_add(1);
            }
            // Process CPU -> burst CPU -> the gate's slot time.
            gate.set_cap(it.id, Some(next.split.server / scale * slot_per_cpu));
            tracing::trace!(
                "containers: budget of {}: used {used:?}, scale {:.2}, slot/CPU {:.2}, debt \
                 {:.4} CPU-s, budget {budget:.3}, next {next:?}",
                it.cg.path().display(),
                scale,
                slot_per_cpu,
                it.ledger.debt
            );
            it.last = next.split;
        }
    }
}

/// The cgroup's count of periods in which its processes were throttled (0 if unreadable).
fn cg_throttled(cg: &os::Cgroup) -> u64 {
    cg.cpu_stat().map_or(0, |s| s.nr_throttled)
}
