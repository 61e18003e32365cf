//! The CGI lever (`cgi_lever = "nice"`, docs/kpos.md "triage's own CGI children"): POS's
//! decision reaches the scripts the kernel schedules.
//!
//! - A script started for a request of a worker the gate's policy marks (POS: predicted to
//!   serve text; the server reads the mark during the burst that starts the script) **starts
//!   raised**: the child sets its own nice value to -20 between fork and exec
//!   (`os::prio::NiceHook`), so it never runs its program unraised; once it runs, the lever
//!   journals it (`os::lever::Lever::adopt`) with the nice value to restore.
//! - It is **restored** as soon as its worker is found without the mark at one of its bursts
//!   (relaying the script's output: an image-producing script that prints as it computes
//!   shows the run/wait changes POS's characteristic 2 demotes); the rule is the policy's,
//!   the server only reads `Gate::marked`.
//! - A script that exits raised is forgotten (nothing to restore on a process that is gone);
//!   at shutdown dropping the lever restores every script still raised; after a crash the
//!   next start replays the journal ([`ScriptLever::open`]).
//!
//! nice orders a process only against the tasks of its own leaf cgroup: the scripts must run
//! in the server's cgroup beside their competitors (`cgroups = false`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use os::lever::{Lever, LeverConfig, LeverError, LeverKind};
use os::prio::NiceHook;

use super::stats::CgiStats;

/// The server's lever over its CGI scripts (one for all sites).
pub struct ScriptLever {
    /// Raises journaled and restores made (one lock: a few microseconds per script).
    lever: Mutex<Lever>,
    /// What a raised child applies to itself.
    hook: NiceHook,
    /// A failure was logged (later ones are only counted).
    warned: AtomicBool,
}

impl std::fmt::Debug for ScriptLever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptLever")
            .field("nice", &self.hook.nice())
            .finish()
    }
}

/// What a raised spawn needs: the hook the child applies and the nice value it would have
/// had (the forking thread's), to restore.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    /// Applied by the child before exec.
    pub hook: NiceHook,
    /// The nice value to restore.
    pub base: i32,
}

impl ScriptLever {
    /// Put back what a crashed server's scripts were left at (journals in `state_dir` whose
    /// owner is gone), then a nice lever journaling there. Returns how many tasks were
    /// restored. Fails without the right to create the journal (not root).
    pub fn open(state_dir: &Path) -> std::io::Result<(Self, usize)> {
        let recovered = os::lever::recover(state_dir);
        for f in &recovered.failed {
            tracing::warn!("cgi lever: restoring a crashed run's script: {f}");
        }
        let lever = Lever::new(LeverConfig::new(LeverKind::Nice), state_dir)?;
        let hook = lever
            .spawn_hook()
            .expect("the nice lever raises children at their start");
        Ok((
            Self {
                lever: Mutex::new(lever),
                hook,
                warned: AtomicBool::new(false),
            },
            recovered.restored.len(),
        ))
    }

    fn lock(&self) -> MutexGuard<'_, Lever> {
        self.lever.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Prepare a raised spawn (on the thread that forks).
    pub fn prepare(&self) -> Start {
        Start {
            hook: self.hook,
            base: os::prio::thread_nice(os::prio::current_tid()).unwrap_or(0),
        }
    }

    /// Scripts held raised now.
    pub fn raised(&self) -> usize {
        self.lock().raised()
    }

    fn failed(&self, stats: &CgiStats, e: &LeverError) {
        stats.lever_errors.fetch_add(1, Relaxed);
        if !self.warned.swap(true, Relaxed) {
            tracing::warn!("cgi lever: {e} (further failures are only counted)");
        }
    }

    /// `pid` was started with `start`'s hook: hold it raised. `None` when it is gone already or
    /// could not raise itself (counted as a lever error).
    pub fn adopt(
        self: &Arc<Self>,
        pid: i32,
        start: Start,
        stats: &Arc<CgiStats>,
    ) -> Option<Arc<Raised>> {
        match self.lock().adopt(pid, start.base) {
            Ok(()) => {}
            Err(LeverError::Gone(_)) => return None,
            Err(e) => {
                self.failed(stats, &e);
                return None;
            }
        }
        stats.raised.fetch_add(1, Relaxed);
        Some(Arc::new(Raised {
            lever: self.clone(),
            pid,
            stats: stats.clone(),
            held: AtomicBool::new(true),
        }))
    }
}

/// One script held raised; see the module docs.
#[derive(Debug)]
pub struct Raised {
    /// The lever holding it.
    lever: Arc<ScriptLever>,
    /// The script's process.
    pid: i32,
    /// Where the restores and failures are counted.
    stats: Arc<CgiStats>,
    /// Still raised (neither restored nor exited).
    held: AtomicBool,
}

impl Raised {
    /// Whether the script is still held raised.
    pub fn is_held(&self) -> bool {
        self.held.load(Relaxed)
    }

    /// Restore the script (its worker lost the mark); later calls do nothing.
    pub fn lower(&self) {
        if !self.held.swap(false, Relaxed) {
            return;
        }
        match self.lever.lock().lower(self.pid) {
            Ok(()) => {
                self.stats.lowered.fetch_add(1, Relaxed);
            }
            Err(e) => self.lever.failed(&self.stats, &e),
        }
    }

    /// The script was reaped: forget it (called before its pid can be reused).
    pub fn exited(&self) {
        if self.held.swap(false, Relaxed) {
            self.lever.lock().forget(self.pid);
        }
    }
}
