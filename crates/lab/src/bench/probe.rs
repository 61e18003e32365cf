//! What the benchmarks check before they measure: that a program named on the command line
//! is there ([`find_program`]), and that a server really compresses ([`check_gzip`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{LabError, Result};
use crate::process::which;

/// A program named on the command line: a path as given, or a name looked up on `PATH` (and in
/// the sbin directories); a configuration error when it is not there.
pub fn find_program(flag: &str, name: &str) -> Result<PathBuf> {
    let found = if name.contains('/') {
        Some(PathBuf::from(name)).filter(|p| p.is_file())
    } else {
        which(name)
    };
    found.ok_or_else(|| {
        LabError::Config(format!(
            "{flag} {name}: not found (scripts/deps.sh installs nginx and wrk)"
        ))
    })
}

/// Fail unless the server `name` at `addr` answers `path` with `Content-Encoding: gzip` when
/// asked for it.
pub fn check_gzip(name: &str, addr: SocketAddr, path: &str) -> Result<()> {
    let io = |e: std::io::Error| LabError::Process {
        name: name.into(),
        msg: format!("checking gzip: {e}"),
    };
    let mut c = TcpStream::connect(addr).map_err(io)?;
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(io)?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: bench\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
    );
    c.write_all(req.as_bytes()).map_err(io)?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = c.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    if !text.starts_with("http/1.1 200") || !text.contains("content-encoding: gzip") {
        return Err(LabError::Process {
            name: name.into(),
            msg: format!(
                "did not compress {path} when asked for gzip: {}",
                text.lines().take(12).collect::<Vec<_>>().join(" | ")
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A one-shot server on a real socket that answers with `head`.
    fn canned(head: &'static str) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).unwrap();
                assert!(n > 0, "the client closed before its request ended");
                req.extend_from_slice(&buf[..n]);
            }
            assert!(req.starts_with(b"GET /file.bmp HTTP/1.1\r\n"));
            c.write_all(head.as_bytes()).unwrap();
        });
        (addr, h)
    }

    #[test]
    fn gzip_check_refuses_a_plain_answer() {
        let (addr, h) = canned("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        let e = check_gzip("canned", addr, "/file.bmp")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not compress /file.bmp"), "{e}");
        h.join().unwrap();
        let (addr, h) =
            canned("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n");
        check_gzip("canned", addr, "/file.bmp").unwrap();
        h.join().unwrap();
    }

    #[test]
    fn programs_are_found_or_named() {
        assert_eq!(
            find_program("--x", "/bin/sh").unwrap(),
            PathBuf::from("/bin/sh")
        );
        assert!(find_program("--x", "sh").is_ok());
        let e = find_program("--wrk", "/no/such/wrk")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--wrk /no/such/wrk"), "{e}");
    }
}
