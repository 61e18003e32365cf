//! The cgroup-weight lever: a raised task is moved into a sibling cgroup of its own
//! (`<parent>/triage-pos-boost`) with the highest CPU weight, and moved back when lowered. It
//! works across cgroups, where a nice value orders only the tasks of one leaf cgroup, at the
//! cost of a cgroup write (about 100 us, up to milliseconds).

use std::io;
use std::path::{Path, PathBuf};

use crate::proctrace::Tid;

/// Name of the boost cgroup created beside a raised task's cgroup.
pub const BOOST_NAME: &str = "triage-pos-boost";

/// The cpu controller's mount: its directory and whether it is cgroup v2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuMount {
    /// Mount point.
    pub dir: PathBuf,
    /// cgroup v2 (unified) rather than v1.
    pub v2: bool,
}

/// The cpu controller's mount of this machine, from `/proc/self/mountinfo`.
pub fn cpu_mount() -> io::Result<CpuMount> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")?;
    parse_cpu_mount(&text)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no cgroup cpu controller mounted"))
}

/// A v1 `cgroup` mount whose options include `cpu`, else a `cgroup2` mount whose
/// `cgroup.controllers` lists `cpu` (the check is the caller's: here the first `cgroup2`).
pub fn parse_cpu_mount(mountinfo: &str) -> Option<CpuMount> {
    let mut v2 = None;
    for line in mountinfo.lines() {
        let (pre, post) = line.split_once(" - ")?;
        let dir = pre.split_whitespace().nth(4)?;
        let mut p = post.split_whitespace();
        let (fstype, _src, opts) = (p.next()?, p.next()?, p.next().unwrap_or(""));
        if fstype == "cgroup" && opts.split(',').any(|o| o == "cpu") {
            return Some(CpuMount {
                dir: dir.into(),
                v2: false,
            });
        }
        if fstype == "cgroup2" && v2.is_none() {
            let has_cpu = std::fs::read_to_string(Path::new(dir).join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "cpu"));
            if has_cpu {
                v2 = Some(CpuMount {
                    dir: dir.into(),
                    v2: true,
                });
            }
        }
    }
    v2
}

/// The cgroup directory of task `tid` in the cpu hierarchy.
pub fn task_dir(m: &CpuMount, tid: Tid) -> io::Result<PathBuf> {
    let rel = crate::proctrace::targets::cpu_cgroup(tid)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no task {tid}")))?;
    Ok(m.dir.join(rel.trim_start_matches('/')))
}

/// The boost cgroup beside `dir` (created with the highest weight if missing).
pub fn boost_dir(m: &CpuMount, dir: &Path) -> io::Result<PathBuf> {
    let parent = if dir == m.dir {
        dir
    } else {
        dir.parent().unwrap_or(dir)
    };
    let b = parent.join(BOOST_NAME);
    if !b.exists() {
        std::fs::create_dir(&b)?;
        if m.v2 {
            std::fs::write(b.join("cpu.weight"), "10000")?;
        } else {
            std::fs::write(b.join("cpu.shares"), "262144")?;
        }
    }
    Ok(b)
}

/// Move task `tid` into cgroup directory `dir` (v1: the thread alone; v2: its process).
pub fn move_task(m: &CpuMount, tid: Tid, dir: &Path) -> io::Result<()> {
    let file = if m.v2 { "cgroup.procs" } else { "tasks" };
    std::fs::write(dir.join(file), tid.to_string())
}

/// Remove a boost cgroup (best effort), once the lever has put back every task it raised.
/// Tasks still in it are ones no lever holds: children a raised task forked (and, on v1,
/// threads it created), which start in their parent's cgroup as they inherit a nice value.
/// Each is moved where its creator is now (the process of a thread, else the parent
/// process), or to the cgroup above the boost cgroup when that is unknown or the boost
/// cgroup itself; then the empty cgroup is removed.
pub fn remove_boost(m: &CpuMount, dir: &Path) {
    if dir.file_name().is_none_or(|n| n != BOOST_NAME) {
        return;
    }
    let file = if m.v2 { "cgroup.procs" } else { "tasks" };
    let above = dir.parent().unwrap_or(&m.dir);
    for tid in std::fs::read_to_string(dir.join(file))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<Tid>().ok())
    {
        let to = creator(tid)
            .and_then(|c| task_dir(m, c).ok())
            .filter(|d| d != dir)
            .unwrap_or_else(|| above.to_owned());
        if move_task(m, tid, &to).is_err() {
            let _ = move_task(m, tid, above);
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// The task that created `tid`: its process when `tid` is another thread of it, else its
/// parent process (`/proc/<tid>/status`).
fn creator(tid: Tid) -> Option<Tid> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |name| -> Option<Tid> { crate::procfs::status_field(&status, name)?.parse().ok() };
    let tgid = field("Tgid")?;
    if tgid != tid {
        return Some(tgid);
    }
    field("PPid").filter(|&p| p > 0)
}

/// The boost cgroup [`boost_dir`] would use beside `dir`, without creating it.
pub fn boost_dir_name(m: &CpuMount, dir: &Path) -> Option<PathBuf> {
    let parent = if dir == m.dir { dir } else { dir.parent()? };
    Some(parent.join(BOOST_NAME))
}

/// The cpu-hierarchy cgroup directory of task `tid` and every task in it now (v1 `tasks`,
/// v2 `cgroup.threads`): the tasks a nice value orders it against.
pub fn cgroup_members(tid: Tid) -> io::Result<(PathBuf, Vec<Tid>)> {
    let m = cpu_mount()?;
    let dir = task_dir(&m, tid)?;
    let file = if m.v2 { "cgroup.threads" } else { "tasks" };
    let text = std::fs::read_to_string(dir.join(file))?;
    Ok((
        dir,
        text.lines().filter_map(|l| l.trim().parse().ok()).collect(),
    ))
}

/// Whether the kernel groups tasks by session (autogroup): then nice orders a task only
/// against the tasks of its own session, unless they live in a cgroup of their own.
pub fn autogroup_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
        .is_ok_and(|s| s.trim() == "1")
}

/// The autogroup of task `tid` (`/proc/<tid>/autogroup`: `/autogroup-N nice M`).
pub fn autogroup(tid: Tid) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/autogroup")).ok()?;
    s.split_whitespace().next().map(str::to_owned)
}
