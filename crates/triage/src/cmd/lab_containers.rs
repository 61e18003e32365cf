//! `triage lab containers`: seed 003's CGI experiment (Fig. 12/13) on the real server beside
//! Apache httpd (prefork + mod_cgi). The work is in `lab::containers`; see docs/cgi.md.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use lab::containers::{ContainersOpts, Scale};
use lab::LabError;

use super::lab::{dur, quota, quota_or_none, Net, OrNone};
use super::UsageError;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SecondsScale {
    /// Minutes (under two with --quick).
    Normal,
    /// Seconds: 0-2 CGI, the 30% cap and Apache, 1 s windows (CI).
    Tiny,
}

/// Arguments of `triage lab containers`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Seed 003: static 1 KB throughput while 0..5 concurrent CGI requests \
each burn about 2 s of CPU; triage's CGI container unlimited, capped at 30% and at 10%; Apache \
httpd prefork + mod_cgi as the unmodified system. The server side runs on CPU 0, the load (wrk) \
on CPU 1. Results: raw.csv, summary.json (cap_error_pp, static_spread_pct_cap30), report.html."
)]
pub struct Args {
    /// A run of under two minutes (CGI counts 0,1,3,5; two repetitions; 2 s windows).
    #[arg(long)]
    quick: bool,
    /// Scale of the time parameters.
    #[arg(long, value_enum, default_value = "normal")]
    seconds_scale: SecondsScale,
    /// Concurrent CGI request counts, e.g. 0,1,2,3,4,5.
    #[arg(long, value_delimiter = ',')]
    counts: Option<Vec<usize>>,
    /// Caps of the CGI container: fractions or percents of one CPU, e.g. 30%,10%.
    #[arg(long, value_delimiter = ',', value_parser = quota)]
    caps: Option<Vec<f64>>,
    /// Static-throughput window per point, whole seconds [default: 2s; tiny 1s].
    #[arg(long, value_parser = dur)]
    window: Option<Duration>,
    /// Repetitions, interleaved [default: 7; --quick 2; tiny 1].
    #[arg(long)]
    reps: Option<usize>,
    /// Connections of the static load.
    #[arg(long, default_value_t = 8)]
    conns: usize,
    /// CPU seconds each CGI request burns.
    #[arg(long, default_value_t = 2.0)]
    cgi_cpu: f64,
    /// CPU quota of the whole server side (server + CGI), emulating a slower CPU: a fraction
    /// or percent of one CPU, or `none` [default: 20%]. Caps and shares are fractions of it.
    #[arg(long, value_parser = quota_or_none)]
    quota: Option<OrNone<f64>>,
    /// CFS period of the quota.
    #[arg(long, value_parser = dur, default_value = "10ms")]
    period: Duration,
    /// Do not measure Apache httpd.
    #[arg(long)]
    no_peers: bool,
    /// Also run triage without per-request containers (default: in full runs).
    #[arg(long)]
    timeshare: bool,
    /// Measure only these variants, e.g. triage-cap30 (names as in the report; with
    /// --timeshare, --no-peers and --caps deciding which exist).
    #[arg(long, value_delimiter = ',')]
    only: Option<Vec<String>>,
    /// How to emulate the network.
    #[arg(long, value_enum, default_value = "auto")]
    net: Net,
    /// Results directory [default: results/containers/<UTC timestamp>].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// The command line as typed, quoted where needed (for the report).
pub fn command_line() -> String {
    std::env::args()
        .map(|s| {
            if s.contains([' ', '\'', '"']) {
                format!("'{}'", s.replace('\'', "'\\''"))
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let bin = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot locate the triage binary: {e}"))?;
    let mut o = ContainersOpts::new(bin);
    o.quick = a.quick;
    o.scale = match a.seconds_scale {
        SecondsScale::Normal => Scale::Normal,
        SecondsScale::Tiny => Scale::Tiny,
    };
    o.counts = a.counts;
    if let Some(c) = a.caps {
        o.caps = c;
    }
    o.window = a.window;
    o.reps = a.reps;
    o.conns = a.conns;
    o.cgi_cpu_s = a.cgi_cpu;
    if let Some(OrNone(q)) = a.quota {
        o.quota = q;
    }
    o.period = a.period;
    o.peers = !a.no_peers;
    o.timeshare = a.timeshare.then_some(true);
    o.only = a.only;
    o.net = a.net.into();
    o.out = a.out;
    o.command = command_line();
    match lab::containers::run(&o) {
        Ok(_) => Ok(()),
        Err(LabError::Config(m)) => Err(UsageError(m).into()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        let parse = crate::cmd::parse_args::<Args>;
        let t = parse(&["--quota", "25%", "--caps", "30%,0.1"]).unwrap();
        assert_eq!(t.quota, Some(OrNone(Some(0.25))));
        assert_eq!(t.caps, Some(vec![0.3, 0.1]));
        let t = parse(&["--quota", "off"]).unwrap();
        assert_eq!(t.quota, Some(OrNone(None)));
        assert!(parse(&["--quota"]).is_err());
    }
}
