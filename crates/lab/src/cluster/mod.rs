//! `triage lab cluster`: seed 004's cluster on this machine. N back ends (`triage serve` with a
//! bounded LRU content cache and the LARD paper's emulated disk) behind a front end: `triage
//! front` with WRR, LARD, LARD/R, extended LARD and CHBL (and, for persistent connections,
//! LARD with connections pinned against extended LARD with back-end forwarding), HAProxy
//! (`roundrobin`, `leastconn`, `uri` + consistent hashing with a balance factor of 125) and
//! nginx (`hash $request_uri consistent`, `random two least_conn`), their configurations
//! written from `triage front --emit`. The load is wrk replaying a trace: the simulator's
//! seeded SURGE-like one ([`sim::trace`]) or a Combined Log Format access log.
//!
//! Measured per point: throughput, latency p50/p99, the back ends' cache hit ratio and
//! balance (their `/metrics`), the front end's CPU per request, failed requests (also with a
//! back end killed mid-window). Before throughput is reported, each point of triage's
//! relaying policies is run through the simulator's model (`sim::cluster`, what `triage sim
//! lard` runs) on the very requests the lab replayed: hit ratio and balance must agree within
//! the tolerances (`--hit-tolerance`, `--balance-tolerance`), or the lab fails after writing
//! its results.
//!
//! The lab runs on the harness ([`crate::harness`]): [`opts`], [`plan`], [`workload`],
//! [`run`](mod@run) (one point), [`summary`] and [`report`], tied together by [`ClusterLab`].

use std::path::{Path, PathBuf};

use crate::error::{LabError, Result};
use crate::harness::{run_experiment, Env, Experiment, Outputs, Session};
use crate::peers::Peer;
use crate::results::print_goals;
use crate::testbed::TestbedConfig;
use crate::wrk::Wrk;

pub mod opts;
pub mod plan;
pub mod prewarm;
pub mod report;
pub mod run;
pub mod summary;
pub mod workload;

pub use opts::ClusterOpts;
pub use plan::{ClusterPoint, Params, Variant};
pub use summary::{Measured, Summary};
pub use workload::Workload;

/// What `prepare` lays out: the workload, its site and its paths.
struct Prepared {
    workload: Workload,
    trace: sim::trace::Trace,
    root: PathBuf,
    paths: PathBuf,
}

/// `triage lab cluster` as an [`Experiment`].
pub struct ClusterLab {
    o: ClusterOpts,
    p: Params,
    variants: Vec<Variant>,
    prepared: Option<Prepared>,
}

impl ClusterLab {
    /// The lab `o` asks for, its parameters resolved (an error names a bad option).
    pub fn new(o: ClusterOpts) -> Result<ClusterLab> {
        let (p, variants) = plan::resolve(&o)?;
        if Wrk::available().is_none() {
            return Err(LabError::Config(
                "wrk is not installed (scripts/deps.sh installs it); the lab needs it as the load"
                    .into(),
            ));
        }
        Ok(ClusterLab {
            o,
            p,
            variants,
            prepared: None,
        })
    }

    fn setup<'a>(&'a self, env: &'a Env<'_>) -> run::Setup<'a> {
        let w = self
            .prepared
            .as_ref()
            .expect("prepare lays out the workload");
        run::Setup {
            tb: env.tb,
            p: &self.p,
            o: &self.o,
            root: &w.root,
            paths: &w.paths,
            requests: w.workload.requests.len(),
            max_file: w.workload.max_file(),
            trace: &w.trace,
        }
    }

    fn workload(&self) -> Result<Workload> {
        match &self.o.log {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|e| LabError::io("reading", path, e))?;
                Workload::from_log(&text, &path.display().to_string(), self.o.max_file)
            }
            None => Workload::synthetic(&sim::trace::TraceConfig {
                working_set: self.p.working_set,
                requests: self.p.requests,
                zipf: self.o.zipf,
                max_size: self.o.max_file,
                seed: self.o.seed,
                ..sim::trace::TraceConfig::default()
            }),
        }
    }
}

impl Experiment for ClusterLab {
    type Server = run::Running;
    type Point = ClusterPoint;
    type Measured = Measured;
    type Summary = Summary;

    fn name(&self) -> String {
        "lab cluster".into()
    }

    fn out_dir(&self, stamp: &str) -> PathBuf {
        crate::harness::results_dir(self.o.out.as_ref(), "cluster", stamp)
    }

    fn testbed(&self) -> TestbedConfig {
        TestbedConfig {
            tag: "cluster".into(),
            // A fast link: the back ends' disks and CPU, not the network, are the bottleneck.
            rate_mbit: 10_000.0,
            net: self.o.net,
            ..Default::default()
        }
    }

    fn peers(&self) -> Vec<(String, Peer)> {
        self.variants
            .iter()
            .filter_map(|v| match v.engine {
                plan::Engine::Haproxy { .. } => Some((v.name.clone(), Peer::Haproxy)),
                plan::Engine::Nginx { .. } => Some((v.name.clone(), Peer::Nginx)),
                plan::Engine::Triage { .. } => None,
            })
            .collect()
    }

    fn drop_variant(&mut self, name: &str) {
        self.variants.retain(|v| v.name != name);
        self.p.variants.retain(|v| v != name);
    }

    fn prepare(&mut self, env: &Env<'_>) -> Result<()> {
        let mut workload = self.workload()?;
        if self.o.log.is_some() {
            // A log's own working set: the cache is a share of it unless given.
            self.p.working_set = workload.source.working_set;
            if self.o.cache.is_none() {
                let nmax = *self.p.nodes.last().expect("resolve keeps one node count");
                self.p.cache_exceeds = plan::default_cache(self.p.working_set, nmax).max(64 << 10);
            }
        }
        workload.source.detail += &format!(
            "; {} requests, the client cycling through them in order",
            workload.requests.len()
        );
        let root = env.tb.workdir().join("site");
        workload.write_site(&root)?;
        let paths = env.tb.workdir().join("paths.txt");
        std::fs::write(&paths, workload.paths_text())
            .map_err(|e| LabError::io("writing", &paths, e))?;
        let trace = workload.trace();
        self.prepared = Some(Prepared {
            workload,
            trace,
            root,
            paths,
        });
        Ok(())
    }

    fn plan(&self) -> Vec<Session<ClusterPoint>> {
        let ws = self
            .prepared
            .as_ref()
            .map_or(self.p.working_set, |w| w.workload.source.working_set);
        plan::sessions(&self.p, &self.variants, ws + (1 << 20))
    }

    fn start(&self, env: &Env<'_>, s: &Session<ClusterPoint>, dir: &Path) -> Result<run::Running> {
        run::start(&self.setup(env), &s.points[0], dir)
    }

    fn label(&self, pt: &ClusterPoint) -> String {
        run::label(pt)
    }

    fn measure(
        &self,
        env: &Env<'_>,
        srv: &mut run::Running,
        pt: &ClusterPoint,
        dir: &Path,
    ) -> Result<Measured> {
        run::measure(&self.setup(env), srv, pt, dir)
    }

    fn describe(&self, _: &Env<'_>, m: &Measured) -> String {
        format!(
            "{:.0} req/s, hit {:.1}%{}, max/mean {:.2}{}, p99 {:.1} ms, front {:.1} us/req, \
             back ends {:.1} us/req{}, {} failed",
            m.rps,
            m.hit_ratio * 100.0,
            m.sim_hit_ratio
                .map_or(String::new(), |h| format!(" (sim {:.1}%)", h * 100.0)),
            m.balance,
            m.sim_balance
                .map_or(String::new(), |b| format!(" (sim {b:.2})")),
            m.latency_p99_ms,
            m.front_cpu_us_per_req,
            m.backend_cpu_us_per_req,
            m.sim_cpu_scale
                .map_or(String::new(), |k| format!(" (sim CPU x{k:.3})")),
            m.failed
        )
    }

    fn stop(&self, _: &Env<'_>, srv: run::Running) -> String {
        srv.stop()
    }

    fn summarize(&self, env: &Env<'_>, done: &[(ClusterPoint, Measured)]) -> Summary {
        let w = &self.prepared.as_ref().expect("prepared").workload;
        let pts = done.iter().map(|(_, m)| m.clone()).collect();
        summary::summarize(&self.o, &self.p, &self.variants, &w.source, env, pts)
    }

    fn outputs(&self, s: &Summary, _: &[(ClusterPoint, Measured)]) -> Outputs {
        Outputs {
            raw_csv: Some(summary::raw_csv(&s.points)),
            report_html: Some(report::report(s)),
        }
    }

    fn print(&self, s: &Summary, out: &Path) {
        summary::print_table(s);
        print_goals(&s.goals, out);
        if !s.sim_check.ok {
            println!(
                "FAILED: the lab's hit ratio or balance disagrees with the simulator's beyond the \
                 tolerance (see sim check above and {}/summary.json)",
                out.display()
            );
        }
    }
}

/// Run the lab `o` asks for and write its results directory. Returns the directory; an error
/// also when the results are written but disagree with the simulator.
pub fn run(o: &ClusterOpts) -> Result<PathBuf> {
    let out = run_experiment(ClusterLab::new(o.clone())?)?;
    let path = out.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(|e| LabError::io("reading", &path, e))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| LabError::Results(format!("{}: {e}", path.display())))?;
    if v["sim_check"]["ok"] != serde_json::Value::Bool(true) {
        return Err(LabError::Results(format!(
            "hit ratio or balance outside the tolerance of `triage sim lard` on the same \
             requests: see sim_check in {}",
            path.display()
        )));
    }
    Ok(out)
}
