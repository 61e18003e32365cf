//! Cold connections: connected to the server under test, served one request each (so every
//! server has accepted them and holds them as idle keep-alive connections), then left idle
//! while the hot clients run. Seed 002's proxy held hundreds of such connections from slow
//! WAN clients; here thousands, on loopback.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Connections opened per batch (written all, then read all).
const BATCH: usize = 256;

/// The cold connections held open against one server.
#[derive(Debug, Default)]
pub struct Cold {
    conns: Vec<TcpStream>,
    /// Why the last [`Cold::grow_to`] stopped short, if it did.
    pub short: Option<String>,
}

fn open_batch(addr: SocketAddr, n: usize, req: &[u8]) -> std::io::Result<Vec<TcpStream>> {
    let t = Duration::from_secs(5);
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = TcpStream::connect_timeout(&addr, t)?;
        c.set_nodelay(true)?;
        c.write_all(req)?;
        v.push(c);
    }
    for c in &mut v {
        c.set_read_timeout(Some(t))?;
        let mut buf = [0u8; 2048];
        let got = c.read(&mut buf)?;
        if got == 0 || !buf.starts_with(b"HTTP/1.1 200") {
            return Err(std::io::Error::other(format!(
                "not served: `{}`",
                String::from_utf8_lossy(&buf[..got.min(80)])
            )));
        }
    }
    Ok(v)
}

impl Cold {
    /// Connections held now.
    pub fn held(&self) -> usize {
        self.conns.len()
    }

    /// Open connections to `addr` until `target` are held, each served `GET path` once (the
    /// response must fit one read). Stops at the first refusal and says why in
    /// [`Cold::short`]; returns the count held.
    pub fn grow_to(&mut self, addr: SocketAddr, target: usize, path: &str) -> usize {
        let req = format!("GET {path} HTTP/1.1\r\nHost: cold\r\n\r\n");
        self.short = None;
        while self.conns.len() < target {
            let n = (target - self.conns.len()).min(BATCH);
            match open_batch(addr, n, req.as_bytes()) {
                Ok(v) => self.conns.extend(v),
                Err(e) => {
                    self.short = Some(format!(
                        "the server stopped taking cold connections after {} of {target}: {e}",
                        self.conns.len()
                    ));
                    break;
                }
            }
        }
        self.conns.len()
    }

    /// How many of the held connections the server has not closed (a read that would block
    /// means open; end of stream means closed).
    pub fn alive(&self) -> usize {
        self.conns
            .iter()
            .filter(|c| {
                if c.set_nonblocking(true).is_err() {
                    return false;
                }
                let mut b = [0u8; 1];
                let open = matches!(c.peek(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock)
                    || matches!(c.peek(&mut b), Ok(n) if n > 0);
                let _ = c.set_nonblocking(false);
                open
            })
            .count()
    }

    /// Close them all.
    pub fn clear(&mut self) {
        self.conns.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn held_until_the_server_closes_them() {
        // A toy server answering one request per connection and keeping it; it closes the
        // first connection after answering.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let mut kept = Vec::new();
            for (i, c) in l.incoming().take(300).enumerate() {
                let mut c = c.unwrap();
                let mut b = [0u8; 512];
                let _ = c.read(&mut b).unwrap();
                c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                    .unwrap();
                if i > 0 {
                    kept.push(c);
                }
            }
            kept
        });
        let mut cold = Cold::default();
        assert_eq!(cold.grow_to(addr, 300, "/x"), 300);
        assert!(cold.short.is_none());
        let kept = h.join().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(cold.alive(), 299);
        drop(kept);
        // The listener is gone: growing further is refused and said so.
        assert_eq!(cold.grow_to(addr, 310, "/x"), 300);
        assert!(cold.short.as_deref().unwrap().contains("after 300 of 310"));
        cold.clear();
        assert_eq!(cold.held(), 0);
    }
}
