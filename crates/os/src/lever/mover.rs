//! The weight lever's cgroup writes, made by a thread of their own: a write into a v1
//! `tasks` file takes about 100 us and up to tens of milliseconds, and made by the caller it
//! holds up whatever the caller does next (the daemon's next decisions). [`Mover::send`]
//! queues a move and returns; the writer thread makes the queued moves one at a time,
//! **the moves back (lowers) ahead of the moves into a boost cgroup (raises)**, and a move
//! queued for a task that still has one waiting cancels it instead of being queued (the
//! two undo each other: the task stays where it is).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use super::weight::{self, CpuMount};
use crate::proctrace::Tid;

/// Writes kept until taken (a caller that never takes them keeps no more).
const MAX_TIMES: usize = 1 << 16;

/// Which way a queued move goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MoveKind {
    /// Back to the task's own cgroup: made first.
    Lower,
    /// Into a boost cgroup.
    Raise,
}

/// One move written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The task moved.
    pub tid: Tid,
    /// Which way.
    pub kind: MoveKind,
    /// How long the write took (ns).
    pub took_ns: u64,
    /// When it was done (Unix ns, the clock of an actions log).
    pub done_unix_ns: u64,
}

/// The queue shared with the writer thread.
#[derive(Debug, Default)]
struct Queue {
    /// Moves waiting, per task: where to and which way.
    pending: BTreeMap<Tid, (MoveKind, PathBuf)>,
    /// A move is being written now.
    busy: bool,
    /// The thread should stop once the queue is empty.
    stop: bool,
    /// The thread takes no move while set ([`Mover::set_held`]).
    held: bool,
    /// The writes made, taken by [`Mover::take_written`].
    written: Vec<Written>,
    /// Writes that failed (other than a task that is gone).
    errors: Vec<String>,
    /// Order of the writes made, kept only when [`Mover::record_order`] asked (tests).
    order: Option<Vec<(Tid, MoveKind)>>,
}

struct Shared {
    q: Mutex<Queue>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.q.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The writer thread and its queue; see the module docs. Dropping it makes the moves still
/// queued and stops the thread.
pub struct Mover {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Mover {
    /// Start the writer thread for the cpu controller's mount `m`.
    pub fn start(m: CpuMount) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            q: Mutex::new(Queue::default()),
            cv: Condvar::new(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("lever-mover".into())
            .spawn(move || write_moves(&s, &m))?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Queue moving `tid` into `dir`; if a move of `tid` is still waiting, both are dropped
    /// instead (this one undoes it). Returns at once.
    pub fn send(&self, tid: Tid, kind: MoveKind, dir: PathBuf) {
        let mut q = self.shared.lock();
        if q.pending.remove(&tid).is_none() {
            q.pending.insert(tid, (kind, dir));
        }
        drop(q);
        self.shared.cv.notify_all();
    }

    /// Wait until every queued move is written.
    pub fn flush(&self) {
        let mut q = self.shared.lock();
        while !q.pending.is_empty() || q.busy {
            q = self.shared.cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Moves queued and not yet written.
    pub fn pending(&self) -> usize {
        self.shared.lock().pending.len()
    }

    /// The writes made since the last call (failed ones included).
    pub fn take_written(&self) -> Vec<Written> {
        std::mem::take(&mut self.shared.lock().written)
    }

    /// The writes that failed since the last call (a task that is gone is not a failure).
    pub fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut self.shared.lock().errors)
    }

    /// Keep the order of the writes made from now on ([`Mover::written_order`]).
    pub fn record_order(&self) {
        self.shared.lock().order = Some(Vec::new());
    }

    /// The writes made since [`Mover::record_order`], in order.
    pub fn written_order(&self) -> Vec<(Tid, MoveKind)> {
        self.shared.lock().order.clone().unwrap_or_default()
    }

    /// Hold the writer back (`true`: it takes no queued move) or let it go on (tests:
    /// queue several moves before any is taken). [`Mover::flush`] waits while held.
    pub fn set_held(&self, held: bool) {
        self.shared.lock().held = held;
        self.shared.cv.notify_all();
    }
}

impl Drop for Mover {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The writer thread: take the first lower queued, else the first raise, write it, repeat;
/// stop when asked and nothing is left.
fn write_moves(s: &Shared, m: &CpuMount) {
    let mut q = s.lock();
    loop {
        let next = q
            .pending
            .iter()
            .min_by_key(|(_, (k, _))| *k)
            .map(|(&t, _)| t)
            .filter(|_| !q.held || q.stop);
        let Some(tid) = next else {
            if q.stop {
                return;
            }
            q = s.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        let (kind, dir) = q.pending.remove(&tid).expect("taken from the queue");
        q.busy = true;
        if let Some(o) = q.order.as_mut() {
            o.push((tid, kind));
        }
        drop(q);
        let t0 = Instant::now();
        let r = weight::move_task(m, tid, &dir);
        let took_ns = t0.elapsed().as_nanos() as u64;
        let done_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        q = s.lock();
        q.busy = false;
        if q.written.len() < MAX_TIMES {
            q.written.push(Written {
                tid,
                kind,
                took_ns,
                done_unix_ns,
            });
        }
        if let Err(e) = r {
            if !matches!(e.raw_os_error(), Some(libc::ESRCH) | Some(libc::ENOENT)) {
                q.errors
                    .push(format!("task {tid}: move to {}: {e}", dir.display()));
            }
        }
        s.cv.notify_all();
    }
}
