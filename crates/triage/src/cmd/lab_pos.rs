//! `triage lab pos`: seed 001's experiments end to end on the real server, beside nginx and
//! Apache httpd (prefork). The work is in `lab::pos`; see docs/lab.md.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use lab::pos::{PosOpts, Scale};
use lab::LabError;

use super::lab::{dur, quota, Net};
use super::UsageError;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SecondsScale {
    /// Minutes per experiment (under two with --quick).
    Normal,
    /// Seconds: 3 browsers, 2 pages each, 1 repetition (CI).
    Tiny,
}

/// Arguments of `triage lab pos`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Experiments (seed 001): 1 = synchronized bursts beside a CPU hog, SLP \
fixed; 2 = random arrivals, SLP fixed; 3 = random arrivals, SLP (and RW) predicted; 4 = 3/6/9/12 \
browsers (PL/LRQ ratios, mean t1). Every experiment runs fifo, the pos variants, content, nginx \
and Apache prefork on the same testbed and load. Results: raw.csv, summary.json, report.html."
)]
pub struct Args {
    /// Experiment of seed 001: 1, 2, 3 or 4.
    #[arg(long, default_value_t = 1)]
    exp: u8,
    /// A run of under two minutes (fewer variants, pages and repetitions).
    #[arg(long)]
    quick: bool,
    /// Scale of the time parameters.
    #[arg(long, value_enum, default_value = "normal")]
    seconds_scale: SecondsScale,
    /// Repetitions per variant (interleaved) [default: 5; --quick 2; tiny 1].
    #[arg(long)]
    reps: Option<usize>,
    /// Simultaneous browsers (exp 1-3) [default: 9; tiny 3].
    #[arg(long)]
    browsers: Option<usize>,
    /// Browser counts of exp 4, e.g. 3,6,9,12.
    #[arg(long, value_delimiter = ',')]
    browser_counts: Option<Vec<usize>>,
    /// Time between bursts (exp 1) or length of the random window (exp 2-4).
    #[arg(long, value_parser = dur)]
    interval: Option<Duration>,
    /// Pages per browser per run.
    #[arg(long)]
    pages: Option<usize>,
    /// RW of the fixed-RW pos variants, e.g. 3,6,9 [default: 3,6,9; --quick 3].
    #[arg(long, value_delimiter = ',')]
    rw: Option<Vec<u32>>,
    /// Fixed SLP of exp 1-2 [default: interval/3].
    #[arg(long, value_parser = dur)]
    slp: Option<Duration>,
    /// CPU quota of the whole server side (server + hog): fraction or percent of one CPU.
    #[arg(long, value_parser = quota)]
    quota: Option<f64>,
    /// CFS period of the quota.
    #[arg(long, value_parser = dur, default_value = "10ms")]
    period: Duration,
    /// Link rate in Mbit/s (tbf on the veth, or client-side throttling).
    #[arg(long, default_value_t = 10.0)]
    rate_mbit: f64,
    /// How to emulate the network.
    #[arg(long, value_enum, default_value = "auto")]
    net: Net,
    /// On-the-fly gzip level for every server (text/html and image/bmp).
    #[arg(long, default_value_t = 6)]
    gzip_level: u32,
    /// No on-the-fly compression.
    #[arg(long)]
    no_gzip: bool,
    /// HTML size in bytes.
    #[arg(long, default_value_t = 4096)]
    html_bytes: usize,
    /// Image sizes in bytes [default: 20000,40000,60000,80000].
    #[arg(long, value_delimiter = ',')]
    image_bytes: Option<Vec<usize>>,
    /// Parallel connections per browser (K).
    #[arg(long, default_value_t = 4)]
    parallel: usize,
    /// Offset between browsers in a burst (exp 1), so HTML meets other browsers' images;
    /// 0 = every browser at the same instant [default: 40ms for exp 1]
    #[arg(long, value_parser = dur)]
    stagger: Option<Duration>,
    /// TCP congestion control in the server's network namespace (e.g. bbr) [default: the
    /// kernel's]
    #[arg(long, value_name = "NAME")]
    tcp_cc: Option<String>,
    /// Tail order of the POS variants: `episode` (triage's: responses that are not text are
    /// served first come, first served) or `fifo` (the paper's ready-queue order)
    #[arg(long, value_enum, default_value_t = PosTailArg::Episode)]
    pos_tail: PosTailArg,
    /// Seed of the site and the arrivals.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only these variants (comma-separated names, e.g. fifo,pos-rw3,nginx).
    #[arg(long, value_delimiter = ',')]
    variants: Option<Vec<String>>,
    /// Do not measure nginx and Apache.
    #[arg(long)]
    no_peers: bool,
    /// Extra flag for every triage variant (repeatable), e.g. --triage-flag=--starvation-bound=off.
    #[arg(long = "triage-flag", allow_hyphen_values = true)]
    triage_flags: Vec<String>,
    /// Extra flag for every load run (repeatable).
    #[arg(long = "load-flag", allow_hyphen_values = true)]
    load_flags: Vec<String>,
    /// Results directory [default: results/pos-expN/<UTC timestamp>].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PosTailArg {
    Episode,
    Fifo,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let bin = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot locate the triage binary: {e}"))?;
    if !(1..=4).contains(&a.exp) {
        return Err(UsageError(format!("--exp {} must be 1, 2, 3 or 4", a.exp)).into());
    }
    if a.gzip_level > 9 {
        return Err(UsageError(format!("--gzip-level {} is not in 0..=9", a.gzip_level)).into());
    }
    if !(a.rate_mbit > 0.0 && a.rate_mbit.is_finite()) {
        return Err(UsageError(format!("--rate-mbit {} must be positive", a.rate_mbit)).into());
    }
    if a.parallel == 0 {
        return Err(UsageError("--parallel must be at least 1".into()).into());
    }
    let mut o = PosOpts::new(a.exp, bin);
    o.quick = a.quick;
    o.scale = match a.seconds_scale {
        SecondsScale::Normal => Scale::Normal,
        SecondsScale::Tiny => Scale::Tiny,
    };
    o.reps = a.reps;
    o.browsers = a.browsers;
    o.browser_counts = a.browser_counts;
    o.interval = a.interval;
    o.pages = a.pages;
    o.rw = a.rw;
    o.slp = a.slp;
    o.quota = a.quota;
    o.period = a.period;
    o.rate_mbit = a.rate_mbit;
    o.net = a.net.into();
    o.gzip_level = (!a.no_gzip).then_some(a.gzip_level);
    o.html_bytes = a.html_bytes;
    if let Some(i) = a.image_bytes {
        o.image_bytes = i;
    }
    o.parallel = a.parallel;
    o.stagger = a.stagger;
    o.tcp_cc = a.tcp_cc;
    o.pos_tail = match a.pos_tail {
        PosTailArg::Episode => lab::pos::PosTailOpt::Episode,
        PosTailArg::Fifo => lab::pos::PosTailOpt::Fifo,
    };
    o.seed = a.seed;
    o.only = a.variants;
    o.peers = !a.no_peers;
    o.triage_extra = a.triage_flags;
    o.load_extra = a.load_flags;
    o.out = a.out;
    o.command = std::env::args()
        .map(|s| {
            if s.contains([' ', '\'', '"']) {
                format!("'{}'", s.replace('\'', "'\\''"))
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    match lab::pos::run(&o) {
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
        let t = parse(&[
            "--exp",
            "3",
            "--rw",
            "3,6",
            "--browser-counts",
            "3,6,9",
            "--image-bytes",
            "1000,2000",
            "--quota",
            "15%",
            "--triage-flag=--starvation-bound=off",
            "--variants",
            "fifo,nginx",
        ])
        .unwrap();
        assert_eq!(t.rw, Some(vec![3, 6]));
        assert_eq!(t.browser_counts, Some(vec![3, 6, 9]));
        assert_eq!(t.quota, Some(0.15));
        assert_eq!(t.triage_flags, vec!["--starvation-bound=off"]);
        assert_eq!(
            t.variants,
            Some(vec!["fifo".to_string(), "nginx".to_string()])
        );
        assert!(parse(&["--quota", "0"]).is_err());
        assert!(parse(&["--rw", "3,x"]).is_err());
    }
}
