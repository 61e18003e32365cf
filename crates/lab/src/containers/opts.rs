//! Everything `triage lab containers` can be told ([`ContainersOpts`], its flags) and the
//! defaults that are not a flag's own.

use std::path::PathBuf;
use std::time::Duration;

use crate::testbed::NetMode;
use crate::util::{clap_defaults, parse_quota, parse_quota_or_none, OrNone, Scale};

/// What `triage lab containers` was asked for.
#[derive(clap::Args, Debug, Clone)]
pub struct ContainersOpts {
    /// A run of under two minutes (CGI counts 0,1,3,5; two repetitions; 2 s windows).
    #[arg(long)]
    pub quick: bool,
    /// Scale of the time parameters (tiny: 0-2 CGI, the 30% cap and Apache, 1 s windows).
    #[arg(long = "seconds-scale", value_enum, default_value = "normal")]
    pub scale: Scale,
    /// Concurrent CGI request counts, e.g. 0,1,2,3,4,5 [default: 0..5; --quick 0,1,3,5; tiny
    /// 0,1,2].
    #[arg(long, value_delimiter = ',')]
    pub counts: Option<Vec<usize>>,
    /// Caps of the CGI container: fractions or percents of one CPU, e.g. 30%,10%.
    #[arg(long, value_delimiter = ',', value_parser = parse_quota,
          default_values = ["30%", "10%"])]
    pub caps: Vec<f64>,
    /// Static-throughput window per point, whole seconds [default: 2s; tiny 1s].
    #[arg(long, value_parser = units::parse_duration)]
    pub window: Option<Duration>,
    /// Repetitions, interleaved [default: 7; --quick 2; tiny 1].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Connections of the static load.
    #[arg(long, default_value_t = 8)]
    pub conns: usize,
    /// CPU time each CGI request burns.
    #[arg(long = "cgi-cpu", value_parser = units::parse_positive_duration, default_value = "2s")]
    pub cgi_cpu: Duration,
    /// CPU quota of the whole server side (server + CGI), emulating a slower CPU: a fraction
    /// or percent of one CPU, or `none`. Caps and shares are fractions of it.
    #[arg(long, value_parser = parse_quota_or_none, default_value = "20%")]
    pub quota: OrNone<f64>,
    /// CFS period of the quota.
    #[arg(long, value_parser = units::parse_positive_duration, default_value = "10ms")]
    pub period: Duration,
    /// Do not measure Apache httpd.
    #[arg(long = "no-peers", action = clap::ArgAction::SetFalse)]
    pub peers: bool,
    /// Also run triage without per-request containers (default: in full runs).
    #[arg(long)]
    pub timeshare: bool,
    /// Do not measure the one-budget variant (`triage-budgetNN`: the first cap covering the
    /// site's static work and its CGI together).
    #[arg(long = "no-budget", action = clap::ArgAction::SetFalse)]
    pub budget: bool,
    /// Do not run the reference twin beside the capped variants: a second triage with the same
    /// configuration in its own cgroup (same quota, same CPU), loaded in the same windows, whose
    /// throughput the spread goal divides by to take out the machine's speed drift.
    #[arg(long = "no-twin", action = clap::ArgAction::SetFalse)]
    pub twin: bool,
    /// Measure only these variants, e.g. triage-cap30 (names as in the report; with
    /// --timeshare, --no-peers and --caps deciding which exist).
    #[arg(long, value_delimiter = ',')]
    pub only: Option<Vec<String>>,
    /// How to emulate the network.
    #[arg(long, value_enum, default_value = "auto")]
    pub net: NetMode,
    /// Results directory [default: results/containers/YYYYMMDDTHHMMSSZ, the UTC time].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The `triage` binary the lab runs as the server.
    #[arg(skip)]
    pub triage_bin: PathBuf,
    /// The command line, for the report.
    #[arg(skip)]
    pub command: String,
}

impl ContainersOpts {
    /// Defaults for `triage_bin`.
    pub fn new(triage_bin: PathBuf) -> Self {
        ContainersOpts {
            triage_bin,
            command: "triage lab containers".into(),
            ..clap_defaults()
        }
    }
}

/// Default CPU quota of the server side: one fifth of a CPU. One wrk thread on the other CPU
/// cannot push triage to its limit on a whole CPU, so without a quota the static throughput
/// would be bounded by the client, not by the CPU the CGI takes away; at 20% of a CPU the
/// server side is CPU-bound (as seed 003's server was) and the CGI competes for that CPU
/// (docs/cgi.md).
pub const DEFAULT_QUOTA: f64 = 0.2;

/// Repetitions of a full run (2 s windows): about as long as 3 repetitions of 6 s windows, with
/// more than twice as many blocks for the medians.
pub const DEFAULT_REPS: usize = 7;

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ContainersOpts, clap::Error> {
        use clap::{Args, FromArgMatches};
        let cmd = ContainersOpts::augment_args(clap::Command::new("t").no_binary_name(true));
        cmd.clone().debug_assert();
        ContainersOpts::from_arg_matches(&cmd.try_get_matches_from(args)?)
    }

    #[test]
    fn flags_parse() {
        let t = parse(&["--quota", "25%", "--caps", "30%,0.1", "--cgi-cpu", "1500ms"]).unwrap();
        assert_eq!(t.quota, OrNone(Some(0.25)));
        assert_eq!(t.caps, vec![0.3, 0.1]);
        assert_eq!(t.cgi_cpu, Duration::from_millis(1500));
        let t = parse(&["--quota", "off", "--no-peers"]).unwrap();
        assert_eq!(t.quota, OrNone(None));
        assert!(!t.peers);
        assert!(parse(&["--quota"]).is_err());
        assert!(parse(&["--cgi-cpu", "2"])
            .unwrap_err()
            .to_string()
            .contains("2s"));
        let d = ContainersOpts::new(PathBuf::from("/bin/true"));
        assert_eq!(d.quota, OrNone(Some(DEFAULT_QUOTA)));
        assert_eq!(d.caps, vec![0.3, 0.1]);
        assert_eq!((d.conns, d.cgi_cpu), (8, Duration::from_secs(2)));
        assert_eq!(d.period, Duration::from_millis(10));
        assert!(d.peers && !d.timeshare);
    }
}
