//! What a run does: [`LoadConfig`] (URL pattern, browsers, arrival mode, connection style,
//! throttle, bounds) with its validation. Durations, rates and sizes given by a person are
//! read by the `units` crate (see `opts`).

use std::time::Duration;

use serde::Serialize;

use crate::url_pattern::expand_url;
use crate::LoadError;

/// How browsers (or, in `rate` mode, requests) arrive.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Arrival {
    /// Every browser requests its page at the same moment, every `interval` (seed 001 exp 1).
    Burst {
        /// Time between bursts.
        #[serde(with = "secs")]
        interval: Duration,
    },
    /// Every browser requests pages at random times (seed 001 exp 2/3): with `Uniform`, once per
    /// `interval` window at a uniformly random instant inside it; with `Poisson`, as a Poisson
    /// process of mean gap `interval`.
    Random {
        /// Window length (uniform) or mean gap (Poisson).
        #[serde(with = "secs")]
        interval: Duration,
        /// The distribution.
        dist: RandomDist,
    },
    /// Closed loop: each browser fetches a page, thinks, fetches the next.
    Closed {
        /// Think time between the end of one page and the start of the next (mean if `Exp`).
        #[serde(with = "secs")]
        think: Duration,
        /// Fixed or exponentially distributed think time.
        think_dist: ThinkDist,
    },
    /// Open loop at a fixed request rate over a fixed set of connections; each request's
    /// latency counts from its *scheduled* send time (coordinated omission corrected, as wrk2).
    /// One unit is one GET of the URL (embedded objects are not fetched in this mode).
    Rate {
        /// Requests per second, over all connections.
        rate: f64,
        /// Number of connections; connection `c` owns the requests `c, c+C, c+2C, ...`.
        connections: usize,
    },
    /// Replay of timestamped URLs (see `trace`); each entry is a page.
    Trace {
        /// Where the entries came from (for the record only).
        source: String,
        /// The entries, sorted by offset.
        #[serde(skip)]
        entries: Vec<crate::trace::TraceEntry>,
    },
}

impl Arrival {
    /// The mode's name as the CLI spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Arrival::Burst { .. } => "burst",
            Arrival::Random { .. } => "random",
            Arrival::Closed { .. } => "closed",
            Arrival::Rate { .. } => "rate",
            Arrival::Trace { .. } => "trace",
        }
    }
}

/// Distribution of arrival instants in `random` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RandomDist {
    /// One page per browser per interval window, at a uniformly random instant in it.
    Uniform,
    /// Exponential gaps of mean `interval` per browser.
    Poisson,
}

/// Distribution of think times in `closed` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkDist {
    /// Exactly `think`.
    Fixed,
    /// Exponential with mean `think`.
    Exp,
}

/// Connection style.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnMode {
    /// HTTP/1.1 persistent connections, kept per browser and reused across its requests.
    KeepAlive,
    /// One connection per request (HTTP/1.0 style: the request says `Connection: close`).
    Close,
}

/// What the requests say about content codings (`Accept-Encoding`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceptEncoding {
    /// No `Accept-Encoding` header (like wrk and ab): servers send identity.
    #[default]
    None,
    /// `Accept-Encoding: identity`.
    Identity,
    /// `Accept-Encoding: gzip`; gzip responses are decoded (HTML for scraping, every body for
    /// the decoded byte count and its integrity).
    Gzip,
}

impl AcceptEncoding {
    /// The value as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            AcceptEncoding::None => "none",
            AcceptEncoding::Identity => "identity",
            AcceptEncoding::Gzip => "gzip",
        }
    }

    /// The header line the requests carry (with CRLF), if any.
    pub(crate) fn header_line(self) -> &'static [u8] {
        match self {
            AcceptEncoding::None => b"",
            AcceptEncoding::Identity => b"Accept-Encoding: identity\r\n",
            AcceptEncoding::Gzip => b"Accept-Encoding: gzip\r\n",
        }
    }
}

impl std::fmt::Display for AcceptEncoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AcceptEncoding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [
            AcceptEncoding::Gzip,
            AcceptEncoding::Identity,
            AcceptEncoding::None,
        ]
        .into_iter()
        .find(|a| a.name().eq_ignore_ascii_case(s.trim()))
        .ok_or_else(|| format!("unknown value {s:?} (known: gzip, identity, none)"))
    }
}

/// Emulated browsers unless told otherwise.
pub const DEFAULT_BROWSERS: usize = 1;
/// Parallel connections per browser for embedded objects (K) unless told otherwise (Netscape
/// 3 used 4).
pub const DEFAULT_PARALLEL: usize = 4;
/// How long a run schedules pages unless told otherwise (and no page count bounds it).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// Per-request timeout unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Seed of all randomness unless told otherwise.
pub const DEFAULT_SEED: u64 = 1;

/// Everything a run needs. Build it with [`LoadConfig::new`] and set the public fields.
#[derive(Clone, Debug, Serialize)]
pub struct LoadConfig {
    /// The page URL, with optional placeholders `{browser}` (0-based browser index) and `{page}`
    /// (0-based page count of that browser). Only `http://` URLs.
    pub url_pattern: String,
    /// Number of emulated browsers (ignored by `rate`, which uses its connections).
    pub browsers: usize,
    /// Parallel connections per browser for embedded objects (K; Netscape 3 used 4).
    pub parallel: usize,
    /// Keep-alive or one connection per request.
    pub conn_mode: ConnMode,
    /// Arrival mode.
    pub arrival: Arrival,
    /// Fetch only the URL itself (do not parse HTML nor fetch embedded objects).
    pub plain: bool,
    /// Per-connection read throttle in bytes/s (a slow link), or none.
    pub throttle_bps: Option<f64>,
    /// SO_RCVBUF for every connection (set before connect). Default: 8 KiB when throttled (so
    /// the server's sends block as on a slow link), the kernel's default otherwise.
    pub rcvbuf: Option<usize>,
    /// Stop scheduling new pages after this long.
    #[serde(with = "opt_secs")]
    pub duration: Option<Duration>,
    /// Stop after this many pages (requests in `rate` mode).
    pub max_pages: Option<u64>,
    /// Per-request timeout (connect + request + whole response).
    #[serde(with = "secs")]
    pub timeout: Duration,
    /// After the schedule ends, how long in-flight pages may still run before they are cut
    /// and reported as `unfinished`. Default: `timeout`.
    #[serde(with = "opt_secs")]
    pub drain: Option<Duration>,
    /// Seed of all randomness.
    pub seed: u64,
    /// Show progress on stderr (a bar on a terminal, a line every 5 s otherwise).
    pub progress: bool,
    /// Largest HTML body kept for parsing (bytes beyond it are counted, not parsed); with gzip,
    /// a limit on the decoded bytes.
    pub max_html_bytes: usize,
    /// The `Accept-Encoding` the requests carry (default: none, no header).
    pub accept_encoding: AcceptEncoding,
}

impl LoadConfig {
    /// A config with the defaults: [`DEFAULT_BROWSERS`], [`DEFAULT_PARALLEL`], keep-alive,
    /// closed loop without think time, [`DEFAULT_DURATION`], [`DEFAULT_TIMEOUT`],
    /// [`DEFAULT_SEED`].
    pub fn new(url_pattern: impl Into<String>) -> Self {
        LoadConfig {
            url_pattern: url_pattern.into(),
            browsers: DEFAULT_BROWSERS,
            parallel: DEFAULT_PARALLEL,
            conn_mode: ConnMode::KeepAlive,
            arrival: Arrival::Closed {
                think: Duration::ZERO,
                think_dist: ThinkDist::Fixed,
            },
            plain: false,
            throttle_bps: None,
            rcvbuf: None,
            duration: Some(DEFAULT_DURATION),
            max_pages: None,
            timeout: DEFAULT_TIMEOUT,
            drain: None,
            seed: DEFAULT_SEED,
            progress: false,
            max_html_bytes: 4 << 20,
            accept_encoding: AcceptEncoding::None,
        }
    }

    /// Checks every field; the message names the bad field and value.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |m: String| Err(LoadError::Config(m));
        expand_url(&self.url_pattern, 0, 0)?;
        if self.browsers == 0 {
            return bad("browsers must be at least 1".into());
        }
        if self.parallel == 0 {
            return bad("parallel connections per browser (K) must be at least 1".into());
        }
        if self.duration.is_none() && self.max_pages.is_none() && !self.is_trace() {
            return bad("the run needs a bound: set a duration and/or a page count".into());
        }
        if self.duration == Some(Duration::ZERO) {
            return bad("duration must be positive".into());
        }
        if self.max_pages == Some(0) {
            return bad("page/request count must be at least 1".into());
        }
        if self.timeout.is_zero() {
            return bad("timeout must be positive".into());
        }
        if let Some(t) = self.throttle_bps {
            if !(t.is_finite() && t >= 1.0) {
                return bad(format!("throttle must be at least 1 byte/s, got {t}"));
            }
        }
        if let Some(r) = self.rcvbuf {
            if r == 0 {
                return bad("rcvbuf must be positive".into());
            }
        }
        match &self.arrival {
            Arrival::Burst { interval } | Arrival::Random { interval, .. } => {
                if interval.is_zero() {
                    return bad(format!(
                        "{} mode needs a positive interval",
                        self.arrival.name()
                    ));
                }
            }
            Arrival::Closed { .. } => {}
            Arrival::Rate { rate, connections } => {
                if !(rate.is_finite() && *rate > 0.0) {
                    return bad(format!(
                        "rate must be a positive number of requests/s, got {rate}"
                    ));
                }
                if *connections == 0 {
                    return bad("rate mode needs at least 1 connection".into());
                }
            }
            Arrival::Trace { entries, source } => {
                if entries.is_empty() {
                    return bad(format!("trace {source} has no entries"));
                }
                for e in entries {
                    crate::trace::resolve(&e.url, &self.url_pattern).map_err(|m| {
                        LoadError::Config(format!("trace {source} line {}: {m}", e.line))
                    })?;
                }
            }
        }
        Ok(())
    }

    fn is_trace(&self) -> bool {
        matches!(self.arrival, Arrival::Trace { .. })
    }

    /// The receive buffer to set on sockets, if any.
    pub(crate) fn effective_rcvbuf(&self) -> Option<usize> {
        self.rcvbuf
            .or_else(|| self.throttle_bps.map(|_| DEFAULT_THROTTLED_RCVBUF))
    }
}

/// SO_RCVBUF used on throttled connections unless set (Linux doubles it for bookkeeping).
pub const DEFAULT_THROTTLED_RCVBUF: usize = 8 * 1024;

/// Serde helper: a `Duration` as float seconds.
mod secs {
    use serde::Serializer;
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// Serde helper: an `Option<Duration>` as float seconds or null.
mod opt_secs {
    use serde::Serializer;
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_f64(d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_encodings() {
        assert_eq!("gzip".parse(), Ok(AcceptEncoding::Gzip));
        assert_eq!("GZIP".parse(), Ok(AcceptEncoding::Gzip));
        assert_eq!("identity".parse(), Ok(AcceptEncoding::Identity));
        assert_eq!("none".parse(), Ok(AcceptEncoding::None));
        let e = "br".parse::<AcceptEncoding>().unwrap_err();
        assert!(
            e.contains("\"br\"") && e.contains("gzip, identity, none"),
            "{e}"
        );
        assert_eq!(AcceptEncoding::default(), AcceptEncoding::None);
        assert_eq!(
            LoadConfig::new("http://h/").accept_encoding,
            AcceptEncoding::None
        );
    }

    #[test]
    fn validation_names_the_field() {
        let mut c = LoadConfig::new("http://127.0.0.1:1/");
        c.parallel = 0;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("parallel"), "{e}");
        let mut c = LoadConfig::new("http://127.0.0.1:1/");
        c.duration = None;
        assert!(c.validate().unwrap_err().to_string().contains("bound"));
    }
}
