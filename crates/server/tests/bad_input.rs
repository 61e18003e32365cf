//! Bad input against the real server: malformed requests (400), oversized headers (431), every
//! form of path traversal (403/404), slowloris (header and keep-alive timeouts close the
//! connection), random garbage (no panic: the server keeps serving).

mod common;

use std::time::{Duration, Instant};

use common::*;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn root() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("www");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("ok.txt"), "ok").unwrap();
    std::fs::write(t.path().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink("../secret.txt", root.join("escape.txt")).unwrap();
    std::os::unix::fs::symlink(t.path().join("secret.txt"), root.join("abs.txt")).unwrap();
    std::os::unix::fs::symlink("..", root.join("updir")).unwrap();
    (t, root)
}

async fn status(addr: std::net::SocketAddr, target: &str) -> u16 {
    raw(
        addr,
        format!("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .status
}

#[tokio::test]
async fn malformed_request_is_400() {
    let (_t, root) = root();
    let s = start(config(Some(&root))).await;
    for req in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost t\r\n\r\n",
        b"GET /\x01 HTTP/1.1\r\nHost: t\r\n\r\n",
    ] {
        let buf = raw_bytes(s.addr, req).await;
        let text = String::from_utf8_lossy(&buf);
        assert!(
            text.starts_with("HTTP/1.1 400"),
            "{:?} -> {text}",
            String::from_utf8_lossy(req)
        );
    }
    // Not an origin-form path.
    assert_eq!(status(s.addr, "*").await, 400);
    s.stop().await;
}

#[tokio::test]
async fn oversized_headers_are_431() {
    let (_t, root) = root();
    let s = start(config(Some(&root))).await;
    let big = "a".repeat(40_000);
    let req = format!("GET /ok.txt HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\n\r\n");
    let buf = raw_bytes(s.addr, req.as_bytes()).await;
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    // Still serving.
    assert_eq!(status(s.addr, "/ok.txt").await, 200);
    s.stop().await;
}

#[tokio::test]
async fn traversal_raw_dotdot() {
    let (_t, root) = root();
    let s = start(config(Some(&root))).await;
    assert_eq!(status(s.addr, "/../secret.txt").await, 403);
    assert_eq!(status(s.addr, "/a/../../secret.txt").await, 403);
    s.stop().await;
}

#[tokio::test]
async fn traversal_percent_encoded_dots() {
    let (_t, root) = root();
    let s = start(config(Some(&root))).await;
    assert_eq!(status(s.addr, "/%2e%2e/secret.txt").await, 403);
    assert_eq!(status(s.addr, "/%2E%2E/secret.txt").await, 403);
    assert_eq!(status(s.addr, "/.%2e/secret.txt").await, 403);
    s.stop().await;
}

#[tokio::test]
async fn traversal_encoded_slash() {
    let (_t, root) = root();
    let s = start(config(Some(&root))).await;
    assert_eq!(status(s.addr, "/..%2fsecret.txt").await, 403);
    assert_eq!(status(s.addr, "/x%2F..%2F..%2Fsecret.txt").await, 403);
    s.stop().await;
}

#[tokio::test]
async fn traversal_backslashes() {
    let (_t, root) = root();
    let s = start(config(Some(&root))).await;
    assert_eq!(status(s.addr, "/..%5csecret.txt").await, 403);
    // A raw backslash is refused too (by the URI parser or by the resolver).
    let st = status(s.addr, "/..\\secret.txt").await;
    assert!(st == 403 || st == 400, "{st}");
    s.stop().await;
}

#[tokio::test]
async fn traversal_nul_byte() {
    let (_t, root) = root();
    let s = start(config(Some(&root))).await;
    assert_eq!(status(s.addr, "/ok.txt%00.html").await, 403);
    // A raw NUL never reaches the resolver.
    let buf = raw_bytes(s.addr, b"GET /ok\0.txt HTTP/1.1\r\nHost: t\r\n\r\n").await;
    assert!(String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 400"));
    s.stop().await;
}

#[tokio::test]
async fn traversal_symlinks_leaving_the_root() {
    let (_t, root) = root();
    let s = start(config(Some(&root))).await;
    assert_eq!(status(s.addr, "/escape.txt").await, 403);
    assert_eq!(status(s.addr, "/abs.txt").await, 403);
    assert_eq!(status(s.addr, "/updir/secret.txt").await, 403);
    assert_eq!(status(s.addr, "/ok.txt").await, 200);
    s.stop().await;
}

async fn closed_within(mut c: TcpStream, limit: Duration) -> Duration {
    let t0 = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(limit, c.read(&mut buf)).await {
            Err(_) => panic!("connection still open after {limit:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return t0.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn slowloris_partial_headers_are_cut_off() {
    let (_t, root) = root();
    let mut cfg = config(Some(&root));
    cfg.header_timeout = Duration::from_millis(300);
    cfg.keepalive_timeout = Duration::from_secs(60);
    let s = start(cfg).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(b"GET /ok.txt HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        .await
        .unwrap();
    // Trickle bytes slower than the timeout allows in total.
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = c.write_all(b"a").await;
    }
    let took = closed_within(c, Duration::from_secs(10)).await;
    assert!(took < Duration::from_secs(10));
    s.stop().await;
}

#[tokio::test]
async fn idle_keep_alive_connection_is_closed() {
    let (_t, root) = root();
    let mut cfg = config(Some(&root));
    cfg.keepalive_timeout = Duration::from_millis(200);
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let s = start(cfg).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(b"GET /ok.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = c.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    closed_within(c, Duration::from_secs(10)).await;
    let m = metrics(s.admin.unwrap()).await;
    assert!(metric(&m, "triage_connections_timed_out_total").unwrap() >= 1.0);
    s.stop().await;
}

#[tokio::test]
async fn random_garbage_never_breaks_the_server() {
    let (_t, root) = root();
    let s = start(config(Some(&root))).await;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let pieces: [&[u8]; 10] = [
        b"GET ",
        b"/",
        b"%",
        b"..",
        b"\r\n",
        b"Host: t",
        b" HTTP/1.1",
        b"%2f",
        b"\\",
        b"\xff\xfe",
    ];
    for _ in 0..60 {
        let mut req = Vec::new();
        for _ in 0..rng.gen_range(1..12) {
            if rng.gen_bool(0.3) {
                req.extend((0..rng.gen_range(1..20)).map(|_| rng.gen::<u8>()));
            } else {
                req.extend_from_slice(pieces[rng.gen_range(0..pieces.len())]);
            }
        }
        req.extend_from_slice(b"\r\n\r\n");
        let mut c = TcpStream::connect(s.addr).await.unwrap();
        let _ = c.write_all(&req).await;
        let _ = c.shutdown().await;
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut buf)).await;
    }
    assert_eq!(status(s.addr, "/ok.txt").await, 200);
    s.stop().await;
}
