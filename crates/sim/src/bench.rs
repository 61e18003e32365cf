//! `triage sim bench`: events per second of the engine and of the scenarios' models, measured
//! on this machine in one run, against the target of 1 million events per second. The only
//! module that reads a clock (wall time, to measure speed; results never depend on it).

use std::time::Instant;

use policy::{PolicyConfig, Tunable, SEC};
use serde::Serialize;

use crate::cluster::{self, ClusterConfig};
use crate::engine::Engine;
use crate::trace::{Trace, TraceConfig};
use crate::web::{self, WebConfig};
use crate::SimError;

/// The target rate.
pub const TARGET: f64 = 1e6;

/// One measurement.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    /// Which model or scenario.
    pub name: String,
    /// Events processed.
    pub events: u64,
    /// Wall-clock seconds taken.
    pub seconds: f64,
    /// `events / seconds`.
    pub events_per_sec: f64,
    /// `events_per_sec / TARGET`.
    pub vs_target: f64,
}

fn measure(
    name: &str,
    seconds: f64,
    mut step: impl FnMut() -> Result<u64, SimError>,
) -> Result<BenchRow, SimError> {
    let t0 = Instant::now();
    let mut events = 0u64;
    let mut runs = 0u32;
    while runs == 0 || t0.elapsed().as_secs_f64() < seconds {
        events += step()?;
        runs += 1;
    }
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    let eps = events as f64 / secs;
    Ok(BenchRow {
        name: name.into(),
        events,
        seconds: crate::stats::round(secs, 3),
        events_per_sec: eps.round(),
        vs_target: crate::stats::round(eps / TARGET, 2),
    })
}

/// The engine alone: a hold model with `pending` events, each pop scheduling one new event at
/// a pseudo-random delay (the classic priority-queue benchmark).
fn hold(pending: usize, n: u64) -> u64 {
    let mut e: Engine<u32> = Engine::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % 1_000_000
    };
    for i in 0..pending {
        e.at(rnd(), i as u32);
    }
    for _ in 0..n {
        if let Some((_, ev)) = e.pop() {
            e.after(rnd(), ev);
        }
    }
    e.processed()
}

/// Run the benchmarks, about `seconds` (0.05 to 60) each.
pub fn run(seconds: f64) -> Result<Vec<BenchRow>, SimError> {
    if !(seconds.is_finite() && (0.05..=60.0).contains(&seconds)) {
        return Err(crate::param(
            "duration",
            format!("must be in 50ms..60s (got {seconds} s)"),
        ));
    }
    let mut rows = vec![measure("engine: hold model, 10k pending", seconds, || {
        Ok(hold(10_000, 1_000_000))
    })?];
    let exp1 = WebConfig::default();
    rows.push(measure("web: exp 1, timeshare, 1 trial", seconds, || {
        Ok(web::run(&exp1)?.events)
    })?);
    let pos = WebConfig {
        policy: "pos".into(),
        policy_cfg: PolicyConfig {
            slp: Tunable::Fixed(20 * SEC),
            rw: Tunable::Fixed(3),
            starvation_bound: None,
            ..PolicyConfig::default()
        },
        ..WebConfig::default()
    };
    rows.push(measure("web: exp 1, pos RW=3, 1 trial", seconds, || {
        Ok(web::run(&pos)?.events)
    })?);
    let trace = Trace::generate(&TraceConfig {
        requests: 100_000,
        ..TraceConfig::default()
    })?;
    let cl = ClusterConfig {
        nodes: 16,
        policy: "lard".into(),
        dispatch: Default::default(),
        cache: 32 << 20,
        costs: Default::default(),
        disk: Default::default(),
        warmup: 0.25,
        prewarm: true,
    };
    rows.push(measure(
        "cluster: lard, 16 nodes, 100k requests",
        seconds,
        || Ok(cluster::run(&cl, &trace)?.events),
    )?);
    Ok(rows)
}

/// The table.
pub fn table(rows: &[BenchRow]) -> String {
    let mut s = format!(
        "{:<42} {:>12} {:>9} {:>14} {:>10}\n",
        "model", "events", "seconds", "events/s", "vs 1M/s"
    );
    for r in rows {
        s += &format!(
            "{:<42} {:>12} {:>9.3} {:>14.0} {:>9.2}x\n",
            r.name, r.events, r.seconds, r.events_per_sec, r.vs_target
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_model_serves_every_event() {
        assert_eq!(hold(100, 1000), 1000);
    }
}
