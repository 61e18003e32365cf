//! The options of `triage load` as a person gives them ([`LoadOpts`], a `clap::Args` the
//! binary flattens), and [`LoadOpts::config`], which turns them into a [`LoadConfig`]: every
//! option is defined here once, its default taken from [`crate::config`]'s `DEFAULT_*` (the
//! ones [`LoadConfig::new`] uses). A flag that does not belong to the chosen mode is an error,
//! never ignored. Durations, rates and sizes are read by `units` (`500ms`, `10Mbit`,
//! `200KB/s`, `8KiB`).

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;

use crate::config::{
    AcceptEncoding, Arrival, ConnMode, LoadConfig, RandomDist, ThinkDist, DEFAULT_BROWSERS,
    DEFAULT_DURATION, DEFAULT_PARALLEL, DEFAULT_SEED, DEFAULT_TIMEOUT,
};
use crate::LoadError;

/// Arrival mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// All browsers at once every --interval (seed 001 exp 1).
    Burst,
    /// Each browser at random times: one uniform instant per --interval window, or Poisson.
    Random,
    /// Closed loop: page, --think, page, ...
    Closed,
    /// Open loop at --rate requests/s over --connections (latency from the scheduled send).
    Rate,
    /// Replay --trace FILE (`<ms offset> <url> [browser]` per line).
    Trace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Burst => "burst",
            Mode::Random => "random",
            Mode::Closed => "closed",
            Mode::Rate => "rate",
            Mode::Trace => "trace",
        }
    }
}

/// Connection style.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Connection {
    /// HTTP/1.1 persistent connections reused per browser.
    KeepAlive,
    /// One connection per request (HTTP/1.0 style).
    Close,
}

/// Distribution of arrival instants in `random` mode.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Dist {
    /// One uniform instant per window.
    Uniform,
    /// Exponential gaps.
    Poisson,
}

/// Distribution of think times in `closed` mode.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Think {
    /// Exactly --think.
    Fixed,
    /// Exponential with mean --think.
    Exp,
}

fn positive_duration(s: &str) -> Result<units::Dur, units::UnitError> {
    units::parse_positive_duration(s).map(units::Dur)
}

fn buffer_size(s: &str) -> Result<usize, String> {
    let b = units::parse_size(s).map_err(|e| e.to_string())?;
    match usize::try_from(b) {
        Ok(b) if b >= 1 => Ok(b),
        _ => Err(format!("`{s}` is not a buffer size of at least 1 byte")),
    }
}

/// Options of `triage load` (see docs/load.md).
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = "Durations need a unit: 500ms, 2s, 1.5m. \
Rates: 200KB/s, 10Mbit, 64KiB/s (bare number = bytes/s). Sizes: 8192, 8KiB, 8KB. \
See docs/load.md.")]
pub struct LoadOpts {
    /// Page URL, `http://host[:port]/path`; may contain {browser} (0-based browser index) and
    /// {page} (0-based page number of that browser) for unique URLs per browser.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    /// The same as URL, as a flag: e.g. 'http://host/b{browser}/index.html'.
    #[arg(long, value_name = "PATTERN")]
    pub url_pattern: Option<String>,
    /// Arrival mode.
    #[arg(long, value_enum, default_value = "closed")]
    pub mode: Mode,
    /// Number of emulated browsers (not for rate mode: see --connections).
    #[arg(long, default_value_t = DEFAULT_BROWSERS)]
    pub browsers: usize,
    /// Parallel connections per browser for embedded objects (K; no effect with --plain or
    /// --mode rate, which make one request per unit).
    #[arg(long, short = 'k', default_value_t = DEFAULT_PARALLEL)]
    pub parallel: usize,
    /// Keep-alive connections or one connection per request.
    #[arg(long, value_enum, default_value = "keep-alive")]
    pub connection: Connection,
    /// burst: time between bursts; random: window (uniform) or mean gap (poisson).
    #[arg(long, value_parser = units::parse_duration)]
    pub interval: Option<Duration>,
    /// random: distribution of arrival instants [default: uniform].
    #[arg(long, value_enum)]
    pub dist: Option<Dist>,
    /// closed: think time between pages [default: 0s].
    #[arg(long, value_parser = units::parse_duration)]
    pub think: Option<Duration>,
    /// closed: fixed think time or exponential with mean --think [default: fixed].
    #[arg(long, value_enum)]
    pub think_dist: Option<Think>,
    /// rate: requests per second over all connections.
    #[arg(long)]
    pub rate: Option<f64>,
    /// rate: number of connections [default: 1].
    #[arg(long)]
    pub connections: Option<usize>,
    /// trace: file of `<ms offset> <url> [browser]` lines.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Fetch only the URL (no HTML parsing, no embedded objects).
    #[arg(long)]
    pub plain: bool,
    /// Content coding the requests accept: `gzip` sends `Accept-Encoding: gzip` and decodes gzip
    /// responses (HTML for scraping; summary.json `bytes` stays the bytes received,
    /// `bytes_decoded` the content); `identity` sends `Accept-Encoding: identity`; `none` sends
    /// no header, like wrk. A response in a coding not accepted is an `encoding` error, a
    /// corrupt gzip body a `decode` error.
    #[arg(long, value_name = "gzip|identity|none", default_value_t = AcceptEncoding::default())]
    pub accept_encoding: AcceptEncoding,
    /// Per-connection read rate (slow link), e.g. 10Mbit or 200KB/s.
    #[arg(long, value_parser = units::parse_rate)]
    pub throttle: Option<f64>,
    /// SO_RCVBUF per connection [default: 8KiB when throttled, else the kernel's].
    #[arg(long, value_parser = buffer_size)]
    pub rcvbuf: Option<usize>,
    /// Stop scheduling pages after this long [default: 10s unless --pages is given].
    #[arg(long, value_parser = units::parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many pages (requests in rate mode).
    #[arg(long, visible_alias = "requests")]
    pub pages: Option<u64>,
    /// Per-request timeout (connect + whole response).
    #[arg(long, value_parser = positive_duration, default_value_t = units::Dur(DEFAULT_TIMEOUT))]
    pub timeout: units::Dur,
    /// After --duration, how long in-flight pages may finish [default: --timeout].
    #[arg(long, value_parser = units::parse_duration)]
    pub drain: Option<Duration>,
    /// Seed of all randomness (random arrivals, exponential think times).
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Write pages.csv, summary.json and config.json into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Runtime threads (1 = single-threaded runtime, the default).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Print nothing but errors (no table, no progress).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Print summary.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

fn usage(msg: impl Into<String>) -> LoadError {
    LoadError::Config(msg.into())
}

impl LoadOpts {
    /// The run these options ask for; every inconsistency is a [`LoadError::Config`] that
    /// names the flag.
    pub fn config(&self) -> Result<LoadConfig, LoadError> {
        let url = match (&self.url, &self.url_pattern) {
            (Some(_), Some(_)) => return Err(usage("give the URL or --url-pattern, not both")),
            (Some(u), None) | (None, Some(u)) => u.clone(),
            (None, None) => return Err(usage("missing URL (or --url-pattern)")),
        };
        self.only(
            self.interval.is_some(),
            "--interval",
            &[Mode::Burst, Mode::Random],
        )?;
        self.only(self.dist.is_some(), "--dist", &[Mode::Random])?;
        self.only(self.think.is_some(), "--think", &[Mode::Closed])?;
        self.only(self.think_dist.is_some(), "--think-dist", &[Mode::Closed])?;
        self.only(self.rate.is_some(), "--rate", &[Mode::Rate])?;
        self.only(self.connections.is_some(), "--connections", &[Mode::Rate])?;
        self.only(self.trace.is_some(), "--trace", &[Mode::Trace])?;
        if self.threads == 0 {
            return Err(usage("--threads must be at least 1"));
        }
        let mut cfg = LoadConfig::new(url);
        cfg.browsers = self.browsers;
        cfg.parallel = self.parallel;
        cfg.conn_mode = match self.connection {
            Connection::KeepAlive => ConnMode::KeepAlive,
            Connection::Close => ConnMode::Close,
        };
        cfg.plain = self.plain;
        cfg.accept_encoding = self.accept_encoding;
        cfg.throttle_bps = self.throttle;
        cfg.rcvbuf = self.rcvbuf;
        cfg.max_pages = self.pages;
        cfg.duration = match (self.duration, self.pages, self.mode) {
            (Some(d), _, _) => Some(d),
            (None, Some(_), _) | (None, None, Mode::Trace) => None,
            (None, None, _) => Some(DEFAULT_DURATION),
        };
        cfg.timeout = self.timeout.0;
        cfg.drain = self.drain;
        cfg.seed = self.seed;
        cfg.progress = !self.quiet && !self.json;
        cfg.arrival = self.arrival()?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// An error if `given` and the mode is not one of `modes`.
    fn only(&self, given: bool, flag: &str, modes: &[Mode]) -> Result<(), LoadError> {
        if given && !modes.contains(&self.mode) {
            let names: Vec<&str> = modes.iter().map(|m| m.name()).collect();
            return Err(usage(format!(
                "{flag} only applies to --mode {}, not --mode {}",
                names.join("/"),
                self.mode.name()
            )));
        }
        Ok(())
    }

    fn arrival(&self) -> Result<Arrival, LoadError> {
        Ok(match self.mode {
            Mode::Burst => Arrival::Burst {
                interval: self
                    .interval
                    .ok_or_else(|| usage("--mode burst needs --interval (e.g. 30s)"))?,
            },
            Mode::Random => Arrival::Random {
                interval: self
                    .interval
                    .ok_or_else(|| usage("--mode random needs --interval (e.g. 30s)"))?,
                dist: match self.dist.unwrap_or(Dist::Uniform) {
                    Dist::Uniform => RandomDist::Uniform,
                    Dist::Poisson => RandomDist::Poisson,
                },
            },
            Mode::Closed => Arrival::Closed {
                think: self.think.unwrap_or(Duration::ZERO),
                think_dist: match self.think_dist.unwrap_or(Think::Fixed) {
                    Think::Fixed => ThinkDist::Fixed,
                    Think::Exp => ThinkDist::Exp,
                },
            },
            Mode::Rate => {
                if self.browsers != 1 {
                    return Err(usage(
                        "--browsers does not apply to --mode rate; use --connections",
                    ));
                }
                Arrival::Rate {
                    rate: self
                        .rate
                        .ok_or_else(|| usage("--mode rate needs --rate (requests/s)"))?,
                    connections: self.connections.unwrap_or(1),
                }
            }
            Mode::Trace => {
                if self.browsers != 1 {
                    return Err(usage(
                        "--browsers does not apply to --mode trace: browsers come from the file",
                    ));
                }
                let path = self
                    .trace
                    .as_ref()
                    .ok_or_else(|| usage("--mode trace needs --trace FILE"))?;
                let text = std::fs::read_to_string(path)
                    .map_err(|e| usage(format!("cannot read --trace {}: {e}", path.display())))?;
                let entries = crate::trace::parse_trace(&text)
                    .map_err(|e| usage(format!("--trace {}: {e}", path.display())))?;
                Arrival::Trace {
                    source: path.display().to_string(),
                    entries,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn parse(args: &[&str]) -> Result<LoadOpts, clap::Error> {
        let cmd = LoadOpts::augment_args(clap::Command::new("t").no_binary_name(true));
        cmd.clone().debug_assert();
        let mut m = cmd.try_get_matches_from(args)?;
        LoadOpts::from_arg_matches_mut(&mut m)
    }

    fn config_err(args: &[&str]) -> String {
        match parse(args).expect("clap accepts these flags").config() {
            Err(LoadError::Config(m)) => m,
            other => panic!("not a config error: {other:?}"),
        }
    }

    #[test]
    fn bad_urls_are_config_errors() {
        assert!(config_err(&["not a url"]).contains("not a valid URL"));
        assert!(config_err(&["https://h/"]).contains("https"));
        assert!(config_err(&["ftp://h/"]).contains("ftp"));
        assert!(config_err(&["http://h/{brwser}/"]).contains("{brwser}"));
        assert!(config_err(&[]).contains("missing URL"));
        assert!(config_err(&["http://h/", "--url-pattern", "http://h/"]).contains("not both"));
    }

    #[test]
    fn inconsistent_flags_are_config_errors() {
        assert!(config_err(&["http://h/", "--rate", "5"]).contains("--rate"));
        assert!(config_err(&["http://h/", "--mode", "burst"]).contains("--interval"));
        assert!(config_err(&["http://h/", "--mode", "rate"]).contains("--rate"));
        let e = config_err(&[
            "http://h/",
            "--mode",
            "rate",
            "--rate",
            "5",
            "--browsers",
            "3",
        ]);
        assert!(e.contains("--connections"), "{e}");
        let e = config_err(&[
            "http://h/",
            "--think",
            "1s",
            "--mode",
            "random",
            "--interval",
            "1s",
        ]);
        assert!(e.contains("--think") && e.contains("--mode closed"), "{e}");
        assert!(config_err(&["http://h/", "--mode", "trace"]).contains("--trace"));
        assert!(
            config_err(&["http://h/", "--mode", "trace", "--browsers", "2"])
                .contains("from the file")
        );
        assert!(
            config_err(&["http://h/", "--mode", "trace", "--trace", "/nonexistent/t"])
                .contains("cannot read")
        );
        assert!(config_err(&["http://h/", "-k", "0"]).contains("parallel"));
        assert!(config_err(&["http://h/", "--pages", "0"]).contains("count"));
        assert!(config_err(&["http://h/", "--threads", "0"]).contains("--threads"));
    }

    #[test]
    fn accept_encoding_flag() {
        let e = parse(&["http://h/", "--accept-encoding", "br"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--accept-encoding") && e.contains("\"br\"") && e.contains("gzip"),
            "{e}"
        );
        let enc = |args: &[&str]| parse(args).unwrap().config().unwrap().accept_encoding;
        assert_eq!(enc(&["http://h/"]), AcceptEncoding::None);
        assert_eq!(
            enc(&["http://h/", "--accept-encoding", "gzip"]),
            AcceptEncoding::Gzip
        );
        assert_eq!(
            enc(&["http://h/", "--accept-encoding", "identity"]),
            AcceptEncoding::Identity
        );
    }

    #[test]
    fn defaults_are_the_librarys() {
        let c = parse(&["http://h/"]).unwrap().config().unwrap();
        let d = LoadConfig::new("http://h/");
        assert_eq!(
            (c.browsers, c.parallel, c.conn_mode, c.duration, c.timeout),
            (d.browsers, d.parallel, d.conn_mode, d.duration, d.timeout)
        );
        assert_eq!(
            (c.seed, c.accept_encoding, c.plain),
            (d.seed, d.accept_encoding, d.plain)
        );
        assert_eq!((c.max_pages, c.drain, c.throttle_bps), (None, None, None));
        assert!(matches!(
            c.arrival,
            Arrival::Closed { think, think_dist: ThinkDist::Fixed } if think.is_zero()
        ));
        let help = LoadOpts::augment_args(clap::Command::new("t"))
            .render_help()
            .to_string();
        assert!(
            help.contains("[default: 10s]") && help.contains("[default: none]"),
            "{help}"
        );
        // A page count alone bounds the run; without either, the default duration does.
        let c = parse(&["http://h/", "--pages", "3"])
            .unwrap()
            .config()
            .unwrap();
        assert_eq!((c.duration, c.max_pages), (None, Some(3)));
    }

    #[test]
    fn units_are_the_workspace_rules() {
        let c = parse(&[
            "http://h/",
            "--duration",
            "1.5s",
            "--throttle",
            "10Mbit",
            "--rcvbuf",
            "8KiB",
        ])
        .unwrap()
        .config()
        .unwrap();
        assert_eq!(c.duration, Some(Duration::from_millis(1500)));
        assert_eq!(c.throttle_bps, Some(1_250_000.0));
        assert_eq!(c.rcvbuf, Some(8192));
        // The old spellings that meant something else are refused, saying what to write.
        let e = parse(&["http://h/", "--duration", "5"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("5ms") && e.contains("5s"), "{e}");
        let e = parse(&["http://h/", "--rcvbuf", "16k"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("16KiB") && e.contains("16KB"), "{e}");
        assert!(parse(&["http://h/", "--timeout", "0s"]).is_err());
    }

    #[test]
    fn bad_values_are_clap_usage_errors() {
        for args in [
            &["http://h/", "--duration", "fast"][..],
            &["http://h/", "--throttle", "10 furlongs"],
            &["http://h/", "--mode", "sideways"],
            &["http://h/", "--connection", "maybe"],
        ] {
            let e = parse(args).expect_err("rejected");
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
    }
}
