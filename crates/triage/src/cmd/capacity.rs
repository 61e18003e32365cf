//! `triage capacity`: predict a server's peak request rate from its access log and CPU
//! samples (seed 002's regressions), and `triage capacity sample`, which records the samples.
//! The flags and the work are in `lab::capacity`; see docs/events.md.

use clap::Subcommand;
use lab::capacity::{AnalyzeOpts, CapacityError, SampleOpts};

use super::UsageError;

/// Arguments of `triage capacity`.
#[derive(clap::Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Seed 002 (Banga & Mogul): bucket the access log and CPU samples (15-minute \
buckets in the paper), fit idle %, kernel % and user % against the request rate (slope, \
intercept, r; over all buckets and above --low-rate-cut), and read the predicted peak rate off \
the idle line's X-intercept, with the headroom above the busiest bucket. A weak r is a warning, \
malformed log lines are counted and skipped, clocks that do not overlap and too few buckets are \
errors.\n\nFirst record CPU samples beside the server while it logs:\n  triage capacity sample \
--out cpu.csv --cgroup /sys/fs/cgroup/cpuacct/system.slice/nginx.service --interval 1s \
--duration 1h\nthen:\n  triage capacity --log /var/log/nginx/access.log --cpu cpu.csv --bucket \
1m --low-rate-cut 20\nA load test stepping its rate every few seconds: --steps 2s instead of --bucket (one \
bucket per step, read off the log; the steps must rise in rate: the fit ends at the first step \
that ran out of CPU or served less than an earlier one)."
)]
pub struct Args {
    #[command(subcommand)]
    sub: Option<Sub>,
    #[command(flatten)]
    analyze: AnalyzeOpts,
}

#[derive(Subcommand, Debug)]
enum Sub {
    /// Record CPU samples (user, system, idle) of the machine, a cgroup, a process or a
    /// triage server's /metrics, for `triage capacity --cpu`.
    Sample(SampleOpts),
}

fn outcome<T>(r: Result<T, CapacityError>) -> anyhow::Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(CapacityError::Config(m)) => Err(UsageError(m).into()),
        Err(e) => Err(e.into()),
    }
}

pub fn run(a: Args) -> anyhow::Result<()> {
    match a.sub {
        Some(Sub::Sample(o)) => outcome(lab::capacity::run_sample(&o)),
        None => outcome(lab::capacity::run_analyze(&a.analyze)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::parse_args;

    #[test]
    fn flags_parse() {
        let a =
            parse_args::<Args>(&["--log", "a.log", "--cpu", "c.csv", "--bucket", "1m"]).unwrap();
        assert_eq!(a.analyze.bucket, std::time::Duration::from_secs(60));
        assert!(a.sub.is_none() && !a.analyze.json);
        assert!(parse_args::<Args>(&["--log", "a.log"]).is_err());
        assert!(parse_args::<Args>(&["--log", "a", "--cpu", "c", "--bucket", "60"]).is_err());
        let a = parse_args::<Args>(&[
            "sample",
            "--out",
            "c.csv",
            "--pid",
            "1",
            "--interval",
            "500ms",
        ])
        .unwrap();
        match a.sub {
            Some(Sub::Sample(o)) => {
                assert_eq!(o.pid, Some(1));
                assert_eq!(o.interval, std::time::Duration::from_millis(500));
            }
            None => panic!("sample not parsed"),
        }
        assert!(
            parse_args::<Args>(&["sample", "--out", "c", "--pid", "1", "--cgroup", "/x"]).is_err()
        );
    }
}
