//! What to follow, resolved to task ids: a pid and its descendants, the processes of a
//! cgroup, or the processes running an executable of a given name.

use std::io;
use std::path::{Path, PathBuf};

use super::Tid;

/// A set of processes to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// This process and every descendant (all their threads).
    Pid(i32),
    /// Every process in this cgroup directory (its `cgroup.procs`).
    Cgroup(PathBuf),
    /// Every process whose command name (`comm`) or executable's file name is this.
    Exe(String),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Pid(p) => write!(f, "pid {p} and its descendants"),
            Target::Cgroup(p) => write!(f, "cgroup {}", p.display()),
            Target::Exe(n) => write!(f, "processes named {n}"),
        }
    }
}

/// The processes of `target` now (not their threads): an error names what is missing (no
/// such pid, no such cgroup).
pub fn processes(target: &Target) -> io::Result<Vec<i32>> {
    match target {
        Target::Pid(p) => {
            if !Path::new(&format!("/proc/{p}")).exists() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no process {p}"),
                ));
            }
            Ok(descendants(*p))
        }
        Target::Cgroup(dir) => {
            let text = std::fs::read_to_string(dir.join("cgroup.procs")).map_err(|e| {
                io::Error::new(e.kind(), format!("{}: {e} (not a cgroup?)", dir.display()))
            })?;
            Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
        }
        Target::Exe(name) => Ok(crate::procfs::pids()
            .into_iter()
            .filter(|&p| exe_matches(p, name))
            .collect()),
    }
}

/// Every task (thread) of `target`'s processes now.
pub fn tasks(target: &Target) -> io::Result<Vec<Tid>> {
    Ok(processes(target)?.into_iter().flat_map(threads).collect())
}

/// `pid` and its descendants (through `/proc/<pid>/task/<tid>/children`), parents first.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        for t in threads(p) {
            let kids =
                std::fs::read_to_string(format!("/proc/{p}/task/{t}/children")).unwrap_or_default();
            for c in kids.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        i += 1;
    }
    out
}

/// The threads of process `pid` (just `pid` if its task list cannot be read).
pub fn threads(pid: i32) -> Vec<Tid> {
    match std::fs::read_dir(format!("/proc/{pid}/task")) {
        Ok(d) => d
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => vec![pid],
    }
}

/// Whether process `pid` runs an executable named `name` (its `comm`, or the file name of
/// `/proc/<pid>/exe`).
pub fn exe_matches(pid: i32, name: &str) -> bool {
    if crate::procfs::comm(pid).as_deref() == Some(name) {
        return true;
    }
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
        .is_some_and(|f| f == name)
}

/// The cgroup directories (one per mounted hierarchy that has the `cpu` controller, or the
/// unified one) that task `tid` is in, from `/proc/<tid>/cgroup`: a v2 line `0::/path`, or
/// the v1 line listing `cpu`.
pub fn cpu_cgroup(tid: Tid) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/cgroup")).ok()?;
    parse_cpu_cgroup(&text)
}

/// The `cpu` controller's path of a `/proc/<pid>/cgroup` text (a v1 line whose controllers
/// include `cpu`, else the v2 line `0::`).
pub fn parse_cpu_cgroup(text: &str) -> Option<String> {
    let mut v2 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        if ctrl.split(',').any(|c| c == "cpu") {
            return Some(path.to_owned());
        }
        if ctrl.is_empty() {
            v2 = Some(path.to_owned());
        }
    }
    v2
}
