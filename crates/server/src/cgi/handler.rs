//! [`Cgi`]: one site's CGI handler. [`Cgi::prepare`] finds the script and checks the request
//! (synchronous: a CPU burst for the server's gate); [`Cgi::run`] starts it in its request
//! cgroup and waits for its header block (a wait), then hands its body to a [`CgiRelay`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use std::os::fd::AsRawFd;

use bytes::{Bytes, BytesMut};
use http::header::CONTENT_LENGTH;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;
use tokio::io::AsyncWriteExt;

use super::config::{CgiConfig, CgiError};
use super::lever::ScriptLever;
use super::orphans::Orphans;
use super::outcome::{text, Outcome, Reply};
use super::relay::{self, CgiRelay};
use super::script::{Located, ScriptDirs};
use super::spawn::{self, Placed};
use super::spool;
use super::stats::{AbortOnDrop, CgiStats, Tracker};
use super::timing::{ScriptTiming, Stamp};
use super::{env, parse};

/// Longest header block a script may print.
pub const MAX_HEADER_BLOCK: usize = 64 * 1024;
/// Most stderr bytes logged per request (the rest is read and dropped).
pub const MAX_STDERR_LOG: usize = 8 * 1024;

/// What the site tells CGI about itself.
#[derive(Debug, Clone)]
pub struct SiteInfo {
    /// `DOCUMENT_ROOT`: the site's document root.
    pub document_root: PathBuf,
    /// `SERVER_NAME` when the request has no usable `Host` header.
    pub server_name: String,
    /// `SERVER_SOFTWARE`.
    pub server_software: String,
}

/// The connection a request came on.
#[derive(Debug, Clone, Copy)]
pub struct Conn {
    /// The server's address of the connection.
    pub local: SocketAddr,
    /// The client's address.
    pub remote: SocketAddr,
}

/// A request whose script was found, ready to run (see [`Cgi::prepare`]).
#[derive(Debug)]
pub struct Prepared<B> {
    parts: http::request::Parts,
    body: B,
    conn: Conn,
    cwd: PathBuf,
    script: PathBuf,
    script_name: String,
    path_info: String,
    /// Start the script raised (its worker is marked; the site has a lever).
    raise: bool,
    /// When the request asked the gate for its preparing burst, and when it was granted (the
    /// request's timing, [`super::timing`]); `None` until [`Prepared::set_gate`].
    gate: Option<(Stamp, Stamp)>,
}

impl<B> Prepared<B> {
    /// The script file.
    pub fn script(&self) -> &Path {
        &self.script
    }

    /// Start the script raised if the server has a CGI lever ([`Cgi::set_lever`]): the
    /// caller saw its worker marked by the policy.
    pub fn set_raise(&mut self, raise: bool) {
        self.raise = raise;
    }

    /// The request asked the gate for its preparing burst at `asked`; it was granted at
    /// `granted`.
    pub fn set_gate(&mut self, asked: Stamp, granted: Stamp) {
        self.gate = Some((asked, granted));
    }
}

struct Container {
    root: os::CgroupRoot,
    rel: String,
    cg: os::Cgroup,
}

/// A site's CGI handler. See the module docs.
pub struct Cgi {
    dirs: ScriptDirs,
    timeout: Duration,
    max_output: u64,
    max_request_body: u64,
    cgroups: bool,
    cpu_max: Option<f64>,
    weight: Option<u32>,
    /// `max_running` as configured.
    max_running: Option<usize>,
    slice: Option<Duration>,
    /// Places for running scripts (`max_running`), shared by sites sharing a container.
    running: Option<Arc<tokio::sync::Semaphore>>,
    container_name: Option<String>,
    site: SiteInfo,
    container: Option<Container>,
    warned: AtomicBool,
    stats: Arc<CgiStats>,
    /// The marks and the bookkeeping that keep script processes in reach.
    orphans: Arc<Orphans>,
    /// The kernel lever of scripts of marked workers, if the server has one.
    lever: Option<Arc<ScriptLever>>,
}

impl std::fmt::Debug for Cgi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cgi")
            .field("dirs", &self.dirs)
            .field("container", &self.container.as_ref().map(|c| &c.rel))
            .finish()
    }
}

impl Cgi {
    /// Check the configuration (directories exist; prefixes are sane and distinct).
    pub fn new(cfg: &CgiConfig, site: SiteInfo) -> Result<Self, CgiError> {
        let dirs = ScriptDirs::new(&cfg.dirs)?;
        if let Some(f) = cfg.cpu_max {
            if !(f.is_finite() && f > 0.0) {
                return Err(CgiError {
                    key: "cgi.cpu_max".into(),
                    msg: format!("{f} is not a positive number of CPUs"),
                });
            }
        }
        if let Some(w) = cfg.weight {
            if !(1..=10_000).contains(&w) {
                return Err(CgiError {
                    key: "cgi.weight".into(),
                    msg: format!("{w} is not in 1..=10000"),
                });
            }
        }
        if cfg.max_running == Some(0) {
            return Err(CgiError {
                key: "cgi.max_running".into(),
                msg: "must be at least 1 (leave it out for no limit)".into(),
            });
        }
        if let Some(d) = cfg.slice {
            if !(Duration::from_micros(100)..=Duration::from_millis(100)).contains(&d) {
                return Err(CgiError {
                    key: "cgi.slice".into(),
                    msg: format!("{d:?} is not in 0.1ms..=100ms (the kernel's range)"),
                });
            }
        }
        if cfg.timeout.is_zero() {
            return Err(CgiError {
                key: "cgi.timeout".into(),
                msg: "must be positive".into(),
            });
        }
        Ok(Self {
            dirs,
            timeout: cfg.timeout,
            max_output: cfg.max_output,
            max_request_body: cfg.max_request_body,
            cgroups: cfg.cgroups,
            cpu_max: cfg.cpu_max,
            weight: cfg.weight,
            max_running: cfg.max_running,
            slice: cfg.slice,
            running: cfg
                .max_running
                .map(|n| Arc::new(tokio::sync::Semaphore::new(n))),
            container_name: cfg.container.clone(),
            site,
            container: None,
            warned: AtomicBool::new(false),
            stats: Arc::new(CgiStats::default()),
            orphans: Arc::new(Orphans::new()),
            lever: None,
        })
    }

    /// The handler of a configured site: checks the configuration and, when cgroups are
    /// wanted and `cg_root` is there, creates the site's CGI container with its limits.
    /// Asking for `cpu_max` or `weight` without usable cgroups is an error (a limit that
    /// cannot be enforced is not silently dropped).
    pub fn for_site(
        cfg: &CgiConfig,
        name: &str,
        root: &Path,
        cg_root: Option<&os::CgroupRoot>,
    ) -> Result<Self, CgiError> {
        let document_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
        let mut c = Self::new(
            cfg,
            SiteInfo {
                document_root,
                server_name: name.to_owned(),
                server_software: concat!("triage/", env!("CARGO_PKG_VERSION")).to_owned(),
            },
        )?;
        if cfg.cgroups {
            match cg_root {
                Some(r) => c.set_container(r.clone(), &default_container(name))?,
                None if cfg.cpu_max.is_some() || cfg.weight.is_some() => {
                    return Err(CgiError {
                        key: if cfg.cpu_max.is_some() {
                            "cgi.cpu_max"
                        } else {
                            "cgi.weight"
                        }
                        .into(),
                        msg: "cgroups are not usable here (see the warning above), so this \
                              limit cannot be enforced; remove it or set `cgroups = false`"
                            .into(),
                    })
                }
                None => {}
            }
        }
        Ok(c)
    }

    /// Run every request in a child of the site's CGI container (`container` from the
    /// configuration, else `default_rel`), created under `root` if missing, with the
    /// configured `cpu_max` and `weight`. Ignored when the configuration says
    /// `cgroups = false`.
    pub fn set_container(
        &mut self,
        root: os::CgroupRoot,
        default_rel: &str,
    ) -> Result<(), CgiError> {
        if !self.cgroups {
            return Ok(());
        }
        let rel = self
            .container_name
            .clone()
            .unwrap_or_else(|| default_rel.to_owned());
        let rel = rel.trim_matches('/').to_owned();
        let bad = |key: &str, e: os::CgroupError| CgiError {
            key: key.into(),
            msg: format!("site CGI container {rel}: {e}"),
        };
        let cg = root.create(&rel).map_err(|e| bad("cgi.container", e))?;
        if let Some(f) = self.cpu_max {
            cg.set_cpu_max(Some(f), CPU_PERIOD)
                .map_err(|e| bad("cgi.cpu_max", e))?;
        }
        if let Some(w) = self.weight {
            cg.set_weight(w).map_err(|e| bad("cgi.weight", e))?;
        }
        self.container = Some(Container { root, rel, cg });
        Ok(())
    }

    /// Give sites that share a CGI container one set of `max_running` places (their scripts
    /// then queue together, in arrival order). Sites without a container keep their own.
    pub fn share_places(cgis: &mut [&mut Cgi]) -> Result<(), CgiError> {
        let mut seen: Vec<(String, usize, String, Arc<tokio::sync::Semaphore>)> = Vec::new();
        for c in cgis.iter_mut() {
            let (Some(cont), Some(sem)) = (&c.container, &c.running) else {
                continue;
            };
            let n = c.max_running.unwrap_or(0);
            match seen.iter().find(|s| s.0 == cont.rel) {
                Some((_, m, _, shared)) if *m == n => c.running = Some(shared.clone()),
                Some((rel, m, site, _)) => {
                    return Err(CgiError {
                        key: "cgi.max_running".into(),
                        msg: format!(
                            "site {} says {n} but site {site}, sharing its CGI container {rel},                              says {m}",
                            c.site.server_name
                        ),
                    })
                }
                None => seen.push((cont.rel.clone(), n, c.site.server_name.clone(), sem.clone())),
            }
        }
        Ok(())
    }

    /// Share one server's [`Orphans`] (every site's scripts carry its run's mark).
    pub fn set_orphans(&mut self, o: Arc<Orphans>) {
        self.orphans = o;
    }

    /// Share the server's CGI lever: scripts of marked workers start raised.
    pub fn set_lever(&mut self, lever: Arc<ScriptLever>) {
        self.lever = Some(lever);
    }

    /// The server's CGI lever, if scripts of marked workers start raised.
    pub fn lever(&self) -> Option<&Arc<ScriptLever>> {
        self.lever.as_ref()
    }

    /// The site's CGI container, if any.
    pub fn container(&self) -> Option<&os::Cgroup> {
        self.container.as_ref().map(|c| &c.cg)
    }

    /// Whether a raw request path is under a script directory (see [`Cgi::handles`]); paths
    /// that do not resolve are not (the static handler refuses them).
    pub fn handles_path(&self, path: &str) -> bool {
        crate::resolve::resolve(path)
            .map(|r| self.handles(&r.segment_vecs()))
            .unwrap_or(false)
    }

    /// Whether a request path (decoded segments, from [`crate::resolve::resolve`]) is under a
    /// script directory. The router asks this before anything else, so a script is never
    /// served as a file.
    pub fn handles(&self, segments: &[Vec<u8>]) -> bool {
        self.dirs.handles(segments)
    }

    /// The site's CGI counters.
    pub fn stats(&self) -> &Arc<CgiStats> {
        &self.stats
    }

    fn reject(&self, status: StatusCode, path: &str, why: &str) -> Outcome {
        self.stats.rejected.fetch_add(1, Relaxed);
        tracing::info!(path, "cgi: {} {why}", status.as_u16());
        text(status, why)
    }

    /// The request cgroup; `None` without containers (warned once).
    fn request_cgroup(&self) -> Option<os::Cgroup> {
        let c = self.container.as_ref()?;
        // One numbering for the whole process: sites may share a container, and a per-site
        // count gave two sites' requests the same cgroup (the second script joined the first's
        // group and was killed when that group was removed).
        static REQUEST_SEQ: AtomicU64 = AtomicU64::new(0);
        let n = REQUEST_SEQ.fetch_add(1, Relaxed);
        let rel = format!("{}/req-{n}", c.rel);
        match c.root.create(&rel) {
            Ok(cg) => Some(cg),
            Err(e) => {
                if !self.warned.swap(true, Relaxed) {
                    tracing::warn!(
                        "cgi: running scripts without a cgroup per request ({rel}: {e}); \
                         this warning is shown once"
                    );
                }
                None
            }
        }
    }

    /// Run the script for `req`: [`Cgi::prepare`] then [`Cgi::run`]. Call only when
    /// [`Cgi::handles`] said yes (otherwise 404).
    pub async fn serve<B>(&self, req: Request<B>, conn: Conn) -> Outcome
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Send,
    {
        match self.prepare(req, conn) {
            Ok(p) => self.run(p).await,
            Err(o) => *o,
        }
    }

    /// The synchronous part (a CPU burst for the server's gate): find the script and check the
    /// request. `Err` is the response when there is nothing to run (404, 403, 501, 413...).
    pub fn prepare<B>(&self, req: Request<B>, conn: Conn) -> Result<Prepared<B>, Box<Outcome>>
    where
        B: Body<Data = Bytes>,
    {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path().to_owned();
        let Located {
            cwd,
            script,
            script_name,
            path_info,
        } = match self.dirs.locate(&path) {
            Ok(x) => x,
            Err((status, why)) => return Err(Box::new(self.reject(status, &path, why))),
        };
        if !body.is_end_stream() {
            if let Some(n) = body.size_hint().exact() {
                if n > self.max_request_body {
                    return Err(Box::new(self.reject(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        &path,
                        "request body too large",
                    )));
                }
            }
        }
        Ok(Prepared {
            parts,
            body,
            conn,
            cwd,
            script,
            script_name,
            path_info,
            raise: false,
            gate: None,
        })
    }

    /// Start the script and wait for its header block (no CPU slot needed: the worker waits
    /// on the pipe).
    pub async fn run<B>(&self, p: Prepared<B>) -> Outcome
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Send,
    {
        let Prepared {
            parts,
            body,
            conn,
            cwd,
            script,
            script_name,
            path_info,
            raise,
            gate,
        } = p;
        let path = parts.uri.path().to_owned();
        // The request body: streamed when its length is known, else spooled to a file first.
        let declared = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.parse::<u64>().ok());
        enum Input<B> {
            None,
            Stream(B),
            Spooled(std::os::fd::OwnedFd),
        }
        let (input, content_length) = if body.is_end_stream() {
            (Input::None, declared)
        } else if let Some(n) = body.size_hint().exact() {
            // Checked against the limit by `prepare`.
            (Input::Stream(body), Some(n))
        } else {
            match spool::spool(body, self.max_request_body).await {
                Ok((file, n)) => (Input::Spooled(file), Some(n)),
                Err(e) => {
                    let status = match e {
                        spool::SpoolError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
                        spool::SpoolError::Read(_) => StatusCode::BAD_REQUEST,
                        spool::SpoolError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
                    };
                    return self.reject(status, &path, &e.to_string());
                }
            }
        };

        let request_uri = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let env = env::build(&env::EnvInput {
            method: &parts.method,
            version: parts.version,
            request_uri,
            query: parts.uri.query().unwrap_or(""),
            headers: &parts.headers,
            script_name: &script_name,
            script_filename: &script,
            path_info: &path_info,
            document_root: &self.site.document_root,
            server_software: &self.site.server_software,
            default_server_name: &self.site.server_name,
            local: conn.local,
            remote: conn.remote,
            content_length,
        });

        // A place among the running scripts (`max_running`): waited for in arrival order (the
        // semaphore is fair), at most `timeout`; dropped when the script has been reaped.
        let permit = match &self.running {
            None => None,
            Some(sem) => match sem.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    self.stats.queued.fetch_add(1, Relaxed);
                    self.stats.waiting.fetch_add(1, Relaxed);
                    let waited =
                        tokio::time::timeout(self.timeout, sem.clone().acquire_owned()).await;
                    self.stats.waiting.fetch_sub(1, Relaxed);
                    match waited {
                        Ok(Ok(p)) => Some(p),
                        _ => {
                            self.stats.queue_timeouts.fetch_add(1, Relaxed);
                            return self.reject(
                                StatusCode::SERVICE_UNAVAILABLE,
                                &path,
                                "too many scripts running (cgi.max_running) for cgi.timeout",
                            );
                        }
                    }
                }
            },
        };
        let (req, mark) = self.orphans.begin();
        let mut env = env;
        let at = env.partition_point(|(k, _)| k.as_str() < mark.0.as_str());
        env.insert(at, mark);
        let cgroup = self.request_cgroup();
        // With a lever every child gets its nice value at its start (see `lever`).
        // POS's prediction from the program's previous executions (`program`): a marked
        // worker's script whose last execution ran past the text budget starts unraised.
        let raise = raise
            && !self.lever.as_ref().is_some_and(|l| {
                let long = l.predicts_long(&script);
                if long {
                    self.stats.predicted_long.fetch_add(1, Relaxed);
                }
                long
            });
        let start = self.lever.as_ref().map(|l| l.prepare(raise, &self.stats));
        let started = tokio::time::Instant::now();
        let deadline = started + self.timeout;
        let mut attempt = 0;
        let spawned = loop {
            let placement = match &cgroup {
                Some(cg) => match cg.join_hook() {
                    Ok(join) => spawn::Placement::Cgroup {
                        dir: cg.dir_fd(),
                        join,
                    },
                    Err(e) => {
                        tracing::warn!("cgi: cannot join the request cgroup: {e}");
                        spawn::Placement::None
                    }
                },
                None => spawn::Placement::None,
            };
            let r = spawn::spawn(
                spawn::Command {
                    program: &script,
                    dir: &cwd,
                    env: &env,
                    slice: self.slice,
                    nice: start.map(|s| s.hook),
                    stdin_file: match &input {
                        Input::Spooled(f) => Some(f.as_raw_fd()),
                        _ => None,
                    },
                },
                placement,
            )
            .await;
            match &r {
                // The file is open for writing somewhere (just deployed, or a fork elsewhere in
                // this process still holds a copy of a writer's fd): try again shortly.
                Err(spawn::SpawnError::Exec { source, .. })
                    if source.raw_os_error() == Some(libc::ETXTBSY) && attempt < 10 =>
                {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                _ => break r,
            }
        };
        let mut sp = match spawned {
            Ok(sp) => sp,
            Err(e) => {
                if let (Some(l), Some(st)) = (&self.lever, start) {
                    l.abandon(st, &self.stats);
                }
                self.orphans.end(req);
                if let Some(cg) = cgroup {
                    remove_cgroup(cg, self.stats.clone());
                }
                self.stats.spawn_failed.fetch_add(1, Relaxed);
                tracing::warn!(script = %script.display(), "cgi: cannot start script: {e}");
                let (status, why) = match &e {
                    spawn::SpawnError::Exec { source, .. } => match source.raw_os_error() {
                        Some(libc::EACCES) => (StatusCode::FORBIDDEN, "script not executable"),
                        Some(libc::ENOEXEC) => (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "script has no #! line or an unknown format",
                        ),
                        Some(libc::ENOENT) => (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "script interpreter not found",
                        ),
                        _ => (StatusCode::INTERNAL_SERVER_ERROR, "cannot start script"),
                    },
                    _ => (StatusCode::INTERNAL_SERVER_ERROR, "cannot start script"),
                };
                return text(status, why);
            }
        };
        self.stats.started.fetch_add(1, Relaxed);
        let spawned = Stamp::now();
        let script_id: Arc<str> = Arc::from(script_name.as_str());
        tracing::debug!(script = %script_id, pid = sp.guard.pid(), placed = ?sp.placed, "cgi: started");
        if cgroup.is_some() && sp.placed != Placed::Nowhere {
            self.stats.in_cgroup.fetch_add(1, Relaxed);
        }
        let (stats, orphans) = (self.stats.clone(), self.orphans.clone());
        let leader = sp.guard.pid();
        let (asked_at, granted) = gate.unwrap_or((spawned, spawned));
        let asked = asked_at.at;
        let raised = match (&self.lever, start) {
            (Some(l), Some(st)) => l.adopt(leader, st, asked, &self.stats),
            _ => None,
        };
        if let (Some(l), None) = (&self.lever, &raised) {
            l.tail_enter(leader, asked, &self.stats);
        }
        if self.lever.is_some() {
            tracing::debug!(script = %script_id, pid = leader, raised = raised.is_some(), "cgi lever: script started");
        }
        if let Some((l, exited)) = self.lever.as_ref().zip(sp.guard.exit_watch()) {
            // The lever follows the process: an exited script leaves the head or the tail
            // now, not once the relay has sent its output over a slow link and reaped it
            // (meanwhile the tail's head would stay on a zombie and nothing run raised).
            let (l, r, stats) = (l.clone(), raised.clone(), self.stats.clone());
            tokio::spawn(async move {
                exited.await;
                if let Some(r) = r {
                    r.exited();
                }
                l.tail_leave(leader, asked, &stats);
            });
        }
        // Only a raised script under the `output` rule gets the watch (a descriptor each).
        let at_output = self.lever.as_ref().is_some_and(|l| l.restores_at_output());
        if let Some((r, written)) = raised
            .clone()
            .filter(|_| at_output)
            .and_then(|r| Some((r, sp.output_watch()?)))
        {
            // The `output` rule: restored at the script's first write, as the kernel tells
            // it, not once this request's next burst has read it (the gate's order and the
            // runtime's: a mis-marked image script ran 1.5 ms more of its CPU raised).
            tokio::spawn(async move {
                written.await;
                r.first_output();
            });
        }
        let held = raised.clone();
        let timing = Arc::new(ScriptTiming::new(
            self.stats.times.clone(),
            asked_at,
            granted,
            spawned,
            raised.is_some(),
        ));
        let (ended, lever, program) = (timing.clone(), self.lever.clone(), script.clone());
        if let (Some(l), Some(r)) = (&self.lever, &raised) {
            if l.has_budget() {
                tokio::spawn(l.clone().watch(r.clone()));
            }
        }
        orphans.started(leader);
        sp.guard.on_reaped(Box::new(move |sched| {
            if let Some(r) = held {
                r.exited();
            }
            ended.exited(sched);
            if let Some(l) = lever {
                l.tail_leave(leader, asked, &stats);
                if let Some(s) = sched {
                    l.script_ended(&program, Duration::from_nanos(s.run_ns));
                }
            }
            orphans.reaped(leader);
            orphans.end(req);
            if let Some(cg) = cgroup {
                remove_cgroup(cg, stats);
            }
            drop(permit);
        }));
        let mut tracker = Tracker::new(self.stats.clone(), script_id.clone());
        tracker.timing = Some(timing.clone());

        // stdin: the request body, concurrently with reading the output.
        let mut stdin = sp.stdin;
        let stdin_task = match input {
            Input::None => {
                drop(stdin);
                None
            }
            // The child reads the file itself.
            Input::Spooled(_) => {
                drop(stdin);
                None
            }
            Input::Stream(mut body) => Some(AbortOnDrop(tokio::spawn(async move {
                while let Some(Ok(f)) = body.frame().await {
                    if let Ok(d) = f.into_data() {
                        if stdin.write_all(&d).await.is_err() {
                            break;
                        }
                    }
                }
            }))),
        };
        tokio::spawn(log_stderr(sp.stderr, script_id.clone()));

        // The header block.
        let mut buf = BytesMut::with_capacity(4096);
        let head = tokio::time::timeout_at(deadline, read_head(&mut sp.stdout, &mut buf)).await;
        let (hlen, body_start) = match head {
            Err(_) => {
                tracker.settle();
                self.stats.timeouts.fetch_add(1, Relaxed);
                tracing::warn!(script = %script_id, "cgi: no headers before the timeout ({:?}): script killed", self.timeout);
                return text(StatusCode::GATEWAY_TIMEOUT, "script timed out");
            }
            Ok(Err(why)) => {
                tracker.settle();
                self.stats.malformed.fetch_add(1, Relaxed);
                // Let it end to report how it ended.
                let exit = tokio::time::timeout(Duration::from_millis(200), sp.guard.wait()).await;
                let how = match exit {
                    Ok(Ok(e)) => format!(" ({e})"),
                    _ => String::new(),
                };
                tracing::warn!(script = %script_id, "cgi: 502: {why}{how}");
                return text(StatusCode::BAD_GATEWAY, "malformed script output");
            }
            Ok(Ok(x)) => x,
        };
        if let Some(r) = &raised {
            // The script printed: restored now with the lever's `output` rule.
            r.first_output();
        }
        let parsed = match parse::parse(&buf[..hlen]) {
            Ok(p) => p,
            Err(why) => {
                tracker.settle();
                self.stats.malformed.fetch_add(1, Relaxed);
                tracing::warn!(script = %script_id, "cgi: 502: malformed header block: {why}");
                return text(StatusCode::BAD_GATEWAY, "malformed script output");
            }
        };
        let first = buf.split_off(body_start).freeze();
        match parsed {
            parse::Parsed::LocalRedirect(loc) => {
                tracker.done();
                Outcome::LocalRedirect(loc)
            }
            parse::Parsed::Document {
                status,
                headers,
                content_length,
            } => {
                if let Some(ct) = headers
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                {
                    timing.class(crate::headers::content_class(ct));
                }
                let relay = CgiRelay::new(relay::RelayParts {
                    stdout: sp.stdout,
                    first,
                    guard: sp.guard,
                    deadline,
                    max_output: self.max_output,
                    declared: content_length,
                    tracker,
                    stdin: stdin_task,
                    raised,
                });
                let mut r = Response::new(Reply::Relay(Box::new(relay)));
                *r.status_mut() = status;
                *r.headers_mut() = headers;
                Outcome::Response(r)
            }
        }
    }
}

/// Read until the end of the header block: `(header_len, body_start)` in `buf`, or why not.
async fn read_head(
    out: &mut tokio::net::unix::pipe::Receiver,
    buf: &mut BytesMut,
) -> Result<(usize, usize), String> {
    use tokio::io::AsyncReadExt;
    loop {
        if let Some(x) = parse::header_end(buf) {
            return Ok(x);
        }
        if buf.len() > MAX_HEADER_BLOCK {
            return Err(format!("header block longer than {MAX_HEADER_BLOCK} bytes"));
        }
        buf.reserve(4096);
        match out.read_buf(buf).await {
            Ok(0) if buf.is_empty() => return Err("script printed nothing".into()),
            Ok(0) => {
                return Err(format!(
                    "output ended inside the header block: {:?}",
                    String::from_utf8_lossy(&buf[..buf.len().min(80)])
                ))
            }
            Ok(_) => {}
            Err(e) => return Err(format!("reading script output: {e}")),
        }
    }
}

/// Log what a script prints on stderr (bounded), then drain the rest.
async fn log_stderr(mut err: tokio::net::unix::pipe::Receiver, script: Arc<str>) {
    use tokio::io::AsyncReadExt;
    let mut logged = 0usize;
    let mut buf = vec![0u8; 4096];
    let mut line = Vec::new();
    loop {
        let n = match err.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if logged >= MAX_STDERR_LOG {
            continue;
        }
        for &b in &buf[..n] {
            if b == b'\n' || line.len() >= 512 {
                if logged < MAX_STDERR_LOG {
                    tracing::warn!(script = %script, "cgi stderr: {}", String::from_utf8_lossy(&line));
                    logged += line.len() + 1;
                }
                line.clear();
                if b == b'\n' {
                    continue;
                }
            }
            line.push(b);
        }
    }
    if !line.is_empty() && logged < MAX_STDERR_LOG {
        tracing::warn!(script = %script, "cgi stderr: {}", String::from_utf8_lossy(&line));
    }
}

/// CFS period of a CGI container's cap.
pub const CPU_PERIOD: Duration = Duration::from_millis(100);

/// The default CGI container of a site: `site-<name>/cgi`, the name reduced to characters
/// safe in a cgroup name.
pub fn default_container(site: &str) -> String {
    let clean: String = site
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("site-{clean}/cgi")
}

/// The server's cgroup tree for CGI containers, if any site (its `[site.cgi]`) wants them and cgroups are
/// usable; otherwise `None` with one warning saying why.
pub fn cgroup_root<'a>(sites: impl IntoIterator<Item = &'a CgiConfig>) -> Option<os::CgroupRoot> {
    if !sites.into_iter().any(|c| c.cgroups) {
        return None;
    }
    match os::CgroupRoot::open("triage") {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(
                "cgi: no cgroups ({e}); scripts run without per-request containers and \
                 without CPU limits"
            );
            None
        }
    }
}

/// Account and remove a request cgroup once its script is gone (kills stragglers that left
/// the process group).
fn remove_cgroup(cg: os::Cgroup, stats: Arc<CgiStats>) {
    let work = move || {
        if let Ok(d) = cg.cpu_usage() {
            stats.cpu_ns.fetch_add(d.as_nanos() as u64, Relaxed);
        }
        let path = cg.path().to_owned();
        if let Err(e) = cg.remove() {
            tracing::warn!("cgi: removing request cgroup {}: {e}", path.display());
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) => {
            h.spawn_blocking(work);
        }
        Err(_) => work(),
    }
}
