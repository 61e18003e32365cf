//! The server: [`Server::bind`] builds everything a configuration asks for (sites, CGI,
//! containers, the gate, logs, listeners); [`Server::run`] accepts connections, runs the
//! background tasks (PL/LRQ sampling every 10 ms, the policy tick every period, draining the
//! worker log) and the admin listener, and stops gracefully.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gate::Gate;
use hyper::server::conn::http1;
use policy::Sched;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::cgi::orphans::Orphans;
use crate::cgi::{Cgi, ScriptLever};
use crate::config::{available_cpus, Config, ConfigError};
use crate::conn::Serving;
use crate::containers::Containers;
use crate::ctx::{Bodies, Ctx, Timeouts};
use crate::logs::{AccessLog, PfsLog};
use crate::reclaim::Reclaim;
use crate::site::{Site, Sites};
use crate::store::{DirStore, Store};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is not usable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A listener could not be bound.
    #[error("binding {what} address {addr}: {err}")]
    Bind {
        /// `listen` or `admin`.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        err: io::Error,
    },
    /// A document root cannot be opened.
    #[error("document root {path}: {err}")]
    Root {
        /// The root.
        path: String,
        /// Why.
        err: io::Error,
    },
    /// A site's CGI settings are not usable.
    #[error(transparent)]
    Cgi(#[from] crate::cgi::CgiError),
    /// A log file cannot be created.
    #[error("{what} {path}: {err}")]
    Log {
        /// `pfs log` or `access log`.
        what: &'static str,
        /// The file.
        path: String,
        /// Why.
        err: io::Error,
    },
}

/// A bound, ready-to-run server.
pub struct Server {
    cfg: Config,
    /// One listening socket per serving thread (one `SO_REUSEPORT` group), or the one socket
    /// of a single-threaded server (see [`crate::accept`]).
    listeners: Vec<std::net::TcpListener>,
    admin: Option<TcpListener>,
    ctx: Ctx,
    pfs_log: Option<PfsLog>,
    orphans: Option<Arc<Orphans>>,
}

/// Build the tokio runtime that runs [`Server::bind`] and [`Server::run`] for `cfg`: always
/// single-threaded. With one thread it serves the connections too; with `threads = N > 1`
/// it runs the admin listener, the background tasks and the shutdown, and `Server::run`
/// starts N serving threads of their own (see [`crate::accept`]).
pub fn runtime(cfg: &Config) -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .event_interval(cfg.effective_event_interval())
        .enable_all()
        .build()
}

/// The sites of `cfg` with their stores and CGI handlers (the demo site if none), and the
/// bookkeeping of script processes their CGI handlers share (if any site has CGI).
fn build_sites(
    cfg: &Config,
    containers: &mut Containers,
) -> Result<(Sites, Option<Arc<Orphans>>), ServerError> {
    // One emulated disk for the server, whatever the site.
    let disk = cfg.disk.build().map(Arc::new);
    let open = |p: &std::path::Path| {
        DirStore::open(p, cfg.cache_max_file, cfg.cache_budget)
            .map(|d| Store::Dir(d.with_eviction(cfg.cache_policy).with_disk(disk.clone())))
            .map_err(|err| ServerError::Root {
                path: p.display().to_string(),
                err,
            })
    };
    let mut sites = Vec::new();
    // One cgroup root for the containers and the CGI request cgroups.
    let cg_root = if containers.tree().is_empty() {
        crate::cgi::cgroup_root(cfg.sites.iter().filter_map(|s| s.cgi.as_ref()))
    } else {
        containers.attach_cgroups(os::CgroupRoot::open("triage").map_err(|e| e.to_string()));
        containers.cgroup_root().cloned()
    };
    if let Some(root) = &cfg.root {
        sites.push(Site::new("default", open(root)?, cfg.index.clone()));
    }
    // Sites first, their CGI handlers beside them: sites sharing a CGI container must share
    // its `max_running` places.
    let mut built = Vec::new();
    for s in &cfg.sites {
        let mut site = Site::new(
            s.name.clone(),
            open(&s.root)?,
            s.index.clone().unwrap_or_else(|| cfg.index.clone()),
        );
        site.aliases = s.aliases.clone();
        site.container = containers.tree().site_container(&s.name);
        let cgi = match &s.cgi {
            Some(c) => Some(Cgi::for_site(c, &s.name, &s.root, cg_root.as_ref())?),
            None => None,
        };
        built.push((site, cgi));
    }
    let mut cgis: Vec<&mut Cgi> = built.iter_mut().filter_map(|(_, c)| c.as_mut()).collect();
    Cgi::share_places(&mut cgis)?;
    let orphans = (!cgis.is_empty()).then(|| Arc::new(Orphans::new()));
    if let Some(o) = &orphans {
        for c in cgis.iter_mut() {
            c.set_orphans(o.clone());
        }
    }
    if cfg.cgi_lever.raises() && !cgis.is_empty() {
        let (lever, restored) =
            ScriptLever::open(Path::new(os::lever::STATE_DIR)).map_err(|e| ConfigError::Value {
                key: "cgi_lever".into(),
                msg: format!(
                    "cannot journal raised scripts in {} ({e}); the lever needs root",
                    os::lever::STATE_DIR
                ),
            })?;
        if restored > 0 {
            tracing::warn!("cgi lever: restored {restored} script(s) a crashed run left raised");
        }
        let mut lever = lever;
        if cfg.cgi_lever.budget() {
            lever = lever.with_budget(std::time::Duration::from_nanos(cfg.policy.config.period));
        }
        if cfg.cgi_lever.tail() {
            lever = lever.with_tail_order(cfg.cgi_lever.tail_yields());
        }
        if cfg.cgi_lever.head_order() {
            lever = lever.with_head_order(cfg.cgi_lever.head_newest());
        }
        if cfg.cgi_lever.threads_first() {
            lever = lever.with_threads_first(cfg.cgi_lever.tail_head_top());
        }
        if cfg.cgi_lever.back() {
            lever = lever.with_back();
        }
        if cfg.cgi_lever.output() {
            lever = lever.with_restore_at_output();
        }
        if cfg.cgi_lever.program() {
            lever = lever.with_program_memory();
        }
        if cfg.cgi_lever.preempt() {
            lever = lever.with_thread_slice(crate::cgi::lever::THREAD_SLICE);
        }
        let lever = Arc::new(lever);
        for c in cgis.iter_mut() {
            c.set_lever(lever.clone());
        }
    }
    for (mut site, cgi) in built {
        site.cgi = cgi;
        sites.push(site);
    }
    if sites.is_empty() {
        sites.push(Site::new(
            "demo",
            Store::Mem(crate::demo::site()),
            cfg.index.clone(),
        ));
    }
    let forward = crate::forward::Forwarder::new(&cfg.forward);
    for s in &mut sites {
        s.forward = forward.clone();
    }
    Ok((Sites::new(sites), orphans))
}

/// More slots than CPUs the process may use would let the gate grant CPU that is not there (its
/// ready queue would never form): a configuration error, not a silent cap.
fn check_slots(slots: Option<usize>, cpus: usize) -> Result<(), ConfigError> {
    match slots {
        Some(n) if n > cpus => Err(ConfigError::Value {
            key: "slots".into(),
            msg: format!(
                "{n} slots but this process may use only {cpus} CPU(s) (its affinity and cgroup \
                 quota); use at most {cpus}"
            ),
        }),
        _ => Ok(()),
    }
}

fn log_error(what: &'static str, path: &std::path::Path) -> impl FnOnce(io::Error) -> ServerError {
    let path = path.display().to_string();
    move |err| ServerError::Log { what, path, err }
}

impl Server {
    /// Validate `cfg`, open roots and logs, and bind the listeners (port 0 allowed).
    pub async fn bind(cfg: Config) -> Result<Self, ServerError> {
        cfg.validate()?;
        check_slots(cfg.slots, available_cpus())?;
        let mut containers = Containers::new(cfg.container_tree()?);
        let (sites, orphans) = build_sites(&cfg, &mut containers)?;
        let p = &cfg.policy;
        let lanes = if containers.tree().is_empty() {
            cfg.effective_lanes()
        } else {
            1
        };
        let shares = policy::balance::shares(cfg.effective_slots(), lanes);
        let mut scheds = Vec::with_capacity(lanes);
        for share in shares {
            let policy = if containers.tree().is_empty() {
                policy::build(&p.name, &p.config)
            } else {
                containers.share_policy(&p.name, &p.config)
            }
            .map_err(|e| ConfigError::Value {
                key: "policy".into(),
                msg: e.to_string(),
            })?;
            let sched = Sched::new(share, policy);
            scheds.push(if cfg.pfs_log.is_some() {
                sched.with_log()
            } else {
                sched
            });
        }
        let pfs_log = match &cfg.pfs_log {
            Some(p) => Some(PfsLog::create(p).map_err(log_error("pfs log", p))?),
            None => None,
        };
        // One decision for the gate and the runtime's event interval (`Config::rounds_on`).
        let gate = if lanes == 1 {
            let sched = scheds.pop().expect("one lane");
            Gate::new(sched, cfg.gate, cfg.raise())
        } else {
            Gate::with_lanes(scheds, cfg.gate)
        }
        .with_rounds(cfg.rounds_on())
        .with_wake_queue(cfg.wake_queue)
        .with_streak(cfg.streak())
        // Each lane served by a thread of its own: a slot lent between lanes only idles the
        // lender (see `Gate::with_balance`).
        .with_balance(lanes != cfg.effective_threads());
        gate.prefork(cfg.workers);
        if !containers.tree().is_empty() {
            gate.set_account(containers.account().clone());
        }
        let access_log = match &cfg.access_log {
            Some(p) => Some(AccessLog::create(p).map_err(log_error("access log", p))?),
            None => None,
        };
        let threads = cfg.effective_threads().max(1);
        let bind_err = |err| ServerError::Bind {
            what: "listen",
            addr: cfg.listen,
            err,
        };
        let leader = crate::accept::bind_one(cfg.listen, threads > 1).map_err(bind_err)?;
        let mut listeners = crate::accept::bind_members(&leader, threads).map_err(bind_err)?;
        listeners.insert(0, leader);
        let admin = match cfg.admin {
            Some(a) => Some(bind_listener(a, "admin")?),
            None => None,
        };
        // Only once the address is ours: a second server on the same address must not kill
        // the first one's scripts.
        if let Some(o) = &orphans {
            let state = cfg
                .cgi_state
                .clone()
                .or_else(|| crate::cgi::orphans::default_state_file(cfg.listen));
            o.take_over(state.as_deref()).map_err(log_error(
                "cgi state file",
                state.as_deref().unwrap_or(Path::new("-")),
            ))?;
        }
        let bodies = Bodies {
            chunk: cfg.chunk as usize,
            first_chunk: cfg.first_chunk() as usize,
            gzip: cfg.gzip.clone(),
        };
        let ctx = Ctx::new(gate, sites, access_log, bodies, containers);
        Ok(Self {
            cfg,
            listeners,
            admin,
            ctx,
            pfs_log,
            orphans,
        })
    }

    /// The address serving HTTP.
    pub fn local_addr(&self) -> SocketAddr {
        self.listeners[0].local_addr().expect("bound listener")
    }

    /// The admin address, if there is one.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
            .as_ref()
            .map(|l| l.local_addr().expect("bound listener"))
    }

    /// The state the server's tasks share (its gate, sites, counters, containers).
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// Serve until `shutdown` completes, then stop accepting, let in-flight responses finish
    /// (up to `shutdown_timeout`: every connection task holds a sender of one channel, and
    /// the wait ends when the last is dropped; with several serving threads, one channel per
    /// thread, each thread waiting for its own and `run` joining the threads), flush the logs
    /// and return.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let Server {
            cfg,
            listeners,
            admin,
            ctx,
            pfs_log,
            orphans,
        } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        let (running, mut all_closed) = mpsc::channel::<()>(1);
        let pfs_log = pfs_log.map(Arc::new);
        // Each trim of the trimmer, for the serving threads to collect their own heaps.
        let (trims_tx, trims) = watch::channel(0u64);
        let mut bg = spawn_background(
            &ctx,
            pfs_log.clone(),
            admin.is_some(),
            stop_rx.clone(),
            trims_tx,
        );
        if let Some(o) = &orphans {
            bg.push(spawn_sweeper(o.clone(), stop_rx.clone()));
        }
        let admin_task =
            admin.map(|l| tokio::spawn(crate::admin::serve(l, ctx.clone(), stop_rx.clone())));

        let mut http = http1::Builder::new();
        http.keep_alive(true)
            .half_close(false)
            .max_buf_size(cfg.max_header_size as usize);
        let serving = Serving {
            ctx: ctx.clone(),
            http: Arc::new(http),
            timeouts: Timeouts {
                header: cfg.header_timeout.as_nanos() as u64,
                keepalive: cfg.keepalive_timeout.as_nanos() as u64,
                send: cfg.send_timeout.as_nanos() as u64,
                park_after: cfg.park_after.as_nanos() as u64,
            },
            epoch: Instant::now() - Duration::from_nanos(ctx.now()),
            stop: stop_rx,
            running,
            max_head: cfg.max_header_size as usize,
            reclaim: Arc::new(Reclaim::default()),
            trims,
        };
        let admit = crate::accept::Admit {
            max_conns: cfg.max_conns,
            sndbuf: cfg.sndbuf,
        };
        if listeners.len() == 1 {
            let listener = listeners.into_iter().next().expect("one listener");
            crate::accept::accept_loop(TcpListener::from_std(listener)?, &serving, admit, shutdown)
                .await;
        } else {
            let plan = crate::accept::ThreadPlan {
                event_interval: cfg.effective_event_interval(),
                shutdown_timeout: cfg.shutdown_timeout,
                admit,
            };
            let threads = crate::accept::spawn_threads(listeners, &serving, plan)?;
            shutdown.await;
            let _ = stop_tx.send(true);
            // Each thread waits for its own connections (up to `shutdown_timeout`), then ends.
            let _ = tokio::task::spawn_blocking(move || {
                for t in threads {
                    let _ = t.join();
                }
            })
            .await;
        }
        let _ = stop_tx.send(true);
        drop(serving);
        // `None` once every connection task has dropped its sender.
        let _ = tokio::time::timeout(cfg.shutdown_timeout, all_closed.recv()).await;
        for h in bg {
            let _ = h.await;
        }
        if let Some(a) = admin_task {
            let _ = a.await;
        }
        if let Some(l) = &pfs_log {
            l.write(ctx.gate().drain_log());
            l.close()?;
        }
        if let Some(l) = ctx.access_log() {
            l.close()?;
        }
        ctx.containers().cleanup();
        if let Some(o) = orphans {
            let _ = tokio::task::spawn_blocking(move || o.shut_down()).await;
        }
        Ok(())
    }
}

/// Every half second, kill what finished scripts left behind (`Orphans::sweep`; it reads
/// `/proc`, so on the blocking pool).
fn spawn_sweeper(o: Arc<Orphans>, mut stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut iv = tokio::time::interval(Duration::from_millis(500));
        iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = iv.tick() => {
                    let o = o.clone();
                    let _ = tokio::task::spawn_blocking(move || o.sweep()).await;
                }
                _ = stop.changed() => break,
            }
        }
    })
}

fn bind_listener(addr: SocketAddr, what: &'static str) -> Result<TcpListener, ServerError> {
    let err = |err| ServerError::Bind { what, addr, err };
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(err)?;
    sock.set_reuse_address(true).map_err(err)?;
    sock.set_nonblocking(true).map_err(err)?;
    sock.bind(&addr.into()).map_err(err)?;
    sock.listen(4096).map_err(err)?;
    TcpListener::from_std(sock.into()).map_err(err)
}

/// The server's periodic tasks: PL/LRQ samples every 10 ms when there is an admin listener
/// (only `/metrics` and `/samples` read them: without it, the timer would wake an idle server
/// 100 times a second for nothing, a cost per second that the busy server hides and the
/// quiet one pays), the policy's period, the one-budget loop, the heap trimmer and the worker
/// log.
fn spawn_background(
    ctx: &Ctx,
    pfs_log: Option<Arc<PfsLog>>,
    sampled: bool,
    stop: watch::Receiver<bool>,
    trims: watch::Sender<u64>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    let every = |period: Duration, stop: watch::Receiver<bool>, f: Box<dyn Fn() + Send>| {
        tokio::spawn(async move {
            let mut stop = stop;
            let mut iv = tokio::time::interval(period);
            iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tokio::select! {
                    _ = iv.tick() => f(),
                    _ = stop.changed() => break,
                }
            }
        })
    };
    if sampled {
        let c = ctx.clone();
        tasks.push(every(
            Duration::from_millis(10),
            stop.clone(),
            Box::new(move || c.gate().sample()),
        ));
    }
    if ctx.gate().enabled() {
        if let Some(p) = ctx.gate().period() {
            let c = ctx.clone();
            tasks.push(every(
                Duration::from_nanos(p.max(1_000_000)),
                stop.clone(),
                Box::new(move || c.gate().tick()),
            ));
        }
    }
    if ctx.gate().enabled() {
        if let Some(b) = crate::budget::OneBudget::new(ctx.containers()) {
            let c = ctx.clone();
            tasks.push(every(
                crate::budget::PERIOD,
                stop.clone(),
                Box::new(move || {
                    let mut b = b.lock().unwrap_or_else(|e| e.into_inner());
                    b.step(c.containers().account(), c.gate());
                }),
            ));
        }
    }
    tasks.push(spawn_trimmer(ctx.clone(), stop.clone(), trims));
    if let Some(log) = pfs_log {
        let c = ctx.clone();
        tasks.push(every(
            Duration::from_millis(50),
            stop,
            Box::new(move || log.write(c.gate().drain_log())),
        ));
    }
    tasks
}

/// Give memory back to the system after connections leave or go idle. The allocators keep
/// the memory of freed connections (buffers, tasks) for reuse; when the open connections have
/// dropped to half their peak (and by 256 or more), or 256 or more connections have been
/// parked since the last check (a crowd of requests answered, their connections now idle:
/// their buffers are free), the free memory goes back to the kernel, then twice more a second
/// apart: `os::heap::trim` on the blocking pool (glibc's `malloc_trim`, and mimalloc's arenas
/// purged), `os::heap::collect_thread` on this runtime's thread (with one serving thread, the
/// one that served the connections), and `trims` is bumped so that every other serving thread
/// collects its own mimalloc heap (see [`crate::accept`]): a thread's empty pages are only
/// its own to hand back. When connections left, the gate first forgets the idle workers
/// they left behind (`gate::Gate::shrink`). Checked every second.
fn spawn_trimmer(
    ctx: Ctx,
    mut stop: watch::Receiver<bool>,
    trims: watch::Sender<u64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut iv = tokio::time::interval(Duration::from_secs(1));
        iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut peak = 0u64;
        let mut parked_before = 0u64;
        // Trims still to come: some memory of closed connections is freed after their tasks
        // end (deferred deregistration, buffers dropped late, connections still closing).
        let mut again = 0u32;
        loop {
            tokio::select! {
                _ = iv.tick() => {}
                _ = stop.changed() => break,
            }
            let open = ctx.metrics().open_conns();
            let parked = ctx.metrics().parked_conns();
            peak = peak.max(ctx.metrics().take_peak_conns());
            let left = peak >= open + 256 && open <= peak / 2;
            let went_idle = parked >= parked_before + 256;
            parked_before = parked;
            if left || went_idle {
                peak = open;
                again = 3;
            }
            if left {
                // The idle workers of the connections that left, and the gate's tables.
                ctx.gate().shrink();
            }
            if again > 0 {
                again -= 1;
                trims.send_modify(|n| *n += 1);
                os::heap::collect_thread();
                let _ = tokio::task::spawn_blocking(os::heap::trim).await;
            }
        }
    })
}

#[cfg(test)]
mod slot_tests {
    use super::*;

    #[test]
    fn more_slots_than_cpus_is_a_clear_error() {
        assert!(check_slots(None, 1).is_ok());
        assert!(check_slots(Some(2), 2).is_ok());
        let e = check_slots(Some(3), 2).unwrap_err().to_string();
        assert!(e.contains("3 slots") && e.contains("only 2 CPU"), "{e}");
    }
}
