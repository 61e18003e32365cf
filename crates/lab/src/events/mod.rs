//! `triage lab events`: seed 002 (Banga and Mogul, "Scalable kernel performance for Internet
//! servers under realistic loads") on the real server. Two results: the cost of a request must
//! not grow with the number of idle ("cold") connections a server holds, and a server's peak
//! rate can be predicted from how its CPU time grows with the request rate (the idle line's
//! X-intercept).
//!
//! Setup: each server runs alone on the server CPU in a cgroup (whose accounting gives user and
//! kernel time). The capacity runs request a 64 KiB page every server compresses per request
//! (`--page gzip`, the default: about 2 ms of work each, so the client CPU saturates the whole
//! server CPU, without a quota) or the 1 KiB file on a CPU quota (`--page small`: a slower
//! CPU the client CPU can saturate); the cold connections and the pairs always request the
//! 1 KiB file, the pairs on the small file's quota (`--pairs-quota`). The lab itself
//! (cold connections, loadgen) and wrk run on the client CPU, on loopback. Servers: triage
//! (epoll through tokio), nginx (epoll, one process), lighttpd on `linux-sysepoll` and on
//! `poll` (and `select` up to FD_SETSIZE when the build has it): the same server on the new and
//! the old readiness interface, which is the seed's own comparison. Per cold count (0, 1k, 5k,
//! 10k; a server holds what its descriptor limits allow and the report says how many), wrk
//! drives the server to saturation (the measured peak), then loadgen's open loop runs rising
//! rates (fractions of that peak) with coordinated omission corrected. Per point: user, kernel
//! and idle CPU of the server side, throughput, latency percentiles, RSS.
//!
//! Results: summary.json (`triage_cpu_per_req_ratio_max`, `poll_cpu_per_req_ratio_max`,
//! `capacity_error_pct_max`, `rss_per_idle_conn_kib`, `idle_conns_held`, and the tables),
//! raw.csv, report.html (Fig. 9, Tables 4/5), `cpu/` (CPU samples per server and cold count,
//! as `triage capacity sample` writes them) and `logs/` (every server's access log), on which
//! `triage capacity` is run and compared with the lab's own regression.
//!
//! On the harness ([`crate::harness`]): [`opts`], [`plan`], [`cold`] (the cold connections),
//! [`run`](mod@run) (start a server, measure a point), [`summary`] and [`report`], tied
//! together by [`EventsLab`]. A session is one server in one repetition.

use std::path::{Path, PathBuf};

use crate::error::{LabError, Result};
use crate::harness::{run_experiment, Env, Experiment, Outputs, Session};
use crate::peers::{has_handler, Peer};
use crate::results::print_goals;
use crate::testbed::{NetMode, TestbedConfig};
use crate::wrk::Wrk;

pub mod cold;
pub mod opts;
pub mod plan;
pub mod report;
pub mod reread;
pub mod run;
pub mod runout;
#[cfg(test)]
mod runout_sim;
pub mod search;
pub mod summary;

pub use opts::EventsOpts;
pub use plan::{EvPoint, Params, Server};
pub use run::Measured;
pub use summary::Summary;

/// Nice value of the client side (the lab process, loadgen's threads and wrk).
pub const CLIENT_NICE: i32 = -10;

/// `SCHED_FIFO` priority of the client side while it measures (`--client-sched fifo`): the
/// lowest real-time priority, above every fair-class task.
pub const CLIENT_FIFO_PRIORITY: i32 = 1;

/// `triage lab events` as an [`Experiment`].
pub struct EventsLab {
    o: EventsOpts,
    p: Params,
    /// The document root, the descriptor limit, the results directory: once prepared.
    ready: Option<(PathBuf, usize, PathBuf)>,
    /// Servers left out in `prepare` and why (beside the harness's absent peers).
    skipped: Vec<String>,
    /// What `prepare` could not do as asked.
    notes: Vec<String>,
}

impl EventsLab {
    /// The lab `o` asks for (an error names a bad option).
    pub fn new(o: EventsOpts) -> Result<EventsLab> {
        let p = plan::resolve(&o)?;
        if Wrk::available().is_none() {
            return Err(LabError::Config(
                "wrk is not installed (scripts/deps.sh installs it); the lab saturates servers \
                 with it"
                    .into(),
            ));
        }
        Ok(EventsLab {
            o,
            p,
            ready: None,
            skipped: Vec::new(),
            notes: Vec::new(),
        })
    }

    fn setup<'a>(&'a self, env: &'a Env<'_>, cpu: &'a Path, logs: &'a Path) -> run::Setup<'a> {
        let (root, nofile, _) = self.ready.as_ref().expect("prepare ran");
        run::Setup {
            tb: env.tb,
            p: &self.p,
            root,
            triage_bin: &self.o.triage_bin,
            nofile: *nofile,
            cpu_dir: cpu,
            log_dir: logs,
        }
    }

    fn dirs(&self) -> (PathBuf, PathBuf) {
        let (_, _, out) = self.ready.as_ref().expect("prepare ran");
        (out.join("cpu"), out.join("logs"))
    }
}

impl Experiment for EventsLab {
    type Server = run::Running;
    type Point = EvPoint;
    type Measured = Measured;
    type Summary = Summary;

    fn name(&self) -> String {
        "lab events".into()
    }

    fn out_dir(&self, stamp: &str) -> PathBuf {
        crate::harness::results_dir(self.o.out.as_ref(), "events", stamp)
    }

    fn testbed(&self) -> TestbedConfig {
        TestbedConfig {
            tag: "events".into(),
            quota: self.p.quota,
            period: std::time::Duration::from_micros((self.p.period_ms * 1e3).round() as u64),
            net: NetMode::Loopback,
            ..Default::default()
        }
    }

    fn peers(&self) -> Vec<(String, Peer)> {
        self.p
            .servers
            .iter()
            .filter_map(|s| Some((s.name().to_string(), s.peer()?)))
            .collect()
    }

    fn drop_variant(&mut self, name: &str) {
        self.p.servers.retain(|s| s.name() != name);
    }

    fn prepare(&mut self, env: &Env<'_>) -> Result<()> {
        if cfg!(debug_assertions) {
            eprintln!(
                "lab events: warning: this is a debug build; build with --release to measure"
            );
        }
        if env
            .tb
            .server_cgroup()
            .and_then(|c| c.accounting_dir())
            .is_none()
        {
            return Err(LabError::Os(
                "no cgroup CPU accounting for the server side (run as root on a machine with \
                 cgroups): the lab measures user and kernel CPU from it"
                    .into(),
            ));
        }
        // lighttpd variants whose event handler this build lacks are left out, said so.
        if let Some(bin) = Peer::Lighttpd.binary() {
            let v = crate::process::run_cmd(&bin.to_string_lossy(), &["-V"]).unwrap_or_default();
            let lacking: Vec<Server> = self
                .p
                .servers
                .iter()
                .copied()
                .filter(|s| s.handler().is_some_and(|h| !has_handler(&v, h)))
                .collect();
            for s in lacking {
                self.p.servers.retain(|x| *x != s);
                let why = format!(
                    "{}: this lighttpd build has no {} event handler (lighttpd -V)",
                    s.name(),
                    s.handler().map_or("", |h| h.conf_value())
                );
                eprintln!("lab events: skipped {why}");
                self.skipped.push(why);
            }
        }
        // The client side (this process, loadgen's threads, wrk) shares its CPU with whatever
        // else runs here: it runs at a higher priority so that the servers, not it, set the
        // peaks (threads and children started from here inherit it).
        if let Err(e) = os::prio::set_thread_nice(os::prio::current_tid(), CLIENT_NICE) {
            self.notes
                .push(format!("the client side runs at the default priority: {e}"));
        }
        // Real-time while it measures (run::ClientRt): tried once here, so that a refusal is
        // said once and the runs go on at nice -10.
        if self.p.client_fifo {
            if let Err(e) = os::prio::FifoGuard::raise_current(CLIENT_FIFO_PRIORITY) {
                self.p.client_fifo = false;
                let why = format!(
                    "--client-sched fifo refused ({e}): the client side runs at nice \
                     {CLIENT_NICE} only, and a task sharing its CPU can delay each of its \
                     wake-ups by a slice"
                );
                eprintln!("lab events: {why}");
                self.notes.push(why);
            }
        }
        let want = (2 * self.p.max_cold() + 4 * self.p.hot_conns + 1024) as u64;
        let nofile = os::procfs::raise_nofile(want)
            .map_err(|e| LabError::Os(format!("raising RLIMIT_NOFILE to {want}: {e}")))?
            as usize;
        let root = env.tb.workdir().join("www");
        std::fs::create_dir_all(&root).map_err(|e| LabError::io("creating", &root, e))?;
        let data: Vec<u8> = (0..run::FILE_BYTES)
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        let file = root.join(run::FILE.trim_start_matches('/'));
        std::fs::write(&file, data).map_err(|e| LabError::io("writing", &file, e))?;
        let page = root.join(plan::GZIP_PATH.trim_start_matches('/'));
        std::fs::write(&page, run::gzip_page(plan::GZIP_BYTES, run::PAGE_SEED))
            .map_err(|e| LabError::io("writing", &page, e))?;
        // Absolute: the peers resolve relative paths against their own prefix.
        let out = self.out_dir(&env.started_utc);
        let out = if out.is_absolute() {
            out
        } else {
            std::env::current_dir()
                .map_err(|e| LabError::io("finding the current directory for", &out, e))?
                .join(out)
        };
        for d in [out.join("cpu"), out.join("logs")] {
            std::fs::create_dir_all(&d).map_err(|e| LabError::io("creating", &d, e))?;
        }
        self.ready = Some((root, nofile, out));
        Ok(())
    }

    fn plan(&self) -> Vec<Session<EvPoint>> {
        plan::sessions(&self.p)
    }

    fn start(&self, env: &Env<'_>, s: &Session<EvPoint>, dir: &Path) -> Result<run::Running> {
        let server = Server::parse(&s.variant).expect("sessions name planned servers");
        let (cpu, logs) = self.dirs();
        run::start(&self.setup(env, &cpu, &logs), server, dir)
    }

    fn label(&self, pt: &EvPoint) -> String {
        let step = match pt.step {
            plan::Step::Saturate => "saturate".to_string(),
            plan::Step::Overload => "overload".to_string(),
            plan::Step::Pairs => format!("{} pairs with the twin", self.p.pairs),
            plan::Step::Rate { frac, .. } => format!("rate {:.0}%", frac * 100.0),
            plan::Step::Probe { idx } => format!("saturation probe {}", idx + 1),
        };
        format!(
            "{} cold={} {step} rep {}/{}",
            pt.server.name(),
            pt.cold,
            pt.rep + 1,
            self.p.reps
        )
    }

    fn measure(
        &self,
        env: &Env<'_>,
        srv: &mut run::Running,
        pt: &EvPoint,
        _: &Path,
    ) -> Result<Measured> {
        let (cpu, logs) = self.dirs();
        run::measure(&self.setup(env, &cpu, &logs), srv, pt)
    }

    fn describe(&self, _: &Env<'_>, m: &Measured) -> String {
        if !m.pairs.is_empty() {
            let r: Vec<String> = m
                .pairs
                .iter()
                .map(|(a, b)| format!("{:.3}", a / b))
                .collect();
            return format!(
                "{:.1} us/req against the twin's {:.1}: ratios {}",
                m.pairs.iter().map(|p| p.0).sum::<f64>() / m.pairs.len() as f64,
                m.pairs.iter().map(|p| p.1).sum::<f64>() / m.pairs.len() as f64,
                r.join(" ")
            );
        }
        format!(
            "{:.0} req/s (held {}), user {:.0}% kernel {:.0}% idle {:.0}%, {:.1} us CPU/req, p99 {:.2} ms",
            m.rps, m.cold_held, m.user_pct, m.kernel_pct, m.idle_pct, m.cpu_per_req_us, m.p99_ms
        )
    }

    fn stop(&self, _: &Env<'_>, srv: run::Running) -> String {
        run::stop(srv)
    }

    fn summarize(&self, env: &Env<'_>, done: &[(EvPoint, Measured)]) -> Summary {
        let points = done.iter().map(|(_, m)| m.clone()).collect();
        let mut s = summary::summarize(&self.p, &self.o.command, env, points);
        s.skipped.extend(self.skipped.iter().cloned());
        s.notes.extend(self.notes.iter().cloned());
        s
    }

    fn outputs(&self, s: &Summary, _: &[(EvPoint, Measured)]) -> Outputs {
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
pub fn run(o: &EventsOpts) -> Result<PathBuf> {
    if let Some(last) = o.reread.last() {
        for dir in &o.reread {
            let r = reread::reread(dir)?;
            reread::print(&r);
            let path = dir.join("reread.json");
            let json = serde_json::to_string_pretty(&r)
                .map_err(|e| LabError::Results(format!("reread.json: {e}")))?;
            std::fs::write(&path, json).map_err(|e| LabError::io("writing", &path, e))?;
        }
        return Ok(last.clone());
    }
    run_experiment(EventsLab::new(o.clone())?)
}
