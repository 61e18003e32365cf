//! Filling the back ends' caches before a `fits` point ([`fill`]): every back end is asked for
//! every file of the site once, directly (not through the front end), so that each holds the
//! whole working set when the point's warm-up starts.
//!
//! Why: "when the working set fits" means caches that hold it, seed 004's steady state. From
//! cold caches within a warm-up of seconds, WRR has to read every file from disk on every back
//! end (four or eight copies) while LARD reads one, so a cold `fits` point measured the fill,
//! not the policies: 1.30x LARD over WRR in the quick run where the paper has about 1x.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::error::{LabError, Result};
use crate::testbed::Testbed;

/// GET every one of `paths` once from each of `backends`, in parallel across the back ends
/// (each has its own disk), on one kept-alive connection each. Returns the responses that were
/// 200; an error if a back end cannot be reached or answers otherwise.
pub fn fill(
    tb: &Testbed,
    backends: &[SocketAddr],
    paths: &[String],
    timeout: Duration,
) -> Result<usize> {
    let results: Vec<std::io::Result<usize>> = tb.in_server_ns(|| {
        // Threads started here are in the server's namespace too.
        std::thread::scope(|sc| {
            let handles: Vec<_> = backends
                .iter()
                .map(|&b| sc.spawn(move || get_all(b, paths, timeout)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(std::io::Error::other("panicked")))
                })
                .collect()
        })
    })?;
    let mut ok = 0;
    for (b, r) in backends.iter().zip(results) {
        ok += r.map_err(|e| LabError::Config(format!("filling the cache of {b}: {e}")))?;
    }
    Ok(ok)
}

/// Every path from `addr`, one request after the other on a kept-alive connection.
fn get_all(addr: SocketAddr, paths: &[String], timeout: Duration) -> std::io::Result<usize> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(64 << 10);
    let mut ok = 0;
    for p in paths {
        // One write: a request split in two would wait for the delayed ACK of the first part.
        s.write_all(format!("GET {p} HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())?;
        let r = crate::util::read_response(&mut s, &mut buf)?;
        if r.content_length.is_none() {
            return Err(std::io::Error::other("a response without Content-Length"));
        }
        let status = r.status;
        if status != 200 {
            return Err(std::io::Error::other(format!("{p}: status {status}")));
        }
        ok += 1;
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn reads_responses_one_after_the_other_on_one_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut seen = Vec::new();
            let mut b = [0u8; 4096];
            let mut got = Vec::new();
            while seen.len() < 3 {
                let n = c.read(&mut b).unwrap();
                got.extend_from_slice(&b[..n]);
                while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&got[..end]).into_owned();
                    seen.push(head.split(' ').nth(1).unwrap().to_owned());
                    got.drain(..end + 4);
                    let body = if seen.len() == 3 { "x" } else { "hello" };
                    let status = if seen.len() == 3 { 404 } else { 200 };
                    write!(
                        c,
                        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .unwrap();
                }
            }
            seen
        });
        let paths: Vec<String> = ["/a", "/b", "/c"].map(String::from).to_vec();
        let err = get_all(addr, &paths, Duration::from_secs(5)).unwrap_err();
        assert!(err.to_string().contains("/c: status 404"), "{err}");
        assert_eq!(server.join().unwrap(), vec!["/a", "/b", "/c"]);
    }
}
