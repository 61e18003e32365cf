//! Server configuration: a TOML file (`--config FILE`, unknown keys rejected) and the values
//! the CLI may override. Durations are strings with a unit (`"500ms"`, `"2s"`, `"100us"`) or
//! integers meaning milliseconds; sizes are integers (bytes) or strings with a unit
//! (`"16KiB"`, `"1MiB"`, `"4k"`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use policy::registry::{PosTail, RwRule};
use policy::{PolicyConfig, Tunable};
use serde::de::{self, Deserializer};
use serde::Deserialize;

/// A configuration problem, naming the key (and line, for files).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {msg}")]
    File { path: String, msg: String },
    #[error("`{key}`: {msg}")]
    Value { key: String, msg: String },
}

/// Whether and how a marked worker's burst is raised in kernel priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Boost {
    #[default]
    Off,
    /// setpriority on the thread running the burst (nice = `boost_nice`).
    Nice,
    /// A short fair-scheduler slice on the thread (`boost_slice`): picked first, same share.
    Slice,
}

impl std::str::FromStr for Boost {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Boost::Off),
            "nice" => Ok(Boost::Nice),
            "slice" => Ok(Boost::Slice),
            _ => Err(format!("unknown boost `{s}` (known: off, nice, slice)")),
        }
    }
}

/// tokio's default `event_interval` (ticks between two polls of the I/O driver when busy).
pub const TOKIO_EVENT_INTERVAL: u32 = 61;

/// Default most bytes of the first burst of a response longer than a chunk (capped at the chunk
/// size). Under the POS lab's CPU quota it took mean t1 from 105 to 84 ms for fifo and from 56
/// to 40 ms for pos-rw1 (docs/server.md).
pub const DEFAULT_FIRST_CHUNK: u64 = 4096;

/// Whether the gate collects scheduling rounds (see `gate.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rounds {
    /// On when the policy may reorder (not for `fifo`, whose order rounds cannot change).
    #[default]
    Auto,
    On,
    Off,
}

impl std::str::FromStr for Rounds {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Rounds::Auto),
            "on" => Ok(Rounds::On),
            "off" => Ok(Rounds::Off),
            _ => Err(format!("unknown rounds `{s}` (known: auto, on, off)")),
        }
    }
}

/// On-the-fly gzip settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GzipConfig {
    pub enabled: bool,
    /// flate2 level 0..=9.
    pub level: u32,
    /// MIME types (without parameters) to compress; `type/*` matches a whole type.
    pub types: Vec<String>,
    /// Smaller files are sent as they are.
    #[serde(deserialize_with = "de_size")]
    pub min_size: u64,
}

impl Default for GzipConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            level: 6,
            types: [
                "text/*",
                "application/javascript",
                "application/json",
                "image/svg+xml",
                "image/bmp",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            min_size: 256,
        }
    }
}

/// One virtual host.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    /// Host name matched against the `Host` header (case-insensitive, port ignored).
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Document root.
    pub root: PathBuf,
    /// Index files for directory requests; defaults to the server's `index`.
    #[serde(default)]
    pub index: Option<Vec<String>>,
    /// CGI script directories, limits and container (`[site.cgi]`, see docs/cgi.md).
    #[serde(default)]
    pub cgi: Option<crate::cgi::CgiConfig>,
}

/// Everything `triage serve` can be configured with. See docs/server.md for each key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub listen: SocketAddr,
    /// Admin address serving `/metrics`; `None` = no admin listener.
    pub admin: Option<SocketAddr>,
    /// Document root of the default site; `None` (and no `site`) = the built-in demo site.
    pub root: Option<PathBuf>,
    pub index: Vec<String>,
    #[serde(rename = "site")]
    pub sites: Vec<SiteConfig>,

    pub policy: String,
    #[serde(deserialize_with = "de_slp")]
    pub slp: Tunable<u64>,
    #[serde(deserialize_with = "de_rw")]
    pub rw: Tunable<u32>,
    pub rw_rule: RwRule,
    /// POS: order of the workers not put at the head (`fifo` as the paper, or `episode`).
    pub pos_tail: PosTail,
    #[serde(deserialize_with = "de_duration")]
    pub period: Duration,
    #[serde(deserialize_with = "de_opt_duration")]
    pub starvation_bound: Option<Duration>,

    /// `false` bypasses the gate entirely (benchmark baseline).
    pub gate: bool,
    /// Collect scheduling rounds so the policy chooses among every worker ready at once
    /// (see `gate.rs`); `off` grants a free slot to the first worker to ask; `auto` (default)
    /// is on for policies that reorder.
    pub rounds: Rounds,
    /// Runtime ticks between two looks at the kernel's readiness events (tokio's
    /// `event_interval`); `None` = 1 when rounds are on, tokio's default (61) otherwise.
    /// With one runtime thread busy with bursts, a request that has arrived is not seen (and
    /// cannot join the ready queue) until the runtime next looks: at 61 ticks that was
    /// hundreds of milliseconds under the POS lab's CPU quota (docs/server.md).
    pub event_interval: Option<u32>,
    /// CPU slots; `None` = CPUs this process may run on.
    pub slots: Option<usize>,
    /// Runtime threads; `None` = as many as slots (1 = single-threaded runtime).
    pub threads: Option<usize>,
    /// Workers created at start (the prefork pool); it grows as connections need.
    pub workers: usize,
    #[serde(deserialize_with = "de_size")]
    pub chunk: u64,
    /// Most bytes of the first burst of a static response longer than `chunk` (`None`:
    /// [`DEFAULT_FIRST_CHUNK`] or `chunk` if smaller; read it through [`Config::first_chunk`];
    /// a response that fits in one chunk is one burst): a short first burst sends the head and
    /// the first bytes sooner, and costs less where a policy puts it at the head of the ready
    /// queue.
    #[serde(deserialize_with = "de_opt_size")]
    pub first_chunk: Option<u64>,
    /// SO_SNDBUF of accepted sockets; `None` = kernel default.
    #[serde(deserialize_with = "de_opt_size")]
    pub sndbuf: Option<u64>,
    pub boost: Boost,
    pub boost_nice: i32,
    /// Slice of `boost = "slice"` (the kernel clamps it to 0.1..100 ms).
    #[serde(deserialize_with = "de_duration")]
    pub boost_slice: Duration,

    pub max_conns: usize,
    #[serde(deserialize_with = "de_size")]
    pub max_header_size: u64,
    #[serde(deserialize_with = "de_duration")]
    pub header_timeout: Duration,
    #[serde(deserialize_with = "de_duration")]
    pub keepalive_timeout: Duration,
    #[serde(deserialize_with = "de_duration")]
    pub send_timeout: Duration,
    #[serde(deserialize_with = "de_duration")]
    pub shutdown_timeout: Duration,

    /// Files up to this size are kept in memory (0 = no content cache).
    #[serde(deserialize_with = "de_size")]
    pub cache_max_file: u64,
    #[serde(deserialize_with = "de_size")]
    pub cache_budget: u64,

    pub gzip: GzipConfig,

    pub pfs_log: Option<PathBuf>,
    /// Combined Log Format; `-` = stdout.
    pub access_log: Option<PathBuf>,

    /// Resource containers (`[[container]]`, see docs/containers.md); none = no `share`.
    #[serde(rename = "container")]
    pub containers: Vec<crate::containers::ContainerConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".parse().expect("static addr"),
            admin: None,
            root: None,
            index: vec!["index.html".into(), "index.htm".into()],
            sites: Vec::new(),
            policy: "fifo".into(),
            slp: Tunable::Auto,
            rw: Tunable::Fixed(3),
            rw_rule: RwRule::Paper,
            pos_tail: PosTail::Fifo,
            period: Duration::from_millis(500),
            starvation_bound: Some(Duration::from_millis(200)),
            gate: true,
            rounds: Rounds::Auto,
            event_interval: None,
            slots: None,
            threads: None,
            workers: 64,
            chunk: 16 * 1024,
            first_chunk: None,
            sndbuf: None,
            boost: Boost::Off,
            boost_nice: -10,
            boost_slice: Duration::from_micros(100),
            max_conns: 10_000,
            max_header_size: 16 * 1024,
            header_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(15),
            send_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(30),
            cache_max_file: 256 * 1024,
            cache_budget: 64 * 1024 * 1024,
            gzip: GzipConfig::default(),
            pfs_log: None,
            access_log: None,
            containers: Vec::new(),
        }
    }
}

impl Config {
    /// Most bytes of a static response's first burst.
    pub fn first_chunk(&self) -> u64 {
        self.first_chunk
            .unwrap_or(DEFAULT_FIRST_CHUNK)
            .min(self.chunk)
    }

    /// Parse a TOML text; errors name the key and line.
    pub fn from_toml(text: &str, path: &str) -> Result<Self, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| ConfigError::File {
            path: path.to_owned(),
            msg: e.to_string().trim_end().to_owned(),
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Read and parse a TOML file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
            path: path.display().to_string(),
            msg: e.to_string(),
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// Checks that span several keys or need the policy registry.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, msg: String| ConfigError::Value {
            key: key.into(),
            msg,
        };
        if !policy::registry::names().contains(&self.policy.as_str()) {
            return Err(bad(
                "policy",
                format!(
                    "unknown policy `{}` (known: {})",
                    self.policy,
                    policy::registry::names().join(", ")
                ),
            ));
        }
        if self.event_interval == Some(0) {
            return Err(bad("event_interval", "must be at least 1".into()));
        }
        if self.slots == Some(0) {
            return Err(bad("slots", "must be at least 1".into()));
        }
        if self.threads == Some(0) {
            return Err(bad("threads", "must be at least 1".into()));
        }
        if self.chunk == 0 || self.chunk > 64 * 1024 * 1024 {
            return Err(bad("chunk", format!("{} is not in 1..=64MiB", self.chunk)));
        }
        if let Some(f) = self.first_chunk {
            if f == 0 || f > self.chunk {
                return Err(bad(
                    "first_chunk",
                    format!("{f} is not in 1..=chunk ({})", self.chunk),
                ));
            }
        }
        if self.max_conns == 0 {
            return Err(bad("max_conns", "must be at least 1".into()));
        }
        if self.max_header_size < 8192 {
            return Err(bad(
                "max_header_size",
                format!("{} is below hyper's minimum of 8192", self.max_header_size),
            ));
        }
        if self.gzip.level > 9 {
            return Err(bad(
                "gzip.level",
                format!("{} is not in 0..=9", self.gzip.level),
            ));
        }
        if !(-20..=19).contains(&self.boost_nice) {
            return Err(bad(
                "boost_nice",
                format!("{} is not in -20..=19", self.boost_nice),
            ));
        }
        if self.period.is_zero() {
            return Err(bad("period", "must be positive".into()));
        }
        for (i, s) in self.sites.iter().enumerate() {
            if s.name.is_empty() {
                return Err(bad(&format!("site[{i}].name"), "must not be empty".into()));
            }
        }
        self.container_tree()?;
        policy::build(&self.policy, &self.policy_config())
            .map(|_| ())
            .map_err(|e| bad("policy", e.to_string()))
    }

    /// The validated resource-container tree (empty without `[[container]]`).
    pub fn container_tree(&self) -> Result<crate::containers::Tree, ConfigError> {
        crate::containers::Tree::build(
            &self.containers,
            &crate::containers::site_names(&self.sites),
            available_cpus(),
            &policy::registry::names(),
        )
        .map_err(|e| ConfigError::Value {
            key: e.key,
            msg: e.msg,
        })
    }

    /// The policy crate's view of this configuration.
    pub fn policy_config(&self) -> PolicyConfig {
        PolicyConfig {
            slp: self.slp,
            rw: self.rw,
            rw_rule: self.rw_rule,
            pos_tail: self.pos_tail,
            period: self.period.as_nanos() as u64,
            starvation_bound: self.starvation_bound.map(|d| d.as_nanos() as u64),
        }
    }

    /// Whether the gate will collect scheduling rounds (`auto`: when the policy may reorder,
    /// as `Server::bind` decides; containers share through `share`, which reorders; a policy
    /// that does not build counts as reordering, and `bind` reports its error).
    pub fn rounds_on(&self) -> bool {
        match self.rounds {
            Rounds::On => true,
            Rounds::Off => false,
            Rounds::Auto => {
                !self.containers.is_empty()
                    || policy::build(&self.policy, &self.policy_config())
                        .map_or(true, |p| p.reorders())
            }
        }
    }

    /// The runtime's event interval (see [`Config::event_interval`]).
    pub fn effective_event_interval(&self) -> u32 {
        self.event_interval.unwrap_or(if self.rounds_on() {
            1
        } else {
            TOKIO_EVENT_INTERVAL
        })
    }

    /// Slots in effect: configured, or the CPUs this process may run on.
    pub fn effective_slots(&self) -> usize {
        self.slots.unwrap_or_else(available_cpus)
    }
}

/// CPUs this process may run on (sched_getaffinity and cgroup quota aware, via std).
pub fn available_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Parse a duration: `<number><unit>` with unit ns, us, ms, s, m, h; a bare number is
/// milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. 500ms, 2s)"))?;
    let scale = match unit.trim() {
        "" | "ms" => 1e-3,
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        u => return Err(format!("`{s}`: unknown unit `{u}` (ns, us, ms, s, m, h)")),
    };
    let secs = v * scale;
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("`{s}` is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parse a size: bytes, or with a unit k/KiB/m/MiB/g/GiB (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (e.g. 16384, 16KiB)"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        u => return Err(format!("`{s}`: unknown unit `{u}` (KiB, MiB, GiB)")),
    };
    v.checked_mul(scale)
        .ok_or_else(|| format!("`{s}` is out of range"))
}

/// Parse `auto` or a duration (SLP).
pub fn parse_slp(s: &str) -> Result<Tunable<u64>, String> {
    if s.trim() == "auto" {
        return Ok(Tunable::Auto);
    }
    parse_duration(s).map(|d| Tunable::Fixed(d.as_nanos() as u64))
}

/// Parse `auto` or a count (RW).
pub fn parse_rw(s: &str) -> Result<Tunable<u32>, String> {
    if s.trim() == "auto" {
        return Ok(Tunable::Auto);
    }
    s.trim()
        .parse()
        .map(Tunable::Fixed)
        .map_err(|_| format!("`{s}` is neither `auto` nor a count"))
}

/// Parse `off` or a duration.
pub fn parse_opt_duration(s: &str) -> Result<Option<Duration>, String> {
    if s.trim() == "off" {
        return Ok(None);
    }
    parse_duration(s).map(Some)
}

/// Parse a `pos_tail`.
pub fn parse_pos_tail(s: &str) -> Result<PosTail, String> {
    match s.trim() {
        "fifo" => Ok(PosTail::Fifo),
        "episode" => Ok(PosTail::Episode),
        _ => Err(format!(
            "unknown POS tail order `{s}` (known: fifo, episode)"
        )),
    }
}

/// Parse an `rw_rule`.
pub fn parse_rw_rule(s: &str) -> Result<RwRule, String> {
    match s.trim() {
        "paper" => Ok(RwRule::Paper),
        "split" => Ok(RwRule::Split),
        _ => Err(format!("unknown rw rule `{s}` (known: paper, split)")),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StrOrInt {
    Str(String),
    Int(i64),
    Float(f64),
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    match StrOrInt::deserialize(d)? {
        StrOrInt::Str(s) => parse_duration(&s).map_err(de::Error::custom),
        StrOrInt::Int(i) if i >= 0 => Ok(Duration::from_millis(i as u64)),
        StrOrInt::Float(f) if f >= 0.0 && f.is_finite() => Ok(Duration::from_secs_f64(f / 1e3)),
        _ => Err(de::Error::custom("a duration must not be negative")),
    }
}

fn de_opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    match StrOrInt::deserialize(d)? {
        StrOrInt::Str(s) => parse_opt_duration(&s).map_err(de::Error::custom),
        StrOrInt::Int(i) if i >= 0 => Ok(Some(Duration::from_millis(i as u64))),
        _ => Err(de::Error::custom("expected `off` or a duration")),
    }
}

fn de_slp<'de, D: Deserializer<'de>>(d: D) -> Result<Tunable<u64>, D::Error> {
    match StrOrInt::deserialize(d)? {
        StrOrInt::Str(s) => parse_slp(&s).map_err(de::Error::custom),
        StrOrInt::Int(i) if i >= 0 => Ok(Tunable::Fixed(i as u64 * 1_000_000)),
        _ => Err(de::Error::custom("expected `auto` or a duration")),
    }
}

fn de_rw<'de, D: Deserializer<'de>>(d: D) -> Result<Tunable<u32>, D::Error> {
    match StrOrInt::deserialize(d)? {
        StrOrInt::Str(s) => parse_rw(&s).map_err(de::Error::custom),
        StrOrInt::Int(i) if (0..=u32::MAX as i64).contains(&i) => Ok(Tunable::Fixed(i as u32)),
        _ => Err(de::Error::custom("expected `auto` or a count")),
    }
}

fn de_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match StrOrInt::deserialize(d)? {
        StrOrInt::Str(s) => parse_size(&s).map_err(de::Error::custom),
        StrOrInt::Int(i) if i >= 0 => Ok(i as u64),
        _ => Err(de::Error::custom("a size must be a non-negative integer")),
    }
}

fn de_opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_size(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_interval_follows_rounds_unless_set() {
        let mut c = Config {
            policy: "pos".into(),
            ..Default::default()
        };
        assert!(c.rounds_on());
        assert_eq!(c.effective_event_interval(), 1);
        c.policy = "fifo".into();
        assert!(!c.rounds_on());
        assert_eq!(c.effective_event_interval(), TOKIO_EVENT_INTERVAL);
        c.rounds = Rounds::On;
        assert_eq!(c.effective_event_interval(), 1);
        c.event_interval = Some(16);
        assert_eq!(c.effective_event_interval(), 16);
        c.event_interval = Some(0);
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("event_interval"), "{e}");
    }

    #[test]
    fn parses_every_key() {
        let text = r#"
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
root = "/srv"
index = ["a.html"]
policy = "fifo"
slp = "200ms"
rw = 4
rw_rule = "split"
pos_tail = "episode"
period = "1s"
starvation_bound = "off"
gate = false
slots = 2
threads = 1
workers = 8
chunk = "8KiB"
first_chunk = "2KiB"
sndbuf = 65536
boost = "nice"
boost_nice = -5
boost_slice = "1ms"
rounds = "off"
event_interval = 7
max_conns = 100
max_header_size = "16k"
header_timeout = "5s"
keepalive_timeout = 3000
send_timeout = "1m"
shutdown_timeout = "10s"
cache_max_file = 0
cache_budget = "1MiB"
pfs_log = "pfs.jsonl"
access_log = "-"
[gzip]
enabled = true
level = 1
types = ["text/html"]
min_size = 0
[[site]]
name = "a.test"
aliases = ["www.a.test"]
root = "/srv/a"
index = ["home.html"]
"#;
        let c = Config::from_toml(text, "t.toml").unwrap();
        assert_eq!(c.slp, Tunable::Fixed(200_000_000));
        assert_eq!(c.rw, Tunable::Fixed(4));
        assert_eq!(c.rw_rule, RwRule::Split);
        assert_eq!(c.pos_tail, PosTail::Episode);
        assert_eq!(c.policy_config().pos_tail, PosTail::Episode);
        assert_eq!(Config::default().pos_tail, PosTail::Fifo);
        assert_eq!(c.first_chunk(), 2048);
        assert_eq!(Config::default().first_chunk(), DEFAULT_FIRST_CHUNK);
        let small = Config::from_toml("chunk = 1024\n", "t.toml").unwrap();
        assert_eq!(small.first_chunk(), 1024, "capped at the chunk");
        let e = Config::from_toml("chunk = 1024\nfirst_chunk = 2048\n", "t.toml").unwrap_err();
        assert!(e.to_string().contains("first_chunk"), "{e}");
        assert!(parse_pos_tail("lifo").unwrap_err().contains("episode"));
        assert_eq!(c.starvation_bound, None);
        assert_eq!(c.chunk, 8192);
        assert_eq!(c.first_chunk, Some(2048));
        assert_eq!(c.keepalive_timeout, Duration::from_secs(3));
        assert_eq!(c.send_timeout, Duration::from_secs(60));
        assert_eq!(c.max_header_size, 16384);
        assert_eq!(c.boost, Boost::Nice);
        assert_eq!(c.boost_slice, Duration::from_millis(1));
        assert_eq!("slice".parse::<Boost>(), Ok(Boost::Slice));
        assert_eq!(c.rounds, Rounds::Off);
        assert_eq!(c.event_interval, Some(7));
        assert_eq!(c.effective_event_interval(), 7);
        assert_eq!(Config::default().rounds, Rounds::Auto);
        assert!("sometimes"
            .parse::<Rounds>()
            .unwrap_err()
            .contains("auto, on, off"));
        assert!(c.gzip.enabled);
        assert_eq!(c.sites[0].aliases, vec!["www.a.test"]);
        assert!(!c.gate);
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let err = Config::from_toml("listen = \"127.0.0.1:1\"\nchunck = 5\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("chunck"), "{err}");
        assert!(err.contains("line 2"), "{err}");
        assert!(err.contains("x.toml"), "{err}");
    }

    #[test]
    fn bad_value_is_named_with_its_line() {
        let err = Config::from_toml("\n\nperiod = \"5 parsecs\"\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("parsecs"), "{err}");
    }

    #[test]
    fn unknown_policy_lists_known_ones() {
        let err = Config::from_toml("policy = \"lottery\"\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("lottery") && err.contains("fifo"), "{err}");
    }

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(parse_size("16KiB"), Ok(16384));
        assert_eq!(parse_size("2m"), Ok(2 << 20));
        assert!(parse_size("99999999999999999999g").is_err());
        assert_eq!(parse_slp("auto"), Ok(Tunable::Auto));
        assert_eq!(parse_rw("3"), Ok(Tunable::Fixed(3)));
        assert!(parse_rw("x").is_err());
        assert_eq!(parse_opt_duration("off"), Ok(None));
    }
}
