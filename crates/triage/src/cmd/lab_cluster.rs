//! `triage lab cluster`: seed 004's cluster (LARD on a real front end) beside HAProxy and
//! nginx on the same trace and back ends. The flags and the work are in `lab::cluster`; see
//! docs/cluster.md.

use lab::cluster::ClusterOpts;

use super::lab::{outcome, triage_bin};

/// Arguments of `triage lab cluster`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Seed 004: N triage serve back ends (bounded LRU cache, the LARD paper's \
emulated disk) behind triage front (wrr, lard, lard-r, ext-lard, chbl; pin and forward for \
persistent connections), HAProxy (roundrobin, leastconn, uri + consistent hash, balance factor \
125) and nginx (consistent URI hash, random two least_conn), wrk replaying the simulator's seeded \
trace or an access log (--log). Each point's hit ratio and balance are checked against the \
simulator on the same requests. Results: raw.csv, summary.json (lard_wrr_ratio, \
ext_lard_pconn_gain_pct, triage_vs_haproxy_best, front_cpu_per_req_vs_haproxy, \
failover_failed_requests, variants), report.html."
)]
pub struct Args {
    #[command(flatten)]
    opts: ClusterOpts,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut o = a.opts;
    o.triage_bin = triage_bin()?;
    o.command = lab::util::command_line();
    outcome(lab::cluster::run(&o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse() {
        let t =
            crate::cmd::parse_args::<Args>(&["--quick", "--zipf", "0.6", "--nodes", "2"]).unwrap();
        assert!(t.opts.quick);
        assert_eq!((t.opts.zipf, t.opts.nodes.clone()), (0.6, Some(vec![2])));
        assert!(crate::cmd::parse_args::<Args>(&["--cache", "3k"]).is_err());
    }
}
