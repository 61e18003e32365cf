//! The daemon: follow the target's tasks ([`os::proctrace`]), feed their transitions to POS
//! ([`policy::kpos`]), pull the lever it decides ([`os::lever`]), report ([`crate::metrics`]).
//! Everything raised is restored when [`run`] returns, whatever the reason (signal, duration,
//! the followed processes exiting, an error); a crash is undone by the next start's
//! [`os::lever::recover`].

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use os::lever::{Lever, LeverConfig, LeverError, LeverKind};
use os::proctrace::{self, Kind, Logger, Target, TaskEvent, Tid, Tracer};
use policy::kpos::{Action, EpisodeBudget, Input, Kpos, KposConfig};

use crate::check;
use crate::front::Front;
use crate::metrics::Snapshot;
use crate::rest::{Direction, Rest};

/// Longest wait for events before the loop looks at the time again (SLP, budgets, signals).
const POLL_EVERY: Duration = Duration::from_millis(5);

/// Which logger to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoggerChoice {
    /// BPF if it starts, else /proc polling (saying why).
    Auto,
    /// BPF or fail.
    Bpf,
    /// /proc polling.
    Poll,
}

/// What to attach to and how.
#[derive(Debug, Clone)]
pub struct AttachConfig {
    /// The processes to follow.
    pub target: Target,
    /// The lever; `None` logs and classifies only (its overhead, its accuracy).
    pub lever: Option<LeverKind>,
    /// The logger.
    pub logger: LoggerChoice,
    /// Interval of the /proc logger.
    pub poll_every: Duration,
    /// POS's configuration and the CPUs the tasks share.
    pub kpos: KposConfig,
    /// Where to serve `/metrics`.
    pub admin: Option<SocketAddr>,
    /// Where the lever's journal lives ([`os::lever::STATE_DIR`]).
    pub state_dir: PathBuf,
    /// How often a cgroup or name target is looked up again for tasks that joined it
    /// without a followed parent.
    pub rescan: Duration,
    /// Stop after this long (`None`: until a signal or the processes are gone).
    pub duration: Option<Duration>,
    /// Print a status line this often.
    pub report_every: Option<Duration>,
    /// Use a nice lever even where the cgroup check says it cannot work.
    pub force: bool,
    /// Write every decision POS takes (`<Unix ns> raise|lower <tid>`, one a line, also when
    /// logging only) to this file: a lab matches it against a server's access log to tell
    /// how many marked service episodes served text.
    pub actions_log: Option<PathBuf>,
    /// Processes in front of the followed ones that every request crosses (nginx before
    /// php-fpm): raised with them while any followed task is raised ([`crate::front`]), so a
    /// raised script's page is not left waiting behind it.
    pub front: Vec<i32>,
    /// The front's own lever (`None`: the followed tasks' lever). `Weight` beside a nice
    /// lever moves the front into the boost cgroup while it is raised: a sibling cgroup
    /// with the highest share is picked before the leaf at every grant of a quota, where a
    /// task at nice -20 inside the leaf can still be passed over (docs/kpos.md), and the
    /// front is raised for whole bursts, so it moves twice a burst while the followed tasks
    /// keep their nice levels.
    pub front_lever: Option<LeverKind>,
    /// Raise the marked tasks, or lower the unmarked ones ([`crate::rest`]).
    pub direction: Direction,
    /// Nice value of a task held low with [`Direction::LowerRest`].
    pub rest_nice: i32,
    /// Nice value of the tail's head ([`policy::kpos::TailHead`]; `None`: the lever's own,
    /// as the text's). A nice lever only.
    pub tail_nice: Option<i32>,
    /// Nice value at which every followed task that is not raised is held (`None`: its own
    /// value): a floor between the competitor's value and the tail's head's, so that a task
    /// POS lowers still runs ahead of a competitor outside the followed set (the CPU hog)
    /// and the order among the followed tasks (text, tail's head, the rest) stays POS's.
    /// With a nice lever it is one of the lever's levels; with the weight lever a nice value
    /// held beside it on every followed task (a task moved into the boost cgroup keeps it).
    /// Every held task is restored as a raised one is.
    pub floor_nice: Option<i32>,
    /// While events keep coming, take them in batches at most this often (`ZERO`: wake up
    /// for every event): the loop sleeps out the rest of this interval after a poll that
    /// returned events and then takes what arrived without blocking (a wake-up of the loop
    /// costs more than the event it brings). Decisions that must come before a wake-up are
    /// taken ahead of it ([`Kpos::next_due`]); the others (a demotion, the tail's head
    /// moving) come up to this much later.
    pub event_batch: Duration,
    /// With the weight lever, turn cgroup `favordynmods` on first ([`os::dynmods`]): each
    /// move then no longer waits for an RCU grace period (up to tens of milliseconds on a
    /// busy machine), so a task is raised and lowered when POS decides. Not undone at the
    /// end (the kernel may keep it until reboot in any case).
    pub favor_dynmods: bool,
}

impl AttachConfig {
    /// Defaults for `target`: the nice lever, the best logger, POS's defaults on one CPU.
    pub fn new(target: Target) -> Self {
        Self {
            target,
            lever: Some(LeverKind::Nice),
            logger: LoggerChoice::Auto,
            poll_every: Duration::from_millis(2),
            kpos: KposConfig::default(),
            admin: None,
            state_dir: PathBuf::from(os::lever::STATE_DIR),
            rescan: Duration::from_secs(1),
            duration: None,
            report_every: None,
            force: false,
            actions_log: None,
            front: Vec::new(),
            front_lever: None,
            direction: Direction::RaiseMarked,
            rest_nice: 19,
            tail_nice: None,
            floor_nice: None,
            event_batch: Duration::ZERO,
            favor_dynmods: false,
        }
    }
}

/// Why the daemon could not start (or stopped on an error).
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// A lever needs root.
    #[error("raising priorities needs root (CAP_SYS_NICE); run as root, or use --log-only")]
    NotRoot,
    /// The target could not be resolved.
    #[error("{0}")]
    Target(String),
    /// The logger could not start.
    #[error("{0}")]
    Trace(#[from] proctrace::TraceError),
    /// The lever would do nothing where the tasks are.
    #[error("{0} (or --force)")]
    Placement(String),
    /// Options that do not go together.
    #[error("{0}")]
    Usage(String),
    /// Any other failure.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Run until `stop()` says so, the duration passes, or every followed task has exited;
/// progress lines go to `out`. Returns the final snapshot.
pub fn run(
    cfg: &AttachConfig,
    out: &mut dyn Write,
    stop: &dyn Fn() -> bool,
) -> Result<Snapshot, AttachError> {
    if cfg.lever.is_some() && !nix::unistd::geteuid().is_root() {
        return Err(AttachError::NotRoot);
    }
    if let Some(f) = cfg.floor_nice {
        let text = -20;
        let above = match cfg.lever {
            // The weight lever's raised tasks are in another cgroup, the real-time lever's in
            // another class: any nice value is below.
            Some(LeverKind::Weight | LeverKind::Fifo) => text,
            _ => cfg.tail_nice.unwrap_or(text),
        };
        if cfg.lever.is_none() || cfg.direction == Direction::LowerRest || !(above..=0).contains(&f)
        {
            return Err(AttachError::Usage(format!(
                "--floor-nice {f}: needs a lever raising the marked tasks and a value from the \
                 tail's head's ({above}) to 0"
            )));
        }
    }
    if cfg.front_lever.is_some() && (cfg.front.is_empty() || cfg.lever.is_none()) {
        return Err(AttachError::Usage(
            "--front-lever chooses how --front-pid's processes are raised: it needs a front \
             and a lever"
                .into(),
        ));
    }
    if cfg.direction == Direction::LowerRest {
        if !cfg.front.is_empty() {
            return Err(AttachError::Usage(
                "--front-pid raises a front with the marked tasks; with --direction lower-rest \
                 nothing is raised (the front keeps its value)"
                    .into(),
            ));
        }
        if matches!(cfg.lever, Some(LeverKind::Weight | LeverKind::Fifo))
            || !(0..=19).contains(&cfg.rest_nice)
        {
            return Err(AttachError::Usage(
                "--direction lower-rest needs a nice lever and a --rest-nice of 0 to 19".into(),
            ));
        }
    }
    let rec = os::lever::recover(&cfg.state_dir);
    if rec.journals > 0 {
        let _ = writeln!(
            out,
            "recovered {} journal(s) of a daemon that died: restored {} task(s){}",
            rec.journals,
            rec.restored.len(),
            if rec.failed.is_empty() {
                String::new()
            } else {
                format!("; failed: {}", rec.failed.join("; "))
            }
        );
    }
    let (mut tracer, why) = match cfg.logger {
        LoggerChoice::Auto => Tracer::open_best(cfg.poll_every),
        LoggerChoice::Bpf => (Tracer::open(Logger::Bpf)?, None),
        LoggerChoice::Poll => (Tracer::open(Logger::Poll(cfg.poll_every))?, None),
    };
    let _ = writeln!(
        out,
        "logger: {}{}",
        tracer.logger().name(),
        why.map(|w| format!(" ({w})")).unwrap_or_default()
    );
    let tasks = proctrace::targets::tasks(&cfg.target)
        .map_err(|e| AttachError::Target(format!("{}: {e}", cfg.target)))?;
    if tasks.is_empty() {
        return Err(AttachError::Target(format!(
            "nothing to follow: no {}",
            cfg.target
        )));
    }
    if let Some(kind @ (LeverKind::Nice | LeverKind::NiceSlice)) = cfg.lever {
        let p = check::placement(&tasks);
        let _ = writeln!(out, "placement: {}", p.explain());
        if !p.nice_works() && !cfg.force {
            return Err(AttachError::Placement(format!(
                "lever {} would do nothing: {}",
                kind.name(),
                p.explain()
            )));
        }
    }
    if cfg.lever == Some(LeverKind::Fifo) {
        let b = check::realtime_budget(&tasks).map_err(AttachError::Placement)?;
        let _ = writeln!(
            out,
            "lever fifo: SCHED_FIFO, a reference on a second, real-time budget outside the CPU \
             quota ({b})"
        );
    }
    if cfg.front_lever == Some(LeverKind::Fifo) {
        return Err(AttachError::Usage(
            "--front-lever fifo: the front is raised inside the CPU budget (nice or weight)".into(),
        ));
    }
    // The front's lever, where it is not the followed tasks' own.
    let front_kind = cfg.front_lever.filter(|k| Some(*k) != cfg.lever);
    let moves = if front_kind == Some(LeverKind::Weight) {
        Some(LeverKind::Weight)
    } else {
        cfg.lever
    };
    match (moves, cfg.favor_dynmods) {
        (Some(LeverKind::Weight), true) => {
            let f = os::dynmods::favor().map_err(|e| {
                AttachError::Io(std::io::Error::new(
                    e.kind(),
                    format!("--favor-dynmods: {e}"),
                ))
            })?;
            let _ = writeln!(out, "cgroup favordynmods: {f}");
        }
        (Some(LeverKind::Weight), false) => {
            if let Ok(os::dynmods::Favor::Off) = os::dynmods::state() {
                let _ = writeln!(
                    out,
                    "note: no cgroup hierarchy is mounted with favordynmods: each move of the \
                     weight lever may wait for an RCU grace period (up to tens of ms on a busy \
                     machine); --favor-dynmods turns it on"
                );
            }
        }
        (_, true) => {
            return Err(AttachError::Usage(
                "--favor-dynmods speeds up the moves of --lever weight (or --front-lever \
                 weight); this lever moves no task between cgroups"
                    .into(),
            ))
        }
        (_, false) => {}
    }
    let start_ns = proctrace::monotonic_ns();
    let mut kpos =
        Kpos::new(cfg.kpos.clone(), start_ns).map_err(|e| AttachError::Target(e.to_string()))?;
    let mut lever = match cfg.lever {
        Some(k) => {
            let mut lc = LeverConfig::new(k);
            if cfg.direction == Direction::LowerRest {
                lc.nice = cfg.rest_nice;
            }
            Some(Lever::new(lc, &cfg.state_dir)?)
        }
        None => None,
    };
    // The weight and real-time levers' floor: a nice lever of its own holding every followed
    // task at the floor, its journal in a directory of its own (one journal per lever and
    // process).
    let floor_state = cfg.state_dir.join("floor");
    let floor_lever = match (cfg.lever, cfg.floor_nice) {
        (Some(LeverKind::Weight | LeverKind::Fifo), Some(f)) => {
            let mut lc = LeverConfig::new(LeverKind::Nice);
            lc.nice = f;
            Some(side_lever(lc, &floor_state, "floor", out)?)
        }
        _ => None,
    };
    let mut front = Front::new(&cfg.front);
    // The front's own lever: its journal in a directory of its own, as the floor's.
    let front_state = cfg.state_dir.join("front");
    let mut front_lever = match front_kind {
        Some(k) => Some(side_lever(LeverConfig::new(k), &front_state, "front", out)?),
        None => None,
    };
    if !front.is_empty() {
        let _ = writeln!(
            out,
            "front: {} task(s) of pid(s) {:?}, raised while any followed task is{}",
            front.tasks(),
            cfg.front,
            front_kind.map_or(String::new(), |k| format!(
                ", by a {} lever of its own",
                k.name()
            ))
        );
    }
    let mut rest = Rest::default();
    let snap = Arc::new(Mutex::new(Snapshot {
        logger: tracer.logger().name(),
        lever: cfg.lever.map_or("none", |k| k.name()),
        ..Default::default()
    }));
    let admin = match cfg.admin {
        Some(a) => Some(crate::admin::Admin::start(a, snap.clone())?),
        None => None,
    };
    if let Some(a) = &admin {
        let _ = writeln!(out, "metrics: http://{}/metrics", a.addr());
    }
    let actions = match &cfg.actions_log {
        Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p)?)),
        None => None,
    };
    let mut d = Daemon {
        known: BTreeSet::new(),
        acts: Vec::new(),
        s: Snapshot::default(),
        errors_shown: 0,
        actions,
        direction: cfg.direction,
        tail_nice: cfg.tail_nice,
        floor: cfg
            .floor_nice
            .filter(|_| matches!(cfg.lever, Some(LeverKind::Nice | LeverKind::NiceSlice))),
        floor_lever,
        floored: BTreeSet::new(),
        grades: cfg.kpos.grades.max(1),
    };
    let _ = writeln!(
        out,
        "following {} task(s) of {}; lever {}; direction {}; episode budget {}; tail's head {}",
        tasks.len(),
        cfg.target,
        cfg.lever.map_or("none (log only)", |k| k.name()),
        cfg.direction.name(),
        match cfg.kpos.budget {
            EpisodeBudget::Off => "off".to_owned(),
            EpisodeBudget::Learn => "learnt".to_owned(),
            EpisodeBudget::LearnPercentile(p) => format!("learnt at the text class's p{p}"),
            EpisodeBudget::Fixed(b) => format!("{:.3} ms", b as f64 / 1e6),
        },
        cfg.kpos.tail_head.name()
    );
    if let Some(f) = cfg.floor_nice.filter(|_| lever.is_some()) {
        let _ = writeln!(
            out,
            "floor: every followed task not raised held at nice {f}"
        );
    }
    for t in tasks {
        d.start(&mut tracer, &mut kpos, lever.as_mut(), t, start_ns, out);
    }
    let began = Instant::now();
    let cpu0 = os::thread_cpu_time();
    let mut last_rescan = Instant::now();
    let mut last_snap = Instant::now();
    let mut last_report = Instant::now();
    let mut window = (Instant::now(), 0u64);
    let mut evs: Vec<TaskEvent> = Vec::new();
    let mut last_batch: Option<Instant> = None;
    let end = loop {
        if stop() {
            break "stopped";
        }
        if cfg.duration.is_some_and(|dur| began.elapsed() >= dur) {
            break "duration reached";
        }
        evs.clear();
        // Wake up when POS has something due that no event brings (a task passing SLP, a
        // raised one passing the budget, the period's end), at most POLL_EVERY later and at
        // least 1 ms (the ring buffer's poll counts milliseconds); a scan before that does
        // nothing, so an event-driven loop costs no scan of every task.
        let wait = Duration::from_nanos(kpos.next_due().saturating_sub(proctrace::monotonic_ns()))
            .clamp(Duration::from_millis(1), POLL_EVERY);
        match last_batch.map(|t| t.elapsed()) {
            Some(since) if since < cfg.event_batch => {
                std::thread::sleep((cfg.event_batch - since).min(wait));
                tracer.poll(Duration::ZERO, &mut evs)?;
            }
            _ => tracer.poll(wait, &mut evs)?,
        }
        last_batch = (!evs.is_empty()).then(Instant::now);
        let now = proctrace::monotonic_ns();
        for ev in &evs {
            d.s.events += 1;
            d.s.delivery.record(now.saturating_sub(ev.t_ns));
            d.event(&mut tracer, &mut kpos, lever.as_mut(), ev, out);
        }
        d.acts.clear();
        kpos.scan(proctrace::monotonic_ns(), &mut d.acts);
        d.apply(lever.as_mut(), None, out);
        if let Some(l) = lever.as_mut() {
            if cfg.direction == Direction::LowerRest {
                d.s.lever_errors += rest.sync(&d.known, &kpos, l, cfg.kpos.always, out);
            }
            if !front.is_empty() {
                // A task at the floor counts: the front must not starve below it either.
                d.s.lever_errors += match front_lever.as_mut() {
                    Some(fl) => front.sync(fl, l.raised() > 0, out),
                    None => {
                        let any = l.raised() > front.held();
                        front.sync(l, any, out)
                    }
                };
            }
        }
        if last_rescan.elapsed() >= cfg.rescan {
            last_rescan = Instant::now();
            front.rescan();
            if !matches!(cfg.target, Target::Pid(_)) {
                if let Ok(ts) = proctrace::targets::tasks(&cfg.target) {
                    let now = proctrace::monotonic_ns();
                    for t in ts {
                        if !d.known.contains(&t) {
                            d.start(&mut tracer, &mut kpos, lever.as_mut(), t, now, out);
                        }
                    }
                }
            }
        }
        if d.known.is_empty() && matches!(cfg.target, Target::Pid(_)) {
            break "every followed process exited";
        }
        if last_snap.elapsed() >= Duration::from_millis(100) {
            last_snap = Instant::now();
            if window.0.elapsed() >= Duration::from_secs(1) {
                d.s.events_per_s =
                    (d.s.events - window.1) as f64 / window.0.elapsed().as_secs_f64();
                window = (Instant::now(), d.s.events);
            }
            d.refresh(&tracer, &kpos, began, cpu0);
            if let Ok(mut g) = snap.lock() {
                *g = d.s.clone();
            }
        }
        if cfg.report_every.is_some_and(|r| last_report.elapsed() >= r) {
            last_report = Instant::now();
            let _ = writeln!(out, "{}", d.s.line());
        }
    };
    d.refresh(&tracer, &kpos, began, cpu0);
    if let Some(l) = lever.as_mut() {
        let n = l.raised();
        for e in l.restore_all() {
            let _ = writeln!(out, "restore: {e}");
        }
        let _ = writeln!(out, "{end}: restored {n} raised task(s)");
        // After the weight lever's: a task it restores gets back the floor's value first.
        if let Some(fl) = d.floor_lever.take() {
            restore_side(fl, &floor_state, "task(s) held at the floor", out);
        }
        if let Some(fl) = front_lever.take() {
            restore_side(fl, &front_state, "front task(s)", out);
        }
    } else {
        let _ = writeln!(out, "{end}");
    }
    drop(lever);
    drop(tracer);
    if let Some(a) = d.actions.as_mut() {
        let _ = a.flush();
    }
    let _ = writeln!(out, "{}", d.s.line());
    if let Ok(mut g) = snap.lock() {
        *g = d.s.clone();
    }
    drop(admin);
    Ok(d.s)
}

/// The loop's state.
struct Daemon {
    /// Tasks followed now.
    known: BTreeSet<Tid>,
    /// Decisions to apply (reused buffer).
    acts: Vec<Action>,
    /// Metrics.
    s: Snapshot,
    /// Lever errors printed so far (bounded).
    errors_shown: u32,
    /// [`AttachConfig::actions_log`], open.
    actions: Option<std::io::BufWriter<std::fs::File>>,
    /// [`AttachConfig::direction`]: with [`Direction::LowerRest`] POS's decisions are
    /// applied by [`Rest::sync`], not one by one.
    direction: Direction,
    /// [`AttachConfig::tail_nice`].
    tail_nice: Option<i32>,
    /// [`AttachConfig::floor_nice`] (with a nice lever: one of its levels).
    floor: Option<i32>,
    /// [`AttachConfig::floor_nice`] with the weight lever: a nice lever holding every
    /// followed task at the floor.
    floor_lever: Option<Lever>,
    /// Followed tasks held at the floor now (in the lever's raised set, not above the floor).
    floored: BTreeSet<Tid>,
    /// [`KposConfig::grades`].
    grades: u32,
}

/// A lever beside the daemon's own (the weight lever's floor, the front's), its journal in
/// `dir`, a directory of its own (one journal per lever and process); what a daemon that
/// died left there is restored first.
fn side_lever(
    lc: LeverConfig,
    dir: &std::path::Path,
    what: &str,
    out: &mut dyn Write,
) -> Result<Lever, AttachError> {
    let rec = os::lever::recover(dir);
    if rec.journals > 0 {
        let _ = writeln!(
            out,
            "recovered {} {what} journal(s): restored {} task(s)",
            rec.journals,
            rec.restored.len()
        );
    }
    Ok(Lever::new(lc, dir)?)
}

/// Restore what a [`side_lever`] holds, say how many (`restored N <what>`), and remove its
/// directory: its journal went with it, and the directory goes if no other daemon's is there.
fn restore_side(mut l: Lever, dir: &std::path::Path, what: &str, out: &mut dyn Write) {
    let n = l.raised();
    for e in l.restore_all() {
        let _ = writeln!(out, "restore: {e}");
    }
    let _ = writeln!(out, "restored {n} {what}");
    drop(l);
    let _ = std::fs::remove_dir(dir);
}

/// The nice value of grade `g` of `n` ([`Action::Grade`]): `g / n` of the way from the text's
/// level `text` to `bottom` (the floor, or 0 without one), rounded toward the text.
pub fn grade_level(text: i32, bottom: i32, g: u32, n: u32) -> i32 {
    let n = i64::from(n.max(1));
    let g = i64::from(g).min(n);
    let span = i64::from(bottom) - i64::from(text);
    // Integer division truncates toward zero: toward the text for a positive span.
    text + i32::try_from(span * g / n).unwrap_or(0)
}

impl Daemon {
    fn start(
        &mut self,
        tracer: &mut Tracer,
        kpos: &mut Kpos,
        lever: Option<&mut Lever>,
        t: Tid,
        now: u64,
        out: &mut dyn Write,
    ) {
        if tracer.follow(t).is_ok() {
            self.known.insert(t);
            self.acts.clear();
            kpos.event(t as u64, Input::Start, now, &mut self.acts);
            if let Some(l) = lever {
                self.hold_at_floor(l, t, out);
            }
        }
    }

    /// Hold `t` at the floor (if there is one and the lever holds it at no other level).
    fn hold_at_floor(&mut self, l: &mut Lever, t: Tid, out: &mut dyn Write) {
        if let Some(fl) = self.floor_lever.as_mut() {
            match fl.raise(t) {
                Ok(()) => {}
                Err(LeverError::Gone(_)) => fl.forget(t),
                Err(e) => self.lever_error(e, out),
            }
            return;
        }
        let Some(f) = self.floor else {
            return;
        };
        let r = if l.is_raised(t) {
            l.set_level(t, f)
        } else {
            l.raise(t).and_then(|()| l.set_level(t, f))
        };
        match r {
            Ok(()) => {
                self.floored.insert(t);
            }
            Err(LeverError::Gone(_)) => l.forget(t),
            Err(e) => self.lever_error(e, out),
        }
    }

    fn lever_error(&mut self, e: LeverError, out: &mut dyn Write) {
        self.s.lever_errors += 1;
        if self.errors_shown < 5 {
            self.errors_shown += 1;
            let _ = writeln!(out, "lever: {e}");
        }
    }

    fn event(
        &mut self,
        tracer: &mut Tracer,
        kpos: &mut Kpos,
        mut lever: Option<&mut Lever>,
        ev: &TaskEvent,
        out: &mut dyn Write,
    ) {
        let input = match ev.kind {
            Kind::Ready => Input::Wake,
            Kind::Run => Input::Run,
            Kind::Wait => Input::Sleep,
            Kind::Preempt => Input::Preempt,
            Kind::Fork { .. } => {
                self.known.insert(ev.tid);
                if let Some(l) = lever.as_deref_mut() {
                    self.hold_at_floor(l, ev.tid, out);
                }
                Input::Start
            }
            Kind::Exit => {
                self.known.remove(&ev.tid);
                self.floored.remove(&ev.tid);
                tracer.unfollow(ev.tid);
                if let Some(l) = lever.as_deref_mut() {
                    l.forget(ev.tid);
                }
                if let Some(fl) = self.floor_lever.as_mut() {
                    fl.forget(ev.tid);
                }
                Input::Exit
            }
        };
        if !self.known.contains(&ev.tid) && input != Input::Exit {
            // A task that joined without a fork event (the poller's first sight of it).
            self.known.insert(ev.tid);
        }
        let raised_before = self.direction == Direction::RaiseMarked
            && !self.floored.contains(&ev.tid)
            && lever.as_deref().is_some_and(|l| l.is_raised(ev.tid));
        self.acts.clear();
        kpos.event(ev.tid as u64, input, ev.t_ns, &mut self.acts);
        let wake = (input == Input::Wake).then_some(ev);
        if let (Some(_), true) = (wake, raised_before) {
            self.s.raised_before_wake += 1;
            self.s.wake_to_lever.record(0);
        }
        self.apply(lever, wake.filter(|_| !raised_before), out);
    }

    /// Apply the decisions in `acts`; `wake`: the wake-up that caused them (its latency is
    /// recorded if it raised the task that woke).
    fn apply(&mut self, lever: Option<&mut Lever>, wake: Option<&TaskEvent>, out: &mut dyn Write) {
        if let Some(log) = self.actions.as_mut() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            for a in &self.acts {
                let _ = match a {
                    Action::Raise(w) => writeln!(log, "{now} raise {w}"),
                    Action::RaiseHead(w) => writeln!(log, "{now} head {w}"),
                    Action::Lower(w) => writeln!(log, "{now} lower {w}"),
                    Action::Grade(w, g) => writeln!(log, "{now} grade {w} {g}"),
                };
            }
        }
        let Some(l) = lever.filter(|_| self.direction == Direction::RaiseMarked) else {
            self.acts.clear();
            return;
        };
        let text = l.config().nice;
        let head = self.tail_nice.unwrap_or(text);
        let (bottom, grades) = (self.floor.unwrap_or(0), self.grades);
        let grade_nice = |g: u32| grade_level(text, bottom, g, grades);
        for a in std::mem::take(&mut self.acts) {
            // A task raised already (moving between the text and the tail's head) only
            // changes level.
            let mut raise = |tid: Tid, level: i32| {
                if l.is_raised(tid) {
                    l.set_level(tid, level)
                } else {
                    l.raise(tid).and_then(|()| {
                        if level == text {
                            Ok(())
                        } else {
                            l.set_level(tid, level)
                        }
                    })
                }
            };
            let call = std::time::Instant::now();
            let (tid, r) = match a {
                Action::Raise(w) => (w as Tid, raise(w as Tid, text)),
                Action::RaiseHead(w) => (w as Tid, raise(w as Tid, head)),
                Action::Grade(w, g) => (w as Tid, raise(w as Tid, grade_nice(g))),
                // With a floor a lowered task goes back to the floor, still held.
                Action::Lower(w) => match self.floor {
                    Some(f) if l.is_raised(w as Tid) => (w as Tid, l.set_level(w as Tid, f)),
                    _ => (w as Tid, l.lower(w as Tid)),
                },
            };
            self.s.lever_call.record(call.elapsed().as_nanos() as u64);
            match a {
                Action::Lower(_) if self.floor.is_some() && l.is_raised(tid) => {
                    self.floored.insert(tid);
                }
                Action::Raise(_) | Action::RaiseHead(_) | Action::Grade(..) => {
                    self.floored.remove(&tid);
                }
                Action::Lower(_) => {}
            }
            match r {
                Ok(()) => {
                    if let (Action::Raise(_), Some(w)) = (a, wake) {
                        if w.tid == tid {
                            self.s
                                .wake_to_lever
                                .record(proctrace::monotonic_ns().saturating_sub(w.t_ns));
                        }
                    }
                }
                Err(LeverError::Gone(_)) => {
                    l.forget(tid);
                    self.floored.remove(&tid);
                }
                Err(e) => self.lever_error(e, out),
            }
        }
    }

    fn refresh(&mut self, tracer: &Tracer, kpos: &Kpos, began: Instant, cpu0: Duration) {
        self.s.logger = tracer.logger().name();
        self.s.pos = kpos.stats();
        self.s.dropped = tracer.dropped();
        self.s.cpu_s = os::thread_cpu_time().saturating_sub(cpu0).as_secs_f64();
        self.s.wall_s = began.elapsed().as_secs_f64();
    }
}

#[cfg(test)]
mod tests {
    use super::grade_level;

    #[test]
    fn grades_spread_from_the_text_toward_the_floor_rounded_toward_the_text() {
        // Four grades from -20 toward a floor at -10.
        let levels: Vec<i32> = (0..4).map(|g| grade_level(-20, -10, g, 4)).collect();
        assert_eq!(levels, [-20, -18, -15, -13]);
        // Without a floor, toward 0; never past the bottom; one grade is the text's level.
        assert_eq!(grade_level(-20, 0, 1, 2), -10);
        assert_eq!(grade_level(-20, -10, 9, 4), -10);
        assert_eq!(grade_level(-20, -10, 0, 1), -20);
    }
}
