//! Per-process facts from `/proc` (CPU time, resident memory) and the open-file limit, for
//! benchmarks that measure another process (`triage bench static`).

use std::io;
use std::time::Duration;

/// CPU time (user + system) consumed so far by process `pid`, from `/proc/<pid>/stat`.
pub fn cpu_time(pid: i32) -> io::Result<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat_cpu(&text, clock_ticks())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable /proc/<pid>/stat"))
}

fn clock_ticks() -> u64 {
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

/// Resident memory of process `pid` in KiB (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_kib(pid: i32) -> io::Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
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
    }

    #[test]
    fn reads_own_process() {
        let me = std::process::id() as i32;
        assert!(rss_kib(me).unwrap() > 0);
        cpu_time(me).unwrap();
        assert!(raise_nofile(64).unwrap() >= 64);
    }
}
