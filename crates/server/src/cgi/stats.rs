//! What CGI counts: [`CgiStats`] per site, the `Tracker` that counts a response that never
//! reached its end.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::timing::{ClassTimes, ScriptTiming};

/// Counters (all monotonic).
#[derive(Debug, Default)]
pub struct CgiStats {
    /// Scripts started.
    pub started: AtomicU64,
    /// Responses whose body was relayed to the end.
    pub completed: AtomicU64,
    /// Requests refused before starting a script (404, 403, 501, 413...).
    pub rejected: AtomicU64,
    /// Scripts that could not be started.
    pub spawn_failed: AtomicU64,
    /// Malformed output or no headers (502).
    pub malformed: AtomicU64,
    /// Timeouts, before (504) or after the headers.
    pub timeouts: AtomicU64,
    /// Outputs cut at `max_output`.
    pub output_limited: AtomicU64,
    /// Scripts killed because the client went away.
    pub client_gone: AtomicU64,
    /// Scripts run in a cgroup of their own.
    pub in_cgroup: AtomicU64,
    /// CPU time of the request cgroups, summed when they are removed (nanoseconds).
    pub cpu_ns: AtomicU64,
    /// Requests that had to wait for a place under `max_running`.
    pub queued: AtomicU64,
    /// Requests that waited `timeout` for a place and got 503.
    pub queue_timeouts: AtomicU64,
    /// Requests waiting for a place now (a gauge).
    pub waiting: AtomicU64,
    /// Scripts started raised (the CGI lever: their worker was marked).
    pub raised: AtomicU64,
    /// Raised scripts restored while still running (their worker lost the mark).
    pub lowered: AtomicU64,
    /// Raises or restores that failed (no permission, journal...).
    pub lever_errors: AtomicU64,
    /// Raised scripts restored because their own CPU time passed the text budget
    /// (`cgi_lever = "nice+budget"`), before their worker lost the mark.
    pub lowered_budget: AtomicU64,
    /// Scripts raised as the oldest of the tail (`cgi_lever = "nice+tail"`).
    pub tail_heads: AtomicU64,
    /// Scripts of marked workers started unraised because their program's last execution
    /// ran past the text budget (`cgi_lever = "nice+budget+program"`).
    pub predicted_long: AtomicU64,
    /// Where requests' time went, per class (gate, start, run, run queue, relay...).
    pub times: Arc<ClassTimes>,
}

/// Kills a spawned task when dropped.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Counts a script whose response did not reach its end as "client gone" when dropped.
pub(crate) struct Tracker {
    pub stats: Arc<CgiStats>,
    pub script: Arc<str>,
    done: bool,
    /// The request's timing: told when the output has been relayed to its end.
    pub timing: Option<Arc<ScriptTiming>>,
}

impl Tracker {
    /// A script's response starts: counted as client gone unless it reaches its end.
    pub fn new(stats: Arc<CgiStats>, script: Arc<str>) -> Self {
        Self {
            stats,
            script,
            done: false,
            timing: None,
        }
    }

    /// The response reached its end.
    pub fn done(&mut self) {
        if !self.done {
            self.done = true;
            self.stats.completed.fetch_add(1, Relaxed);
            if let Some(t) = &self.timing {
                t.relayed();
            }
        }
    }
    /// Finished otherwise (error already counted).
    pub fn settle(&mut self) {
        self.done = true;
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        if !self.done {
            self.stats.client_gone.fetch_add(1, Relaxed);
            tracing::info!(script = %self.script, "cgi: client went away: script's process group killed");
        }
    }
}
