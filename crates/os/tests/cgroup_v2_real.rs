//! cgroup v2's real rules, on this kernel: the placement of triage's tree
//! ([`os::cgroup_place`]) and a [`CgroupRoot`] built on it, with `hugetlb` standing in for `cpu`
//! (the same `cgroup.subtree_control` and "no internal processes" rules; this machine's v2 mount
//! offers no `cpu`). Needs root and a v2 mount offering `hugetlb`; prints SKIP otherwise.
//!
//! One test function on purpose: it moves this very process between cgroups of the v2
//! hierarchy, which parallel tests of the same binary must not race with.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use os::cgroup_place::{place, PlaceKind, Request};
use os::{CgroupRoot, Mounts};

/// Controllers the kernel marks threaded: exempt from the "no internal processes" rule.
const THREADED: [&str; 4] = ["cpu", "cpuset", "perf_event", "pids"];

/// The controller standing in for `cpu`: `hugetlb`, or `$TRIAGE_TEST_CTL` (the device script
/// runs this test with `cpu` itself on a pure v2 machine).
fn ctl_name() -> &'static str {
    static C: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    C.get_or_init(|| std::env::var("TRIAGE_TEST_CTL").unwrap_or_else(|_| "hugetlb".into()))
}

fn v2_mount() -> Option<PathBuf> {
    let mi = fs::read_to_string("/proc/self/mountinfo").ok()?;
    mi.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split(' ').next()? != "cgroup2" {
            return None;
        }
        Some(PathBuf::from(left.split(' ').nth(4)?))
    })
}

fn put(p: impl AsRef<Path>, v: &str) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(p.as_ref())?
        .write_all(v.as_bytes())
}

fn read(p: impl AsRef<Path>) -> String {
    fs::read_to_string(p.as_ref()).unwrap_or_default()
}

fn has(p: impl AsRef<Path>, ctl: &str) -> bool {
    read(p).split_whitespace().any(|c| c == ctl)
}

/// The v2 cgroup of `pid`, as a path under `mount`.
fn cgroup_of(mount: &Path, pid: u32) -> PathBuf {
    let s = read(format!("/proc/{pid}/cgroup"));
    let rel = s
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/")
        .trim_start_matches('/')
        .to_owned();
    if rel.is_empty() {
        mount.to_owned()
    } else {
        mount.join(rel)
    }
}

/// Everything this test made, removed even when an assertion fails.
struct Scene {
    mount: PathBuf,
    /// Where this process was when the test began (it goes back there first).
    home: PathBuf,
    dirs: Vec<PathBuf>,
    children: Vec<Child>,
    root_enabled: bool,
}

impl Scene {
    fn dir(&mut self, d: PathBuf) -> PathBuf {
        fs::create_dir(&d).unwrap();
        self.dirs.push(d.clone());
        d
    }

    fn child_in(&mut self, d: &Path) -> u32 {
        let c = Command::new("sleep").arg("60").spawn().unwrap();
        let pid = c.id();
        self.children.push(c);
        put(d.join("cgroup.procs"), &pid.to_string()).unwrap();
        pid
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let ctl = ctl_name();
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = put(
            self.home.join("cgroup.procs"),
            &std::process::id().to_string(),
        );
        // Deepest first, whatever is left below the dirs made here.
        let mut all = Vec::new();
        fn walk(d: &Path, out: &mut Vec<PathBuf>) {
            if let Ok(rd) = fs::read_dir(d) {
                for e in rd.flatten() {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        walk(&e.path(), out);
                    }
                }
            }
            out.push(d.to_owned());
        }
        for d in self.dirs.iter().rev() {
            walk(d, &mut all);
        }
        for d in all {
            let _ = put(d.join("cgroup.subtree_control"), &format!("-{ctl}"));
            let _ = fs::remove_dir(&d);
        }
        if self.root_enabled {
            let _ = put(
                self.mount.join("cgroup.subtree_control"),
                &format!("-{ctl}"),
            );
        }
    }
}

fn ctl_slice() -> &'static [&'static str] {
    static S: std::sync::OnceLock<[&'static str; 1]> = std::sync::OnceLock::new();
    S.get_or_init(|| [ctl_name()])
}

fn req<'a>(mount: &'a Path, origin: &'a Path, pid: u32, beside: bool) -> Request<'a> {
    Request {
        mount,
        origin,
        pid: pid as i32,
        required: ctl_slice(),
        optional: &[],
        allow_beside: beside,
        systemd: false,
    }
}

fn leftovers(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(d)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn real_v2_placement_with_hugetlb() {
    let ctl = ctl_name();
    if !nix::unistd::geteuid().is_root() {
        println!("SKIP real_v2_placement_with_hugetlb: not root");
        return;
    }
    let Some(mount) = v2_mount() else {
        println!("SKIP real_v2_placement_with_hugetlb: no cgroup2 mount");
        return;
    };
    if !has(mount.join("cgroup.controllers"), ctl) {
        println!("SKIP real_v2_placement_with_hugetlb: {ctl} not offered by {mount:?}");
        return;
    }
    let me = std::process::id();
    let home = cgroup_of(&mount, me);
    let mut sc = Scene {
        mount: mount.clone(),
        home: home.clone(),
        dirs: Vec::new(),
        children: Vec::new(),
        root_enabled: false,
    };
    if !has(mount.join("cgroup.subtree_control"), ctl) {
        put(mount.join("cgroup.subtree_control"), &format!("+{ctl}")).unwrap();
        sc.root_enabled = true;
    }
    let tag = format!("cgv2-test-{me}");

    // A. The kernel's rule: a cgroup holding a process cannot enable a controller for its
    // children. In place, the process moves into a leaf and the cgroup can.
    let t = sc.dir(mount.join(format!("{tag}-a")));
    let child = sc.child_in(&t);
    assert!(has(t.join("cgroup.controllers"), ctl));
    // The rule binds domain controllers (`hugetlb`, `memory`, `io`); threaded ones (`cpu`,
    // `cpuset`, `pids`) "can handle internal competition" and are enabled all the same
    // (kernel/cgroup/cgroup.c, cgroup_vet_subtree_control_enable), so with `cpu` itself the
    // write succeeds, and is undone before placing.
    let w = put(t.join("cgroup.subtree_control"), &format!("+{ctl}"));
    if THREADED.contains(&ctl) {
        w.unwrap();
        put(t.join("cgroup.subtree_control"), &format!("-{ctl}")).unwrap();
    } else {
        let e = w.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBUSY), "{e}");
    }
    let p = place(&req(&mount, &t, child, false)).unwrap();
    assert_eq!(p.kind, PlaceKind::InPlace);
    assert_eq!(p.base, t);
    let leaf = p.leaf.clone().unwrap();
    assert_eq!(cgroup_of(&mount, child), leaf);
    assert!(has(t.join("cgroup.subtree_control"), ctl));
    // A tree below it gets the controller on every level.
    let top = t.join("triage");
    fs::create_dir(&top).unwrap();
    put(top.join("cgroup.subtree_control"), &format!("+{ctl}")).unwrap();
    fs::create_dir(top.join("site")).unwrap();
    assert!(has(top.join("site/cgroup.controllers"), ctl));
    fs::remove_dir(top.join("site")).unwrap();
    fs::remove_dir(&top).unwrap();
    p.release().unwrap();
    assert_eq!(cgroup_of(&mount, child), t, "moved back where it was");
    assert!(!has(t.join("cgroup.subtree_control"), ctl));
    assert_eq!(leftovers(&t), Vec::<String>::new(), "the leaf is gone");

    // B. A leaf whose parent enables nothing (as a parent delegating only `memory` gives no
    // `cpu`): in place is refused, naming the file; beside the service manager works as root.
    let par = sc.dir(mount.join(format!("{tag}-b")));
    let lf = sc.dir(par.join("leaf"));
    let child_b = sc.child_in(&lf);
    let err = place(&req(&mount, &lf, child_b, false)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(
            "{ctl} is not in {}/cgroup.controllers",
            lf.display()
        )),
        "{msg}"
    );
    assert!(msg.contains("enables only []"), "{msg}");
    assert!(msg.contains("not tried (needs root)"), "{msg}");
    let p = place(&req(&mount, &lf, child_b, true)).unwrap();
    assert_eq!(p.kind, PlaceKind::Beside);
    assert_eq!(p.base, mount);
    assert!(p.leaf.is_none());
    assert_eq!(cgroup_of(&mount, child_b), lf, "beside: the process stays");
    assert_eq!(p.refused.len(), 1);
    p.release().unwrap();

    // C. Another process in the same cgroup: triage moves only itself, so in place is refused.
    let t3 = sc.dir(mount.join(format!("{tag}-c")));
    let c1 = sc.child_in(&t3);
    let c2 = sc.child_in(&t3);
    let msg = place(&req(&mount, &t3, c1, false)).unwrap_err().to_string();
    assert!(msg.contains(&format!("holds processes [{c2}]")), "{msg}");
    assert_eq!(leftovers(&t3), Vec::<String>::new(), "nothing left behind");
    assert!(!has(t3.join("cgroup.subtree_control"), ctl));

    // D. A CgroupRoot for this very process, started in a cgroup of its own (as the lab starts
    // the server): it moves into a leaf, builds its tree, and undoes everything when dropped.
    let td = sc.dir(mount.join(format!("{tag}-d")));
    put(td.join("cgroup.procs"), &me.to_string()).unwrap();
    // A failed open leaves nothing behind (a controller that does not exist).
    let bad = Mounts::v2_at(&mount, &td, &[ctl, "nosuchctl"]);
    let e = CgroupRoot::open_in("triage", bad).unwrap_err();
    assert!(e.to_string().contains("nosuchctl"), "{e}");
    assert_eq!(leftovers(&td), Vec::<String>::new());
    assert_eq!(cgroup_of(&mount, me), td);
    let r = CgroupRoot::open_in("triage", Mounts::v2_at(&mount, &td, &[ctl])).unwrap();
    assert_eq!(r.place_kind(), Some(PlaceKind::InPlace));
    let mine = cgroup_of(&mount, me);
    assert_eq!(mine.parent(), Some(td.as_path()));
    let g = r.create("site-a/cgi/req-1").unwrap();
    assert!(g.path().starts_with(td.join("triage")));
    assert!(has(g.path().join("cgroup.controllers"), ctl));
    let c = Command::new("sleep").arg("60").spawn().unwrap();
    let cpid = c.id() as i32;
    sc.children.push(c);
    g.add_pid(cpid).unwrap();
    assert_eq!(g.pids().unwrap(), vec![cpid]);
    // A second root of the same process shares the placement.
    let r2 = CgroupRoot::open_in("triage-lab", Mounts::v2_at(&mount, &mine, &[ctl])).unwrap();
    assert!(r2.path().starts_with(td.join("triage-lab")));
    g.remove().unwrap();
    drop(r);
    assert_eq!(cgroup_of(&mount, me), mine, "still placed while r2 lives");
    drop(r2);
    assert_eq!(cgroup_of(&mount, me), td, "back where it started");
    assert!(!has(td.join("cgroup.subtree_control"), ctl));
    assert_eq!(leftovers(&td), Vec::<String>::new(), "nothing left behind");
}
