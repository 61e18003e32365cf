//! One client connection: its requests, one at a time (pipelined requests wait in the input
//! buffer), each relayed to the back end the policy chooses and its response relayed back.
//!
//! Per connection, three reused buffers: the client's input (request heads, request bodies,
//! pipelined requests), the relay buffer (a back end's response, `BUF_SIZE`) and the
//! rewritten head. A request head is parsed once (`httparse`) and written once for the back
//! end; a response head likewise for the client, sent with the first body bytes in one
//! vectored write; the body is copied through the relay buffer as it arrived, its end found
//! by its framing (`relay::framing`).
//!
//! Failures, as the pingora engine's (`proxy`): a back end that refuses the connection, or
//! closes or resets it before the end of its response head (none of the response reached the
//! client), is taken out and an idempotent request whose body the front end still holds is
//! tried on another (at most `retries` more times), else 502; a pooled connection that fails
//! that way says nothing of its back end: the request is tried again on a fresh connection to
//! the same back end. A response whose body stops short (its head went out) closes the
//! client's connection where it stopped. A back end silent for `response_timeout` gets 504
//! (not retried), garbage 502, no back end up 503. A malformed request is answered 400 and
//! the connection closed, without a back end. A client that takes no byte of what the front
//! end sends it for `keepalive_timeout` (it stopped reading) is let go: its connection and
//! the back end's are closed.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use policy::dispatch::{target_id, Target};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::framing::{Body, Framing};
use super::head::{self, RequestMeta, MAX_HEADERS};
use super::pool::Pool;
use crate::access_log::Record;
use crate::backends::{Backend, Load};
use crate::shared::{ConnState, Live, Shared};

/// The relay buffer's size: the most of a response read at once, and the longest response
/// head.
pub const BUF_SIZE: usize = 16 * 1024;

/// The longest request head (then 431).
pub const MAX_HEAD: usize = 64 * 1024;

/// The largest response body the relay holds until it is whole before the client sees any
/// of it (see [`Client::response`]): the relay buffer grows to fit such a response for as
/// long as it is on the way.
pub const HOLD_MAX: u64 = 64 * 1024;

/// What a request's head says, kept past its parse.
#[derive(Debug)]
struct Req {
    /// The head's length in the input buffer.
    head_len: usize,
    /// Its framing, keep-alive, method class.
    meta: RequestMeta,
    /// The policy's target (the path's hash).
    target: Target,
    /// The access log's fields, when there is a log.
    log: Option<LogFields>,
}

/// A request's fields for the access log.
#[derive(Debug)]
struct LogFields {
    /// `METHOD URI VERSION`.
    request_line: String,
    /// `Referer`.
    referer: String,
    /// `User-Agent`.
    user_agent: String,
    /// When its head was read.
    arrived: SystemTime,
}

/// How reading the next request head ended.
enum Next {
    /// A request.
    Request(Req),
    /// The client closed (or idled past `keepalive_timeout`, or the front end stops).
    Closed,
    /// The head is not HTTP, or not acceptable: answered with this status.
    Refused(u16),
}

/// How one request ended.
#[derive(Debug)]
struct Outcome {
    /// The status sent; 0 when the client left first.
    status: u16,
    /// Body bytes sent to the client.
    bytes: u64,
    /// The back end it went to last.
    backend: Option<SocketAddr>,
    /// Whether the client's connection carries another request.
    keep: bool,
    /// Whether a response head went to the client (else the front end answers `status`).
    written: bool,
}

/// Why a try on a back end failed.
enum UpFail {
    /// Closed or reset before any byte of the response.
    Reset,
    /// Silent for `response_timeout`.
    Timeout,
    /// Not an HTTP response.
    Garbage,
    /// The client left.
    ClientGone,
}

/// One client connection and its buffers.
pub struct Conn {
    /// The front end.
    shared: Arc<Shared>,
    /// Idle back-end connections.
    pool: Arc<Pool>,
    /// The client.
    client: TcpStream,
    /// The client's address (access log).
    peer: SocketAddr,
    /// Set when the front end stops.
    stop: watch::Receiver<bool>,
    /// Bytes from the client not yet relayed.
    input: Vec<u8>,
    /// The relay buffer (responses), `BUF_SIZE` bytes once the first request came; grown to
    /// hold a response of up to `HOLD_MAX` bytes of body whole while it is on the way.
    buf: Vec<u8>,
    /// The head being written to the other side.
    out: Vec<u8>,
    /// The back end the connection is pinned to (`pin`, `forward`).
    state: ConnState,
}

/// Write `a` then `b`, together when the socket takes them.
async fn write_two(s: &mut TcpStream, mut a: &[u8], mut b: &[u8]) -> io::Result<()> {
    while !a.is_empty() || !b.is_empty() {
        let n = if a.is_empty() {
            s.write(b).await?
        } else if b.is_empty() {
            s.write(a).await?
        } else {
            s.write_vectored(&[IoSlice::new(a), IoSlice::new(b)])
                .await?
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let k = n.min(a.len());
        a = &a[k..];
        b = &b[n - k..];
    }
    Ok(())
}

fn header_str(req: &httparse::Request<'_, '_>, name: &str) -> String {
    req.headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| String::from_utf8_lossy(h.value).into_owned())
        .unwrap_or_default()
}

async fn connect(addr: SocketAddr, limit: Duration) -> Result<TcpStream, bool> {
    match tokio::time::timeout(limit, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(_)) => Err(false),
        // Timed out.
        Err(_) => Err(true),
    }
}

/// `fut` (a write to the client), given up as `TimedOut` when the client takes nothing for
/// `limit` (a client that stopped reading: HAProxy's `timeout client`).
async fn within<T>(
    limit: Duration,
    fut: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

impl Conn {
    /// A connection accepted from `peer`.
    pub fn new(
        shared: Arc<Shared>,
        pool: Arc<Pool>,
        client: TcpStream,
        peer: SocketAddr,
        stop: watch::Receiver<bool>,
    ) -> Self {
        Self {
            shared,
            pool,
            client,
            peer,
            stop,
            input: Vec::with_capacity(4096),
            buf: Vec::new(),
            out: Vec::with_capacity(1024),
            state: ConnState::default(),
        }
    }

    /// Serve its requests until it closes, errs, or the front end stops.
    pub async fn serve(mut self) {
        loop {
            let req = match self.next_request().await {
                Next::Request(r) => r,
                Next::Closed => return,
                Next::Refused(code) => {
                    self.shared.counters.answered(code, Duration::ZERO);
                    let limit = self.shared.cfg.keepalive_timeout;
                    let _ = within(limit, self.client.write_all(&head::error_response(code))).await;
                    return;
                }
            };
            let start = Instant::now();
            let live = Live::new(self.shared.clone());
            if self.buf.is_empty() {
                self.buf = vec![0; BUF_SIZE];
            }
            let (o, consumed) = self.exchange(&req).await;
            if !o.written && o.status > 0 {
                let limit = self.shared.cfg.keepalive_timeout;
                let _ = within(
                    limit,
                    self.client.write_all(&head::error_response(o.status)),
                )
                .await;
            }
            self.shared.counters.answered(o.status, start.elapsed());
            if let (Some(log), Some(f)) = (&self.shared.access_log, req.log) {
                log.write(Record {
                    remote: Some(self.peer.ip()),
                    time: f.arrived,
                    request_line: f.request_line,
                    status: o.status,
                    bytes: o.bytes,
                    referer: f.referer,
                    user_agent: f.user_agent,
                    backend: o.backend,
                });
            }
            drop(live);
            if !o.keep || *self.stop.borrow() {
                return;
            }
            self.input.drain(..consumed);
        }
    }

    /// Read the next request head (waiting at most `keepalive_timeout` for each read), parse
    /// it once, and write the back end's head into `out`.
    async fn next_request(&mut self) -> Next {
        let idle = self.shared.cfg.keepalive_timeout;
        loop {
            if !self.input.is_empty() {
                let mut h = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut r = httparse::Request::new(&mut h);
                match r.parse(&self.input) {
                    Ok(httparse::Status::Complete(head_len)) => {
                        let Ok(meta) = head::request_meta(&r) else {
                            return Next::Refused(400);
                        };
                        let path = r.path.unwrap_or("/");
                        let target = target_id(path.split('?').next().unwrap_or(path));
                        head::write_request(&mut self.out, &r, &meta);
                        let log = self.shared.access_log.as_ref().map(|_| LogFields {
                            request_line: format!(
                                "{} {} HTTP/1.{}",
                                r.method.unwrap_or("-"),
                                path,
                                r.version.unwrap_or(1)
                            ),
                            referer: header_str(&r, "referer"),
                            user_agent: header_str(&r, "user-agent"),
                            arrived: SystemTime::now(),
                        });
                        return Next::Request(Req {
                            head_len,
                            meta,
                            target,
                            log,
                        });
                    }
                    Ok(httparse::Status::Partial) if self.input.len() >= MAX_HEAD => {
                        return Next::Refused(431)
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(_) => return Next::Refused(400),
                }
            } else if *self.stop.borrow() {
                return Next::Closed;
            }
            self.input.reserve(4096);
            let idle_wait = self.input.is_empty();
            let read = tokio::time::timeout(idle, self.client.read_buf(&mut self.input));
            let n = tokio::select! {
                r = read => match r {
                    Ok(Ok(n)) => n,
                    _ => 0,
                },
                // Between requests, stopping closes the connection at once.
                _ = self.stop.changed(), if idle_wait => 0,
            };
            if n == 0 {
                return Next::Closed;
            }
        }
    }

    /// Relay one request and its response; also how many input bytes it took.
    async fn exchange(&mut self, req: &Req) -> (Outcome, usize) {
        let s = self.shared.clone();
        let counters = &s.counters;
        let fail = |status: u16, backend: Option<SocketAddr>| Outcome {
            status,
            bytes: 0,
            backend,
            keep: false,
            written: false,
        };
        let _admitted = match &s.admission {
            Some(a) => {
                counters.admission_waiting.fetch_add(1, Relaxed);
                let admitted = a.enter(|| s.admission_bound()).await;
                counters.admission_waiting.fetch_sub(1, Relaxed);
                Some(admitted)
            }
            None => None,
        };
        // The part of the body already here, and whether it is all of it.
        let mut body = Body::new(req.meta.framing);
        let Ok(here) = body.advance(&self.input[req.head_len..]) else {
            return (fail(400, None), 0);
        };
        let whole = here.done;
        let mut consumed = req.head_len + here.used;
        if req.meta.expect_continue && !whole {
            let limit = self.shared.cfg.keepalive_timeout;
            let _ = within(
                limit,
                self.client.write_all(b"HTTP/1.1 100 Continue\r\n\r\n"),
            )
            .await;
        }
        let base = self.out.len();
        let mut tries = 0;
        let mut fresh_only = false;
        let mut load: Option<Load> = None;
        let mut via: Option<Arc<Backend>> = None;
        let mut forward_to: Option<String> = None;
        loop {
            if !fresh_only {
                // A failed try's load is released before the next choice sees the loads.
                drop(load.take());
                tries += 1;
                let Some(choice) = s.choose(req.target, &mut self.state) else {
                    // After a failed try the failure is the answer (502); before any, 503.
                    if tries > 1 {
                        counters.bad_gateway.fetch_add(1, Relaxed);
                        return (fail(502, via.map(|b| b.addr)), consumed);
                    }
                    counters.no_backend.fetch_add(1, Relaxed);
                    return (fail(503, None), consumed);
                };
                forward_to = choice.forward_to.as_ref().map(|b| b.addr.to_string());
                if forward_to.is_some() {
                    counters.forwarded.fetch_add(1, Relaxed);
                }
                load = Some(Load::on(choice.via.clone(), choice.forward_to.clone()));
                via = Some(choice.via);
            }
            let b = via.clone().expect("chosen above");
            let may_retry = req.meta.idempotent && whole && tries <= s.cfg.retries;
            let pooled = if fresh_only {
                None
            } else {
                self.pool.take(b.addr)
            };
            fresh_only = false;
            let reused = pooled.is_some();
            let mut up = match pooled {
                Some(c) => c,
                None => match connect(b.addr, s.cfg.connect_timeout).await {
                    Ok(c) => c,
                    Err(timed_out) => {
                        s.backends.request_failed(&b);
                        if may_retry {
                            counters.retries.fetch_add(1, Relaxed);
                            continue;
                        }
                        let code = if timed_out {
                            counters.timeouts.fetch_add(1, Relaxed);
                            504
                        } else {
                            counters.bad_gateway.fetch_add(1, Relaxed);
                            502
                        };
                        return (fail(code, Some(b.addr)), consumed);
                    }
                },
            };
            head::end_request(&mut self.out, base, forward_to.as_deref());
            let sent = self.send_request(&mut up, req, here.used, &mut body).await;
            let result = match sent {
                Ok(took) => {
                    consumed = took;
                    let r = self.response(up, req, &b).await;
                    if self.buf.len() > BUF_SIZE {
                        // Grown to hold a response whole: back to its size.
                        self.buf.truncate(BUF_SIZE);
                        self.buf.shrink_to(BUF_SIZE);
                    }
                    r
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(o) => return (o, consumed),
                Err(UpFail::Reset) => {
                    if reused && may_retry {
                        // A pooled connection its back end closed: a fresh one.
                        counters.retries.fetch_add(1, Relaxed);
                        fresh_only = true;
                        continue;
                    }
                    if !reused {
                        s.backends.request_failed(&b);
                    }
                    if may_retry {
                        counters.retries.fetch_add(1, Relaxed);
                        continue;
                    }
                    counters.bad_gateway.fetch_add(1, Relaxed);
                    return (fail(502, Some(b.addr)), consumed);
                }
                Err(UpFail::Timeout) => {
                    counters.timeouts.fetch_add(1, Relaxed);
                    return (fail(504, Some(b.addr)), consumed);
                }
                Err(UpFail::Garbage) => {
                    counters.bad_gateway.fetch_add(1, Relaxed);
                    return (fail(502, Some(b.addr)), consumed);
                }
                Err(UpFail::ClientGone) => return (fail(0, Some(b.addr)), consumed),
            }
        }
    }

    /// Send the request head and body to `up`: the bytes already here, and when the body
    /// is not all here, the rest as the client sends it. Returns the input bytes used.
    async fn send_request(
        &mut self,
        up: &mut TcpStream,
        req: &Req,
        here: usize,
        body: &mut Body,
    ) -> Result<usize, UpFail> {
        let limit = self.shared.cfg.response_timeout;
        let whole = body.is_done();
        let first = &self.input[req.head_len..req.head_len + here];
        match tokio::time::timeout(limit, write_two(up, &self.out, first)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(UpFail::Reset),
            Err(_) => return Err(UpFail::Timeout),
        }
        if whole {
            return Ok(req.head_len + here);
        }
        // The rest of the body, relayed as it comes (not replayable: no retry from here).
        self.input.drain(..req.head_len + here);
        while !body.is_done() {
            self.input.reserve(BUF_SIZE);
            let read = tokio::time::timeout(
                self.shared.cfg.keepalive_timeout,
                self.client.read_buf(&mut self.input),
            );
            match read.await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return Err(UpFail::ClientGone),
            }
            let Ok(step) = body.advance(&self.input) else {
                return Err(UpFail::ClientGone);
            };
            match tokio::time::timeout(limit, up.write_all(&self.input[..step.used])).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(UpFail::Garbage),
                Err(_) => return Err(UpFail::Timeout),
            }
            self.input.drain(..step.used);
        }
        Ok(0)
    }

    /// Read from `up` into the relay buffer after `filled` bytes, watching the client: a
    /// client that closes meanwhile has left; one that sends more (pipelining) is read into
    /// the input buffer.
    async fn read_watching(&mut self, up: &mut TcpStream, filled: usize) -> Result<usize, UpFail> {
        let limit = self.shared.cfg.response_timeout;
        let mut watch = self.input.len() < MAX_HEAD;
        loop {
            self.input.reserve(1024);
            let buf = &mut self.buf[filled..];
            let client = &mut self.client;
            let input = &mut self.input;
            let r = tokio::time::timeout(limit, async {
                tokio::select! {
                    biased;
                    r = up.read(buf) => (true, r),
                    r = client.read_buf(input), if watch => (false, r),
                }
            })
            .await;
            match r {
                Err(_) => return Err(UpFail::Timeout),
                Ok((true, Ok(n))) => return Ok(n),
                Ok((true, Err(_))) => return Err(UpFail::Reset),
                Ok((false, Ok(n))) if n > 0 => watch = self.input.len() < MAX_HEAD,
                Ok((false, _)) => return Err(UpFail::ClientGone),
            }
        }
    }

    /// Read the response from `up` and relay it; pool `up` when it may carry another.
    async fn response(
        &mut self,
        mut up: TcpStream,
        req: &Req,
        b: &Arc<Backend>,
    ) -> Result<Outcome, UpFail> {
        let mut filled = 0;
        // Whether an interim response went to the client: from then on the exchange cannot
        // be tried again.
        let mut interim_sent = false;
        // The response head for the client goes into the output buffer after the request's
        // (a retry sends that again): from here.
        let start = self.out.len();
        let (code, hlen, meta, close) = loop {
            let parsed = {
                let mut h = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut r = httparse::Response::new(&mut h);
                match r.parse(&self.buf[..filled]) {
                    Ok(httparse::Status::Complete(hlen)) => {
                        let code = r.code.unwrap_or(0);
                        let Ok(meta) = head::response_meta(&r, &req.meta) else {
                            return Err(UpFail::Garbage);
                        };
                        let close = !req.meta.keep_alive
                            || meta.framing == Framing::Close
                            || *self.stop.borrow();
                        self.out.truncate(start);
                        head::write_response(&mut self.out, &r, close, req.meta.http10);
                        Some((code, hlen, meta, close))
                    }
                    Ok(httparse::Status::Partial) if filled == self.buf.len() => {
                        return Err(UpFail::Garbage)
                    }
                    Ok(httparse::Status::Partial) => None,
                    Err(_) => return Err(UpFail::Garbage),
                }
            };
            match parsed {
                // An interim response (100 Continue, 103): relayed, and the final one follows.
                Some((code, hlen, _, _)) if (100..200).contains(&code) => {
                    if code == 101 {
                        return Err(UpFail::Garbage);
                    }
                    let limit = self.shared.cfg.keepalive_timeout;
                    if !req.meta.http10
                        && within(limit, self.client.write_all(&self.out[start..]))
                            .await
                            .is_err()
                    {
                        return Err(UpFail::ClientGone);
                    }
                    interim_sent = true;
                    self.buf.copy_within(hlen..filled, 0);
                    filled -= hlen;
                    continue;
                }
                Some(done) => break done,
                None => {}
            }
            let n = self.read_watching(&mut up, filled).await?;
            if n == 0 {
                // Closed before the head ended (none of it, or a part: a back end that died
                // writing it): nothing reached the client, so it is tried again as a reset
                // is, unless an interim response already went out.
                return Err(if interim_sent {
                    UpFail::Garbage
                } else {
                    UpFail::Reset
                });
            }
            filled += n;
        };
        b.responses.fetch_add(1, Relaxed);
        if let Some(q) = meta.disk {
            b.report_disk(q);
        }
        let mut body = Body::new(meta.framing);
        let Ok(first) = body.advance(&self.buf[hlen..filled]) else {
            return Err(UpFail::Garbage);
        };
        let mut used = first.used;
        // A response of up to `HOLD_MAX` bytes of body is held until it is whole (the relay
        // buffer grown to fit it, for as long as it is on the way): a back end that dies in
        // the middle of its body (killed while sending it) has then sent nothing to the
        // client, and the request is tried again as after a reset. A larger one is relayed as
        // it comes, and a cut in it closes the client's connection.
        if let Framing::Length(len) = meta.framing {
            let whole = hlen + len as usize;
            if len <= HOLD_MAX && whole > self.buf.len() {
                self.buf.resize(whole, 0);
            }
        }
        while !body.is_done() && hlen + used == filled && filled < self.buf.len() {
            let n = self.read_watching(&mut up, filled).await?;
            if n == 0 {
                if body.closed() {
                    break; // delimited by the close: whole
                }
                return Err(if interim_sent {
                    UpFail::Garbage
                } else {
                    UpFail::Reset
                });
            }
            let Ok(step) = body.advance(&self.buf[filled..filled + n]) else {
                return Err(UpFail::Garbage);
            };
            used += step.used;
            filled += n;
        }
        let mut reusable = meta.keep_alive && hlen + used == filled;
        let gone = |bytes| Outcome {
            status: 0,
            bytes,
            backend: Some(b.addr),
            keep: false,
            written: true,
        };
        let to_client = self.shared.cfg.keepalive_timeout;
        let head_and_first = write_two(
            &mut self.client,
            &self.out[start..],
            &self.buf[hlen..hlen + used],
        );
        if within(to_client, head_and_first).await.is_err() {
            return Ok(gone(0));
        }
        let mut bytes = used as u64;
        let limit = self.shared.cfg.response_timeout;
        let mut complete = body.is_done();
        while !complete {
            let n = match tokio::time::timeout(limit, up.read(&mut self.buf)).await {
                Ok(Ok(n)) => n,
                // Cut short (a timeout, a reset): the client's connection is closed.
                _ => 0,
            };
            if n == 0 {
                complete = body.closed();
                reusable = false;
                break;
            }
            let Ok(step) = body.advance(&self.buf[..n]) else {
                break;
            };
            reusable &= step.used == n;
            let sent = within(to_client, self.client.write_all(&self.buf[..step.used])).await;
            if sent.is_err() {
                return Ok(gone(bytes));
            }
            bytes += step.used as u64;
            complete = body.is_done();
        }
        if complete && reusable {
            self.pool.put(b.addr, up);
        }
        Ok(Outcome {
            status: code,
            bytes,
            backend: Some(b.addr),
            keep: complete && !close,
            written: true,
        })
    }
}
