//! Whether processes are still running, and where: `/proc/<pid>/stat` and `/proc/<pid>/cwd`,
//! for code that must see a process (and its children) gone.

use std::io;
use std::path::PathBuf;

/// The state letter of a `/proc/<pid>/stat` line (the field after the parenthesised command
/// name, which may contain spaces): `R`, `S`, `Z`, ...
pub fn parse_stat_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether process `pid` has ended: gone, or a zombie waiting for its parent to reap it.
pub fn ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => parse_stat_state(&s).is_none_or(|c| c == 'Z'),
    }
}

/// The ids of every process now (those `/proc` lists).
pub fn pids() -> io::Result<Vec<i32>> {
    Ok(std::fs::read_dir("/proc")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect())
}

/// The working directory of process `pid`.
pub fn cwd(pid: i32) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_follows_the_command_name_even_with_spaces() {
        assert_eq!(parse_stat_state("12 (a b) c) Z 1 2"), Some('Z'));
        assert_eq!(parse_stat_state("12 (sh) S 1"), Some('S'));
        assert_eq!(parse_stat_state("garbage"), None);
    }

    #[test]
    fn this_process_runs_here() {
        let me = std::process::id() as i32;
        assert!(!ended(me));
        assert!(pids().unwrap().contains(&me));
        assert_eq!(cwd(me).unwrap(), std::env::current_dir().unwrap());
        assert!(ended(i32::MAX));
    }
}
