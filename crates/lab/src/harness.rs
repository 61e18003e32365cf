//! The one harness every lab and benchmark runs on: [`run_experiment`] owns what they all do
//! (SIGINT/SIGTERM cleanup, the UTC stamp and results directory, pinning the lab process to the
//! client CPU, the testbed, dropping peers that are not installed with a message, progress,
//! and writing `summary.json`, `raw.csv` and `report.html`); an [`Experiment`] says only what
//! differs: its options and plan, how to start a server and measure one point, how to
//! summarize and report. Adding a lab is one folder implementing [`Experiment`].
//!
//! A plan is a list of [`Session`]s, each one server under test (started once) and the points
//! measured against it in order; a lab that starts a server per point (`pos`) has one point
//! per session. A failure of any point stops the lab: the session's server is stopped and the
//! error names the point and carries the end of the server's log.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::error::{LabError, Result};
use crate::peers::Peer;
use crate::progress::Progress;
use crate::results::{write_file, write_json};
use crate::testbed::{Testbed, TestbedConfig};
use crate::util::{pct, pin_lab_to, utc_stamp};

/// One server under test and the points measured against it.
#[derive(Debug, Clone)]
pub struct Session<P> {
    /// The variant (server configuration) this session runs, as named in reports.
    pub variant: String,
    /// Name of its directory of logs and configuration (under the testbed's `runs/`).
    pub dir: String,
    /// The points, in measuring order.
    pub points: Vec<P>,
}

/// What a run of a lab knows beside its own plan: the testbed, when it started, and what it
/// could not measure.
pub struct Env<'a> {
    /// The testbed the lab built.
    pub tb: &'a Testbed,
    /// When the lab started.
    pub started: Instant,
    /// The same as `YYYYMMDDTHHMMSSZ` (UTC).
    pub started_utc: String,
    /// Variants not measured and why (peers not installed).
    pub skipped: Vec<String>,
    /// Everything weaker than asked (the testbed's notes), said plainly.
    pub notes: Vec<String>,
}

impl Env<'_> {
    /// The directory of logs and configuration of a session or run (in the testbed's work
    /// directory, removed with it).
    pub fn run_dir(&self, name: &str) -> PathBuf {
        self.tb.workdir().join("runs").join(name)
    }
}

/// The files a lab writes beside `summary.json` (each `None`: not written).
#[derive(Debug, Default)]
pub struct Outputs {
    /// `raw.csv`: one row per measured page, point or site.
    pub raw_csv: Option<String>,
    /// `report.html`: the self-contained report.
    pub report_html: Option<String>,
}

/// A lab's results directory: its `--out` when given, else `results/<lab>/<stamp>`.
pub fn results_dir(out: Option<&PathBuf>, lab: &str, stamp: &str) -> PathBuf {
    match out {
        Some(d) => d.clone(),
        None => PathBuf::from("results").join(lab).join(stamp),
    }
}

/// One lab or benchmark: what differs between them. See the module docs.
pub trait Experiment {
    /// A server under test, running (or nothing, for a lab that starts one per point).
    type Server;
    /// One point to measure.
    type Point: Clone;
    /// What one point measured.
    type Measured;
    /// `summary.json`.
    type Summary: Serialize;

    /// The name in progress lines (`lab pos exp 1`).
    fn name(&self) -> String;
    /// The results directory of a run started at `stamp` (`YYYYMMDDTHHMMSSZ`).
    fn out_dir(&self, stamp: &str) -> PathBuf;
    /// The testbed to build.
    fn testbed(&self) -> TestbedConfig;
    /// The variants that are peers, by name: the harness drops the ones not installed here
    /// ([`Experiment::drop_variant`]) and reports them as skipped.
    fn peers(&self) -> Vec<(String, Peer)>;
    /// Leave variant `name` out of the plan.
    fn drop_variant(&mut self, name: &str);
    /// Called once the testbed exists, before the plan: lay out sites and scripts, check what
    /// the lab needs.
    fn prepare(&mut self, env: &Env<'_>) -> Result<()>;
    /// The sessions in measuring order.
    fn plan(&self) -> Vec<Session<Self::Point>>;
    /// Start the server of `session` (its logs and configuration in `dir`).
    fn start(
        &self,
        env: &Env<'_>,
        session: &Session<Self::Point>,
        dir: &Path,
    ) -> Result<Self::Server>;
    /// The label of a point in progress lines and errors (`fifo b=9 rep 1/5`).
    fn label(&self, point: &Self::Point) -> String;
    /// Measure one point against the running server.
    fn measure(
        &self,
        env: &Env<'_>,
        server: &mut Self::Server,
        point: &Self::Point,
        dir: &Path,
    ) -> Result<Self::Measured>;
    /// How a point went, for its progress line (after its label and `: `).
    fn describe(&self, env: &Env<'_>, measured: &Self::Measured) -> String;
    /// Stop the server; returns the end of its log (empty if it has none), which the harness
    /// adds to the error of a point that failed.
    fn stop(&self, env: &Env<'_>, server: Self::Server) -> String;
    /// The summary of everything measured, in measuring order.
    fn summarize(&self, env: &Env<'_>, done: &[(Self::Point, Self::Measured)]) -> Self::Summary;
    /// `raw.csv` and `report.html`.
    fn outputs(&self, summary: &Self::Summary, done: &[(Self::Point, Self::Measured)]) -> Outputs;
    /// The lines on stdout once the files are written (the results table, the goals and where
    /// the report is).
    fn print(&self, summary: &Self::Summary, out: &Path);
}

/// Run `exp` end to end and return its results directory. See the module docs.
pub fn run_experiment<E: Experiment>(mut exp: E) -> Result<PathBuf> {
    let _sig = crate::signals::install()?;
    let started = Instant::now();
    let started_utc = utc_stamp();
    let mut skipped = Vec::new();
    for (name, peer) in exp.peers() {
        if let Some(why) = peer.unavailable() {
            skipped.push(format!("{name}: {why}"));
            exp.drop_variant(&name);
        }
    }
    let out = exp.out_dir(&started_utc);
    std::fs::create_dir_all(&out).map_err(|e| LabError::io("creating", &out, e))?;
    let cfg = exp.testbed();
    pin_lab_to(cfg.client_cpu);
    let tb = Testbed::new(cfg)?;
    let env = Env {
        tb: &tb,
        started,
        started_utc,
        notes: tb.info().notes.clone(),
        skipped,
    };
    exp.prepare(&env)?;
    let plan = exp.plan();
    if plan.iter().all(|s| s.points.is_empty()) {
        return Err(LabError::Config("no variant left to run".into()));
    }
    let total = plan.iter().map(|s| s.points.len() as u64).sum();
    let mut prog = Progress::new(total, &exp.name());
    for s in &env.skipped {
        prog.note(&format!("skipped {s}"));
    }
    for n in &env.notes {
        prog.note(&format!("note: {n}"));
    }
    prog.note(&testbed_line(&tb));
    let mut done = Vec::new();
    for session in &plan {
        let dir = env.run_dir(&session.dir);
        std::fs::create_dir_all(&dir).map_err(|e| LabError::io("creating", &dir, e))?;
        let mut server = exp
            .start(&env, session, &dir)
            .map_err(|e| in_step(format!("starting {}", session.variant), e, String::new()))?;
        for point in &session.points {
            let label = exp.label(point);
            prog.start(&label);
            match exp.measure(&env, &mut server, point, &dir) {
                Ok(m) => {
                    prog.finish_one(&format!("{label}: {}", exp.describe(&env, &m)));
                    done.push((point.clone(), m));
                }
                Err(e) => {
                    let log = exp.stop(&env, server);
                    return Err(in_step(format!("run {label}"), e, log));
                }
            }
        }
        exp.stop(&env, server);
    }
    drop(prog);
    let summary = exp.summarize(&env, &done);
    write_json(&out.join("summary.json"), &summary)?;
    let files = exp.outputs(&summary, &done);
    if let Some(csv) = files.raw_csv {
        write_file(&out.join("raw.csv"), csv.as_bytes())?;
    }
    if let Some(html) = files.report_html {
        write_file(&out.join("report.html"), html.as_bytes())?;
    }
    exp.print(&summary, &out);
    Ok(out)
}

/// An error of one step (`run fifo b=9 rep 1/5`), with the end of the server's log if there
/// is one; an interruption passes as is.
fn in_step(step: String, e: LabError, log: String) -> LabError {
    match e {
        LabError::Interrupted => e,
        e => LabError::Process {
            name: step,
            msg: if log.is_empty() {
                e.to_string()
            } else {
                format!("{e}; server log: {log}")
            },
        },
    }
}

/// What the testbed is, in one progress line.
fn testbed_line(tb: &Testbed) -> String {
    let i = tb.info();
    format!(
        "testbed: {} ({}), server side {} of CPU {} (cgroup {}), load on CPU {}",
        i.network,
        i.shaping,
        i.quota
            .map(|q| format!("{}%", pct(q)))
            .unwrap_or_else(|| "all".into()),
        i.server_cpu.map_or("any".into(), |c| c.to_string()),
        i.cgroup,
        i.client_cpu.map_or("any".into(), |c| c.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::NetMode;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A lab of two sessions that measures numbers, records what the harness asked of it, and
    /// fails where told.
    struct Toy {
        out: PathBuf,
        fail_at: Option<u32>,
        variants: Vec<String>,
        calls: Rc<RefCell<Vec<String>>>,
    }

    impl Experiment for Toy {
        type Server = String;
        type Point = u32;
        type Measured = u32;
        type Summary = Vec<u32>;

        fn name(&self) -> String {
            "toy".into()
        }
        fn out_dir(&self, stamp: &str) -> PathBuf {
            assert_eq!(stamp.len(), 16);
            self.out.clone()
        }
        fn testbed(&self) -> TestbedConfig {
            TestbedConfig {
                tag: "toy".into(),
                net: NetMode::Loopback,
                ..Default::default()
            }
        }
        fn peers(&self) -> Vec<(String, Peer)> {
            vec![("nginx".into(), Peer::Nginx)]
        }
        fn drop_variant(&mut self, name: &str) {
            self.variants.retain(|v| v != name);
        }
        fn prepare(&mut self, env: &Env<'_>) -> Result<()> {
            assert!(env.tb.workdir().exists());
            self.calls.borrow_mut().push("prepare".into());
            Ok(())
        }
        fn plan(&self) -> Vec<Session<u32>> {
            self.variants
                .iter()
                .enumerate()
                .map(|(i, v)| Session {
                    variant: v.clone(),
                    dir: format!("{v}-r0"),
                    points: vec![10 * i as u32 + 1, 10 * i as u32 + 2],
                })
                .collect()
        }
        fn start(&self, _: &Env<'_>, s: &Session<u32>, dir: &Path) -> Result<String> {
            assert!(dir.ends_with(&s.dir) && dir.exists());
            self.calls.borrow_mut().push(format!("start {}", s.variant));
            Ok(s.variant.clone())
        }
        fn label(&self, p: &u32) -> String {
            format!("point {p}")
        }
        fn measure(&self, _: &Env<'_>, srv: &mut String, p: &u32, _: &Path) -> Result<u32> {
            self.calls.borrow_mut().push(format!("measure {srv} {p}"));
            if self.fail_at == Some(*p) {
                return Err(LabError::Results("broken".into()));
            }
            Ok(p * 2)
        }
        fn describe(&self, _: &Env<'_>, m: &u32) -> String {
            m.to_string()
        }
        fn stop(&self, _: &Env<'_>, srv: String) -> String {
            self.calls.borrow_mut().push(format!("stop {srv}"));
            format!("log of {srv}")
        }
        fn summarize(&self, env: &Env<'_>, done: &[(u32, u32)]) -> Vec<u32> {
            assert!(env.skipped.iter().all(|s| s.starts_with("nginx: ")));
            done.iter().map(|(_, m)| *m).collect()
        }
        fn outputs(&self, s: &Vec<u32>, _: &[(u32, u32)]) -> Outputs {
            Outputs {
                raw_csv: Some(format!("n\n{}\n", s.len())),
                report_html: None,
            }
        }
        fn print(&self, _: &Vec<u32>, _: &Path) {}
    }

    fn toy(out: &Path, fail_at: Option<u32>) -> (Toy, Rc<RefCell<Vec<String>>>) {
        let calls = Rc::new(RefCell::new(Vec::new()));
        let t = Toy {
            out: out.to_owned(),
            fail_at,
            variants: vec!["a".into(), "b".into()],
            calls: calls.clone(),
        };
        (t, calls)
    }

    #[test]
    fn sessions_run_in_order_and_files_are_written() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("res");
        let (t, calls) = toy(&out, None);
        let got = run_experiment(t).unwrap();
        assert_eq!(got, out);
        let s: Vec<u32> =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(s, vec![2, 4, 22, 24]);
        assert_eq!(
            std::fs::read_to_string(out.join("raw.csv")).unwrap(),
            "n\n4\n"
        );
        assert!(!out.join("report.html").exists());
        assert_eq!(
            *calls.borrow(),
            [
                "prepare",
                "start a",
                "measure a 1",
                "measure a 2",
                "stop a",
                "start b",
                "measure b 11",
                "measure b 12",
                "stop b"
            ]
        );
    }

    #[test]
    fn a_failed_point_stops_its_server_and_names_the_point_and_the_log() {
        let d = tempfile::tempdir().unwrap();
        let (t, calls) = toy(&d.path().join("res"), Some(11));
        let e = run_experiment(t).unwrap_err().to_string();
        assert!(e.contains("run point 11") && e.contains("broken"), "{e}");
        assert!(e.contains("server log: log of b"), "{e}");
        assert!(!d.path().join("res/summary.json").exists());
        assert_eq!(calls.borrow().last().map(String::as_str), Some("stop b"));
        assert!(!calls.borrow().iter().any(|c| c == "measure b 12"));
    }

    #[test]
    fn an_error_keeps_an_interruption_as_is() {
        assert!(matches!(
            in_step("x".into(), LabError::Interrupted, "log".into()),
            LabError::Interrupted
        ));
        let e = in_step(
            "run y".into(),
            LabError::Config("bad".into()),
            String::new(),
        );
        assert_eq!(e.to_string(), "run y: configuration: bad");
    }
}
