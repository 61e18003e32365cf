//! One client connection: hyper's HTTP/1.1 state machine over the socket, a [`ConnService`]
//! handing each request to the router, and a watchdog closing the connection when a timeout
//! passes (one timer per connection, none per request).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::body::ServeBody;
use crate::ctx::{Conn, Ctx, Timeouts};
use crate::reclaim::Reclaim;
use crate::request_line::{LineScan, Verdict};

/// The socket, telling its [`Conn`] when a request head starts arriving and when writes
/// progress (what the watchdog reads), and checking each request line as it arrives
/// ([`LineScan`]): a refused line is answered here and the parser sees the end of the stream.
struct ConnIo {
    stream: TcpStream,
    conn: Conn,
    epoch: Instant,
    scan: LineScan,
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
        if this.conn.refused().is_some() {
            return Poll::Ready(Ok(()));
        }
        let starting = this.conn.at_rest();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.stream).poll_read(cx, buf);
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
        if let Poll::Ready(Ok(n)) = r {
            if n > 0 {
                this.conn.wrote_some(this.now());
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
                this.conn.wrote_some(this.now());
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

/// Serve `stream` (opened by [`open`] as `conn`) until the client closes, a timeout passes,
/// the server stops or reclaims the connection.
pub async fn serve(s: Serving, stream: TcpStream, conn: Conn) {
    let Serving {
        ctx,
        http,
        timeouts: t,
        epoch,
        mut stop,
        running,
        max_head,
        reclaim,
    } = s;
    let worker = conn.worker();
    let io = TokioIo::new(ConnIo {
        stream,
        conn: conn.clone(),
        epoch,
        scan: LineScan::new(max_head),
    });
    let svc = ConnService {
        ctx: ctx.clone(),
        conn: conn.clone(),
    };
    {
        let mut c = pin!(http.serve_connection(io, svc));
        let at = |ns: u64| tokio::time::Instant::from_std(epoch + Duration::from_nanos(ns));
        // The watchdog wakes at the current deadline but at least every `min` (a state change
        // can move the deadline earlier), so a timeout fires between 1x and 2x its value.
        let min = t.header.min(t.keepalive).min(t.send).max(1_000_000);
        let next = |now: u64| at(conn.deadline(&t).min(now + min));
        let watchdog = tokio::time::sleep_until(next(ctx.now()));
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
                        if let Some(status) = parser_answer(&e) {
                            ctx.answered_unparsed(&conn, status);
                        }
                    }
                    break;
                }
                _ = stop.changed(), if !stopping => {
                    stopping = true;
                    // Between requests (idle, or a head still arriving) nothing is lost by
                    // closing now; a request being answered finishes first.
                    if !conn.is_busy() {
                        break;
                    }
                    c.as_mut().graceful_shutdown();
                }
                _ = conn.evicted() => {
                    // A request may have started since the eviction was decided: it goes on.
                    if conn.at_rest() {
                        ctx.metrics().conn_reclaimed();
                        break;
                    }
                }
                _ = &mut watchdog => {
                    let now = ctx.now();
                    if now >= conn.deadline(&t) {
                        ctx.metrics().conn_timed_out();
                        break;
                    }
                    watchdog.as_mut().reset(next(now));
                }
            }
        }
        // Out of the table while the socket is still open (the table peeks at sockets).
        reclaim.remove(&conn);
    } // the connection (and its socket) is dropped here
    if let Some(status) = conn.refused() {
        ctx.answered_unparsed(&conn, status);
    }
    ctx.gate().checkin(worker);
    ctx.metrics().conn_closed();
    drop(running);
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
