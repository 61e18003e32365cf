//! The front end's decisions: one `policy::dispatch` object (the same code the simulator
//! drives) behind a mutex, fed with the back ends' loads and disk queues from the
//! [`Backends`] table at each request, and told which back ends are up whenever the table's
//! generation moved. A back end added to the configuration rebuilds the policy for the new
//! count (its tables start empty); one that leaves or fails is marked down in it, so a LARD
//! table forgets its targets.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use policy::dispatch::{self, Dispatch, DispatchConfig, DispatchStats, NodeId, Route, Target};

use crate::backends::{Backend, Backends};

struct Inner {
    policy: Box<dyn Dispatch>,
    nodes: usize,
    synced: u64,
    loads: Vec<u32>,
    disk: Vec<u32>,
    rebuilds: u64,
}

/// See the module docs.
pub struct Dispatcher {
    name: String,
    cfg: DispatchConfig,
    backends: Arc<Backends>,
    inner: Mutex<Inner>,
    start: Instant,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("policy", &self.name)
            .finish_non_exhaustive()
    }
}

/// Where one request goes.
#[derive(Debug, Clone)]
pub struct Choice {
    /// The back end the front end sends it to.
    pub via: Arc<Backend>,
    /// The back end that serves it, when `via` is asked to fetch it from another.
    pub forward_to: Option<Arc<Backend>>,
}

impl Dispatcher {
    /// The policy `name` with `cfg` over `backends`.
    pub fn new(
        name: &str,
        cfg: DispatchConfig,
        backends: Arc<Backends>,
    ) -> Result<Self, policy::PolicyError> {
        let nodes = backends.len().max(1);
        let policy = dispatch::build(name, nodes, &cfg)?;
        Ok(Self {
            name: name.to_owned(),
            cfg,
            backends,
            inner: Mutex::new(Inner {
                policy,
                nodes,
                synced: u64::MAX,
                loads: Vec::new(),
                disk: Vec::new(),
                rebuilds: 0,
            }),
            start: Instant::now(),
        })
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bring the policy up to date with the table, then fill the loads and disk queues.
    fn sync(&self, inner: &mut Inner, all: &[Arc<Backend>]) {
        let generation = self.backends.generation();
        if all.len() > inner.nodes {
            // A new back end: the policy is built for a node count.
            let mut cfg = self.cfg.clone();
            if !cfg.weights.is_empty() {
                cfg.weights.resize(all.len(), 1);
            }
            if let Ok(p) = dispatch::build(&self.name, all.len(), &cfg) {
                inner.policy = p;
                inner.nodes = all.len();
                inner.rebuilds += 1;
                inner.synced = u64::MAX;
            }
        }
        if inner.synced != generation {
            for b in all.iter().take(inner.nodes) {
                inner.policy.set_up(b.id, b.is_up());
            }
            inner.synced = generation;
        }
        inner.loads.clear();
        inner.disk.clear();
        for b in all.iter().take(inner.nodes) {
            inner.loads.push(b.load());
            inner.disk.push(b.disk());
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// The back end for a request of `target` distributed on its own; `None` when no back end
    /// is up.
    pub fn choose(&self, target: Target) -> Option<Choice> {
        let all = self.backends.read();
        let now = self.now();
        let mut inner = self.lock();
        self.sync(&mut inner, &all);
        let Inner { policy, loads, .. } = &mut *inner;
        let n = policy.assign(target, loads, now);
        let b = all.get(n).filter(|b| b.is_up())?.clone();
        b.chosen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(Choice {
            via: b,
            forward_to: None,
        })
    }

    /// Where a request of `target` goes on a connection pinned to `handler` (back-end
    /// forwarding); `None` when the handler is no longer up (the caller pins the connection
    /// anew).
    pub fn route(&self, target: Target, handler: NodeId) -> Option<Choice> {
        let all = self.backends.read();
        let h = all.get(handler).filter(|b| b.is_up())?.clone();
        let now = self.now();
        let mut inner = self.lock();
        self.sync(&mut inner, &all);
        let Inner {
            policy,
            loads,
            disk,
            ..
        } = &mut *inner;
        let route = policy.route(target, handler, loads, disk, now);
        drop(inner);
        use std::sync::atomic::Ordering::Relaxed;
        h.chosen.fetch_add(1, Relaxed);
        match route {
            Route::Forward { server, .. } if server != handler => {
                match all.get(server).filter(|b| b.is_up()) {
                    Some(s) => {
                        s.forwarded_to.fetch_add(1, Relaxed);
                        Some(Choice {
                            via: h,
                            forward_to: Some(s.clone()),
                        })
                    }
                    // The policy has nowhere better: the handler serves it.
                    None => Some(Choice {
                        via: h,
                        forward_to: None,
                    }),
                }
            }
            _ => Some(Choice {
                via: h,
                forward_to: None,
            }),
        }
    }

    /// The policy's counters, and how often it was rebuilt for new back ends.
    pub fn stats(&self) -> (DispatchStats, u64) {
        let inner = self.lock();
        (inner.policy.stats(), inner.rebuilds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::Load;
    use policy::dispatch::target_id;

    fn setup(policy: &str, n: u16) -> (Arc<Backends>, Dispatcher) {
        let addrs: Vec<std::net::SocketAddr> = (1..=n)
            .map(|p| format!("127.0.0.1:{p}").parse().unwrap())
            .collect();
        let b = Arc::new(Backends::new(&addrs, 1, 1));
        let d = Dispatcher::new(policy, DispatchConfig::default(), b.clone()).unwrap();
        (b, d)
    }

    #[test]
    fn lard_follows_the_loads_of_the_table() {
        let (b, d) = setup("lard", 3);
        // Back ends 0 and 1 busy: a new target goes to 2.
        let _busy = Load::on(b.get(0).unwrap(), Some(b.get(1).unwrap()));
        let c = d.choose(target_id("/a")).unwrap();
        assert_eq!(c.via.id, 2);
        // And stays there.
        drop(_busy);
        assert_eq!(d.choose(target_id("/a")).unwrap().via.id, 2);
        assert_eq!(d.stats().0.targets, 1);
    }

    #[test]
    fn a_failed_back_end_is_forgotten_and_its_targets_move() {
        let (b, d) = setup("lard", 2);
        let first = d.choose(target_id("/x")).unwrap().via;
        b.request_failed(&first);
        let next = d.choose(target_id("/x")).unwrap().via;
        assert_ne!(next.id, first.id);
        assert_eq!(d.stats().0.forgotten, 1);
        // Every back end down: no choice.
        b.request_failed(&next);
        assert!(d.choose(target_id("/x")).is_none());
    }

    #[test]
    fn routes_forward_to_the_caching_back_end() {
        let (b, d) = setup("lard", 2);
        let home = d.choose(target_id("/x")).unwrap().via;
        let other = 1 - home.id;
        let c = d.route(target_id("/x"), other).unwrap();
        assert_eq!(c.via.id, other);
        assert_eq!(c.forward_to.map(|s| s.id), Some(home.id));
        // A handler that is down: no route (the connection is pinned anew).
        b.request_failed(&b.get(other).unwrap());
        assert!(d.route(target_id("/x"), other).is_none());
    }

    #[test]
    fn a_new_back_end_rebuilds_the_policy() {
        let (b, d) = setup("wrr", 2);
        b.set_configured(&[
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
            "127.0.0.1:3".parse().unwrap(),
        ]);
        let ids: Vec<NodeId> = (0..3).map(|_| d.choose(0).unwrap().via.id).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        assert_eq!(d.stats().1, 1);
    }
}
