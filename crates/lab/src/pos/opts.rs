//! Everything `triage lab pos` can be told ([`PosOpts`], its flags) and the defaults that are
//! not a flag's own (quotas, stagger, SLP).

use std::path::PathBuf;
use std::time::Duration;

use policy::registry::PosTail;

use crate::testbed::NetMode;
use crate::util::{clap_defaults, parse_bytes, parse_quota, Scale};

/// Everything `triage lab pos` can be told. `None` = the experiment's default.
#[derive(clap::Args, Debug, Clone)]
pub struct PosOpts {
    /// Experiment of seed 001: 1, 2, 3 or 4.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=4))]
    pub exp: u8,
    /// A run of under two minutes (fewer variants, pages and repetitions).
    #[arg(long)]
    pub quick: bool,
    /// Scale of the time parameters (tiny: 3 browsers, 2 pages each, 1 repetition).
    #[arg(long = "seconds-scale", value_enum, default_value = "normal")]
    pub scale: Scale,
    /// Repetitions per variant (interleaved) [default: 5; --quick: exp 1 6, others 2; tiny 1].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Simultaneous browsers (exp 1-3) [default: 9; tiny 3].
    #[arg(long)]
    pub browsers: Option<usize>,
    /// Browser counts of exp 4, e.g. 3,6,9,12.
    #[arg(long, value_delimiter = ',')]
    pub browser_counts: Option<Vec<usize>>,
    /// Time between bursts [default: exp 1 5s, exp 2-4 4s; tiny 1500ms].
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub interval: Option<Duration>,
    /// Pages per browser per run [default: exp 1 3, exp 2-3 4, exp 4 3; --quick and tiny 2].
    #[arg(long)]
    pub pages: Option<usize>,
    /// RW of the fixed-RW pos variants, e.g. 3,6,9 [default: 1,3,6,9 (the paper's 3,6,9 and
    /// RW 1, the changes of one HTML response here); --quick and tiny: 1].
    #[arg(long, value_delimiter = ',')]
    pub rw: Option<Vec<u32>>,
    /// Fixed SLP of exp 1-2 [default: interval/3, at most 1500ms].
    #[arg(long, value_parser = units::parse_duration)]
    pub slp: Option<Duration>,
    /// Exp 3-4 (SLP predicted): the smallest SLP a prediction may set, passed to every `--slp
    /// auto` variant as `triage serve --slp-floor`; 0s = seed 001's rule as written
    /// [default: 10ms].
    #[arg(long, value_parser = units::parse_duration)]
    pub slp_floor: Option<Duration>,
    /// CPU quota of the whole server side (server + hog): fraction or percent of one CPU
    /// [default: exp 1 10%, exp 2-4 5%; without gzip 2.5% and 1.25%].
    #[arg(long, value_parser = parse_quota)]
    pub quota: Option<f64>,
    /// CFS period of the quota, the same for every variant of the run [default: 100ms when
    /// `--variants` names an unmodified server's attach lab (`php-fpm`, or any `apache+...`
    /// or `php-fpm+...` variant): issue 16's budget, "a quota period long enough for the 4 ms
    /// tick", and their goal lines are met only in it (or with a whole CPU, `--quota 100%`);
    /// otherwise 10ms, which at 10% grants 1 ms a period that the kernel charges at its 4 ms
    /// tick; lengthened where the quota needs it, 1 ms of CPU a period at least].
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub period: Option<Duration>,
    /// Link rate (tbf on the veth, or client-side throttling), e.g. 10Mbit or 1.25MB/s; kept
    /// in Mbit/s.
    #[arg(long = "link-rate", value_name = "RATE", value_parser = link_rate_mbit, default_value = "10Mbit")]
    pub rate_mbit: f64,
    /// How to emulate the network.
    #[arg(long, value_enum, default_value = "auto")]
    pub net: NetMode,
    /// On-the-fly gzip level for every server (text/html and image/bmp).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(0..=9))]
    pub gzip_level: u32,
    /// No on-the-fly compression.
    #[arg(long)]
    pub no_gzip: bool,
    /// HTML size (bytes, or with a unit: 4KiB).
    #[arg(long, default_value = "4096", value_parser = parse_bytes)]
    pub html_bytes: usize,
    /// Image sizes (bytes, or with a unit) [default: 20000,40000,60000,80000; --site cgi:
    /// 8000,16000,24000,32000, about what gzip leaves of the static site's, so that the link
    /// is not the bottleneck of uncompressed script output].
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes)]
    pub image_bytes: Option<Vec<usize>>,
    /// Parallel connections per browser (K).
    #[arg(long, default_value_t = 4)]
    pub parallel: usize,
    /// Exp 2-4: every browser clicks once per interval at a random instant of the interval's
    /// first WINDOW, drawn anew for every burst and repetition ("randomly at the same time",
    /// docs/lab.md) [default: 500ms; the whole interval: --window equal to it].
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub window: Option<Duration>,
    /// Offset between browsers in a burst (exp 1), so HTML meets other browsers' images;
    /// 0s = every browser at the same instant [default: 40ms for exp 1].
    #[arg(long, value_parser = units::parse_duration)]
    pub stagger: Option<Duration>,
    /// TCP congestion control in the server's network namespace (e.g. bbr) [default: the
    /// kernel's].
    #[arg(long, value_name = "NAME")]
    pub tcp_cc: Option<String>,
    /// Tail order of the POS variants: `episode` (triage's: responses that are not text are
    /// served first come, first served) or `fifo` (the paper's ready-queue order).
    #[arg(long, default_value = "episode", value_parser = parse_pos_tail)]
    pub pos_tail: PosTail,
    /// What the site is: `static` (seed 001's files) or `cgi` (the HTML and the images are
    /// produced by CPU-bound CGI scripts; triage's variants only: fifo, content, pos with and
    /// without the kernel lever, docs/kpos.md).
    #[arg(long, value_enum, default_value = "static")]
    pub site: SiteKind,
    /// `--site cgi`: CPU time of the page script, its start included.
    #[arg(long, value_parser = units::parse_positive_duration, default_value = "3ms")]
    pub page_cpu: Duration,
    /// `--site cgi`: CPU time of each image script, its start included.
    #[arg(long, value_parser = units::parse_positive_duration, default_value = "10ms")]
    pub image_cpu: Duration,
    /// Seed of the site and the arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Only these variants (comma-separated names, e.g. fifo,pos-rw3,nginx).
    #[arg(long = "variants", value_delimiter = ',')]
    pub only: Option<Vec<String>>,
    /// Do not measure nginx and Apache.
    #[arg(long = "no-peers", action = clap::ArgAction::SetFalse)]
    pub peers: bool,
    /// Extra flag for every triage variant (repeatable), e.g. --triage-flag=--starvation-bound=off.
    #[arg(long = "triage-flag", allow_hyphen_values = true)]
    pub triage_extra: Vec<String>,
    /// Extra flag for every load run (repeatable).
    #[arg(long = "load-flag", allow_hyphen_values = true)]
    pub load_extra: Vec<String>,
    /// Results directory [default: results/pos-expN/YYYYMMDDTHHMMSSZ, the UTC time].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Keep every run's logs under `<out>/runs/<run>/` (needs --out): the load's `html.csv`
    /// (each HTML request's connect, send, first and last byte, with the page's start as Unix
    /// time), the servers' access logs with their times (Apache's in every Apache variant,
    /// nginx's in front of php-fpm, php-fpm's) and the daemon's log and decisions, for
    /// `scripts/t1_parts.py` (where an HTML request's t1 goes).
    #[arg(long)]
    pub keep_runs: bool,
    /// Where the server side's processes live below its quota, for every variant of the run:
    /// `flat` (in the cgroup that holds the quota) or `nested` (in a leaf below it, the quota
    /// on the parent: the weight lever's boost cgroup, the leaf's sibling, shares the budget)
    /// [default: nested when a variant uses the cgroup-weight lever (`+pos-weight`, or
    /// `+pos`'s defaults: Apache's children, php-fpm's nginx), else flat].
    #[arg(long, value_enum)]
    pub server_layout: Option<ServerLayout>,
    /// The `triage` binary the lab runs as server and load generator.
    #[arg(skip)]
    pub triage_bin: PathBuf,
    /// The command line, for the report.
    #[arg(skip)]
    pub command: String,
}

/// What `triage lab pos` serves (`--site`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SiteKind {
    /// Seed 001's page as files.
    Static,
    /// The same page produced by CPU-bound CGI scripts (`super::cgi`).
    Cgi,
}

/// Where the server side's processes live below its CPU quota (`--server-layout`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerLayout {
    /// In the cgroup that holds the quota.
    Flat,
    /// In a leaf cgroup below the one that holds the quota
    /// ([`crate::testbed::TestbedConfig::server_leaf`]).
    Nested,
}

/// Image sizes of the static site (`--image-bytes`'s default).
pub const DEFAULT_IMAGE_BYTES: [usize; 4] = [20_000, 40_000, 60_000, 80_000];

impl PosOpts {
    /// Defaults for experiment `exp` (the caller overrides fields).
    pub fn new(exp: u8, triage_bin: PathBuf) -> PosOpts {
        PosOpts {
            exp,
            triage_bin,
            ..clap_defaults()
        }
    }

    /// The gzip level of every server, `None` with `--no-gzip`.
    pub fn gzip_level(&self) -> Option<u32> {
        (!self.no_gzip).then_some(self.gzip_level)
    }
}

/// `episode` or `fifo`.
pub fn parse_pos_tail(s: &str) -> Result<PosTail, String> {
    s.parse()
}

/// The name of a tail order as `triage serve --pos-tail` takes it.
pub fn tail_name(t: PosTail) -> &'static str {
    match t {
        PosTail::Episode => "episode",
        PosTail::Fifo => "fifo",
    }
}

/// Default server-side CPU quota when the servers compress on the fly: a fraction of one CPU
/// that makes gzip serving of the site CPU-bound against a 10 Mbit/s link (docs/lab.md).
pub const DEFAULT_QUOTA: f64 = 0.10;
/// Default quota when nothing is compressed (`--no-gzip`): sending files costs a few
/// microseconds per KB, so the emulated CPU must be slower.
pub const DEFAULT_QUOTA_PLAIN: f64 = 0.025;
/// Exp 2-4 (no hog) scale both quotas by this: in exp 1 the server shares its quota with the
/// CPU-bound process (CFS gives each about half while both run), so half the quota gives the
/// server of exp 2-4 the CPU exp 1's had, and the bursts of the window reading (docs/lab.md)
/// keep it busy while browsers overlap.
pub const RANDOM_QUOTA_SCALE: f64 = 0.5;

/// Default window of the random clicks of exp 2-4 (`--window`): 9 browsers click within half a
/// second (the simulator's calibrated window, docs/sim.md), so a page's HTML meets the images
/// of the pages before it, as during the paper's "short period of time that the WWW server was
/// accessed by a number of browsers at the same time" (seed 001 §4.3). Measured in exp 3: with
/// 1 s the best POS variant gained +20.2 % and +10.2 % in two runs, intervals about 30-45
/// points wide; with 500 ms +16.0 % [+5.0 %, +26.8 %] (docs/lab.md).
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(500);

/// The default server-side quota of experiment `exp`.
pub fn default_quota(exp: u8, gzip: bool) -> f64 {
    let q = if gzip {
        DEFAULT_QUOTA
    } else {
        DEFAULT_QUOTA_PLAIN
    };
    if exp == 1 {
        q
    } else {
        q * RANDOM_QUOTA_SCALE
    }
}

/// Default CFS period of the server side's quota: 1 ms of CPU per period at the default 10%,
/// the quota granted in small steps (the kernel charges it at the 4 ms tick here, HZ=250, so it
/// is enforced in tick-sized lumps).
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(10);

/// Default CFS period of a run with an unmodified server's attach lab ([`attach_lab_run`]):
/// issue 16 asks for "a quota period long enough for the 4 ms tick (100 ms)", so that the
/// kernel's order among the server's children and the hog (nice) acts within each period's
/// grant instead of a tick-sized lump of it (docs/kpos.md "The quota period").
pub const ATTACH_PERIOD: Duration = Duration::from_millis(100);

/// Whether the variants named in `only` make a run of the unmodified servers' attach labs:
/// `php-fpm` (only those labs run it) or any `apache+...` or `php-fpm+...` variant (`apache`
/// alone is also a peer of the gate's lab, and does not make one).
pub fn attach_lab_run(only: Option<&[String]>) -> bool {
    only.is_some_and(|only| {
        only.iter()
            .any(|n| n == "php-fpm" || n.starts_with("apache+") || n.starts_with("php-fpm+"))
    })
}

/// The CFS period of a run of `o` before the quota's minimum ([`super::plan::resolve`]):
/// `--period`, or [`ATTACH_PERIOD`] for an attach lab's run, or [`DEFAULT_PERIOD`]. Every
/// variant of one run gets the same: their figures are compared within the run.
pub fn default_period(o: &PosOpts) -> Duration {
    o.period.unwrap_or(if attach_lab_run(o.only.as_deref()) {
        ATTACH_PERIOD
    } else {
        DEFAULT_PERIOD
    })
}

/// Default offset between browsers in an exp 1 burst: 9 browsers click within 320 ms. With
/// every click at the same instant every HTML request is queued before any image and there is
/// nothing to reorder (docs/lab.md); the simulator's calibration of the paper's exp 1 found
/// clicks spread over about 300 ms (docs/sim.md).
pub const DEFAULT_STAGGER: Duration = Duration::from_millis(40);

/// Repetitions of `--exp 1 --quick` (the checks; the other experiments' quick form
/// runs 2): see [`super::plan::resolve`].
pub const QUICK_EXP1_REPS: usize = 6;

/// Default floor of the predicted SLP of exp 3-4 (`--slp-floor`). Seed 001's rule sets SLP to
/// the smallest of the workers' longest waits of each 500 ms period, meant to find "the process
/// that waits for a request from a browser. The time it waits for a request is relatively long"
/// (§3.2). In the paper a process serving an image waited on its socket between writes, about
/// 13 ms per 16 KiB on the 10 Mb/s Ethernet; here the emulated CPU, not the link, is slow, so a
/// worker streaming an image pauses a few microseconds between chunks, and the rule as written
/// set SLP to 4-27 µs during every burst of exp 3 (`results/fid3-exp3-1`): every chunk then
/// left a "long" wait, restarted the run/wait counter and kept every image marked, and POS
/// ordered like FIFO (best POS +2.3 % within the t2 bound against `content`'s +55.8 %). 10 ms
/// is the time resolution of the paper's own measurements (PL and LRQ "every 10
/// milliseconds", §4.3): a pause shorter than that is not a wait the paper's log told apart.
pub const DEFAULT_SLP_FLOOR: Duration = Duration::from_millis(10);

/// Upper bound of the default fixed SLP (exp 1-2): a third of the interval, at most this.
pub const DEFAULT_SLP_MAX: Duration = Duration::from_millis(1500);

/// A link rate flag (`10Mbit`, `1.25MB/s`) in Mbit/s.
fn link_rate_mbit(s: &str) -> Result<f64, units::UnitError> {
    units::parse_rate(s).map(|bytes_per_s| bytes_per_s * 8.0 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<PosOpts, clap::Error> {
        use clap::{Args, FromArgMatches};
        let cmd = PosOpts::augment_args(clap::Command::new("t").no_binary_name(true));
        cmd.clone().debug_assert();
        PosOpts::from_arg_matches(&cmd.try_get_matches_from(args)?)
    }

    #[test]
    fn flags_parse_with_units() {
        let t = parse(&[
            "--exp",
            "3",
            "--rw",
            "3,6",
            "--browser-counts",
            "3,6,9",
            "--image-bytes",
            "1000,2KB",
            "--quota",
            "15%",
            "--triage-flag=--starvation-bound=off",
            "--variants",
            "fifo,nginx",
            "--interval",
            "2s",
            "--stagger",
            "0s",
            "--pos-tail",
            "fifo",
            "--no-peers",
        ])
        .unwrap();
        assert_eq!(t.rw, Some(vec![3, 6]));
        assert_eq!(t.browser_counts, Some(vec![3, 6, 9]));
        assert_eq!(t.image_bytes, Some(vec![1000, 2000]));
        assert_eq!(t.quota, Some(0.15));
        assert_eq!(t.triage_extra, vec!["--starvation-bound=off"]);
        assert_eq!(t.only, Some(vec!["fifo".to_string(), "nginx".to_string()]));
        assert_eq!(t.interval, Some(Duration::from_secs(2)));
        assert_eq!(t.stagger, Some(Duration::ZERO));
        assert_eq!(t.pos_tail, PosTail::Fifo);
        assert!(!t.peers);
        assert!(parse(&["--quota", "0"]).is_err());
        assert!(parse(&["--rw", "3,x"]).is_err());
        assert!(parse(&["--exp", "5"]).is_err());
        assert!(parse(&["--gzip-level", "10"]).is_err());
        // A duration needs its unit now: `--interval 5` is refused, saying how to write it.
        let e = parse(&["--interval", "5"]).unwrap_err().to_string();
        assert!(e.contains("5ms") && e.contains("5s"), "{e}");
        assert!(parse(&["--period", "0ms"]).is_err());
        assert_eq!(
            parse(&["--period", "100ms"]).unwrap().period,
            Some(Duration::from_millis(100))
        );
    }

    #[test]
    fn an_attach_lab_run_defaults_to_the_long_period() {
        let period = |args: &[&str]| default_period(&parse(args).unwrap());
        // The check, its servers alone, and any attach variant: 100 ms for every
        // variant of the run.
        let long = [
            &["--variants", "apache,apache+pos,php-fpm,php-fpm+pos"][..],
            &["--variants", "php-fpm"],
            &["--variants", "apache,apache+all20"],
            &["--variants", "fifo,pos-rw1,php-fpm+pos-log"],
        ];
        for args in long {
            assert_eq!(period(args), ATTACH_PERIOD, "{args:?}");
        }
        // The gate's lab, Apache as its peer, the cgi site, nothing named: 10 ms as before.
        let short = [
            &[][..],
            &["--variants", "fifo,pos-rw1,content,nginx,apache"],
            &["--variants", "apache"],
            &["--site", "cgi"],
            &["--variants", "apache-like,php"],
        ];
        for args in short {
            assert_eq!(period(args), DEFAULT_PERIOD, "{args:?}");
        }
        // `--period` wins either way.
        let p = period(&["--variants", "apache,apache+pos", "--period", "10ms"]);
        assert_eq!(p, DEFAULT_PERIOD);
        assert_eq!(period(&["--period", "50ms"]), Duration::from_millis(50));
    }

    #[test]
    fn defaults_are_the_flags_defaults() {
        let d = PosOpts::new(2, PathBuf::from("/bin/false"));
        assert_eq!(d.exp, 2);
        assert_eq!(d.scale, Scale::Normal);
        assert_eq!(d.period, None);
        assert_eq!(default_period(&d), DEFAULT_PERIOD);
        assert_eq!(d.image_bytes, None);
        assert_eq!((d.html_bytes, d.parallel, d.seed), (4096, 4, 1));
        assert_eq!(d.gzip_level(), Some(6));
        assert_eq!(d.pos_tail, PosTail::Episode);
        assert!(d.peers && d.only.is_none() && d.out.is_none());
        assert_eq!(d.net, NetMode::Auto);
        assert_eq!(d.rate_mbit, 10.0);
        assert_eq!(parse(&["--link-rate", "1Gbit"]).unwrap().rate_mbit, 1000.0);
        assert!(parse(&["--link-rate", "10"]).unwrap().rate_mbit < 0.001);
        assert!(parse(&["--rate-mbit", "10"]).is_err());
    }
}
