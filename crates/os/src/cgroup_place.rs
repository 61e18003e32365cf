//! Where triage may build its cgroup v2 tree, as current distributions set cgroup v2 up.
//!
//! cgroup v2 has two rules that decide where a tree with the `cpu` controller can live:
//! - a controller is usable in a cgroup only when its parent lists it in
//!   `cgroup.subtree_control`, and the parent may list it only when it is in its own
//!   `cgroup.controllers` (so it must be enabled in every ancestor on the way down);
//! - "no internal processes": a cgroup other than the root that holds processes cannot
//!   enable controllers for its children (`cgroup.subtree_control` answers `EBUSY`).
//!
//! [`place`] looks, in this order, for:
//! 1. **the root** cgroup (exempt from the second rule): the tree goes right below it;
//! 2. **in place**: the cgroup the process was started in offers the controllers and holds no
//!    other process. The process moves into a leaf below it (`triage-self-<pid>-<start>`), and
//!    the cgroup enables the controllers for its children; the tree stays inside the limits the
//!    cgroup was given (the lab's CPU quota, a container's cap). Under systemd this is a
//!    *delegated* unit only (`systemd-run --scope -p Delegate=yes`, or `Delegate=yes` in a
//!    service: systemd marks such a cgroup with the `trusted.delegate` extended attribute);
//!    a unit that is not delegated belongs to systemd, which may undo what triage writes there;
//! 3. **beside** the service manager's cgroups, at the root of the v2 mount (as root: its own
//!    `<mount>/<name>`, with the controllers enabled in the root's `cgroup.subtree_control`);
//!    the process stays where it was.
//!
//! When none works, [`NoPlace`] says for each what was missing: which controller, which
//! cgroup's file, and which `errno` the kernel answered. A failed attempt undoes what it did.
//! [`Placement::release`] undoes a placement: it disables what it enabled, moves the process
//! (and any child left in its leaf) back where it was, and removes the leaf.
//!
//! The controllers are a parameter (`cpu` for triage; the tests build real trees with the
//! `hugetlb` controller, which obeys the same rules, where v2 has no `cpu`).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Prefix of the leaf a process moves into when it places its tree in its own cgroup.
pub const LEAF_PREFIX: &str = "triage-self-";

/// How the place was found (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceKind {
    /// The process is in the v2 root cgroup.
    Root,
    /// In the cgroup the process was started in; the process moved into a leaf below it.
    InPlace,
    /// In place, in a systemd unit delegated to it (`trusted.delegate`).
    Delegated,
    /// Its own cgroup at the root of the v2 mount, beside the service manager's.
    Beside,
}

impl std::fmt::Display for PlaceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PlaceKind::Root => "root",
            PlaceKind::InPlace => "in place",
            PlaceKind::Delegated => "delegated systemd unit",
            PlaceKind::Beside => "beside the service manager",
        })
    }
}

/// What [`place`] is asked for.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The v2 mount point: the root cgroup as this process sees it.
    pub mount: &'a Path,
    /// The cgroup `pid` is in (a directory under `mount`).
    pub origin: &'a Path,
    /// The process to place (its own: `std::process::id()`; tests place a child).
    pub pid: i32,
    /// Controllers the tree must have (`cpu`).
    pub required: &'a [&'a str],
    /// Controllers enabled where available (`cpuset`).
    pub optional: &'a [&'a str],
    /// Whether a place beside the service manager may be made (needs root).
    pub allow_beside: bool,
    /// Whether systemd manages the hierarchy (`/run/systemd/system` exists): then a cgroup of
    /// a unit is used in place only when delegated.
    pub systemd: bool,
}

/// A place found by [`place`]. Dropping it undoes nothing: call [`Placement::release`].
#[derive(Debug)]
pub struct Placement {
    /// How it was found.
    pub kind: PlaceKind,
    /// The directory under which triage makes its `<name>` subtrees.
    pub base: PathBuf,
    /// The cgroup the process was in.
    pub origin: PathBuf,
    /// The leaf the process moved into (`None`: it stayed in `origin`).
    pub leaf: Option<PathBuf>,
    /// The controllers `base` enables for its children (required, and the optional ones that
    /// could be enabled).
    pub controllers: Vec<String>,
    /// Attempts refused before this one, said plainly (for the log).
    pub refused: Vec<String>,
    /// `(cgroup, controller)` this placement added to `cgroup.subtree_control`, in order.
    enabled: Vec<(PathBuf, String)>,
    /// The process placed.
    pid: i32,
}

/// No place: one line per attempt, each naming the controller, file and errno that refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no place for a cgroup v2 tree with [{}]: {}", .wanted.join(" "), .refused.join("; "))]
pub struct NoPlace {
    /// The controllers asked for.
    pub wanted: Vec<String>,
    /// Why each attempt failed.
    pub refused: Vec<String>,
}

fn errno_text(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let name = match n {
                libc::EACCES => "EACCES",
                libc::EPERM => "EPERM",
                libc::EBUSY => "EBUSY",
                libc::ENOENT => "ENOENT",
                libc::EOPNOTSUPP => "EOPNOTSUPP",
                libc::EINVAL => "EINVAL",
                libc::EROFS => "EROFS",
                libc::ESRCH => "ESRCH",
                _ => "",
            };
            if name.is_empty() {
                format!("errno {n} ({e})")
            } else {
                format!("{name} ({e})")
            }
        }
        None => e.to_string(),
    }
}

fn words(p: &Path) -> Result<Vec<String>, String> {
    fs::read_to_string(p)
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .map_err(|e| format!("reading {}: {}", p.display(), errno_text(&e)))
}

fn write_file(p: &Path, v: &str) -> io::Result<()> {
    let mut f = fs::OpenOptions::new().write(true).open(p)?;
    f.write_all(v.as_bytes())
}

fn pids_in(d: &Path) -> Vec<i32> {
    fs::read_to_string(d.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect()
}

/// A process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: skip past the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether `pid` is still the process that started at `start`.
pub(crate) fn owner_alive(pid: i32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

/// The leaf name of process `pid` that started at `start`.
pub fn leaf_name(pid: i32, start: u64) -> String {
    format!("{LEAF_PREFIX}{pid}-{start}")
}

/// `(pid, start)` of a leaf name.
pub fn parse_leaf_name(name: &str) -> Option<(i32, u64)> {
    let (p, s) = name.strip_prefix(LEAF_PREFIX)?.split_once('-')?;
    Some((p.parse().ok()?, s.parse().ok()?))
}

/// Whether `dir` is a cgroup delegated by systemd (`trusted.delegate`, or `user.delegate` for a
/// user manager's units).
pub fn systemd_delegated(dir: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    for attr in [c"trusted.delegate", c"user.delegate"] {
        let mut buf = [0u8; 8];
        // SAFETY: valid NUL-terminated strings and a buffer of the length given.
        let n = unsafe {
            libc::getxattr(
                c.as_ptr(),
                attr.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n > 0 && buf[0] == b'1' {
            return true;
        }
    }
    false
}

/// Whether a cgroup's name is a systemd unit's (`.scope`, `.service`, `.slice`).
pub fn is_systemd_unit(dir: &Path) -> bool {
    let n = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    n.ends_with(".scope") || n.ends_with(".service") || n.ends_with(".slice")
}

/// Enable `ctl` in `dir`'s `cgroup.subtree_control` if it is not there; `Ok(true)` when this
/// call added it.
fn enable(dir: &Path, ctl: &str) -> Result<bool, String> {
    let p = dir.join("cgroup.subtree_control");
    if words(&p)?.iter().any(|c| c == ctl) {
        return Ok(false);
    }
    write_file(&p, &format!("+{ctl}")).map_err(|e| {
        let why = match e.raw_os_error() {
            Some(libc::EBUSY) | Some(libc::EOPNOTSUPP) => {
                let others = pids_in(dir);
                format!(
                    "; {} holds processes {others:?} (the no internal processes rule)",
                    dir.display()
                )
            }
            Some(libc::ENOENT) => format!(
                "; {} does not list {ctl} in its cgroup.controllers",
                dir.display()
            ),
            _ => String::new(),
        };
        format!("writing +{ctl} to {}: {}{why}", p.display(), errno_text(&e))
    })?;
    Ok(true)
}

/// Undo additions to `cgroup.subtree_control`, last first; errors are returned, not hidden.
fn disable(enabled: &[(PathBuf, String)]) -> Result<(), String> {
    for (dir, ctl) in enabled.iter().rev() {
        let p = dir.join("cgroup.subtree_control");
        write_file(&p, &format!("-{ctl}"))
            .map_err(|e| format!("writing -{ctl} to {}: {}", p.display(), errno_text(&e)))?;
    }
    Ok(())
}

/// Why `dir` does not offer `ctl` (its parent's `subtree_control` lacks it), or `None` if it does.
fn missing_controller(dir: &Path, ctl: &str) -> Option<String> {
    let have = match words(&dir.join("cgroup.controllers")) {
        Ok(w) => w,
        Err(e) => return Some(e),
    };
    if have.iter().any(|c| c == ctl) {
        return None;
    }
    let parent = dir.parent().map(|p| {
        let sc = words(&p.join("cgroup.subtree_control")).unwrap_or_default();
        format!(
            ": its parent {} enables only [{}] in cgroup.subtree_control",
            p.display(),
            sc.join(" ")
        )
    });
    Some(format!(
        "{ctl} is not in {}/cgroup.controllers ([{}]){}",
        dir.display(),
        have.join(" "),
        parent.unwrap_or_default()
    ))
}

/// Enable the required controllers (all or nothing) and the optional ones that can be, in
/// `dir`'s `cgroup.subtree_control`; record the additions in `enabled`.
fn enable_all(
    dir: &Path,
    req: &Request<'_>,
    enabled: &mut Vec<(PathBuf, String)>,
) -> Result<Vec<String>, String> {
    let mut ctls = Vec::new();
    for c in req.required {
        if let Some(why) = missing_controller(dir, c) {
            return Err(why);
        }
        match enable(dir, c) {
            Ok(added) => {
                if added {
                    enabled.push((dir.to_owned(), c.to_string()));
                }
                ctls.push(c.to_string());
            }
            Err(e) => return Err(e),
        }
    }
    for c in req.optional {
        if missing_controller(dir, c).is_some() {
            continue;
        }
        if let Ok(added) = enable(dir, c) {
            if added {
                enabled.push((dir.to_owned(), c.to_string()));
            }
            ctls.push(c.to_string());
        }
    }
    Ok(ctls)
}

/// Remove the leaves of dead owners in `dir` (what a crashed run left), killing any task still
/// in one (a child the dead owner forked there).
fn remove_stale_leaves(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some((pid, start)) = parse_leaf_name(&name.to_string_lossy()) else {
            continue;
        };
        if owner_alive(pid, start) {
            continue;
        }
        let leaf = e.path();
        for p in pids_in(&leaf) {
            // SAFETY: plain syscall; ESRCH (already gone) is fine.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        for _ in 0..200 {
            if fs::remove_dir(&leaf).is_ok() || !leaf.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

fn try_in_place(req: &Request<'_>) -> Result<Placement, String> {
    let origin = req.origin;
    for c in req.required {
        if let Some(why) = missing_controller(origin, c) {
            return Err(why);
        }
    }
    let delegated = systemd_delegated(origin);
    if req.systemd && is_systemd_unit(origin) && !delegated {
        return Err(format!(
            "{} is a systemd unit that is not delegated (no trusted.delegate attribute): \
             systemd owns its sub-cgroups; start triage with `systemd-run --scope -p \
             Delegate=yes ...` or `Delegate=yes` in its service",
            origin.display()
        ));
    }
    let others: Vec<i32> = pids_in(origin)
        .into_iter()
        .filter(|&p| p != req.pid)
        .collect();
    if !others.is_empty() {
        return Err(format!(
            "{}/cgroup.procs holds processes {others:?} besides {}: a cgroup holding processes \
             cannot enable controllers for its children (the no internal processes rule), and \
             triage moves only itself",
            origin.display(),
            req.pid
        ));
    }
    let start = start_time(req.pid).ok_or_else(|| format!("no process {}", req.pid))?;
    remove_stale_leaves(origin);
    let leaf = origin.join(leaf_name(req.pid, start));
    match fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("creating {}: {}", leaf.display(), errno_text(&e))),
    }
    let undo_leaf = |leaf: &Path| {
        let _ = write_file(&origin.join("cgroup.procs"), &req.pid.to_string());
        let _ = fs::remove_dir(leaf);
    };
    if let Err(e) = write_file(&leaf.join("cgroup.procs"), &req.pid.to_string()) {
        undo_leaf(&leaf);
        return Err(format!(
            "moving {} into {}: {}",
            req.pid,
            leaf.join("cgroup.procs").display(),
            errno_text(&e)
        ));
    }
    let mut enabled = Vec::new();
    let controllers = match enable_all(origin, req, &mut enabled) {
        Ok(c) => c,
        Err(e) => {
            let _ = disable(&enabled);
            undo_leaf(&leaf);
            return Err(e);
        }
    };
    Ok(Placement {
        kind: if delegated {
            PlaceKind::Delegated
        } else {
            PlaceKind::InPlace
        },
        base: origin.to_owned(),
        origin: origin.to_owned(),
        leaf: Some(leaf),
        controllers,
        refused: Vec::new(),
        enabled,
        pid: req.pid,
    })
}

fn try_root(req: &Request<'_>, kind: PlaceKind) -> Result<Placement, String> {
    let mount = req.mount;
    if kind == PlaceKind::Beside {
        let c = std::ffi::CString::new(mount.as_os_str().as_encoded_bytes())
            .map_err(|_| format!("bad path {}", mount.display()))?;
        // SAFETY: c is a valid NUL-terminated string.
        if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
            return Err(format!(
                "creating a cgroup in {}: {} (making a place beside the service manager needs \
                 root)",
                mount.display(),
                errno_text(&io::Error::last_os_error())
            ));
        }
    }
    let mut enabled = Vec::new();
    let controllers = match enable_all(mount, req, &mut enabled) {
        Ok(c) => c,
        Err(e) => {
            let _ = disable(&enabled);
            return Err(e);
        }
    };
    Ok(Placement {
        kind,
        base: mount.to_owned(),
        origin: req.origin.to_owned(),
        leaf: None,
        controllers,
        refused: Vec::new(),
        enabled,
        pid: req.pid,
    })
}

/// Find (or make) the place for triage's tree. See the module docs.
pub fn place(req: &Request<'_>) -> Result<Placement, NoPlace> {
    let mut refused = Vec::new();
    let no_place = |refused: Vec<String>| NoPlace {
        wanted: req.required.iter().map(|c| c.to_string()).collect(),
        refused,
    };
    let at_root = req.origin == req.mount;
    if at_root {
        match try_root(req, PlaceKind::Root) {
            Ok(p) => return Ok(p),
            // The root of a cgroup namespace is no real root: it obeys the no internal
            // processes rule, and in place (a leaf for this process) may still work.
            Err(e) => refused.push(format!("at the root {}: {e}", req.mount.display())),
        }
    }
    match try_in_place(req) {
        Ok(mut p) => {
            p.refused = refused;
            return Ok(p);
        }
        Err(e) => refused.push(format!("in place at {}: {e}", req.origin.display())),
    }
    if at_root {
        return Err(no_place(refused));
    }
    if !req.allow_beside {
        refused.push(format!(
            "beside the service manager at {}: not tried (needs root)",
            req.mount.display()
        ));
        return Err(no_place(refused));
    }
    match try_root(req, PlaceKind::Beside) {
        Ok(mut p) => {
            p.refused = refused;
            Ok(p)
        }
        Err(e) => {
            refused.push(format!(
                "beside the service manager at {}: {e}",
                req.mount.display()
            ));
            Err(no_place(refused))
        }
    }
}

impl Placement {
    /// Undo the placement once triage's subtrees under [`Placement::base`] are gone: disable
    /// the controllers it enabled, move the process and anything left in its leaf back to the
    /// cgroup it came from, and remove the leaf. Best effort; the first failure is returned
    /// (with the errno).
    pub fn release(self) -> Result<(), String> {
        let mut first: Option<String> = None;
        let mut note = |r: Result<(), String>| {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        };
        if self.kind == PlaceKind::Root || self.kind == PlaceKind::Beside {
            // The root may keep controllers other cgroups rely on: EBUSY there is no failure.
            let _ = disable(&self.enabled);
            return Ok(());
        }
        note(disable(&self.enabled));
        if let Some(leaf) = &self.leaf {
            let home = self.origin.join("cgroup.procs");
            let mut left = pids_in(leaf);
            if !left.contains(&self.pid) && start_time(self.pid).is_some() {
                left.push(self.pid);
            }
            for p in left {
                note(
                    write_file(&home, &p.to_string())
                        .or_else(|e| {
                            if e.raw_os_error() == Some(libc::ESRCH) {
                                Ok(())
                            } else {
                                Err(e)
                            }
                        })
                        .map_err(|e| {
                            format!("moving {p} back to {}: {}", home.display(), errno_text(&e))
                        }),
                );
            }
            let mut r = Ok(());
            for _ in 0..200 {
                r = fs::remove_dir(leaf);
                match &r {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                        std::thread::sleep(std::time::Duration::from_millis(5))
                    }
                    _ => break,
                }
            }
            note(r.or_else(|e| {
                if e.kind() == io::ErrorKind::NotFound {
                    Ok(())
                } else {
                    Err(format!("removing {}: {}", leaf.display(), errno_text(&e)))
                }
            }));
        }
        first.map_or(Ok(()), Err)
    }

    /// Where the process is now: its leaf, or the cgroup it was in.
    pub fn home(&self) -> &Path {
        self.leaf.as_deref().unwrap_or(&self.origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_names_round_trip() {
        assert_eq!(parse_leaf_name(&leaf_name(42, 777)), Some((42, 777)));
        assert_eq!(parse_leaf_name("triage-self-42"), None);
        assert_eq!(parse_leaf_name("run-1-2-3"), None);
    }

    #[test]
    fn systemd_units_are_recognized_by_name() {
        assert!(is_systemd_unit(Path::new(
            "/sys/fs/cgroup/system.slice/x.service"
        )));
        assert!(is_systemd_unit(Path::new(
            "/sys/fs/cgroup/user.slice/run-u7.scope"
        )));
        assert!(!is_systemd_unit(Path::new("/sys/fs/cgroup/t2")));
        // A temporary directory carries no delegation attribute.
        let tmp = std::env::temp_dir();
        assert!(!systemd_delegated(&tmp));
    }

    #[test]
    fn refusals_name_file_and_parent() {
        // Ordinary directories imitating a leaf whose parent delegates only memory.
        let tmp = tempfile::tempdir().unwrap();
        let leaf = tmp.path().join("leaf");
        fs::create_dir(&leaf).unwrap();
        fs::write(tmp.path().join("cgroup.subtree_control"), "memory\n").unwrap();
        fs::write(leaf.join("cgroup.controllers"), "memory\n").unwrap();
        let req = Request {
            mount: tmp.path(),
            origin: &leaf,
            pid: std::process::id() as i32,
            required: &["cpu"],
            optional: &[],
            allow_beside: false,
            systemd: false,
        };
        let e = place(&req).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("cpu is not in"), "{msg}");
        assert!(msg.contains("leaf/cgroup.controllers ([memory])"), "{msg}");
        assert!(msg.contains("enables only [memory]"), "{msg}");
        assert!(msg.contains("not tried (needs root)"), "{msg}");
    }

    #[test]
    fn undelegated_systemd_unit_is_refused_in_place() {
        let tmp = tempfile::tempdir().unwrap();
        let unit = tmp.path().join("x.service");
        fs::create_dir(&unit).unwrap();
        fs::write(unit.join("cgroup.controllers"), "cpu memory\n").unwrap();
        let req = Request {
            mount: tmp.path(),
            origin: &unit,
            pid: std::process::id() as i32,
            required: &["cpu"],
            optional: &[],
            allow_beside: false,
            systemd: true,
        };
        let msg = place(&req).unwrap_err().to_string();
        assert!(msg.contains("not delegated"), "{msg}");
        assert!(msg.contains("Delegate=yes"), "{msg}");
    }
}
