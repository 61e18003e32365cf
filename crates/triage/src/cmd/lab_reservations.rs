//! `triage lab reservations`: seed 000's CPU-reservation experiment (Fig. 4/5) on the real
//! server beside Apache httpd. The flags and the work are in `lab::reservations`; see
//! docs/cgi.md.

use lab::reservations::ReservationsOpts;

use super::lab::{outcome, triage_bin};

/// Arguments of `triage lab reservations`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Seed 000: two sites whose CGI computes half a million random numbers \
and returns 1 KB; the site of interest has 10 clients, the competing site 0..40. Scenarios: the \
site of interest reserves 50% (competitor 49%), 99%, both sites in one container; Apache httpd \
as time-sharing. Results: raw.csv, summary.json (reserved_kept_pct, apache_kept_pct), \
report.html."
)]
pub struct Args {
    #[command(flatten)]
    opts: ReservationsOpts,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut o = a.opts;
    o.triage_bin = triage_bin()?;
    o.command = lab::util::command_line();
    outcome(lab::reservations::run(&o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        let t = crate::cmd::parse_args::<Args>(&["--quota", "none", "--max-running", "3"]).unwrap();
        assert_eq!(t.opts.quota, lab::util::OrNone(None));
        assert_eq!(t.opts.max_running, lab::util::OrNone(Some(3)));
        assert!(crate::cmd::parse_args::<Args>(&["--cgi-slice", "200ms"]).is_err());
    }
}
