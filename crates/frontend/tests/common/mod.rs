//! Test helpers: `triage serve` back ends in a runtime thread of their own, fake back ends on
//! plain sockets that misbehave on purpose, and a small blocking HTTP/1.1 client.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use frontend::FrontConfig;

/// A `triage serve` on port 0 (in this process).
pub struct Backend {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

pub fn serve_config(root: &Path) -> server::Config {
    server::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin: Some("127.0.0.1:0".parse().unwrap()),
        root: Some(root.to_owned()),
        slots: Some(1),
        threads: Some(1),
        workers: 4,
        ..server::Config::default()
    }
}

impl Backend {
    pub fn start(cfg: server::Config) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let srv = server::Server::bind(cfg).await.expect("bind");
                tx.send((srv.local_addr(), srv.admin_addr().unwrap()))
                    .unwrap();
                srv.run(async move {
                    let _ = stop_rx.await;
                })
                .await
                .unwrap();
            });
        });
        let (addr, admin) = rx.recv().unwrap();
        Self {
            addr,
            admin,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn metric(&self, name: &str) -> f64 {
        let text = String::from_utf8(get(self.admin, "/metrics", "").body).unwrap();
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A document root with a few files.
pub fn site() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    for i in 0..20 {
        std::fs::write(t.path().join(format!("f{i}.html")), format!("file {i}\n")).unwrap();
    }
    std::fs::write(t.path().join("big.bin"), vec![7u8; 300_000]).unwrap();
    t
}

/// Run each named test function (taking a [`frontend::Engine`]) on both engines: a module of
/// the same name with a `pingora` and a `relay` test.
macro_rules! both_engines {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn pingora() {
                    super::$name(frontend::Engine::Pingora)
                }
                #[test]
                fn relay() {
                    super::$name(frontend::Engine::Relay)
                }
            }
        )*
    };
}

/// A front end configuration for `backends`, port 0, quick health checks, on the default
/// engine.
pub fn front_config(backends: &[SocketAddr], policy: &str) -> FrontConfig {
    front_config_on(frontend::Engine::default(), backends, policy)
}

/// [`front_config`] on `engine`.
pub fn front_config_on(
    engine: frontend::Engine,
    backends: &[SocketAddr],
    policy: &str,
) -> FrontConfig {
    let mut c = FrontConfig {
        engine,
        listen: "127.0.0.1:0".parse().unwrap(),
        admin: Some("127.0.0.1:0".parse().unwrap()),
        backends: backends.to_vec(),
        policy: policy.into(),
        threads: Some(2),
        ..FrontConfig::default()
    };
    c.health.interval = Duration::from_millis(100);
    c.health.timeout = Duration::from_millis(500);
    c.health.rise = 1;
    c.health.fall = 1;
    c.shutdown_timeout = Duration::from_secs(2);
    c
}

/// What a fake back end does with each connection.
#[derive(Clone, Copy, Debug)]
pub enum Fake {
    /// Reads the head, answers bytes that are not HTTP.
    Garbage,
    /// Reads the head, closes with a reset (SO_LINGER 0).
    Reset,
    /// Reads the head and never answers (until the test ends).
    Hang,
    /// Answers 200 with the request head as the body.
    Echo,
}

pub struct FakeBackend {
    pub addr: SocketAddr,
    pub accepted: Arc<AtomicUsize>,
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn read_head(s: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut b = [0u8; 1024];
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
    buf
}

impl FakeBackend {
    pub fn start(kind: Fake) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (acc, stop) = (accepted.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stop.load(Relaxed) {
                let mut s = match l.accept() {
                    Ok((s, _)) => s,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                s.set_nonblocking(false).unwrap();
                let head = read_head(&mut s);
                if head.is_empty() {
                    continue; // a health check's bare connection
                }
                acc.fetch_add(1, Relaxed);
                match kind {
                    Fake::Garbage => {
                        let _ = s.write_all(b"SSH-2.0-not-http\r\n\r\n");
                    }
                    Fake::Reset => {
                        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                    }
                    Fake::Hang => held.push(s),
                    Fake::Echo => {
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            head.len()
                        );
                        let _ = s.write_all(resp.as_bytes());
                        let _ = s.write_all(&head);
                    }
                }
            }
        });
        Self {
            addr,
            accepted,
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeBackend {
    fn drop(&mut self) {
        self.done.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn h(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|s| s.as_str())
    }
}

/// One response from `buf`, if complete: the response and the bytes it took.
pub fn parse(buf: &[u8], closed: bool) -> Option<(Resp, usize)> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let mut headers = HashMap::new();
    for l in lines.filter(|l| !l.is_empty()) {
        let (k, v) = l.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    let len = match headers.get("content-length") {
        Some(n) => n.parse::<usize>().ok()?,
        None if closed => buf.len() - end,
        None => return None,
    };
    if buf.len() < end + len {
        return None;
    }
    let body = buf[end..end + len].to_vec();
    Some((
        Resp {
            status,
            headers,
            body,
        },
        end + len,
    ))
}

/// GET `path` on a new connection (closed after), with `extra` header lines.
pub fn get(addr: SocketAddr, path: &str, extra: &str) -> Resp {
    raw(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n").as_bytes(),
    )
}

/// Send `req` and read the answer until the peer closes (at most 10 s).
pub fn raw(addr: SocketAddr, req: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    parse(&buf, true)
        .unwrap_or_else(|| panic!("no response: {:?}", String::from_utf8_lossy(&buf)))
        .0
}

/// A kept-alive client connection.
pub struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Self { s, buf: Vec::new() }
    }

    pub fn get(&mut self, path: &str) -> Resp {
        let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
        self.s.write_all(req.as_bytes()).unwrap();
        loop {
            if let Some((r, used)) = parse(&self.buf, false) {
                self.buf.drain(..used);
                return r;
            }
            let mut b = [0u8; 8192];
            let n = self.s.read(&mut b).expect("a response in time");
            assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&self.buf));
            self.buf.extend_from_slice(&b[..n]);
        }
    }
}

/// Wait (at most 10 s) until `f` holds.
pub fn eventually(what: &str, f: impl Fn() -> bool) {
    for _ in 0..1000 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("never: {what}");
}

/// What a scripted back end does after a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// Waits for the next request on the connection.
    KeepOpen,
    /// Closes the connection (without saying so in the response).
    Close,
}

/// A back end on a plain socket that answers each request (its head and body) with the
/// bytes a script gives, one thread per connection, keep-alive unless told to close.
pub struct ScriptBackend {
    pub addr: SocketAddr,
    /// Connections that carried a request.
    pub accepted: Arc<AtomicUsize>,
    /// Requests answered.
    pub requests: Arc<AtomicUsize>,
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

type Script = dyn Fn(&str, &[u8]) -> (Vec<u8>, Then) + Send + Sync;

/// Read one request (head, and body by Content-Length or chunked) from `s` after `buf`.
fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let mut b = [0u8; 8192];
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let lower = head.to_ascii_lowercase();
    let len = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse::<usize>().unwrap());
    let chunked = lower.contains("transfer-encoding: chunked");
    loop {
        let have = buf.len() - end;
        let body_end = match (len, chunked) {
            (Some(n), _) if have >= n => Some(end + n),
            (None, true) => buf[end..]
                .windows(5)
                .position(|w| w == b"0\r\n\r\n")
                .map(|p| end + p + 5),
            (None, false) => Some(end),
            _ => None,
        };
        if let Some(e) = body_end {
            let body = buf[end..e].to_vec();
            buf.drain(..e);
            return Some((head, body));
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
}

impl ScriptBackend {
    pub fn start(script: impl Fn(&str, &[u8]) -> (Vec<u8>, Then) + Send + Sync + 'static) -> Self {
        let script: Arc<Script> = Arc::new(script);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (acc, reqs, stop) = (accepted.clone(), requests.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                let mut s = match l.accept() {
                    Ok((s, _)) => s,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let (script, acc, reqs) = (script.clone(), acc.clone(), reqs.clone());
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut first = true;
                    while let Some((head, body)) = read_request(&mut s, &mut buf) {
                        if first {
                            acc.fetch_add(1, Relaxed);
                            first = false;
                        }
                        reqs.fetch_add(1, Relaxed);
                        let (resp, then) = script(&head, &body);
                        if s.write_all(&resp).is_err() || then == Then::Close {
                            return;
                        }
                    }
                });
            }
        });
        Self {
            addr,
            accepted,
            requests,
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for ScriptBackend {
    fn drop(&mut self) {
        self.done.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Send `req` on a new connection and read everything until the front end closes it.
pub fn exchange_raw(addr: SocketAddr, req: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    buf
}
