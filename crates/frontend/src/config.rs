//! The front end's configuration: a TOML file (unknown keys rejected, errors naming the key and
//! line) and the defaults of every key. Durations and sizes follow the `units` rules (a
//! duration always has a unit). [`FrontConfig::to_toml`] writes a file that reads back to the
//! same configuration, so a program (the cluster lab) can write one for `triage front
//! --config`.
//!
//! ```toml
//! listen = "127.0.0.1:8000"
//! admin = "127.0.0.1:9000"
//! backends = ["127.0.0.1:8081", "127.0.0.1:8082"]
//! policy = "ext-lard"          # wrr, lard, lard-r, ext-lard, chbl
//! mechanism = "forward"        # relay, pin, forward
//! [dispatch]
//! t_low = 25
//! t_high = 65
//! [health]
//! interval = "1s"
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use policy::dispatch::DispatchConfig;
use serde::{Deserialize, Serialize};

/// A configuration problem, naming the key (and line, for files).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read or parsed.
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
        /// The key.
        key: String,
        /// What is wrong.
        msg: String,
    },
}

fn bad(key: &str, msg: impl Into<String>) -> ConfigError {
    ConfigError::Value {
        key: key.into(),
        msg: msg.into(),
    }
}

/// How the requests of a client's persistent connection reach the back ends (seed 004's
/// P-HTTP mechanisms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mechanism {
    /// Every request is distributed on its own and relayed over pooled back-end connections
    /// (what the paper's "front-end relaying" and "multiple TCP handoff" achieve).
    #[default]
    Relay,
    /// The connection's first request picks the back end; every later request on it goes
    /// there too (what a single TCP handoff gives).
    Pin,
    /// As `pin`, and a later request for a target another back end caches is forwarded by the
    /// pinned back end to that one (`X-Triage-Forward`, served by `triage serve --forward-*`).
    Forward,
}

impl std::str::FromStr for Mechanism {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "relay" => Ok(Mechanism::Relay),
            "pin" => Ok(Mechanism::Pin),
            "forward" => Ok(Mechanism::Forward),
            _ => Err(format!(
                "unknown mechanism `{s}` (known: relay, pin, forward)"
            )),
        }
    }
}

impl Mechanism {
    /// Its name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Relay => "relay",
            Mechanism::Pin => "pin",
            Mechanism::Forward => "forward",
        }
    }
}

/// What relays the bytes between clients and back ends (the decisions are the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Cloudflare's pingora (`pingora-proxy`): its HTTP/1.1 sessions and connection pool.
    Pingora,
    /// The front end's own lean relay (the `relay` module): `httparse` heads, the body copied
    /// through one buffer per connection by its framing, a pool of idle back-end connections
    /// without a task per connection. The default: half pingora's CPU per request under the
    /// cluster lab's load (docs/front.md).
    #[default]
    Relay,
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pingora" => Ok(Engine::Pingora),
            "relay" => Ok(Engine::Relay),
            _ => Err(format!("unknown engine `{s}` (known: pingora, relay)")),
        }
    }
}

impl Engine {
    /// Its name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Pingora => "pingora",
            Engine::Relay => "relay",
        }
    }
}

/// How many requests the front end lets into the cluster at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Admission {
    /// LARD's bound: `(n - 1) * T_high + T_low - 1` for `n` back ends up (seed 004, §2.3), so
    /// that no back end is driven past `2 T_high` while another idles.
    #[default]
    Auto,
    /// No bound.
    Off,
    /// At most this many.
    Limit(usize),
}

impl std::str::FromStr for Admission {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Admission::Auto),
            "off" => Ok(Admission::Off),
            n => match n.parse::<usize>() {
                Ok(0) | Err(_) => Err(format!(
                    "admission is `auto`, `off` or a positive count, not `{s}`"
                )),
                Ok(n) => Ok(Admission::Limit(n)),
            },
        }
    }
}

impl Serialize for Admission {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Admission::Auto => s.serialize_str("auto"),
            Admission::Off => s.serialize_str("off"),
            Admission::Limit(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for Admission {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Count(u64),
            Word(String),
        }
        match Written::deserialize(d)? {
            Written::Count(n) => format!("{n}").parse(),
            Written::Word(w) => w.parse(),
        }
        .map_err(serde::de::Error::custom)
    }
}

/// `[dispatch]`: the parameters of the distribution policies (each uses the ones it needs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DispatchSection {
    /// LARD: a back end below this load (requests in flight) is underloaded.
    pub t_low: u32,
    /// LARD: a back end above this load is overloaded.
    pub t_high: u32,
    /// LARD/R: a server set unchanged for this long loses its most loaded back end.
    #[serde(with = "units::serde::duration")]
    pub replica_ttl: Duration,
    /// CHBL: the bound `c` on a back end's load over the mean (HAProxy's
    /// `hash-balance-factor 125` is 1.25).
    pub bound: f64,
    /// CHBL: points per back end on the ring.
    pub vnodes: u32,
    /// WRR: one weight per back end (empty: all 1).
    pub weights: Vec<u32>,
    /// Extended LARD: a back end whose disk has this many reads queued is busy.
    pub disk_busy: u32,
}

impl Default for DispatchSection {
    fn default() -> Self {
        let d = DispatchConfig::default();
        Self {
            t_low: d.t_low,
            t_high: d.t_high,
            replica_ttl: Duration::from_nanos(d.replica_ttl),
            bound: f64::from(d.bound_permille) / 1000.0,
            vnodes: d.vnodes,
            weights: d.weights,
            disk_busy: d.disk_busy,
        }
    }
}

impl DispatchSection {
    /// The policy crate's form.
    pub fn to_dispatch(&self) -> DispatchConfig {
        DispatchConfig {
            t_low: self.t_low,
            t_high: self.t_high,
            replica_ttl: self.replica_ttl.as_nanos() as u64,
            bound_permille: (self.bound * 1000.0).round() as u32,
            vnodes: self.vnodes,
            weights: self.weights.clone(),
            disk_busy: self.disk_busy,
        }
    }
}

/// `[health]`: the back ends' health checks (run by pingora's load-balancing crate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    /// Time between two checks of a back end.
    #[serde(with = "units::serde::duration")]
    pub interval: Duration,
    /// Longest wait for a check's connection (and response, for HTTP checks).
    #[serde(with = "units::serde::duration")]
    pub timeout: Duration,
    /// Checks in a row that must pass before a back end that was down takes requests again.
    pub rise: u32,
    /// Checks in a row that must fail before a back end is taken out (a request that cannot
    /// connect takes it out at once).
    pub fall: u32,
    /// `GET` this path and expect a 200; absent: a TCP connection is the check.
    pub path: Option<String>,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            rise: 2,
            fall: 3,
            path: None,
        }
    }
}

/// Everything `triage front` can be configured with. See docs/front.md for each key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FrontConfig {
    /// Address serving the clients.
    pub listen: SocketAddr,
    /// Admin address serving `/metrics` and `/healthz`; `None` = none.
    pub admin: Option<SocketAddr>,
    /// The back ends (`host:port`), in order: back end `i` is node `i` of the policy.
    pub backends: Vec<SocketAddr>,
    /// Distribution policy: a name of `policy::dispatch` (`wrr`, `lard`, `lard-r`,
    /// `ext-lard`, `chbl`).
    pub policy: String,
    /// How the requests of persistent connections reach the back ends.
    pub mechanism: Mechanism,
    /// What relays the bytes: `relay` (the front end's own, the default) or `pingora`.
    pub engine: Engine,
    /// Runtime threads; `None` = the CPUs this process may run on.
    pub threads: Option<usize>,
    /// Requests let into the cluster at once.
    pub admission: Admission,
    /// Tries on another back end after a failure before any byte of the response (connection
    /// refused or reset) of an idempotent request.
    pub retries: usize,
    /// Longest wait to connect to a back end.
    #[serde(with = "units::serde::duration")]
    pub connect_timeout: Duration,
    /// Longest a back end may go without sending anything while a response is awaited or
    /// read (a hung back end): then 504.
    #[serde(with = "units::serde::duration")]
    pub response_timeout: Duration,
    /// Idle time after which a client's connection is closed: waiting for its next request,
    /// or (relay engine) for it to take bytes of a response it stopped reading; HAProxy's
    /// `timeout client` in `--emit haproxy`.
    #[serde(with = "units::serde::duration")]
    pub keepalive_timeout: Duration,
    /// Idle time after which a pooled back-end connection is closed.
    #[serde(with = "units::serde::duration")]
    pub pool_idle_timeout: Duration,
    /// Idle back-end connections kept, all back ends together.
    pub pool_size: usize,
    /// Longest wait for requests in flight when stopping.
    #[serde(with = "units::serde::duration")]
    pub shutdown_timeout: Duration,
    /// Combined Log Format with the back end appended; `-` = stdout.
    pub access_log: Option<PathBuf>,
    /// `[dispatch]`: the policies' parameters.
    pub dispatch: DispatchSection,
    /// `[health]`: the health checks.
    pub health: HealthConfig,
}

impl Default for FrontConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8000".parse().expect("static addr"),
            admin: None,
            backends: Vec::new(),
            policy: "lard".into(),
            mechanism: Mechanism::Relay,
            engine: Engine::default(),
            threads: None,
            admission: Admission::Auto,
            retries: 3,
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(60),
            pool_idle_timeout: Duration::from_secs(60),
            pool_size: 1024,
            shutdown_timeout: Duration::from_secs(10),
            access_log: None,
            dispatch: DispatchSection::default(),
            health: HealthConfig::default(),
        }
    }
}

impl FrontConfig {
    /// Parse a TOML text; errors name the key and line.
    pub fn from_toml(text: &str, path: &str) -> Result<Self, ConfigError> {
        let cfg: FrontConfig = toml::from_str(text).map_err(|e| ConfigError::File {
            path: path.to_owned(),
            msg: e.to_string().trim_end().to_owned(),
        })?;
        Ok(cfg)
    }

    /// Read and parse a TOML file (not validated: flags may still complete it).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
            path: path.display().to_string(),
            msg: e.to_string(),
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// The TOML text of this configuration (reads back with [`FrontConfig::from_toml`]).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("the configuration serializes")
    }

    /// Checks that span keys or need the policy registry.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.backends.is_empty() {
            return Err(bad(
                "backends",
                "no back end: list them in the file (backends = [\"127.0.0.1:8081\"]) or give \
                 --backend ADDR, once per back end",
            ));
        }
        for (i, b) in self.backends.iter().enumerate() {
            if self.backends[..i].contains(b) {
                return Err(bad("backends", format!("{b} is listed twice")));
            }
            if b.port() == 0 {
                return Err(bad("backends", format!("{b}: port 0 is not a back end")));
            }
        }
        let names = policy::dispatch::names();
        if !names.contains(&self.policy.as_str()) {
            return Err(bad(
                "policy",
                format!(
                    "unknown policy `{}` (known: {})",
                    self.policy,
                    names.join(", ")
                ),
            ));
        }
        if self.threads == Some(0) {
            return Err(bad("threads", "must be at least 1"));
        }
        let d = &self.dispatch;
        if !(d.bound.is_finite() && d.bound >= 1.0) {
            return Err(bad("dispatch.bound", format!("{} is below 1.0", d.bound)));
        }
        for (key, v) in [
            ("connect_timeout", self.connect_timeout),
            ("response_timeout", self.response_timeout),
            ("keepalive_timeout", self.keepalive_timeout),
            ("pool_idle_timeout", self.pool_idle_timeout),
            ("shutdown_timeout", self.shutdown_timeout),
            ("health.interval", self.health.interval),
            ("health.timeout", self.health.timeout),
        ] {
            if v.is_zero() {
                return Err(bad(key, "must be longer than zero"));
            }
        }
        if self.health.rise == 0 || self.health.fall == 0 {
            return Err(bad("health.rise", "rise and fall must be at least 1"));
        }
        if let Some(p) = &self.health.path {
            if !p.starts_with('/') {
                return Err(bad("health.path", format!("`{p}` does not start with /")));
            }
        }
        policy::dispatch::build(&self.policy, self.backends.len(), &d.to_dispatch())
            .map(|_| ())
            .map_err(|e| bad("dispatch", e.to_string()))
    }

    /// Runtime threads in effect.
    pub fn effective_threads(&self) -> usize {
        self.threads.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
    }

    /// The admission bound for `up` back ends, if any.
    pub fn admission_limit(&self, up: usize) -> Option<usize> {
        match self.admission {
            Admission::Auto => Some(self.dispatch.to_dispatch().admission_limit(up)),
            Admission::Off => None,
            Admission::Limit(n) => Some(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> FrontConfig {
        FrontConfig {
            backends: vec!["127.0.0.1:8081".parse().unwrap()],
            ..FrontConfig::default()
        }
    }

    #[test]
    fn parses_every_key_and_writes_it_back() {
        let text = r#"
listen = "127.0.0.1:0"
admin = "127.0.0.1:9000"
backends = ["127.0.0.1:8081", "127.0.0.1:8082"]
policy = "ext-lard"
mechanism = "forward"
engine = "relay"
threads = 1
admission = 100
retries = 2
connect_timeout = "500ms"
response_timeout = "5s"
keepalive_timeout = "30s"
pool_idle_timeout = "10s"
pool_size = 64
shutdown_timeout = "2s"
access_log = "-"
[dispatch]
t_low = 10
t_high = 30
replica_ttl = "5s"
bound = 1.5
vnodes = 40
weights = [1, 2]
disk_busy = 2
[health]
interval = "200ms"
timeout = "100ms"
rise = 1
fall = 1
path = "/healthz"
"#;
        let c = FrontConfig::from_toml(text, "f.toml").unwrap();
        c.validate().unwrap();
        assert_eq!(c.backends.len(), 2);
        assert_eq!(c.mechanism, Mechanism::Forward);
        assert_eq!(c.engine, Engine::Relay);
        assert_eq!(c.admission, Admission::Limit(100));
        assert_eq!(c.response_timeout, Duration::from_secs(5));
        let d = c.dispatch.to_dispatch();
        assert_eq!((d.t_low, d.t_high, d.bound_permille), (10, 30, 1500));
        assert_eq!(d.replica_ttl, 5_000_000_000);
        assert_eq!(c.health.path.as_deref(), Some("/healthz"));
        let back = FrontConfig::from_toml(&c.to_toml(), "back.toml").unwrap();
        assert_eq!(back, c);
        assert_eq!(
            FrontConfig::from_toml(&valid().to_toml(), "d.toml").unwrap(),
            valid()
        );
    }

    #[test]
    fn no_back_end_is_a_clear_error() {
        let e = FrontConfig::default().validate().unwrap_err().to_string();
        assert!(e.contains("no back end") && e.contains("--backend"), "{e}");
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            ("connect_timeout = 1\n", "write"),
            ("policy = \"random\"\n", "policy"),
            ("mechanism = \"handoff\"\n", "mechanism"),
            ("engine = \"nginx\"\n", "engine"),
            ("admission = 0\n", "admission"),
            ("[dispatch]\nbound = 0.9\n", "dispatch.bound"),
            ("[dispatch]\nt_low = 70\n", "dispatch"),
            ("[health]\nrise = 0\n", "health.rise"),
            ("backends = [\"127.0.0.1:1\", \"127.0.0.1:1\"]\n", "twice"),
            ("colour = 1\n", "colour"),
        ] {
            let text = format!("backends = [\"127.0.0.1:8081\"]\n{text}");
            let text = if text.matches("backends").count() > 1 {
                text.lines().skip(1).collect::<Vec<_>>().join("\n")
            } else {
                text
            };
            let e = FrontConfig::from_toml(&text, "t.toml")
                .and_then(|c| c.validate().map(|_| c))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn admission_is_lards_bound_by_default() {
        let c = valid();
        assert_eq!(c.admission_limit(8), Some(7 * 65 + 24));
        assert_eq!("off".parse::<Admission>(), Ok(Admission::Off));
        assert!("-3".parse::<Admission>().is_err());
    }
}
