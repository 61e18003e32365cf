//! Request heads as RFC 9112 and nginx answer them, against the real server on port 0: the
//! host of an absolute-form target, Host validation, transfer codings, protocol versions, long
//! request lines, redirects that cannot leave the host, files named as directories, FIFOs in
//! the root, and the parser's own answers in the access log and the counters.

mod common;

use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use common::*;
use server::config::SiteConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn two_sites() -> (tempfile::TempDir, server::Config) {
    let t = tempfile::tempdir().unwrap();
    let mut cfg = config(None);
    for name in ["a.test", "b.test"] {
        let root = t.path().join(name);
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("hello.txt"), format!("hello from {name}")).unwrap();
        std::fs::write(root.join("sub/index.html"), "sub").unwrap();
        cfg.sites.push(SiteConfig {
            name: name.into(),
            aliases: vec![],
            root,
            index: None,
            cgi: None,
        });
    }
    (t, cfg)
}

async fn answer(addr: std::net::SocketAddr, req: &[u8]) -> String {
    String::from_utf8_lossy(&raw_bytes(addr, req).await).into_owned()
}

fn status_of(text: &str) -> u16 {
    text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn the_absolute_form_target_names_the_virtual_host() {
    let (_t, cfg) = two_sites();
    let s = start(cfg).await;
    let r = raw(
        s.addr,
        b"GET http://b.test/hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello from b.test", "the target's authority wins");
    let a = answer(
        s.addr,
        b"GET http://user@b.test/hello.txt HTTP/1.1\r\nHost: b.test\r\n\r\n",
    )
    .await;
    assert_eq!(status_of(&a), 400, "userinfo: {a}");
    s.stop().await;
}

#[tokio::test]
async fn host_must_be_there_once_and_well_formed() {
    let (_t, cfg) = two_sites();
    let s = start(cfg).await;
    for (req, want) in [
        (&b"GET /hello.txt HTTP/1.1\r\n\r\n"[..], 400),
        (
            b"GET /hello.txt HTTP/1.1\r\nHost: a.test\r\nHost: evil.example\r\n\r\n",
            400,
        ),
        (b"GET /hello.txt HTTP/1.1\r\nHost: a test\r\n\r\n", 400),
        (b"GET /hello.txt HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
        (b"GET /hello.txt HTTP/1.1\r\nHost: ..\r\n\r\n", 400),
        (b"GET /hello.txt HTTP/1.0\r\n\r\n", 200),
        (
            b"GET /hello.txt HTTP/1.1\r\nHost: a.test:8080\r\nConnection: close\r\n\r\n",
            200,
        ),
    ] {
        let a = answer(s.addr, req).await;
        assert_eq!(
            status_of(&a),
            want,
            "{:?} -> {a}",
            String::from_utf8_lossy(req)
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn transfer_codings_other_than_chunked_are_refused() {
    let (_t, cfg) = two_sites();
    let s = start(cfg).await;
    let post = |te: &str| {
        format!(
            "POST /hello.txt HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n{te}\r\n0\r\n\r\n"
        )
        .into_bytes()
    };
    for (te, want) in [
        ("Transfer-Encoding: gzip, chunked\r\n", 501),
        ("Transfer-Encoding: identity, chunked\r\n", 501),
        ("Transfer-Encoding: chunked, chunked\r\n", 501),
        (
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            400,
        ),
        ("Transfer-Encoding: chunked\r\n", 405),
    ] {
        let a = answer(s.addr, &post(te)).await;
        assert_eq!(status_of(&a), want, "{te:?} -> {a}");
    }
    s.stop().await;
}

#[tokio::test]
async fn protocol_versions_and_long_lines() {
    let (_t, cfg) = two_sites();
    let s = start(cfg).await;
    for (req, want) in [
        (&b"GET /hello.txt HTTP/2.0\r\nHost: a.test\r\n\r\n"[..], 505),
        (b"GET /hello.txt HTTP/9.9\r\nHost: a.test\r\n\r\n", 505),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        (
            b"GET /hello.txt HTTP/1.2\r\nHost: a.test\r\nConnection: close\r\n\r\n",
            200,
        ),
    ] {
        let a = answer(s.addr, req).await;
        assert_eq!(
            status_of(&a),
            want,
            "{:?} -> {a}",
            String::from_utf8_lossy(req)
        );
    }
    let long = format!(
        "GET /{} HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "a".repeat(20_000)
    );
    let a = answer(s.addr, long.as_bytes()).await;
    assert_eq!(status_of(&a), 414, "{}", &a[..a.len().min(200)]);
    s.stop().await;
}

#[tokio::test]
async fn redirects_stay_on_the_host_and_files_are_not_directories() {
    let (_t, cfg) = two_sites();
    let s = start(cfg).await;
    let r = get(s.addr, "//sub", "").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.h("location"), Some("/sub/"), "not //sub/ (another host)");
    let r = get(s.addr, "/sub", "").await;
    assert_eq!(r.h("location"), Some("/sub/"));
    assert_eq!(get(s.addr, "/hello.txt/", "").await.status, 404);
    assert_eq!(get(s.addr, "/hello.txt/.", "").await.status, 404);
    assert_eq!(get(s.addr, "/hello.txt", "").await.status, 200);
    assert_eq!(get(s.addr, "/sub/.", "").await.status, 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_in_the_root_is_404_at_once_and_blocks_nothing() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("ok.txt"), "ok").unwrap();
    let fifo = t.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut cfg = config(Some(t.path()));
    cfg.threads = Some(2);
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let s = start(cfg).await;
    let t0 = Instant::now();
    // Two at once, from threads of their own with socket timeouts: before the fix each held a
    // runtime thread in open(2) until a writer came, so the test's own timers stopped too.
    let ask = |addr: std::net::SocketAddr| {
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            c.write_all(b"GET /fifo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut out = Vec::new();
            let _ = c.read_to_end(&mut out);
            String::from_utf8_lossy(&out).into_owned()
        })
    };
    let (a, b) = (ask(s.addr), ask(s.addr));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    if !(a.starts_with("HTTP/1.1 404") && b.starts_with("HTTP/1.1 404")) {
        // Unblock the server's opens (a writer arrives) so that the test can end.
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
        panic!("FIFO requests not answered 404 at once: {a:?} {b:?}");
    }
    assert_eq!(get(s.addr, "/ok.txt", "").await.status, 200);
    let h = get(s.admin.unwrap(), "/healthz", "").await;
    assert_eq!(h.body, b"ok\n");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // Character devices are not served either.
    std::os::unix::fs::symlink("/dev/zero", t.path().join("zero")).ok();
    assert_ne!(get(s.addr, "/zero", "").await.status, 200);
    s.stop().await;
}

#[tokio::test]
async fn parser_answers_are_logged_and_counted() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("ok.txt"), "ok").unwrap();
    let log = t.path().join("access.log");
    let mut cfg = config(Some(t.path()));
    cfg.access_log = Some(log.clone());
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let s = start(cfg).await;
    let big = "a".repeat(40_000);
    let a = answer(
        s.addr,
        format!("GET /ok.txt HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\n\r\n").as_bytes(),
    )
    .await;
    assert_eq!(status_of(&a), 431);
    assert_eq!(status_of(&answer(s.addr, b"GARBAGE\r\n\r\n").await), 400);
    assert_eq!(
        status_of(&answer(s.addr, b"GET / HTTP/2.0\r\nHost: t\r\n\r\n").await),
        505
    );
    assert_eq!(get(s.addr, "/ok.txt", "").await.status, 200);
    let m = metrics(s.admin.unwrap()).await;
    s.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    for code in [" 431 ", " 400 ", " 505 ", " 200 "] {
        assert!(
            text.contains(code),
            "{code} missing from the access log:\n{text}"
        );
    }
    assert_eq!(text.lines().count(), 4, "{text}");
    let total: f64 = m
        .lines()
        .filter(|l| l.starts_with("triage_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(total >= 4.0, "requests counted: {total}\n{m}");
}

#[tokio::test]
async fn stopping_does_not_wait_for_half_sent_heads() {
    let t = tempfile::tempdir().unwrap();
    let mut cfg = config(Some(t.path()));
    cfg.header_timeout = Duration::from_secs(60);
    let s = start(cfg).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(b"GET /ok.txt HTTP/1.1\r\nHost: t\r\nX-Half: ")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = Instant::now();
    s.stop().await;
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "stop waited {:?} for a half-sent head",
        t0.elapsed()
    );
    let mut buf = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut buf))
        .await
        .expect("closed");
    assert!(n.is_ok() || n.is_err());
}
