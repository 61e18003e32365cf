//! Linux control groups for triage: CPU caps, weights, CPU sets and CPU accounting.
//!
//! triage keeps all its cgroups in one subtree per hierarchy, `<base>/<name>/`, where `<base>`
//! is the cgroup the process was in when it called [`CgroupRoot::open`] (so a server started by
//! the lab inside a capped cgroup nests its own containers *inside* that cap). Every
//! [`CgroupRoot`] owns one *run directory* below it, `run-<pid>-<starttime>-<n>`, naming the
//! owning process (pid plus its start time from `/proc/<pid>/stat`, so a reused pid is not
//! mistaken for the owner) and a per-process counter (several roots may live in one process, as
//! in parallel tests). Every cgroup a root creates lives in its run directory:
//!
//! ```text
//! /sys/fs/cgroup/cpu/triage/run-4242-123456-0/site-a/cgi/req-17     (v1: same tree in cpuacct,
//! /sys/fs/cgroup/triage/run-4242-123456-0/site-a/cgi/req-17         cpuset; v2: one tree)
//! ```
//!
//! [`CgroupRoot::open`] removes the run directories of owners that are gone (a crashed earlier
//! run): it kills their leftover tasks and removes the directories, children first.
//! [`CgroupRoot::cleanup`] removes this root's run directory; it also runs when the root and
//! every [`Cgroup`] handle from it have been dropped. A [`Cgroup`] handle itself removes nothing
//! when dropped: call [`Cgroup::remove`].
//!
//! Both cgroup versions are supported, detected at run time ([`probe`], [`Mounts::detect`]):
//! - v2 (unified, with the `cpu` controller): `cpu.max`, `cpu.weight`, `cpu.stat`
//!   (`usage_usec`), `cgroup.procs`, `cpuset.cpus` if the cpuset controller is there,
//!   `cgroup.kill` when the kernel has it. Controllers are enabled level by level through
//!   `cgroup.subtree_control`. The "no internal processes" rule applies: a cgroup that holds
//!   processes (other than the root) cannot get children with controllers, so triage must be
//!   started in the root or in a delegated cgroup whose parent it may write.
//! - v1 (`cpu`, `cpuacct`, `cpuset` mounted together or as separate hierarchies): every
//!   cgroup is created in each hierarchy; `cpu.cfs_quota_us`/`cpu.cfs_period_us`, `cpu.shares`,
//!   `cpuacct.usage`, `cpuset.cpus` (`cpuset.cpus` and `cpuset.mems` are copied from the parent
//!   when a cgroup is created, as v1 refuses tasks in an empty cpuset). v1 also refuses a quota
//!   larger than an ancestor's (reported as [`CgroupError::Invalid`]).
//!
//! Without permission or without a cpu controller every call says what is missing and where
//! ([`CgroupError`]); callers fall back to in-server enforcement and log that once. Setting the
//! environment variable `TRIAGE_CGROUPS=off` makes [`probe`] and [`CgroupRoot::open`] fail with
//! that reason, to run the fallback on purpose.
//!
//! The same code runs on ordinary directories that imitate cgroupfs ([`Mounts::plain`]), which
//! is how the v2 path is unit-tested on machines without a v2 cpu controller.

use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cgroup_place::{self, owner_alive, start_time, PlaceKind, Placement};

/// The cgroup interface in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// Legacy hierarchies, one per controller (or a few controllers together).
    V1,
    /// The unified hierarchy.
    V2,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        })
    }
}

/// What went wrong, naming the path and what is missing.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// The kernel refused for lack of permission.
    #[error("no permission to {action} {path}: {hint}")]
    NoPermission {
        /// The file or directory refused.
        path: PathBuf,
        /// What was attempted (`create`, `write`...).
        action: &'static str,
        /// How to get the permission.
        hint: String,
    },
    /// A controller (or one of its files) is not available.
    #[error("no cgroup {what}")]
    NoController {
        /// The controller or file that is missing.
        what: String,
    },
    /// The operation has no meaning or no support with this layout.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A value the kernel (or triage) refuses.
    #[error("invalid value for {path}: {msg}")]
    Invalid {
        /// The control file.
        path: PathBuf,
        /// Why the value is refused.
        msg: String,
    },
    /// Tasks survived SIGKILL for too long, or a directory stayed busy.
    #[error("cgroup {path} still busy after {waited:?} (tasks: {pids:?})")]
    Busy {
        /// The cgroup.
        path: PathBuf,
        /// The tasks still in it.
        pids: Vec<i32>,
        /// How long the removal waited.
        waited: Duration,
    },
    /// A cgroup name triage refuses (empty, `..`, a controller file name...).
    #[error("bad cgroup name {name:?}: {why}")]
    BadName {
        /// The name given.
        name: String,
        /// Why it is refused.
        why: &'static str,
    },
    /// cgroup v2: no cgroup where triage may build its tree; says what each attempt lacked
    /// (see [`crate::cgroup_place`]).
    #[error("{0}")]
    NoPlace(String),
    /// Cgroups disabled on purpose or not usable here (see [`probe`]).
    #[error("cgroups not usable: {0}")]
    NotUsable(String),
    /// Any other I/O error.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

const PERM_HINT: &str = "run as root, or start triage in a cgroup delegated to its user \
     (e.g. systemd-run --scope -p Delegate=yes)";

fn io_err(path: &Path, action: &'static str, e: io::Error) -> CgroupError {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => CgroupError::NoPermission {
            path: path.to_owned(),
            action,
            hint: PERM_HINT.to_owned(),
        },
        _ => CgroupError::Io {
            path: path.to_owned(),
            source: e,
        },
    }
}

/// One hierarchy triage uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// Controllers of this hierarchy triage cares about (`cpu`, `cpuacct`, `cpuset`).
    pub controllers: Vec<String>,
    /// The cgroup this process is in, in this hierarchy (a directory under the mount point).
    pub base: PathBuf,
    /// v2 on a real cgroupfs: the mount point (the root cgroup as this process sees it), where
    /// [`crate::cgroup_place`] may make a place beside the service manager. `None`: v1, or
    /// directories imitating cgroupfs (then `base` is used as it is).
    pub mount: Option<PathBuf>,
}

impl Hierarchy {
    fn has(&self, c: &str) -> bool {
        self.controllers.iter().any(|x| x == c)
    }
}

/// Where the cgroup hierarchies are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mounts {
    /// The cgroup interface of these hierarchies.
    pub version: Version,
    /// v2: exactly one. v1: one per distinct mount (the one with `cpu` is required).
    pub hierarchies: Vec<Hierarchy>,
    /// The directories are ordinary directories imitating cgroupfs (tests): control files are
    /// created when written, removal deletes them, no task is ever killed.
    pub plain: bool,
}

impl Mounts {
    /// Detect the layout of this machine from `/proc/self/mountinfo` and `/proc/self/cgroup`.
    /// Prefers v2 when its cgroup offers the `cpu` controller, else v1 with a `cpu` hierarchy.
    pub fn detect() -> Result<Mounts, CgroupError> {
        if let Ok(v) = std::env::var("TRIAGE_CGROUPS") {
            if v == "off" {
                return Err(CgroupError::NotUsable(
                    "cgroups disabled by TRIAGE_CGROUPS=off".into(),
                ));
            }
        }
        let mi = read_string(Path::new("/proc/self/mountinfo"))?;
        let pc = read_string(Path::new("/proc/self/cgroup"))?;
        detect_from(&mi, &pc, |p| fs::read_to_string(p).ok())
    }

    /// Ordinary directories imitating cgroupfs, for tests: v2 with one `base`, or v1 with
    /// `(controllers, base)` pairs.
    pub fn plain(version: Version, hierarchies: Vec<(Vec<&str>, PathBuf)>) -> Mounts {
        Mounts {
            version,
            hierarchies: hierarchies
                .into_iter()
                .map(|(c, base)| Hierarchy {
                    controllers: c.into_iter().map(str::to_owned).collect(),
                    base,
                    mount: None,
                })
                .collect(),
            plain: true,
        }
    }

    /// A real v2 hierarchy mounted at `mount`, for a process in cgroup `origin`, whose tree
    /// enables `controllers` (the first is required, e.g. `cpu`; `cpuset` is optional). The
    /// tests use it with `hugetlb` standing in for `cpu` where v2 has no `cpu` controller.
    pub fn v2_at(mount: &Path, origin: &Path, controllers: &[&str]) -> Mounts {
        Mounts {
            version: Version::V2,
            hierarchies: vec![Hierarchy {
                controllers: controllers.iter().map(|c| c.to_string()).collect(),
                base: origin.to_owned(),
                mount: Some(mount.to_owned()),
            }],
            plain: false,
        }
    }

    /// The run directories under `<base>/<name>` (every hierarchy) that process `pid` owns or
    /// owned, whatever its start time: what a run of `pid` left behind (for leak checks).
    pub fn run_dirs_of(&self, name: &str, pid: i32) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for h in &self.hierarchies {
            let Ok(rd) = fs::read_dir(h.base.join(name)) else {
                continue;
            };
            for e in rd.flatten() {
                let n = e.file_name();
                if parse_run_name(&n.to_string_lossy()).is_some_and(|(p, _, _)| p == pid) {
                    out.push(e.path());
                }
            }
        }
        out.sort();
        out
    }

    fn find(&self, controller: &str) -> Option<&Hierarchy> {
        self.hierarchies.iter().find(|h| h.has(controller))
    }
}

/// The tightest CPU cap on this process, as a fraction of one CPU: the smallest quota of its
/// own cgroup and the cgroup's ancestors in the hierarchy with the `cpu` controller. `None`: no
/// cap, or no cgroup with a readable cpu controller (no error: callers tune defaults by it).
pub fn own_cpu_cap() -> Option<f64> {
    let m = Mounts::detect().ok()?;
    let h = m.find("cpu")?;
    tightest_cap(&h.base, m.version, |p| fs::read_to_string(p).ok())
}

/// [`own_cpu_cap`] from `dir` up, reading control files with `read` (pure: tested on texts).
fn tightest_cap(
    dir: &Path,
    version: Version,
    read: impl Fn(&Path) -> Option<String>,
) -> Option<f64> {
    let mut cap: Option<f64> = None;
    let mut at = Some(dir);
    while let Some(d) = at {
        let here = match version {
            Version::V2 => match read(&d.join("cpu.max")) {
                Some(s) => parse_cpu_max(&s).and_then(|(f, _)| f),
                None => break,
            },
            Version::V1 => {
                let q =
                    read(&d.join("cpu.cfs_quota_us")).and_then(|s| s.trim().parse::<i64>().ok());
                let p =
                    read(&d.join("cpu.cfs_period_us")).and_then(|s| s.trim().parse::<u64>().ok());
                match (q, p) {
                    (Some(q), Some(p)) => v1_cap(q, p),
                    _ => break,
                }
            }
        };
        if let Some(f) = here {
            cap = Some(cap.map_or(f, |c: f64| c.min(f)));
        }
        at = d.parent();
    }
    cap
}

/// The throttled time of this process's own cgroup (the hierarchy with the `cpu` controller:
/// v2 `cpu.stat` `throttled_usec`, v1 `throttled_time`), read through a file kept open so that
/// a reading costs one `pread` (about 10 us): the CGI timing reads it at each hand-off of a
/// request to split its time into throttled time and the rest.
#[derive(Debug)]
pub struct OwnThrottle {
    /// `cpu.stat` of the own cgroup, open for the process's life.
    file: fs::File,
    /// Which field holds the time, and its unit.
    version: Version,
}

impl OwnThrottle {
    /// Open the own cgroup's `cpu.stat`; `None` without cgroups, without the cpu controller
    /// or without bandwidth control (no throttled time to read).
    pub fn open() -> Option<OwnThrottle> {
        let m = Mounts::detect().ok()?;
        let h = m.find("cpu")?;
        let file = fs::File::open(h.base.join("cpu.stat")).ok()?;
        let t = OwnThrottle {
            file,
            version: m.version,
        };
        t.throttled().map(|_| t)
    }

    /// The group's throttled time so far (monotonic; `None` if the read failed).
    pub fn throttled(&self) -> Option<Duration> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 1024];
        let n = self.file.read_at(&mut buf, 0).ok()?;
        let s = std::str::from_utf8(&buf[..n]).ok()?;
        match self.version {
            Version::V2 => stat_field(s, "throttled_usec").map(Duration::from_micros),
            Version::V1 => stat_field(s, "throttled_time").map(Duration::from_nanos),
        }
    }
}

/// Probe what this kernel and process allow: the version to use, or why cgroups cannot be used
/// (no cpu controller, no permission, disabled). For clear warnings and test skips.
pub fn probe() -> Result<Version, String> {
    let m = Mounts::detect().map_err(|e| e.to_string())?;
    let cpu = m
        .find("cpu")
        .ok_or_else(|| "no cgroup cpu controller".to_string())?;
    if m.version == Version::V2 && nix::unistd::geteuid().is_root() {
        // As root, cgroup_place finds or makes a place (in place, or beside).
        return Ok(m.version);
    }
    // Creating a directory needs write access to the base cgroup.
    let c = std::ffi::CString::new(cpu.base.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("bad path {}", cpu.base.display()))?;
    // SAFETY: c is a valid NUL-terminated string.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(format!(
            "no permission to create cgroups in {} ({}): {PERM_HINT}",
            cpu.base.display(),
            io::Error::last_os_error()
        ));
    }
    if m.version == Version::V2 && !is_mount_root_v2(&cpu.base) {
        let ctl = fs::read_to_string(cpu.base.join("cgroup.controllers")).unwrap_or_default();
        if !ctl.split_whitespace().any(|c| c == "cpu") {
            return Err(format!(
                "cgroup v2: {} does not offer the cpu controller ([{}]) and making a place \
                 beside the service manager needs root",
                cpu.base.display(),
                ctl.trim()
            ));
        }
        let me = std::process::id() as i32;
        let procs = read_pids(&cpu.base.join("cgroup.procs")).unwrap_or_default();
        if procs.iter().any(|&p| p != me) {
            return Err(format!(
                "cgroup v2: {} holds other processes, so it cannot enable the cpu controller \
                 for children (no internal processes rule); start triage alone in a delegated \
                 cgroup",
                cpu.base.display()
            ));
        }
    }
    Ok(m.version)
}

fn is_mount_root_v2(p: &Path) -> bool {
    // The root cgroup has no cgroup.controllers-less parent... it lacks `cgroup.events`.
    !p.join("cgroup.events").exists()
}

fn read_string(p: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(p).map_err(|e| io_err(p, "read", e))
}

/// Undo mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            if let Some(v) = std::str::from_utf8(&b[i + 1..i + 4])
                .ok()
                .and_then(|o| u8::from_str_radix(o, 8).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line of `/proc/self/mountinfo`, the fields triage reads.
pub(crate) struct MountEntry {
    /// The mounted directory's path inside its file system (a bind mount's source).
    pub(crate) root: String,
    /// Mount point.
    pub(crate) point: PathBuf,
    /// Per-mount options (`rw,nosuid,relatime`).
    pub(crate) mountopts: Vec<String>,
    /// File system type (`cgroup`, `cgroup2`).
    pub(crate) fstype: String,
    /// Super block options (`rw,cpu`; `rw,nsdelegate`).
    pub(crate) superopts: Vec<String>,
}

/// Every line of a `/proc/self/mountinfo` text, escapes undone.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if l.len() < 6 || r.len() < 3 {
            continue;
        }
        out.push(MountEntry {
            root: unescape(l[3]),
            point: PathBuf::from(unescape(l[4])),
            mountopts: l[5].split(',').map(str::to_owned).collect(),
            fstype: r[0].to_owned(),
            superopts: r[2].split(',').map(str::to_owned).collect(),
        });
    }
    out
}

/// `base` = mount point + (own path relative to the mount's root).
fn base_of(m: &MountEntry, own: &str) -> PathBuf {
    let root = m.root.trim_end_matches('/');
    let rel = own.strip_prefix(root).unwrap_or(own);
    let rel = rel.trim_start_matches('/');
    if rel.is_empty() {
        m.point.clone()
    } else {
        m.point.join(rel)
    }
}

/// Layout detection from the texts of `/proc/self/mountinfo` and `/proc/self/cgroup`;
/// `read` reads a file (the v2 `cgroup.controllers`).
pub(crate) fn detect_from(
    mountinfo: &str,
    proc_cgroup: &str,
    read: impl Fn(&Path) -> Option<String>,
) -> Result<Mounts, CgroupError> {
    let mounts = parse_mountinfo(mountinfo);
    let mut own_v2: Option<String> = None;
    let mut own_v1: Vec<(Vec<String>, String)> = Vec::new();
    for line in proc_cgroup.lines() {
        let mut it = line.splitn(3, ':');
        let (Some(_id), Some(ctl), Some(path)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if ctl.is_empty() {
            own_v2 = Some(path.to_owned());
        } else {
            own_v1.push((ctl.split(',').map(str::to_owned).collect(), path.to_owned()));
        }
    }
    let mut v2_note = String::from("no cgroup2 mount");
    if let Some(own) = &own_v2 {
        if let Some(m) = mounts.iter().find(|m| m.fstype == "cgroup2") {
            let base = base_of(m, own);
            let ctl = read(&base.join("cgroup.controllers")).unwrap_or_default();
            let ctl: Vec<&str> = ctl.split_whitespace().collect();
            // The root offering cpu is enough: cgroup_place finds or makes a place for the
            // tree when the process's own cgroup does not offer it.
            let root_ctl = read(&m.point.join("cgroup.controllers")).unwrap_or_default();
            let root_has = |c: &str| root_ctl.split_whitespace().any(|x| x == c);
            if ctl.contains(&"cpu") || root_has("cpu") {
                let mut controllers = vec!["cpu".to_owned(), "cpuacct".to_owned()];
                if ctl.contains(&"cpuset") || root_has("cpuset") {
                    controllers.push("cpuset".to_owned());
                }
                return Ok(Mounts {
                    version: Version::V2,
                    hierarchies: vec![Hierarchy {
                        controllers,
                        base,
                        mount: Some(m.point.clone()),
                    }],
                    plain: false,
                });
            }
            v2_note = format!(
                "cgroup2 at {} offers [{}] without cpu (and so does its root {})",
                base.display(),
                ctl.join(" "),
                m.point.display()
            );
        }
    }
    let mut hierarchies: Vec<Hierarchy> = Vec::new();
    for want in ["cpu", "cpuacct", "cpuset"] {
        if hierarchies.iter().any(|h| h.has(want)) {
            continue;
        }
        let Some(m) = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.superopts.iter().any(|o| o == want))
        else {
            continue;
        };
        let own = own_v1
            .iter()
            .find(|(c, _)| c.iter().any(|x| x == want))
            .map(|(_, p)| p.as_str())
            .unwrap_or("/");
        let controllers = ["cpu", "cpuacct", "cpuset"]
            .into_iter()
            .filter(|c| m.superopts.iter().any(|o| o == c))
            .map(str::to_owned)
            .collect();
        hierarchies.push(Hierarchy {
            controllers,
            base: base_of(m, own),
            mount: None,
        });
    }
    if hierarchies.iter().any(|h| h.has("cpu")) {
        return Ok(Mounts {
            version: Version::V1,
            hierarchies,
            plain: false,
        });
    }
    Err(CgroupError::NoController {
        what: format!("cpu controller: {v2_note}, and no cgroup v1 hierarchy with cpu is mounted"),
    })
}

/// Parse `run-<pid>-<start>-<n>`.
fn parse_run_name(name: &str) -> Option<(i32, u64, u32)> {
    let rest = name.strip_prefix("run-")?;
    let mut it = rest.split('-');
    let pid = it.next()?.parse().ok()?;
    let start = it.next()?.parse().ok()?;
    let n = it.next()?.parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    Some((pid, start, n))
}

/// The v2 placement of this process, shared by every root it opens on one mount.
struct Placed {
    /// The v2 mount point.
    mount: PathBuf,
    /// The placement (taken out by the last user to release it).
    place: Option<Placement>,
    /// Roots using it.
    users: usize,
}

static PLACED: Mutex<Vec<Placed>> = Mutex::new(Vec::new());

/// What a root needs of its process's placement.
struct Got {
    base: PathBuf,
    home: PathBuf,
    controllers: Vec<String>,
    kind: PlaceKind,
}

/// A root's share of its process's placement: the last share dropped releases it.
#[derive(Debug)]
struct PlaceShare {
    mount: PathBuf,
}

impl Drop for PlaceShare {
    fn drop(&mut self) {
        let mut all = PLACED.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = all.iter().position(|p| p.mount == self.mount) else {
            return;
        };
        all[i].users -= 1;
        if all[i].users > 0 {
            return;
        }
        let placed = all.swap_remove(i);
        if let Some(p) = placed.place {
            if let Err(e) = p.release() {
                tracing::warn!("cgroup v2: undoing the placement: {e}");
            }
        }
    }
}

/// Find this process's place on `mount` (once per process; later roots share it).
fn acquire_place(mount: &Path, h: &Hierarchy) -> Result<(PlaceShare, Got), CgroupError> {
    let mut all = PLACED.lock().unwrap_or_else(|e| e.into_inner());
    // Made only on success: a share dropped here would lock `PLACED` again.
    let share = || PlaceShare {
        mount: mount.to_owned(),
    };
    let got = |p: &Placement| Got {
        base: p.base.clone(),
        home: p.home().to_owned(),
        controllers: p.controllers.clone(),
        kind: p.kind,
    };
    if let Some(e) = all.iter_mut().find(|p| p.mount == mount) {
        if let Some(p) = &e.place {
            e.users += 1;
            return Ok((share(), got(p)));
        }
    }
    let required: Vec<&str> = h
        .controllers
        .iter()
        .map(String::as_str)
        .filter(|c| *c != "cpuacct" && *c != "cpuset")
        .collect();
    let optional: Vec<&str> = h
        .controllers
        .iter()
        .map(String::as_str)
        .filter(|c| *c == "cpuset")
        .collect();
    let req = cgroup_place::Request {
        mount,
        origin: &h.base,
        pid: std::process::id() as i32,
        required: &required,
        optional: &optional,
        allow_beside: nix::unistd::geteuid().is_root(),
        systemd: Path::new("/run/systemd/system").exists(),
    };
    let p = cgroup_place::place(&req).map_err(|e| CgroupError::NoPlace(e.to_string()))?;
    for r in &p.refused {
        tracing::info!("cgroup v2: {r}");
    }
    tracing::info!(
        "cgroup v2: triage's tree goes under {} ({}{})",
        p.base.display(),
        p.kind,
        p.leaf
            .as_ref()
            .map(|l| format!(", this process moved into {}", l.display()))
            .unwrap_or_default()
    );
    let g = got(&p);
    all.retain(|e| e.mount != mount);
    all.push(Placed {
        mount: mount.to_owned(),
        place: Some(p),
        users: 1,
    });
    Ok((share(), g))
}

static ROOT_COUNTER: AtomicU32 = AtomicU32::new(0);

/// Names the kernel reserves in a cgroup directory (or that would collide with control files).
const RESERVED_PREFIXES: &[&str] = &[
    "cgroup",
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "io",
    "pids",
    "blkio",
    "devices",
    "freezer",
    "hugetlb",
    "rdma",
    "misc",
    "net_cls",
    "net_prio",
    "perf_event",
];

fn check_component(c: &str) -> Result<(), CgroupError> {
    let bad = |why| {
        Err(CgroupError::BadName {
            name: c.to_owned(),
            why,
        })
    };
    if c.is_empty() {
        return bad("empty path component");
    }
    if c == "." || c == ".." {
        return bad("`.` and `..` are not allowed");
    }
    if c.len() > 200 {
        return bad("longer than 200 bytes");
    }
    if !c
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        return bad("only ASCII letters, digits, `-`, `_` and `.` are allowed");
    }
    if let Some((pre, _)) = c.split_once('.') {
        if RESERVED_PREFIXES.contains(&pre) {
            return bad("collides with cgroup control file names");
        }
    }
    if matches!(c, "tasks" | "notify_on_release" | "release_agent") {
        return bad("collides with cgroup control file names");
    }
    Ok(())
}

fn check_rel(rel: &str) -> Result<Vec<&str>, CgroupError> {
    if rel.starts_with('/') {
        return Err(CgroupError::BadName {
            name: rel.to_owned(),
            why: "must be relative",
        });
    }
    let parts: Vec<&str> = rel.split('/').collect();
    for p in &parts {
        check_component(p)?;
    }
    Ok(parts)
}

#[derive(Debug)]
struct Inner {
    mounts: Mounts,
    /// `<base>/<name>` per hierarchy, same order as `mounts.hierarchies`.
    tops: Vec<PathBuf>,
    run: String,
    /// Where this process lives per hierarchy (its v2 leaf, or the base): where it is moved
    /// back to when a cgroup it joined is removed.
    homes: Vec<PathBuf>,
    /// How the v2 place was found (`None`: v1, or imitation directories).
    kind: Option<PlaceKind>,
    /// This root's share of the process's v2 placement; dropped after the cleanup (field
    /// drops follow `Drop::drop`), the last share releases the placement.
    _share: Option<PlaceShare>,
}

impl Inner {
    fn dirs(&self, rel: &Path) -> Vec<PathBuf> {
        self.tops
            .iter()
            .map(|t| {
                let d = t.join(&self.run);
                if rel.as_os_str().is_empty() {
                    d
                } else {
                    d.join(rel)
                }
            })
            .collect()
    }

    fn cleanup(&self) -> Result<(), CgroupError> {
        let mut first_err = None;
        for (home, top) in self.homes.iter().zip(&self.tops) {
            let dir = top.join(&self.run);
            if let Err(e) = remove_tree(&self.mounts, home, &dir) {
                first_err.get_or_insert(e);
            }
            // The shared top directory goes when nobody uses it any more.
            let _ = rmdir(&self.mounts, top);
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            tracing::warn!("cgroup cleanup failed: {e}");
        }
    }
}

/// triage's own subtree in every hierarchy it uses. See the module docs.
#[derive(Debug, Clone)]
pub struct CgroupRoot {
    inner: Arc<Inner>,
}

impl CgroupRoot {
    /// Detect the cgroup layout ([`Mounts::detect`]), create `<base>/<name>` in every needed
    /// hierarchy, remove the run directories of dead owners (killing their tasks), and create
    /// this root's run directory.
    pub fn open(name: &str) -> Result<CgroupRoot, CgroupError> {
        Self::open_in(name, Mounts::detect()?)
    }

    /// [`CgroupRoot::open`] on a given layout (e.g. [`Mounts::plain`] in tests).
    pub fn open_in(name: &str, mut mounts: Mounts) -> Result<CgroupRoot, CgroupError> {
        check_component(name)?;
        let usable = match mounts.version {
            Version::V1 => mounts.find("cpu").is_some(),
            Version::V2 => mounts
                .hierarchies
                .first()
                .is_some_and(|h| h.controllers.iter().any(|c| c != "cpuacct")),
        };
        if !usable {
            return Err(CgroupError::NoController {
                what: "cpu controller in the given layout".into(),
            });
        }
        let pid = std::process::id() as i32;
        let start = start_time(pid).unwrap_or(0);
        let n = ROOT_COUNTER.fetch_add(1, Ordering::Relaxed);
        let run = format!("run-{pid}-{start}-{n}");
        let mut homes: Vec<PathBuf> = mounts.hierarchies.iter().map(|h| h.base.clone()).collect();
        let mut share = None;
        let mut kind = None;
        if mounts.version == Version::V2 && !mounts.plain {
            let h = &mut mounts.hierarchies[0];
            if let Some(mount) = h.mount.clone() {
                let (s, got) = acquire_place(&mount, h)?;
                h.base = got.base;
                h.controllers
                    .retain(|c| c == "cpuacct" || got.controllers.contains(c));
                homes[0] = got.home;
                kind = Some(got.kind);
                share = Some(s);
            }
        }
        let tops: Vec<PathBuf> = mounts
            .hierarchies
            .iter()
            .map(|h| h.base.join(name))
            .collect();
        // From here on, an error drops `inner`, whose cleanup removes what was made (the run
        // directory, the top if empty) and whose share releases the placement.
        let inner = Arc::new(Inner {
            mounts,
            tops,
            run,
            homes,
            kind,
            _share: share,
        });
        for ((h, top), home) in inner
            .mounts
            .hierarchies
            .iter()
            .zip(&inner.tops)
            .zip(&inner.homes)
        {
            let m = &inner.mounts;
            if m.version == Version::V2 {
                enable_controllers(m, h, &h.base)?;
            }
            mkdir(m, h, top)?;
            if m.version == Version::V2 {
                enable_controllers(m, h, top)?;
            }
            remove_stale(m, home, top);
        }
        // Create the run directory in every hierarchy. Another process's cleanup may remove the
        // shared top directory between our mkdirs: then make it again.
        for ((h, d), top) in inner
            .mounts
            .hierarchies
            .iter()
            .zip(inner.dirs(Path::new("")))
            .zip(&inner.tops)
        {
            let mut tries = 0;
            while let Err(e) = mkdir(&inner.mounts, h, &d) {
                tries += 1;
                if tries > 5 || top.exists() {
                    return Err(e);
                }
                mkdir(&inner.mounts, h, top)?;
                if inner.mounts.version == Version::V2 {
                    enable_controllers(&inner.mounts, h, top)?;
                }
            }
            if inner.mounts.version == Version::V2 {
                enable_controllers(&inner.mounts, h, &d)?;
            }
        }
        Ok(CgroupRoot { inner })
    }

    /// The cgroup interface in use.
    pub fn version(&self) -> Version {
        self.inner.mounts.version
    }

    /// The layout in use.
    pub fn mounts(&self) -> &Mounts {
        &self.inner.mounts
    }

    /// cgroup v2: how the place of the tree was found (see [`crate::cgroup_place`]); `None` on
    /// v1 and on imitation directories.
    pub fn place_kind(&self) -> Option<PlaceKind> {
        self.inner.kind
    }

    /// This root's run directory in the cpu hierarchy (`<base>/<name>/run-...`).
    pub fn path(&self) -> PathBuf {
        self.inner.dirs(Path::new("")).swap_remove(self.cpu_index())
    }

    fn cpu_index(&self) -> usize {
        self.inner
            .mounts
            .hierarchies
            .iter()
            .position(|h| h.has("cpu"))
            .unwrap_or(0)
    }

    /// A cgroup at `rel` (nested path like `lab-1234/server` or `site-a/cgi/req-17`), created
    /// with its missing ancestors in every hierarchy. Creating an existing one is fine.
    pub fn create(&self, rel: &str) -> Result<Cgroup, CgroupError> {
        let parts = check_rel(rel)?;
        let m = &self.inner.mounts;
        for (h, run_dir) in m.hierarchies.iter().zip(self.inner.dirs(Path::new(""))) {
            let mut dir = run_dir;
            for p in &parts {
                if m.version == Version::V2 {
                    enable_controllers(m, h, &dir)?;
                }
                dir = dir.join(p);
                mkdir(m, h, &dir)?;
            }
        }
        Ok(self.handle(PathBuf::from(rel)))
    }

    /// A handle on the run directory itself (every cgroup of this root is below it): its
    /// [`Cgroup::cpu_usage`] is the CPU of everything this root placed in cgroups.
    pub fn top(&self) -> Cgroup {
        self.handle(PathBuf::new())
    }

    fn handle(&self, rel: PathBuf) -> Cgroup {
        let dirs = self.inner.dirs(&rel);
        Cgroup {
            inner: self.inner.clone(),
            cpu_path: dirs[self.cpu_index()].clone(),
            dirs,
            rel,
        }
    }

    /// Remove everything this root created (its run directory, in every hierarchy), killing
    /// the tasks still in it. Also done, best effort, when the root and all [`Cgroup`] handles
    /// from it are dropped. Afterwards [`CgroupRoot::create`] fails until a new root is opened.
    pub fn cleanup(&self) -> Result<(), CgroupError> {
        self.inner.cleanup()
    }
}

/// Usage and throttling counters of a cgroup (`cpu.stat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    /// Enforcement periods that elapsed with the group runnable.
    pub nr_periods: u64,
    /// Of those, periods in which the group hit its quota.
    pub nr_throttled: u64,
    /// Total time the group's tasks were throttled.
    pub throttled: Duration,
}

/// One cgroup, present in every hierarchy triage uses. Dropping the handle removes nothing.
#[derive(Debug, Clone)]
pub struct Cgroup {
    inner: Arc<Inner>,
    rel: PathBuf,
    /// Directory per hierarchy, same order as the root's mounts.
    dirs: Vec<PathBuf>,
    cpu_path: PathBuf,
}

/// Writes `0` (the calling process) into a cgroup's `cgroup.procs` in every hierarchy. Made
/// before a fork, called between fork and exec: it only calls `write(2)`.
#[derive(Debug)]
pub struct JoinHook {
    fds: Vec<OwnedFd>,
}

impl JoinHook {
    /// Move the calling process into the cgroup. Async-signal-safe.
    pub fn join(&self) -> io::Result<()> {
        for fd in &self.fds {
            // SAFETY: writing 1 byte from a static buffer to an open fd.
            let r = unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl Cgroup {
    /// The directory in the cpu hierarchy.
    pub fn path(&self) -> &Path {
        &self.cpu_path
    }

    /// The path relative to the root (as given to [`CgroupRoot::create`]).
    pub fn rel(&self) -> &Path {
        &self.rel
    }

    fn mounts(&self) -> &Mounts {
        &self.inner.mounts
    }

    /// The directory whose files account the group's CPU time: the cpu directory on v2
    /// (`cpu.stat`), the cpuacct one on v1 (`cpuacct.usage`, `cpuacct.stat`); read with
    /// [`crate::cpusplit::cgroup_split`]. `None` on v1 without a cpuacct hierarchy.
    pub fn accounting_dir(&self) -> Option<PathBuf> {
        match self.mounts().version {
            Version::V2 => Some(self.cpu_path.clone()),
            Version::V1 => self.dir_for("cpuacct").map(Path::to_path_buf),
        }
    }

    fn dir_for(&self, controller: &str) -> Option<&Path> {
        self.mounts()
            .hierarchies
            .iter()
            .position(|h| h.has(controller))
            .map(|i| self.dirs[i].as_path())
    }

    /// Limit the group (children included) to `frac` of one CPU per `period` (`None`:
    /// unlimited). v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`. `frac` may exceed
    /// 1 on several CPUs. The kernel's smallest quota is 1 ms per period.
    pub fn set_cpu_max(&self, frac: Option<f64>, period: Duration) -> Result<(), CgroupError> {
        let dir = self.cpu_path.clone();
        let period_us = period.as_micros() as u64;
        if !(1_000..=1_000_000).contains(&period_us) {
            return Err(CgroupError::Invalid {
                path: dir,
                msg: format!("period {period:?} outside 1 ms..1 s"),
            });
        }
        let quota_us = match frac {
            None => None,
            Some(f) if f.is_finite() && f > 0.0 => {
                Some(((f * period_us as f64).round() as u64).max(1_000))
            }
            Some(f) => {
                return Err(CgroupError::Invalid {
                    path: dir,
                    msg: format!("CPU fraction {f} must be a positive number"),
                })
            }
        };
        let m = self.mounts();
        match m.version {
            Version::V2 => {
                let v = match quota_us {
                    None => format!("max {period_us}"),
                    Some(q) => format!("{q} {period_us}"),
                };
                write_ctl(m, &dir.join("cpu.max"), &v, "cpu controller (cpu.max)")
            }
            Version::V1 => {
                let q = dir.join("cpu.cfs_quota_us");
                let p = dir.join("cpu.cfs_period_us");
                let what = "cpu bandwidth control (CONFIG_CFS_BANDWIDTH)";
                // A new period: unlimited first, so that no intermediate state breaks v1's rule
                // that a child's quota/period may not exceed an ancestor's. The same period:
                // the quota alone (one write: every write refills the group's quota).
                let same = read_num::<u64>(&p, what).is_ok_and(|v| v == period_us);
                if !same || quota_us.is_none() {
                    write_ctl(m, &q, "-1", what)?;
                }
                if !same {
                    write_ctl(m, &p, &period_us.to_string(), what)?;
                }
                if let Some(quota) = quota_us {
                    write_ctl(m, &q, &quota.to_string(), what).map_err(|e| match e {
                        CgroupError::Io { path, source }
                            if source.raw_os_error() == Some(libc::EINVAL) =>
                        {
                            CgroupError::Invalid {
                                path,
                                msg: format!(
                                    "kernel refused quota {quota} us per {period_us} us (cgroup v1 \
                                     refuses a cap above an ancestor's cap or below a child's)"
                                ),
                            }
                        }
                        e => e,
                    })?;
                }
                Ok(())
            }
        }
    }

    /// The current cap as a fraction of one CPU (`None`: unlimited) and its period.
    pub fn cpu_max(&self) -> Result<(Option<f64>, Duration), CgroupError> {
        let dir = &self.cpu_path;
        match self.mounts().version {
            Version::V2 => {
                let p = dir.join("cpu.max");
                let s = read_ctl(&p, "cpu controller (cpu.max)")?;
                parse_cpu_max(&s).ok_or_else(|| CgroupError::Invalid {
                    path: p,
                    msg: format!("unexpected contents {s:?}"),
                })
            }
            Version::V1 => {
                let q = read_num::<i64>(&dir.join("cpu.cfs_quota_us"), "cpu bandwidth control")?;
                let p = read_num::<u64>(&dir.join("cpu.cfs_period_us"), "cpu bandwidth control")?;
                let frac = v1_cap(q, p);
                Ok((frac, Duration::from_micros(p)))
            }
        }
    }

    /// Relative weight 1..=10000 (100 is the default). v2 `cpu.weight`, v1 `cpu.shares`
    /// (`weight * 1024 / 100`, clamped to the kernel's 2..=262144).
    pub fn set_weight(&self, weight: u32) -> Result<(), CgroupError> {
        if !(1..=10_000).contains(&weight) {
            return Err(CgroupError::Invalid {
                path: self.cpu_path.clone(),
                msg: format!("weight {weight} outside 1..=10000"),
            });
        }
        let m = self.mounts();
        match m.version {
            Version::V2 => write_ctl(
                m,
                &self.cpu_path.join("cpu.weight"),
                &weight.to_string(),
                "cpu controller (cpu.weight)",
            ),
            Version::V1 => {
                let shares = (weight as u64 * 1024 / 100).clamp(2, 262_144);
                write_ctl(
                    m,
                    &self.cpu_path.join("cpu.shares"),
                    &shares.to_string(),
                    "cpu controller (cpu.shares)",
                )
            }
        }
    }

    /// Restrict the group to `cpus` (cpuset), which must be allowed by its parent.
    /// [`CgroupError::Unsupported`] without a cpuset controller.
    pub fn set_cpus(&self, cpus: &[usize]) -> Result<(), CgroupError> {
        let Some(dir) = self.dir_for("cpuset") else {
            return Err(CgroupError::Unsupported(format!(
                "no cpuset controller for {} (cgroup {})",
                self.cpu_path.display(),
                self.mounts().version
            )));
        };
        if cpus.is_empty() {
            return Err(CgroupError::Invalid {
                path: dir.to_owned(),
                msg: "empty CPU list".into(),
            });
        }
        write_ctl(
            self.mounts(),
            &dir.join("cpuset.cpus"),
            &format_cpu_list(cpus),
            "cpuset controller (cpuset.cpus)",
        )
    }

    /// Move process `pid` (all its threads) into the group, in every hierarchy.
    pub fn add_pid(&self, pid: i32) -> Result<(), CgroupError> {
        let m = self.mounts();
        for d in &self.dirs {
            write_ctl(m, &d.join("cgroup.procs"), &pid.to_string(), "cgroup.procs").map_err(
                |e| match e {
                    CgroupError::Io { path, source }
                        if source.raw_os_error() == Some(libc::ESRCH) =>
                    {
                        CgroupError::Invalid {
                            path,
                            msg: format!("no process {pid}"),
                        }
                    }
                    e => e,
                },
            )?;
        }
        Ok(())
    }

    /// A hook that moves the calling process into this group, to run between fork and exec
    /// (`Command::pre_exec`), so a child never runs outside its group.
    pub fn join_hook(&self) -> Result<JoinHook, CgroupError> {
        let m = self.mounts();
        let mut fds = Vec::new();
        for d in &self.dirs {
            let p = d.join("cgroup.procs");
            let f = fs::OpenOptions::new()
                .write(true)
                .create(m.plain)
                .append(m.plain)
                .custom_flags(libc::O_CLOEXEC)
                .open(&p)
                .map_err(|e| io_err(&p, "open", e))?;
            fds.push(OwnedFd::from(f));
        }
        Ok(JoinHook { fds })
    }

    /// Install [`Cgroup::join_hook`] on a `std::process::Command`.
    pub fn join_on_spawn(&self, cmd: &mut std::process::Command) -> Result<(), CgroupError> {
        use std::os::unix::process::CommandExt;
        let hook = self.join_hook()?;
        // SAFETY: the hook only calls write(2), which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || hook.join());
        }
        Ok(())
    }

    /// CPU time used by the group's tasks (children included) since it was created.
    /// v2 `cpu.stat` `usage_usec`, v1 `cpuacct.usage`.
    pub fn cpu_usage(&self) -> Result<Duration, CgroupError> {
        match self.mounts().version {
            Version::V2 => {
                let p = self.cpu_path.join("cpu.stat");
                let s = read_ctl(&p, "cpu controller (cpu.stat)")?;
                stat_field(&s, "usage_usec")
                    .map(Duration::from_micros)
                    .ok_or_else(|| CgroupError::Invalid {
                        path: p,
                        msg: "no usage_usec".into(),
                    })
            }
            Version::V1 => {
                let Some(dir) = self.dir_for("cpuacct") else {
                    return Err(CgroupError::NoController {
                        what: format!(
                            "cpuacct controller (v1) to measure {}",
                            self.cpu_path.display()
                        ),
                    });
                };
                read_num::<u64>(&dir.join("cpuacct.usage"), "cpuacct controller")
                    .map(Duration::from_nanos)
            }
        }
    }

    /// Throttling counters (`cpu.stat`).
    pub fn cpu_stat(&self) -> Result<CpuStat, CgroupError> {
        let p = self.cpu_path.join("cpu.stat");
        let s = read_ctl(&p, "cpu controller (cpu.stat)")?;
        let throttled = match self.mounts().version {
            Version::V2 => stat_field(&s, "throttled_usec").map(Duration::from_micros),
            Version::V1 => stat_field(&s, "throttled_time").map(Duration::from_nanos),
        };
        Ok(CpuStat {
            nr_periods: stat_field(&s, "nr_periods").unwrap_or(0),
            nr_throttled: stat_field(&s, "nr_throttled").unwrap_or(0),
            throttled: throttled.unwrap_or_default(),
        })
    }

    /// Processes directly in this group (not in its children), from the cpu hierarchy.
    pub fn pids(&self) -> Result<Vec<i32>, CgroupError> {
        read_pids(&self.cpu_path.join("cgroup.procs"))
    }

    /// Processes in this group or any descendant, in any hierarchy.
    pub fn all_pids(&self) -> Result<Vec<i32>, CgroupError> {
        let mut out = Vec::new();
        for d in &self.dirs {
            collect_pids(d, &mut out)?;
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// SIGKILL every task of the group and its descendants, and wait (at most 2 s) until they
    /// are gone. This process itself is never killed: if it is inside, it is moved back to the
    /// cgroup it was in when the root was opened.
    pub fn kill_all(&self) -> Result<(), CgroupError> {
        let m = self.mounts();
        for (home, d) in self.inner.homes.iter().zip(&self.dirs) {
            kill_tree(m, home, d)?;
        }
        Ok(())
    }

    /// [`Cgroup::kill_all`], then remove the group and its descendants in every hierarchy,
    /// children first.
    pub fn remove(self) -> Result<(), CgroupError> {
        let m = self.mounts();
        for (home, d) in self.inner.homes.iter().zip(&self.dirs) {
            remove_tree(m, home, d)?;
        }
        Ok(())
    }

    /// An fd of the v2 cgroup directory, for `clone3(CLONE_INTO_CGROUP)`; `None` on v1 (or if
    /// it cannot be opened).
    pub fn dir_fd(&self) -> Option<OwnedFd> {
        if self.mounts().version != Version::V2 {
            return None;
        }
        fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(&self.cpu_path)
            .ok()
            .map(OwnedFd::from)
    }
}

/// A v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` pair as a fraction of one CPU (`None`: -1,
/// unlimited).
fn v1_cap(quota_us: i64, period_us: u64) -> Option<f64> {
    (quota_us >= 0).then(|| quota_us as f64 / period_us.max(1) as f64)
}

fn parse_cpu_max(s: &str) -> Option<(Option<f64>, Duration)> {
    let mut it = s.split_whitespace();
    let q = it.next()?;
    let p: u64 = it.next()?.parse().ok()?;
    let frac = if q == "max" {
        None
    } else {
        Some(q.parse::<u64>().ok()? as f64 / p.max(1) as f64)
    };
    Some((frac, Duration::from_micros(p)))
}

fn stat_field(s: &str, key: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// `0,2-4` for `[0, 2, 3, 4]`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// Parse `0,2-4` (the kernel's list format); `None` if malformed.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

fn read_ctl(p: &Path, what: &str) -> Result<String, CgroupError> {
    fs::read_to_string(p).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound if p.parent().is_some_and(Path::exists) => {
            CgroupError::NoController {
                what: format!("{what}: {} does not exist", p.display()),
            }
        }
        _ => io_err(p, "read", e),
    })
}

fn read_num<T: std::str::FromStr>(p: &Path, what: &str) -> Result<T, CgroupError> {
    let s = read_ctl(p, what)?;
    s.trim().parse().map_err(|_| CgroupError::Invalid {
        path: p.to_owned(),
        msg: format!("not a number: {s:?}"),
    })
}

fn write_ctl(m: &Mounts, p: &Path, v: &str, what: &str) -> Result<(), CgroupError> {
    let f = fs::OpenOptions::new()
        .write(true)
        .create(m.plain)
        .truncate(m.plain)
        .open(p);
    let mut f = match f {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound && p.parent().is_some_and(Path::exists) => {
            return Err(CgroupError::NoController {
                what: format!("{what}: {} does not exist", p.display()),
            })
        }
        Err(e) => return Err(io_err(p, "write", e)),
    };
    f.write_all(v.as_bytes()).map_err(|e| io_err(p, "write", e))
}

fn read_pids(p: &Path) -> Result<Vec<i32>, CgroupError> {
    let s = match fs::read_to_string(p) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io_err(p, "read", e)),
    };
    Ok(s.split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect())
}

fn subdirs(d: &Path) -> Result<Vec<PathBuf>, CgroupError> {
    let rd = match fs::read_dir(d) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(d, "list", e)),
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.push(e.path());
        }
    }
    out.sort();
    Ok(out)
}

fn collect_pids(d: &Path, out: &mut Vec<i32>) -> Result<(), CgroupError> {
    out.extend(read_pids(&d.join("cgroup.procs"))?);
    for s in subdirs(d)? {
        collect_pids(&s, out)?;
    }
    Ok(())
}

fn mkdir(m: &Mounts, h: &Hierarchy, d: &Path) -> Result<(), CgroupError> {
    match fs::create_dir(d) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(d, "create cgroup", e)),
    }
    // Also for an existing directory (made by hand, or by a run that died half-way).
    if m.version == Version::V1 && h.has("cpuset") {
        init_cpuset_v1(m, d)?;
    }
    Ok(())
}

/// v1 refuses tasks in a cpuset whose cpus or mems are empty: copy the parent's.
fn init_cpuset_v1(m: &Mounts, d: &Path) -> Result<(), CgroupError> {
    let parent = d.parent().unwrap_or(d);
    for f in ["cpuset.cpus", "cpuset.mems"] {
        let mine = fs::read_to_string(d.join(f)).unwrap_or_default();
        if mine.trim().is_empty() {
            let theirs = read_ctl(&parent.join(f), "cpuset controller")?;
            let theirs = theirs.trim();
            if !theirs.is_empty() {
                write_ctl(m, &d.join(f), theirs, "cpuset controller")?;
            }
        }
    }
    Ok(())
}

/// v2: make the controllers available to `d`'s children.
fn enable_controllers(m: &Mounts, h: &Hierarchy, d: &Path) -> Result<(), CgroupError> {
    let p = d.join("cgroup.subtree_control");
    let cur = fs::read_to_string(&p).unwrap_or_default();
    // Every controller of the hierarchy but v1's cpuacct (v2's cpu accounts by itself).
    let want: Vec<&str> = h
        .controllers
        .iter()
        .map(String::as_str)
        .filter(|c| *c != "cpuacct")
        .collect();
    let missing: Vec<String> = want
        .iter()
        .filter(|c| !cur.split_whitespace().any(|x| x == **c))
        .map(|c| format!("+{c}"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let v = missing.join(" ");
    if m.plain {
        let all = format!("{} {}", cur.trim(), want.join(" "));
        return write_ctl(m, &p, all.trim(), "cgroup.subtree_control");
    }
    write_ctl(m, &p, &v, "cgroup.subtree_control").map_err(|e| match e {
        CgroupError::Io { path, source } if source.raw_os_error() == Some(libc::EBUSY) => {
            CgroupError::Invalid {
                path,
                msg: format!(
                    "cannot enable {v}: {} holds processes (cgroup v2 no internal processes \
                     rule); start triage in an empty delegated cgroup",
                    d.display()
                ),
            }
        }
        CgroupError::Io { path, source } if source.raw_os_error() == Some(libc::ENOENT) => {
            CgroupError::NoController {
                what: format!("{v} at {}: not offered by the parent", path.display()),
            }
        }
        e => e,
    })
}

fn rmdir(m: &Mounts, d: &Path) -> io::Result<()> {
    if m.plain {
        // Only remove plain dirs that contain no sub-directories (like cgroupfs).
        if fs::read_dir(d)?.flatten().any(|e| e.path().is_dir()) {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        fs::remove_dir_all(d)
    } else {
        fs::remove_dir(d)
    }
}

/// Move this process out of `d` (to `home`, where it lives) if it is inside.
fn evict_self(m: &Mounts, home: &Path, d: &Path) -> Result<(), CgroupError> {
    let me = std::process::id() as i32;
    if m.version == Version::V1 {
        // v1 may hold single threads of ours: move each back.
        let tids = read_pids(&d.join("tasks"))?;
        for t in tids {
            if Path::new(&format!("/proc/self/task/{t}")).exists() {
                write_ctl(m, &home.join("tasks"), &t.to_string(), "tasks")?;
            }
        }
    }
    if read_pids(&d.join("cgroup.procs"))?.contains(&me) {
        write_ctl(
            m,
            &home.join("cgroup.procs"),
            &me.to_string(),
            "cgroup.procs",
        )?;
    }
    Ok(())
}

const KILL_WAIT: Duration = Duration::from_secs(2);

fn kill_tree(m: &Mounts, home: &Path, d: &Path) -> Result<(), CgroupError> {
    if m.plain || !d.exists() {
        return Ok(());
    }
    let me = std::process::id() as i32;
    let mut all = Vec::new();
    let dirs = tree_dirs(d)?;
    for x in &dirs {
        evict_self(m, home, x)?;
    }
    let deadline = Instant::now() + KILL_WAIT;
    loop {
        all.clear();
        for x in &dirs {
            all.extend(read_pids(&x.join("cgroup.procs"))?);
        }
        all.retain(|&p| p != me);
        if all.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(CgroupError::Busy {
                path: d.to_owned(),
                pids: all,
                waited: KILL_WAIT,
            });
        }
        let kill_file = d.join("cgroup.kill");
        if m.version == Version::V2 && kill_file.exists() {
            let _ = write_ctl(m, &kill_file, "1", "cgroup.kill");
        } else {
            for &p in &all {
                // SAFETY: plain syscall; ESRCH (already gone) is fine.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `d` and all its descendants, deepest first.
fn tree_dirs(d: &Path) -> Result<Vec<PathBuf>, CgroupError> {
    let mut out = Vec::new();
    fn walk(d: &Path, out: &mut Vec<PathBuf>) -> Result<(), CgroupError> {
        for s in subdirs(d)? {
            walk(&s, out)?;
        }
        out.push(d.to_owned());
        Ok(())
    }
    if d.exists() {
        walk(d, &mut out)?;
    }
    Ok(out)
}

fn remove_tree(m: &Mounts, home: &Path, d: &Path) -> Result<(), CgroupError> {
    kill_tree(m, home, d)?;
    for x in tree_dirs(d)? {
        let deadline = Instant::now() + KILL_WAIT;
        loop {
            match rmdir(m, &x) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                    // Exiting tasks may keep the cgroup busy for a moment.
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    return Err(CgroupError::Busy {
                        path: x.clone(),
                        pids: read_pids(&x.join("cgroup.procs")).unwrap_or_default(),
                        waited: KILL_WAIT,
                    })
                }
                Err(e) => return Err(io_err(&x, "remove cgroup", e)),
            }
        }
    }
    Ok(())
}

/// Remove run directories under `top` whose owner is gone.
fn remove_stale(m: &Mounts, home: &Path, top: &Path) {
    let Ok(dirs) = subdirs(top) else {
        return;
    };
    for d in dirs {
        let name = d.file_name().and_then(|n| n.to_str()).unwrap_or("");
        match parse_run_name(name) {
            Some((pid, start, _)) if !owner_alive(pid, start) => match remove_tree(m, home, &d) {
                Ok(()) => tracing::info!("removed stale cgroup {} (owner {pid} gone)", d.display()),
                Err(e) => tracing::warn!("could not remove stale cgroup {}: {e}", d.display()),
            },
            Some(_) => {}
            None => tracing::debug!("leaving foreign cgroup {} alone", d.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI_V1: &str = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:28 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
33 30 0:29 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
34 30 0:30 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
35 30 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const PC_V1: &str = "9:name=systemd:/\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/x/y\n0::/\n";

    #[test]
    fn the_tightest_cap_up_the_tree_is_the_process_cap() {
        let files = |m: &'static [(&'static str, &'static str)]| {
            move |p: &Path| {
                m.iter()
                    .find(|(k, _)| Path::new(k) == p)
                    .map(|(_, v)| v.to_string())
            }
        };
        let v2: &[(&str, &str)] = &[
            ("/cg/a/b/cpu.max", "max 100000\n"),
            ("/cg/a/cpu.max", "20000 100000\n"),
            ("/cg/cpu.max", "150000 100000\n"),
        ];
        let cap = tightest_cap(Path::new("/cg/a/b"), Version::V2, files(v2));
        assert_eq!(cap, Some(0.2), "the parent's 20% binds its child");
        let none: &[(&str, &str)] = &[("/cg/a/cpu.max", "max 100000")];
        assert_eq!(
            tightest_cap(Path::new("/cg/a"), Version::V2, files(none)),
            None
        );
        let v1: &[(&str, &str)] = &[
            ("/v1/x/cpu.cfs_quota_us", "10000\n"),
            ("/v1/x/cpu.cfs_period_us", "100000\n"),
            ("/v1/cpu.cfs_quota_us", "-1\n"),
            ("/v1/cpu.cfs_period_us", "100000\n"),
        ];
        assert_eq!(
            tightest_cap(Path::new("/v1/x"), Version::V1, files(v1)),
            Some(0.1)
        );
    }

    #[test]
    fn detects_separate_v1_hierarchies() {
        let m = detect_from(MI_V1, PC_V1, |_| Some("".into())).unwrap();
        assert_eq!(m.version, Version::V1);
        assert_eq!(m.hierarchies.len(), 3);
        assert_eq!(
            m.hierarchies[0].base,
            PathBuf::from("/sys/fs/cgroup/cpu/x/y")
        );
        assert_eq!(m.hierarchies[0].controllers, vec!["cpu"]);
        assert_eq!(
            m.hierarchies[1].base,
            PathBuf::from("/sys/fs/cgroup/cpuacct")
        );
        assert_eq!(m.hierarchies[2].controllers, vec!["cpuset"]);
    }

    #[test]
    fn detects_comounted_cpu_cpuacct() {
        let mi = "31 30 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        let pc = "2:cpu,cpuacct:/a\n";
        let m = detect_from(mi, pc, |_| None).unwrap();
        assert_eq!(m.hierarchies.len(), 1);
        assert_eq!(m.hierarchies[0].controllers, vec!["cpu", "cpuacct"]);
        assert_eq!(
            m.hierarchies[0].base,
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/a")
        );
    }

    #[test]
    fn prefers_v2_with_cpu_and_handles_namespace_root() {
        let mi = "40 30 0:40 /ns /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let pc = "0::/ns/svc\n";
        let m = detect_from(mi, pc, |p| {
            assert!(
                p == Path::new("/sys/fs/cgroup/svc/cgroup.controllers")
                    || p == Path::new("/sys/fs/cgroup/cgroup.controllers"),
                "{}",
                p.display()
            );
            Some("cpuset cpu io memory pids\n".into())
        })
        .unwrap();
        assert_eq!(m.version, Version::V2);
        assert_eq!(m.hierarchies[0].base, PathBuf::from("/sys/fs/cgroup/svc"));
        assert_eq!(
            m.hierarchies[0].mount.as_deref(),
            Some(Path::new("/sys/fs/cgroup"))
        );
        assert!(m.hierarchies[0].has("cpuset"));
    }

    #[test]
    fn v2_is_chosen_when_only_the_root_offers_cpu() {
        // A leaf whose parent delegates only memory: the root still offers cpu, so v2 is used
        // and cgroup_place finds the place (issue 19, finding 0).
        let mi = "40 30 0:40 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let pc = "0::/box/leaf\n";
        let m = detect_from(mi, pc, |p| {
            Some(if p == Path::new("/sys/fs/cgroup/cgroup.controllers") {
                "cpuset cpu io memory hugetlb pids".into()
            } else {
                "memory".into()
            })
        })
        .unwrap();
        assert_eq!(m.version, Version::V2);
        assert_eq!(
            m.hierarchies[0].base,
            PathBuf::from("/sys/fs/cgroup/box/leaf")
        );
        assert_eq!(
            m.hierarchies[0].controllers,
            vec!["cpu", "cpuacct", "cpuset"]
        );
    }

    #[test]
    fn no_cpu_anywhere_names_what_is_missing() {
        let mi = "35 30 0:31 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let err = detect_from(mi, "0::/\n", |_| Some("memory pids".into())).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("without cpu"), "{msg}");
        assert!(msg.contains("/sys/fs/cgroup/unified"), "{msg}");
        assert!(msg.contains("no cgroup v1 hierarchy with cpu"), "{msg}");
    }

    #[test]
    fn permission_errors_name_path_and_remedy() {
        let e = io_err(
            Path::new("/sys/fs/cgroup/cpu/triage"),
            "create cgroup",
            io::Error::from_raw_os_error(libc::EACCES),
        );
        let msg = e.to_string();
        assert!(matches!(e, CgroupError::NoPermission { .. }));
        assert!(
            msg.contains("create cgroup /sys/fs/cgroup/cpu/triage"),
            "{msg}"
        );
        assert!(msg.contains("run as root"), "{msg}");
        let e = io_err(
            Path::new("/x"),
            "read",
            io::Error::from_raw_os_error(libc::EIO),
        );
        assert!(matches!(e, CgroupError::Io { .. }));
    }

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/plain\"), r"/plain\");
    }

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(format_cpu_list(&[4, 0, 2, 3]), "0,2-4");
        assert_eq!(parse_cpu_list("0,2-4\n"), Some(vec![0, 2, 3, 4]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list(""), Some(vec![]));
    }

    #[test]
    fn names_are_checked() {
        assert!(check_rel("site-a/cgi/req-17").is_ok());
        assert!(check_rel("example.com").is_ok());
        for bad in [
            "",
            "/abs",
            "a//b",
            "a/../b",
            "cpu.max",
            "tasks",
            "a b",
            "cgroup.procs",
        ] {
            assert!(check_rel(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn run_names_parse() {
        assert_eq!(parse_run_name("run-12-345-6"), Some((12, 345, 6)));
        assert_eq!(parse_run_name("run-12-345"), None);
        assert_eq!(parse_run_name("site-a"), None);
        let me = std::process::id() as i32;
        assert!(owner_alive(me, start_time(me).unwrap()));
        assert!(!owner_alive(me, start_time(me).unwrap() + 1));
    }

    #[test]
    fn stat_and_cpu_max_parse() {
        let s =
            "usage_usec 1500\nuser_usec 1000\nnr_periods 10\nnr_throttled 4\nthrottled_usec 7\n";
        assert_eq!(stat_field(s, "usage_usec"), Some(1500));
        assert_eq!(stat_field(s, "nr_throttled"), Some(4));
        assert_eq!(stat_field(s, "nope"), None);
        assert_eq!(
            parse_cpu_max("30000 100000\n"),
            Some((Some(0.3), Duration::from_millis(100)))
        );
        assert_eq!(
            parse_cpu_max("max 100000"),
            Some((None, Duration::from_millis(100)))
        );
    }
}
