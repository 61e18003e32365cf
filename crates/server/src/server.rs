//! The server: accept loop, per-connection tasks (hyper HTTP/1.1 with keep-alive), timeouts,
//! connection limit, the admin listener (`/metrics`), background tasks (PL/LRQ sampling every
//! 10 ms, the policy tick every period, draining the worker log) and graceful shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use policy::Sched;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::config::{Boost, Config, GzipConfig};
use crate::gate::Gate;
use crate::logs::{AccessLog, PfsLog};
use crate::metrics::Metrics;
use crate::router::{Site, Sites};
use crate::store::{DirStore, Store};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("binding {what} address {addr}: {err}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        err: io::Error,
    },
    #[error("document root {path}: {err}")]
    Root { path: String, err: io::Error },
    #[error(transparent)]
    Cgi(#[from] crate::cgi::CgiError),
    #[error("{what} {path}: {err}")]
    Log {
        what: &'static str,
        path: String,
        err: io::Error,
    },
}

/// State shared by every connection.
pub struct Shared {
    pub gate: Arc<Gate>,
    pub sites: Sites,
    pub metrics: Metrics,
    pub access_log: Option<AccessLog>,
    pub chunk: usize,
    /// Most bytes of the first burst of a static response longer than `chunk` (at most
    /// `chunk`).
    pub first_chunk: usize,
    pub gzip: GzipConfig,
    /// Resource containers (empty tree without `[[container]]`).
    pub containers: crate::containers::Containers,
}

/// Per-connection state: the worker serving it and what the watchdog needs.
pub struct ConnState {
    pub worker: policy::WorkerId,
    pub remote: SocketAddr,
    /// The server's address of this connection.
    pub local: SocketAddr,
    /// The connection's socket (valid while the connection lives; CGI watches it for the
    /// client going away).
    pub fd: std::os::fd::RawFd,
    busy: AtomicBool,
    requests: AtomicU64,
    idle_since: AtomicU64,
    head_since: AtomicU64,
    last_write: AtomicU64,
}

impl ConnState {
    fn new(
        worker: policy::WorkerId,
        remote: SocketAddr,
        local: SocketAddr,
        fd: std::os::fd::RawFd,
        now: u64,
    ) -> Self {
        Self {
            worker,
            remote,
            local,
            fd,
            busy: AtomicBool::new(false),
            requests: AtomicU64::new(0),
            idle_since: AtomicU64::new(now),
            head_since: AtomicU64::new(0),
            last_write: AtomicU64::new(now),
        }
    }

    pub(crate) fn request_started(&self, now: u64) {
        self.busy.store(true, Relaxed);
        self.head_since.store(0, Relaxed);
        self.last_write.store(now, Relaxed);
        self.requests.fetch_add(1, Relaxed);
    }

    pub(crate) fn response_done(&self, now: u64) {
        self.idle_since.store(now, Relaxed);
        self.busy.store(false, Relaxed);
    }

    /// When the connection must be closed if nothing happens meanwhile (ns since start).
    fn deadline(&self, t: &Timeouts) -> u64 {
        if self.busy.load(Relaxed) {
            self.last_write.load(Relaxed) + t.send
        } else {
            let head = self.head_since.load(Relaxed);
            if head != 0 {
                head + t.header
            } else if self.requests.load(Relaxed) == 0 {
                self.idle_since.load(Relaxed) + t.header
            } else {
                self.idle_since.load(Relaxed) + t.keepalive
            }
        }
    }
}

#[derive(Clone, Copy)]
struct Timeouts {
    header: u64,
    keepalive: u64,
    send: u64,
}

/// The socket, noting when a request head starts arriving and when writes progress.
struct ConnIo {
    stream: TcpStream,
    conn: Arc<ConnState>,
    epoch: Instant,
}

impl ConnIo {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.stream).poll_read(cx, buf);
        if buf.filled().len() > before
            && !this.conn.busy.load(Relaxed)
            && this.conn.head_since.load(Relaxed) == 0
        {
            this.conn.head_since.store(this.now().max(1), Relaxed);
        }
        r
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            if n > 0 {
                this.conn.last_write.store(this.now(), Relaxed);
            }
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            if n > 0 {
                this.conn.last_write.store(this.now(), Relaxed);
            }
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A bound, ready-to-run server.
pub struct Server {
    cfg: Config,
    listener: TcpListener,
    admin: Option<TcpListener>,
    shared: Arc<Shared>,
    pfs_log: Option<PfsLog>,
}

/// Build the tokio runtime for `cfg`: single-threaded when one thread is asked for (or the
/// gate has one slot and no thread count is given), multi-threaded otherwise.
pub fn runtime(cfg: &Config) -> io::Result<tokio::runtime::Runtime> {
    let threads = cfg.threads.unwrap_or_else(|| cfg.effective_slots());
    let events = cfg.effective_event_interval();
    if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .event_interval(events)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .event_interval(events)
            .enable_all()
            .build()
    }
}

fn build_sites(
    cfg: &Config,
    containers: &mut crate::containers::Containers,
) -> Result<Sites, ServerError> {
    let open = |p: &std::path::Path| {
        DirStore::open(p, cfg.cache_max_file, cfg.cache_budget)
            .map(Store::Dir)
            .map_err(|err| ServerError::Root {
                path: p.display().to_string(),
                err,
            })
    };
    let mut sites = Vec::new();
    // One cgroup root for the containers and the CGI request cgroups.
    let cg_root = if containers.tree().is_empty() {
        crate::cgi::cgroup_root(&cfg.sites)
    } else {
        containers.attach_cgroups(os::CgroupRoot::open("triage").map_err(|e| e.to_string()));
        containers.cgroup_root().cloned()
    };
    if let Some(root) = &cfg.root {
        sites.push(Arc::new(Site::new(
            "default",
            open(root)?,
            cfg.index.clone(),
        )));
    }
    // Sites first, their CGI handlers beside them: sites sharing a CGI container must share
    // its `max_running` places before the handlers are frozen in their `Arc`.
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
            Some(c) => Some(crate::cgi::Cgi::for_site(
                c,
                &s.name,
                &s.root,
                cg_root.as_ref(),
            )?),
            None => None,
        };
        built.push((site, cgi));
    }
    let mut cgis: Vec<&mut crate::cgi::Cgi> =
        built.iter_mut().filter_map(|(_, c)| c.as_mut()).collect();
    crate::cgi::Cgi::share_places(&mut cgis)?;
    for (mut site, cgi) in built {
        site.cgi = cgi.map(Arc::new);
        sites.push(Arc::new(site));
    }
    if sites.is_empty() {
        sites.push(Arc::new(Site::new(
            "demo",
            Store::Mem(crate::demo::site()),
            cfg.index.clone(),
        )));
    }
    Ok(Sites(sites))
}

impl Server {
    /// Validate `cfg`, open roots and logs, and bind the listeners (port 0 allowed).
    pub async fn bind(cfg: Config) -> Result<Self, ServerError> {
        cfg.validate()?;
        let mut containers = crate::containers::Containers::new(cfg.container_tree()?);
        let sites = build_sites(&cfg, &mut containers)?;
        let policy = if containers.tree().is_empty() {
            policy::build(&cfg.policy, &cfg.policy_config())
        } else {
            containers.share_policy(&cfg.policy, &cfg.policy_config())
        }
        .map_err(|e| crate::config::ConfigError::Value {
            key: "policy".into(),
            msg: e.to_string(),
        })?;
        let mut sched = Sched::new(cfg.effective_slots(), policy);
        let pfs_log = match &cfg.pfs_log {
            Some(p) => {
                sched = sched.with_log();
                Some(PfsLog::create(p).map_err(|err| ServerError::Log {
                    what: "pfs log",
                    path: p.display().to_string(),
                    err,
                })?)
            }
            None => None,
        };
        let boost = match cfg.boost {
            Boost::Off => None,
            Boost::Nice => Some(crate::gate::Raise::Nice(cfg.boost_nice)),
            Boost::Slice => Some(crate::gate::Raise::Slice(cfg.boost_slice)),
        };
        // One decision for the gate and the runtime's event interval (`Config::rounds_on`).
        let rounds = cfg.rounds_on();
        let gate = Arc::new(Gate::new(sched, cfg.gate, boost).with_rounds(rounds));
        gate.prefork(cfg.workers);
        let access_log = match &cfg.access_log {
            Some(p) => Some(AccessLog::create(p).map_err(|err| ServerError::Log {
                what: "access log",
                path: p.display().to_string(),
                err,
            })?),
            None => None,
        };
        let listener = bind_listener(cfg.listen, "listen")?;
        let admin = match cfg.admin {
            Some(a) => Some(bind_listener(a, "admin")?),
            None => None,
        };
        if !containers.tree().is_empty() {
            gate.set_account(containers.account().clone());
        }
        let shared = Arc::new(Shared {
            gate,
            sites,
            metrics: Metrics::default(),
            access_log,
            chunk: cfg.chunk as usize,
            first_chunk: cfg.first_chunk() as usize,
            gzip: cfg.gzip.clone(),
            containers,
        });
        Ok(Self {
            cfg,
            listener,
            admin,
            shared,
            pfs_log,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("bound listener")
    }

    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
            .as_ref()
            .map(|l| l.local_addr().expect("bound listener"))
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Serve until `shutdown` completes, then stop accepting, let in-flight responses finish
    /// (up to `shutdown_timeout`), flush the logs and return.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let Server {
            cfg,
            listener,
            admin,
            shared,
            pfs_log,
        } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        let pfs_log = pfs_log.map(Arc::new);
        let bg = spawn_background(&shared, pfs_log.clone(), stop_rx.clone());
        let admin_task =
            admin.map(|l| tokio::spawn(admin_loop(l, shared.clone(), stop_rx.clone())));

        let mut builder = http1::Builder::new();
        builder
            .keep_alive(true)
            .half_close(false)
            .max_buf_size(cfg.max_header_size as usize);
        let builder = Arc::new(builder);
        let t = Timeouts {
            header: cfg.header_timeout.as_nanos() as u64,
            keepalive: cfg.keepalive_timeout.as_nanos() as u64,
            send: cfg.send_timeout.as_nanos() as u64,
        };
        let epoch = Instant::now() - Duration::from_nanos(shared.gate.now());
        let mut shutdown = pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                r = listener.accept() => r,
                _ = &mut shutdown => break,
            };
            let (stream, peer) = match accepted {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE/ENFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let m = &shared.metrics;
            if m.conns_open.load(Relaxed) >= cfg.max_conns as u64 {
                m.conns_refused.fetch_add(1, Relaxed);
                tokio::spawn(refuse(stream));
                continue;
            }
            m.conns_accepted.fetch_add(1, Relaxed);
            m.conns_open.fetch_add(1, Relaxed);
            let _ = stream.set_nodelay(true);
            if let Some(n) = cfg.sndbuf {
                let _ = socket2::SockRef::from(&stream).set_send_buffer_size(n as usize);
            }
            tokio::spawn(connection(
                shared.clone(),
                builder.clone(),
                stream,
                peer,
                stop_rx.clone(),
                t,
                epoch,
            ));
        }
        drop(listener);
        let _ = stop_tx.send(true);
        let deadline = tokio::time::Instant::now() + cfg.shutdown_timeout;
        while shared.metrics.conns_open.load(Relaxed) > 0 && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for h in bg {
            let _ = h.await;
        }
        if let Some(a) = admin_task {
            let _ = a.await;
        }
        if let Some(l) = &pfs_log {
            l.write(shared.gate.drain_log());
            l.close()?;
        }
        if let Some(l) = &shared.access_log {
            l.close()?;
        }
        shared.containers.cleanup();
        Ok(())
    }
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

async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        stream.write_all(
            b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 20\r\nRetry-After: 1\r\n\r\n503 too many conns\r\n",
        ),
    )
    .await;
    let _ = stream.shutdown().await;
}

async fn connection(
    shared: Arc<Shared>,
    builder: Arc<http1::Builder>,
    stream: TcpStream,
    peer: SocketAddr,
    mut stop: watch::Receiver<bool>,
    t: Timeouts,
    epoch: Instant,
) {
    let worker = shared.gate.checkout();
    let local = stream.local_addr().unwrap_or(peer);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let conn = Arc::new(ConnState::new(worker, peer, local, fd, shared.gate.now()));
    let io = TokioIo::new(ConnIo {
        stream,
        conn: conn.clone(),
        epoch,
    });
    let svc = {
        let shared = shared.clone();
        let conn = conn.clone();
        service_fn(move |req: Request<Incoming>| {
            let shared = shared.clone();
            let conn = conn.clone();
            async move { Ok::<_, Infallible>(crate::router::dispatch(&shared, &conn, req).await) }
        })
    };
    {
        let mut c = pin!(builder.serve_connection(io, svc));
        let at = |ns: u64| tokio::time::Instant::from_std(epoch + Duration::from_nanos(ns));
        // The watchdog wakes at the current deadline but at least every `min` (a state change can
        // move the deadline earlier), so a timeout fires between 1x and 2x its value.
        let min = t.header.min(t.keepalive).min(t.send).max(1_000_000);
        let next = |now: u64| at(conn.deadline(&t).min(now + min));
        let watchdog = tokio::time::sleep_until(next(shared.gate.now()));
        let mut watchdog = pin!(watchdog);
        let mut stopping = *stop.borrow();
        if stopping {
            c.as_mut().graceful_shutdown();
        }
        loop {
            tokio::select! {
                biased;
                r = c.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    break;
                }
                _ = stop.changed(), if !stopping => {
                    stopping = true;
                    c.as_mut().graceful_shutdown();
                }
                _ = &mut watchdog => {
                    let now = shared.gate.now();
                    if now >= conn.deadline(&t) {
                        shared.metrics.conns_timed_out.fetch_add(1, Relaxed);
                        break;
                    }
                    watchdog.as_mut().reset(next(now));
                }
            }
        }
    } // the connection (and its socket) is dropped here
    shared.gate.checkin(worker);
    shared.metrics.conns_open.fetch_sub(1, Relaxed);
}

fn spawn_background(
    shared: &Arc<Shared>,
    pfs_log: Option<Arc<PfsLog>>,
    stop: watch::Receiver<bool>,
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
    let g = shared.gate.clone();
    tasks.push(every(
        Duration::from_millis(10),
        stop.clone(),
        Box::new(move || g.sample()),
    ));
    if shared.gate.enabled() {
        if let Some(p) = shared.gate.period() {
            let g = shared.gate.clone();
            tasks.push(every(
                Duration::from_nanos(p.max(1_000_000)),
                stop.clone(),
                Box::new(move || g.tick()),
            ));
        }
    }
    if let Some(log) = pfs_log {
        let g = shared.gate.clone();
        tasks.push(every(
            Duration::from_millis(50),
            stop,
            Box::new(move || log.write(g.drain_log())),
        ));
    }
    tasks
}

async fn admin_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r { Ok(x) => x, Err(_) => { tokio::time::sleep(Duration::from_millis(10)).await; continue } },
            _ = stop.changed() => break,
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(admin(&shared, &req)) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

fn admin(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match req.uri().path() {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4",
            crate::metrics::render(&shared.gate, &shared.metrics)
                + &crate::cgi::metrics(&shared.sites)
                + &shared.containers.render_metrics(),
        ),
        "/samples" => (
            StatusCode::OK,
            "application/json",
            crate::metrics::samples_json(&shared.gate),
        ),
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_string()),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "404 Not Found (try /metrics, /samples, /healthz)\n".to_string(),
        ),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}
