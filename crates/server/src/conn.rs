//! One client connection: hyper's HTTP/1.1 state machine over the socket, a [`ConnService`]
//! handing each request to the router, and a watchdog closing the connection when a timeout
//! passes (one timer per connection, none per request).
//!
//! **Parking.** An idle connection costs almost nothing: while it has no request in progress
//! (accepted and nothing sent yet, or kept alive between requests for the server's
//! `park_after`) it is *parked*, a bare socket awaiting readiness with no HTTP state and no
//! buffers (hyper keeps an 8 KiB read buffer and an 8 KiB write buffer per connection).
//! hyper's connection is built when bytes arrive and dropped again when it next asks for a
//! request head that has not arrived once the connection is due to park (at once with
//! `park_after = 0`; otherwise when the watchdog has found it at rest for `park_after`, so
//! that a busy connection does not build and drop hyper's state for every request):
//! [`ConnIo`] answers that read with an error of its own instead of waiting (only when the
//! connection is at rest, the last request had no body hyper could still be reading, and no
//! write of hyper's is waiting for room, so that nothing of a response is left unsent), and
//! hyper ends without writing anything; the socket and whatever hyper had read ahead (a
//! pipelined head, partly arrived) are taken back with `Connection::into_parts`, and the
//! bytes read ahead are handed to the next connection first. The timeouts, the reclaiming of
//! idle connections at `max_conns` and the server's stop act the same on parked and active
//! connections.

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http::{Request, Response};
use hyper::body::{Body as _, Incoming};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::body::ServeBody;
use crate::ctx::{Conn, Ctx, Signal, Timeouts};
use crate::reclaim::Reclaim;
use crate::request_line::{LineScan, Verdict};

/// The socket, telling its [`Conn`] when a request head starts arriving and when writes
/// progress (what the watchdog reads), and checking each request line as it arrives
/// ([`LineScan`]): a refused line is answered here and the parser sees the end of the stream.
/// It also decides when hyper's connection is dropped for the connection to be parked (see
/// the module docs).
struct ConnIo {
    /// The client's socket.
    stream: TcpStream,
    /// The connection's shared state (what the watchdog and the reclaim table read).
    conn: Conn,
    /// The server's clock origin, for the times given to `conn`.
    epoch: Instant,
    /// Follows the request line of each head that starts at rest.
    scan: LineScan,
    /// Bytes a previous hyper connection had read and not parsed (a pipelined head, partly
    /// arrived): read before the socket.
    ahead: Bytes,
    /// hyper's last write found the socket full: its write buffer may hold bytes of a response
    /// still, so the connection must not be parked until a write succeeds.
    write_blocked: bool,
    /// Set when a read was answered with the parking error: hyper's end is a park, not a close.
    parked: bool,
    /// The server keeps a connection at rest ready for `park_after` (see [`serve`]): it parks
    /// only once its watchdog says so ([`Conn::park_due`]), not as soon as a response ends.
    linger: bool,
}

impl ConnIo {
    fn new(
        stream: TcpStream,
        conn: Conn,
        epoch: Instant,
        max_head: usize,
        ahead: Bytes,
        linger: bool,
    ) -> Self {
        Self {
            stream,
            conn,
            epoch,
            scan: LineScan::new(max_head),
            ahead,
            write_blocked: false,
            parked: false,
            linger,
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A write returned `r`: note write progress and whether hyper waits for room. A write
    /// that goes through on a parkable connection is the end of a response (hyper writes
    /// after the body is done): without a linger, wake the task so that hyper asks for the
    /// next head again and the connection is parked then (hyper, having found the socket empty
    /// while answering, would otherwise wait for the socket to become readable). With one,
    /// hyper waits for the next head, and the watchdog parks the connection later.
    fn wrote(&mut self, r: &Poll<io::Result<usize>>, cx: &Context<'_>) {
        match r {
            Poll::Pending => self.write_blocked = true,
            Poll::Ready(Ok(n)) => {
                if *n > 0 {
                    self.conn.wrote_some(self.now());
                }
                self.write_blocked = false;
                if !self.linger && self.conn.parkable() {
                    cx.waker().wake_by_ref();
                }
            }
            Poll::Ready(Err(_)) => {}
        }
    }
}

/// The error a parked connection's last read gives hyper (never seen by a client).
fn parking() -> io::Error {
    io::Error::other("idle connection parked")
}

impl AsyncRead for ConnIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.conn.refused().is_some() {
            return Poll::Ready(Ok(()));
        }
        if !this.ahead.is_empty() {
            // Already looked at (and counted) when first read.
            let n = this.ahead.len().min(buf.remaining());
            buf.put_slice(&this.ahead[..n]);
            this.ahead.advance(n);
            return Poll::Ready(Ok(()));
        }
        let starting = this.conn.at_rest();
        // At rest, hyper reads only for a request head (the previous response is over, and
        // with no request body its reading side is done).
        let park =
            !this.write_blocked && this.conn.parkable() && (!this.linger || this.conn.park_due());
        let before = buf.filled().len();
        let r = Pin::new(&mut this.stream).poll_read(cx, buf);
        if park && r.is_pending() {
            this.parked = true;
            return Poll::Ready(Err(parking()));
        }
        if buf.filled().len() > before {
            if starting {
                this.scan.start();
            }
            if let Verdict::Refuse(status) = this.scan.feed(&mut buf.filled_mut()[before..]) {
                // The parser sees the end of the stream; the client gets the answer.
                buf.set_filled(before);
                this.conn.set_refused(status);
                let _ = this.stream.try_write(&crate::request_line::answer(status));
                return Poll::Ready(Ok(()));
            }
            this.conn.read_some(this.now());
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
        this.wrote(&r, cx);
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.wrote(&r, cx);
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

/// hyper's service for one connection: each request goes to [`crate::router::dispatch`].
#[derive(Debug, Clone)]
pub struct ConnService {
    ctx: Ctx,
    conn: Conn,
}

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response<ServeBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        // At once, not when the handler first runs: from here the connection is not at rest
        // (hyper may read ahead while the handler has not started).
        self.conn
            .request_started(self.ctx.now(), !req.body().is_end_stream());
        let (ctx, conn) = (self.ctx.clone(), self.conn.clone());
        Box::pin(async move { Ok(crate::router::dispatch(&ctx, &conn, req).await) })
    }
}

/// What every connection task is given besides its socket.
#[derive(Clone)]
pub struct Serving {
    /// The server's state.
    pub ctx: Ctx,
    /// hyper's HTTP/1.1 settings.
    pub http: Arc<http1::Builder>,
    /// The connection's timeouts.
    pub timeouts: Timeouts,
    /// The server's clock origin (`ctx.now()` is nanoseconds since then).
    pub epoch: Instant,
    /// Turns `true` when the server stops: finish the response in flight, then close.
    pub stop: watch::Receiver<bool>,
    /// Held by every connection task: the server's shutdown waits until all are dropped.
    pub running: mpsc::Sender<()>,
    /// Longest request head (`max_header_size`): a request line this long is 414.
    pub max_head: usize,
    /// Every open connection, for reclaiming idle ones at `max_conns`.
    pub reclaim: Arc<Reclaim>,
    /// Bumped by the server's trimmer when a crowd of connections has left or gone idle:
    /// each serving thread then hands its allocator's empty pages back
    /// (`os::heap::collect_thread`), which no other thread can do for it.
    pub trims: watch::Receiver<u64>,
}

/// A connection just accepted from `peer`: its worker checked out and its entry in the table
/// of open connections (at once, so that the accept loop can reclaim it before its task
/// first runs). Hand it to [`serve`].
pub fn open(s: &Serving, stream: &TcpStream, peer: SocketAddr) -> Conn {
    let worker = s.ctx.gate().checkout();
    let local = stream.local_addr().unwrap_or(peer);
    let fd = std::os::fd::AsRawFd::as_raw_fd(stream);
    let conn = Conn::new(worker, peer, local, fd, s.ctx.now());
    s.reclaim.insert(&conn);
    conn
}

/// hyper's connection over one socket, boxed: a parked connection's task holds none.
type Http = Box<http1::Connection<TokioIo<ConnIo>, ConnService>>;

/// Where a connection is: parked (the bare socket) or speaking HTTP.
enum Phase {
    /// Waiting for bytes, no HTTP state.
    Parked(TcpStream),
    /// hyper's connection (it owns the socket).
    Active(Http),
}

/// What happened to the phase's own work.
enum Step {
    /// A parked socket became readable (or failed).
    Readable(io::Result<()>),
    /// hyper's connection ended: closed, failed, or parked.
    Ended(hyper::Result<()>),
}

impl Phase {
    /// Wait for the phase's next step.
    async fn step(&mut self) -> Step {
        match self {
            Phase::Parked(s) => Step::Readable(s.readable().await),
            Phase::Active(c) => Step::Ended(poll_fn(|cx| c.poll_without_shutdown(cx)).await),
        }
    }
}

/// Serve `stream` (opened by [`open`] as `conn`) until the client closes, a timeout passes,
/// the server stops or reclaims the connection. The connection starts parked (see the module
/// docs).
pub async fn serve(s: Serving, stream: TcpStream, conn: Conn) {
    let Serving {
        ctx,
        http,
        timeouts: t,
        epoch,
        stop,
        running,
        max_head,
        reclaim,
        trims: _,
    } = s;
    let worker = conn.worker();
    let svc = ConnService {
        ctx: ctx.clone(),
        conn: conn.clone(),
    };
    let linger = t.park_after > 0;
    let activate = |stream: TcpStream, ahead: Bytes, stopping: bool| -> Phase {
        let io = ConnIo::new(stream, conn.clone(), epoch, max_head, ahead, linger);
        let mut c = Box::new(http.serve_connection(TokioIo::new(io), svc.clone()));
        if stopping {
            Pin::new(&mut *c).graceful_shutdown();
        }
        Phase::Active(c)
    };
    let mut phase = Phase::Parked(stream);
    let m = ctx.metrics();
    m.conn_parked();
    // Whether `phase` is a park counted in the metrics (not the socket of a closing one).
    let mut counted = true;
    // Set when hyper ended the connection cleanly: the socket is shut down before it closes.
    let mut clean = false;
    {
        let at = |ns: u64| tokio::time::Instant::from_std(epoch + Duration::from_nanos(ns));
        // The watchdog wakes at the current deadline but at least every `min` (a state change
        // can move the deadline earlier), so a timeout fires between 1x and 2x its value.
        let min = t.header.min(t.keepalive).min(t.send).max(1_000_000);
        let next = |now: u64| at(conn.deadline(&t).min(now + min));
        // An active connection's watchdog also wakes when it may have been at rest for
        // `park_after` (from the end of its last response, or `park_after` from now while it
        // is busy or its rest began too long ago to be the current one), to park it then.
        // The look falls on the server's grid of `park_after` ([`park_check`]), so that the
        // watchdogs of all busy connections wake the thread once per `park_after`, together.
        let next_active = |now: u64| {
            if !linger {
                return next(now);
            }
            let rest_ends = conn.idle_since() + t.park_after;
            let check = if conn.at_rest() && rest_ends > now {
                rest_ends
            } else {
                now + t.park_after
            };
            next(now).min(at(park_check(check, t.park_after)))
        };
        // A parked connection's deadline cannot move earlier until bytes arrive (the
        // unparking re-arms the watchdog): it sleeps until the deadline itself, so that ten
        // thousand idle connections do not wake the server every `min`.
        let parked_until = || at(conn.deadline(&t));
        let watchdog = tokio::time::sleep_until(parked_until());
        let mut watchdog = pin!(watchdog);
        // A connection accepted as the server stops is closed at once (nothing was asked yet).
        // Later, the stop reaches it as a signal ([`Reclaim::stop_all`]).
        let mut stopping = *stop.borrow();
        let mut evict_seen = false;
        while !stopping || conn.is_busy() {
            tokio::select! {
                biased;
                step = phase.step() => match step {
                    Step::Readable(Ok(())) => {
                        let Phase::Parked(stream) = phase else { unreachable!("parked") };
                        m.conn_unparked();
                        counted = false;
                        phase = activate(stream, Bytes::new(), stopping);
                        watchdog.as_mut().reset(next_active(ctx.now()));
                    }
                    Step::Readable(Err(e)) => {
                        tracing::debug!(error = %e, "parked connection failed");
                        break;
                    }
                    Step::Ended(r) => {
                        let Phase::Active(c) = phase else { unreachable!("active") };
                        let parts = c.into_parts();
                        let io = parts.io.into_inner();
                        if io.parked {
                            // Bytes hyper read ahead are a head's start: its timeout runs.
                            let ahead = Bytes::copy_from_slice(&parts.read_buf);
                            phase = if ahead.is_empty() {
                                m.conn_parked();
                                counted = true;
                                watchdog.as_mut().reset(parked_until());
                                Phase::Parked(io.stream)
                            } else {
                                conn.read_some(ctx.now());
                                activate(io.stream, ahead, stopping)
                            };
                            continue;
                        }
                        match r {
                            Ok(()) => clean = true,
                            Err(e) => {
                                tracing::debug!(error = %e, "connection ended with an error");
                                if let Some(status) = parser_answer(&e) {
                                    ctx.answered_unparsed(&conn, status);
                                }
                            }
                        }
                        phase = Phase::Parked(io.stream);
                        break;
                    }
                },
                signal = conn.signalled((evict_seen, stopping)) => match signal {
                    Signal::Stop => {
                        stopping = true;
                        // Between requests (idle, or a head still arriving) nothing is lost by
                        // closing now; a request being answered finishes first.
                        if !conn.is_busy() {
                            break;
                        }
                        if let Phase::Active(c) = &mut phase {
                            Pin::new(&mut **c).graceful_shutdown();
                        }
                    }
                    Signal::Evict => {
                        evict_seen = true;
                        // A request may have started since the eviction was decided: it goes
                        // on.
                        if conn.at_rest() {
                            ctx.metrics().conn_reclaimed();
                            break;
                        }
                    }
                },
                _ = &mut watchdog => {
                    let now = ctx.now();
                    if now >= conn.deadline(&t) {
                        ctx.metrics().conn_timed_out();
                        break;
                    }
                    let again = match phase {
                        Phase::Parked(_) => parked_until(),
                        Phase::Active(_) => {
                            if linger
                                && conn.parkable()
                                && now >= conn.idle_since() + t.park_after
                            {
                                // hyper's read, polled again as the loop goes on, parks it.
                                conn.set_park_due();
                            }
                            next_active(now)
                        }
                    };
                    watchdog.as_mut().reset(again);
                }
            }
        }
        // Out of the table while the socket is still open (the table peeks at sockets).
        reclaim.remove(&conn);
    }
    if counted {
        m.conn_unparked();
    }
    if let (true, Phase::Parked(stream)) = (clean, &mut phase) {
        let _ = stream.shutdown().await;
    }
    drop(phase); // the socket closes here
    if let Some(status) = conn.refused() {
        ctx.answered_unparsed(&conn, status);
    }
    ctx.gate().checkin(worker);
    ctx.metrics().conn_closed();
    drop(running);
}

/// When an active connection's watchdog looks whether it has been at rest for `park_after`:
/// at `due` (nanoseconds since the server's epoch) rounded up to the next whole multiple of
/// `park_after`. Every busy connection's look then falls on the same instants, one wake-up of
/// the serving thread per `park_after` for all of them (tokio fires the timers of one
/// millisecond in one turn), instead of one per connection at its own instant: at 2000 req/s
/// over 16 connections the thread otherwise woke 120 more times a second, each wake-up of an
/// idle thread costing here about as much CPU as two requests. A connection then parks between
/// `park_after` and twice that at rest.
fn park_check(due: u64, park_after: u64) -> u64 {
    if park_after == 0 {
        return due;
    }
    due.div_ceil(park_after).saturating_mul(park_after)
}

/// The status hyper answered for a parse error that ended the connection, if it answered one
/// (it sends 400, 414 or 431 and closes; an HTTP/2 preface or an internal error gets nothing).
fn parser_answer(e: &hyper::Error) -> Option<u16> {
    if !e.is_parse() || e.is_parse_version_h2() || e.is_parse_status() {
        return None;
    }
    let text = e.to_string();
    if e.is_parse_too_large() {
        Some(if text.contains("URI too long") {
            414
        } else {
            431
        })
    } else if text.starts_with("internal") {
        None
    } else {
        Some(400)
    }
}

#[cfg(test)]
mod tests {
    use super::park_check;

    #[test]
    fn park_checks_of_different_connections_fall_on_one_grid() {
        let step = 50_000_000; // 50 ms
                               // Connections whose rests end at different instants within one step look together.
        let dues = [1_000_000_001, 1_020_000_000, 1_049_999_999, 1_050_000_000];
        let checks: Vec<u64> = dues.iter().map(|&d| park_check(d, step)).collect();
        assert_eq!(checks, vec![1_050_000_000; 4]);
        for (&d, &c) in dues.iter().zip(&checks) {
            assert!(c >= d && c < d + step, "{d} -> {c}");
        }
        // The next step is the next instant.
        assert_eq!(park_check(1_050_000_001, step), 1_100_000_000);
        // Without a linger nothing is rounded.
        assert_eq!(park_check(123, 0), 123);
    }
}
