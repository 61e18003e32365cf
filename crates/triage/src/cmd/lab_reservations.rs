//! `triage lab reservations`: seed 000's CPU-reservation experiment (Fig. 4/5) on the real
//! server beside Apache httpd. The work is in `lab::reservations`; see docs/cgi.md.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use lab::reservations::{ReservationsOpts, Scale};
use lab::LabError;

use super::lab::{count_or_none, dur, quota_or_none, Net, OrNone};
use super::UsageError;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SecondsScale {
    /// Minutes (under two with --quick).
    Normal,
    /// Seconds: 0 and 4 competitors, the 50% reservation and Apache (CI).
    Tiny,
}

/// Arguments of `triage lab reservations`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Seed 000: two sites whose CGI computes half a million random numbers \
and returns 1 KB; the site of interest has 10 clients, the competing site 0..40. Scenarios: the \
site of interest reserves 50% (competitor 49%), 99%, both sites in one container; Apache httpd \
as time-sharing. Results: raw.csv, summary.json (reserved_kept_pct, apache_kept_pct), \
report.html."
)]
pub struct Args {
    /// A run of under two minutes (0, 10, 40 competitors; one repetition; 4 s windows).
    #[arg(long)]
    quick: bool,
    /// Scale of the time parameters.
    #[arg(long, value_enum, default_value = "normal")]
    seconds_scale: SecondsScale,
    /// Clients of the competing site per point (must include 0), e.g. 0,1,2,5,10,20,40.
    #[arg(long, value_delimiter = ',')]
    counts: Option<Vec<usize>>,
    /// Clients of the site of interest.
    #[arg(long, default_value_t = 10)]
    clients: usize,
    /// Measurement window per point [default: 10s; --quick 4s; tiny 2s].
    #[arg(long, value_parser = dur)]
    window: Option<Duration>,
    /// Repetitions, interleaved [default: 3; --quick and tiny 1].
    #[arg(long)]
    reps: Option<usize>,
    /// CPU quota of the server side: a fraction or percent of one CPU, or `none` [default: 50%].
    #[arg(long, value_parser = quota_or_none)]
    quota: Option<OrNone<f64>>,
    /// CFS period of the quota (short periods skew cgroup weights under throttling).
    #[arg(long, value_parser = dur, default_value = "100ms")]
    period: Duration,
    /// Most CGI scripts of each triage site running at once (`cgi.max_running`), or `none`
    /// [default: 4].
    #[arg(long, value_parser = count_or_none)]
    max_running: Option<OrNone<usize>>,
    /// Do not measure Apache httpd.
    #[arg(long)]
    no_peers: bool,
    /// How to emulate the network.
    #[arg(long, value_enum, default_value = "auto")]
    net: Net,
    /// Results directory [default: results/reservations/<UTC timestamp>].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Seed of the random order of the competitor counts within each repetition (a point
    /// alone is measured beside every point with competitors).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Scheduler slice of the triage sites' scripts (`cgi.slice`, 0.1ms..100ms), or `none`
    /// for the kernel's default [default: none].
    #[arg(long, value_parser = slice_or_none)]
    cgi_slice: Option<OrNone<Duration>>,
}

fn slice_or_none(s: &str) -> Result<OrNone<Duration>, String> {
    if s == "none" {
        return Ok(OrNone(None));
    }
    let d = dur(s)?;
    if !(Duration::from_micros(100)..=Duration::from_millis(100)).contains(&d) {
        return Err(format!("{s}: give 0.1ms to 100ms, or none"));
    }
    Ok(OrNone(Some(d)))
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let bin = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot locate the triage binary: {e}"))?;
    let mut o = ReservationsOpts::new(bin);
    o.quick = a.quick;
    o.scale = match a.seconds_scale {
        SecondsScale::Normal => Scale::Normal,
        SecondsScale::Tiny => Scale::Tiny,
    };
    o.counts = a.counts;
    o.clients = a.clients;
    o.window = a.window;
    o.reps = a.reps;
    if let Some(OrNone(q)) = a.quota {
        o.quota = q;
    }
    o.period = a.period;
    if let Some(OrNone(m)) = a.max_running {
        o.max_running = m;
    }
    o.peers = !a.no_peers;
    o.net = a.net.into();
    o.out = a.out;
    o.seed = a.seed;
    if let Some(OrNone(d)) = a.cgi_slice {
        o.cgi_slice = d;
    }
    o.command = super::lab_containers::command_line();
    match lab::reservations::run(&o) {
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
        let t = parse(&["--quota", "40%", "--max-running", "3"]).unwrap();
        assert_eq!(t.quota, Some(OrNone(Some(0.4))));
        assert_eq!(t.max_running, Some(OrNone(Some(3))));
        let t = parse(&["--quota", "none", "--max-running", "none"]).unwrap();
        assert_eq!(t.quota, Some(OrNone(None)));
        assert_eq!(t.max_running, Some(OrNone(None)));
        let t = parse(&[]).unwrap();
        assert_eq!((t.quota, t.max_running, t.seed), (None, None, 1));
        assert_eq!(parse(&["--seed", "7"]).unwrap().seed, 7);
        let t = parse(&["--cgi-slice", "30ms"]).unwrap();
        assert_eq!(t.cgi_slice, Some(OrNone(Some(Duration::from_millis(30)))));
        assert_eq!(
            parse(&["--cgi-slice", "none"]).unwrap().cgi_slice,
            Some(OrNone(None))
        );
        assert!(parse(&["--cgi-slice", "200ms"]).is_err());
        assert!(parse(&["--max-running", "0"]).is_err());
        assert!(parse(&["--quota"]).is_err());
    }
}
