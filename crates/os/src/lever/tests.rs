use super::*;
use std::process::{Child, Command};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn sleeper() -> Child {
    Command::new("sleep").arg("30").spawn().unwrap()
}

fn stop(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

#[test]
fn journal_replays_raises_and_restores() {
    let text = "R 10 555 0 0 -\nR 11 556 5 100000 /sys/fs/cgroup/cpu/a\nL 10\nR 12 9 bad\nR 13";
    let live = journal::parse(text);
    assert_eq!(live.keys().copied().collect::<Vec<_>>(), vec![11]);
    let s = &live[&11];
    assert_eq!((s.start_time, s.nice, s.slice_ns), (556, 5, 100_000));
    assert_eq!(s.cgroup.as_deref(), Some(Path::new("/sys/fs/cgroup/cpu/a")));
    assert_eq!(s.policy, None);
    // The real-time lever's `P` line: the policy to put back, for the task raised last.
    let live = journal::parse("R 20 7 0 0 -\nP 20 0\nP 99 0\nP 20 x\n");
    assert_eq!(live[&20].policy, Some(0));
    assert!(
        !live.contains_key(&99),
        "a P line without its R raises nothing"
    );
    assert_eq!(
        journal::parse_start_time("7 (a b) S 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 4242 0 0"),
        Some(4242)
    );
}

#[test]
fn cpu_mount_from_mountinfo() {
    let mi = "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
              31 25 0:27 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n";
    let m = weight::parse_cpu_mount(mi).unwrap();
    assert_eq!(m.dir, Path::new("/sys/fs/cgroup/cpu,cpuacct"));
    assert!(!m.v2);
    assert_eq!(
        weight::boost_dir_name(&m, Path::new("/sys/fs/cgroup/cpu,cpuacct/lab/x")),
        Some(PathBuf::from(
            "/sys/fs/cgroup/cpu,cpuacct/lab/triage-pos-boost"
        ))
    );
    assert_eq!(
        weight::parse_cpu_mount("31 25 0:27 / /x rw - cgroup cgroup rw,cpuset\n"),
        None
    );
}

#[test]
fn lever_names() {
    for k in [
        LeverKind::Nice,
        LeverKind::NiceSlice,
        LeverKind::Weight,
        LeverKind::Fifo,
    ] {
        assert_eq!(LeverKind::parse(k.name()), Ok(k));
        assert_eq!(k.second_budget(), k == LeverKind::Fifo);
    }
    assert!(LeverKind::parse("rr").unwrap_err().contains("nice+slice"));
}

#[test]
fn raise_lower_and_drop_restore_nice() {
    if !is_root() {
        eprintln!("SKIP raise_lower_and_drop_restore_nice: needs root (CAP_SYS_NICE)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (sleeper(), sleeper());
    let (pa, pb) = (a.id() as Tid, b.id() as Tid);
    // The test may itself run niced (`nice cargo test`): compare with what the child had.
    let base = prio::thread_nice(pa).unwrap();
    prio::set_thread_nice(pb, 3).unwrap();
    let mut lever = Lever::new(LeverConfig::new(LeverKind::NiceSlice), dir.path()).unwrap();
    lever.raise(pa).unwrap();
    lever.raise(pb).unwrap();
    lever.raise(pb).unwrap(); // twice: one record
    assert_eq!(prio::thread_nice(pa).unwrap(), -20);
    assert_eq!(prio::thread_nice(pb).unwrap(), -20);
    assert_eq!(lever.raised(), 2);
    let journal = lever.journal_path().unwrap().to_owned();
    assert_eq!(
        journal::parse(&std::fs::read_to_string(&journal).unwrap()).len(),
        2
    );
    lever.lower(pa).unwrap();
    assert_eq!(prio::thread_nice(pa).unwrap(), base);
    assert!(!lever.is_raised(pa));
    // A task gone while raised: lowering it is a clean detach.
    let pb_gone = pb;
    stop(b);
    assert!(lever.lower(pb_gone).is_ok());
    assert!(matches!(lever.raise(pb_gone), Err(LeverError::Gone(_))));
    lever.raise(pa).unwrap();
    drop(lever);
    assert_eq!(prio::thread_nice(pa).unwrap(), base, "drop restores");
    assert!(
        !journal.exists(),
        "the journal is removed once all is restored"
    );
    stop(a);
}

#[test]
fn a_nice_raise_leaves_the_slice_a_task_asked_for() {
    if !is_root() {
        eprintln!("SKIP a_nice_raise_leaves_the_slice_a_task_asked_for: needs root (CAP_SYS_NICE)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let a = sleeper();
    let pa = a.id() as Tid;
    let short = Duration::from_micros(100);
    prio::set_thread_slice(pa, Some(short)).unwrap();
    let mut lever = Lever::new(LeverConfig::new(LeverKind::Nice), dir.path()).unwrap();
    for _ in 0..2 {
        lever.raise(pa).unwrap();
        assert_eq!(prio::thread_slice_ns(pa).unwrap(), 100_000, "raised");
        lever.lower(pa).unwrap();
        assert_eq!(prio::thread_slice_ns(pa).unwrap(), 100_000, "restored");
    }
    lever.raise(pa).unwrap();
    drop(lever);
    assert_eq!(prio::thread_slice_ns(pa).unwrap(), 100_000, "dropped");
    stop(a);
}

#[test]
fn a_graded_raise_is_restored_to_the_base_value() {
    if !is_root() {
        eprintln!("SKIP a_graded_raise_is_restored_to_the_base_value: needs root (CAP_SYS_NICE)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let a = sleeper();
    let pa = a.id() as Tid;
    let base = prio::thread_nice(pa).unwrap();
    let mut lever = Lever::new(LeverConfig::new(LeverKind::Nice), dir.path()).unwrap();
    // Not held: nothing is changed.
    lever.set_level(pa, -10).unwrap();
    assert_eq!(prio::thread_nice(pa).unwrap(), base);
    lever.raise(pa).unwrap();
    lever.set_level(pa, -10).unwrap();
    assert_eq!(prio::thread_nice(pa).unwrap(), -10);
    lever.set_level(pa, -20).unwrap();
    assert_eq!(prio::thread_nice(pa).unwrap(), -20);
    lever.set_level(pa, -10).unwrap();
    drop(lever);
    assert_eq!(
        prio::thread_nice(pa).unwrap(),
        base,
        "drop restores the base"
    );
    stop(a);
}

/// The child half of [`a_killed_daemon_is_undone_on_the_next_start`]: raise the task named in
/// the environment, say so, and wait to be killed.
#[test]
fn crash_child() {
    let (Ok(dir), Ok(tid)) = (
        std::env::var("OS_LEVER_CRASH_DIR"),
        std::env::var("OS_LEVER_CRASH_TID"),
    ) else {
        return;
    };
    let kind = std::env::var("OS_LEVER_CRASH_KIND").unwrap_or_else(|_| "nice".into());
    let kind = LeverKind::parse(&kind).unwrap();
    let mut lever = Lever::new(LeverConfig::new(kind), Path::new(&dir)).unwrap();
    lever.raise(tid.parse().unwrap()).unwrap();
    println!("RAISED");
    std::mem::forget(lever); // as a crash would
    std::thread::sleep(std::time::Duration::from_secs(30));
}

/// A process (this test binary's [`crash_child`]) that raises `tid` with a `kind` lever
/// journaling into `dir`, returned once it says it did.
fn crash_daemon(dir: &Path, tid: Tid, kind: LeverKind) -> Child {
    let mut daemon = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "lever::tests::crash_child", "--nocapture"])
        .env("OS_LEVER_CRASH_DIR", dir)
        .env("OS_LEVER_CRASH_TID", tid.to_string())
        .env("OS_LEVER_CRASH_KIND", kind.name())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(daemon.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        use std::io::BufRead;
        if out.read_line(&mut line).unwrap() == 0 || line.contains("RAISED") {
            break;
        }
    }
    assert!(line.contains("RAISED"), "the child raised the task");
    daemon
}

#[test]
fn a_killed_daemon_is_undone_on_the_next_start() {
    if !is_root() {
        eprintln!("SKIP a_killed_daemon_is_undone_on_the_next_start: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let victim = sleeper();
    let tid = victim.id() as Tid;
    let base = prio::thread_nice(tid).unwrap();
    let mut daemon = crash_daemon(dir.path(), tid, LeverKind::Nice);
    assert_eq!(prio::thread_nice(tid).unwrap(), -20);
    // While its daemon lives, a journal is not stale.
    assert!(journal::stale(dir.path()).is_empty());
    daemon.kill().unwrap(); // SIGKILL: no destructor runs
    daemon.wait().unwrap();
    assert_eq!(
        prio::thread_nice(tid).unwrap(),
        -20,
        "left raised by the crash"
    );
    let r = recover(dir.path());
    assert_eq!(r.journals, 1);
    assert_eq!(r.restored, vec![tid]);
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    assert_eq!(
        prio::thread_nice(tid).unwrap(),
        base,
        "restored on the next start"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    stop(victim);
}

#[test]
fn a_child_raised_at_spawn_is_adopted_and_restored() {
    if !is_root() {
        eprintln!(
            "SKIP a_child_raised_at_spawn_is_adopted_and_restored: needs root (CAP_SYS_NICE)"
        );
        return;
    }
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let mut lever = Lever::new(LeverConfig::new(LeverKind::Nice), dir.path()).unwrap();
    let hook = lever.spawn_hook().expect("the nice lever raises at spawn");
    assert_eq!(hook.nice(), -20);
    let base = prio::thread_nice(prio::current_tid()).unwrap();
    let mut cmd = Command::new("sleep");
    cmd.arg("30");
    // SAFETY: the hook makes one async-signal-safe system call.
    unsafe {
        cmd.pre_exec(move || {
            hook.apply();
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    let tid = child.id() as Tid;
    assert_eq!(prio::thread_nice(tid).unwrap(), -20, "raised before it ran");
    lever.adopt(tid, base).unwrap();
    assert!(lever.is_raised(tid));
    let journal = lever.journal_path().unwrap().to_owned();
    let saved = journal::parse(&std::fs::read_to_string(&journal).unwrap());
    assert_eq!(saved[&tid].nice, base, "journaled with the nice to restore");
    lever.lower(tid).unwrap();
    assert_eq!(prio::thread_nice(tid).unwrap(), base);
    // Adopted again and dropped: drop restores it too.
    prio::set_thread_nice(tid, -20).unwrap();
    lever.adopt(tid, base).unwrap();
    drop(lever);
    assert_eq!(prio::thread_nice(tid).unwrap(), base, "drop restores");
    stop(child);
    // A child gone before it is adopted is a clean `Gone`.
    let mut lever = Lever::new(LeverConfig::new(LeverKind::Nice), dir.path()).unwrap();
    assert!(matches!(lever.adopt(tid, base), Err(LeverError::Gone(_))));
    // A child that is not at the raised value (its setpriority refused) is not held.
    let other = sleeper();
    let r = lever.adopt(other.id() as Tid, base);
    assert!(matches!(r, Err(LeverError::Permission { .. })), "{r:?}");
    assert_eq!(lever.raised(), 0);
    stop(other);
    assert!(Lever::new(LeverConfig::new(LeverKind::Weight), dir.path())
        .map(|l| l.spawn_hook().is_none())
        .unwrap_or(true));
}

/// The boost cgroup's CPU share (v1 `cpu.shares`) or weight (v2 `cpu.weight`).
fn boost_share(m: &weight::CpuMount, boost: &Path) -> String {
    let f = if m.v2 { "cpu.weight" } else { "cpu.shares" };
    std::fs::read_to_string(boost.join(f)).unwrap_or_default()
}

/// The cpu controller's mount and a cgroup tree `cgroup` of the test's own, or `None` (with
/// why, for `test`) without root or cgroups.
fn test_cgroups(test: &str, cgroup: &str) -> Option<(weight::CpuMount, crate::CgroupRoot)> {
    if !is_root() {
        eprintln!("SKIP {test}: needs root (cgroup writes, priorities)");
        return None;
    }
    let r = weight::cpu_mount()
        .map_err(|e| e.to_string())
        .and_then(|m| {
            crate::CgroupRoot::open(cgroup)
                .map(|r| (m, r))
                .map_err(|e| e.to_string())
        });
    r.map_err(|e| eprintln!("SKIP {test}: {e}")).ok()
}

#[test]
fn raise_lower_and_drop_restore_weight() {
    let Some((m, root)) = test_cgroups("raise_lower_and_drop_restore_weight", "triage-test-lever")
    else {
        return;
    };
    let leaf = root.create("leaf").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let child = sleeper();
    let tid = child.id() as Tid;
    leaf.add_pid(tid).unwrap();
    let home = weight::task_dir(&m, tid).unwrap();
    assert_eq!(home, leaf.path(), "the task starts in the test's cgroup");
    let mut lever = Lever::new(LeverConfig::new(LeverKind::Weight), dir.path()).unwrap();
    assert!(
        lever.spawn_hook().is_none(),
        "a cgroup move is the parent's"
    );
    let base = prio::thread_nice(tid).unwrap();
    lever.raise(tid).unwrap();
    let boost = home.parent().unwrap().join(weight::BOOST_NAME);
    assert_eq!(
        weight::task_dir(&m, tid).unwrap(),
        boost,
        "moved beside its cgroup"
    );
    let high = if m.v2 { "10000" } else { "262144" };
    assert_eq!(boost_share(&m, &boost).trim(), high);
    assert_eq!(
        prio::thread_nice(tid).unwrap(),
        base,
        "its nice is left alone"
    );
    let journal = lever.journal_path().unwrap().to_owned();
    let saved = journal::parse(&std::fs::read_to_string(&journal).unwrap());
    assert_eq!(saved[&tid].cgroup.as_deref(), Some(home.as_path()));
    lever.lower(tid).unwrap();
    assert_eq!(
        weight::task_dir(&m, tid).unwrap(),
        home,
        "lowered: back home"
    );
    assert!(!lever.is_raised(tid));
    lever.raise(tid).unwrap();
    assert_eq!(weight::task_dir(&m, tid).unwrap(), boost);
    // A task no lever holds in the boost cgroup, as a child forked by a raised task would be.
    let stray = sleeper();
    let stray_tid = stray.id() as Tid;
    weight::move_task(&m, stray_tid, &boost).unwrap();
    drop(lever);
    assert_eq!(weight::task_dir(&m, tid).unwrap(), home, "drop restores");
    assert_eq!(
        weight::task_dir(&m, stray_tid).unwrap(),
        weight::task_dir(&m, prio::current_tid()).unwrap(),
        "the stray goes where its parent (this test) is"
    );
    assert!(!boost.exists(), "the boost cgroup is emptied and removed");
    assert!(!journal.exists(), "the journal is removed");
    stop(stray);
    stop(child);
    root.cleanup().unwrap();
}

#[test]
fn the_fifo_lever_needs_a_real_time_budget_and_puts_back_the_fair_class() {
    let name = "the_fifo_lever_needs_a_real_time_budget_and_puts_back_the_fair_class";
    let Some((m, root)) = test_cgroups(name, "triage-test-fifo") else {
        return;
    };
    let leaf = root.create("leaf").unwrap();
    if realtime::budget(leaf.path()).unwrap().is_none() {
        eprintln!("SKIP {name}: no real-time group scheduling here (no cpu.rt_runtime_us)");
        root.cleanup().unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let child = sleeper();
    let tid = child.id() as Tid;
    leaf.add_pid(tid).unwrap();
    prio::set_thread_nice(tid, 4).unwrap();
    let mut lever = Lever::new(LeverConfig::new(LeverKind::Fifo), dir.path()).unwrap();
    assert!(
        lever.spawn_hook().is_none(),
        "a policy change is the parent's"
    );
    // A new cgroup has no real-time time: refused, with the file that says why.
    let e = lever.raise(tid).unwrap_err().to_string();
    assert!(e.contains("cpu.rt_runtime_us"), "{e}");
    assert!(!lever.is_raised(tid));
    assert_eq!(prio::thread_policy(tid).unwrap(), libc::SCHED_OTHER);
    // Granted 5% of a CPU (its parents too), the raise takes.
    let mut grant = realtime::grant(&m, leaf.path(), 0.05, Duration::from_millis(100)).unwrap();
    assert!(!grant.is_empty());
    let b = realtime::budget(leaf.path()).unwrap().unwrap();
    assert_eq!(b.runtime, Some(Duration::from_millis(5)));
    assert_eq!(b.period, Duration::from_millis(100));
    lever.raise(tid).unwrap();
    assert_eq!(prio::thread_policy(tid).unwrap(), libc::SCHED_FIFO);
    let journal = lever.journal_path().unwrap().to_owned();
    let saved = journal::parse(&std::fs::read_to_string(&journal).unwrap());
    assert_eq!(saved[&tid].policy, Some(libc::SCHED_OTHER));
    assert_eq!(saved[&tid].nice, 4);
    lever.set_level(tid, -10).unwrap(); // no graded levels: a no-op
    lever.lower(tid).unwrap();
    assert_eq!(prio::thread_policy(tid).unwrap(), libc::SCHED_OTHER);
    assert_eq!(prio::thread_nice(tid).unwrap(), 4, "back at its nice value");
    lever.raise(tid).unwrap();
    drop(lever);
    assert_eq!(
        prio::thread_policy(tid).unwrap(),
        libc::SCHED_OTHER,
        "drop restores"
    );
    // A daemon killed while it holds the task real-time: the next start puts it back.
    let mut daemon = crash_daemon(dir.path(), tid, LeverKind::Fifo);
    assert_eq!(prio::thread_policy(tid).unwrap(), libc::SCHED_FIFO);
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    assert_eq!(
        prio::thread_policy(tid).unwrap(),
        libc::SCHED_FIFO,
        "left by the crash"
    );
    let r = recover(dir.path());
    assert_eq!(r.restored, vec![tid]);
    assert_eq!(prio::thread_policy(tid).unwrap(), libc::SCHED_OTHER);
    assert_eq!(prio::thread_nice(tid).unwrap(), 4);
    // The grant is taken back, deepest first.
    assert!(grant.undo().is_empty());
    let b = realtime::budget(leaf.path()).unwrap().unwrap();
    assert_eq!(b.runtime, Some(Duration::ZERO));
    let top = leaf.path().parent().unwrap();
    assert_eq!(
        realtime::budget(top).unwrap().unwrap().runtime,
        Some(Duration::ZERO)
    );
    stop(child);
    root.cleanup().unwrap();
}
