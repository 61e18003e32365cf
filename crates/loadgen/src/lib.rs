//! `loadgen`: a browser-emulating load generator that measures what users feel.
//!
//! Each emulated browser requests a page, parses its HTML with a real parser to find the
//! embedded objects (`img src`, `link rel=stylesheet href`, `script src`) and fetches them over
//! up to K parallel connections (keep-alive or one connection per request), recording per page
//! t1 (first and last byte of the HTML), t2 (all objects done), bytes, status and errors, as in
//! seed 001 §4. Arrivals are `burst`, `random` (uniform or Poisson), `closed` (think time),
//! `rate` (open loop, coordinated omission corrected) or `trace`. Links can be slowed per
//! connection (token-bucket reads with a small SO_RCVBUF).
//!
//! Library use (the labs):
//!
//! ```no_run
//! # async fn f() -> Result<(), loadgen::LoadError> {
//! let mut cfg = loadgen::LoadConfig::new("http://10.0.0.1:8080/b{browser}/index.html");
//! cfg.browsers = 9;
//! cfg.arrival = loadgen::Arrival::Burst { interval: std::time::Duration::from_secs(30) };
//! cfg.max_pages = Some(45);
//! cfg.duration = None;
//! let report = loadgen::run(cfg).await?;
//! report.write_dir(std::path::Path::new("results/x"))?;
//! println!("{}", report.table());
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod browser;
pub mod clf;
pub mod client;
pub mod config;
pub mod html;
pub mod opts;
pub mod pages;
pub mod report;
mod run;
pub mod throttle;
pub mod trace;
pub mod url_pattern;

pub use client::ErrorKind;
pub use config::{AcceptEncoding, Arrival, ConnMode, LoadConfig, RandomDist, ThinkDist};
pub use opts::LoadOpts;
pub use pages::PageRow;
pub use report::{PageRecord, Report, Stats, Summary};
pub use run::{run, run_blocking};
pub use trace::{parse_trace, TraceEntry};
pub use url_pattern::expand_url;

/// Why a run could not be done (network failures are not errors: they are counted).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The configuration is invalid; the message names the field and value.
    #[error("{0}")]
    Config(String),
    /// The runtime for [`run_blocking`] could not be built.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// Writing results failed.
    #[error("cannot write {0}: {1}")]
    Write(String, #[source] std::io::Error),
}
