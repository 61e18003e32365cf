//! `triage bench static`: triage against nginx on one static file, both pinned to one CPU with
//! one worker/slot, wrk on the other. The flags and the work are in `lab::bench::static_files`;
//! see docs/server.md.

use lab::bench::static_files::StaticOpts;

use super::lab::{outcome, triage_bin};

/// Arguments of `triage bench static`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: StaticOpts,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut o = a.opts;
    o.triage_bin = triage_bin()?;
    outcome(lab::bench::static_files::run(&o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        let t = crate::cmd::parse_args::<Args>(&["--duration", "1s", "--gzip", "6"]).unwrap();
        assert_eq!(t.opts.duration, std::time::Duration::from_secs(1));
        assert_eq!(t.opts.gzip, Some(6));
        assert!(crate::cmd::parse_args::<Args>(&["--duration", "1"]).is_err());
    }
}
