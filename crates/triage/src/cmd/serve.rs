//! `triage serve`: the POS-scheduled web server. Flags override the TOML file given with
//! `--config`; with no arguments it serves a built-in demo site on 127.0.0.1:8080.

use std::net::SocketAddr;
use std::path::PathBuf;

use server::config::{self, Boost, Config};

use super::UsageError;

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

/// Arguments of `triage serve`.
#[derive(clap::Args, Debug, Default)]
pub struct Args {
    /// TOML configuration file (flags given here override it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
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
    #[arg(long, value_parser = config::parse_slp)]
    pub slp: Option<policy::Tunable<u64>>,
    /// POS run/wait change threshold: a count or `auto`.
    #[arg(long, value_parser = config::parse_rw)]
    pub rw: Option<policy::Tunable<u32>>,
    /// Rule for `--rw auto`: paper or split.
    #[arg(long, value_parser = config::parse_rw_rule)]
    pub rw_rule: Option<policy::registry::RwRule>,
    /// POS: order of the workers it does not put at the head: `fifo` (the paper: by ready
    /// time, so streaming workers take turns burst by burst) or `episode` (by when each
    /// worker's service episode began: first come, first served per response).
    #[arg(long, value_parser = config::parse_pos_tail)]
    pub pos_tail: Option<policy::registry::PosTail>,
    /// Policy prediction period (e.g. 500ms).
    #[arg(long, value_parser = config::parse_duration)]
    pub period: Option<std::time::Duration>,
    /// Longest time a ready worker may be overtaken, or `off`.
    #[arg(long, value_parser = starvation_bound)]
    pub starvation_bound: Option<super::lab::OrNone<std::time::Duration>>,
    /// CPU slots of the gate (default: CPUs this process may run on).
    #[arg(long)]
    pub slots: Option<usize>,
    /// Runtime threads (default: as many as slots).
    #[arg(long)]
    pub threads: Option<usize>,
    /// `on` (default) or `off`: bypass the gate entirely (benchmark baseline).
    #[arg(long, value_parser = ["on", "off"])]
    pub gate: Option<String>,
    /// Scheduling rounds: `auto` (default: on for policies that reorder, off for fifo), `on`
    /// (the policy chooses among every worker ready at once) or `off` (the first to ask runs).
    #[arg(long)]
    pub rounds: Option<server::config::Rounds>,
    /// Runtime ticks between two looks at readiness events (default: 1 when rounds are on,
    /// tokio's 61 otherwise): how soon an arrived request can join the ready queue.
    #[arg(long)]
    pub event_interval: Option<u32>,
    /// Body chunk size, one burst each (e.g. 16KiB).
    #[arg(long, value_parser = config::parse_size)]
    pub chunk: Option<u64>,
    /// Most bytes of the first burst of a static response longer than one chunk (e.g. 4KiB,
    /// the default; at most the chunk): a short first burst sends the head sooner and costs
    /// less at the queue's head. A response that fits in one chunk is one burst.
    #[arg(long, value_parser = config::parse_size)]
    pub first_chunk: Option<u64>,
    /// SO_SNDBUF of accepted sockets (e.g. 64KiB).
    #[arg(long, value_parser = config::parse_size)]
    pub sndbuf: Option<u64>,
    /// Raise the kernel priority of a marked worker's burst: `nice` (a larger weight), `slice`
    /// (a short fair-scheduler slice: picked first, same share) or `off`.
    #[arg(long)]
    pub boost: Option<Boost>,
    /// Write the worker log (JSON lines) to FILE.
    #[arg(long, value_name = "FILE")]
    pub pfs_log: Option<PathBuf>,
    /// Write a Combined Log Format access log to FILE (`-` = stdout).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Most simultaneous connections; more are answered 503 and closed.
    #[arg(long)]
    pub max_conns: Option<usize>,
    /// Time allowed to send a request head (also the wait for a new connection's first request).
    #[arg(long, value_parser = config::parse_duration)]
    pub header_timeout: Option<std::time::Duration>,
    /// Idle time after which a keep-alive connection is closed.
    #[arg(long, value_parser = config::parse_duration)]
    pub keepalive_timeout: Option<std::time::Duration>,
    /// Time a response may go without the client reading anything.
    #[arg(long, value_parser = config::parse_duration)]
    pub send_timeout: Option<std::time::Duration>,
    /// Compress responses on the fly when the client accepts gzip (types from the config file).
    #[arg(long)]
    pub gzip: bool,
    /// gzip level 0..=9 (implies --gzip).
    #[arg(long)]
    pub gzip_level: Option<u32>,
}

/// Merge the file (if any) and the flags.
pub fn build_config(a: &Args) -> anyhow::Result<Config> {
    let mut c = match &a.config {
        Some(p) => Config::load(p).map_err(|e| UsageError(e.to_string()))?,
        None => Config::default(),
    };
    macro_rules! set {
        ($($f:ident),*) => { $( if let Some(v) = a.$f.clone() { c.$f = v.into(); } )* };
    }
    set!(listen, policy, slp, rw, rw_rule, pos_tail, period, boost);
    if let Some(b) = a.starvation_bound {
        c.starvation_bound = b.0;
    }
    set!(
        chunk,
        max_conns,
        header_timeout,
        keepalive_timeout,
        send_timeout
    );
    if a.root.is_some() {
        c.root = a.root.clone();
    }
    if a.admin.is_some() {
        c.admin = a.admin;
    }
    if a.slots.is_some() {
        c.slots = a.slots;
    }
    if a.threads.is_some() {
        c.threads = a.threads;
    }
    if a.first_chunk.is_some() {
        c.first_chunk = a.first_chunk;
    }
    if a.sndbuf.is_some() {
        c.sndbuf = a.sndbuf;
    }
    if a.pfs_log.is_some() {
        c.pfs_log = a.pfs_log.clone();
    }
    if a.access_log.is_some() {
        c.access_log = a.access_log.clone();
    }
    if let Some(g) = &a.gate {
        c.gate = g == "on";
    }
    if let Some(r) = a.rounds {
        c.rounds = r;
    }
    if a.event_interval.is_some() {
        c.event_interval = a.event_interval;
    }
    if a.gzip {
        c.gzip.enabled = true;
    }
    if let Some(l) = a.gzip_level {
        c.gzip.enabled = true;
        c.gzip.level = l;
    }
    c.validate().map_err(|e| UsageError(e.to_string()))?;
    Ok(c)
}

/// `--starvation-bound`: a duration or `off`.
fn starvation_bound(s: &str) -> Result<super::lab::OrNone<std::time::Duration>, String> {
    config::parse_opt_duration(s).map(super::lab::OrNone)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let cfg = build_config(&args)?;
    let rt = server::runtime(&cfg)?;
    rt.block_on(async move {
        let srv = server::Server::bind(cfg.clone()).await?;
        let addr = srv.local_addr();
        let what = match (&cfg.root, cfg.sites.len()) {
            (None, 0) => "the built-in demo site".to_string(),
            (Some(r), _) => r.display().to_string(),
            (None, n) => format!("{n} site(s)"),
        };
        println!(
            "triage serve: http://{addr}/ ({what}), policy {}, {} slot(s), gate {}",
            cfg.policy,
            cfg.effective_slots(),
            if cfg.gate { "on" } else { "off" }
        );
        if let Some(a) = srv.admin_addr() {
            println!("triage serve: metrics at http://{a}/metrics");
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
        srv.run(shutdown_signal()).await?;
        eprintln!("triage serve: stopped");
        anyhow::Ok(())
    })
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the server runs until killed.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> Config {
        build_config(&crate::cmd::parse_args::<Args>(args).unwrap()).unwrap()
    }

    #[test]
    fn starvation_bound_takes_a_duration_or_off() {
        // A field of type Option<Option<Duration>> made clap panic on this flag.
        assert_eq!(
            config(&["--starvation-bound", "off"]).starvation_bound,
            None
        );
        assert_eq!(
            config(&["--starvation-bound=2s"]).starvation_bound,
            Some(std::time::Duration::from_secs(2))
        );
        assert_eq!(
            config(&[]).starvation_bound,
            Config::default().starvation_bound
        );
        assert!(crate::cmd::parse_args::<Args>(&["--starvation-bound", "soon"]).is_err());
    }

    #[test]
    fn event_interval_flag_sets_the_config() {
        assert_eq!(config(&["--event-interval", "8"]).event_interval, Some(8));
        assert_eq!(config(&[]).event_interval, None);
        assert!(
            build_config(&crate::cmd::parse_args::<Args>(&["--event-interval", "0"]).unwrap())
                .is_err()
        );
    }
}
