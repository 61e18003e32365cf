//! Connection slots under pressure, against the real server on loopback: sockets that connect
//! and send nothing (ten times `max_conns` of them, reconnecting as they are closed) must not
//! lock legitimate clients out; idle keep-alive connections give way too.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One legitimate request on a fresh connection, answered within `limit`: its status.
async fn served_within(addr: std::net::SocketAddr, limit: Duration) -> Option<u16> {
    let go = async {
        let mut c = TcpStream::connect(addr).await.ok()?;
        c.write_all(b"GET /ok.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut buf = Vec::new();
        c.read_to_end(&mut buf).await.ok()?;
        std::str::from_utf8(buf.get(9..12)?).ok()?.parse().ok()
    };
    tokio::time::timeout(limit, go).await.ok().flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_socket_flood_of_ten_times_max_conns_does_not_lock_clients_out() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("ok.txt"), "ok").unwrap();
    let mut cfg = config(Some(t.path()));
    cfg.max_conns = 50;
    cfg.header_timeout = Duration::from_secs(30);
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let s = start(cfg).await;

    // The flood: 500 sockets that send nothing; each one closed by the server is replaced.
    let stop = Arc::new(AtomicBool::new(false));
    let connects = Arc::new(AtomicU64::new(0));
    let mut flood = Vec::new();
    for _ in 0..500 {
        let (addr, stop, connects) = (s.addr, stop.clone(), connects.clone());
        flood.push(tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !stop.load(Relaxed) && Instant::now() < deadline {
                let Ok(mut c) = TcpStream::connect(addr).await else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                connects.fetch_add(1, Relaxed);
                let mut b = [0u8; 256];
                // Held until the server closes it (or the test ends).
                tokio::select! {
                    _ = c.read(&mut b) => {}
                    _ = async { while !stop.load(Relaxed) { tokio::time::sleep(Duration::from_millis(20)).await } } => {}
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut ok = 0;
    let tries = 100;
    for _ in 0..tries {
        if served_within(s.addr, Duration::from_secs(1)).await == Some(200) {
            ok += 1;
        }
    }
    stop.store(true, Relaxed);
    for f in flood {
        let _ = f.await;
    }
    let m = metrics(s.admin.unwrap()).await;
    s.stop().await;
    eprintln!(
        "{ok} of {tries} served within 1 s under the flood ({} flood connects)",
        connects.load(Relaxed)
    );
    assert!(
        ok * 100 >= tries * 95,
        "{ok} of {tries} served within 1 s under the flood ({} flood connects)\n{m}",
        connects.load(Relaxed)
    );
    assert!(metric(&m, "triage_connections_reclaimed_total").unwrap_or(0.0) > 0.0);
}

#[tokio::test]
async fn idle_keep_alive_connections_make_room() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("ok.txt"), "ok").unwrap();
    let mut cfg = config(Some(t.path()));
    cfg.max_conns = 2;
    let s = start(cfg).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = TcpStream::connect(s.addr).await.unwrap();
        c.write_all(b"GET /ok.txt HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let mut b = [0u8; 512];
        assert!(c.read(&mut b).await.unwrap() > 0);
        held.push(c);
    }
    // Both are idle keep-alive connections now: the oldest gives way.
    assert_eq!(
        served_within(s.addr, Duration::from_secs(2)).await,
        Some(200)
    );
    let mut b = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(2), held[0].read(&mut b))
        .await
        .expect("the oldest idle connection was closed");
    assert_eq!(n.unwrap_or(0), 0);
    s.stop().await;
}
