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

/// An error and its causes in one line, each said once: a message that already ends with its
/// cause's text (the library error types print their I/O error and chain it too) is not
/// followed by it again.
pub fn report(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !out.ends_with(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    out
}

/// Tests: parse one subcommand's flags on their own (its `Args` as a bare command, no binary
/// name), after clap's own check of the definitions.
#[cfg(test)]
pub fn parse_args<A: clap::Args>(args: &[&str]) -> Result<A, clap::Error> {
    let cmd = A::augment_args(clap::Command::new("t").no_binary_name(true));
    cmd.clone().debug_assert();
    let mut m = cmd.try_get_matches_from(args)?;
    A::from_arg_matches_mut(&mut m)
}

#[cfg(test)]
mod tests {
    use super::report;

    #[test]
    fn a_cause_the_message_already_ends_with_is_said_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::new(lab::LabError::io("reading", "/x/raw.csv", io()));
        assert_eq!(report(&e), "reading `/x/raw.csv`: no such file");
        // A cause the message does not carry is added, as `{:#}` would.
        let e = anyhow::Error::new(io()).context("opening the log");
        assert_eq!(report(&e), "opening the log: no such file");
    }
}
