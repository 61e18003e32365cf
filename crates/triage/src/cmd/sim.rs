//! `triage sim`: the deterministic simulator (virtual time, the same policy code as the server).
//! Each scenario prints a table, or with `--json` one JSON document on stdout; progress lines go
//! to stderr. Parameters and their sources: `docs/sim.md`.

use std::io::IsTerminal;
use std::time::Duration;

use clap::Subcommand;
use sim::fig1::Fig1Config;
use sim::options::{LardOptions, PosOptions};
use units::Dur;

use crate::cmd::UsageError;

/// Arguments of `triage sim`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand, Debug)]
enum Scenario {
    /// Seed 001 Fig. 1: A needs 3.4 s, B 2.1 s of CPU, quantum 1 s. Timesharing gives A 5.5 s
    /// and B 4.1 s; the delayed-switch POS (policy `delayed`, the paper's ref. [19]) delays the
    /// switch by the predicted 0.1 s: B 3.1 s, A 5.5 s.
    #[command(name = "pos-fig1", after_long_help = FIG1_SOURCES)]
    PosFig1(Fig1Args),
    /// Seed 001 experiments 1-4 on a simulated 1999 testbed: Apache 1.2.5 prefork on a 233 MHz
    /// AMD-K6 (BSD/OS 2.1, 4.4BSD-like timesharing, 100 ms quantum, buffer cache disabled),
    /// 10 Mb/s Ethernet, Netscape-3 browsers (HTML, then images over up to 4 connections).
    /// Defaults are the paper's: 9 browsers (3 machines x 3), 30 s interval, SLP 20 s fixed
    /// (exp 1, 2) or predicted every 500 ms (exp 3, 4), RW 1..10, CPU hog in exp 1, 5 trials,
    /// exp 4 with 3, 6, 9, 12 browsers.
    #[command(after_long_help = POS_SOURCES)]
    Pos(Box<PosArgs>),
    /// Seed 004 (LARD): a trace-driven cluster of N back ends with LRU file caches behind a
    /// front end distributing requests by WRR, LARD, LARD/R or bounded-load consistent hashing;
    /// then persistent connections (P-HTTP) with extended LARD and the mechanisms, the front
    /// end's CPU and how many back ends it feeds, and seed 004's numbers beside ours.
    #[command(after_long_help = sim::options::LARD_SOURCES)]
    Lard(Box<LardArgs>),
    /// Events per second of the engine and of the scenarios' models (release build).
    Bench(BenchArgs),
}

const FIG1_SOURCES: &str = "\
Sources: seed 001 §2 Fig. 1 (A 3.4 s, B 2.1 s, quantum 1 s, same priority; timesharing A 5.5 s,
B 4.1 s; delayed switch B 3.1 s). Policies: `timeshare` (4.4BSD-like) and `delayed` (the
delayed-switch POS of the paper's ref. [19]: extends a quantum by the predicted remainder when it
is at most 1/4 of the quantum; the prediction is learnt from the previous run of the same jobs).
Both run twice through the simulated CPU; the second run is reported.";

const POS_SOURCES: &str = "\
Parameters and sources (reasoning in docs/sim.md):
  seed 001 §4.1: 9 browsers (3 machines x 3), 30 s interval, SLP 20 s fixed (exp 1, 2) or
    predicted every 500 ms (exp 3, 4), RW 1..10, 5 trials, 10 Mb/s Ethernet, CPU-bound process in
    exp 1, buffer cache disabled, Apache 1.2.5, Netscape 3.04, 233 MHz AMD-K6, BSD/OS 2.1.
  4.4BSD: 100 ms quantum (roundrobin), estcpu decay by load, woken processes at kernel priority
    (the hog never runs while a server process is ready); 8 KB socket send buffer, 2 KB low water.
  Apache 1.2.5 prefork (one fork per second below MinSpareServers, a child exits when
    MaxSpareServers others are idle; 8 KB read/write loop). Pool 45,45,90,150, derived from seed
    001 §4.2 (\"the WWW server processes waiting for HTML file requests ... were always in the
    wait state at least 30 seconds\"): an idle process for each of 9 x (1 + 4) connections.
  CPU costs at 233 MHz (docs/sim.md, section CPU cost model): anchor = the LARD paper's 300 MHz
    Pentium II figures (145 + 145 us per connection, 40 us per 512 B sent) scaled by 300/233.
    Process context: accept 1.1 ms, close + log 0.4 ms, 30 us per system call, 40 us per KiB
    (read copyout + write copyin). Interrupt level (never reordered by the policy): 114 us per
    data packet (TCP/IP output, checksum, driver, ACK), + 400 us per KiB of frame with an ISA
    programmed-I/O card (--nic pio, estimate), 20 us per disk read + 125 us per KiB with IDE
    programmed I/O (--disk-xfer pio, estimate).
  Disk: one positioning per file (name and inode caches are not the buffer cache) with a short
    seek (FFS keeps a directory's files in one cylinder group): 9 ms (estimate: 3 ms seek + half
    a turn at 5400 rpm) for a file's first block and per further 44 KB, 410 us per 4 KB (LARD).
  --previous-testbed: the previous model (LARD disk 28 ms + 14 ms per further 44 KB, Apache
    1.2.5 default pool 5,5,10,150, clicks within 100 ms), to compare.
  Netscape 3: HTML then images over up to 4 connections, HTTP/1.0 without keep-alive.
  Assumed (the paper does not say): page = 4 KB HTML + 8 images of 30 KB; a burst's clicks
    within 300 ms (estimate: three Navigators per client machine start one after the other);
    random arrivals = once per 30 s per browser at a uniform moment.";

#[derive(clap::Args, Debug)]
struct Fig1Args {
    /// CPU time process A needs.
    #[arg(long, default_value_t = dur(Fig1Config::default().a))]
    a: Dur,
    /// CPU time process B needs.
    #[arg(long, default_value_t = dur(Fig1Config::default().b))]
    b: Dur,
    /// Time quantum.
    #[arg(long, default_value_t = dur(Fig1Config::default().quantum))]
    quantum: Dur,
    /// Print `{"timesharing": {"A": s, "B": s}, "pos": {"A": s, "B": s}}` only.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct PosArgs {
    #[command(flatten)]
    options: PosOptions,
    /// Print one JSON document instead of the tables.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct LardArgs {
    #[command(flatten)]
    options: LardOptions,
    /// Print one JSON document instead of the tables.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct BenchArgs {
    /// Approximate wall-clock time per measurement (50ms to 60s).
    #[arg(long, default_value = "1s")]
    duration: Dur,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    json: bool,
}

fn dur(ns: u64) -> Dur {
    Dur(Duration::from_nanos(ns))
}

fn ns(d: Dur) -> u64 {
    d.0.as_nanos() as u64
}

/// Progress lines on stderr (plain lines; the runs take seconds).
fn progress(quiet: bool) -> impl Fn(&str) + Sync {
    let tty = std::io::stderr().is_terminal();
    move |line: &str| {
        if !quiet || tty {
            eprintln!("sim: {line}");
        }
    }
}

/// A scenario's parameter error is the user's mistake: exit code 2.
fn usage(e: sim::SimError) -> anyhow::Error {
    match e {
        sim::SimError::Param { .. } | sim::SimError::Policy(_) => UsageError(e.to_string()).into(),
        other => other.into(),
    }
}

/// Print one JSON document, or the table.
fn print(
    json: bool,
    doc: impl FnOnce() -> serde_json::Result<String>,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if json {
        println!("{}", doc()?);
    } else {
        print!("{}", table());
    }
    Ok(())
}

/// Run the scenario the arguments name.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.scenario {
        Scenario::PosFig1(a) => {
            let cfg = Fig1Config {
                a: ns(a.a),
                b: ns(a.b),
                quantum: ns(a.quantum),
            };
            let r = sim::fig1::run(&cfg).map_err(usage)?;
            if a.json {
                println!("{}", r.json());
            } else {
                print!("{}", r.table());
            }
            Ok(())
        }
        Scenario::Pos(a) => {
            let cfg = a.options.resolve().map_err(usage)?;
            let r = sim::pos::run(&cfg, &progress(a.json)).map_err(usage)?;
            print(a.json, || serde_json::to_string_pretty(&r), || r.table())
        }
        Scenario::Lard(a) => {
            let cfg = a.options.resolve().map_err(usage)?;
            let r = sim::lard::run(&cfg, &progress(a.json)).map_err(usage)?;
            print(a.json, || serde_json::to_string_pretty(&r), || r.table())
        }
        Scenario::Bench(a) => {
            if cfg!(debug_assertions) {
                eprintln!(
                    "sim: warning: debug build; the 1M events/s target is for release builds"
                );
            }
            let rows = sim::bench::run(a.duration.0.as_secs_f64()).map_err(usage)?;
            print(
                a.json,
                || serde_json::to_string_pretty(&rows),
                || sim::bench::table(&rows),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::{MS, SEC};

    fn parse<A: clap::Args>(args: &[&str]) -> Result<A, clap::Error> {
        crate::cmd::parse_args::<A>(args)
    }

    #[test]
    fn defaults_are_the_scenarios() {
        let a: PosArgs = parse(&["--exp", "1"]).unwrap();
        assert_eq!(a.options, PosOptions::default());
        let a: LardArgs = parse(&[]).unwrap();
        assert_eq!(a.options, LardOptions::default());
        let a: Fig1Args = parse(&[]).unwrap();
        assert_eq!(
            (ns(a.a), ns(a.b), ns(a.quantum)),
            (3400 * MS, 2100 * MS, SEC)
        );
        assert!(parse::<PosArgs>(&[]).is_err(), "--exp is required");
    }

    #[test]
    fn flags_take_units_and_refuse_bare_durations() {
        let a: PosArgs = parse(&[
            "--exp",
            "2",
            "--slp",
            "1.5s",
            "--html",
            "8KiB",
            "--link-rate",
            "100Mbit/s",
            "--jitter",
            "250ms",
            "--pool",
            "7,7,14,150",
            "--nic",
            "dma",
            "--no-disk",
            "--no-rw-auto",
        ])
        .unwrap();
        let o = a.options;
        assert_eq!((o.exp, ns(o.slp), o.html), (2, 1500 * MS, 8192));
        assert_eq!(
            (o.link_rate, o.jitter.map(ns)),
            (Some(12_500_000.0), Some(250 * MS))
        );
        assert_eq!(o.pool, Some(vec![7, 7, 14, 150]));
        assert_eq!(o.nic, sim::options::Transfer::Dma);
        assert!(!o.use_disk && !o.rw_auto && o.context && o.hog_preempt);
        for bad in [["--slp", "20"], ["--html", "4k"], ["--period", "500"]] {
            let args = [&["--exp", "1"][..], &bad[..]].concat();
            assert!(parse::<PosArgs>(&args).is_err(), "{bad:?}");
        }
        let a: LardArgs = parse(&["--cache", "64MiB", "--max-file", "2MB"]).unwrap();
        assert_eq!((a.options.cache, a.options.max_file), (64 << 20, 2_000_000));
        let a: LardArgs = parse(&[
            "--front-conn",
            "1ms",
            "--front-request",
            "250us",
            "--per-conn",
            "3",
            "--pconn-variants",
            "lard/pin,ext-lard/forward",
        ])
        .unwrap();
        let c = a.options.resolve().unwrap();
        let p = c.phttp.unwrap();
        assert_eq!((p.front.conn, p.front.request), (1_000_000, 250_000));
        assert_eq!((p.per_conn, p.variants.len()), (3.0, 2));
        assert!(parse::<LardArgs>(&["--front-conn", "300"]).is_err());
        let bad: LardArgs = parse(&["--pconn-variants", "lard/teleport"]).unwrap();
        assert!(bad.options.resolve().is_err());
        assert!(parse::<BenchArgs>(&["--duration", "2"]).is_err());
    }
}
