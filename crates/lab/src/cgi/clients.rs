//! Closed-loop CGI clients on threads of the lab process ([`ClosedLoop`]) and the statistics
//! of the requests that ended inside a measurement window ([`window_stats`]).

use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

use crate::error::{LabError, Result};
use crate::testbed::Testbed;

/// One request of a [`ClosedLoop`] client.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// When it was sent.
    pub start: std::time::Instant,
    /// When its response ended (or it failed).
    pub end: std::time::Instant,
    /// A complete 200 response.
    pub ok: bool,
}

/// Closed-loop HTTP clients for CGI requests: each client sends one request at a time
/// (`Connection: close`: a CGI request costs a process anyway), waits for the whole response,
/// and starts the next at once. They run on threads of the lab process (pinned to the client
/// CPU) inside the client network namespace. Stopping closes the connections of the requests in
/// flight: the server sees its clients go away.
pub struct ClosedLoop {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<Sample>>>,
}

impl ClosedLoop {
    /// Start `clients` clients requesting `path` from `addr` with `Host: host`.
    pub fn start(
        tb: &Testbed,
        addr: SocketAddr,
        path: &str,
        host: &str,
        clients: usize,
    ) -> Result<ClosedLoop> {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let stop = Arc::new(AtomicBool::new(false));
        let enter = tb.enter_client_ns_fn();
        let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let s2 = stop.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
        let handle = std::thread::Builder::new()
            .name("lab-cgi-load".into())
            .spawn(move || {
                if let Err(e) = enter() {
                    let _ = ready_tx.send(Err(e));
                    return Vec::new();
                }
                let _ = ready_tx.send(Ok(()));
                // Threads created here inherit the namespace (and the CPU affinity).
                let hs: Vec<_> = (0..clients)
                    .map(|_| {
                        let stop = s2.clone();
                        let req = req.clone();
                        std::thread::spawn(move || client_loop(addr, &req, &stop))
                    })
                    .collect();
                hs.into_iter()
                    .flat_map(|h| h.join().unwrap_or_default())
                    .collect()
            })
            .map_err(|e| LabError::Os(format!("starting the CGI load threads: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(LabError::Os("the CGI load thread died".into())),
        }
        Ok(ClosedLoop {
            stop,
            handle: Some(handle),
        })
    }

    /// Stop every client (closing requests in flight) and return all samples.
    pub fn stop(mut self) -> Vec<Sample> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for ClosedLoop {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Whether `raw` (a whole HTTP/1.x response read to EOF) is a complete 200.
pub fn complete_200(raw: &[u8]) -> bool {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let body = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let ok = lines
        .next()
        .is_some_and(|l| l.starts_with("http/1.") && l.split(' ').nth(1) == Some("200"));
    let mut len = None;
    let mut chunked = false;
    for l in lines {
        if let Some(v) = l.strip_prefix("content-length:") {
            len = v.trim().parse::<usize>().ok();
        } else if l.starts_with("transfer-encoding:") && l.contains("chunked") {
            chunked = true;
        }
    }
    ok && match (len, chunked) {
        (Some(n), _) => body.len() == n,
        (None, true) => body.ends_with(b"0\r\n\r\n"),
        (None, false) => true,
    }
}

fn client_loop(addr: SocketAddr, req: &str, stop: &std::sync::atomic::AtomicBool) -> Vec<Sample> {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering::Relaxed;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    while !stop.load(Relaxed) {
        let start = std::time::Instant::now();
        let mut ok = false;
        if let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
            if s.write_all(req.as_bytes()).is_ok() {
                let mut resp = Vec::new();
                loop {
                    if stop.load(Relaxed) {
                        // Hang up mid-request: the server must notice.
                        return out;
                    }
                    match s.read(&mut buf) {
                        Ok(0) => {
                            ok = complete_200(&resp);
                            break;
                        }
                        Ok(n) => resp.extend_from_slice(&buf[..n]),
                        Err(e)
                            if e.kind() == std::io::ErrorKind::WouldBlock
                                || e.kind() == std::io::ErrorKind::TimedOut => {}
                        Err(_) => break,
                    }
                }
            }
        }
        let end = std::time::Instant::now();
        out.push(Sample { start, end, ok });
        if !ok {
            // Do not spin on a refused connection.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    out
}

/// Throughput (requests/s) and response times (ms) of the successful requests that ended in
/// `[t0, t1]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct WindowStats {
    /// Requests completed with a whole 200.
    pub completed: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Completed requests per second.
    pub rps: f64,
    /// Mean response time (ms).
    pub mean_ms: f64,
    /// Median response time (ms).
    pub median_ms: f64,
    /// 90th percentile response time (ms).
    pub p90_ms: f64,
    /// Longest response time (ms).
    pub max_ms: f64,
}

/// [`WindowStats`] of `samples` over `[t0, t1]`.
pub fn window_stats(
    samples: &[Sample],
    t0: std::time::Instant,
    t1: std::time::Instant,
) -> WindowStats {
    let inside: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.end >= t0 && s.end <= t1)
        .collect();
    let mut lat: Vec<f64> = inside
        .iter()
        .filter(|s| s.ok)
        .map(|s| s.end.duration_since(s.start).as_secs_f64() * 1e3)
        .collect();
    lat.sort_by(|a, b| a.total_cmp(b));
    let n = lat.len();
    let dt = t1.duration_since(t0).as_secs_f64().max(1e-9);
    let pick = |q: f64| {
        if n == 0 {
            f64::NAN
        } else {
            crate::results::nearest_rank(&lat, q)
        }
    };
    WindowStats {
        completed: n as u64,
        failed: (inside.len() - n) as u64,
        rps: n as f64 / dt,
        mean_ms: if n == 0 {
            f64::NAN
        } else {
            lat.iter().sum::<f64>() / n as f64
        },
        median_ms: pick(0.5),
        p90_ms: pick(0.9),
        max_ms: lat.last().copied().unwrap_or(f64::NAN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_checked_whole() {
        assert!(complete_200(
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
        ));
        assert!(!complete_200(
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabc"
        ));
        assert!(complete_200(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        ));
        assert!(!complete_200(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
        ));
        assert!(complete_200(b"HTTP/1.0 200 OK\r\n\r\nuntil eof"));
        assert!(!complete_200(b"HTTP/1.1 502 Bad Gateway\r\n\r\n"));
        assert!(!complete_200(b"HTTP/1.1 200 OK\r\n"));
    }

    #[test]
    fn window_stats_count_what_ended_inside() {
        let t0 = std::time::Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let s = [
            Sample {
                start: at(0),
                end: at(50),
                ok: true,
            }, // before the window
            Sample {
                start: at(80),
                end: at(200),
                ok: true,
            }, // 120 ms
            Sample {
                start: at(150),
                end: at(400),
                ok: true,
            }, // 250 ms
            Sample {
                start: at(300),
                end: at(500),
                ok: false,
            },
            Sample {
                start: at(900),
                end: at(1500),
                ok: true,
            }, // after
        ];
        let w = window_stats(&s, at(100), at(1100));
        assert_eq!((w.completed, w.failed), (2, 1));
        assert!((w.rps - 2.0).abs() < 1e-9);
        assert!((w.mean_ms - 185.0).abs() < 1e-6);
        assert_eq!(w.max_ms, 250.0);
    }
}
