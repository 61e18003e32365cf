use super::*;
use std::process::{Child, Command};
use std::time::Instant;

fn spawn(script: &str) -> Child {
    Command::new("sh").args(["-c", script]).spawn().unwrap()
}

/// Collect events of `tracer` until `done` holds or 5 s pass.
fn collect(tracer: &mut Tracer, mut done: impl FnMut(&[TaskEvent]) -> bool) -> Vec<TaskEvent> {
    let mut evs = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) && !done(&evs) {
        tracer.poll(Duration::from_millis(20), &mut evs).unwrap();
    }
    evs
}

#[test]
fn cpu_cgroup_lines() {
    let v1 = "12:cpuset:/\n5:cpu,cpuacct:/lab/a\n0::/user.slice\n";
    assert_eq!(targets::parse_cpu_cgroup(v1).as_deref(), Some("/lab/a"));
    assert_eq!(
        targets::parse_cpu_cgroup("0::/x/y\n").as_deref(),
        Some("/x/y")
    );
    assert_eq!(targets::parse_cpu_cgroup("3:memory:/m\n"), None);
}

#[test]
fn targets_resolve_and_name_what_is_missing() {
    let mut child = spawn("sleep 5 & sleep 5 & wait");
    let pid = child.id() as i32;
    // A forked child is named after the shell until it has exec'd `sleep`: wait for both the
    // three processes and the two names (a loaded machine can take a while between the two).
    let mut found = Vec::new();
    let mut by_name = Vec::new();
    for _ in 0..500 {
        found = targets::processes(&Target::Pid(pid)).unwrap();
        by_name = targets::processes(&Target::Exe("sleep".into())).unwrap_or_default();
        if found.len() == 3 && found[1..].iter().all(|p| by_name.contains(p)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(found.len(), 3, "the shell and its two sleeps: {found:?}");
    assert_eq!(found[0], pid);
    assert!(
        found[1..].iter().all(|p| by_name.contains(p)),
        "the two sleeps {:?} found by name: {by_name:?}",
        &found[1..]
    );
    let err = targets::processes(&Target::Pid(i32::MAX)).unwrap_err();
    assert!(err.to_string().contains("no process"), "{err}");
    let err = targets::processes(&Target::Cgroup("/nonexistent/cg".into())).unwrap_err();
    assert!(err.to_string().contains("not a cgroup"), "{err}");
    for p in &found[1..] {
        crate::reaper::kill(*p);
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn poll_logger_sees_wait_run_fork_and_exit() {
    let mut t = Tracer::open(Logger::Poll(Duration::from_millis(1))).unwrap();
    assert_eq!(t.logger().name(), "proc-poll");
    let mut child = spawn("sleep 0.3; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done");
    let pid = child.id() as i32;
    t.follow(pid).unwrap();
    let evs = collect(&mut t, |e| {
        e.iter().any(|e| e.tid == pid && e.kind == Kind::Exit)
    });
    let _ = child.wait();
    let mine: Vec<Kind> = evs
        .iter()
        .filter(|e| e.tid == pid)
        .map(|e| e.kind)
        .collect();
    assert!(mine.contains(&Kind::Wait), "{mine:?}");
    assert!(mine.contains(&Kind::Run), "{mine:?}");
    assert_eq!(mine.last(), Some(&Kind::Exit));
    assert!(
        evs.iter()
            .any(|e| matches!(e.kind, Kind::Fork { parent } if parent == pid)),
        "the sleep child was found: {evs:?}"
    );
}

#[test]
fn bpf_logger_follows_a_process_and_its_children() {
    let mut t = match Tracer::open(Logger::Bpf) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("SKIP bpf_logger_follows_a_process_and_its_children: {e}");
            return;
        }
    };
    // The shell waits on a pipe until followed, then sleeps (a long wait), then forks.
    let mut child = Command::new("sh")
        .args(["-c", "read x; sleep 0.05; sleep 0.05; exit 0"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    t.follow(pid).unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
    }
    let evs = collect(&mut t, |e| {
        e.iter().any(|e| e.tid == pid && e.kind == Kind::Exit)
    });
    let _ = child.wait();
    let mine: Vec<Kind> = evs
        .iter()
        .filter(|e| e.tid == pid)
        .map(|e| e.kind)
        .collect();
    for k in [Kind::Ready, Kind::Run, Kind::Wait, Kind::Exit] {
        assert!(mine.contains(&k), "{k:?} missing from {mine:?}");
    }
    let kids: Vec<Tid> = evs
        .iter()
        .filter(|e| matches!(e.kind, Kind::Fork { parent } if parent == pid))
        .map(|e| e.tid)
        .collect();
    assert_eq!(kids.len(), 2, "two sleeps forked: {evs:?}");
    for k in kids {
        assert!(
            evs.iter().any(|e| e.tid == k && e.kind == Kind::Run),
            "child {k} was followed from its fork"
        );
    }
    assert!(
        evs.windows(2)
            .filter(|w| w[0].tid == w[1].tid)
            .all(|w| w[0].t_ns <= w[1].t_ns),
        "one task's events come in time order"
    );
    assert!(evs.iter().all(|e| e.t_ns <= monotonic_ns()));
    assert_eq!(t.dropped(), 0);
}
