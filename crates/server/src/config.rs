//! Server configuration: a TOML file (`--config FILE`, unknown keys rejected with their line)
//! and the defaults of every key. Durations and sizes follow the `units` rules: a duration
//! always has a unit (`"500ms"`, `"2s"`), a size is bytes when bare (`65536`) or has a unit
//! (`"16KiB"`, `"64KB"`). The policy and its tuning are the `[policy]` table, read as
//! `policy::PolicyConfig` reads it. `overrides` lays command-line flags over a
//! [`Config`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use policy::PolicyConfig;
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;

use crate::body_cache::Eviction;
use crate::cgi::CgiConfig;
use crate::containers::{ContainerConfig, Tree};
use crate::disk::DiskConfig;
use crate::forward::ForwardConfig;

mod cgi_lever;
pub use cgi_lever::CgiLever;

/// A configuration problem, naming the key (and line, for files).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read or parsed; `msg` names the key and line.
    #[error("{path}: {msg}")]
    File {
        /// The file.
        path: String,
        /// What is wrong, and where.
        msg: String,
    },
    /// A value is out of range or inconsistent with another.
    #[error("`{key}`: {msg}")]
    Value {
        /// The key (`chunk`, `policy.period`, `container[2].parent`, ...).
        key: String,
        /// What is wrong.
        msg: String,
    },
}

/// Whether and how a marked worker's burst is raised in kernel priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Boost {
    /// No kernel boost.
    #[default]
    Off,
    /// setpriority on the thread running the burst (nice = `boost_nice`).
    Nice,
    /// A short fair-scheduler slice on the thread (`boost_slice`): picked first, same share.
    Slice,
    /// The runtime threads stay at `boost_nice` from their first burst on, asleep or awake,
    /// and drop to their own nice value only for the bursts of workers the policy did not mark
    /// (`gate::Raise::NiceAtRest`: raised before the wake-up).
    Rest,
}

impl std::str::FromStr for Boost {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Boost::Off),
            "nice" => Ok(Boost::Nice),
            "slice" => Ok(Boost::Slice),
            "rest" => Ok(Boost::Rest),
            _ => Err(format!(
                "unknown boost `{s}` (known: off, nice, slice, rest)"
            )),
        }
    }
}

/// tokio's default `event_interval` (ticks between two polls of the I/O driver when busy).
pub const TOKIO_EVENT_INTERVAL: u32 = 61;

/// The event interval with scheduling rounds on and a whole CPU per slot: each look at the
/// I/O driver (a non-blocking `epoll_wait`, the timer wheel, tokio's orphan-process queue)
/// cost about 1.5 us, and looking at every tick made `pos` 1.39x fifo's CPU per 1 KB request
/// on 4 cores of the 16-core machine; every 8 ticks, 1.13x. A tick is one burst, tens of us
/// at most with a whole CPU, so an arrival waits at most a few hundred us to be seen.
pub const ROUNDS_EVENT_INTERVAL: u32 = 8;

/// Default most bytes of the first burst of a response longer than a chunk (capped at the chunk
/// size); docs/server.md says why it is short.
pub const DEFAULT_FIRST_CHUNK: u64 = 4096;

/// Whether the gate collects scheduling rounds (see the `gate` crate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rounds {
    /// On when the policy may reorder (not for `fifo`, whose order rounds cannot change).
    #[default]
    Auto,
    /// Always collect rounds.
    On,
    /// Grant a free slot to the first worker to ask.
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

/// On-the-fly gzip settings (`[gzip]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GzipConfig {
    /// Compress when the client accepts gzip.
    pub enabled: bool,
    /// flate2 level 0..=9.
    pub level: u32,
    /// MIME types (without parameters) to compress; `type/*` matches a whole type.
    pub types: Vec<String>,
    /// Smaller files are sent as they are.
    #[serde(with = "units::serde::size")]
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

/// One virtual host (`[[site]]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    /// Host name matched against the `Host` header (case-insensitive, port ignored).
    pub name: String,
    /// Other host names of the site.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Document root.
    pub root: PathBuf,
    /// Index files for directory requests; defaults to the server's `index`.
    #[serde(default)]
    pub index: Option<Vec<String>>,
    /// CGI script directories, limits and container (`[site.cgi]`, see docs/cgi.md).
    #[serde(default)]
    pub cgi: Option<CgiConfig>,
}

/// `[policy]`: which ready-queue policy orders the gate, and its tuning.
///
/// ```toml
/// [policy]
/// name = "pos"          # policy::registry::names()
/// slp = "auto"          # and every other key of policy::PolicyConfig
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySection {
    /// The policy's name in the registry (`fifo`, `pos`, `content`, `share`, ...).
    pub name: String,
    /// Its tuning: SLP, RW, period, starvation bound, ... (`policy::PolicyConfig`).
    pub config: PolicyConfig,
}

impl Default for PolicySection {
    fn default() -> Self {
        Self {
            name: "fifo".into(),
            config: PolicyConfig::default(),
        }
    }
}

/// The keys of `policy::PolicyConfig`, as its derived `Deserialize` names them.
fn policy_config_keys() -> &'static [&'static str] {
    crate::fields::of::<PolicyConfig>()
}

impl<'de> Deserialize<'de> for PolicySection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Name(String),
            Table(toml::Table),
        }
        let mut table = match Written::deserialize(d)? {
            Written::Table(t) => t,
            Written::Name(n) => {
                return Err(D::Error::custom(format!(
                    "the policy is a table: write `[policy]` and, below it, `name = \"{n}\"` \
                     (its tuning keys, such as slp and rw, go in the same table)"
                )))
            }
        };
        let name = match table.remove("name") {
            None => PolicySection::default().name,
            Some(toml::Value::String(s)) => s,
            Some(v) => {
                return Err(D::Error::custom(format!(
                    "`name` is a policy name such as \"pos\", not {}",
                    v.type_str()
                )))
            }
        };
        let keys = policy_config_keys();
        if let Some(k) = table.keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(D::Error::custom(format!(
                "unknown key `{k}` in [policy] (known: name, {})",
                keys.join(", ")
            )));
        }
        let config = PolicyConfig::deserialize(toml::Value::Table(table))
            .map_err(|e| D::Error::custom(format!("[policy]: {}", e.to_string().trim_end())))?;
        Ok(Self { name, config })
    }
}

/// Everything `triage serve` can be configured with. See docs/server.md for each key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address serving HTTP.
    pub listen: SocketAddr,
    /// Admin address serving `/metrics`; `None` = no admin listener.
    pub admin: Option<SocketAddr>,
    /// Document root of the default site; `None` (and no `site`) = the built-in demo site.
    pub root: Option<PathBuf>,
    /// Index files for directory requests.
    pub index: Vec<String>,
    /// Virtual hosts (`[[site]]`).
    #[serde(rename = "site")]
    pub sites: Vec<SiteConfig>,

    /// `[policy]`: the ready-queue policy and its tuning.
    pub policy: PolicySection,

    /// `false` bypasses the gate entirely (benchmark baseline).
    pub gate: bool,
    /// Collect scheduling rounds so the policy chooses among every worker ready at once
    /// (see the `gate` crate); `off` grants a free slot to the first worker to ask; `auto`
    /// (default) is on for policies that reorder.
    pub rounds: Rounds,
    /// With rounds on and a policy that does not order by the request (POS), a connection
    /// woken while its lane is busy joins the ready queue at the wake-up and is polled once,
    /// when granted (`gate::wake_queue`); `false`: it is polled, finds the slot taken, queues
    /// and is polled again when granted.
    pub wake_queue: bool,
    /// Runtime ticks between two looks at the kernel's readiness events (tokio's
    /// `event_interval`); `None` = with rounds on, 1 under a CPU cap below one CPU per slot and
    /// [`ROUNDS_EVENT_INTERVAL`] otherwise; tokio's default (61) with rounds off.
    /// With one runtime thread busy with bursts, a request that has arrived is not seen (and
    /// cannot join the ready queue) until the runtime next looks (docs/server.md).
    pub event_interval: Option<u32>,
    /// CPU slots; `None` = CPUs this process may run on.
    pub slots: Option<usize>,
    /// Runtime threads; `None` = as many as slots (1 = single-threaded runtime).
    pub threads: Option<usize>,
    /// Time slice of a streak (`gate::Streak`): a worker asking again within 50 us of its last
    /// burst's end (it did not really wait: the next chunk of its response) continues without a
    /// scheduling round until this much time has passed since the streak began; `0s` turns
    /// streaks off (every idle-to-busy acquisition opens a round).
    #[serde(with = "units::serde::duration")]
    pub streak_slice: Duration,
    /// Lanes of the gate, per-core ready queues (`gate` crate); `None` = one per runtime
    /// thread, at most one per slot. Resource containers and the kernel boost need one lane
    /// (their state is the whole server's), and get one.
    pub lanes: Option<usize>,
    /// Workers created at start (the prefork pool); it grows as connections need.
    pub workers: usize,
    /// Body chunk: one burst each.
    #[serde(with = "units::serde::size")]
    pub chunk: u64,
    /// Most bytes of the first burst of a static response longer than `chunk` (`None`:
    /// [`DEFAULT_FIRST_CHUNK`] or `chunk` if smaller; read it through [`Config::first_chunk`];
    /// a response that fits in one chunk is one burst): a short first burst sends the head and
    /// the first bytes sooner, and costs less where a policy puts it at the head of the ready
    /// queue.
    #[serde(with = "units::serde::opt_size")]
    pub first_chunk: Option<u64>,
    /// SO_SNDBUF of accepted sockets; `None` = kernel default.
    #[serde(with = "units::serde::opt_size")]
    pub sndbuf: Option<u64>,
    /// Kernel boost of a marked worker's burst.
    pub boost: Boost,
    /// Nice value of `boost = "nice"`.
    pub boost_nice: i32,
    /// Slice of `boost = "slice"` (the kernel clamps it to 0.1..100 ms).
    #[serde(with = "units::serde::duration")]
    pub boost_slice: Duration,

    /// Most simultaneous connections. At the limit the oldest idle connections (nothing sent
    /// yet, or idle keep-alive) are closed to make room; only when none is idle is a newcomer
    /// answered 503 and closed.
    pub max_conns: usize,
    /// Largest request head (hyper's buffer; at least 8192).
    #[serde(with = "units::serde::size")]
    pub max_header_size: u64,
    /// Time allowed to send a request head (also the wait for a connection's first request).
    #[serde(with = "units::serde::duration")]
    pub header_timeout: Duration,
    /// Idle time after which a keep-alive connection is closed.
    #[serde(with = "units::serde::duration")]
    pub keepalive_timeout: Duration,
    /// Time a response may go without the client reading anything.
    #[serde(with = "units::serde::duration")]
    pub send_timeout: Duration,
    /// How long a kept-alive connection stays ready for its next request (hyper's state and
    /// buffers kept) before it is parked as a bare socket; 0 parks it as soon as a response
    /// ends. Building and dropping hyper's connection for every request of a busy connection
    /// cost about 11% of the CPU per request of a 1 KB file (docs/server.md, "HTTP behaviour").
    #[serde(with = "units::serde::duration")]
    pub park_after: Duration,
    /// Longest wait for responses in flight when stopping.
    #[serde(with = "units::serde::duration")]
    pub shutdown_timeout: Duration,

    /// Files up to this size are kept in memory (0 = no content cache).
    #[serde(with = "units::serde::size")]
    pub cache_max_file: u64,
    /// Memory of the content cache, all files together.
    #[serde(with = "units::serde::size")]
    pub cache_budget: u64,
    /// What the content cache drops when full: `clear` (everything), `lru` or `gds`
    /// (GreedyDual-Size); see `body_cache`.
    pub cache_policy: Eviction,
    /// `[disk]`: an emulated disk that content-cache misses wait for (off by default).
    pub disk: DiskConfig,
    /// `[forward]`: back-end forwarding for a cluster front end (off by default).
    pub forward: ForwardConfig,

    /// `[gzip]`: on-the-fly compression.
    pub gzip: GzipConfig,

    /// Worker log (JSON lines).
    pub pfs_log: Option<PathBuf>,
    /// Combined Log Format; `-` = stdout.
    pub access_log: Option<PathBuf>,

    /// Where the run of this server's CGI scripts is recorded, so that a server started after
    /// a crash kills what the previous run's scripts left (docs/cgi.md); `None` = in
    /// `$XDG_RUNTIME_DIR/triage`, `/run/triage` (root) or `<temp dir>/triage-<uid>`, named
    /// after `listen` (none for port 0).
    pub cgi_state: Option<PathBuf>,
    /// The kernel lever of CGI scripts: a script started for a request of a worker POS marks
    /// runs at nice -20 until its worker loses the mark (its siblings in the server's cgroup
    /// are what it is ordered against; `cgroups = false` keeps scripts there).
    pub cgi_lever: CgiLever,

    /// Resource containers (`[[container]]`, see docs/containers.md); none = no `share`.
    #[serde(rename = "container")]
    pub containers: Vec<ContainerConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".parse().expect("static addr"),
            admin: None,
            root: None,
            index: vec!["index.html".into(), "index.htm".into()],
            sites: Vec::new(),
            policy: PolicySection::default(),
            gate: true,
            rounds: Rounds::Auto,
            wake_queue: true,
            event_interval: None,
            slots: None,
            threads: None,
            lanes: None,
            streak_slice: Duration::from_millis(1),
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
            park_after: Duration::from_millis(50),
            shutdown_timeout: Duration::from_secs(30),
            cache_max_file: 256 * 1024,
            cache_budget: 64 * 1024 * 1024,
            cache_policy: Eviction::Clear,
            disk: DiskConfig::default(),
            forward: ForwardConfig::default(),
            gzip: GzipConfig::default(),
            pfs_log: None,
            access_log: None,
            cgi_state: None,
            cgi_lever: CgiLever::OFF,
            containers: Vec::new(),
        }
    }
}

/// If `text` spells the policy the old way (a top-level `policy = "name"`, or a `[policy]`
/// key such as `slp` at the top level), what to write instead, with the first such line.
fn old_policy_spelling(text: &str) -> Option<String> {
    let top: std::collections::BTreeMap<String, toml::Spanned<toml::Value>> =
        toml::from_str(text).ok()?;
    let keys = policy_config_keys();
    let line = |v: &toml::Spanned<toml::Value>| text[..v.span().start].matches('\n').count() + 1;
    let mut first = usize::MAX;
    let mut moved = Vec::new();
    if let Some(v) = top.get("policy") {
        if let toml::Value::String(name) = v.get_ref() {
            first = first.min(line(v));
            moved.push(format!("name = \"{name}\""));
        }
    }
    for (k, v) in top.iter().filter(|(k, _)| keys.contains(&k.as_str())) {
        first = first.min(line(v));
        moved.push(format!("{k} = {}", v.get_ref()));
    }
    (!moved.is_empty()).then(|| {
        format!(
            "line {first}: the policy and its tuning are the [policy] table: write `[policy]` \
             on a line of its own, then below it: {}",
            moved.join(", ")
        )
    })
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
        let file_error = |msg: String| ConfigError::File {
            path: path.to_owned(),
            msg,
        };
        let cfg: Config = toml::from_str(text).map_err(|e| {
            file_error(
                old_policy_spelling(text).unwrap_or_else(|| e.to_string().trim_end().to_owned()),
            )
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
        let names = policy::registry::names();
        if !names.contains(&self.policy.name.as_str()) {
            return Err(bad(
                "policy.name",
                format!(
                    "unknown policy `{}` (known: {})",
                    self.policy.name,
                    names.join(", ")
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
        if self.lanes == Some(0) {
            return Err(bad("lanes", "must be at least 1".into()));
        }
        if let (Some(lanes), Some(slots)) = (self.lanes, self.slots) {
            if lanes > slots {
                return Err(bad(
                    "lanes",
                    format!("{lanes} lanes but {slots} slots: each lane needs a slot"),
                ));
            }
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
        for (key, d) in [
            ("header_timeout", self.header_timeout),
            ("keepalive_timeout", self.keepalive_timeout),
            ("send_timeout", self.send_timeout),
            ("shutdown_timeout", self.shutdown_timeout),
        ] {
            if d.is_zero() {
                return Err(bad(key, "must be longer than zero".into()));
            }
        }
        if let Err((key, msg)) = self.disk.check() {
            return Err(bad(key, msg));
        }
        if self.forward.timeout.is_zero() {
            return Err(bad("forward.timeout", "must be longer than zero".into()));
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
        if self.policy.config.period == 0 {
            return Err(bad("policy.period", "must be longer than zero".into()));
        }
        for (i, s) in self.sites.iter().enumerate() {
            if s.name.is_empty() {
                return Err(bad(&format!("site[{i}].name"), "must not be empty".into()));
            }
            // Host matching ignores case: two sites answering one name would hide the second.
            if let Some(j) = self.sites[..i]
                .iter()
                .position(|o| o.name.eq_ignore_ascii_case(&s.name))
            {
                return Err(bad(
                    &format!("site[{i}].name"),
                    format!("`{}` is already the name of site[{j}]", s.name),
                ));
            }
        }
        self.container_tree()?;
        policy::build(&self.policy.name, &self.policy.config)
            .map(|_| ())
            .map_err(|e| bad("policy", e.to_string()))
    }

    /// The validated resource-container tree (empty without `[[container]]`).
    pub fn container_tree(&self) -> Result<Tree, ConfigError> {
        let sites: Vec<&str> = self.sites.iter().map(|s| s.name.as_str()).collect();
        Tree::build(
            &self.containers,
            &sites,
            available_cpus(),
            &policy::registry::names(),
        )
        .map_err(|e| ConfigError::Value {
            key: e.key,
            msg: e.msg,
        })
    }

    /// The gate's kernel boost, if any.
    pub fn raise(&self) -> Option<gate::Raise> {
        match self.boost {
            Boost::Off => None,
            Boost::Nice => Some(gate::Raise::Nice(self.boost_nice)),
            Boost::Slice => Some(gate::Raise::Slice(self.boost_slice)),
            Boost::Rest => Some(gate::Raise::NiceAtRest(self.boost_nice)),
        }
    }

    /// Whether the gate will collect scheduling rounds (`auto`: when the policy may reorder;
    /// containers share through `share`, which reorders; a policy that does not build counts
    /// as reordering, and `Server::bind` reports its error).
    pub fn rounds_on(&self) -> bool {
        match self.rounds {
            Rounds::On => true,
            Rounds::Off => false,
            Rounds::Auto => {
                !self.containers.is_empty()
                    || policy::build(&self.policy.name, &self.policy.config)
                        .map_or(true, |p| p.reorders())
            }
        }
    }

    /// The runtime's event interval (see [`Config::event_interval`]) for this process, whose
    /// CPU cap is read from its cgroup ([`os::cgroup::own_cpu_cap`]).
    pub fn effective_event_interval(&self) -> u32 {
        self.event_interval_under(os::cgroup::own_cpu_cap())
    }

    /// The runtime's event interval under a CPU cap of `cap` CPUs (`None`: none): configured,
    /// else tokio's 61 without rounds; with rounds, 1 when the cap leaves a slot less than a
    /// whole CPU (a burst then takes many times its CPU time in wall time, and arrivals must
    /// be seen at every tick: docs/server.md, "Seeing arrivals"), else
    /// [`ROUNDS_EVENT_INTERVAL`].
    pub fn event_interval_under(&self, cap: Option<f64>) -> u32 {
        self.event_interval.unwrap_or_else(|| {
            if !self.rounds_on() {
                return TOKIO_EVENT_INTERVAL;
            }
            match cap {
                Some(c) if c < self.effective_slots() as f64 => 1,
                _ => ROUNDS_EVENT_INTERVAL,
            }
        })
    }

    /// The gate's streaks (`None` with `streak_slice = "0s"`).
    pub fn streak(&self) -> Option<gate::Streak> {
        (!self.streak_slice.is_zero()).then(|| gate::Streak {
            slice_ns: self.streak_slice.as_nanos() as u64,
            ..gate::Streak::default()
        })
    }

    /// Runtime threads in effect: configured, or as many as slots.
    pub fn effective_threads(&self) -> usize {
        self.threads.unwrap_or_else(|| self.effective_slots())
    }

    /// Gate lanes in effect: configured (at most one per slot), or one per runtime thread (at
    /// most one per slot); one with resource containers or the kernel boost.
    pub fn effective_lanes(&self) -> usize {
        if !self.containers.is_empty() || self.raise().is_some() {
            return 1;
        }
        let slots = self.effective_slots();
        self.lanes
            .unwrap_or_else(|| self.effective_threads())
            .clamp(1, slots.max(1))
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

#[cfg(test)]
mod tests;
