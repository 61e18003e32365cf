//! Real servers for the load generator's tests, bound to 127.0.0.1 port 0: a small hyper
//! server with configurable pages, objects, delays and a one-time stall (it counts requests,
//! connections and peak concurrency), and a raw TCP server for the broken behaviours hyper
//! cannot produce (malformed heads, resets, silence).

#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

/// What the hyper server serves.
#[derive(Default)]
pub struct Site {
    files: HashMap<String, (Bytes, &'static str)>,
    /// Every request whose path ends with this suffix waits this long first.
    delays: Vec<(String, Duration)>,
    /// The n-th request (1-based, all paths) waits this long first.
    stall: Option<(u64, Duration)>,
    /// Answer every request with this status and an empty body.
    status_for: HashMap<String, u16>,
}

impl Site {
    pub fn new() -> Self {
        Site::default()
    }
    pub fn file(mut self, path: &str, body: impl Into<Bytes>, ctype: &'static str) -> Self {
        self.files.insert(path.to_string(), (body.into(), ctype));
        self
    }
    pub fn delay(mut self, suffix: &str, d: Duration) -> Self {
        self.delays.push((suffix.to_string(), d));
        self
    }
    pub fn stall_nth(mut self, n: u64, d: Duration) -> Self {
        self.stall = Some((n, d));
        self
    }
    pub fn status(mut self, path: &str, code: u16) -> Self {
        self.status_for.insert(path.to_string(), code);
        self
    }
}

/// What the hyper server saw.
#[derive(Default)]
pub struct Seen {
    pub requests: AtomicU64,
    pub connections: AtomicU64,
    pub in_flight: AtomicU64,
    pub peak_in_flight: AtomicU64,
    pub paths: Mutex<Vec<String>>,
}

/// A running server; it stops when the test's runtime ends.
pub struct Running {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
}

impl Running {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
    pub fn requests(&self) -> u64 {
        self.seen.requests.load(Ordering::SeqCst)
    }
    pub fn connections(&self) -> u64 {
        self.seen.connections.load(Ordering::SeqCst)
    }
    pub fn paths(&self) -> Vec<String> {
        self.seen.paths.lock().unwrap().clone()
    }
}

/// Strips a leading `/b<digits>` so that `/b3/x.gif` serves `/x.gif` (per-browser unique URLs
/// with the same content, like symlinked directories).
fn canonical(path: &str) -> &str {
    if let Some(rest) = path.strip_prefix("/b") {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with('/') {
            return &rest[digits..];
        }
    }
    path
}

struct Decrement(Arc<Seen>);
impl Drop for Decrement {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn handle(
    site: Arc<Site>,
    seen: Arc<Seen>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let n = seen.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    seen.peak_in_flight.fetch_max(now, Ordering::SeqCst);
    let _guard = Decrement(seen.clone());
    let path = req.uri().path().to_string();
    seen.paths.lock().unwrap().push(path.clone());
    if let Some((k, d)) = site.stall {
        if k == n {
            tokio::time::sleep(d).await;
        }
    }
    for (suffix, d) in &site.delays {
        if path.ends_with(suffix.as_str()) {
            tokio::time::sleep(*d).await;
        }
    }
    let key = canonical(&path);
    if let Some(code) = site.status_for.get(key) {
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = hyper::StatusCode::from_u16(*code).unwrap();
        return Ok(r);
    }
    Ok(match site.files.get(key) {
        Some((body, ctype)) => Response::builder()
            .header("content-type", *ctype)
            .body(Full::new(body.clone()))
            .unwrap(),
        None => Response::builder()
            .status(404)
            .body(Full::new(Bytes::from_static(b"not found")))
            .unwrap(),
    })
}

/// Starts the hyper server for `site`.
pub async fn serve(site: Site) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let site = Arc::new(site);
    let s2 = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            s2.connections.fetch_add(1, Ordering::SeqCst);
            let (site, seen) = (site.clone(), s2.clone());
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(move |req| handle(site.clone(), seen.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Running { addr, seen }
}

/// Starts a raw TCP server running `f` on every accepted connection.
pub async fn raw<F, Fut>(f: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let f = Arc::new(f);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let f = f.clone();
            tokio::spawn(async move { f(stream).await });
        }
    });
    addr
}

/// Reads one request head (up to the blank line) from `s` and returns its path; None on EOF.
/// (Reads byte by byte so that nothing of a next request is consumed.)
pub async fn read_request(s: &mut TcpStream) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut b = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match s.read(&mut b).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => buf.push(b[0]),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    text.split_whitespace().nth(1).map(str::to_string)
}

/// Reads one request head; false on EOF.
pub async fn read_head(s: &mut TcpStream) -> bool {
    read_request(s).await.is_some()
}

/// A page referencing `n` images `i0.gif..`, a stylesheet and a script.
pub fn page_html(n: usize) -> String {
    let mut s = String::from(
        "<!doctype html><html><head><link rel=stylesheet href=\"s.css\">\
         <script src=\"a.js\"></script></head><body><h1>page</h1>",
    );
    for i in 0..n {
        s.push_str(&format!("<img src=\"i{i}.gif\">"));
    }
    s.push_str("<img src=\"i0.gif\"><img src=\"data:image/gif;base64,R0lG\"></body></html>");
    s
}

/// A site with [`page_html`] at `/index.html` and its objects (`img_bytes` each).
pub fn page_site(n: usize, img_bytes: usize) -> Site {
    let mut site = Site::new()
        .file("/index.html", page_html(n), "text/html; charset=utf-8")
        .file("/s.css", "body{color:black}", "text/css")
        .file("/a.js", "var x = 1;", "application/javascript");
    for i in 0..n {
        site = site.file(&format!("/i{i}.gif"), vec![b'x'; img_bytes], "image/gif");
    }
    site
}
