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
//!
//! The lab runs on the harness ([`crate::harness`]): [`opts`], [`plan`], [`run`](mod@run) (one point),
//! [`summary`] and [`report`], tied together by [`ContainersLab`]. A session is one variant's
//! server in one repetition, measured at every CGI count.

use std::path::{Path, PathBuf};

use crate::error::{LabError, Result};
use crate::harness::{run_experiment, Env, Experiment, Outputs, Session};
use crate::peers::Peer;
use crate::results::print_goals;
use crate::testbed::TestbedConfig;
use crate::wrk::Wrk;

pub mod opts;
pub mod plan;
pub mod report;
pub mod run;
pub mod summary;

pub use opts::ContainersOpts;
pub use plan::CgiPoint;
pub use plan::{Params, Variant};
pub use summary::{Point, Summary};

/// `triage lab containers` as an [`Experiment`].
pub struct ContainersLab {
    o: ContainersOpts,
    p: Params,
    variants: Vec<Variant>,
    /// The static document root and the script directory, once installed.
    site: Option<(PathBuf, PathBuf)>,
}

impl ContainersLab {
    /// The lab `o` asks for, its parameters resolved (an error names a bad option).
    pub fn new(o: ContainersOpts) -> Result<ContainersLab> {
        let (p, variants) = plan::resolve(&o)?;
        if Wrk::available().is_none() {
            return Err(LabError::Config(
                "wrk is not installed (scripts/deps.sh installs it); the lab needs it as the load"
                    .into(),
            ));
        }
        Ok(ContainersLab {
            o,
            p,
            variants,
            site: None,
        })
    }

    fn setup<'a>(&'a self, env: &'a Env<'_>) -> run::Setup<'a> {
        let (root, bin) = self.site.as_ref().expect("prepare installs the site");
        run::Setup {
            tb: env.tb,
            capacity: env.tb.server_capacity(),
            p: &self.p,
            o: &self.o,
            root,
            bin,
        }
    }
}

impl Experiment for ContainersLab {
    type Server = crate::cgi::Servers;
    type Point = CgiPoint;
    type Measured = Point;
    type Summary = Summary;

    fn name(&self) -> String {
        "lab containers".into()
    }

    fn out_dir(&self, stamp: &str) -> PathBuf {
        crate::harness::results_dir(self.o.out.as_ref(), "containers", stamp)
    }

    fn testbed(&self) -> TestbedConfig {
        TestbedConfig {
            tag: "containers".into(),
            quota: self.o.quota.0,
            period: self.o.period,
            // A fast link: the CPU, not the network, must be the bottleneck of 1 KB requests.
            rate_mbit: 10_000.0,
            net: self.o.net,
            twin: self.variants.iter().any(|v| v.has_twin(&self.p)),
            ..Default::default()
        }
    }

    fn peers(&self) -> Vec<(String, Peer)> {
        self.variants
            .iter()
            .filter(|v| v.kind == plan::Kind::Apache)
            .map(|v| (v.name.clone(), Peer::Apache))
            .collect()
    }

    fn drop_variant(&mut self, name: &str) {
        self.variants.retain(|v| v.name != name);
    }

    fn prepare(&mut self, env: &Env<'_>) -> Result<()> {
        if env.tb.server_cgroup().is_none() {
            return Err(LabError::Os(format!(
                "no cgroups ({}): the lab measures CPU shares from cgroup usage and caps a cgroup (as root it finds or makes a place for its cgroups; see docs/containers.md)",
                env.tb
                    .info()
                    .cgroup_error
                    .as_deref()
                    .unwrap_or("no server cgroup")
            )));
        }
        self.site = Some(crate::cgi::install(&env.tb.workdir().join("site"))?);
        Ok(())
    }

    fn plan(&self) -> Vec<Session<CgiPoint>> {
        plan::sessions(&self.p, &self.variants)
    }

    fn start(
        &self,
        env: &Env<'_>,
        s: &Session<CgiPoint>,
        dir: &Path,
    ) -> Result<crate::cgi::Servers> {
        let v = self
            .variants
            .iter()
            .find(|v| v.name == s.variant)
            .expect("sessions name planned variants");
        run::start(&self.setup(env), v, dir)
    }

    fn label(&self, pt: &CgiPoint) -> String {
        format!(
            "{} cgi={} rep {}/{}",
            pt.variant.name,
            pt.cgi,
            pt.rep + 1,
            self.p.reps
        )
    }

    fn measure(
        &self,
        env: &Env<'_>,
        srv: &mut crate::cgi::Servers,
        pt: &CgiPoint,
        _: &Path,
    ) -> Result<Point> {
        run::measure(&self.setup(env), srv, &pt.variant, pt.cgi, pt.rep)
    }

    fn describe(&self, env: &Env<'_>, m: &Point) -> String {
        run::describe(m, env.tb)
    }

    fn stop(&self, env: &Env<'_>, srv: crate::cgi::Servers) -> String {
        let log = srv.main.child.log_tail(1500);
        srv.stop(env.tb);
        log
    }

    fn summarize(&self, env: &Env<'_>, done: &[(CgiPoint, Point)]) -> Summary {
        let points = done.iter().map(|(_, m)| m.clone()).collect();
        summary::summarize(&self.o, &self.p, &self.variants, env, points)
    }

    fn outputs(&self, s: &Summary, _: &[(CgiPoint, Point)]) -> Outputs {
        Outputs {
            raw_csv: Some(summary::raw_csv(&s.points)),
            report_html: Some(report::report(s)),
        }
    }

    fn print(&self, s: &Summary, out: &Path) {
        summary::print_table(s);
        print_goals(&s.goals, out);
    }
}

/// Run the lab `o` asks for and write its results directory. Returns the directory.
pub fn run(o: &ContainersOpts) -> Result<PathBuf> {
    run_experiment(ContainersLab::new(o.clone())?)
}

#[cfg(test)]
mod tests {
    use super::plan::resolve;
    use super::summary::{
        blocked, point_noise, spread_1_to_5, spread_per_rep, trend_1_to_5, Point, Throughput,
    };
    use super::*;
    use crate::util::Scale;

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
                "triage-budget30",
                "triage-timeshare",
                "apache"
            ]
        );
        assert_eq!(v.len(), 6);
        // The reference twin runs beside the capped variants (not one budget, not Apache) with
        // the smallest CGI count above 0; --no-twin leaves it out.
        assert_eq!(p.twin_cgi, Some(1));
        let twins: Vec<&str> = v
            .iter()
            .filter(|x| x.has_twin(&p))
            .map(|x| x.name.as_str())
            .collect();
        assert_eq!(twins, ["triage-cap30", "triage-cap10"]);
        let mut no_twin = o.clone();
        no_twin.twin = false;
        let (p2, v2) = resolve(&no_twin).unwrap();
        assert_eq!(p2.twin_cgi, None);
        assert!(!v2.iter().any(|x| x.has_twin(&p2)));
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
            twin_cgi: None,
            twin_static_rps: None,
            twin_server_share_pct: None,
            twin_cgi_share_pct: None,
        }
    }

    #[test]
    fn the_twin_takes_the_machines_speed_out_of_each_point() {
        let counts = [0, 1, 3, 5];
        // The machine's speed at each point (this VM: 0.5x to 1x within a minute), the server
        // flat in the CGI count under the cap (1% noise of its own), and the twin at the same
        // speed in the same window.
        let speed = [
            [1.0, 0.8, 1.1, 0.6],
            [0.9, 1.2, 0.7, 1.0],
            [1.0, 0.75, 0.95, 1.15],
        ];
        let own = [
            [1.0, 1.01, 0.99, 1.0],
            [1.0, 0.99, 1.01, 1.0],
            [1.0, 1.0, 0.99, 1.01],
        ];
        let mut pts = Vec::new();
        for r in 0..3 {
            for (i, &k) in counts.iter().enumerate() {
                let alone = if k == 0 { 1.4 } else { 1.0 };
                let mut x = pt(r, k, 6000.0 * alone * speed[r][i] * own[r][i]);
                x.twin_cgi = Some(1);
                x.twin_static_rps = Some(5000.0 * speed[r][i]);
                pts.push(x);
            }
        }
        let raw = spread_per_rep(&pts, "v", &counts, Throughput::Raw);
        let twin = spread_per_rep(&pts, "v", &counts, Throughput::VsTwin);
        assert!(raw.iter().all(|&x| x > 20.0), "raw {raw:?}");
        assert!(twin.iter().all(|&x| x < 2.5), "vs twin {twin:?}");
        // A point without the twin's figure is no ratio.
        let mut x = pts[1].clone();
        x.twin_static_rps = None;
        assert_eq!(Throughput::VsTwin.of(&x), None);
        assert_eq!(Throughput::Raw.of(&x), Some(x.static_rps));
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
        let b = blocked(&pts, "v", &counts, Throughput::Raw);
        let sp = spread_1_to_5(&counts, &b).unwrap();
        assert!(sp < 0.1, "blocked spread {sp} ({b:?})");
        assert!((b[0] - 1000.0).abs() < 1.0, "{b:?}");
        let (t, se) = trend_1_to_5(&pts, "v", &counts, Throughput::Raw).unwrap();
        assert!(t.abs() < 2.0 && se < 2.0, "trend {t} +- {se}");
        let noise = point_noise(&pts, "v", &counts, Throughput::Raw).unwrap();
        assert!(noise > 0.5 && noise < 2.0, "noise {noise}");
        // A real fall of 2% per CGI is found whatever the levels.
        let mut pts = Vec::new();
        for (r, l) in levels.iter().enumerate() {
            for &k in &counts {
                pts.push(pt(r, k, l * (1.0 - 0.02 * (k as f64 - 1.0))));
            }
        }
        let (t, se) = trend_1_to_5(&pts, "v", &counts, Throughput::Raw).unwrap();
        assert!((t + 8.3).abs() < 0.5 && se < 0.1, "trend {t} +- {se}");
        // An incomplete repetition is left out of the blocks.
        pts.retain(|x| !(x.rep == 2 && x.cgi == 3));
        let b = blocked(&pts, "v", &counts, Throughput::Raw);
        assert!(b.iter().all(|v| v.is_finite()));
        assert!(spread_1_to_5(&[0], &[1.0]).is_none());
        // The server's CPU share under the 30% cap (2026-11-23 run): 0 CGI is left out.
        let share = spread_1_to_5(&[0, 1, 2, 3, 4, 5], &[100.2, 70.6, 70.3, 70.5, 70.7, 70.6]);
        assert!((share.unwrap() - 0.4 / 70.7 * 100.0).abs() < 1e-9);
    }
}
