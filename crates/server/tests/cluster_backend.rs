//! The back-end abilities a cluster needs, against real servers on port 0: a bounded content
//! cache (LRU) whose misses wait for the emulated disk, the headers saying where a body came
//! from, and back-end forwarding between two servers (honoured only from the configured
//! sender, to a configured peer; a dead peer falls back to serving locally).

mod common;

use std::time::{Duration, Instant};

use common::*;
use server::body_cache::Eviction;
use server::disk::DiskKind;
use server::forward::ForwardConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn files() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    for (name, len) in [("a.html", 1000), ("b.html", 1000), ("c.html", 1000)] {
        std::fs::write(t.path().join(name), vec![b'x'; len]).unwrap();
    }
    t
}

fn backend(root: &std::path::Path) -> server::Config {
    let mut c = config(Some(root));
    c.admin = Some("127.0.0.1:0".parse().unwrap());
    c.cache_policy = Eviction::Lru;
    c.cache_budget = 2500;
    c.disk.model = DiskKind::Lard;
    c.disk.scale = 0.5;
    c
}

#[tokio::test]
async fn misses_wait_for_the_disk_and_lru_keeps_the_hot_files() {
    let t = files();
    let s = start(backend(t.path())).await;
    // One 4 KB block at half the LARD disk's speed: (28 ms + 410 us) / 2.
    let read = Duration::from_micros(14_205);
    let t0 = Instant::now();
    let r = get(s.addr, "/a.html", "").await;
    assert!(t0.elapsed() >= read, "a miss waits for the disk");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 1000);
    assert_eq!(r.h("x-triage-cache"), Some("miss"));
    assert!(r.h("x-triage-disk").is_some());
    assert_eq!(
        get(s.addr, "/a.html", "").await.h("x-triage-cache"),
        Some("hit")
    );
    get(s.addr, "/b.html", "").await;
    get(s.addr, "/a.html", "").await;
    // c evicts b (least recently used), not a.
    get(s.addr, "/c.html", "").await;
    assert_eq!(
        get(s.addr, "/a.html", "").await.h("x-triage-cache"),
        Some("hit")
    );
    assert_eq!(
        get(s.addr, "/b.html", "").await.h("x-triage-cache"),
        Some("miss")
    );
    let m = metrics(s.admin.unwrap()).await;
    assert_eq!(metric(&m, "triage_disk_reads_total"), Some(4.0), "{m}");
    assert_eq!(metric(&m, "triage_cache_hits_total"), Some(3.0), "{m}");
    assert_eq!(metric(&m, "triage_cache_misses_total"), Some(4.0), "{m}");
    assert!(metric(&m, "triage_cache_bytes").unwrap() <= 2500.0);
    assert!(m.contains("policy=\"lru\""), "{m}");
    s.stop().await;
}

#[tokio::test]
async fn a_plain_server_says_nothing_about_fills() {
    let t = files();
    let s = start(config(Some(t.path()))).await;
    let r = get(s.addr, "/a.html", "").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.h("x-triage-cache"), None);
    assert_eq!(r.h("x-triage-disk"), None);
    s.stop().await;
}

fn forwarding(root: &std::path::Path, from: &str, peer: std::net::SocketAddr) -> server::Config {
    let mut c = backend(root);
    c.forward = ForwardConfig {
        from: vec![from.parse().unwrap()],
        peers: vec![peer],
        ..ForwardConfig::default()
    };
    c
}

/// Two GETs of `path` on one kept-alive connection, with `extra` header lines.
async fn two_gets(addr: std::net::SocketAddr, path: &str, extra: &str) -> Vec<Resp> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for last in [false, true] {
        let close = if last { "Connection: close\r\n" } else { "" };
        let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}{close}\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        loop {
            if let Some((r, used)) = parse(&buf, false) {
                buf.drain(..used);
                out.push(r);
                break;
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
                .await
                .expect("a response in time")
                .unwrap();
            assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&buf));
            buf.extend_from_slice(&chunk[..n]);
        }
    }
    out
}

#[tokio::test]
async fn forwarded_requests_are_served_by_the_peer_over_a_pooled_connection() {
    let t = files();
    let b = start(backend(t.path())).await;
    let a = start(forwarding(t.path(), "127.0.0.1", b.addr)).await;
    let ask = format!("X-Triage-Forward: {}\r\n", b.addr);
    let rs = two_gets(a.addr, "/a.html", &ask).await;
    for r in &rs {
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), 1000);
        assert_eq!(
            r.h("x-triage-forwarded-from"),
            Some(b.addr.to_string().as_str())
        );
    }
    // The peer read it from its disk once, then served it from its cache.
    assert_eq!(rs[0].h("x-triage-cache"), Some("miss"));
    assert_eq!(rs[1].h("x-triage-cache"), Some("hit"));
    let ma = metrics(a.admin.unwrap()).await;
    let mb = metrics(b.admin.unwrap()).await;
    assert_eq!(metric(&ma, "triage_forwarded_total"), Some(2.0), "{ma}");
    assert_eq!(
        metric(&ma, "triage_forward_reused_total"),
        Some(1.0),
        "{ma}"
    );
    assert_eq!(metric(&ma, "triage_disk_reads_total"), Some(0.0), "{ma}");
    assert_eq!(metric(&mb, "triage_disk_reads_total"), Some(1.0), "{mb}");
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn the_header_is_ignored_from_strangers_and_a_dead_peer_falls_back() {
    let t = files();
    let b = start(backend(t.path())).await;
    // Only 10.9.9.9 may ask: a request from loopback is served here.
    let a = start(forwarding(t.path(), "10.9.9.9", b.addr)).await;
    let r = get(
        a.addr,
        "/a.html",
        &format!("X-Triage-Forward: {}\r\n", b.addr),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.h("x-triage-forwarded-from"), None);
    let ma = metrics(a.admin.unwrap()).await;
    assert_eq!(
        metric(&ma, "triage_forward_refused_total"),
        Some(1.0),
        "{ma}"
    );
    a.stop().await;
    // A peer that is gone: served here, counted as a fallback.
    let dead = b.addr;
    b.stop().await;
    let a = start(forwarding(t.path(), "127.0.0.1", dead)).await;
    let r = get(a.addr, "/b.html", &format!("X-Triage-Forward: {dead}\r\n")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 1000);
    assert_eq!(r.h("x-triage-cache"), Some("miss"));
    let ma = metrics(a.admin.unwrap()).await;
    assert_eq!(
        metric(&ma, "triage_forward_fallbacks_total"),
        Some(1.0),
        "{ma}"
    );
    a.stop().await;
}
