//! # gate: the server's CPU slots, ordered by a policy
//!
//! The gate turns a server's CPU work into what seed 001 schedules: N CPU slots and a ready
//! queue ordered by a policy (a `policy::Sched` behind a mutex). Every burst of CPU work a
//! worker does (handling a request's head, producing a chunk of a body, relaying CGI output)
//! runs while holding a slot ([`Permit`]); every await on the socket, the disk or a pipe
//! happens without one, and is what the worker log calls a wait.
//!
//! It needs only `policy`, `os` and tokio's clock, so it is read, tested and measured without
//! an HTTP stack. Modules, leaves first:
//! - [`pool`]: worker identity as in a prefork server (the worker idle longest goes first);
//! - [`boost`]: passing "this worker first" on to the kernel ([`Raise`]);
//! - [`samples`]: PL/LRQ samples every 10 ms (seed 001 §4.3);
//! - [`account`]: thread CPU per resource container ([`CpuAccount`]);
//! - [`shard`]: counters with one cache line per serving thread, summed on read, and the
//!   thread's number (its *home*: its lane, its counters' cell);
//! - `lane`: one lane of the gate (a `Sched` behind its own lock, its workers' wake-up state,
//!   its idle pool, its load published to the other lanes);
//! - [`slots`]: the [`Gate`] itself: acquisition, scheduling rounds, lanes and the slots that
//!   move between them, global learning, permits.
//!
//! The fast path's cost (uncontended acquire + release, per policy) is measured by an ignored
//! test: `cargo test -p gate --release --lib -- --ignored --nocapture fast_path`.
//!
//! The gate is per core: one lane (slots + policy-ordered ready queue) per runtime thread,
//! balanced by `policy::balance` (see [`slots`]).

#![warn(missing_docs)]

pub mod account;
pub mod boost;
mod lane;
pub mod pool;
pub mod samples;
pub mod shard;
pub mod slots;
pub mod wake_queue;

pub use account::{BurstTimer, CpuAccount};
pub use boost::Raise;
pub use samples::{Sample, Samples};
pub use slots::{Acquire, AcquireState, Counters, Gate, Permit, Streak};
pub use wake_queue::QueueOnWake;
