//! What a user may set for each scenario, and how it becomes the scenario's configuration:
//! [`PosOptions`] for `triage sim pos`, [`LardOptions`] for `triage sim lard`. Each holds the
//! values in the simulator's units (nanoseconds, bytes); its `Default` is the scenario's
//! default (the command line shows it), and `resolve` checks the ranges and builds the
//! configuration, naming the flag of a bad value in [`SimError::Param`].

use std::time::Duration;

use clap::ArgAction;
use policy::{Nanos, SEC};
use units::Dur;

use crate::lard::{LardConfig, PolicySpec, Workload};
use crate::link::LinkMode;
use crate::pos::{PosConfig, SchedBase};
use crate::web::{Arrivals, CpuCosts, Pool, WebConfig};
use crate::{param, SimError};

/// The flags of `triage sim pos` (a `clap` argument group: `triage` flattens it). Options left
/// `None` take the testbed's value (the calibrated testbed's, or the previous one's with
/// `--previous-testbed`); the others default to [`PosOptions::default`], the paper's values.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct PosOptions {
    /// Experiment of seed 001 §4: 1 (synchronized bursts + CPU hog, SLP 20 s), 2 (random
    /// accesses, SLP 20 s), 3 (random, SLP predicted), 4 (as 3 with 3, 6, 9, 12 browsers).
    #[arg(long)]
    pub exp: u8,
    /// Seed of every random choice (click times).
    #[arg(long, default_value_t = defaults().seed)]
    pub seed: u64,
    /// Trials per variant (paper: 5).
    #[arg(long, default_value_t = defaults().trials)]
    pub trials: usize,
    /// Clicks per browser per trial (each a unique URL).
    #[arg(long, default_value_t = defaults().rounds)]
    pub rounds: usize,
    /// Browsers (exp 1-3; paper: 9 = 3 machines x 3).
    #[arg(long, default_value_t = defaults().browsers)]
    pub browsers: usize,
    /// Browser counts of exp 4, comma separated (paper: 3,6,9,12).
    #[arg(long, value_delimiter = ',', default_values_t = defaults().exp4_browsers)]
    pub exp4_browsers: Vec<usize>,
    /// Fixed RW values to run, comma separated (paper: 1..10).
    #[arg(long, value_delimiter = ',', default_values_t = defaults().rw)]
    pub rw: Vec<u32>,
    /// Run the variants with RW predicted (paper rule, split rule).
    #[arg(long = "no-rw-auto", action = ArgAction::SetFalse,
          help = "Skip the variants with RW predicted (paper rule, split rule)")]
    pub rw_auto: bool,
    /// Run the context variants (`fifo`, `content`).
    #[arg(long = "no-context", action = ArgAction::SetFalse,
          help = "Skip the context variants (`fifo`, `content`)")]
    pub context: bool,
    /// Fixed SLP of exp 1 and 2 (paper: 20 s).
    #[arg(long, default_value_t = defaults().slp)]
    pub slp: Dur,
    /// POS prediction period (paper: 500 ms).
    #[arg(long, default_value_t = defaults().period)]
    pub period: Dur,
    /// Burst interval (paper: 30 s).
    #[arg(long, default_value_t = defaults().interval)]
    pub interval: Dur,
    /// Time quantum (4.4BSD `roundrobin`: 100 ms).
    #[arg(long, default_value_t = defaults().quantum)]
    pub quantum: Dur,
    /// HTML size, bytes (or with a unit: 4KiB).
    #[arg(long, value_parser = units::parse_size, default_value_t = defaults().html)]
    pub html: u64,
    /// Images per page.
    #[arg(long, default_value_t = defaults().images)]
    pub images: usize,
    /// Size of each image, bytes (or with a unit: 30KiB).
    #[arg(long, value_parser = units::parse_size, default_value_t = defaults().image)]
    pub image: u64,
    /// Image connections per page (Netscape 3: 4).
    #[arg(long, default_value_t = defaults().conns)]
    pub conns: usize,
    /// Link bandwidth, in bytes per second, written with a unit (`10Mbit/s`, `2MB/s`;
    /// default: the paper's 10 Mb/s Ethernet).
    #[arg(long, value_parser = units::parse_rate)]
    pub link_rate: Option<f64>,
    /// Link sharing: round robin per connection, or FIFO.
    #[arg(long, value_enum, default_value_t = defaults().link)]
    pub link: LinkMode,
    /// CPU cost of a connection's handshake, accept, request parse, stat and open (233 MHz
    /// K6, Apache 1.2.5; see docs/sim.md).
    #[arg(long, default_value_t = defaults().accept)]
    pub accept: Dur,
    /// CPU cost of log + close.
    #[arg(long, default_value_t = defaults().close)]
    pub close: Dur,
    /// Process CPU per KiB sent (read copyout + write copyin).
    #[arg(long, default_value_t = defaults().per_kib)]
    pub per_kib: Dur,
    /// Interrupt-level CPU per data packet sent (TCP/IP output, checksum, driver, transmit
    /// interrupt, half an ACK received); programmed I/O comes on top (--nic).
    #[arg(long, default_value_t = defaults().per_packet)]
    pub per_packet: Dur,
    /// Network card: `pio` (ISA programmed I/O, NE2000/3C509 class: 400 µs of CPU per KiB of
    /// frame) or `dma` (bus master: none).
    #[arg(long, value_enum, default_value_t = Transfer::Pio)]
    pub nic: Transfer,
    /// Disk transfers: `pio` (IDE programmed I/O: 125 µs of CPU per KiB read) or `dma`.
    #[arg(long, value_enum, default_value_t = Transfer::Pio)]
    pub disk_xfer: Transfer,
    /// Server CPU clock, MHz: the CPU-bound costs scale by 233 / MHz; programmed I/O (bus-bound)
    /// does not.
    #[arg(long, default_value_t = defaults().cpu_mhz)]
    pub cpu_mhz: f64,
    /// Serve files from the disk (the paper disabled the buffer cache), not from memory.
    #[arg(long = "no-disk", action = ArgAction::SetFalse,
          help = "Serve files from memory instead of the disk (the paper disabled the buffer cache)")]
    pub use_disk: bool,
    /// Disk: latency of a file's first read (default 5ms: a track-to-track seek within the
    /// directory's cylinder group + half a turn; the LARD model's 28ms with
    /// --previous-testbed).
    #[arg(long)]
    pub disk_first: Option<Dur>,
    /// Disk: latency of each further 44 KB cluster (default 5ms; LARD: 14ms).
    #[arg(long)]
    pub disk_reposition: Option<Dur>,
    /// The previous model's testbed, to compare: LARD disk (28 ms first read, 14 ms per further
    /// cluster), Apache 1.2.5's default pool 5,5,10,150, clicks within 100 ms. Explicit
    /// --pool, --jitter, --disk-first, --disk-reposition still apply on top.
    #[arg(long)]
    pub previous_testbed: bool,
    /// Spread of the clicks of one synchronized burst (exp 1; default 300ms, an estimate:
    /// three Navigators per client machine start one after the other; 100ms with
    /// --previous-testbed).
    #[arg(long)]
    pub jitter: Option<Dur>,
    /// Random arrivals (exp 2-4): each browser clicks at a uniform moment of the first this
    /// long of every interval (default 500ms, the reading of "randomly at the same time" in
    /// docs/sim.md; the interval's length for the earlier reading).
    #[arg(long)]
    pub random_window: Option<Dur>,
    /// Time between bursts of experiments 2-4 (default 10s: under the fixed SLP of 20 s, as
    /// seed 001 §4.2 says of exp 2; exp 1 uses --interval).
    #[arg(long, default_value_t = defaults().random_interval)]
    pub random_interval: Dur,
    /// How the browsers of experiments 2-4 click: `browsers` (each at its own uniform moment
    /// of --random-window) or `machines` (each client machine of three browsers starts at a
    /// uniform moment of --random-window, its browsers click one after the other, each in
    /// its own --stagger slot).
    #[arg(long, value_enum, default_value_t = RandomArrivals::Browsers)]
    pub arrivals: RandomArrivals,
    /// Time between the clicks of one client machine's browsers with --arrivals machines
    /// (default 100ms: a 200 MHz client's cost of starting a page load, as for --jitter).
    #[arg(long)]
    pub stagger: Option<Dur>,
    /// t1 ends when the HTML's first packet reaches the browser (seed 001: "until text data
    /// starts displaying"), not its last byte.
    #[arg(long)]
    pub t1_first_packet: bool,
    /// Apache pool: StartServers,MinSpareServers,MaxSpareServers,MaxClients (default
    /// 45,45,90,150: an idle process for each of the 9 x (1 + 4) connections of a burst, as
    /// seed 001 §4.2 implies; Apache 1.2.5's defaults 5,5,10,150 with --previous-testbed).
    #[arg(long, value_delimiter = ',')]
    pub pool: Option<Vec<usize>>,
    /// A waking server process preempts the CPU hog (4.4BSD does).
    #[arg(long = "no-hog-preempt", action = ArgAction::SetFalse,
          help = "Do not let a waking server process preempt the CPU hog (4.4BSD does)")]
    pub hog_preempt: bool,
    /// The conventional scheduler POS is compared against and runs over: `woken-first`
    /// (no wake-up preemption, POS orders the rest FIFO), `bsd` (4.4BSD: a woken process
    /// preempts user-mode work; POS over the timesharing order) or `bsd-fifo-pos` (as `bsd`,
    /// POS orders the rest FIFO). See docs/sim.md, "The 4.4BSD base".
    #[arg(long, value_enum, default_value_t = SchedBase::WokenFirst)]
    pub base: SchedBase,
    /// Worker threads (results do not depend on it).
    #[arg(long, default_value_t = defaults().threads)]
    pub threads: usize,
}

/// How a device moves data: by the CPU (programmed I/O) or by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Transfer {
    /// Programmed I/O: the CPU moves every byte.
    Pio,
    /// Direct memory access: no CPU per byte.
    Dma,
}

/// How the browsers of experiments 2-4 click (`--arrivals`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RandomArrivals {
    /// Each browser at its own uniform moment of the window ([`Arrivals::Random`]).
    Browsers,
    /// Per client machine, its browsers in turn ([`Arrivals::Machines`]).
    Machines,
}

/// The defaults `--help` shows.
fn defaults() -> PosOptions {
    PosOptions::default()
}

fn dur_of(ns: Nanos) -> Dur {
    Dur(Duration::from_nanos(ns))
}

fn nanos(d: Dur) -> Nanos {
    d.0.as_nanos() as Nanos
}

impl Default for PosOptions {
    /// The paper's experiment 1 on the calibrated testbed ([`PosConfig::default`]).
    fn default() -> Self {
        let p = PosConfig::default();
        let w = p.base;
        let c = CpuCosts::default();
        Self {
            exp: p.exp,
            seed: p.seed,
            trials: p.trials,
            rounds: w.rounds,
            browsers: w.browsers,
            exp4_browsers: p.exp4_browsers,
            rw: p.rw,
            rw_auto: p.rw_auto,
            context: p.context,
            slp: dur_of(p.slp),
            period: dur_of(p.period),
            interval: dur_of(w.interval),
            quantum: dur_of(w.quantum),
            html: w.page.html,
            images: w.page.images.len(),
            image: w.page.images.first().copied().unwrap_or(30 * 1024),
            conns: w.conns,
            link_rate: None,
            link: w.link_mode,
            accept: dur_of(c.accept),
            close: dur_of(c.close),
            per_kib: dur_of(c.per_kib),
            per_packet: dur_of(c.per_packet),
            nic: Transfer::Pio,
            disk_xfer: Transfer::Pio,
            cpu_mhz: CpuCosts::BASE_MHZ,
            use_disk: w.use_disk,
            disk_first: None,
            disk_reposition: None,
            previous_testbed: false,
            jitter: None,
            random_window: None,
            random_interval: dur_of(p.random_interval),
            arrivals: match p.random_arrivals {
                Arrivals::Machines => RandomArrivals::Machines,
                _ => RandomArrivals::Browsers,
            },
            stagger: None,
            t1_first_packet: false,
            pool: None,
            hog_preempt: w.hog_preempt,
            base: p.sched_base,
            threads: p.threads,
        }
    }
}

/// `x` must be in `lo..=hi`.
fn within<T: PartialOrd + std::fmt::Display>(
    name: &'static str,
    x: T,
    lo: T,
    hi: T,
    unit: &str,
) -> Result<T, SimError> {
    if x >= lo && x <= hi {
        Ok(x)
    } else {
        Err(param(
            name,
            format!("must be in {lo}..{hi}{unit} (got {x}{unit})"),
        ))
    }
}

/// A duration as the command line writes it (`1500ms`).
fn dur(ns: Nanos) -> String {
    units::format_duration(std::time::Duration::from_nanos(ns))
}

/// A duration that must be longer than zero and shorter than a million seconds.
fn positive(name: &'static str, ns: Nanos) -> Result<Nanos, SimError> {
    if ns == 0 || ns >= 1_000_000 * SEC {
        return Err(param(
            name,
            format!(
                "must be longer than 0s and shorter than 1000000s (got {})",
                dur(ns)
            ),
        ));
    }
    Ok(ns)
}

impl PosOptions {
    /// The scenario's configuration: the testbed's defaults (or `previous_testbed`'s), then
    /// the options on top. Refuses values out of range, naming the flag.
    pub fn resolve(&self) -> Result<PosConfig, SimError> {
        let link_bps = match self.link_rate {
            None => None,
            Some(bytes) => Some(within("link-rate", bytes * 8.0, 64e3, 1e11, " bit/s")?),
        };
        let quantum = positive("quantum", nanos(self.quantum))?;
        let period = positive("period", nanos(self.period))?;
        within("images", self.images, 0, 1000, "")?;
        within("browsers", self.browsers, 0, 10_000, "")?;
        within("rounds", self.rounds, 0, 10_000, "")?;
        within("trials", self.trials, 0, 1000, "")?;
        if self.html == 0 {
            return Err(param("html", "must be > 0"));
        }
        if self.image == 0 {
            return Err(param("image", "must be > 0"));
        }
        if !self.cpu_mhz.is_finite() {
            return Err(param(
                "cpu-mhz",
                format!("{} is not a number", self.cpu_mhz),
            ));
        }
        within("cpu-mhz", self.cpu_mhz, 1.0, 100_000.0, " MHz")?;
        let defaults = if self.previous_testbed {
            WebConfig::default().previous_testbed()
        } else {
            WebConfig::default()
        };
        let pool = match self.pool.as_deref() {
            None => defaults.pool,
            Some(&[start, min_spare, max_spare, max_clients]) => Pool {
                start,
                min_spare,
                max_spare,
                max_clients,
            },
            Some(p) => {
                return Err(param(
                    "pool",
                    format!(
                        "needs 4 numbers: StartServers,MinSpareServers,MaxSpareServers,\
                         MaxClients (got {})",
                        p.len()
                    ),
                ))
            }
        };
        let disk_latency = |name, x: Option<Dur>, default| match x.map(nanos) {
            Some(ns) if ns > 10 * SEC => Err(param(
                name,
                format!("must be at most 10s (got {})", dur(ns)),
            )),
            x => Ok(x.unwrap_or(default)),
        };
        let mut disk = defaults.disk;
        disk.first = disk_latency("disk-first", self.disk_first, disk.first)?;
        disk.reposition = disk_latency("disk-reposition", self.disk_reposition, disk.reposition)?;
        let d = defaults.costs;
        let costs = CpuCosts {
            accept: nanos(self.accept),
            close: nanos(self.close),
            per_kib: nanos(self.per_kib),
            per_packet: nanos(self.per_packet),
            nic_pio_per_kib: match self.nic {
                Transfer::Pio => d.nic_pio_per_kib,
                Transfer::Dma => 0,
            },
            disk_pio_per_kib: match self.disk_xfer {
                Transfer::Pio => d.disk_pio_per_kib,
                Transfer::Dma => 0,
            },
            ..d
        }
        .scaled(self.cpu_mhz);
        let base = WebConfig {
            browsers: self.browsers,
            rounds: self.rounds,
            interval: nanos(self.interval),
            quantum,
            conns: self.conns,
            page: crate::web::Page {
                html: self.html,
                images: vec![self.image; self.images],
            },
            link_bps: link_bps.map_or(defaults.link_bps, |b| b.round() as u64),
            link_mode: self.link,
            costs,
            use_disk: self.use_disk,
            disk,
            jitter: self.jitter.map_or(defaults.jitter, nanos),
            stagger: positive("stagger", self.stagger.map_or(defaults.stagger, nanos))?,
            t1_first_packet: self.t1_first_packet,
            random_window: self
                .random_window
                .map(|w| positive("random-window", nanos(w)))
                .transpose()?
                .or(defaults.random_window),
            pool,
            hog_preempt: self.hog_preempt,
            ..defaults
        };
        Ok(PosConfig {
            exp: self.exp,
            seed: self.seed,
            trials: self.trials,
            rw: self.rw.clone(),
            rw_auto: self.rw_auto,
            context: self.context,
            exp4_browsers: self.exp4_browsers.clone(),
            slp: positive("slp", nanos(self.slp))?,
            period,
            random_interval: positive("random-interval", nanos(self.random_interval))?,
            random_arrivals: match self.arrivals {
                RandomArrivals::Browsers => Arrivals::Random,
                RandomArrivals::Machines => Arrivals::Machines,
            },
            sched_base: self.base,
            base,
            threads: self.threads,
        })
    }
}

/// `triage sim lard --help`'s parameters and sources (reasoning in docs/sim.md).
pub const LARD_SOURCES: &str = "\
Parameters and sources (reasoning in docs/sim.md):
  LARD paper (Pai et al., ASPLOS 1998; seed 004): T_low 25, T_high 65 connections; admission
    limit (n-1)*T_high + T_low - 1; LARD/R K = 20 s; back-end costs measured on a 300 MHz
    Pentium II: 145 us connection setup, 145 us teardown, 40 us per 512 B (8 KB from cache:
    1075 req/s); disk 28 ms + 410 us per 4 KB + 14 ms per further 44 KB; 32 MB cache per node.
  Traces (SURGE, Barford & Crovella 1998): lognormal body (mu 9.357, sigma 1.318) with p 0.93,
    Pareto tail (k 133 KB, alpha 1.1) truncated at --max-file; Zipf popularity (--zipf).
  Bounded-load hashing (Mirrokni, Thorup, Zadimoghaddam 2018): c = 1.25 and 1.5, 100 points
    per node.
  Workloads: the same trace against a 32 MB cache (working set 16x one cache) and a 1 GB cache
    (it fits). Caches start holding the most popular files; the first quarter of the trace is
    not measured.
  P-HTTP (seed 004, Aron, Druschel, Zwaenepoel, USENIX 1999): the trace's requests grouped into
    connections of geometric length (mean --per-conn 6, assumed); mechanisms close (HTTP/1.0),
    pin (single handoff: no mechanism), forward (back-end forwarding through
    Dispatch::route), handoff (multiple TCP handoff), relay (a relaying front end); extended
    LARD (policy ext-lard). Back end: 50 us per further request (estimate), forwarding costs
    the connection's node 50 us per lateral request + 40 us per 512 B received (estimates)
    on top of sending it. Front end: one FIFO CPU, 375 us per connection + 125 us per further
    request, derived from seed 004 (151 req/s per back end, ext-LARD 4x WRR on 6 nodes at 60%
    front-end CPU: about 167 us per request); a relaying front end 80 us per 512 B
    (estimate). The front-end sweep runs ext-lard/forward with the `fits` cache.";

/// The flags of `triage sim lard` (a `clap` argument group: `triage` flattens it), defaulting
/// to [`LardOptions::default`].
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct LardOptions {
    /// Node counts, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = lard_defaults().nodes)]
    pub nodes: Vec<usize>,
    /// Seed of the synthetic trace.
    #[arg(long, default_value_t = lard_defaults().seed)]
    pub seed: u64,
    /// Requests in the trace (the first quarter warms the caches up).
    #[arg(long, default_value_t = lard_defaults().requests)]
    pub requests: usize,
    /// Total size of the trace's files, bytes (or with a unit: 512MiB).
    #[arg(long, value_parser = units::parse_size, default_value_t = lard_defaults().working_set)]
    pub working_set: u64,
    /// Largest file, bytes (or with a unit: 1MiB); the Pareto tail is truncated there.
    #[arg(long, value_parser = units::parse_size, default_value_t = lard_defaults().max_file)]
    pub max_file: u64,
    /// Zipf exponent of file popularity.
    #[arg(long, default_value_t = lard_defaults().zipf)]
    pub zipf: f64,
    /// File cache per node in the `exceeds` workload, bytes (LARD simulations: 32MiB).
    #[arg(long, value_parser = units::parse_size, default_value_t = lard_defaults().cache)]
    pub cache: u64,
    /// File cache per node in the `fits` workload, bytes (must hold the working set: 1GiB).
    #[arg(long, value_parser = units::parse_size, default_value_t = lard_defaults().fits_cache)]
    pub fits_cache: u64,
    /// Which workloads: exceeds, fits or both.
    #[arg(long, default_value_t = lard_defaults().workload)]
    pub workload: String,
    /// Policies, comma separated, among wrr, lard, lard-r, chbl-1.25, chbl-1.5.
    #[arg(long, value_delimiter = ',', default_values_t = lard_defaults().policies)]
    pub policies: Vec<String>,
    /// LARD T_low (connections).
    #[arg(long, default_value_t = lard_defaults().t_low)]
    pub t_low: u32,
    /// LARD T_high (connections).
    #[arg(long, default_value_t = lard_defaults().t_high)]
    pub t_high: u32,
    /// Start with cold caches instead of caches holding the most popular files.
    #[arg(long)]
    pub cold: bool,
    /// Worker threads (results do not depend on it).
    #[arg(long, default_value_t = lard_defaults().threads)]
    pub threads: usize,
    /// Skip the P-HTTP part (persistent connections, mechanisms, the front end).
    #[arg(long)]
    pub no_pconn: bool,
    /// P-HTTP: node counts of the variant comparison, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = lard_defaults().pconn_nodes)]
    pub pconn_nodes: Vec<usize>,
    /// P-HTTP: variants as policy/mechanism, comma separated; mechanisms: close (HTTP/1.0),
    /// pin (single handoff: no mechanism), forward (back-end forwarding), handoff (multiple
    /// TCP handoff), relay (a relaying front end).
    #[arg(long, value_delimiter = ',', default_values_t = lard_defaults().pconn_variants)]
    pub pconn_variants: Vec<String>,
    /// P-HTTP: mean requests per persistent connection (geometric).
    #[arg(long, default_value_t = lard_defaults().per_conn)]
    pub per_conn: f64,
    /// Node counts of the front-end sweep (extended LARD + forwarding, the `fits` cache),
    /// comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = lard_defaults().front_nodes)]
    pub front_nodes: Vec<usize>,
    /// Skip the front-end sweep.
    #[arg(long)]
    pub no_front_sweep: bool,
    /// Front-end CPU per client connection (handoff); 0 with the other two: not modelled.
    #[arg(long, default_value_t = lard_defaults().front_conn)]
    pub front_conn: Dur,
    /// Front-end CPU per further request on a persistent connection.
    #[arg(long, default_value_t = lard_defaults().front_request)]
    pub front_request: Dur,
    /// Relaying front end: CPU per 512 B of response relayed.
    #[arg(long, default_value_t = lard_defaults().front_relay)]
    pub front_relay: Dur,
    /// Back end: CPU per further request on a persistent or pooled connection.
    #[arg(long, default_value_t = lard_defaults().per_request)]
    pub per_request: Dur,
    /// Back-end forwarding: CPU of the connection's node per lateral request.
    #[arg(long, default_value_t = lard_defaults().forward_request)]
    pub forward_request: Dur,
    /// Back-end forwarding: CPU of the connection's node per 512 B received from the serving
    /// node (sending them to the client costs the LARD paper's 40 µs on top).
    #[arg(long, default_value_t = lard_defaults().forward_per_512)]
    pub forward_per_512: Dur,
    /// Multiplies every back-end CPU cost above and the LARD paper's (1: its 300 MHz Pentium
    /// II; 0.02: a back end fifty times as fast, about what `triage lab cluster` measures for
    /// `triage serve` on a 2-CPU VM: its check of the simulator uses its back ends' measured
    /// CPU).
    #[arg(long, default_value_t = lard_defaults().cpu_scale)]
    pub cpu_scale: f64,
}

/// The defaults `--help` shows.
fn lard_defaults() -> LardOptions {
    LardOptions::default()
}

impl Default for LardOptions {
    /// The scenario's defaults ([`LardConfig::default`]).
    fn default() -> Self {
        let d = LardConfig::default();
        let cache = |name: &str| {
            d.workloads
                .iter()
                .find(|w| w.name == name)
                .map_or(0, |w| w.cache)
        };
        let dispatch = policy::dispatch::DispatchConfig::default();
        let p = d.phttp.clone().unwrap_or_default();
        Self {
            nodes: d.nodes.clone(),
            seed: d.seed,
            requests: d.requests,
            working_set: d.working_set,
            max_file: d.max_file,
            zipf: d.zipf,
            cache: cache("exceeds"),
            fits_cache: cache("fits"),
            workload: "both".into(),
            policies: d.policies.iter().map(|p| p.label.clone()).collect(),
            t_low: dispatch.t_low,
            t_high: dispatch.t_high,
            cold: !d.prewarm,
            threads: d.threads,
            no_pconn: d.phttp.is_none(),
            pconn_nodes: p.nodes.clone(),
            pconn_variants: p.variants.iter().map(|v| v.label()).collect(),
            per_conn: p.per_conn,
            front_nodes: p.front_nodes.clone(),
            no_front_sweep: p.front_nodes.is_empty(),
            front_conn: dur_of(p.front.conn),
            front_request: dur_of(p.front.request),
            front_relay: dur_of(p.front.relay_per_512),
            per_request: dur_of(d.costs.per_request),
            forward_request: dur_of(d.costs.forward_request),
            forward_per_512: dur_of(d.costs.forward_per_512),
            cpu_scale: 1.0,
        }
    }
}

impl LardOptions {
    /// The scenario's configuration. Refuses an unknown policy or workload and values out of
    /// range, naming the flag.
    pub fn resolve(&self) -> Result<LardConfig, SimError> {
        let d = LardConfig::default();
        let known = crate::lard::default_policies();
        let mut policies: Vec<PolicySpec> = Vec::new();
        for name in &self.policies {
            let Some(p) = known.iter().find(|p| &p.label == name) else {
                let names: Vec<&str> = known.iter().map(|p| p.label.as_str()).collect();
                return Err(param(
                    "policies",
                    format!("unknown policy `{name}` (known: {})", names.join(", ")),
                ));
            };
            let mut p = p.clone();
            p.cfg.t_low = self.t_low;
            p.cfg.t_high = self.t_high;
            policies.push(p);
        }
        let workloads: Vec<Workload> = d
            .workloads
            .iter()
            .filter(|w| self.workload == "both" || self.workload == w.name)
            .map(|w| Workload {
                name: w.name.clone(),
                cache: if w.name == "fits" {
                    self.fits_cache
                } else {
                    self.cache
                },
            })
            .collect();
        if workloads.is_empty() {
            return Err(param(
                "workload",
                format!("must be exceeds, fits or both (got `{}`)", self.workload),
            ));
        }
        if !(self.zipf.is_finite() && self.zipf > 0.0 && self.zipf < 10.0) {
            return Err(param(
                "zipf",
                format!("must be in (0, 10) (got {})", self.zipf),
            ));
        }
        within("requests", self.requests, 100, 100_000_000, "")?;
        if self.max_file == 0 {
            return Err(param("max-file", "must be > 0"));
        }
        let phttp = if self.no_pconn {
            None
        } else {
            let mut variants = Vec::new();
            for v in &self.pconn_variants {
                variants.push(crate::phttp::Variant::parse(v)?);
            }
            if self.pconn_nodes.iter().any(|&n| n == 0 || n > 4096)
                || self.front_nodes.iter().any(|&n| n == 0 || n > 4096)
            {
                return Err(param("pconn-nodes", "node counts must be in 1..=4096"));
            }
            let base = d.phttp.clone().unwrap_or_default();
            Some(crate::phttp::PhttpConfig {
                nodes: self.pconn_nodes.clone(),
                variants,
                per_conn: self.per_conn,
                front: crate::pconn::FrontCosts {
                    conn: nanos(self.front_conn),
                    request: nanos(self.front_request),
                    relay_per_512: nanos(self.front_relay),
                },
                cache: self.cache,
                front_nodes: if self.no_front_sweep {
                    Vec::new()
                } else {
                    self.front_nodes.clone()
                },
                front_cache: self.fits_cache,
                ..base
            })
        };
        if !(self.per_conn.is_finite() && (1.0..=1000.0).contains(&self.per_conn)) {
            return Err(param(
                "per-conn",
                format!("must be in 1..=1000 (got {})", self.per_conn),
            ));
        }
        if !(self.cpu_scale.is_finite() && self.cpu_scale > 0.0 && self.cpu_scale <= 10.0) {
            return Err(param(
                "cpu-scale",
                format!("must be in (0, 10] (got {})", self.cpu_scale),
            ));
        }
        let costs = crate::cluster::Costs {
            per_request: nanos(self.per_request),
            forward_request: nanos(self.forward_request),
            forward_per_512: nanos(self.forward_per_512),
            ..d.costs
        }
        .scaled(self.cpu_scale);
        Ok(LardConfig {
            nodes: self.nodes.clone(),
            seed: self.seed,
            requests: self.requests,
            working_set: self.working_set,
            max_file: self.max_file,
            workloads,
            policies,
            zipf: self.zipf,
            prewarm: !self.cold,
            threads: self.threads,
            costs,
            phttp,
            ..d
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::DiskModel;
    use policy::MS;

    #[test]
    fn pos_defaults_are_the_scenarios() {
        let c = PosOptions::default().resolve().unwrap();
        let d = PosConfig::default();
        assert_eq!(
            (c.exp, c.seed, c.trials, &c.rw, c.slp, c.period),
            (d.exp, d.seed, d.trials, &d.rw, d.slp, d.period)
        );
        assert_eq!(c.base.costs, d.base.costs);
        assert_eq!(c.base.link_bps, d.base.link_bps);
        assert_eq!(c.base.page, d.base.page);
    }

    #[test]
    fn pos_testbed_defaults_previous_testbed_and_overrides() {
        // Defaults: the calibrated testbed (paper pool, one short seek per file, 300 ms).
        let c = PosOptions::default().resolve().unwrap();
        assert_eq!(c.base.pool, Pool::paper());
        assert_eq!(c.base.disk, DiskModel::one_cylinder_group());
        assert_eq!(c.base.jitter, 300 * MS);
        assert_eq!(c.base.jitter, WebConfig::default().jitter);
        // previous_testbed: Apache 1.2.5 defaults, the LARD disk, 100 ms.
        let prev = PosOptions {
            previous_testbed: true,
            ..PosOptions::default()
        };
        let c = prev.resolve().unwrap();
        assert_eq!(c.base.pool, Pool::default());
        assert_eq!(c.base.disk, DiskModel::default());
        assert_eq!(c.base.jitter, 100 * MS);
        // Explicit options win over either.
        let c = PosOptions {
            pool: Some(vec![7, 7, 14, 150]),
            jitter: Some(dur_of(250 * MS)),
            disk_first: Some(dur_of(12_500_000)),
            ..prev.clone()
        }
        .resolve()
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
        // Link rate in bytes per second, stored in bits per second.
        let c = PosOptions {
            link_rate: Some(12_500_000.0),
            nic: Transfer::Dma,
            ..PosOptions::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(c.base.link_bps, 100_000_000);
        assert_eq!(c.base.costs.nic_pio_per_kib, 0);
    }

    #[test]
    fn pos_arrivals_per_machine_and_t1_first_packet() {
        // Defaults: each browser on its own, t1 at the HTML's last byte, 100 ms per page start.
        let c = PosOptions::default().resolve().unwrap();
        assert_eq!(c.random_arrivals, Arrivals::Random);
        assert!(!c.base.t1_first_packet);
        assert_eq!(c.base.stagger, crate::web::STAGGER);
        assert_eq!(c.base.browsers_per_machine, 3);
        let c = PosOptions {
            arrivals: RandomArrivals::Machines,
            stagger: Some(dur_of(50 * policy::MS)),
            t1_first_packet: true,
            ..PosOptions::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(c.random_arrivals, Arrivals::Machines);
        assert_eq!(c.base.stagger, 50 * policy::MS);
        assert!(c.base.t1_first_packet);
        // The flags parse as written.
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            pos: PosOptions,
        }
        let o = <Cli as clap::Parser>::try_parse_from([
            "pos",
            "--exp",
            "4",
            "--arrivals",
            "machines",
            "--stagger",
            "80ms",
            "--t1-first-packet",
        ])
        .unwrap()
        .pos;
        assert_eq!(o.arrivals, RandomArrivals::Machines);
        assert!(o.t1_first_packet);
        assert_eq!(o.resolve().unwrap().base.stagger, 80 * policy::MS);
    }

    #[test]
    fn pos_base_flag_picks_the_scheduler_and_pos_over_it() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            pos: PosOptions,
        }
        let parse = |args: &[&str]| {
            let mut all = vec!["pos", "--exp", "4"];
            all.extend_from_slice(args);
            <Cli as clap::Parser>::try_parse_from(all)
                .unwrap()
                .pos
                .resolve()
                .unwrap()
        };
        let c = parse(&[]);
        assert_eq!(c.sched_base, SchedBase::WokenFirst);
        assert_eq!(crate::pos::variants(&c)[1].policy, "pos");
        let c = parse(&["--base", "bsd"]);
        assert_eq!(c.sched_base, SchedBase::Bsd);
        assert_eq!(crate::pos::variants(&c)[0].policy, "timeshare");
        assert_eq!(crate::pos::variants(&c)[1].policy, "posbsd");
        assert!(c.sched_base.wakeup_preempt());
        let c = parse(&["--base", "bsd-fifo-pos"]);
        assert_eq!(crate::pos::variants(&c)[1].policy, "pos");
        assert!(c.sched_base.wakeup_preempt());
    }

    #[test]
    fn pos_bad_values_name_the_flag() {
        let bad = |o: PosOptions, flag: &str| {
            let e = o.resolve().unwrap_err();
            assert!(
                matches!(e, SimError::Param { name, .. } if name == flag),
                "{e} should name {flag}"
            );
        };
        let d = PosOptions::default;
        bad(
            PosOptions {
                pool: Some(vec![1, 2, 3]),
                ..d()
            },
            "pool",
        );
        bad(
            PosOptions {
                disk_first: Some(dur_of(11 * SEC)),
                ..d()
            },
            "disk-first",
        );
        bad(
            PosOptions {
                link_rate: Some(1000.0),
                ..d()
            },
            "link-rate",
        );
        let zero = dur_of(0);
        bad(
            PosOptions {
                quantum: zero,
                ..d()
            },
            "quantum",
        );
        bad(PosOptions { slp: zero, ..d() }, "slp");
        bad(
            PosOptions {
                stagger: Some(zero),
                ..d()
            },
            "stagger",
        );
        bad(
            PosOptions {
                cpu_mhz: f64::NAN,
                ..d()
            },
            "cpu-mhz",
        );
        bad(PosOptions { image: 0, ..d() }, "image");
    }

    #[test]
    fn lard_defaults_and_checks() {
        let c = LardOptions::default().resolve().unwrap();
        let d = LardConfig::default();
        assert_eq!(
            (c.nodes, c.requests, c.working_set, c.max_file, c.prewarm),
            (d.nodes, d.requests, d.working_set, d.max_file, d.prewarm)
        );
        let caches: Vec<u64> = c.workloads.iter().map(|w| w.cache).collect();
        assert_eq!(caches, vec![32 << 20, 1 << 30]);
        let labels: Vec<String> = c.policies.iter().map(|p| p.label.clone()).collect();
        assert_eq!(labels, ["wrr", "lard", "lard-r", "chbl-1.25", "chbl-1.5"]);
        let one = LardOptions {
            workload: "fits".into(),
            policies: vec!["lard".into()],
            t_low: 10,
            ..LardOptions::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(one.workloads.len(), 1);
        assert_eq!(one.policies[0].cfg.t_low, 10);
        assert_eq!(c.costs, d.costs);
        let fast = LardOptions {
            cpu_scale: 0.5,
            ..LardOptions::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(fast.costs.setup * 2, d.costs.setup);
        assert_eq!(fast.costs.per_request * 2, d.costs.per_request);
        for (o, flag) in [
            (
                LardOptions {
                    workload: "all".into(),
                    ..LardOptions::default()
                },
                "workload",
            ),
            (
                LardOptions {
                    policies: vec!["rr".into()],
                    ..LardOptions::default()
                },
                "policies",
            ),
            (
                LardOptions {
                    requests: 99,
                    ..LardOptions::default()
                },
                "requests",
            ),
            (
                LardOptions {
                    zipf: 0.0,
                    ..LardOptions::default()
                },
                "zipf",
            ),
            (
                LardOptions {
                    cpu_scale: 0.0,
                    ..LardOptions::default()
                },
                "cpu-scale",
            ),
        ] {
            let e = o.resolve().unwrap_err();
            assert!(
                matches!(e, SimError::Param { name, .. } if name == flag),
                "{e} should name {flag}"
            );
        }
    }
}
