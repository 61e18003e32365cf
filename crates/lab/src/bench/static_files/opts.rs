//! The flags of `triage bench static`.

use std::path::PathBuf;
use std::time::Duration;

use super::cores::{parse_cores, CoreList};
use crate::util::parse_bytes;

/// Arguments of `triage bench static`.
#[derive(clap::Args, Debug, Clone)]
pub struct StaticOpts {
    /// Time per measurement (whole seconds: wrk's unit).
    #[arg(long, value_parser = units::parse_positive_duration, default_value = "5s")]
    pub duration: Duration,
    /// Rounds (targets alternate order every round; medians are reported).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// wrk connections (with `--cores`: per server core).
    #[arg(long, default_value_t = 50)]
    pub connections: usize,
    /// Measure at these core counts (`1,2,4,8`): per N, every server pinned to the first N
    /// CPUs with N workers/slots (nginx: N workers with `reuseport`), wrk on the CPUs left
    /// after the largest N, one thread each; nginx, triage fifo and triage pos alternate, and
    /// the idle-connection measurement and the gate-off target are left out. Replaces
    /// `--server-cpu` / `--client-cpu`.
    #[arg(long, value_parser = parse_cores)]
    pub cores: Option<CoreList>,
    /// Idle keep-alive connections for the idle-cost measurement (0 skips it).
    #[arg(long, default_value_t = 5000)]
    pub idle: usize,
    /// Size of the file served (bytes, or with a unit: 80KB).
    #[arg(long, default_value = "1024", value_parser = parse_bytes)]
    pub size: usize,
    /// Serve a BMP image of `--size` bytes compressed on the fly at this gzip level (1-9) by
    /// both servers, requested with `Accept-Encoding: gzip`.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub gzip: Option<u32>,
    /// CPU the servers are pinned to.
    #[arg(long, default_value_t = 0)]
    pub server_cpu: usize,
    /// CPU wrk (and the bench itself) is pinned to.
    #[arg(long, default_value_t = 1)]
    pub client_cpu: usize,
    /// Results directory (a subdirectory named by the UTC time of the run is created).
    #[arg(long, default_value = "results/bench-static")]
    pub out: PathBuf,
    /// nginx binary.
    #[arg(long, default_value = "nginx")]
    pub nginx: String,
    /// wrk binary.
    #[arg(long, default_value = "wrk")]
    pub wrk: String,
    /// The `triage` binary measured.
    #[arg(skip)]
    pub triage_bin: PathBuf,
}
