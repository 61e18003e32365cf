//! Idle kept-alive back-end connections, per back end, in a plain list: no task and no timer
//! per idle connection. A connection is taken most recently used first; one idle longer than
//! `pool_idle_timeout`, or that its back end closed (or wrote to) while idle, is dropped when
//! found. The readiness check costs no system call while the connection's socket has had no
//! event since its last read, and one non-blocking `recv` otherwise. A connection that was
//! alive when taken may still be closed by its back end a moment later: the relay then tries
//! the request again on a fresh connection (`relay::client`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::net::TcpStream;

/// One idle connection.
#[derive(Debug)]
struct Idle {
    /// The connection.
    stream: TcpStream,
    /// Since when it is idle (for `pool_idle_timeout`).
    since: Instant,
}

/// The pool. See the module docs.
#[derive(Debug)]
pub struct Pool {
    /// Idle connections per back-end address, the most recently released last.
    idle: Mutex<HashMap<SocketAddr, Vec<Idle>>>,
    /// Most idle connections kept, all back ends together (`pool_size`).
    cap: usize,
    /// Longest an idle connection is kept (`pool_idle_timeout`).
    idle_timeout: Duration,
}

/// Whether an idle connection can carry a request: its back end has neither closed it nor
/// sent anything unasked.
fn still_open(stream: &TcpStream) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    match stream.poll_read_ready(&mut cx) {
        // No event since the socket was last read empty: nothing arrived.
        Poll::Pending => true,
        Poll::Ready(Err(_)) => false,
        // An event (or the readiness of the last read): look without blocking.
        Poll::Ready(Ok(())) => {
            let mut b = [0u8; 1];
            matches!(stream.try_read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        }
    }
}

impl Pool {
    /// An empty pool keeping at most `cap` connections, each at most `idle_timeout`.
    pub fn new(cap: usize, idle_timeout: Duration) -> Self {
        Self {
            idle: Mutex::new(HashMap::new()),
            cap,
            idle_timeout,
        }
    }

    /// An idle connection to `addr` that is still open, if any.
    pub fn take(&self, addr: SocketAddr) -> Option<TcpStream> {
        let now = Instant::now();
        let mut idle = self.idle.lock();
        let list = idle.get_mut(&addr)?;
        while let Some(c) = list.pop() {
            if now.duration_since(c.since) < self.idle_timeout && still_open(&c.stream) {
                return Some(c.stream);
            }
        }
        None
    }

    /// Keep `stream`, idle, for a later request to `addr` (dropped when the pool is full).
    pub fn put(&self, addr: SocketAddr, stream: TcpStream) {
        let mut idle = self.idle.lock();
        let held: usize = idle.values().map(Vec::len).sum();
        if held >= self.cap {
            // Make room by dropping this back end's oldest, if it has one.
            match idle.get_mut(&addr).filter(|l| !l.is_empty()) {
                Some(l) => drop(l.remove(0)),
                None => return,
            }
        }
        idle.entry(addr).or_default().push(Idle {
            stream,
            since: Instant::now(),
        });
    }

    /// Idle connections held now.
    pub fn len(&self) -> usize {
        self.idle.lock().values().map(Vec::len).sum()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn pair(l: &tokio::net::TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (c, s)
    }

    #[tokio::test]
    async fn a_connection_its_back_end_closed_or_wrote_on_is_not_reused() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let pool = Pool::new(8, Duration::from_secs(60));
        let (open, _keep) = pair(&l).await;
        let (closed, server_side) = pair(&l).await;
        let (chatty, mut server_chatty) = pair(&l).await;
        drop(server_side);
        server_chatty.write_all(b"x").await.unwrap();
        // Let the events reach the sockets (and the reactor).
        tokio::time::sleep(Duration::from_millis(50)).await;
        pool.put(addr, open);
        pool.put(addr, closed);
        pool.put(addr, chatty);
        assert_eq!(pool.len(), 3);
        // The two bad ones (most recent first) are dropped; the open one comes back.
        assert!(pool.take(addr).is_some());
        assert!(pool.is_empty());
        assert!(pool.take(addr).is_none());
    }

    #[tokio::test]
    async fn idle_too_long_or_over_the_cap_is_dropped() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let pool = Pool::new(2, Duration::from_millis(30));
        let mut keep = Vec::new();
        for _ in 0..3 {
            let (c, s) = pair(&l).await;
            keep.push(s);
            pool.put(addr, c);
        }
        assert_eq!(pool.len(), 2, "the cap holds");
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(pool.take(addr).is_none(), "idle past the timeout");
    }
}
