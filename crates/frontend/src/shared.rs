//! What both engines share per front end ([`Shared`]: the configuration, the back ends, the
//! policy, counters, admission, the access log) and per request: the choice of a back end
//! under the connection's mechanism ([`Shared::choose`], reading and updating the client
//! connection's [`ConnState`]) and the in-flight count ([`Live`]). The engines (`proxy`:
//! pingora's callbacks; `relay`: the lean relay) only move bytes and call these.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use policy::dispatch::{NodeId, Target};

use crate::access_log::AccessLog;
use crate::admission::Admission;
use crate::backends::Backends;
use crate::config::{FrontConfig, Mechanism};
use crate::dispatcher::{Choice, Dispatcher};
use crate::metrics::Counters;

/// The request header that asks a back end to fetch the target from another (`host:port`);
/// `triage serve` honours it from the front end (`--forward-from`).
pub const FORWARD_HEADER: &str = "x-triage-forward";

/// The response header in which a `triage serve` back end reports its disk queue.
pub const DISK_HEADER: &str = "x-triage-disk";

/// What the front end's requests share.
pub struct Shared {
    /// The configuration it started with.
    pub cfg: FrontConfig,
    /// The back ends.
    pub backends: Arc<Backends>,
    /// The policy.
    pub dispatcher: Dispatcher,
    /// Counters.
    pub counters: Counters,
    /// Admission, unless `admission = "off"`.
    pub admission: Option<Arc<Admission>>,
    /// The access log, if any.
    pub access_log: Option<AccessLog>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("dispatcher", &self.dispatcher)
            .finish_non_exhaustive()
    }
}

/// The back end a client connection is pinned to.
#[derive(Debug, Clone, Default)]
pub struct ConnState {
    /// Its number, once the connection's first request chose it.
    pub handler: Option<NodeId>,
}

/// Counts a request as in flight from its head to its end (this guard's drop); graceful
/// shutdown waits for the count to reach zero.
#[derive(Debug)]
pub struct Live(Arc<Shared>);

impl Live {
    /// One more request in flight until the guard is dropped.
    pub fn new(shared: Arc<Shared>) -> Self {
        shared.counters.live.fetch_add(1, Relaxed);
        Self(shared)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.counters.live.fetch_sub(1, Relaxed);
    }
}

impl Shared {
    /// The back end (and forwarding target) for a request of `target` on a client connection
    /// in state `conn`, under the configured mechanism; `None` when no back end is up.
    pub fn choose(&self, target: Target, conn: &mut ConnState) -> Option<Choice> {
        let d = &self.dispatcher;
        match self.cfg.mechanism {
            Mechanism::Relay => d.choose(target),
            Mechanism::Pin => {
                let pinned = conn
                    .handler
                    .and_then(|h| self.backends.get(h))
                    .filter(|b| b.is_up());
                match pinned {
                    Some(b) => {
                        b.chosen.fetch_add(1, Relaxed);
                        Some(Choice {
                            via: b,
                            forward_to: None,
                        })
                    }
                    None => self.pin(target, conn),
                }
            }
            Mechanism::Forward => match conn.handler.and_then(|h| d.route(target, h)) {
                Some(c) => Some(c),
                None => self.pin(target, conn),
            },
        }
    }

    /// Pin the connection to the back end the policy chooses for this request.
    fn pin(&self, target: Target, conn: &mut ConnState) -> Option<Choice> {
        if conn.handler.is_some() {
            self.counters.repinned.fetch_add(1, Relaxed);
        }
        let c = self.dispatcher.choose(target);
        conn.handler = c.as_ref().map(|c| c.via.id);
        c
    }

    /// The admission bound now (it follows the back ends that are up).
    pub fn admission_bound(&self) -> usize {
        self.cfg
            .admission_limit(self.backends.count_up().max(1))
            .unwrap_or(usize::MAX)
    }
}
