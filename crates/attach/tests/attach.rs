//! The daemon end to end on a real process: a shell that sleeps 50 ms (longer than SLP) then
//! burns a short burst, like a text worker, is marked, raised before it wakes, and restored
//! when the daemon stops; a target that does not exist is a one-line error; a target that
//! exits mid-run ends the daemon cleanly with nothing left raised.

use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use attach::{AttachConfig, AttachError, LoggerChoice};
use os::proctrace::Target;
use policy::Tunable;

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Held by every test that follows a real process: these tests assert how the kernel runs
/// their processes, so side by side each one's processes (raised to -20 or -10, forking a
/// `sleep` every 2 ms) and its daemon (tens of thousands of events a second) would be the
/// others' load: a burner lowered to its own value then got a third of a CPU and did not
/// finish the episodes its test waits for.
static FOLLOWING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One following test at a time (see [`FOLLOWING`]); a failed test does not poison the rest.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    FOLLOWING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A test's child process, killed and reaped when the test ends, passed or failed: a failed
/// assertion must not leave a CPU burner running under the rest of the suite.
struct Reaped(Child);

impl Reaped {
    fn spawn(cmd: &mut Command) -> Self {
        Self(cmd.spawn().unwrap())
    }
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn text_worker(rounds: &str) -> Reaped {
    let script = format!(
        "n=0; while [ $n -lt {rounds} ]; do sleep 0.05; i=0; \
         while [ $i -lt 2000 ]; do i=$((i+1)); done; n=$((n+1)); done"
    );
    Reaped::spawn(Command::new("sh").args(["-c", &script]))
}

fn config(pid: i32, dir: &std::path::Path) -> AttachConfig {
    let mut c = AttachConfig::new(Target::Pid(pid));
    c.state_dir = dir.to_owned();
    c.kpos.always = true;
    c.kpos.policy.slp = Tunable::Fixed(20_000_000);
    c.kpos.policy.rw = Tunable::Fixed(3);
    c.force = true; // the test's cgroup may hold nothing else
    c
}

#[test]
fn a_text_worker_is_raised_before_it_wakes_and_restored_at_the_end() {
    if !is_root() {
        eprintln!("SKIP a_text_worker_is_raised...: needs root");
        return;
    }
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let child = text_worker("1000");
    let pid = child.pid();
    // The test may run niced (`nice cargo test`): compare with what the child had.
    let base = os::prio::thread_nice(pid).unwrap();
    let mut cfg = config(pid, dir.path());
    cfg.duration = Some(Duration::from_millis(1500));
    let logs = tempfile::tempdir().unwrap();
    let actions = logs.path().join("actions.log");
    cfg.actions_log = Some(actions.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let daemon = std::thread::spawn(move || {
        let mut out = Vec::new();
        let r = attach::run(&cfg, &mut out, &move || s2.load(Ordering::Relaxed));
        (r, String::from_utf8_lossy(&out).into_owned())
    });
    let seen_raised = within(120, || os::prio::thread_nice(pid) == Ok(-20));
    let (r, out) = daemon.join().unwrap();
    let snap = r.unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert!(seen_raised, "the worker was raised while followed\n{out}");
    assert_eq!(os::prio::thread_nice(pid).unwrap(), base, "restored\n{out}");
    assert!(snap.pos.marks > 0, "{out}");
    assert!(snap.raised_before_wake > 0, "{out}");
    assert!(snap.events > 10, "{out}");
    assert!(out.contains("logger: "), "{out}");
    assert!(out.contains("restored"), "{out}");
    // Every decision is in the actions log with its time: the worker's raise among them.
    let log = std::fs::read_to_string(&actions).unwrap();
    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect()).collect();
    assert!(
        lines.iter().all(|f| f.len() == 3
            && f[0].parse::<u128>().is_ok()
            && (f[1] == "raise" || f[1] == "lower")),
        "{log}"
    );
    assert!(
        lines
            .iter()
            .any(|f| f[1] == "raise" && f[2] == pid.to_string()),
        "{log}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no journal left"
    );
}

#[test]
fn a_target_that_exits_mid_run_ends_the_daemon_cleanly() {
    if !is_root() {
        eprintln!("SKIP a_target_that_exits_mid_run...: needs root");
        return;
    }
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let child = text_worker("6");
    let pid = child.pid();
    let mut cfg = config(pid, dir.path());
    cfg.logger = LoggerChoice::Auto;
    cfg.duration = Some(Duration::from_secs(10));
    let reaper = std::thread::spawn(move || {
        let mut child = child;
        child.0.wait()
    });
    let mut out = Vec::new();
    let snap = attach::run(&cfg, &mut out, &|| false).unwrap();
    let out = String::from_utf8_lossy(&out);
    eprintln!("{out}");
    assert!(out.contains("every followed process exited"), "{out}");
    assert_eq!(snap.pos.live, 0, "{out}");
    assert!(snap.wall_s < 9.0, "ended with its target, not its duration");
    reaper.join().unwrap().unwrap();
}

#[test]
fn a_missing_target_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(i32::MAX, dir.path());
    cfg.lever = None; // no root needed to see the target error
    cfg.logger = LoggerChoice::Poll;
    let e = attach::run(&cfg, &mut Vec::new(), &|| false).unwrap_err();
    assert!(matches!(e, AttachError::Target(_)), "{e}");
    assert!(e.to_string().contains("no process"), "{e}");
    assert!(!e.to_string().contains('\n'));
}

/// Whether `seen` holds at one of `tries` checks 10 ms apart.
fn within(tries: u32, mut seen: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if seen() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Wait up to 1.5 s for `pid`'s nice value to be `want`.
fn reaches_nice(pid: i32, want: i32) -> bool {
    within(150, || os::prio::thread_nice(pid) == Ok(want))
}

/// Run the daemon with `cfg` in a thread until `stop` is set; returns its result and output.
fn spawn_daemon(
    cfg: AttachConfig,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Result<attach::metrics::Snapshot, AttachError>, String)> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let r = attach::run(&cfg, &mut out, &move || stop.load(Ordering::Relaxed));
        (r, String::from_utf8_lossy(&out).into_owned())
    })
}

#[test]
fn the_front_is_raised_with_a_raised_worker_and_restored_after() {
    if !is_root() {
        eprintln!("SKIP the_front_is_raised_with...: needs root");
        return;
    }
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let worker = text_worker("1000");
    let front = Reaped::spawn(Command::new("sleep").arg("30"));
    let (wpid, fpid) = (worker.pid(), front.pid());
    let base = os::prio::thread_nice(fpid).unwrap();
    let mut cfg = config(wpid, dir.path());
    cfg.front = vec![fpid];
    let stop = Arc::new(AtomicBool::new(false));
    let d = spawn_daemon(cfg, stop.clone());
    let raised = reaches_nice(fpid, -20);
    stop.store(true, Ordering::Relaxed);
    let (r, out) = d.join().unwrap();
    r.unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert!(raised, "the front was raised with the worker\n{out}");
    assert!(out.contains("front: 1 task(s)"), "{out}");
    assert_eq!(
        os::prio::thread_nice(fpid).unwrap(),
        base,
        "restored\n{out}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn lower_rest_lowers_an_unmarked_worker_and_restores_it() {
    if !is_root() {
        eprintln!("SKIP lower_rest_lowers...: needs root");
        return;
    }
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    // Never waits longer than SLP (20 ms): never marked, so held low.
    let busy = Reaped::spawn(Command::new("sh").args(["-c", "while :; do sleep 0.002; done"]));
    let pid = busy.pid();
    let base = os::prio::thread_nice(pid).unwrap();
    let mut cfg = config(pid, dir.path());
    cfg.direction = attach::Direction::LowerRest;
    let stop = Arc::new(AtomicBool::new(false));
    let d = spawn_daemon(cfg.clone(), stop.clone());
    let lowered = reaches_nice(pid, 19);
    stop.store(true, Ordering::Relaxed);
    let (r, out) = d.join().unwrap();
    r.unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert!(lowered, "the unmarked worker was held at +19\n{out}");
    assert!(out.contains("direction lower-rest"), "{out}");
    assert_eq!(os::prio::thread_nice(pid).unwrap(), base, "restored\n{out}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // A front with lower-rest is refused: nothing would raise it.
    cfg.front = vec![pid];
    let e = attach::run(&cfg, &mut Vec::new(), &|| false).unwrap_err();
    assert!(matches!(e, AttachError::Usage(_)), "{e}");
    // --favor-dynmods with a lever that moves nothing between cgroups is refused.
    cfg.front.clear();
    cfg.direction = attach::Direction::RaiseMarked;
    cfg.favor_dynmods = true;
    let e = attach::run(&cfg, &mut Vec::new(), &|| false).unwrap_err();
    assert!(
        matches!(&e, AttachError::Usage(m) if m.contains("--favor-dynmods")),
        "{e}"
    );
}

#[test]
fn the_weight_lever_moves_a_text_worker_to_the_boost_cgroup_and_back() {
    weight_lever_round_trip("the_weight_lever_moves...", None);
}

#[test]
fn with_the_weight_lever_a_floor_holds_the_worker_at_its_nice_in_and_out_of_the_boost() {
    weight_lever_round_trip("with_the_weight_lever_a_floor...", Some(-10));
}

/// A text worker followed with the weight lever (and `floor` as `--floor-nice`): moved into
/// the boost cgroup beside its own while followed (at the floor's nice value, if any), back
/// in its cgroup at its own value after, with no boost cgroup and no journal left.
/// The cpu controller's mount and a test cgroup `cgroup` for a weight-lever test; `None`
/// (with a SKIP line naming `test`) without root or without the controller.
fn weight_testbed(
    test: &str,
    cgroup: &str,
) -> Option<(os::lever::weight::CpuMount, os::CgroupRoot)> {
    if !is_root() {
        eprintln!("SKIP {test}: needs root (cgroup writes)");
        return None;
    }
    match os::lever::weight::cpu_mount()
        .map_err(|e| e.to_string())
        .and_then(|m| {
            os::CgroupRoot::open(cgroup)
                .map(|r| (m, r))
                .map_err(|e| e.to_string())
        }) {
        Ok(x) => Some(x),
        Err(e) => {
            eprintln!("SKIP {test}: {e}");
            None
        }
    }
}

/// One process that sleeps 50 ms (longer than SLP) then burns a short burst, forking
/// nothing (a child forked while raised would start in the boost cgroup).
fn sleeping_burner() -> Reaped {
    Reaped::spawn(Command::new("perl").args([
        "-e",
        "for (1..1000) { select(undef, undef, undef, 0.05); my $i = 0; $i++ while $i < 20000 }",
    ]))
}

fn weight_lever_round_trip(name: &str, floor: Option<i32>) {
    let _alone = alone();
    let Some((m, root)) = weight_testbed(name, "triage-test-attach") else {
        return;
    };
    let leaf = root.create("web").unwrap();
    let child = sleeping_burner();
    let pid = child.pid();
    leaf.add_pid(pid).unwrap();
    let home = os::lever::weight::task_dir(&m, pid).unwrap();
    let boost = home.parent().unwrap().join(os::lever::weight::BOOST_NAME);
    let base = os::prio::thread_nice(pid).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(pid, dir.path());
    cfg.lever = Some(os::lever::LeverKind::Weight);
    cfg.floor_nice = floor;
    // With the floor, also the moves favoured (no grace period before each).
    cfg.favor_dynmods = floor.is_some();
    cfg.duration = Some(Duration::from_millis(1500));
    let stop = Arc::new(AtomicBool::new(false));
    let daemon = spawn_daemon(cfg, stop);
    let seen_boosted = within(140, || {
        os::lever::weight::task_dir(&m, pid).is_ok_and(|d| d == boost)
    });
    // In the boost cgroup it keeps the floor's value (the weight lever changes no nice).
    let boosted_nice = os::prio::thread_nice(pid).unwrap();
    let (r, out) = daemon.join().unwrap();
    let snap = r.unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert!(
        seen_boosted,
        "moved to {} while followed\n{out}",
        boost.display()
    );
    assert_eq!(
        os::lever::weight::task_dir(&m, pid).unwrap(),
        home,
        "back in its cgroup\n{out}"
    );
    assert!(!boost.exists(), "the boost cgroup is removed\n{out}");
    assert_eq!(boosted_nice, floor.unwrap_or(base), "{out}");
    if floor.is_some() {
        assert!(out.contains("cgroup favordynmods: "), "{out}");
    }
    assert_eq!(
        os::prio::thread_nice(pid).unwrap(),
        base,
        "its own value back\n{out}"
    );
    assert_eq!(
        out.contains("held at the floor"),
        floor.is_some(),
        "the floor is held beside the weight lever only when asked\n{out}"
    );
    assert!(snap.pos.marks > 0, "{out}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no journal left"
    );
    root.cleanup().unwrap();
}

#[test]
fn a_front_with_the_weight_lever_moves_to_the_boost_cgroup_while_the_worker_is_raised_by_nice() {
    let _alone = alone();
    let Some((m, root)) = weight_testbed(
        "a_front_with_the_weight_lever...",
        "triage-test-attach-front",
    ) else {
        return;
    };
    let leaf = root.create("web").unwrap();
    let worker = sleeping_burner();
    let front = Reaped::spawn(Command::new("sleep").arg("30"));
    let (wpid, fpid) = (worker.pid(), front.pid());
    leaf.add_pid(wpid).unwrap();
    leaf.add_pid(fpid).unwrap();
    let home = os::lever::weight::task_dir(&m, fpid).unwrap();
    let boost = home.parent().unwrap().join(os::lever::weight::BOOST_NAME);
    let (wbase, fbase) = (
        os::prio::thread_nice(wpid).unwrap(),
        os::prio::thread_nice(fpid).unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(wpid, dir.path());
    cfg.front = vec![fpid];
    // Without a front the front's lever is refused.
    let mut bare = cfg.clone();
    bare.front.clear();
    bare.front_lever = Some(os::lever::LeverKind::Weight);
    let e = attach::run(&bare, &mut Vec::new(), &|| false).unwrap_err();
    assert!(
        matches!(&e, AttachError::Usage(m) if m.contains("--front-lever")),
        "{e}"
    );
    cfg.front_lever = Some(os::lever::LeverKind::Weight);
    cfg.duration = Some(Duration::from_millis(1500));
    let daemon = spawn_daemon(cfg, Arc::new(AtomicBool::new(false)));
    let (mut front_boosted, mut worker_raised) = (false, false);
    for _ in 0..140 {
        front_boosted |= os::lever::weight::task_dir(&m, fpid).is_ok_and(|d| d == boost);
        worker_raised |= os::prio::thread_nice(wpid) == Ok(-20);
        if front_boosted && worker_raised {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The worker is raised by nice where it is; the front keeps its nice value.
    let worker_dir = os::lever::weight::task_dir(&m, wpid).unwrap();
    let front_nice = os::prio::thread_nice(fpid).unwrap();
    let (r, out) = daemon.join().unwrap();
    r.unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert!(
        front_boosted,
        "the front moved to {}\n{out}",
        boost.display()
    );
    assert!(worker_raised, "the worker raised to nice -20\n{out}");
    assert_eq!(worker_dir, home, "the worker stays in its cgroup\n{out}");
    assert_eq!(front_nice, fbase, "{out}");
    assert!(out.contains("by a weight lever of its own"), "{out}");
    assert!(out.contains("front task(s)"), "{out}");
    assert_eq!(
        os::lever::weight::task_dir(&m, fpid).unwrap(),
        home,
        "{out}"
    );
    assert!(!boost.exists(), "the boost cgroup is removed\n{out}");
    assert_eq!(os::prio::thread_nice(wpid).unwrap(), wbase, "{out}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no journal left"
    );
    root.cleanup().unwrap();
}

/// The nice value and the scheduler state (`R`, `S`, ...) of `pid`.
fn nice_and_state(pid: i32) -> Option<(i32, char)> {
    Some((os::prio::thread_nice(pid).ok()?, os::procfs::state(pid)?))
}

#[test]
fn the_episode_budget_lowers_a_raised_worker_that_burns_past_it_while_it_runs() {
    if !is_root() {
        eprintln!("SKIP the_episode_budget_lowers...: needs root");
        return;
    }
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    // Sleeps 100 ms (past SLP: raised before it wakes), then burns 300 ms of CPU without
    // blocking: an episode far past a 20 ms budget. The CPU is user and system time: a loop
    // on `times` spends most of it in the kernel, and on user time alone one burn took over
    // a second, too few episodes for the test's 2.5 s.
    let child = Reaped::spawn(Command::new("perl").args([
        "-e",
        "sub cpu { my @t = times; $t[0] + $t[1] } \
         for (1..1000) { select(undef, undef, undef, 0.1); my $t = cpu(); \
         1 while cpu() - $t < 0.3 }",
    ]));
    let pid = child.pid();
    let base = os::prio::thread_nice(pid).unwrap();
    let mut cfg = config(pid, dir.path());
    cfg.kpos.policy.rw = Tunable::Fixed(1); // marked only until it first blocks
    cfg.kpos.budget = policy::kpos::EpisodeBudget::Fixed(20_000_000);
    cfg.duration = Some(Duration::from_millis(2500));
    let logs = tempfile::tempdir().unwrap();
    let actions = logs.path().join("actions.log");
    cfg.actions_log = Some(actions.clone());
    let d = spawn_daemon(cfg, Arc::new(AtomicBool::new(false)));
    // Sample its nice value while it runs, from the first time it is seen raised.
    let (mut raised_seen, mut running_raised, mut running_base) = (false, 0u32, 0u32);
    for _ in 0..400 {
        match nice_and_state(pid) {
            Some((-20, s)) => {
                raised_seen = true;
                running_raised += u32::from(s == 'R');
            }
            Some((n, 'R')) if raised_seen && n == base => running_base += 1,
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let (r, out) = d.join().unwrap();
    let snap = r.unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert!(raised_seen, "raised before its episode\n{out}");
    assert!(out.contains("episode budget 20.000 ms"), "{out}");
    // Lowered by the budget, while marked (RW 1: before it blocked), more than once.
    assert!(snap.pos.budget_lowers >= 2, "{:?}\n{out}", snap.pos);
    assert_eq!(snap.pos.budget, Some(20_000_000));
    // Without the budget it would run raised to the end of every burn: with it, most of
    // its running time is at its own value.
    assert!(
        running_base > 2 * running_raised,
        "running at {base}: {running_base} samples, raised: {running_raised}\n{out}"
    );
    let log = std::fs::read_to_string(&actions).unwrap();
    let mine: Vec<&str> = log
        .lines()
        .filter(|l| l.ends_with(&format!(" {pid}")))
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    assert!(mine.windows(2).any(|w| w == ["raise", "lower"]), "{log}");
    assert_eq!(os::prio::thread_nice(pid).unwrap(), base, "restored\n{out}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A process that sleeps 100 ms (past SLP: raised as text) and then burns without blocking
/// (past a 5 ms budget), followed by the daemon (RW 1, that budget) with `cfg` as `tweak`
/// leaves it, while `watch` looks at its pid. Checks that it is restored and no journal is
/// left at the end; returns what `watch` saw, the daemon's snapshot and its output.
fn burner_past_budget<T>(
    tweak: impl FnOnce(&mut AttachConfig),
    watch: impl FnOnce(i32) -> T,
) -> (T, attach::metrics::Snapshot, String) {
    let dir = tempfile::tempdir().unwrap();
    let child = Reaped::spawn(
        Command::new("perl").args(["-e", "select(undef, undef, undef, 0.1); 1 while 1"]),
    );
    let pid = child.pid();
    let base = os::prio::thread_nice(pid).unwrap();
    let mut cfg = config(pid, dir.path());
    cfg.kpos.policy.rw = Tunable::Fixed(1);
    cfg.kpos.budget = policy::kpos::EpisodeBudget::Fixed(5_000_000);
    tweak(&mut cfg);
    let stop = Arc::new(AtomicBool::new(false));
    let d = spawn_daemon(cfg, stop.clone());
    let seen = watch(pid);
    stop.store(true, Ordering::Relaxed);
    let (r, out) = d.join().unwrap();
    let snap = r.unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert_eq!(os::prio::thread_nice(pid).unwrap(), base, "restored\n{out}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    (seen, snap, out)
}

#[test]
fn a_raised_worker_past_its_budget_stays_raised_as_the_tails_head_at_the_tail_nice() {
    if !is_root() {
        eprintln!("SKIP a_raised_worker_past_its_budget_stays...: needs root");
        return;
    }
    let _alone = alone();
    // Past the budget it is no longer text, but it is the oldest runnable episode, the tail's
    // head.
    let (head, snap, out) = burner_past_budget(
        |cfg| {
            cfg.kpos.tail_head = policy::kpos::TailHead::WithText;
            cfg.tail_nice = Some(-10);
        },
        |pid| reaches_nice(pid, -10),
    );
    assert!(head, "held at the tail's nice\n{out}");
    assert!(out.contains("tail's head with-text"), "{out}");
    assert!(
        snap.pos.budget_lowers >= 1 && snap.pos.tail_head_raises >= 1,
        "{out}"
    );
}

#[test]
fn with_a_floor_a_task_lowered_past_its_budget_stays_at_the_floor_and_is_restored_at_the_end() {
    if !is_root() {
        eprintln!("SKIP with_a_floor_a_task_lowered...: needs root");
        return;
    }
    let _alone = alone();
    // Raised as text at -20, then past the budget lowered to the floor (-10), not to its own
    // value.
    let ((raised, floored), snap, out) = burner_past_budget(
        |cfg| {
            cfg.floor_nice = Some(-10);
            // A floor with the other direction, or below the tail's head, is refused.
            let mut sink = Vec::new();
            let mut bad = cfg.clone();
            bad.direction = attach::Direction::LowerRest;
            assert!(matches!(
                attach::run(&bad, &mut sink, &|| true),
                Err(AttachError::Usage(_))
            ));
            let mut bad = cfg.clone();
            bad.tail_nice = Some(-5);
            assert!(matches!(
                attach::run(&bad, &mut sink, &|| true),
                Err(AttachError::Usage(_))
            ));
        },
        |pid| {
            let raised = reaches_nice(pid, -20);
            (raised, raised && reaches_nice(pid, -10))
        },
    );
    assert!(raised, "raised as text first\n{out}");
    assert!(
        floored,
        "then held at the floor, not at its own value\n{out}"
    );
    assert!(out.contains("floor: every followed task"), "{out}");
    assert!(snap.pos.budget_lowers >= 1, "{out}");
}

#[test]
fn with_grades_a_raised_task_steps_down_toward_the_floor_as_its_episode_runs() {
    if !is_root() {
        eprintln!("SKIP with_grades_a_raised_task_steps_down...: needs root");
        return;
    }
    let _alone = alone();
    // A 400 ms budget in 4 grades (100 ms of CPU each) and a floor at -10: -20, -18, -15,
    // -13 while it burns, then the floor.
    let (levels, snap, out) = burner_past_budget(
        |cfg| {
            cfg.kpos.budget = policy::kpos::EpisodeBudget::Fixed(400_000_000);
            cfg.kpos.grades = 4;
            cfg.floor_nice = Some(-10);
        },
        |pid| {
            [-20, -18, -15, -13, -10]
                .into_iter()
                .take_while(|&n| reaches_nice(pid, n))
                .count()
        },
    );
    assert_eq!(
        levels, 5,
        "every grade seen in order, then the floor\n{out}"
    );
    assert!(snap.pos.budget_lowers >= 1, "{out}");
}

#[test]
fn the_fifo_lever_is_refused_without_a_real_time_budget_and_restores_the_fair_class() {
    let name = "the_fifo_lever_is_refused_without_a_real_time_budget...";
    let _alone = alone();
    let Some((m, root)) = weight_testbed(name, "triage-test-attach-fifo") else {
        return;
    };
    let leaf = root.create("web").unwrap();
    if os::lever::realtime::budget(leaf.path()).unwrap().is_none() {
        eprintln!("SKIP {name}: no real-time group scheduling here (no cpu.rt_runtime_us)");
        root.cleanup().unwrap();
        return;
    }
    let child = sleeping_burner();
    let pid = child.pid();
    leaf.add_pid(pid).unwrap();
    let base = os::prio::thread_nice(pid).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(pid, dir.path());
    cfg.lever = Some(os::lever::LeverKind::Fifo);
    cfg.duration = Some(Duration::from_millis(1500));
    // A new cgroup has no real-time time: a one-line error before anything is followed.
    let (r, out) = spawn_daemon(cfg.clone(), Arc::new(AtomicBool::new(false)))
        .join()
        .unwrap();
    let e = r.unwrap_err().to_string();
    assert!(e.contains("cpu.rt_runtime_us 0"), "{e}\n{out}");
    assert!(e.contains("--lever nice or weight"), "{e}");
    // Granted (its parents too), the worker is raised to SCHED_FIFO while followed.
    let grant =
        os::lever::realtime::grant(&m, leaf.path(), 0.5, Duration::from_millis(100)).unwrap();
    let daemon = spawn_daemon(cfg, Arc::new(AtomicBool::new(false)));
    let seen_fifo = within(140, || {
        os::prio::thread_policy(pid).is_ok_and(|p| p == libc::SCHED_FIFO)
    });
    let (r, out) = daemon.join().unwrap();
    let snap = r.unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert!(seen_fifo, "raised to SCHED_FIFO while followed\n{out}");
    assert!(out.contains("lever fifo: SCHED_FIFO, a reference"), "{out}");
    assert!(snap.pos.marks > 0, "{out}");
    assert_eq!(
        os::prio::thread_policy(pid).unwrap(),
        libc::SCHED_OTHER,
        "back in the fair class\n{out}"
    );
    assert_eq!(os::prio::thread_nice(pid).unwrap(), base, "{out}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    drop(child);
    drop(grant);
    root.cleanup().unwrap();
}
