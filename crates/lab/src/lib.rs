//! `lab`: experiments end to end on the real server, beside real peers.
//!
//! The common infrastructure every lab uses:
//! - [`testbed`]: the machine split in two (server side pinned to one CPU inside one cgroup
//!   with a CPU quota; load generator on the other CPU), the emulated network (two network
//!   namespaces joined by a rate-limited veth as root, client-side throttling otherwise), and
//!   cleanup of everything on drop, error and Ctrl-C.
//! - [`process`]: children in their own process groups, pinned, admitted into cgroups before
//!   they run, killed on drop.
//! - [`site`]: the seeded test site (HTML + images, unique URLs per browser).
//! - [`peers`]: nginx and Apache httpd (prefork) configured for the same site.
//! - [`runner`]: one run of one server variant under one load, with PL/LRQ sampling.
//! - [`results`] and [`report`]: statistics, raw CSV, summary JSON, HTML report with SVG.
//! - [`progress`] and [`signals`]: progress lines/bars and SIGINT/SIGTERM handling.
//!
//! The labs themselves: [`pos`] (seed 001), [`containers`] (seed 003) and [`reservations`]
//! (seed 000), the last two sharing [`cgilab`] (CGI scripts, wrk, closed-loop CGI clients).

pub mod cgilab;
pub mod containers;
pub mod error;
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
pub mod testbed;

pub use error::{LabError, Result};
