//! cgroup `favordynmods`: moves between cgroups without waiting for an RCU grace period.
//!
//! A write to `cgroup.procs` or `tasks` takes the kernel's `cgroup_threadgroup_rwsem` for
//! writing. That lock is per-CPU, made for forks and exits, and its writer waits for an RCU
//! grace period first: on a busy machine with a non-preemptible kernel a move took 0.2 ms at
//! the median and 11 ms at p99 here (6.18, HZ=250, two CPUs busy), up to 33 ms in the POS
//! lab. A cgroup hierarchy mounted with `favordynmods` turns that lock's fast path off, for
//! every hierarchy: forks and exits pay a little more, moves no longer wait (p99 0.35 ms in
//! the same probe). Since 6.18 the kernel also switches cgroup.procs writes to a lock per
//! thread group then, and keeps that switch until reboot, even if the option is removed.
//!
//! cgroup v1 refuses the option on a remount (only on a hierarchy's first mount), so this
//! module sets it on the cgroup v2 root: remounted where it is mounted (with its current
//! options, so nothing else changes), or mounted for a moment on a fresh directory where it
//! is not.

use std::io;
use std::path::{Path, PathBuf};

use nix::mount::MsFlags;

/// The option's name, in a mount's super options and on the mount command line.
pub const OPTION: &str = "favordynmods";

/// A cgroup mount of `/proc/self/mountinfo`, the parts this module needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// Mount point.
    pub point: PathBuf,
    /// `cgroup2` rather than `cgroup`.
    pub v2: bool,
    /// Per-mount options (`rw,nosuid,nodev,noexec,relatime`).
    pub mount_opts: Vec<String>,
    /// Super block options (`rw,nsdelegate,memory_recursiveprot`).
    pub super_opts: Vec<String>,
}

impl CgroupMount {
    /// Whether this hierarchy was mounted with `favordynmods`.
    pub fn favors(&self) -> bool {
        self.super_opts.iter().any(|o| o == OPTION)
    }
}

/// The cgroup mounts (v1 and v2) of a `/proc/self/mountinfo` text.
pub fn parse_mounts(mountinfo: &str) -> Vec<CgroupMount> {
    crate::cgroup::parse_mountinfo(mountinfo)
        .into_iter()
        .filter(|m| matches!(m.fstype.as_str(), "cgroup" | "cgroup2"))
        .map(|m| CgroupMount {
            v2: m.fstype == "cgroup2",
            point: m.point,
            mount_opts: m.mountopts,
            super_opts: m.superopts,
        })
        .collect()
}

/// The mount flags and data of a remount of `m` that keeps every option it has and adds
/// `favordynmods`.
pub fn remount_args(m: &CgroupMount) -> (MsFlags, String) {
    let mut flags = MsFlags::MS_REMOUNT;
    for o in &m.mount_opts {
        flags |= match o.as_str() {
            "ro" => MsFlags::MS_RDONLY,
            "nosuid" => MsFlags::MS_NOSUID,
            "nodev" => MsFlags::MS_NODEV,
            "noexec" => MsFlags::MS_NOEXEC,
            "noatime" => MsFlags::MS_NOATIME,
            "nodiratime" => MsFlags::MS_NODIRATIME,
            "relatime" => MsFlags::MS_RELATIME,
            "strictatime" => MsFlags::MS_STRICTATIME,
            _ => MsFlags::empty(),
        };
    }
    let mut data: Vec<&str> = m
        .super_opts
        .iter()
        .map(String::as_str)
        .filter(|o| !matches!(*o, "rw" | "ro") && *o != OPTION)
        .collect();
    data.push(OPTION);
    (flags, data.join(","))
}

/// Where `favordynmods` stands, from the mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Favor {
    /// A hierarchy mounted at this point has the option.
    On(PathBuf),
    /// No cgroup mount shows it (since 6.18 the kernel may still favour moves, after the
    /// option was set once and removed: the mounts cannot tell).
    Off,
}

/// Where `favordynmods` stands on this machine.
pub fn state() -> io::Result<Favor> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(state_of(&parse_mounts(&text)))
}

/// Where `favordynmods` stands among `mounts`.
pub fn state_of(mounts: &[CgroupMount]) -> Favor {
    mounts
        .iter()
        .find(|m| m.favors())
        .map_or(Favor::Off, |m| Favor::On(m.point.clone()))
}

/// What [`favor`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Favored {
    /// A hierarchy had the option already (mounted at this point).
    Already(PathBuf),
    /// The cgroup v2 mount at this point was remounted with it.
    Remounted(PathBuf),
    /// No cgroup v2 was mounted: it was mounted with the option on a temporary directory,
    /// which sets it on the v2 root, and unmounted again.
    Mounted,
}

impl std::fmt::Display for Favored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Already(p) => write!(f, "already on ({})", p.display()),
            Self::Remounted(p) => write!(f, "turned on ({} remounted)", p.display()),
            Self::Mounted => write!(f, "turned on (cgroup2 mounted with it for a moment)"),
        }
    }
}

/// Turn `favordynmods` on (needs root). The kernel may keep it until reboot: it is not
/// undone.
pub fn favor() -> io::Result<Favored> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mounts = parse_mounts(&text);
    if let Favor::On(p) = state_of(&mounts) {
        return Ok(Favored::Already(p));
    }
    let why = |what: &str, p: &Path, e: nix::Error| {
        io::Error::new(
            io::Error::from(e).kind(),
            format!("{what} {} with {OPTION}: {e}", p.display()),
        )
    };
    if let Some(m) = mounts.iter().find(|m| m.v2) {
        let (flags, data) = remount_args(m);
        nix::mount::mount(
            None::<&str>,
            &m.point,
            Some("cgroup2"),
            flags,
            Some(data.as_str()),
        )
        .map_err(|e| why("remounting", &m.point, e))?;
        return Ok(Favored::Remounted(m.point.clone()));
    }
    let dir = std::env::temp_dir().join(format!("triage-cgroup2-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let r = nix::mount::mount(
        Some("cgroup2"),
        &dir,
        Some("cgroup2"),
        MsFlags::empty(),
        Some(OPTION),
    )
    .map_err(|e| why("mounting cgroup2 on", &dir, e));
    if r.is_ok() {
        let _ = nix::mount::umount(&dir);
    }
    let _ = std::fs::remove_dir(&dir);
    r.map(|()| Favored::Mounted)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
35 25 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec - tmpfs tmpfs rw,mode=755
36 35 0:31 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate
37 35 0:32 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
";

    #[test]
    fn mounts_parse_and_the_remount_keeps_every_option() {
        let m = parse_mounts(HYBRID);
        assert_eq!(m.len(), 2, "tmpfs is not a cgroup mount");
        assert!(m[0].v2 && !m[1].v2);
        assert_eq!(state_of(&m), Favor::Off);
        let (flags, data) = remount_args(&m[0]);
        assert_eq!(
            flags,
            MsFlags::MS_REMOUNT
                | MsFlags::MS_NOSUID
                | MsFlags::MS_NODEV
                | MsFlags::MS_NOEXEC
                | MsFlags::MS_RELATIME
        );
        assert_eq!(data, "nsdelegate,favordynmods");
    }

    #[test]
    fn a_hierarchy_with_the_option_is_found() {
        let text = HYBRID.replace("rw,cpu", "rw,cpu,favordynmods");
        let m = parse_mounts(&text);
        assert_eq!(state_of(&m), Favor::On("/sys/fs/cgroup/cpu".into()));
        // Asked again, the option is not repeated.
        let mut v2 = m[0].clone();
        v2.super_opts.push(OPTION.into());
        assert_eq!(remount_args(&v2).1, "nsdelegate,favordynmods");
    }
}
