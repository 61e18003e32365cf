//! `triage bench load`: how fast is the load generator itself? nginx (one process, access log
//! off) on the server CPU serves a small file; on the client CPU, rounds alternate wrk (one
//! thread, N connections, D seconds) and `triage load --plain` (single-threaded runtime, the
//! same N connections) in `closed` mode and, unless `--no-rate`, in `rate` mode at the request
//! rate wrk reached in that round. Reports the triage-load/wrk req/s ratio per round and the
//! median (goal >= 0.8), and the CPU time per request of both clients (from the children's
//! rusage: steadier on a noisy machine). Writes `results/bench-load/<UTC stamp>/summary.json`.
//!
//! On the harness: one session (nginx), one point per round.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::probe::find_program;
use crate::error::{LabError, Result};
use crate::harness::{run_experiment, Env, Experiment, Outputs, Session};
use crate::peers::{NginxTuning, Peer, PeerSite, PeerTuning};
use crate::process::Managed;
use crate::testbed::{NetMode, TestbedConfig};
use crate::util::{median_opt, parse_bytes, whole_seconds};
use crate::wrk::{Wrk, WrkSpec};

/// Arguments of `triage bench load`.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadOpts {
    /// Connections, the same for wrk and triage load.
    #[arg(long, short = 'c', default_value_t = 32)]
    pub connections: usize,
    /// Time per round and tool (whole seconds: wrk's unit).
    #[arg(long, short = 'd', value_parser = units::parse_positive_duration, default_value = "10s")]
    pub duration: Duration,
    /// Rounds (each runs every tool once, alternating).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Size of the served file (bytes, or with a unit: 1KiB).
    #[arg(long, default_value = "1024", value_parser = parse_bytes)]
    pub size: usize,
    /// Skip the rate-mode rounds (triage load --mode rate at wrk's measured rate).
    #[arg(long)]
    pub no_rate: bool,
    /// Directory for results (a subdirectory named by the UTC time of the run is created).
    #[arg(long, default_value = "results/bench-load")]
    pub out: PathBuf,
    /// The `triage` binary whose load generator is measured.
    #[arg(skip)]
    pub triage_bin: PathBuf,
}

/// One round in `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadRound {
    /// The round (1-based).
    pub round: usize,
    /// wrk's requests per second.
    pub wrk_rps: f64,
    /// `triage load --mode closed`'s requests per second.
    pub closed_rps: f64,
    /// The second over the first.
    pub closed_ratio: f64,
    /// Errors `triage load` counted in closed mode.
    pub closed_errors: u64,
    /// wrk's CPU per request (µs).
    pub wrk_cpu_us_per_req: Option<f64>,
    /// `triage load`'s CPU per request in closed mode (µs).
    pub closed_cpu_us_per_req: Option<f64>,
    /// The rate asked of `triage load --mode rate` (wrk's).
    pub rate_target_rps: Option<f64>,
    /// The rate it reached.
    pub rate_rps: Option<f64>,
    /// That over wrk's.
    pub rate_ratio: Option<f64>,
    /// Its p99 latency (ms).
    pub rate_p99_ms: Option<f64>,
    /// Errors it counted.
    pub rate_errors: Option<u64>,
}

/// `summary.json` of `triage bench load`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadSummary {
    /// `load`.
    pub bench: &'static str,
    /// The server, in words.
    pub server: &'static str,
    /// The clients, in words.
    pub clients: &'static str,
    /// Connections.
    pub connections: usize,
    /// Seconds per round and tool.
    pub duration_s: u64,
    /// Size of the served file.
    pub size_bytes: usize,
    /// Whether this is a debug build.
    pub debug_build: bool,
    /// Every round.
    pub rounds: Vec<LoadRound>,
    /// Median of `closed_ratio`.
    pub median_closed_ratio: Option<f64>,
    /// Median of `rate_ratio`.
    pub median_rate_ratio: Option<f64>,
    /// Median of wrk's CPU per request over triage load's.
    pub median_cpu_efficiency_ratio: Option<f64>,
    /// The goal of the ratios.
    pub goal_ratio: f64,
}

/// What one `triage load` run reported.
struct LoadRun {
    rps: f64,
    errors: u64,
    p99_ms: Option<f64>,
}

/// `triage bench load` as an [`Experiment`].
pub struct LoadBench {
    o: LoadOpts,
    wrk: PathBuf,
    /// nginx's address and document root, once chosen.
    server: Option<(std::net::SocketAddr, PathBuf)>,
}

impl LoadBench {
    /// The benchmark `o` asks for (an error names a bad option).
    pub fn new(o: LoadOpts) -> Result<LoadBench> {
        if o.connections == 0 || o.rounds == 0 || o.size == 0 {
            return Err(LabError::Config(
                "--connections, --rounds and --size must be at least 1".into(),
            ));
        }
        whole_seconds("--duration", o.duration).map_err(LabError::Config)?;
        let cpus = os::cpu::online_cpus();
        if cpus < 2 {
            return Err(LabError::Os(format!(
                "bench load pins nginx to CPU 0 and the clients to CPU 1, but only {cpus} CPU is usable"
            )));
        }
        if let Some(why) = Peer::Nginx.unavailable() {
            return Err(LabError::Process {
                name: "nginx".into(),
                msg: why,
            });
        }
        let wrk = find_program("wrk", "wrk")?;
        Ok(LoadBench {
            o,
            wrk,
            server: None,
        })
    }

    fn secs(&self) -> u64 {
        self.o.duration.as_secs()
    }

    fn url(&self) -> String {
        let (addr, _) = self.server.as_ref().expect("prepare chooses the address");
        format!("http://{addr}/1k.html")
    }

    /// Run `triage load` against the URL (closed loop, or at `rate` requests/s) and read its
    /// JSON summary.
    fn run_triage(
        &self,
        env: &Env<'_>,
        dir: &Path,
        label: &str,
        rate: Option<f64>,
    ) -> Result<LoadRun> {
        let url = self.url();
        let c = self.o.connections.to_string();
        let mut args: Vec<String> = [
            "load",
            &url,
            "--plain",
            "--duration",
            &format!("{}s", self.secs()),
            "--threads",
            "1",
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        match rate {
            None => {
                args.extend(["--mode", "closed", "--browsers", &c, "-k", "1"].map(String::from))
            }
            Some(r) => args.extend(
                [
                    "--mode",
                    "rate",
                    "--rate",
                    &format!("{r:.0}"),
                    "--connections",
                    &c,
                ]
                .map(String::from),
            ),
        }
        let out = dir.join(format!("{label}.json"));
        let log = dir.join(format!("{label}.log"));
        let _ = std::fs::remove_file(&out);
        let mut l = env
            .tb
            .client_launch(label, &self.o.triage_bin)
            .args(args.into_iter().map(OsString::from));
        l.stdout = Some(out.clone());
        l.log = Some(log.clone());
        let mut child = l.spawn()?;
        let st = wait(&mut child, self.o.duration + Duration::from_secs(60))?;
        if !st.success() {
            return Err(LabError::Process {
                name: label.into(),
                msg: format!("{st}: {}", child.log_tail(2000)),
            });
        }
        let text = std::fs::read_to_string(&out).map_err(|e| LabError::io("reading", &out, e))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| LabError::Results(format!("parsing triage load's summary: {e}")))?;
        Ok(LoadRun {
            rps: v["requests_per_s"].as_f64().unwrap_or(0.0),
            errors: v["errors"].as_u64().unwrap_or(0),
            p99_ms: v["t1"]["p99_ms"].as_f64(),
        })
    }
}

/// Wait for `child` to end (at most `within`).
fn wait(child: &mut Managed, within: Duration) -> Result<std::process::ExitStatus> {
    child
        .wait_until(Instant::now() + within)?
        .ok_or_else(|| LabError::Process {
            name: child.label().into(),
            msg: format!("still running after {within:?}"),
        })
}

/// Run `f` (which waits for a child) and return its result with the CPU time of the children
/// that ended meanwhile.
fn with_cpu<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let before = os::cputime::children_cpu_time();
    let r = f()?;
    Ok((
        r,
        (os::cputime::children_cpu_time().saturating_sub(before)).as_secs_f64(),
    ))
}

impl Experiment for LoadBench {
    type Server = Managed;
    type Point = usize;
    type Measured = LoadRound;
    type Summary = LoadSummary;

    fn name(&self) -> String {
        "bench load".into()
    }

    fn out_dir(&self, stamp: &str) -> PathBuf {
        self.o.out.join(stamp)
    }

    fn testbed(&self) -> TestbedConfig {
        TestbedConfig {
            tag: "bench-load".into(),
            net: NetMode::Loopback,
            ..Default::default()
        }
    }

    fn peers(&self) -> Vec<(String, Peer)> {
        Vec::new()
    }

    fn drop_variant(&mut self, _: &str) {}

    fn prepare(&mut self, env: &Env<'_>) -> Result<()> {
        if cfg!(debug_assertions) {
            eprintln!("warning: this is a debug build; measure with `cargo build --release`");
        }
        let www = env.tb.workdir().join("www");
        std::fs::create_dir_all(&www).map_err(|e| LabError::io("creating", &www, e))?;
        let file = www.join("1k.html");
        std::fs::write(&file, vec![b'x'; self.o.size])
            .map_err(|e| LabError::io("writing", &file, e))?;
        self.server = Some((env.tb.server_addr()?, www));
        Ok(())
    }

    fn plan(&self) -> Vec<Session<usize>> {
        vec![Session {
            variant: "nginx".into(),
            dir: "nginx".into(),
            points: (1..=self.o.rounds).collect(),
        }]
    }

    fn start(&self, env: &Env<'_>, _: &Session<usize>, dir: &Path) -> Result<Managed> {
        let (addr, www) = self.server.clone().expect("prepare chooses the address");
        let site = PeerSite {
            root: www,
            listen: addr,
            gzip: None,
            keepalive_s: 60,
            extra: String::new(),
        };
        let tuning = PeerTuning {
            nginx: NginxTuning {
                master_process: false,
                worker_connections: 4096,
                rlimit_nofile: None,
                keepalive_requests: Some(100_000_000),
                tcp_nopush: false,
                ..NginxTuning::default()
            },
            ..PeerTuning::default()
        };
        let p = Peer::Nginx.prepare_tuned(&dir.join("nginx"), &site, &tuning)?;
        let mut child =
            env.tb
                .spawn_server_side("nginx", &p.program, &p.args, Some(dir.join("nginx.log")))?;
        env.tb
            .wait_listening(addr, &mut child, Duration::from_secs(15))?;
        Ok(child)
    }

    fn label(&self, round: &usize) -> String {
        format!("round {round}/{}", self.o.rounds)
    }

    fn measure(
        &self,
        env: &Env<'_>,
        _: &mut Managed,
        &round: &usize,
        dir: &Path,
    ) -> Result<LoadRound> {
        let url = self.url();
        let d = self.secs() as f64;
        let spec = WrkSpec {
            program: Some(self.wrk.clone()),
            ..WrkSpec::new(url, self.o.connections, self.o.duration)
        };
        let (w, w_cpu) = with_cpu(|| Wrk::run(env.tb, &format!("wrk-{round}"), &spec))?;
        if w.errors + w.non_2xx > 0 {
            eprintln!(
                "  wrk reported {} socket errors and {} non-2xx responses",
                w.errors, w.non_2xx
            );
        }
        let (cl, cl_cpu) =
            with_cpu(|| self.run_triage(env, dir, &format!("closed-{round}"), None))?;
        // CPU per request (µs): less sensitive to a noisy machine than req/s.
        let per_req = |cpu: f64, rps: f64| (rps > 0.0).then(|| cpu * 1e6 / (rps * d));
        let rt = if self.o.no_rate {
            None
        } else {
            Some(self.run_triage(env, dir, &format!("rate-{round}"), Some(w.rps))?)
        };
        Ok(LoadRound {
            round,
            wrk_rps: w.rps,
            closed_rps: cl.rps,
            closed_ratio: cl.rps / w.rps,
            closed_errors: cl.errors,
            wrk_cpu_us_per_req: per_req(w_cpu, w.rps),
            closed_cpu_us_per_req: per_req(cl_cpu, cl.rps),
            rate_target_rps: rt.as_ref().map(|_| w.rps),
            rate_rps: rt.as_ref().map(|x| x.rps),
            rate_ratio: rt.as_ref().map(|x| x.rps / w.rps),
            rate_p99_ms: rt.as_ref().and_then(|x| x.p99_ms),
            rate_errors: rt.as_ref().map(|x| x.errors),
        })
    }

    fn describe(&self, _: &Env<'_>, r: &LoadRound) -> String {
        let mut s = format!(
            "wrk {:.0} req/s, closed {:.0} req/s (x{:.3})",
            r.wrk_rps, r.closed_rps, r.closed_ratio
        );
        if let (Some(rps), Some(ratio)) = (r.rate_rps, r.rate_ratio) {
            s.push_str(&format!(", rate {rps:.0} req/s (x{ratio:.3})"));
        }
        if r.closed_errors > 0 || r.rate_errors.is_some_and(|e| e > 0) {
            s.push_str(&format!(
                "; triage load counted errors: closed {}, rate {}",
                r.closed_errors,
                r.rate_errors.unwrap_or(0)
            ));
        }
        s
    }

    fn stop(&self, _: &Env<'_>, nginx: Managed) -> String {
        let log = nginx.log_tail(1500);
        drop(nginx);
        log
    }

    fn summarize(&self, _: &Env<'_>, done: &[(usize, LoadRound)]) -> LoadSummary {
        summarize(&self.o, done.iter().map(|(_, r)| r.clone()).collect())
    }

    fn outputs(&self, _: &LoadSummary, _: &[(usize, LoadRound)]) -> Outputs {
        Outputs::default()
    }

    fn print(&self, s: &LoadSummary, out: &Path) {
        print(s, self.o.rounds, out);
    }
}

/// The summary of `rounds`.
pub fn summarize(o: &LoadOpts, rounds: Vec<LoadRound>) -> LoadSummary {
    let closed: Vec<f64> = rounds.iter().map(|r| r.closed_ratio).collect();
    let rate: Vec<f64> = rounds.iter().filter_map(|r| r.rate_ratio).collect();
    let cpu: Vec<f64> = rounds
        .iter()
        .filter_map(|r| Some(r.wrk_cpu_us_per_req? / r.closed_cpu_us_per_req?))
        .collect();
    LoadSummary {
        bench: "load",
        server: "nginx, 1 process, pinned to CPU 0, access log off",
        clients: "pinned to CPU 1; wrk -t1; triage load --plain --threads 1",
        connections: o.connections,
        duration_s: o.duration.as_secs(),
        size_bytes: o.size,
        debug_build: cfg!(debug_assertions),
        median_closed_ratio: median_opt(&closed),
        median_rate_ratio: median_opt(&rate),
        median_cpu_efficiency_ratio: median_opt(&cpu),
        rounds,
        goal_ratio: 0.8,
    }
}

/// The table on stdout, the medians and where `summary.json` is.
pub fn print(s: &LoadSummary, rounds: usize, out: &Path) {
    println!(
        "nginx (1 process, CPU 0) serving {} bytes; clients on CPU 1: {} connections, {} s per run, {rounds} rounds",
        s.size_bytes, s.connections, s.duration_s
    );
    println!(
        "{:>5} {:>12} {:>14} {:>7} {:>14} {:>7} {:>10} {:>10} {:>10}",
        "round",
        "wrk req/s",
        "closed req/s",
        "ratio",
        "rate req/s",
        "ratio",
        "rate p99ms",
        "wrk us/req",
        "load us/req"
    );
    let f = |v: Option<f64>, p: usize| v.map_or("-".into(), |x| format!("{x:.p$}"));
    for r in &s.rounds {
        println!(
            "{:>5} {:>12.0} {:>14.0} {:>7.3} {:>14} {:>7} {:>10} {:>10} {:>10}",
            r.round,
            r.wrk_rps,
            r.closed_rps,
            r.closed_ratio,
            f(r.rate_rps, 0),
            f(r.rate_ratio, 3),
            f(r.rate_p99_ms, 2),
            f(r.wrk_cpu_us_per_req, 2),
            f(r.closed_cpu_us_per_req, 2)
        );
    }
    println!(
        "median triage-load/wrk req/s ratio: closed {}, rate {} (goal >= 0.8); \
         CPU efficiency (wrk us/req / triage us/req): {}",
        f(s.median_closed_ratio, 3),
        f(s.median_rate_ratio, 3),
        f(s.median_cpu_efficiency_ratio, 3)
    );
    println!("wrote {}", out.join("summary.json").display());
}

/// Run the benchmark `o` asks for. Returns its results directory.
pub fn run(o: &LoadOpts) -> Result<PathBuf> {
    run_experiment(LoadBench::new(o.clone())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(r: usize, wrk: f64, closed: f64, rate: Option<f64>) -> LoadRound {
        LoadRound {
            round: r,
            wrk_rps: wrk,
            closed_rps: closed,
            closed_ratio: closed / wrk,
            closed_errors: 0,
            wrk_cpu_us_per_req: Some(10.0),
            closed_cpu_us_per_req: Some(20.0),
            rate_target_rps: rate.map(|_| wrk),
            rate_rps: rate,
            rate_ratio: rate.map(|x| x / wrk),
            rate_p99_ms: rate.map(|_| 1.0),
            rate_errors: rate.map(|_| 0),
        }
    }

    #[test]
    fn medians_over_rounds_and_the_summary_keys() {
        use clap::{Args, FromArgMatches};
        let cmd = LoadOpts::augment_args(clap::Command::new("t").no_binary_name(true));
        cmd.clone().debug_assert();
        let m = cmd.try_get_matches_from(["-d", "3s", "-c", "8"]).unwrap();
        let o = LoadOpts::from_arg_matches(&m).unwrap();
        assert_eq!(
            (o.duration, o.connections, o.rounds),
            (Duration::from_secs(3), 8, 3)
        );
        let s = summarize(
            &o,
            vec![
                round(1, 100.0, 80.0, Some(90.0)),
                round(2, 100.0, 90.0, None),
                round(3, 100.0, 100.0, Some(70.0)),
            ],
        );
        assert_eq!(s.median_closed_ratio, Some(0.9));
        assert_eq!(s.median_rate_ratio, Some(0.8));
        assert_eq!(s.median_cpu_efficiency_ratio, Some(0.5));
        let j = serde_json::to_value(&s).unwrap();
        assert_eq!(j["duration_s"], 3);
        assert!(j["rounds"][1]["rate_rps"].is_null());
        for k in [
            "bench",
            "server",
            "clients",
            "connections",
            "size_bytes",
            "debug_build",
            "goal_ratio",
        ] {
            assert!(j.get(k).is_some(), "{k}");
        }
        let s = summarize(&o, vec![]);
        assert_eq!(s.median_closed_ratio, None);
        // `-d 3` is refused: a duration needs its unit.
        let cmd = LoadOpts::augment_args(clap::Command::new("t").no_binary_name(true));
        assert!(cmd.try_get_matches_from(["-d", "3"]).is_err());
    }
}
