//! One server started for the lab ([`start`], with its twin when pairs are asked for) and one
//! point measured against it ([`measure`]): cold connections grown to the point's count, then
//! wrk's saturation run (closed loop: the rate grid's reference), the open loop's overload run
//! (the measured saturation), one open-loop rate (loadgen's rate mode, latency from the
//! scheduled send), or the pairs (alternating short wrk runs against the server and its twin,
//! which holds no cold connection), with the server side's user and kernel CPU from its cgroup
//! and its resident memory. Over each cold count's rates a thread records CPU samples as
//! `triage capacity sample` does, for the tool's own prediction from the access log.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::cold::Cold;
use super::opts::Saturation;
use super::plan::{EvPoint, Params, Server, Step, FD_SETSIZE, OVERLOAD};
use super::runout::RunOut;
use super::search::{SatSearch, Trial};
use crate::capacity::sample::{record_while, Reader, Source};
use crate::error::{LabError, Result};
use crate::peers::{Gzip, LighttpdTuning, NginxTuning, Peer, PeerSite, PeerTuning};
use crate::process::Managed;
use crate::testbed::Testbed;
use crate::wrk::{Wrk, WrkSpec};

/// The small file: what the cold connections and the pairs ask for (1 KiB of HTML).
pub const FILE: &str = super::plan::SMALL_PATH;
/// Its size.
pub const FILE_BYTES: usize = super::plan::SMALL_BYTES;
/// The seed of the gzip page's words.
pub const PAGE_SEED: u64 = 2;

/// The gzip page's content: `bytes` bytes of HTML paragraphs of words drawn from a fixed
/// vocabulary by a generator seeded with `seed` (the same page on every run). Text that
/// compresses about as prose does (4-5x at level 6), so that zlib does its full work per
/// request: matches to find, literals to code.
pub fn gzip_page(bytes: usize, seed: u64) -> Vec<u8> {
    use rand::{Rng, SeedableRng};
    const WORDS: &[&str] = &[
        "the",
        "server",
        "request",
        "of",
        "and",
        "a",
        "to",
        "in",
        "idle",
        "connection",
        "kernel",
        "rate",
        "is",
        "that",
        "for",
        "event",
        "with",
        "time",
        "as",
        "cost",
        "on",
        "proxy",
        "select",
        "poll",
        "descriptor",
        "by",
        "was",
        "load",
        "peak",
        "capacity",
        "which",
        "from",
        "each",
        "busy",
        "line",
        "when",
        "more",
        "than",
        "at",
        "it",
        "client",
        "response",
        "file",
        "cache",
        "system",
        "user",
        "network",
        "slow",
        "many",
        "thousand",
        "second",
        "quarter",
        "hour",
        "measured",
        "predicted",
        "regression",
        "intercept",
        "scalable",
        "performance",
        "internet",
        "realistic",
        "loads",
        "interface",
        "readiness",
        "hundreds",
        "wide",
        "area",
        "delay",
        "packet",
        "buffer",
        "process",
        "thread",
        "queue",
        "latency",
        "throughput",
        "bandwidth",
        "memory",
        "page",
        "table",
        "hash",
        "list",
        "scan",
        "set",
        "bit",
        "call",
        "return",
        "wait",
        "wake",
        "sleep",
        "work",
        "done",
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let head = "<!DOCTYPE html>\n<html><head><title>events lab page</title></head><body>\n";
    let tail = "</body></html>\n";
    let mut out = String::with_capacity(bytes + 64);
    out.push_str(head);
    while out.len() + tail.len() < bytes {
        out.push_str("<p>");
        let n = rng.gen_range(20..80);
        for i in 0..n {
            let w = WORDS[rng.gen_range(0..WORDS.len())];
            if i == 0 {
                out.push_str(&w[..1].to_uppercase());
                out.push_str(&w[1..]);
            } else {
                out.push(' ');
                out.push_str(w);
            }
            if rng.gen_range(0..12) == 0 {
                out.push_str(&format!(" {}", rng.gen_range(0..100_000)));
            }
        }
        out.push_str(".</p>\n");
    }
    out.truncate(bytes.saturating_sub(tail.len()));
    out.push_str(tail);
    out.into_bytes()
}
/// Connections beyond the hot and cold ones every server is configured for.
const SPARE: usize = 64;

/// What a point needs beside the server.
pub struct Setup<'a> {
    /// The testbed.
    pub tb: &'a Testbed,
    /// The parameters.
    pub p: &'a Params,
    /// The document root.
    pub root: &'a Path,
    /// The `triage` binary.
    pub triage_bin: &'a Path,
    /// The descriptor limit servers and the lab run with.
    pub nofile: usize,
    /// Where the CPU sample files go (the results directory's `cpu/`).
    pub cpu_dir: &'a Path,
    /// Where the access logs go (the results directory's `logs/`).
    pub log_dir: &'a Path,
}

/// The largest number of cold connections `server` can hold beside the hot ones, and why.
pub fn cold_limit(server: Server, nofile: usize, hot: usize) -> (usize, &'static str) {
    match server {
        Server::Triage | Server::Nginx => (
            nofile.saturating_sub(hot + 2 * SPARE),
            "one descriptor per connection within RLIMIT_NOFILE",
        ),
        Server::LighttpdEpoll | Server::LighttpdPoll => (
            (nofile / 2).saturating_sub(hot + SPARE / 4),
            "lighttpd allows at most max-fds/2 connections (max-fds = RLIMIT_NOFILE)",
        ),
        Server::LighttpdSelect => (
            (FD_SETSIZE / 2).saturating_sub(hot + SPARE / 4),
            "select watches at most FD_SETSIZE descriptors",
        ),
    }
}

/// A CPU sampler thread writing one samples file.
struct Recorder {
    stop: Arc<AtomicBool>,
    join: JoinHandle<std::result::Result<usize, String>>,
    path: PathBuf,
}

impl Recorder {
    fn start(dir: PathBuf, cpus: f64, path: PathBuf) -> Result<Recorder> {
        let mut f = std::fs::File::create(&path).map_err(|e| LabError::io("creating", &path, e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let join = std::thread::spawn(move || {
            let mut r = Reader::new(Source::Cgroup(dir), cpus);
            record_while(&mut r, Duration::from_secs(1), &mut f, &|_| {
                !s.load(Ordering::Relaxed)
            })
            .map_err(|e| e.to_string())
        });
        Ok(Recorder { stop, join, path })
    }

    fn finish(self) -> Result<PathBuf> {
        self.stop.store(true, Ordering::Relaxed);
        match self.join.join() {
            Ok(Ok(_)) => Ok(self.path),
            Ok(Err(e)) => Err(LabError::Results(format!("CPU samples: {e}"))),
            Err(_) => Err(LabError::Results("the CPU sampler panicked".into())),
        }
    }
}

/// A server under test, running, with its cold connections.
pub struct Running {
    /// Which.
    pub server: Server,
    /// The process (the one that serves: nginx and lighttpd run as one process).
    pub child: Managed,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its access log (Combined Log Format).
    pub access_log: PathBuf,
    /// The cold connections held against it.
    pub cold: Cold,
    /// wrk's peak just measured at the current cold count (req/s).
    pub peak: f64,
    /// The open loop's saturation just measured at the current cold count (req/s): the rates
    /// are fractions of it.
    pub sat_rps: f64,
    /// The saturation search of the current cold count: its open-loop runs so far.
    pub search: SatSearch,
    /// Where the CPU of the current cold count ran out: the same runs.
    pub runout: RunOut,
    /// The same server with the same configuration holding no cold connection, for the pairs.
    pub twin: Option<Twin>,
    /// The last growth of the cold connections and the memory it took.
    pub cold_step: Option<ColdStep>,
    /// Why the cold count is limited, when it is.
    pub limit_note: Option<String>,
    /// The CPU sampler over the current cold count's rates and probes.
    recorder: Option<Recorder>,
}

/// The twin of a server under test: started with the same configuration on its own port, in
/// the same cgroup, holding no cold connection. The pairs measure both seconds apart.
pub struct Twin {
    /// The process.
    pub child: Managed,
    /// Where it listens.
    pub addr: SocketAddr,
}

/// Start `server` with its configuration and logs in `dir` (and its twin when the lab asks
/// for pairs at a cold count above 0).
pub fn start(s: &Setup<'_>, server: Server, dir: &Path) -> Result<Running> {
    let access_log = s.log_dir.join(format!(
        "{}.access.log",
        dir.file_name()
            .map_or("server".into(), |n| n.to_string_lossy())
    ));
    let (child, addr) = spawn(s, server, dir, "", &access_log)?;
    let twin = if s.p.pairs > 0 && s.p.max_cold() > 0 {
        let (child, addr) = spawn(s, server, dir, "-twin", &dir.join("twin.access.log"))?;
        Some(Twin { child, addr })
    } else {
        None
    };
    Ok(Running {
        server,
        child,
        addr,
        access_log,
        cold: Cold::default(),
        peak: 0.0,
        sat_rps: 0.0,
        search: SatSearch::default(),
        runout: RunOut::default(),
        twin,
        cold_step: None,
        limit_note: None,
        recorder: None,
    })
}

/// Start one process of `server` (`tag` tells the twin apart) and wait until it listens.
fn spawn(
    s: &Setup<'_>,
    server: Server,
    dir: &Path,
    tag: &str,
    access_log: &Path,
) -> Result<(Managed, SocketAddr)> {
    let tb = s.tb;
    let addr = tb.server_addr()?;
    let log = Some(dir.join(format!("server{tag}.log")));
    let access_log = access_log.to_owned();
    let conns = s.p.max_cold() + s.p.hot_conns + SPARE;
    let mut child = match server.peer() {
        None => {
            let args: Vec<OsString> = [
                "serve",
                "--root",
                &s.root.to_string_lossy(),
                "--listen",
                &addr.to_string(),
                "--slots",
                "1",
                "--keepalive-timeout",
                "1h",
                "--header-timeout",
                "1h",
                "--max-conns",
                &conns.to_string(),
                "--access-log",
                &access_log.to_string_lossy(),
            ]
            .iter()
            .map(OsString::from)
            .collect();
            let mut args = args;
            if let Some(l) = s.p.gzip_level {
                // Compresses text/html per response when the client accepts gzip.
                args.extend(["--gzip-level".into(), l.to_string().into()]);
            }
            tb.spawn_server_side(&format!("triage{tag}"), s.triage_bin, &args, log)?
        }
        Some(peer) => {
            let extra = match peer {
                Peer::Nginx => format!("    access_log \"{}\" combined;", access_log.display()),
                _ => String::new(),
            };
            let site = PeerSite {
                root: s.root.to_owned(),
                listen: addr,
                gzip: s.p.gzip_level.map(|level| Gzip {
                    level,
                    types: vec!["text/html".into()],
                }),
                keepalive_s: 3600,
                extra,
            };
            let tuning = PeerTuning {
                nginx: NginxTuning {
                    master_process: false,
                    // nginx closes idle keep-alive connections when its free connections run
                    // low: room for twice as many as it holds.
                    worker_connections: (2 * conns).min(s.nofile.saturating_sub(SPARE)),
                    rlimit_nofile: Some(s.nofile),
                    keepalive_requests: Some(100_000_000),
                    tcp_nopush: false,
                    ..NginxTuning::default()
                },
                lighttpd: LighttpdTuning {
                    event_handler: server
                        .handler()
                        .unwrap_or(crate::peers::EventHandler::Epoll),
                    max_fds: if server == Server::LighttpdSelect {
                        FD_SETSIZE
                    } else {
                        s.nofile
                    },
                    max_connections: conns,
                    access_log: Some(access_log.clone()),
                },
                ..PeerTuning::default()
            };
            let name = format!("{}{tag}", server.name());
            let p = peer.prepare_tuned(&dir.join(&name), &site, &tuning)?;
            crate::peers::validate(&p)?;
            tb.spawn_server_side(&name, &p.program, &p.args, log)?
        }
    };
    tb.wait_listening(addr, &mut child, Duration::from_secs(15))?;
    Ok((child, addr))
}

/// One growth of the cold connections: how many were added and the server's resident memory
/// just before and after (no hot load in between).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ColdStep {
    /// Connections added.
    pub added: usize,
    /// RSS before (KiB).
    pub rss_before_kib: u64,
    /// RSS [`COLD_SETTLE`] after the last connection was served and left idle (KiB): what the
    /// idle connections hold, once the server has handed back what serving their first
    /// requests left free.
    pub rss_after_kib: u64,
    /// RSS [`COLD_SOON`] after it (KiB): the lab's former reading, which can still hold that
    /// free memory (triage hands it back on its trimmer's next check, within a second, and
    /// twice more a second apart).
    pub rss_soon_kib: u64,
}

/// How soon after growing the cold connections the first RSS is read (lighttpd and nginx grow
/// their tables lazily).
pub const COLD_SOON: Duration = Duration::from_millis(300);
/// How long after growing them the RSS the lab reports is read: past triage's trimmer, which
/// checks every second and, once 256 or more connections have gone idle, hands free memory
/// back to the kernel three times a second apart (`server::spawn_trimmer`). At 300 ms the
/// reading held the free memory of serving the cold connections' first requests: 5.38 KiB
/// per connection in `cap12-quick1`, where the same server held 2.17 KiB by the next point.
pub const COLD_SETTLE: Duration = Duration::from_millis(3500);

impl ColdStep {
    /// KiB per added connection.
    pub fn kib_per_conn(&self) -> f64 {
        (self.rss_after_kib as f64 - self.rss_before_kib as f64) / self.added.max(1) as f64
    }
}

/// What one point measured.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// The server.
    pub server: String,
    /// Repetition.
    pub rep: usize,
    /// Cold connections asked for.
    pub cold: usize,
    /// Cold connections held during the point.
    pub cold_held: usize,
    /// `saturate`, `overload`, `rate` or `pairs`.
    pub step: String,
    /// Fraction of the measured saturation asked for (rate points).
    pub frac: Option<f64>,
    /// The rate asked for (req/s; wrk's peak for a saturation run, the rate offered for the
    /// overload run).
    pub target_rps: f64,
    /// The rate served: completed requests per second of the window.
    pub rps: f64,
    /// Completed requests.
    pub requests: u64,
    /// Failed requests (errors, timeouts, non-2xx).
    pub errors: u64,
    /// The window the CPU was measured over (s).
    pub window_s: f64,
    /// Server-side CPU time in the window (s).
    pub cpu_s: f64,
    /// User-mode share of the server side's capacity (%).
    pub user_pct: f64,
    /// Kernel-mode share (%).
    pub kernel_pct: f64,
    /// Idle share: capacity left unused (%).
    pub idle_pct: f64,
    /// CFS periods in which the server side hit its quota (%): near 100 when the server, not
    /// the client, limits a saturation run.
    pub throttled_pct: Option<f64>,
    /// CPU per completed request (us).
    pub cpu_per_req_us: f64,
    /// Latency percentiles (ms; rate points from the scheduled send).
    pub p50_ms: f64,
    /// 90th percentile (ms).
    pub p90_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// Resident memory of the server after the point (KiB).
    pub rss_kib: u64,
    /// Whether an open-loop run sustained its rate (served >= 97% of it, bounded p99: see
    /// [`super::search`]); `None` for wrk's runs.
    pub sustained: Option<bool>,
    /// Which criterion an open-loop run that did not sustain its rate failed
    /// ([`Trial::failed_on`]).
    pub failed_on: Option<&'static str>,
    /// The generator's own CPU over the run (% of one CPU): the lab's thread, on which
    /// loadgen's open loop runs, and wrk's process. A client near 100% sets the peak, not the
    /// server.
    pub client_cpu_pct: Option<f64>,
    /// The client CPU's busy share over the run (%), every task on it: the helpers' builds
    /// share it.
    pub client_cpu_busy_pct: Option<f64>,
    /// Whether the client side ran real-time (`SCHED_FIFO`) through the run.
    pub client_fifo: bool,
    /// The server CPU's busy time over the run not spent by the server side's cgroup (% of
    /// the window): other tenants of that CPU (a build started after the lab paused the
    /// running ones, kernel threads). The CPU's ticks in `/proc/stat` less the server side's
    /// in its cgroup: within a point or two.
    pub server_cpu_others_pct: Option<f64>,
    /// The last growth of the cold connections before this point.
    pub cold_step: Option<ColdStep>,
    /// Cold connections still open after the point (checked after the last rate).
    pub cold_alive: Option<usize>,
    /// The CPU samples file of this cold count's rates and probes (after the last of them).
    pub cpu_csv: Option<PathBuf>,
    /// The server's access log.
    pub access_log: PathBuf,
    /// The pairs (pairs point): CPU per request of the server with its cold connections and
    /// of its twin with none (us), each pair measured seconds apart.
    pub pairs: Vec<(f64, f64)>,
    /// Why fewer cold connections are held than asked, if so.
    pub note: Option<String>,
    /// What the point requested: `gzip` (the page compressed per request) or `small` (the
    /// 1 KiB file; the pairs always).
    pub page: &'static str,
    /// The server side's CPU quota during the point (% of one CPU; `None`: none).
    pub quota_pct: Option<f64>,
    /// Mean body bytes per response as received (open-loop runs): compressed when the
    /// server compressed.
    pub body_bytes_per_req: Option<f64>,
    /// The same decoded (gunzipped): above `body_bytes_per_req` when the responses were
    /// compressed.
    pub decoded_bytes_per_req: Option<f64>,
}

/// The client side's real-time scheduling for one measuring run (`--client-sched fifo`): the
/// lab's thread (loadgen's open loop runs on it) and the wrk it starts meanwhile preempt every
/// fair-class task on the client CPU while the guard lives. `None` with `--client-sched nice`
/// or when refused (the lab said so once, in `prepare`).
fn client_rt(p: &Params) -> Option<os::prio::FifoGuard> {
    if !p.client_fifo {
        return None;
    }
    os::prio::FifoGuard::raise_current(super::CLIENT_FIFO_PRIORITY).ok()
}

/// CPU counters at the start of a run: this thread's (loadgen's open loop runs on it), the
/// waited-for children's (wrk), and one CPU's busy and total time (every task on it, the
/// helpers' builds included): the client's CPU, or the server's.
struct CpuAtStart {
    thread: Duration,
    children: Duration,
    cpu: Option<(Duration, Duration)>,
    cpu_index: Option<usize>,
    t: Instant,
}

impl CpuAtStart {
    fn now(cpu_index: Option<usize>) -> CpuAtStart {
        CpuAtStart {
            thread: os::cputime::thread_cpu_time(),
            children: os::cputime::children_cpu_time(),
            cpu: Self::busy_total(cpu_index),
            cpu_index,
            t: Instant::now(),
        }
    }

    fn busy_total(cpu_index: Option<usize>) -> Option<(Duration, Duration)> {
        let s = os::cpusplit::machine_split(Some(cpu_index?)).ok()?;
        let busy = s.user + s.system;
        Some((busy, busy + s.idle + s.steal))
    }

    /// Since the start: the generator's own CPU (this thread and wrk, % of one CPU) and the
    /// CPU's busy share (%, every task on it).
    fn since(&self) -> (f64, Option<f64>) {
        let dt = self.t.elapsed().as_secs_f64().max(1e-9);
        let own = (os::cputime::thread_cpu_time().saturating_sub(self.thread)
            + os::cputime::children_cpu_time().saturating_sub(self.children))
        .as_secs_f64();
        let busy =
            self.cpu
                .zip(Self::busy_total(self.cpu_index))
                .and_then(|((b0, t0), (b1, t1))| {
                    let total = t1.saturating_sub(t0).as_secs_f64();
                    (total > 0.0).then(|| 100.0 * b1.saturating_sub(b0).as_secs_f64() / total)
                });
        (100.0 * own / dt, busy)
    }
}

/// The server side's CPU counters now.
#[derive(Debug, Clone, Copy)]
struct Counters {
    /// Precise total (s).
    total: f64,
    /// User time in ticks (s).
    user: f64,
    /// System time in ticks (s).
    system: f64,
    /// CFS periods and how many were throttled.
    periods: (u64, u64),
}

fn cpu_now(tb: &Testbed) -> Result<Counters> {
    let cg = tb
        .server_cgroup()
        .ok_or_else(|| LabError::Os("the server side has no cgroup".into()))?;
    let dir = cg
        .accounting_dir()
        .ok_or_else(|| LabError::Os("the server side has no CPU accounting cgroup".into()))?;
    let g = os::cpusplit::cgroup_split(&dir).map_err(|e| LabError::Os(e.to_string()))?;
    let st = cg.cpu_stat().unwrap_or_default();
    Ok(Counters {
        total: g.total.as_secs_f64(),
        user: g.split.user.as_secs_f64(),
        system: g.split.system.as_secs_f64(),
        periods: (st.nr_periods, st.nr_throttled),
    })
}

/// Grow the cold connections to the point's count (within the server's limit).
fn ensure_cold(s: &Setup<'_>, r: &mut Running, pt: &EvPoint) -> Result<()> {
    let (limit, why) = cold_limit(r.server, s.nofile, s.p.hot_conns);
    let target = pt.cold.min(limit);
    if target < pt.cold {
        r.limit_note = Some(format!(
            "{} holds {target} of {} cold connections: {why} ({})",
            r.server.name(),
            pt.cold,
            s.nofile
        ));
    } else {
        r.limit_note = None;
    }
    if r.cold.held() < target {
        let before = (r.cold.held(), rss(r)?);
        r.cold.grow_to(r.addr, target, FILE);
        if let Some(short) = &r.cold.short {
            r.limit_note = Some(format!("{}: {short}", r.server.name()));
        }
        crate::signals::sleep(COLD_SOON)?;
        let soon = rss(r)?;
        crate::signals::sleep(COLD_SETTLE.saturating_sub(COLD_SOON))?;
        r.cold_step = Some(ColdStep {
            added: r.cold.held() - before.0,
            rss_before_kib: before.1,
            rss_after_kib: rss(r)?,
            rss_soon_kib: soon,
        });
    }
    Ok(())
}

fn rss(r: &Running) -> Result<u64> {
    os::procfs::rss_kib(r.child.pid() as i32).map_err(|e| LabError::Process {
        name: r.server.name().into(),
        msg: format!("reading its memory: {e}"),
    })
}

/// Measure `pt` against `r`.
pub fn measure(s: &Setup<'_>, r: &mut Running, pt: &EvPoint) -> Result<Measured> {
    if let Some(st) = r.child.try_wait()? {
        return Err(LabError::Process {
            name: r.server.name().into(),
            msg: format!("exited ({st})"),
        });
    }
    ensure_cold(s, r, pt)?;
    if pt.step == Step::Pairs {
        return measure_pairs(s, r, pt);
    }
    let window = s.p.window();
    let cap = s.p.capacity();
    let url = format!("http://{}{}", r.addr, s.p.page_path);
    let gzip = s.p.gzip_level.is_some();
    if let Step::Rate { idx, .. } = pt.step {
        if idx == 0 {
            let dir =
                s.tb.server_cgroup()
                    .and_then(|c| c.accounting_dir())
                    .ok_or_else(|| LabError::Os("no CPU accounting cgroup".into()))?;
            let path = s.cpu_dir.join(format!(
                "{}-r{}-cold{}.csv",
                r.server.name(),
                pt.rep,
                pt.cold
            ));
            // Its first sample falls at the next whole second: the requests before it are
            // outside the tool's buckets (counted as such), as they would be in production.
            r.recorder = Some(Recorder::start(dir, cap, path)?);
            // A second for that first sample to be taken before the first rate begins.
            crate::signals::sleep(Duration::from_secs(1))?;
        }
    }
    if matches!(pt.step, Step::Rate { .. } | Step::Probe { .. }) {
        // Each rate and probe starts on a whole second, so that its window is whole seconds
        // of the access log (whose timestamps are whole seconds): `triage capacity --steps`
        // then finds the same steps the lab measured, with no second shared by two runs.
        crate::signals::sleep(to_next_second())?;
    }
    let c0 = cpu_now(s.tb)?;
    let rt = client_rt(s.p);
    let client0 = CpuAtStart::now(s.tb.info().client_cpu);
    let server_cpu0 = CpuAtStart::now(s.tb.info().server_cpu);
    let t0 = Instant::now();
    let (target, requests, errors, p50, p90, p99, frac, load_s, bodies) = match pt.step {
        Step::Saturate => {
            let mut spec = WrkSpec::new(url, s.p.hot_conns, window);
            spec.timeout = Some(Duration::from_secs(5));
            if gzip {
                spec.headers.push("Accept-Encoding: gzip".into());
            }
            let w = Wrk::run(s.tb, &format!("wrk-{}", r.server.name()), &spec)?;
            r.peak = w.rps;
            (
                w.rps,
                w.requests,
                w.errors + w.non_2xx,
                w.latency_p50_ms,
                w.latency_p90_ms,
                w.latency_p99_ms,
                None,
                None,
                None,
            )
        }
        Step::Overload | Step::Rate { .. } | Step::Probe { .. } => {
            let (rate, frac) = match pt.step {
                Step::Rate { frac, .. } => (frac * r.sat_rps, Some(frac)),
                Step::Probe { .. } => {
                    let next = match s.p.saturation {
                        Saturation::Cpu => r.runout.next(),
                        Saturation::Sustained => r.search.next(),
                    };
                    (next.unwrap_or(0.0), None)
                }
                _ => (OVERLOAD * r.peak, None),
            };
            if rate <= 0.0 {
                return Err(LabError::Results(
                    "no peak or saturation measured before the rates".into(),
                ));
            }
            let mut cfg = loadgen::LoadConfig::new(url);
            cfg.plain = true;
            cfg.arrival = loadgen::Arrival::Rate {
                rate,
                connections: s.p.hot_conns,
            };
            cfg.duration = Some(window);
            cfg.timeout = Duration::from_secs(5);
            // Overloaded, the requests still queued at the end are not sent (counted as
            // unsent, not served): a short drain, so that the window is the served time.
            cfg.drain = Some(if pt.step == Step::Overload {
                Duration::from_millis(100)
            } else {
                Duration::from_secs(2)
            });
            cfg.progress = false;
            cfg.seed = 2 + pt.rep as u64;
            if gzip {
                cfg.accept_encoding = loadgen::AcceptEncoding::Gzip;
            }
            let rep = loadgen::run_blocking(cfg, 1).map_err(|e| LabError::Process {
                name: "loadgen".into(),
                msg: e.to_string(),
            })?;
            let m = &rep.summary;
            let pct = |v: Option<f64>| v.unwrap_or(f64::NAN);
            (
                rate,
                m.requests,
                m.request_errors + m.errors,
                pct(m.t1.median_ms),
                pct(m.t1.p90_ms),
                pct(m.t1.p99_ms),
                frac,
                Some(m.duration_s),
                (m.requests > 0).then(|| Bodies {
                    wire: m.bytes as f64 / m.requests as f64,
                    decoded: m.bytes_decoded as f64 / m.requests as f64,
                }),
            )
        }
        Step::Pairs => unreachable!("measured above"),
    };
    let wall = t0.elapsed().as_secs_f64();
    let dt = run_window_s(wall, load_s);
    let c1 = cpu_now(s.tb)?;
    let (client_cpu_pct, client_cpu_busy_pct) = client0.since();
    let server_cpu_busy_pct = server_cpu0.since().1;
    let rt_held = rt.is_some();
    drop(rt);
    if pt.step == Step::Overload {
        r.sat_rps = requests as f64 / dt;
        r.search = SatSearch::default();
        r.runout = RunOut::default();
    }
    // The precise total, split by the ratio of the (coarser) user and system counters.
    let busy = c1.total - c0.total;
    let (tu, tk) = (c1.user - c0.user, c1.system - c0.system);
    let ufrac = if tu + tk > 0.0 { tu / (tu + tk) } else { 0.5 };
    let (du, dk) = (busy * ufrac, busy * (1.0 - ufrac));
    let periods = c1.periods.0.saturating_sub(c0.periods.0);
    let throttled = c1.periods.1.saturating_sub(c0.periods.1);
    let capacity_s = cap * dt;
    let user_pct = 100.0 * du / capacity_s;
    let kernel_pct = 100.0 * dk / capacity_s;
    let idle_pct = 100.0 - user_pct - kernel_pct;
    let trial = matches!(
        pt.step,
        Step::Overload | Step::Rate { .. } | Step::Probe { .. }
    )
    .then_some(Trial {
        offered: target,
        served: requests as f64 / dt,
        p99_ms: p99,
        idle_pct,
    });
    if let Some(t) = trial {
        r.search.record(t);
        if pt.step == Step::Overload {
            r.runout.record_overload(&t);
        } else {
            r.runout.record(&t);
        }
    }
    let last_rate = matches!(pt.step, Step::Rate { idx, .. } if idx + 1 == s.p.fracs.len());
    // The samples go on through the probes: `triage capacity --steps` sees a probe that runs
    // a rate again as a second run of that step, a vote on where the CPU ran out, as the lab
    // counts it.
    let last_run = match pt.step {
        Step::Probe { idx } => idx + 1 == s.p.probes,
        _ => last_rate && s.p.probes == 0,
    };
    let cpu_csv = if last_run {
        match r.recorder.take() {
            Some(rec) => Some(rec.finish()?),
            None => None,
        }
    } else {
        None
    };
    Ok(Measured {
        server: r.server.name().into(),
        rep: pt.rep,
        cold: pt.cold,
        cold_held: r.cold.held(),
        step: step_name(pt.step).into(),
        frac,
        target_rps: target,
        rps: requests as f64 / dt,
        requests,
        errors,
        window_s: dt,
        cpu_s: du + dk,
        user_pct,
        kernel_pct,
        idle_pct,
        throttled_pct: (periods > 0).then(|| 100.0 * throttled as f64 / periods as f64),
        cpu_per_req_us: if requests > 0 {
            (du + dk) / requests as f64 * 1e6
        } else {
            f64::NAN
        },
        p50_ms: p50,
        p90_ms: p90,
        p99_ms: p99,
        rss_kib: rss(r)?,
        sustained: trial.map(|t| t.sustained()),
        failed_on: trial.and_then(|t| t.failed_on()),
        client_cpu_pct: Some(client_cpu_pct),
        client_cpu_busy_pct,
        client_fifo: rt_held,
        // The server side's ticks against the CPU's (both sampled by the same ticks, so that
        // the sampling of a throttled server's short bursts cancels).
        server_cpu_others_pct: server_cpu_busy_pct.map(|b| b - 100.0 * (tu + tk) / wall),
        cold_step: r.cold_step,
        cold_alive: last_rate.then(|| r.cold.alive()),
        cpu_csv,
        access_log: r.access_log.clone(),
        pairs: Vec::new(),
        note: r.limit_note.clone(),
        page: s.p.page.name(),
        quota_pct: s.p.quota.map(|q| q * 100.0),
        body_bytes_per_req: bodies.map(|b| b.wire),
        decoded_bytes_per_req: bodies.map(|b| b.decoded),
    })
}

/// Mean body bytes per response of an open-loop run: as on the wire, and decoded.
#[derive(Debug, Clone, Copy)]
struct Bodies {
    wire: f64,
    decoded: f64,
}

/// The window a run's rate and CPU shares are read over (s): the load generator's own run,
/// from its schedule's start to its last response (`load_s`, loadgen's `duration_s`), when it
/// has one within the call's `wall` time; else the call. The call also holds loadgen's runtime
/// starting and shutting down (up to 100 ms waiting for its last tasks), when the server has
/// nothing to do: counted in, that time read as idle CPU and lowered the rate served, by up to
/// 3 points and 3% in a 3 s run (a run that served all 50810 requests offered in 3 s read 3.3%
/// idle and "not sustained" over a 3.101 s call), which is what decides whether a rate near
/// the knee counts as out of CPU. `triage capacity` reads the log's whole seconds, which hold
/// no such tail. The server's CPU is still read around the whole call: what it does outside
/// the run (accepting and closing the generator's connections) is a few hundred microseconds.
pub fn run_window_s(wall: f64, load_s: Option<f64>) -> f64 {
    match load_s {
        Some(d) if d > 0.0 && d <= wall => d,
        _ => wall,
    }
}

/// The time left to the next whole second of the wall clock (the access logs' resolution).
pub fn to_next_second() -> Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Duration::from_secs(1) - Duration::from_nanos(u64::from(now.subsec_nanos()))
}

/// A step's name in raw.csv and summary.json.
pub fn step_name(s: Step) -> &'static str {
    match s {
        Step::Saturate => "saturate",
        Step::Overload => "overload",
        Step::Rate { .. } => "rate",
        Step::Probe { .. } => "probe",
        Step::Pairs => "pairs",
    }
}

/// One short wrk run against `addr`: requests served, the server side's CPU (s) and the
/// window (s).
fn wrk_cpu(s: &Setup<'_>, addr: SocketAddr, label: &str) -> Result<(u64, f64, f64)> {
    let mut spec = WrkSpec::new(
        format!("http://{addr}{FILE}"),
        s.p.hot_conns,
        Duration::from_secs(s.p.pair_window_s),
    );
    spec.timeout = Some(Duration::from_secs(5));
    let c0 = cpu_now(s.tb)?;
    let t0 = Instant::now();
    let w = Wrk::run(s.tb, label, &spec)?;
    let dt = t0.elapsed().as_secs_f64();
    let c1 = cpu_now(s.tb)?;
    if w.requests == 0 {
        return Err(LabError::Results(format!(
            "{label}: wrk completed no request"
        )));
    }
    Ok((w.requests, c1.total - c0.total, dt))
}

/// The server side's CPU quota set to `quota` (`None`: none) for as long as it lives, and set
/// back to `back` after. The pairs run on the small file's budget whatever the page.
struct QuotaFor<'a> {
    cg: &'a os::Cgroup,
    back: Option<f64>,
    period: Duration,
}

impl<'a> QuotaFor<'a> {
    fn set(s: &'a Setup<'_>, quota: Option<f64>, back: Option<f64>) -> Result<QuotaFor<'a>> {
        let cg =
            s.tb.server_cgroup()
                .ok_or_else(|| LabError::Os("the server side has no cgroup".into()))?;
        let period = Duration::from_micros((s.p.period_ms * 1e3).round() as u64);
        cg.set_cpu_max(quota, period)
            .map_err(|e| LabError::Os(format!("setting the pairs' CPU quota: {e}")))?;
        Ok(QuotaFor { cg, back, period })
    }
}

impl Drop for QuotaFor<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.cg.set_cpu_max(self.back, self.period) {
            tracing::warn!("setting the server side's CPU quota back after the pairs: {e}");
        }
    }
}

/// The pairs: per pair one short wrk run against the server (its cold connections held) and
/// one against its twin (none), in alternating order (ABBA), so that what changes on the
/// machine over seconds falls on both alike. The point's own figures are the server's side.
/// They request the small file on the pairs' quota (`--pairs-quota`), whatever the capacity
/// runs' page and quota: a request of the gzip page costs about 2 ms, against which what the
/// cold connections add to a request (tens of microseconds on poll, a few on epoll) would
/// vanish in the noise.
fn measure_pairs(s: &Setup<'_>, r: &mut Running, pt: &EvPoint) -> Result<Measured> {
    let _quota = (s.p.pairs_quota != s.p.quota)
        .then(|| QuotaFor::set(s, s.p.pairs_quota, s.p.quota))
        .transpose()?;
    let twin = r
        .twin
        .as_ref()
        .ok_or_else(|| LabError::Results("pairs asked for without a twin".into()))?
        .addr;
    let name = r.server.name();
    let server_cpu0 = CpuAtStart::now(s.tb.info().server_cpu);
    let side0 = cpu_now(s.tb)?;
    let (mut requests, mut cpu_s, mut window_s) = (0u64, 0.0, 0.0);
    let mut pairs = Vec::with_capacity(s.p.pairs);
    for i in 0..s.p.pairs {
        let mut got = [0.0f64; 2];
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let (addr, label) = if k == 0 {
                (r.addr, format!("wrk-{name}"))
            } else {
                (twin, format!("wrk-{name}-twin"))
            };
            let rt = client_rt(s.p);
            let (n, c, dt) = wrk_cpu(s, addr, &label)?;
            drop(rt);
            got[k] = c / n as f64 * 1e6;
            if k == 0 {
                requests += n;
                cpu_s += c;
                window_s += dt;
            }
        }
        pairs.push((got[0], got[1]));
    }
    let busy_pct = 100.0 * cpu_s / (s.p.pairs_capacity() * window_s);
    // Both processes' CPU over the whole step against the server CPU's busy time, in ticks.
    let side1 = cpu_now(s.tb)?;
    let side_s = (side1.user - side0.user) + (side1.system - side0.system);
    let elapsed = server_cpu0.t.elapsed().as_secs_f64().max(1e-9);
    let server_cpu_others_pct = server_cpu0.since().1.map(|b| b - 100.0 * side_s / elapsed);
    Ok(Measured {
        server: name.into(),
        rep: pt.rep,
        cold: pt.cold,
        cold_held: r.cold.held(),
        step: step_name(pt.step).into(),
        frac: None,
        target_rps: 0.0,
        rps: requests as f64 / window_s,
        requests,
        errors: 0,
        window_s,
        cpu_s,
        user_pct: f64::NAN,
        kernel_pct: f64::NAN,
        idle_pct: 100.0 - busy_pct,
        throttled_pct: None,
        cpu_per_req_us: cpu_s / requests as f64 * 1e6,
        p50_ms: f64::NAN,
        p90_ms: f64::NAN,
        p99_ms: f64::NAN,
        rss_kib: rss(r)?,
        sustained: None,
        failed_on: None,
        client_cpu_pct: None,
        client_cpu_busy_pct: None,
        client_fifo: s.p.client_fifo,
        server_cpu_others_pct,
        cold_step: r.cold_step,
        cold_alive: Some(r.cold.alive()),
        cpu_csv: None,
        access_log: r.access_log.clone(),
        pairs,
        note: r.limit_note.clone(),
        page: super::opts::Page::Small.name(),
        quota_pct: s.p.pairs_quota.map(|q| q * 100.0),
        body_bytes_per_req: None,
        decoded_bytes_per_req: None,
    })
}

/// Stop `r` (its cold connections first); returns the end of its log.
pub fn stop(mut r: Running) -> String {
    if let Some(rec) = r.recorder.take() {
        let _ = rec.finish();
    }
    r.cold.clear();
    let log = r.child.log_tail(1500);
    r.child.stop(Duration::from_secs(5));
    if let Some(mut t) = r.twin.take() {
        t.child.stop(Duration::from_secs(5));
    }
    log
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_read_over_the_generators_own_window_not_the_call() {
        // cap8-quick5, lighttpd-epoll at 0 cold: 50810 requests offered at 16937 req/s for
        // 3 s, the call 3.101 s (loadgen's runtime waiting out its last tasks).
        let (requests, offered, cpu_s, quota) = (50810.0, 16936.6, 0.5999, 0.2);
        let idle = |w: f64| 100.0 - 100.0 * cpu_s / (quota * w);
        let w = run_window_s(3.101, Some(3.0));
        assert_eq!(w, 3.0);
        assert!(
            idle(w) < 0.1 && idle(3.101) > 3.0,
            "{} {}",
            idle(w),
            idle(3.101)
        );
        assert!(requests / w >= 0.97 * offered && requests / 3.101 < 0.97 * offered);
        // wrk's runs have no window of their own; nor is one longer than the call believed.
        assert_eq!(run_window_s(3.02, None), 3.02);
        assert_eq!(run_window_s(3.02, Some(3.5)), 3.02);
        assert_eq!(run_window_s(3.02, Some(0.0)), 3.02);
    }

    #[test]
    fn the_gzip_page_is_the_same_text_every_time_and_compresses_as_prose() {
        use std::io::Write as _;
        let a = gzip_page(64 * 1024, PAGE_SEED);
        assert_eq!(a.len(), 64 * 1024);
        assert_eq!(a, gzip_page(64 * 1024, PAGE_SEED), "seeded: the same page");
        assert_ne!(a, gzip_page(64 * 1024, PAGE_SEED + 1));
        let text = std::str::from_utf8(&a).unwrap();
        assert!(text.starts_with("<!DOCTYPE html>") && text.ends_with("</body></html>\n"));
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        z.write_all(&a).unwrap();
        let ratio = a.len() as f64 / z.finish().unwrap().len() as f64;
        assert!((3.0..8.0).contains(&ratio), "compresses {ratio:.2}x");
    }

    #[test]
    fn limits_follow_each_servers_rule() {
        assert_eq!(cold_limit(Server::Triage, 20_000, 16).0, 20_000 - 16 - 128);
        assert_eq!(
            cold_limit(Server::LighttpdPoll, 20_000, 16).0,
            10_000 - 16 - 16
        );
        assert_eq!(
            cold_limit(Server::LighttpdSelect, 20_000, 16).0,
            512 - 16 - 16
        );
        assert!(cold_limit(Server::LighttpdEpoll, 20_000, 16)
            .1
            .contains("max-fds/2"));
    }
}
