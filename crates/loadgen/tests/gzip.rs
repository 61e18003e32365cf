//! `Accept-Encoding` and gzip against tiny hand-written HTTP/1.1 servers (std `TcpListener` on
//! 127.0.0.1 port 0, one thread per connection): gzip HTML framed by Content-Length and by
//! (tiny) chunks is decoded and its objects are fetched; the wire and decoded byte counts;
//! identity when no header is sent; and the error classes `decode` (corrupt gzip) and
//! `encoding` (a coding the request did not accept, or an unknown one), without panics.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use loadgen::{AcceptEncoding, Arrival, LoadConfig, ThinkDist};

/// How a path is answered.
#[derive(Clone)]
enum Body {
    /// Identity, Content-Length.
    Plain(Vec<u8>, &'static str),
    /// gzip if the request accepts it (else identity), Content-Length.
    GzipLength(Vec<u8>, &'static str),
    /// gzip if the request accepts it (else identity), chunked in pieces of this size.
    GzipChunked(Vec<u8>, &'static str, usize),
    /// These exact bytes with `Content-Encoding: <coding>`, whatever the request says.
    Forced(Vec<u8>, &'static str, &'static str),
}

/// A std-thread HTTP/1.1 server (keep-alive, GET only) that records each request head.
struct Server {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(site: HashMap<&'static str, Body>) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let site = Arc::new(site);
        let (h, st) = (heads.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for c in l.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(c) = c else { continue };
                let (site, h) = (site.clone(), h.clone());
                std::thread::spawn(move || conn(c, &site, &h));
            }
        });
        Server {
            addr,
            heads,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Serves one connection: request heads in, responses out, until EOF.
fn conn(mut c: TcpStream, site: &HashMap<&'static str, Body>, heads: &Mutex<Vec<String>>) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match c.read(&mut b) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&b[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        heads.lock().unwrap().push(head.clone());
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let gzip_ok = head
            .lines()
            .any(|l| l.to_ascii_lowercase().starts_with("accept-encoding:") && l.contains("gzip"));
        let mut out = Vec::new();
        match site.get(path.as_str()) {
            None => out.extend_from_slice(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
            Some(Body::Plain(d, ct)) => {
                let h = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n",
                    d.len()
                );
                out.extend_from_slice(h.as_bytes());
                out.extend_from_slice(d);
            }
            Some(Body::GzipLength(d, ct)) if gzip_ok => {
                let z = gz(d);
                let h = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Encoding: gzip\r\n\
                     Vary: Accept-Encoding\r\nContent-Length: {}\r\n\r\n",
                    z.len()
                );
                out.extend_from_slice(h.as_bytes());
                out.extend_from_slice(&z);
            }
            Some(Body::GzipChunked(d, ct, step)) if gzip_ok => {
                let h = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Encoding: gzip\r\n\
                     Transfer-Encoding: chunked\r\n\r\n"
                );
                out.extend_from_slice(h.as_bytes());
                for piece in gz(d).chunks(*step) {
                    out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                    out.extend_from_slice(piece);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
            }
            Some(Body::GzipLength(d, ct)) | Some(Body::GzipChunked(d, ct, _)) => {
                let h = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n",
                    d.len()
                );
                out.extend_from_slice(h.as_bytes());
                out.extend_from_slice(d);
            }
            Some(Body::Forced(d, ct, coding)) => {
                let h = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Encoding: {coding}\r\n\
                     Content-Length: {}\r\n\r\n",
                    d.len()
                );
                out.extend_from_slice(h.as_bytes());
                out.extend_from_slice(d);
            }
        }
        if c.write_all(&out).is_err() {
            return;
        }
    }
}

/// A compressible page referencing two images, a stylesheet and a script (4 objects).
fn html() -> Vec<u8> {
    let mut s = String::from(
        "<!doctype html><html><head><link rel=stylesheet href=\"/s.css\">\
         <script src=\"/x.js\"></script></head><body>",
    );
    for i in 0..200 {
        s.push_str(&format!(
            "<p>paragraph {i} of a page that compresses well</p>\n"
        ));
    }
    s.push_str("<img src=\"/a.gif\"><img src=\"/b.gif\"></body></html>");
    s.into_bytes()
}

const OBJECTS: u64 = 4;

fn css() -> Vec<u8> {
    b"body { color: black; margin: 0 auto; }\n".repeat(40)
}

/// The site: the same page at `/len.html` (gzip, Content-Length) and `/chunked.html` (gzip,
/// 7-byte chunks, so the gzip header and trailer straddle chunks).
fn site() -> HashMap<&'static str, Body> {
    let mut m = HashMap::new();
    m.insert("/len.html", Body::GzipLength(html(), "text/html"));
    m.insert("/chunked.html", Body::GzipChunked(html(), "text/html", 7));
    m.insert("/s.css", Body::GzipLength(css(), "text/css"));
    m.insert(
        "/x.js",
        Body::Plain(b"var x = 1;".to_vec(), "text/javascript"),
    );
    m.insert("/a.gif", Body::Plain(vec![b'a'; 3000], "image/gif"));
    m.insert("/b.gif", Body::Plain(vec![b'b'; 2000], "image/gif"));
    m
}

/// Content bytes of one page (HTML and its 4 objects).
fn page_content() -> u64 {
    (html().len() + css().len() + "var x = 1;".len() + 3000 + 2000) as u64
}

fn cfg(url: String, pages: u64, a: AcceptEncoding) -> LoadConfig {
    let mut c = LoadConfig::new(url);
    c.arrival = Arrival::Closed {
        think: Duration::ZERO,
        think_dist: ThinkDist::Fixed,
    };
    c.duration = None;
    c.max_pages = Some(pages);
    c.timeout = Duration::from_secs(5);
    c.parallel = 2;
    c.accept_encoding = a;
    c
}

#[tokio::test]
async fn gzip_html_is_decoded_and_its_objects_fetched() {
    let srv = Server::start(site());
    for path in ["/len.html", "/chunked.html"] {
        let r = loadgen::run(cfg(srv.url(path), 3, AcceptEncoding::Gzip))
            .await
            .unwrap();
        let s = &r.summary;
        assert_eq!(s.errors, 0, "{path}: {}", r.table());
        // The objects were found in the decoded HTML and fetched: 1 + 4 requests per page.
        assert_eq!(s.requests, 3 * (1 + OBJECTS), "{path}: {}", r.table());
        assert!(r.pages.iter().all(|p| p.t2_ms.is_some()));
        // Wire bytes are compressed; decoded bytes are the content.
        assert_eq!(s.bytes_decoded, 3 * page_content(), "{path}");
        assert!(
            s.bytes < s.bytes_decoded - 3 * (html().len() as u64) / 2,
            "{path}: wire {} decoded {}",
            s.bytes,
            s.bytes_decoded
        );
        assert!(r.table().contains("content decoded"), "{}", r.table());
        let json = serde_json::to_value(s).unwrap();
        assert_eq!(json["bytes_decoded"], s.bytes_decoded);
    }
    // Every request said so.
    let heads = srv.heads();
    assert_eq!(heads.len() as u64, 2 * 3 * (1 + OBJECTS));
    assert!(
        heads
            .iter()
            .all(|h| h.contains("\r\nAccept-Encoding: gzip\r\n")),
        "{heads:?}"
    );
}

#[tokio::test]
async fn without_the_flag_no_header_is_sent_and_identity_comes_back() {
    for a in [AcceptEncoding::None, AcceptEncoding::Identity] {
        let srv = Server::start(site());
        let r = loadgen::run(cfg(srv.url("/chunked.html"), 2, a))
            .await
            .unwrap();
        let s = &r.summary;
        assert_eq!(s.errors, 0, "{a:?}: {}", r.table());
        assert_eq!(s.requests, 2 * (1 + OBJECTS));
        assert_eq!(s.bytes, 2 * page_content(), "{a:?}");
        assert_eq!(s.bytes_decoded, s.bytes, "{a:?}");
        assert!(!r.table().contains("content decoded"));
        let heads = srv.heads();
        match a {
            AcceptEncoding::None => assert!(
                heads
                    .iter()
                    .all(|h| !h.to_ascii_lowercase().contains("accept-encoding")),
                "{heads:?}"
            ),
            _ => assert!(
                heads
                    .iter()
                    .all(|h| h.contains("\r\nAccept-Encoding: identity\r\n")),
                "{heads:?}"
            ),
        }
    }
}

#[tokio::test]
async fn corrupt_gzip_is_a_decode_error() {
    let good = gz(&html());
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0xff;
    flipped[mid + 1] ^= 0xff;
    let mut site = site();
    site.insert("/flipped.html", Body::Forced(flipped, "text/html", "gzip"));
    site.insert(
        "/cut.html",
        Body::Forced(good[..good.len() - 4].to_vec(), "text/html", "gzip"),
    );
    site.insert(
        "/notgzip.html",
        Body::Forced(html(), "text/html; charset=utf-8", "gzip"),
    );
    // A good page whose stylesheet is corrupt: the HTML counts, the page fails at t2.
    site.insert(
        "/badcss.html",
        Body::Plain(
            b"<link rel=stylesheet href=\"/bad.css\"><img src=\"/a.gif\">".to_vec(),
            "text/html",
        ),
    );
    site.insert(
        "/bad.css",
        Body::Forced(b"\x1f\x8b\x08\x00garbage".to_vec(), "text/css", "gzip"),
    );
    let srv = Server::start(site);
    for path in ["/flipped.html", "/cut.html", "/notgzip.html"] {
        let r = loadgen::run(cfg(srv.url(path), 2, AcceptEncoding::Gzip))
            .await
            .unwrap();
        assert_eq!(r.summary.pages, 2);
        assert_eq!(
            r.summary.errors_by_kind.get("decode"),
            Some(&2),
            "{path}: {}",
            r.table()
        );
        // No objects were fetched from an undecodable page.
        assert_eq!(r.summary.request_errors, 2, "{path}");
        assert_eq!(r.summary.requests, 0, "{path}");
        assert!(r.pages[0].error.as_deref().unwrap().contains("gzip"));
    }
    let r = loadgen::run(cfg(srv.url("/badcss.html"), 1, AcceptEncoding::Gzip))
        .await
        .unwrap();
    let p = &r.pages[0];
    assert_eq!(r.summary.errors_by_kind.get("decode"), Some(&1));
    assert!(p.t1_ms.is_some() && p.t2_ms.is_none(), "{p:?}");
    assert_eq!((p.requests, p.failed_requests), (3, 1));
}

#[tokio::test]
async fn unrequested_or_unknown_coding_is_an_encoding_error() {
    let mut site = site();
    site.insert("/gz.html", Body::Forced(gz(&html()), "text/html", "gzip"));
    site.insert("/br.html", Body::Forced(vec![1, 2, 3], "text/html", "br"));
    site.insert(
        "/twice.html",
        Body::Forced(gz(&gz(&html())), "text/html", "gzip, gzip"),
    );
    let srv = Server::start(site);
    let cases = [
        ("/gz.html", AcceptEncoding::None, "no Accept-Encoding"),
        ("/gz.html", AcceptEncoding::Identity, "identity only"),
        ("/br.html", AcceptEncoding::Gzip, "\"br\""),
        ("/br.html", AcceptEncoding::None, "\"br\""),
        ("/twice.html", AcceptEncoding::Gzip, "\"gzip, gzip\""),
    ];
    for (path, a, says) in cases {
        let r = loadgen::run(cfg(srv.url(path), 1, a)).await.unwrap();
        assert_eq!(
            r.summary.errors_by_kind.get("encoding"),
            Some(&1),
            "{path} {a:?}: {}",
            r.table()
        );
        let msg = r.pages[0].error.clone().unwrap();
        assert!(msg.contains(says), "{path} {a:?}: {msg}");
    }
    // The same gzip page is fine when gzip was asked for.
    let r = loadgen::run(cfg(srv.url("/gz.html"), 1, AcceptEncoding::Gzip))
        .await
        .unwrap();
    assert_eq!(r.summary.errors, 0, "{}", r.table());
    assert_eq!(r.summary.requests, 1 + OBJECTS);
}
