//! `triage serve`: the POS-scheduled web server. Flags override the TOML file given with
//! `--config`; with no arguments it serves a built-in demo site on 127.0.0.1:8080.

use std::path::PathBuf;

use server::{Config, Overrides};

use super::UsageError;

/// Arguments of `triage serve`: the configuration file and the flags that override it (each
/// defined once, in `server::Overrides`).
#[derive(clap::Args, Debug, Default)]
pub struct Args {
    /// TOML configuration file (flags given here override it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: Overrides,
}

/// The file (if any) with the flags laid over it, validated.
pub fn build_config(a: &Args) -> anyhow::Result<Config> {
    let mut c = match &a.config {
        Some(p) => Config::load(p).map_err(|e| UsageError(e.to_string()))?,
        None => Config::default(),
    };
    c.merge(&a.overrides);
    c.validate().map_err(|e| UsageError(e.to_string()))?;
    Ok(c)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let cfg = build_config(&args)?;
    os::heap::keep_freed_memory();
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
            "triage serve: http://{addr}/ ({what}), policy {}, {} slot(s), gate {}, arrivals seen every {} tick(s)",
            cfg.policy.name,
            cfg.effective_slots(),
            if cfg.gate { "on" } else { "off" },
            cfg.effective_event_interval()
        );
        if os::beneath::resolution() == os::beneath::Resolution::Walk {
            println!(
                "triage serve: openat2 is not available here: files are opened one path component at a time and every symlink under the root is refused"
            );
        }
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

    fn config(args: &[&str]) -> anyhow::Result<Config> {
        build_config(&crate::cmd::parse_args::<Args>(args)?)
    }

    #[test]
    fn flags_override_the_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("t.toml");
        std::fs::write(&p, "slots = 2\n[policy]\nname = \"pos\"\nrw = 5\n").unwrap();
        let file = p.to_str().unwrap();
        let c = config(&["--config", file, "--rw", "2"]).unwrap();
        assert_eq!(c.slots, Some(2), "from the file");
        assert_eq!(c.policy.name, "pos", "from the file");
        assert_eq!(
            c.policy.config.rw,
            policy::Tunable::Fixed(2),
            "the flag wins"
        );
        assert_eq!(config(&[]).unwrap(), Config::default());
    }

    #[test]
    fn event_interval_flag_sets_the_config() {
        assert_eq!(
            config(&["--event-interval", "8"]).unwrap().event_interval,
            Some(8)
        );
        assert!(config(&["--event-interval", "0"]).is_err());
    }
}
