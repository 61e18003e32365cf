//! One run of `triage lab pos`: one variant at one browser count in one repetition, measured by
//! the lab's runner ([`crate::runner::Bench`]) under the same trace of arrivals as every other
//! variant.

use std::path::Path;
use std::time::Duration;

use super::opts::PosOpts;
use super::plan::{trace, trace_seed, trace_span, Params};
use crate::error::Result;
use crate::peers::{Gzip, Prefork};
use crate::results::stats;
use crate::runner::{Bench, LoadPlan, RunOutcome, Variant};
use crate::site::Site;
use crate::testbed::Testbed;

/// What one run measures.
#[derive(Debug, Clone)]
pub struct PosPoint {
    /// The variant.
    pub variant: Variant,
    /// Simultaneous browsers.
    pub browsers: usize,
    /// The repetition (0-based).
    pub rep: usize,
}

/// The `triage load` flags of every run: the user's, then asking for gzip when the servers
/// compress (so every server really compresses what it sends).
pub fn load_flags(o: &PosOpts) -> Vec<String> {
    let mut v = o.load_extra.clone();
    if o.gzip_level().is_some() {
        v.extend(["--accept-encoding".to_string(), "gzip".to_string()]);
    }
    v
}

/// Run `pt` on the testbed, its logs and the load's output in `dir`.
pub fn measure(
    tb: &Testbed,
    o: &PosOpts,
    p: &Params,
    site: &Site,
    serve_config: Option<&Path>,
    pt: &PosPoint,
    dir: &Path,
) -> Result<RunOutcome> {
    let bench = Bench {
        tb,
        triage_bin: o.triage_bin.clone(),
        site,
        gzip: p.gzip_level.map(|level| Gzip {
            level,
            types: vec!["text/html".into(), "image/bmp".into()],
        }),
        // Every browser may hold `parallel` connections open at once.
        prefork: Prefork::for_connections(p.site.browsers * p.parallel),
        keepalive_s: 15,
        serve_config: serve_config.map(Path::to_path_buf),
        access_logs: o.keep_runs,
    };
    let load = LoadPlan {
        trace: trace(p, pt.browsers, trace_seed(o.seed, pt.browsers, pt.rep)),
        browsers: pt.browsers,
        parallel: p.parallel,
        duration: trace_span(p),
        timeout: Duration::from_secs(30),
        seed: o.seed,
        extra: load_flags(o),
    };
    bench.run(&pt.variant, &load, dir)
}

/// How a run went, in one progress line.
pub fn describe(outcome: &RunOutcome) -> String {
    let ok: Vec<f64> = outcome
        .pages
        .iter()
        .filter(|p| p.ok())
        .filter_map(|p| p.t1_ms)
        .collect();
    let errs = outcome.pages.iter().filter(|p| !p.ok()).count();
    let s = stats(&ok);
    format!(
        "{} pages, {errs} errors, t1 mean {} ms, PL {:.2}, LRQ {:.2}, throttled {:.2} s in \
         {:.0}% of periods of {}{}",
        outcome.pages.len(),
        s.map_or("-".into(), |s| format!("{:.1}", s.mean_ms)),
        outcome.cpu.pl_mean,
        outcome.cpu.lrq_mean,
        outcome.cpu.throttled_s,
        outcome.cpu.throttled_periods * 100.0,
        outcome
            .cpu
            .period_seen_ms()
            .map_or("-".into(), |p| format!("{p:.1} ms")),
        outcome
            .link
            .map(|l| format!(", link drops {}", l.dropped))
            .unwrap_or_default()
    )
}
