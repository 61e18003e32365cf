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

/// How a lab emulates the network (`--net`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Net {
    /// Network namespaces + veth (+ tbf for the pos lab) when root, loopback otherwise.
    Auto,
    /// Network namespaces + veth (an error when impossible).
    Netns,
    /// Loopback (the pos lab throttles reading on the client side).
    Loopback,
}

impl From<Net> for lab::testbed::NetMode {
    fn from(n: Net) -> Self {
        match n {
            Net::Auto => Self::Auto,
            Net::Netns => Self::Netns,
            Net::Loopback => Self::Loopback,
        }
    }
}

/// A duration flag (`500ms`, `2s`).
pub fn dur(s: &str) -> Result<std::time::Duration, String> {
    lab::pos::parse_duration(s)
}

/// A CPU quota flag: a fraction or percent of one CPU.
pub fn quota(s: &str) -> Result<f64, String> {
    lab::pos::parse_quota(s)
}

/// A flag's value that may be `none`/`off`. (A field of type `Option<Option<T>>` would make
/// clap read a flag with an optional value and expect `T` from the parser.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrNone<T>(pub Option<T>);

/// A CPU quota flag that may also be `none`/`off`.
pub fn quota_or_none(s: &str) -> Result<OrNone<f64>, String> {
    match s {
        "none" | "off" => Ok(OrNone(None)),
        _ => quota(s).map(|q| OrNone(Some(q))),
    }
}

/// A count of at least 1, or `none`/`off`.
pub fn count_or_none(s: &str) -> Result<OrNone<usize>, String> {
    match s {
        "none" | "off" => Ok(OrNone(None)),
        _ => match s.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(OrNone(Some(n))),
            _ => Err(format!("{s:?}: give a count of at least 1, or `none`")),
        },
    }
}
