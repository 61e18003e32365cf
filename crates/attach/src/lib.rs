//! `attach`: the daemon of `triage pos attach`, POS for processes triage did not start.
//!
//! It follows a pid and its descendants, a cgroup, or the processes of an executable
//! ([`os::proctrace`], BPF tracepoints or /proc polling), feeds their run/wait transitions to
//! the same `pos` policy the server uses ([`policy::kpos`]), and applies POS's decision to the
//! kernel per task ([`os::lever`]: nice, nice + slice, or a high-weight cgroup), restoring
//! everything it raised when it stops. Modules, leaves first:
//! - [`hist`]: the latency histogram;
//! - [`metrics`]: the daemon's [`metrics::Snapshot`], as Prometheus text and as a line;
//! - [`admin`]: `/metrics` on an admin address;
//! - [`signals`]: SIGINT/SIGTERM to a stop flag;
//! - [`check`]: whether a nice value can reach the followed tasks' competitors;
//! - [`front`]: the processes every request crosses, raised with the followed ones;
//! - [`rest`]: the lever's direction (raise the marked, or lower the rest);
//! - [`daemon`]: the loop ([`daemon::run`]).
#![warn(missing_docs)]

pub mod admin;
pub mod check;
pub mod daemon;
pub mod front;
pub mod hist;
pub mod metrics;
pub mod rest;
pub mod signals;

pub use daemon::{run, AttachConfig, AttachError, LoggerChoice};
pub use rest::Direction;
