//! The cgroup code on ordinary directories that imitate cgroupfs file names: the v2 and v1
//! formats and layouts, checked on any machine (no root, no cgroup controller needed).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use os::cgroup::{CgroupError, CgroupRoot, Mounts, Version};

fn read(p: impl AsRef<Path>) -> String {
    fs::read_to_string(p.as_ref())
        .unwrap_or_else(|e| panic!("{}: {e}", p.as_ref().display()))
        .trim()
        .to_owned()
}

fn v2(tmp: &Path) -> Mounts {
    fs::write(tmp.join("cgroup.controllers"), "cpuset cpu io memory\n").unwrap();
    Mounts::plain(
        Version::V2,
        vec![(vec!["cpu", "cpuacct", "cpuset"], tmp.to_owned())],
    )
}

fn v1(tmp: &Path, with_cpuset: bool, with_acct: bool) -> (Mounts, Vec<PathBuf>) {
    let mut hs = vec![(vec!["cpu"], tmp.join("cpu"))];
    if with_acct {
        hs.push((vec!["cpuacct"], tmp.join("cpuacct")));
    }
    if with_cpuset {
        hs.push((vec!["cpuset"], tmp.join("cpuset")));
    }
    for (_, d) in &hs {
        fs::create_dir_all(d).unwrap();
    }
    if with_cpuset {
        fs::write(tmp.join("cpuset/cpuset.cpus"), "0-3\n").unwrap();
        fs::write(tmp.join("cpuset/cpuset.mems"), "0\n").unwrap();
    }
    let dirs = hs.iter().map(|(_, d)| d.clone()).collect();
    (Mounts::plain(Version::V1, hs), dirs)
}

#[test]
fn v2_files_and_subtree_control() {
    let tmp = tempfile::tempdir().unwrap();
    let r = CgroupRoot::open_in("triage", v2(tmp.path())).unwrap();
    assert_eq!(r.version(), Version::V2);
    let g = r.create("site-a/cgi/req-1").unwrap();
    let run = r.path();
    assert_eq!(run.parent().unwrap(), tmp.path().join("triage"));
    assert_eq!(g.path(), run.join("site-a/cgi/req-1"));
    // Controllers are enabled on every level above the leaf.
    for d in [
        tmp.path().to_owned(),
        tmp.path().join("triage"),
        run.clone(),
        run.join("site-a"),
        run.join("site-a/cgi"),
    ] {
        let sc = read(d.join("cgroup.subtree_control"));
        assert!(
            sc.contains("cpu") && sc.contains("cpuset"),
            "{}: {sc}",
            d.display()
        );
    }
    assert!(!g.path().join("cgroup.subtree_control").exists());

    g.set_cpu_max(Some(0.3), Duration::from_millis(100))
        .unwrap();
    assert_eq!(read(g.path().join("cpu.max")), "30000 100000");
    assert_eq!(
        g.cpu_max().unwrap(),
        (Some(0.3), Duration::from_millis(100))
    );
    g.set_cpu_max(Some(1.5), Duration::from_millis(50)).unwrap();
    assert_eq!(read(g.path().join("cpu.max")), "75000 50000");
    g.set_cpu_max(Some(0.0001), Duration::from_millis(100))
        .unwrap();
    assert_eq!(
        read(g.path().join("cpu.max")),
        "1000 100000",
        "kernel minimum 1 ms"
    );
    g.set_cpu_max(None, Duration::from_millis(100)).unwrap();
    assert_eq!(read(g.path().join("cpu.max")), "max 100000");
    for bad in [Some(0.0), Some(-1.0), Some(f64::NAN), Some(f64::INFINITY)] {
        let e = g.set_cpu_max(bad, Duration::from_millis(100)).unwrap_err();
        assert!(matches!(e, CgroupError::Invalid { .. }), "{e}");
    }
    let e = g
        .set_cpu_max(Some(0.5), Duration::from_secs(2))
        .unwrap_err();
    assert!(e.to_string().contains("period"), "{e}");

    g.set_weight(250).unwrap();
    assert_eq!(read(g.path().join("cpu.weight")), "250");
    for bad in [0, 10_001] {
        let e = g.set_weight(bad).unwrap_err();
        assert!(e.to_string().contains("outside 1..=10000"), "{e}");
    }
    g.set_cpus(&[3, 0, 1]).unwrap();
    assert_eq!(read(g.path().join("cpuset.cpus")), "0-1,3");

    fs::write(
        g.path().join("cpu.stat"),
        "usage_usec 1500000\nuser_usec 1\nsystem_usec 2\nnr_periods 40\nnr_throttled 30\nthrottled_usec 250\n",
    )
    .unwrap();
    assert_eq!(g.cpu_usage().unwrap(), Duration::from_millis(1500));
    let st = g.cpu_stat().unwrap();
    assert_eq!((st.nr_periods, st.nr_throttled), (40, 30));
    assert_eq!(st.throttled, Duration::from_micros(250));

    g.add_pid(4242).unwrap();
    assert_eq!(g.pids().unwrap(), vec![4242]);
    assert!(g.dir_fd().is_some());

    let parent = r.create("site-a").unwrap();
    parent.remove().unwrap();
    assert!(!run.join("site-a").exists());
    r.cleanup().unwrap();
    assert!(!run.exists());
    assert!(
        !tmp.path().join("triage").exists(),
        "empty top dir removed too"
    );
}

#[test]
fn v2_missing_control_file_names_the_controller() {
    let tmp = tempfile::tempdir().unwrap();
    let r = CgroupRoot::open_in("triage", v2(tmp.path())).unwrap();
    let g = r.create("a").unwrap();
    let e = g.cpu_usage().unwrap_err();
    assert!(matches!(e, CgroupError::NoController { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("cpu.stat") && msg.contains("does not exist"),
        "{msg}"
    );
}

#[test]
fn v1_separate_hierarchies() {
    let tmp = tempfile::tempdir().unwrap();
    let (m, bases) = v1(tmp.path(), true, true);
    let r = CgroupRoot::open_in("triage", m).unwrap();
    assert_eq!(r.version(), Version::V1);
    let g = r.create("lab-1/server").unwrap();
    let run_name = r.path().file_name().unwrap().to_owned();
    for b in &bases {
        assert!(b
            .join("triage")
            .join(&run_name)
            .join("lab-1/server")
            .is_dir());
    }
    // cpuset.cpus and cpuset.mems copied down every level.
    let cs = tmp.path().join("cpuset/triage").join(&run_name);
    for d in [cs.clone(), cs.join("lab-1"), cs.join("lab-1/server")] {
        assert_eq!(read(d.join("cpuset.cpus")), "0-3", "{}", d.display());
        assert_eq!(read(d.join("cpuset.mems")), "0", "{}", d.display());
    }
    assert!(g.path().starts_with(tmp.path().join("cpu")));

    g.set_cpu_max(Some(0.3), Duration::from_millis(100))
        .unwrap();
    assert_eq!(read(g.path().join("cpu.cfs_quota_us")), "30000");
    assert_eq!(read(g.path().join("cpu.cfs_period_us")), "100000");
    assert_eq!(
        g.cpu_max().unwrap(),
        (Some(0.3), Duration::from_millis(100))
    );
    g.set_cpu_max(None, Duration::from_millis(100)).unwrap();
    assert_eq!(read(g.path().join("cpu.cfs_quota_us")), "-1");
    assert_eq!(g.cpu_max().unwrap().0, None);

    g.set_weight(100).unwrap();
    assert_eq!(read(g.path().join("cpu.shares")), "1024");
    g.set_weight(10_000).unwrap();
    assert_eq!(read(g.path().join("cpu.shares")), "102400");
    g.set_weight(1).unwrap();
    assert_eq!(read(g.path().join("cpu.shares")), "10");

    g.set_cpus(&[0]).unwrap();
    assert_eq!(read(cs.join("lab-1/server/cpuset.cpus")), "0");

    let acct = tmp
        .path()
        .join("cpuacct/triage")
        .join(&run_name)
        .join("lab-1/server/cpuacct.usage");
    fs::write(&acct, "2500000000\n").unwrap();
    assert_eq!(g.cpu_usage().unwrap(), Duration::from_millis(2500));
    fs::write(
        g.path().join("cpu.stat"),
        "nr_periods 10\nnr_throttled 9\nthrottled_time 5000\n",
    )
    .unwrap();
    assert_eq!(g.cpu_stat().unwrap().throttled, Duration::from_micros(5));

    // add_pid writes every hierarchy.
    g.add_pid(77).unwrap();
    for b in &bases {
        let p = b
            .join("triage")
            .join(&run_name)
            .join("lab-1/server/cgroup.procs");
        assert_eq!(read(p), "77");
    }
    assert!(g.dir_fd().is_none(), "no CLONE_INTO_CGROUP on v1");
    r.cleanup().unwrap();
    for b in &bases {
        assert!(!b.join("triage").exists(), "{} left", b.display());
    }
}

#[test]
fn v1_without_cpuset_or_cpuacct_says_what_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let (m, _) = v1(tmp.path(), false, false);
    let r = CgroupRoot::open_in("triage", m).unwrap();
    let g = r.create("a").unwrap();
    let e = g.set_cpus(&[0]).unwrap_err();
    assert!(matches!(e, CgroupError::Unsupported(_)), "{e}");
    assert!(e.to_string().contains("no cpuset controller"), "{e}");
    let e = g.cpu_usage().unwrap_err();
    assert!(e.to_string().contains("cpuacct"), "{e}");
}

#[test]
fn layout_without_cpu_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let m = Mounts::plain(Version::V1, vec![(vec!["cpuset"], tmp.path().to_owned())]);
    let e = CgroupRoot::open_in("triage", m).unwrap_err();
    assert!(e.to_string().contains("cpu controller"), "{e}");
}

#[test]
fn stale_run_dirs_of_dead_owners_are_removed_others_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (m, bases) = v1(tmp.path(), true, true);
    let me = std::process::id();
    let stat = fs::read_to_string("/proc/self/stat").unwrap();
    let start: u64 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    // Our own pid with another start time: a dead owner whose pid was reused.
    let dead = format!("run-{me}-{}-0", start + 1);
    let live = format!("run-{me}-{start}-99999");
    for b in &bases {
        fs::create_dir_all(b.join("triage").join(&dead).join("site/cgi")).unwrap();
        fs::create_dir_all(b.join("triage").join(&live)).unwrap();
        fs::create_dir_all(b.join("triage/foreign")).unwrap();
    }
    let r = CgroupRoot::open_in("triage", m).unwrap();
    for b in &bases {
        assert!(!b.join("triage").join(&dead).exists());
        assert!(b.join("triage").join(&live).exists());
        assert!(b.join("triage/foreign").exists());
    }
    r.cleanup().unwrap();
    // The shared top stays while others use it.
    for b in &bases {
        assert!(b.join("triage").join(&live).exists());
    }
}

#[test]
fn bad_names_are_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let r = CgroupRoot::open_in("triage", v2(tmp.path())).unwrap();
    for bad in ["../escape", "/abs", "a//b", "cpu.max", "sp ace"] {
        let e = r.create(bad).unwrap_err();
        assert!(matches!(e, CgroupError::BadName { .. }), "{bad}: {e}");
    }
    assert!(CgroupRoot::open_in("../x", v2(tmp.path())).is_err());
}

#[test]
fn run_dirs_of_a_process_are_found_in_every_hierarchy() {
    let tmp = tempfile::tempdir().unwrap();
    let (m, dirs) = v1(tmp.path(), true, true);
    let me = std::process::id() as i32;
    assert!(m.run_dirs_of("lab", me).is_empty());
    let r = CgroupRoot::open_in("lab", m.clone()).unwrap();
    let found = m.run_dirs_of("lab", me);
    assert_eq!(found.len(), dirs.len(), "{found:?}");
    assert!(found.contains(&r.path()), "{found:?}");
    // Another owner's directory, or any other name, is not ours.
    fs::create_dir_all(dirs[0].join("lab").join(format!("run-{}-1-0", me + 1))).unwrap();
    fs::create_dir_all(dirs[0].join("lab").join("other")).unwrap();
    assert_eq!(m.run_dirs_of("lab", me).len(), dirs.len());
    r.cleanup().unwrap();
    assert!(m.run_dirs_of("lab", me).is_empty());
}
