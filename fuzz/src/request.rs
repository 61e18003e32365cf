//! The request-path fuzz target, shared by two drivers: libFuzzer (`fuzz/run.sh`, coverage
//! guided, stable toolchain) and the seeded mutation loop of `cargo test -p server --test
//! fuzz_request` (every change, bounded).
//!
//! [`check`] splits its input by the first byte:
//! - the pure parsers: request-path resolution, `Range` against a few lengths, the
//!   conditional headers, `Accept-Encoding`, `Priority`, MIME classes, the CGI header block,
//!   each with the properties it must keep (never panic; a resolved path stays below the
//!   root; a range lies inside the representation);
//! - the whole request path of a real server on loopback (hyper's head parsing, the router,
//!   virtual hosts, resolution, the store, ranges and conditionals, the admin listener): the
//!   input is sent as raw bytes on a fresh connection, followed by a last request that asks
//!   to close; the server must close within [`EXCHANGE_LIMIT`], every answer must be HTTP, no
//!   file from outside a root may appear, and `/healthz` must keep answering.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use server::headers::{self, RangeReq};

/// The longest an exchange may take before the target reports a hang.
pub const EXCHANGE_LIMIT: Duration = Duration::from_secs(5);

/// Resolve `path` and check that what it accepts stays below the root (also the `resolve_path`
/// target's whole check).
pub fn check_resolve(path: &str) {
    if let Ok(r) = server::resolve::resolve(path) {
        // The relative path's own parts, not `segments()` (which skips empty ones).
        let rel = r.rel_path();
        if !rel.is_empty() {
            for s in rel.split(|&b| b == b'/') {
                assert!(!s.is_empty());
                assert!(s != b"." && s != b"..");
                assert!(!s.contains(&b'\\') && !s.contains(&0));
            }
        }
        assert_eq!(r.segments().count(), r.segment_vecs().len());
        let _ = r.extension();
    }
}

fn check_range(value: &str) {
    for len in [0u64, 1, 10, 4096, u64::MAX] {
        match headers::parse_range(value, len) {
            RangeReq::Partial(a, b) => assert!(a <= b && b < len, "{value:?} {len}: {a}-{b}"),
            RangeReq::Full | RangeReq::Unsatisfiable => {}
        }
    }
}

fn check_pure(s: &str) {
    check_resolve(s);
    if let Ok(uri) = s.parse::<http::Uri>() {
        check_resolve(uri.path());
    }
    check_range(s);
    let date = httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(1 << 30));
    let _ = headers::none_match(s, "\"4-5\"");
    let _ = headers::not_modified_since(s, SystemTime::UNIX_EPOCH);
    let _ = headers::if_range_ok(s, "\"4-5\"", &date);
    let _ = headers::accepts_gzip(s);
    if let Some(u) = headers::urgency(s) {
        assert!(u <= 7);
    }
    let _ = headers::content_class(s);
    let _ = headers::mime_matches(s, &["text/*".into(), "image/svg+xml".into()]);
}

fn check_cgi_block(data: &[u8]) {
    if let Some((hlen, body)) = server::cgi::parse::header_end(data) {
        assert!(hlen <= body && body <= data.len());
        let _ = server::cgi::parse::parse(&data[..hlen]);
    }
    let _ = server::cgi::parse::parse(data);
}

/// A server on loopback for the exchanges: two virtual hosts over a small tree of files, an
/// admin listener. Started once per process, on a runtime thread of its own.
struct Target {
    addr: SocketAddr,
    admin: SocketAddr,
    _root: std::path::PathBuf,
}

/// Remove the trees of earlier runs whose process is gone: the target is a static, never
/// dropped, so each run leaves its tree behind until a later run finds its process gone.
fn remove_dead_roots() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let pid = e
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix("triage-fuzz-"))
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(pid) = pid.filter(|p| *p != std::process::id() as i32) {
            if !os::procfs::exists(pid) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

fn target() -> &'static Target {
    static T: OnceLock<Target> = OnceLock::new();
    T.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("triage-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        remove_dead_roots();
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("secret.txt"), "secret\n").unwrap();
        for site in ["a", "b"] {
            let d = root.join(site);
            std::fs::create_dir_all(d.join("sub/deeper")).unwrap();
            std::fs::write(d.join("hello.txt"), format!("hello from {site}\n")).unwrap();
            std::fs::write(d.join("index.html"), "<html>index</html>\n").unwrap();
            std::fs::write(d.join("sub/page.html"), "<p>page</p>\n".repeat(50)).unwrap();
            std::fs::write(d.join("sub/deeper/data.json"), "{\"a\": 1}\n".repeat(3000)).unwrap();
            std::os::unix::fs::symlink("../secret.txt", d.join("escape.txt")).unwrap();
        }
        let cfg_text = format!(
            "listen = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\nslots = 1\nworkers = 4\n\
             header_timeout = \"1s\"\nkeepalive_timeout = \"1s\"\nsend_timeout = \"1s\"\n\
             [gzip]\nenabled = true\n\
             [[site]]\nname = \"a.test\"\nroot = \"{a}\"\n\
             [[site]]\nname = \"b.test\"\naliases = [\"www.b.test\"]\nroot = \"{b}\"\n",
            a = root.join("a").display(),
            b = root.join("b").display(),
        );
        let cfg = server::Config::from_toml(&cfg_text, "fuzz.toml").expect("fuzz config");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = server::runtime(&cfg).expect("runtime");
            rt.block_on(async move {
                let srv = server::Server::bind(cfg).await.expect("bind");
                tx.send((srv.local_addr(), srv.admin_addr().expect("admin")))
                    .unwrap();
                let _ = srv.run(std::future::pending::<()>()).await;
            });
        });
        let (addr, admin) = rx.recv().expect("server started");
        Target {
            addr,
            admin,
            _root: root,
        }
    })
}

/// The request sent after every input: it ends the connection once the input's own requests
/// (if any) have been answered.
const LAST: &[u8] = b"GET /hello.txt HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";

/// Send `req` on a fresh connection, read until the server closes. The write side stays open
/// (the server takes a half-closed connection for a client gone and answers nothing), so
/// every input is followed by [`LAST`]. Panics if the server neither closes nor stops
/// sending within [`EXCHANGE_LIMIT`] (its own timeouts are 1 s).
fn exchange(addr: SocketAddr, req: &[u8]) -> Vec<u8> {
    let mut all = req.to_vec();
    all.extend_from_slice(LAST);
    exchange_raw(addr, &all)
}

/// Send `bytes` on a fresh connection and read until the server closes.
fn exchange_raw(addr: SocketAddr, req: &[u8]) -> Vec<u8> {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(EXCHANGE_LIMIT)).unwrap();
    c.set_write_timeout(Some(EXCHANGE_LIMIT)).unwrap();
    // The server may close early (a 400 on a broken head): later writes may fail.
    let _ = c.write_all(req);
    let mut out = Vec::new();
    match c.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!(
            "no answer and no close within {EXCHANGE_LIMIT:?} ({e}) for {:?}",
            String::from_utf8_lossy(req)
        ),
    }
    out
}

fn check_exchange(req: &[u8]) {
    let t = target();
    let out = exchange(t.addr, req);
    // Every answer is a well-formed HTTP/1.1 status line.
    if !out.is_empty() {
        assert!(
            out.starts_with(b"HTTP/1.1 ") || out.starts_with(b"HTTP/1.0 "),
            "not an HTTP answer: {:?}",
            String::from_utf8_lossy(&out[..out.len().min(200)])
        );
        let code = &out[9..out.len().min(12)];
        assert!(
            code.iter().all(u8::is_ascii_digit),
            "{:?}",
            String::from_utf8_lossy(&out)
        );
        // A file is never served from outside a site's root.
        assert!(!out.windows(6).any(|w| w == b"secret"));
    }
}

/// The server's whole answer to `req` (followed by the last request).
pub fn answer(req: &[u8]) -> Vec<u8> {
    exchange(target().addr, req)
}

/// Whether the server still answers its health check (between runs, and at the end).
pub fn healthy() -> bool {
    let out = exchange_raw(
        target().admin,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    out.starts_with(b"HTTP/1.1 200") && out.ends_with(b"ok\n")
}

/// One fuzz input (see the module docs).
pub fn check(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    match sel % 4 {
        0 | 1 => check_exchange(rest),
        2 => check_cgi_block(rest),
        _ => {
            if let Ok(s) = std::str::from_utf8(rest) {
                check_pure(s);
            }
        }
    }
}
