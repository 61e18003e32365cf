//! HTTP/1.1 through the front end, against scripted back ends on plain sockets: bodies by
//! Content-Length, chunked (extensions, trailers), and until close; HEAD, 204, 304 and
//! interim (1xx) responses; request bodies; pipelining; HTTP/1.0 clients; pooled back-end
//! connections reused, and one its back end closed while idle tried again on a fresh one;
//! broken framing on either side. The engine-independent ones run on both engines; the ones
//! that look at the bytes on the wire (the relay copies a body as it came) on the relay.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use common::*;
use frontend::{Engine, Front};

fn ok(body: &str) -> (Vec<u8>, Then) {
    (
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
        Then::KeepOpen,
    )
}

fn start(engine: Engine, b: &ScriptBackend) -> Front {
    Front::start(front_config_on(engine, &[b.addr], "lard")).unwrap()
}

/// Split a raw answer into its head and the rest.
fn split(raw: &[u8]) -> (String, Vec<u8>) {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(raw)))
        + 4;
    (
        String::from_utf8_lossy(&raw[..end]).into_owned(),
        raw[end..].to_vec(),
    )
}

const CHUNKED: &[u8] = b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: yes\r\n\r\n";

fn chunked_bodies_keep_the_connection(engine: Engine) {
    let b = ScriptBackend::start(|_, _| {
        let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        r.extend_from_slice(CHUNKED);
        (r, Then::KeepOpen)
    });
    let front = start(engine, &b);
    let raw = exchange_raw(
        front.addr(),
        b"GET /c HTTP/1.1\r\nHost: t\r\n\r\nGET /c HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&raw);
    assert_eq!(text.matches("HTTP/1.1 200").count(), 2, "{text}");
    if engine == Engine::Relay {
        // Copied as it came: extensions and trailers included, twice.
        let (_, rest) = split(&raw);
        assert!(rest.starts_with(CHUNKED), "{text}");
    }
    assert_eq!(
        b.accepted.load(Relaxed),
        1,
        "one pooled back-end connection"
    );
    front.stop();
}

fn a_body_until_close_ends_the_clients_connection(engine: Engine) {
    let b =
        ScriptBackend::start(|_, _| (b"HTTP/1.1 200 OK\r\n\r\nuntil close".to_vec(), Then::Close));
    let front = start(engine, &b);
    // Kept alive by the client, closed by the front end after the body.
    let raw = exchange_raw(front.addr(), b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
    let (head, body) = split(&raw);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"until close");
    front.stop();
}

fn head_204_304_and_interim_responses_have_no_body(engine: Engine) {
    let b = ScriptBackend::start(|head, _| {
        let path = head.split(' ').nth(1).unwrap_or("");
        let r: &[u8] = match path {
            "/head" => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            "/204" => b"HTTP/1.1 204 No Content\r\n\r\n",
            "/304" => b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
            "/103" => b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            _ => b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlast",
        };
        (r.to_vec(), Then::KeepOpen)
    });
    let front = start(engine, &b);
    let raw = exchange_raw(
        front.addr(),
        b"HEAD /head HTTP/1.1\r\nHost: t\r\n\r\nGET /204 HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /304 HTTP/1.1\r\nHost: t\r\n\r\nGET /103 HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /end HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&raw);
    let statuses: Vec<&str> = text
        .match_indices("HTTP/1.1 ")
        .map(|(i, _)| &text[i + 9..i + 12])
        .filter(|s| *s != "103")
        .collect();
    assert_eq!(statuses, ["200", "204", "304", "200", "200"], "{text}");
    assert!(text.ends_with("\r\n\r\nlast"), "{text}");
    assert!(text.contains("\r\n\r\nok"), "{text}");
    front.stop();
}

fn request_bodies_reach_the_back_end_whole(engine: Engine) {
    let b = ScriptBackend::start(|head, body| {
        let first = head.lines().next().unwrap_or("").to_owned();
        let resp = format!("{first} {}", body.len());
        (
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{resp}",
                resp.len()
            )
            .into_bytes(),
            Then::KeepOpen,
        )
    });
    let front = start(engine, &b);
    let big = vec![b'x'; 200_000];
    let mut req = format!(
        "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        big.len()
    )
    .into_bytes();
    req.extend_from_slice(&big);
    req.extend_from_slice(b"PUT /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    let raw = exchange_raw(front.addr(), &req);
    let text = String::from_utf8_lossy(&raw);
    assert!(text.contains("POST /up HTTP/1.1 200000"), "{text}");
    // The chunked body as it came: 3\r\nabc\r\n0\r\n\r\n is 13 bytes; pingora may re-frame.
    assert!(text.contains("PUT /c HTTP/1.1 "), "{text}");
    if engine == Engine::Relay {
        assert!(text.ends_with("PUT /c HTTP/1.1 13"), "{text}");
    }
    front.stop();
}

fn pipelined_requests_are_answered_in_order(engine: Engine) {
    let b = ScriptBackend::start(|head, _| ok(head.split(' ').nth(1).unwrap_or("")));
    let front = start(engine, &b);
    let mut req = Vec::new();
    for i in 0..5 {
        req.extend_from_slice(format!("GET /p{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    }
    req.extend_from_slice(b"GET /last HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let text = String::from_utf8_lossy(&exchange_raw(front.addr(), &req)).into_owned();
    let bodies: Vec<&str> = text
        .split("\r\n\r\n")
        .skip(1)
        .map(|b| &b[..b.find("HTTP").unwrap_or(b.len())])
        .collect();
    assert_eq!(
        bodies,
        ["/p0", "/p1", "/p2", "/p3", "/p4", "/last"],
        "{text}"
    );
    front.stop();
}

fn an_http10_client_gets_its_answer_and_the_close(engine: Engine) {
    let b = ScriptBackend::start(|head, _| {
        let v = if head.contains("HTTP/1.0") {
            "1.0"
        } else {
            "1.1"
        };
        ok(v)
    });
    let front = start(engine, &b);
    let (head, body) = split(&exchange_raw(front.addr(), b"GET /old HTTP/1.0\r\n\r\n"));
    assert!(head.contains(" 200 "), "{head}");
    assert!(body.ends_with(b"1.0") || body.ends_with(b"1.1"), "{head}");
    front.stop();
}

fn a_pooled_connection_closed_while_idle_is_replaced(engine: Engine) {
    // Every back-end connection carries one response, then closes without saying so.
    let b = ScriptBackend::start(|_, _| {
        let (r, _) = ok("once");
        (r, Then::Close)
    });
    let front = start(engine, &b);
    let mut c = Client::connect(front.addr());
    for _ in 0..5 {
        let r = c.get("/x");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"once"[..]));
        std::thread::sleep(Duration::from_millis(20));
    }
    let m = front.metrics();
    assert!(m.backends[0].up, "{m:?}");
    assert_eq!((m.backends[0].failures, m.bad_gateway), (0, 0), "{m:?}");
    assert_eq!(b.accepted.load(Relaxed), 5);
    front.stop();
}

/// A response larger than the relay holds whole (64 KiB of body), cut short: relayed as it
/// came, so the client's connection is closed after what arrived. (A smaller one the relay
/// holds until whole and tries again: tests/failures.rs.)
fn relay_a_truncated_response_closes_the_client(engine: Engine) {
    let part = vec![b'p'; 40_000];
    let sent = part.clone();
    let b = ScriptBackend::start(move |_, _| {
        let mut r = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n".to_vec();
        r.extend_from_slice(&sent);
        (r, Then::Close)
    });
    let front = start(engine, &b);
    let mut s = std::net::TcpStream::connect(front.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /t HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    // The front end closes: read_to_end returns (a timeout would be an error).
    s.read_to_end(&mut buf).expect("closed by the front end");
    let (head, body) = split(&buf);
    assert!(head.contains("Content-Length: 100000"), "{head}");
    assert_eq!(body, &part[..]);
    front.stop();
}

fn relay_bad_chunked_framing_is_refused(engine: Engine) {
    let b = ScriptBackend::start(|_, _| ok("never"));
    let front = start(engine, &b);
    // From a client: 400, the back end untouched.
    let (head, _) = split(&exchange_raw(
        front.addr(),
        b"POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ));
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert_eq!(b.requests.load(Relaxed), 0);
    front.stop();
    // From a back end, in the bytes that came with the head: nothing was sent yet, a 502.
    let b = ScriptBackend::start(|_, _| {
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\nXYZ\r\n".to_vec(),
            Then::KeepOpen,
        )
    });
    let front = start(engine, &b);
    let raw = exchange_raw(front.addr(), b"GET /c HTTP/1.1\r\nHost: t\r\n\r\n");
    let (head, _) = split(&raw);
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
    assert_eq!(front.metrics().bad_gateway, 1);
    front.stop();
}

fn relay_a_large_response_head_from_a_back_end_is_a_502(engine: Engine) {
    let b = ScriptBackend::start(|_, _| {
        let mut r = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..40 {
            r.extend_from_slice(format!("X-Big-{i}: {}\r\n", "v".repeat(1000)).as_bytes());
        }
        r.extend_from_slice(b"Content-Length: 0\r\n\r\n");
        (r, Then::KeepOpen)
    });
    let front = start(engine, &b);
    assert_eq!(get(front.addr(), "/h", "").status, 502);
    front.stop();
}

both_engines!(a_pooled_connection_closed_while_idle_is_replaced);

// The relay only: these send several requests in one write (pingora 0.9 answers the first
// and drops the rest), or look at the bytes of a body (pingora re-frames a body without a
// length as chunked, and answers a request with a body and a pipelined one after it 400), or
// take pingora 10 s (an HTTP/1.0 client's connection is closed only by the back end's
// keep-alive timeout here).

/// A client that sends a request and stops reading is let go after `keepalive_timeout`: the
/// front end closes its connection before the whole body went out.
#[test]
fn a_client_that_stops_reading_is_let_go() {
    const LEN: usize = 32 << 20;
    let b = ScriptBackend::start(|_, _| {
        let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {LEN}\r\n\r\n").into_bytes();
        r.resize(r.len() + LEN, b'x');
        (r, Then::KeepOpen)
    });
    let mut cfg = front_config_on(Engine::Relay, &[b.addr], "lard");
    cfg.keepalive_timeout = Duration::from_secs(1);
    let front = Front::start(cfg).unwrap();
    let mut s = std::net::TcpStream::connect(front.addr()).unwrap();
    s.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    // Not reading: the socket buffers fill and the front end's write waits past 1 s.
    std::thread::sleep(Duration::from_secs(3));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = 0;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!("the front end still holds the connection after {got} bytes")
            }
            Err(_) => break,
        }
    }
    assert!(
        got > 0 && got < LEN,
        "{got} bytes of {LEN}: the connection was cut short"
    );
    front.stop();
}

#[test]
fn an_http10_client_gets_its_answer_and_the_close_on_the_relay() {
    an_http10_client_gets_its_answer_and_the_close(Engine::Relay);
}

#[test]
fn chunked_bodies_are_copied_as_they_came() {
    chunked_bodies_keep_the_connection(Engine::Relay);
}

#[test]
fn a_body_until_close_ends_the_client_connection() {
    a_body_until_close_ends_the_clients_connection(Engine::Relay);
}

#[test]
fn head_204_304_and_1xx_have_no_body() {
    head_204_304_and_interim_responses_have_no_body(Engine::Relay);
}

#[test]
fn request_bodies_by_length_and_chunked_reach_the_back_end() {
    request_bodies_reach_the_back_end_whole(Engine::Relay);
}

#[test]
fn pipelined_requests_are_answered_in_order_on_the_relay() {
    pipelined_requests_are_answered_in_order(Engine::Relay);
}

#[test]
fn a_truncated_response_closes_the_client() {
    relay_a_truncated_response_closes_the_client(Engine::Relay);
}

#[test]
fn bad_chunked_framing_is_refused() {
    relay_bad_chunked_framing_is_refused(Engine::Relay);
}

#[test]
fn a_response_head_past_the_relay_buffer_is_a_502() {
    relay_a_large_response_head_from_a_back_end_is_a_502(Engine::Relay);
}
