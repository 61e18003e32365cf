//! Subcommands: one file each, holding its clap arguments and a `run` that calls the crates.

pub mod bench;
pub mod bench_load;
pub mod bench_static;
pub mod capacity;
pub mod front;
pub mod lab;
pub mod lab_cluster;
pub mod lab_containers;
pub mod lab_events;
pub mod lab_pos;
pub mod lab_reservations;
pub mod load;
pub mod pos;
pub mod pos_attach;
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

/// Tests: parse one subcommand's flags on their own (its `Args` as a bare command, no binary
/// name), after clap's own check of the definitions.
#[cfg(test)]
pub fn parse_args<A: clap::Args>(args: &[&str]) -> Result<A, clap::Error> {
    let cmd = A::augment_args(clap::Command::new("t").no_binary_name(true));
    cmd.clone().debug_assert();
    let mut m = cmd.try_get_matches_from(args)?;
    A::from_arg_matches_mut(&mut m)
}
