//! `lab`: experiments end to end on the real server, beside real peers, and the benchmarks.
//!
//! Every lab and benchmark is an [`harness::Experiment`] run by one
//! [`harness::run_experiment`], which owns what they share: signals, the results directory,
//! pinning, the testbed, peers that are not installed, progress, `summary.json`, `raw.csv` and
//! `report.html`. Adding a lab is one folder implementing `Experiment`.
//!
//! The pieces, leaves first:
//! - [`error`], [`util`] (stamps, medians, scales, flag values), [`signals`], [`progress`];
//! - [`process`]: children in their own process groups, pinned, admitted into cgroups and
//!   network namespaces before they run, killed on drop;
//! - [`testbed`]: the machine split in two (server side pinned to one CPU inside one cgroup
//!   with a CPU quota; load generator on the other CPU), the emulated network (two network
//!   namespaces joined by a rate-limited veth as root, client-side throttling otherwise), and
//!   cleanup of everything on drop, error and Ctrl-C;
//! - [`site`]: the seeded test site (HTML + images, unique URLs per browser);
//! - [`peers`]: nginx and Apache httpd (prefork) configured for the same site;
//! - [`wrk`]: wrk as a closed-loop load, and its report;
//! - [`results`] and [`report`]: statistics, raw CSV, JSON, HTML report with SVG;
//! - [`sampler`] and [`runner`]: one run of one server variant under `triage load`, with PL/LRQ
//!   sampling; [`cgi`]: what the CGI labs share (scripts, servers, clients, CPU accounting);
//! - [`harness`]: the [`harness::Experiment`] trait and [`harness::run_experiment`].
//!
//! The labs: [`pos`] (seed 001), [`containers`] (seed 003), [`reservations`] (seed 000) and
//! [`events`] (seed 002, with the operator's [`capacity`] tool), [`cluster`] (seed 004);
//! the benchmarks: [`bench::static_files`] and [`bench::load`]. The kernel is reached only
//! through the `os` crate.
#![warn(missing_docs)]

pub mod bench;
pub mod build_info;
pub mod capacity;
pub mod cgi;
pub mod cluster;
pub mod containers;
pub mod daemon_stats;
pub mod error;
pub mod events;
pub mod harness;
pub mod marking;
pub mod peers;
pub mod pos;
pub mod process;
pub mod progress;
pub mod report;
pub mod reservations;
pub mod results;
pub mod runner;
pub mod sampler;
pub mod signals;
pub mod site;
pub mod stats;
pub mod testbed;
pub mod util;
pub mod wrk;

pub use error::{LabError, Result};
