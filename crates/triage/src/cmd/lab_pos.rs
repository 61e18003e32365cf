//! `triage lab pos`: seed 001's experiments end to end on the real server, beside nginx and
//! Apache httpd (prefork). The flags and the work are in `lab::pos`; see docs/lab.md.

use lab::pos::PosOpts;

use super::lab::{outcome, triage_bin};

/// Arguments of `triage lab pos`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Experiments (seed 001): 1 = bursts of clicks beside a CPU hog, SLP \
fixed; 2 = random arrivals, SLP fixed; 3 = random arrivals, SLP (and RW) predicted; 4 = 3/6/9/12 \
browsers (PL/LRQ ratios, mean t1). Every experiment runs fifo, the pos variants, content, nginx \
and Apache prefork on the same testbed and load. Durations take a unit (500ms, 5s). Results: \
raw.csv, summary.json, report.html."
)]
pub struct Args {
    #[command(flatten)]
    opts: PosOpts,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut o = a.opts;
    o.triage_bin = triage_bin()?;
    o.command = lab::util::command_line();
    outcome(lab::pos::run(&o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        let t = crate::cmd::parse_args::<Args>(&["--exp", "3", "--quota", "15%", "--rw", "3,6"])
            .unwrap();
        assert_eq!((t.opts.exp, t.opts.quota), (3, Some(0.15)));
        assert_eq!(t.opts.rw, Some(vec![3, 6]));
        assert!(crate::cmd::parse_args::<Args>(&["--interval", "5"]).is_err());
    }

    /// The lab names a `--site cgi` variant's lever with the server's flags (the lab does not
    /// depend on the server crate): the two lists must be the same.
    #[test]
    fn the_labs_lever_flags_are_the_servers() {
        let server: Vec<&str> = server::config::CgiLever::FLAGS
            .iter()
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(lab::pos::cgi::LEVER_FLAGS.to_vec(), server);
        let default = lab::pos::cgi::lever_of_suffix(lab::pos::cgi::DEFAULT_LEVER_SUFFIX)
            .expect("the default's flags are the server's");
        assert!(
            default.parse::<server::config::CgiLever>().is_ok(),
            "{default}"
        );
    }
}
