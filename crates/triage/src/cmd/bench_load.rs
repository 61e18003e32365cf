//! `triage bench load`: the load generator itself against wrk, both against nginx. The flags
//! and the work are in `lab::bench::load`; see docs/load.md.

use lab::bench::load::LoadOpts;

use super::lab::{outcome, triage_bin};

/// Arguments of `triage bench load`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: LoadOpts,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut o = a.opts;
    o.triage_bin = triage_bin()?;
    outcome(lab::bench::load::run(&o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        let t = crate::cmd::parse_args::<Args>(&["-d", "3s", "-c", "16"]).unwrap();
        assert_eq!(t.opts.duration, std::time::Duration::from_secs(3));
        assert!(crate::cmd::parse_args::<Args>(&["-d", "3"]).is_err());
    }
}
