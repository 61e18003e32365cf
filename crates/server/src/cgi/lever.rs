//! The CGI lever (`cgi_lever = "nice"`, docs/kpos.md "triage's own CGI children"): POS's
//! decision reaches the scripts the kernel schedules.
//!
//! - A script started for a request of a worker the gate's policy marks (POS: predicted to
//!   serve text; the server reads the mark during the burst that starts the script) **starts
//!   raised**: the child sets its own nice value to -20 between fork and exec
//!   (`os::prio::NiceHook`), so it never runs its program unraised; once it runs, the lever
//!   journals it (`os::lever::Lever::adopt`) with the nice value to restore.
//! - It is **restored** as soon as its worker is found without the mark at one of its bursts
//!   (relaying the script's output: an image-producing script that prints as it computes
//!   shows the run/wait changes POS's characteristic 2 demotes); the rule is the policy's,
//!   the server only reads `Gate::marked`.
//! - A script that exits raised is forgotten (nothing to restore on a process that is gone);
//!   at shutdown dropping the lever restores every script still raised; after a crash the
//!   next start replays the journal ([`ScriptLever::open`]).
//!
//! - **Priority inheritance**: the server's own threads (those that start scripts and relay
//!   their output) are raised too while any script is held raised, and restored when the last
//!   one is: at nice 0 beside a script at -20 a thread would get about 1% of the CPU, and the
//!   relay that restores an image script would wait for that script to finish. Since a thread
//!   may be raised when it forks, every child gets its nice value at its start: -20 if raised,
//!   else the thread's own base value.
//!
//! - **The script's own run length** (`cgi_lever = "nice+budget"`): POS's characteristic 2
//!   applied to the process the kernel runs. A CPU-bound script never blocks, so it shows no
//!   run/wait change; what it shows is its CPU time. Every script that ends tells its CPU time
//!   (read from the kernel, `os::procfs::schedstat`) to the policy's
//!   [`policy::script_budget::ScriptBudget`], which learns the text budget (the short class
//!   of the scripts' CPU times); a check armed when a raised script starts reads its CPU
//!   time at the budget and again until it ends, and restores it once it has run past the
//!   budget ([`ScriptLever::watch`]): a script that computes everything before printing
//!   anything is lowered too, which the worker's rule cannot see.
//!
//! - **The tail's order** (`cgi_lever = "nice+tail"`): POS's queue is the marked workers at
//!   the head and the rest in the order their service episodes began (`--pos-tail episode`,
//!   the lab's default); the kernel runs the unraised scripts side by side (a fair share
//!   each), so every page's images finish late together. With the tail, the oldest running
//!   script that is not raised (by the start of its request: the oldest episode's) is raised
//!   too, one at a time, and restored when a script older than it enters the tail; so the
//!   rest runs about in the order POS's tail gives, and the oldest page's images finish first.
//!   With `nice+budget+tailyield` the tail's head is raised only while no script is held
//!   raised as text (POS's head strictly before its tail); with `nice+tail` and
//!   `nice+budget+tail` it is raised beside them.
//!
//! - **The head's order** (`cgi_lever = "nice+budget+tailyield+order"`): POS's head is the
//!   marked workers in the order they were marked, one after the other; the kernel runs
//!   every script raised at -20 side by side (a fair share each among them), so a page's
//!   script shares the CPU with the scripts of images mis-marked before their first output.
//!   With the head's order only the raised script whose request began first runs at -20;
//!   the others raised as text run at [`BEHIND_NICE`] (still about 9 times the weight of an
//!   unraised task, about a ninth of the head's), and the next one takes -20 when the head
//!   is restored or exits. The server's threads stay at -20 (priority inheritance), so they
//!   no longer share their CPU with every raised script.
//!
//! - **The back of the ready queue** (`cgi_lever = "nice+budget+tailyield+threads+back"`):
//!   seed 001 moves a process that loses characteristic 2 to the *back* of the ready queue,
//!   behind every other ready process. At nice 0 the scripts not raised are not at the back:
//!   each weighs as much as the hog and together (tens of images in flight) they outweigh a
//!   raised script (two text scripts at -15 against 36 images at 0 get under half the CPU),
//!   and they share the CPU among themselves, so every page's images finish late together
//!   (the tail's head, one script at -15 against 35 at 0, gets under half of it). With `back`
//!   a script not raised starts at [`BACK_NICE`] (the child sets it before exec, as a raised
//!   one sets -20), a raised one is restored to it, and the tail's head is lifted from there
//!   one at a time: the head and the tail's head each take nearly the whole CPU in turn, the
//!   rest waits in POS's tail order, and the hog keeps about the share it has beside the
//!   raised script. Nice matters only while tasks wait for the CPU: when the CPU is not the
//!   bottleneck every script runs at once, so the back costs nothing then (seed 001 serves
//!   text first only while the CPU is the bottleneck).
//!
//! - **The first output** (`cgi_lever = "...+output"`): a raised script is restored as soon as
//!   it has written its first output (the kernel says its pipe is readable: a task waits on a
//!   second descriptor of it, `Spawned::output_watch`), the wake-up of its worker for that
//!   output (POS's second run/wait change), without waiting for the gate to grant the worker
//!   the burst that reads it. A page script computes and then prints its HTML at once: when
//!   its output arrives it has nothing left to compute, so this costs it nothing (its worker
//!   keeps the mark for the relay). An image script that prints as it computes is restored at
//!   its first band, where the worker's rule restores it only after the relay burst that
//!   follows (a gate wait and a burst later: image scripts mis-marked on idle keep-alive
//!   connections ran raised for 3.5-10 ms of CPU each, beside the text, and held off the
//!   tail's head).
//!
//! - **The server's threads preempt** (`cgi_lever = "...+preempt"`): the threads that start
//!   scripts and relay their output ask for the kernel's shortest slice ([`THREAD_SLICE`]).
//!   EEVDF lets a running task finish its slice unless the task that wakes asks for a
//!   shorter one: with the default slice a thread woken for a script's output waited for the
//!   running script's slice (about 1.4 ms here) before it ran.
//!
//! - **A program's previous executions** (`cgi_lever = "...+budget+...+program"`): seed 001's
//!   POS (Program Oriented Schedule) predicts a program's behaviour from its previous
//!   executions. A CGI script is a program run again and again: the policy remembers the CPU
//!   time of each program's last execution (`policy::script_budget::ScriptBudget::
//!   predicts_long`, keyed by the script's file), and a script of a marked worker whose
//!   program last ran past the text budget starts unraised (counted as `predicted_long`): a
//!   worker's mark says that its request *may* be text, the program's last run says it is
//!   not. Only CPU time is used, never what a script serves; one execution corrects it.
//!
//! nice orders a process only against the tasks of its own leaf cgroup: the scripts must run
//! in the server's cgroup beside their competitors (`cgroups = false`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use os::lever::{Lever, LeverConfig, LeverError, LeverKind};
use os::prio::{NiceHook, Tid};
use policy::script_budget::{ScriptBudget, Verdict};

use super::stats::CgiStats;

/// The nice value of a script raised as text behind an older one (the head's order): weight
/// 9548, about 9 times an unraised task's 1024 and a ninth of the head's 88761 (nice -20).
pub const BEHIND_NICE: i32 = -10;

/// The nice value of every raised script when the server's threads go first
/// (`nice+budget+tailyield+threads`): weight 29154, about 28 times an unraised task's and a
/// third of the server's raised threads' 88761 (nice -20).
pub const BELOW_THREADS_NICE: i32 = -15;

/// The nice value of a script not raised with `back` (the back of the ready queue): weight
/// 15, about a 68th of the hog's 1024 and a 1900th of a script raised at -15.
pub const BACK_NICE: i32 = 19;

/// The slice the server's threads ask for with `preempt`: the kernel's shortest. A thread
/// that wakes with a shorter slice than the running task's preempts it (EEVDF); with the
/// default slice a woken thread waited for the running script's slice to end (about 1.5 ms
/// of a mis-marked image script's CPU, raised, before its first output was seen).
pub const THREAD_SLICE: std::time::Duration = std::time::Duration::from_micros(100);

/// The key of a program (a script's file) in the policy's memory of previous executions.
fn program_key(program: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    program.hash(&mut h);
    h.finish()
}

/// What the lock guards.
struct Inner {
    /// Raises journaled and restores made (scripts and the server's threads).
    lever: Lever,
    /// The server's threads that started scripts, with their nice value when first seen.
    threads: Vec<(Tid, i32)>,
    /// Scripts held raised now.
    held: usize,
    /// With the tail's order: the running scripts not raised as text, by the start of their
    /// request (then pid).
    tail: std::collections::BTreeSet<(std::time::Instant, i32)>,
    /// The one of them raised now (the oldest).
    tail_head: Option<i32>,
    /// With the head's order: the scripts held raised as text, by the start of their request
    /// (then pid).
    head: std::collections::BTreeSet<(std::time::Instant, i32)>,
    /// The one of them at the raised value now (the oldest); the others are behind.
    head_top: Option<i32>,
}

/// The server's lever over its CGI scripts (one for all sites).
pub struct ScriptLever {
    /// One lock: a few microseconds per script.
    inner: Mutex<Inner>,
    /// The nice value of a raised script.
    raised_nice: i32,
    /// A failure was logged (later ones are only counted).
    warned: AtomicBool,
    /// The text budget learnt from the scripts' CPU times, with the origin of its clock;
    /// `None` without the script's own rule (`cgi_lever = "nice"`).
    budget: Option<(Mutex<ScriptBudget>, std::time::Instant)>,
    /// Raise the oldest script of the tail too (see the module docs).
    tail_order: bool,
    /// ... but only while no script is held raised as text (POS's head before its tail).
    tail_yields: bool,
    /// The head's order: the nice value of a script raised as text behind another one
    /// (`None`: every raised script at the raised value).
    head_behind: Option<i32>,
    /// ... the newest at the raised value (each newly marked script put at the head of the
    /// ready queue, seed 001's words), else the oldest.
    head_newest: bool,
    /// ... none at the raised value: every raised script (the tail's head too) at
    /// `head_behind`, below the server's raised threads.
    threads_first: bool,
    /// With `threads_first`: the tail's head stays at the raised value (it is raised only
    /// while no script is raised as text; below the threads it lost its share to the
    /// unraised scripts).
    tail_head_top: bool,
    /// The nice value of the scripts not raised, and of a raised script once restored (the
    /// back of the ready queue); `None`: the forking thread's own.
    back_nice: Option<i32>,
    /// Restore a raised script once its first output has been read (see the module docs).
    at_output: bool,
    /// The slice the server's threads ask for (`None`: the kernel's default), set on each
    /// when first seen and put back when the lever is dropped.
    thread_slice: Option<std::time::Duration>,
    /// A marked worker's script starts unraised when its program's last execution ran past
    /// the text budget (see the module docs).
    program_memory: bool,
}

impl std::fmt::Debug for ScriptLever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptLever")
            .field("nice", &self.raised_nice)
            .finish()
    }
}

impl Drop for ScriptLever {
    /// The server's threads back at the default slice (their nice values are the lever's).
    fn drop(&mut self) {
        if self.thread_slice.is_some() {
            let g = self.lock();
            for &(t, _) in &g.threads {
                let _ = os::prio::set_thread_slice(t, None);
            }
        }
    }
}

/// What a spawn needs: the nice value the child gives itself before exec, and what to restore.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    /// Applied by the child before exec.
    pub hook: NiceHook,
    /// A raised script's value to restore: the forking thread's own nice value, or
    /// [`BACK_NICE`] with the back of the ready queue.
    pub base: i32,
    /// The script starts raised.
    pub raise: bool,
}

impl ScriptLever {
    /// Put back what a crashed server's scripts were left at (journals in `state_dir` whose
    /// owner is gone), then a nice lever journaling there. Returns how many tasks were
    /// restored. Fails without the right to create the journal (not root).
    pub fn open(state_dir: &Path) -> std::io::Result<(Self, usize)> {
        let recovered = os::lever::recover(state_dir);
        for f in &recovered.failed {
            tracing::warn!("cgi lever: restoring a crashed run's script: {f}");
        }
        let cfg = LeverConfig::new(LeverKind::Nice);
        let lever = Lever::new(cfg, state_dir)?;
        Ok((
            Self {
                inner: Mutex::new(Inner {
                    lever,
                    threads: Vec::new(),
                    held: 0,
                    tail: Default::default(),
                    tail_head: None,
                    head: Default::default(),
                    head_top: None,
                }),
                raised_nice: cfg.nice,
                warned: AtomicBool::new(false),
                budget: None,
                tail_order: false,
                tail_yields: false,
                head_behind: None,
                head_newest: false,
                threads_first: false,
                tail_head_top: false,
                back_nice: None,
                at_output: false,
                thread_slice: None,
                program_memory: false,
            },
            recovered.restored.len(),
        ))
    }

    /// Also lower a raised script by its own CPU time (see the module docs); the budget's
    /// histogram ages once per `period` (the policy's) in which scripts ended.
    pub fn with_budget(mut self, period: std::time::Duration) -> Self {
        let period = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX);
        self.budget = Some((
            Mutex::new(ScriptBudget::new(period)),
            std::time::Instant::now(),
        ));
        self
    }

    /// Also raise the oldest running script that is not raised as text (see the module docs).
    pub fn with_tail_order(mut self, yields: bool) -> Self {
        self.tail_order = true;
        self.tail_yields = yields;
        self
    }

    /// Run the scripts raised as text one after the other in the order their requests began
    /// (see the module docs): the others at [`BEHIND_NICE`].
    /// With `newest`, the newest raised script runs at the raised value (seed 001 moves a
    /// marked process to the head of the ready queue, before those marked earlier).
    pub fn with_head_order(mut self, newest: bool) -> Self {
        self.head_behind = Some(BEHIND_NICE);
        self.head_newest = newest;
        self
    }

    /// Every raised script at [`BELOW_THREADS_NICE`], the server's threads at the raised
    /// value above them: the threads' bursts (the gate's, the fork, the relay) are short and
    /// every raised script waits on them.
    /// With `tail_head_top`, the tail's head stays at the raised value.
    pub fn with_threads_first(mut self, tail_head_top: bool) -> Self {
        self.head_behind = Some(BELOW_THREADS_NICE);
        self.threads_first = true;
        self.tail_head_top = tail_head_top;
        self
    }

    /// The scripts not raised start at [`BACK_NICE`] and a raised one is restored to it: the
    /// back of the ready queue (see the module docs); use with the tail's order, whose head
    /// is lifted from there.
    pub fn with_back(mut self) -> Self {
        self.back_nice = Some(BACK_NICE);
        self
    }

    /// Restore a raised script once its first output has been read: the output's arrival is
    /// its worker's wake-up (POS's second change), the earliest sign of the image behaviour
    /// the worker's rule waits one relay burst longer for (see the module docs).
    pub fn with_restore_at_output(mut self) -> Self {
        self.at_output = true;
        self
    }

    /// The server's threads that start scripts ask for `slice` from their first script on,
    /// and for the default again when the lever is dropped: woken (a script's output, a
    /// request), a thread with a shorter slice than the running script's takes the CPU at
    /// once instead of after that script's slice (see [`THREAD_SLICE`]).
    pub fn with_thread_slice(mut self, slice: std::time::Duration) -> Self {
        self.thread_slice = Some(slice);
        self
    }

    /// A script of a marked worker starts unraised when its program's last execution ran
    /// past the text budget (with [`ScriptLever::with_budget`]; see the module docs).
    pub fn with_program_memory(mut self) -> Self {
        self.program_memory = true;
        self
    }

    /// Whether the next script of `program` (its file) is predicted to run past the text
    /// budget, from its last execution: start it unraised. `false` without the rule, a
    /// budget or a previous execution.
    pub fn predicts_long(&self, program: &Path) -> bool {
        match (&self.budget, self.program_memory) {
            (Some((b, _)), true) => b
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .predicts_long(program_key(program)),
            _ => false,
        }
    }

    /// Whether a raised script is restored at its first output.
    pub fn restores_at_output(&self) -> bool {
        self.at_output
    }

    /// The script of the head that runs at the raised value (the oldest or the newest).
    fn head_first(&self, g: &Inner) -> Option<i32> {
        if self.threads_first {
            return None;
        }
        if self.head_newest {
            g.head.last().map(|&(_, p)| p)
        } else {
            g.head.first().map(|&(_, p)| p)
        }
    }

    /// The oldest script held raised as text at the raised value, the one before it (if
    /// still held) behind.
    fn fix_head(&self, g: &mut Inner, stats: &CgiStats) {
        let Some(behind) = self.head_behind else {
            return;
        };
        let oldest = self.head_first(g);
        if oldest == g.head_top {
            return;
        }
        if let Some(old) = g.head_top.take() {
            if g.head.iter().any(|&(_, p)| p == old) {
                match g.lever.set_level(old, behind) {
                    Ok(()) | Err(LeverError::Gone(_)) => {}
                    Err(e) => self.failed(stats, &e),
                }
            }
        }
        if let Some(new) = oldest {
            match g.lever.set_level(new, self.raised_nice) {
                Ok(()) => g.head_top = Some(new),
                Err(LeverError::Gone(_)) => {}
                Err(e) => self.failed(stats, &e),
            }
        }
    }

    /// A script raised as text (`pid`, request begun at `key`) joins the head: behind the
    /// older ones.
    fn head_enter(&self, g: &mut Inner, pid: i32, key: std::time::Instant, stats: &CgiStats) {
        let Some(behind) = self.head_behind else {
            return;
        };
        g.head.insert((key, pid));
        if self.head_first(g) != Some(pid) && self.start_nice() != behind {
            // It raised itself to the raised value at its start.
            match g.lever.set_level(pid, behind) {
                Ok(()) | Err(LeverError::Gone(_)) => {}
                Err(e) => self.failed(stats, &e),
            }
        }
        self.fix_head(g, stats);
    }

    /// A script leaves the head (restored or exited): the next one takes its place.
    fn head_leave(&self, g: &mut Inner, pid: i32, key: std::time::Instant, stats: &CgiStats) {
        if self.head_behind.is_none() {
            return;
        }
        g.head.remove(&(key, pid));
        if g.head_top == Some(pid) {
            g.head_top = None;
        }
        self.fix_head(g, stats);
    }

    /// The nice value of script `pid` as the lever wants it now (`None`: not held raised).
    pub fn wanted_nice(&self, pid: i32) -> Option<i32> {
        let g = self.lock();
        if !g.lever.is_raised(pid) {
            return None;
        }
        match self.head_behind {
            Some(b) if self.threads_first => Some(b),
            Some(b) if g.head.iter().any(|&(_, p)| p == pid) && g.head_top != Some(pid) => Some(b),
            _ => Some(self.raised_nice),
        }
    }

    /// A script never raised runs (its exec is done), for a request that began at `key`: it
    /// goes to the back of the ready queue (with `back`) and joins the tail.
    pub fn tail_enter(&self, pid: i32, key: std::time::Instant, stats: &CgiStats) {
        if let Some(b) = self.back_nice {
            // Lowering needs no right and leaves nothing to restore: not journaled.
            match os::prio::set_thread_nice(pid, b) {
                Ok(()) => {}
                Err(os::prio::PrioError::Sys { err, .. }) if err.contains("No such process") => {}
                Err(e) => self.failed(
                    stats,
                    &LeverError::Other {
                        tid: pid,
                        msg: e.to_string(),
                    },
                ),
            }
        }
        if self.tail_order {
            let mut g = self.lock();
            self.tail_enter_locked(&mut g, pid, key, stats);
        }
    }

    fn tail_enter_locked(
        &self,
        g: &mut Inner,
        pid: i32,
        key: std::time::Instant,
        stats: &CgiStats,
    ) {
        if self.tail_order {
            g.tail.insert((key, pid));
            self.fix_tail(g, stats);
        }
    }

    /// The script `pid` of a request that began at `key` has exited (reaped): it leaves the
    /// tail (nothing to restore on a process that is gone).
    pub fn tail_leave(&self, pid: i32, key: std::time::Instant, stats: &CgiStats) {
        if !self.tail_order {
            return;
        }
        let mut g = self.lock();
        g.tail.remove(&(key, pid));
        if g.tail_head == Some(pid) {
            g.lever.forget(pid);
            g.tail_head = None;
            self.release_raw(&mut g, stats);
        }
        self.fix_tail(&mut g, stats);
    }

    /// Make the oldest script of the tail the one raised.
    fn fix_tail(&self, g: &mut Inner, stats: &CgiStats) {
        if !self.tail_order {
            return;
        }
        loop {
            // Scripts held raised as text (the tail's head is held too).
            let text = g.held.saturating_sub(usize::from(g.tail_head.is_some()));
            let want = if self.tail_yields && text > 0 {
                None
            } else {
                g.tail.first().map(|&(_, p)| p)
            };
            if want == g.tail_head {
                return;
            }
            tracing::debug!(
                old = ?g.tail_head,
                new = ?want,
                text,
                tail = g.tail.len(),
                "cgi lever: tail's head"
            );
            if let Some(old) = g.tail_head.take() {
                if let Err(e) = g.lever.lower(old) {
                    self.failed(stats, &e);
                }
                self.release_raw(g, stats);
            }
            let Some(new) = want else {
                return;
            };
            match g.lever.raise(new) {
                Ok(()) => {
                    if let (true, false, Some(b)) =
                        (self.threads_first, self.tail_head_top, self.head_behind)
                    {
                        match g.lever.set_level(new, b) {
                            Ok(()) | Err(LeverError::Gone(_)) => {}
                            Err(e) => self.failed(stats, &e),
                        }
                    }
                    g.tail_head = Some(new);
                    stats.tail_heads.fetch_add(1, Relaxed);
                    self.hold_raw(g, stats);
                    return;
                }
                Err(LeverError::Gone(_)) => {
                    // Exited, not reaped yet: not worth raising.
                    g.tail.retain(|&(_, p)| p != new);
                }
                Err(e) => {
                    self.failed(stats, &e);
                    return;
                }
            }
        }
    }

    /// Whether raised scripts are also lowered by their own CPU time.
    pub fn has_budget(&self) -> bool {
        self.budget.is_some()
    }

    /// The text budget learnt so far, if any.
    pub fn budget(&self) -> Option<std::time::Duration> {
        let (b, _) = self.budget.as_ref()?;
        let b = b.lock().unwrap_or_else(|p| p.into_inner()).budget()?;
        Some(std::time::Duration::from_nanos(b))
    }

    /// A script of `program` (its file) ended having used `cpu` of CPU (read from the kernel
    /// before it was reaped).
    pub fn script_ended(&self, program: &Path, cpu: std::time::Duration) {
        if let Some((b, origin)) = &self.budget {
            let now = u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
            let cpu = u64::try_from(cpu.as_nanos()).unwrap_or(u64::MAX);
            b.lock().unwrap_or_else(|p| p.into_inner()).observe_program(
                now,
                program_key(program),
                cpu,
            );
        }
    }

    fn verdict(&self, cpu_ns: u64) -> Verdict {
        match &self.budget {
            None => Verdict::Unarmed,
            Some((b, _)) => b.lock().unwrap_or_else(|p| p.into_inner()).check(cpu_ns),
        }
    }

    /// The check armed when a raised script starts (with a budget): look at its CPU time when
    /// it could first have used the budget, and again as the verdict says, until it is lowered
    /// (by this rule or its worker's) or gone. Returns whether this rule lowered it.
    pub async fn watch(self: Arc<Self>, script: Arc<Raised>) -> bool {
        // Re-checks are at least this far apart (the timer's resolution).
        const MIN_RECHECK: std::time::Duration = std::time::Duration::from_millis(1);
        let mut delay = std::time::Duration::ZERO;
        loop {
            if !delay.is_zero() {
                tokio::time::sleep(delay.max(MIN_RECHECK)).await;
            }
            if !script.is_held() {
                return false;
            }
            let Ok(s) = os::procfs::schedstat(script.pid) else {
                return false;
            };
            match self.verdict(s.run_ns) {
                Verdict::Unarmed => return false,
                Verdict::Lower => {
                    if script.lower_for("budget") {
                        script.stats.lowered_budget.fetch_add(1, Relaxed);
                        return true;
                    }
                    return false;
                }
                Verdict::RecheckAfter(ns) => delay = std::time::Duration::from_nanos(ns),
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Prepare a spawn on the thread that forks: raised (`raise`) or at the thread's base. A
    /// raised start holds the server's threads raised from now on (the fork and the wait for
    /// the exec run raised too); [`ScriptLever::adopt`] hands the hold to the script, or
    /// [`ScriptLever::abandon`] gives it up if the script did not start.
    pub fn prepare(&self, raise: bool, stats: &CgiStats) -> Start {
        let me = os::prio::current_tid();
        let mut g = self.lock();
        let base = match g.threads.iter().find(|(t, _)| *t == me) {
            Some(&(_, b)) => b,
            None => {
                let b = os::prio::thread_nice(me).unwrap_or(0);
                g.threads.push((me, b));
                if let Some(slice) = self.thread_slice {
                    if let Err(e) = os::prio::set_thread_slice(me, Some(slice)) {
                        self.failed(stats, &e);
                    }
                }
                if g.held > 0 {
                    if let Err(e) = g.lever.raise(me) {
                        self.failed(stats, &e);
                    }
                }
                b
            }
        };
        if raise {
            self.hold(&mut g, stats);
        }
        let rest = self.back_nice.unwrap_or(base);
        // A script not raised starts at the thread's base, not at the back: at the back its
        // exec waited behind the hog for the CPU (a script joins the tail, whose head the
        // lever lifts, only once it runs), so the first image of every page, the one on its
        // HTML's connection, joined the tail last and every page ended late together.
        // [`ScriptLever::tail_enter`] moves it to the back once it runs.
        let nice = if raise { self.start_nice() } else { base };
        Start {
            hook: NiceHook::new(nice).expect("nice values in range"),
            base: rest,
            raise,
        }
    }

    /// The nice value a raised script gives itself at its start: with the server's threads
    /// first, already below them (at -20 beside them until the server adopted it, a burst of
    /// scripts started together took the CPU from the thread that starts and relays them:
    /// the forks of a page's images waited hundreds of milliseconds while the scripts already
    /// started ran raised to their end, never restored); else the raised value.
    pub fn start_nice(&self) -> i32 {
        match self.head_behind {
            Some(b) if self.threads_first => b,
            _ => self.raised_nice,
        }
    }

    /// The nice values of the server's threads that started scripts, now (tests, metrics).
    pub fn thread_nices(&self) -> Vec<i32> {
        let g = self.lock();
        g.threads
            .iter()
            .filter_map(|&(t, _)| os::prio::thread_nice(t).ok())
            .collect()
    }

    /// The server's threads that started scripts (tests, metrics).
    pub fn threads(&self) -> Vec<Tid> {
        self.lock().threads.iter().map(|&(t, _)| t).collect()
    }

    /// Scripts held raised now.
    pub fn raised(&self) -> usize {
        self.lock().held
    }

    /// Tasks the lever holds raised now (scripts and the server's threads).
    pub fn raised_tasks(&self) -> usize {
        self.lock().lever.raised()
    }

    /// One more script held raised as text; the tail's head yields to it if it must.
    fn hold(&self, g: &mut Inner, stats: &CgiStats) {
        self.hold_raw(g, stats);
        self.fix_tail(g, stats);
    }

    /// One script less held raised as text.
    fn release(&self, g: &mut Inner, stats: &CgiStats) {
        self.release_raw(g, stats);
        self.fix_tail(g, stats);
    }

    /// One more script (or raised start) held: the first raises the server's threads.
    fn hold_raw(&self, g: &mut Inner, stats: &CgiStats) {
        g.held += 1;
        if g.held == 1 {
            let threads: Vec<Tid> = g.threads.iter().map(|&(t, _)| t).collect();
            for t in threads {
                if let Err(e) = g.lever.raise(t) {
                    self.failed(stats, &e);
                }
            }
        }
    }

    /// A raised start whose script did not start (or could not be adopted): give up its hold.
    pub fn abandon(&self, start: Start, stats: &CgiStats) {
        if start.raise {
            let mut g = self.lock();
            self.release(&mut g, stats);
        }
    }

    fn failed(&self, stats: &CgiStats, e: &dyn std::fmt::Display) {
        stats.lever_errors.fetch_add(1, Relaxed);
        if !self.warned.swap(true, Relaxed) {
            tracing::warn!("cgi lever: {e} (further failures are only counted)");
        }
    }

    /// `pid` was started with `start` (raised): hold it (the start's hold on the server's
    /// threads becomes the script's).
    /// `None` when it was not raised, is gone already, or could not raise itself (counted as
    /// a lever error).
    pub fn adopt(
        self: &Arc<Self>,
        pid: i32,
        start: Start,
        key: std::time::Instant,
        stats: &Arc<CgiStats>,
    ) -> Option<Arc<Raised>> {
        if !start.raise {
            return None;
        }
        let mut g = self.lock();
        // The start's hold (see `prepare`) becomes the script's, or is given up.
        match g.lever.adopt_at(pid, start.base, start.hook.nice()) {
            Ok(()) => {}
            Err(LeverError::Gone(_)) => {
                self.release(&mut g, stats);
                return None;
            }
            Err(e) => {
                self.failed(stats, &e);
                self.release(&mut g, stats);
                return None;
            }
        }
        self.head_enter(&mut g, pid, key, stats);
        drop(g);
        stats.raised.fetch_add(1, Relaxed);
        Some(Arc::new(Raised {
            lever: self.clone(),
            pid,
            key,
            stats: stats.clone(),
            held: AtomicBool::new(true),
        }))
    }

    /// One script less held: the last one restores the server's threads.
    fn release_raw(&self, g: &mut Inner, stats: &CgiStats) {
        g.held = g.held.saturating_sub(1);
        if g.held == 0 {
            let threads: Vec<Tid> = g.threads.iter().map(|&(t, _)| t).collect();
            for t in threads {
                if let Err(e) = g.lever.lower(t) {
                    self.failed(stats, &e);
                }
            }
        }
    }
}

/// One script held raised; see the module docs.
#[derive(Debug)]
pub struct Raised {
    /// The lever holding it.
    lever: Arc<ScriptLever>,
    /// The script's process.
    pid: i32,
    /// When its request began (its place in the tail once restored).
    key: std::time::Instant,
    /// Where the restores and failures are counted.
    stats: Arc<CgiStats>,
    /// Still raised (neither restored nor exited).
    held: AtomicBool,
}

impl Raised {
    /// Whether the script is still held raised.
    pub fn is_held(&self) -> bool {
        self.held.load(Relaxed)
    }

    /// Restore the script (its worker lost the mark, or it ran past the text budget); later
    /// calls do nothing. Returns whether this call restored it.
    pub fn lower(&self) -> bool {
        self.lower_for("worker")
    }

    /// The script's first output has been read: restore it (with
    /// [`ScriptLever::with_restore_at_output`]). Returns whether this call restored it.
    pub fn first_output(&self) -> bool {
        self.lever.at_output && self.lower_for("output")
    }

    /// [`Raised::lower`], saying why in the debug log (with the CPU the script used raised).
    fn lower_for(&self, why: &'static str) -> bool {
        if !self.held.swap(false, Relaxed) {
            return false;
        }
        self.trace(why);
        let mut g = self.lever.lock();
        match g.lever.lower(self.pid) {
            Ok(()) => {
                self.stats.lowered.fetch_add(1, Relaxed);
            }
            Err(e) => self.lever.failed(&self.stats, &e),
        }
        self.lever
            .head_leave(&mut g, self.pid, self.key, &self.stats);
        // Released, then into the tail: one look at the tail's head for both.
        self.lever.release_raw(&mut g, &self.stats);
        self.lever
            .tail_enter_locked(&mut g, self.pid, self.key, &self.stats);
        true
    }

    /// Debug log: the script leaves the raised class (`why`), its CPU time so far and the
    /// time since its request asked the gate.
    fn trace(&self, why: &'static str) {
        if tracing::enabled!(tracing::Level::DEBUG) {
            let cpu = os::procfs::schedstat(self.pid).map_or(f64::NAN, |s| s.run_ns as f64 / 1e6);
            tracing::debug!(
                pid = self.pid,
                why,
                cpu_ms = cpu,
                since_ask_ms = self.key.elapsed().as_secs_f64() * 1e3,
                "cgi lever: raised script left"
            );
        }
    }

    /// The script's process.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The script was reaped: forget it (nothing to restore on a process that is gone).
    pub fn exited(&self) {
        if self.held.swap(false, Relaxed) {
            self.trace("exited");
            let mut g = self.lever.lock();
            g.lever.forget(self.pid);
            self.lever
                .head_leave(&mut g, self.pid, self.key, &self.stats);
            self.lever.release(&mut g, &self.stats);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a raised start and an unraised one give the child, with and without the server's
    /// threads first.
    fn starts(lever: ScriptLever) -> (i32, i32) {
        let stats = CgiStats::default();
        let raised = lever.prepare(true, &stats);
        lever.abandon(raised, &stats);
        let plain = lever.prepare(false, &stats);
        assert_eq!(lever.raised_tasks(), 0, "nothing left raised");
        (raised.hook.nice(), plain.hook.nice())
    }

    #[test]
    fn with_the_threads_first_a_raised_script_starts_below_them() {
        let dir = tempfile::tempdir().unwrap();
        let open = || ScriptLever::open(dir.path()).unwrap().0;
        let base = os::prio::thread_nice(os::prio::current_tid()).unwrap();
        assert_eq!(starts(open()), (-20, base), "the plain lever");
        let first = open().with_budget(std::time::Duration::from_millis(500));
        let first = first.with_tail_order(true).with_threads_first(false);
        assert_eq!(
            starts(first.with_back()),
            (BELOW_THREADS_NICE, base),
            "raised below the server's threads from the fork on, never beside them; not \
             raised at the base until it runs (the back's exec waited behind the hog)"
        );
        let order = open().with_head_order(false);
        assert_eq!(
            starts(order).0,
            -20,
            "the head's order starts the newest at the top"
        );
    }
}
