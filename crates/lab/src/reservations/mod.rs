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
//! to CPU 0 under a CPU quota (default 50% of a CPU per 100 ms, see [`opts::DEFAULT_PERIOD`]: the
//! capacity is fixed whatever else runs on that CPU of a shared machine); the clients are threads of the lab on CPU 1 in the client
//! namespace, each with one request in flight (closed loop, `Connection: close`).
//!
//! Measurement against drift (this shared VM's speed drifts by up to a quarter within a minute):
//! within each repetition the competitor counts run in a seeded random order ([`plan::schedule`]),
//! with a point alone between every two of them, so every point with competitors is measured
//! right beside a point alone of the same server. The required figures (`reserved_kept_pct`,
//! `apache_kept_pct`) keep the formula on the medians; the paired figures beside them
//! (`*_kept_pct_paired`) divide each point by its neighbour alone first and take the median
//! ratio over repetitions (`summary::paired`).
//!
//! Results: raw.csv (one row per point and site), summary.json (`reserved_kept_pct`,
//! `apache_kept_pct`, their paired forms, per-point data and curves), report.html.
//!
//! The lab runs on the harness ([`crate::harness`]): [`opts`], [`plan`], [`run`](mod@run) (one point),
//! [`summary`] and [`report`], tied together by [`ReservationsLab`]. A session is one variant's
//! server in one repetition, measured at every competitor count.

use std::path::{Path, PathBuf};

use crate::error::{LabError, Result};
use crate::harness::{run_experiment, Env, Experiment, Outputs, Session};
use crate::peers::Peer;
use crate::results::print_goals;
use crate::testbed::TestbedConfig;

pub mod opts;
pub mod plan;
pub mod report;
pub mod run;
pub mod summary;

pub use opts::ReservationsOpts;
pub use plan::ResPoint;
pub use plan::{schedule, Params, Variant};
pub use summary::{Point, Summary};

/// `triage lab reservations` as an [`Experiment`].
pub struct ReservationsLab {
    o: ReservationsOpts,
    p: Params,
    variants: Vec<Variant>,
    /// The static document root and the script directory, once installed.
    site: Option<(PathBuf, PathBuf)>,
}

impl ReservationsLab {
    /// The lab `o` asks for, its parameters resolved (an error names a bad option).
    pub fn new(o: ReservationsOpts) -> Result<ReservationsLab> {
        let (p, variants) = plan::resolve(&o)?;
        Ok(ReservationsLab {
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
            p: &self.p,
            o: &self.o,
            capacity: env.tb.server_capacity(),
            root,
            bin,
        }
    }
}

impl Experiment for ReservationsLab {
    type Server = crate::cgi::Servers;
    type Point = ResPoint;
    type Measured = Point;
    type Summary = Summary;

    fn name(&self) -> String {
        "lab reservations".into()
    }

    fn out_dir(&self, stamp: &str) -> PathBuf {
        crate::harness::results_dir(self.o.out.as_ref(), "reservations", stamp)
    }

    fn testbed(&self) -> TestbedConfig {
        TestbedConfig {
            tag: "reservations".into(),
            quota: self.o.quota.0,
            period: self.o.period,
            rate_mbit: 1_000.0,
            net: self.o.net,
            twin: self.p.twin,
            twin_quota: self.o.quota.0.map(|q| q * run::TWIN_QUOTA_SHARE),
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
                "no cgroups ({}): reservations are cgroup weights (as root the lab finds or makes a place for its cgroups; see docs/containers.md)",
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

    fn plan(&self) -> Vec<Session<ResPoint>> {
        plan::sessions(&self.p, &self.variants)
    }

    fn start(
        &self,
        env: &Env<'_>,
        s: &Session<ResPoint>,
        dir: &Path,
    ) -> Result<crate::cgi::Servers> {
        let v = self
            .variants
            .iter()
            .find(|v| v.name == s.variant)
            .expect("sessions name planned variants");
        run::start(&self.setup(env), v, dir)
    }

    fn label(&self, pt: &ResPoint) -> String {
        format!(
            "{} competitors={} rep {}/{}",
            pt.variant.name,
            pt.competitors,
            pt.rep + 1,
            self.p.reps
        )
    }

    fn measure(
        &self,
        env: &Env<'_>,
        srv: &mut crate::cgi::Servers,
        pt: &ResPoint,
        _: &Path,
    ) -> Result<Point> {
        run::measure(
            &self.setup(env),
            srv,
            &pt.variant,
            pt.competitors,
            pt.rep,
            pt.seq,
        )
    }

    fn describe(&self, _: &Env<'_>, m: &Point) -> String {
        run::describe(m)
    }

    fn stop(&self, env: &Env<'_>, srv: crate::cgi::Servers) -> String {
        let log = srv.main.child.log_tail(1500);
        srv.stop(env.tb);
        log
    }

    fn summarize(&self, env: &Env<'_>, done: &[(ResPoint, Point)]) -> Summary {
        let points = done.iter().map(|(_, m)| m.clone()).collect();
        summary::summarize(&self.o, &self.p, &self.variants, env, points)
    }

    fn outputs(&self, s: &Summary, _: &[(ResPoint, Point)]) -> Outputs {
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
pub fn run(o: &ReservationsOpts) -> Result<PathBuf> {
    run_experiment(ReservationsLab::new(o.clone())?)
}

#[cfg(test)]
mod tests {
    use super::plan::{resolve, schedule};
    use super::summary::{
        a_value, cpu_kept, cpu_ms_per_req, kept, min_at_competitors, paired, paired_samples, Curve,
        Point,
    };
    use super::*;
    use crate::cgi::WindowStats;
    use crate::util::Scale;

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
            kept_pct_vs_twin: Vec::new(),
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
            twin_a: None,
        }
    }

    #[test]
    fn the_twin_takes_the_machines_speed_out_of_what_was_kept() {
        // Alone at full speed: 20 req/s, the twin 10. With competitors the machine ran at 0.8:
        // the site got 8 (exactly half of what it would get alone at that speed), the twin 8.
        let with_twin = |x: Point, t: f64| Point {
            twin_a: Some(WindowStats {
                rps: t,
                ..WindowStats::default()
            }),
            ..x
        };
        let points = vec![
            with_twin(pt("v", 0, 0, 0, 20.0), 10.0),
            with_twin(pt("v", 0, 1, 40, 8.0), 8.0),
        ];
        let raw = paired_samples(&points, "v", None, &|x| a_value(x, false));
        let twin = paired_samples(&points, "v", None, &|x| a_value(x, true));
        assert!((raw[0] * 200.0 - 80.0).abs() < 1e-9, "{raw:?}");
        assert!((twin[0] * 200.0 - 100.0).abs() < 1e-9, "{twin:?}");
        // Without the twin's figure there is no ratio; a zero twin is no ratio either.
        assert_eq!(a_value(&pt("v", 0, 0, 0, 20.0), true), None);
        assert_eq!(a_value(&with_twin(pt("v", 0, 0, 0, 20.0), 0.0), true), None);
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
