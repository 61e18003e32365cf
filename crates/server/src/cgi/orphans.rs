//! No script process outlives its request, or the server, with or without cgroups.
//!
//! Cgroups hold everything a script starts; without them a script can leave its process group
//! (`setsid`, a double fork) and keep running. So, in every mode:
//! - every script and everything it starts carries a mark in its environment,
//!   `TRIAGE_CGI=<run>.<request>` (`run` names this server's run, `request` the request);
//! - the server is the child subreaper of its scripts (`os::reaper`): an escaped process whose
//!   parent dies is re-parented to the server; [`Orphans::sweep`] (every half second) kills
//!   and reaps adopted processes whose request is over, leaves those of running requests
//!   alone (as a request cgroup would), and reaps adopted processes that have exited (the
//!   server's children other than the script leaders, which their guards reap);
//! - the run is recorded in a small state file (`cgi_state`, see docs/cgi.md): a server
//!   started after a crash (`kill -9`) reads the previous run there and kills every process
//!   still marked with it ([`Orphans::take_over`]), then records its own; a clean stop kills
//!   what is left of its own run and removes the file.
//!
//! A script that empties its environment and daemonizes escapes the restart clean-up (not the
//! sweep of a running server, which goes by parentage); cgroups catch that one too.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// The environment variable that marks script processes.
pub const MARK: &str = "TRIAGE_CGI";

/// The processes of one server's scripts. See the module docs.
#[derive(Debug)]
pub struct Orphans {
    run: String,
    seq: AtomicU64,
    /// Requests whose script (the group leader) has not been reaped yet.
    running: Mutex<HashSet<u64>>,
    /// Adopted processes killed and not reaped yet.
    killed: Mutex<HashSet<i32>>,
    /// Script leaders (reaped by their own guards, never by the sweep).
    leaders: Mutex<HashSet<i32>>,
    state_file: Mutex<Option<PathBuf>>,
}

impl Default for Orphans {
    fn default() -> Self {
        Self::new()
    }
}

/// A name for this run: the server's pid and start time (unique on the machine).
fn run_name() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{t:x}", std::process::id())
}

impl Orphans {
    /// A new run's bookkeeping (no state file, no subreaper yet: see [`Orphans::take_over`]).
    pub fn new() -> Self {
        Self {
            run: run_name(),
            seq: AtomicU64::new(0),
            running: Mutex::new(HashSet::new()),
            killed: Mutex::new(HashSet::new()),
            leaders: Mutex::new(HashSet::new()),
            state_file: Mutex::new(None),
        }
    }

    /// This run's name (the part of the mark before the `.`).
    pub fn run(&self) -> &str {
        &self.run
    }

    /// Become the subreaper of the scripts, kill what a previous run recorded in `state_file`
    /// left behind, and record this run there (its directory is created). Returns how many
    /// leftover processes were killed.
    pub fn take_over(&self, state_file: Option<&Path>) -> io::Result<usize> {
        if let Err(e) = os::reaper::set_child_subreaper() {
            tracing::warn!("cgi: cannot become the subreaper of scripts ({e}): processes that leave their group are out of reach");
        }
        let Some(path) = state_file else {
            return Ok(0);
        };
        let mut killed = 0;
        if let Ok(prev) = std::fs::read_to_string(path) {
            let prev = prev.trim();
            if !prev.is_empty() && prev != self.run {
                killed = kill_marked(prev);
                if killed > 0 {
                    tracing::warn!(
                        "cgi: killed {killed} process(es) left by a previous run ({prev}, {})",
                        path.display()
                    );
                }
            }
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, format!("{}\n", self.run))?;
        *self.lock_state() = Some(path.to_owned());
        Ok(killed)
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, Option<PathBuf>> {
        self.state_file.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A request's script is about to start: its number and its mark (`KEY`, `VALUE`).
    pub fn begin(&self) -> (u64, (String, String)) {
        let n = self.seq.fetch_add(1, Relaxed);
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(n);
        (n, (MARK.to_owned(), format!("{}.{n}", self.run)))
    }

    /// Request `n`'s script was started as process `pid` (its own guard reaps it).
    pub fn started(&self, pid: i32) {
        self.leaders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(pid);
    }

    /// Script leader `pid` has been reaped.
    pub fn reaped(&self, pid: i32) {
        self.leaders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&pid);
    }

    /// Request `n`'s script has been reaped (or never started): what it left is an orphan.
    pub fn end(&self, n: u64) {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&n);
    }

    /// Kill the adopted processes of requests that are over and reap those killed before;
    /// returns how many were killed now.
    pub fn sweep(&self) -> usize {
        let prefix = format!("{}.", self.run);
        let found = os::reaper::orphans(MARK, prefix.as_bytes());
        let mut n = 0;
        {
            let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            let mut killed = self.killed.lock().unwrap_or_else(|p| p.into_inner());
            for (pid, value) in found {
                let req = std::str::from_utf8(&value[prefix.len()..])
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok());
                // A script leader is reaped by its own guard; only its request's end makes
                // the rest orphans.
                if req.is_some_and(|r| running.contains(&r)) {
                    continue;
                }
                os::reaper::kill(pid);
                killed.insert(pid);
                n += 1;
            }
        }
        self.reap_killed();
        if n > 0 {
            tracing::info!("cgi: killed {n} process(es) left behind by finished scripts");
        }
        n
    }

    /// Reap the adopted processes that have exited: those killed here, and any other child
    /// that has exited and is not a script leader (a member of a killed process group that
    /// was re-parented to the server, a daemon that ended by itself). In `triage serve` the
    /// scripts are the server's only children.
    fn reap_killed(&self) {
        let mut killed = self.killed.lock().unwrap_or_else(|p| p.into_inner());
        killed.retain(|&pid| !os::reaper::reap(pid));
        let leaders = self.leaders.lock().unwrap_or_else(|p| p.into_inner());
        for pid in os::reaper::zombie_children() {
            if !leaders.contains(&pid) {
                os::reaper::reap(pid);
            }
        }
    }

    /// The server stops: kill every process of this run still there (waiting up to a second
    /// for them to go), and remove the state file.
    pub fn shut_down(&self) {
        let prefix = format!("{}.", self.run);
        for _ in 0..100 {
            let left = os::reaper::orphans(MARK, prefix.as_bytes());
            if left.is_empty() {
                break;
            }
            {
                let mut killed = self.killed.lock().unwrap_or_else(|p| p.into_inner());
                for (pid, _) in left {
                    os::reaper::kill(pid);
                    killed.insert(pid);
                }
            }
            self.reap_killed();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        self.reap_killed();
        if let Some(p) = self.lock_state().take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Kill every process marked with run `run`, until none is left (they may be forking);
/// returns how many were killed.
fn kill_marked(run: &str) -> usize {
    let prefix = format!("{run}.");
    let mut total = 0;
    for _ in 0..20 {
        let found = os::reaper::marked(MARK, prefix.as_bytes());
        if found.is_empty() {
            break;
        }
        for (pid, _) in &found {
            os::reaper::kill(*pid);
        }
        total += found.len();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    total
}

/// The default state file for a server listening on `listen`: in `$XDG_RUNTIME_DIR/triage`,
/// `/run/triage` for root, else `<temp dir>/triage-<uid>`, named after the address. `None`
/// for port 0 (a new port each run: there is no previous run to find).
pub fn default_state_file(listen: std::net::SocketAddr) -> Option<PathBuf> {
    if listen.port() == 0 {
        return None;
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let dir = match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("triage"),
        _ if uid == 0 => PathBuf::from("/run/triage"),
        _ => std::env::temp_dir().join(format!("triage-{uid}")),
    };
    let name: String = listen
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    Some(dir.join(format!("cgi-{name}.run")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_name_the_run_and_the_request() {
        let o = Orphans::new();
        let (a, (k, v)) = o.begin();
        let (b, _) = o.begin();
        assert_eq!(k, MARK);
        assert_eq!(v, format!("{}.{a}", o.run()));
        assert_ne!(a, b);
        o.end(a);
        assert!(!o.running.lock().unwrap().contains(&a));
        assert!(o.running.lock().unwrap().contains(&b));
    }

    #[test]
    fn default_state_files() {
        assert_eq!(default_state_file("127.0.0.1:0".parse().unwrap()), None);
        let p = default_state_file("127.0.0.1:8080".parse().unwrap()).unwrap();
        assert!(
            p.to_string_lossy().ends_with("cgi-127_0_0_1_8080.run"),
            "{p:?}"
        );
    }
}
