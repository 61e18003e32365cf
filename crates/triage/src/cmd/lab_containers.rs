//! `triage lab containers`: seed 003's CGI experiment (Fig. 12/13) on the real server beside
//! Apache httpd (prefork + mod_cgi). The flags and the work are in `lab::containers`; see
//! docs/cgi.md.

use lab::containers::ContainersOpts;

use super::lab::{outcome, triage_bin};

/// Arguments of `triage lab containers`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Seed 003: static 1 KB throughput while 0..5 concurrent CGI requests \
each burn about 2 s of CPU; triage's CGI container unlimited, capped at 30% and at 10%; Apache \
httpd prefork + mod_cgi as the unmodified system. The server side runs on CPU 0, the load (wrk) \
on CPU 1. Results: raw.csv, summary.json (cap_error_pp, static_spread_pct_cap30), report.html."
)]
pub struct Args {
    #[command(flatten)]
    opts: ContainersOpts,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut o = a.opts;
    o.triage_bin = triage_bin()?;
    o.command = lab::util::command_line();
    outcome(lab::containers::run(&o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        let t = crate::cmd::parse_args::<Args>(&["--quota", "25%", "--caps", "30%,0.1"]).unwrap();
        assert_eq!(t.opts.quota, lab::util::OrNone(Some(0.25)));
        assert_eq!(t.opts.caps, vec![0.3, 0.1]);
        assert!(crate::cmd::parse_args::<Args>(&["--quota"]).is_err());
    }
}
