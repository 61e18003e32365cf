//! `triage lab`: the papers' experiments end to end. One file per lab (`lab_*.rs`): its
//! arguments are the lab crate's option struct, flattened; the glue here is shared.

use clap::Subcommand;
use lab::LabError;

use super::UsageError;

/// Arguments of `triage lab`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    which: Which,
}

// Parsed once at start-up; boxing the larger variants would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Which {
    /// Seed 001: POS vs FIFO vs content priority vs nginx and Apache (t1/t2, PL/LRQ).
    Pos(super::lab_pos::Args),
    /// Seed 003: static throughput while CGI runs in a capped container.
    Containers(super::lab_containers::Args),
    /// Seed 000: a site's CPU reservation against a growing competing site.
    Reservations(super::lab_reservations::Args),
    /// Seed 002: cold connections and capacity predicted from CPU against the request rate.
    Events(super::lab_events::Args),
    /// Seed 004: LARD on triage front beside HAProxy and nginx, checked against the simulator.
    Cluster(super::lab_cluster::Args),
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.which {
        Which::Pos(a) => super::lab_pos::run(a),
        Which::Containers(a) => super::lab_containers::run(a),
        Which::Reservations(a) => super::lab_reservations::run(a),
        Which::Events(a) => super::lab_events::run(a),
        Which::Cluster(a) => super::lab_cluster::run(a),
    }
}

/// This binary: the labs run it as the server and the load generator. `TRIAGE_BIN` names
/// another way to start it (a wrapper that runs it through a carried dynamic loader, as
/// `scripts/device-pack.sh` makes, where the running executable is the loader).
pub fn triage_bin() -> anyhow::Result<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("TRIAGE_BIN").filter(|p| !p.is_empty()) {
        return Ok(p.into());
    }
    std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot locate the triage binary: {e}"))
}

/// A lab's outcome as the command's: a configuration mistake is a usage error (exit 2).
pub fn outcome<T>(r: lab::Result<T>) -> anyhow::Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(LabError::Config(m)) => Err(UsageError(m).into()),
        Err(e) => Err(e.into()),
    }
}
