//! What connections and requests share, behind narrow handles (as mini-redis's `Db` hides its
//! `Shared`):
//! - [`Ctx`]: the server's state (gate, sites, counters, access log, body settings,
//!   containers), one `Arc` to clone;
//! - [`Conn`]: one connection (its worker, addresses and socket, and the clocks its watchdog
//!   reads), one `Arc` to clone.

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;

use gate::Gate;
use policy::WorkerId;

use crate::config::GzipConfig;
use crate::containers::Containers;
use crate::logs::{AccessLog, AccessRecord};
use crate::metrics::Metrics;
use crate::site::Sites;

/// How responses are cut into bursts and compressed.
#[derive(Debug, Clone, PartialEq)]
pub struct Bodies {
    /// Bytes per body chunk (one burst each).
    pub chunk: usize,
    /// Most bytes of the first burst of a static response longer than `chunk` (at most
    /// `chunk`).
    pub first_chunk: usize,
    /// On-the-fly compression.
    pub gzip: GzipConfig,
}

struct Shared {
    gate: Gate,
    sites: Sites,
    metrics: Metrics,
    access_log: Option<AccessLog>,
    bodies: Bodies,
    containers: Containers,
}

/// The server's shared state; cloning it is one `Arc` clone. Two `Arc`s deep: each serving
/// thread has its own handle ([`Ctx::for_thread`]), so the clones a request makes (its
/// service, its handler, its body) count in that handle, not in one count that every core
/// writes.
#[derive(Clone)]
pub struct Ctx(Arc<Handle>);

/// One serving thread's handle on the shared state (see [`Ctx`]).
struct Handle(Arc<Shared>);

impl std::ops::Deref for Handle {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("gate", &self.0.gate)
            .field("sites", &self.0.sites)
            .finish_non_exhaustive()
    }
}

/// The gate a connection task's wake-ups queue on (`gate::QueueOnWake`).
impl AsRef<Gate> for Ctx {
    fn as_ref(&self) -> &Gate {
        &self.0.gate
    }
}

impl Ctx {
    /// Assemble the state the server's tasks share.
    pub fn new(
        gate: Gate,
        sites: Sites,
        access_log: Option<AccessLog>,
        bodies: Bodies,
        containers: Containers,
    ) -> Self {
        Self(Arc::new(Handle(Arc::new(Shared {
            gate,
            sites,
            metrics: Metrics::default(),
            access_log,
            bodies,
            containers,
        }))))
    }

    /// The same state behind a handle of its own: clones of it touch only its count (one per
    /// serving thread, see the type's docs).
    pub fn for_thread(&self) -> Self {
        Self(Arc::new(Handle(Arc::clone(&self.0 .0))))
    }

    /// The CPU gate.
    pub fn gate(&self) -> &Gate {
        &self.0.gate
    }

    /// The virtual hosts.
    pub fn sites(&self) -> &Sites {
        &self.0.sites
    }

    /// Request and connection counters.
    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// How bodies are cut and compressed.
    pub fn bodies(&self) -> &Bodies {
        &self.0.bodies
    }

    /// Resource containers (an empty tree without `[[container]]`).
    pub fn containers(&self) -> &Containers {
        &self.0.containers
    }

    /// The access log, if one is written.
    pub fn access_log(&self) -> Option<&AccessLog> {
        self.0.access_log.as_ref()
    }

    /// Monotonic nanoseconds since the server started (the gate's clock).
    pub fn now(&self) -> u64 {
        self.0.gate.now()
    }

    /// A response on `conn` is over (sent, or abandoned): count it, log it, and mark the
    /// connection idle.
    pub fn response_done(
        &self,
        conn: &Conn,
        status: u16,
        bytes: u64,
        access: Option<Box<AccessRecord>>,
    ) {
        self.0.metrics.record(status, bytes);
        if let (Some(rec), Some(log)) = (access, &self.0.access_log) {
            log.write(*rec, status, bytes);
        }
        conn.response_done(self.now());
    }

    /// The connection's request was answered `status` before it reached a handler (by the
    /// HTTP parser, or by the request-line check): count and log it like any answer. The
    /// access log shows `-` for the request line, which was not parsed.
    pub fn answered_unparsed(&self, conn: &Conn, status: u16) {
        self.0.metrics.record(status, 0);
        if let Some(log) = &self.0.access_log {
            let rec = AccessRecord {
                remote: conn.remote().ip(),
                time: std::time::SystemTime::now(),
                request_line: "-".into(),
                referer: String::new(),
                user_agent: String::new(),
            };
            log.write(rec, status, 0);
        }
    }
}

/// A connection's timeouts, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// To send a request head (and, on a new connection, the first one).
    pub header: u64,
    /// Idle between two requests.
    pub keepalive: u64,
    /// A response without write progress.
    pub send: u64,
    /// At rest this long, a connection is parked (0: as soon as a response ends).
    pub park_after: u64,
}

struct ConnState {
    worker: WorkerId,
    remote: SocketAddr,
    local: SocketAddr,
    fd: RawFd,
    busy: AtomicBool,
    requests: AtomicU64,
    idle_since: AtomicU64,
    head_since: AtomicU64,
    last_write: AtomicU64,
    /// A status answered before parsing (request-line check), 0 if none.
    refused: std::sync::atomic::AtomicU16,
    /// The request being (or last) answered came with a body, which its handler may not have
    /// read to the end: hyper may still be reading it after the response, so the connection
    /// is not parked before its next request (see `conn`).
    body_unread: AtomicBool,
    /// The connection has been at rest for the server's `park_after`: its next read that
    /// finds no bytes parks it (set by the connection's watchdog, cleared when a request
    /// starts). Unused with `park_after = 0`, where a connection parks when a response ends.
    park_due: AtomicBool,
    /// Set when the server reclaims the connection's slot (see `reclaim`).
    evicting: AtomicBool,
    /// Set when the server stops (see [`Conn::stop`]).
    stopping: AtomicBool,
    /// Wakes the connection's task when `evicting` or `stopping` is set. One atomic waker
    /// polled with the connection, instead of a `Notify` for the eviction and the stop
    /// `watch`'s: each of those took a lock on every poll of the connection's task (0.3 us
    /// of a 1 KB request with fifo, 0.9 us with pos's extra polls, on the 16-core machine).
    signal: atomic_waker::AtomicWaker,
}

/// What [`Conn::signalled`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// [`Conn::evict`] was called.
    Evict,
    /// [`Conn::stop`] was called.
    Stop,
}

/// One connection: the worker serving it, its addresses and socket, and when it last made
/// progress. Cloning it is one `Arc` clone.
#[derive(Clone)]
pub struct Conn(Arc<ConnState>);

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("worker", &self.0.worker)
            .field("remote", &self.0.remote)
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// A connection accepted at `now` (ns), served by `worker`; `fd` is its socket, valid
    /// while the connection lives.
    pub fn new(
        worker: WorkerId,
        remote: SocketAddr,
        local: SocketAddr,
        fd: RawFd,
        now: u64,
    ) -> Self {
        Self(Arc::new(ConnState {
            worker,
            remote,
            local,
            fd,
            busy: AtomicBool::new(false),
            requests: AtomicU64::new(0),
            idle_since: AtomicU64::new(now),
            head_since: AtomicU64::new(0),
            last_write: AtomicU64::new(now),
            refused: std::sync::atomic::AtomicU16::new(0),
            body_unread: AtomicBool::new(false),
            park_due: AtomicBool::new(false),
            evicting: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            signal: atomic_waker::AtomicWaker::new(),
        }))
    }

    /// The worker serving the connection.
    pub fn worker(&self) -> WorkerId {
        self.0.worker
    }

    /// The client's address.
    pub fn remote(&self) -> SocketAddr {
        self.0.remote
    }

    /// The server's address of this connection.
    pub fn local(&self) -> SocketAddr {
        self.0.local
    }

    /// The connection's socket (CGI watches it for the client going away).
    pub fn fd(&self) -> RawFd {
        self.0.fd
    }

    /// A request head was parsed at `now` and goes to its handler; `with_body`: a request body
    /// follows the head.
    pub fn request_started(&self, now: u64, with_body: bool) {
        let s = &self.0;
        s.busy.store(true, Relaxed);
        s.body_unread.store(with_body, Relaxed);
        s.park_due.store(false, Relaxed);
        s.head_since.store(0, Relaxed);
        s.last_write.store(now, Relaxed);
        s.requests.fetch_add(1, Relaxed);
    }

    /// Its response is over: the connection is idle from `now`.
    pub fn response_done(&self, now: u64) {
        self.0.idle_since.store(now, Relaxed);
        self.0.busy.store(false, Relaxed);
    }

    /// Whether a handler is running (a request is being answered).
    pub fn is_busy(&self) -> bool {
        self.0.busy.load(Relaxed)
    }

    /// Whether the next bytes to arrive start a request head: between responses, with no
    /// byte of a head read yet.
    pub fn at_rest(&self) -> bool {
        !self.0.busy.load(Relaxed) && self.0.head_since.load(Relaxed) == 0
    }

    /// Whether the connection may be parked (its HTTP state dropped, the bare socket kept):
    /// at rest, and the last request had no body that hyper could still be reading.
    pub fn parkable(&self) -> bool {
        self.at_rest() && !self.0.body_unread.load(Relaxed)
    }

    /// The connection's watchdog found it at rest for `park_after` ([`Conn::park_due`]).
    pub fn set_park_due(&self) {
        self.0.park_due.store(true, Relaxed);
    }

    /// Whether the connection, at rest for `park_after`, parks at its next read that finds no
    /// bytes.
    pub fn park_due(&self) -> bool {
        self.0.park_due.load(Relaxed)
    }

    /// The request line was refused with `status` before parsing (answered by the connection).
    pub fn set_refused(&self, status: u16) {
        self.0.refused.store(status, Relaxed);
    }

    /// When the connection last became idle (accepted, or its last response done), ns.
    pub fn idle_since(&self) -> u64 {
        self.0.idle_since.load(Relaxed)
    }

    /// Ask the connection to close (its slot is reclaimed); `false` if already asked.
    pub fn evict(&self) -> bool {
        if self.0.evicting.swap(true, Relaxed) {
            return false;
        }
        self.0.signal.wake();
        true
    }

    /// Whether [`Conn::evict`] was called.
    pub fn evicting(&self) -> bool {
        self.0.evicting.load(Relaxed)
    }

    /// The server stops: the connection closes once it is not answering a request.
    pub fn stop(&self) {
        if !self.0.stopping.swap(true, SeqCst) {
            self.0.signal.wake();
        }
    }

    /// Resolves with the first signal that is set and not yet `seen` (an eviction, then the
    /// stop), at once if one already is; pending (woken by [`Conn::evict`] and [`Conn::stop`])
    /// otherwise.
    pub fn signalled(&self, seen: (bool, bool)) -> impl std::future::Future<Output = Signal> + '_ {
        std::future::poll_fn(move |cx| {
            let check = || {
                if !seen.0 && self.0.evicting.load(SeqCst) {
                    Some(Signal::Evict)
                } else if !seen.1 && self.0.stopping.load(SeqCst) {
                    Some(Signal::Stop)
                } else {
                    None
                }
            };
            if let Some(s) = check() {
                return std::task::Poll::Ready(s);
            }
            self.0.signal.register(cx.waker());
            // A signal set between the check and the registration woke nobody: look again.
            match check() {
                Some(s) => std::task::Poll::Ready(s),
                None => std::task::Poll::Pending,
            }
        })
    }

    /// An identity for tables of connections (the address of its shared state).
    pub fn key(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// The status of [`Conn::set_refused`], if any.
    pub fn refused(&self) -> Option<u16> {
        Some(self.0.refused.load(Relaxed)).filter(|s| *s != 0)
    }

    /// Bytes arrived at `now`: between responses, a request head has started.
    pub fn read_some(&self, now: u64) {
        let s = &self.0;
        if !s.busy.load(Relaxed) && s.head_since.load(Relaxed) == 0 {
            s.head_since.store(now.max(1), Relaxed);
        }
    }

    /// Bytes were written to the socket at `now`.
    pub fn wrote_some(&self, now: u64) {
        self.0.last_write.store(now, Relaxed);
    }

    /// When the connection must be closed if nothing happens meanwhile (ns since start).
    pub fn deadline(&self, t: &Timeouts) -> u64 {
        let s = &self.0;
        if s.busy.load(Relaxed) {
            s.last_write.load(Relaxed) + t.send
        } else {
            let head = s.head_since.load(Relaxed);
            if head != 0 {
                head + t.header
            } else if s.requests.load(Relaxed) == 0 {
                s.idle_since.load(Relaxed) + t.header
            } else {
                s.idle_since.load(Relaxed) + t.keepalive
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_follows_the_connection_state() {
        let t = Timeouts {
            header: 10,
            keepalive: 100,
            send: 1000,
            park_after: 0,
        };
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let c = Conn::new(1, a, a, -1, 5);
        assert_eq!(c.deadline(&t), 15, "first request: the header timeout");
        assert!(c.parkable(), "nothing sent yet");
        c.request_started(20, false);
        assert!(!c.parkable(), "busy");
        assert_eq!(c.deadline(&t), 1020, "busy: the send timeout");
        c.wrote_some(30);
        assert_eq!(c.deadline(&t), 1030);
        c.read_some(35);
        assert_eq!(c.deadline(&t), 1030, "reading while busy starts no head");
        c.response_done(40);
        assert!(c.parkable(), "idle after a request without a body");
        assert_eq!(c.deadline(&t), 140, "idle: keep-alive");
        c.read_some(50);
        assert!(!c.parkable(), "a head has started");
        assert_eq!(c.deadline(&t), 60, "a head has started");
        c.request_started(60, true);
        c.response_done(70);
        assert!(c.at_rest() && !c.parkable(), "its body may still be read");
        c.request_started(80, false);
        c.response_done(90);
        assert!(c.parkable());
    }
}
