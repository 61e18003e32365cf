//! Passing a scheduling decision on to the kernel, per task, and taking it back: the
//! *lever* of `triage pos attach` and of triage's own CGI children.
//!
//! - [`LeverKind::Nice`]: `setpriority` to nice -20 (weight 88761 against 1024): orders the
//!   raised task first among the tasks of **its leaf cgroup** (EEVDF orders siblings only).
//! - [`LeverKind::NiceSlice`]: the same plus a 0.1 ms EEVDF slice (`sched_setattr`
//!   `sched_runtime`): an earlier deadline, so it preempts on wake-up.
//! - [`LeverKind::Weight`]: moves the task into a sibling cgroup with the highest weight
//!   ([`weight`]): works across cgroups, costs a cgroup write.
//! - [`LeverKind::Fifo`]: `SCHED_FIFO` at priority 1: ahead of every fair-class task on the
//!   CPU, in any cgroup, but on a second, real-time budget outside the fair class's quota
//!   ([`realtime`]): a labelled reference, not a lever inside one CPU budget.
//!
//! Everything raised is recorded first in a [`journal`] file and restored by
//! [`Lever::lower`], [`Lever::restore_all`], on drop, and after a crash by [`recover`] on the
//! next start. A task that is gone is detached quietly; one that may not be changed gives a
//! one-line error.

pub mod journal;
pub mod realtime;
pub mod weight;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::prio;
use crate::proctrace::Tid;
pub use journal::Saved;

/// The real-time priority of a task raised by [`LeverKind::Fifo`]: the lowest, enough to run
/// ahead of every fair-class task.
pub const FIFO_PRIORITY: i32 = 1;

/// Where the journals live by default.
pub const STATE_DIR: &str = "/run/triage/lever";

/// Which lever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeverKind {
    /// Nice value (see the module docs).
    Nice,
    /// Nice value and a short slice.
    NiceSlice,
    /// A high-weight sibling cgroup.
    Weight,
    /// `SCHED_FIFO` (a real-time budget of its own; see the module docs).
    Fifo,
}

impl LeverKind {
    /// Parse `nice`, `nice+slice`, `weight` or `fifo`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "nice" => Ok(Self::Nice),
            "nice+slice" => Ok(Self::NiceSlice),
            "weight" => Ok(Self::Weight),
            "fifo" => Ok(Self::Fifo),
            _ => Err(format!(
                "unknown lever {s:?} (nice, nice+slice, weight, fifo)"
            )),
        }
    }

    /// The name [`LeverKind::parse`] reads.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Nice => "nice",
            Self::NiceSlice => "nice+slice",
            Self::Weight => "weight",
            Self::Fifo => "fifo",
        }
    }

    /// Whether the lever leaves the tasks it raises on a budget of their own (real-time
    /// time, outside the fair class's quota): a reference, not a lever inside one budget.
    pub fn second_budget(&self) -> bool {
        *self == Self::Fifo
    }
}

/// Why a task could not be raised or restored.
#[derive(Debug, thiserror::Error)]
pub enum LeverError {
    /// The task is gone (it exited): nothing to do, it is detached.
    #[error("task {0} is gone")]
    Gone(Tid),
    /// Not allowed (not root, or another user's process without `CAP_SYS_NICE`).
    #[error("task {tid}: not permitted to change its priority ({what}); run as root")]
    Permission {
        /// The task.
        tid: Tid,
        /// The call that was refused.
        what: String,
    },
    /// Any other failure.
    #[error("task {tid}: {msg}")]
    Other {
        /// The task.
        tid: Tid,
        /// What failed.
        msg: String,
    },
}

impl LeverError {
    fn from_prio(tid: Tid, e: prio::PrioError) -> Self {
        match e {
            prio::PrioError::Permission { .. } => Self::Permission {
                tid,
                what: e.to_string(),
            },
            prio::PrioError::Sys { err, .. } if err.contains("No such process") => Self::Gone(tid),
            e => Self::Other {
                tid,
                msg: e.to_string(),
            },
        }
    }

    fn from_io(tid: Tid, e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ESRCH) | Some(libc::ENOENT) => Self::Gone(tid),
            Some(libc::EPERM) | Some(libc::EACCES) => Self::Permission {
                tid,
                what: e.to_string(),
            },
            _ => Self::Other {
                tid,
                msg: e.to_string(),
            },
        }
    }
}

/// The raised value of each lever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeverConfig {
    /// Which lever.
    pub kind: LeverKind,
    /// Nice value of a raised task (-20: the kernel's highest weight).
    pub nice: i32,
    /// Slice of a raised task with [`LeverKind::NiceSlice`] (the kernel clamps to 0.1..100 ms).
    pub slice: Duration,
}

impl LeverConfig {
    /// `kind` at nice -20 with a 0.1 ms slice.
    pub fn new(kind: LeverKind) -> Self {
        Self {
            kind,
            nice: -20,
            slice: Duration::from_micros(100),
        }
    }
}

/// Raises and restores tasks; see the module docs.
pub struct Lever {
    cfg: LeverConfig,
    journal: Option<journal::Journal>,
    /// Tasks raised now, with what to restore.
    raised: BTreeMap<Tid, Saved>,
    /// Start times read so far, per live task (one `/proc` read per task, not per raise).
    starts: BTreeMap<Tid, u64>,
    /// The cpu controller's mount (weight lever only).
    mount: Option<weight::CpuMount>,
    /// Boost cgroups created, removed when the lever is dropped.
    boosts: BTreeSet<PathBuf>,
    /// Raises and restores made (for metrics).
    raises: u64,
    /// Restores made.
    lowers: u64,
}

impl Lever {
    /// A lever journaling into `state_dir` (see [`STATE_DIR`]).
    pub fn new(cfg: LeverConfig, state_dir: &Path) -> io::Result<Self> {
        let mount = match cfg.kind {
            LeverKind::Weight => Some(weight::cpu_mount()?),
            _ => None,
        };
        Ok(Self {
            cfg,
            journal: Some(journal::Journal::create(state_dir)?),
            raised: BTreeMap::new(),
            starts: BTreeMap::new(),
            mount,
            boosts: BTreeSet::new(),
            raises: 0,
            lowers: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> LeverConfig {
        self.cfg
    }

    /// Whether `tid` is raised now.
    pub fn is_raised(&self, tid: Tid) -> bool {
        self.raised.contains_key(&tid)
    }

    /// Tasks raised now.
    pub fn raised(&self) -> usize {
        self.raised.len()
    }

    /// (raises, restores) made so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.raises, self.lowers)
    }

    /// The journal file.
    pub fn journal_path(&self) -> Option<&Path> {
        self.journal.as_ref().map(|j| j.path())
    }

    /// Raise `tid` (no-op if raised already). [`LeverError::Gone`]: it exited, forget it.
    pub fn raise(&mut self, tid: Tid) -> Result<(), LeverError> {
        if self.raised.contains_key(&tid) {
            return Ok(());
        }
        let start_time = match self.starts.get(&tid) {
            Some(&s) => s,
            None => {
                let s = journal::start_time(tid).ok_or(LeverError::Gone(tid))?;
                self.starts.insert(tid, s);
                s
            }
        };
        let nice = prio::thread_nice(tid).map_err(|e| LeverError::from_prio(tid, e))?;
        let slice_ns = match self.cfg.kind {
            LeverKind::NiceSlice => prio::thread_slice_ns(tid).unwrap_or(0),
            _ => 0,
        };
        let cgroup = match &self.mount {
            Some(m) => Some(weight::task_dir(m, tid).map_err(|e| LeverError::from_io(tid, e))?),
            None => None,
        };
        let policy = match self.cfg.kind {
            LeverKind::Fifo => {
                let p = prio::thread_policy(tid).map_err(|e| LeverError::from_prio(tid, e))?;
                if p != libc::SCHED_OTHER {
                    return Err(LeverError::Other {
                        tid,
                        msg: format!(
                            "already under scheduling policy {p}, not the fair class: not \
                             ours to change"
                        ),
                    });
                }
                Some(p)
            }
            _ => None,
        };
        let saved = Saved {
            tid,
            start_time,
            nice,
            slice_ns,
            cgroup,
            policy,
        };
        if let Some(j) = &mut self.journal {
            j.raised(&saved).map_err(|e| LeverError::Other {
                tid,
                msg: format!("journal: {e}"),
            })?;
        }
        self.raised.insert(tid, saved.clone());
        let r = self.apply(&saved);
        if r.is_err() {
            self.settle(tid);
        } else {
            self.raises += 1;
        }
        r
    }

    /// The hook that raises a child at its start, applied by the child to itself between
    /// fork and exec (so it never runs its program unraised), for the nice levers; `None` for
    /// [`LeverKind::Weight`] and [`LeverKind::Fifo`] (the parent's to make). The parent then calls
    /// [`Lever::adopt`] with the child's id.
    pub fn spawn_hook(&self) -> Option<prio::NiceHook> {
        match self.cfg.kind {
            LeverKind::Nice | LeverKind::NiceSlice => prio::NiceHook::new(self.cfg.nice).ok(),
            LeverKind::Weight | LeverKind::Fifo => None,
        }
    }

    /// Take over `tid`, a child that raised itself at its start with [`Lever::spawn_hook`]
    /// and had nice `base` before (the forking thread's): journal it and hold it raised, so
    /// that [`Lever::lower`], [`Lever::restore_all`], drop and [`recover`] put it back to
    /// `base`. [`LeverError::Gone`]: it already exited; [`LeverError::Permission`]: it could
    /// not raise itself (it runs at another nice value; nothing is held).
    pub fn adopt(&mut self, tid: Tid, base: i32) -> Result<(), LeverError> {
        self.adopt_at(tid, base, self.cfg.nice)
    }

    /// [`Lever::adopt`] a child that raised itself to nice `level` (a graded raise, as
    /// [`Lever::set_level`] sets one, given from its start): held and restored to `base` the
    /// same way.
    pub fn adopt_at(&mut self, tid: Tid, base: i32, level: i32) -> Result<(), LeverError> {
        if self.raised.contains_key(&tid) {
            return Ok(());
        }
        let start_time = journal::start_time(tid).ok_or(LeverError::Gone(tid))?;
        let now = prio::thread_nice(tid).map_err(|e| LeverError::from_prio(tid, e))?;
        if now != level {
            // The child's `setpriority` was refused (no CAP_SYS_NICE): nothing to hold.
            return Err(LeverError::Permission {
                tid,
                what: format!(
                    "it runs at nice {now}, not {level}: setpriority at its start was refused"
                ),
            });
        }
        self.starts.insert(tid, start_time);
        let saved = Saved {
            tid,
            start_time,
            nice: base,
            slice_ns: 0,
            cgroup: None,
            policy: None,
        };
        if let Some(j) = &mut self.journal {
            j.raised(&saved).map_err(|e| LeverError::Other {
                tid,
                msg: format!("journal: {e}"),
            })?;
        }
        self.raised.insert(tid, saved);
        self.raises += 1;
        Ok(())
    }

    fn apply(&mut self, s: &Saved) -> Result<(), LeverError> {
        let tid = s.tid;
        match self.cfg.kind {
            LeverKind::Nice => {
                prio::set_thread_nice(tid, self.cfg.nice).map_err(|e| LeverError::from_prio(tid, e))
            }
            LeverKind::NiceSlice => {
                prio::set_thread_nice(tid, self.cfg.nice)
                    .map_err(|e| LeverError::from_prio(tid, e))?;
                prio::set_thread_slice(tid, Some(self.cfg.slice))
                    .map_err(|e| LeverError::from_prio(tid, e))
            }
            LeverKind::Weight => {
                let m = self.mount.clone().expect("weight lever has a mount");
                let from = s.cgroup.as_deref().expect("weight lever saves the cgroup");
                let b = weight::boost_dir(&m, from).map_err(|e| LeverError::from_io(tid, e))?;
                self.boosts.insert(b.clone());
                weight::move_task(&m, tid, &b).map_err(|e| LeverError::from_io(tid, e))
            }
            LeverKind::Fifo => prio::set_thread_fifo(tid, FIFO_PRIORITY).map_err(|e| match e {
                prio::PrioError::Permission { .. } => fifo_refused(tid),
                e => LeverError::from_prio(tid, e),
            }),
        }
    }

    /// Set a task held raised to nice `nice` (a graded raise, e.g. below the lever's own value
    /// for a raised task that should yield to an older one), still journaled with its value
    /// to restore. Nice levers only: a no-op for [`LeverKind::Weight`], [`LeverKind::Fifo`]
    /// and a task not held.
    pub fn set_level(&mut self, tid: Tid, nice: i32) -> Result<(), LeverError> {
        if !self.raised.contains_key(&tid)
            || matches!(self.cfg.kind, LeverKind::Weight | LeverKind::Fifo)
        {
            return Ok(());
        }
        prio::set_thread_nice(tid, nice).map_err(|e| LeverError::from_prio(tid, e))
    }

    /// Restore `tid` (no-op if not raised). A task that is gone is forgotten quietly.
    pub fn lower(&mut self, tid: Tid) -> Result<(), LeverError> {
        let Some(s) = self.raised.get(&tid).cloned() else {
            return Ok(());
        };
        let r = restore(&s, self.mount.as_ref());
        self.settle(tid);
        self.lowers += 1;
        match r {
            Err(LeverError::Gone(_)) => Ok(()),
            r => r,
        }
    }

    /// `tid` exited: forget it (nothing to restore on a task that is gone).
    pub fn forget(&mut self, tid: Tid) {
        if self.raised.contains_key(&tid) {
            self.settle(tid);
        }
        self.starts.remove(&tid);
    }

    /// Drop `tid` from the raised set and journal it.
    fn settle(&mut self, tid: Tid) {
        self.raised.remove(&tid);
        if let Some(j) = &mut self.journal {
            let _ = j.lowered(tid);
            let _ = j.compact_if_long(&self.raised);
        }
    }

    /// Restore every raised task; errors are returned as lines (tasks gone are not errors).
    pub fn restore_all(&mut self) -> Vec<String> {
        let tids: Vec<Tid> = self.raised.keys().copied().collect();
        tids.into_iter()
            .filter_map(|t| self.lower(t).err().map(|e| e.to_string()))
            .collect()
    }
}

impl Drop for Lever {
    fn drop(&mut self) {
        for e in self.restore_all() {
            tracing::warn!("lever: {e}");
        }
        if let Some(m) = &self.mount {
            for b in &self.boosts {
                weight::remove_boost(m, b);
            }
        }
        if let Some(j) = self.journal.take() {
            j.remove();
        }
    }
}

/// Put one task back as `s` says, if it is still the task that was raised.
fn restore(s: &Saved, mount: Option<&weight::CpuMount>) -> Result<(), LeverError> {
    let tid = s.tid;
    if journal::start_time(tid) != Some(s.start_time) {
        return Err(LeverError::Gone(tid));
    }
    if let Some(cg) = &s.cgroup {
        let m = match mount {
            Some(m) => m.clone(),
            None => weight::cpu_mount().map_err(|e| LeverError::from_io(tid, e))?,
        };
        weight::move_task(&m, tid, cg).map_err(|e| LeverError::from_io(tid, e))?;
    }
    if s.slice_ns != 0 {
        // Raised with a slice (the kernel reports the slice in force, never 0, on kernels with
        // custom slices): back to the one it had. A raise that did not touch the slice leaves
        // alone the one its task asked for (the CGI lever's server threads ask for the
        // shortest one and are raised and restored many times).
        let _ = prio::set_thread_slice(tid, Some(Duration::from_nanos(s.slice_ns)));
    }
    if s.policy.is_some() && prio::thread_policy(tid).is_ok_and(|p| p != libc::SCHED_OTHER) {
        // Raised by the real-time lever: back to the fair class at the nice value it had.
        return prio::set_thread_fair(tid, s.nice).map_err(|e| LeverError::from_prio(tid, e));
    }
    prio::set_thread_nice(tid, s.nice).map_err(|e| LeverError::from_prio(tid, e))
}

/// The error of a `SCHED_FIFO` raise the kernel refused as root: its cgroup has no real-time
/// budget (or the caller lacks `CAP_SYS_NICE`).
fn fifo_refused(tid: Tid) -> LeverError {
    let dir = weight::cpu_mount()
        .ok()
        .and_then(|m| weight::task_dir(&m, tid).ok());
    let budget = dir.as_deref().map(realtime::budget);
    match (dir, budget) {
        (Some(d), Some(Ok(Some(b)))) if b.runtime == Some(Duration::ZERO) => LeverError::Other {
            tid,
            msg: format!(
                "SCHED_FIFO refused: its cgroup {} has no real-time budget (cpu.rt_runtime_us \
                 0); grant one (and its parents') to use the fifo lever, a second budget \
                 outside the CPU quota",
                d.display()
            ),
        },
        _ => LeverError::Permission {
            tid,
            what: "sched_setscheduler (SCHED_FIFO)".into(),
        },
    }
}

/// What [`recover`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// Journals of crashed daemons replayed (and removed).
    pub journals: usize,
    /// Tasks put back.
    pub restored: Vec<Tid>,
    /// Tasks that could not be put back, with why.
    pub failed: Vec<String>,
}

/// Restore what daemons that are gone (crashed, killed) left raised, from their journals in
/// `state_dir`, and remove those journals and any empty boost cgroups they made.
pub fn recover(state_dir: &Path) -> Recovered {
    let mut out = Recovered::default();
    let mount = weight::cpu_mount().ok();
    for path in journal::stale(state_dir) {
        out.journals += 1;
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for s in journal::parse(&text).into_values() {
            let boost = s
                .cgroup
                .as_ref()
                .and_then(|c| mount.as_ref().and_then(|m| weight::boost_dir_name(m, c)));
            match restore(&s, mount.as_ref()) {
                Ok(()) => out.restored.push(s.tid),
                Err(LeverError::Gone(_)) => {}
                Err(e) => out.failed.push(e.to_string()),
            }
            if let (Some(b), Some(m)) = (boost, &mount) {
                weight::remove_boost(m, &b);
            }
        }
        let _ = std::fs::remove_file(&path);
    }
    out
}

#[cfg(test)]
mod tests;
