//! `triage serve` as a process: prints its URL, and on SIGTERM finishes the response in flight
//! before exiting 0 (graceful shutdown); bad flags exit 2 naming the flag.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::Child;

#[test]
fn sigterm_lets_the_response_in_flight_finish() {
    let t = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..2_000_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(t.path().join("big.bin"), &big).unwrap();
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_triage"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--slots",
                "1",
                "--sndbuf",
                "16384",
            ])
            .arg("--root")
            .arg(t.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();

    let mut c = TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // A small receive buffer keeps most of the response inside the server.
    socket2::SockRef::from(&c)
        .set_recv_buffer_size(65536)
        .unwrap();
    c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut got = vec![0u8; 64 * 1024];
    c.read_exact(&mut got).unwrap();

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // The listener is closed: new connections are refused.
    assert!(TcpStream::connect(&addr).is_err());
    // The response in flight still completes.
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    got.extend_from_slice(&rest);
    let split = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(got.starts_with(b"HTTP/1.1 200"));
    assert_eq!(&got[split..], &big[..]);
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn bad_flag_value_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_triage"))
        .args(["serve", "--policy", "lottery", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lottery") && err.contains("fifo"), "{err}");
}

#[test]
fn config_file_errors_name_key_and_line() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("triage.toml");
    std::fs::write(&p, "listen = \"127.0.0.1:0\"\nslots = 1\nchunky = 3\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_triage"))
        .args(["serve", "--config"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("chunky") && err.contains("line 3"), "{err}");
}
