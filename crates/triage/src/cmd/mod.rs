//! Subcommands: one file each, holding its clap arguments and a `run` that calls the crates.

pub mod bench;
pub mod bench_load;
pub mod bench_static;
pub mod lab;
pub mod lab_containers;
pub mod lab_pos;
pub mod lab_reservations;
pub mod load;
pub mod serve;
pub mod sim;

/// A mistake in what the user asked for (bad URL, inconsistent flags): exit code 2, as clap
/// uses for its own usage errors.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}
