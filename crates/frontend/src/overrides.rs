//! Command-line overrides of a [`FrontConfig`]: every flag of `triage front` that sets a key,
//! each `None` (or empty) when not given. The binary flattens [`Overrides`] into its
//! arguments; [`FrontConfig::merge`] lays the given ones over a configuration (a file's, or
//! the defaults).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::{Admission, Engine, FrontConfig, Mechanism};

fn policy_help() -> String {
    format!(
        "Distribution policy: {}",
        policy::dispatch::REGISTRY
            .iter()
            .map(|e| format!("{} ({})", e.name, e.about))
            .collect::<Vec<_>>()
            .join("; ")
    )
}

/// The flags of `triage front` that override the configuration (docs/front.md).
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct Overrides {
    /// Address to serve clients on [default: 127.0.0.1:8000].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Admin address serving /metrics and /healthz (default: none).
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// A back end (repeat, in order; replaces the file's list).
    #[arg(long = "backend", value_name = "ADDR")]
    pub backends: Vec<SocketAddr>,
    /// Distribution policy (see `--help`) [default: lard].
    #[arg(long, long_help = policy_help())]
    pub policy: Option<String>,
    /// Persistent connections: `relay` (every request distributed, the default), `pin` (a
    /// connection stays on its first back end) or `forward` (pinned, and the back end fetches
    /// targets another one caches).
    #[arg(long)]
    pub mechanism: Option<Mechanism>,
    /// What relays the bytes: `relay` (the front end's own lean relay, the default) or
    /// `pingora`.
    #[arg(long)]
    pub engine: Option<Engine>,
    /// Runtime threads (default: CPUs this process may run on).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Requests let into the cluster at once: `auto` (LARD's bound), `off`, or a count.
    #[arg(long)]
    pub admission: Option<Admission>,
    /// Tries on another back end after a connection refused or reset before any response byte.
    #[arg(long)]
    pub retries: Option<usize>,
    /// LARD: a back end below this load is underloaded [default: 25].
    #[arg(long)]
    pub t_low: Option<u32>,
    /// LARD: a back end above this load is overloaded [default: 65].
    #[arg(long)]
    pub t_high: Option<u32>,
    /// LARD/R: a server set unchanged this long shrinks (e.g. 20s).
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub replica_ttl: Option<Duration>,
    /// CHBL: bound on a back end's load over the mean (e.g. 1.25).
    #[arg(long)]
    pub bound: Option<f64>,
    /// Extended LARD: disk reads queued at which a back end's disk is busy [default: 1].
    #[arg(long)]
    pub disk_busy: Option<u32>,
    /// Longest wait to connect to a back end (e.g. 1s).
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub connect_timeout: Option<Duration>,
    /// Longest silence of a back end while a response is awaited (e.g. 30s); then 504.
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub response_timeout: Option<Duration>,
    /// Idle time after which a client's connection is closed: between requests, or while it
    /// takes no byte of a response (e.g. 60s).
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub keepalive_timeout: Option<Duration>,
    /// Time between two health checks of a back end (e.g. 1s).
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub health_interval: Option<Duration>,
    /// Health check: GET this path and expect 200 (default: a TCP connection).
    #[arg(long, value_name = "PATH")]
    pub health_path: Option<String>,
    /// Write a Combined Log Format access log, with the back end, to FILE (`-` = stdout).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
}

impl FrontConfig {
    /// Lay the overrides that were given over this configuration. Call
    /// [`FrontConfig::validate`] afterwards.
    pub fn merge(&mut self, o: &Overrides) {
        if let Some(v) = o.listen {
            self.listen = v;
        }
        if o.admin.is_some() {
            self.admin = o.admin;
        }
        if !o.backends.is_empty() {
            self.backends = o.backends.clone();
        }
        if let Some(v) = &o.policy {
            self.policy = v.clone();
        }
        if let Some(v) = o.mechanism {
            self.mechanism = v;
        }
        if let Some(v) = o.engine {
            self.engine = v;
        }
        if o.threads.is_some() {
            self.threads = o.threads;
        }
        if let Some(v) = o.admission {
            self.admission = v;
        }
        if let Some(v) = o.retries {
            self.retries = v;
        }
        let d = &mut self.dispatch;
        if let Some(v) = o.t_low {
            d.t_low = v;
        }
        if let Some(v) = o.t_high {
            d.t_high = v;
        }
        if let Some(v) = o.replica_ttl {
            d.replica_ttl = v;
        }
        if let Some(v) = o.bound {
            d.bound = v;
        }
        if let Some(v) = o.disk_busy {
            d.disk_busy = v;
        }
        if let Some(v) = o.connect_timeout {
            self.connect_timeout = v;
        }
        if let Some(v) = o.response_timeout {
            self.response_timeout = v;
        }
        if let Some(v) = o.keepalive_timeout {
            self.keepalive_timeout = v;
        }
        if let Some(v) = o.health_interval {
            self.health.interval = v;
        }
        if o.health_path.is_some() {
            self.health.path = o.health_path.clone();
        }
        if o.access_log.is_some() {
            self.access_log = o.access_log.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};

    fn parse(args: &[&str]) -> Result<Overrides, clap::Error> {
        let cmd = Overrides::augment_args(clap::Command::new("t").no_binary_name(true));
        cmd.clone().debug_assert();
        Overrides::from_arg_matches(&cmd.try_get_matches_from(args)?)
    }

    fn merged(args: &[&str]) -> FrontConfig {
        let mut c = FrontConfig::default();
        c.merge(&parse(args).unwrap());
        c
    }

    #[test]
    fn no_flag_changes_nothing() {
        assert_eq!(merged(&[]), FrontConfig::default());
    }

    #[test]
    fn every_flag_lands_on_its_key() {
        let c = merged(&[
            "--listen=127.0.0.1:1",
            "--admin=127.0.0.1:2",
            "--backend=127.0.0.1:8081",
            "--backend=127.0.0.1:8082",
            "--policy=chbl",
            "--mechanism=pin",
            "--engine=relay",
            "--threads=1",
            "--admission=off",
            "--retries=5",
            "--t-low=5",
            "--t-high=9",
            "--replica-ttl=3s",
            "--bound=1.5",
            "--disk-busy=2",
            "--connect-timeout=200ms",
            "--response-timeout=2s",
            "--keepalive-timeout=4s",
            "--health-interval=300ms",
            "--health-path=/healthz",
            "--access-log=-",
        ]);
        assert_eq!(c.listen.port(), 1);
        assert_eq!(c.admin.map(|a| a.port()), Some(2));
        assert_eq!(c.backends.len(), 2);
        assert_eq!(c.policy, "chbl");
        assert_eq!(c.mechanism, Mechanism::Pin);
        assert_eq!(c.engine, Engine::Relay);
        assert_eq!(c.threads, Some(1));
        assert_eq!(c.admission, Admission::Off);
        assert_eq!(c.retries, 5);
        let d = &c.dispatch;
        assert_eq!((d.t_low, d.t_high, d.bound, d.disk_busy), (5, 9, 1.5, 2));
        assert_eq!(d.replica_ttl, Duration::from_secs(3));
        assert_eq!(c.connect_timeout, Duration::from_millis(200));
        assert_eq!(c.response_timeout, Duration::from_secs(2));
        assert_eq!(c.keepalive_timeout, Duration::from_secs(4));
        assert_eq!(c.health.interval, Duration::from_millis(300));
        assert_eq!(c.health.path.as_deref(), Some("/healthz"));
        assert_eq!(c.access_log, Some(PathBuf::from("-")));
        c.validate().unwrap();
    }

    #[test]
    fn durations_need_units() {
        for bad in [
            ["--connect-timeout", "5"],
            ["--replica-ttl", "20"],
            ["--mechanism", "handoff"],
            ["--admission", "0"],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }
}
