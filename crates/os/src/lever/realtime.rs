//! The real-time budget of a cgroup, which the `SCHED_FIFO` lever ([`super::LeverKind::Fifo`])
//! needs. With real-time group scheduling (cgroup v1's `cpu.rt_runtime_us` and
//! `cpu.rt_period_us`), a real-time task may run only in a cgroup granted real-time time, and
//! a new cgroup is granted none (0): `sched_setscheduler` is refused there. That time is a
//! second budget beside the fair class's quota (`cpu.cfs_quota_us` does not count it), so a
//! task raised this way is not held to the quota of the cgroup it shares with its
//! competitors: a reference, never one of the levers compared inside one budget.
//!
//! [`budget`] reads a cgroup's grant; [`grant`] gives one to a cgroup and, where they have
//! less, to its ancestors (the kernel refuses a child more than its parent has), and the
//! [`RtGrant`] it returns puts every value back, deepest first, when dropped. Without real-time
//! group scheduling (no such files) only the machine-wide limit applies
//! (`/proc/sys/kernel/sched_rt_runtime_us`): nothing to grant.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::weight::CpuMount;

const RUNTIME: &str = "cpu.rt_runtime_us";
const PERIOD: &str = "cpu.rt_period_us";

/// A cgroup's real-time grant: `runtime` of every `period` (`None` runtime: unlimited, -1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Real-time time per period (`None`: unlimited).
    pub runtime: Option<Duration>,
    /// The period.
    pub period: Duration,
}

impl Budget {
    /// The grant as a fraction of one CPU (1.0 when unlimited).
    pub fn share(&self) -> f64 {
        match self.runtime {
            None => 1.0,
            Some(r) => r.as_secs_f64() / self.period.as_secs_f64().max(1e-9),
        }
    }
}

fn read_us(path: &Path) -> io::Result<i64> {
    let s = std::fs::read_to_string(path)?;
    s.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: unexpected contents {s:?}", path.display()),
        )
    })
}

/// The real-time grant of cgroup directory `dir`; `Ok(None)` when the kernel has no
/// real-time group scheduling there (no `cpu.rt_runtime_us`: only the machine-wide limit).
pub fn budget(dir: &Path) -> io::Result<Option<Budget>> {
    let rt = dir.join(RUNTIME);
    if !rt.exists() {
        return Ok(None);
    }
    let runtime = read_us(&rt)?;
    let period = read_us(&dir.join(PERIOD))?;
    Ok(Some(Budget {
        runtime: (runtime >= 0).then(|| Duration::from_micros(runtime as u64)),
        period: Duration::from_micros(period.max(0) as u64),
    }))
}

/// What a [`grant`] changed, put back (deepest first) when dropped.
#[derive(Debug, Default)]
pub struct RtGrant {
    /// Each cgroup changed, top first, with its runtime and period before (us).
    changed: Vec<(PathBuf, i64, i64)>,
}

impl RtGrant {
    /// Whether anything was changed (nothing: no real-time group scheduling here).
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty()
    }

    /// Put back every value changed, deepest first. A cgroup that still holds a real-time
    /// task refuses a runtime of 0 (`EBUSY`): lower its tasks first.
    pub fn undo(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        while let Some((dir, runtime, period)) = self.changed.pop() {
            if !dir.exists() {
                continue;
            }
            if let Err(e) = std::fs::write(dir.join(RUNTIME), runtime.to_string()) {
                errors.push(format!(
                    "{}: {RUNTIME} back to {runtime}: {e}",
                    dir.display()
                ));
                continue;
            }
            let _ = std::fs::write(dir.join(PERIOD), period.to_string());
        }
        errors
    }
}

impl Drop for RtGrant {
    fn drop(&mut self) {
        for e in self.undo() {
            tracing::warn!("real-time budget: {e}");
        }
    }
}

/// Grant cgroup directory `dir` (below `m`'s mount) a real-time budget of `share` of one CPU
/// per `period`, and each ancestor below the mount whose share is smaller as much (at its own
/// period). An empty grant when the kernel has no real-time group scheduling. Errors name the
/// file the kernel refused.
pub fn grant(m: &CpuMount, dir: &Path, share: f64, period: Duration) -> io::Result<RtGrant> {
    let mut g = RtGrant::default();
    if !(share > 0.0 && share <= 1.0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("real-time share {share} outside (0, 1]"),
        ));
    }
    let rel = dir.strip_prefix(&m.dir).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not below {}", dir.display(), m.dir.display()),
        )
    })?;
    if budget(dir)?.is_none() {
        return Ok(g);
    }
    let mut at = m.dir.clone();
    let parts: Vec<_> = rel.components().collect();
    for (i, c) in parts.iter().enumerate() {
        at.push(c);
        let Some(b) = budget(&at)? else {
            continue;
        };
        let last = i + 1 == parts.len();
        let before = (
            b.runtime.map_or(-1, |r| r.as_micros() as i64),
            b.period.as_micros() as i64,
        );
        if !last && b.share() >= share {
            continue;
        }
        let per = if last { period } else { b.period };
        let runtime = (share * per.as_micros() as f64).round() as i64;
        let write = |file: &str, v: i64| {
            std::fs::write(at.join(file), v.to_string()).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("{}: writing {v}: {e}", at.join(file).display()),
                )
            })
        };
        g.changed.push((at.clone(), before.0, before.1));
        if last && per.as_micros() as i64 != before.1 {
            // The runtime must fit the period at each write: first none, then the period.
            write(RUNTIME, 0)?;
            write(PERIOD, per.as_micros() as i64)?;
        }
        write(RUNTIME, runtime)?;
    }
    Ok(g)
}
