//! The benchmarks, on the same harness as the labs ([`crate::harness`]): each reports ratios
//! against a peer measured in the same run, with the lab's process manager, peers and wrk.
//!
//! - [`static_files`] (`triage bench static`): triage against nginx on one small static file,
//!   the gate's cost, and the cost of idle connections;
//! - [`load`] (`triage bench load`): the load generator itself against wrk, both against nginx.
//!
//! Both run on a loopback testbed: the servers pinned to one CPU (inside the testbed's server
//! cgroup, without a quota), the clients and the lab on the other.

pub mod load;
mod probe;
pub mod static_files;

pub use probe::{check_gzip, find_program};
