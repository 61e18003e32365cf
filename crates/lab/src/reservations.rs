//! `triage lab reservations`: seed 000's CPU-reservation experiment (Fig. 4 and 5). Two sites
//! (virtual hosts) whose CGI computes half a million random numbers and returns 1 KB; the site
//! of interest has 10 clients, the competing site 0..40; the throughput and response time of
//! the site of interest are measured when it reserves 50% of the CPU (the competitor 49%), 99%,
//! and when both sites share one container, beside Apache httpd (time-sharing).
//!
//! Reservations are cgroup CPU weights on the sites' CGI containers (siblings under triage's
//! cgroup tree): `weight = 50` against `49` guarantees the site of interest at least 50/99 of
//! the CPU whenever both compete, and all of it when the competitor is idle (work conserving),
//! which is what Eclipse/BSD's reservations do. The server side (server and scripts) is pinned
//! to CPU 0 under a CPU quota (default 50% of a CPU per 100 ms, see [`DEFAULT_PERIOD`]: the
//! capacity is fixed whatever else runs on that CPU of a shared machine); the clients are threads of the lab on CPU 1 in the client
//! namespace, each with one request in flight (closed loop, `Connection: close`).
//!
//! Measurement against drift (this shared VM's speed drifts by up to a quarter within a minute):
//! within each repetition the competitor counts run in a seeded random order ([`schedule`]),
//! with a point alone between every two of them, so every point with competitors is measured
//! right beside a point alone of the same server. The required figures (`reserved_kept_pct`,
//! `apache_kept_pct`) keep the formula on the medians; the paired figures beside them
//! (`*_kept_pct_paired`) divide each point by its neighbour alone first and take the median
//! ratio over repetitions ([`paired`]).
//!
//! Results: raw.csv (one row per point and site), summary.json (`reserved_kept_pct`,
//! `apache_kept_pct`, their paired forms, per-point data and curves), report.html.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::cgilab::{self, window_stats, ClosedLoop, CpuSnap, Running, TriageSite, WindowStats};
use crate::error::{LabError, Result};
use crate::peers::{Peer, Prefork};
use crate::progress::Progress;
use crate::report::{lines, Report, Series};
use crate::results::{csv_field, write_file, write_json};
use crate::testbed::{NetMode, Testbed, TestbedConfig, TestbedInfo};

pub use crate::containers::Scale;

/// Default CPU quota of the server side.
pub const DEFAULT_QUOTA: f64 = 0.5;

/// Default CFS period of that quota. Measured here (cgroup v1, triage pinned to CPU 0 under a
/// 50% quota, 10 clients per site, 5 s): with a 10 ms period the two sites' containers weighted
/// 50 and 49 got 24.5% and 18.0% of the CPU (40 competing clients), with 100 ms 23.0% and
/// 21.7%, and without a quota 45.3% and 44.3%: frequent throttling skews the weights, so the
/// quota uses a long period.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(100);

/// `cgi.max_running` of each triage site: 4. Measured (`--counts 0,10,40 --reps 2 --window 8s
/// --no-peers --max-running 2|4|none`, docs/cgi.md): without a limit, 50 scripts interleaved
/// on the one CPU made each of the site's requests cost 8-38% more CPU than alone; with 4 at
/// most 8 run and the cost stayed within 0-4% of alone (full runs: within about 10%). With 2,
/// the site reserving 99% left its container idle between scripts often enough for the 1%
/// site to take 12-17% of the CPU; with 4, 1-6%.
pub const DEFAULT_MAX_RUNNING: Option<usize> = Some(4);

/// What `triage lab reservations` was asked for.
#[derive(Debug, Clone)]
pub struct ReservationsOpts {
    /// The `triage` binary (normally `std::env::current_exe()`).
    pub triage_bin: PathBuf,
    pub quick: bool,
    pub scale: Scale,
    /// Clients of the competing site per point [default 0,1,2,5,10,20,40; quick 0,10,40;
    /// tiny 0,4].
    pub counts: Option<Vec<usize>>,
    /// Clients of the site of interest.
    pub clients: usize,
    pub window: Option<Duration>,
    pub reps: Option<usize>,
    pub quota: Option<f64>,
    pub period: Duration,
    /// `cgi.max_running` of each triage site (none = no limit).
    pub max_running: Option<usize>,
    pub peers: bool,
    pub net: NetMode,
    pub out: Option<PathBuf>,
    pub command: String,
    /// Seed of the order of the competitor counts within each repetition.
    pub seed: u64,
    /// `cgi.slice` of each triage site (none = the kernel's default slice).
    pub cgi_slice: Option<Duration>,
}

impl ReservationsOpts {
    /// Defaults for `triage_bin`.
    pub fn new(triage_bin: PathBuf) -> Self {
        Self {
            triage_bin,
            quick: false,
            scale: Scale::Normal,
            counts: None,
            clients: 10,
            window: None,
            reps: None,
            quota: Some(DEFAULT_QUOTA),
            period: DEFAULT_PERIOD,
            max_running: DEFAULT_MAX_RUNNING,
            peers: true,
            net: NetMode::Auto,
            out: None,
            command: "triage lab reservations".into(),
            seed: 1,
            cgi_slice: None,
        }
    }
}

/// The resolved parameters (in summary.json).
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    pub quick: bool,
    pub scale: Scale,
    pub counts: Vec<usize>,
    pub clients: usize,
    pub window_s: f64,
    pub warmup_s: f64,
    pub reps: usize,
    pub quota: Option<f64>,
    pub period_ms: f64,
    pub max_running: Option<usize>,
    pub cgi_script: &'static str,
    pub variants: Vec<String>,
    pub seed: u64,
    /// `cgi.slice` of the triage sites (ms; none = the kernel's default).
    pub cgi_slice_ms: Option<f64>,
    /// How the points of a repetition are ordered.
    pub order: &'static str,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// Sites' CGI containers with these weights.
    Weights(u32, u32),
    /// Both sites' CGI in one container.
    Shared,
    Apache,
}

#[derive(Debug, Clone)]
struct Variant {
    name: String,
    kind: Kind,
}

fn resolve(o: &ReservationsOpts) -> Result<(Params, Vec<Variant>)> {
    let tiny = o.scale == Scale::Tiny;
    let counts = o.counts.clone().unwrap_or_else(|| {
        if tiny {
            vec![0, 4]
        } else if o.quick {
            vec![0, 10, 40]
        } else {
            vec![0, 1, 2, 5, 10, 20, 40]
        }
    });
    if counts.is_empty() || counts.iter().any(|&k| k > 200) {
        return Err(LabError::Config(format!(
            "--counts {counts:?}: give 1 to 200 competing clients per point (0 = none)"
        )));
    }
    if !counts.contains(&0) {
        return Err(LabError::Config(
            "--counts must include 0: the site of interest's throughput alone is the reference"
                .into(),
        ));
    }
    if o.clients == 0 || o.clients > 200 {
        return Err(LabError::Config(format!(
            "--clients {} must be in 1..=200",
            o.clients
        )));
    }
    if let Some(q) = o.quota {
        if !(q > 0.0 && q <= 1.0) {
            return Err(LabError::Config(format!(
                "--quota {q}: the server side runs on one CPU, give a fraction in (0, 1]"
            )));
        }
    }
    let window = o.window.unwrap_or(if tiny {
        Duration::from_secs(2)
    } else if o.quick {
        Duration::from_secs(4)
    } else {
        Duration::from_secs(10)
    });
    if window < Duration::from_secs(1) {
        return Err(LabError::Config(format!(
            "--window {window:?} is too short (at least 1s)"
        )));
    }
    let reps = o.reps.unwrap_or(if tiny || o.quick { 1 } else { 3 });
    if reps == 0 {
        return Err(LabError::Config("--reps must be at least 1".into()));
    }
    let mut variants = vec![Variant {
        name: "triage-res50".into(),
        kind: Kind::Weights(50, 49),
    }];
    if !tiny {
        variants.push(Variant {
            name: "triage-res99".into(),
            kind: Kind::Weights(99, 1),
        });
        variants.push(Variant {
            name: "triage-shared".into(),
            kind: Kind::Shared,
        });
    }
    if o.peers {
        variants.push(Variant {
            name: "apache".into(),
            kind: Kind::Apache,
        });
    }
    let warmup = if tiny {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(1)
    };
    Ok((
        Params {
            quick: o.quick,
            scale: o.scale,
            counts,
            clients: o.clients,
            window_s: window.as_secs_f64(),
            warmup_s: warmup.as_secs_f64(),
            reps,
            quota: o.quota,
            period_ms: o.period.as_secs_f64() * 1e3,
            max_running: o.max_running,
            cgi_script: "rand.pl (Perl: 500000 calls of rand(), a 1 KB reply)",
            variants: variants.iter().map(|v| v.name.clone()).collect(),
            seed: o.seed,
            cgi_slice_ms: o.cgi_slice.map(|d| d.as_secs_f64() * 1e3),
            order: ORDER,
        },
        variants,
    ))
}

/// How [`schedule`] orders a repetition (in summary.json).
const ORDER: &str = "per repetition and variant: the competitor counts >= 1 in a seeded random \
                     order, a point alone (0) after the first of every two, so each point with \
                     competitors is measured next to a point alone of the same server";

/// The order of the points of one repetition (of one variant): the competitor counts >= 1
/// shuffled with a generator seeded by `seed` and `rep`, in pairs with a point alone (0)
/// between the two of each pair (`x 0 y x 0 y ...`, an odd last one followed by a 0), so that
/// every count is measured directly before or after a point alone. Drift then hits the points
/// alone and under competition alike, and [`paired`] can divide each point by its neighbour.
/// Counts given twice are measured twice.
pub fn schedule(counts: &[usize], rep: usize, seed: u64) -> Vec<usize> {
    let mut nz: Vec<usize> = counts.iter().copied().filter(|&n| n > 0).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ rep as u64);
    nz.shuffle(&mut rng);
    if nz.is_empty() {
        return vec![0];
    }
    let mut out = Vec::with_capacity(nz.len() * 3 / 2 + 1);
    for pair in nz.chunks(2) {
        out.push(pair[0]);
        out.push(0);
        out.extend_from_slice(&pair[1..]);
    }
    out
}

/// One measured point: one variant, one competing-client count, one repetition.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub variant: String,
    pub rep: usize,
    /// Position of the point within its repetition and variant (0 = first measured).
    pub seq: usize,
    /// Clients of the competing site.
    pub competitors: usize,
    pub window_s: f64,
    /// The site of interest.
    pub a: WindowStats,
    /// The competing site.
    pub b: WindowStats,
    /// CPU of the sites' CGI containers over the window, in % of the server side's capacity
    /// (triage with separate containers only).
    pub a_cpu_pct: Option<f64>,
    pub b_cpu_pct: Option<f64>,
    /// The server process's own CPU (request handling, starting scripts, relaying output;
    /// triage only) and the whole server side's usage, in % of its capacity.
    pub server_cpu_pct: Option<f64>,
    pub side_cpu_pct: f64,
    /// The server process's context switches per request of both sites (voluntary,
    /// involuntary; triage only).
    pub server_switches_per_req: Option<(f64, f64)>,
    /// Scripts still running 2 s after their clients went away, killed by the lab.
    pub strays_killed: usize,
}

/// Medians over repetitions, one value per competing-client count.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    pub variant: String,
    pub competitors: Vec<usize>,
    pub a_rps: Vec<f64>,
    pub a_mean_ms: Vec<f64>,
    pub a_p90_ms: Vec<f64>,
    pub b_rps: Vec<f64>,
    /// `a_rps / (0.5 * a_rps at 0 competitors) * 100`.
    pub kept_pct: Vec<f64>,
    /// Paired: each point's `a_rps / (0.5 * a_rps of the point alone next to it) * 100`,
    /// median over repetitions ([`paired`]); NaN at 0.
    pub kept_pct_paired: Vec<f64>,
    /// CPU of the site of interest's container per request (ms), median over repetitions.
    pub a_cpu_ms_per_req: Vec<f64>,
    /// Paired: that CPU per request over the one of the point alone next to it, median over
    /// repetitions; NaN at 0.
    pub a_cpu_per_req_ratio_paired: Vec<f64>,
    /// The server process's own CPU in % of the server side, median over repetitions.
    pub server_cpu_pct: Vec<f64>,
}

pub use crate::results::Goal;

/// What seed 000 reports (§6.1; the figures' data are not in the seed).
#[derive(Debug, Clone, Serialize)]
pub struct Paper {
    pub setup: &'static str,
    pub reserve_50: &'static str,
    pub reserve_99: &'static str,
    pub same_reservation: &'static str,
}

/// Seed 000's description of Fig. 4 and 5.
pub const PAPER: Paper = Paper {
    setup: "site of interest with 10 clients, competing site 0.. clients, CGI of half a million \
            rand() and a 1 KB reply, averages over three minutes",
    reserve_50: "gets essentially all the CPU without other load; with other load throughput \
                 halves and response time doubles, then both stay constant as load grows",
    reserve_99: "essentially unaffected by other load",
    same_reservation: "roughly the same as FreeBSD (time-sharing): throughput decreases and \
                       response time grows without bound",
};

/// `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub lab: &'static str,
    pub title: &'static str,
    pub command: String,
    pub started_utc: String,
    pub duration_s: f64,
    pub params: Params,
    pub testbed: TestbedInfo,
    /// Under the 50% reservation: min over competitor counts >= 1 of the site of interest's
    /// throughput / (0.5 x its throughput with no competitor) x 100.
    pub reserved_kept_pct: Option<f64>,
    /// The same for Apache httpd (time-sharing).
    pub apache_kept_pct: Option<f64>,
    /// The same for both sites in one container.
    pub shared_kept_pct: Option<f64>,
    /// Drift-corrected `reserved_kept_pct` (not the goal's figure; the goal is judged on
    /// `reserved_kept_pct`): the smallest over competitor counts >= 1 of the median over
    /// repetitions of throughput / (0.5 x the throughput of the point alone measured next to
    /// it in the same repetition) x 100.
    pub reserved_kept_pct_paired: Option<f64>,
    /// The same for Apache httpd.
    pub apache_kept_pct_paired: Option<f64>,
    /// Under the 50% reservation: the largest, over competitor counts >= 1, of the paired
    /// ratio of the site of interest's CPU per request under competition to alone.
    pub reserved_cpu_per_req_ratio_paired: Option<f64>,
    /// The reservation itself, in CPU rather than requests: the smallest over competitor
    /// counts >= 1 of the site of interest's container CPU (median over repetitions) / (0.5 x
    /// its CPU alone) x 100, under the 50% reservation ([`cpu_kept`]).
    pub reserved_cpu_kept_pct: Option<f64>,
    /// Mean response time of the site of interest under the 50% reservation at the largest
    /// competitor count / at none.
    pub reserved_response_ratio: Option<f64>,
    /// CPU time of one rand.pl request (ms), from the site of interest's container with no
    /// competitor (triage-res50).
    pub cgi_cpu_ms_per_request: Option<f64>,
    pub goals: Vec<Goal>,
    pub curves: Vec<Curve>,
    pub points: Vec<Point>,
    pub skipped: Vec<String>,
    pub notes: Vec<String>,
    pub paper: Paper,
}

const TITLE: &str =
    "Seed 000 (CPU reservations): a site's throughput and response time against a growing competing site";

fn median(v: &[f64]) -> f64 {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

struct Env<'a> {
    tb: &'a Testbed,
    p: &'a Params,
    o: &'a ReservationsOpts,
    capacity: f64,
    root: PathBuf,
    bin: PathBuf,
}

const SITE_A: &str = "site-a";
const SITE_B: &str = "site-b";

fn start(env: &Env<'_>, v: &Variant, dir: &Path) -> Result<Running> {
    let site = |name: &str, container: &str, weight: Option<u32>| TriageSite {
        name: name.into(),
        root: env.root.clone(),
        bin: env.bin.clone(),
        cgroups: true,
        container: Some(container.into()),
        cpu_max: None,
        weight,
        max_running: env.o.max_running,
        slice: env.o.cgi_slice,
    };
    let sites = match v.kind {
        Kind::Weights(a, b) => vec![
            site(SITE_A, "res-a", Some(a)),
            site(SITE_B, "res-b", Some(b)),
        ],
        Kind::Shared => vec![site(SITE_A, "shared", None), site(SITE_B, "shared", None)],
        Kind::Apache => {
            return Running::apache(
                env.tb,
                &env.root,
                &env.bin,
                &[SITE_A, SITE_B],
                &Prefork {
                    start: 16,
                    min_spare: 8,
                    max_spare: 64,
                    max_workers: 256,
                },
                dir,
            )
        }
    };
    Running::triage(
        env.tb,
        &env.o.triage_bin,
        &format!("triage serve ({})", v.name),
        &sites,
        Duration::from_secs(600),
        dir,
    )
}

fn measure(
    env: &Env<'_>,
    srv: &Running,
    v: &Variant,
    n: usize,
    rep: usize,
    seq: usize,
) -> Result<Point> {
    let tb = env.tb;
    let window = Duration::from_secs_f64(env.p.window_s);
    let warm = Duration::from_secs_f64(env.p.warmup_s);
    let cg = tb.server_cgroup().ok_or_else(|| {
        LabError::Os("the testbed has no server cgroup: the lab needs one".into())
    })?;
    let path = "/cgi-bin/rand.pl";
    let b = if n > 0 {
        Some(ClosedLoop::start(tb, srv.addr, path, SITE_B, n)?)
    } else {
        None
    };
    let a = ClosedLoop::start(tb, srv.addr, path, SITE_A, env.p.clients)?;
    crate::signals::sleep(warm)?;
    // The containers' counters are read right at the window's ends (`dt`); the server's own
    // counters around them (they carry their own timestamps).
    let s0 = CpuSnap::take(cg, srv);
    let m0 = srv.cgi_cpu(tb);
    let t0 = Instant::now();
    crate::signals::sleep(window)?;
    let t1 = Instant::now();
    let m1 = srv.cgi_cpu(tb);
    let s1 = CpuSnap::take(cg, srv);
    let a_samples = a.stop();
    let b_samples = b.map(ClosedLoop::stop).unwrap_or_default();
    let strays = cgilab::kill_strays(cg, srv, Duration::from_secs(2));
    let dt = t1.duration_since(t0).as_secs_f64();
    let (server_cpu, cgi_cpu) = s0.shares(&s1);
    let is_triage = srv.only.is_some();
    let (a_stats, b_stats) = (
        window_stats(&a_samples, t0, t1),
        window_stats(&b_samples, t0, t1),
    );
    let done = (a_stats.completed + b_stats.completed).max(1) as f64;
    let (vol, invol) = s0.switches(&s1);
    let shared = v.kind == Kind::Shared;
    let cpu = |site: &str| -> Option<f64> {
        if shared {
            return None;
        }
        let (x, y) = (m0.as_ref()?.get(site)?, m1.as_ref()?.get(site)?);
        Some((y - x) / dt / env.capacity * 100.0)
    };
    Ok(Point {
        variant: v.name.clone(),
        rep,
        seq,
        competitors: n,
        window_s: dt,
        a: a_stats,
        b: b_stats,
        a_cpu_pct: cpu(SITE_A),
        b_cpu_pct: cpu(SITE_B),
        server_cpu_pct: is_triage.then(|| server_cpu / env.capacity * 100.0),
        side_cpu_pct: (server_cpu + cgi_cpu) / env.capacity * 100.0,
        server_switches_per_req: is_triage.then(|| (vol as f64 / done, invol as f64 / done)),
        strays_killed: strays,
    })
}

fn pin_self_to_client_cpu() {
    if crate::testbed::online_cpus() >= 2 {
        let mut set = nix::sched::CpuSet::new();
        if set.set(1).is_ok() {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        }
    }
}

/// Run the lab and write the results directory. Returns the directory.
pub fn run(o: &ReservationsOpts) -> Result<PathBuf> {
    let _sig = crate::signals::install()?;
    let t_start = Instant::now();
    let started_utc = crate::pos::utc_stamp();
    let (p, mut variants) = resolve(o)?;
    let mut skipped = Vec::new();
    variants.retain(|v| match (&v.kind, Peer::Apache.unavailable()) {
        (Kind::Apache, Some(why)) => {
            skipped.push(format!("apache: {why}"));
            false
        }
        _ => true,
    });
    let out = match &o.out {
        Some(d) => d.clone(),
        None => PathBuf::from("results")
            .join("reservations")
            .join(&started_utc),
    };
    std::fs::create_dir_all(&out).map_err(|e| LabError::io("creating", &out, e))?;
    pin_self_to_client_cpu();
    let tb = Testbed::new(TestbedConfig {
        tag: "reservations".into(),
        quota: o.quota,
        period: o.period,
        rate_mbit: 1_000.0,
        net: o.net,
        ..Default::default()
    })?;
    let mut notes = tb.info().notes.clone();
    if tb.server_cgroup().is_none() {
        return Err(LabError::Os(
            "no cgroups on this machine (or no permission): reservations are cgroup weights; \
             run the lab as root"
                .into(),
        ));
    }
    let (root, bin) = cgilab::install(&tb.workdir().join("site"))?;
    let env = Env {
        tb: &tb,
        p: &p,
        o,
        capacity: tb.server_capacity(),
        root,
        bin,
    };
    let total: u64 = (0..p.reps)
        .flat_map(|rep| (0..variants.len()).map(move |vi| (rep, vi)))
        .map(|(rep, vi)| schedule(&p.counts, rep * variants.len() + vi, p.seed).len() as u64)
        .sum();
    let mut prog = Progress::new(total, "lab reservations");
    for s in &skipped {
        prog.note(&format!("skipped {s}"));
    }
    for n in &notes {
        prog.note(&format!("note: {n}"));
    }
    let runs = tb.workdir().join("runs");
    let mut points = Vec::new();
    for rep in 0..p.reps {
        for vi in 0..variants.len() {
            // Rotate the order every repetition so no variant always runs first.
            let v = &variants[(vi + rep) % variants.len()];
            let dir = runs.join(format!("{}-r{rep}", v.name));
            let srv = start(&env, v, &dir).map_err(|e| LabError::Process {
                name: format!("starting {}", v.name),
                msg: e.to_string(),
            })?;
            let mut failed = None;
            // A seeded random order per repetition, a point alone beside every other point
            // (this VM's speed drifts by up to a quarter within a minute).
            let order = schedule(&p.counts, rep * variants.len() + vi, p.seed);
            for (seq, &n) in order.iter().enumerate() {
                let label = format!("{} competitors={n} rep {}/{}", v.name, rep + 1, p.reps);
                prog.start(&label);
                match measure(&env, &srv, v, n, rep, seq) {
                    Ok(pt) => {
                        prog.finish_one(&format!(
                            "{label}: site of interest {:.1} req/s, {:.0} ms mean; competitor \
                             {:.1} req/s{}",
                            pt.a.rps,
                            pt.a.mean_ms,
                            pt.b.rps,
                            match (pt.a_cpu_pct, pt.b_cpu_pct) {
                                (Some(x), Some(y)) => format!("; CPU {x:.1}% / {y:.1}%"),
                                _ => String::new(),
                            }
                        ));
                        points.push(pt);
                    }
                    Err(e) => {
                        failed = Some((label, e));
                        break;
                    }
                }
            }
            srv.finish(&tb, failed)?;
        }
    }
    drop(prog);
    let summary = summarize(
        o,
        &p,
        &variants,
        &tb,
        points,
        skipped,
        &mut notes,
        started_utc,
        t_start,
    );
    write_outputs(&out, &summary)?;
    print_table(&summary);
    crate::results::print_goals(&summary.goals, &out);
    Ok(out)
}

/// The site of interest's CPU per request in a point (ms), from its container's share.
fn cpu_ms_per_req(x: &Point, capacity: f64) -> Option<f64> {
    let cpu_s = x.a_cpu_pct? / 100.0 * capacity * x.window_s;
    (x.a.completed > 0).then(|| cpu_s / x.a.completed as f64 * 1e3)
}

/// Paired ratios per competitor count: every point of `variant` with competitors is divided by
/// the point alone (0 competitors) of the same repetition nearest to it in measuring order
/// (`seq`; ties: the earlier one), both through `f`; the median over the repetitions is taken
/// per count. NaN where no pair exists (and at count 0).
fn paired(
    points: &[Point],
    variant: &str,
    counts: &[usize],
    f: &dyn Fn(&Point) -> Option<f64>,
) -> Vec<f64> {
    counts
        .iter()
        .map(|&n| {
            if n == 0 {
                return f64::NAN;
            }
            let ratios: Vec<f64> = points
                .iter()
                .filter(|x| x.variant == variant && x.competitors == n)
                .filter_map(|x| {
                    let alone = points
                        .iter()
                        .filter(|y| y.variant == variant && y.rep == x.rep && y.competitors == 0)
                        .min_by_key(|y| (y.seq.abs_diff(x.seq), y.seq))?;
                    let (a, b) = (f(x)?, f(alone)?);
                    (a.is_finite() && b.is_finite() && b > 0.0).then(|| a / b)
                })
                .collect();
            median(&ratios)
        })
        .collect()
}

fn min_at_competitors(competitors: &[usize], v: &[f64]) -> Option<f64> {
    competitors
        .iter()
        .zip(v)
        .filter(|(&n, k)| n >= 1 && k.is_finite())
        .map(|(_, &k)| k)
        .fold(None, |m: Option<f64>, k| Some(m.map_or(k, |m| m.min(k))))
}

/// `min over n >= 1 of median(a_cpu_pct at n) / (0.5 x median(a_cpu_pct at 0)) x 100` for
/// `variant`: what the weights guarantee, free of the work each request needs.
fn cpu_kept(points: &[Point], variant: &str, counts: &[usize]) -> Option<f64> {
    let med = |n: usize| {
        median(
            &points
                .iter()
                .filter(|x| x.variant == variant && x.competitors == n)
                .filter_map(|x| x.a_cpu_pct)
                .collect::<Vec<_>>(),
        )
    };
    let alone = med(0);
    if !alone.is_finite() || alone <= 0.0 {
        return None;
    }
    let v: Vec<f64> = counts
        .iter()
        .map(|&n| med(n) / (0.5 * alone) * 100.0)
        .collect();
    min_at_competitors(counts, &v)
}

fn kept(c: &Curve) -> Option<f64> {
    min_at_competitors(&c.competitors, &c.kept_pct)
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    o: &ReservationsOpts,
    p: &Params,
    variants: &[Variant],
    tb: &Testbed,
    points: Vec<Point>,
    skipped: Vec<String>,
    notes: &mut Vec<String>,
    started_utc: String,
    t_start: Instant,
) -> Summary {
    let mut curves = Vec::new();
    for v in variants {
        let mut c = Curve {
            variant: v.name.clone(),
            competitors: p.counts.clone(),
            a_rps: Vec::new(),
            a_mean_ms: Vec::new(),
            a_p90_ms: Vec::new(),
            b_rps: Vec::new(),
            kept_pct: Vec::new(),
            kept_pct_paired: Vec::new(),
            a_cpu_ms_per_req: Vec::new(),
            a_cpu_per_req_ratio_paired: Vec::new(),
            server_cpu_pct: Vec::new(),
        };
        let capacity = tb.server_capacity();
        for &n in &p.counts {
            let sel: Vec<&Point> = points
                .iter()
                .filter(|x| x.variant == v.name && x.competitors == n)
                .collect();
            let get = |f: fn(&Point) -> f64| median(&sel.iter().map(|x| f(x)).collect::<Vec<_>>());
            c.a_rps.push(get(|x| x.a.rps));
            c.a_mean_ms.push(get(|x| x.a.mean_ms));
            c.a_p90_ms.push(get(|x| x.a.p90_ms));
            c.b_rps.push(get(|x| x.b.rps));
            c.a_cpu_ms_per_req.push(median(
                &sel.iter()
                    .filter_map(|x| cpu_ms_per_req(x, capacity))
                    .collect::<Vec<_>>(),
            ));
            c.server_cpu_pct.push(median(
                &sel.iter()
                    .filter_map(|x| x.server_cpu_pct)
                    .collect::<Vec<_>>(),
            ));
        }
        c.kept_pct_paired = paired(&points, &v.name, &p.counts, &|x| Some(x.a.rps))
            .iter()
            .map(|r| r * 200.0)
            .collect();
        c.a_cpu_per_req_ratio_paired = paired(&points, &v.name, &p.counts, &|x| {
            cpu_ms_per_req(x, capacity)
        });
        let base = p.counts.iter().position(|&n| n == 0).map(|i| c.a_rps[i]);
        c.kept_pct = c
            .a_rps
            .iter()
            .map(|&r| match base {
                Some(b) if b > 0.0 => r / (0.5 * b) * 100.0,
                _ => f64::NAN,
            })
            .collect();
        curves.push(c);
    }
    let curve = |name: &str| curves.iter().find(|c| c.variant == name);
    let reserved = curve("triage-res50").and_then(kept);
    let apache = curve("apache").and_then(kept);
    let shared = curve("triage-shared").and_then(kept);
    let reserved_paired =
        curve("triage-res50").and_then(|c| min_at_competitors(&c.competitors, &c.kept_pct_paired));
    let apache_paired =
        curve("apache").and_then(|c| min_at_competitors(&c.competitors, &c.kept_pct_paired));
    let cpu_kept_res50 = cpu_kept(&points, "triage-res50", &p.counts);
    let cost_ratio = curve("triage-res50").and_then(|c| {
        c.competitors
            .iter()
            .zip(&c.a_cpu_per_req_ratio_paired)
            .filter(|(&n, r)| n >= 1 && r.is_finite())
            .map(|(_, &r)| r)
            .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))))
    });
    let ratio = curve("triage-res50").and_then(|c| {
        let i0 = c.competitors.iter().position(|&n| n == 0)?;
        let (im, _) = c.competitors.iter().enumerate().max_by_key(|(_, &n)| n)?;
        let (a, b) = (c.a_mean_ms[i0], c.a_mean_ms[im]);
        (a > 0.0 && b.is_finite() && im != i0).then(|| b / a)
    });
    let cpu_per_req = {
        let sel: Vec<f64> = points
            .iter()
            .filter(|x| x.variant == "triage-res50" && x.competitors == 0 && x.a.completed > 0)
            .filter_map(|x| cpu_ms_per_req(x, tb.server_capacity()))
            .collect();
        let m = median(&sel);
        m.is_finite().then_some(m)
    };
    let maxn = p.counts.iter().copied().max().unwrap_or(0);
    let mut goals = Vec::new();
    match reserved {
        Some(k) => goals.push(Goal {
            goal: "under the 50% reservation the site of interest keeps >= 95% of half its \
                   throughput alone, whatever the competitor does"
                .into(),
            met: k >= 95.0,
            detail: format!(
                "reserved_kept_pct = {k:.1}% (lowest over 1..{maxn} competitors, medians; \
                 paired with the point alone beside each point: {}; the container's CPU \
                 instead of requests: {}; CPU per request under competition / alone, paired: \
                 up to {})",
                reserved_paired.map_or("-".into(), |v| format!("{v:.1}%")),
                cpu_kept_res50.map_or("-".into(), |v| format!("{v:.1}%")),
                cost_ratio.map_or("-".into(), |v| format!("{v:.3}"))
            ),
        }),
        None => notes.push(
            "triage-res50 not measured with a competitor: reserved_kept_pct not computed".into(),
        ),
    }
    if let Some(r) = ratio {
        goals.push(Goal {
            goal: "bounded response time under the 50% reservation (at most about twice the \
                   response time alone, as halving the CPU implies)"
                .into(),
            met: r <= 2.3,
            detail: format!("mean response time with {maxn} competitors / alone = {r:.2}"),
        });
    }
    if let Some(k) = apache {
        goals.push(Goal {
            goal: "time-sharing (Apache httpd) visibly loses under the same load".into(),
            met: k < 95.0,
            detail: format!(
                "apache_kept_pct = {k:.1}% (paired: {})",
                apache_paired.map_or("-".into(), |v| format!("{v:.1}%"))
            ),
        });
    }
    if points.iter().any(|x| x.a.failed + x.b.failed > 0) {
        notes.push("some CGI requests failed (see raw.csv)".into());
    }
    Summary {
        lab: "reservations",
        title: TITLE,
        command: o.command.clone(),
        started_utc,
        duration_s: t_start.elapsed().as_secs_f64(),
        params: p.clone(),
        testbed: tb.info().clone(),
        reserved_kept_pct: reserved,
        apache_kept_pct: apache,
        shared_kept_pct: shared,
        reserved_kept_pct_paired: reserved_paired,
        apache_kept_pct_paired: apache_paired,
        reserved_cpu_per_req_ratio_paired: cost_ratio,
        reserved_cpu_kept_pct: cpu_kept_res50,
        reserved_response_ratio: ratio,
        cgi_cpu_ms_per_request: cpu_per_req,
        goals,
        curves,
        points,
        skipped,
        notes: notes.clone(),
        paper: PAPER,
    }
}

const RAW_HEADER: &str = "variant,rep,seq,competitors,site,window_s,completed,failed,rps,mean_ms,\
median_ms,p90_ms,max_ms,cpu_pct,server_cpu_pct,side_cpu_pct,strays_killed";

fn raw_csv(points: &[Point]) -> String {
    let mut s = String::from(RAW_HEADER);
    s.push('\n');
    let f = |v: f64| {
        if v.is_finite() {
            format!("{v:.3}")
        } else {
            String::new()
        }
    };
    for x in points {
        for (site, w, cpu) in [(SITE_A, &x.a, x.a_cpu_pct), (SITE_B, &x.b, x.b_cpu_pct)] {
            s.push_str(&format!(
                "{},{},{},{},{},{:.3},{},{},{},{},{},{},{},{},{},{},{}\n",
                csv_field(&x.variant),
                x.rep,
                x.seq,
                x.competitors,
                site,
                x.window_s,
                w.completed,
                w.failed,
                f(w.rps),
                f(w.mean_ms),
                f(w.median_ms),
                f(w.p90_ms),
                f(w.max_ms),
                cpu.map_or(String::new(), f),
                x.server_cpu_pct.map_or(String::new(), f),
                f(x.side_cpu_pct),
                x.strays_killed
            ));
        }
    }
    s
}

fn write_outputs(out: &Path, s: &Summary) -> Result<()> {
    write_file(&out.join("raw.csv"), raw_csv(&s.points).as_bytes())?;
    write_json(&out.join("summary.json"), s)?;
    write_file(&out.join("report.html"), report(s).as_bytes())?;
    Ok(())
}

fn print_table(s: &Summary) {
    println!("{}", s.title);
    let mut head = format!("{:<16}", "competitors");
    if let Some(c) = s.curves.first() {
        for n in &c.competitors {
            head.push_str(&format!("{n:>16}"));
        }
    }
    println!("{head}");
    for c in &s.curves {
        let mut l = format!("{:<16}", c.variant);
        for i in 0..c.competitors.len() {
            l.push_str(&format!("{:>7.1} {:>6.0}ms", c.a_rps[i], c.a_mean_ms[i]));
        }
        println!("{l}");
    }
    println!("(site of interest: req/s and mean response time, medians)");
    let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
    println!(
        "reserved_kept_pct = {}, apache_kept_pct = {}, shared_kept_pct = {}, CGI {} ms CPU/request",
        f(s.reserved_kept_pct),
        f(s.apache_kept_pct),
        f(s.shared_kept_pct),
        f(s.cgi_cpu_ms_per_request)
    );
    println!(
        "paired with the point alone beside each point: reserved_kept_pct_paired = {}, \
         apache_kept_pct_paired = {}, CPU per request under competition / alone up to {}; \
         reserved_cpu_kept_pct = {}",
        f(s.reserved_kept_pct_paired),
        f(s.apache_kept_pct_paired),
        s.reserved_cpu_per_req_ratio_paired
            .map_or("-".into(), |v| format!("{v:.3}")),
        f(s.reserved_cpu_kept_pct)
    );
}

fn report(s: &Summary) -> String {
    let mut r = Report::new(s.title);
    r.p(&format!(
        "Started {} (UTC), {:.0} s. Command (repeat it to reproduce; its only randomness is \
         the order of the points, seeded with {}):",
        s.started_utc, s.duration_s, s.params.seed
    ));
    r.pre(&s.command);
    r.h2("Conditions");
    let tb = &s.testbed;
    let p = &s.params;
    r.table(
        &["what", "value"],
        &[
            vec![
                "server side".into(),
                format!(
                    "server and CGI pinned to CPU {} in one cgroup ({}) with a CPU quota of {} \
                     (period {} ms); CPU shares are fractions of that capacity",
                    tb.server_cpu.map_or("any".into(), |c| c.to_string()),
                    tb.cgroup,
                    tb.quota
                        .map_or("none".into(), |q| format!("{:.0}% of a CPU", q * 100.0)),
                    tb.period_ms
                ),
            ],
            vec![
                "CGI".into(),
                format!(
                    "{}; {} of CPU per request measured",
                    p.cgi_script,
                    s.cgi_cpu_ms_per_request
                        .map_or("-".into(), |v| format!("{v:.1} ms"))
                ),
            ],
            vec![
                "load".into(),
                format!(
                    "{} closed-loop clients of the site of interest and 0..{} of the competing \
                     site (threads of the lab on CPU {}), one request in flight each; {:.0} s \
                     measured after {:.1} s of warm-up",
                    p.clients,
                    p.counts.iter().max().unwrap_or(&0),
                    tb.client_cpu.map_or("any".into(), |c| c.to_string()),
                    p.window_s,
                    p.warmup_s
                ),
            ],
            vec![
                "reservations".into(),
                "cgroup CPU weights of the sites' CGI containers: 50 vs 49 (triage-res50), 99 vs \
                 1 (triage-res99); triage-shared runs both sites' scripts in one container; \
                 Apache httpd (prefork + mod_cgi, two virtual hosts) time-shares"
                    .into(),
            ],
            vec!["network".into(), format!("{} ({})", tb.network, tb.shaping)],
            vec![
                "repetitions".into(),
                format!(
                    "{} (medians shown); order: {} (seed {})",
                    p.reps, p.order, p.seed
                ),
            ],
        ],
    );
    for n in &s.notes {
        r.p(&format!("Note: {n}"));
    }
    for k in &s.skipped {
        r.p(&format!("Skipped: {k}"));
    }
    r.h2("Goals");
    for g in &s.goals {
        r.verdict(g.met, &format!("{}: {}", g.goal, g.detail));
    }
    let xs: Vec<f64> = s
        .curves
        .first()
        .map(|c| c.competitors.iter().map(|&n| n as f64).collect())
        .unwrap_or_default();
    r.h2("Throughput of the site of interest (seed 000 Fig. 4)");
    // The paper's shapes first (drawn under the measured curves), scaled to this run's
    // throughput alone (triage-res50 with no competitor).
    let mut series: Vec<Series> = Vec::new();
    if let Some(c) = s.curves.iter().find(|c| c.variant == "triage-res50") {
        if let Some(i0) = c.competitors.iter().position(|&n| n == 0) {
            let alone = c.a_rps[i0];
            let clients = p.clients as f64;
            series.push((
                "paper shape: 50% reservation (half, then constant)".into(),
                xs.iter()
                    .map(|&x| if x == 0.0 { alone } else { alone / 2.0 })
                    .collect(),
            ));
            series.push((
                format!(
                    "paper shape: time-sharing ({}/({}+n) of it)",
                    p.clients, p.clients
                ),
                xs.iter()
                    .map(|&x| alone * clients / (clients + x))
                    .collect(),
            ));
        }
    }
    series.extend(
        s.curves
            .iter()
            .map(|c| (c.variant.clone(), c.a_rps.clone())),
    );
    r.figure(
        &lines(
            "Site of interest: throughput vs competing clients",
            "clients of the competing site",
            "requests/s",
            &xs,
            &series,
        ),
        &format!(
            "Medians over repetitions. Seed 000 gives no data points, only the shapes: with a \
             50% reservation the site {}; with 99% it is {}; in one shared reservation it is {}. \
             The two dashed shapes are those statements applied to this run's throughput alone.",
            PAPER.reserve_50, PAPER.reserve_99, PAPER.same_reservation
        ),
    );
    r.h2("Response time of the site of interest (seed 000 Fig. 5)");
    let series: Vec<Series> = s
        .curves
        .iter()
        .map(|c| (c.variant.clone(), c.a_mean_ms.clone()))
        .collect();
    r.figure(
        &lines(
            "Site of interest: mean response time vs competing clients",
            "clients of the competing site",
            "ms",
            &xs,
            &series,
        ),
        "Mean time from sending a request to the end of its response, requests completed \
         inside the window.",
    );
    r.h2("Throughput of the competing site");
    let series: Vec<Series> = s
        .curves
        .iter()
        .map(|c| (c.variant.clone(), c.b_rps.clone()))
        .collect();
    r.figure(
        &lines(
            "Competing site: throughput vs its clients",
            "clients of the competing site",
            "requests/s",
            &xs,
            &series,
        ),
        "Work conservation: what the site of interest does not use goes to the competitor.",
    );
    r.h2("Per point");
    let f = |v: f64| {
        if v.is_finite() {
            format!("{v:.1}")
        } else {
            "-".into()
        }
    };
    let rows: Vec<Vec<String>> = s
        .points
        .iter()
        .map(|x| {
            vec![
                x.variant.clone(),
                x.rep.to_string(),
                x.seq.to_string(),
                x.competitors.to_string(),
                f(x.a.rps),
                f(x.a.mean_ms),
                f(x.a.p90_ms),
                f(x.b.rps),
                x.a_cpu_pct.map_or("-".into(), f),
                x.b_cpu_pct.map_or("-".into(), f),
                x.server_cpu_pct.map_or("-".into(), f),
                f(x.side_cpu_pct),
                (x.a.failed + x.b.failed).to_string(),
            ]
        })
        .collect();
    r.table(
        &[
            "variant",
            "rep",
            "order",
            "competitors",
            "interest req/s",
            "interest mean ms",
            "interest p90 ms",
            "competitor req/s",
            "interest CPU %",
            "competitor CPU %",
            "server process CPU %",
            "server side CPU %",
            "failed",
        ],
        &rows,
    );
    r.to_html()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_resolve_to_sane_parameters() {
        let mut o = ReservationsOpts::new(PathBuf::from("/bin/true"));
        let (p, v) = resolve(&o).unwrap();
        assert_eq!(p.counts, vec![0, 1, 2, 5, 10, 20, 40]);
        assert_eq!(v.len(), 4);
        o.quick = true;
        assert_eq!(resolve(&o).unwrap().0.counts, vec![0, 10, 40]);
        o.scale = Scale::Tiny;
        let (p, _) = resolve(&o).unwrap();
        assert_eq!(p.variants, vec!["triage-res50", "apache"]);
        o.counts = Some(vec![5, 10]);
        assert!(resolve(&o).is_err(), "0 is required");
        o.counts = Some(vec![0, 5]);
        o.clients = 0;
        assert!(resolve(&o).is_err());
    }

    #[test]
    fn kept_is_the_minimum_over_competitors() {
        let c = Curve {
            variant: "x".into(),
            competitors: vec![0, 1, 5],
            a_rps: vec![20.0, 10.0, 9.0],
            a_mean_ms: vec![500.0, 1000.0, 1100.0],
            a_p90_ms: vec![0.0; 3],
            b_rps: vec![0.0; 3],
            kept_pct: vec![200.0, 100.0, 90.0],
            kept_pct_paired: vec![f64::NAN, 95.0, 97.0],
            a_cpu_ms_per_req: vec![25.0; 3],
            a_cpu_per_req_ratio_paired: vec![f64::NAN, 1.0, 1.0],
            server_cpu_pct: vec![9.0; 3],
        };
        assert_eq!(kept(&c), Some(90.0));
        assert_eq!(
            min_at_competitors(&c.competitors, &c.kept_pct_paired),
            Some(95.0)
        );
    }

    #[test]
    fn schedule_puts_a_point_alone_beside_every_count() {
        let counts = [0, 1, 2, 5, 10, 20, 40];
        for rep in 0..20 {
            let o = schedule(&counts, rep, 1);
            // Every count >= 1 once, 0 between the two of each pair: x 0 y x 0 y x 0 y.
            let mut nz: Vec<usize> = o.iter().copied().filter(|&n| n > 0).collect();
            nz.sort_unstable();
            assert_eq!(nz, vec![1, 2, 5, 10, 20, 40]);
            assert_eq!(o.len(), 9, "{o:?}");
            for (i, &n) in o.iter().enumerate() {
                if n > 0 {
                    let beside = (i > 0 && o[i - 1] == 0) || o.get(i + 1) == Some(&0);
                    assert!(beside, "{n} at {i} not beside a point alone: {o:?}");
                }
            }
            assert_eq!(
                o,
                schedule(&counts, rep, 1),
                "the same seed, the same order"
            );
        }
        // Different repetitions and seeds give different orders.
        let orders: std::collections::HashSet<Vec<usize>> =
            (0..20).map(|r| schedule(&counts, r, 1)).collect();
        assert!(orders.len() > 10, "{orders:?}");
        assert_ne!(schedule(&counts, 0, 1), schedule(&counts, 0, 2));
        // Odd: the last count is followed by a point alone; none: one point alone.
        assert_eq!(schedule(&[0, 10, 40, 5], 3, 1).len(), 5);
        assert_eq!(schedule(&[0, 4], 0, 1), vec![4, 0]);
        assert_eq!(schedule(&[0], 0, 1), vec![0]);
    }

    fn pt(variant: &str, rep: usize, seq: usize, competitors: usize, rps: f64) -> Point {
        let w = WindowStats {
            rps,
            completed: (rps * 10.0) as u64,
            ..WindowStats::default()
        };
        Point {
            variant: variant.into(),
            rep,
            seq,
            competitors,
            window_s: 10.0,
            a: w,
            b: w,
            a_cpu_pct: Some(rps * 5.0),
            b_cpu_pct: None,
            server_cpu_pct: None,
            side_cpu_pct: 100.0,
            server_switches_per_req: None,
            strays_killed: 0,
        }
    }

    #[test]
    fn paired_divides_by_the_neighbour_alone_and_takes_the_median() {
        // Repetition 0 drifts: alone 20 then 10 (the machine slowed); each point under
        // competition is exactly half its neighbour alone. Repetition 1 is steady (alone 18).
        let points = vec![
            pt("v", 0, 0, 5, 10.0),
            pt("v", 0, 1, 0, 20.0),
            pt("v", 0, 2, 40, 10.0),
            pt("v", 0, 3, 10, 5.0),
            pt("v", 0, 4, 0, 10.0),
            pt("v", 1, 0, 0, 18.0),
            pt("v", 1, 1, 5, 9.0),
            pt("v", 1, 2, 40, 9.0),
            pt("v", 1, 3, 0, 18.0),
            pt("v", 1, 4, 10, 9.0),
            // Another variant is never a neighbour.
            pt("w", 0, 3, 0, 1.0),
        ];
        let counts = [0, 5, 10, 40];
        let k: Vec<f64> = paired(&points, "v", &counts, &|x| Some(x.a.rps))
            .iter()
            .map(|r| r * 200.0)
            .collect();
        assert!(k[0].is_nan());
        for (i, v) in k.iter().enumerate().skip(1) {
            assert!((v - 100.0).abs() < 1e-9, "count {}: {v}", counts[i]);
        }
        // Count 10 in repetition 0 (seq 3) pairs with seq 4 (alone 10), not seq 1 (alone 20).
        let bad = paired(&points, "v", &counts, &|x| {
            (x.competitors != 40).then_some(x.a.rps)
        });
        assert!(bad[3].is_nan(), "a point without a value has no ratio");
        assert!((cpu_ms_per_req(&points[0], 0.5).unwrap() - 25.0).abs() < 1e-9);
    }

    #[test]
    fn cpu_kept_is_the_containers_share_against_half_of_alone() {
        // a_cpu_pct = 5 x rps in `pt`: alone 18 and 20 (median 19 -> CPU 95), under
        // competition 9.5 (CPU 47.5 = half) and, at 40, 9.0 (CPU 45 -> 94.7%).
        let points = vec![
            pt("v", 0, 0, 0, 18.0),
            pt("v", 0, 1, 5, 9.5),
            pt("v", 0, 2, 40, 9.0),
            pt("v", 1, 0, 0, 20.0),
            pt("v", 1, 1, 5, 9.5),
            pt("v", 1, 2, 40, 9.0),
        ];
        let k = cpu_kept(&points, "v", &[0, 5, 40]).unwrap();
        assert!((k - 45.0 / 47.5 * 100.0).abs() < 1e-9, "{k}");
        assert_eq!(cpu_kept(&points, "w", &[0, 5, 40]), None, "no such variant");
    }
}
