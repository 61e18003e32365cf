//! `triage load`: emulate browsers against a server and measure what users feel (t1, t2).
//! Arguments map one to one onto [`loadgen::LoadConfig`]; the work is in the `loadgen` crate.
//! A flag that does not belong to the chosen mode is a usage error (exit 2), never ignored.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;

use super::UsageError;
use loadgen::{AcceptEncoding, Arrival, ConnMode, LoadConfig, RandomDist, ThinkDist};

/// Arrival mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
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

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Connection {
    /// HTTP/1.1 persistent connections reused per browser.
    KeepAlive,
    /// One connection per request (HTTP/1.0 style).
    Close,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Dist {
    Uniform,
    Poisson,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Think {
    Fixed,
    Exp,
}

fn dur(s: &str) -> Result<Duration, String> {
    loadgen::parse_duration(s)
}
fn rate(s: &str) -> Result<f64, String> {
    loadgen::parse_rate(s)
}
fn size(s: &str) -> Result<usize, String> {
    loadgen::parse_size(s)
}

/// Arguments of `triage load`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Durations: 500ms, 2s, 1.5m (bare number = seconds). \
Rates: 200KB/s, 10Mbit, 64KiB/s (bare number = bytes/s). See docs/load.md.")]
pub struct Args {
    /// Page URL, http://host[:port]/path; may contain {browser} (0-based browser index) and
    /// {page} (0-based page number of that browser) for unique URLs per browser.
    #[arg(value_name = "URL")]
    url: Option<String>,
    /// The same as URL, as a flag: e.g. 'http://host/b{browser}/index.html'.
    #[arg(long, value_name = "PATTERN")]
    url_pattern: Option<String>,
    /// Arrival mode.
    #[arg(long, value_enum, default_value = "closed")]
    mode: Mode,
    /// Number of emulated browsers (not for rate mode: see --connections).
    #[arg(long, default_value_t = 1)]
    browsers: usize,
    /// Parallel connections per browser for embedded objects (K; no effect with --plain or
    /// --mode rate, which make one request per unit).
    #[arg(long, short = 'k', default_value_t = 4)]
    parallel: usize,
    /// Keep-alive connections or one connection per request.
    #[arg(long, value_enum, default_value = "keep-alive")]
    connection: Connection,
    /// burst: time between bursts; random: window (uniform) or mean gap (poisson).
    #[arg(long, value_parser = dur)]
    interval: Option<Duration>,
    /// random: distribution of arrival instants [default: uniform].
    #[arg(long, value_enum)]
    dist: Option<Dist>,
    /// closed: think time between pages [default: 0s].
    #[arg(long, value_parser = dur)]
    think: Option<Duration>,
    /// closed: fixed think time or exponential with mean --think [default: fixed].
    #[arg(long, value_enum)]
    think_dist: Option<Think>,
    /// rate: requests per second over all connections.
    #[arg(long)]
    rate: Option<f64>,
    /// rate: number of connections [default: 1].
    #[arg(long)]
    connections: Option<usize>,
    /// trace: file of `<ms offset> <url> [browser]` lines.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Fetch only the URL (no HTML parsing, no embedded objects).
    #[arg(long)]
    plain: bool,
    /// Content coding the requests accept: `gzip` sends `Accept-Encoding: gzip` and decodes gzip
    /// responses (HTML for scraping; summary.json `bytes` stays the bytes received,
    /// `bytes_decoded` the content); `identity` sends `Accept-Encoding: identity`; `none` sends
    /// no header, like wrk. A response in a coding not accepted is an `encoding` error, a
    /// corrupt gzip body a `decode` error.
    #[arg(long, value_name = "gzip|identity|none", default_value = "none")]
    accept_encoding: String,
    /// Per-connection read rate (slow link), e.g. 10Mbit or 200KB/s.
    #[arg(long, value_parser = rate)]
    throttle: Option<f64>,
    /// SO_RCVBUF per connection [default: 8KiB when throttled, else the kernel's].
    #[arg(long, value_parser = size)]
    rcvbuf: Option<usize>,
    /// Stop scheduling pages after this long [default: 10s unless --pages is given].
    #[arg(long, value_parser = dur)]
    duration: Option<Duration>,
    /// Stop after this many pages (requests in rate mode).
    #[arg(long, visible_alias = "requests")]
    pages: Option<u64>,
    /// Per-request timeout (connect + whole response).
    #[arg(long, value_parser = dur, default_value = "10s")]
    timeout: Duration,
    /// After --duration, how long in-flight pages may finish [default: --timeout].
    #[arg(long, value_parser = dur)]
    drain: Option<Duration>,
    /// Seed of all randomness (random arrivals, exponential think times).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write pages.csv, summary.json and config.json into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Runtime threads (1 = single-threaded runtime, the default).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Print nothing but errors (no table, no progress).
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Print summary.json to stdout instead of the table.
    #[arg(long)]
    json: bool,
}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// Builds the library config from the flags; every inconsistency is a usage error.
fn config(a: &Args) -> anyhow::Result<LoadConfig> {
    let url = match (&a.url, &a.url_pattern) {
        (Some(_), Some(_)) => return Err(usage("give the URL or --url-pattern, not both")),
        (Some(u), None) | (None, Some(u)) => u.clone(),
        (None, None) => return Err(usage("missing URL (or --url-pattern)")),
    };
    let only = |given: bool, flag: &str, modes: &[Mode]| -> anyhow::Result<()> {
        if given && !modes.contains(&a.mode) {
            let names: Vec<String> = modes
                .iter()
                .map(|m| format!("{m:?}").to_lowercase())
                .collect();
            return Err(usage(format!(
                "{flag} only applies to --mode {}, not --mode {}",
                names.join("/"),
                format!("{:?}", a.mode).to_lowercase()
            )));
        }
        Ok(())
    };
    only(
        a.interval.is_some(),
        "--interval",
        &[Mode::Burst, Mode::Random],
    )?;
    only(a.dist.is_some(), "--dist", &[Mode::Random])?;
    only(a.think.is_some(), "--think", &[Mode::Closed])?;
    only(a.think_dist.is_some(), "--think-dist", &[Mode::Closed])?;
    only(a.rate.is_some(), "--rate", &[Mode::Rate])?;
    only(a.connections.is_some(), "--connections", &[Mode::Rate])?;
    only(a.trace.is_some(), "--trace", &[Mode::Trace])?;
    if a.threads == 0 {
        return Err(usage("--threads must be at least 1"));
    }
    let arrival = match a.mode {
        Mode::Burst => Arrival::Burst {
            interval: a
                .interval
                .ok_or_else(|| usage("--mode burst needs --interval (e.g. 30s)"))?,
        },
        Mode::Random => Arrival::Random {
            interval: a
                .interval
                .ok_or_else(|| usage("--mode random needs --interval (e.g. 30s)"))?,
            dist: match a.dist.unwrap_or(Dist::Uniform) {
                Dist::Uniform => RandomDist::Uniform,
                Dist::Poisson => RandomDist::Poisson,
            },
        },
        Mode::Closed => Arrival::Closed {
            think: a.think.unwrap_or(Duration::ZERO),
            think_dist: match a.think_dist.unwrap_or(Think::Fixed) {
                Think::Fixed => ThinkDist::Fixed,
                Think::Exp => ThinkDist::Exp,
            },
        },
        Mode::Rate => {
            if a.browsers != 1 {
                return Err(usage(
                    "--browsers does not apply to --mode rate; use --connections",
                ));
            }
            Arrival::Rate {
                rate: a
                    .rate
                    .ok_or_else(|| usage("--mode rate needs --rate (requests/s)"))?,
                connections: a.connections.unwrap_or(1),
            }
        }
        Mode::Trace => {
            if a.browsers != 1 {
                return Err(usage(
                    "--browsers does not apply to --mode trace: browsers come from the file",
                ));
            }
            let path = a
                .trace
                .as_ref()
                .ok_or_else(|| usage("--mode trace needs --trace FILE"))?;
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("cannot read --trace {}: {e}", path.display())))?;
            let entries = loadgen::parse_trace(&text)
                .map_err(|e| usage(format!("--trace {}: {e}", path.display())))?;
            Arrival::Trace {
                source: path.display().to_string(),
                entries,
            }
        }
    };
    let mut cfg = LoadConfig::new(url);
    cfg.browsers = a.browsers;
    cfg.parallel = a.parallel;
    cfg.conn_mode = match a.connection {
        Connection::KeepAlive => ConnMode::KeepAlive,
        Connection::Close => ConnMode::Close,
    };
    cfg.plain = a.plain;
    cfg.accept_encoding = a
        .accept_encoding
        .parse::<AcceptEncoding>()
        .map_err(|e| usage(format!("--accept-encoding: {e}")))?;
    cfg.throttle_bps = a.throttle;
    cfg.rcvbuf = a.rcvbuf;
    cfg.max_pages = a.pages;
    cfg.duration = match (a.duration, a.pages, a.mode) {
        (Some(d), _, _) => Some(d),
        (None, Some(_), _) | (None, None, Mode::Trace) => None,
        (None, None, _) => Some(Duration::from_secs(10)),
    };
    cfg.timeout = a.timeout;
    cfg.drain = a.drain;
    cfg.seed = a.seed;
    cfg.progress = !a.quiet && !a.json;
    cfg.arrival = arrival;
    cfg.validate().map_err(|e| usage(e.to_string()))?;
    Ok(cfg)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let cfg = config(&args)?;
    let report = loadgen::run_blocking(cfg, args.threads).map_err(|e| match e {
        loadgen::LoadError::Config(m) => usage(m),
        e => anyhow::Error::new(e),
    })?;
    if let Some(dir) = &args.out {
        report.write_dir(dir)?;
        if !args.quiet {
            eprintln!(
                "wrote {}/{{pages.csv,summary.json,config.json}}",
                dir.display()
            );
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.summary)?);
    } else if !args.quiet {
        print!("{}", report.table());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        super::super::parse_args(args)
    }

    fn usage_err(args: &[&str]) -> String {
        let e = run(parse(args).expect("clap accepts these flags")).unwrap_err();
        assert!(
            e.downcast_ref::<UsageError>().is_some(),
            "not a usage error: {e:#}"
        );
        e.to_string()
    }

    #[test]
    fn bad_urls_are_usage_errors() {
        assert!(usage_err(&["not a url"]).contains("not a valid URL"));
        assert!(usage_err(&["https://h/"]).contains("https"));
        assert!(usage_err(&["ftp://h/"]).contains("ftp"));
        assert!(usage_err(&["http://h/{brwser}/"]).contains("{brwser}"));
        assert!(usage_err(&[]).contains("missing URL"));
        assert!(usage_err(&["http://h/", "--url-pattern", "http://h/"]).contains("not both"));
    }

    #[test]
    fn inconsistent_flags_are_usage_errors() {
        assert!(usage_err(&["http://h/", "--rate", "5"]).contains("--rate"));
        assert!(usage_err(&["http://h/", "--mode", "burst"]).contains("--interval"));
        assert!(usage_err(&["http://h/", "--mode", "rate"]).contains("--rate"));
        assert!(usage_err(&[
            "http://h/",
            "--mode",
            "rate",
            "--rate",
            "5",
            "--browsers",
            "3"
        ])
        .contains("--connections"));
        assert!(usage_err(&[
            "http://h/",
            "--think",
            "1s",
            "--mode",
            "random",
            "--interval",
            "1s"
        ])
        .contains("--think"));
        assert!(usage_err(&["http://h/", "--mode", "trace"]).contains("--trace"));
        assert!(
            usage_err(&["http://h/", "--mode", "trace", "--browsers", "2"])
                .contains("from the file")
        );
        assert!(
            usage_err(&["http://h/", "--mode", "trace", "--trace", "/nonexistent/t"])
                .contains("cannot read")
        );
        assert!(usage_err(&["http://h/", "-k", "0"]).contains("parallel"));
        assert!(usage_err(&["http://h/", "--pages", "0"]).contains("count"));
    }

    #[test]
    fn accept_encoding_flag() {
        let e = usage_err(&["http://h/", "--accept-encoding", "br"]);
        assert!(
            e.contains("--accept-encoding") && e.contains("\"br\"") && e.contains("gzip"),
            "{e}"
        );
        let enc = |args: &[&str]| config(&parse(args).unwrap()).unwrap().accept_encoding;
        assert_eq!(enc(&["http://h/"]), AcceptEncoding::None);
        assert_eq!(
            enc(&["http://h/", "--accept-encoding", "gzip"]),
            AcceptEncoding::Gzip
        );
        assert_eq!(
            enc(&["http://h/", "--accept-encoding", "identity"]),
            AcceptEncoding::Identity
        );
        assert_eq!(
            enc(&["http://h/", "--accept-encoding", "none"]),
            AcceptEncoding::None
        );
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

    #[test]
    fn network_failures_are_counted_not_fatal() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let dir = std::env::temp_dir().join(format!("triage-load-test-{}", std::process::id()));
        let url = format!("http://127.0.0.1:{port}/");
        let a = parse(&[&url, "--pages", "2", "-q", "--out", dir.to_str().unwrap()]).unwrap();
        run(a).unwrap();
        let s = std::fs::read_to_string(dir.join("summary.json")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["pages"], 2);
        assert_eq!(v["errors"], 2);
    }
}
