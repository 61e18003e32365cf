//! Keeping every process a server starts within its reach, with or without cgroups:
//! - [`set_child_subreaper`]: this process becomes the *child subreaper* of its descendants
//!   (`prctl(PR_SET_CHILD_SUBREAPER)`): a process whose parent dies (a script that
//!   daemonized with a double fork and `setsid`) is re-parented to it instead of to init, so
//!   it stays in reach and can be killed and reaped;
//! - [`marked`] and [`orphans`]: processes are recognised by a mark in their environment
//!   (`KEY=VALUE`, inherited by everything a script starts), found among all processes (after
//!   a crash, to kill a previous run's leftovers) or among this process's children (adopted
//!   orphans);
//! - [`kill`], [`zombie_children`] and [`reap`]: `SIGKILL` a process, find the children that
//!   have exited, and collect an adopted child's exit.

use std::io;

/// Make this process the child subreaper of its descendants (see the module docs).
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process is a child subreaper.
pub fn is_child_subreaper() -> bool {
    let mut v: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer.
    let r = unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut v as *mut libc::c_int) };
    r == 0 && v != 0
}

/// The parent pid of a `/proc/<pid>/stat` line (the field after the state).
pub fn parse_stat_ppid(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The value of `key` in a `/proc/<pid>/environ` text (`KEY=VALUE` entries separated by NUL).
pub fn parse_environ<'a>(environ: &'a [u8], key: &str) -> Option<&'a [u8]> {
    environ.split(|&b| b == 0).find_map(|e| {
        e.strip_prefix(key.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"="))
    })
}

/// The value of `key` in the environment process `pid` started with (`None`: no such variable,
/// a process gone or a zombie, or one this process may not inspect).
pub fn env_value(pid: i32, key: &str) -> Option<Vec<u8>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    parse_environ(&raw, key).map(<[u8]>::to_vec)
}

/// Every process (other than this one) whose environment holds `key` with a value starting
/// with `prefix`, with that value.
pub fn marked(key: &str, prefix: &[u8]) -> Vec<(i32, Vec<u8>)> {
    let me = std::process::id() as i32;
    crate::procfs::pids()
        .into_iter()
        .filter(|&p| p != me)
        .filter_map(|p| env_value(p, key).map(|v| (p, v)))
        .filter(|(_, v)| v.starts_with(prefix))
        .collect()
}

/// The children of this process whose environment holds `key` with a value starting with
/// `prefix` (adopted orphans of its scripts, or the scripts themselves), with that value.
/// Zombies have no readable environment and are not listed.
pub fn orphans(key: &str, prefix: &[u8]) -> Vec<(i32, Vec<u8>)> {
    let me = std::process::id() as i32;
    crate::procfs::pids()
        .into_iter()
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| parse_stat_ppid(&s))
                == Some(me)
        })
        .filter_map(|p| env_value(p, key).map(|v| (p, v)))
        .filter(|(_, v)| v.starts_with(prefix))
        .collect()
}

/// The children of this process that have exited and wait to be reaped (zombies).
pub fn zombie_children() -> Vec<i32> {
    let me = std::process::id() as i32;
    crate::procfs::pids()
        .into_iter()
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                parse_stat_ppid(&s) == Some(me) && crate::procfs::stat_state(&s) == Some('Z')
            })
        })
        .collect()
}

/// `SIGKILL` process `pid` (errors ignored: it may be gone).
pub fn kill(pid: i32) {
    if pid > 0 {
        // SAFETY: plain syscall.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Collect the exit of child `pid` if it has ended (`true`), without blocking.
pub fn reap(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: waitpid on one pid with a valid status pointer.
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_and_environ_parsers() {
        assert_eq!(parse_stat_ppid("12 (a b) c) S 34 12 12 0"), Some(34));
        assert_eq!(parse_stat_ppid("garbage"), None);
        let env = b"A=1\0MARK=run-7.3\0B=\0";
        assert_eq!(parse_environ(env, "MARK"), Some(&b"run-7.3"[..]));
        assert_eq!(parse_environ(env, "B"), Some(&b""[..]));
        assert_eq!(parse_environ(env, "MAR"), None);
        assert_eq!(parse_environ(env, "C"), None);
    }

    #[test]
    fn a_marked_child_is_found_killed_and_reaped() {
        let mark = format!("t{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("OS_REAPER_TEST", &mark)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Until it has exec'd, the child shows the environment it was forked with.
        let mut found = Vec::new();
        for _ in 0..200 {
            found = orphans("OS_REAPER_TEST", mark.as_bytes());
            if !found.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(found, vec![(pid, mark.clone().into_bytes())]);
        assert!(marked("OS_REAPER_TEST", mark.as_bytes())
            .iter()
            .any(|(p, _)| *p == pid));
        kill(pid);
        let reaped = (0..500).any(|_| {
            let r = reap(pid);
            if !r {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            r
        });
        if !reaped {
            let _ = child.kill();
        }
        // Already reaped above (an error then), or reaped here after the kill.
        let _ = child.wait();
        assert!(reaped, "the killed child was reaped");
    }

    #[test]
    fn subreaper_can_be_set() {
        // Set in a child process, not in the test harness itself.
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "reaper::tests::subreaper_child", "--nocapture"])
            .env("OS_REAPER_SUBREAPER_CHILD", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    #[test]
    fn subreaper_child() {
        if std::env::var_os("OS_REAPER_SUBREAPER_CHILD").is_none() {
            return;
        }
        set_child_subreaper().unwrap();
        assert!(is_child_subreaper());
    }
}
