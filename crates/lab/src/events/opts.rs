//! Everything `triage lab events` can be told ([`EventsOpts`]).

use std::path::PathBuf;
use std::time::Duration;

use crate::util::{clap_defaults, parse_quota};

/// How the client side is scheduled while it measures (`--client-sched`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientSched {
    /// Real-time `SCHED_FIFO` (priority 1) during each measuring run, at nice -10 between.
    Fifo,
    /// Nice -10 throughout.
    Nice,
}

/// What the measured saturation, against which the prediction is checked, is
/// (`--saturation`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Saturation {
    /// The lowest rate at which the server's CPU ran out (idle under 3% of its quota, or the
    /// rate not sustained): seed 002's capacity, where the idle line meets zero
    /// ([`super::runout`]).
    Cpu,
    /// The highest rate the server sustained (served >= 97%, p99 <= 250 ms), past the CPU's
    /// running out by as much as the quota's batching lets it ([`super::search`]).
    Sustained,
}

impl Saturation {
    /// The name the command line and summary.json use (`cpu`, `sustained`).
    pub fn name(self) -> &'static str {
        match self {
            Saturation::Cpu => "cpu",
            Saturation::Sustained => "sustained",
        }
    }
}

/// What the capacity runs request (`--page`): wrk's peak, the overload run, the ladder and the
/// probes. The cold connections and the pairs always ask for the small file.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Page {
    /// A 64 KiB text page (seeded words in HTML) that every server compresses per request
    /// (`Accept-Encoding: gzip`, the same zlib level for all): about 2 ms of work per request,
    /// which dwarfs a wake-up, on a whole CPU without a quota by default.
    Gzip,
    /// The 1 KiB file sent as it is: 10-30 us per request, less than a wake-up, on a 20%
    /// quota of 5 ms periods by default (the lab's set-up until 2026-11-27).
    Small,
}

impl Page {
    /// The name the command line and summary.json use (`gzip`, `small`).
    pub fn name(self) -> &'static str {
        match self {
            Page::Gzip => "gzip",
            Page::Small => "small",
        }
    }

    /// The server side's CPU quota for the capacity runs when `--quota` is not given
    /// (`None`: the whole server CPU, no quota).
    pub fn default_quota(self) -> Option<f64> {
        match self {
            Page::Gzip => None,
            Page::Small => Some(SMALL_FILE_QUOTA),
        }
    }
}

/// The quota of the small file's budget (20% of `--period`): the capacity runs' default with
/// `--page small`, and the pairs' default whatever the page.
pub const SMALL_FILE_QUOTA: f64 = 0.2;

/// What `triage lab events` was asked for.
#[derive(clap::Args, Debug, Clone)]
pub struct EventsOpts {
    /// A run of about nine and a half minutes: cold counts 0 and 10000, seven rates of 3 s
    /// (10% and six over 50-95%), one repetition, no select.
    #[arg(long)]
    pub quick: bool,
    /// Cold (connected, idle) connection counts held while the hot clients run
    /// [default: 0,1000,5000,10000].
    #[arg(long, value_delimiter = ',')]
    pub cold: Option<Vec<usize>>,
    /// Servers to measure [default: triage,nginx,lighttpd-epoll,lighttpd-poll, and
    /// lighttpd-select when the build has it].
    #[arg(long, value_delimiter = ',')]
    pub servers: Option<Vec<String>>,
    /// Rates per cold count, as fractions of the measured saturation (the open loop's served
    /// rate when offered 1.25x wrk's peak): 10%, 30%, and the rest spread evenly over 50-95%,
    /// the busy range the prediction is fitted on (under 6 rates: evenly over 10-95%)
    /// [default: 10; --quick: 10% and six over 50-95%, without the 30% rate, which no fit
    /// of the prediction uses, so that the run stays under ten minutes].
    #[arg(long)]
    pub rates: Option<usize>,
    /// Length of each rate point and of the saturation run, whole seconds [default: 3s].
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub window: Option<Duration>,
    /// Probes of the saturation search after each cold count's ladder: open-loop runs
    /// bisecting the bracket of what `--saturation` measures (with `sustained` and 0 probes:
    /// the overload run's served rate, the old reading). With `cpu` a probe first runs again
    /// a rate whose runs split evenly, then an edge of the bracket that rests on one run
    /// unless that run was clear (10% idle or more; out of CPU having served under 95% of its
    /// rate), so that no single run sets the crossing.
    #[arg(long, default_value_t = 5)]
    pub probes: usize,
    /// The measured saturation the prediction is checked against: `cpu`, the lowest rate at
    /// which the server's CPU ran out (idle under 3% of its quota or the rate not sustained;
    /// seed 002's capacity, the rate where idle runs out), or `sustained`, the highest rate
    /// it sustained (served >= 97%, p99 <= 250 ms), which the quota's batching of each
    /// throttled gap's arrivals lets run up to 1.5x past the first (docs/results-log.md). Both are
    /// reported; this one places the probes and sets `capacity_error_pct_max`.
    #[arg(long, value_enum, default_value_t = Saturation::Cpu)]
    pub saturation: Saturation,
    /// Repetitions, interleaved by server [default: 3; --quick 1].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Pairs of short wrk runs at each cold count above 0, alternating between the server
    /// holding the cold connections and its twin holding none (same binary, same
    /// configuration, same cgroup): CPU per request compared seconds apart, not minutes.
    #[arg(long, default_value_t = 12)]
    pub pairs: usize,
    /// Connections of the hot clients (open loop, each with one request in flight at most).
    #[arg(long = "hot-conns", default_value_t = 16)]
    pub hot_conns: usize,
    /// How the client side (loadgen's open loop, wrk) is scheduled on its CPU while it
    /// measures: `fifo` (real-time SCHED_FIFO, needs root) preempts every other task there as
    /// soon as a response arrives; `nice` runs it at nice -10 only, where a build sharing the
    /// CPU can hold each wake-up for a slice (the server then idles with requests unsent and
    /// fails the sustained test with 7-26% of its quota unused; docs/results-log.md).
    #[arg(long = "client-sched", value_enum, default_value_t = ClientSched::Fifo)]
    pub client_sched: ClientSched,
    /// What the capacity runs request: `gzip`, a 64 KiB text page every server compresses
    /// per request (about 2 ms of CPU each, so one client CPU saturates a whole server CPU),
    /// or `small`, the 1 KiB file as it is (10-30 us each, less than waking the server, so the
    /// cost per request falls with the rate; it needs a quota for the client to saturate the
    /// server). The cold connections and the pairs ask for the small file either way.
    #[arg(long, value_enum, default_value_t = Page::Gzip)]
    pub page: Page,
    /// zlib level every server compresses the gzip page at (nginx `gzip_comp_level`, lighttpd
    /// `deflate.compression-level`, `triage serve --gzip-level`).
    #[arg(long = "gzip-level", default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub gzip_level: u32,
    /// CPU quota of the server side for the capacity runs, a fraction or percent of one CPU
    /// (100% or more: no quota, the whole server CPU) [default: none with `--page gzip`, 20%
    /// with `--page small`]. With the small file a quota makes a slower CPU that one client
    /// CPU can saturate (at 25% wrk and loadgen could not saturate triage, nginx or lighttpd
    /// on this machine: 13-20% idle left); 20% of a 5 ms period rather than 10% of 10 ms: the
    /// server waits 4 ms after each period it exhausts its quota in, not 9, so a request past
    /// the knee is not served as part of a 9 ms batch that made it cheaper than at the fitted
    /// rates (docs/results-log.md).
    #[arg(long, value_parser = parse_quota)]
    pub quota: Option<f64>,
    /// CPU quota of the server side during the pairs (the small file, wrk against the server
    /// and its twin in turn), whatever the page; 100% or more: none, the default: CPU per
    /// request at the rate one wrk thread drives, seed 002's measure, with half the spread of
    /// a pair under a 20% quota, whose throttled and unthrottled regimes swing a 1 s run's
    /// cost by 10-15% (docs/results-log.md).
    #[arg(long = "pairs-quota", value_parser = parse_quota, default_value = "100%")]
    pub pairs_quota: f64,
    /// CFS period of the quotas (`--quota`, `--pairs-quota`): the server runs `quota x
    /// period` of each period, then waits out the rest (a gap in which requests queue and are
    /// then served as one batch). The kernel takes 1 ms to 1 s, and a quota of at least 1 ms
    /// per period.
    #[arg(long, value_parser = units::parse_positive_duration, default_value = "5ms")]
    pub period: Duration,
    /// Results directory [default: results/events/YYYYMMDDTHHMMSSZ, the UTC time].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Measure nothing: fit the runs saved in each DIR (its raw.csv, logs/ and cpu/) again by
    /// today's method, run `triage capacity` on its logs again, print each group's prediction,
    /// measured crossing and the tool's, and write DIR/reread.json.
    #[arg(long, value_name = "DIR", num_args = 1.., conflicts_with = "out")]
    pub reread: Vec<PathBuf>,
    /// The `triage` binary the lab runs as the server.
    #[arg(skip)]
    pub triage_bin: PathBuf,
    /// The command line, for the report.
    #[arg(skip)]
    pub command: String,
}

impl EventsOpts {
    /// Defaults, with `triage_bin`.
    pub fn new(triage_bin: PathBuf) -> Self {
        EventsOpts {
            triage_bin,
            command: "triage lab events".into(),
            ..clap_defaults()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        use clap::{Args, FromArgMatches};
        let cmd = EventsOpts::augment_args(clap::Command::new("t").no_binary_name(true));
        cmd.clone().debug_assert();
        let p = |a: &[&str]| {
            EventsOpts::from_arg_matches(&cmd.clone().try_get_matches_from(a).unwrap()).unwrap()
        };
        let o = p(&[
            "--cold", "0,500", "--window", "1s", "--quota", "30%", "--period", "4ms",
        ]);
        assert_eq!(o.period, Duration::from_millis(4));
        assert_eq!(o.cold, Some(vec![0, 500]));
        assert_eq!(o.window, Some(Duration::from_secs(1)));
        assert!((o.quota.unwrap() - 0.3).abs() < 1e-12);
        let d = EventsOpts::new(PathBuf::from("/bin/true"));
        assert_eq!((d.hot_conns, d.quota, d.pairs, d.probes), (16, None, 12, 5));
        assert_eq!((d.page, d.gzip_level, d.pairs_quota), (Page::Gzip, 6, 1.0));
        assert_eq!(Page::Gzip.default_quota(), None);
        assert_eq!(Page::Small.default_quota(), Some(0.2));
        let s = p(&[
            "--page",
            "small",
            "--gzip-level",
            "1",
            "--pairs-quota",
            "10%",
        ]);
        assert_eq!((s.page, s.gzip_level, s.pairs_quota), (Page::Small, 1, 0.1));
        assert!(cmd
            .clone()
            .try_get_matches_from(["--gzip-level", "0"])
            .is_err());
        assert!(cmd.clone().try_get_matches_from(["--page", "big"]).is_err());
        assert_eq!(d.client_sched, ClientSched::Fifo);
        assert_eq!(d.saturation, Saturation::Cpu);
        assert_eq!(
            p(&["--saturation", "sustained"]).saturation,
            Saturation::Sustained
        );
        assert_eq!(
            p(&["--client-sched", "nice"]).client_sched,
            ClientSched::Nice
        );
        assert_eq!(d.period, Duration::from_millis(5));
        assert!(cmd.clone().try_get_matches_from(["--window", "2"]).is_err());
        assert_eq!(
            p(&["--reread", "a", "b"]).reread,
            vec![PathBuf::from("a"), PathBuf::from("b")]
        );
        assert!(d.reread.is_empty());
        assert!(cmd
            .try_get_matches_from(["--reread", "a", "--out", "b"])
            .is_err());
    }
}
