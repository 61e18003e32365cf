//! `triage sim pos-fig1`: seed 001 §2, Fig. 1, the example of the effect of POS.
//!
//! Process A needs 3.4 s of CPU and B 2.1 s; same priority, quantum 1 s; B gets the CPU first.
//! Under conventional timesharing (`timeshare`) they alternate every quantum: B finishes at
//! 4.1 s, A at 5.5 s. Under the delayed-switch POS (`delayed`, the paper's reference \[19\]) the
//! scheduler has learnt from the previous run that B needs only 0.1 s more when its second
//! quantum expires, and delays the switch by exactly that: B finishes at 3.1 s, A still at 5.5 s,
//! with two context switches fewer.
//!
//! Both policies run the same two jobs twice through [`crate::cpu::Cpu`] (a `Sched` with one
//! slot); the second run is reported. In the first run the delayed-switch policy has nothing
//! learnt yet and behaves as timesharing; that run is where it learns B's and A's burst lengths
//! from their run/wait history.

use policy::{Nanos, PolicyConfig, Sched, WorkerId, MS, SEC};
use serde::Serialize;

use crate::cpu::{Cpu, CpuEv};
use crate::engine::Engine;
use crate::SimError;

/// Parameters (defaults: the paper's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fig1Config {
    /// CPU A needs.
    pub a: Nanos,
    /// CPU B needs.
    pub b: Nanos,
    /// Time quantum.
    pub quantum: Nanos,
}

impl Default for Fig1Config {
    fn default() -> Self {
        Self {
            a: 3400 * MS,
            b: 2100 * MS,
            quantum: SEC,
        }
    }
}

/// Completion times of A and B in one policy's measured run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ab {
    /// When A finished (s).
    #[serde(rename = "A")]
    pub a: f64,
    /// When B finished (s).
    #[serde(rename = "B")]
    pub b: f64,
}

/// One policy's measured run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fig1Run {
    /// Registry name.
    pub policy: &'static str,
    /// When A and B finished (s).
    pub times: Ab,
    /// Context switches between A and B.
    pub switches: u64,
    /// Quantum expiries turned into a delayed switch.
    pub extensions: u64,
}

/// Result of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fig1Result {
    /// The parameters run.
    pub config: Fig1Config,
    /// Conventional timesharing (`timeshare`).
    pub timesharing: Fig1Run,
    /// The delayed-switch POS (`delayed`).
    pub pos: Fig1Run,
}

/// The paper's numbers: (timesharing A, B), (POS A, B), seconds.
pub const PAPER: ((f64, f64), (f64, f64)) = ((5.5, 4.1), (5.5, 3.1));

const A: WorkerId = 1;
const B: WorkerId = 2;
/// The runs start this far apart (enough for the timesharing priorities to decay to nothing).
const RUN_GAP: Nanos = 100 * SEC;

#[derive(Debug, Clone, Copy)]
enum Ev {
    Cpu(CpuEv),
    Start,
}

impl From<CpuEv> for Ev {
    fn from(e: CpuEv) -> Self {
        Ev::Cpu(e)
    }
}

fn run_policy(name: &'static str, cfg: &Fig1Config) -> Result<Fig1Run, SimError> {
    let policy = policy::build(name, &PolicyConfig::default())?;
    let mut cpu = Cpu::new(Sched::new(1, policy), cfg.quantum);
    let mut eng: Engine<Ev> = Engine::new();
    cpu.register(A, 0);
    cpu.register(B, 0);
    cpu.start(&mut eng);
    let runs = 2u64;
    for r in 0..runs {
        eng.at(r * RUN_GAP, Ev::Start);
    }
    let horizon = runs * RUN_GAP;
    let mut last = (0, 0, 0, 0);
    let mut start = 0;
    let mut done: Vec<(WorkerId, Nanos)> = Vec::new();
    while let Some((now, ev)) = eng.pop_until(horizon) {
        match ev {
            Ev::Start => {
                start = now;
                done.clear();
                last = (cpu.switches(), cpu.extensions(), 0, 0);
                // B is first in the queue, as in the figure.
                cpu.ready(B, cfg.b, &mut eng);
                cpu.ready(A, cfg.a, &mut eng);
            }
            Ev::Cpu(c) => {
                if let Some(w) = cpu.handle(c, &mut eng) {
                    done.push((w, now - start));
                    cpu.block(w, &mut eng);
                }
            }
        }
    }
    let t = |w| {
        done.iter()
            .find(|d| d.0 == w)
            .map(|d| d.1 as f64 / 1e9)
            .ok_or_else(|| SimError::Stuck(format!("{name}: a job did not finish")))
    };
    Ok(Fig1Run {
        policy: name,
        times: Ab { a: t(A)?, b: t(B)? },
        switches: cpu.switches() - last.0,
        extensions: cpu.extensions() - last.1,
    })
}

/// Run the scenario.
pub fn run(cfg: &Fig1Config) -> Result<Fig1Result, SimError> {
    if cfg.a == 0 || cfg.b == 0 || cfg.quantum == 0 {
        return Err(crate::param("a/b/quantum", "must be > 0"));
    }
    if cfg.a.max(cfg.b) >= RUN_GAP / 2 {
        return Err(crate::param("a/b", "jobs must need less than 50 s of CPU"));
    }
    Ok(Fig1Result {
        config: *cfg,
        timesharing: run_policy("timeshare", cfg)?,
        pos: run_policy("delayed", cfg)?,
    })
}

impl Fig1Result {
    /// The `--json` document: exactly
    /// `{"timesharing": {"A": s, "B": s}, "pos": {"A": s, "B": s}}`.
    pub fn json(&self) -> String {
        format!(
            "{{\"timesharing\": {{\"A\": {}, \"B\": {}}}, \"pos\": {{\"A\": {}, \"B\": {}}}}}",
            self.timesharing.times.a, self.timesharing.times.b, self.pos.times.a, self.pos.times.b
        )
    }

    /// The table.
    pub fn table(&self) -> String {
        let c = &self.config;
        let mut s = format!(
            "seed 001 Fig. 1: A needs {} s, B {} s of CPU; quantum {} s; B first\n",
            c.a as f64 / 1e9,
            c.b as f64 / 1e9,
            c.quantum as f64 / 1e9
        );
        s += &format!(
            "{:<24} {:>7} {:>7} {:>9} {:>10}   {:>8} {:>8}\n",
            "policy", "A (s)", "B (s)", "switches", "extended", "paper A", "paper B"
        );
        let paper = [PAPER.0, PAPER.1];
        let default = *c == Fig1Config::default();
        for (run, label, p) in [
            (&self.timesharing, "timesharing (timeshare)", paper[0]),
            (&self.pos, "pos (delayed)", paper[1]),
        ] {
            let (pa, pb) = if default {
                (format!("{}", p.0), format!("{}", p.1))
            } else {
                ("-".into(), "-".into())
            };
            s += &format!(
                "{:<24} {:>7} {:>7} {:>9} {:>10}   {:>8} {:>8}\n",
                label, run.times.a, run.times.b, run.switches, run.extensions, pa, pb
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduces_the_papers_numbers_exactly() {
        let r = run(&Fig1Config::default()).unwrap();
        assert_eq!((r.timesharing.times.a, r.timesharing.times.b), (5.5, 4.1));
        assert_eq!((r.pos.times.a, r.pos.times.b), (5.5, 3.1));
        assert_eq!(r.pos.extensions, 1);
        assert_eq!(r.timesharing.extensions, 0);
        assert!(r.pos.switches < r.timesharing.switches);
        assert_eq!(
            r.json(),
            r#"{"timesharing": {"A": 5.5, "B": 4.1}, "pos": {"A": 5.5, "B": 3.1}}"#
        );
    }
}
