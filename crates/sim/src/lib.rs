//! # sim: a deterministic discrete-event simulator driving the policy crate in virtual time
//!
//! The simulator reproduces the papers' 1999 conditions (a 233 MHz server on 10 Mb/s Ethernet,
//! a cluster of back ends with small file caches) and scales past one machine, calling the
//! *same* policy code as the real server: [`policy::Sched`] with a registered
//! [`policy::Policy`] for CPUs, and [`policy::dispatch`] for a cluster front end.
//!
//! - [`engine`]: the event queue in integer nanoseconds; ties served in scheduling order.
//! - models: [`cpu`] (slots, quantum, preemption through `Sched`), [`link`] (shared bandwidth,
//!   fair or FIFO), [`disk`] (seek + transfer), [`cache`] (LRU by bytes), [`web`] (prefork web
//!   server, Netscape-3 browsers, a CPU hog), [`cluster`] (back ends behind a front end),
//!   [`trace`] (seeded synthetic web traces).
//! - scenarios: [`fig1`] (seed 001 Fig. 1), [`pos`] (seed 001 experiments 1-4), [`lard`]
//!   (seed 004's cluster; its P-HTTP part [`phttp`] over [`pconn`]'s connections, mechanisms
//!   and front-end costs; [`paper`]: the paper's numbers beside ours), [`bench`](mod@bench) (events per second); [`options`]: what the command line
//!   sets for `pos` and `lard`, checked and turned into their configurations.
//!
//! Determinism: all randomness comes from ChaCha generators seeded from the scenario's seed;
//! maps whose iteration could matter use fixed hashers ([`DetMap`]); the same seed gives
//! byte-identical JSON.

#![warn(missing_docs)]

pub mod bench;
pub mod cache;
pub mod cluster;
pub mod cpu;
pub mod disk;
pub mod engine;
pub mod fig1;
pub mod lard;
pub mod link;
pub mod options;
pub mod paper;
pub mod pconn;
pub mod phttp;
pub mod pos;
pub mod stats;
pub mod trace;
pub mod web;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// A `HashMap` with a fixed hasher, no per-process random state: the policy crate's
/// [`policy::idhash::IdMap`].
pub type DetMap<K, V> = policy::idhash::IdMap<K, V>;

/// The random generator of a scenario: ChaCha8 from `seed`, on an independent `stream` per use
/// (trial, trace...), so adding a use never shifts another's numbers.
pub fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// What can go wrong in a scenario (bad parameters, a run that cannot finish).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A parameter out of its range (the user's mistake).
    #[error("invalid parameter `{name}`: {msg}")]
    Param {
        /// The parameter, as its flag is spelled (`link-rate`).
        name: &'static str,
        /// What is wrong with its value.
        msg: String,
    },
    /// A policy refused its configuration (the user's mistake).
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    /// The run did not reach its end (a model bug).
    #[error("simulation did not finish: {0}")]
    Stuck(String),
}

/// Shorthand for a parameter error.
pub(crate) fn param(name: &'static str, msg: impl Into<String>) -> SimError {
    SimError::Param {
        name,
        msg: msg.into(),
    }
}
