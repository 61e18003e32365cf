//! # policy: who is served first, decided purely
//!
//! Every scheduling and distribution decision in triage is made here, by code that does no
//! I/O, starts no thread and reads no clock: time is a value ([`Nanos`]) passed in. The same
//! objects are driven by the real server's gate (`server`), by Linux mechanisms (`os`) and by
//! the discrete-event simulator (`sim`).
//!
//! The modules form a DAG (`scripts/check_layout.py` checks it), listed here leaves first: a
//! module uses only modules above it.
//! - [`idhash`]: [`idhash::IdMap`], the one map type of the crate (deterministic, fast on ids).
//! - [`budget`]: one budget per resource container, split between the server's own work and
//!   the container's processes each period.
//! - [`worker`]: the worker log (worker, state, time) and the PFS built from it (seed 001 §3.1).
//! - [`predict`]: POS's SLP/RW predictors, pure functions of what a period observed.
//! - [`queue`]: the [`Policy`] trait, a ready-queue discipline, and what it is told ([`Ctx`],
//!   [`Hints`]).
//! - [`ready`]: the multi-level ready queue with starvation guard shared by `pos` and `content`.
//! - [`config`]: what a policy is configured with ([`PolicyConfig`]), its errors, and the
//!   [`config::Entry`] each policy registers with.
//! - [`sched`]: [`Sched`], the slot accounting every mechanism shares: N slots, a ready queue
//!   ordered by a policy, every transition logged.
//! - [`balance`]: where a new worker goes and when a slot moves between the lanes of a
//!   per-core mechanism (several `Sched`s, one per runtime thread).
//! - the policies, one file each: [`fifo`], [`pos`], [`posbsd`] (`pos` over
//!   `timeshare`), [`content`], [`timeshare`], [`delayed`]
//!   (on `timeshare`), [`share`] (resource containers; inner policies come from a builder it
//!   is given, not from the registry); and [`dispatch`], the cluster distribution policies.
//! - [`kpos`]: POS for tasks the kernel schedules: a tracer's run/wait transitions drive a
//!   [`pos::Pos`], whose mark becomes a raise/lower decision per task (`triage pos attach`),
//!   with the marked episode's CPU budget and the tail's head as options.
//! - [`script_budget`]: POS's characteristic 2 for a CGI script the kernel runs: the text
//!   budget of CPU learnt from the scripts' own CPU times (two-means split, as RW's `split`);
//!   [`kpos`] learns its episode budget with the same type.
//! - [`registry`]: the list of policies and [`build`]; adding a policy is one file plus one
//!   line there.

#![warn(missing_docs)]

pub mod balance;
pub mod budget;
pub mod config;
pub mod content;
pub mod delayed;
pub mod dispatch;
pub mod fifo;
pub mod idhash;
pub mod kpos;
pub mod pos;
pub mod posbsd;
pub mod predict;
pub mod queue;
pub mod ready;
pub mod registry;
pub mod sched;
pub mod script_budget;
pub mod share;
pub mod timeshare;
pub mod worker;

pub use config::{PolicyConfig, PolicyError, PosTail, RwRule, Tunable};
pub use queue::{ContentClass, Ctx, Hints, Policy, PolicyStats};
pub use registry::build;
pub use sched::{Grant, Sched, Snapshot};
pub use worker::{Event, Pfs, State, WorkerId};

/// Time in nanoseconds since an arbitrary origin chosen by the mechanism (monotonic clock in
/// the server, virtual time in the simulator).
pub type Nanos = u64;

/// One millisecond in [`Nanos`].
pub const MS: Nanos = 1_000_000;
/// One second in [`Nanos`].
pub const SEC: Nanos = 1_000_000_000;
