//! Starting and stopping a front end: [`Front::start`] validates a configuration, binds the
//! listeners (port 0 allowed: [`Front::addr`] says which port), and runs the proxy, the health
//! checks and the admin listener on a runtime of its own (`threads` worker threads) in a
//! thread of its own, so a program can start one from anywhere, read its [`Front::metrics`],
//! change its back ends ([`Front::set_backends`]) and [`Front::stop`] it.
//!
//! pingora's `Server` is not used (it owns signals, daemonizing and the process's exit): the
//! proxy's listening service is started directly on this runtime with a listener bound here
//! and handed over by file descriptor, and stopped through its shutdown watch. With `engine =
//! "relay"` the front end's own relay (`crate::relay`) serves the listener instead.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::IntoRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pingora_core::server::configuration::ServerConf;
use pingora_core::server::{Fds, ListenFds};
use pingora_core::services::Service as _;
use tokio::sync::watch;

use crate::access_log::AccessLog;
use crate::admission::Admission;
use crate::backends::Backends;
use crate::config::{ConfigError, Engine, FrontConfig};
use crate::cpu::RuntimeCpu;
use crate::dispatcher::Dispatcher;
use crate::metrics::{Counters, FrontMetrics};
use crate::proxy::FrontProxy;
use crate::shared::Shared;

/// Why a front end could not start.
#[derive(Debug, thiserror::Error)]
pub enum FrontError {
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
        err: std::io::Error,
    },
    /// The access log cannot be created.
    #[error("access log: {0}")]
    Log(std::io::Error),
    /// The runtime or its thread could not be started.
    #[error("starting the runtime: {0}")]
    Runtime(std::io::Error),
}

/// An engine serving until its stop signal.
type EngineRun = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A running front end. Dropping it stops it (as [`Front::stop`]).
pub struct Front {
    addr: SocketAddr,
    admin: Option<SocketAddr>,
    shared: Arc<Shared>,
    cpu: RuntimeCpu,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front")
            .field("addr", &self.addr)
            .field("admin", &self.admin)
            .finish_non_exhaustive()
    }
}

fn bind(addr: SocketAddr, what: &'static str) -> Result<TcpListener, FrontError> {
    let bound = TcpListener::bind(addr).and_then(|l| {
        l.set_nonblocking(true)?;
        Ok(l)
    });
    bound.map_err(|err| FrontError::Bind { what, addr, err })
}

impl Front {
    /// Validate `cfg`, bind its listeners and start serving.
    pub fn start(cfg: FrontConfig) -> Result<Self, FrontError> {
        cfg.validate()?;
        let listener = bind(cfg.listen, "listen")?;
        let addr = listener.local_addr().map_err(FrontError::Runtime)?;
        let admin = cfg.admin.map(|a| bind(a, "admin")).transpose()?;
        let admin_addr = match &admin {
            Some(l) => Some(l.local_addr().map_err(FrontError::Runtime)?),
            None => None,
        };
        let backends = Arc::new(Backends::new(
            &cfg.backends,
            cfg.health.rise,
            cfg.health.fall,
        ));
        let dispatcher = Dispatcher::new(&cfg.policy, cfg.dispatch.to_dispatch(), backends.clone())
            .map_err(|e| ConfigError::Value {
                key: "policy".into(),
                msg: e.to_string(),
            })?;
        let access_log = match &cfg.access_log {
            Some(p) => Some(AccessLog::create(p).map_err(FrontError::Log)?),
            None => None,
        };
        let threads = cfg.effective_threads();
        let shared = Arc::new(Shared {
            admission: cfg.admission_limit(1).map(|_| Admission::new()),
            cfg,
            backends,
            dispatcher,
            counters: Counters::default(),
            access_log,
        });
        let cpu = RuntimeCpu::new();
        // One thread: a current-thread runtime on the front end's own thread (no hand-over
        // between threads); more: a multi-threaded one.
        let single = threads == 1;
        let rt = {
            let started = cpu.clone();
            let mut b = if single {
                tokio::runtime::Builder::new_current_thread()
            } else {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(threads);
                b
            };
            b.thread_name("front")
                .on_thread_start(move || started.thread_started())
                .on_thread_stop(RuntimeCpu::thread_stopped)
                .enable_all()
                .build()
                .map_err(FrontError::Runtime)?
        };
        let main_cpu = cpu.clone();

        // What relays the bytes, started on the runtime with the stop signal.
        let engine: Box<dyn FnOnce(watch::Receiver<bool>) -> EngineRun + Send> = match shared
            .cfg
            .engine
        {
            Engine::Pingora => {
                let conf = ServerConf {
                    threads,
                    max_retries: shared.cfg.retries + 1,
                    upstream_keepalive_pool_size: shared.cfg.pool_size,
                    ..ServerConf::default()
                };
                let mut service =
                    pingora_proxy::http_proxy_service(&Arc::new(conf), FrontProxy(shared.clone()));
                let key = addr.to_string();
                service.add_tcp(&key);
                let fds: ListenFds = Arc::new(parking_lot::Mutex::new(Fds::new()));
                fds.lock().add(key, listener.into_raw_fd());
                Box::new(move |stop| {
                    Box::pin(async move {
                        // Returns once the listener has stopped accepting.
                        service.start_service(Some(fds), stop, 1).await;
                    })
                })
            }
            Engine::Relay => {
                let shared = shared.clone();
                Box::new(move |stop| Box::pin(crate::relay::serve(listener, shared, stop)))
            }
        };

        let (stop, stop_rx) = watch::channel(false);
        let lb = Arc::new(crate::health::balancer(
            shared.backends.clone(),
            &shared.cfg.health,
        ));
        let snapshot = {
            let (shared, cpu) = (shared.clone(), cpu.clone());
            Arc::new(move || gather(&shared, &cpu)) as Arc<dyn Fn() -> FrontMetrics + Send + Sync>
        };
        let run_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("front-main".into())
            .spawn(move || {
                if single {
                    // The runtime's one thread is this one.
                    main_cpu.thread_started();
                }
                rt.block_on(async move {
                    let admin = admin.and_then(|l| tokio::net::TcpListener::from_std(l).ok());
                    if let Some(l) = admin {
                        tokio::spawn(crate::admin::serve(l, snapshot, stop_rx.clone()));
                    }
                    tokio::spawn(crate::health::run(lb, stop_rx.clone()));
                    engine(stop_rx).await;
                    drain(&run_shared).await;
                });
                // The runtime's one thread (this one) keeps its final time.
                RuntimeCpu::thread_stopped();
                rt.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(FrontError::Runtime)?;
        Ok(Self {
            addr,
            admin: admin_addr,
            shared,
            cpu,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it serves clients on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The admin address, if any.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// What it has counted so far.
    pub fn metrics(&self) -> FrontMetrics {
        gather(&self.shared, &self.cpu)
    }

    /// Make `addrs` its back ends: the others leave (their requests in flight finish), new
    /// ones join (the policy is rebuilt for the new count). Returns the numbers of the new ones.
    pub fn set_backends(&self, addrs: &[SocketAddr]) -> Vec<usize> {
        self.shared.backends.set_configured(addrs)
    }

    /// Stop accepting, let the requests in flight finish (at most `shutdown_timeout`), close
    /// every connection and the access log. Blocks until done.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(log) = &self.shared.access_log {
            if let Err(e) = log.close() {
                tracing::warn!(error = %e, "closing the access log");
            }
        }
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn gather(shared: &Shared, cpu: &RuntimeCpu) -> FrontMetrics {
    FrontMetrics::gather(
        &shared.counters,
        &shared.backends,
        &shared.dispatcher,
        shared.cfg.mechanism.name(),
        cpu.total(),
    )
}

/// Wait until no request is in flight, at most `shutdown_timeout`.
async fn drain(shared: &Shared) {
    let deadline = Instant::now() + shared.cfg.shutdown_timeout;
    while in_flight(shared) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Requests in the front end now (between their head and their log line).
pub fn in_flight(shared: &Shared) -> usize {
    shared.counters.live.load(Relaxed)
}
