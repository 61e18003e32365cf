//! Seed 001's experiments (`triage lab pos`), end to end on the real server beside nginx and
//! Apache httpd (prefork).
//!
//! | exp | arrivals | hog | SLP | variants |
//! |---|---|---|---|---|
//! | 1 | every browser clicks once per interval, 40 ms apart (`--stagger 0`: at one instant) | yes | fixed | fifo, pos RW 1/3/6/9, pos RW 1 with the paper's FIFO tail, content, nginx, apache (the nice/slice boost variants when named in `--variants`) |
//! | 2 | each browser once per interval window at a random instant | no | fixed | same without hog |
//! | 3 | as 2 | no | predicted every 500 ms | pos RW 3/6/9, RW predicted with the paper's rule and with the split rule |
//! | 4 | as 3, with 3, 6, 9, 12 browsers | no | predicted | fifo, pos RW 3/6/9, content, peers: PL/LRQ ratios (Fig. 6), mean t1 (Fig. 7) |
//!
//! Repetitions are interleaved (rep 1 of every variant, then rep 2, ... with the order rotated)
//! so drift of the shared machine hits all variants alike; every variant gets the same trace of
//! arrivals. Results: `raw.csv`, `summary.json`, `report.html` (see [`write_outputs`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::error::{LabError, Result};
use crate::peers::{Gzip, Peer, Prefork};
use crate::progress::Progress;
use crate::report::{dots, grouped_bars, lines, Report, Series};
use crate::results::{
    improvement_pct, page_numbers, ratio, raw_csv, stats, write_file, write_json, RawRow, Stats,
};
use crate::runner::{Bench, LoadPlan, RunOutcome, Variant};
use crate::sampler::{GateStats, PlLrq};
use crate::site::{generate, SiteSpec};
use crate::testbed::{LinkCounters, NetMode, Testbed, TestbedConfig, TestbedInfo};

/// How long the experiment's time parameters are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Minutes per experiment (default) or under two minutes with `quick`.
    Normal,
    /// Seconds: for CI; 3 browsers, 2 pages each, 1 repetition.
    Tiny,
}

/// Everything `triage lab pos` can be told. `None` = the experiment's default.
#[derive(Debug, Clone)]
pub struct PosOpts {
    pub exp: u8,
    pub quick: bool,
    pub scale: Scale,
    pub reps: Option<usize>,
    /// Browsers (exp 1-3).
    pub browsers: Option<usize>,
    /// Browser counts (exp 4).
    pub browser_counts: Option<Vec<usize>>,
    /// Time between bursts (exp 1) / random window (exp 2-4).
    pub interval: Option<Duration>,
    /// Pages per browser per run.
    pub pages: Option<usize>,
    /// RW values of the fixed-RW pos variants.
    pub rw: Option<Vec<u32>>,
    /// Fixed SLP (exp 1-2).
    pub slp: Option<Duration>,
    /// Server-side CPU quota (fraction of one CPU).
    pub quota: Option<f64>,
    pub period: Duration,
    pub rate_mbit: f64,
    pub net: NetMode,
    /// TCP congestion control of the server namespace (`None`: the kernel's default).
    pub tcp_cc: Option<String>,
    /// On-the-fly gzip level for every server (`None`: off).
    pub gzip_level: Option<u32>,
    pub html_bytes: usize,
    pub image_bytes: Vec<usize>,
    /// Parallel connections per browser.
    pub parallel: usize,
    /// Offset between browsers inside a burst (exp 1; default [`DEFAULT_STAGGER`], 0 for
    /// the synchronized form).
    pub stagger: Option<Duration>,
    /// Order of the POS variants' tail (`episode`, triage's, or `fifo`, the paper's); with
    /// `episode` exp 1 also runs the first RW with the paper's tail.
    pub pos_tail: PosTailOpt,
    pub seed: u64,
    /// Only the variants with these names.
    pub only: Option<Vec<String>>,
    /// Measure nginx and Apache.
    pub peers: bool,
    /// Extra flags for every triage variant (e.g. `--starvation-bound off`).
    pub triage_extra: Vec<String>,
    /// Extra flags for every load run.
    pub load_extra: Vec<String>,
    pub out: Option<PathBuf>,
    pub triage_bin: PathBuf,
    /// The command line, for the report.
    pub command: String,
}

impl PosOpts {
    /// Defaults for experiment `exp` (the caller overrides fields).
    pub fn new(exp: u8, triage_bin: PathBuf) -> PosOpts {
        PosOpts {
            exp,
            quick: false,
            scale: Scale::Normal,
            reps: None,
            browsers: None,
            browser_counts: None,
            interval: None,
            pages: None,
            rw: None,
            slp: None,
            quota: None,
            period: Duration::from_millis(10),
            rate_mbit: 10.0,
            net: NetMode::Auto,
            tcp_cc: None,
            gzip_level: Some(6),
            html_bytes: 4 * 1024,
            image_bytes: vec![20_000, 40_000, 60_000, 80_000],
            parallel: 4,
            stagger: None,
            pos_tail: PosTailOpt::Episode,
            seed: 1,
            only: None,
            peers: true,
            triage_extra: Vec::new(),
            load_extra: Vec::new(),
            out: None,
            triage_bin,
            command: String::new(),
        }
    }
}

/// Default server-side CPU quota when the servers compress on the fly: a fraction of one CPU
/// that makes gzip serving of the site CPU-bound against a 10 Mbit/s link (docs/lab.md).
pub const DEFAULT_QUOTA: f64 = 0.10;
/// Default quota when nothing is compressed (the load generator does not ask for gzip):
/// sending files costs a few microseconds per KB, so the emulated CPU must be slower.
pub const DEFAULT_QUOTA_PLAIN: f64 = 0.025;
/// Exp 2-4 (random arrivals, no hog) scale both quotas by this: at 10% the server was busy
/// 14-17% of the time with 9-12 browsers and requests never queued; at 3% it is busy about
/// half the time, as a server is under a random load that makes ordering matter (docs/lab.md).
pub const RANDOM_QUOTA_SCALE: f64 = 0.3;

/// The default server-side quota of experiment `exp`.
pub fn default_quota(exp: u8, gzip: bool) -> f64 {
    let q = if gzip {
        DEFAULT_QUOTA
    } else {
        DEFAULT_QUOTA_PLAIN
    };
    if exp == 1 {
        q
    } else {
        q * RANDOM_QUOTA_SCALE
    }
}

/// Default offset between browsers in an exp 1 burst: 9 browsers click within 320 ms. With
/// every click at the same instant every HTML request is queued before any image and there is
/// nothing to reorder (measured: `--stagger 0`, fifo's mean t1 11 ms, content's and POS's
/// longer; docs/lab.md); the simulator's calibration of the paper's exp 1 found clicks spread
/// over about 300 ms (docs/sim.md).
pub const DEFAULT_STAGGER: Duration = Duration::from_millis(40);

/// The tail order of the lab's POS variants (`triage serve --pos-tail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PosTailOpt {
    Episode,
    Fifo,
}

impl PosTailOpt {
    pub fn as_str(self) -> &'static str {
        match self {
            PosTailOpt::Episode => "episode",
            PosTailOpt::Fifo => "fifo",
        }
    }
}

/// Upper bound of the default fixed SLP (exp 1-2): a third of the interval, at most this.
pub const DEFAULT_SLP_MAX: Duration = Duration::from_millis(1500);

/// The resolved parameters of a run of the lab (what the summary records).
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    pub exp: u8,
    pub quick: bool,
    pub scale: Scale,
    pub reps: usize,
    pub browser_counts: Vec<usize>,
    /// `burst` or `random`.
    pub arrivals: String,
    pub interval_s: f64,
    pub pages_per_browser: usize,
    pub stagger_ms: Option<f64>,
    /// Tail order of the POS variants.
    pub pos_tail: PosTailOpt,
    pub hog: bool,
    /// SLP of the fixed-SLP variants (s) or null when predicted.
    pub slp_s: Option<f64>,
    pub rw: Vec<u32>,
    pub quota: Option<f64>,
    pub period_ms: f64,
    pub parallel: usize,
    pub gzip_level: Option<u32>,
    /// Whether responses were really compressed (the load generator asked for gzip).
    pub gzip_effective: bool,
    pub site: SiteSpec,
    pub page_bytes: usize,
    pub seed: u64,
    pub triage_extra: Vec<String>,
}

#[cfg(test)]
fn resolve(o: &PosOpts) -> Result<Params> {
    resolve_with(o, o.gzip_level.is_some())
}

/// [`resolve`] knowing whether compression will really happen (`gzip`).
fn resolve_with(o: &PosOpts, gzip: bool) -> Result<Params> {
    if !(1..=4).contains(&o.exp) {
        return Err(LabError::Config(format!(
            "--exp {} is not an experiment of seed 001 (1, 2, 3 or 4)",
            o.exp
        )));
    }
    let tiny = o.scale == Scale::Tiny;
    let browsers = o.browsers.unwrap_or(if tiny { 3 } else { 9 });
    let browser_counts = if o.exp == 4 {
        o.browser_counts
            .clone()
            .unwrap_or(if tiny { vec![2, 4] } else { vec![3, 6, 9, 12] })
    } else {
        vec![browsers]
    };
    if browser_counts.is_empty() || browser_counts.contains(&0) {
        return Err(LabError::Config("browser counts must be at least 1".into()));
    }
    // Exp 1 needs every page done (t2, up to ~3.4 s measured at the defaults) more than SLP
    // before the next burst, or the next HTML arrives on a connection whose worker waited less
    // than SLP while image connections idle longer are marked: POS would invert priorities
    // (measured with a 3 s interval: pos-rw3 -138 % against fifo, docs/lab.md).
    let interval = o.interval.unwrap_or(match (tiny, o.quick) {
        (true, _) => Duration::from_millis(1500),
        (false, _) => Duration::from_secs(5),
    });
    let pages = o.pages.unwrap_or(match (tiny, o.quick) {
        (true, _) => 2,
        (false, true) => 2,
        (false, false) => 3,
    });
    let reps = o.reps.unwrap_or(match (tiny, o.quick) {
        (true, _) => 1,
        (false, true) => 2,
        (false, false) => 5,
    });
    if reps == 0 || pages == 0 || interval.is_zero() {
        return Err(LabError::Config(
            "repetitions, pages and interval must be positive".into(),
        ));
    }
    // Exp 1 adds RW 1 to the paper's 3, 6, 9: here a 4 KB HTML page is one burst and an image
    // 2-6 bursts (16 KiB each), so RW 3 leaves an image's worker marked for two of them.
    let rw = o.rw.clone().unwrap_or(match (o.exp, o.quick || tiny) {
        (1, true) => vec![1],
        (1, false) => vec![1, 3, 6, 9],
        (_, true) => vec![3],
        (_, false) => vec![3, 6, 9],
    });
    if rw.is_empty() || rw.contains(&0) {
        return Err(LabError::Config("--rw values must be at least 1".into()));
    }
    // Fixed SLP: between the longest wait inside a page (mostly under 1 s) and the idle time
    // between bursts (interval - t2, at least 1.6 s measured).
    let slp = o.slp.unwrap_or((interval / 3).min(DEFAULT_SLP_MAX));
    if slp >= interval {
        return Err(LabError::Config(format!(
            "--slp {slp:?} must be shorter than the interval {interval:?}, or no worker ever \
             waits longer than SLP"
        )));
    }
    if let Some(q) = o.quota {
        if !(q > 0.0 && q <= 64.0) {
            return Err(LabError::Config(format!(
                "--quota {q} must be in (0, 64] CPUs"
            )));
        }
    }
    let quota = o.quota.unwrap_or(default_quota(o.exp, gzip));
    // The kernel's smallest quota is 1 ms per period: lengthen the period if needed.
    let period = o
        .period
        .max(Duration::from_secs_f64((0.001 / quota).min(1.0)));
    let site = SiteSpec {
        browsers: *browser_counts.iter().max().unwrap_or(&1),
        html_bytes: o.html_bytes,
        image_bytes: o.image_bytes.clone(),
        seed: o.seed,
    };
    site.validate()?;
    Ok(Params {
        exp: o.exp,
        quick: o.quick,
        scale: o.scale,
        reps,
        browser_counts,
        arrivals: if o.exp == 1 { "burst" } else { "random" }.into(),
        interval_s: interval.as_secs_f64(),
        pages_per_browser: pages,
        stagger_ms: if o.exp == 1 {
            Some(o.stagger.unwrap_or(DEFAULT_STAGGER).as_secs_f64() * 1e3)
        } else {
            o.stagger.map(|d| d.as_secs_f64() * 1e3)
        },
        pos_tail: o.pos_tail,
        hog: o.exp == 1,
        slp_s: (o.exp <= 2).then_some(slp.as_secs_f64()),
        rw,
        quota: Some(quota),
        period_ms: period.as_secs_f64() * 1e3,
        parallel: o.parallel,
        gzip_level: o.gzip_level,
        gzip_effective: gzip && o.gzip_level.is_some(),
        page_bytes: site.page_bytes(),
        site,
        seed: o.seed,
        triage_extra: o.triage_extra.clone(),
    })
}

fn ms(d: f64) -> String {
    format!("{}ms", (d * 1e3).round() as u64)
}

/// The variants of an experiment, in order.
pub fn variants(p: &Params, o: &PosOpts) -> Vec<Variant> {
    let hog = p.hog;
    let mut v = Vec::new();
    let extra: Vec<&str> = p.triage_extra.iter().map(String::as_str).collect();
    // Every triage variant runs the same gate mechanism (scheduling rounds on, also for fifo,
    // whose order they cannot change), so that a difference between variants is the policy's.
    // `triage serve`'s default (`--rounds auto`) would leave them off for fifo only, and rounds
    // change how image chunks interleave (docs/lab.md). `--triage-flag` comes last and wins.
    // POS as the paper states it has no starvation guard; triage's (on by default in `serve`)
    // counts wall time, and under the lab's quota its 200 ms are ~10 ms of the server's CPU:
    // it rescued 20-40 image chunks a run ahead of the text POS had promoted (docs/lab.md).
    let tv = |name: &str, args: &[&str]| {
        let mut a: Vec<&str> = args.to_vec();
        a.extend(["--rounds", "on", "--starvation-bound", "off"]);
        a.extend(extra.iter().copied());
        Variant::triage(name, &a, hog)
    };
    v.push(tv("fifo", &["--policy", "fifo"]));
    let slp = match p.slp_s {
        Some(s) => ms(s),
        None => "auto".into(),
    };
    let prefix = if p.slp_s.is_some() { "pos" } else { "pos-auto" };
    let tail = p.pos_tail.as_str();
    // One POS variant: fixed SLP (or auto), this RW, tail order and kernel boost.
    let pos_variant = |name: &str, rw: u32, tail: &str, boost: &str| {
        let r = rw.to_string();
        tv(
            name,
            &[
                "--policy",
                "pos",
                "--slp",
                &slp,
                "--rw",
                &r,
                "--pos-tail",
                tail,
                "--boost",
                boost,
            ],
        )
    };
    for &rw in &p.rw {
        v.push(pos_variant(&format!("{prefix}-rw{rw}"), rw, tail, "off"));
    }
    let rw0 = p.rw[0];
    // Exp 1 also runs the first RW with the paper's tail (FIFO by ready time), so the report
    // shows what triage's episode order changes; `--quick` leaves it out.
    if p.exp == 1 && !p.quick && p.pos_tail == PosTailOpt::Episode {
        v.push(pos_variant(
            &format!("pos-rw{rw0}-fifotail"),
            rw0,
            "fifo",
            "off",
        ));
    }
    // The kernel-boost variants are diagnostics (docs/lab.md, both measured worse than no
    // boost): they run only when `--variants` names them.
    if p.exp == 1 {
        for boost in ["nice", "slice"] {
            let name = format!("pos-rw{rw0}-{boost}");
            if o.only.as_ref().is_some_and(|only| only.contains(&name)) {
                v.push(pos_variant(&name, rw0, tail, boost));
            }
        }
    }
    if p.exp == 3 {
        for rule in ["paper", "split"] {
            v.push(tv(
                &format!("pos-auto-rwauto-{rule}"),
                &[
                    "--policy",
                    "pos",
                    "--slp",
                    "auto",
                    "--rw",
                    "auto",
                    "--rw-rule",
                    rule,
                    "--pos-tail",
                    tail,
                    "--boost",
                    "off",
                ],
            ));
        }
    }
    v.push(tv("content", &["--policy", "content"]));
    if o.peers {
        v.push(Variant::peer(Peer::Nginx, hog));
        v.push(Variant::peer(Peer::Apache, hog));
    }
    if let Some(only) = &o.only {
        v.retain(|x| only.iter().any(|n| n == &x.name));
    }
    v
}

/// The arrivals of one run as a `triage load` trace (same for every variant and repetition
/// of one browser count).
pub fn trace(p: &Params, browsers: usize, seed: u64) -> String {
    let mut lines = Vec::new();
    let iv = p.interval_s * 1e3;
    let lead = lead_ms(p);
    match p.arrivals.as_str() {
        "burst" => {
            let st = p.stagger_ms.unwrap_or(0.0);
            for k in 0..p.pages_per_browser {
                for b in 0..browsers {
                    lines.push((lead + k as f64 * iv + b as f64 * st, b));
                }
            }
        }
        _ => {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
            for k in 0..p.pages_per_browser {
                for b in 0..browsers {
                    lines.push((lead + k as f64 * iv + rng.gen_range(0.0..iv), b));
                }
            }
        }
    }
    lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut s = String::from("# <ms offset> <path> <browser>, written by triage lab pos\n");
    for (t, b) in lines {
        s.push_str(&format!("{t:.1} /b{b}/index.html {b}\n"));
    }
    s
}

/// When the first request of a run is sent, in ms after the load generator starts: 200 ms so
/// the first requests do not race its start, plus the SLP in force (the fixed SLP, or the
/// policy's SLP before its first prediction). The paper's server had been idle for a long time
/// when an experiment began; with a shorter lead-in the prefork workers of a server started a
/// moment ago have not yet waited longer than SLP, so characteristic 1 cannot mark the first
/// page's HTML (measured: `--exp 1 --quick --stagger 40ms`, pos-rw1's first-page t1 was 2-6x
/// content's while its second page's was close to it).
pub fn lead_ms(p: &Params) -> f64 {
    let slp_s = p
        .slp_s
        .unwrap_or(policy::pos::DEFAULT_SLP as f64 / policy::SEC as f64);
    200.0 + slp_s * 1e3
}

fn trace_span(p: &Params) -> Duration {
    let st =
        p.stagger_ms.unwrap_or(0.0) * p.browser_counts.iter().max().copied().unwrap_or(1) as f64;
    Duration::from_secs_f64(
        (lead_ms(p) + p.interval_s * 1e3 * p.pages_per_browser as f64 + st) / 1e3,
    )
}

/// The spread of a per-repetition quantity.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

fn spread(v: &[f64]) -> Option<Spread> {
    let s = stats(v)?;
    Some(Spread {
        min: s.min_ms,
        median: s.median_ms,
        max: s.max_ms,
    })
}

/// One variant at one browser count, over all repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct VariantSummary {
    pub name: String,
    pub browsers: usize,
    #[serde(flatten)]
    pub variant: Variant,
    pub pages: usize,
    pub errors: usize,
    pub t1: Option<Stats>,
    pub t2: Option<Stats>,
    /// t1 until the first byte of the HTML.
    pub t1_first: Option<Stats>,
    pub t1_mean_improvement_pct: Option<f64>,
    pub t1_median_improvement_pct: Option<f64>,
    pub t2_mean_improvement_pct: Option<f64>,
    /// Per-repetition improvement of mean t1 against fifo of the same repetition.
    pub t1_rep_improvement_pct: Option<Spread>,
    pub rep_t1_mean_ms: Vec<f64>,
    pub rep_t2_mean_ms: Vec<f64>,
    /// PL/LRQ from the cgroup (mean over repetitions).
    pub pl: f64,
    pub lrq: f64,
    pub cpu_s: f64,
    /// triage's gate view (mean over repetitions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateStats>,
    /// The link towards the browsers (server side tbf), mean per run; only with namespaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t1_ratio_vs_nginx: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t1_ratio_vs_apache: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t2_ratio_vs_nginx: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t2_ratio_vs_apache: Option<f64>,
}

pub use crate::results::Goal;

/// The server side's tbf over a run, mean over repetitions: whether the link, and not only the
/// CPU, was a bottleneck (drops: its queue was full).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LinkSummary {
    pub mbytes: f64,
    pub packets: f64,
    pub dropped: f64,
    pub overlimits: f64,
}

fn link_summary(runs: &[LinkCounters]) -> Option<LinkSummary> {
    if runs.is_empty() {
        return None;
    }
    let m =
        |f: fn(&LinkCounters) -> u64| mean(&runs.iter().map(|l| f(l) as f64).collect::<Vec<_>>());
    Some(LinkSummary {
        mbytes: m(|l| l.sent_bytes) / 1e6,
        packets: m(|l| l.packets),
        dropped: m(|l| l.dropped),
        overlimits: m(|l| l.overlimits),
    })
}

/// The paper's own figures, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct PaperFigures {
    pub exp1_t1_mean_improvement_pct: [f64; 3],
    pub exp1_t1_median_improvement_pct: [f64; 3],
    pub exp3_t1_mean_improvement_pct: [f64; 3],
    pub exp3_t1_median_improvement_pct: [f64; 3],
    pub fig7_best_mean_improvement_pct: [f64; 4],
    pub fig6_pl_ratio: [f64; 4],
    pub fig6_lrq_ratio: [f64; 4],
}

/// Seed 001's numbers (RW = 3, 6, 9; browsers = 3, 6, 9, 12).
pub const PAPER: PaperFigures = PaperFigures {
    exp1_t1_mean_improvement_pct: [33.8, 21.3, 26.6],
    exp1_t1_median_improvement_pct: [44.7, 22.8, 37.7],
    exp3_t1_mean_improvement_pct: [22.2, 17.9, 6.7],
    exp3_t1_median_improvement_pct: [44.6, 13.0, 19.3],
    fig7_best_mean_improvement_pct: [65.7, 44.4, 24.2, 22.3],
    fig6_pl_ratio: [1.0, 2.52, 3.54, 5.44],
    fig6_lrq_ratio: [1.0, 2.46, 3.54, 8.0],
};

/// `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub lab: &'static str,
    pub exp: u8,
    pub title: String,
    pub command: String,
    pub started_utc: String,
    pub duration_s: f64,
    pub params: Params,
    /// Server-side CPU quota (fraction of one CPU) actually applied; null without cgroups.
    pub quota: Option<f64>,
    pub load: String,
    pub testbed: TestbedInfo,
    pub variants: Vec<VariantSummary>,
    /// Variants not measured and why.
    pub skipped: Vec<String>,
    /// Everything weaker than asked (testbed and load), said plainly.
    pub notes: Vec<String>,
    pub goals: Vec<Goal>,
    /// Exp 4: PL and LRQ ratios against the smallest browser count (fifo), paper Fig. 6.
    /// `null` where the baseline is 0 (no ratio).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pl_ratio: Vec<Option<f64>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lrq_ratio: Vec<Option<f64>>,
    pub paper: PaperFigures,
}

fn title(exp: u8) -> &'static str {
    match exp {
        1 => "Seed 001 experiment 1: bursts of clicks beside a CPU-bound process, SLP fixed",
        2 => "Seed 001 experiment 2: random accesses, no CPU hog, SLP fixed",
        3 => "Seed 001 experiment 3: random accesses, no CPU hog, SLP (and RW) predicted",
        _ => "Seed 001 experiment 4: more and more simultaneous browsers (PL, LRQ, mean t1)",
    }
}

/// All runs of one variant at one browser count.
struct Cell {
    variant: Variant,
    browsers: usize,
    runs: Vec<(usize, RunOutcome)>,
}

/// Run the experiment and write the results directory. Returns the directory.
pub fn run(o: &PosOpts) -> Result<PathBuf> {
    let _sig = crate::signals::install()?;
    let started = Instant::now();
    let started_utc = utc_stamp();
    let load_gzip = if o.gzip_level.is_some() {
        crate::runner::load_gzip_flags(&o.triage_bin)
    } else {
        None
    };
    let p = resolve_with(o, load_gzip.is_some())?;
    let mut load_extra = o.load_extra.clone();
    if let Some(f) = &load_gzip {
        load_extra.extend(f.iter().cloned());
    }
    let out = match &o.out {
        Some(d) => d.clone(),
        None => PathBuf::from("results")
            .join(format!("pos-exp{}", o.exp))
            .join(&started_utc),
    };
    std::fs::create_dir_all(&out).map_err(|e| LabError::io("creating", &out, e))?;
    pin_self_to_client_cpu();
    let tb = Testbed::new(TestbedConfig {
        tag: format!("pos{}", o.exp),
        quota: p.quota,
        period: Duration::from_secs_f64(p.period_ms / 1e3),
        net: o.net,
        rate_mbit: o.rate_mbit,
        tcp_cc: o.tcp_cc.clone(),
        ..Default::default()
    })?;
    let site_dir = tb.workdir().join("site");
    let site = generate(&site_dir, &p.site)?;
    let bench = Bench {
        tb: &tb,
        triage_bin: o.triage_bin.clone(),
        site: &site,
        gzip: p.gzip_level.map(|level| Gzip {
            level,
            types: vec!["text/html".into(), "image/bmp".into()],
        }),
        // Every browser may hold `parallel` connections open at once.
        prefork: Prefork::for_connections(p.site.browsers * p.parallel),
        keepalive_s: 15,
    };
    let mut all = variants(&p, o);
    let mut skipped = Vec::new();
    all.retain(|v| match v.peer_kind().and_then(Peer::unavailable) {
        Some(why) => {
            skipped.push(format!("{}: {why}", v.name));
            false
        }
        None => true,
    });
    if all.is_empty() {
        return Err(LabError::Config("no variant left to run".into()));
    }
    let total = (all.len() * p.reps * p.browser_counts.len()) as u64;
    let mut prog = Progress::new(total, &format!("lab pos exp {}", o.exp));
    for s in &skipped {
        prog.note(&format!("skipped {s}"));
    }
    let mut notes = tb.info().notes.clone();
    if p.gzip_level.is_some() && !p.gzip_effective {
        notes.push(format!(
            "on-the-fly gzip is configured on every server, but this `triage load` does not ask \
             for it (no Accept-Encoding: gzip), so nothing was compressed and serving costs only \
             microseconds per KB; the server-side quota defaults to {}% instead of {}% to keep \
             the CPU scarce",
            pct(default_quota(o.exp, false)),
            pct(default_quota(o.exp, true))
        ));
    }
    for n in &notes {
        prog.note(&format!("note: {n}"));
    }
    prog.note(&format!(
        "testbed: {} ({}), server side {} of CPU {} (cgroup {}), load on CPU {}",
        tb.info().network,
        tb.info().shaping,
        tb.info()
            .quota
            .map(|q| format!("{}%", pct(q)))
            .unwrap_or_else(|| "all".into()),
        tb.info().server_cpu.map_or("any".into(), |c| c.to_string()),
        tb.info().cgroup,
        tb.info().client_cpu.map_or("any".into(), |c| c.to_string()),
    ));
    let mut cells: Vec<Cell> = Vec::new();
    for &b in &p.browser_counts {
        for v in &all {
            cells.push(Cell {
                variant: v.clone(),
                browsers: b,
                runs: Vec::new(),
            });
        }
    }
    let span = trace_span(&p);
    let runs_dir = tb.workdir().join("runs");
    let nvar = all.len();
    for rep in 0..p.reps {
        for (bi, &b) in p.browser_counts.iter().enumerate() {
            let plan = LoadPlan {
                trace: trace(&p, b, o.seed.wrapping_add(b as u64)),
                browsers: b,
                parallel: p.parallel,
                duration: span,
                timeout: Duration::from_secs(30),
                seed: o.seed,
                extra: load_extra.clone(),
            };
            for k in 0..nvar {
                // Rotate the order every repetition so no variant always runs first.
                let vi = (k + rep) % nvar;
                let ci = bi * nvar + vi;
                let v = cells[ci].variant.clone();
                let label = format!("{} b={b} rep {}/{}", v.name, rep + 1, p.reps);
                prog.start(&label);
                let dir = runs_dir.join(format!("{}-b{b}-r{rep}", v.name));
                let outcome = bench.run(&v, &plan, &dir).map_err(|e| match e {
                    LabError::Interrupted => e,
                    e => LabError::Process {
                        name: format!("run {label}"),
                        msg: e.to_string(),
                    },
                })?;
                let ok: Vec<f64> = outcome
                    .pages
                    .iter()
                    .filter(|p| p.ok())
                    .filter_map(|p| p.t1_ms)
                    .collect();
                let errs = outcome.pages.iter().filter(|p| !p.ok()).count();
                let s = stats(&ok);
                prog.finish_one(&format!(
                    "{label}: {} pages, {errs} errors, t1 mean {} ms, PL {:.2}, LRQ {:.2}{}",
                    outcome.pages.len(),
                    s.map_or("-".into(), |s| format!("{:.1}", s.mean_ms)),
                    outcome.cpu.pl_mean,
                    outcome.cpu.lrq_mean,
                    outcome
                        .link
                        .map(|l| format!(", link drops {}", l.dropped))
                        .unwrap_or_default()
                ));
                cells[ci].runs.push((rep, outcome));
            }
        }
    }
    drop(prog);
    let mut summary = summarize(o, &p, &tb, &cells, skipped, started_utc, started);
    summary.notes = notes;
    write_outputs(&out, &summary, &cells)?;
    print_table(&summary);
    crate::results::print_goals(&summary.goals, &out);
    Ok(out)
}

fn pin_self_to_client_cpu() {
    // The lab's own threads (samplers) stay off the server's CPU.
    if crate::testbed::online_cpus() >= 2 {
        let mut set = nix::sched::CpuSet::new();
        if set.set(1).is_ok() {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        }
    }
}

/// `YYYYMMDDTHHMMSSZ` now.
pub fn utc_stamp() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn mean_gate(g: &[&GateStats]) -> Option<GateStats> {
    if g.is_empty() {
        return None;
    }
    let m = |f: fn(&GateStats) -> f64| mean(&g.iter().map(|x| f(x)).collect::<Vec<_>>());
    Some(GateStats {
        samples: m(|x| x.samples),
        pl_mean: m(|x| x.pl_mean),
        lrq_mean: m(|x| x.lrq_mean),
        bottleneck_frac: m(|x| x.bottleneck_frac),
        promotions: m(|x| x.promotions),
        demotions: m(|x| x.demotions),
        starvation_rescues: m(|x| x.starvation_rescues),
        series: g[0].series.clone(),
    })
}

fn summarize(
    o: &PosOpts,
    p: &Params,
    tb: &Testbed,
    cells: &[Cell],
    skipped: Vec<String>,
    started_utc: String,
    started: Instant,
) -> Summary {
    let mut vs: Vec<VariantSummary> = cells
        .iter()
        .map(|c| {
            let pages: Vec<&crate::results::Page> =
                c.runs.iter().flat_map(|(_, r)| r.pages.iter()).collect();
            let ok: Vec<&&crate::results::Page> = pages.iter().filter(|p| p.ok()).collect();
            let t1: Vec<f64> = ok.iter().filter_map(|p| p.t1_ms).collect();
            let t2: Vec<f64> = ok.iter().filter_map(|p| p.t2_ms).collect();
            let tf: Vec<f64> = ok.iter().filter_map(|p| p.t1_first_ms).collect();
            let rep_mean = |f: fn(&crate::results::Page) -> Option<f64>| -> Vec<f64> {
                c.runs
                    .iter()
                    .filter_map(|(_, r)| {
                        let v: Vec<f64> = r.pages.iter().filter(|p| p.ok()).filter_map(f).collect();
                        stats(&v).map(|s| s.mean_ms)
                    })
                    .collect()
            };
            let cpu: Vec<&PlLrq> = c.runs.iter().map(|(_, r)| &r.cpu).collect();
            let gates: Vec<&GateStats> =
                c.runs.iter().filter_map(|(_, r)| r.gate.as_ref()).collect();
            let links: Vec<LinkCounters> = c.runs.iter().filter_map(|(_, r)| r.link).collect();
            VariantSummary {
                name: c.variant.name.clone(),
                browsers: c.browsers,
                variant: c.variant.clone(),
                pages: pages.len(),
                errors: pages.len() - ok.len(),
                t1: stats(&t1),
                t2: stats(&t2),
                t1_first: stats(&tf),
                t1_mean_improvement_pct: None,
                t1_median_improvement_pct: None,
                t2_mean_improvement_pct: None,
                t1_rep_improvement_pct: None,
                rep_t1_mean_ms: rep_mean(|p| p.t1_ms),
                rep_t2_mean_ms: rep_mean(|p| p.t2_ms),
                pl: mean(&cpu.iter().map(|c| c.pl_mean).collect::<Vec<_>>()),
                lrq: mean(&cpu.iter().map(|c| c.lrq_mean).collect::<Vec<_>>()),
                cpu_s: mean(&cpu.iter().map(|c| c.cpu_s).collect::<Vec<_>>()),
                gate: mean_gate(&gates),
                link: link_summary(&links),
                t1_ratio_vs_nginx: None,
                t1_ratio_vs_apache: None,
                t2_ratio_vs_nginx: None,
                t2_ratio_vs_apache: None,
            }
        })
        .collect();
    // Comparisons within each browser count.
    let find = |vs: &[VariantSummary], name: &str, b: usize| {
        vs.iter()
            .find(|x| x.name == name && x.browsers == b)
            .cloned()
    };
    let rep_means = |c: &Cell| -> BTreeMap<usize, f64> {
        c.runs
            .iter()
            .filter_map(|(rep, r)| {
                let v: Vec<f64> = r
                    .pages
                    .iter()
                    .filter(|p| p.ok())
                    .filter_map(|p| p.t1_ms)
                    .collect();
                stats(&v).map(|s| (*rep, s.mean_ms))
            })
            .collect()
    };
    let snapshot = vs.clone();
    for (i, v) in vs.iter_mut().enumerate() {
        let b = v.browsers;
        if let Some(f) = find(&snapshot, "fifo", b) {
            if let (Some(a), Some(x)) = (f.t1, v.t1) {
                v.t1_mean_improvement_pct = improvement_pct(a.mean_ms, x.mean_ms);
                v.t1_median_improvement_pct = improvement_pct(a.median_ms, x.median_ms);
            }
            if let (Some(a), Some(x)) = (f.t2, v.t2) {
                v.t2_mean_improvement_pct = improvement_pct(a.mean_ms, x.mean_ms);
            }
            if let Some(fc) = cells
                .iter()
                .find(|c| c.variant.name == "fifo" && c.browsers == b)
            {
                let fm = rep_means(fc);
                let mine = rep_means(&cells[i]);
                let imps: Vec<f64> = mine
                    .iter()
                    .filter_map(|(rep, m)| fm.get(rep).and_then(|a| improvement_pct(*a, *m)))
                    .collect();
                v.t1_rep_improvement_pct = spread(&imps);
            }
        }
        for (peer, t1r, t2r) in [
            ("nginx", &mut v.t1_ratio_vs_nginx, &mut v.t2_ratio_vs_nginx),
            (
                "apache",
                &mut v.t1_ratio_vs_apache,
                &mut v.t2_ratio_vs_apache,
            ),
        ] {
            if let Some(pv) = find(&snapshot, peer, b) {
                if let (Some(a), Some(x)) = (pv.t1, v.t1) {
                    *t1r = ratio(x.mean_ms, a.mean_ms);
                }
                if let (Some(a), Some(x)) = (pv.t2, v.t2) {
                    *t2r = ratio(x.mean_ms, a.mean_ms);
                }
            }
        }
    }
    let goals = goals(p, &vs);
    let (mut pl_ratio, mut lrq_ratio) = (Vec::new(), Vec::new());
    if p.exp == 4 {
        let fifo: Vec<&VariantSummary> = p
            .browser_counts
            .iter()
            .filter_map(|&b| vs.iter().find(|x| x.name == "fifo" && x.browsers == b))
            .collect();
        if let Some(first) = fifo.first() {
            for f in &fifo {
                pl_ratio.push(ratio(f.pl, first.pl));
                lrq_ratio.push(ratio(f.lrq, first.lrq));
            }
        }
    }
    let load = format!(
        "{} browsers, {} arrivals every {:.1} s{}, {} pages each, K={} connections, page {} KB \
         ({} B HTML + {} images), gzip {}, {}",
        p.browser_counts
            .iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join("/"),
        p.arrivals,
        p.interval_s,
        match p.stagger_ms {
            Some(s) if s > 0.0 => format!(" staggered by {s:.0} ms"),
            Some(_) if p.arrivals == "burst" => " all at the same instant".into(),
            _ => String::new(),
        },
        p.pages_per_browser,
        p.parallel,
        p.page_bytes / 1000,
        p.site.html_bytes,
        p.site.image_bytes.len(),
        match (p.gzip_level, p.gzip_effective) {
            (Some(l), true) => format!("level {l} on text/html and image/bmp"),
            (Some(l), false) => format!("level {l} configured but not requested by the client"),
            (None, _) => "off".into(),
        },
        if p.hog {
            "a CPU-bound process in the server cgroup"
        } else {
            "no CPU hog"
        }
    );
    Summary {
        lab: "pos",
        exp: p.exp,
        title: title(p.exp).into(),
        command: o.command.clone(),
        started_utc,
        duration_s: started.elapsed().as_secs_f64(),
        params: p.clone(),
        quota: tb.info().quota,
        load,
        testbed: tb.info().clone(),
        variants: vs,
        skipped,
        notes: tb.info().notes.clone(),
        goals,
        pl_ratio,
        lrq_ratio,
        paper: PAPER,
    }
}

fn goals(p: &Params, vs: &[VariantSummary]) -> Vec<Goal> {
    let mut out = Vec::new();
    if p.exp != 1 {
        return out;
    }
    let pos: Vec<&VariantSummary> = vs.iter().filter(|v| v.name.starts_with("pos")).collect();
    // The goal holds for a variant that meets both bounds: the best t1 among the variants that
    // do; if none does, the best t1 of all (reported as not met).
    let by_t1 = |a: &&&VariantSummary, b: &&&VariantSummary| {
        a.t1_mean_improvement_pct
            .unwrap_or(f64::NEG_INFINITY)
            .total_cmp(&b.t1_mean_improvement_pct.unwrap_or(f64::NEG_INFINITY))
    };
    let measured = || pos.iter().filter(|v| v.t1_mean_improvement_pct.is_some());
    let best = measured()
        .filter(|v| {
            v.t2_mean_improvement_pct.is_some_and(|t2| t2 >= -10.0)
                && v.t1_mean_improvement_pct.is_some_and(|t1| t1 >= 50.0)
        })
        .max_by(by_t1)
        .or_else(|| measured().max_by(by_t1));
    let goal = "exp 1: POS improves mean t1 by >= 50% over fifo with mean t2 at most 10% worse";
    match best {
        Some(b) => {
            let t1 = b.t1_mean_improvement_pct.unwrap_or(f64::NAN);
            let t2 = b.t2_mean_improvement_pct.unwrap_or(f64::NAN);
            let promotions = b.gate.as_ref().map_or(0.0, |g| g.promotions);
            let bottleneck = b.gate.as_ref().map_or(0.0, |g| g.bottleneck_frac);
            // A difference POS did not cause is not POS's improvement.
            let caused = promotions > 0.0;
            let met = t1 >= 50.0 && t2 >= -10.0 && caused;
            let spread = b.t1_rep_improvement_pct.map_or(String::new(), |sp| {
                format!(" (per repetition {:.1} .. {:.1}%)", sp.min, sp.max)
            });
            let cause = if caused {
                format!(
                    "; triage's gate promoted {promotions:.0} workers per run and was in a \
                     bottleneck in {:.0}% of its samples",
                    bottleneck * 100.0
                )
            } else {
                format!(
                    "; but triage's gate never promoted a worker (0 promotions, bottleneck in \
                     {:.0}% of its samples): it had no ready queue to reorder, so the difference \
                     is run-to-run variation, not POS",
                    bottleneck * 100.0
                )
            };
            let others: Vec<String> = pos
                .iter()
                .map(|v| {
                    format!(
                        "{} {:+.1}% t1 / {:+.1}% t2",
                        v.name,
                        v.t1_mean_improvement_pct.unwrap_or(f64::NAN),
                        v.t2_mean_improvement_pct.unwrap_or(f64::NAN)
                    )
                })
                .collect();
            out.push(Goal {
                goal: goal.into(),
                met,
                detail: format!(
                    "best (highest t1 gain among the variants within both bounds, if any; \
                     else of all): {} improves mean t1 by {t1:.1}%{spread} and mean t2 by \
                     {t2:.1}%{cause}; all: {}",
                    b.name,
                    others.join(", ")
                ),
            });
        }
        None => out.push(Goal {
            goal: goal.into(),
            met: false,
            detail: "no POS variant with measured pages".into(),
        }),
    }
    for peer in ["nginx", "apache"] {
        let Some(pv) = vs.iter().find(|v| v.name == peer) else {
            continue;
        };
        let Some(best) = best else { continue };
        let r = match peer {
            "nginx" => best.t1_ratio_vs_nginx,
            _ => best.t1_ratio_vs_apache,
        };
        out.push(Goal {
            goal: format!("exp 1: report mean t1 of the best POS variant against {peer}"),
            met: r.is_some(),
            detail: match (r, pv.t1) {
                (Some(r), Some(s)) => format!(
                    "{} mean t1 = {r:.2} x {peer}'s ({:.1} ms)",
                    best.name, s.mean_ms
                ),
                _ => format!("{peer} has no measured pages"),
            },
        });
    }
    out
}

fn f1(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.1}"))
}

fn f2(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.2}"))
}

const TABLE_HEADER: [&str; 16] = [
    "variant",
    "browsers",
    "pages",
    "errors",
    "t1 mean ms",
    "t1 median ms",
    "t1 max ms",
    "t1 mean impr %",
    "t1 median impr %",
    "t2 mean ms",
    "t2 mean impr %",
    "PL",
    "LRQ",
    "link drops/run",
    "t1 / nginx",
    "t1 / apache",
];

fn table_rows(s: &Summary) -> Vec<Vec<String>> {
    s.variants
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                v.browsers.to_string(),
                v.pages.to_string(),
                v.errors.to_string(),
                f1(v.t1.map(|t| t.mean_ms)),
                f1(v.t1.map(|t| t.median_ms)),
                f1(v.t1.map(|t| t.max_ms)),
                f1(v.t1_mean_improvement_pct),
                f1(v.t1_median_improvement_pct),
                f1(v.t2.map(|t| t.mean_ms)),
                f1(v.t2_mean_improvement_pct),
                f2(Some(v.pl)),
                f2(Some(v.lrq)),
                f1(v.link.map(|l| l.dropped)),
                f2(v.t1_ratio_vs_nginx),
                f2(v.t1_ratio_vs_apache),
            ]
        })
        .collect()
}

/// Print the results table on stdout.
pub fn print_table(s: &Summary) {
    let rows = table_rows(s);
    let mut w: Vec<usize> = TABLE_HEADER.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    println!("{}", s.title);
    println!("quota: {}; load: {}", quota_text(s.quota), s.load);
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i == 0 {
                out.push_str(&format!("{:<w$}", c, w = w[i]));
            } else {
                out.push_str(&format!("  {:>w$}", c, w = w[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    line(TABLE_HEADER.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r);
    }
}

fn pct(q: f64) -> String {
    let p = q * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}")
    } else {
        format!("{p:.1}")
    }
}

fn quota_text(q: Option<f64>) -> String {
    q.map_or("none (no cgroup)".into(), |q| {
        format!("{}% of one CPU for the whole server side", pct(q))
    })
}

/// Write `raw.csv`, `summary.json` and `report.html` into `out`.
fn write_outputs(out: &Path, s: &Summary, cells: &[Cell]) -> Result<()> {
    let mut rows = Vec::new();
    for c in cells {
        for (rep, r) in &c.runs {
            let nums = page_numbers(&r.pages);
            for (p, k) in r.pages.iter().zip(nums) {
                rows.push(RawRow {
                    exp: s.exp.to_string(),
                    variant: c.variant.name.clone(),
                    rep: *rep,
                    browsers: c.browsers,
                    page: k,
                    p: p.clone(),
                });
            }
        }
    }
    write_file(&out.join("raw.csv"), raw_csv(&rows).as_bytes())?;
    write_json(&out.join("summary.json"), s)?;
    write_file(&out.join("report.html"), report(s, cells).as_bytes())?;
    Ok(())
}

fn stat_series(vs: &[&VariantSummary], f: fn(&VariantSummary) -> Option<Stats>) -> Vec<Series> {
    let get = |g: fn(&Stats) -> f64| -> Vec<f64> {
        vs.iter()
            .map(|v| f(v).map_or(f64::NAN, |s| g(&s)))
            .collect()
    };
    vec![
        ("min".into(), get(|s| s.min_ms)),
        ("max".into(), get(|s| s.max_ms)),
        ("mean".into(), get(|s| s.mean_ms)),
        ("median".into(), get(|s| s.median_ms)),
        ("range".into(), get(|s| s.range_ms)),
    ]
}

/// The HTML report.
fn report(s: &Summary, cells: &[Cell]) -> String {
    let mut r = Report::new(&s.title);
    r.p(&format!(
        "Started {} (UTC), {:.0} s. Command (repeat it to reproduce; seed {}):",
        s.started_utc, s.duration_s, s.params.seed
    ));
    r.pre(&s.command);
    r.h2("Conditions");
    let tb = &s.testbed;
    r.table(
        &["what", "value"],
        &[
            vec!["CPU quota of the server side".into(), quota_text(s.quota)],
            vec!["quota period".into(), format!("{} ms", s.params.period_ms)],
            vec!["load".into(), s.load.clone()],
            vec![
                "POS tail order".into(),
                match s.params.pos_tail {
                    PosTailOpt::Episode => {
                        "episode (triage's: what is not at the head is served in the order its \
                         episode began)"
                            .into()
                    }
                    PosTailOpt::Fifo => "fifo (the paper's: by ready time)".into(),
                },
            ],
            vec!["network".into(), format!("{} ({})", tb.network, tb.shaping)],
            vec![
                "CPUs".into(),
                format!(
                    "server side on CPU {}, load generator on CPU {} ({} CPUs)",
                    tb.server_cpu.map_or("any".into(), |c| c.to_string()),
                    tb.client_cpu.map_or("any".into(), |c| c.to_string()),
                    tb.cpus
                ),
            ],
            vec![
                "SLP".into(),
                s.params.slp_s.map_or("predicted every 500 ms".into(), |v| {
                    format!("fixed {:.3} s", v)
                }),
            ],
            vec![
                "repetitions".into(),
                format!("{} (interleaved)", s.params.reps),
            ],
            vec![
                "triage flags added".into(),
                if s.params.triage_extra.is_empty() {
                    "none (server defaults)".into()
                } else {
                    s.params.triage_extra.join(" ")
                },
            ],
        ],
    );
    for n in &s.notes {
        r.verdict(false, &format!("Note: {n}"));
    }
    for sk in &s.skipped {
        r.verdict(false, &format!("Not measured: {sk}"));
    }
    if !s.goals.is_empty() {
        r.h2("Goals");
        for g in &s.goals {
            r.verdict(
                g.met,
                &format!(
                    "{}: {} — {}",
                    if g.met { "MET" } else { "NOT MET" },
                    g.goal,
                    g.detail
                ),
            );
        }
    }
    r.h2("Results");
    r.p(
        "Improvements are the paper's (a-b)/a against fifo in the same run (positive = faster). \
         PL = share of the server side's CPU quota in use, LRQ = runnable server-side threads \
         waiting for the CPU, both sampled every 10 ms from the cgroup, the same way for every \
         server. t1 / nginx is this variant's mean t1 divided by nginx's.",
    );
    r.table(&TABLE_HEADER, &table_rows(s));
    // Per-repetition spread.
    let spread_rows: Vec<Vec<String>> = s
        .variants
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                v.browsers.to_string(),
                v.rep_t1_mean_ms
                    .iter()
                    .map(|x| format!("{x:.1}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                v.t1_rep_improvement_pct.map_or("-".into(), |sp| {
                    format!("{:.1} / {:.1} / {:.1}", sp.min, sp.median, sp.max)
                }),
                v.gate.as_ref().map_or("-".into(), |g| {
                    format!(
                        "PL {:.2}, LRQ {:.2}, bottleneck {:.0}%, promoted {:.0}, demoted {:.0}, rescued {:.0}",
                        g.pl_mean,
                        g.lrq_mean,
                        g.bottleneck_frac * 100.0,
                        g.promotions,
                        g.demotions,
                        g.starvation_rescues
                    )
                }),
            ]
        })
        .collect();
    r.h3("Spread over repetitions and triage's gate");
    r.table(
        &[
            "variant",
            "browsers",
            "mean t1 per repetition (ms)",
            "t1 mean improvement per rep min / median / max %",
            "triage gate (mean per run)",
        ],
        &spread_rows,
    );
    // Paper beside ours.
    r.h2("The paper's figures beside ours");
    let ours = |name: &str, b: Option<usize>| -> (Option<f64>, Option<f64>) {
        s.variants
            .iter()
            .find(|v| v.name == name && b.is_none_or(|b| v.browsers == b))
            .map_or((None, None), |v| {
                (v.t1_mean_improvement_pct, v.t1_median_improvement_pct)
            })
    };
    match s.exp {
        1 | 3 => {
            let (pm, pmed, prefix) = if s.exp == 1 {
                (
                    PAPER.exp1_t1_mean_improvement_pct,
                    PAPER.exp1_t1_median_improvement_pct,
                    "pos",
                )
            } else {
                (
                    PAPER.exp3_t1_mean_improvement_pct,
                    PAPER.exp3_t1_median_improvement_pct,
                    "pos-auto",
                )
            };
            let rows: Vec<Vec<String>> = [3u32, 6, 9]
                .iter()
                .enumerate()
                .map(|(i, rw)| {
                    let (m, md) = ours(&format!("{prefix}-rw{rw}"), None);
                    vec![
                        format!("RW = {rw}"),
                        format!("{:.1}", pm[i]),
                        f1(m),
                        format!("{:.1}", pmed[i]),
                        f1(md),
                    ]
                })
                .collect();
            r.table(
                &[
                    "",
                    "paper mean t1 impr %",
                    "ours",
                    "paper median t1 impr %",
                    "ours",
                ],
                &rows,
            );
        }
        2 => {
            r.p("The paper reports no consistent improvement in experiment 2 (fixed SLP with random arrivals): the idle waits of text workers are not longer than SLP.");
        }
        _ => {
            let rows: Vec<Vec<String>> = s
                .params
                .browser_counts
                .iter()
                .enumerate()
                .map(|(i, &b)| {
                    let best = s
                        .variants
                        .iter()
                        .filter(|v| v.browsers == b && v.name.starts_with("pos"))
                        .filter_map(|v| v.t1_mean_improvement_pct)
                        .fold(f64::NEG_INFINITY, f64::max);
                    vec![
                        b.to_string(),
                        PAPER
                            .fig7_best_mean_improvement_pct
                            .get(i)
                            .map_or("-".into(), |v| format!("{v:.1}")),
                        f1(best.is_finite().then_some(best)),
                        PAPER
                            .fig6_pl_ratio
                            .get(i)
                            .map_or("-".into(), |v| format!("{v:.2}")),
                        f2(s.pl_ratio.get(i).copied().flatten()),
                        PAPER
                            .fig6_lrq_ratio
                            .get(i)
                            .map_or("-".into(), |v| format!("{v:.2}")),
                        f2(s.lrq_ratio.get(i).copied().flatten()),
                    ]
                })
                .collect();
            r.table(
                &[
                    "browsers",
                    "paper best mean t1 impr %",
                    "ours",
                    "paper PL ratio",
                    "ours (fifo)",
                    "paper LRQ ratio",
                    "ours (fifo)",
                ],
                &rows,
            );
        }
    }
    // Figures.
    r.h2("Figures");
    let bmax = *s.params.browser_counts.iter().max().unwrap_or(&1);
    let at_b: Vec<&VariantSummary> = s.variants.iter().filter(|v| v.browsers == bmax).collect();
    let names: Vec<String> = at_b.iter().map(|v| v.name.clone()).collect();
    // Fig. 2: per-URL mean t1.
    let per_url: Vec<Series> = cells
        .iter()
        .filter(|c| c.browsers == bmax)
        .filter(|c| c.variant.name == "fifo" || c.variant.name.starts_with("pos"))
        .map(|c| {
            let vals: Vec<f64> = (0..bmax)
                .map(|b| {
                    let v: Vec<f64> = c
                        .runs
                        .iter()
                        .flat_map(|(_, r)| r.pages.iter())
                        .filter(|p| p.browser == b && p.ok())
                        .filter_map(|p| p.t1_ms)
                        .collect();
                    stats(&v).map_or(f64::NAN, |s| s.mean_ms)
                })
                .collect();
            (c.variant.name.clone(), vals)
        })
        .collect();
    let urls: Vec<String> = (1..=bmax).map(|i| format!("URL {i}")).collect();
    r.figure(
        &dots("Response time of text data per URL (cf. Fig. 2)", "mean t1 (ms)", &urls, &per_url),
        &format!("Mean t1 of each browser's unique URL over all its pages and repetitions ({bmax} browsers)."),
    );
    r.figure(
        &grouped_bars(
            "Response time of text data, t1 (cf. Fig. 3-5 (a))",
            "t1 (ms)",
            &names,
            &stat_series(&at_b, |v| v.t1),
        ),
        "Minimum, maximum, mean, median and range of t1 over all pages and repetitions.",
    );
    r.figure(
        &grouped_bars(
            "Response time of image data, t2 (cf. Fig. 3-5 (b))",
            "t2 (ms)",
            &names,
            &stat_series(&at_b, |v| v.t2),
        ),
        "Minimum, maximum, mean, median and range of t2 over all pages and repetitions.",
    );
    r.figure(
        &grouped_bars(
            "PL and LRQ (cgroup, every 10 ms)",
            "mean",
            &names,
            &[
                ("PL".into(), at_b.iter().map(|v| v.pl).collect()),
                ("LRQ".into(), at_b.iter().map(|v| v.lrq).collect()),
            ],
        ),
        "Mean PL (share of the quota in use) and LRQ (runnable threads waiting) per variant.",
    );
    let auto: Vec<Series> = s
        .variants
        .iter()
        .filter(|v| v.browsers == bmax)
        .filter_map(|v| {
            let g = v.gate.as_ref()?;
            let vals: Vec<f64> = g.series.iter().map(|x| x.1 * 1e3).collect();
            (vals.iter().any(|x| x.is_finite()) && v.name.contains("auto"))
                .then(|| (format!("{} SLP", v.name), vals))
        })
        .collect();
    if !auto.is_empty() {
        let n = auto.iter().map(|a| a.1.len()).max().unwrap_or(0);
        let xs: Vec<f64> = (0..n).map(|i| i as f64 * 0.5).collect();
        r.figure(
            &lines(
                "Predicted SLP over one run",
                "s since start",
                "SLP (ms)",
                &xs,
                &auto,
            ),
            "SLP as predicted by pos every 500 ms (first repetition).",
        );
    }
    if s.exp == 4 {
        let xs: Vec<f64> = s.params.browser_counts.iter().map(|&b| b as f64).collect();
        let mut fig6 = vec![
            (
                "PL ratio (ours, fifo)".into(),
                s.pl_ratio.iter().map(|x| x.unwrap_or(f64::NAN)).collect(),
            ),
            (
                "LRQ ratio (ours, fifo)".into(),
                s.lrq_ratio.iter().map(|x| x.unwrap_or(f64::NAN)).collect(),
            ),
        ];
        if s.params.browser_counts == [3, 6, 9, 12] {
            fig6.push(("PL ratio (paper)".into(), PAPER.fig6_pl_ratio.to_vec()));
            fig6.push(("LRQ ratio (paper)".into(), PAPER.fig6_lrq_ratio.to_vec()));
        }
        r.figure(
            &lines(
                "PL and LRQ ratios vs simultaneous browsers (cf. Fig. 6)",
                "browsers",
                "ratio to the first",
                &xs,
                &fig6,
            ),
            "Ratios of PL and LRQ to those at the smallest browser count.",
        );
        let mut seen: Vec<String> = Vec::new();
        for v in &s.variants {
            if !seen.contains(&v.name) {
                seen.push(v.name.clone());
            }
        }
        let fig7: Vec<Series> = seen
            .iter()
            .map(|n| {
                let vals = s
                    .params
                    .browser_counts
                    .iter()
                    .map(|&b| {
                        s.variants
                            .iter()
                            .find(|v| &v.name == n && v.browsers == b)
                            .and_then(|v| v.t1)
                            .map_or(f64::NAN, |t| t.mean_ms)
                    })
                    .collect();
                (n.clone(), vals)
            })
            .collect();
        r.figure(
            &lines(
                "Mean t1 vs simultaneous browsers (cf. Fig. 7)",
                "browsers",
                "mean t1 (ms)",
                &xs,
                &fig7,
            ),
            "Mean response time of text data per variant and browser count.",
        );
    }
    r.h2("Files");
    r.p("raw.csv: one row per page per variant per repetition; summary.json: the numbers above.");
    r.to_html()
}

/// Parse a duration: `500ms`, `2s`, `1.5s`, `2m`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * mult < 1e7 => {
            Ok(Duration::from_secs_f64(v * mult))
        }
        _ => Err(format!("`{s}` is not a duration (e.g. 500ms, 2s, 1.5m)")),
    }
}

/// Parse a comma-separated list of numbers (`3,6,9`).
pub fn parse_list<T: std::str::FromStr>(s: &str) -> std::result::Result<Vec<T>, String> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse::<T>()
                .map_err(|_| format!("`{x}` in `{s}` is not a number"))
        })
        .collect()
}

/// Parse a CPU quota: a fraction (`0.1`) or a percentage (`10%`) of one CPU.
pub fn parse_quota(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("`{s}` is not a CPU quota (e.g. 0.1 or 10%)"))?;
    if v > 0.0 && v <= 64.0 {
        Ok(v)
    } else {
        Err(format!(
            "CPU quota `{s}` must be above 0 and at most 64 CPUs"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(exp: u8) -> PosOpts {
        PosOpts::new(exp, PathBuf::from("/bin/false"))
    }

    #[test]
    fn defaults_resolve_per_experiment() {
        let p = resolve(&opts(1)).unwrap();
        assert!(p.hog && p.arrivals == "burst");
        assert_eq!(p.rw, vec![1, 3, 6, 9]);
        assert_eq!(p.reps, 5);
        assert_eq!(
            p.stagger_ms,
            Some(40.0),
            "exp 1 clicks 40 ms apart by default"
        );
        assert_eq!(p.pos_tail, PosTailOpt::Episode);
        let mut sync = opts(1);
        sync.stagger = Some(Duration::ZERO);
        assert_eq!(resolve(&sync).unwrap().stagger_ms, Some(0.0));
        assert_eq!(resolve(&opts(2)).unwrap().rw, vec![3, 6, 9]);
        assert_eq!(resolve(&opts(2)).unwrap().stagger_ms, None);
        assert!(p.slp_s.unwrap() < p.interval_s);
        let p3 = resolve(&opts(3)).unwrap();
        assert!(!p3.hog && p3.slp_s.is_none() && p3.arrivals == "random");
        let p4 = resolve(&opts(4)).unwrap();
        assert_eq!(p4.browser_counts, vec![3, 6, 9, 12]);
        assert_eq!(p4.site.browsers, 12);
        let mut q = opts(1);
        q.quick = true;
        let pq = resolve(&q).unwrap();
        assert_eq!((pq.reps, pq.rw.clone()), (2, vec![1]));
        // Exp 1's bursts leave every worker idle longer than SLP after the slowest page (t2 up
        // to ~3.4 s measured), default and quick alike.
        for p in [&p, &pq] {
            let idle_after_slowest_page = p.interval_s - 3.4;
            assert!(p.slp_s.unwrap() < idle_after_slowest_page, "{p:?}");
            assert!(p.slp_s.unwrap() >= 1.0, "SLP above the waits inside a page");
        }
        let quick_names: Vec<_> = variants(&pq, &q).into_iter().map(|v| v.name).collect();
        assert_eq!(
            quick_names,
            ["fifo", "pos-rw1", "content", "nginx", "apache"]
        );
        assert!(resolve(&opts(5))
            .unwrap_err()
            .to_string()
            .contains("--exp 5"));
        let mut bad = opts(1);
        bad.slp = Some(Duration::from_secs(100));
        assert!(resolve(&bad).unwrap_err().to_string().contains("--slp"));
    }

    #[test]
    fn variants_cover_the_experiments() {
        let names = |exp: u8| {
            let o = opts(exp);
            variants(&resolve(&o).unwrap(), &o)
                .into_iter()
                .map(|v| v.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(1),
            vec![
                "fifo",
                "pos-rw1",
                "pos-rw3",
                "pos-rw6",
                "pos-rw9",
                "pos-rw1-fifotail",
                "content",
                "nginx",
                "apache"
            ]
        );
        // The POS variants run triage's tail order, the fifotail variant the paper's.
        let o1 = opts(1);
        let v1 = variants(&resolve(&o1).unwrap(), &o1);
        let tail_of = |name: &str| match &v1.iter().find(|v| v.name == name).unwrap().server {
            crate::runner::ServerKind::Triage { args } => args
                .windows(2)
                .find(|w| w[0] == "--pos-tail")
                .map(|w| w[1].clone()),
            _ => None,
        };
        assert_eq!(tail_of("pos-rw3").as_deref(), Some("episode"));
        assert_eq!(tail_of("pos-rw1-fifotail").as_deref(), Some("fifo"));
        // The kernel-boost diagnostics run only when named.
        let mut boost = opts(1);
        boost.only = Some(vec!["pos-rw1-nice".into(), "fifo".into()]);
        let vb: Vec<_> = variants(&resolve(&boost).unwrap(), &boost)
            .into_iter()
            .map(|v| v.name)
            .collect();
        assert_eq!(vb, ["fifo", "pos-rw1-nice"]);
        let n3 = names(3);
        assert!(n3.contains(&"pos-auto-rw3".to_string()));
        assert!(n3.contains(&"pos-auto-rwauto-paper".to_string()));
        assert!(n3.contains(&"pos-auto-rwauto-split".to_string()));
        let o = opts(1);
        let v = variants(&resolve(&o).unwrap(), &o);
        assert!(v.iter().all(|v| v.hog));
        let pos = v.iter().find(|v| v.name == "pos-rw6").unwrap();
        match &pos.server {
            crate::runner::ServerKind::Triage { args } => {
                assert!(args.windows(2).any(|w| w == ["--rw", "6"]));
                assert!(args
                    .windows(2)
                    .any(|w| w[0] == "--slp" && w[1].ends_with("ms")));
            }
            _ => panic!("not triage"),
        }
        // The same gate mechanism for every triage variant, fifo included, and no starvation
        // guard (not in the paper).
        for t in &v {
            if let crate::runner::ServerKind::Triage { args } = &t.server {
                assert!(
                    args.windows(2).any(|w| w == ["--rounds", "on"]),
                    "{}",
                    t.name
                );
                assert!(
                    args.windows(2).any(|w| w == ["--starvation-bound", "off"]),
                    "{}",
                    t.name
                );
            }
        }
        let mut only = opts(2);
        only.only = Some(vec!["fifo".into(), "nginx".into()]);
        let v = variants(&resolve(&only).unwrap(), &only);
        assert_eq!(v.len(), 2);
        assert!(v.iter().all(|v| !v.hog));
    }

    #[test]
    fn traces_are_deterministic_bursts_or_random_windows() {
        let mut o = opts(1);
        o.pages = Some(2);
        o.interval = Some(Duration::from_secs(2));
        o.stagger = Some(Duration::from_millis(100));
        let p = resolve(&o).unwrap();
        let t = trace(&p, 3, 1);
        let rows: Vec<(f64, String)> = t
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f[0].parse().unwrap(), f[2].to_string())
            })
            .collect();
        assert_eq!(rows.len(), 6);
        // Lead-in: 200 ms plus the SLP (2 s / 3), so the idle workers have waited past SLP.
        let lead = 200.0 + p.slp_s.unwrap() * 1e3;
        assert!(lead > 800.0, "{lead}");
        let near = |(t, b): &(f64, String), want: f64, wb: &str| (t - want).abs() < 0.06 && b == wb;
        assert!(near(&rows[0], lead, "0"), "{rows:?}");
        assert!(near(&rows[2], lead + 200.0, "2"), "{rows:?}");
        assert!(near(&rows[3], lead + 2000.0, "0"), "{rows:?}");
        let p2 = resolve(&opts(2)).unwrap();
        assert_eq!(trace(&p2, 9, 5), trace(&p2, 9, 5));
        assert_ne!(trace(&p2, 9, 5), trace(&p2, 9, 6));
        for l in trace(&p2, 9, 5).lines().filter(|l| !l.starts_with('#')) {
            let t: f64 = l.split_whitespace().next().unwrap().parse().unwrap();
            let lead = lead_ms(&p2);
            assert!((lead..lead + p2.interval_s * 1e3 * p2.pages_per_browser as f64).contains(&t));
        }
    }

    #[test]
    fn random_arrival_experiments_get_a_slower_cpu() {
        // exp 1 has the hog; exp 2-4 only random arrivals, so their CPU is scarcer.
        assert_eq!(resolve(&opts(1)).unwrap().quota, Some(DEFAULT_QUOTA));
        for exp in 2..=4 {
            let q = resolve(&opts(exp)).unwrap().quota.unwrap();
            assert!(
                (q - DEFAULT_QUOTA * RANDOM_QUOTA_SCALE).abs() < 1e-12,
                "{exp}: {q}"
            );
        }
        assert!((default_quota(3, false) - DEFAULT_QUOTA_PLAIN * 0.3).abs() < 1e-12);
        // An explicit quota wins.
        let mut o = opts(2);
        o.quota = Some(0.5);
        assert_eq!(resolve(&o).unwrap().quota, Some(0.5));
    }

    #[test]
    fn cli_value_parsers() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("soon").unwrap_err().contains("soon"));
        assert_eq!(parse_list::<u32>("3, 6,9").unwrap(), vec![3, 6, 9]);
        assert!(parse_list::<u32>("3,x").unwrap_err().contains("`x`"));
        assert_eq!(parse_quota("10%").unwrap(), 0.1);
        assert_eq!(parse_quota("0.25").unwrap(), 0.25);
        assert!(parse_quota("0").is_err() && parse_quota("abc").is_err());
    }

    fn page(browser: usize, start: f64, t1: f64, t2: f64) -> crate::results::Page {
        crate::results::Page {
            browser,
            start_ms: start,
            t1_first_ms: Some(t1 / 2.0),
            t1_ms: Some(t1),
            t2_ms: Some(t2),
            bytes: 1000,
            status: 200,
            error: String::new(),
        }
    }

    fn outcome(scale: f64) -> RunOutcome {
        RunOutcome {
            pages: vec![
                page(0, 0.0, 100.0 * scale, 400.0),
                page(1, 0.0, 200.0 * scale, 500.0),
                page(0, 1000.0, 300.0 * scale, 600.0),
            ],
            cpu: PlLrq {
                samples: 10,
                pl_sum: 5.0,
                lrq_sum: 20.0,
                pl_mean: 0.5,
                lrq_mean: 2.0,
                cpu_s: 0.1,
            },
            gate: Some(GateStats {
                promotions: 3.0,
                ..Default::default()
            }),
            wall_s: 1.0,
            load_summary: None,
            link: Some(LinkCounters {
                sent_bytes: 2_000_000,
                packets: 1500,
                dropped: 3,
                overlimits: 40,
            }),
        }
    }

    #[test]
    fn the_goal_takes_the_best_t1_among_variants_within_the_t2_bound() {
        let o = opts(1);
        let p = resolve(&o).unwrap();
        let tb = Testbed::new(TestbedConfig {
            net: NetMode::Loopback,
            ..Default::default()
        })
        .unwrap();
        // fifo: t1 100/200/300, t2 400/500/600. pos-rw1-fifotail: t1 -60%, t2 -50% (worse);
        // pos-rw1: t1 -50%, t2 -5%; the others: t1 -10%.
        let cells: Vec<Cell> = variants(&p, &o)
            .iter()
            .map(|v| {
                let (t1, t2) = match v.name.as_str() {
                    "fifo" | "nginx" | "apache" => (1.0, 1.0),
                    "pos-rw1-fifotail" => (0.4, 1.5),
                    "pos-rw1" => (0.5, 1.05),
                    _ => (0.9, 1.0),
                };
                let mut r = outcome(t1);
                for pg in &mut r.pages {
                    pg.t2_ms = pg.t2_ms.map(|x| x * t2);
                }
                Cell {
                    variant: v.clone(),
                    browsers: 9,
                    runs: vec![(0, r)],
                }
            })
            .collect();
        let s = summarize(&o, &p, &tb, &cells, vec![], utc_stamp(), Instant::now());
        assert!(s.goals[0].met, "{:?}", s.goals[0]);
        assert!(
            s.goals[0].detail.contains("pos-rw1 improves"),
            "{}",
            s.goals[0].detail
        );
        // Without a variant inside the t2 bound: the best t1 is reported, not met.
        let worse: Vec<Cell> = cells
            .into_iter()
            .filter(|c| c.variant.name != "pos-rw1")
            .collect();
        let s = summarize(&o, &p, &tb, &worse, vec![], utc_stamp(), Instant::now());
        assert!(!s.goals[0].met);
        assert!(
            s.goals[0].detail.contains("pos-rw1-fifotail improves"),
            "{}",
            s.goals[0].detail
        );
    }

    #[test]
    fn summary_and_report_are_written_complete() {
        let mut o = opts(1);
        o.quick = true;
        let p = resolve(&o).unwrap();
        let tb = Testbed::new(TestbedConfig {
            net: NetMode::Loopback,
            ..Default::default()
        })
        .unwrap();
        let vs = variants(&p, &o);
        let cells: Vec<Cell> = vs
            .iter()
            .map(|v| Cell {
                variant: v.clone(),
                browsers: 9,
                runs: vec![(0, outcome(if v.name == "fifo" { 1.0 } else { 0.5 }))],
            })
            .collect();
        let s = summarize(
            &o,
            &p,
            &tb,
            &cells,
            vec!["x: not installed".into()],
            utc_stamp(),
            Instant::now(),
        );
        let pos = s.variants.iter().find(|v| v.name == "pos-rw1").unwrap();
        assert_eq!(pos.t1_mean_improvement_pct, Some(50.0));
        assert_eq!(pos.t2_mean_improvement_pct, Some(0.0));
        assert_eq!(pos.t1_ratio_vs_nginx, Some(1.0));
        assert!(s.goals[0].met, "{:?}", s.goals);
        // The same times without a single promotion by POS: not POS's doing, goal not met.
        let no_promo: Vec<Cell> = cells
            .iter()
            .map(|c| {
                let mut runs = c.runs.clone();
                for (_, r) in &mut runs {
                    r.gate = None;
                }
                Cell {
                    variant: c.variant.clone(),
                    browsers: c.browsers,
                    runs,
                }
            })
            .collect();
        let s2 = summarize(&o, &p, &tb, &no_promo, vec![], utc_stamp(), Instant::now());
        assert!(!s2.goals[0].met);
        assert!(
            s2.goals[0].detail.contains("never promoted"),
            "{}",
            s2.goals[0].detail
        );
        let d = tempfile::tempdir().unwrap();
        write_outputs(d.path(), &s, &cells).unwrap();
        let raw = std::fs::read_to_string(d.path().join("raw.csv")).unwrap();
        assert_eq!(raw.lines().count(), 1 + 3 * cells.len());
        assert!(raw.lines().nth(1).unwrap().starts_with("1,fifo,0,9,0,0,"));
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("summary.json")).unwrap())
                .unwrap();
        for k in [
            "variants", "quota", "load", "testbed", "goals", "paper", "params",
        ] {
            assert!(j.get(k).is_some(), "{k}");
        }
        let v0 = &j["variants"][0];
        for k in [
            "name",
            "t1",
            "t2",
            "t1_mean_improvement_pct",
            "t1_median_improvement_pct",
            "t2_mean_improvement_pct",
        ] {
            assert!(v0.get(k).is_some(), "{k}");
        }
        assert!(v0["t1"]["median_ms"].as_f64().unwrap().is_finite());
        let html = std::fs::read_to_string(d.path().join("report.html")).unwrap();
        assert!(html.contains("<svg") && html.contains("33.8") && !html.contains("NOT MET"));
        assert!(html.contains("Not measured: x: not installed"));
    }

    #[test]
    fn utc_stamp_shape() {
        let s = utc_stamp();
        assert_eq!(s.len(), 16);
        assert!(s.ends_with('Z') && s.as_bytes()[8] == b'T');
    }
}
