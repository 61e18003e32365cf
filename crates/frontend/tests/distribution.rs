//! The front end distributing requests over real `triage serve` back ends: LARD keeps a target
//! on one back end, WRR rotates, pinning keeps a connection's requests together, back-end
//! forwarding has the pinned back end fetch from the other, and the access log and the admin
//! listener say what happened.

#[macro_use]
mod common;

use common::*;
use frontend::{Engine, Front, Mechanism};

fn served_by(front: &Front) -> Vec<u64> {
    front
        .metrics()
        .backends
        .iter()
        .map(|b| b.responses)
        .collect()
}

fn lard_keeps_each_target_on_one_back_end(engine: Engine) {
    let t = site();
    let (a, b) = (
        Backend::start(serve_config(t.path())),
        Backend::start(serve_config(t.path())),
    );
    let front = Front::start(front_config_on(engine, &[a.addr, b.addr], "lard")).unwrap();
    for _ in 0..5 {
        assert_eq!(get(front.addr(), "/f1.html", "").body, b"file 1\n");
    }
    let m = front.metrics();
    assert_eq!(m.requests, 5);
    assert_eq!(m.by_class[1], 5);
    let served = served_by(&front);
    assert!(served.contains(&5) && served.contains(&0), "{served:?}");
    assert_eq!(m.lard_targets, 1);
    front.stop();
}

fn wrr_rotates_and_pinning_keeps_a_connection_on_one_back_end(engine: Engine) {
    let t = site();
    let (a, b) = (
        Backend::start(serve_config(t.path())),
        Backend::start(serve_config(t.path())),
    );
    // Relay: every request of a kept-alive connection is distributed on its own.
    let front = Front::start(front_config_on(engine, &[a.addr, b.addr], "wrr")).unwrap();
    let mut c = Client::connect(front.addr());
    for i in 0..4 {
        assert_eq!(c.get(&format!("/f{i}.html")).status, 200);
    }
    assert_eq!(served_by(&front), vec![2, 2]);
    drop(c);
    front.stop();
    // Pin: the connection stays where its first request went.
    let mut cfg = front_config_on(engine, &[a.addr, b.addr], "wrr");
    cfg.mechanism = Mechanism::Pin;
    let front = Front::start(cfg).unwrap();
    let mut c = Client::connect(front.addr());
    for i in 0..4 {
        assert_eq!(c.get(&format!("/f{i}.html")).status, 200);
    }
    let mut other = Client::connect(front.addr());
    other.get("/f9.html");
    other.get("/f8.html");
    assert_eq!(served_by(&front), vec![4, 2]);
    drop((c, other));
    front.stop();
}

fn forwarding_backend(root: &std::path::Path, peers: &[std::net::SocketAddr]) -> Backend {
    let mut cfg = serve_config(root);
    cfg.forward.from = vec!["127.0.0.1".parse().unwrap()];
    cfg.forward.peers = peers.to_vec();
    Backend::start(cfg)
}

fn forwarding_has_the_pinned_back_end_fetch_from_the_chosen_one(engine: Engine) {
    let t = site();
    // Ports first, so each back end can name the other as its peer.
    let probe = |_| std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (la, lb) = (probe(0), probe(1));
    let (pa, pb) = (la.local_addr().unwrap(), lb.local_addr().unwrap());
    drop((la, lb));
    let mut ca = serve_config(t.path());
    ca.listen = pa;
    let mut cb = serve_config(t.path());
    cb.listen = pb;
    for c in [&mut ca, &mut cb] {
        c.forward.from = vec!["127.0.0.1".parse().unwrap()];
        c.forward.peers = vec![pa, pb];
    }
    let (a, b) = (Backend::start(ca), Backend::start(cb));
    let mut cfg = front_config_on(engine, &[a.addr, b.addr], "wrr");
    cfg.mechanism = Mechanism::Forward;
    let front = Front::start(cfg).unwrap();
    // WRR: the first connection goes to a, the second to b (and stays there)...
    let mut first = Client::connect(front.addr());
    assert_eq!(first.get("/f1.html").h("x-triage-forwarded-from"), None);
    let mut second = Client::connect(front.addr());
    assert_eq!(second.get("/f2.html").h("x-triage-forwarded-from"), None);
    // ... and the policy's next choice, a, is reached through b.
    let r = second.get("/f3.html");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"file 3\n");
    assert_eq!(
        r.h("x-triage-forwarded-from"),
        Some(a.addr.to_string().as_str())
    );
    let m = front.metrics();
    assert_eq!(m.forwarded, 1);
    assert_eq!(m.backends[0].forwarded_to, 1);
    assert_eq!(b.metric("triage_forwarded_total"), 1.0);
    drop((first, second));
    front.stop();
    let _ = forwarding_backend;
}

fn the_access_log_and_the_admin_listener_say_what_happened(engine: Engine) {
    let t = site();
    let a = Backend::start(serve_config(t.path()));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let mut cfg = front_config_on(engine, &[a.addr], "chbl");
    cfg.access_log = Some(log.clone());
    let front = Front::start(cfg).unwrap();
    get(front.addr(), "/f1.html", "User-Agent: probe/1\r\n");
    assert_eq!(get(front.addr(), "/nope.html", "").status, 404);
    let admin = front.admin_addr().unwrap();
    let text = String::from_utf8(get(admin, "/metrics", "").body).unwrap();
    assert!(
        text.contains("triage_front_requests_total{class=\"2xx\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("triage_front_requests_total{class=\"4xx\"} 1"),
        "{text}"
    );
    assert!(text.contains(&format!(
        "triage_front_backend_up{{backend=\"{}\"}} 1",
        a.addr
    )));
    let json = String::from_utf8(get(admin, "/metrics.json", "").body).unwrap();
    assert!(json.contains("\"policy\": \"chbl\""), "{json}");
    assert_eq!(get(admin, "/healthz", "").status, 200);
    front.stop();
    let lines = std::fs::read_to_string(&log).unwrap();
    let first = lines.lines().next().unwrap();
    assert!(first.contains("\"GET /f1.html HTTP/1.1\" 200 7"), "{first}");
    assert!(
        first.ends_with(&format!("\"probe/1\" \"{}\"", a.addr)),
        "{first}"
    );
    assert_eq!(lines.lines().count(), 2);
}

both_engines!(
    lard_keeps_each_target_on_one_back_end,
    wrr_rotates_and_pinning_keeps_a_connection_on_one_back_end,
    forwarding_has_the_pinned_back_end_fetch_from_the_chosen_one,
    the_access_log_and_the_admin_listener_say_what_happened,
);
