//! Noticing that the client of a CGI request went away, independently of hyper.
//!
//! hyper notices a closed connection only when it reads or writes it; while a script computes
//! without printing (a CPU-bound CGI, possibly throttled by its container's cap) and hyper has
//! stopped reading (e.g. it already read the end of the stream together with the request), a
//! client that hung up would go unnoticed until the script finishes. [`PeerWatch`] registers a
//! duplicate of the connection's socket for readiness only (it never reads) and resolves when
//! the peer has closed its side (`EPOLLRDHUP`/`EPOLLHUP`) or the socket is in error. Data
//! arriving (a pipelined request) is left for hyper.
//!
//! A client that half-closes (shuts down its write side) and still waits for the answer is
//! taken as gone, as hyper itself does with `half_close(false)`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Watches one connection for its peer going away.
pub struct PeerWatch {
    fd: AsyncFd<OwnedFd>,
    closed: bool,
}

impl std::fmt::Debug for PeerWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerWatch")
            .field("fd", &self.fd.get_ref().as_raw_fd())
            .field("closed", &self.closed)
            .finish()
    }
}

impl PeerWatch {
    /// Watch the connection whose socket is `fd` (which must stay open while this lives: the
    /// connection outlives its requests). The fd is duplicated, not taken.
    pub fn new(fd: RawFd) -> io::Result<Self> {
        // SAFETY: F_DUPFD_CLOEXEC on an fd the caller keeps open; the result is ours.
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let owned = unsafe { OwnedFd::from_raw_fd(dup) };
        // SAFETY: the AsyncFd owns the duplicate for as long as it is registered.
        let fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(Self { fd, closed: false })
    }

    /// Ready once the peer has closed its side of the connection (or it failed).
    pub fn poll_closed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.closed {
            return Poll::Ready(());
        }
        loop {
            let mut guard = match self.fd.poll_read_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => {
                    self.closed = true;
                    return Poll::Ready(());
                }
                Poll::Ready(Ok(g)) => g,
            };
            let r = guard.ready();
            if r.is_read_closed() || r.is_error() || peer_shut(self.fd.get_ref().as_raw_fd()) {
                self.closed = true;
                return Poll::Ready(());
            }
            // Data for hyper (or a spurious wake-up): wait for the next edge.
            guard.clear_ready();
        }
    }

    /// Resolves once the peer has gone away.
    pub async fn closed(&mut self) {
        std::future::poll_fn(|cx| self.poll_closed(cx)).await
    }
}

/// Whether the socket has seen the peer's FIN or an error (`POLLRDHUP`/`POLLHUP`/`POLLERR`),
/// without reading anything.
fn peer_shut(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn notices_a_closed_peer_but_not_incoming_data() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut c = tokio::net::TcpStream::connect(l.local_addr().unwrap())
            .await
            .unwrap();
        let (s, _) = l.accept().await.unwrap();
        let mut w = PeerWatch::new(s.as_raw_fd()).unwrap();
        // Data is not a close.
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let early = tokio::time::timeout(std::time::Duration::from_millis(100), w.closed()).await;
        assert!(early.is_err(), "data taken for a close");
        drop(c);
        tokio::time::timeout(std::time::Duration::from_secs(5), w.closed())
            .await
            .expect("close noticed");
        // The data is still there for the owner of the socket.
        let mut buf = [0u8; 64];
        s.readable().await.unwrap();
        let n = s.try_read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n\r\n");
    }
}
