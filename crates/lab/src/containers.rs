//! `triage lab containers`: seed 003's CGI experiment (Fig. 12 and 13). Static 1 KB
//! throughput while 0..5 concurrent CGI requests each burn about 2 s of CPU, with the CGI
//! container of triage unlimited, capped at 30% and at 10% of the CPU, beside Apache httpd
//! (prefork + mod_cgi) on the same load as the unmodified system; the CPU share of the CGI
//! processes is measured from cgroup CPU usage.
//!
//! Setup: the testbed's server side (the server under test and its scripts) is pinned to CPU 0
//! in one cgroup without a quota (the whole CPU: the CGI burners make it the bottleneck); two
//! wrk processes on CPU 1 in the client namespace are the load: one keeps `k` CGI requests in
//! flight (closed loop), the other measures the static throughput over the window once the
//! burners run. Per point the lab reads the server side's CPU counters before and after the
//! window: the cgroup's total usage and the CPU time of the server's own (long-lived)
//! processes; the CGI share is the difference (the same method for triage and Apache), and for
//! triage also the site's CGI container usage from `/metrics` (`triage_cgi_cpu_seconds_total`).
//!
//! Variants: `triage` (each request in its own cgroup under the site's CGI container, no cap),
//! `triage-capNN` (that container capped at NN% of one CPU), `triage-timeshare` (no
//! containers: every script a plain process, as in the unmodified system; full runs only) and
//! `apache`. Results: raw.csv (one row per point), summary.json (`cap_error_pp`,
//! `static_spread_pct_cap30`, per-point data and curves), report.html.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cgilab::{self, ClosedLoop, CpuSnap, CpuTicks, Running, TriageSite, Wrk};
use crate::error::{LabError, Result};
use crate::peers::{Peer, Prefork};
use crate::progress::Progress;
use crate::report::{lines, Report, Series};
use crate::results::{csv_field, write_file, write_json};
use crate::testbed::{NetMode, Testbed, TestbedConfig, TestbedInfo};

/// How long the lab runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Minutes (`--quick`: under two).
    Normal,
    /// Seconds (CI).
    Tiny,
}

/// What `triage lab containers` was asked for.
#[derive(Debug, Clone)]
pub struct ContainersOpts {
    /// The `triage` binary (normally `std::env::current_exe()`).
    pub triage_bin: PathBuf,
    pub quick: bool,
    pub scale: Scale,
    /// Concurrent CGI requests per point [default 0..=5; quick 0,1,3,5; tiny 0,1,2].
    pub counts: Option<Vec<usize>>,
    /// Caps of the CGI container, fractions of one CPU [default 0.3, 0.1].
    pub caps: Vec<f64>,
    /// Static-throughput measurement window per point.
    pub window: Option<Duration>,
    pub reps: Option<usize>,
    /// Connections of the static load.
    pub conns: usize,
    /// CPU seconds each CGI request burns.
    pub cgi_cpu_s: f64,
    /// CPU quota of the whole server side (server + CGI), emulating a slower CPU (`None`: the
    /// whole CPU). Caps and shares are fractions of this capacity.
    pub quota: Option<f64>,
    /// CFS period of that quota.
    pub period: Duration,
    /// Measure Apache httpd.
    pub peers: bool,
    /// Also run triage without containers (default: in full runs only).
    pub timeshare: Option<bool>,
    /// Measure only these variants (names as in the report; `None`: all).
    pub only: Option<Vec<String>>,
    pub net: NetMode,
    pub out: Option<PathBuf>,
    /// The command line, for the report.
    pub command: String,
}

impl ContainersOpts {
    /// Defaults for `triage_bin`.
    pub fn new(triage_bin: PathBuf) -> Self {
        Self {
            triage_bin,
            quick: false,
            scale: Scale::Normal,
            counts: None,
            caps: vec![0.3, 0.1],
            window: None,
            reps: None,
            conns: 8,
            cgi_cpu_s: 2.0,
            quota: Some(DEFAULT_QUOTA),
            period: Duration::from_millis(10),
            peers: true,
            timeshare: None,
            only: None,
            net: NetMode::Auto,
            out: None,
            command: "triage lab containers".into(),
        }
    }
}

/// Default CPU quota of the server side: one fifth of a CPU. Measured here, triage serves a
/// 1 KB file with about 25 us of CPU; one wrk thread on the other CPU cannot push it to its
/// limit on a whole CPU (it stayed under 30% busy), so without a quota the static throughput
/// is bounded by the client, not by the CPU the CGI takes away. At 20% of a CPU the server
/// side is CPU-bound (as seed 003's server was) and the CGI competes for that CPU.
pub const DEFAULT_QUOTA: f64 = 0.2;

/// Repetitions of a full run (2 s windows): about as long as 3 repetitions of 6 s windows, with
/// more than twice as many blocks for the medians.
pub const DEFAULT_REPS: usize = 7;

/// The resolved parameters (in summary.json).
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    pub quick: bool,
    pub scale: Scale,
    pub counts: Vec<usize>,
    pub caps: Vec<f64>,
    pub window_s: f64,
    pub warmup_s: f64,
    pub reps: usize,
    pub static_conns: usize,
    pub static_doc_bytes: usize,
    pub cgi_cpu_s: f64,
    pub cgi_script: &'static str,
    /// Server-side CPU quota asked for (fraction of one CPU); the testbed says what was applied.
    pub quota: Option<f64>,
    pub period_ms: f64,
    pub variants: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// triage; `cgroups: false` = no containers; `cap` of the CGI container.
    Triage {
        cgroups: bool,
        cap: Option<f64>,
    },
    Apache,
}

#[derive(Debug, Clone)]
struct Variant {
    name: String,
    kind: Kind,
}

fn cap_name(c: f64) -> String {
    format!("triage-cap{}", (c * 100.0).round() as u64)
}

fn resolve(o: &ContainersOpts) -> Result<(Params, Vec<Variant>)> {
    let tiny = o.scale == Scale::Tiny;
    let counts = o.counts.clone().unwrap_or_else(|| {
        if tiny {
            vec![0, 1, 2]
        } else if o.quick {
            vec![0, 1, 3, 5]
        } else {
            (0..=5).collect()
        }
    });
    if counts.is_empty() || counts.iter().any(|&k| k > 64) {
        return Err(LabError::Config(format!(
            "--counts {counts:?}: give 1 to 64 concurrent CGI requests per point (0 = none)"
        )));
    }
    if let Some(q) = o.quota {
        if !(q > 0.0 && q <= 1.0) {
            return Err(LabError::Config(format!(
                "--quota {q}: the server side runs on one CPU, give a fraction in (0, 1]"
            )));
        }
    }
    for &c in &o.caps {
        if !(c > 0.0 && c < 1.0) {
            return Err(LabError::Config(format!(
                "--caps: {c} is not a fraction of one CPU in (0, 1)"
            )));
        }
    }
    if !(o.cgi_cpu_s > 0.0 && o.cgi_cpu_s.is_finite()) {
        return Err(LabError::Config(format!(
            "--cgi-cpu {} must be a positive number of seconds",
            o.cgi_cpu_s
        )));
    }
    if o.conns == 0 {
        return Err(LabError::Config("--conns must be at least 1".into()));
    }
    // Short windows, many repetitions: the machine drifts over tens of seconds, so the points
    // of one repetition (all counts, back to back) must be close in time, and the medians need
    // many repetitions (see `blocked`).
    let window = o
        .window
        .unwrap_or(Duration::from_secs(if tiny { 1 } else { 2 }));
    if window < Duration::from_secs(1) || window.subsec_nanos() != 0 {
        return Err(LabError::Config(format!(
            "--window {window:?}: give whole seconds, at least 1s (wrk measures in seconds)"
        )));
    }
    let reps = o.reps.unwrap_or(if tiny {
        1
    } else if o.quick {
        2
    } else {
        DEFAULT_REPS
    });
    if reps == 0 {
        return Err(LabError::Config("--reps must be at least 1".into()));
    }
    let mut variants = Vec::new();
    if !tiny {
        variants.push(Variant {
            name: "triage".into(),
            kind: Kind::Triage {
                cgroups: true,
                cap: None,
            },
        });
    }
    let caps: Vec<f64> = if tiny {
        o.caps.iter().copied().take(1).collect()
    } else {
        o.caps.clone()
    };
    for &c in &caps {
        variants.push(Variant {
            name: cap_name(c),
            kind: Kind::Triage {
                cgroups: true,
                cap: Some(c),
            },
        });
    }
    if o.timeshare.unwrap_or(!tiny && !o.quick) {
        variants.push(Variant {
            name: "triage-timeshare".into(),
            kind: Kind::Triage {
                cgroups: false,
                cap: None,
            },
        });
    }
    if o.peers {
        variants.push(Variant {
            name: "apache".into(),
            kind: Kind::Apache,
        });
    }
    if let Some(only) = &o.only {
        if let Some(bad) = only
            .iter()
            .find(|n| !variants.iter().any(|v| &v.name == *n))
        {
            return Err(LabError::Config(format!(
                "--only: no variant `{bad}` in this run (variants: {})",
                variants
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        variants.retain(|v| only.contains(&v.name));
    }
    let warmup = if tiny {
        Duration::from_millis(300)
    } else {
        Duration::from_millis(700)
    };
    Ok((
        Params {
            quick: o.quick,
            scale: o.scale,
            counts,
            caps,
            window_s: window.as_secs_f64(),
            warmup_s: warmup.as_secs_f64(),
            reps,
            static_conns: o.conns,
            static_doc_bytes: 1024,
            cgi_cpu_s: o.cgi_cpu_s,
            cgi_script: "burn.pl (Perl: loops until times() says cgi_cpu_s of CPU were used)",
            quota: o.quota,
            period_ms: o.period.as_secs_f64() * 1e3,
            variants: variants.iter().map(|v| v.name.clone()).collect(),
        },
        variants,
    ))
}

/// One measured point.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub variant: String,
    pub rep: usize,
    /// Concurrent CGI requests.
    pub cgi: usize,
    pub window_s: f64,
    pub static_requests: u64,
    pub static_rps: f64,
    pub static_latency_mean_ms: f64,
    pub static_latency_p99_ms: f64,
    pub static_errors: u64,
    /// CGI requests that completed during the point (each burns `cgi_cpu_s`).
    pub cgi_completed: u64,
    /// CPU share of the server's own processes during the window, in % of the server side's
    /// capacity (its quota, or one CPU).
    pub server_share_pct: f64,
    /// CPU share of the CGI processes (cgroup total minus the server processes).
    pub cgi_share_pct: f64,
    /// triage only: the CGI container's usage from `/metrics` over the window.
    pub cgi_share_metrics_pct: Option<f64>,
    /// Scripts still running 2 s after their clients went away, killed by the lab (Apache
    /// does not kill a script whose client went away; triage does).
    pub strays_killed: usize,
    /// Static requests served per millisecond of the server's own CPU (its efficiency).
    pub static_per_server_cpu_ms: f64,
    /// The server CPU's busy time outside the server side (other tenants of a shared machine),
    /// in % of one CPU, from `/proc/stat` (10 ms ticks).
    pub cpu0_other_pct: f64,
    /// The client CPU's busy time (wrk, the CGI clients and anything else), % of one CPU.
    pub cpu1_busy_pct: f64,
    /// The hypervisor's steal time on the server CPU, % of one CPU.
    pub steal0_pct: f64,
    /// The server's involuntary context switches (preempted: by its CGI or by other tenants
    /// of the CPU) per static request.
    pub server_preempt_per_req: f64,
    /// The server's voluntary context switches (it went to sleep waiting for requests) per
    /// static request.
    pub server_sleeps_per_req: f64,
}

/// Medians over repetitions, one value per CGI count.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    pub variant: String,
    pub cap: Option<f64>,
    pub cgi: Vec<usize>,
    pub static_rps: Vec<f64>,
    /// Static throughput relative to the same variant without CGI (%).
    pub static_rel_pct: Vec<f64>,
    pub cgi_share_pct: Vec<f64>,
    pub server_share_pct: Vec<f64>,
    /// Spread of the repetitions' static throughput at each count ((max-min)/median, %).
    pub static_rep_spread_pct: Vec<f64>,
    /// Static throughput with the machine's drift between repetitions removed: each
    /// repetition's points (all CGI counts, measured back to back with one server) divided by
    /// that repetition's mean, the median of those ratios over the repetitions, times the median
    /// of the repetitions' means. See [`blocked`].
    pub static_rps_blocked: Vec<f64>,
}

pub use crate::results::Goal;

/// What seed 003 reports (text of §5.6; the figures' curves are not in the seed).
#[derive(Debug, Clone, Serialize)]
pub struct Paper {
    pub unmodified_cgi4_server_cpu_pct: f64,
    pub unmodified_cgi4_static_rel_pct: f64,
    pub caps_pct: [f64; 2],
    pub caps: &'static str,
    pub static_with_caps: &'static str,
}

/// Seed 003's numbers.
pub const PAPER: Paper = Paper {
    unmodified_cgi4_server_cpu_pct: 40.0,
    unmodified_cgi4_static_rel_pct: 44.0,
    caps_pct: [30.0, 10.0],
    caps: "the CPU limits are enforced almost exactly (Fig. 13)",
    static_with_caps: "static throughput remains almost constant as concurrent CGI requests \
                       grow from 1 to 5 (Fig. 12)",
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
    /// Largest gap (percentage points) between a cap and the CGI CPU share measured under it
    /// (medians, CGI counts >= 1).
    pub cap_error_pp: Option<f64>,
    /// (max - min) / max of static throughput (%) from 1 to 5 CGI under the 30% cap (medians
    /// over the repetitions: the goal).
    pub static_spread_pct_cap30: Option<f64>,
    /// The same over the block estimate (`Curve::static_rps_blocked`): what is left once the
    /// machine's drift between repetitions is taken out.
    pub static_spread_pct_cap30_blocked: Option<f64>,
    /// The goal's formula on the server process's CPU share instead of its static throughput:
    /// (max - min) / max (%) of the median server share from 1 to 5 CGI under the 30% cap. The
    /// sand-box in CPU terms, free of the machine's drift in requests per CPU-millisecond (not
    /// the goal's figure).
    pub server_share_spread_pct_cap30: Option<f64>,
    /// Under the 30% cap: the change of static throughput from 1 to 5 CGI (%) fitted within
    /// the repetitions (least squares over the ratios to each repetition's mean), and its
    /// standard error: whether the CGI count itself moves static throughput.
    pub static_trend_pct_cap30: Option<f64>,
    pub static_trend_se_pct_cap30: Option<f64>,
    /// Standard deviation (%) of a single point's static throughput around its repetition's
    /// mean under the 30% cap: the machine's noise at one window.
    pub static_point_noise_pct_cap30: Option<f64>,
    /// Static throughput with 4 CGI relative to none (%), per variant (the paper: 44% for the
    /// unmodified system).
    pub static_rel_pct_cgi4: Vec<(String, f64)>,
    pub goals: Vec<Goal>,
    pub curves: Vec<Curve>,
    pub points: Vec<Point>,
    pub skipped: Vec<String>,
    pub notes: Vec<String>,
    pub paper: Paper,
}

const TITLE: &str =
    "Seed 003 (resource containers): static throughput and CGI CPU share under a capped CGI container";

fn median(v: &mut [f64]) -> f64 {
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

/// (max - min) / max in % of `rps` over CGI counts 1..=5 (`None` without such a count).
fn spread_1_to_5(cgi: &[usize], rps: &[f64]) -> Option<f64> {
    let v: Vec<f64> = cgi
        .iter()
        .zip(rps)
        .filter(|(&k, r)| (1..=5).contains(&k) && r.is_finite())
        .map(|(_, &r)| r)
        .collect();
    let mx = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mn = v.iter().copied().fold(f64::INFINITY, f64::min);
    (!v.is_empty() && mx > 0.0).then(|| (mx - mn) / mx * 100.0)
}

/// Static throughput per CGI count with the drift between repetitions removed (a randomized
/// block estimate). On a shared machine the server's requests per CPU-millisecond drift by
/// 10-40% over tens of seconds (other tenants' builds on the same CPUs), while the points of one
/// repetition of a variant are measured back to back with one server (about 20 s). So each
/// repetition is a block: its points are divided by the block's mean (complete blocks only:
/// every count measured), the median ratio per count is taken over the blocks, and multiplied
/// by the median block mean to give requests/s again.
fn blocked(points: &[Point], variant: &str, counts: &[usize]) -> Vec<f64> {
    let reps: std::collections::BTreeSet<usize> = points
        .iter()
        .filter(|x| x.variant == variant)
        .map(|x| x.rep)
        .collect();
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); counts.len()];
    let mut means = Vec::new();
    for r in reps {
        let row: Vec<Option<f64>> = counts
            .iter()
            .map(|&k| {
                points
                    .iter()
                    .find(|x| x.variant == variant && x.rep == r && x.cgi == k)
                    .map(|x| x.static_rps)
                    .filter(|v| v.is_finite() && *v > 0.0)
            })
            .collect();
        if row.iter().any(|v| v.is_none()) {
            continue;
        }
        let m = row.iter().flatten().sum::<f64>() / row.len() as f64;
        means.push(m);
        for (i, v) in row.iter().enumerate() {
            ratios[i].push(v.unwrap_or(f64::NAN) / m);
        }
    }
    let level = median(&mut means);
    ratios.iter_mut().map(|r| median(r) * level).collect()
}

/// The trend of static throughput from 1 to 5 CGI within the repetitions: the least-squares
/// slope of each complete repetition's ratios (point / the repetition's mean over counts
/// 1..=5) against the CGI count, times 4 (the change from 1 to 5 CGI, in %), and its standard
/// error. `None` with fewer than two counts or three points.
fn trend_1_to_5(points: &[Point], variant: &str, counts: &[usize]) -> Option<(f64, f64)> {
    let ks: Vec<usize> = counts
        .iter()
        .copied()
        .filter(|k| (1..=5).contains(k))
        .collect();
    let reps: std::collections::BTreeSet<usize> = points
        .iter()
        .filter(|x| x.variant == variant)
        .map(|x| x.rep)
        .collect();
    let mut xy = Vec::new();
    for r in reps {
        let row: Vec<Option<f64>> = ks
            .iter()
            .map(|&k| {
                points
                    .iter()
                    .find(|x| x.variant == variant && x.rep == r && x.cgi == k)
                    .map(|x| x.static_rps)
                    .filter(|v| v.is_finite() && *v > 0.0)
            })
            .collect();
        if row.iter().any(|v| v.is_none()) {
            continue;
        }
        let m = row.iter().flatten().sum::<f64>() / row.len() as f64;
        for (k, v) in ks.iter().zip(row.iter().flatten()) {
            xy.push((*k as f64, v / m));
        }
    }
    let n = xy.len() as f64;
    if ks.len() < 2 || xy.len() < 3 {
        return None;
    }
    let mx = xy.iter().map(|p| p.0).sum::<f64>() / n;
    let my = xy.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = xy.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let b = xy.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
    let rss: f64 = xy
        .iter()
        .map(|p| (p.1 - (my + b * (p.0 - mx))).powi(2))
        .sum();
    let se = (rss / (n - 2.0) / sxx).sqrt();
    Some((b * 400.0, se * 400.0))
}

/// Standard deviation (%) of the points' ratios to their repetition's mean (complete
/// repetitions over counts 1..=5).
fn point_noise(points: &[Point], variant: &str, counts: &[usize]) -> Option<f64> {
    let ks: Vec<usize> = counts
        .iter()
        .copied()
        .filter(|k| (1..=5).contains(k))
        .collect();
    let reps: std::collections::BTreeSet<usize> = points
        .iter()
        .filter(|x| x.variant == variant)
        .map(|x| x.rep)
        .collect();
    let mut r = Vec::new();
    for rep in reps {
        let row: Vec<f64> = ks
            .iter()
            .filter_map(|&k| {
                points
                    .iter()
                    .find(|x| x.variant == variant && x.rep == rep && x.cgi == k)
                    .map(|x| x.static_rps)
                    .filter(|v| v.is_finite() && *v > 0.0)
            })
            .collect();
        if row.len() != ks.len() || ks.len() < 2 {
            continue;
        }
        let m = row.iter().sum::<f64>() / row.len() as f64;
        r.extend(row.iter().map(|v| v / m - 1.0));
    }
    if r.len() < 3 {
        return None;
    }
    // The ratios of a repetition sum to zero: n - reps degrees of freedom.
    let reps = r.len() / ks.len();
    let dof = (r.len() - reps).max(1) as f64;
    Some((r.iter().map(|x| x * x).sum::<f64>() / dof).sqrt() * 100.0)
}

fn pin_self_to_client_cpu() {
    if crate::testbed::online_cpus() >= 2 {
        let mut set = nix::sched::CpuSet::new();
        if set.set(1).is_ok() {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        }
    }
}

struct Env<'a> {
    tb: &'a Testbed,
    /// CPUs of the server side (its quota): caps and shares are fractions of it.
    capacity: f64,
    p: &'a Params,
    o: &'a ContainersOpts,
    root: PathBuf,
    bin: PathBuf,
}

fn start(env: &Env<'_>, v: &Variant, dir: &Path) -> Result<Running> {
    match &v.kind {
        Kind::Triage { cgroups, cap } => Running::triage(
            env.tb,
            &env.o.triage_bin,
            &format!("triage serve ({})", v.name),
            &[TriageSite {
                name: "site".into(),
                root: env.root.clone(),
                bin: env.bin.clone(),
                cgroups: *cgroups,
                container: Some("cgi".into()),
                cpu_max: cap.map(|c| c * env.capacity),
                weight: None,
                max_running: None,
                slice: None,
            }],
            Duration::from_secs(3600),
            dir,
        ),
        Kind::Apache => Running::apache(env.tb, &env.root, &env.bin, &[], &Prefork::default(), dir),
    }
}

fn measure(env: &Env<'_>, srv: &Running, v: &Variant, k: usize, rep: usize) -> Result<Point> {
    let tb = env.tb;
    let window = Duration::from_secs_f64(env.p.window_s);
    let warm = Duration::from_secs_f64(env.p.warmup_s);
    let cg = tb.server_cgroup().ok_or_else(|| {
        LabError::Os("the testbed has no server cgroup: CPU shares cannot be measured".into())
    })?;
    let load = if k > 0 {
        Some(ClosedLoop::start(
            tb,
            srv.addr,
            &format!("/cgi-bin/burn.pl?s={}", env.p.cgi_cpu_s),
            "site",
            k,
        )?)
    } else {
        None
    };
    crate::signals::sleep(warm)?;
    let m0 = srv.cgi_cpu(tb);
    let t0 = CpuTicks::take();
    let s0 = CpuSnap::take(cg, srv);
    let st = Wrk::start(
        tb,
        &format!("static-{}-k{k}-r{rep}", v.name),
        &format!("http://{}/1k.html", srv.addr),
        env.p.static_conns,
        window,
        Duration::from_secs(10),
        None,
    )?
    .finish(window + Duration::from_secs(20))?;
    let s1 = CpuSnap::take(cg, srv);
    let t1 = CpuTicks::take();
    let m1 = srv.cgi_cpu(tb);
    let dt = s1.at.duration_since(s0.at).as_secs_f64();
    // The CGI load runs past the window: stop it (its clients go away).
    let samples = load.map(ClosedLoop::stop).unwrap_or_default();
    let strays = cgilab::kill_strays(cg, srv, Duration::from_secs(2));
    let (srv_share, cgi_share) = s0.shares(&s1);
    let sw = s0.switches(&s1);
    let cap = env.capacity;
    let side = s1.total.saturating_sub(s0.total).as_secs_f64() / dt.max(1e-9) * 100.0;
    let (busy0, steal0) = tb
        .info()
        .server_cpu
        .map_or((f64::NAN, f64::NAN), |c| t0.busy_steal_pct(&t1, c));
    let (busy1, _) = tb
        .info()
        .client_cpu
        .map_or((f64::NAN, f64::NAN), |c| t0.busy_steal_pct(&t1, c));
    let metrics_share = match (m0, m1) {
        (Some(a), Some(b)) => match (a.get("site"), b.get("site")) {
            (Some(x), Some(y)) if dt > 0.0 => Some((y - x) / dt / cap * 100.0),
            _ => None,
        },
        _ => None,
    };
    Ok(Point {
        variant: v.name.clone(),
        rep,
        cgi: k,
        window_s: dt,
        static_requests: st.requests,
        static_rps: st.rps,
        static_latency_mean_ms: st.latency_mean_ms,
        static_latency_p99_ms: st.latency_p99_ms,
        static_errors: st.errors + st.non_2xx,
        cgi_completed: samples.iter().filter(|x| x.ok).count() as u64,
        server_share_pct: srv_share / cap * 100.0,
        cgi_share_pct: cgi_share / cap * 100.0,
        cgi_share_metrics_pct: metrics_share,
        strays_killed: strays,
        static_per_server_cpu_ms: if srv_share > 0.0 {
            st.rps / (srv_share * 1e3)
        } else {
            f64::NAN
        },
        server_preempt_per_req: if st.requests > 0 {
            sw.1 as f64 / st.requests as f64
        } else {
            f64::NAN
        },
        server_sleeps_per_req: if st.requests > 0 {
            sw.0 as f64 / st.requests as f64
        } else {
            f64::NAN
        },
        cpu0_other_pct: (busy0 - side).max(0.0),
        cpu1_busy_pct: busy1,
        steal0_pct: steal0,
    })
}

/// Run the lab and write the results directory. Returns the directory.
pub fn run(o: &ContainersOpts) -> Result<PathBuf> {
    let _sig = crate::signals::install()?;
    let t_start = Instant::now();
    let started_utc = crate::pos::utc_stamp();
    let (p, mut variants) = resolve(o)?;
    if Wrk::available().is_none() {
        return Err(LabError::Config(
            "wrk is not installed (scripts/deps.sh installs it); the lab needs it as the load"
                .into(),
        ));
    }
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
            .join("containers")
            .join(&started_utc),
    };
    std::fs::create_dir_all(&out).map_err(|e| LabError::io("creating", &out, e))?;
    pin_self_to_client_cpu();
    let tb = Testbed::new(TestbedConfig {
        tag: "containers".into(),
        quota: o.quota,
        period: o.period,
        // A fast link: the CPU, not the network, must be the bottleneck of 1 KB requests.
        rate_mbit: 10_000.0,
        net: o.net,
        ..Default::default()
    })?;
    let mut notes = tb.info().notes.clone();
    if tb.server_cgroup().is_none() {
        return Err(LabError::Os(
            "no cgroups on this machine (or no permission): the lab measures CPU shares from \
             cgroup usage and caps a cgroup; run it as root"
                .into(),
        ));
    }
    let (root, bin) = cgilab::install(&tb.workdir().join("site"))?;
    let env = Env {
        capacity: tb.server_capacity(),
        tb: &tb,
        p: &p,
        o,
        root,
        bin,
    };
    let total = (variants.len() * p.counts.len() * p.reps) as u64;
    let mut prog = Progress::new(total, "lab containers");
    for s in &skipped {
        prog.note(&format!("skipped {s}"));
    }
    for n in &notes {
        prog.note(&format!("note: {n}"));
    }
    let mut points = Vec::new();
    let runs = tb.workdir().join("runs");
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
            // Rotate the counts too: slow drifts of a shared machine spread over all counts.
            let nk = p.counts.len();
            for ki in 0..nk {
                let k = p.counts[(ki + rep) % nk];
                let label = format!("{} cgi={k} rep {}/{}", v.name, rep + 1, p.reps);
                prog.start(&label);
                match measure(&env, &srv, v, k, rep) {
                    Ok(pt) => {
                        prog.finish_one(&format!(
                            "{label}: static {:.0} req/s, CGI {:.1}% CPU (server {:.1}%){}; \
                             {:.1} req/server-ms, {:.3} preemptions and {:.3} sleeps per \
                             request, CPU {} others {:.0}%, steal {:.0}%, CPU {} busy {:.0}%",
                            pt.static_rps,
                            pt.cgi_share_pct,
                            pt.server_share_pct,
                            pt.cgi_share_metrics_pct
                                .map_or(String::new(), |m| format!(", container {m:.1}%")),
                            pt.static_per_server_cpu_ms,
                            pt.server_preempt_per_req,
                            pt.server_sleeps_per_req,
                            tb.info().server_cpu.map_or("-".into(), |c| c.to_string()),
                            pt.cpu0_other_pct,
                            pt.steal0_pct,
                            tb.info().client_cpu.map_or("-".into(), |c| c.to_string()),
                            pt.cpu1_busy_pct
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

#[allow(clippy::too_many_arguments)]
fn summarize(
    o: &ContainersOpts,
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
        let cap = match v.kind {
            Kind::Triage { cap, .. } => cap,
            Kind::Apache => None,
        };
        let mut c = Curve {
            variant: v.name.clone(),
            cap,
            cgi: p.counts.clone(),
            static_rps: Vec::new(),
            static_rel_pct: Vec::new(),
            cgi_share_pct: Vec::new(),
            server_share_pct: Vec::new(),
            static_rep_spread_pct: Vec::new(),
            static_rps_blocked: Vec::new(),
        };
        for &k in &p.counts {
            let sel: Vec<&Point> = points
                .iter()
                .filter(|x| x.variant == v.name && x.cgi == k)
                .collect();
            let mut rps: Vec<f64> = sel.iter().map(|x| x.static_rps).collect();
            let med = median(&mut rps);
            let (mn, mx) = rps
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            c.static_rep_spread_pct.push(if med > 0.0 && mx >= mn {
                (mx - mn) / med * 100.0
            } else {
                f64::NAN
            });
            c.static_rps.push(med);
            c.cgi_share_pct.push(median(
                &mut sel.iter().map(|x| x.cgi_share_pct).collect::<Vec<_>>(),
            ));
            c.server_share_pct.push(median(
                &mut sel.iter().map(|x| x.server_share_pct).collect::<Vec<_>>(),
            ));
        }
        c.static_rps_blocked = blocked(&points, &v.name, &p.counts);
        let base = p
            .counts
            .iter()
            .position(|&k| k == 0)
            .map(|i| c.static_rps[i]);
        c.static_rel_pct = c
            .static_rps
            .iter()
            .map(|&r| match base {
                Some(b) if b > 0.0 => r / b * 100.0,
                _ => f64::NAN,
            })
            .collect();
        curves.push(c);
    }
    // Cap accuracy: medians at CGI counts >= 1.
    let mut cap_error: Option<f64> = None;
    for c in &curves {
        let Some(cap) = c.cap else { continue };
        for (i, &k) in c.cgi.iter().enumerate() {
            let s = c.cgi_share_pct[i];
            if k >= 1 && s.is_finite() {
                let e = (s - cap * 100.0).abs();
                cap_error = Some(cap_error.map_or(e, |m: f64| m.max(e)));
            }
        }
    }
    let cap30 = curves
        .iter()
        .find(|c| c.cap.is_some_and(|x| (x - 0.3).abs() < 1e-9));
    let spread = cap30.and_then(|c| spread_1_to_5(&c.cgi, &c.static_rps));
    let spread_blocked = cap30.and_then(|c| spread_1_to_5(&c.cgi, &c.static_rps_blocked));
    let trend = cap30.and_then(|c| trend_1_to_5(&points, &c.variant, &p.counts));
    let noise = cap30.and_then(|c| point_noise(&points, &c.variant, &p.counts));
    let rel4: Vec<(String, f64)> = curves
        .iter()
        .filter_map(|c| {
            let i = c.cgi.iter().position(|&k| k == 4)?;
            let v = c.static_rel_pct[i];
            v.is_finite().then(|| (c.variant.clone(), v))
        })
        .collect();
    let mut goals = Vec::new();
    match cap_error {
        Some(e) => goals.push(Goal {
            goal: "CGI CPU share within 2 percentage points of the cap".into(),
            met: e <= 2.0,
            detail: format!("largest gap {e:.2} pp"),
        }),
        None => notes.push("no capped variant with CGI load: cap_error_pp not measured".into()),
    }
    match spread {
        Some(s) => {
            let n = cap30.map_or(0, |c| c.cgi.iter().filter(|k| (1..=5).contains(*k)).count());
            goals.push(Goal {
                goal: "static throughput under the 30% cap within 5% from 1 to 5 CGI".into(),
                met: s <= 5.0,
                detail: format!(
                    "(max-min)/max = {s:.2}% over {n} CGI counts (medians over repetitions; \
                     {} with the drift between repetitions removed; trend from 1 to 5 CGI \
                     within repetitions {}; one point's noise {})",
                    spread_blocked.map_or("-".into(), |b| format!("{b:.2}%")),
                    trend.map_or("-".into(), |(t, se)| format!("{t:+.1}% +- {se:.1}%")),
                    noise.map_or("-".into(), |x| format!("{x:.1}%"))
                ),
            });
        }
        None => notes.push("no 30% cap variant: static_spread_pct_cap30 not measured".into()),
    }
    if points.iter().any(|x| x.static_errors > 0) {
        notes.push("some static requests failed (see raw.csv static_errors)".into());
    }
    Summary {
        lab: "containers",
        title: TITLE,
        command: o.command.clone(),
        started_utc,
        duration_s: t_start.elapsed().as_secs_f64(),
        params: p.clone(),
        testbed: tb.info().clone(),
        cap_error_pp: cap_error,
        static_spread_pct_cap30: spread,
        static_spread_pct_cap30_blocked: spread_blocked,
        server_share_spread_pct_cap30: cap30
            .and_then(|c| spread_1_to_5(&c.cgi, &c.server_share_pct)),
        static_trend_pct_cap30: trend.map(|t| t.0),
        static_trend_se_pct_cap30: trend.map(|t| t.1),
        static_point_noise_pct_cap30: noise,
        static_rel_pct_cgi4: rel4,
        goals,
        curves,
        points,
        skipped,
        notes: notes.clone(),
        paper: PAPER,
    }
}

const RAW_HEADER: &str =
    "variant,rep,cgi,window_s,static_requests,static_rps,static_latency_mean_ms,\
static_latency_p99_ms,static_errors,cgi_completed,server_share_pct,cgi_share_pct,\
cgi_share_metrics_pct,strays_killed,static_per_server_cpu_ms,cpu0_other_pct,cpu1_busy_pct,\
steal0_pct,server_preempt_per_req,server_sleeps_per_req";

fn raw_csv(points: &[Point]) -> String {
    let mut s = String::from(RAW_HEADER);
    s.push('\n');
    for x in points {
        s.push_str(&format!(
            "{},{},{},{:.3},{},{:.1},{:.3},{:.3},{},{},{:.2},{:.2},{},{},{:.2},{:.1},{:.1},{:.1},{:.4},{:.4}\n",
            csv_field(&x.variant),
            x.rep,
            x.cgi,
            x.window_s,
            x.static_requests,
            x.static_rps,
            x.static_latency_mean_ms,
            x.static_latency_p99_ms,
            x.static_errors,
            x.cgi_completed,
            x.server_share_pct,
            x.cgi_share_pct,
            x.cgi_share_metrics_pct
                .map_or(String::new(), |v| format!("{v:.2}")),
            x.strays_killed,
            x.static_per_server_cpu_ms,
            x.cpu0_other_pct,
            x.cpu1_busy_pct,
            x.steal0_pct,
            x.server_preempt_per_req,
            x.server_sleeps_per_req
        ));
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
    let mut head = format!("{:<18}", "variant \\ CGI");
    if let Some(c) = s.curves.first() {
        for k in &c.cgi {
            head.push_str(&format!("{k:>16}"));
        }
    }
    println!("{head}");
    for c in &s.curves {
        let mut l = format!("{:<18}", c.variant);
        for i in 0..c.cgi.len() {
            l.push_str(&format!(
                "{:>9.0} {:>5.1}%",
                c.static_rps[i], c.cgi_share_pct[i]
            ));
        }
        println!("{l}");
    }
    println!("(static req/s and CGI CPU share, medians)");
    println!(
        "cap_error_pp = {}, static_spread_pct_cap30 = {} (blocked: {}; the server's CPU \
         share instead of its throughput: {})",
        s.cap_error_pp.map_or("-".into(), |v| format!("{v:.2}")),
        s.static_spread_pct_cap30
            .map_or("-".into(), |v| format!("{v:.2}")),
        s.static_spread_pct_cap30_blocked
            .map_or("-".into(), |v| format!("{v:.2}")),
        s.server_share_spread_pct_cap30
            .map_or("-".into(), |v| format!("{v:.2}"))
    );
}

fn report(s: &Summary) -> String {
    let mut r = Report::new(s.title);
    r.p(&format!(
        "Started {} (UTC), {:.0} s. Command (repeat it to reproduce; the lab has no randomness):",
        s.started_utc, s.duration_s
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
                    "server under test and its CGI pinned to CPU {} in one cgroup ({}) with a \
                     CPU quota of {} (period {} ms) emulating a slower CPU; caps and CPU shares \
                     below are fractions of that capacity",
                    tb.server_cpu.map_or("any".into(), |c| c.to_string()),
                    tb.cgroup,
                    tb.quota.map_or("none (the whole CPU)".into(), |q| format!(
                        "{:.0}% of a CPU",
                        q * 100.0
                    )),
                    tb.period_ms
                ),
            ],
            vec![
                "load".into(),
                format!(
                    "wrk on CPU {}: {} connections fetching a {} B static document during {:.1} s \
                     per point; k closed-loop clients (threads of the lab, same CPU) keeping k \
                     CGI requests in flight (each burns {} s of CPU, {}), started {:.1} s before",
                    tb.client_cpu.map_or("any".into(), |c| c.to_string()),
                    p.static_conns,
                    p.static_doc_bytes,
                    p.window_s,
                    p.cgi_cpu_s,
                    p.cgi_script,
                    p.warmup_s
                ),
            ],
            vec!["network".into(), format!("{} ({})", tb.network, tb.shaping)],
            vec!["repetitions".into(), format!("{} (medians shown)", p.reps)],
            vec![
                "CPU share".into(),
                "from the server-side cgroup's usage minus the server processes' own CPU time \
                 (the same for triage and Apache); triage also from its CGI container's usage"
                    .into(),
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
        .map(|c| c.cgi.iter().map(|&k| k as f64).collect())
        .unwrap_or_default();
    let paper_point = |at: usize, v: f64| -> Vec<f64> {
        xs.iter()
            .map(|&x| if x as usize == at { v } else { f64::NAN })
            .collect()
    };
    r.h2("Static throughput (seed 003 Fig. 12)");
    let mut series: Vec<Series> = s
        .curves
        .iter()
        .map(|c| (c.variant.clone(), c.static_rps.clone()))
        .collect();
    r.figure(
        &lines(
            "Static 1 KB throughput vs concurrent CGI requests",
            "concurrent CGI requests",
            "requests/s",
            &xs,
            &series,
        ),
        "Medians over repetitions.",
    );
    r.figure(
        &lines(
            "Static throughput, drift between repetitions removed",
            "concurrent CGI requests",
            "requests/s",
            &xs,
            &s.curves
                .iter()
                .map(|c| (c.variant.clone(), c.static_rps_blocked.clone()))
                .collect::<Vec<Series>>(),
        ),
        &format!(
            "Each repetition of a variant (all CGI counts back to back with one server, about \
             20 s) is a block: its points divided by the block's mean, the median ratio over \
             the blocks, times the median block mean. On a shared machine the server's requests \
             per CPU-millisecond drift with other tenants' work on the same CPUs (see the \
             per-point columns). Under the 30% cap: spread {} (medians {}), trend from 1 to 5 \
             CGI within repetitions {}, one point's noise {}.",
            s.static_spread_pct_cap30_blocked
                .map_or("-".into(), |v| format!("{v:.1}%")),
            s.static_spread_pct_cap30
                .map_or("-".into(), |v| format!("{v:.1}%")),
            match (s.static_trend_pct_cap30, s.static_trend_se_pct_cap30) {
                (Some(t), Some(e)) => format!("{t:+.1}% +- {e:.1}% (one standard error)"),
                _ => "-".into(),
            },
            s.static_point_noise_pct_cap30
                .map_or("-".into(), |v| format!("{v:.1}%"))
        ),
    );
    // The paper's marks first, so that the measured curves are drawn over them.
    series = vec![(
        "paper: unmodified system (44% at 4 CGI)".into(),
        paper_point(4, PAPER.unmodified_cgi4_static_rel_pct),
    )];
    series.extend(
        s.curves
            .iter()
            .map(|c| (c.variant.clone(), c.static_rel_pct.clone())),
    );
    r.figure(
        &lines(
            "Static throughput relative to no CGI",
            "concurrent CGI requests",
            "% of the same server without CGI",
            &xs,
            &series,
        ),
        "The paper gives one number for its unmodified system: with 4 concurrent CGI requests \
         the server got 40% of the CPU and static throughput dropped to 44% of its maximum; \
         with the CGI-parent container capped at 30% or 10%, static throughput stayed almost \
         constant from 1 to 5 CGI requests.",
    );
    r.h2("CPU share of the CGI requests (seed 003 Fig. 13)");
    let mut series: Vec<Series> = Vec::new();
    for cap in PAPER.caps_pct {
        series.push((
            format!("paper: cap {cap:.0}% (enforced almost exactly)"),
            xs.iter()
                .map(|&x| if x >= 1.0 { cap } else { f64::NAN })
                .collect(),
        ));
    }
    series.push((
        "paper: unmodified (server 40% at 4 CGI)".into(),
        paper_point(4, 100.0 - PAPER.unmodified_cgi4_server_cpu_pct),
    ));
    series.extend(
        s.curves
            .iter()
            .map(|c| (c.variant.clone(), c.cgi_share_pct.clone())),
    );
    r.figure(
        &lines(
            "CGI CPU share vs concurrent CGI requests",
            "concurrent CGI requests",
            "% of the server side's CPU (its quota)",
            &xs,
            &series,
        ),
        "Measured CGI share (cgroup usage minus the server processes). The paper's caps are \
         drawn where they apply (1 CGI or more).",
    );
    r.h2("Per point");
    let rows: Vec<Vec<String>> = s
        .points
        .iter()
        .map(|x| {
            vec![
                x.variant.clone(),
                x.rep.to_string(),
                x.cgi.to_string(),
                format!("{:.0}", x.static_rps),
                format!("{:.2}", x.static_latency_mean_ms),
                format!("{:.1}", x.server_share_pct),
                format!("{:.1}", x.cgi_share_pct),
                x.cgi_share_metrics_pct
                    .map_or("-".into(), |v| format!("{v:.1}")),
                x.strays_killed.to_string(),
                format!("{:.1}", x.static_per_server_cpu_ms),
                format!("{:.0}", x.cpu0_other_pct),
                format!("{:.0}", x.cpu1_busy_pct),
                format!("{:.0}", x.steal0_pct),
                format!("{:.3}", x.server_preempt_per_req),
                format!("{:.3}", x.server_sleeps_per_req),
            ]
        })
        .collect();
    r.table(
        &[
            "variant",
            "rep",
            "CGI",
            "static req/s",
            "static mean ms",
            "server CPU %",
            "CGI CPU %",
            "CGI container %",
            "strays killed",
            "req per server CPU ms",
            "server CPU: others %",
            "client CPU busy %",
            "steal %",
            "server preemptions per request",
            "server sleeps per request",
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
        let mut o = ContainersOpts::new(PathBuf::from("/bin/true"));
        let (p, v) = resolve(&o).unwrap();
        assert_eq!(p.counts, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(
            p.variants,
            vec![
                "triage",
                "triage-cap30",
                "triage-cap10",
                "triage-timeshare",
                "apache"
            ]
        );
        assert_eq!(v.len(), 5);
        o.quick = true;
        let (p, _) = resolve(&o).unwrap();
        assert_eq!(p.counts, vec![0, 1, 3, 5]);
        assert!(!p.variants.contains(&"triage-timeshare".to_string()));
        o.scale = Scale::Tiny;
        let (p, _) = resolve(&o).unwrap();
        assert_eq!(p.variants, vec!["triage-cap30", "apache"]);
        o.caps = vec![1.5];
        assert!(resolve(&o).is_err());
        o.caps = vec![0.3];
        o.counts = Some(vec![]);
        assert!(resolve(&o).is_err());
    }

    fn pt(rep: usize, cgi: usize, rps: f64) -> Point {
        Point {
            variant: "v".into(),
            rep,
            cgi,
            window_s: 2.0,
            static_requests: 0,
            static_rps: rps,
            static_latency_mean_ms: 1.0,
            static_latency_p99_ms: 1.0,
            static_errors: 0,
            cgi_completed: 0,
            server_share_pct: 70.0,
            cgi_share_pct: 30.0,
            cgi_share_metrics_pct: None,
            strays_killed: 0,
            static_per_server_cpu_ms: 50.0,
            cpu0_other_pct: 0.0,
            cpu1_busy_pct: 0.0,
            steal0_pct: 0.0,
            server_preempt_per_req: 0.0,
            server_sleeps_per_req: 0.0,
        }
    }

    #[test]
    fn blocks_remove_drift_between_repetitions_and_trends_are_found() {
        let counts = [1, 2, 3, 4, 5];
        // Flat in k, each repetition at its own level (the machine's drift): the raw medians
        // differ by count, the block estimate is flat.
        let levels = [1000.0, 700.0, 1300.0];
        let wobble = [
            [1.0, 1.02, 0.98, 1.0, 1.0],
            [1.0, 1.0, 1.0, 1.02, 0.98],
            [0.98, 1.0, 1.02, 1.0, 1.0],
        ];
        let mut pts = Vec::new();
        for (r, l) in levels.iter().enumerate() {
            for (i, &k) in counts.iter().enumerate() {
                pts.push(pt(r, k, l * wobble[r][i]));
            }
        }
        let b = blocked(&pts, "v", &counts);
        let sp = spread_1_to_5(&counts, &b).unwrap();
        assert!(sp < 0.1, "blocked spread {sp} ({b:?})");
        assert!((b[0] - 1000.0).abs() < 1.0, "{b:?}");
        let (t, se) = trend_1_to_5(&pts, "v", &counts).unwrap();
        assert!(t.abs() < 2.0 && se < 2.0, "trend {t} +- {se}");
        let noise = point_noise(&pts, "v", &counts).unwrap();
        assert!(noise > 0.5 && noise < 2.0, "noise {noise}");
        // A real fall of 2% per CGI is found whatever the levels.
        let mut pts = Vec::new();
        for (r, l) in levels.iter().enumerate() {
            for &k in &counts {
                pts.push(pt(r, k, l * (1.0 - 0.02 * (k as f64 - 1.0))));
            }
        }
        let (t, se) = trend_1_to_5(&pts, "v", &counts).unwrap();
        assert!((t + 8.3).abs() < 0.5 && se < 0.1, "trend {t} +- {se}");
        // An incomplete repetition is left out of the blocks.
        pts.retain(|x| !(x.rep == 2 && x.cgi == 3));
        let b = blocked(&pts, "v", &counts);
        assert!(b.iter().all(|v| v.is_finite()));
        assert!(spread_1_to_5(&[0], &[1.0]).is_none());
        // The server's CPU share under the 30% cap (2026-11-23 run): 0 CGI is left out.
        let share = spread_1_to_5(&[0, 1, 2, 3, 4, 5], &[100.2, 70.6, 70.3, 70.5, 70.7, 70.6]);
        assert!((share.unwrap() - 0.4 / 70.7 * 100.0).abs() < 1e-9);
    }

    #[test]
    fn medians_ignore_missing_values() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, f64::NAN, 2.0]), 3.0);
        assert!(median(&mut []).is_nan());
    }
}
