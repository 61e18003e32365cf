//! CPU accounting of a CGI lab's server side: the CPU time and context switches of the server's
//! own processes against the cgroup's total ([`CpuSnap`]), the machine's per-CPU busy and steal
//! time ([`CpuTicks`]), and the scripts left running after a point ([`kill_strays`]). The
//! kernel's numbers come from `os` (`os::procfs`, `os::cputime`, cgroups).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::servers::Running;

/// A process of the server side: its `comm` and its CPU time so far, all threads included,
/// with nanosecond precision (the process's CPU-time clock; `/proc`'s utime/stime count 10 ms
/// ticks, too coarse for a one-second window split over a dozen Apache children).
pub fn proc_cpu(pid: i32) -> Option<(String, Duration)> {
    let comm = os::procfs::comm(pid)?;
    Some((comm, os::cputime::process_cpu_time_of(pid)?))
}

/// Processes of `cg` that are not the server's own (scripts, their children). For triage
/// (one server process, [`Running::only`]) every other process is a script, also a child
/// between fork and exec that still bears the server's name (under a tight cap that stage can
/// last a while); for Apache, every process not named [`Running::comm`].
fn scripts_in(cg: &os::Cgroup, srv: &Running) -> Vec<i32> {
    cg.all_pids()
        .unwrap_or_default()
        .into_iter()
        .filter(|&p| match srv.only {
            Some(only) => p != only,
            None => os::procfs::comm(p).is_some_and(|c| c != srv.comm),
        })
        .collect()
}

/// How long the server side must have no script before a point counts as clean: a request
/// sent just before its client stopped may still be on its way to a (throttled) server, which
/// would start its script after a single empty look.
const QUIET: Duration = Duration::from_millis(300);

/// After a point: give the scripts left in `cg` up to `grace` to end by themselves (triage
/// kills a script's process group when its client goes away), then kill the rest (Apache
/// leaves a script whose client went away running until it writes) and wait until none is
/// left (at most 5 s more). Returns how many had to be killed. Returns once no script was
/// seen for `QUIET` (300 ms).
pub fn kill_strays(cg: &os::Cgroup, srv: &Running, grace: Duration) -> usize {
    let t0 = Instant::now();
    let mut empty_since: Option<Instant> = None;
    while t0.elapsed() < grace.max(QUIET) {
        if scripts_in(cg, srv).is_empty() {
            let since = *empty_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= QUIET {
                return 0;
            }
        } else {
            empty_since = None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let end = Instant::now() + Duration::from_secs(5);
    let mut killed = HashSet::new();
    empty_since = None;
    loop {
        let strays = scripts_in(cg, srv);
        let now = Instant::now();
        if strays.is_empty() {
            let since = *empty_since.get_or_insert(now);
            if now.duration_since(since) >= QUIET {
                return killed.len();
            }
        } else {
            empty_since = None;
        }
        if now >= end {
            return killed.len();
        }
        for p in strays {
            // SAFETY: plain kill(2) of a process in our lab's server cgroup (never the server:
            // `scripts_in` leaves it out).
            if unsafe { libc::kill(p, libc::SIGKILL) } == 0 {
                killed.insert(p);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// CPU counters of the server side at one instant.
#[derive(Debug, Clone)]
pub struct CpuSnap {
    /// When it was taken.
    pub at: Instant,
    /// The server-side cgroup's total usage.
    pub total: Duration,
    /// CPU time of each of the server's own processes.
    pub servers: HashMap<i32, Duration>,
    /// Context switches of the server's own processes so far, all threads: (voluntary = went
    /// to sleep, involuntary = preempted).
    pub switches: HashMap<i32, (u64, u64)>,
}

impl CpuSnap {
    /// Read the counters of `cg` now for the server `srv` (see [`Running::only`]).
    pub fn take(cg: &os::Cgroup, srv: &Running) -> CpuSnap {
        let total = cg.cpu_usage().unwrap_or_default();
        let mut servers = HashMap::new();
        let mut switches = HashMap::new();
        for pid in cg.all_pids().unwrap_or_default() {
            if srv.only.is_some_and(|only| only != pid) {
                continue;
            }
            if let Some((comm, t)) = proc_cpu(pid) {
                if comm == srv.comm {
                    servers.insert(pid, t);
                    if let Some(sw) = os::procfs::context_switches(pid) {
                        switches.insert(pid, sw);
                    }
                }
            }
        }
        CpuSnap {
            at: Instant::now(),
            total,
            servers,
            switches,
        }
    }

    /// Context switches of the server processes between `self` and `later`: (voluntary,
    /// involuntary), over the processes seen both times.
    pub fn switches(&self, later: &CpuSnap) -> (u64, u64) {
        let (mut v, mut nv) = (0, 0);
        for (pid, b) in &later.switches {
            if let Some(a) = self.switches.get(pid) {
                v += b.0.saturating_sub(a.0);
                nv += b.1.saturating_sub(a.1);
            }
        }
        (v, nv)
    }

    /// Shares of one CPU between `self` (earlier) and `later`: `(server processes, CGI)`,
    /// where CGI is the cgroup total minus the server processes (scripts come and go; the
    /// server processes are long-lived, so their time is measured exactly).
    pub fn shares(&self, later: &CpuSnap) -> (f64, f64) {
        let dt = later.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let total = later.total.saturating_sub(self.total).as_secs_f64();
        let mut srv = 0.0;
        for (pid, t1) in &later.servers {
            let t0 = self.servers.get(pid).copied().unwrap_or_default();
            srv += t1.saturating_sub(t0).as_secs_f64();
        }
        let srv = srv.min(total);
        (srv / dt, (total - srv).max(0.0) / dt)
    }
}

/// Per-CPU time at one instant (clock ticks, `os::procfs::cpu_times`): what the rest of a shared
/// machine did while a point was measured. The labs record, per point, how busy the server's
/// CPU was with work outside the server side, how busy the client CPU was, and the hypervisor's
/// steal time: on a shared 2-CPU VM these explain much of the spread between repetitions.
#[derive(Debug, Clone, Default)]
pub struct CpuTicks {
    /// When they were read.
    pub at: Option<Instant>,
    /// Per CPU.
    pub cpus: Vec<os::procfs::CpuTime>,
}

impl CpuTicks {
    /// Read the counters now (empty when unreadable).
    pub fn take() -> CpuTicks {
        CpuTicks {
            at: Some(Instant::now()),
            cpus: os::procfs::cpu_times(),
        }
    }

    /// Busy and steal of `cpu` between `self` and `later`, in % of one CPU (NaN if unknown).
    pub fn busy_steal_pct(&self, later: &CpuTicks, cpu: usize) -> (f64, f64) {
        let (Some(a), Some(b)) = (self.cpus.get(cpu), later.cpus.get(cpu)) else {
            return (f64::NAN, f64::NAN);
        };
        let (Some(t0), Some(t1)) = (self.at, later.at) else {
            return (f64::NAN, f64::NAN);
        };
        let dt = t1.duration_since(t0).as_secs_f64().max(1e-9);
        let hz = os::procfs::clock_ticks() as f64;
        let busy = b.busy.saturating_sub(a.busy) as f64 / hz / dt * 100.0;
        let steal = b.steal.saturating_sub(a.steal) as f64 / hz / dt * 100.0;
        (busy, steal)
    }
}
