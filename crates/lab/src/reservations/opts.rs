//! Everything `triage lab reservations` can be told ([`ReservationsOpts`], its flags) and the
//! defaults that are not a flag's own.

use std::path::PathBuf;
use std::time::Duration;

use crate::testbed::NetMode;
use crate::util::{
    clap_defaults, parse_count_or_none, parse_duration_or_none, parse_quota_or_none, OrNone, Scale,
};

/// What `triage lab reservations` was asked for.
#[derive(clap::Args, Debug, Clone)]
pub struct ReservationsOpts {
    /// A run of about three minutes (0, 10, 40 competitors; two repetitions; 5 s windows).
    #[arg(long)]
    pub quick: bool,
    /// Scale of the time parameters (tiny: 0 and 4 competitors, the 50% reservation and
    /// Apache).
    #[arg(long = "seconds-scale", value_enum, default_value = "normal")]
    pub scale: Scale,
    /// Clients of the competing site per point (must include 0), e.g. 0,1,2,5,10,20,40.
    #[arg(long, value_delimiter = ',')]
    pub counts: Option<Vec<usize>>,
    /// Clients of the site of interest.
    #[arg(long, default_value_t = 10)]
    pub clients: usize,
    /// Measurement window per point [default: 10s; --quick 5s; tiny 2s].
    #[arg(long, value_parser = units::parse_duration)]
    pub window: Option<Duration>,
    /// Repetitions, interleaved [default: 3; --quick 2; tiny 1].
    #[arg(long)]
    pub reps: Option<usize>,
    /// CPU quota of the server side: a fraction or percent of one CPU, or `none`.
    #[arg(long, value_parser = parse_quota_or_none, default_value = "50%")]
    pub quota: OrNone<f64>,
    /// CFS period of the quota (short periods skew cgroup weights under throttling).
    #[arg(long, value_parser = units::parse_positive_duration, default_value = "100ms")]
    pub period: Duration,
    /// Most CGI scripts of each triage site running at once (`cgi.max_running`), or `none`.
    #[arg(long, value_parser = parse_count_or_none, default_value = "4")]
    pub max_running: OrNone<usize>,
    /// Do not measure Apache httpd.
    #[arg(long = "no-peers", action = clap::ArgAction::SetFalse)]
    pub peers: bool,
    /// How to emulate the network.
    #[arg(long, value_enum, default_value = "auto")]
    pub net: NetMode,
    /// Do not run the reference twin: a second triage serving the site of interest alone
    /// (its own cgroup on the same CPU, half the quota), loaded in the same windows, whose
    /// throughput the kept figures divide by to take out the machine's speed drift.
    #[arg(long = "no-twin", action = clap::ArgAction::SetFalse)]
    pub twin: bool,
    /// Results directory [default: results/reservations/YYYYMMDDTHHMMSSZ, the UTC time].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seed of the random order of the competitor counts within each repetition (a point
    /// alone is measured beside every point with competitors).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Scheduler slice of the triage sites' scripts (`cgi.slice`, 0.1ms..100ms), or `none`
    /// for the kernel's default.
    #[arg(long, value_parser = parse_slice_or_none, default_value = "none")]
    pub cgi_slice: OrNone<Duration>,
    /// The `triage` binary the lab runs as the server.
    #[arg(skip)]
    pub triage_bin: PathBuf,
    /// The command line, for the report.
    #[arg(skip)]
    pub command: String,
}

impl ReservationsOpts {
    /// Defaults for `triage_bin`.
    pub fn new(triage_bin: PathBuf) -> Self {
        ReservationsOpts {
            triage_bin,
            command: "triage lab reservations".into(),
            ..clap_defaults()
        }
    }
}

/// A scheduler slice of 0.1 ms to 100 ms, or `none`.
pub fn parse_slice_or_none(s: &str) -> Result<OrNone<Duration>, String> {
    let d = parse_duration_or_none(s)?;
    if let OrNone(Some(d)) = d {
        if !(Duration::from_micros(100)..=Duration::from_millis(100)).contains(&d) {
            return Err(format!("{s}: give 0.1ms to 100ms, or none"));
        }
    }
    Ok(d)
}

/// Default CPU quota of the server side.
pub const DEFAULT_QUOTA: f64 = 0.5;

/// Default CFS period of that quota: long, because frequent throttling skews the cgroup
/// weights that make the reservations (docs/cgi.md).
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(100);

/// `cgi.max_running` of each triage site: 4. Without a limit, dozens of scripts interleaved on
/// the one CPU make each request cost more CPU than alone; with 2, the site reserving 99% left
/// its container idle between scripts often enough for the 1% site to take a visible share
/// (docs/cgi.md).
pub const DEFAULT_MAX_RUNNING: Option<usize> = Some(4);

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ReservationsOpts, clap::Error> {
        use clap::{Args, FromArgMatches};
        let cmd = ReservationsOpts::augment_args(clap::Command::new("t").no_binary_name(true));
        cmd.clone().debug_assert();
        ReservationsOpts::from_arg_matches(&cmd.try_get_matches_from(args)?)
    }

    #[test]
    fn flags_parse() {
        let t = parse(&["--quota", "40%", "--max-running", "3"]).unwrap();
        assert_eq!(t.quota, OrNone(Some(0.4)));
        assert_eq!(t.max_running, OrNone(Some(3)));
        let t = parse(&["--quota", "none", "--max-running", "none"]).unwrap();
        assert_eq!(t.quota, OrNone(None));
        assert_eq!(t.max_running, OrNone(None));
        let t = parse(&[]).unwrap();
        assert_eq!(t.quota, OrNone(Some(DEFAULT_QUOTA)));
        assert_eq!(t.max_running, OrNone(DEFAULT_MAX_RUNNING));
        assert_eq!((t.period, t.seed, t.clients), (DEFAULT_PERIOD, 1, 10));
        assert_eq!(t.cgi_slice, OrNone(None));
        assert_eq!(parse(&["--seed", "7"]).unwrap().seed, 7);
        let t = parse(&["--cgi-slice", "30ms"]).unwrap();
        assert_eq!(t.cgi_slice, OrNone(Some(Duration::from_millis(30))));
        assert!(parse(&["--cgi-slice", "200ms"]).is_err());
        assert!(parse(&["--max-running", "0"]).is_err());
        assert!(parse(&["--quota"]).is_err());
        assert!(parse(&["--window", "10"])
            .unwrap_err()
            .to_string()
            .contains("10s"));
    }
}
