//! A minimal HTTP/1.1 client connection over a raw `TcpStream`: one request at a time, the
//! response head parsed with `httparse`, bodies framed by Content-Length, chunked encoding or
//! end of stream. Written for measurement: it timestamps the first byte of each response as it
//! leaves the socket, reads through an optional [`Bucket`] (slow link), reuses its buffer across
//! requests, and reports every failure as a [`FetchError`] of a named [`ErrorKind`] instead of
//! panicking. Requests may carry `Accept-Encoding` ([`AcceptEncoding`]); gzip bodies are decoded
//! as they stream in (flate2), counted and, for HTML, kept decoded for scraping; a corrupt gzip
//! body is [`ErrorKind::Decode`], a content coding the request did not accept is
//! [`ErrorKind::Encoding`]. (hyper's client was the alternative; see docs/load.md for why this one.)

use std::collections::HashMap;
use std::io::{self, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;
use url::{Host, Position, Url};

use crate::config::{AcceptEncoding, ConnMode};
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
    /// A gzip-encoded body that does not decode (bad header, corrupt deflate data, CRC or
    /// length mismatch, truncated stream, or bytes after its end).
    Decode,
    /// A `Content-Encoding` the request did not accept (any coding but identity when no
    /// `Accept-Encoding` or `identity` was sent; anything but gzip when gzip was), or one this
    /// client does not know (br, deflate, stacked codings, ...).
    Encoding,
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
            ErrorKind::Decode => "decode",
            ErrorKind::Encoding => "encoding",
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
    /// The request bytes (GET, Host, Accept-Encoding, Connection).
    pub request: Vec<u8>,
    /// What the request accepts as content coding.
    pub accept: AcceptEncoding,
}

impl Target {
    /// Builds the GET request for `url`.
    pub fn new(url: Url, mode: ConnMode, accept: AcceptEncoding) -> Result<Target, FetchError> {
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
        req.extend_from_slice(accept.header_line());
        if mode == ConnMode::Close {
            req.extend_from_slice(b"Connection: close\r\n");
        }
        req.extend_from_slice(b"\r\n");
        Ok(Target {
            url,
            origin,
            request: req,
            accept,
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
    /// When the request was written (the whole request in the socket).
    pub sent: Instant,
    /// When a new connection was opened for it and when the connect completed (`None`: the
    /// request went on a kept-alive connection).
    pub connected: Option<(Instant, Instant)>,
    /// When its first byte was read.
    pub first_byte: Instant,
    /// When its last byte was read.
    pub done: Instant,
    /// Body bytes as received (after de-chunking, before any content decoding).
    pub body_len: u64,
    /// Body bytes after content decoding (= `body_len` unless gzip-encoded).
    pub decoded_len: u64,
    /// The response was gzip-encoded (and decoded).
    pub gzip: bool,
    /// The body (decoded), when asked for (up to the limit given).
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
    coding: Coding,
}

/// The response's content coding (`Content-Encoding`).
#[derive(Debug, PartialEq)]
enum Coding {
    Identity,
    Gzip,
    /// Anything else, as the server spelled it (unknown or stacked codings).
    Other(String),
}

impl Coding {
    /// Parses the comma-separated codings of every `Content-Encoding` header, in order.
    fn of(values: &[&str]) -> Coding {
        let list: Vec<&str> = values
            .iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("identity"))
            .collect();
        match list.as_slice() {
            [] => Coding::Identity,
            [one] if one.eq_ignore_ascii_case("gzip") || one.eq_ignore_ascii_case("x-gzip") => {
                Coding::Gzip
            }
            _ => Coding::Other(list.join(", ")),
        }
    }
}

/// Whether a response of coding `c` may answer a request that accepted `a`: `Ok(true)` if its
/// body must be gunzipped, an [`ErrorKind::Encoding`] message if it may not.
fn check_coding(c: &Coding, a: AcceptEncoding) -> Result<bool, String> {
    let asked = match a {
        AcceptEncoding::None => "sent no Accept-Encoding",
        AcceptEncoding::Identity => "accepted identity only",
        AcceptEncoding::Gzip => "accepted gzip only",
    };
    match (c, a) {
        (Coding::Identity, _) => Ok(false),
        (Coding::Gzip, AcceptEncoding::Gzip) => Ok(true),
        (Coding::Gzip, _) => Err(format!(
            "response is Content-Encoding gzip but the request {asked}"
        )),
        (Coding::Other(o), _) => Err(format!(
            "unsupported Content-Encoding {o:?} (the request {asked})"
        )),
    }
}

/// Collects the decoded body: counts every byte and keeps up to a limit.
#[derive(Debug)]
struct Kept {
    body: Option<Vec<u8>>,
    limit: usize,
    total: u64,
}

impl Kept {
    fn push(&mut self, b: &[u8]) {
        self.total += b.len() as u64;
        if let Some(v) = self.body.as_mut() {
            let room = self.limit.saturating_sub(v.len()).min(b.len());
            v.extend_from_slice(&b[..room]);
        }
    }
}

impl io::Write for Kept {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.push(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where a response body goes as it arrives: straight into [`Kept`], or through a streaming
/// gzip decoder first (any chunking or read boundaries; one gzip member; an empty body is
/// empty content).
enum Sink {
    Plain(Kept),
    Gzip {
        dec: Box<flate2::write::GzDecoder<Kept>>,
        fed: bool,
    },
}

impl Sink {
    fn new(keep: Option<usize>, gzip: bool) -> Sink {
        let kept = Kept {
            body: keep.map(|_| Vec::new()),
            limit: keep.unwrap_or(0),
            total: 0,
        };
        if gzip {
            Sink::Gzip {
                dec: Box::new(flate2::write::GzDecoder::new(kept)),
                fed: false,
            }
        } else {
            Sink::Plain(kept)
        }
    }

    /// Feeds body bytes as received; the error says why they do not decode.
    fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        match self {
            Sink::Plain(k) => {
                k.push(data);
                Ok(())
            }
            Sink::Gzip { dec, fed } => {
                *fed |= !data.is_empty();
                dec.write_all(data).map_err(|e| match e.kind() {
                    io::ErrorKind::WriteZero => "bytes after the end of the gzip stream".into(),
                    _ => format!("corrupt gzip body: {e}"),
                })
            }
        }
    }

    /// The end of the body: checks the gzip trailer (CRC, length) and returns the content.
    fn finish(self) -> Result<Kept, String> {
        match self {
            Sink::Plain(k) => Ok(k),
            Sink::Gzip {
                mut dec,
                fed: false,
            } => Ok(std::mem::replace(
                dec.get_mut(),
                Kept {
                    body: None,
                    limit: 0,
                    total: 0,
                },
            )),
            Sink::Gzip { dec, fed: true } => dec
                .finish()
                .map_err(|e| format!("incomplete or corrupt gzip body: {e}")),
        }
    }
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

    fn decode_err(&self, msg: String) -> FetchError {
        FetchError {
            kind: ErrorKind::Decode,
            msg,
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

    /// Sends `req` (whose `Accept-Encoding` was `accept`) and reads the whole response.
    /// `keep_body` keeps up to that many body bytes (decoded, if gzip-encoded).
    pub async fn send(
        &mut self,
        req: &[u8],
        accept: AcceptEncoding,
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
        let sent = Instant::now();
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
        let gzip = check_coding(&head.coding, accept).map_err(|m| FetchError {
            kind: ErrorKind::Encoding,
            msg: m,
            got_bytes: true,
        })?;
        let mut sink = Sink::new(keep_body, gzip);
        let body_len = match framing {
            Framing::Empty => 0,
            Framing::Length(n) => self.body_length(n, &mut sink).await?,
            Framing::Chunked => self.body_chunked(&mut sink).await?,
            Framing::ToEof => self.body_to_eof(&mut sink).await?,
        };
        let kept = sink.finish().map_err(|m| self.decode_err(m))?;
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
            sent,
            connected: None,
            first_byte: self.first_byte.unwrap_or(done),
            done,
            body_len,
            decoded_len: kept.total,
            gzip,
            body: kept.body,
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
            coding: Coding::Identity,
        };
        let mut codings = Vec::new();
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
            } else if hd.name.eq_ignore_ascii_case("content-encoding") {
                codings.push(v);
            }
        }
        h.coding = Coding::of(&codings);
        Ok(h)
    }

    /// Moves up to `max` buffered body bytes into `sink`.
    fn take(&mut self, max: u64, sink: &mut Sink) -> Result<u64, FetchError> {
        let avail = (self.end - self.start) as u64;
        let n = avail.min(max) as usize;
        if let Err(m) = sink.feed(&self.buf[self.start..self.start + n]) {
            return Err(self.decode_err(m));
        }
        self.start += n;
        Ok(n as u64)
    }

    async fn body_length(&mut self, n: u64, sink: &mut Sink) -> Result<u64, FetchError> {
        let mut left = n;
        loop {
            left -= self.take(left, sink)?;
            if left == 0 {
                return Ok(n);
            }
            self.more("in the middle of the body").await?;
        }
    }

    async fn body_to_eof(&mut self, sink: &mut Sink) -> Result<u64, FetchError> {
        let mut total = 0;
        loop {
            total += self.take(u64::MAX, sink)?;
            match self.read_more().await {
                Ok(0) => return Ok(total),
                Ok(_) => {}
                Err(e) => return Err(self.io_err(e, "read")),
            }
        }
    }

    async fn body_chunked(&mut self, sink: &mut Sink) -> Result<u64, FetchError> {
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
                    let got = self.take(left, sink)?;
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
        let t = Target::new(Url::parse(url).unwrap(), mode, AcceptEncoding::None).unwrap();
        String::from_utf8(t.request).unwrap()
    }

    fn target(url: &str, a: AcceptEncoding) -> Target {
        Target::new(Url::parse(url).unwrap(), ConnMode::KeepAlive, a).unwrap()
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
        let t = Target::new(
            Url::parse("http://[::1]:8080/").unwrap(),
            ConnMode::Close,
            AcceptEncoding::None,
        )
        .unwrap();
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
        let e = Target::new(
            Url::parse("https://h/").unwrap(),
            ConnMode::Close,
            AcceptEncoding::None,
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported);
    }

    #[test]
    fn accept_encoding_header() {
        let r = |a| String::from_utf8(target("http://h/", a).request).unwrap();
        assert!(!r(AcceptEncoding::None).contains("Accept-Encoding"));
        assert!(r(AcceptEncoding::Gzip).ends_with("Accept: */*\r\nAccept-Encoding: gzip\r\n\r\n"));
        assert!(r(AcceptEncoding::Identity)
            .ends_with("Accept: */*\r\nAccept-Encoding: identity\r\n\r\n"));
        assert_eq!(
            target("http://h/", AcceptEncoding::Gzip).accept,
            AcceptEncoding::Gzip
        );
    }

    #[test]
    fn codings() {
        assert_eq!(Coding::of(&[]), Coding::Identity);
        assert_eq!(Coding::of(&["identity"]), Coding::Identity);
        assert_eq!(Coding::of(&["GZIP"]), Coding::Gzip);
        assert_eq!(Coding::of(&["x-gzip"]), Coding::Gzip);
        assert_eq!(Coding::of(&["identity, gzip"]), Coding::Gzip);
        assert_eq!(Coding::of(&["br"]), Coding::Other("br".into()));
        assert_eq!(
            Coding::of(&["gzip", "gzip"]),
            Coding::Other("gzip, gzip".into())
        );
        assert_eq!(
            Coding::of(&["deflate, gzip"]),
            Coding::Other("deflate, gzip".into())
        );
        use AcceptEncoding as A;
        for a in [A::None, A::Identity, A::Gzip] {
            assert_eq!(check_coding(&Coding::Identity, a), Ok(false));
            assert!(check_coding(&Coding::Other("br".into()), a)
                .unwrap_err()
                .contains("\"br\""));
        }
        assert_eq!(check_coding(&Coding::Gzip, A::Gzip), Ok(true));
        assert!(check_coding(&Coding::Gzip, A::None)
            .unwrap_err()
            .contains("no Accept-Encoding"));
        assert!(check_coding(&Coding::Gzip, A::Identity)
            .unwrap_err()
            .contains("identity only"));
    }

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Feeds `wire` to a gzip sink in pieces of `step` bytes.
    fn gunzip(wire: &[u8], step: usize, keep: Option<usize>) -> Result<Kept, String> {
        let mut s = Sink::new(keep, true);
        for piece in wire.chunks(step.max(1)) {
            s.feed(piece)?;
        }
        s.finish()
    }

    #[test]
    fn gzip_sink_decodes_across_any_boundaries() {
        let text: Vec<u8> = (0..20_000u32)
            .flat_map(|i| format!("<p>{}</p>", i % 97).into_bytes())
            .collect();
        let wire = gz(&text);
        assert!(wire.len() < text.len() / 4);
        for step in [1, 3, 10, 4096, wire.len()] {
            let k = gunzip(&wire, step, Some(usize::MAX)).unwrap();
            assert_eq!(k.total, text.len() as u64, "step {step}");
            assert_eq!(k.body.as_deref(), Some(&text[..]), "step {step}");
        }
        // Kept up to the limit, counted in full; not kept at all without a limit.
        let k = gunzip(&wire, 100, Some(1000)).unwrap();
        assert_eq!((k.total, k.body.unwrap().len()), (text.len() as u64, 1000));
        let k = gunzip(&wire, 100, None).unwrap();
        assert_eq!((k.total, k.body), (text.len() as u64, None));
        // An empty body is empty content.
        let k = gunzip(b"", 1, Some(10)).unwrap();
        assert_eq!((k.total, k.body), (0, Some(Vec::new())));
    }

    #[test]
    fn gzip_sink_rejects_corrupt_bodies() {
        let text = b"hello hello hello hello hello hello".repeat(50);
        let wire = gz(&text);
        // Not gzip at all.
        let e = gunzip(b"<html>plain text, not gzip</html>", 7, None).unwrap_err();
        assert!(e.contains("gzip"), "{e}");
        // A flipped byte in the deflate data or in the CRC.
        for i in [12, wire.len() - 6] {
            let mut bad = wire.clone();
            bad[i] ^= 0x55;
            assert!(gunzip(&bad, 5, None).is_err(), "flip at {i}");
        }
        // Truncated: the stream (or its trailer) is cut.
        for cut in [5, wire.len() / 2, wire.len() - 1] {
            let e = gunzip(&wire[..cut], 5, None).unwrap_err();
            assert!(e.contains("gzip"), "cut {cut}: {e}");
        }
        // Bytes after the end of the member.
        let mut extra = wire.clone();
        extra.extend_from_slice(b"trailing junk");
        let e = gunzip(&extra, 4096, None).unwrap_err();
        assert!(e.contains("after the end"), "{e}");
        // Intact: decodes.
        assert_eq!(gunzip(&wire, 5, None).unwrap().total, text.len() as u64);
    }
}
