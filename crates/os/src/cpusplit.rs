//! CPU time split by mode (user, system, idle), the way seed 002 logged its clock-interrupt
//! counters: for the whole machine or one CPU (`/proc/stat`), for one process
//! (`/proc/<pid>/stat` utime and stime) and for one cgroup (v2 `cpu.stat`, v1 `cpuacct.usage`
//! and `cpuacct.stat`). `triage capacity sample` and `triage lab events` read these; the
//! parsers are pure functions, tested on fixed texts.

use std::io;
use std::path::Path;
use std::time::Duration;

use crate::procfs::clock_ticks;

/// Cumulative CPU time by mode. For a process or a cgroup `idle` is zero (it has none: the
/// reader derives idle from the CPUs the group may use and the wall time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Split {
    /// User mode (user + nice).
    pub user: Duration,
    /// Kernel mode (system + irq + softirq).
    pub system: Duration,
    /// Idle (idle + iowait).
    pub idle: Duration,
    /// Time the hypervisor gave to others (steal): neither ours nor idle.
    pub steal: Duration,
}

fn ticks(n: u64, hz: u64) -> Duration {
    Duration::from_nanos(n.saturating_mul(1_000_000_000) / hz.max(1))
}

/// The split of the `cpu` line (`cpu: None`, the whole machine) or of the `cpuN` line of a
/// `/proc/stat` text, its fields in ticks of `hz` per second.
pub fn parse_proc_stat_split(text: &str, cpu: Option<usize>, hz: u64) -> Option<Split> {
    let want = match cpu {
        None => "cpu".to_string(),
        Some(n) => format!("cpu{n}"),
    };
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(want.as_str()))?;
    let x: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse().ok())
        .collect::<Option<Vec<u64>>>()?;
    if x.len() < 4 {
        return None;
    }
    let g = |k: usize| x.get(k).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal
    Some(Split {
        user: ticks(g(0) + g(1), hz),
        system: ticks(g(2) + g(5) + g(6), hz),
        idle: ticks(g(3) + g(4), hz),
        steal: ticks(g(7), hz),
    })
}

/// The machine's split (`cpu: None`) or one CPU's, now.
pub fn machine_split(cpu: Option<usize>) -> io::Result<Split> {
    let text = std::fs::read_to_string("/proc/stat")?;
    parse_proc_stat_split(&text, cpu, clock_ticks()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "no {} line in /proc/stat",
                cpu.map_or("cpu".to_string(), |n| format!("cpu{n}"))
            ),
        )
    })
}

/// utime and stime of a `/proc/<pid>/stat` line (fields 14 and 15, after the parenthesised
/// command name), children not included.
pub fn parse_pid_stat_split(stat: &str, hz: u64) -> Option<Split> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(Split {
        user: ticks(utime, hz),
        system: ticks(stime, hz),
        ..Split::default()
    })
}

/// Process `pid`'s split now (all its threads).
pub fn process_split(pid: i32) -> io::Result<Split> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_pid_stat_split(&text, clock_ticks()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unparsable /proc/{pid}/stat"),
        )
    })
}

/// What one cgroup has used: the precise total and its user/system split.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupUsage {
    /// All CPU time of the group (ns precision on v1, us on v2).
    pub total: Duration,
    /// The user and system parts as the kernel counts them: on v1 `cpuacct.stat` in ticks,
    /// coarser than `total` (so they need not add up to it exactly; both only ever grow).
    /// Split an interval's `total` by the ratio of their differences.
    pub split: Split,
}

/// A v2 `cpu.stat` text (`usage_usec`, `user_usec`, `system_usec`).
pub fn parse_cpu_stat_v2(text: &str) -> Option<GroupUsage> {
    let f = |k: &str| {
        text.lines().find_map(|l| {
            let (a, b) = l.split_once(' ')?;
            (a == k).then(|| b.trim().parse::<u64>().ok())?
        })
    };
    Some(GroupUsage {
        total: Duration::from_micros(f("usage_usec")?),
        split: Split {
            user: Duration::from_micros(f("user_usec")?),
            system: Duration::from_micros(f("system_usec")?),
            ..Split::default()
        },
    })
}

/// v1's `cpuacct.usage` (ns) and `cpuacct.stat` (`user N`, `system N` in ticks of `hz`).
pub fn parse_cpuacct_v1(usage: &str, stat: &str, hz: u64) -> Option<GroupUsage> {
    let total = Duration::from_nanos(usage.trim().parse().ok()?);
    let f = |k: &str| {
        stat.lines().find_map(|l| {
            let (a, b) = l.split_once(' ')?;
            (a == k).then(|| b.trim().parse::<u64>().ok())?
        })
    };
    Some(GroupUsage {
        total,
        split: Split {
            user: ticks(f("user")?, hz),
            system: ticks(f("system")?, hz),
            ..Split::default()
        },
    })
}

/// The usage of the cgroup whose accounting directory is `dir` (a v2 group's directory, or a
/// v1 group's directory in the cpuacct hierarchy, e.g.
/// `/sys/fs/cgroup/cpuacct/system.slice/nginx.service`).
pub fn cgroup_split(dir: &Path) -> io::Result<GroupUsage> {
    let bad = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: unparsable {what}", dir.display()),
        )
    };
    let v1 = dir.join("cpuacct.usage");
    if v1.exists() {
        let usage = std::fs::read_to_string(&v1)?;
        let stat = std::fs::read_to_string(dir.join("cpuacct.stat"))?;
        return parse_cpuacct_v1(&usage, &stat, clock_ticks())
            .ok_or_else(|| bad("cpuacct.usage/cpuacct.stat"));
    }
    let v2 = dir.join("cpu.stat");
    match std::fs::read_to_string(&v2) {
        Ok(t) => parse_cpu_stat_v2(&t).ok_or_else(|| bad("cpu.stat")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} has neither cpuacct.usage (cgroup v1: give the group's directory under the \
                 cpuacct hierarchy) nor cpu.stat (cgroup v2)",
                dir.display()
            ),
        )),
        Err(e) => Err(e),
    }
}

/// This process's own split (all threads, children not included), from `getrusage`.
pub fn self_split() -> Split {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage; RUSAGE_SELF cannot fail with it.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Split {
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
        ..Split::default()
    }
}

/// The number of CPUs this machine has online (at least 1).
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_lines_split_by_mode() {
        let t = "cpu  10 1 2 30 4 5 6 7 0 0\ncpu0 5 1 2 10 1 1 1 3 0 0\nintr 1\n";
        let all = parse_proc_stat_split(t, None, 100).unwrap();
        assert_eq!(all.user, Duration::from_millis(110));
        assert_eq!(all.system, Duration::from_millis(130));
        assert_eq!(all.idle, Duration::from_millis(340));
        assert_eq!(all.steal, Duration::from_millis(70));
        let c0 = parse_proc_stat_split(t, Some(0), 100).unwrap();
        assert_eq!(c0.user, Duration::from_millis(60));
        assert!(parse_proc_stat_split(t, Some(1), 100).is_none());
        assert!(parse_proc_stat_split("cpu x y\n", None, 100).is_none());
    }

    #[test]
    fn pid_stat_and_group_files_split() {
        let line = "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0";
        let s = parse_pid_stat_split(line, 100).unwrap();
        assert_eq!(
            (s.user, s.system),
            (Duration::from_millis(2500), Duration::from_millis(500))
        );
        let g = parse_cpu_stat_v2("usage_usec 3000\nuser_usec 2000\nsystem_usec 1000\n").unwrap();
        assert_eq!(g.total, Duration::from_micros(3000));
        assert_eq!(g.split.user, Duration::from_micros(2000));
        // v1: the precise total beside the split in ticks.
        let g = parse_cpuacct_v1("4100000000\n", "user 300\nsystem 100\n", 100).unwrap();
        assert_eq!(g.total, Duration::from_millis(4100));
        assert_eq!(g.split.user, Duration::from_secs(3));
        assert_eq!(g.split.system, Duration::from_secs(1));
        assert!(parse_cpuacct_v1("x", "user 1\nsystem 1\n", 100).is_none());
        assert!(parse_cpu_stat_v2("usage_usec 1\n").is_none());
    }

    #[test]
    fn reads_this_machine_and_this_process() {
        let m = machine_split(None).unwrap();
        assert!(m.idle + m.user + m.system > Duration::ZERO);
        assert!(machine_split(Some(usize::MAX)).is_err());
        let me = process_split(std::process::id() as i32).unwrap();
        assert!(me.idle == Duration::ZERO);
        let busy = std::time::Instant::now();
        while busy.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        assert!(self_split().user > Duration::ZERO);
        let e = cgroup_split(Path::new("/nonexistent-triage")).unwrap_err();
        assert!(e.to_string().contains("cpu.stat"), "{e}");
    }
}
