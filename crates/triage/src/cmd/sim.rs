//! `triage sim`: the deterministic simulator (virtual time, the same policy code as the server).
//! Each scenario prints a table, or with `--json` one JSON document on stdout; progress lines go
//! to stderr. Parameters and their sources: `docs/sim.md`.

use std::io::IsTerminal;

use clap::Subcommand;
use policy::{MS, SEC};
use sim::link::LinkMode;

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
    Pos(PosArgs),
    /// Seed 004 (LARD): a trace-driven cluster of N back ends with LRU file caches behind a
    /// front end distributing requests by WRR, LARD, LARD/R or bounded-load consistent hashing.
    #[command(after_long_help = LARD_SOURCES)]
    Lard(LardArgs),
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

const LARD_SOURCES: &str = "\
Parameters and sources (reasoning in docs/sim.md):
  LARD paper (Pai et al., ASPLOS 1998; seed 004): T_low 25, T_high 65 connections; admission
    limit (n-1)*T_high + T_low - 1; LARD/R K = 20 s; back-end costs measured on a 300 MHz
    Pentium II: 145 us connection setup, 145 us teardown, 40 us per 512 B (8 KB from cache:
    1075 req/s); disk 28 ms + 410 us per 4 KB + 14 ms per further 44 KB; 32 MB cache per node.
  Traces (SURGE, Barford & Crovella 1998): lognormal body (mu 9.357, sigma 1.318) with p 0.93,
    Pareto tail (k 133 KB, alpha 1.1) truncated at --max-file-kb; Zipf popularity (--zipf).
  Bounded-load hashing (Mirrokni, Thorup, Zadimoghaddam 2018): c = 1.25 and 1.5, 100 points
    per node.
  Workloads: the same trace against a 32 MB cache (working set 16x one cache) and a 1 GB cache
    (it fits). Caches start holding the most popular files; the first quarter of the trace is
    not measured.";

#[derive(clap::Args, Debug)]
struct Fig1Args {
    /// CPU time process A needs (seconds).
    #[arg(long, default_value_t = 3.4)]
    a: f64,
    /// CPU time process B needs (seconds).
    #[arg(long, default_value_t = 2.1)]
    b: f64,
    /// Time quantum (seconds).
    #[arg(long, default_value_t = 1.0)]
    quantum: f64,
    /// Print `{"timesharing": {"A": s, "B": s}, "pos": {"A": s, "B": s}}` only.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct PosArgs {
    /// Experiment of seed 001 §4: 1 (synchronized bursts + CPU hog, SLP 20 s), 2 (random
    /// accesses, SLP 20 s), 3 (random, SLP predicted), 4 (as 3 with 3, 6, 9, 12 browsers).
    #[arg(long)]
    exp: u8,
    /// Seed of every random choice (click times).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Trials per variant (paper: 5).
    #[arg(long, default_value_t = 5)]
    trials: usize,
    /// Clicks per browser per trial (each a unique URL).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Browsers (exp 1-3; paper: 9 = 3 machines x 3).
    #[arg(long, default_value_t = 9)]
    browsers: usize,
    /// Browser counts of exp 4, comma separated (paper: 3,6,9,12).
    #[arg(long, value_delimiter = ',', default_value = "3,6,9,12")]
    exp4_browsers: Vec<usize>,
    /// Fixed RW values to run, comma separated (paper: 1..10).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6,7,8,9,10")]
    rw: Vec<u32>,
    /// Skip the variants with RW predicted (paper rule, split rule).
    #[arg(long)]
    no_rw_auto: bool,
    /// Skip the context variants (`fifo`, `content`).
    #[arg(long)]
    no_context: bool,
    /// Fixed SLP of exp 1 and 2, seconds (paper: 20).
    #[arg(long, default_value_t = 20.0)]
    slp: f64,
    /// POS prediction period, ms (paper: 500).
    #[arg(long, default_value_t = 500)]
    period_ms: u64,
    /// Burst interval, seconds (paper: 30).
    #[arg(long, default_value_t = 30)]
    interval_s: u64,
    /// Time quantum, ms (4.4BSD `roundrobin`: 100).
    #[arg(long, default_value_t = 100)]
    quantum_ms: u64,
    /// HTML size, KiB.
    #[arg(long, default_value_t = 4)]
    html_kb: u64,
    /// Images per page.
    #[arg(long, default_value_t = 8)]
    images: usize,
    /// Size of each image, KiB.
    #[arg(long, default_value_t = 30)]
    image_kb: u64,
    /// Image connections per page (Netscape 3: 4).
    #[arg(long, default_value_t = 4)]
    conns: usize,
    /// Link bandwidth, Mb/s (paper: 10).
    #[arg(long, default_value_t = 10.0)]
    link_mbps: f64,
    /// Link sharing: fair (round robin per connection) or fifo.
    #[arg(long, default_value = "fair")]
    link: LinkMode,
    /// CPU cost of a connection's handshake, accept, request parse, stat and open, µs (233 MHz
    /// K6, Apache 1.2.5; see docs/sim.md).
    #[arg(long, default_value_t = 1100)]
    accept_us: u64,
    /// CPU cost of log + close, µs.
    #[arg(long, default_value_t = 400)]
    close_us: u64,
    /// Process CPU per KiB sent (read copyout + write copyin), µs.
    #[arg(long, default_value_t = 40)]
    per_kib_us: u64,
    /// Interrupt-level CPU per data packet sent (TCP/IP output, checksum, driver, transmit
    /// interrupt, half an ACK received), µs; programmed I/O comes on top (--nic).
    #[arg(long, default_value_t = 114)]
    per_packet_us: u64,
    /// Network card: `pio` (ISA programmed I/O, NE2000/3C509 class: 400 µs of CPU per KiB of
    /// frame) or `dma` (bus master: none).
    #[arg(long, default_value = "pio", value_parser = ["pio", "dma"])]
    nic: String,
    /// Disk transfers: `pio` (IDE programmed I/O: 125 µs of CPU per KiB read) or `dma`.
    #[arg(long, default_value = "pio", value_parser = ["pio", "dma"])]
    disk_xfer: String,
    /// Server CPU clock, MHz: the CPU-bound costs scale by 233 / MHz; programmed I/O (bus-bound)
    /// does not.
    #[arg(long, default_value_t = 233.0)]
    cpu_mhz: f64,
    /// Serve files from memory instead of the disk (the paper disabled the buffer cache).
    #[arg(long)]
    no_disk: bool,
    /// Disk: latency of a file's first read, ms (default 9: one short seek within the
    /// directory's cylinder group + half a turn; the LARD model's 28 with --previous-testbed).
    #[arg(long)]
    disk_first_ms: Option<f64>,
    /// Disk: latency of each further 44 KB cluster of a file, ms (default 9; LARD: 14).
    #[arg(long)]
    disk_reposition_ms: Option<f64>,
    /// The previous model's testbed, to compare: LARD disk (28 ms first read, 14 ms per further
    /// cluster), Apache 1.2.5's default pool 5,5,10,150, clicks within 100 ms. Explicit
    /// --pool, --jitter-ms, --disk-first-ms, --disk-reposition-ms still apply on top.
    #[arg(long)]
    previous_testbed: bool,
    /// Spread of the clicks of one synchronized burst, ms (exp 1; default 300, an estimate: three
    /// Navigators per client machine start one after the other; 100 with --previous-testbed).
    #[arg(long)]
    jitter_ms: Option<u64>,
    /// Random arrivals (exp 2-4): each browser clicks at a uniform moment of the first this
    /// many seconds of every interval (default: the whole interval).
    #[arg(long)]
    random_window_s: Option<f64>,
    /// Apache pool: StartServers,MinSpareServers,MaxSpareServers,MaxClients (default
    /// 45,45,90,150: an idle process for each of the 9 x (1 + 4) connections of a burst, as
    /// seed 001 §4.2 implies; Apache 1.2.5's defaults 5,5,10,150 with --previous-testbed).
    #[arg(long, value_delimiter = ',')]
    pool: Option<Vec<usize>>,
    /// Do not let a waking server process preempt the CPU hog (4.4BSD does).
    #[arg(long)]
    no_hog_preempt: bool,
    /// Worker threads (results do not depend on it).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Print one JSON document instead of the tables.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct LardArgs {
    /// Node counts, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64")]
    nodes: Vec<usize>,
    /// Seed of the synthetic trace.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Requests in the trace (the first quarter warms the caches up).
    #[arg(long, default_value_t = 200_000)]
    requests: usize,
    /// Total size of the trace's files, MB.
    #[arg(long, default_value_t = 512)]
    working_set_mb: u64,
    /// Largest file, KB (the Pareto tail is truncated there).
    #[arg(long, default_value_t = 1024)]
    max_file_kb: u64,
    /// Zipf exponent of file popularity.
    #[arg(long, default_value_t = 0.8)]
    zipf: f64,
    /// File cache per node in the `exceeds` workload, MB (LARD simulations: 32).
    #[arg(long, default_value_t = 32)]
    cache_mb: u64,
    /// File cache per node in the `fits` workload, MB (must hold the working set).
    #[arg(long, default_value_t = 1024)]
    fits_cache_mb: u64,
    /// Which workloads: exceeds, fits or both.
    #[arg(long, default_value = "both")]
    workload: String,
    /// Policies, comma separated, among wrr, lard, lard-r, chbl-1.25, chbl-1.5.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "wrr,lard,lard-r,chbl-1.25,chbl-1.5"
    )]
    policies: Vec<String>,
    /// LARD T_low (connections).
    #[arg(long, default_value_t = 25)]
    t_low: u32,
    /// LARD T_high (connections).
    #[arg(long, default_value_t = 65)]
    t_high: u32,
    /// Start with cold caches instead of caches holding the most popular files.
    #[arg(long)]
    cold: bool,
    /// Worker threads (results do not depend on it).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Print one JSON document instead of the tables.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct BenchArgs {
    /// Approximate wall-clock seconds per measurement.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    json: bool,
}

fn secs(name: &str, s: f64) -> anyhow::Result<u64> {
    if !(s.is_finite() && s > 0.0 && s < 1e6) {
        return Err(UsageError(format!(
            "--{name} must be a positive number of seconds (got {s})"
        ))
        .into());
    }
    Ok((s * 1e9).round() as u64)
}

/// Megabytes to bytes, saturating (the scenario rejects absurd sizes with a clear message).
fn mb(x: u64) -> u64 {
    x.saturating_mul(1 << 20)
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

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.scenario {
        Scenario::PosFig1(a) => fig1(a),
        Scenario::Pos(a) => pos(a),
        Scenario::Lard(a) => lard(a),
        Scenario::Bench(a) => bench(a),
    }
}

fn fig1(a: Fig1Args) -> anyhow::Result<()> {
    let cfg = sim::fig1::Fig1Config {
        a: secs("a", a.a)?,
        b: secs("b", a.b)?,
        quantum: secs("quantum", a.quantum)?,
    };
    let r = sim::fig1::run(&cfg).map_err(usage)?;
    if a.json {
        println!("{}", r.json());
    } else {
        print!("{}", r.table());
    }
    Ok(())
}

fn pos(a: PosArgs) -> anyhow::Result<()> {
    let json = a.json;
    let cfg = pos_config(a)?;
    let r = sim::pos::run(&cfg, &progress(json)).map_err(usage)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", r.table());
    }
    Ok(())
}

/// The scenario's configuration from the flags (testbed defaults, `--previous-testbed`, then
/// explicit flags on top).
fn pos_config(a: PosArgs) -> anyhow::Result<sim::pos::PosConfig> {
    if !(0.064..=100_000.0).contains(&a.link_mbps) {
        return Err(UsageError(format!(
            "--link-mbps must be in 0.064..100000 (got {})",
            a.link_mbps
        ))
        .into());
    }
    if a.quantum_ms == 0 || a.period_ms == 0 {
        return Err(UsageError("--quantum-ms and --period-ms must be > 0".into()).into());
    }
    if a.images > 1000 || a.browsers > 10_000 || a.rounds > 10_000 || a.trials > 1000 {
        return Err(UsageError(
            "--images <= 1000, --browsers <= 10000, --rounds <= 10000, --trials <= 1000".into(),
        )
        .into());
    }
    if a.html_kb == 0 || a.image_kb == 0 {
        return Err(UsageError("--html-kb and --image-kb must be > 0".into()).into());
    }
    if !(a.cpu_mhz.is_finite() && (1.0..=100_000.0).contains(&a.cpu_mhz)) {
        return Err(UsageError(format!(
            "--cpu-mhz must be in 1..100000 (got {})",
            a.cpu_mhz
        ))
        .into());
    }
    let defaults = if a.previous_testbed {
        sim::web::WebConfig::default().previous_testbed()
    } else {
        sim::web::WebConfig::default()
    };
    let pool = match a.pool.as_deref() {
        None => defaults.pool,
        Some(&[start, min_spare, max_spare, max_clients]) => sim::web::Pool {
            start,
            min_spare,
            max_spare,
            max_clients,
        },
        Some(p) => {
            return Err(UsageError(format!(
                "--pool needs 4 numbers: StartServers,MinSpareServers,MaxSpareServers,MaxClients \
                 (got {})",
                p.len()
            ))
            .into())
        }
    };
    let ms = |name: &str, x: f64| -> anyhow::Result<u64> {
        if !(x.is_finite() && (0.0..=10_000.0).contains(&x)) {
            return Err(UsageError(format!("--{name} must be in 0..10000 ms (got {x})")).into());
        }
        Ok((x * 1e6).round() as u64)
    };
    let mut disk = defaults.disk;
    if let Some(x) = a.disk_first_ms {
        disk.first = ms("disk-first-ms", x)?;
    }
    if let Some(x) = a.disk_reposition_ms {
        disk.reposition = ms("disk-reposition-ms", x)?;
    }
    let base = sim::web::WebConfig {
        browsers: a.browsers,
        rounds: a.rounds,
        interval: a.interval_s.saturating_mul(SEC),
        quantum: a.quantum_ms.saturating_mul(MS),
        conns: a.conns,
        page: sim::web::Page {
            html: a.html_kb.saturating_mul(1024),
            images: vec![a.image_kb.saturating_mul(1024); a.images],
        },
        link_bps: (a.link_mbps * 1e6).round() as u64,
        link_mode: a.link,
        costs: {
            let us = |x: u64| x.saturating_mul(1000);
            let d = defaults.costs;
            sim::web::CpuCosts {
                accept: us(a.accept_us),
                close: us(a.close_us),
                per_kib: us(a.per_kib_us),
                per_packet: us(a.per_packet_us),
                nic_pio_per_kib: if a.nic == "dma" { 0 } else { d.nic_pio_per_kib },
                disk_pio_per_kib: if a.disk_xfer == "dma" {
                    0
                } else {
                    d.disk_pio_per_kib
                },
                ..d
            }
            .scaled(a.cpu_mhz)
        },
        use_disk: !a.no_disk,
        disk,
        jitter: a
            .jitter_ms
            .map_or(defaults.jitter, |j| j.saturating_mul(MS)),
        random_window: a
            .random_window_s
            .map(|w| secs("random-window-s", w))
            .transpose()?,
        pool,
        hog_preempt: !a.no_hog_preempt,
        ..defaults
    };
    let cfg = sim::pos::PosConfig {
        exp: a.exp,
        seed: a.seed,
        trials: a.trials,
        rw: a.rw,
        rw_auto: !a.no_rw_auto,
        context: !a.no_context,
        exp4_browsers: a.exp4_browsers,
        slp: secs("slp", a.slp)?,
        period: a.period_ms.saturating_mul(MS),
        base,
        threads: a.threads,
    };
    Ok(cfg)
}

fn lard(a: LardArgs) -> anyhow::Result<()> {
    let d = sim::lard::LardConfig::default();
    let known = sim::lard::default_policies();
    let mut policies = Vec::new();
    for name in &a.policies {
        let Some(p) = known.iter().find(|p| &p.label == name) else {
            let names: Vec<&str> = known.iter().map(|p| p.label.as_str()).collect();
            return Err(UsageError(format!(
                "--policies: unknown policy `{name}` (known: {})",
                names.join(", ")
            ))
            .into());
        };
        let mut p = p.clone();
        p.cfg.t_low = a.t_low;
        p.cfg.t_high = a.t_high;
        policies.push(p);
    }
    let workloads: Vec<sim::lard::Workload> = d
        .workloads
        .iter()
        .filter(|w| a.workload == "both" || a.workload == w.name)
        .map(|w| sim::lard::Workload {
            name: w.name.clone(),
            cache: mb(if w.name == "fits" {
                a.fits_cache_mb
            } else {
                a.cache_mb
            }),
        })
        .collect();
    if workloads.is_empty() {
        return Err(UsageError(format!(
            "--workload must be exceeds, fits or both (got `{}`)",
            a.workload
        ))
        .into());
    }
    if !(a.zipf.is_finite() && a.zipf > 0.0 && a.zipf < 10.0) {
        return Err(UsageError(format!("--zipf must be in (0, 10) (got {})", a.zipf)).into());
    }
    if a.requests < 100 || a.requests > 100_000_000 {
        return Err(UsageError(format!(
            "--requests must be in 100..=100000000 (got {})",
            a.requests
        ))
        .into());
    }
    if a.max_file_kb == 0 {
        return Err(UsageError("--max-file-kb must be > 0".into()).into());
    }
    let cfg = sim::lard::LardConfig {
        nodes: a.nodes,
        seed: a.seed,
        requests: a.requests,
        working_set: mb(a.working_set_mb),
        max_file: a.max_file_kb.saturating_mul(1024),
        workloads,
        policies,
        zipf: a.zipf,
        prewarm: !a.cold,
        threads: a.threads,
        ..d
    };
    let r = sim::lard::run(&cfg, &progress(a.json)).map_err(usage)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", r.table());
    }
    Ok(())
}

fn bench(a: BenchArgs) -> anyhow::Result<()> {
    if !(a.seconds.is_finite() && (0.05..=60.0).contains(&a.seconds)) {
        return Err(
            UsageError(format!("--seconds must be in 0.05..60 (got {})", a.seconds)).into(),
        );
    }
    if cfg!(debug_assertions) {
        eprintln!("sim: warning: debug build; the 1M events/s target is for release builds");
    }
    let rows = sim::bench::run(a.seconds).map_err(usage)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", sim::bench::table(&rows));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> anyhow::Result<sim::pos::PosConfig> {
        pos_config(crate::cmd::parse_args::<PosArgs>(args).unwrap())
    }

    #[test]
    fn sim_pos_testbed_defaults_previous_testbed_and_overrides() {
        use sim::disk::DiskModel;
        use sim::web::{Pool, WebConfig};
        // Defaults: the calibrated testbed (paper pool, one short seek per file, 300 ms).
        let c = cfg(&["--exp", "1"]).unwrap();
        assert_eq!(c.base.pool, Pool::paper());
        assert_eq!(c.base.disk, DiskModel::one_cylinder_group());
        assert_eq!(c.base.jitter, 300 * MS);
        assert_eq!(c.base.jitter, WebConfig::default().jitter);
        // --previous-testbed: Apache 1.2.5 defaults, the LARD disk, 100 ms.
        let c = cfg(&["--exp", "1", "--previous-testbed"]).unwrap();
        assert_eq!(c.base.pool, Pool::default());
        assert_eq!(c.base.disk, DiskModel::default());
        assert_eq!(c.base.jitter, 100 * MS);
        // Explicit flags win over either.
        let c = cfg(&[
            "--exp",
            "1",
            "--previous-testbed",
            "--pool",
            "7,7,14,150",
            "--jitter-ms",
            "250",
            "--disk-first-ms",
            "12.5",
        ])
        .unwrap();
        assert_eq!(
            c.base.pool,
            Pool {
                start: 7,
                min_spare: 7,
                max_spare: 14,
                max_clients: 150
            }
        );
        assert_eq!(c.base.jitter, 250 * MS);
        assert_eq!(c.base.disk.first, 12_500_000);
        assert_eq!(c.base.disk.reposition, DiskModel::default().reposition);
        // Bad values are usage errors.
        assert!(cfg(&["--exp", "1", "--pool", "1,2,3"]).is_err());
        assert!(cfg(&["--exp", "1", "--disk-first-ms=-1"]).is_err());
    }
}
