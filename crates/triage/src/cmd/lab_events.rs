//! `triage lab events`: seed 002 (cold connections, capacity predicted from CPU against rate)
//! on the real server beside nginx and lighttpd on epoll and poll. The flags and the work are
//! in `lab::events`; see docs/events.md.

use lab::events::EventsOpts;

use super::lab::{outcome, triage_bin};

/// Arguments of `triage lab events`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Seed 002: per server (triage, nginx, lighttpd-epoll, lighttpd-poll) and per \
cold count (0, 1k, 5k, 10k idle connections held), wrk measures the peak, then open-loop rates \
from 10% to 95% of what the open loop serves overloaded, and probes find where the server's CPU \
ran out; user, kernel and idle CPU of the server side against the rate are fitted (Tables 4/5, \
Fig. 9) and the idle line's X-intercept is compared with that saturation. The capacity runs \
request a 64 KiB page every server compresses per request, on a whole CPU without a quota \
(--page small: the 1 KiB file on a 20% quota); the cold connections and the pairs against the \
twin request the 1 KiB file, the pairs on --pairs-quota. triage capacity is then run on the \
servers' own access logs and CPU samples. Results: summary.json, raw.csv, report.html, cpu/, \
logs/."
)]
pub struct Args {
    #[command(flatten)]
    opts: EventsOpts,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut o = a.opts;
    o.triage_bin = triage_bin()?;
    o.command = lab::util::command_line();
    outcome(lab::events::run(&o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        let t = crate::cmd::parse_args::<Args>(&["--quick", "--cold", "0,100"]).unwrap();
        assert!(t.opts.quick);
        assert_eq!(t.opts.cold, Some(vec![0, 100]));
    }
}
