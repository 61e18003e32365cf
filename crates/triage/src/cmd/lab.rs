//! `triage lab`: the papers' experiments end to end. One file per lab (`lab_*.rs`).

use clap::Subcommand;

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
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.which {
        Which::Pos(a) => super::lab_pos::run(a),
        Which::Containers(a) => super::lab_containers::run(a),
        Which::Reservations(a) => super::lab_reservations::run(a),
    }
}
