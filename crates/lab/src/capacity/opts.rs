//! What `triage capacity` and `triage capacity sample` can be told.

use std::path::PathBuf;
use std::time::Duration;

/// `triage capacity`: predict a server's peak rate from its access log and CPU samples.
#[derive(clap::Args, Debug, Clone)]
pub struct AnalyzeOpts {
    /// The server's access log, Combined (or Common) Log Format (nginx, Apache, lighttpd,
    /// triage serve --access-log, triage front).
    #[arg(long, value_name = "FILE", required = true)]
    pub log: Option<PathBuf>,
    /// CPU samples of that server over the same time (written by `triage capacity sample`).
    #[arg(long, value_name = "FILE", required = true)]
    pub cpu: Option<PathBuf>,
    /// Bucket width, whole seconds with a unit (seed 002 used 15m).
    #[arg(long, value_parser = units::parse_positive_duration, default_value = "15m")]
    pub bucket: Duration,
    /// Bucket by the steps of a rate ladder instead of --bucket: each run of whole seconds
    /// whose request counts stay at one rate, at least this long, is one bucket, and the
    /// seconds between steps are left out (for a load test that steps its rate every few
    /// seconds, so that no bucket mixes two rates). Each step's rate offered is what it
    /// served, grossed up by its queue when it fell behind (the second after it held more than
    /// 2% of its requests beyond its own partial last second, which for a step that starts
    /// inside a second is taken to end as far into one). The ladder is the steps up to the
    /// first whose rate offered does not rise more than 2% above every earlier step's; the
    /// busy range ends at the first ladder step that ran out of CPU or fell behind. A later
    /// step within 2% of a ladder step's rate runs that rate again: no point of the line but a
    /// vote on whether it ran out of CPU (the majority of the rate's runs decides, the first
    /// on a tie); any other later step (a check between two rates) is neither point nor vote.
    #[arg(long, value_name = "MIN", value_parser = units::parse_positive_duration, conflicts_with = "bucket")]
    pub steps: Option<Duration>,
    /// Also fit the busy range, the buckets at or above this many requests/s (seed 002's
    /// Table 5 cut 20: night-time housekeeping at low rates bends the idle line; on a fast
    /// server waking it from idle does), less the saturated ones; the prediction then comes
    /// from that fit.
    #[arg(long = "low-rate-cut", value_name = "REQ_PER_S")]
    pub low_rate_cut: Option<f64>,
    /// Buckets with less idle CPU than this (%) ran out of CPU: the busy-range fit leaves them
    /// out (their rate is what the server could do, not a point on the idle line).
    #[arg(long = "saturated-idle", value_name = "PERCENT", default_value_t = super::analyze::SATURATED_IDLE_PCT)]
    pub saturated_idle_pct: f64,
    /// Warn when the idle line's |r| is below this.
    #[arg(long = "min-r", default_value_t = super::analyze::DEFAULT_MIN_R)]
    pub min_r: f64,
    /// Print the analysis as JSON (buckets, fits, prediction, warnings).
    #[arg(long)]
    pub json: bool,
}

/// `triage capacity sample`: record CPU samples for `triage capacity --cpu`.
#[derive(clap::Args, Debug, Clone)]
pub struct SampleOpts {
    /// The samples file to write (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Sample one cgroup: its directory (v2), or its directory under the cpuacct hierarchy
    /// (v1, e.g. /sys/fs/cgroup/cpuacct/system.slice/nginx.service). Default: the whole
    /// machine from /proc/stat.
    #[arg(long, value_name = "PATH", group = "source")]
    pub cgroup: Option<PathBuf>,
    /// Sample one process (all its threads).
    #[arg(long, value_name = "PID", group = "source")]
    pub pid: Option<i32>,
    /// Sample a triage server's /metrics (http://HOST:PORT/metrics).
    #[arg(long, value_name = "URL", group = "source")]
    pub metrics: Option<String>,
    /// CPUs the cgroup or process may use, for its idle time [default: every online CPU].
    #[arg(long)]
    pub cpus: Option<f64>,
    /// Time between samples (samples fall on whole multiples of it, in line with the log's
    /// whole seconds).
    #[arg(long, value_parser = units::parse_positive_duration, default_value = "1s")]
    pub interval: Duration,
    /// How long to record (Ctrl-C stops earlier, keeping what was written).
    #[arg(long, value_parser = units::parse_positive_duration, default_value = "10m")]
    pub duration: Duration,
}
