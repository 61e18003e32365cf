//! A minimal HTTP/1.1 client connection over a raw `TcpStream`: one request at a time, the
//! response head parsed with `httparse`, bodies framed by Content-Length, chunked encoding or
//! end of stream. Written for measurement: it timestamps the first byte of each response as it
//! leaves the socket, reads through an optional [`Bucket`] (slow link), reuses its buffer across
//! requests, and reports every failure as a [`FetchError`] of a named [`ErrorKind`] instead of
//! panicking. (hyper's client was the alternative; see docs/load.md for why this one.)

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;
use url::{Host, Position, Url};

use crate::config::ConnMode;
use crate::throttle::Bucket;

/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Initial read buffer.
const BUF: usize = 16 * 1024;

/// What went wrong with one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The host name did not resolve.
    Dns,
    /// Connection refused.
    Refused,
    /// Another connect failure (unreachable, ...).
    Connect,
    /// The request did not complete within the timeout.
    Timeout,
    /// The peer reset the connection.
    Reset,
    /// The peer closed the connection before the response was complete.
    Truncated,
    /// The response was not valid HTTP (bad status line, bad framing, head too large).
    Malformed,
    /// Another I/O error.
    Io,
    /// The URL cannot be fetched by this client (https, ...).
    Unsupported,
    /// The run ended (duration + drain) while the request was still in flight.
    Unfinished,
    /// The response's status was 400 or above.
    Status,
}

impl ErrorKind {
    /// The snake_case name used in CSV and JSON.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Dns => "dns",
            ErrorKind::Refused => "refused",
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Io => "io",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Unfinished => "unfinished",
            ErrorKind::Status => "status",
        }
    }
}

/// A failed request.
#[derive(Clone, Debug)]
pub struct FetchError {
    /// The class of failure.
    pub kind: ErrorKind,
    /// Human detail.
    pub msg: String,
    /// Whether any byte of the response had arrived (a reused keep-alive connection that the
    /// server had closed fails with `got_bytes == false` and is retried once on a fresh one).
    pub got_bytes: bool,
}

impl FetchError {
    pub(crate) fn new(kind: ErrorKind, msg: impl Into<String>) -> Self {
        FetchError {
            kind,
            msg: msg.into(),
            got_bytes: false,
        }
    }
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.msg)
    }
}

fn io_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => ErrorKind::Reset,
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        io::ErrorKind::UnexpectedEof => ErrorKind::Truncated,
        _ => ErrorKind::Io,
    }
}

/// Where a connection goes: host (IP or name) and port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    host: OriginHost,
    port: u16,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum OriginHost {
    Ip(IpAddr),
    Name(String),
}

impl Origin {
    /// The origin of an `http://` URL.
    pub fn of(url: &Url) -> Result<Origin, FetchError> {
        if url.scheme() != "http" {
            return Err(FetchError::new(
                ErrorKind::Unsupported,
                format!("scheme {} not supported: {url}", url.scheme()),
            ));
        }
        let port = url.port_or_known_default().unwrap_or(80);
        let host = match url.host() {
            Some(Host::Ipv4(a)) => OriginHost::Ip(IpAddr::V4(a)),
            Some(Host::Ipv6(a)) => OriginHost::Ip(IpAddr::V6(a)),
            Some(Host::Domain(d)) => OriginHost::Name(d.to_string()),
            None => {
                return Err(FetchError::new(
                    ErrorKind::Unsupported,
                    format!("URL has no host: {url}"),
                ))
            }
        };
        Ok(Origin { host, port })
    }
}

/// One request ready to send: where to, and its bytes.
#[derive(Clone, Debug)]
pub struct Target {
    /// The URL.
    pub url: Url,
    /// Its origin.
    pub origin: Origin,
    /// The request bytes (GET, Host, Connection).
    pub request: Vec<u8>,
}

impl Target {
    /// Builds the GET request for `url`.
    pub fn new(url: Url, mode: ConnMode) -> Result<Target, FetchError> {
        let origin = Origin::of(&url)?;
        let path = &url[Position::BeforePath..Position::AfterQuery];
        let path = if path.is_empty() { "/" } else { path };
        let host = url.host_str().unwrap_or_default();
        let mut req = Vec::with_capacity(96 + path.len() + host.len());
        req.extend_from_slice(b"GET ");
        req.extend_from_slice(path.as_bytes());
        req.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        req.extend_from_slice(host.as_bytes());
        if let Some(p) = url.port() {
            req.extend_from_slice(format!(":{p}").as_bytes());
        }
        req.extend_from_slice(b"\r\nUser-Agent: triage-load\r\nAccept: */*\r\n");
        if mode == ConnMode::Close {
            req.extend_from_slice(b"Connection: close\r\n");
        }
        req.extend_from_slice(b"\r\n");
        Ok(Target {
            url,
            origin,
            request: req,
        })
    }
}

type Resolved = Result<Arc<Vec<SocketAddr>>, String>;

/// Resolves host names once per run (successes and failures are both cached).
#[derive(Default)]
pub struct Resolver {
    cache: Mutex<HashMap<Origin, Resolved>>,
}

impl Resolver {
    async fn resolve(&self, o: &Origin) -> Result<Arc<Vec<SocketAddr>>, FetchError> {
        if let OriginHost::Ip(ip) = o.host {
            return Ok(Arc::new(vec![SocketAddr::new(ip, o.port)]));
        }
        if let Some(r) = lock(&self.cache).get(o) {
            return r.clone().map_err(|m| FetchError::new(ErrorKind::Dns, m));
        }
        let OriginHost::Name(name) = &o.host else {
            unreachable!("IP origins returned above")
        };
        let r: Resolved = match tokio::net::lookup_host((name.as_str(), o.port)).await {
            Ok(it) => {
                let v: Vec<SocketAddr> = it.collect();
                if v.is_empty() {
                    Err(format!("{name}: no addresses"))
                } else {
                    Ok(Arc::new(v))
                }
            }
            Err(e) => Err(format!("{name}: {e}")),
        };
        lock(&self.cache).insert(o.clone(), r.clone());
        r.map_err(|m| FetchError::new(ErrorKind::Dns, m))
    }
}

/// Locks a mutex, ignoring poisoning (no code here panics while holding one).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Socket options for new connections.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnOpts {
    /// SO_RCVBUF, set before connect.
    pub rcvbuf: Option<usize>,
    /// Read throttle in bytes/s.
    pub throttle_bps: Option<f64>,
}

/// Opens a connection to `origin`, trying each resolved address in turn.
pub async fn connect(
    resolver: &Resolver,
    origin: &Origin,
    opts: ConnOpts,
) -> Result<Conn, FetchError> {
    let addrs = resolver.resolve(origin).await?;
    let mut last = None;
    for addr in addrs.iter() {
        match connect_one(*addr, opts).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(Conn {
                    stream: s,
                    buf: vec![0; BUF],
                    start: 0,
                    end: 0,
                    throttle: opts.throttle_bps.map(Bucket::new),
                    first_byte: None,
                });
            }
            Err(e) => last = Some((addr, e)),
        }
    }
    let (addr, e) = last.expect("resolver returns at least one address");
    let kind = if e.kind() == io::ErrorKind::ConnectionRefused {
        ErrorKind::Refused
    } else {
        ErrorKind::Connect
    };
    Err(FetchError::new(kind, format!("connect {addr}: {e}")))
}

async fn connect_one(addr: SocketAddr, opts: ConnOpts) -> io::Result<TcpStream> {
    let sock = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    if let Some(r) = opts.rcvbuf {
        sock.set_recv_buffer_size(r.min(u32::MAX as usize) as u32)?;
    }
    sock.connect(addr).await
}

/// A completed response.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// When its first byte was read.
    pub first_byte: Instant,
    /// When its last byte was read.
    pub done: Instant,
    /// Body bytes (after de-chunking).
    pub body_len: u64,
    /// The body, when asked for (up to the limit given).
    pub body: Option<Vec<u8>>,
    /// Content-Type names HTML (or is absent).
    pub html: bool,
    /// The connection may carry another request.
    pub reusable: bool,
}

/// An open connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    throttle: Option<Bucket>,
    first_byte: Option<Instant>,
}

struct Head {
    status: u16,
    version: u8,
    length: Option<u64>,
    chunked: bool,
    close: bool,
    keep_alive: bool,
    html: bool,
}

enum Framing {
    Empty,
    Length(u64),
    Chunked,
    ToEof,
}

impl Conn {
    fn malformed(&self, msg: impl Into<String>) -> FetchError {
        FetchError {
            kind: ErrorKind::Malformed,
            msg: msg.into(),
            got_bytes: true,
        }
    }

    fn io_err(&self, e: io::Error, what: &str) -> FetchError {
        FetchError {
            kind: io_kind(&e),
            msg: format!("{what}: {e}"),
            got_bytes: self.first_byte.is_some(),
        }
    }

    fn eof(&self, what: &str) -> FetchError {
        FetchError {
            kind: ErrorKind::Truncated,
            msg: format!("connection closed {what}"),
            got_bytes: self.first_byte.is_some(),
        }
    }

    /// Reads more bytes into the buffer (through the throttle); 0 means end of stream.
    async fn read_more(&mut self) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < MAX_HEAD {
                let n = self.buf.len() * 2;
                self.buf.resize(n, 0);
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "response head or chunk line longer than 64 KiB",
                ));
            }
        }
        let room = self.buf.len() - self.end;
        let n = match self.throttle.as_mut() {
            None => {
                self.stream
                    .read(&mut self.buf[self.end..self.end + room])
                    .await?
            }
            Some(b) => loop {
                let lim = room.min(b.allowance().await);
                match self
                    .stream
                    .try_read(&mut self.buf[self.end..self.end + lim])
                {
                    Ok(n) => {
                        b.consume(n);
                        break n;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.stream.readable().await?;
                        b.idle();
                    }
                    Err(e) => return Err(e),
                }
            },
        };
        if n > 0 && self.first_byte.is_none() {
            self.first_byte = Some(Instant::now());
        }
        self.end += n;
        Ok(n)
    }

    async fn more(&mut self, what: &str) -> Result<(), FetchError> {
        match self.read_more().await {
            Ok(0) => Err(self.eof(what)),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(self.malformed(e.to_string())),
            Err(e) => Err(self.io_err(e, "read")),
        }
    }

    /// Sends `req` and reads the whole response. `keep_body` keeps up to that many body bytes.
    pub async fn send(
        &mut self,
        req: &[u8],
        keep_body: Option<usize>,
    ) -> Result<Response, FetchError> {
        self.first_byte = None;
        if self.start != self.end {
            return Err(self.malformed("unsolicited bytes before the request"));
        }
        self.start = 0;
        self.end = 0;
        if let Err(e) = self.stream.write_all(req).await {
            return Err(self.io_err(e, "write"));
        }
        let head = loop {
            let h = self.read_head().await?;
            if (100..200).contains(&h.status) && h.status != 101 {
                continue;
            }
            break h;
        };
        let framing = if head.status < 200 || head.status == 204 || head.status == 304 {
            Framing::Empty
        } else if head.chunked {
            Framing::Chunked
        } else if let Some(n) = head.length {
            Framing::Length(n)
        } else {
            Framing::ToEof
        };
        let mut body = keep_body.map(|lim| (Vec::new(), lim));
        let body_len = match framing {
            Framing::Empty => 0,
            Framing::Length(n) => self.body_length(n, &mut body).await?,
            Framing::Chunked => self.body_chunked(&mut body).await?,
            Framing::ToEof => self.body_to_eof(&mut body).await?,
        };
        let done = Instant::now();
        let persistent = if head.version == 1 {
            !head.close
        } else {
            head.keep_alive && !head.close
        };
        let reusable = persistent
            && !matches!(framing, Framing::ToEof)
            && self.start == self.end
            && head.status != 101;
        Ok(Response {
            status: head.status,
            first_byte: self.first_byte.unwrap_or(done),
            done,
            body_len,
            body: body.map(|(b, _)| b),
            html: head.html,
            reusable,
        })
    }

    async fn read_head(&mut self) -> Result<Head, FetchError> {
        loop {
            if self.end > self.start {
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut resp = httparse::Response::new(&mut headers);
                match resp.parse(&self.buf[self.start..self.end]) {
                    Ok(httparse::Status::Complete(n)) => {
                        let h = Self::head_of(&resp).map_err(|m| self.malformed(m))?;
                        self.start += n;
                        return Ok(h);
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(e) => return Err(self.malformed(format!("bad response head: {e}"))),
                }
            }
            self.more("before the response head was complete").await?;
        }
    }

    fn head_of(resp: &httparse::Response<'_, '_>) -> Result<Head, String> {
        let mut h = Head {
            status: resp.code.unwrap_or(0),
            version: resp.version.unwrap_or(1),
            length: None,
            chunked: false,
            close: false,
            keep_alive: false,
            html: true,
        };
        for hd in resp.headers.iter() {
            let v = std::str::from_utf8(hd.value).unwrap_or("").trim();
            if hd.name.eq_ignore_ascii_case("content-length") {
                let n: u64 = v.parse().map_err(|_| format!("bad Content-Length {v:?}"))?;
                if h.length.is_some_and(|m| m != n) {
                    return Err("conflicting Content-Length headers".into());
                }
                h.length = Some(n);
            } else if hd.name.eq_ignore_ascii_case("transfer-encoding") {
                let last = v.rsplit(',').next().unwrap_or("").trim();
                h.chunked = last.eq_ignore_ascii_case("chunked");
            } else if hd.name.eq_ignore_ascii_case("connection") {
                for t in v.split(',') {
                    let t = t.trim();
                    if t.eq_ignore_ascii_case("close") {
                        h.close = true;
                    } else if t.eq_ignore_ascii_case("keep-alive") {
                        h.keep_alive = true;
                    }
                }
            } else if hd.name.eq_ignore_ascii_case("content-type") {
                h.html = v.to_ascii_lowercase().contains("html");
            }
        }
        Ok(h)
    }

    fn take(&mut self, max: u64, body: &mut Option<(Vec<u8>, usize)>) -> u64 {
        let avail = (self.end - self.start) as u64;
        let n = avail.min(max) as usize;
        if let Some((b, lim)) = body.as_mut() {
            let room = lim.saturating_sub(b.len()).min(n);
            b.extend_from_slice(&self.buf[self.start..self.start + room]);
        }
        self.start += n;
        n as u64
    }

    async fn body_length(
        &mut self,
        n: u64,
        body: &mut Option<(Vec<u8>, usize)>,
    ) -> Result<u64, FetchError> {
        let mut left = n;
        loop {
            left -= self.take(left, body);
            if left == 0 {
                return Ok(n);
            }
            self.more("in the middle of the body").await?;
        }
    }

    async fn body_to_eof(
        &mut self,
        body: &mut Option<(Vec<u8>, usize)>,
    ) -> Result<u64, FetchError> {
        let mut total = 0;
        loop {
            total += self.take(u64::MAX, body);
            match self.read_more().await {
                Ok(0) => return Ok(total),
                Ok(_) => {}
                Err(e) => return Err(self.io_err(e, "read")),
            }
        }
    }

    async fn body_chunked(
        &mut self,
        body: &mut Option<(Vec<u8>, usize)>,
    ) -> Result<u64, FetchError> {
        enum St {
            Size,
            Data(u64),
            DataEnd,
            Trailers,
        }
        let mut st = St::Size;
        let mut total = 0u64;
        loop {
            let avail = &self.buf[self.start..self.end];
            let progressed = match st {
                St::Size => match httparse::parse_chunk_size(avail) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        self.start += used;
                        st = if size == 0 {
                            St::Trailers
                        } else {
                            St::Data(size)
                        };
                        true
                    }
                    Ok(httparse::Status::Partial) => false,
                    Err(_) => return Err(self.malformed("bad chunk size line")),
                },
                St::Data(left) => {
                    let got = self.take(left, body);
                    total += got;
                    st = if got == left {
                        St::DataEnd
                    } else {
                        St::Data(left - got)
                    };
                    got > 0 && got == left
                }
                St::DataEnd => {
                    if avail.len() >= 2 {
                        if &avail[..2] != b"\r\n" {
                            return Err(self.malformed("chunk not followed by CRLF"));
                        }
                        self.start += 2;
                        st = St::Size;
                        true
                    } else {
                        false
                    }
                }
                St::Trailers => {
                    if avail.starts_with(b"\r\n") {
                        self.start += 2;
                        return Ok(total);
                    }
                    if let Some(i) = avail.windows(4).position(|w| w == b"\r\n\r\n") {
                        self.start += i + 4;
                        return Ok(total);
                    }
                    false
                }
            };
            if !progressed {
                self.more("in the middle of a chunked body").await?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(url: &str, mode: ConnMode) -> String {
        let t = Target::new(Url::parse(url).unwrap(), mode).unwrap();
        String::from_utf8(t.request).unwrap()
    }

    #[test]
    fn request_bytes() {
        assert_eq!(
            req("http://h/a/b.html?x=1#frag", ConnMode::KeepAlive),
            "GET /a/b.html?x=1 HTTP/1.1\r\nHost: h\r\nUser-Agent: triage-load\r\nAccept: */*\r\n\r\n"
        );
        let r = req("http://[::1]:8080", ConnMode::Close);
        assert!(
            r.starts_with("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n"),
            "{r}"
        );
        assert!(r.ends_with("Connection: close\r\n\r\n"), "{r}");
        let t = Target::new(Url::parse("http://[::1]:8080/").unwrap(), ConnMode::Close).unwrap();
        assert_eq!(
            t.origin,
            Origin {
                host: OriginHost::Ip("::1".parse().unwrap()),
                port: 8080
            }
        );
        assert_eq!(
            Origin::of(&Url::parse("http://example.org/").unwrap())
                .unwrap()
                .port,
            80
        );
        let e = Target::new(Url::parse("https://h/").unwrap(), ConnMode::Close).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported);
    }
}
