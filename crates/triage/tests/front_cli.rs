//! `triage front` as a command: `--emit` prints another engine's configuration, `--print-config`
//! a file that reads back, a configuration without back ends exits 2 saying how to give one,
//! and SIGHUP applies the file's new list of back ends (one removed from the file gets no more
//! requests).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{spawn_printing_address, Child};

fn triage(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_triage"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn emit_prints_the_nearest_configuration_of_each_engine() {
    let base = [
        "front",
        "--backend",
        "127.0.0.1:8081",
        "--backend",
        "127.0.0.1:8082",
    ];
    let run = |extra: &[&str]| {
        let out = triage(&[&base[..], extra].concat());
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let h = run(&["--policy", "chbl", "--emit", "haproxy"]);
    assert!(
        h.contains("balance uri") && h.contains("hash-balance-factor 125"),
        "{h}"
    );
    let n = run(&["--policy", "chbl", "--emit", "nginx"]);
    assert!(n.contains("hash $request_uri consistent;"), "{n}");
    let e = run(&["--policy", "wrr", "--emit", "envoy"]);
    assert!(e.contains("lb_policy: ROUND_ROBIN"), "{e}");
    let l = run(&["--policy", "lard", "--emit", "haproxy"]);
    assert!(l.contains("has no equivalent"), "{l}");
    let bad = triage(&[&base[..], &["--emit", "traefik"]].concat());
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn print_config_reads_back_and_no_back_end_exits_2() {
    let out = triage(&[
        "front",
        "--backend",
        "127.0.0.1:8081",
        "--policy",
        "ext-lard",
        "--print-config",
    ]);
    assert!(out.status.success());
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("f.toml");
    std::fs::write(&p, &out.stdout).unwrap();
    let again = triage(&["front", "--config", p.to_str().unwrap(), "--print-config"]);
    assert_eq!(again.stdout, out.stdout);
    let none = triage(&["front"]);
    assert_eq!(none.status.code(), Some(2));
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(
        err.contains("no back end") && err.contains("--backend"),
        "{err}"
    );
}

fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let r = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out).into_owned();
    r.unwrap_or_else(|e| panic!("{addr}{path}: {e}: {out}"));
    out
}

fn serve(root: &std::path::Path) -> (Child, String) {
    spawn_printing_address(
        Command::new(env!("CARGO_BIN_EXE_triage"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--slots",
                "1",
                "--threads",
                "1",
            ])
            .arg("--root")
            .arg(root)
            .stderr(Stdio::null()),
    )
}

#[test]
fn sighup_applies_the_files_back_ends() {
    sighup_on("pingora");
}

#[test]
fn sighup_applies_the_files_back_ends_on_the_relay() {
    sighup_on("relay");
}

fn sighup_on(engine: &str) {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("a.html"), "a\n").unwrap();
    let (_a, a) = serve(t.path());
    let (_b, b) = serve(t.path());
    let conf = t.path().join("front.toml");
    let write = |list: &[&str]| {
        let l: Vec<String> = list.iter().map(|x| format!("\"{x}\"")).collect();
        std::fs::write(
            &conf,
            format!(
                "listen = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\npolicy = \"wrr\"\n\
                 threads = 1\nengine = \"{engine}\"\nbackends = [{}]\n",
                l.join(", ")
            ),
        )
        .unwrap();
    };
    write(&[&a, &b]);
    let mut front = Child(
        Command::new(env!("CARGO_BIN_EXE_triage"))
            .args(["front", "--config"])
            .arg(&conf)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(front.0.stdout.take().unwrap());
    let (mut l1, mut l2) = (String::new(), String::new());
    out.read_line(&mut l1).unwrap();
    out.read_line(&mut l2).unwrap();
    let url = l1
        .split("http://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let admin = l2
        .split("http://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let pid = nix::unistd::Pid::from_raw(front.0.id() as i32);
    write(&[&a]);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    let t0 = Instant::now();
    while !get(&admin, "/metrics")
        .contains(&format!("triage_front_backend_up{{backend=\"{b}\"}} 0"))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the reload never applied"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..4 {
        assert!(get(&url, "/a.html").starts_with("HTTP/1.1 200"));
    }
    let m = get(&admin, "/metrics");
    assert!(
        m.contains(&format!(
            "triage_front_backend_responses_total{{backend=\"{b}\"}} 0"
        )),
        "{m}"
    );
    assert!(
        m.contains(&format!(
            "triage_front_backend_responses_total{{backend=\"{a}\"}} 4"
        )),
        "{m}"
    );
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert_eq!(front.0.wait().unwrap().code(), Some(0));
    let mut err = String::new();
    front
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("reloaded: 1 back end(s)"), "{err}");
}
