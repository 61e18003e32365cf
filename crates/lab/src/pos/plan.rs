//! The plan of a `triage lab pos` run: its parameters resolved from the options
//! ([`resolve`]), the variants compared ([`variants`]) and the arrivals every variant gets
//! ([`trace`]).

use std::time::Duration;

use policy::registry::PosTail;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::opts::{
    default_period, default_quota, tail_name, PosOpts, ServerLayout, SiteKind, DEFAULT_IMAGE_BYTES,
    DEFAULT_SLP_FLOOR, DEFAULT_SLP_MAX, DEFAULT_STAGGER, DEFAULT_WINDOW, QUICK_EXP1_REPS,
};
use crate::error::{LabError, Result};
use crate::peers::Peer;
use crate::runner::Variant;
use crate::site::SiteSpec;
use crate::util::Scale;

/// The resolved parameters of a run of the lab (what the summary records).
#[derive(Debug, Clone, Serialize)]
pub struct Params {
    /// The experiment (1-4).
    pub exp: u8,
    /// `--quick`.
    pub quick: bool,
    /// `--seconds-scale`.
    pub scale: Scale,
    /// Repetitions of every variant.
    pub reps: usize,
    /// Simultaneous browsers (one count for exp 1-3).
    pub browser_counts: Vec<usize>,
    /// `burst` or `random`.
    pub arrivals: String,
    /// Time between bursts (s).
    pub interval_s: f64,
    /// Exp 2-4: the window at the start of each interval within which every browser clicks
    /// at a random instant (s); null for exp 1's staggered bursts.
    pub window_s: Option<f64>,
    /// Pages each browser fetches per run.
    pub pages_per_browser: usize,
    /// Offset between browsers in a burst (ms).
    pub stagger_ms: Option<f64>,
    /// Tail order of the POS variants.
    pub pos_tail: PosTail,
    /// A CPU-bound process beside the server.
    pub hog: bool,
    /// SLP of the fixed-SLP variants (s) or null when predicted.
    pub slp_s: Option<f64>,
    /// Exp 3-4: the floor of the predicted SLP (s, `--slp-floor`); null when SLP is fixed.
    pub slp_floor_s: Option<f64>,
    /// RW of the fixed-RW POS variants.
    pub rw: Vec<u32>,
    /// Server-side CPU quota (fraction of one CPU).
    pub quota: Option<f64>,
    /// Where the server side's processes live below the quota, every variant's
    /// (`--server-layout`; nested when a variant uses the cgroup-weight lever).
    pub server_layout: ServerLayout,
    /// CFS period of the quota (ms), every variant's: `--period`, or 100 ms for a run of the
    /// attach labs and 10 ms otherwise (`super::opts::default_period`), lengthened to give
    /// the quota 1 ms per period.
    pub period_ms: f64,
    /// Connections per browser (K).
    pub parallel: usize,
    /// On-the-fly gzip level of every server.
    pub gzip_level: Option<u32>,
    /// Whether responses were really compressed (the load generator asked for gzip).
    pub gzip_effective: bool,
    /// The site generated.
    pub site: SiteSpec,
    /// Bytes of one page.
    pub page_bytes: usize,
    /// Seed of the site and the arrivals.
    pub seed: u64,
    /// Flags added to every triage variant.
    pub triage_extra: Vec<String>,
    /// What the site is (`--site`).
    pub site_kind: SiteKind,
    /// `--site cgi`: CPU of the page script and of each image script (ms).
    pub script_cpu_ms: Option<(f64, f64)>,
    /// The php-fpm variants: CPU of the page script and of each image script (ms), scaled to
    /// the quota (`super::php::script_cpu`); null when no php-fpm variant runs.
    pub php_cpu_ms: Option<(f64, f64)>,
}

/// The parameters of a run of `o`: the experiment's defaults where `o` says nothing, checked.
pub fn resolve(o: &PosOpts) -> Result<Params> {
    if !(1..=4).contains(&o.exp) {
        return Err(LabError::Config(format!(
            "--exp {} is not an experiment of seed 001 (1, 2, 3 or 4)",
            o.exp
        )));
    }
    if !(o.rate_mbit > 0.0 && o.rate_mbit.is_finite()) {
        return Err(LabError::Config(format!(
            "--link-rate {} Mbit/s must be positive",
            o.rate_mbit
        )));
    }
    if o.parallel == 0 {
        return Err(LabError::Config("--parallel must be at least 1".into()));
    }
    let gzip = o.gzip_level().is_some();
    let cgi = o.site == SiteKind::Cgi;
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
    // Exp 2-4's bursts (the window reading) end within about 2.5 s at the default quota (12
    // browsers: about 2.7 s of the server's CPU), so 4 s leave the idle time SLP needs.
    let interval = o.interval.unwrap_or(match (tiny, o.exp) {
        (true, _) => Duration::from_millis(1500),
        (false, 1) => Duration::from_secs(5),
        (false, _) => Duration::from_secs(4),
    });
    // Exp 3 and exp 4 fit one run of the default command in about 8 minutes: exp 3 has 8
    // variants x 4 repetitions x 4 bursts, exp 4 4 browser counts x 5 variants x 2 x 3.
    let pages = o.pages.unwrap_or(match (tiny, o.quick, o.exp) {
        (true, _, _) => 2,
        (false, true, _) => 2,
        (false, false, 2 | 3) => 4,
        (false, false, _) => 3,
    });
    // Exp 1's quick form is the check (the attach variants, `--site cgi`): a page's
    // t1 there is a count of the quota's 100 ms grants, and 2 repetitions left one run's mean
    // t1 improvement about 10 points of standard error; 6 bring it to about 6 (the mean does
    // not move, the spread of single runs narrows) in about 4 minutes for the four attach
    // variants (docs/kpos.md).
    let reps = o.reps.unwrap_or(match (tiny, o.quick, o.exp) {
        (true, _, _) => 1,
        (false, true, 1) => QUICK_EXP1_REPS,
        (false, true, _) => 2,
        (false, false, 4) => 2,
        (false, false, 2 | 3) => 4,
        (false, false, _) => 5,
    });
    let window = o.window.unwrap_or(DEFAULT_WINDOW);
    if o.exp != 1 && window > interval {
        return Err(LabError::Config(format!(
            "--window {window:?} must not be longer than the interval {interval:?}"
        )));
    }
    if reps == 0 || pages == 0 || interval.is_zero() {
        return Err(LabError::Config(
            "repetitions, pages and interval must be positive".into(),
        ));
    }
    // Every experiment adds RW 1 to the paper's 3, 6, 9: here a 4 KB HTML page is one burst
    // and an image 2-6 bursts (16 KiB each), so RW 3 leaves an image's worker marked for two of
    // them. Seed 001 §4.2: "the closer RW is set to the number of times WWW server process
    // handling HTML files actually change between run state and wait state, the less benefit
    // the WWW server processes handling Image files ... will take"; its HTML processes changed
    // three or four times and RW 3 was best, triage's change once (docs/lab.md).
    let rw = o.rw.clone().unwrap_or(match o.quick || tiny {
        // A CGI request is a longer episode: the burst that starts the script (1), the wake-up
        // for its output (2) and the first relay burst (3). RW 3 keeps a page's worker marked
        // until its HTML is relayed and demotes an image's at its first band (super::cgi).
        _ if cgi => vec![3],
        true => vec![1],
        false => vec![1, 3, 6, 9],
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
    let quota = o.quota.unwrap_or(if cgi {
        super::cgi::default_quota(o.exp)
    } else {
        default_quota(o.exp, gzip)
    });
    let weight = o
        .only
        .as_deref()
        .is_some_and(super::attach::uses_weight_lever);
    if weight && o.server_layout == Some(ServerLayout::Flat) {
        return Err(LabError::Config(
            "--server-layout flat with a variant of the cgroup-weight lever: its boost cgroup, \
             beside the quota's cgroup, would run the raised tasks outside the budget"
                .into(),
        ));
    }
    // The kernel's smallest quota is 1 ms per period: lengthen the period if needed.
    let period = default_period(o).max(Duration::from_secs_f64((0.001 / quota).min(1.0)));
    let site = SiteSpec {
        browsers: *browser_counts.iter().max().unwrap_or(&1),
        html_bytes: o.html_bytes,
        image_bytes: o.image_bytes.clone().unwrap_or_else(|| {
            if cgi {
                super::cgi::DEFAULT_IMAGE_BYTES.to_vec()
            } else {
                DEFAULT_IMAGE_BYTES.to_vec()
            }
        }),
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
        window_s: (o.exp != 1).then_some(window.as_secs_f64()),
        pages_per_browser: pages,
        stagger_ms: if o.exp == 1 {
            Some(o.stagger.unwrap_or(DEFAULT_STAGGER).as_secs_f64() * 1e3)
        } else {
            o.stagger.map(|d| d.as_secs_f64() * 1e3)
        },
        pos_tail: o.pos_tail,
        hog: o.exp == 1,
        slp_s: (o.exp <= 2).then_some(slp.as_secs_f64()),
        slp_floor_s: (o.exp > 2).then(|| o.slp_floor.unwrap_or(DEFAULT_SLP_FLOOR).as_secs_f64()),
        rw,
        quota: Some(quota),
        server_layout: o.server_layout.unwrap_or(if weight {
            ServerLayout::Nested
        } else {
            ServerLayout::Flat
        }),
        period_ms: period.as_secs_f64() * 1e3,
        parallel: o.parallel,
        gzip_level: o.gzip_level(),
        // The load generator asks for gzip whenever the servers compress.
        gzip_effective: gzip,
        page_bytes: site.page_bytes(),
        site,
        seed: o.seed,
        triage_extra: o.triage_extra.clone(),
        site_kind: o.site,
        script_cpu_ms: cgi.then_some((
            o.page_cpu.as_secs_f64() * 1e3,
            o.image_cpu.as_secs_f64() * 1e3,
        )),
        php_cpu_ms: o
            .only
            .as_ref()
            .is_some_and(|only| only.iter().any(|n| n.starts_with("php-fpm")))
            .then(|| {
                let (page, image) = super::php::script_cpu(o, Some(quota));
                (page.as_secs_f64() * 1e3, image.as_secs_f64() * 1e3)
            }),
    })
}

fn ms(d: f64) -> String {
    format!("{}ms", (d * 1e3).round() as u64)
}

/// A triage variant of `p`: `args`, then the flags every triage variant shares (see
/// [`variants`]; rounds on unless `args` set them), then `--triage-flag`s.
pub fn triage_variant(p: &Params, name: &str, args: &[&str]) -> Variant {
    let mut a: Vec<&str> = args.to_vec();
    if !args.contains(&"--rounds") {
        a.extend(["--rounds", "on"]);
    }
    a.extend(["--starvation-bound", "off"]);
    a.extend(p.triage_extra.iter().map(String::as_str));
    Variant::triage(name, &a, p.hog)
}

/// The fixed SLP flag value of `p` (`auto` when predicted).
pub fn slp_flag(p: &Params) -> String {
    match p.slp_s {
        Some(s) => ms(s),
        None => "auto".into(),
    }
}

/// The SLP flags of a POS variant of `p`: `--slp <fixed>`, or `--slp auto` with its floor.
pub fn slp_flags(p: &Params) -> Vec<String> {
    let mut f = vec!["--slp".to_string(), slp_flag(p)];
    if let (None, Some(floor)) = (p.slp_s, p.slp_floor_s) {
        f.extend(["--slp-floor".to_string(), ms(floor)]);
    }
    f
}

/// The variants of an experiment, in order.
pub fn variants(p: &Params, o: &PosOpts) -> Vec<Variant> {
    if p.site_kind == SiteKind::Cgi {
        return super::cgi::variants(p, o);
    }
    let hog = p.hog;
    let mut v = Vec::new();
    // Every triage variant runs the same gate mechanism (scheduling rounds on, also for fifo,
    // whose order they cannot change), so that a difference between variants is the policy's.
    // `triage serve`'s default (`--rounds auto`) would leave them off for fifo only, and rounds
    // change how image chunks interleave (docs/lab.md). `--triage-flag` comes last and wins.
    // POS as the paper states it has no starvation guard; triage's (on by default in `serve`)
    // counts wall time, and under the lab's quota its 200 ms are ~10 ms of the server's CPU:
    // it rescued 20-40 image chunks a run ahead of the text POS had promoted (docs/lab.md).
    let tv = |name: &str, args: &[&str]| triage_variant(p, name, args);
    v.push(tv("fifo", &["--policy", "fifo"]));
    let slp = slp_flags(p);
    let prefix = if p.slp_s.is_some() { "pos" } else { "pos-auto" };
    let tail = tail_name(p.pos_tail);
    // One POS variant: fixed SLP (or auto), this RW, tail order and kernel boost.
    let pos_variant = |name: &str, rw: u32, tail: &str, boost: &str, extra: &[&str]| {
        let r = rw.to_string();
        let mut a = vec!["--policy", "pos"];
        a.extend(slp.iter().map(String::as_str));
        a.extend(["--rw", &r, "--pos-tail", tail, "--boost", boost]);
        if boost == "rest" {
            // Seed 001's lever at full strength (issue 16's probe: nice -20 against a hog in
            // the same leaf cgroup).
            a.extend(["--boost-nice", "-20"]);
        }
        a.extend(extra);
        tv(name, &a)
    };
    for &rw in &p.rw {
        v.push(pos_variant(
            &format!("{prefix}-rw{rw}"),
            rw,
            tail,
            "off",
            &[],
        ));
    }
    let rw0 = p.rw[0];
    // Exp 1 also runs the first RW with the paper's tail (FIFO by ready time), so the report
    // shows what triage's episode order changes; `--quick` leaves it out.
    if p.exp == 1 && !p.quick && p.pos_tail == PosTail::Episode {
        v.push(pos_variant(
            &format!("pos-rw{rw0}-fifotail"),
            rw0,
            "fifo",
            "off",
            &[],
        ));
    }
    // The kernel levers of triage's own threads (docs/lab.md "The kernel lever"): the boost
    // at rest (raised before the wake-up) runs in the default exp 1; nice and slice (raised
    // after it, while a marked worker holds the boost) and `--quick`'s rest run when named.
    if p.exp == 1 {
        for boost in ["nice", "slice", "rest"] {
            let name = format!("pos-rw{rw0}-{boost}");
            let by_default = boost == "rest" && !p.quick;
            if by_default || o.only.as_ref().is_some_and(|only| only.contains(&name)) {
                v.push(pos_variant(&name, rw0, tail, boost, &[]));
            }
        }
    }
    // RW predicted (triage's addition to exp 3) runs when `--variants` names it, so that the
    // default run of exp 3 fits in about 8 minutes.
    let named = |n: &str| {
        o.only
            .as_ref()
            .is_some_and(|only| only.iter().any(|x| x == n))
    };
    // Queueing at the wake-up off (`--wake-queue off`: docs/server.md), when named: fifo and
    // the first POS variant as they ran before it, beside the same variants with it.
    if named("fifo-nowq") {
        v.push(tv(
            "fifo-nowq",
            &["--policy", "fifo", "--wake-queue", "off"],
        ));
    }
    let nowq = format!("{prefix}-rw{rw0}-nowq");
    if named(&nowq) {
        v.push(pos_variant(
            &nowq,
            rw0,
            tail,
            "off",
            &["--wake-queue", "off"],
        ));
    }
    // Scheduling rounds off (`--rounds off`: the first to ask for a free slot runs), when
    // named: what rounds buy POS's order here, beside what they cost a gzip stream's cache
    // (docs/server.md).
    let roff = format!("{prefix}-rw{rw0}-roff");
    if named(&roff) {
        v.push(pos_variant(&roff, rw0, tail, "off", &["--rounds", "off"]));
    }
    if p.exp == 3 {
        for rule in ["paper", "split"] {
            if !named(&format!("pos-auto-rwauto-{rule}")) {
                continue;
            }
            // SLP predicted here whatever the experiment, with exp 3's floor.
            let mut a = vec!["--policy", "pos"];
            a.extend(slp.iter().map(String::as_str));
            a.extend([
                "--rw",
                "auto",
                "--rw-rule",
                rule,
                "--pos-tail",
                tail,
                "--boost",
                "off",
            ]);
            v.push(tv(&format!("pos-auto-rwauto-{rule}"), &a));
        }
    }
    // Exp 4 (16 cells) measures content and the peers only when `--variants` names them, so
    // that its default run fits in about 8 minutes.
    if p.exp != 4 || named("content") {
        v.push(tv("content", &["--policy", "content"]));
    }
    if o.peers {
        for peer in [Peer::Nginx, Peer::Apache] {
            let pv = Variant::peer(peer, hog);
            if p.exp != 4 || named(&pv.name) {
                v.push(pv);
            }
        }
    }
    if let Some(only) = &o.only {
        // Unmodified servers with `triage pos attach` (`attach.rs`), and their baseline when
        // named without `--peers`.
        if !o.peers && only.iter().any(|n| n == "apache") {
            v.push(Variant::peer(Peer::Apache, hog));
        }
        if only.iter().any(|n| n == "php-fpm") {
            v.push(Variant::peer(Peer::PhpFpm, hog));
        }
        v.extend(super::attach::variants(only, p));
        v.retain(|x| only.iter().any(|n| n == &x.name));
    }
    v
}

/// The arrivals of one run as a `triage load` trace: the same for every variant of one
/// repetition and browser count; [`trace_seed`] draws them anew for every repetition.
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
            let w = (p.window_s.unwrap_or(p.interval_s) * 1e3).clamp(1.0, iv);
            for k in 0..p.pages_per_browser {
                for b in 0..browsers {
                    lines.push((lead + k as f64 * iv + rng.gen_range(0.0..w), b));
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

/// The seed of the arrivals of repetition `rep` at `browsers` browsers: every variant of a
/// repetition gets the same arrivals (common random numbers), every repetition new ones.
pub fn trace_seed(seed: u64, browsers: usize, rep: usize) -> u64 {
    seed.wrapping_add(browsers as u64)
        .wrapping_add((rep as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// When the first request of a run is sent, in ms after the load generator starts: 200 ms so
/// the first requests do not race its start, plus the SLP in force (the fixed SLP, or the
/// policy's SLP before its first prediction). The paper's server had been idle for a long time
/// when an experiment began; with a shorter lead-in the prefork workers of a server started a
/// moment ago have not yet waited longer than SLP, so characteristic 1 could not mark the
/// first page's HTML.
pub fn lead_ms(p: &Params) -> f64 {
    let slp_s = p
        .slp_s
        .unwrap_or(policy::pos::DEFAULT_SLP as f64 / policy::SEC as f64);
    200.0 + slp_s * 1e3
}

/// How long the load generator schedules pages: the lead-in, every interval and the last
/// burst's stagger.
pub fn trace_span(p: &Params) -> Duration {
    let st =
        p.stagger_ms.unwrap_or(0.0) * p.browser_counts.iter().max().copied().unwrap_or(1) as f64;
    Duration::from_secs_f64(
        (lead_ms(p) + p.interval_s * 1e3 * p.pages_per_browser as f64 + st) / 1e3,
    )
}

/// The title of experiment `exp` in reports.
pub fn title(exp: u8) -> &'static str {
    match exp {
        1 => "Seed 001 experiment 1: bursts of clicks beside a CPU-bound process, SLP fixed",
        2 => "Seed 001 experiment 2: random accesses, no CPU hog, SLP fixed",
        3 => "Seed 001 experiment 3: random accesses, no CPU hog, SLP (and RW) predicted",
        _ => "Seed 001 experiment 4: more and more simultaneous browsers (PL, LRQ, mean t1)",
    }
}
