//! `triage front` before three `triage serve` processes, under load from eight kept-alive
//! clients: one back end is killed with SIGKILL mid-run and no client request fails (each is
//! retried on another back end, or was sent elsewhere); LARD's table forgets the dead back
//! end's targets; restarted on its port, the back end passes its health checks and takes new
//! targets again. Then SIGTERM stops the front end, exit code 0.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::Child;

fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

fn serve(root: &std::path::Path, addr: SocketAddr) -> Child {
    let c = Command::new(env!("CARGO_BIN_EXE_triage"))
        .args(["serve", "--slots", "1", "--threads", "1", "--listen"])
        .arg(addr.to_string())
        .arg("--root")
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10), "serve on {addr}");
        std::thread::sleep(Duration::from_millis(10));
    }
    Child(c)
}

/// The address printed after `what` on one of `out`'s lines.
fn address_after(line: &str, what: &str) -> Option<String> {
    let rest = line.split(what).nth(1)?;
    Some(rest.split('/').next()?.to_owned())
}

/// One response on a kept-alive connection: its status (0 if the connection failed).
fn get(conn: &mut Option<(TcpStream, Vec<u8>)>, front: &str, path: &str) -> u16 {
    if conn.is_none() {
        let Ok(s) = TcpStream::connect(front) else {
            return 0;
        };
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        *conn = Some((s, Vec::new()));
    }
    let (s, buf) = conn.as_mut().unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        *conn = None;
        return 0;
    }
    match lab::util::read_response(s, buf) {
        Ok(r) => r.status,
        Err(_) => {
            *conn = None;
            0
        }
    }
}

fn metrics_json(admin: &str) -> String {
    let mut s = TcpStream::connect(admin).unwrap();
    s.write_all(b"GET /metrics.json HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// A number from the JSON snapshot: `"key": N` of back end `backend` (or the top level).
fn field(json: &str, backend: Option<usize>, key: &str) -> f64 {
    let v: serde_json::Value =
        serde_json::from_str(&json[json.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    let obj = match backend {
        Some(i) => &v["backends"][i],
        None => &v,
    };
    obj[key].as_f64().unwrap_or_else(|| {
        obj[key]
            .as_bool()
            .map(f64::from)
            .unwrap_or_else(|| panic!("{key} in {obj}"))
    })
}

#[test]
fn a_killed_back_end_costs_no_request_and_rejoins() {
    killed_back_end_on("pingora");
}

#[test]
fn a_killed_back_end_costs_no_request_and_rejoins_on_the_relay() {
    killed_back_end_on("relay");
}

fn killed_back_end_on(engine: &str) {
    let t = tempfile::tempdir().unwrap();
    for i in 0..800 {
        std::fs::write(t.path().join(format!("f{i}.html")), format!("file {i}\n")).unwrap();
    }
    let addrs = [free_port(), free_port(), free_port()];
    let mut backends: Vec<Child> = addrs.iter().map(|a| serve(t.path(), *a)).collect();
    let mut front = Command::new(env!("CARGO_BIN_EXE_triage"));
    front.args([
        "front",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        "--policy",
        "lard",
        "--threads",
        "1",
        "--health-interval",
        "100ms",
        "--engine",
        engine,
    ]);
    for a in &addrs {
        front.arg("--backend").arg(a.to_string());
    }
    let mut front = Child(
        front
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(front.0.stdout.take().unwrap());
    let (mut l1, mut l2) = (String::new(), String::new());
    out.read_line(&mut l1).unwrap();
    out.read_line(&mut l2).unwrap();
    let url = address_after(&l1, "http://").unwrap_or_else(|| panic!("{l1:?}"));
    let admin = address_after(&l2, "http://").unwrap_or_else(|| panic!("{l2:?}"));

    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let next = Arc::new(AtomicU64::new(0));
    // Files 0..400 until the killed back end is back, 400..800 after: new targets.
    let offset = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (stop, ok, failed, next, url, offset) = (
                stop.clone(),
                ok.clone(),
                failed.clone(),
                next.clone(),
                url.clone(),
                offset.clone(),
            );
            std::thread::spawn(move || {
                let mut conn = None;
                while !stop.load(Relaxed) {
                    let n = next.fetch_add(1, Relaxed) % 400 + offset.load(Relaxed);
                    match get(&mut conn, &url, &format!("/f{n}.html")) {
                        200 => ok.fetch_add(1, Relaxed),
                        _ => failed.fetch_add(1, Relaxed),
                    };
                }
            })
        })
        .collect();

    std::thread::sleep(Duration::from_millis(700));
    let victim = 1;
    let _ = backends[victim].0.kill();
    let _ = backends[victim].0.wait();
    let served_before = ok.load(Relaxed);
    std::thread::sleep(Duration::from_millis(700));
    let m = metrics_json(&admin);
    assert_eq!(field(&m, Some(victim), "up"), 0.0, "{m}");
    assert!(field(&m, None, "lard_forgotten") > 0.0, "{m}");
    let chosen_while_down = field(&m, Some(victim), "chosen");
    // Back on its port: the checks bring it back, and new targets go there.
    backends[victim] = serve(t.path(), addrs[victim]);
    let wait_for = |what: &str, cond: &dyn Fn(&str) -> bool| {
        let t0 = Instant::now();
        loop {
            let m = metrics_json(&admin);
            if cond(&m) {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "never {what}: {m}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for("up again", &|m| field(m, Some(victim), "up") == 1.0);
    // New targets from now on: the least loaded back ends get them, the rejoined one too.
    offset.store(400, Relaxed);
    wait_for("chosen again", &|m| {
        field(m, Some(victim), "chosen") > chosen_while_down
    });
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let (ok, failed) = (ok.load(Relaxed), failed.load(Relaxed));
    assert!(
        ok > served_before && served_before > 0,
        "{ok} {served_before}"
    );
    assert_eq!(failed, 0, "failed requests ({ok} served)");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(front.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(front.0.wait().unwrap().code(), Some(0));
}
