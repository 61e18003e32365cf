//! `triage sim pos --exp 1|2|3|4`: seed 001's experiments on the simulated testbed ([`crate::web`]).
//!
//! - exp 1: 9 browsers (3 machines x 3) click together every 30 s, a CPU-bound process runs on
//!   the server, SLP fixed at 20 s;
//! - exp 2: the browsers click at random moments (once per 30 s each), no CPU hog, SLP 20 s;
//! - exp 3: as exp 2 with SLP predicted every 500 ms;
//! - exp 4: as exp 3 with 3, 6, 9, 12 browsers; PL and LRQ sampled every 10 ms.
//!
//! Every variant (conventional timesharing, POS with RW 1..10, POS with RW predicted by the
//! paper's rule and by the split rule, plus `fifo` and `content` for context) runs the same
//! trials with the same seeds (common random numbers). As in the paper, t1 and t2 are averaged
//! per URL over the trials, min / max / mean / range are taken over those averages, and the
//! median over all raw values; the improvement is `(a - b) / a` against timesharing.

use policy::registry::RwRule;
use policy::{Nanos, PolicyConfig, Tunable, MS, SEC};
use serde::Serialize;

use crate::stats::{improvement, round, Summary};
use crate::web::{self, Arrivals, WebConfig, WebResult};
use crate::SimError;

/// The paper's published numbers.
pub mod paper {
    /// Exp 1, mean t1 improvement for RW = 3, 6, 9 (%).
    pub const EXP1_MEAN: [f64; 3] = [33.8, 21.3, 26.6];
    /// Exp 1, median t1 improvement for RW = 3, 6, 9 (%).
    pub const EXP1_MEDIAN: [f64; 3] = [44.7, 22.8, 37.7];
    /// Exp 3, mean t1 improvement for RW = 3, 6, 9 (%).
    pub const EXP3_MEAN: [f64; 3] = [22.2, 17.9, 6.7];
    /// Exp 3, median t1 improvement for RW = 3, 6, 9 (%).
    pub const EXP3_MEDIAN: [f64; 3] = [44.6, 13.0, 19.3];
    /// Exp 4, PL ratio for 3, 6, 9, 12 browsers.
    pub const EXP4_PL: [f64; 4] = [1.0, 2.52, 3.54, 5.44];
    /// Exp 4, LRQ ratio for 3, 6, 9, 12 browsers.
    pub const EXP4_LRQ: [f64; 4] = [1.0, 2.46, 3.54, 8.0];
    /// Exp 4 (Fig. 7), best mean t1 improvement for 3, 6, 9, 12 browsers (%).
    pub const EXP4_BEST: [f64; 4] = [65.7, 44.4, 24.2, 22.3];
}

/// The conventional scheduler the POS variants are compared against, and that POS runs over
/// (`--base`; docs/sim.md, "The 4.4BSD base").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum SchedBase {
    /// The base before issue 21's 4.4BSD reading: `timeshare` orders the queue (woken sleepers
    /// first), a running burst is never preempted by a wake-up, and `pos` orders every
    /// unmarked worker FIFO.
    #[default]
    WokenFirst,
    /// 4.4BSD as BSD/OS 2.1 ran it: wake-up preemption of user-mode work
    /// ([`WebConfig::wakeup_preempt`]), and POS over the timesharing order (`posbsd`).
    Bsd,
    /// As [`SchedBase::Bsd`], but POS orders the unmarked workers FIFO (`pos`): which of the
    /// two changes makes a difference.
    BsdFifoPos,
}

impl SchedBase {
    /// The registry name of the POS variants over this base.
    pub fn pos_policy(self) -> &'static str {
        match self {
            Self::Bsd => "posbsd",
            Self::WokenFirst | Self::BsdFifoPos => "pos",
        }
    }

    /// Whether the CPU preempts user-mode work on a wake-up.
    pub fn wakeup_preempt(self) -> bool {
        self != Self::WokenFirst
    }
}

/// Parameters of `triage sim pos`.
#[derive(Debug, Clone, Serialize)]
pub struct PosConfig {
    /// Experiment of seed 001 §4 (1-4).
    pub exp: u8,
    /// Seed of every random choice.
    pub seed: u64,
    /// Trials per variant.
    pub trials: usize,
    /// RW values of the fixed-RW POS variants.
    pub rw: Vec<u32>,
    /// Also run POS with RW predicted (paper rule, split rule).
    pub rw_auto: bool,
    /// Also run `fifo` and `content` for context.
    pub context: bool,
    /// Browser counts of experiment 4.
    pub exp4_browsers: Vec<usize>,
    /// Fixed SLP of experiments 1 and 2.
    pub slp: Nanos,
    /// Prediction period of experiments 3 and 4.
    pub period: Nanos,
    /// Time between bursts of experiments 2-4 (`web::RANDOM_INTERVAL`); exp 1 uses
    /// `base.interval` (30 s).
    pub random_interval: Nanos,
    /// How the browsers of experiments 2-4 click: [`Arrivals::Random`] (each browser on its
    /// own) or [`Arrivals::Machines`] (per client machine, its browsers in turn).
    pub random_arrivals: Arrivals,
    /// The scheduler POS is compared against and runs over; it sets the POS variants' policy
    /// and the testbed's `wakeup_preempt`.
    pub sched_base: SchedBase,
    /// Testbed parameters; `policy`, `hog`, `arrivals`, `seed` (and `browsers` in exp 4) are
    /// set per experiment, variant and trial.
    pub base: WebConfig,
    /// Worker threads (results do not depend on it).
    pub threads: usize,
}

impl Default for PosConfig {
    fn default() -> Self {
        Self {
            exp: 1,
            seed: 1,
            trials: 5,
            rw: (1..=10).collect(),
            rw_auto: true,
            context: true,
            exp4_browsers: vec![3, 6, 9, 12],
            slp: 20 * SEC,
            period: 500 * MS,
            random_interval: web::RANDOM_INTERVAL,
            random_arrivals: Arrivals::Random,
            sched_base: SchedBase::WokenFirst,
            base: WebConfig::default(),
            threads: 2,
        }
    }
}

/// One scheduling variant.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    /// Name in tables (`pos RW=3`).
    pub label: String,
    /// Registry name.
    pub policy: String,
    #[serde(skip)]
    /// What the policy is built with.
    pub cfg: PolicyConfig,
    /// RW if fixed.
    pub rw: Option<u32>,
}

/// Results of one variant.
#[derive(Debug, Clone, Serialize)]
pub struct VariantResult {
    /// Name in tables.
    pub label: String,
    /// Registry name.
    pub policy: String,
    /// RW if fixed.
    pub rw: Option<u32>,
    /// t1 (s): click to HTML complete, per URL averaged over the trials.
    pub t1: Summary,
    /// t2 (s): click to the last image complete.
    pub t2: Summary,
    /// Improvement of mean t1 against timesharing: the paper's `(a - b) / a` as a fraction
    /// (0.338 is the paper's 33.8 %).
    pub t1_mean_impr: f64,
    /// Improvement of median t1 against timesharing (fraction).
    pub t1_median_impr: f64,
    /// Improvement of mean t2 against timesharing (fraction).
    pub t2_mean_impr: f64,
    /// Improvement of median t2 against timesharing (fraction).
    pub t2_median_impr: f64,
    /// Improvement of mean t1 against `fifo` (POS's own base discipline), if it ran
    /// (fraction).
    pub t1_mean_impr_vs_fifo: Option<f64>,
    /// PL: 10 ms samples with the CPU busy, summed over the trials.
    pub pl: u64,
    /// LRQ: sum of ready-queue lengths over the samples.
    pub lrq: u64,
    /// 10 ms samples taken, summed over the trials.
    pub samples: u64,
    /// Head insertions (POS), kernel-priority dispatches (timeshare), overtakes (content).
    pub promotions: u64,
    /// Marked workers that lost the mark (POS).
    pub demotions: u64,
    /// SLP (s) in force at the end of the last trial, if the policy has one.
    pub slp_end: Option<f64>,
    /// RW in force at the end of the last trial, if the policy has one.
    pub rw_end: Option<u32>,
    /// Fraction of the measured time the CPU was busy (the hog and interrupts included).
    pub cpu_util: f64,
    /// CPU used by the server processes' bursts (hog and interrupts excluded).
    pub server_cpu_util: f64,
    /// CPU used at interrupt level (packets, disk transfers).
    pub irq_util: f64,
    /// 10 ms samples taken while connections were open (bursts), summed over the trials.
    pub burst_samples: u64,
    /// Fraction of those samples with the CPU busy with server work (processes or
    /// interrupts; the hog excluded).
    pub burst_pl: f64,
    /// Mean number of server processes in the ready queue over those samples (hog excluded).
    pub burst_lrq: f64,
    /// Where the HTML requests' t1 went (mean seconds, averaged over the trials).
    pub t1_parts: web::T1Parts,
    /// Fraction of the HTML requests taken by a process idle for at least 20 s (mean over the
    /// trials; seed 001 §4.2: all of them in experiment 1).
    pub html_long_idle: f64,
    /// Fraction of the HTML requests clicked while another page's HTML request was being
    /// served (mean over the trials): requests POS cannot order against each other.
    pub html_meets_html: f64,
    /// Fraction of the measured time the disk was busy.
    pub disk_util: f64,
    /// Fraction of the measured time the link was busy.
    pub link_util: f64,
    /// Events processed, summed over the trials.
    pub events: u64,
}

/// Results of experiments 1-3, or of one browser count of experiment 4.
#[derive(Debug, Clone, Serialize)]
pub struct ExpResult {
    /// Experiment.
    pub exp: u8,
    /// Browsers.
    pub browsers: usize,
    /// Whether a CPU hog ran.
    pub hog: bool,
    /// How browsers click.
    pub arrivals: Arrivals,
    /// Time between bursts (s).
    pub interval_s: f64,
    /// Window of the random clicks (s), exp 2-4.
    pub window_s: Option<f64>,
    /// SLP as run (`fixed 20 s`, `predicted`).
    pub slp: String,
    /// One result per variant.
    pub variants: Vec<VariantResult>,
}

/// Experiment 4's relations (ratios to the smallest browser count).
#[derive(Debug, Clone, Serialize)]
pub struct Exp4Summary {
    /// Browser counts.
    pub browsers: Vec<usize>,
    /// Of the timesharing runs (the paper measured PL and LRQ on its server).
    pub pl_ratio: Vec<f64>,
    /// LRQ ratios of the timesharing runs.
    pub lrq_ratio: Vec<f64>,
    /// Mean t1 (s) without POS (timesharing).
    pub mean_t1_timesharing: Vec<f64>,
    /// Mean t1 (s) with POS at RW 3, if it ran.
    pub mean_t1_rw3: Vec<Option<f64>>,
    /// Mean t1 (s) with POS at RW 6, if it ran.
    pub mean_t1_rw6: Vec<Option<f64>>,
    /// Mean t1 (s) with POS at RW 9, if it ran.
    pub mean_t1_rw9: Vec<Option<f64>>,
    /// Label of the best variant per browser count.
    pub best_label: Vec<String>,
    /// Its mean t1 improvement over timesharing (fraction).
    pub best_impr: Vec<f64>,
    /// The paper's PL ratios.
    pub paper_pl_ratio: Vec<f64>,
    /// The paper's LRQ ratios.
    pub paper_lrq_ratio: Vec<f64>,
    /// The paper's best mean t1 improvements (fraction).
    pub paper_best_impr: Vec<f64>,
    /// Mean t1 (s) of one browser alone (timesharing, the same trials): an HTML request's own
    /// service time, with nothing to wait for. The floor of every schedule.
    pub t1_alone: f64,
    /// Per browser count, `1 - t1_alone / t1` (timesharing): the improvement if every HTML
    /// request were served as if its browser were alone. No order of the CPU, disk and link
    /// queues can beat it, so a published improvement above it is out of the model's reach.
    pub floor_impr: Vec<f64>,
    /// Per browser count, the share of an HTML request's t1 (timesharing) spent ready-queued or
    /// delayed by interrupts (`t1_parts.cpu - cpu_own`, over the parts' sum): the time that
    /// reordering the ready queue, all POS does, acts on.
    pub cpu_wait_share: Vec<f64>,
    /// Per browser count, the improvement of `content` (priority by content type: it knows
    /// which request is HTML, where POS has to infer it), the most ready-queue order gains
    /// here; `None` where the context variants did not run.
    pub content_impr: Vec<Option<f64>>,
    /// Per browser count, server processes in the ready queue per 10 ms sample during bursts
    /// (timesharing): how the queue POS reorders lengthens with the overlap (the paper's
    /// Fig. 6 has LRQ growing at PL's rate up to 9 browsers, a queue that does not lengthen).
    pub burst_lrq: Vec<f64>,
    /// Per browser count, the fraction of HTML requests clicked while another page's HTML
    /// request was being served (timesharing): the requests POS marks alike and cannot order
    /// against each other.
    pub html_meets_html: Vec<f64>,
}

/// Everything `triage sim pos` reports.
#[derive(Debug, Clone, Serialize)]
pub struct PosResult {
    /// Experiment.
    pub exp: u8,
    /// Seed.
    pub seed: u64,
    /// Trials per variant.
    pub trials: usize,
    /// Clicks per browser per trial.
    pub rounds: usize,
    /// The scheduler POS is compared against and runs over (`--base`).
    pub sched_base: SchedBase,
    /// Experiments 1-3: one run; experiment 4: one per browser count.
    pub runs: Vec<ExpResult>,
    /// Experiment 4's relations.
    pub exp4: Option<Exp4Summary>,
    /// What to keep in mind reading the figures.
    pub notes: Vec<String>,
    /// Each of seed 001's figures this experiment reproduces, ours beside the paper's.
    pub figures: Vec<FigureRow>,
}

/// One figure of seed 001, our number beside the paper's.
#[derive(Debug, Clone, Serialize)]
pub struct FigureRow {
    /// The figure (`Fig. 3(a)`).
    pub figure: String,
    /// What is compared.
    pub what: String,
    /// Ours.
    pub ours: String,
    /// The paper's.
    pub paper: String,
}

/// The variants of an experiment.
pub fn variants(cfg: &PosConfig) -> Vec<Variant> {
    let slp = match cfg.exp {
        1 | 2 => Tunable::Fixed(cfg.slp),
        _ => Tunable::Auto,
    };
    let pos_cfg = |rw, rule| PolicyConfig {
        slp,
        rw,
        rw_rule: rule,
        period: cfg.period,
        starvation_bound: None,
        ..PolicyConfig::default()
    };
    let mut v = vec![Variant {
        label: "timesharing".into(),
        policy: "timeshare".into(),
        cfg: pos_cfg(Tunable::Fixed(3), RwRule::Paper),
        rw: None,
    }];
    for &rw in &cfg.rw {
        v.push(Variant {
            label: format!("pos RW={rw}"),
            policy: cfg.sched_base.pos_policy().into(),
            cfg: pos_cfg(Tunable::Fixed(rw), RwRule::Paper),
            rw: Some(rw),
        });
    }
    if cfg.rw_auto {
        for (rule, name) in [(RwRule::Paper, "paper"), (RwRule::Split, "split")] {
            v.push(Variant {
                label: format!("pos RW=auto({name})"),
                policy: cfg.sched_base.pos_policy().into(),
                cfg: pos_cfg(Tunable::Auto, rule),
                rw: None,
            });
        }
    }
    if cfg.context {
        for p in ["fifo", "content"] {
            v.push(Variant {
                label: p.into(),
                policy: p.into(),
                cfg: pos_cfg(Tunable::Fixed(3), RwRule::Paper),
                rw: None,
            });
        }
    }
    v
}

fn validate(cfg: &PosConfig) -> Result<(), SimError> {
    use crate::param;
    if !(1..=4).contains(&cfg.exp) {
        return Err(param(
            "exp",
            format!("{} is not an experiment of seed 001 (1..4)", cfg.exp),
        ));
    }
    if cfg.trials == 0 {
        return Err(param("trials", "must be >= 1"));
    }
    if cfg.rw.contains(&0) {
        return Err(param("rw", "RW must be >= 1"));
    }
    if cfg.exp == 4 && (cfg.exp4_browsers.is_empty() || cfg.exp4_browsers.contains(&0)) {
        return Err(param("browsers", "experiment 4 needs browser counts >= 1"));
    }
    if cfg.period == 0 {
        return Err(param("period", "must be > 0"));
    }
    Ok(())
}

/// Seed of trial `t`: the same for every variant (common random numbers).
fn trial_seed(seed: u64, t: usize) -> u64 {
    policy::dispatch::mix64(seed ^ policy::dispatch::mix64(t as u64 + 1))
}

/// Run `jobs` on `threads` threads; results in job order.
pub(crate) fn par_map<J: Sync, R: Send>(
    jobs: &[J],
    threads: usize,
    f: impl Fn(&J) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, jobs.len().max(1));
    if threads == 1 {
        return jobs.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<R>> = (0..jobs.len()).map(|_| None).collect();
    let results = std::sync::Mutex::new(&mut out);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= jobs.len() {
                    break;
                }
                let r = f(&jobs[i]);
                if let Ok(mut g) = results.lock() {
                    g[i] = Some(r);
                }
            });
        }
    });
    out.into_iter().flatten().collect()
}

/// The testbed of trial `t` of `var` with `browsers` browsers in experiment `cfg.exp`.
fn web_config(cfg: &PosConfig, var: &Variant, browsers: usize, t: usize) -> WebConfig {
    let (hog, arrivals) = match cfg.exp {
        1 if cfg.random_arrivals == Arrivals::Machines => (true, Arrivals::SyncMachines),
        1 => (true, Arrivals::Sync),
        _ => (false, cfg.random_arrivals),
    };
    WebConfig {
        policy: var.policy.clone(),
        policy_cfg: var.cfg.clone(),
        hog,
        arrivals,
        browsers,
        wakeup_preempt: cfg.sched_base.wakeup_preempt(),
        interval: match cfg.exp {
            1 => cfg.base.interval,
            _ => cfg.random_interval,
        },
        seed: trial_seed(cfg.seed, t),
        ..cfg.base.clone()
    }
}

/// Mean t1 (s) of one browser alone under timesharing, over the trials of `cfg`: an HTML
/// request's own service time (experiment 4's floor, [`Exp4Summary::t1_alone`]).
fn t1_alone(cfg: &PosConfig) -> Result<f64, SimError> {
    let base = &variants(cfg)[0];
    let (mut sum, mut n) = (0.0, 0usize);
    for t in 0..cfg.trials {
        let r = web::run(&web_config(cfg, base, 1, t))?;
        sum += r.pages.iter().map(|p| p.t1).sum::<f64>();
        n += r.pages.len();
    }
    Ok(sum / n.max(1) as f64)
}

/// One experiment (or one browser count of exp 4).
fn run_one(
    cfg: &PosConfig,
    browsers: usize,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<ExpResult, SimError> {
    let (hog, arrivals) = match cfg.exp {
        1 if cfg.random_arrivals == Arrivals::Machines => (true, Arrivals::SyncMachines),
        1 => (true, Arrivals::Sync),
        _ => (false, cfg.random_arrivals),
    };
    let vars = variants(cfg);
    let jobs: Vec<(usize, usize)> = (0..vars.len())
        .flat_map(|v| (0..cfg.trials).map(move |t| (v, t)))
        .collect();
    let results: Vec<Result<WebResult, SimError>> = par_map(&jobs, cfg.threads, |&(v, t)| {
        let var = &vars[v];
        let r = web::run(&web_config(cfg, var, browsers, t));
        if t + 1 == cfg.trials {
            progress(&format!(
                "exp {} browsers {browsers}: {} done",
                cfg.exp, var.label
            ));
        }
        r
    });
    let mut per_var: Vec<Vec<WebResult>> = vars.iter().map(|_| Vec::new()).collect();
    for (&(v, _), r) in jobs.iter().zip(results) {
        per_var[v].push(r?);
    }
    let mut out = Vec::new();
    for (var, runs) in vars.iter().zip(&per_var) {
        out.push(summarize(var, runs));
    }
    let (base_t1, base_t2) = (out[0].t1, out[0].t2);
    let fifo_t1 = out.iter().find(|v| v.label == "fifo").map(|v| v.t1.mean);
    for v in &mut out {
        let frac = |a: f64, b: f64| round(improvement(a, b) / 100.0, 4);
        v.t1_mean_impr_vs_fifo = fifo_t1.map(|f| frac(f, v.t1.mean));
        v.t1_mean_impr = frac(base_t1.mean, v.t1.mean);
        v.t1_median_impr = frac(base_t1.median, v.t1.median);
        v.t2_mean_impr = frac(base_t2.mean, v.t2.mean);
        v.t2_median_impr = frac(base_t2.median, v.t2.median);
    }
    Ok(ExpResult {
        exp: cfg.exp,
        browsers,
        hog,
        arrivals,
        interval_s: match cfg.exp {
            1 => cfg.base.interval,
            _ => cfg.random_interval,
        } as f64
            / 1e9,
        window_s: match arrivals {
            Arrivals::Sync | Arrivals::SyncMachines => None,
            Arrivals::Random | Arrivals::Machines => cfg.base.random_window.map(|w| w as f64 / 1e9),
        },
        slp: match cfg.exp {
            1 | 2 => format!("fixed {} s", cfg.slp as f64 / 1e9),
            _ => format!("predicted every {} ms", cfg.period / MS),
        },
        variants: out,
    })
}

fn rounded(s: Summary) -> Summary {
    Summary {
        n: s.n,
        min: round(s.min, 4),
        max: round(s.max, 4),
        mean: round(s.mean, 4),
        median: round(s.median, 4),
        range: round(s.range, 4),
    }
}

/// The paper's way: per-URL averages over trials for min/max/mean/range, raw values for the
/// median.
fn summarize(var: &Variant, runs: &[WebResult]) -> VariantResult {
    let per_url = |f: fn(&web::PageTime) -> f64| -> (Vec<f64>, Vec<f64>) {
        let n = runs.first().map_or(0, |r| r.pages.len());
        let mut avg = vec![0.0; n];
        let mut raw = Vec::new();
        for r in runs {
            for (i, p) in r.pages.iter().enumerate() {
                avg[i] += f(p) / runs.len() as f64;
                raw.push(f(p));
            }
        }
        (avg, raw)
    };
    let sum = |(avg, raw): (Vec<f64>, Vec<f64>)| {
        let mut s = Summary::of(&avg);
        s.median = Summary::of(&raw).median;
        rounded(s)
    };
    let last = runs.last();
    let total = |f: fn(&WebResult) -> u64| runs.iter().map(f).sum::<u64>();
    let mean = |f: fn(&WebResult) -> f64| {
        round(
            runs.iter().map(f).sum::<f64>() / runs.len().max(1) as f64,
            3,
        )
    };
    VariantResult {
        label: var.label.clone(),
        policy: var.policy.clone(),
        rw: var.rw,
        t1: sum(per_url(|p| p.t1)),
        t2: sum(per_url(|p| p.t2)),
        t1_mean_impr: 0.0,
        t1_median_impr: 0.0,
        t2_mean_impr: 0.0,
        t2_median_impr: 0.0,
        t1_mean_impr_vs_fifo: None,
        pl: total(|r| r.pl),
        lrq: total(|r| r.lrq),
        samples: total(|r| r.samples),
        promotions: total(|r| r.stats.promotions),
        demotions: total(|r| r.stats.demotions),
        slp_end: last
            .and_then(|r| r.stats.slp)
            .map(|s| round(s as f64 / 1e9, 4)),
        rw_end: last.and_then(|r| r.stats.rw),
        cpu_util: mean(|r| r.cpu_util),
        server_cpu_util: mean(|r| r.server_cpu_util),
        irq_util: mean(|r| r.irq_util),
        t1_parts: {
            let n = runs.len().max(1) as f64;
            let avg = |f: fn(&web::T1Parts) -> f64| {
                round(runs.iter().map(|r| f(&r.t1_parts)).sum::<f64>() / n, 4)
            };
            web::T1Parts {
                connect: avg(|p| p.connect),
                listen: avg(|p| p.listen),
                cpu: avg(|p| p.cpu),
                cpu_own: avg(|p| p.cpu_own),
                disk: avg(|p| p.disk),
                link: avg(|p| p.link),
            }
        },
        html_long_idle: mean(|r| r.html_long_idle),
        html_meets_html: mean(|r| r.html_meets_html),
        burst_samples: total(|r| r.burst_samples),
        burst_pl: {
            let n = total(|r| r.burst_samples).max(1) as f64;
            round(total(|r| r.burst_pl) as f64 / n, 3)
        },
        burst_lrq: {
            let n = total(|r| r.burst_samples).max(1) as f64;
            round(total(|r| r.burst_lrq) as f64 / n, 2)
        },
        disk_util: mean(|r| r.disk_util),
        link_util: mean(|r| r.link_util),
        events: total(|r| r.events),
    }
}

/// Run `triage sim pos`. `progress` receives one line per finished variant.
pub fn run(cfg: &PosConfig, progress: &(dyn Fn(&str) + Sync)) -> Result<PosResult, SimError> {
    validate(cfg)?;
    let counts = if cfg.exp == 4 {
        cfg.exp4_browsers.clone()
    } else {
        vec![cfg.base.browsers]
    };
    let mut runs = Vec::new();
    for &b in &counts {
        runs.push(run_one(cfg, b, progress)?);
    }
    let exp4 = if cfg.exp == 4 {
        Some(exp4_summary(&runs, t1_alone(cfg)?))
    } else {
        None
    };
    let mut res = PosResult {
        exp: cfg.exp,
        seed: cfg.seed,
        trials: cfg.trials,
        rounds: cfg.base.rounds,
        sched_base: cfg.sched_base,
        runs,
        exp4,
        notes: Vec::new(),
        figures: Vec::new(),
    };
    res.notes = notes(cfg, &res);
    res.figures = figures(&res);
    Ok(res)
}

fn find<'a>(e: &'a ExpResult, label: &str) -> Option<&'a VariantResult> {
    e.variants.iter().find(|v| v.label == label)
}

fn exp4_summary(runs: &[ExpResult], t1_alone: f64) -> Exp4Summary {
    let base = &runs[0].variants[0];
    let ratio = |x: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            round(x as f64 / b as f64, 2)
        }
    };
    let mean_of = |e: &ExpResult, l: &str| find(e, l).map(|v| v.t1.mean);
    let mut best_label = Vec::new();
    let mut best_impr = Vec::new();
    for e in runs {
        // The first variant with the largest improvement (ties: the earlier one).
        let best = e.variants[1..]
            .iter()
            .filter(|v| v.label.starts_with("pos "))
            .fold(None::<&VariantResult>, |b, v| match b {
                Some(b) if b.t1_mean_impr >= v.t1_mean_impr => Some(b),
                _ => Some(v),
            });
        best_label.push(best.map_or("-".into(), |v| v.label.clone()));
        best_impr.push(best.map_or(0.0, |v| v.t1_mean_impr));
    }
    let n = runs.len();
    Exp4Summary {
        browsers: runs.iter().map(|e| e.browsers).collect(),
        pl_ratio: runs
            .iter()
            .map(|e| ratio(e.variants[0].pl, base.pl))
            .collect(),
        lrq_ratio: runs
            .iter()
            .map(|e| ratio(e.variants[0].lrq, base.lrq))
            .collect(),
        mean_t1_timesharing: runs.iter().map(|e| e.variants[0].t1.mean).collect(),
        mean_t1_rw3: runs.iter().map(|e| mean_of(e, "pos RW=3")).collect(),
        mean_t1_rw6: runs.iter().map(|e| mean_of(e, "pos RW=6")).collect(),
        mean_t1_rw9: runs.iter().map(|e| mean_of(e, "pos RW=9")).collect(),
        best_label,
        best_impr,
        paper_pl_ratio: paper::EXP4_PL.iter().take(n).copied().collect(),
        paper_lrq_ratio: paper::EXP4_LRQ.iter().take(n).copied().collect(),
        paper_best_impr: paper::EXP4_BEST.iter().take(n).map(|p| p / 100.0).collect(),
        t1_alone: round(t1_alone, 4),
        floor_impr: runs
            .iter()
            .map(|e| {
                let ts = e.variants[0].t1.mean;
                round(if ts > 0.0 { 1.0 - t1_alone / ts } else { 0.0 }, 4)
            })
            .collect(),
        cpu_wait_share: runs
            .iter()
            .map(|e| {
                let p = e.variants[0].t1_parts;
                let t1 = p.connect + p.listen + p.cpu + p.disk + p.link;
                round(
                    if t1 > 0.0 {
                        (p.cpu - p.cpu_own) / t1
                    } else {
                        0.0
                    },
                    4,
                )
            })
            .collect(),
        content_impr: runs
            .iter()
            .map(|e| find(e, "content").map(|v| v.t1_mean_impr))
            .collect(),
        burst_lrq: runs.iter().map(|e| e.variants[0].burst_lrq).collect(),
        html_meets_html: runs.iter().map(|e| e.variants[0].html_meets_html).collect(),
    }
}

/// Experiment 4's bound in words, computed from the results: for each browser count of the
/// paper's, the paper's best improvement beside the share of t1 that ready-queue order acts on,
/// the `content` oracle and the floor; then why the model's gain rises where Fig. 7 falls.
fn exp4_notes(x: &Exp4Summary) -> Vec<String> {
    let mut n = Vec::new();
    let pct = |v: f64| format!("{:.1}%", v * 100.0);
    for (i, &b) in x.browsers.iter().enumerate() {
        // The paper's numbers belong to its browser counts only.
        let Some(paper) = [3, 6, 9, 12]
            .iter()
            .position(|&c| c == b)
            .map(|k| paper::EXP4_BEST[k] / 100.0)
        else {
            continue;
        };
        let verdict = if paper > x.floor_impr[i] {
            "above the floor: no order of this model's CPU, disk and link queues reaches it"
        } else if paper > x.cpu_wait_share[i] {
            "above the CPU-wait share, the time that moving HTML ahead in the ready queue acts \
             on directly: out of POS's reach in this model"
        } else {
            "within the CPU-wait share"
        };
        n.push(format!(
            "Fig. 7 bound, {b} browsers: paper +{} against a CPU wait (ready queue and \
             interrupts) of {} of t1 under timesharing; `content`, which knows the HTML \
             requests, gains {}; serving every HTML request as if its browser were alone \
             ({:.1} ms) would gain {} (the floor); POS's best {:+.1}%. The paper's +{} is \
             {verdict}.",
            pct(paper),
            pct(x.cpu_wait_share[i]),
            x.content_impr[i].map_or("(not run)".into(), |c| format!("{:+.1}%", c * 100.0)),
            x.t1_alone * 1e3,
            pct(x.floor_impr[i]),
            x.best_impr[i] * 100.0,
            pct(paper),
        ));
    }
    if x.browsers.len() >= 2 {
        let last = x.browsers.len() - 1;
        let per_pl: Vec<String> = x
            .lrq_ratio
            .iter()
            .zip(&x.pl_ratio)
            .map(|(l, p)| format!("{:.2}", if *p > 0.0 { l / p } else { 0.0 }))
            .collect();
        n.push(format!(
            "Fig. 7's shape: the paper's gain falls with the browsers; here POS's gain follows \
             the CPU-wait share of t1, which rises from {} ({} browsers) to {} ({}) because the \
             ready queue lengthens with the overlap ({:.2} to {:.2} server processes per burst \
             sample), so LRQ / PL is {} (the paper's Fig. 6: 1 : 0.98 : 1.00 : 1.47, a queue \
             that did not lengthen up to 9 browsers).",
            pct(x.cpu_wait_share[0]),
            x.browsers[0],
            pct(x.cpu_wait_share[last]),
            x.browsers[last],
            x.burst_lrq[0],
            x.burst_lrq[last],
            per_pl.join(" : "),
        ));
        let meets: Vec<String> = x.html_meets_html.iter().map(|&m| pct(m)).collect();
        let counts: Vec<String> = x.browsers.iter().map(|b| b.to_string()).collect();
        n.push(format!(
            "HTML requests clicked while another page's HTML request was being served \
             (timesharing; POS marks both and cannot order them against each other): {} at {} \
             browsers.",
            meets.join(" / "),
            counts.join(" / "),
        ));
    }
    n
}

/// The paper's (mean, median) t1 improvement for a fixed RW in experiment `exp`, if published.
pub fn paper_t1(exp: u8, rw: u32) -> Option<(f64, f64)> {
    let i = match rw {
        3 => 0,
        6 => 1,
        9 => 2,
        _ => return None,
    };
    match exp {
        1 => Some((paper::EXP1_MEAN[i], paper::EXP1_MEDIAN[i])),
        3 => Some((paper::EXP3_MEAN[i], paper::EXP3_MEDIAN[i])),
        _ => None,
    }
}

/// `a / b / c` of the fixed-RW variants' `f` (percent), `-` where a variant did not run.
fn per_rw(e: &ExpResult, f: fn(&VariantResult) -> f64) -> String {
    [3, 6, 9]
        .iter()
        .map(|rw| {
            find(e, &format!("pos RW={rw}")).map_or("-".into(), |v| format!("{:+.1}", f(v) * 100.0))
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// Seed 001's figures that `res` reproduces, ours beside the paper's (Fig. 1 is `triage sim
/// pos-fig1`).
fn figures(res: &PosResult) -> Vec<FigureRow> {
    let row = |figure: &str, what: &str, ours: String, paper: &str| FigureRow {
        figure: figure.into(),
        what: what.into(),
        ours,
        paper: paper.into(),
    };
    let mut out = vec![row(
        "Fig. 1",
        "A / B processing times (s), timesharing and POS",
        "`triage sim pos-fig1`: 5.5 / 4.1 and 5.5 / 3.1".into(),
        "5.5 / 4.1 and 5.5 / 3.1",
    )];
    let e = &res.runs[0];
    let ts = find(e, "timesharing");
    match res.exp {
        1 => {
            let (tmax, tmin) = ts.map_or((0.0, 0.0), |v| (v.t1.max, v.t1.min));
            let rw = |f: fn(&Summary) -> f64| {
                [3, 6, 9]
                    .iter()
                    .map(|rw| {
                        find(e, &format!("pos RW={rw}"))
                            .map_or("-".into(), |v| format!("{:.3}", f(&v.t1)))
                    })
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
            out.push(row(
                "Fig. 2",
                "per-URL t1 (s): min and max, timesharing vs RW = 3 / 6 / 9",
                format!(
                    "min {tmin:.3} vs {}; max {tmax:.3} vs {}",
                    rw(|s| s.min),
                    rw(|s| s.max)
                ),
                "min and max better with RW = 3, 6, 9; extremes pressed down",
            ));
            out.push(row(
                "Fig. 3(a)",
                "mean t1 improvement (%), RW = 3 / 6 / 9",
                per_rw(e, |v| v.t1_mean_impr),
                "+33.8 / +21.3 / +26.6",
            ));
            out.push(row(
                "Fig. 3(a)",
                "median t1 improvement (%), RW = 3 / 6 / 9",
                per_rw(e, |v| v.t1_median_impr),
                "+44.7 / +22.8 / +37.7",
            ));
            out.push(row(
                "Fig. 3(b)",
                "mean t2 improvement (%), RW = 3 / 6 / 9",
                per_rw(e, |v| v.t2_mean_impr),
                "negative (t2 not as fast as timesharing)",
            ));
        }
        2 => {
            out.push(row(
                "Fig. 4(a)",
                "mean t1 improvement (%), RW = 3 / 6 / 9",
                per_rw(e, |v| v.t1_mean_impr),
                "no consistent improvement (RW = 9 a little faster)",
            ));
            out.push(row(
                "Fig. 4(b)",
                "mean t2 improvement (%), RW = 3 / 6 / 9",
                per_rw(e, |v| v.t2_mean_impr),
                "improved (images mistaken for text)",
            ));
        }
        3 => {
            out.push(row(
                "Fig. 5(a)",
                "mean t1 improvement (%), RW = 3 / 6 / 9",
                per_rw(e, |v| v.t1_mean_impr),
                "+22.2 / +17.9 / +6.7",
            ));
            out.push(row(
                "Fig. 5(a)",
                "median t1 improvement (%), RW = 3 / 6 / 9",
                per_rw(e, |v| v.t1_median_impr),
                "+44.6 / +13.0 / +19.3",
            ));
            out.push(row(
                "Fig. 5(b)",
                "mean t2 improvement (%), RW = 3 / 6 / 9",
                per_rw(e, |v| v.t2_mean_impr),
                "not so different; medians smaller",
            ));
        }
        _ => {}
    }
    if let Some(x) = &res.exp4 {
        let j = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" : ")
        };
        let pj = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{:+.1}", x * 100.0))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        let counts = x
            .browsers
            .iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        out.push(row(
            "Fig. 6",
            &format!("PL ratio, {counts} browsers"),
            j(&x.pl_ratio),
            &j(&x.paper_pl_ratio),
        ));
        out.push(row(
            "Fig. 6",
            &format!("LRQ ratio, {counts} browsers"),
            j(&x.lrq_ratio),
            &j(&x.paper_lrq_ratio),
        ));
        out.push(row(
            "Fig. 7",
            &format!("best mean t1 improvement (%), {counts} browsers"),
            pj(&x.best_impr),
            &pj(&x.paper_best_impr),
        ));
        out.push(row(
            "Fig. 7",
            "bound: CPU wait, share of t1 under timesharing (%)",
            pj(&x.cpu_wait_share).replace('+', ""),
            &format!("gain claimed {}", pj(&x.paper_best_impr)),
        ));
        if x.content_impr.iter().all(Option::is_some) {
            let c: Vec<f64> = x.content_impr.iter().flatten().copied().collect();
            out.push(row(
                "Fig. 7",
                "bound: `content` oracle, mean t1 improvement (%)",
                pj(&c),
                "-",
            ));
        }
    }
    out
}

/// Comparison with the paper, in words, computed from the results.
fn notes(cfg: &PosConfig, res: &PosResult) -> Vec<String> {
    let mut n = Vec::new();
    match cfg.sched_base {
        SchedBase::WokenFirst => {}
        base => n.push(format!(
            "scheduler base: 4.4BSD (`--base {}`): a server process that wakes takes the CPU from \
             one running in user mode (Apache's request parsing, logging), never from one inside \
             a system call (the send loop's `write`s); POS variants run `{}` (docs/sim.md, \
             \"The 4.4BSD base\")",
            match base {
                SchedBase::BsdFifoPos => "bsd-fifo-pos",
                _ => "bsd",
            },
            base.pos_policy()
        )),
    }
    let e = &res.runs[0];
    match cfg.exp {
        1 | 3 => {
            for rw in [3, 6, 9] {
                if let (Some(v), Some((pm, pd))) =
                    (find(e, &format!("pos RW={rw}")), paper_t1(cfg.exp, rw))
                {
                    n.push(format!(
                        "RW={rw}: mean t1 improvement {:+.1}% (paper {pm}%), median {:+.1}% \
                         (paper {pd}%)",
                        v.t1_mean_impr * 100.0,
                        v.t1_median_impr * 100.0
                    ));
                }
            }
        }
        2 => {
            let best = e.variants[1..]
                .iter()
                .filter(|v| v.rw.is_some())
                .map(|v| v.t1_mean_impr * 100.0)
                .fold(f64::NEG_INFINITY, f64::max);
            n.push(format!(
                "paper: no consistent improvement with SLP fixed at 20 s under random \
                 accesses; here the best fixed-RW variant changes mean t1 by {best:+.1}%"
            ));
        }
        _ => {}
    }
    if let Some(v) = find(e, "timesharing") {
        let p = v.t1_parts;
        n.push(format!(
            "where t1 goes (timesharing, mean per HTML request): connect {:.1} ms, listen queue \
             {:.1} ms (waiting for a free Apache process), CPU {:.1} ms (of which {:.1} ms its \
             own work, the rest ready-queue wait and interrupts), disk {:.1} ms (no buffer \
             cache), link {:.1} ms. During bursts the CPU is busy with server work {:.0}% of the \
             samples and {:.2} server processes wait in the ready queue on average; POS only \
             reorders that queue, so it can save at most the CPU wait. {:.0}% of the HTML \
             requests were taken by a process idle for 20 s or more (the paper, exp 1: all).",
            p.connect * 1e3,
            p.listen * 1e3,
            p.cpu * 1e3,
            p.cpu_own * 1e3,
            p.disk * 1e3,
            p.link * 1e3,
            v.burst_pl * 100.0,
            v.burst_lrq,
            v.html_long_idle * 100.0,
        ));
        n.push(format!(
            "utilisation over a trial (timesharing, {} browsers): CPU {:.1}% (server processes \
             {:.1}%, interrupts {:.1}%), disk {:.1}%, link {:.1}%",
            e.browsers,
            v.cpu_util * 100.0,
            v.server_cpu_util * 100.0,
            v.irq_util * 100.0,
            v.disk_util * 100.0,
            v.link_util * 100.0
        ));
    }
    if let Some(x) = &res.exp4 {
        n.extend(exp4_notes(x));
    }
    n
}

impl PosResult {
    /// The tables.
    pub fn table(&self) -> String {
        let mut s = String::new();
        for e in &self.runs {
            s += &format!(
                "seed 001 experiment {} - {} browsers, {} arrivals every {} s, CPU hog: {}, SLP {}; \
                 {} trials x {} rounds, seed {}\n",
                e.exp,
                e.browsers,
                match (e.arrivals, e.window_s) {
                    (Arrivals::Sync, _) => "synchronized".to_string(),
                    (Arrivals::SyncMachines, _) => {
                        "synchronized per machine (browsers in turn)".to_string()
                    }
                    (Arrivals::Random, Some(w)) => format!("random (within {w} s)"),
                    (Arrivals::Random, None) => "random".to_string(),
                    (Arrivals::Machines, Some(w)) => {
                        format!("per machine (machines within {w} s, browsers in turn)")
                    }
                    (Arrivals::Machines, None) => "per machine".to_string(),
                },
                e.interval_s,
                if e.hog { "yes" } else { "no" },
                e.slp,
                self.trials,
                self.rounds,
                self.seed
            );
            s += &format!(
                "{:<20} {:>7} {:>7} {:>7} {:>7} {:>7} | {:>6} {:>6} | {:>11} | {:>8}\n",
                "t1 (s)",
                "min",
                "max",
                "mean",
                "median",
                "range",
                "mean%",
                "med%",
                "paper m/med",
                "vs fifo%"
            );
            for v in &e.variants {
                let paper =
                    v.rw.and_then(|rw| paper_t1(e.exp, rw))
                        .filter(|_| e.browsers == 9)
                        .map_or("".into(), |(m, d)| format!("{m:.1}/{d:.1}"));
                s += &format!(
                    "{:<20} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>7.3} | {:>6.1} {:>6.1} | {:>11} | {:>8}\n",
                    v.label,
                    v.t1.min,
                    v.t1.max,
                    v.t1.mean,
                    v.t1.median,
                    v.t1.range,
                    v.t1_mean_impr * 100.0,
                    v.t1_median_impr * 100.0,
                    paper,
                    v.t1_mean_impr_vs_fifo
                        .map_or("-".into(), |x| format!("{:.1}", x * 100.0))
                );
            }
            s += &format!(
                "{:<20} {:>7} {:>7} {:>7} {:>7} {:>7} | {:>6} {:>6}\n",
                "t2 (s)", "min", "max", "mean", "median", "range", "mean%", "med%"
            );
            for v in &e.variants {
                s += &format!(
                    "{:<20} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>7.3} | {:>6.1} {:>6.1}\n",
                    v.label,
                    v.t2.min,
                    v.t2.max,
                    v.t2.mean,
                    v.t2.median,
                    v.t2.range,
                    v.t2_mean_impr * 100.0,
                    v.t2_median_impr * 100.0
                );
            }
            s += &format!(
                "{:<20} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>8} {:>6}\n",
                "(10 ms samples)",
                "PL",
                "LRQ",
                "burst PL",
                "burst LRQ",
                "promoted",
                "demoted",
                "SLP(s)",
                "RW"
            );
            for v in &e.variants {
                s += &format!(
                    "{:<20} {:>10} {:>10} {:>9.3} {:>9.2} {:>10} {:>10} {:>8} {:>6}\n",
                    v.label,
                    v.pl,
                    v.lrq,
                    v.burst_pl,
                    v.burst_lrq,
                    v.promotions,
                    v.demotions,
                    v.slp_end.map_or("-".into(), |x| format!("{x:.3}")),
                    v.rw_end.map_or("-".into(), |x| x.to_string())
                );
            }
            s += &format!(
                "{:<20} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
                "t1 parts (s)", "connect", "listen", "cpu", "cpu own", "disk", "link"
            );
            for v in &e.variants {
                let p = v.t1_parts;
                s += &format!(
                    "{:<20} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4}\n",
                    v.label, p.connect, p.listen, p.cpu, p.cpu_own, p.disk, p.link
                );
            }
            s += "\n";
        }
        if let Some(x) = &self.exp4 {
            s += "experiment 4 (ratios to the smallest browser count; timesharing runs)\n";
            s += &format!(
                "{:<10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8} {:>8} {:>8} {:>18} {:>8}\n",
                "browsers",
                "PL",
                "paper",
                "LRQ",
                "paper",
                "t1 ts (s)",
                "RW=3",
                "RW=6",
                "RW=9",
                "best",
                "paper"
            );
            let f = |o: Option<f64>| o.map_or("-".into(), |v| format!("{v:.3}"));
            for i in 0..x.browsers.len() {
                s +=
                    &format!(
                    "{:<10} {:>9.2} {:>9} {:>9.2} {:>9} {:>10.3} {:>8} {:>8} {:>8} {:>18} {:>8}\n",
                    x.browsers[i],
                    x.pl_ratio[i],
                    x.paper_pl_ratio.get(i).map_or("-".into(), |v| format!("{v:.2}")),
                    x.lrq_ratio[i],
                    x.paper_lrq_ratio
                        .get(i)
                        .map_or("-".into(), |v| format!("{v:.2}")),
                    x.mean_t1_timesharing[i],
                    f(x.mean_t1_rw3[i]),
                    f(x.mean_t1_rw6[i]),
                    f(x.mean_t1_rw9[i]),
                    format!("{} {:+.1}%", x.best_label[i], x.best_impr[i] * 100.0),
                    x.paper_best_impr
                        .get(i)
                        .map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
                );
            }
            s += &format!(
                "\nexperiment 4, bound (timesharing t1; one browser alone: {:.1} ms)\n",
                x.t1_alone * 1e3
            );
            s += &format!(
                "{:<10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
                "browsers", "burst LRQ", "cpu wait%", "content%", "floor%", "best%", "paper%"
            );
            for i in 0..x.browsers.len() {
                s += &format!(
                    "{:<10} {:>10.2} {:>10.1} {:>10} {:>10.1} {:>10.1} {:>10}\n",
                    x.browsers[i],
                    x.burst_lrq[i],
                    x.cpu_wait_share[i] * 100.0,
                    x.content_impr[i].map_or("-".into(), |c| format!("{:.1}", c * 100.0)),
                    x.floor_impr[i] * 100.0,
                    x.best_impr[i] * 100.0,
                    x.paper_best_impr
                        .get(i)
                        .map_or("-".into(), |v| format!("{:.1}", v * 100.0))
                );
            }
            s += "\n";
        }
        s += &format!(
            "{:<10} {:<52} {:<36} {}\n",
            "figure", "seed 001", "ours", "paper"
        );
        for f in &self.figures {
            s += &format!(
                "{:<10} {:<52} {:<36} {}\n",
                f.figure, f.what, f.ours, f.paper
            );
        }
        s += "\n";
        for note in &self.notes {
            s += &format!("note: {note}\n");
        }
        s
    }
}
