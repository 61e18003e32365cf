//! `triage bench`: benchmarks that print ratios against a peer or baseline measured in the same
//! run. One file per benchmark (`bench_*.rs`); the work is in `lab::bench`.

use clap::Subcommand;

/// Arguments of `triage bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    which: Which,
}

#[derive(Subcommand, Debug)]
enum Which {
    /// triage vs nginx on a 1 KB static file (req/s, p99), gate cost, idle-connection cost.
    Static(super::bench_static::Args),
    /// triage load vs wrk against nginx on a 1 KB file (req/s of the load generator itself).
    Load(super::bench_load::Args),
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.which {
        Which::Static(a) => super::bench_static::run(a),
        Which::Load(a) => super::bench_load::run(a),
    }
}
