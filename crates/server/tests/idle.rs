//! Idle connections are parked (a bare socket, no HTTP state) and woken when bytes arrive,
//! against the real server on loopback: a parked connection serves its next requests,
//! pipelined ones included (also a head split across the park), the timeouts and the
//! reclaiming at `max_conns` still close parked connections, and a response that filled the
//! socket is sent whole before its connection parks. The `triage_connections_parked` gauge
//! says when a connection is parked.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const GET: &[u8] = b"GET /ok.txt HTTP/1.1\r\nHost: t\r\n\r\n";

/// A server of `ok.txt` ("ok") and `big.bin` (`big` bytes), with an admin address.
async fn server(
    big: usize,
    tune: impl FnOnce(&mut server::Config),
) -> (Running, tempfile::TempDir) {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("ok.txt"), "ok").unwrap();
    std::fs::write(t.path().join("big.bin"), vec![b'x'; big]).unwrap();
    let mut cfg = config(Some(t.path()));
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    tune(&mut cfg);
    (start(cfg).await, t)
}

/// The parked gauge.
async fn parked(s: &Running) -> u64 {
    metric(
        &metrics(s.admin.unwrap()).await,
        "triage_connections_parked",
    )
    .unwrap() as u64
}

/// Wait (up to 5 s) until `n` connections are parked; the gauge at the end.
async fn until_parked(s: &Running, n: u64) -> u64 {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let p = parked(s).await;
        if p == n || Instant::now() > end {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Read `n` complete responses from `c` (10 s at most), in order.
async fn responses(c: &mut TcpStream, n: usize) -> Vec<Resp> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let end = Instant::now() + Duration::from_secs(10);
    while out.len() < n {
        while let Some((r, used)) = parse(&buf, false) {
            buf.drain(..used);
            out.push(r);
            if out.len() == n {
                return out;
            }
        }
        let mut b = [0u8; 65536];
        let left = end.saturating_duration_since(Instant::now());
        let k = tokio::time::timeout(left, c.read(&mut b))
            .await
            .expect("responses in time")
            .unwrap();
        assert!(k > 0, "closed after {} of {n} responses", out.len());
        buf.extend_from_slice(&b[..k]);
    }
    out
}

/// Whether the server closes `c` within `limit` (reads until the end of the stream).
async fn closed_within(c: &mut TcpStream, limit: Duration) -> bool {
    let mut b = [0u8; 4096];
    let end = Instant::now() + limit;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, c.read(&mut b)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.unwrap()
}

#[tokio::test]
async fn a_parked_connection_serves_its_next_requests() {
    let (s, _t) = server(16, |_| {}).await;
    let mut c = connect(s.addr).await;
    assert_eq!(until_parked(&s, 1).await, 1, "parked before its first byte");
    for i in 0..3 {
        c.write_all(GET).await.unwrap();
        let r = responses(&mut c, 1).await;
        assert_eq!(
            (r[0].status, &r[0].body[..]),
            (200, &b"ok"[..]),
            "request {i}"
        );
        assert_eq!(until_parked(&s, 1).await, 1, "parked after request {i}");
    }
    s.stop().await;
}

#[tokio::test]
async fn with_park_after_zero_a_connection_parks_between_its_requests() {
    let (s, _t) = server(16, |c| c.park_after = Duration::ZERO).await;
    let mut c = connect(s.addr).await;
    assert_eq!(until_parked(&s, 1).await, 1, "parked before its first byte");
    for i in 0..3 {
        c.write_all(GET).await.unwrap();
        assert_eq!(responses(&mut c, 1).await[0].status, 200, "request {i}");
        assert_eq!(until_parked(&s, 1).await, 1, "parked after request {i}");
    }
    s.stop().await;
}

#[tokio::test]
async fn a_connection_at_rest_stays_ready_for_park_after_then_parks() {
    let (s, _t) = server(16, |c| c.park_after = Duration::from_secs(2)).await;
    let mut c = connect(s.addr).await;
    assert_eq!(until_parked(&s, 1).await, 1, "parked before its first byte");
    c.write_all(GET).await.unwrap();
    assert_eq!(responses(&mut c, 1).await[0].status, 200);
    assert_eq!(parked(&s).await, 0, "ready for its next request");
    c.write_all(GET).await.unwrap();
    assert_eq!(responses(&mut c, 1).await[0].status, 200);
    let rested = Instant::now();
    assert_eq!(until_parked(&s, 1).await, 1, "parked after park_after");
    assert!(
        rested.elapsed() >= Duration::from_millis(1500),
        "parked {:?} after its response, before park_after",
        rested.elapsed()
    );
    c.write_all(GET).await.unwrap();
    assert_eq!(
        responses(&mut c, 1).await[0].status,
        200,
        "served after the park"
    );
    s.stop().await;
}

#[tokio::test]
async fn pipelined_requests_are_all_answered_then_the_connection_parks() {
    let (s, _t) = server(16, |_| {}).await;
    let mut c = connect(s.addr).await;
    c.write_all(&GET.repeat(5)).await.unwrap();
    let r = responses(&mut c, 5).await;
    assert!(r.iter().all(|r| r.status == 200 && r.body == b"ok"));
    assert_eq!(until_parked(&s, 1).await, 1);
    c.write_all(GET).await.unwrap();
    assert_eq!(responses(&mut c, 1).await[0].status, 200);
    s.stop().await;
}

#[tokio::test]
async fn a_pipelined_head_cut_by_the_park_is_kept() {
    let (s, _t) = server(16, |_| {}).await;
    let mut c = connect(s.addr).await;
    // One whole request and the start of the next: the server answers the first, then finds
    // the second incomplete and nothing more in the socket.
    let (a, b) = GET.split_at(20);
    c.write_all(&[GET, a].concat()).await.unwrap();
    let r = responses(&mut c, 1).await;
    assert_eq!(r[0].status, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    c.write_all(b).await.unwrap();
    let r = responses(&mut c, 1).await;
    assert_eq!(
        (r[0].status, &r[0].body[..]),
        (200, &b"ok"[..]),
        "not a 400"
    );
    assert_eq!(until_parked(&s, 1).await, 1);
    s.stop().await;
}

#[tokio::test]
async fn a_request_with_a_body_is_followed_by_the_next_one() {
    let (s, _t) = server(16, |_| {}).await;
    let mut c = connect(s.addr).await;
    // The static handler does not read the body: hyper drains it after the response.
    c.write_all(b"GET /ok.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n01234")
        .await
        .unwrap();
    let r = responses(&mut c, 1).await;
    assert_eq!(r[0].status, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    c.write_all(GET).await.unwrap();
    let r = responses(&mut c, 1).await;
    assert_eq!((r[0].status, &r[0].body[..]), (200, &b"ok"[..]));
    assert_eq!(
        until_parked(&s, 1).await,
        1,
        "parked after a request without a body"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_response_that_filled_the_socket_is_sent_whole_before_the_park() {
    let big = 8 << 20;
    let (s, _t) = server(big, |_| {}).await;
    let mut c = connect(s.addr).await;
    c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    // Let the server fill the socket and wait for room.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(parked(&s).await, 0, "busy");
    let r = responses(&mut c, 1).await;
    assert_eq!((r[0].status, r[0].body.len()), (200, big));
    assert_eq!(
        until_parked(&s, 1).await,
        1,
        "parked once the last write went out"
    );
    c.write_all(GET).await.unwrap();
    assert_eq!(responses(&mut c, 1).await[0].status, 200);
    s.stop().await;
}

#[tokio::test]
async fn the_header_timeout_closes_a_parked_new_connection() {
    let (s, _t) = server(16, |c| c.header_timeout = Duration::from_millis(200)).await;
    let mut c = connect(s.addr).await;
    assert_eq!(until_parked(&s, 1).await, 1);
    assert!(closed_within(&mut c, Duration::from_secs(3)).await);
    let m = metrics(s.admin.unwrap()).await;
    assert_eq!(metric(&m, "triage_connections_timed_out_total"), Some(1.0));
    assert_eq!(metric(&m, "triage_connections_parked"), Some(0.0));
    s.stop().await;
}

#[tokio::test]
async fn the_keep_alive_timeout_closes_a_parked_connection() {
    let (s, _t) = server(16, |c| c.keepalive_timeout = Duration::from_millis(200)).await;
    let mut c = connect(s.addr).await;
    c.write_all(GET).await.unwrap();
    assert_eq!(responses(&mut c, 1).await[0].status, 200);
    assert!(closed_within(&mut c, Duration::from_secs(3)).await);
    assert_eq!(until_parked(&s, 0).await, 0);
    s.stop().await;
}

#[tokio::test]
async fn a_parked_keep_alive_connection_gives_way_at_max_conns() {
    let (s, _t) = server(16, |c| c.max_conns = 1).await;
    let mut old = connect(s.addr).await;
    old.write_all(GET).await.unwrap();
    assert_eq!(responses(&mut old, 1).await[0].status, 200);
    assert_eq!(until_parked(&s, 1).await, 1);
    let mut new = connect(s.addr).await;
    new.write_all(GET).await.unwrap();
    assert_eq!(responses(&mut new, 1).await[0].status, 200);
    assert!(closed_within(&mut old, Duration::from_secs(3)).await);
    s.stop().await;
}

#[tokio::test]
async fn the_server_stops_at_once_with_parked_connections() {
    let (s, _t) = server(16, |_| {}).await;
    let mut held = Vec::new();
    for _ in 0..20 {
        let mut c = connect(s.addr).await;
        c.write_all(GET).await.unwrap();
        assert_eq!(responses(&mut c, 1).await[0].status, 200);
        held.push(c);
    }
    assert_eq!(until_parked(&s, 20).await, 20);
    let t0 = Instant::now();
    s.stop().await;
    assert!(t0.elapsed() < Duration::from_secs(5));
    for c in &mut held {
        assert!(closed_within(c, Duration::from_secs(2)).await);
    }
}
