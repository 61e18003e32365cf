//! Bad input and failure, on real sockets: a back end that answers garbage (502), resets or
//! closes before its head ends, or (the relay) before the end of a response that fits its
//! buffer (retried elsewhere; 502 when none is left), hangs (504 after
//! `response_timeout`), or is removed from the configuration (no more requests); a client's
//! malformed request (400, no back end touched) or forged `X-Triage-Forward` (removed); a
//! configuration naming no back end (an error), and every back end down (503).

#[macro_use]
mod common;

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use common::*;
use frontend::{Engine, Front};

fn garbage_from_a_back_end_is_a_502(engine: Engine) {
    let g = FakeBackend::start(Fake::Garbage);
    let front = Front::start(front_config_on(engine, &[g.addr], "lard")).unwrap();
    assert_eq!(get(front.addr(), "/x", "").status, 502);
    assert_eq!(front.metrics().bad_gateway, 1);
    front.stop();
}

fn a_hung_back_end_is_a_504_after_the_response_timeout(engine: Engine) {
    let h = FakeBackend::start(Fake::Hang);
    let mut cfg = front_config_on(engine, &[h.addr], "lard");
    cfg.response_timeout = Duration::from_millis(300);
    let front = Front::start(cfg).unwrap();
    let t0 = Instant::now();
    assert_eq!(get(front.addr(), "/x", "").status, 504);
    assert!(t0.elapsed() >= Duration::from_millis(300));
    let m = front.metrics();
    assert_eq!(
        (m.timeouts, m.retries),
        (1, 0),
        "a silent back end is not retried"
    );
    front.stop();
}

fn a_client_that_leaves_says_nothing_about_the_back_end(engine: Engine) {
    let h = FakeBackend::start(Fake::Hang);
    let mut cfg = front_config_on(engine, &[h.addr], "lard");
    cfg.response_timeout = Duration::from_secs(20);
    let front = Front::start(cfg).unwrap();
    for _ in 0..3 {
        let mut c = std::net::TcpStream::connect(front.addr()).unwrap();
        std::io::Write::write_all(&mut c, b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        eventually("the request reached the back end", || {
            front.metrics().backends[0].load == 1
        });
        drop(c);
        eventually("the front end saw the client leave", || {
            front.metrics().backends[0].load == 0
        });
    }
    let m = front.metrics();
    assert!(m.backends[0].up, "{m:?}");
    assert_eq!((m.backends[0].failures, m.retries), (0, 0), "{m:?}");
    front.stop();
}

fn a_reset_is_retried_on_another_back_end(engine: Engine) {
    let t = site();
    let good = Backend::start(serve_config(t.path()));
    let bad = FakeBackend::start(Fake::Reset);
    // WRR's first choice is the resetting one.
    let front = Front::start(front_config_on(engine, &[bad.addr, good.addr], "wrr")).unwrap();
    let r = get(front.addr(), "/f1.html", "");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"file 1\n");
    let m = front.metrics();
    assert_eq!(m.retries, 1);
    assert_eq!(m.backends[0].failures, 1);
    assert!(bad.accepted.load(Relaxed) >= 1);
    front.stop();
    // Alone, it is a 502.
    let front = Front::start(front_config_on(engine, &[bad.addr], "wrr")).unwrap();
    assert_eq!(get(front.addr(), "/f1.html", "").status, 502);
    front.stop();
}

/// A back end that dies while its response head is on the way (part of it sent, then the
/// connection closed): nothing reached the client, so the request goes to another back end,
/// as after a reset.
fn a_head_cut_short_is_retried_on_another_back_end(engine: Engine) {
    let t = site();
    let good = Backend::start(serve_config(t.path()));
    let cut = ScriptBackend::start(|_, _| {
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Ty".to_vec(),
            Then::Close,
        )
    });
    // WRR's first choice is the one that cuts its head short.
    let front = Front::start(front_config_on(engine, &[cut.addr, good.addr], "wrr")).unwrap();
    let r = get(front.addr(), "/f1.html", "");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"file 1\n");
    let m = front.metrics();
    assert_eq!(m.retries, 1, "{m:?}");
    assert_eq!(m.bad_gateway, 0, "{m:?}");
    assert_eq!(cut.requests.load(Relaxed), 1);
    front.stop();
}

/// A back end that dies in the middle of a response's body: the relay holds a response of up
/// to 64 KiB of body until it is whole, so nothing reached the client and the request goes to
/// another back end. (The pingora engine relays the head at once: a cut in the body closes
/// the client's connection there.)
#[test]
fn a_body_cut_short_is_retried_on_another_back_end_by_the_relay() {
    let t = site();
    let good = Backend::start(serve_config(t.path()));
    // `path` through a relay whose WRR tries the back end at `cut` first, then `good`.
    let via = |cut: std::net::SocketAddr, path: &str| {
        let front = Front::start(front_config_on(Engine::Relay, &[cut, good.addr], "wrr")).unwrap();
        let r = get(front.addr(), path, "");
        let m = front.metrics();
        front.stop();
        (r, m)
    };
    let cut = ScriptBackend::start(|_, _| {
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nfil".to_vec(),
            Then::Close,
        )
    });
    let (r, m) = via(cut.addr, "/f1.html");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"file 1\n"[..]));
    assert_eq!((m.retries, m.bad_gateway), (1, 0), "{m:?}");
    assert_eq!(cut.requests.load(Relaxed), 1);
    // Alone, it is a 502 (not a response cut short).
    let front = Front::start(front_config_on(Engine::Relay, &[cut.addr], "wrr")).unwrap();
    assert_eq!(get(front.addr(), "/f1.html", "").status, 502);
    front.stop();
    // Larger than the relay buffer's 16 KiB, within what it holds: cut after 20,000 bytes.
    let big: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(t.path().join("big.bin"), &big).unwrap();
    let part = big[..20_000].to_vec();
    let cut = ScriptBackend::start(move |_, _| {
        let mut r = b"HTTP/1.1 200 OK\r\nContent-Length: 50000\r\n\r\n".to_vec();
        r.extend_from_slice(&part);
        (r, Then::Close)
    });
    let (r, m) = via(cut.addr, "/big.bin");
    assert_eq!(r.status, 200);
    assert!(r.body == big, "the whole file, from the other back end");
    assert_eq!((m.retries, m.bad_gateway), (1, 0), "{m:?}");
}

fn a_malformed_request_is_a_400_that_touches_no_back_end(engine: Engine) {
    let e = FakeBackend::start(Fake::Echo);
    let front = Front::start(front_config_on(engine, &[e.addr], "lard")).unwrap();
    for bad in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n",
        b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    ] {
        let r = raw(front.addr(), bad);
        assert_eq!(r.status, 400, "{:?}", String::from_utf8_lossy(bad));
    }
    assert_eq!(e.accepted.load(Relaxed), 0);
    front.stop();
}

fn a_clients_forward_header_never_reaches_a_back_end(engine: Engine) {
    let e = FakeBackend::start(Fake::Echo);
    let front = Front::start(front_config_on(engine, &[e.addr], "lard")).unwrap();
    let r = get(front.addr(), "/x", "X-Triage-Forward: 10.0.0.1:80\r\n");
    assert_eq!(r.status, 200);
    let seen = String::from_utf8_lossy(&r.body).to_ascii_lowercase();
    assert!(seen.starts_with("get /x http/1.1"), "{seen}");
    assert!(!seen.contains("x-triage-forward"), "{seen}");
    front.stop();
}

fn no_back_end_is_an_error_and_none_up_is_a_503(engine: Engine) {
    let e = Front::start(front_config_on(engine, &[], "lard"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no back end"), "{e}");
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = gone.local_addr().unwrap();
    drop(gone);
    let mut cfg = front_config_on(engine, &[addr], "lard");
    cfg.retries = 1;
    let front = Front::start(cfg).unwrap();
    // The first request finds it dead (refused: 502 after the tries); then none is up.
    let first = get(front.addr(), "/x", "").status;
    assert!(first == 502 || first == 503, "{first}");
    eventually("the back end is marked down", || {
        !front.metrics().backends[0].up
    });
    assert_eq!(get(front.addr(), "/x", "").status, 503);
    assert_eq!(get(front.admin_addr().unwrap(), "/healthz", "").status, 503);
    assert!(front.metrics().no_backend >= 1);
    front.stop();
}

fn a_back_end_removed_from_the_configuration_gets_no_more_requests(engine: Engine) {
    let t = site();
    let (a, b) = (
        Backend::start(serve_config(t.path())),
        Backend::start(serve_config(t.path())),
    );
    let front = Front::start(front_config_on(engine, &[a.addr, b.addr], "wrr")).unwrap();
    for i in 0..4 {
        get(front.addr(), &format!("/f{i}.html"), "");
    }
    assert!(front.set_backends(&[a.addr]).is_empty());
    for i in 0..4 {
        assert_eq!(get(front.addr(), &format!("/f{i}.html"), "").status, 200);
    }
    let m = front.metrics();
    assert_eq!(m.backends[0].responses, 6);
    assert_eq!(m.backends[1].responses, 2);
    assert!(m.backends[1].removed && !m.backends[1].up);
    // Back again, with its old number.
    front.set_backends(&[a.addr, b.addr]);
    for i in 0..4 {
        get(front.addr(), &format!("/f{i}.html"), "");
    }
    assert_eq!(front.metrics().backends[1].responses, 4);
    front.stop();
}

both_engines!(
    garbage_from_a_back_end_is_a_502,
    a_hung_back_end_is_a_504_after_the_response_timeout,
    a_client_that_leaves_says_nothing_about_the_back_end,
    a_reset_is_retried_on_another_back_end,
    a_head_cut_short_is_retried_on_another_back_end,
    a_malformed_request_is_a_400_that_touches_no_back_end,
    a_clients_forward_header_never_reaches_a_back_end,
    no_back_end_is_an_error_and_none_up_is_a_503,
    a_back_end_removed_from_the_configuration_gets_no_more_requests,
);
