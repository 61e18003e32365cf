//! The testbed a lab builds for itself and removes when it ends.
//!
//! ```text
//!   CPU 0, cgroup <quota>                     CPU 1
//!  +------------------------------+        +----------------------+
//!  | netns triage-lab-<pid>-<n>-s |  veth  | netns ...-c          |
//!  |  server under test (+ hog)   |<======>|  load generator      |
//!  |  10.77.0.1    tbf <rate>     |        |  10.77.0.2  tbf      |
//!  +------------------------------+        +----------------------+
//! ```
//!
//! - **CPU**: the server side (the server under test, its CPU hog, its CGI) is pinned to one CPU
//!   (before exec, through `os::cpu`) and placed in one cgroup (`os` crate) whose CPU quota
//!   emulates a slower CPU, identical for triage and every peer; the load generator is pinned
//!   to the other CPU.
//! - **Twin server side** (`TestbedConfig::twin`): a second server-side cgroup beside the first,
//!   with the same quota on the same CPU, for a reference server measured in the same windows
//!   as the server under test ([`ServerSide::Twin`]): a machine whose speed drifts (a shared
//!   host) moves both alike, so their ratio is free of the drift.
//! - **Network** (as root): two network namespaces joined by a veth pair, each end shaped by a
//!   `tbf` qdisc (default 10 Mbit/s, the paper's Ethernet; this kernel has no netem, so no
//!   added delay). All traffic stays inside namespaces the lab created. Without root (or
//!   without `ip`), the server listens on loopback and the load generator throttles its reading
//!   instead ([`Testbed::client_rate`]); the testbed records which one it used. See [`net`].
//! - **Cleanup**: dropping the [`Testbed`] kills every process in the server cgroup, removes
//!   the cgroups, deletes the namespaces (the veth goes with them) and the work directory. The
//!   children the lab starts are [`crate::process::Managed`] guards dropped before it. Network
//!   namespaces of a crashed earlier lab (dead pid in the name) are removed on the next start.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{LabError, Result};
use crate::process::{run_cmd, which, Launch, Managed};
use crate::signals;

pub mod net;

use net::{stale_netns, NetnsPair};
pub use net::{LinkCounters, CLIENT_IP, SERVER_IP};

/// How to emulate the network (`--net`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum NetMode {
    /// Network namespaces + veth (+ tbf) when root and `ip`/`tc` are there, loopback otherwise.
    Auto,
    /// Network namespaces + veth + tbf (an error when impossible).
    Netns,
    /// Loopback (the pos lab throttles reading on the client side).
    Loopback,
}

/// Which server side of the testbed a process runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerSide {
    /// The server under test's cgroup.
    Main,
    /// The twin's cgroup (same quota, same CPU; only with `TestbedConfig::twin`).
    Twin,
}

/// What to build.
#[derive(Debug, Clone)]
pub struct TestbedConfig {
    /// Short tag used in names (`pos`, `containers`...).
    pub tag: String,
    /// CPU quota of the server side as a fraction of one CPU (`None`: no quota).
    pub quota: Option<f64>,
    /// CFS period of the quota (short periods emulate a slow CPU more smoothly).
    pub period: Duration,
    /// The CPU of the server side.
    pub server_cpu: usize,
    /// Every CPU a server-side process may be pinned to, when more than `server_cpu` (the
    /// server cgroup's cpuset; `triage bench static --cores` pins each server to a prefix of
    /// them). Empty: `server_cpu` alone.
    pub server_cpus: Vec<usize>,
    /// The CPU of the load generator (and of the lab itself).
    pub client_cpu: usize,
    /// How to emulate the network.
    pub net: NetMode,
    /// Link rate in Mbit/s.
    pub rate_mbit: f64,
    /// TCP congestion control of the server namespace (the senders), e.g. `bbr`; `None`: the
    /// kernel's default. Only with network namespaces.
    pub tcp_cc: Option<String>,
    /// Also build a twin server side: a second cgroup with the same quota on the same CPU, for
    /// a reference server measured at the same time as the one under test.
    pub twin: bool,
    /// The twin side's quota when it differs from `quota` (a smaller reference leaves the
    /// CPU unsaturated beside a large quota); `None`: the same as `quota`.
    pub twin_quota: Option<f64>,
    /// The main server side's processes go into a leaf cgroup ([`SERVER_LEAF`]) below the
    /// cgroup that holds the quota, instead of into that cgroup itself: a sibling of the leaf
    /// (the cgroup-weight lever's boost cgroup, `triage pos attach --lever weight`) then
    /// shares the one budget.
    pub server_leaf: bool,
    /// Turn cgroup `favordynmods` on before anything runs ([`os::dynmods`]): moves between
    /// cgroups (the weight lever's) then no longer wait for an RCU grace period. Set before
    /// the first variant, so that every variant of a run meets the same kernel.
    pub favor_dynmods: bool,
}

/// Name of the leaf cgroup, below the server side's quota, that holds the server side's
/// processes with [`TestbedConfig::server_leaf`].
pub const SERVER_LEAF: &str = "leaf";

impl Default for TestbedConfig {
    fn default() -> Self {
        TestbedConfig {
            tag: "lab".into(),
            quota: None,
            period: Duration::from_millis(10),
            server_cpu: 0,
            server_cpus: Vec::new(),
            client_cpu: 1,
            net: NetMode::Auto,
            rate_mbit: 10.0,
            tcp_cc: None,
            twin: false,
            twin_quota: None,
            server_leaf: false,
            favor_dynmods: false,
        }
    }
}

/// What was actually built (goes into every summary).
#[derive(Debug, Clone, Serialize)]
pub struct TestbedInfo {
    /// Whether the lab ran as root.
    pub root: bool,
    /// `netns` or `loopback`.
    pub network: String,
    /// How the link rate is enforced.
    pub shaping: String,
    /// Link rate (Mbit/s).
    pub rate_mbit: f64,
    /// CPU quota of the server side (fraction of one CPU), if applied.
    pub quota: Option<f64>,
    /// CFS period of the quota (ms).
    pub period_ms: f64,
    /// `v1`, `v2`, or `none`.
    pub cgroup: String,
    /// The server side's CPU, when pinned.
    pub server_cpu: Option<usize>,
    /// The load generator's CPU, when pinned.
    pub client_cpu: Option<usize>,
    /// CPUs online.
    pub cpus: usize,
    /// Everything weaker than asked, said plainly.
    pub notes: Vec<String>,
    /// Why there is no server cgroup (the `os` error, naming what is missing), if there is none.
    pub cgroup_error: Option<String>,
    /// Whether a cgroup hierarchy shows `favordynmods` once the testbed is built
    /// ([`TestbedConfig::favor_dynmods`]; the notes say who set it).
    pub favordynmods: bool,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The testbed. See the module docs.
pub struct Testbed {
    cfg: TestbedConfig,
    info: TestbedInfo,
    // Field order is drop order: cgroup (kills the server side) before the namespaces,
    // namespaces before the work directory.
    server_cg: Option<os::Cgroup>,
    /// The leaf below `server_cg` that holds the main side's processes
    /// ([`TestbedConfig::server_leaf`]); removed with `server_cg`.
    server_leaf: Option<os::Cgroup>,
    /// The twin server side's cgroup (`TestbedConfig::twin`): a reference server's.
    twin_cg: Option<os::Cgroup>,
    cg_root: Option<os::CgroupRoot>,
    net: Option<NetnsPair>,
    workdir: tempfile::TempDir,
    next_port: AtomicU16,
}

impl Testbed {
    /// Build the testbed described by `cfg`.
    pub fn new(cfg: TestbedConfig) -> Result<Testbed> {
        let pid = std::process::id();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let root = nix::unistd::geteuid().is_root();
        let cpus = os::cpu::online_cpus();
        let mut notes = Vec::new();
        let workdir = tempfile::Builder::new()
            .prefix(&format!("triage-lab-{}-{pid}-{n}-", cfg.tag))
            .tempdir()
            .map_err(|e| LabError::io("creating work dir in", std::env::temp_dir(), e))?;
        {
            use std::os::unix::fs::PermissionsExt;
            // Peers that drop privileges (Apache's children) must reach the site inside.
            std::fs::set_permissions(workdir.path(), std::fs::Permissions::from_mode(0o755))
                .map_err(|e| LabError::io("chmod", workdir.path(), e))?;
        }
        // Network.
        let want_netns = match cfg.net {
            NetMode::Loopback => false,
            NetMode::Netns => true,
            NetMode::Auto => {
                let ok = root && which("ip").is_some() && which("tc").is_some();
                if !ok {
                    notes.push(
                        "not root (or no ip/tc): loopback network with client-side throttled \
                         reading instead of netns + veth + tbf"
                            .into(),
                    );
                }
                ok
            }
        };
        let net = if want_netns {
            for stale in stale_netns() {
                tracing::info!("removing stale network namespace {stale}");
                let _ = run_cmd("ip", &["netns", "del", &stale]);
            }
            Some(NetnsPair::create(
                pid,
                n,
                cfg.rate_mbit,
                cfg.tcp_cc.as_deref(),
            )?)
        } else {
            if let Some(cc) = &cfg.tcp_cc {
                return Err(LabError::Config(format!(
                    "TCP congestion control {cc} is set in the server's network namespace, and \
                     this testbed has none (loopback: not root, or --net loopback)"
                )));
            }
            None
        };
        // CPU.
        let pin = cpus >= 2;
        if !pin {
            notes.push(format!(
                "only {cpus} CPU: server and load generator share it (no pinning)"
            ));
        }
        let mut cg_root = None;
        let mut server_cg = None;
        let mut server_leaf = None;
        let mut twin_cg = None;
        let mut cgroup = "none".to_owned();
        let mut cg_error = None;
        match os::CgroupRoot::open("triage-lab") {
            Ok(r) => {
                let side = |name: &str,
                            quota: Option<f64>,
                            notes: &mut Vec<String>|
                 -> Result<os::Cgroup> {
                    let cg = r
                        .create(&format!("{}-{n}/{name}", cfg.tag))
                        .map_err(|e| LabError::Os(format!("creating the {name} cgroup: {e}")))?;
                    if let Some(q) = quota {
                        cg.set_cpu_max(Some(q), cfg.period).map_err(|e| {
                            LabError::Os(format!("setting the CPU quota {q} of {name}: {e}"))
                        })?;
                    }
                    if pin {
                        let set = if cfg.server_cpus.is_empty() {
                            vec![cfg.server_cpu]
                        } else {
                            cfg.server_cpus.clone()
                        };
                        if let Err(e) = cg.set_cpus(&set) {
                            notes.push(format!(
                                "cpuset of {name} not applied ({e}); pinning by affinity only"
                            ));
                        }
                    }
                    Ok(cg)
                };
                let cg = side("server", cfg.quota, &mut notes)?;
                if cfg.server_leaf {
                    // Made after the parent's cpuset: a v1 cpuset starts as its parent's.
                    let leaf = r
                        .create(&format!("{}-{n}/server/{SERVER_LEAF}", cfg.tag))
                        .map_err(|e| {
                            LabError::Os(format!("creating the server's leaf cgroup: {e}"))
                        })?;
                    notes.push(format!(
                        "the quota on the server cgroup, every server-side process in its leaf \
                         cgroup `{SERVER_LEAF}`: a sibling of the leaf (the weight lever's boost \
                         cgroup) shares the budget"
                    ));
                    server_leaf = Some(leaf);
                }
                if cfg.twin {
                    let q = cfg.quota.and(cfg.twin_quota.or(cfg.quota));
                    twin_cg = Some(side("server-twin", q, &mut notes)?);
                    notes.push(format!(
                        "a twin server side for a reference server: its own cgroup on the same \
                         CPU, quota {}",
                        q.map_or("none".into(), |q| format!("{:.0}% of a CPU", q * 100.0))
                    ));
                }
                cgroup = match r.version() {
                    os::Version::V1 => "v1".into(),
                    os::Version::V2 => "v2".into(),
                };
                if let Some(k) = r.place_kind() {
                    notes.push(format!(
                        "cgroup v2: the lab's tree is at {} ({k})",
                        r.path().parent().unwrap_or(&r.path()).display()
                    ));
                }
                cg_root = Some(r);
                server_cg = Some(cg);
            }
            Err(e) => {
                notes.push(format!(
                    "no cgroup ({e}): no CPU quota, the server side is only pinned; the CPU is \
                     not made a bottleneck"
                ));
                cg_error = Some(e.to_string());
            }
        }
        if cfg.favor_dynmods {
            match os::dynmods::favor() {
                Ok(f) => notes.push(format!(
                    "cgroup favordynmods {f}: moves between cgroups do not wait for an RCU \
                     grace period (the kernel may keep it until reboot)"
                )),
                Err(e) => notes.push(format!(
                    "cgroup favordynmods not set ({e}): each move between cgroups may wait for \
                     an RCU grace period (milliseconds)"
                )),
            }
        }
        let favordynmods = matches!(os::dynmods::state(), Ok(os::dynmods::Favor::On(_)));
        let quota = if server_cg.is_some() { cfg.quota } else { None };
        let info = TestbedInfo {
            root,
            network: if net.is_some() { "netns" } else { "loopback" }.into(),
            shaping: if net.is_some() {
                format!(
                    "tbf {} Mbit/s on both veth ends{}",
                    cfg.rate_mbit,
                    cfg.tcp_cc
                        .as_ref()
                        .map(|cc| format!(", TCP congestion control {cc} on the server side"))
                        .unwrap_or_default()
                )
            } else {
                format!(
                    "client-side throttled reading, {} Mbit/s shared by the browsers",
                    cfg.rate_mbit
                )
            },
            rate_mbit: cfg.rate_mbit,
            quota,
            period_ms: cfg.period.as_secs_f64() * 1e3,
            cgroup,
            server_cpu: pin.then_some(cfg.server_cpu),
            client_cpu: pin.then_some(cfg.client_cpu),
            cpus,
            notes,
            cgroup_error: cg_error,
            favordynmods,
        };
        Ok(Testbed {
            cfg,
            info,
            server_cg,
            server_leaf,
            twin_cg,
            cg_root,
            net,
            workdir,
            next_port: AtomicU16::new(20_000),
        })
    }

    /// What was built.
    pub fn info(&self) -> &TestbedInfo {
        &self.info
    }

    /// A private directory removed with the testbed (world-readable, for peers' sites).
    pub fn workdir(&self) -> &Path {
        self.workdir.path()
    }

    /// The counters of the server side's tbf (`None` without namespaces, or if `tc` fails).
    pub fn link_counters(&self) -> Option<LinkCounters> {
        self.net.as_ref()?.link_counters()
    }

    /// Whether the network is emulated with namespaces.
    pub fn netns(&self) -> bool {
        self.net.is_some()
    }

    /// Client-side throttling rate (bytes/s for all browsers together) when the network is not
    /// shaped by tbf.
    pub fn client_rate(&self) -> Option<u64> {
        self.net
            .is_none()
            .then(|| (self.cfg.rate_mbit * 1e6 / 8.0) as u64)
    }

    /// The server-side cgroup, if there is one.
    pub fn server_cgroup(&self) -> Option<&os::Cgroup> {
        self.server_cg.as_ref()
    }

    /// The cgroup of server side `side` (the twin's only with `TestbedConfig::twin`): the one
    /// that holds its quota, and whose counters cover all of its processes.
    pub fn server_cgroup_of(&self, side: ServerSide) -> Option<&os::Cgroup> {
        match side {
            ServerSide::Main => self.server_cg.as_ref(),
            ServerSide::Twin => self.twin_cg.as_ref(),
        }
    }

    /// The cgroup the processes of server side `side` start in: its leaf with
    /// [`TestbedConfig::server_leaf`], else [`Testbed::server_cgroup_of`].
    pub fn process_cgroup_of(&self, side: ServerSide) -> Option<&os::Cgroup> {
        match side {
            ServerSide::Main => self.server_leaf.as_ref().or(self.server_cg.as_ref()),
            ServerSide::Twin => self.twin_cg.as_ref(),
        }
    }

    /// Grant the main server side's process cgroup (and the cgroups above it, where they have
    /// less) real-time time as large as its quota per quota period (95% of a CPU without
    /// one), for a real-time reference variant: a second budget beside the quota, which the
    /// fair class's quota does not count. Taken back when the grant is dropped (after the
    /// side's real-time tasks are gone). An empty grant where the kernel has no real-time
    /// group scheduling (the machine-wide limit applies).
    pub fn grant_realtime(&self) -> Result<os::lever::realtime::RtGrant> {
        let cg = self.process_cgroup_of(ServerSide::Main).ok_or_else(|| {
            LabError::Os("a real-time reference needs the server side's cgroup".into())
        })?;
        let share = self.info.quota.unwrap_or(0.95).min(0.95);
        let period = Duration::from_secs_f64(self.info.period_ms / 1e3);
        os::lever::weight::cpu_mount()
            .and_then(|m| os::lever::realtime::grant(&m, cg.path(), share, period))
            .map_err(|e| LabError::Os(format!("granting real-time time: {e}")))
    }

    /// The capacity of the server side in CPUs (its quota, or 1 CPU when pinned).
    pub fn server_capacity(&self) -> f64 {
        self.info.quota.unwrap_or(1.0)
    }

    /// A fresh address for a server to listen on (reachable by the load generator).
    pub fn server_addr(&self) -> Result<SocketAddr> {
        if self.net.is_some() {
            let port = self.next_port.fetch_add(1, Ordering::Relaxed);
            Ok(SocketAddr::new(IpAddr::V4(SERVER_IP), port))
        } else {
            let l = std::net::TcpListener::bind("127.0.0.1:0")
                .map_err(|e| LabError::Os(format!("finding a free port: {e}")))?;
            l.local_addr()
                .map_err(|e| LabError::Os(format!("finding a free port: {e}")))
        }
    }

    /// A launch of `program` on the server side (pinned, in the server cgroup and namespace),
    /// for callers that set more of it (environment, separate stdout) before spawning.
    pub fn server_launch(&self, label: &str, program: &Path) -> Launch<'_> {
        self.launch(label, program, true)
    }

    /// A launch of `program` on the client side (pinned to the client CPU, in the client
    /// namespace).
    pub fn client_launch(&self, label: &str, program: &Path) -> Launch<'_> {
        self.launch(label, program, false)
    }

    fn launch<'a>(&'a self, label: &str, program: &Path, server_side: bool) -> Launch<'a> {
        self.launch_on(label, program, server_side.then_some(ServerSide::Main))
    }

    /// A launch on server side `side`, or on the client side (`None`).
    fn launch_on<'a>(
        &'a self,
        label: &str,
        program: &Path,
        side: Option<ServerSide>,
    ) -> Launch<'a> {
        let mut l = Launch::new(label, program);
        let pin = self.info.server_cpu.is_some();
        if let Some(side) = side {
            l.cpu = pin.then_some(self.cfg.server_cpu);
            l.cgroup = self.process_cgroup_of(side);
            l.netns = self.net.as_ref().map(|n| &n.server_ns);
        } else {
            l.cpu = pin.then_some(self.cfg.client_cpu);
            l.netns = self.net.as_ref().map(|n| &n.client_ns);
        }
        l
    }

    /// Start a server-side process: pinned, in the server cgroup, in the server namespace.
    pub fn spawn_server_side(
        &self,
        label: &str,
        program: &Path,
        args: &[std::ffi::OsString],
        log: Option<PathBuf>,
    ) -> Result<Managed> {
        self.spawn_on(ServerSide::Main, label, program, args, log)
    }

    /// Start a process on server side `side` (the twin's in its own cgroup; an error when the
    /// testbed has no twin).
    pub fn spawn_on(
        &self,
        side: ServerSide,
        label: &str,
        program: &Path,
        args: &[std::ffi::OsString],
        log: Option<PathBuf>,
    ) -> Result<Managed> {
        if side == ServerSide::Twin && self.twin_cg.is_none() {
            return Err(LabError::Config(
                "the testbed has no twin server side (TestbedConfig::twin, and cgroups)".into(),
            ));
        }
        let mut l = self
            .launch_on(label, program, Some(side))
            .args(args.iter().cloned());
        l.log = log;
        l.spawn()
    }

    /// Start a client-side process (the load generator): pinned to the client CPU, in the
    /// client namespace.
    pub fn spawn_client(
        &self,
        label: &str,
        program: &Path,
        args: &[std::ffi::OsString],
        log: Option<PathBuf>,
    ) -> Result<Managed> {
        let mut l = self
            .launch(label, program, false)
            .args(args.iter().cloned());
        l.log = log;
        l.spawn()
    }

    /// Start the CPU hog of seed 001 experiment 1: a process that spins forever, on the server
    /// side (same CPU, same cgroup and quota as the server).
    pub fn spawn_hog(&self) -> Result<Managed> {
        self.launch("hog", Path::new("/bin/sh"), true)
            .args(["-c", "while :; do :; done"])
            .spawn()
    }

    /// Run `f` on a thread inside the server's network namespace (to reach the server's
    /// addresses from the lab).
    pub fn in_server_ns<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R> {
        self.in_ns(true, f)
    }

    /// Run `f` on a thread inside the client's network namespace.
    pub fn in_client_ns<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R> {
        self.in_ns(false, f)
    }

    fn in_ns<R: Send>(&self, server: bool, f: impl FnOnce() -> R + Send) -> Result<R> {
        match &self.net {
            Some(n) => {
                let ns = if server { &n.server_ns } else { &n.client_ns };
                ns.run(f).map_err(|e| LabError::Os(e.to_string()))
            }
            None => Ok(f()),
        }
    }

    /// Move the *calling thread* into the server's network namespace (no-op on loopback). Only
    /// for threads the caller owns and that do nothing else.
    pub fn enter_server_ns(&self) -> Result<()> {
        if let Some(n) = &self.net {
            n.server_ns
                .enter_current_thread()
                .map_err(|e| LabError::Os(e.to_string()))?;
        }
        Ok(())
    }

    /// A closure that moves the calling thread into the server's network namespace, for
    /// threads that outlive a borrow of the testbed (samplers). No-op on loopback.
    pub fn enter_server_ns_fn(&self) -> impl FnOnce() -> Result<()> + Send + 'static {
        enter_fn(self.net.as_ref().map(|n| &n.server_ns))
    }

    /// The same for the client's network namespace (load threads of the lab process itself).
    pub fn enter_client_ns_fn(&self) -> impl FnOnce() -> Result<()> + Send + 'static {
        enter_fn(self.net.as_ref().map(|n| &n.client_ns))
    }

    /// Wait until `addr` accepts connections (seen from the server namespace), or fail if
    /// `child` exits or `timeout` passes.
    pub fn wait_listening(
        &self,
        addr: SocketAddr,
        child: &mut Managed,
        timeout: Duration,
    ) -> Result<()> {
        let end = Instant::now() + timeout;
        loop {
            if self.in_server_ns(|| {
                TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
            })? {
                return Ok(());
            }
            if let Some(s) = child.try_wait()? {
                return Err(LabError::Process {
                    name: child.label().to_owned(),
                    msg: format!(
                        "exited ({s}) before listening on {addr}: {}",
                        child.log_tail(2000)
                    ),
                });
            }
            if Instant::now() >= end {
                return Err(LabError::Process {
                    name: child.label().to_owned(),
                    msg: format!(
                        "not listening on {addr} after {timeout:?}: {}",
                        child.log_tail(2000)
                    ),
                });
            }
            signals::sleep(Duration::from_millis(20))?;
        }
    }

    /// Names of what this testbed created in the kernel (for leak checks).
    pub fn kernel_names(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(n) = &self.net {
            v.push(n.server.clone());
            v.push(n.client.clone());
        }
        for cg in self.server_cg.iter().chain(&self.twin_cg) {
            v.push(cg.path().display().to_string());
        }
        v
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // The leaf goes with its parent (a removal takes the descendants first).
        self.server_leaf.take();
        for cg in [self.server_cg.take(), self.twin_cg.take()]
            .into_iter()
            .flatten()
        {
            let path = cg.path().to_owned();
            if let Err(e) = cg.remove() {
                tracing::warn!("removing the server cgroup {}: {e}", path.display());
            }
        }
        if let Some(r) = self.cg_root.take() {
            if let Err(e) = r.cleanup() {
                tracing::warn!("removing the lab cgroups: {e}");
            }
        }
        self.net.take();
    }
}

/// A closure entering `ns` (a handle duplicated now) from whatever thread calls it later.
fn enter_fn(ns: Option<&os::netns::NetNs>) -> impl FnOnce() -> Result<()> + Send + 'static {
    let ns = ns.map(|n| (n.try_clone(), n.name().to_owned()));
    move || {
        if let Some((ns, name)) = ns {
            let ns = ns.map_err(|e| LabError::Os(format!("duplicating {name}: {e}")))?;
            ns.enter_current_thread()
                .map_err(|e| LabError::Os(e.to_string()))?;
        }
        Ok(())
    }
}

/// A blocking `GET path` over HTTP/1.0 to `addr` from the calling thread (use inside
/// [`Testbed::in_server_ns`] or a thread that called [`Testbed::enter_server_ns`]).
pub fn http_get(addr: SocketAddr, path: &str, timeout: Duration) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.") && head.contains(" 200 ") => {
            Ok(body.to_owned())
        }
        _ => Err(std::io::Error::other(format!(
            "unexpected answer to GET {path}: {}",
            text.lines().next().unwrap_or("")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_or_skip(test: &str) -> bool {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP {test}: needs root (netns, cgroups)");
            return false;
        }
        if let Err(e) = os::probe() {
            eprintln!("SKIP {test}: no usable cgroups ({e})");
            return false;
        }
        true
    }

    fn netns_exists(name: &str) -> bool {
        run_cmd("ip", &["netns", "list"])
            .unwrap_or_default()
            .lines()
            .any(|l| l.split_whitespace().next() == Some(name))
    }

    #[test]
    fn testbed_leaves_nothing_behind() {
        if !root_or_skip("testbed_leaves_nothing_behind") {
            return;
        }
        let tb = Testbed::new(TestbedConfig {
            tag: "t".into(),
            quota: Some(0.2),
            net: NetMode::Netns,
            ..Default::default()
        })
        .unwrap();
        assert!(tb.netns());
        assert_eq!(tb.info().quota, Some(0.2));
        let names = tb.kernel_names();
        let cg_path = PathBuf::from(&names[2]);
        assert!(netns_exists(&names[0]) && netns_exists(&names[1]));
        assert!(cg_path.exists());
        let (q, _) = tb.server_cgroup().unwrap().cpu_max().unwrap();
        assert!((q.unwrap() - 0.2).abs() < 1e-9);
        // A server-side process and the hog, both in the cgroup and namespace.
        let mut hog = tb.spawn_hog().unwrap();
        let sleeper = tb
            .spawn_server_side("sleep", Path::new("/bin/sleep"), &["60".into()], None)
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let pids = tb.server_cgroup().unwrap().all_pids().unwrap();
        assert!(pids.contains(&(hog.pid() as i32)), "{pids:?}");
        assert!(pids.contains(&(sleeper.pid() as i32)), "{pids:?}");
        let wd = tb.workdir().to_path_buf();
        let hog_pid = hog.pid();
        assert!(hog.try_wait().unwrap().is_none());
        // The sleeper is left running on purpose: dropping the testbed must remove it too.
        std::mem::forget(sleeper);
        drop(hog);
        drop(tb);
        assert!(!netns_exists(&names[0]) && !netns_exists(&names[1]));
        assert!(!cg_path.exists(), "{}", cg_path.display());
        assert!(!wd.exists());
        // Gone, or a zombie of ours: not running.
        let st = os::procfs::state(hog_pid as i32);
        assert!(st.is_none() || st == Some('Z'), "{st:?}");
    }

    #[test]
    fn nested_layout_keeps_the_weight_levers_boost_inside_the_quota_and_leaves_nothing() {
        if !root_or_skip("nested_layout_keeps_the_weight_levers_boost_inside_the_quota") {
            return;
        }
        let tb = Testbed::new(TestbedConfig {
            tag: "tleaf".into(),
            quota: Some(0.2),
            period: Duration::from_millis(100),
            net: NetMode::Loopback,
            server_leaf: true,
            ..Default::default()
        })
        .unwrap();
        let parent = tb.server_cgroup().unwrap().path().to_owned();
        let leaf = tb
            .process_cgroup_of(ServerSide::Main)
            .unwrap()
            .path()
            .to_owned();
        assert_eq!(leaf, parent.join(SERVER_LEAF));
        // The quota is the parent's; the leaf has none of its own.
        let (q, p) = tb.server_cgroup().unwrap().cpu_max().unwrap();
        assert!((q.unwrap() - 0.2).abs() < 1e-9 && p == Duration::from_millis(100));
        let (lq, _) = tb
            .process_cgroup_of(ServerSide::Main)
            .unwrap()
            .cpu_max()
            .unwrap();
        assert_eq!(lq, None);
        let sleeper = tb
            .spawn_server_side("sleep", Path::new("/bin/sleep"), &["60".into()], None)
            .unwrap();
        let pid = sleeper.pid() as i32;
        std::thread::sleep(Duration::from_millis(100));
        let m = os::lever::weight::cpu_mount().unwrap();
        assert_eq!(os::lever::weight::task_dir(&m, pid).unwrap(), leaf);
        // The weight lever moves it into the leaf's sibling: below the quota's cgroup.
        let state = tempfile::tempdir().unwrap();
        let mut lever = os::lever::Lever::new(
            os::lever::LeverConfig::new(os::lever::LeverKind::Weight),
            state.path(),
        )
        .unwrap();
        lever.raise(pid).unwrap();
        let boost = parent.join(os::lever::weight::BOOST_NAME);
        assert_eq!(os::lever::weight::task_dir(&m, pid).unwrap(), boost);
        assert!(tb
            .server_cgroup()
            .unwrap()
            .all_pids()
            .unwrap()
            .contains(&pid));
        // A daemon that dies holding it (no restore): the testbed's removal takes the boost
        // cgroup and the task with the rest.
        std::mem::forget(lever);
        std::mem::forget(sleeper);
        drop(tb);
        assert!(!boost.exists() && !leaf.exists() && !parent.exists());
        let st = os::procfs::state(pid);
        assert!(st.is_none() || st == Some('Z'), "{st:?}");
    }

    #[test]
    fn tcp_congestion_control_is_set_in_the_server_namespace_only() {
        // Without namespaces the setting has nowhere to go: an error, whoever runs it.
        let err = Testbed::new(TestbedConfig {
            net: NetMode::Loopback,
            tcp_cc: Some("reno".into()),
            ..Default::default()
        })
        .err()
        .unwrap();
        assert!(err.to_string().contains("reno"), "{err}");
        if !root_or_skip("tcp_congestion_control_is_set_in_the_server_namespace_only") {
            return;
        }
        // reno is always built in; the host's own setting must not change.
        let key = "net.ipv4.tcp_congestion_control";
        let host = os::sysctl::read(key).unwrap();
        let tb = Testbed::new(TestbedConfig {
            tag: "t".into(),
            net: NetMode::Netns,
            tcp_cc: Some("reno".into()),
            ..Default::default()
        })
        .unwrap();
        let names = tb.kernel_names();
        let cc = |ns: &str| {
            run_cmd(
                "ip",
                &[
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-n",
                    "net.ipv4.tcp_congestion_control",
                ],
            )
            .unwrap()
        };
        assert_eq!(cc(&names[0]).trim(), "reno");
        assert_eq!(os::sysctl::read(key).unwrap(), host);
        assert!(tb.info().shaping.contains("reno"), "{}", tb.info().shaping);
        drop(tb);
        // An unknown algorithm is refused, and nothing is left behind.
        let err = Testbed::new(TestbedConfig {
            tag: "t".into(),
            net: NetMode::Netns,
            tcp_cc: Some("no-such-cc".into()),
            ..Default::default()
        })
        .err()
        .unwrap();
        assert!(err.to_string().contains("no-such-cc"), "{err}");
    }

    #[test]
    fn server_in_its_namespace_is_reached_through_the_shaped_link() {
        if !root_or_skip("server_in_its_namespace_is_reached_through_the_shaped_link") {
            return;
        }
        let tb = Testbed::new(TestbedConfig {
            tag: "t".into(),
            net: NetMode::Netns,
            ..Default::default()
        })
        .unwrap();
        let addr = tb.server_addr().unwrap();
        // A listener in the server namespace is reached from the client namespace.
        let l = tb
            .in_server_ns(|| std::net::TcpListener::bind(addr))
            .unwrap()
            .unwrap();
        let mut c = tb
            .in_client_ns(|| TcpStream::connect_timeout(&addr, Duration::from_millis(500)))
            .unwrap()
            .unwrap();
        let q = run_cmd("tc", &["-n", &tb.kernel_names()[0], "qdisc", "show"]).unwrap();
        assert!(q.contains("tbf") && q.contains("10Mbit"), "{q}");
        // The server side's tbf counts what the server sends (100 KB: about 80 ms at 10 Mbit/s).
        let (mut s, _) = l.accept().unwrap();
        let before = tb.link_counters().unwrap();
        let sender = std::thread::spawn(move || s.write_all(&[7u8; 100_000]).unwrap());
        let mut got = vec![0u8; 100_000];
        c.read_exact(&mut got).unwrap();
        sender.join().unwrap();
        let d = tb.link_counters().unwrap().since(&before);
        assert!(d.sent_bytes >= 100_000, "{d:?}");
        assert!(d.packets >= 100_000 / 65_536, "{d:?}");
        drop(l);
    }
}
