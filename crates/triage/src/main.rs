//! `triage`: one binary, one subcommand per job. Each subcommand lives in its own file under
//! `cmd/` (arguments + glue to the library crates); the work itself is in the crates.

use clap::{Parser, Subcommand};

mod cmd;

/// mimalloc: with ten thousand parked connections glibc's allocator cost `triage serve` 14%
/// more CPU per request than with none; mimalloc's per-thread pages do not (`os::heap`,
/// docs/results-log.md). The server's trimmer hands its free pages back when a crowd has left.
#[global_allocator]
static ALLOC: os::heap::Allocator = os::heap::Allocator;

/// A web server, cluster front end and evaluation lab that decides who is served first.
#[derive(Parser)]
#[command(name = "triage", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve static files (and CGI) through the policy-ordered CPU gate.
    Serve(cmd::serve::Args),
    /// Run the LARD cluster front end (a reverse proxy on pingora) before back ends.
    Front(cmd::front::Args),
    /// Emulate browsers against a server and measure what users feel (t1, t2).
    Load(cmd::load::Args),
    /// Reproduce the papers' experiments end to end on the real server, beside real peers.
    Lab(cmd::lab::Args),
    /// POS for processes triage did not start (`pos attach`).
    Pos(cmd::pos::Args),
    /// Run the deterministic simulator (virtual time, the same policy code).
    Sim(cmd::sim::Args),
    /// Benchmarks that print ratios against a peer measured in the same run.
    Bench(cmd::bench::Args),
    /// Predict a server's peak rate from its access log and CPU samples (seed 002).
    Capacity(cmd::capacity::Args),
}

fn main() {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TRIAGE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal, never into a file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let res = match cli.cmd {
        Cmd::Serve(a) => cmd::serve::run(a),
        Cmd::Front(a) => cmd::front::run(a),
        Cmd::Load(a) => cmd::load::run(a),
        Cmd::Lab(a) => cmd::lab::run(a),
        Cmd::Pos(a) => cmd::pos::run(a),
        Cmd::Sim(a) => cmd::sim::run(a),
        Cmd::Bench(a) => cmd::bench::run(a),
        Cmd::Capacity(a) => cmd::capacity::run(a),
    };
    if let Err(e) = res {
        eprintln!("triage: error: {}", cmd::report(&e));
        let code = if e.downcast_ref::<cmd::UsageError>().is_some() {
            2
        } else {
            1
        };
        std::process::exit(code);
    }
}
