//! Reclaiming connection slots under pressure. At `max_conns`, before a newcomer is refused,
//! the oldest connections that are doing nothing are closed: those that have sent nothing
//! since they were accepted and idle keep-alive connections, oldest first (by the time they
//! last became idle), skipping any whose next request is already waiting in the socket. So
//! sockets that connect and send nothing cannot lock legitimate clients out (nginx closes
//! idle connections the same way); only when every connection is busy is a newcomer refused.
//!
//! The table holds every open connection. Asking a connection to close sets its eviction flag
//! and wakes its task ([`Conn::evict`]); until that task has closed it, it counts as a
//! pending eviction, so the accept loop admits one newcomer per eviction and no more.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use crate::ctx::Conn;

/// Every open connection, for reclaiming idle ones. See the module docs.
#[derive(Debug, Default)]
pub struct Reclaim {
    conns: Mutex<HashMap<usize, Conn>>,
    pending: AtomicU64,
    reclaimed: AtomicU64,
}

/// Whether bytes are waiting on socket `fd` (a request the connection has not read yet).
fn has_input(fd: RawFd) -> bool {
    let mut b = 0u8;
    // SAFETY: a one-byte buffer we own; MSG_PEEK leaves the byte for the connection.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut b as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n > 0
}

impl Reclaim {
    /// A connection opened.
    pub fn insert(&self, conn: &Conn) {
        self.lock().insert(conn.key(), conn.clone());
    }

    /// A connection is closing: call before its socket is closed (the table peeks at sockets
    /// under its lock).
    pub fn remove(&self, conn: &Conn) {
        {
            let mut conns = self.lock();
            conns.remove(&conn.key());
            // Give the table's memory back after a crowd has left.
            if conns.capacity() > 1024 && conns.len() < conns.capacity() / 8 {
                let keep = conns.len() * 2;
                conns.shrink_to(keep);
            }
        }
        if conn.evicting() {
            self.pending.fetch_sub(1, Relaxed);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Conn>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The server stops: every open connection is told ([`Conn::stop`]). A connection
    /// opened after this sees the stop when its task starts (it reads the stop flag then).
    pub fn stop_all(&self) {
        let conns: Vec<Conn> = self.lock().values().cloned().collect();
        conns.iter().for_each(Conn::stop);
    }

    /// Connections asked to close that have not closed yet.
    pub fn pending(&self) -> u64 {
        self.pending.load(Relaxed)
    }

    /// Connections closed to make room, since the start.
    pub fn reclaimed(&self) -> u64 {
        self.reclaimed.load(Relaxed)
    }

    /// Ask up to `n` idle connections to close, oldest first; returns how many were asked.
    pub fn evict(&self, n: usize) -> usize {
        let conns = self.lock();
        let mut idle: Vec<(u64, &Conn)> = conns
            .values()
            .filter(|c| c.at_rest() && !c.evicting())
            .map(|c| (c.idle_since(), c))
            .collect();
        idle.sort_unstable_by_key(|(since, c)| (*since, c.key()));
        let mut asked = 0;
        for (_, c) in idle {
            if asked == n {
                break;
            }
            if has_input(c.fd()) {
                continue;
            }
            if c.evict() {
                self.pending.fetch_add(1, Relaxed);
                self.reclaimed.fetch_add(1, Relaxed);
                asked += 1;
            }
        }
        asked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    #[test]
    fn the_oldest_idle_connections_go_first_and_busy_ones_stay() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let t = Reclaim::default();
        let conns: Vec<Conn> = (0..4).map(|i| Conn::new(i, a, a, -1, 10 * i)).collect();
        for c in &conns {
            t.insert(c);
        }
        conns[0].request_started(50, false);
        assert_eq!(t.evict(2), 2);
        assert!(!conns[0].evicting(), "busy");
        assert!(conns[1].evicting() && conns[2].evicting());
        assert!(!conns[3].evicting(), "the newest stays");
        assert_eq!(t.pending(), 2);
        t.remove(&conns[1]);
        assert_eq!(t.pending(), 1);
        assert_eq!(t.evict(5), 1, "only one idle connection is left");
        assert_eq!(t.reclaimed(), 3);
    }
}
