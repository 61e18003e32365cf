//! A server with several threads: one serving thread per thread, each with its own listener
//! (one `SO_REUSEPORT` group) and gate lane; connections stay on the thread that accepted them.

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn two_threads(root: &std::path::Path) -> server::Config {
    server::Config {
        slots: Some(2),
        threads: Some(2),
        ..config(Some(root))
    }
}

fn enough_cpus(test: &str) -> bool {
    if server::config::available_cpus() < 2 {
        println!("SKIP {test}: two slots need two CPUs");
        return false;
    }
    true
}

/// Send one keep-alive request on `s` and read its whole response (a 5-byte body).
async fn ask(s: &mut TcpStream) -> Resp {
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    loop {
        if let Some((r, _)) = parse(&buf, false) {
            return r;
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("response in time")
            .unwrap();
        assert!(n > 0, "closed before the response");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn connections_spread_over_the_serving_threads_and_their_lanes() {
    if !enough_cpus("connections_spread_over_the_serving_threads_and_their_lanes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
    let srv = start(two_threads(dir.path())).await;
    assert_eq!(srv.ctx.gate().lanes(), 2);
    let mut conns = Vec::new();
    for _ in 0..40 {
        let mut s = TcpStream::connect(srv.addr).await.unwrap();
        let r = ask(&mut s).await;
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
        conns.push(s);
    }
    // Every connection is open and has been served once: each lane holds the workers of the
    // connections its thread accepted (40 connections hashed over two listeners: both get
    // some, but for a chance of 2^-39).
    let by_lane = srv.ctx.gate().live_workers_by_lane();
    assert_eq!(by_lane.iter().sum::<usize>(), 40, "{by_lane:?}");
    assert!(
        by_lane.iter().all(|&n| n > 0),
        "one thread took all: {by_lane:?}"
    );
    // Each connection goes on being served (on its thread) and counted.
    for s in &mut conns {
        assert_eq!(ask(s).await.status, 200);
    }
    assert_eq!(srv.ctx.metrics().requests(200), 80);
    drop(conns);
    srv.stop().await;
}

#[tokio::test]
async fn a_stop_lets_each_thread_finish_its_response_in_flight() {
    if !enough_cpus("a_stop_lets_each_thread_finish_its_response_in_flight") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Big enough that the response is still being sent when the stop comes (the client
    // does not read until after it).
    let big = vec![b'x'; 8 << 20];
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    let srv = start(two_threads(dir.path())).await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut first = [0u8; 1];
    s.read_exact(&mut first).await.unwrap();
    let stop = tokio::spawn(srv.stop());
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut rest))
        .await
        .expect("the response ends")
        .unwrap();
    let mut all = first.to_vec();
    all.extend_from_slice(&rest);
    let (r, _) = parse(&all, false).expect("one whole response");
    assert_eq!((r.status, r.body.len()), (200, big.len()));
    stop.await.unwrap();
}

#[tokio::test]
async fn an_address_in_use_is_refused_not_shared() {
    if !enough_cpus("an_address_in_use_is_refused_not_shared") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let first = start(two_threads(dir.path())).await;
    let second = server::Server::bind(server::Config {
        listen: first.addr,
        ..two_threads(dir.path())
    })
    .await;
    match second {
        Err(e) => assert!(e.to_string().contains("listen"), "{e}"),
        Ok(_) => panic!("a second server joined the first one's listeners"),
    }
    first.stop().await;
}
