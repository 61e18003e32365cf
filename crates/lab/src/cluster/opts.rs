//! Everything `triage lab cluster` can be told ([`ClusterOpts`], its flags).

use std::path::PathBuf;
use std::time::Duration;

use crate::testbed::NetMode;
use crate::util::clap_defaults;

/// What `triage lab cluster` was asked for.
#[derive(clap::Args, Debug, Clone)]
pub struct ClusterOpts {
    /// A run of about five minutes: 1, 2 and 4 back ends, two repetitions of the headline
    /// points, 3 s windows.
    #[arg(long)]
    pub quick: bool,
    /// Back-end counts of the scaling curve, e.g. 1,2,4,8 [default: 1,2,4,8; --quick 1,2,4].
    /// The largest is where every variant is measured.
    #[arg(long, value_delimiter = ',')]
    pub nodes: Option<Vec<usize>>,
    /// Zipf exponent of the synthetic trace's popularity (0.6-1.0; SURGE: 1.0).
    #[arg(long, default_value_t = 0.8)]
    pub zipf: f64,
    /// Seed of the synthetic trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Total size of the synthetic trace's files, e.g. 48MiB [default: 64MiB; --quick 40MiB].
    #[arg(long = "working-set", value_parser = units::parse_size)]
    pub working_set: Option<u64>,
    /// Largest file of the synthetic trace (its Pareto tail is cut there).
    #[arg(long = "max-file", value_parser = units::parse_size, default_value = "256KiB")]
    pub max_file: u64,
    /// Replay this access log (Combined Log Format, any server's) instead of the synthetic
    /// trace: its successful GETs, in order, with the sizes it logged.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Content cache of one back end when the working set exceeds it [default: the working set
    /// over twice the largest back-end count, at most an eighth of it, at least 1 MiB: the
    /// caches together hold half the working set (8 back ends: 1/16 each; --quick's 4: 1/8)].
    #[arg(long, value_parser = units::parse_size)]
    pub cache: Option<u64>,
    /// Multiplies every time of the back ends' emulated disk (the LARD paper's model; 1 = as
    /// the paper's disk; the default, four times faster, fills the caches within the warm-up
    /// and keeps a back end that misses disk-bound).
    #[arg(long = "disk-scale", default_value_t = 0.25)]
    pub disk_scale: f64,
    /// Client connections (closed loop) [default: LARD's admission limit for the back ends,
    /// `(n-1)*65+25-1`, the simulator's load].
    #[arg(long)]
    pub conns: Option<usize>,
    /// Measuring window per point [default: 6s; --quick 3s].
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub window: Option<Duration>,
    /// Warm-up per point before the window (fills the back ends' caches) [default: 4s; --quick
    /// 2s].
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub warmup: Option<Duration>,
    /// Repetitions of the headline points (every variant at the largest back-end count)
    /// [default: 3; --quick 2].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Do not measure HAProxy and nginx.
    #[arg(long = "no-peers", action = clap::ArgAction::SetFalse)]
    pub peers: bool,
    /// Measure only these variants, e.g. wrr,lard,haproxy-uri (names as in the report).
    #[arg(long, value_delimiter = ',')]
    pub only: Option<Vec<String>>,
    /// Largest allowed difference between the lab's cache hit ratio and the simulator's on the
    /// same trace (absolute, 0..1).
    #[arg(long = "hit-tolerance", default_value_t = 0.12)]
    pub hit_tolerance: f64,
    /// Largest allowed difference between the lab's load balance (max/mean requests per back
    /// end) and the simulator's.
    #[arg(long = "balance-tolerance", default_value_t = 0.35)]
    pub balance_tolerance: f64,
    /// How to emulate the network (namespaces with a fast link, or loopback).
    #[arg(long, value_enum, default_value = "auto")]
    pub net: NetMode,
    /// The engine `triage front` relays with (`pingora` or `relay`) [default: the front
    /// end's default].
    #[arg(long = "front-engine", value_name = "ENGINE")]
    pub front_engine: Option<String>,
    /// Results directory [default: results/cluster/YYYYMMDDTHHMMSSZ, the UTC time].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The `triage` binary the lab runs as back ends and front end.
    #[arg(skip)]
    pub triage_bin: PathBuf,
    /// The command line, for the report.
    #[arg(skip)]
    pub command: String,
}

impl ClusterOpts {
    /// Defaults for `triage_bin`.
    pub fn new(triage_bin: PathBuf) -> Self {
        ClusterOpts {
            triage_bin,
            command: "triage lab cluster".into(),
            ..clap_defaults()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ClusterOpts, clap::Error> {
        use clap::{Args, FromArgMatches};
        let cmd = ClusterOpts::augment_args(clap::Command::new("t").no_binary_name(true));
        cmd.clone().debug_assert();
        ClusterOpts::from_arg_matches(&cmd.try_get_matches_from(args)?)
    }

    #[test]
    fn flags_parse() {
        let t = parse(&["--nodes", "1,3", "--cache", "2MiB", "--window", "1500ms"]).unwrap();
        assert_eq!(t.nodes, Some(vec![1, 3]));
        assert_eq!(t.cache, Some(2 << 20));
        assert_eq!(t.window, Some(Duration::from_millis(1500)));
        assert!(parse(&["--cache", "2k"]).is_err());
        assert!(parse(&["--window", "3"]).is_err());
        let d = ClusterOpts::new(PathBuf::from("/bin/true"));
        assert_eq!((d.zipf, d.seed, d.max_file), (0.8, 1, 256 << 10));
        assert!(d.peers && !d.quick && d.log.is_none());
    }
}
