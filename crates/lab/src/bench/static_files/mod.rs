//! `triage bench static`: triage against nginx on one small static file, both on the server
//! CPU with one worker/slot, wrk on the client CPU. Reports req/s and p99 ratios for
//! `--policy fifo` and `--policy pos`, the gate's cost (against `--gate off`), CPU per request
//! with 0 and with N idle keep-alive connections held open, and resident memory per idle
//! connection. With `--gzip LEVEL` the file is one of the POS lab's BMP images
//! ([`crate::site::bmp`]), compressed on the fly by every server at that level, so CPU per
//! request is mostly the compressor's. Writes `results/bench-static/<UTC stamp>/summary.json`.
//! A release-build benchmark, not a test.
//!
//! On the harness: one session holds every server (started together, idle while another is
//! measured); its points are the rounds (the order of the servers alternating every round)
//! and then, per server, the idle-connection measurement.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::probe::{check_gzip, find_program};

pub mod cores;
mod opts;
mod summary;

use crate::error::{LabError, Result};
use crate::harness::{run_experiment, Env, Experiment, Outputs, Session};
use crate::peers::{Gzip, NginxTuning, Peer, PeerSite, PeerTuning};
use crate::process::Managed;
use crate::testbed::{NetMode, TestbedConfig};
use crate::util::whole_seconds;
use crate::wrk::{Wrk, WrkSpec};
use cores::Layout;
pub use opts::StaticOpts;
pub use summary::{
    print, summarize, CoresSummary, IdleResult, Ratios, Sample, StaticMeasured, StaticPoint,
    StaticSummary, TargetSummary, TargetsGoal,
};

/// The servers measured, in start order: nginx (when installed) and three triage
/// configurations, with their flags.
pub const TARGETS: [(&str, &[&str]); 4] = [
    ("nginx", &[]),
    ("triage-fifo", &["--policy", "fifo"]),
    ("triage-pos", &["--policy", "pos"]),
    ("triage-gate-off", &["--policy", "fifo", "--gate", "off"]),
];

/// The targets of `--cores` (the gate-off baseline left out: the device time is short).
pub const CORES_TARGETS: [(&str, &[&str]); 3] = [TARGETS[0], TARGETS[1], TARGETS[2]];

/// One server under test, running.
pub struct Target {
    name: &'static str,
    child: Managed,
    addr: SocketAddr,
}

/// `triage bench static` as an [`Experiment`].
pub struct StaticBench {
    o: StaticOpts,
    nginx: PathBuf,
    wrk: PathBuf,
    targets: Vec<(&'static str, &'static [&'static str])>,
    /// The document root and the URL path of the file, once written.
    file: Option<(PathBuf, &'static str)>,
    /// Per core count, where the servers and wrk run (`--cores`); empty without it (one CPU
    /// each, as the testbed pins them).
    layouts: Vec<Layout>,
}

impl StaticBench {
    /// The benchmark `o` asks for (an error names a bad option).
    pub fn new(o: StaticOpts) -> Result<StaticBench> {
        whole_seconds("--duration", o.duration).map_err(LabError::Config)?;
        if o.rounds == 0 {
            return Err(LabError::Config("--rounds must be at least 1".into()));
        }
        let layouts = match &o.cores {
            Some(list) => {
                cores::layouts(list, &os::cpu::allowed_cpus()).map_err(LabError::Config)?
            }
            None => Vec::new(),
        };
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if layouts.is_empty() && (o.server_cpu >= cpus || o.client_cpu >= cpus) {
            return Err(LabError::Config(format!(
                "--server-cpu {} / --client-cpu {} but only {cpus} CPU(s) are available",
                o.server_cpu, o.client_cpu
            )));
        }
        let wrk = find_program("--wrk", &o.wrk)?;
        // The default nginx is a peer like the labs' (left out with a note when missing); one
        // named on the command line must be there.
        let nginx = if o.nginx == "nginx" {
            Peer::Nginx.binary().unwrap_or_default()
        } else {
            find_program("--nginx", &o.nginx)?
        };
        let targets = if layouts.is_empty() {
            TARGETS.to_vec()
        } else {
            CORES_TARGETS.to_vec()
        };
        Ok(StaticBench {
            o,
            nginx,
            wrk,
            targets,
            file: None,
            layouts,
        })
    }

    /// The layout of core count `cores` (`None`: the testbed's one CPU each).
    fn layout(&self, cores: usize) -> Option<&Layout> {
        self.layouts.iter().find(|l| l.cores == cores)
    }

    /// Idle connections measured (none with `--cores`).
    fn idle(&self) -> usize {
        if self.layouts.is_empty() {
            self.o.idle
        } else {
            0
        }
    }

    /// wrk connections at `cores` server cores.
    fn connections(&self, cores: usize) -> usize {
        self.o.connections * cores.max(1)
    }

    fn conns_max(&self) -> usize {
        let most = self.layouts.iter().map(|l| l.cores).max().unwrap_or(1);
        self.idle() + self.connections(most) + 100
    }

    fn wrk_spec(&self, addr: SocketAddr, path: &str, cores: usize) -> WrkSpec {
        let mut s = WrkSpec::new(
            format!("http://{addr}{path}"),
            self.connections(cores),
            self.o.duration,
        );
        if let Some(l) = self.layout(cores) {
            s.threads = l.client.len();
            s.cpus = l.client.clone();
        }
        if self.o.gzip.is_some() {
            s.headers.push("Accept-Encoding: gzip".into());
        }
        s.program = Some(self.wrk.clone());
        s
    }

    /// One wrk run against `t`, with the CPU time `t` used meanwhile.
    fn run_wrk(&self, env: &Env<'_>, t: &Target, label: &str, cores: usize) -> Result<Sample> {
        let (_, path) = self.file.as_ref().expect("prepare writes the file");
        let pid = t.child.pid() as i32;
        // The whole process group: nginx's master and its workers.
        let cpu = || {
            os::procfs::group_cpu_time(pid).map_err(|e| LabError::Process {
                name: t.name.into(),
                msg: format!("reading its CPU time: {e}"),
            })
        };
        let cpu0 = cpu()?;
        let r = Wrk::run(env.tb, label, &self.wrk_spec(t.addr, path, cores))?;
        let cpu1 = cpu()?;
        if r.non_2xx > 0 {
            return Err(LabError::Process {
                name: t.name.into(),
                msg: format!("answered {} non-2xx responses", r.non_2xx),
            });
        }
        Ok(Sample {
            rps: r.rps,
            p99_ms: r.latency_p99_ms,
            requests: r.requests,
            cpu_s: cpu1.saturating_sub(cpu0).as_secs_f64(),
        })
    }

    fn start_target(
        &self,
        env: &Env<'_>,
        name: &'static str,
        extra: &[&str],
        root: &Path,
        dir: &Path,
        cores: usize,
    ) -> Result<Target> {
        let tb = env.tb;
        let addr = tb.server_addr()?;
        let log = Some(dir.join(format!("{name}.log")));
        let cpu_set = self
            .layout(cores)
            .map(|l| l.server.clone())
            .unwrap_or_default();
        let spawn = |program: &Path, args: &[std::ffi::OsString]| {
            let mut l = tb.server_launch(name, program).args(args.iter().cloned());
            l.log = log.clone();
            if !cpu_set.is_empty() {
                l.cpu_set = cpu_set.clone();
            }
            l.spawn()
        };
        let mut child = if name == "nginx" {
            let site = PeerSite {
                root: root.to_owned(),
                listen: addr,
                gzip: self.o.gzip.map(|level| Gzip {
                    level,
                    types: vec!["image/bmp".into()],
                }),
                keepalive_s: 3600,
                extra: String::new(),
            };
            let conns = self.conns_max();
            let tuning = PeerTuning {
                nginx: NginxTuning {
                    // One process serving alone on one core (its CPU time is all of nginx's);
                    // a master and N workers sharing the port with `reuseport` on N cores.
                    master_process: cores > 1,
                    worker_connections: conns,
                    rlimit_nofile: Some(conns * 2 + 100),
                    keepalive_requests: Some(100_000_000),
                    tcp_nopush: true,
                    workers: cores,
                    reuseport: cores > 1,
                    access_log: None,
                },
                program: Some(self.nginx.clone()),
                ..PeerTuning::default()
            };
            let p = Peer::Nginx.prepare_tuned(&dir.join("nginx"), &site, &tuning)?;
            spawn(&p.program, &p.args)?
        } else {
            let mut args: Vec<String> = [
                "serve",
                "--root",
                &root.to_string_lossy(),
                "--listen",
                &addr.to_string(),
                "--slots",
                &cores.to_string(),
                "--keepalive-timeout",
                "1h",
                "--header-timeout",
                "1h",
                "--max-conns",
                &self.conns_max().to_string(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend(extra.iter().map(|s| s.to_string()));
            if let Some(l) = self.o.gzip {
                args.extend(["--gzip-level".to_string(), l.to_string()]);
            }
            let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
            spawn(&self.o.triage_bin, &args)?
        };
        tb.wait_listening(addr, &mut child, Duration::from_secs(15))?;
        Ok(Target { name, child, addr })
    }
}

/// Open `n` keep-alive connections to `addr`, each served one request, and keep them.
fn open_idle(addr: SocketAddr, n: usize, path: &str) -> std::io::Result<Vec<TcpStream>> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n");
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        let mut c = TcpStream::connect(addr).map_err(|e| {
            std::io::Error::new(e.kind(), format!("opening idle connection {i} of {n}: {e}"))
        })?;
        c.write_all(req.as_bytes())?;
        conns.push(c);
    }
    // Read every response so each connection is established, served and idle.
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut buf = [0u8; 4096];
        let n = c.read(&mut buf)?;
        if n == 0 || !buf.starts_with(b"HTTP/1.1 200") {
            return Err(std::io::Error::other(format!(
                "idle connection was not served: {}",
                String::from_utf8_lossy(&buf[..n])
            )));
        }
    }
    Ok(conns)
}

impl Experiment for StaticBench {
    type Server = Vec<Target>;
    type Point = StaticPoint;
    type Measured = StaticMeasured;
    type Summary = StaticSummary;

    fn name(&self) -> String {
        "bench static".into()
    }

    fn out_dir(&self, stamp: &str) -> PathBuf {
        self.o.out.join(stamp)
    }

    fn testbed(&self) -> TestbedConfig {
        let widest = self.layouts.iter().max_by_key(|l| l.cores);
        TestbedConfig {
            tag: "bench-static".into(),
            server_cpu: widest.map_or(self.o.server_cpu, |l| l.server[0]),
            server_cpus: widest.map(|l| l.server.clone()).unwrap_or_default(),
            client_cpu: widest.map_or(self.o.client_cpu, |l| l.client[0]),
            net: NetMode::Loopback,
            ..Default::default()
        }
    }

    fn peers(&self) -> Vec<(String, Peer)> {
        if self.o.nginx == "nginx" {
            vec![("nginx".into(), Peer::Nginx)]
        } else {
            Vec::new()
        }
    }

    fn drop_variant(&mut self, name: &str) {
        self.targets.retain(|(n, _)| *n != name);
    }

    fn prepare(&mut self, env: &Env<'_>) -> Result<()> {
        if cfg!(debug_assertions) {
            eprintln!(
                "bench static: warning: this is a debug build; build with --release to measure"
            );
        }
        let want = (self.o.idle as u64) * 3 + 1024;
        let nofile = os::procfs::raise_nofile(want)
            .map_err(|e| LabError::Os(format!("raising RLIMIT_NOFILE to {want}: {e}")))?;
        if (nofile as usize) < self.o.idle * 2 + 200 {
            return Err(LabError::Config(format!(
                "RLIMIT_NOFILE is {nofile}, too low for --idle {}",
                self.o.idle
            )));
        }
        let root = env.tb.workdir().join("www");
        std::fs::create_dir_all(&root).map_err(|e| LabError::io("creating", &root, e))?;
        let (name, data) = if self.o.gzip.is_some() {
            ("file.bmp", crate::site::bmp(self.o.size, 1))
        } else {
            let data = (0..self.o.size).map(|i| b'a' + (i % 26) as u8).collect();
            ("file.html", data)
        };
        let file = root.join(name);
        std::fs::write(&file, data).map_err(|e| LabError::io("writing", &file, e))?;
        let path = if self.o.gzip.is_some() {
            "/file.bmp"
        } else {
            "/file.html"
        };
        self.file = Some((root, path));
        Ok(())
    }

    fn plan(&self) -> Vec<Session<StaticPoint>> {
        let n = self.targets.len();
        let rounds = |cores: usize| {
            let mut points = Vec::new();
            for round in 0..self.o.rounds {
                // Alternate the order every round.
                for k in 0..n {
                    let target = if round % 2 == 0 { k } else { n - 1 - k };
                    points.push(StaticPoint::Round {
                        round,
                        target,
                        cores,
                    });
                }
            }
            points
        };
        if !self.layouts.is_empty() {
            // One session per core count: every server restarted on its N cores.
            return self
                .layouts
                .iter()
                .map(|l| Session {
                    variant: format!("{} cores", l.cores),
                    dir: format!("cores-{}", l.cores),
                    points: rounds(l.cores),
                })
                .collect();
        }
        let mut points = rounds(1);
        if self.o.idle > 0 {
            points.extend((0..n).map(|target| StaticPoint::Idle { target }));
        }
        vec![Session {
            variant: "servers".into(),
            dir: "servers".into(),
            points,
        }]
    }

    fn start(
        &self,
        env: &Env<'_>,
        session: &Session<StaticPoint>,
        dir: &Path,
    ) -> Result<Vec<Target>> {
        let (root, path) = self.file.as_ref().expect("prepare writes the file");
        let cores = session.points.first().map_or(1, StaticPoint::cores);
        let mut out = Vec::new();
        for (name, extra) in &self.targets {
            out.push(self.start_target(env, name, extra, root, dir, cores)?);
        }
        if self.o.gzip.is_some() {
            // Measure compression, not a silent fallback to the plain file.
            for t in &out {
                check_gzip(t.name, t.addr, path)?;
            }
        }
        Ok(out)
    }

    fn label(&self, pt: &StaticPoint) -> String {
        match *pt {
            StaticPoint::Round {
                round,
                target,
                cores,
            } => {
                let at = if self.layouts.is_empty() {
                    String::new()
                } else {
                    format!(" on {cores} cores")
                };
                format!("round {} {}{at}", round + 1, self.targets[target].0)
            }
            StaticPoint::Idle { target } => {
                format!(
                    "{} with 0 and {} idle connections",
                    self.targets[target].0, self.o.idle
                )
            }
        }
    }

    fn measure(
        &self,
        env: &Env<'_>,
        targets: &mut Vec<Target>,
        pt: &StaticPoint,
        _: &Path,
    ) -> Result<StaticMeasured> {
        match *pt {
            StaticPoint::Round {
                round,
                target,
                cores,
            } => {
                let t = &targets[target];
                let s = self.run_wrk(env, t, &format!("{}-c{cores}-r{round}", t.name), cores)?;
                Ok(StaticMeasured::Round(s))
            }
            StaticPoint::Idle { target } => {
                let t = &targets[target];
                let (_, path) = self.file.as_ref().expect("prepare writes the file");
                let pid = t.child.pid() as i32;
                let rss = || {
                    os::procfs::rss_kib(pid).map_err(|e| LabError::Process {
                        name: t.name.into(),
                        msg: format!("reading its memory: {e}"),
                    })
                };
                let base = self.run_wrk(env, t, &format!("{}-idle0", t.name), 1)?;
                let rss0 = rss()?;
                let held = open_idle(t.addr, self.o.idle, path).map_err(|e| LabError::Process {
                    name: t.name.into(),
                    msg: e.to_string(),
                })?;
                crate::signals::sleep(Duration::from_millis(300))?;
                let rss_open = rss()?;
                crate::signals::sleep(Duration::from_millis(2200))?;
                let rss1 = rss()?;
                let loaded = self.run_wrk(env, t, &format!("{}-idle", t.name), 1)?;
                drop(held);
                let (cpr0, cpr1) = (base.cpu_per_req_s(), loaded.cpu_per_req_s());
                Ok(StaticMeasured::Idle(IdleResult {
                    target: t.name.into(),
                    cpu_per_req_us_0_idle: cpr0 * 1e6,
                    cpu_per_req_us_n_idle: cpr1 * 1e6,
                    cpu_per_req_ratio: cpr1 / cpr0,
                    rss_kib_before: rss0,
                    rss_kib_at_open: rss_open,
                    rss_kib_after: rss1,
                    rss_kib_per_idle_conn: (rss1 as f64 - rss0 as f64) / self.o.idle as f64,
                    rps_0_idle: base.rps,
                    rps_n_idle: loaded.rps,
                }))
            }
        }
    }

    fn describe(&self, _: &Env<'_>, m: &StaticMeasured) -> String {
        match m {
            StaticMeasured::Round(s) => format!(
                "{:.0} req/s, p99 {:.3} ms, {:.2} us CPU per request",
                s.rps,
                s.p99_ms,
                s.cpu_per_req_s() * 1e6
            ),
            StaticMeasured::Idle(r) => format!(
                "CPU per request x{:.3}, {:.2} KiB per idle connection",
                r.cpu_per_req_ratio, r.rss_kib_per_idle_conn
            ),
        }
    }

    fn stop(&self, _: &Env<'_>, targets: Vec<Target>) -> String {
        drop(targets);
        String::new()
    }

    fn summarize(&self, _: &Env<'_>, done: &[(StaticPoint, StaticMeasured)]) -> StaticSummary {
        summarize(&self.o, &self.targets, done)
    }

    fn outputs(&self, _: &StaticSummary, _: &[(StaticPoint, StaticMeasured)]) -> Outputs {
        Outputs::default()
    }

    fn print(&self, s: &StaticSummary, out: &Path) {
        print(s, self.idle(), out);
    }
}

/// Run the benchmark `o` asks for. Returns its results directory.
pub fn run(o: &StaticOpts) -> Result<PathBuf> {
    run_experiment(StaticBench::new(o.clone())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> StaticOpts {
        use clap::{Args, FromArgMatches};
        let cmd = StaticOpts::augment_args(clap::Command::new("t").no_binary_name(true));
        cmd.clone().debug_assert();
        StaticOpts::from_arg_matches(&cmd.try_get_matches_from(args).unwrap()).unwrap()
    }

    fn sample(rps: f64) -> StaticMeasured {
        StaticMeasured::Round(Sample {
            rps,
            p99_ms: 1000.0 / rps,
            requests: (rps * 5.0) as u64,
            cpu_s: 1.0,
        })
    }

    #[test]
    fn rounds_alternate_and_the_summary_keeps_its_keys() {
        let o = opts(&["--rounds", "3", "--idle", "10", "--duration", "2s"]);
        assert_eq!(o.duration, Duration::from_secs(2));
        let b = StaticBench {
            o: o.clone(),
            nginx: PathBuf::new(),
            wrk: PathBuf::new(),
            targets: TARGETS.to_vec(),
            file: None,
            layouts: Vec::new(),
        };
        let pts = &b.plan()[0].points;
        let order: Vec<usize> = pts
            .iter()
            .filter_map(|p| match p {
                StaticPoint::Round { target, .. } => Some(*target),
                StaticPoint::Idle { .. } => None,
            })
            .collect();
        assert_eq!(order, [0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3]);
        assert_eq!(pts.len(), 12 + 4);
        assert_eq!(b.label(&pts[5]), "round 2 triage-pos");
        // nginx 1000 req/s; fifo 950, 900, 1000 (median 950); gate-off 1000.
        let rps = |t: usize, r: usize| match t {
            0 => 1000.0,
            1 => [950.0, 900.0, 1000.0][r],
            2 => 800.0,
            _ => 1000.0,
        };
        let done: Vec<(StaticPoint, StaticMeasured)> = pts
            .iter()
            .filter_map(|p| match *p {
                StaticPoint::Round { round, target, .. } => Some((*p, sample(rps(target, round)))),
                StaticPoint::Idle { .. } => None,
            })
            .collect();
        let s = summarize(&o, &b.targets, &done);
        assert_eq!(s.targets[1].rps_median, 950.0);
        assert!((s.ratios.fifo_vs_nginx_rps.unwrap() - 0.95).abs() < 1e-12);
        assert!((s.ratios.gate_cost.unwrap() - 0.05).abs() < 1e-12);
        assert_eq!(s.ratios.pos_vs_nginx_rps, Some(0.8));
        let j = serde_json::to_value(&s).unwrap();
        let keys: Vec<&str> = j.as_object().unwrap().keys().map(String::as_str).collect();
        for k in [
            "bench",
            "file_bytes",
            "gzip_level",
            "duration_s",
            "rounds",
            "connections",
            "idle_connections",
            "server_cpu",
            "client_cpu",
            "debug_build",
            "targets",
            "ratios",
            "idle",
            "targets_goal",
            "per_cores",
        ] {
            assert!(keys.contains(&k), "{k}");
        }
        assert_eq!(j["duration_s"], 2);
        assert!(j["gzip_level"].is_null());
        assert_eq!(j["targets"][0]["rounds"][0]["requests"], 5000);
        assert!(j["ratios"]["fifo_vs_nginx_p99"].is_number());
        // Without nginx the ratios against it are null.
        let no_nginx: Vec<_> = b.targets[1..].to_vec();
        let done: Vec<_> = done
            .into_iter()
            .filter_map(|(p, m)| match p {
                StaticPoint::Round {
                    round,
                    target,
                    cores,
                } if target > 0 => Some((
                    StaticPoint::Round {
                        round,
                        target: target - 1,
                        cores,
                    },
                    m,
                )),
                _ => None,
            })
            .collect();
        let s = summarize(&o, &no_nginx, &done);
        assert_eq!(s.ratios.fifo_vs_nginx_rps, None);
        assert!(s.ratios.gate_cost.is_some());
    }

    /// The bench of `--cores` options `o` on a 4-CPU machine.
    fn cores_bench(o: &StaticOpts) -> StaticBench {
        let all: Vec<usize> = (0..4).collect();
        StaticBench {
            o: o.clone(),
            nginx: PathBuf::new(),
            wrk: PathBuf::new(),
            targets: CORES_TARGETS.to_vec(),
            file: None,
            layouts: cores::layouts(o.cores.as_ref().unwrap(), &all).unwrap(),
        }
    }

    #[test]
    fn per_core_count_sessions_and_the_ratios_the_checks_read() {
        let o = opts(&["--rounds", "2", "--duration", "1s", "--cores", "1,2"]);
        let b = cores_bench(&o);
        assert_eq!(b.idle(), 0, "no idle measurement with --cores");
        let plan = b.plan();
        assert_eq!(plan.len(), 2, "one session per core count");
        assert_eq!(plan[1].dir, "cores-2");
        assert_eq!(plan[1].points.len(), 2 * 3);
        assert!(plan[1].points.iter().all(|p| p.cores() == 2));
        assert_eq!(b.label(&plan[1].points[0]), "round 1 nginx on 2 cores");
        let spec = b.wrk_spec("127.0.0.1:1".parse().unwrap(), "/f", 2);
        assert_eq!(
            (spec.threads, spec.cpus.clone(), spec.conns),
            (2, vec![2, 3], 100)
        );
        let tb = b.testbed();
        assert_eq!((tb.server_cpus.clone(), tb.client_cpu), (vec![0, 1], 2));
        // nginx 1000 req/s everywhere; fifo 1100 at 1 core, 900 at 2; pos 1000 with twice
        // fifo's CPU per request.
        let done: Vec<(StaticPoint, StaticMeasured)> = plan
            .iter()
            .flat_map(|s| s.points.iter())
            .map(|p| {
                let StaticPoint::Round { target, cores, .. } = *p else {
                    unreachable!()
                };
                let rps = match (target, cores) {
                    (0, _) => 1000.0,
                    (1, 1) => 1100.0,
                    (1, _) => 900.0,
                    _ => 1000.0,
                };
                let cpu_s = if target == 2 { 2.0 } else { 1.0 };
                let m = StaticMeasured::Round(Sample {
                    rps,
                    p99_ms: 1.0,
                    requests: 1000,
                    cpu_s,
                });
                (*p, m)
            })
            .collect();
        let s = summarize(&o, &b.targets, &done);
        let j = serde_json::to_value(&s).unwrap();
        let per = j["per_cores"].as_array().unwrap();
        assert_eq!(per.len(), 2);
        assert_eq!(per[0]["cores"], 1);
        assert_eq!(per[1]["cores"], 2);
        for k in [
            "fifo_vs_nginx_rps",
            "pos_vs_fifo_rps",
            "fifo_vs_nginx_p99",
            "pos_vs_fifo_cpu_per_req",
        ] {
            assert!(per[1][k].is_number(), "{k}");
        }
        assert!((per[0]["fifo_vs_nginx_rps"].as_f64().unwrap() - 1.1).abs() < 1e-9);
        assert!((per[1]["fifo_vs_nginx_rps"].as_f64().unwrap() - 0.9).abs() < 1e-9);
        assert!((per[1]["pos_vs_fifo_cpu_per_req"].as_f64().unwrap() - 2.0).abs() < 1e-9);
        // The top level is the first core count's.
        assert_eq!(s.targets[1].rps_median, 1100.0);
    }

    #[test]
    fn a_ratio_is_the_median_of_the_rounds_ratios() {
        let o = opts(&["--rounds", "3", "--duration", "1s", "--cores", "1"]);
        let b = cores_bench(&o);
        // The machine's speed moves between and within rounds: nginx 700, 1000, 1600 req/s;
        // fifo 1100, 600, 1700 (ratios 1.571, 0.6, 1.0625); pos 1000 everywhere.
        let rps = |t: usize, r: usize| match t {
            0 => [700.0, 1000.0, 1600.0][r],
            1 => [1100.0, 600.0, 1700.0][r],
            _ => 1000.0,
        };
        let done: Vec<_> = b.plan()[0]
            .points
            .iter()
            .map(|p| {
                let StaticPoint::Round { round, target, .. } = *p else {
                    unreachable!()
                };
                (*p, sample(rps(target, round)))
            })
            .collect();
        let s = summarize(&o, &b.targets, &done);
        let c = &s.per_cores[0];
        let per = &c.per_round.fifo_vs_nginx_rps;
        assert_eq!(per.len(), 3);
        assert!((per[0] - 1100.0 / 700.0).abs() < 1e-12 && (per[1] - 0.6).abs() < 1e-12);
        assert!((c.fifo_vs_nginx_rps.unwrap() - 1.0625).abs() < 1e-12);
        // Between the medians (fifo 1100, nginx 1000) it would read 1.1.
        assert!((c.of_medians.fifo_vs_nginx_rps.unwrap() - 1.1).abs() < 1e-12);
        assert!((s.ratios.fifo_vs_nginx_rps.unwrap() - 1.0625).abs() < 1e-12);
        // A round without one side has no ratio.
        let partial: Vec<_> = done
            .iter()
            .filter(|(p, _)| {
                !matches!(
                    p,
                    StaticPoint::Round {
                        round: 1,
                        target: 0,
                        ..
                    }
                )
            })
            .cloned()
            .collect();
        let s = summarize(&o, &b.targets, &partial);
        assert_eq!(s.per_cores[0].per_round.fifo_vs_nginx_rps.len(), 2);
    }

    #[test]
    fn a_duration_is_whole_seconds_with_a_unit() {
        let mut o = opts(&[]);
        assert_eq!(
            (o.duration, o.rounds, o.size),
            (Duration::from_secs(5), 3, 1024)
        );
        o.duration = Duration::from_millis(1500);
        let e = StaticBench::new(o).err().unwrap().to_string();
        assert!(e.contains("whole seconds"), "{e}");
        use clap::Args;
        let cmd = StaticOpts::augment_args(clap::Command::new("t").no_binary_name(true));
        let e = cmd.try_get_matches_from(["--duration", "3"]).unwrap_err();
        assert!(e.to_string().contains("3s"), "{e}");
    }
}
