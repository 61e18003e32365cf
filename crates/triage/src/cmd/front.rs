//! `triage front`: the LARD cluster front end (the `frontend` crate, on pingora). Flags
//! override the TOML file given with `--config`; `--emit ENGINE` prints the nearest HAProxy,
//! nginx or Envoy configuration instead of running. SIGTERM or SIGINT stops it gracefully;
//! SIGHUP reads the file again and applies its list of back ends.

use std::path::PathBuf;

use frontend::emit::Engine;
use frontend::{Front, FrontConfig, FrontError, Overrides};

use super::UsageError;

/// Arguments of `triage front`: the configuration file, what to print instead of running, and
/// the flags that override the file (each defined once, in `frontend::Overrides`).
#[derive(clap::Args, Debug, Default)]
pub struct Args {
    /// TOML configuration file (flags given here override it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the nearest configuration of another engine (haproxy, nginx or envoy) for the
    /// same listen address, back ends and policy, and exit.
    #[arg(long, value_name = "ENGINE")]
    pub emit: Option<Engine>,
    /// Print the configuration in effect as TOML (the file with the flags over it) and exit.
    #[arg(long)]
    pub print_config: bool,
    #[command(flatten)]
    pub overrides: Overrides,
}

/// The file (if any) with the flags laid over it, validated.
pub fn build_config(a: &Args) -> anyhow::Result<FrontConfig> {
    let mut c = match &a.config {
        Some(p) => FrontConfig::load(p).map_err(|e| UsageError(e.to_string()))?,
        None => FrontConfig::default(),
    };
    c.merge(&a.overrides);
    c.validate().map_err(|e| UsageError(e.to_string()))?;
    Ok(c)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let cfg = build_config(&args)?;
    if let Some(engine) = args.emit {
        print!("{}", frontend::emit::emit(&cfg, engine));
        return Ok(());
    }
    if args.print_config {
        print!("{}", cfg.to_toml());
        return Ok(());
    }
    os::heap::keep_freed_memory();
    let front = Front::start(cfg.clone()).map_err(|e| match e {
        FrontError::Config(c) => anyhow::Error::new(UsageError(c.to_string())),
        other => other.into(),
    })?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        // The handlers are in place before the address is printed: a script that signals
        // the front end once it has read the address never kills it by default action.
        let signals = Signals::install();
        println!(
            "triage front: http://{}/ -> {} back end(s), policy {}, mechanism {}, engine {}",
            front.addr(),
            cfg.backends.len(),
            cfg.policy,
            cfg.mechanism.name(),
            cfg.engine.name()
        );
        if let Some(a) = front.admin_addr() {
            println!("triage front: metrics at http://{a}/metrics");
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
        match signals {
            Some(s) => s.wait(&front, &args).await,
            // Without signal handlers it runs until killed.
            None => std::future::pending::<()>().await,
        }
    });
    front.stop();
    eprintln!("triage front: stopped");
    Ok(())
}

/// SIGTERM, SIGINT and SIGHUP, once their handlers are installed.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Option<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Some(Self {
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
        })
    }

    /// Until SIGTERM or SIGINT; on SIGHUP, the file's back ends replace the running ones.
    async fn wait(mut self, front: &Front, args: &Args) {
        loop {
            tokio::select! {
                _ = self.term.recv() => return,
                _ = self.int.recv() => return,
                _ = self.hup.recv() => match build_config(args) {
                    Ok(c) => {
                        let added = front.set_backends(&c.backends);
                        eprintln!(
                            "triage front: reloaded: {} back end(s), {} new (only the back \
                             ends are reloaded)",
                            c.backends.len(),
                            added.len()
                        );
                    }
                    Err(e) => {
                        eprintln!("triage front: reload refused, keeping the back ends: {e:#}")
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> anyhow::Result<FrontConfig> {
        build_config(&crate::cmd::parse_args::<Args>(args)?)
    }

    #[test]
    fn flags_override_the_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f.toml");
        std::fs::write(
            &p,
            "backends = [\"127.0.0.1:8081\"]\npolicy = \"chbl\"\n[dispatch]\nbound = 1.5\n",
        )
        .unwrap();
        let file = p.to_str().unwrap();
        let c = config(&["--config", file, "--policy", "lard"]).unwrap();
        assert_eq!(c.backends.len(), 1, "from the file");
        assert_eq!(c.dispatch.bound, 1.5, "from the file");
        assert_eq!(c.policy, "lard", "the flag wins");
        let c = config(&["--config", file, "--backend", "127.0.0.1:9"]).unwrap();
        assert_eq!(c.backends, vec!["127.0.0.1:9".parse().unwrap()]);
    }

    #[test]
    fn no_back_end_is_a_usage_error() {
        let e = config(&[]).unwrap_err();
        assert!(e.downcast_ref::<UsageError>().is_some());
        assert!(e.to_string().contains("--backend"), "{e}");
        assert!(crate::cmd::parse_args::<Args>(&["--emit", "traefik"]).is_err());
    }
}
