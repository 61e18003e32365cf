//! `/metrics` on an admin address: a small blocking HTTP/1.1 server on its own thread that
//! answers every `GET /metrics` with the latest [`Snapshot`] (and `/healthz` with `ok`).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::metrics::Snapshot;

/// A running admin server; dropping it stops the thread.
pub struct Admin {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Admin {
    /// Listen on `addr` and serve `snap`.
    pub fn start(addr: SocketAddr, snap: Arc<Mutex<Snapshot>>) -> std::io::Result<Self> {
        let l = TcpListener::bind(addr)?;
        l.set_nonblocking(true)?;
        let addr = l.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("attach-admin".into())
            .spawn(move || {
                while !s2.load(Ordering::Relaxed) {
                    match l.accept() {
                        Ok((c, _)) => {
                            let _ = serve(c, &snap);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })?;
        Ok(Self {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(c: TcpStream, snap: &Mutex<Snapshot>) -> std::io::Result<()> {
    c.set_nonblocking(false)?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut r = BufReader::new(c.try_clone()?);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("/");
    let (status, body) = match path {
        "/metrics" => (
            "200 OK",
            snap.lock().map(|s| s.render()).unwrap_or_default(),
        ),
        "/healthz" => ("200 OK", "ok\n".to_owned()),
        _ => ("404 Not Found", "try /metrics\n".to_owned()),
    };
    let mut w = c;
    write!(
        w,
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
}
