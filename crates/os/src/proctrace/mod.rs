//! Following a set of processes' run/wait transitions (the log POS classifies, seed 001 §3.1),
//! for processes triage did not start (`triage pos attach`) and for its own CGI children.
//!
//! - [`Target`] names what to follow: a pid and its descendants, a cgroup, or an executable
//!   name; [`targets`] resolves it to task ids now (and again later, for tasks that joined a
//!   cgroup without a followed parent).
//! - A [`Tracer`] delivers [`TaskEvent`]s: a task became ready (it woke), ran, waited, was
//!   preempted, forked or exited, with the kernel's monotonic time. Two loggers:
//!   - [`Logger::Bpf`]: a BPF program on the `sched_wakeup`, `sched_switch`,
//!     `sched_process_fork` and `sched_process_exit` tracepoints (`bpf/proctrace.bpf.c`),
//!     filtered in the kernel by a map of followed task ids, feeding a ring buffer. Children
//!     are followed from their fork on, before they first run.
//!   - [`Logger::Poll`]: reads `/proc/<tid>/stat` of every followed task every interval
//!     (about 4 us a read): coarse (a state is seen only if it lasts across a poll; running
//!     and ready are one state `R`), a fallback for kernels or builds without BPF.
//!
//! The tracer decides nothing; `policy` classifies, `lever` applies the decision.

mod bpf;
mod poll;
pub mod targets;

use std::io;
use std::time::Duration;

pub use targets::Target;

/// Kernel task id (a thread's `pid` in the kernel's sense).
pub type Tid = i32;

/// What happened to a followed task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// It woke up: left a wait and is runnable (in the run queue).
    Ready,
    /// It got a CPU.
    Run,
    /// It gave the CPU up to block or sleep.
    Wait,
    /// It lost the CPU while still runnable (preempted or yielded).
    Preempt,
    /// It was created by followed task `parent` and is followed from now on.
    Fork {
        /// The task that forked it.
        parent: Tid,
    },
    /// It exited; it is no longer followed.
    Exit,
}

/// One transition of one followed task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskEvent {
    /// When, in nanoseconds of `CLOCK_MONOTONIC` (comparable with [`monotonic_ns`]).
    pub t_ns: u64,
    /// The task.
    pub tid: Tid,
    /// Its process (thread group); 0 when the logger does not know it.
    pub tgid: Tid,
    /// What happened.
    pub kind: Kind,
}

/// Which logger a [`Tracer`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logger {
    /// BPF tracepoints into a ring buffer (the design).
    Bpf,
    /// `/proc/<tid>/stat` polling at this interval (the fallback).
    Poll(Duration),
}

impl Logger {
    /// Short name for logs, metrics and lab reports: `bpf` or `proc-poll`.
    pub fn name(&self) -> &'static str {
        match self {
            Logger::Bpf => "bpf",
            Logger::Poll(_) => "proc-poll",
        }
    }
}

/// Why a tracer could not start.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// This build has no BPF object (feature `bpf` off, or clang/bpftool/BTF missing when it
    /// was built).
    #[error("BPF logger not available in this build: {0}")]
    NotBuilt(&'static str),
    /// Loading or attaching the BPF program failed (not root, no BPF support, lockdown...).
    #[error("BPF logger could not start: {0} (needs root: CAP_BPF and CAP_PERFMON)")]
    Load(String),
    /// Any other failure.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Follows tasks and delivers their transitions. Dropping it detaches: the BPF programs and
/// maps are unloaded (they belong to this process's file descriptors, so a killed process
/// leaves nothing loaded either).
pub struct Tracer {
    inner: Inner,
}

enum Inner {
    Bpf(bpf::BpfTracer),
    Poll(poll::PollTracer),
}

impl Tracer {
    /// Start a tracer with `logger`.
    pub fn open(logger: Logger) -> Result<Self, TraceError> {
        let inner = match logger {
            Logger::Bpf => Inner::Bpf(bpf::BpfTracer::open()?),
            Logger::Poll(every) => Inner::Poll(poll::PollTracer::new(every)),
        };
        Ok(Self { inner })
    }

    /// The BPF logger if it starts, else the /proc logger polling every `poll_every`, with
    /// why BPF was not used.
    pub fn open_best(poll_every: Duration) -> (Self, Option<TraceError>) {
        match Self::open(Logger::Bpf) {
            Ok(t) => (t, None),
            Err(e) => (
                Self {
                    inner: Inner::Poll(poll::PollTracer::new(poll_every)),
                },
                Some(e),
            ),
        }
    }

    /// The logger in use.
    pub fn logger(&self) -> Logger {
        match &self.inner {
            Inner::Bpf(_) => Logger::Bpf,
            Inner::Poll(p) => Logger::Poll(p.every()),
        }
    }

    /// Follow task `tid` (and, from now on, every task it forks). Following a task twice is
    /// harmless.
    pub fn follow(&mut self, tid: Tid) -> io::Result<()> {
        match &mut self.inner {
            Inner::Bpf(b) => b.follow(tid),
            Inner::Poll(p) => {
                p.follow(tid);
                Ok(())
            }
        }
    }

    /// Stop following task `tid` (its children forked later are not followed).
    pub fn unfollow(&mut self, tid: Tid) {
        match &mut self.inner {
            Inner::Bpf(b) => b.unfollow(tid),
            Inner::Poll(p) => p.unfollow(tid),
        }
    }

    /// Wait up to `timeout` for events and append them to `out`, oldest first per task.
    pub fn poll(&mut self, timeout: Duration, out: &mut Vec<TaskEvent>) -> io::Result<()> {
        match &mut self.inner {
            Inner::Bpf(b) => b.poll(timeout, out),
            Inner::Poll(p) => p.poll(timeout, out),
        }
    }

    /// Events lost because user space fell behind (BPF ring buffer full); 0 for the poller.
    pub fn dropped(&self) -> u64 {
        match &self.inner {
            Inner::Bpf(b) => b.dropped(),
            Inner::Poll(_) => 0,
        }
    }
}

/// Now, in nanoseconds of `CLOCK_MONOTONIC` (the clock of [`TaskEvent::t_ns`]).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests;
