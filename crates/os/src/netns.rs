//! Network namespaces: a handle on one ([`NetNs`]), entering it from the calling thread
//! (`setns`), from a child between fork and exec ([`enter_raw`], async-signal-safe), or for the
//! length of a closure on a thread of its own ([`NetNs::run`]).
//!
//! Namespaces themselves are created and deleted with `ip netns add/del` by the callers (the
//! lab's testbed): `ip` bind-mounts them under `/var/run/netns/NAME`, where [`NetNs::open`]
//! finds them.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::Path;

use nix::sched::{setns, CloneFlags};

/// Where `ip netns` keeps its named namespaces.
pub const NETNS_DIR: &str = "/var/run/netns";

/// An open network namespace (its nsfs file); the namespace lives at least as long as this.
#[derive(Debug)]
pub struct NetNs {
    file: File,
    name: String,
}

impl NetNs {
    /// The namespace `ip netns add NAME` made.
    pub fn open(name: &str) -> io::Result<NetNs> {
        let p = Path::new(NETNS_DIR).join(name);
        let file = File::open(&p)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
        Ok(NetNs {
            file,
            name: name.to_owned(),
        })
    }

    /// The namespace the calling thread is in now.
    pub fn of_current_thread() -> io::Result<NetNs> {
        Ok(NetNs {
            file: File::open("/proc/thread-self/ns/net")?,
            name: "(current thread's)".into(),
        })
    }

    /// Its name (as given to [`NetNs::open`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A second handle on the same namespace (for threads that outlive this one).
    pub fn try_clone(&self) -> io::Result<NetNs> {
        Ok(NetNs {
            file: self.file.try_clone()?,
            name: self.name.clone(),
        })
    }

    /// Whether `other` is a handle on the same namespace.
    pub fn same_as(&self, other: &NetNs) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let (a, b) = (self.file.metadata()?, other.file.metadata()?);
        Ok(a.dev() == b.dev() && a.ino() == b.ino())
    }

    /// The descriptor, for [`enter_raw`] in a child between fork and exec.
    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Move the calling thread into this namespace. Only for threads the caller owns: the
    /// thread stays there.
    pub fn enter_current_thread(&self) -> io::Result<()> {
        setns(self.file.as_fd(), CloneFlags::CLONE_NEWNET)
            .map_err(|e| io::Error::other(format!("entering network namespace {}: {e}", self.name)))
    }

    /// Run `f` on a new thread inside this namespace and return what it returns (sockets it
    /// opens belong to the namespace).
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> io::Result<R> {
        std::thread::scope(|s| {
            s.spawn(|| {
                self.enter_current_thread()?;
                Ok(f())
            })
            .join()
            .map_err(|_| io::Error::other("a thread in a network namespace panicked"))?
        })
    }
}

/// Enter the network namespace open at `fd`, in the calling thread: one `setns`, no
/// allocation, so it may run between fork and exec.
pub fn enter_raw(fd: RawFd) -> io::Result<()> {
    // SAFETY: setns takes a plain descriptor number and touches no memory of ours; a closed or
    // foreign descriptor fails with EBADF or EINVAL.
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A new network namespace for the calling thread alone (`unshare(CLONE_NEWNET)`): for tests
/// and tools that need a private network without `ip`. The thread stays in it.
pub fn unshare_current_thread() -> io::Result<NetNs> {
    nix::sched::unshare(CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
    NetNs::of_current_thread()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    #[test]
    fn a_listener_in_a_private_namespace_is_not_reachable_from_outside() {
        if !root() {
            eprintln!("SKIP a_listener_in_a_private_namespace...: needs root (CAP_SYS_ADMIN)");
            return;
        }
        let ns = std::thread::spawn(unshare_current_thread)
            .join()
            .unwrap()
            .unwrap();
        // Loopback is down in a fresh namespace; bring nothing up: binding works, connecting
        // from the host to the namespace's port does not reach it.
        let (port, reached_inside) = ns
            .run(|| {
                let l = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
                let port = l.local_addr().unwrap().port();
                (
                    port,
                    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
                )
            })
            .unwrap();
        assert!(!reached_inside, "loopback is down in a new namespace");
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
        let again = ns.try_clone().unwrap();
        assert!(again.raw_fd() != ns.raw_fd());
        again.run(|| ()).unwrap();
        // Entering by descriptor, as a child does between fork and exec.
        let fd = ns.raw_fd();
        let now = std::thread::spawn(move || {
            enter_raw(fd).unwrap();
            NetNs::of_current_thread().unwrap()
        })
        .join()
        .unwrap();
        assert!(now.same_as(&ns).unwrap());
        assert!(!NetNs::of_current_thread().unwrap().same_as(&ns).unwrap());
        assert!(enter_raw(-1).is_err());
        assert!(NetNs::open("no-such-namespace-of-triage").is_err());
    }
}
