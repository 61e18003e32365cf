//! The front end's own table of back ends: for each, its address, whether it may take
//! requests, and its load (requests in flight, counted by atomics and released by a drop
//! guard, [`Load`]), plus what it reported and what happened to it. pingora's load-balancing
//! crate only runs the health checks and discovery; the decisions read this table.
//!
//! A back end is **up** when it is in the configuration, its health checks pass and no
//! request failed to reach it since the last check that passed. It goes **down** at once when
//! a request cannot connect to it (or is reset before any response byte), or after `fall`
//! failed checks in a row; it comes back after `rise` checks in a row pass. Every change bumps
//! a generation number, which the dispatcher compares on each request to pass the changes to
//! its policy (`Dispatch::set_up`). Back-end numbers (node ids) never change: a back end
//! removed from the configuration keeps its number, marked removed, and gets it back if it
//! returns.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use policy::dispatch::NodeId;

/// One back end.
#[derive(Debug)]
pub struct Backend {
    /// Its number (the policy's node id).
    pub id: NodeId,
    /// Its address.
    pub addr: SocketAddr,
    /// Requests in flight (relayed to it, or forwarded through it).
    inflight: AtomicU32,
    /// Its disk queue as it last reported it (`X-Triage-Disk`).
    disk: AtomicU32,
    removed: AtomicBool,
    /// Down by health checks.
    unhealthy: AtomicBool,
    /// Down since a request failed to reach it (cleared by a passing check).
    failed: AtomicBool,
    passes: AtomicU32,
    fails: AtomicU32,
    /// Requests the policy gave it.
    pub chosen: AtomicU64,
    /// Requests forwarded to it through another back end.
    pub forwarded_to: AtomicU64,
    /// Requests that could not reach it (connect failure, reset before a response byte).
    pub failures: AtomicU64,
    /// Responses it sent (any status).
    pub responses: AtomicU64,
}

impl Backend {
    fn new(id: NodeId, addr: SocketAddr) -> Self {
        Self {
            id,
            addr,
            inflight: AtomicU32::new(0),
            disk: AtomicU32::new(0),
            removed: AtomicBool::new(false),
            unhealthy: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            passes: AtomicU32::new(0),
            fails: AtomicU32::new(0),
            chosen: AtomicU64::new(0),
            forwarded_to: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            responses: AtomicU64::new(0),
        }
    }

    /// Whether it may take requests.
    pub fn is_up(&self) -> bool {
        !self.removed.load(Relaxed) && !self.unhealthy.load(Relaxed) && !self.failed.load(Relaxed)
    }

    /// Whether it left the configuration.
    pub fn is_removed(&self) -> bool {
        self.removed.load(Relaxed)
    }

    /// Requests in flight.
    pub fn load(&self) -> u32 {
        self.inflight.load(Relaxed)
    }

    /// Its disk queue as last reported.
    pub fn disk(&self) -> u32 {
        self.disk.load(Relaxed)
    }

    /// Record the disk queue it reported.
    pub fn report_disk(&self, queued: u32) {
        self.disk.store(queued, Relaxed);
    }
}

/// Releases the load a request put on its back ends when dropped (the request is done, failed,
/// or retried elsewhere): the back end it was sent to and, when forwarded, the one serving it.
#[derive(Debug)]
pub struct Load {
    via: Arc<Backend>,
    also: Option<Arc<Backend>>,
}

impl Load {
    /// Count one request in flight on `via` and on `also`, if any.
    pub fn on(via: Arc<Backend>, also: Option<Arc<Backend>>) -> Self {
        via.inflight.fetch_add(1, Relaxed);
        if let Some(b) = &also {
            b.inflight.fetch_add(1, Relaxed);
        }
        Self { via, also }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.via.inflight.fetch_sub(1, Relaxed);
        if let Some(b) = &self.also {
            b.inflight.fetch_sub(1, Relaxed);
        }
    }
}

/// The table. See the module docs.
#[derive(Debug)]
pub struct Backends {
    all: RwLock<Vec<Arc<Backend>>>,
    generation: AtomicU64,
    rise: u32,
    fall: u32,
}

impl Backends {
    /// The back ends `addrs` (numbered in order), all up; `rise` and `fall` as in `[health]`.
    pub fn new(addrs: &[SocketAddr], rise: u32, fall: u32) -> Self {
        Self {
            all: RwLock::new(
                addrs
                    .iter()
                    .enumerate()
                    .map(|(i, a)| Arc::new(Backend::new(i, *a)))
                    .collect(),
            ),
            generation: AtomicU64::new(0),
            rise: rise.max(1),
            fall: fall.max(1),
        }
    }

    /// Every back end, by number, under the table's read lock (no copy).
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Backend>>> {
        self.all.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Every back end ever configured, by number.
    pub fn all(&self) -> Vec<Arc<Backend>> {
        self.read().clone()
    }

    /// Back end number `id`.
    pub fn get(&self, id: NodeId) -> Option<Arc<Backend>> {
        self.read().get(id).cloned()
    }

    /// The back end at `addr`.
    pub fn by_addr(&self, addr: SocketAddr) -> Option<Arc<Backend>> {
        self.read().iter().find(|b| b.addr == addr).cloned()
    }

    /// How many back ends have a number (the policy's node count).
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Back ends that are up.
    pub fn count_up(&self) -> usize {
        self.read().iter().filter(|b| b.is_up()).count()
    }

    /// Addresses of the back ends in the configuration (removed ones left out).
    pub fn configured(&self) -> Vec<SocketAddr> {
        self.read()
            .iter()
            .filter(|b| !b.is_removed())
            .map(|b| b.addr)
            .collect()
    }

    /// Changes so far; the dispatcher passes them on when this moves.
    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Relaxed);
    }

    /// A request could not reach `b`: down until a check passes.
    pub fn request_failed(&self, b: &Backend) {
        b.failures.fetch_add(1, Relaxed);
        if !b.failed.swap(true, Relaxed) {
            b.passes.store(0, Relaxed);
            self.changed();
        }
    }

    /// A health check of `b` passed (`true`) or failed.
    pub fn checked(&self, b: &Backend, ok: bool) {
        if ok {
            b.fails.store(0, Relaxed);
            let passes = b.passes.fetch_add(1, Relaxed) + 1;
            let was_down = b.unhealthy.load(Relaxed) || b.failed.load(Relaxed);
            // A back end a request found dead must pass `rise` checks, as one the checks
            // took out.
            if was_down && passes >= self.rise {
                b.unhealthy.store(false, Relaxed);
                b.failed.store(false, Relaxed);
                self.changed();
            }
        } else {
            b.passes.store(0, Relaxed);
            let fails = b.fails.fetch_add(1, Relaxed) + 1;
            if fails >= self.fall && !b.unhealthy.swap(true, Relaxed) {
                self.changed();
            }
        }
    }

    /// Make the configuration's back ends exactly `addrs`: the others are removed (their
    /// requests in flight finish), new ones get the next numbers, returning ones their old
    /// number. Returns the numbers of the new back ends.
    pub fn set_configured(&self, addrs: &[SocketAddr]) -> Vec<NodeId> {
        let mut all = self.all.write().unwrap_or_else(|p| p.into_inner());
        let mut added = Vec::new();
        let mut changed = false;
        for b in all.iter() {
            let keep = addrs.contains(&b.addr);
            if b.removed.swap(!keep, Relaxed) == keep {
                changed = true;
            }
        }
        for a in addrs {
            if !all.iter().any(|b| b.addr == *a) {
                let id = all.len();
                all.push(Arc::new(Backend::new(id, *a)));
                added.push(id);
                changed = true;
            }
        }
        drop(all);
        if changed {
            self.changed();
        }
        added
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Backends {
        Backends::new(
            &[
                "127.0.0.1:1".parse().unwrap(),
                "127.0.0.1:2".parse().unwrap(),
            ],
            2,
            2,
        )
    }

    #[test]
    fn load_guards_count_requests_in_flight() {
        let t = table();
        let (a, b) = (t.get(0).unwrap(), t.get(1).unwrap());
        let g = Load::on(a.clone(), Some(b.clone()));
        let h = Load::on(a.clone(), None);
        assert_eq!((a.load(), b.load()), (2, 1));
        drop(g);
        assert_eq!((a.load(), b.load()), (1, 0));
        drop(h);
        assert_eq!(a.load(), 0);
    }

    #[test]
    fn a_failed_request_takes_a_back_end_out_until_rise_checks_pass() {
        let t = table();
        let b = t.get(1).unwrap();
        let g0 = t.generation();
        t.request_failed(&b);
        assert!(!b.is_up());
        assert_eq!(t.count_up(), 1);
        assert!(t.generation() > g0);
        t.checked(&b, true);
        assert!(!b.is_up(), "one pass of two");
        t.checked(&b, true);
        assert!(b.is_up());
    }

    #[test]
    fn checks_take_out_after_fall_failures() {
        let t = table();
        let b = t.get(0).unwrap();
        t.checked(&b, false);
        assert!(b.is_up(), "one failure of two");
        t.checked(&b, true);
        t.checked(&b, false);
        assert!(b.is_up(), "not in a row");
        t.checked(&b, false);
        assert!(!b.is_up());
        t.checked(&b, true);
        t.checked(&b, true);
        assert!(b.is_up());
    }

    #[test]
    fn reconfiguring_keeps_numbers() {
        let t = table();
        let c: SocketAddr = "127.0.0.1:3".parse().unwrap();
        let added = t.set_configured(&["127.0.0.1:2".parse().unwrap(), c]);
        assert_eq!(added, vec![2]);
        assert!(t.get(0).unwrap().is_removed());
        assert!(!t.get(0).unwrap().is_up());
        assert_eq!(t.by_addr(c).unwrap().id, 2);
        assert_eq!(t.configured().len(), 2);
        // Back again: the same number.
        assert!(t
            .set_configured(&["127.0.0.1:1".parse().unwrap()])
            .is_empty());
        assert!(t.get(0).unwrap().is_up());
        assert_eq!(t.count_up(), 1);
    }
}
