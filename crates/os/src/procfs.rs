//! Facts from `/proc`: per process (CPU time, resident memory, name, command line, thread
//! states, context switches), per CPU (busy and steal time from `/proc/stat`), the list of
//! processes, and the open-file limit. The labs and benchmarks measure other processes with
//! these; the parsers are pure functions, tested on fixed texts.

use std::io;
use std::path::Path;
use std::time::Duration;

/// CPU time (user + system) consumed so far by process `pid`, from `/proc/<pid>/stat`.
pub fn cpu_time(pid: i32) -> io::Result<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat_cpu(&text, clock_ticks())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable /proc/<pid>/stat"))
}

/// CPU time (user + system) of every live process in process group `pgid` (a server and the
/// workers it forked, e.g. nginx's master and workers), from `/proc/<pid>/stat`. Processes that
/// exit meanwhile are skipped.
pub fn group_cpu_time(pgid: i32) -> io::Result<Duration> {
    let ticks = clock_ticks();
    let mut total = Duration::ZERO;
    for pid in try_pids()? {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if parse_stat_pgrp(&text) == Some(pgid) {
            total += parse_stat_cpu(&text, ticks).unwrap_or_default();
        }
    }
    Ok(total)
}

/// The process group (field 5) of a `/proc/<pid>/stat` line.
pub fn parse_stat_pgrp(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// Clock ticks per second of `/proc`'s time fields (`_SC_CLK_TCK`, 100 on Linux).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// utime + stime of a `/proc/<pid>/stat` line (fields 14 and 15, counted after the
/// parenthesised command name, which may contain spaces).
pub fn parse_stat_cpu(stat: &str, ticks_per_sec: u64) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14 -> index 11.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    let ticks = utime + stime;
    Some(Duration::from_nanos(
        ticks.saturating_mul(1_000_000_000) / ticks_per_sec.max(1),
    ))
}

/// Whether process `pid` exists (a zombie counts).
pub fn exists(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Ids of every process on the machine (the numeric entries of `/proc`); empty if `/proc`
/// cannot be read.
pub fn pids() -> Vec<i32> {
    try_pids().unwrap_or_default()
}

/// [`pids`], or why `/proc` cannot be read.
pub fn try_pids() -> io::Result<Vec<i32>> {
    Ok(std::fs::read_dir("/proc")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect())
}

/// The working directory of process `pid`.
pub fn cwd(pid: i32) -> io::Result<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd"))
}

/// The command line of process `pid`, its arguments joined by spaces (`None` if it is gone;
/// empty for a kernel thread or a zombie).
pub fn cmdline(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let text = String::from_utf8_lossy(&raw);
    Some(text.trim_end_matches('\0').replace('\0', " "))
}

/// The command name of process `pid` (`comm`, at most 15 bytes), from `/proc/<pid>/stat`.
pub fn comm(pid: i32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_comm(&s).map(str::to_owned)
}

/// The command name of a `/proc/<pid>/stat` line: the text between the first `(` and the last
/// `)` (a name may itself hold parentheses and spaces).
pub fn stat_comm(stat: &str) -> Option<&str> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    (open < close).then(|| &stat[open + 1..close])
}

/// The state letter of a `/proc/.../stat` line (the field after the `(comm)`: `R` running or
/// runnable, `S` sleeping, `D` waiting on I/O, `Z` zombie...).
pub fn stat_state(stat: &str) -> Option<char> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

/// The state letter of process `pid` (see [`stat_state`]); `None` if it is gone.
pub fn state(pid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_state(&s)
}

/// The state letters of every thread of process `pid` (from `/proc/<pid>/task/*/stat`); empty
/// if it is gone.
pub fn thread_states(pid: i32) -> Vec<char> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .filter_map(|stat| stat_state(&stat))
        .collect()
}

/// Context switches of all threads of process `pid` so far: (voluntary = went to sleep,
/// involuntary = preempted), from `/proc/<pid>/task/*/status`.
pub fn context_switches(pid: i32) -> Option<(u64, u64)> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = (0u64, 0u64);
    for e in dir.flatten() {
        if let Ok(text) = std::fs::read_to_string(e.path().join("status")) {
            let (v, nv) = parse_switches(&text);
            total.0 += v;
            total.1 += nv;
        }
    }
    Some(total)
}

/// `(voluntary_ctxt_switches, nonvoluntary_ctxt_switches)` of a `status` file (0 if absent).
pub fn parse_switches(status: &str) -> (u64, u64) {
    let (mut v, mut nv) = (0, 0);
    for l in status.lines() {
        if let Some(x) = l.strip_prefix("voluntary_ctxt_switches:") {
            v = x.trim().parse().unwrap_or(0);
        } else if let Some(x) = l.strip_prefix("nonvoluntary_ctxt_switches:") {
            nv = x.trim().parse().unwrap_or(0);
        }
    }
    (v, nv)
}

/// Time one CPU spent so far, in clock ticks ([`clock_ticks`] per second), from `/proc/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// user + nice + system + irq + softirq.
    pub busy: u64,
    /// Time the hypervisor gave to others while this virtual CPU wanted to run.
    pub steal: u64,
    /// Everything: busy + idle + iowait + steal.
    pub total: u64,
}

/// Per-CPU time from `/proc/stat`, indexed by CPU number (empty when unreadable).
pub fn cpu_times() -> Vec<CpuTime> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
}

/// Parse the `cpuN` lines of `/proc/stat` (the aggregate `cpu` line is skipped).
pub fn parse_proc_stat(text: &str) -> Vec<CpuTime> {
    let mut v = Vec::new();
    for l in text.lines() {
        let mut f = l.split_whitespace();
        let Some(n) = f.next().and_then(|name| name.strip_prefix("cpu")) else {
            continue;
        };
        let Ok(i) = n.parse::<usize>() else { continue };
        let x: Vec<u64> = f.map(|t| t.parse().unwrap_or(0)).collect();
        let g = |k: usize| x.get(k).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal
        let busy = g(0) + g(1) + g(2) + g(5) + g(6);
        if v.len() <= i {
            v.resize(i + 1, CpuTime::default());
        }
        v[i] = CpuTime {
            busy,
            steal: g(7),
            total: busy + g(3) + g(4) + g(7),
        };
    }
    v
}

/// What the scheduler accounted to one task (`/proc/<pid>/schedstat`): the CGI lever reads a
/// script's own CPU time with it (POS's run/wait rule applied to the process the kernel runs),
/// and the CGI timing splits a script's life into running and waiting for a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedStat {
    /// Time on a CPU (ns): the task's `sum_exec_runtime`, exact (not in clock ticks).
    pub run_ns: u64,
    /// Time runnable but waiting for a CPU (ns), run-queue delay; it includes the time its
    /// cgroup was throttled by a CPU quota while the task was runnable.
    pub wait_ns: u64,
    /// Times it was given a CPU.
    pub slices: u64,
}

/// The scheduler's accounting of task `pid` (its main thread for a process). Readable while the
/// task is a zombie (not yet reaped): the final figures of an exited child.
pub fn schedstat(pid: i32) -> io::Result<SchedStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))?;
    parse_schedstat(&text)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable schedstat"))
}

/// Parse a `/proc/<pid>/schedstat` line: `run_ns wait_ns slices`.
pub fn parse_schedstat(text: &str) -> Option<SchedStat> {
    let mut f = text.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some(SchedStat {
        run_ns: f.next()??,
        wait_ns: f.next()??,
        slices: f.next()??,
    })
}

/// The value of field `name` (e.g. `"VmRSS"`) of a `/proc/<pid>/status` text, trimmed.
pub fn status_field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

/// Resident memory of process `pid` in KiB (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_kib(pid: i32) -> io::Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status_field(&text, "VmRSS")
        .and_then(|v| v.trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no VmRSS in status"))
}

/// Raise this process's soft `RLIMIT_NOFILE` to at least `want` (and the hard limit too when
/// permitted). Returns the soft limit in force afterwards. Children inherit it.
pub fn raise_nofile(want: u64) -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid pointer to an rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur >= want {
        return Ok(lim.rlim_cur);
    }
    let mut new = lim;
    new.rlim_cur = want;
    if new.rlim_max < want {
        new.rlim_max = want;
    }
    // SAFETY: valid pointer to an rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 {
        // Without privilege: go as high as the hard limit allows.
        new = lim;
        new.rlim_cur = lim.rlim_max;
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(new.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_spaces_in_name() {
        let line = "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0";
        assert_eq!(parse_stat_cpu(line, 100), Some(Duration::from_secs(3)));
        assert_eq!(parse_stat_cpu("garbage", 100), None);
        assert_eq!(parse_stat_pgrp(line), Some(1234));
        assert_eq!(parse_stat_pgrp("5 (a) b) S 1 77 5"), Some(77));
        assert_eq!(parse_stat_pgrp("garbage"), None);
    }

    #[test]
    fn status_fields_by_name() {
        let st = "Name:\tsh\nTgid:\t42\nPPid:\t1\nVmRSS:\t  1234 kB\n";
        assert_eq!(status_field(st, "Tgid"), Some("42"));
        assert_eq!(status_field(st, "PPid"), Some("1"));
        assert_eq!(status_field(st, "VmRSS"), Some("1234 kB"));
        assert_eq!(
            status_field(st, "Vm"),
            None,
            "a name is whole, not a prefix"
        );
        assert_eq!(status_field(st, "Pid"), None);
    }

    #[test]
    fn schedstat_line_and_a_running_child() {
        assert_eq!(
            parse_schedstat("1500000 250000 7\n"),
            Some(SchedStat {
                run_ns: 1_500_000,
                wait_ns: 250_000,
                slices: 7
            })
        );
        assert_eq!(parse_schedstat("1 2"), None);
        assert_eq!(parse_schedstat("x 2 3"), None);
        // A child burning CPU shows it, and still does as a zombie (before it is reaped).
        let mut c = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        let pid = c.id() as i32;
        loop {
            if state(pid) == Some('Z') {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let z = schedstat(pid).unwrap();
        assert!(z.run_ns > 1_000_000, "{z:?}");
        assert!(z.slices >= 1, "{z:?}");
        c.wait().unwrap();
        assert!(schedstat(pid).is_err(), "reaped: gone");
    }

    #[test]
    fn stat_fields_after_an_odd_command_name() {
        assert_eq!(stat_state("42 (a) b) R 1 2 3"), Some('R'));
        assert_eq!(stat_state("7 (sleep) S 1"), Some('S'));
        assert_eq!(stat_state("garbage"), None);
        assert_eq!(stat_comm("42 (a) b) R 1 2 3"), Some("a) b"));
        assert_eq!(stat_comm("garbage"), None);
    }

    #[test]
    fn switches_and_cpu_lines_are_parsed() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_switches(status), (12, 3));
        assert_eq!(parse_switches("Name: x\n"), (0, 0));
        let v = parse_proc_stat(
            "cpu  10 1 2 30 4 0 0 0 0 0\ncpu0 5 1 2 10 1 1 1 3 0 0\ncpu1 7 0 0 20 0 0 0 0 0 0\nintr 1\n",
        );
        let t = |busy, steal, total| CpuTime { busy, steal, total };
        assert_eq!(v, vec![t(10, 3, 24), t(7, 0, 27)]);
    }

    #[test]
    fn own_process_and_threads_are_visible() {
        let me = std::process::id() as i32;
        assert!(exists(me) && pids().contains(&me));
        assert!(!exists(i32::MAX));
        let states = thread_states(me);
        assert!(states.contains(&'R'), "{states:?}"); // this thread is running
        let (v, nv) = context_switches(me).unwrap();
        assert!(v + nv > 0);
        assert!(comm(me).is_some_and(|c| !c.is_empty()));
        assert!(state(me).is_some() && state(i32::MAX).is_none());
        let cmd = cmdline(me).unwrap();
        assert!(!cmd.is_empty() && !cmd.contains('\0'), "{cmd:?}");
        assert!(!cpu_times().is_empty());
        assert!(clock_ticks() > 0);
    }

    #[test]
    fn reads_own_process() {
        let me = std::process::id() as i32;
        assert!(rss_kib(me).unwrap() > 0);
        let own = cpu_time(me).unwrap();
        // This test binary is not a group leader necessarily: its group's CPU holds at least
        // its own (plus whatever else the group runs).
        let pgid = nix::unistd::getpgrp().as_raw();
        assert!(group_cpu_time(pgid).unwrap() >= own);
        assert!(raise_nofile(64).unwrap() >= 64);
    }
}
