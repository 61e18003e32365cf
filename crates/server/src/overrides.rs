//! Command-line overrides of a [`Config`]: every flag of `triage serve` but `--config`, each
//! `None` (or `false`) when not given. The binary flattens [`Overrides`] into its arguments,
//! so each flag, its help and its parser are written here once; the defaults are
//! [`Config::default`]'s. [`Config::merge`] lays the given ones over a configuration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use policy::registry::{PosTail, RwRule};
use policy::{Nanos, Tunable};

use crate::body_cache::Eviction;
use crate::config::{Boost, CgiLever, Config, Rounds};
use crate::disk::DiskKind;

/// A duration or `off` (`--starvation-bound`). A type of its own because clap reads an
/// `Option<Option<_>>` field as a flag whose value may be left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationOrOff(pub Option<Duration>);

impl std::str::FromStr for DurationOrOff {
    type Err = units::UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        units::parse_opt_duration(s).map(DurationOrOff)
    }
}

fn policy_help() -> String {
    format!(
        "Ready-queue policy: {}",
        policy::registry::REGISTRY
            .iter()
            .map(|e| format!("{} ({})", e.name, e.about))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn nanos(d: Duration) -> Nanos {
    d.as_nanos() as Nanos
}

/// The flags of `triage serve` that override the configuration (docs/server.md).
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct Overrides {
    /// Document root of the default site (default: the built-in demo site).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Address to serve HTTP on [default: 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Admin address serving /metrics, /samples, /healthz (default: none).
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// Ready-queue policy (see `--help` for the list) [default: fifo].
    #[arg(long, long_help = policy_help())]
    pub policy: Option<String>,
    /// POS long-wait threshold: a duration (e.g. 200ms) or `auto`.
    #[arg(long, value_parser = policy::registry::parse_slp)]
    pub slp: Option<Tunable<Nanos>>,
    /// POS run/wait change threshold: a count or `auto`.
    #[arg(long, value_parser = policy::registry::parse_rw)]
    pub rw: Option<Tunable<u32>>,
    /// With `--slp auto`: the smallest SLP a prediction may set (e.g. 10ms) [default: 0s, seed
    /// 001's rule as written; docs/policy.md, "SLP floor"].
    #[arg(long, value_parser = units::parse_duration)]
    pub slp_floor: Option<Duration>,
    /// Rule for `--rw auto`: paper or split.
    #[arg(long)]
    pub rw_rule: Option<RwRule>,
    /// POS: order of the workers it does not put at the head: `fifo` (the paper: by ready
    /// time, so streaming workers take turns burst by burst) or `episode` (by when each
    /// worker's service episode began: first come, first served per response).
    #[arg(long)]
    pub pos_tail: Option<PosTail>,
    /// Policy prediction period (e.g. 500ms).
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub period: Option<Duration>,
    /// Longest time a ready worker may be overtaken (e.g. 200ms), or `off`.
    #[arg(long)]
    pub starvation_bound: Option<DurationOrOff>,
    /// CPU slots of the gate (default: CPUs this process may run on).
    #[arg(long)]
    pub slots: Option<usize>,
    /// Runtime threads (default: as many as slots).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Time slice of a gate streak: a worker that did not really wait continues without a
    /// scheduling round this long (e.g. 1ms; 0s: off).
    #[arg(long, value_parser = units::parse_duration)]
    pub streak_slice: Option<Duration>,
    /// Lanes of the gate: per-core ready queues (default: one per runtime thread, at most one
    /// per slot; 1: one shared ready queue).
    #[arg(long)]
    pub lanes: Option<usize>,
    /// `on` (default) or `off`: bypass the gate entirely (benchmark baseline).
    #[arg(long, value_parser = on_off())]
    pub gate: Option<bool>,
    /// Scheduling rounds: `auto` (default: on for policies that reorder, off for fifo), `on`
    /// (the policy chooses among every worker ready at once) or `off` (the first to ask runs).
    #[arg(long)]
    pub rounds: Option<Rounds>,
    /// `on` (default) or `off`: a connection woken while its lane is busy waits in the policy's
    /// ready queue instead of being polled to find the slot taken (with rounds, for policies
    /// that do not order by the request: docs/server.md, "Queueing at the wake-up").
    #[arg(long, value_parser = on_off())]
    pub wake_queue: Option<bool>,
    /// Runtime ticks between two looks at readiness events (default with rounds on: 1 under a
    /// CPU cap below one CPU per slot, else 8; tokio's 61 with rounds off): how soon an
    /// arrived request can join the ready queue.
    #[arg(long)]
    pub event_interval: Option<u32>,
    /// Body chunk size, one burst each (e.g. 16KiB).
    #[arg(long, value_parser = units::parse_size)]
    pub chunk: Option<u64>,
    /// Most bytes of the first burst of a static response longer than one chunk (e.g. 4KiB,
    /// the default; at most the chunk): a short first burst sends the head sooner and costs
    /// less at the queue's head. A response that fits in one chunk is one burst.
    #[arg(long, value_parser = units::parse_size)]
    pub first_chunk: Option<u64>,
    /// SO_SNDBUF of accepted sockets (e.g. 64KiB).
    #[arg(long, value_parser = units::parse_size)]
    pub sndbuf: Option<u64>,
    /// Raise the kernel priority of a marked worker's burst: `nice` (a larger weight while a
    /// marked worker waits or runs), `slice` (a short fair-scheduler slice: picked first, same
    /// share), `rest` (the threads stay raised, asleep or awake, except while they run a burst
    /// the policy did not mark) or `off`.
    #[arg(long)]
    pub boost: Option<Boost>,
    /// Nice value of `--boost nice` and `--boost rest` (-20..=19; default -10).
    #[arg(long, allow_hyphen_values = true)]
    pub boost_nice: Option<i32>,
    /// Write the worker log (JSON lines) to FILE.
    #[arg(long, value_name = "FILE")]
    pub pfs_log: Option<PathBuf>,
    /// Write a Combined Log Format access log to FILE (`-` = stdout).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Most simultaneous connections: at the limit the oldest idle ones are closed to make
    /// room; when none is idle, newcomers are answered 503 and closed.
    #[arg(long)]
    pub max_conns: Option<usize>,
    /// Record the run of the CGI scripts in FILE, so that a server started after a crash
    /// kills what they left (default: a file named after --listen in the runtime directory).
    #[arg(long, value_name = "FILE")]
    pub cgi_state: Option<PathBuf>,
    /// Kernel lever of CGI scripts: `off`, or `nice` (a script started for a request of a
    /// worker the policy marks runs at nice -20 until its worker loses the mark; needs root)
    /// followed by `+`-joined flags: budget, tail, tailyield, order, newest, threads,
    /// textbelow, back (docs/kpos.md), e.g. `nice+budget+tailyield+threads+back`.
    #[arg(long, value_name = "LEVER")]
    pub cgi_lever: Option<CgiLever>,
    /// Time allowed to send a request head (also the wait for a new connection's first
    /// request), e.g. 10s.
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub header_timeout: Option<Duration>,
    /// Idle time after which a keep-alive connection is closed (e.g. 15s).
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub keepalive_timeout: Option<Duration>,
    /// Time a response may go without the client reading anything (e.g. 60s).
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub send_timeout: Option<Duration>,
    /// How long a kept-alive connection stays ready for its next request before it is parked
    /// as a bare socket (e.g. 50ms; 0s parks it as soon as a response ends).
    #[arg(long, value_parser = units::parse_duration)]
    pub park_after: Option<Duration>,
    /// Compress responses on the fly when the client accepts gzip (types from the config file).
    #[arg(long)]
    pub gzip: bool,
    /// gzip level 0..=9 (implies --gzip).
    #[arg(long)]
    pub gzip_level: Option<u32>,
    /// Files up to this size are kept in the content cache (e.g. 256KiB; 0 = none).
    #[arg(long, value_parser = units::parse_size)]
    pub cache_max_file: Option<u64>,
    /// Memory of the content cache, all files together (e.g. 64MiB).
    #[arg(long, value_parser = units::parse_size)]
    pub cache_budget: Option<u64>,
    /// What the full content cache drops: `clear` (everything, the default), `lru` (least
    /// recently used first) or `gds` (GreedyDual-Size).
    #[arg(long)]
    pub cache_policy: Option<Eviction>,
    /// Emulated disk for content-cache misses: `off` or `lard` (the LARD papers' model:
    /// 28 ms + 410 us per 4 KB + 14 ms per further 44 KB).
    #[arg(long)]
    pub disk: Option<DiskKind>,
    /// Multiply the emulated disk's times (e.g. 0.1 for ten times faster).
    #[arg(long)]
    pub disk_scale: Option<f64>,
    /// Honour X-Triage-Forward (back-end forwarding) from this address (repeat for more).
    #[arg(long, value_name = "IP")]
    pub forward_from: Vec<std::net::IpAddr>,
    /// A back end this server may fetch forwarded requests from (repeat for more).
    #[arg(long, value_name = "ADDR")]
    pub forward_peer: Vec<SocketAddr>,
}

impl Config {
    /// Lay the overrides that were given over this configuration. Call
    /// [`Config::validate`] afterwards.
    pub fn merge(&mut self, o: &Overrides) {
        /// `Some(v)` replaces the field.
        macro_rules! replace {
            ($($field:ident),*) => { $( if let Some(v) = &o.$field { self.$field = v.clone(); } )* };
        }
        /// `Some(v)` sets the optional field.
        macro_rules! set {
            ($($field:ident),*) => { $( if o.$field.is_some() { self.$field = o.$field.clone(); } )* };
        }
        replace!(listen, gate, rounds, wake_queue, chunk, boost, boost_nice, max_conns, cgi_lever);
        replace!(
            header_timeout,
            keepalive_timeout,
            send_timeout,
            park_after,
            streak_slice
        );
        set!(
            root,
            admin,
            slots,
            threads,
            lanes,
            event_interval,
            first_chunk,
            sndbuf
        );
        set!(pfs_log, access_log, cgi_state);
        let p = &mut self.policy;
        if let Some(name) = &o.policy {
            p.name = name.clone();
        }
        if let Some(v) = o.slp {
            p.config.slp = v;
        }
        if let Some(v) = o.rw {
            p.config.rw = v;
        }
        if let Some(v) = o.rw_rule {
            p.config.rw_rule = v;
        }
        if let Some(v) = o.slp_floor {
            p.config.slp_floor = nanos(v);
        }
        if let Some(v) = o.pos_tail {
            p.config.pos_tail = v;
        }
        if let Some(v) = o.period {
            p.config.period = nanos(v);
        }
        if let Some(DurationOrOff(v)) = o.starvation_bound {
            p.config.starvation_bound = v.map(nanos);
        }
        if o.gzip {
            self.gzip.enabled = true;
        }
        if let Some(l) = o.gzip_level {
            self.gzip.enabled = true;
            self.gzip.level = l;
        }
        replace!(cache_max_file, cache_budget, cache_policy);
        if let Some(d) = o.disk {
            self.disk.model = d;
        }
        if let Some(x) = o.disk_scale {
            self.disk.scale = x;
        }
        if !o.forward_from.is_empty() {
            self.forward.from = o.forward_from.clone();
        }
        if !o.forward_peer.is_empty() {
            self.forward.peers = o.forward_peer.clone();
        }
    }
}

/// The parser of a switch given as `on` or `off` (nginx's spelling).
fn on_off() -> impl clap::builder::TypedValueParser<Value = bool> {
    clap::builder::TypedValueParser::map(
        clap::builder::PossibleValuesParser::new(["on", "off"]),
        |s| s == "on",
    )
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

    fn merged(args: &[&str]) -> Config {
        let mut c = Config::default();
        c.merge(&parse(args).unwrap());
        c
    }

    #[test]
    fn no_flag_changes_nothing() {
        assert_eq!(merged(&[]), Config::default());
    }

    #[test]
    fn every_flag_lands_on_its_key() {
        let c = merged(&[
            "--root=/srv",
            "--listen=127.0.0.1:1",
            "--admin=127.0.0.1:2",
            "--policy=pos",
            "--slp=200ms",
            "--rw=auto",
            "--rw-rule=split",
            "--pos-tail=episode",
            "--period=1s",
            "--starvation-bound=off",
            "--slp-floor=10ms",
            "--slots=2",
            "--threads=1",
            "--gate=off",
            "--rounds=on",
            "--event-interval=8",
            "--chunk=8KiB",
            "--first-chunk=1024",
            "--sndbuf=64KB",
            "--boost=slice",
            "--boost-nice=-20",
            "--pfs-log=p.jsonl",
            "--access-log=-",
            "--max-conns=7",
            "--header-timeout=1s",
            "--keepalive-timeout=2s",
            "--send-timeout=3s",
            "--gzip-level=1",
            "--cache-max-file=1MiB",
            "--cache-budget=32MiB",
            "--cache-policy=lru",
            "--disk=lard",
            "--disk-scale=0.1",
            "--forward-from=127.0.0.1",
            "--forward-peer=127.0.0.1:8081",
            "--forward-peer=127.0.0.1:8082",
        ]);
        let p = &c.policy.config;
        assert_eq!(c.root, Some(PathBuf::from("/srv")));
        assert_eq!(c.listen.port(), 1);
        assert_eq!(c.admin.map(|a| a.port()), Some(2));
        assert_eq!(c.policy.name, "pos");
        assert_eq!(p.slp, Tunable::Fixed(200_000_000));
        assert_eq!(p.rw, Tunable::Auto);
        assert_eq!(p.rw_rule, RwRule::Split);
        assert_eq!(p.pos_tail, PosTail::Episode);
        assert_eq!(p.period, 1_000_000_000);
        assert_eq!(p.starvation_bound, None);
        assert_eq!(p.slp_floor, 10_000_000);
        assert_eq!((c.slots, c.threads), (Some(2), Some(1)));
        assert!(!c.gate);
        assert_eq!(c.rounds, Rounds::On);
        assert_eq!(c.event_interval, Some(8));
        assert_eq!(
            (c.chunk, c.first_chunk, c.sndbuf),
            (8192, Some(1024), Some(64_000))
        );
        assert_eq!((c.boost, c.boost_nice), (Boost::Slice, -20));
        assert_eq!(c.pfs_log, Some(PathBuf::from("p.jsonl")));
        assert_eq!(c.access_log, Some(PathBuf::from("-")));
        assert_eq!(c.max_conns, 7);
        assert_eq!(
            (c.header_timeout, c.keepalive_timeout, c.send_timeout),
            (
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(3)
            )
        );
        assert!(c.gzip.enabled);
        assert_eq!(c.gzip.level, 1);
        assert_eq!((c.cache_max_file, c.cache_budget), (1 << 20, 32 << 20));
        assert_eq!(c.cache_policy, Eviction::Lru);
        assert_eq!((c.disk.model, c.disk.scale), (DiskKind::Lard, 0.1));
        assert_eq!(c.forward.from.len(), 1);
        assert_eq!(c.forward.peers.len(), 2);
        c.validate().unwrap();
    }

    #[test]
    fn starvation_bound_takes_a_duration_or_off() {
        assert_eq!(
            merged(&["--starvation-bound=2s"])
                .policy
                .config
                .starvation_bound,
            Some(2_000_000_000)
        );
        assert!(parse(&["--starvation-bound", "soon"]).is_err());
    }

    #[test]
    fn flags_need_units_and_refuse_zero_timeouts() {
        for bad in [
            ["--period", "500"],
            ["--keepalive-timeout", "15"],
            ["--header-timeout", "0s"],
            ["--chunk", "16k"],
            ["--gate", "maybe"],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
        assert!(merged(&["--gzip"]).gzip.enabled);
        let mut off = Config {
            gate: false,
            ..Config::default()
        };
        off.merge(&parse(&["--gate=on"]).unwrap());
        assert!(off.gate);
    }
}
