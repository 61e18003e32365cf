//! One run: one server variant on the testbed under one load, measured.
//!
//! [`Bench::run`] starts the server under test on the server side (triage as
//! `<this binary> serve ...`, or a peer from [`crate::peers`]), the CPU hog if the variant has
//! one, the PL/LRQ samplers, then the load generator as `<this binary> load ...` on the client
//! side with a trace of page requests the lab wrote (so every variant gets exactly the same
//! arrivals), waits for it, stops everything and reads the load's `pages.csv`. The lab measures
//! exactly what users run: the same binary and flags.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{LabError, Result};
use crate::peers::{Gzip, Peer, PeerSite, Prefork};
use crate::process::log_tail;
use crate::results::{parse_pages_csv, Page};
use crate::sampler::{CpuSampler, GatePoller, GateStats, PlLrq};
use crate::site::Site;
use crate::testbed::Testbed;

/// Which server a variant runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "server")]
pub enum ServerKind {
    /// `triage serve` with these extra flags (policy, SLP, RW, boost...).
    Triage {
        /// The flags.
        args: Vec<String>,
    },
    /// A peer with its default configuration for the lab.
    Peer {
        /// Which.
        peer: Peer,
    },
}

/// A named configuration to compare.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Variant {
    /// Short name (`fifo`, `pos-rw3`, `nginx`...).
    pub name: String,
    /// What it runs.
    #[serde(flatten)]
    pub server: ServerKind,
    /// Run the CPU hog beside the server.
    pub hog: bool,
    /// Run `triage pos attach --pid <server> <these flags>` on the client side beside the
    /// server (the `+pos` variants of unmodified servers); `None`: no daemon.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attach: Option<Vec<String>>,
    /// Also give the daemon the server's front (php-fpm's nginx) with `--front-pid`, to be
    /// raised with the followed tasks (no-op for a server without a front).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub attach_front: bool,
    /// The daemon's lever runs raised tasks on a second, real-time budget (`--lever fifo`):
    /// the run grants the server side's cgroup real-time time as large as its quota
    /// ([`crate::testbed::Testbed::grant_realtime`]), and the variant is a labelled reference,
    /// not one measured inside the one CPU budget.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub realtime_reference: bool,
}

impl Variant {
    /// A triage variant.
    pub fn triage(name: &str, args: &[&str], hog: bool) -> Variant {
        Variant {
            name: name.to_owned(),
            server: ServerKind::Triage {
                args: args.iter().map(|s| s.to_string()).collect(),
            },
            hog,
            attach: None,
            attach_front: false,
            realtime_reference: false,
        }
    }

    /// A peer variant.
    pub fn peer(peer: Peer, hog: bool) -> Variant {
        Variant {
            name: peer.name().to_owned(),
            server: ServerKind::Peer { peer },
            hog,
            attach: None,
            attach_front: false,
            realtime_reference: false,
        }
    }

    /// This variant with `triage pos attach` following its server, named `name`.
    pub fn with_attach(mut self, name: &str, flags: &[&str]) -> Variant {
        self.name = name.to_owned();
        self.attach = Some(flags.iter().map(|s| s.to_string()).collect());
        self
    }

    /// This variant with the server's front raised with the followed tasks
    /// ([`Variant::attach_front`]).
    pub fn with_front(mut self) -> Variant {
        self.attach_front = true;
        self
    }

    /// This variant as a real-time reference ([`Variant::realtime_reference`]).
    pub fn with_realtime_reference(mut self) -> Variant {
        self.realtime_reference = true;
        self
    }

    /// The peer, if this is one.
    pub fn peer_kind(&self) -> Option<Peer> {
        match self.server {
            ServerKind::Peer { peer } => Some(peer),
            ServerKind::Triage { .. } => None,
        }
    }
}

/// The load of one run.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// `triage load` trace text: `<ms offset> /path browser` per line.
    pub trace: String,
    /// Browsers in the trace.
    pub browsers: usize,
    /// Parallel connections per browser (K).
    pub parallel: usize,
    /// Time covered by the trace (the load stops scheduling after it).
    pub duration: Duration,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Seed of the load generator.
    pub seed: u64,
    /// More `triage load` flags.
    pub extra: Vec<String>,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Every page the load fetched (or failed to).
    pub pages: Vec<Page>,
    /// PL/LRQ from the cgroup (all servers alike).
    pub cpu: PlLrq,
    /// triage's gate view (triage only).
    pub gate: Option<GateStats>,
    /// Wall time of the load (s).
    pub wall_s: f64,
    /// The load generator's own summary.json.
    pub load_summary: Option<serde_json::Value>,
    /// The server side's tbf counters over the run (`None` without namespaces).
    pub link: Option<crate::testbed::LinkCounters>,
    /// The `+pos` variants: what the `triage pos attach` daemon did (its `/metrics` at the end
    /// of the load); `None` without a daemon or if it did not answer.
    pub daemon: Option<crate::daemon_stats::DaemonStats>,
    /// The `+pos` variants of servers whose access log the lab reads (php-fpm): marked
    /// service episodes and what they served.
    pub marking: Option<crate::marking::MarkingAccuracy>,
}

/// Everything the runs of a lab share.
pub struct Bench<'a> {
    /// The testbed.
    pub tb: &'a Testbed,
    /// The `triage` binary (normally `std::env::current_exe()`).
    pub triage_bin: PathBuf,
    /// The site every server serves.
    pub site: &'a Site,
    /// On-the-fly compression, the same for every server (`None`: off).
    pub gzip: Option<Gzip>,
    /// Apache's prefork pool.
    pub prefork: Prefork,
    /// Keep-alive timeout of every server (s).
    pub keepalive_s: u32,
    /// A `triage serve` configuration file that holds the site (its CGI script directories):
    /// triage variants get `--config FILE` instead of `--root` (`triage lab pos --site cgi`).
    pub serve_config: Option<PathBuf>,
    /// Every peer logs its requests with their times (Apache's [`APACHE_ACCESS_LOG`], nginx's
    /// in front of php-fpm `nginx/access.log`), not only a `+pos` Apache.
    pub access_logs: bool,
}

fn os(s: impl Into<OsString>) -> OsString {
    s.into()
}

impl Bench<'_> {
    /// The `triage serve` command line of a variant.
    pub fn triage_args(
        &self,
        extra: &[String],
        listen: SocketAddr,
        admin: SocketAddr,
    ) -> Vec<OsString> {
        let mut a = match &self.serve_config {
            Some(c) => vec![os("serve"), os("--config"), c.clone().into_os_string()],
            None => vec![
                os("serve"),
                os("--root"),
                self.site.root.clone().into_os_string(),
            ],
        };
        a.extend([
            os("--listen"),
            os(listen.to_string()),
            os("--admin"),
            os(admin.to_string()),
            os("--slots"),
            os("1"),
            os("--keepalive-timeout"),
            os(format!("{}s", self.keepalive_s)),
        ]);
        if let Some(g) = &self.gzip {
            a.push(os("--gzip-level"));
            a.push(os(g.level.to_string()));
        }
        a.extend(extra.iter().map(os));
        a
    }

    /// Start `triage pos attach` on the client side, following the server `pid` and its
    /// children for the load's duration and a margin, logging to `dir/attach.log`.
    fn spawn_attach(
        &self,
        pid: u32,
        front: Option<u32>,
        flags: &[String],
        load: &LoadPlan,
        dir: &Path,
        admin: SocketAddr,
    ) -> Result<crate::process::Managed> {
        let mut args = vec![
            os("pos"),
            os("attach"),
            os("--pid"),
            os(pid.to_string()),
            os("--admin"),
            os(admin.to_string()),
            os("--actions-log"),
            dir.join(ACTIONS_LOG).into_os_string(),
            os("--duration"),
            os(format!(
                "{}ms",
                (load.duration + load.timeout * 2 + Duration::from_secs(40)).as_millis()
            )),
            os("--report-every"),
            os("1s"),
        ];
        if let Some(f) = front {
            args.extend([os("--front-pid"), os(f.to_string())]);
        }
        args.extend(flags.iter().map(os));
        self.tb.spawn_client(
            "triage pos attach",
            &self.triage_bin,
            &args,
            Some(dir.join("attach.log")),
        )
    }

    /// Start `front` (php-fpm's nginx) on the server side once `server` (php-fpm) has created
    /// `ready` (its socket): nginx's first requests must not find the pool missing. Logs to
    /// `dir/front.log`.
    fn start_front(
        &self,
        front: &crate::peers::Prepared,
        ready: Option<&Path>,
        server: &mut crate::process::Managed,
        dir: &Path,
    ) -> Result<crate::process::Managed> {
        let end = Instant::now() + Duration::from_secs(15);
        while let Some(s) = ready {
            if s.exists() {
                break;
            }
            if let Some(st) = server.try_wait()? {
                return Err(LabError::Process {
                    name: server.label().to_owned(),
                    msg: format!("exited ({st}) before its socket: {}", server.log_tail(2000)),
                });
            }
            if Instant::now() >= end {
                return Err(LabError::Process {
                    name: server.label().to_owned(),
                    msg: format!(
                        "no socket {} after 15 s: {}",
                        s.display(),
                        server.log_tail(2000)
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.tb.spawn_server_side(
            &format!("{} (front)", front.peer.name()),
            &front.program,
            &front.args,
            Some(dir.join("front.log")),
        )
    }

    /// Run `v` under `load`, keeping logs and the load's output in `dir`.
    pub fn run(&self, v: &Variant, load: &LoadPlan, dir: &Path) -> Result<RunOutcome> {
        std::fs::create_dir_all(dir).map_err(|e| LabError::io("creating", dir, e))?;
        let addr = self.tb.server_addr()?;
        let mut admin = None;
        // A process in front of the server (php-fpm's nginx): started after it, stopped after
        // the run with it; the server is the one a `+pos` daemon follows.
        let mut front = None;
        let mut server = match &v.server {
            ServerKind::Triage { args } => {
                let a = self.tb.server_addr()?;
                admin = Some(a);
                self.tb.spawn_server_side(
                    &format!("triage serve ({})", v.name),
                    &self.triage_bin,
                    &self.triage_args(args, addr, a),
                    Some(dir.join("server.log")),
                )?
            }
            ServerKind::Peer { peer } => {
                let site = PeerSite {
                    root: self.site.root.clone(),
                    listen: addr,
                    gzip: self.gzip.clone(),
                    keepalive_s: self.keepalive_s,
                    // A `+pos` Apache logs its requests: the daemon's marking is read
                    // against them.
                    extra: match (peer, &v.attach) {
                        (Peer::Apache, Some(_)) => crate::peers::apache_access_log(
                            &dir.join(peer.name()).join(APACHE_ACCESS_LOG),
                        ),
                        (Peer::Apache, None) if self.access_logs => {
                            crate::peers::apache_access_log(
                                &dir.join(peer.name()).join(APACHE_ACCESS_LOG),
                            )
                        }
                        _ => String::new(),
                    },
                };
                let mut tuning = crate::peers::PeerTuning {
                    prefork: self.prefork,
                    ..crate::peers::PeerTuning::default()
                };
                if self.access_logs && *peer == Peer::PhpFpm {
                    // nginx in front of php-fpm, under `<peer dir>/nginx`.
                    tuning.nginx.access_log = Some(
                        dir.join(peer.name())
                            .join("nginx")
                            .join(crate::peers::NGINX_ACCESS_LOG),
                    );
                }
                let p = peer.prepare_tuned(&dir.join(peer.name()), &site, &tuning)?;
                let mut server = self.tb.spawn_server_side(
                    peer.name(),
                    &p.program,
                    &p.args,
                    Some(dir.join("server.log")),
                )?;
                if let Some(f) = &p.front {
                    front = Some(self.start_front(f, p.ready_path.as_deref(), &mut server, dir)?);
                }
                server
            }
        };
        match front.as_mut() {
            Some(f) => self.tb.wait_listening(addr, f, Duration::from_secs(15))?,
            None => self
                .tb
                .wait_listening(addr, &mut server, Duration::from_secs(15))?,
        }
        let mut hog = if v.hog {
            Some(self.tb.spawn_hog()?)
        } else {
            None
        };
        // A real-time reference: real-time time for the server side, held until its tasks
        // are stopped (a cgroup holding a real-time task refuses to give it back).
        let realtime = if v.realtime_reference {
            Some(self.tb.grant_realtime()?)
        } else {
            None
        };
        // The daemon's /metrics, on the client side's loopback.
        let mut daemon_admin = None;
        let mut daemon = match &v.attach {
            Some(flags) => {
                let a = SocketAddr::from(([127, 0, 0, 1], self.tb.server_addr()?.port()));
                daemon_admin = Some(a);
                let f = front.as_ref().filter(|_| v.attach_front).map(|f| f.pid());
                Some(self.spawn_attach(server.pid(), f, flags, load, dir, a)?)
            }
            None => None,
        };
        // Let the hog take its share and the server's workers go idle before the first page.
        crate::signals::sleep(Duration::from_millis(300))?;
        let trace = dir.join("trace.txt");
        crate::results::write_file(&trace, load.trace.as_bytes())?;
        let out = dir.join("load");
        let mut args = vec![
            os("load"),
            os(format!("http://{addr}/b{{browser}}/index.html")),
            os("--mode"),
            os("trace"),
            os("--trace"),
            trace.into_os_string(),
            os("--parallel"),
            os(load.parallel.to_string()),
            os("--duration"),
            os(format!("{}ms", load.duration.as_millis().max(1))),
            os("--timeout"),
            os(format!("{}ms", load.timeout.as_millis())),
            os("--seed"),
            os(load.seed.to_string()),
            os("--out"),
            out.clone().into_os_string(),
            os("--quiet"),
        ];
        if let Some(rate) = self.tb.client_rate() {
            // No shaped link: each connection reads at the link rate shared by the browsers.
            let per = (rate as f64 / load.browsers.max(1) as f64).max(1.0);
            args.push(os("--throttle"));
            args.push(os(format!("{}", per.round() as u64)));
        }
        args.extend(load.extra.iter().map(os));
        let sampler =
            CpuSampler::start(self.tb.server_cgroup().cloned(), self.tb.server_capacity());
        let poller = admin.map(|a| GatePoller::start(self.tb, a, Duration::from_millis(500)));
        let link0 = self.tb.link_counters();
        let t0 = Instant::now();
        let mut client = self.tb.spawn_client(
            "triage load",
            &self.triage_bin,
            &args,
            Some(dir.join("load.log")),
        )?;
        let deadline = t0 + load.duration + load.timeout * 2 + Duration::from_secs(30);
        let status = client.wait_until(deadline)?;
        let wall_s = t0.elapsed().as_secs_f64();
        let link = link0.and_then(|a| Some(self.tb.link_counters()?.since(&a)));
        let cpu = sampler.finish();
        let gate = poller.and_then(GatePoller::finish);
        if let Some(h) = hog.as_mut() {
            h.stop(Duration::from_millis(200));
        }
        let mut daemon_stats = None;
        if let (Some(d), Some(admin)) = (daemon.as_mut(), daemon_admin) {
            // A few tries: the daemon shares the client's CPU with the load's last moments.
            for _ in 0..3 {
                daemon_stats = self
                    .tb
                    .in_client_ns(|| {
                        crate::testbed::http_get(admin, "/metrics", Duration::from_secs(2))
                    })?
                    .ok()
                    .and_then(|t| crate::daemon_stats::DaemonStats::from_metrics(&t));
                if daemon_stats.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            // SIGTERM: the daemon restores every task it raised before it exits.
            d.stop(Duration::from_secs(3));
        }
        let server_status = server.try_wait()?;
        if let Some(f) = front.as_mut() {
            f.stop(Duration::from_secs(3));
        }
        server.stop(Duration::from_secs(3));
        if let Some(cg) = self.tb.server_cgroup() {
            let _ = cg.kill_all();
        }
        drop(realtime);
        let Some(status) = status else {
            return Err(LabError::Process {
                name: "triage load".into(),
                msg: format!("still running after {:.0} s; stopped", wall_s),
            });
        };
        if !status.success() {
            return Err(LabError::Process {
                name: "triage load".into(),
                msg: format!("{status}: {}", log_tail(Some(&dir.join("load.log")), 2000)),
            });
        }
        if let Some(s) = server_status {
            return Err(LabError::Process {
                name: v.name.clone(),
                msg: format!(
                    "server exited during the run ({s}): {}",
                    server.log_tail(2000)
                ),
            });
        }
        let csv_path = out.join("pages.csv");
        let text = std::fs::read_to_string(&csv_path)
            .map_err(|e| LabError::io("reading", &csv_path, e))?;
        let pages = parse_pages_csv(&text)?;
        let load_summary = std::fs::read_to_string(out.join("summary.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        Ok(RunOutcome {
            pages,
            cpu,
            gate,
            wall_s,
            load_summary,
            link,
            daemon: daemon_stats,
            marking: v.attach.as_ref().and_then(|_| marking(v, dir)),
        })
    }
}

/// The daemon's decisions in a run's directory (`triage pos attach --actions-log`).
const ACTIONS_LOG: &str = "actions.log";

/// The marking accuracy of `v`'s daemon, from its decisions and the server's access log
/// (php-fpm's; other servers keep none the lab reads).
fn marking(v: &Variant, dir: &Path) -> Option<crate::marking::MarkingAccuracy> {
    let peer = v.peer_kind()?;
    let read = |name: &str| std::fs::read_to_string(dir.join(peer.name()).join(name)).ok();
    let episodes = match peer {
        Peer::PhpFpm => crate::marking::parse_fpm_access(&read(crate::peers::ACCESS_LOG)?),
        Peer::Apache => crate::marking::parse_apache_access(&read(APACHE_ACCESS_LOG)?),
        _ => return None,
    };
    let acts = std::fs::read_to_string(dir.join(ACTIONS_LOG)).ok()?;
    Some(crate::marking::accuracy(
        &episodes,
        &crate::marking::parse_actions(&acts),
    ))
}

/// The access log of a `+pos` Apache, in its directory.
const APACHE_ACCESS_LOG: &str = "access.log";
