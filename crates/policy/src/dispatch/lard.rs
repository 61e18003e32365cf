//! `lard`: locality-aware request distribution (Pai et al., ASPLOS 1998; seed 004), the basic
//! strategy: each target is served by one node, so the cluster's caches partition the working
//! set, and a target moves only when its node is overloaded.
//!
//! ```text
//! if server[target] is unset:            server[target] = least loaded node
//! else n = server[target]; if (load(n) > T_high and some node has load < T_low)
//!                             or load(n) >= 2 * T_high:
//!                                        server[target] = least loaded node
//! send to server[target]
//! ```
//! Load = active connections (passed in). Ties in "least loaded" go to the lowest index. Only
//! nodes that are up count (as least loaded, and as the node below T_low); a node going down
//! drops its targets from the table.

use super::members::Members;
use super::{check_thresholds, load, Dispatch, DispatchConfig, DispatchStats, Entry};
use super::{NodeId, Target};
use crate::config::PolicyError;
use crate::idhash::IdMap;
use crate::Nanos;

/// Basic LARD. See the module docs.
#[derive(Debug, Clone)]
pub struct Lard {
    nodes: usize,
    t_low: u32,
    t_high: u32,
    server: IdMap<Target, NodeId>,
    reassignments: u64,
    forgotten: u64,
    members: Members,
}

impl Lard {
    /// For `nodes` back ends, with `cfg`'s thresholds (T_low < T_high).
    pub fn new(nodes: usize, cfg: &DispatchConfig) -> Result<Self, PolicyError> {
        check_thresholds("lard", cfg)?;
        Ok(Self {
            nodes: nodes.max(1),
            t_low: cfg.t_low,
            t_high: cfg.t_high,
            server: IdMap::default(),
            reassignments: 0,
            forgotten: 0,
            members: Members::new(),
        })
    }

    /// The node currently serving `target`, if any.
    pub fn server(&self, target: Target) -> Option<NodeId> {
        self.server.get(&target).copied()
    }
}

/// LARD's move condition for a node with load `l` (only nodes that are up can be idle).
pub(crate) fn overloaded(
    l: u32,
    loads: &[u32],
    nodes: usize,
    members: &Members,
    t_low: u32,
    t_high: u32,
) -> bool {
    (l > t_high && members.some_below(loads, nodes, t_low)) || l >= 2 * t_high
}

impl Dispatch for Lard {
    fn name(&self) -> &str {
        "lard"
    }

    fn nodes(&self) -> usize {
        self.nodes
    }

    fn assign(&mut self, target: Target, loads: &[u32], _now: Nanos) -> NodeId {
        let (nodes, m) = (self.nodes, &self.members);
        let chosen = match self.server.get(&target).copied() {
            None => m.least(loads, nodes),
            Some(n) if !m.is_up(n) => m.least(loads, nodes),
            Some(n) if overloaded(load(loads, n), loads, nodes, m, self.t_low, self.t_high) => {
                let m = m.least(loads, nodes);
                if m != n {
                    self.reassignments += 1;
                }
                m
            }
            Some(n) => n,
        };
        self.server.insert(target, chosen);
        chosen
    }

    fn set_up(&mut self, node: NodeId, up: bool) {
        if node < self.nodes && self.members.set(node, up) && !up {
            let before = self.server.len();
            self.server.retain(|_, n| *n != node);
            self.forgotten += (before - self.server.len()) as u64;
        }
    }

    fn stats(&self) -> DispatchStats {
        DispatchStats {
            targets: self.server.len(),
            reassignments: self.reassignments,
            shrinks: 0,
            forgotten: self.forgotten,
        }
    }
}

/// Registry entry.
pub const ENTRY: Entry = Entry {
    name: "lard",
    about: "locality-aware: one node per target, moved when its load > T_high while another is \
            < T_low, or >= 2 T_high",
    build: |n, cfg| Ok(Box::new(Lard::new(n, cfg)?)),
};

#[cfg(test)]
mod tests {
    use super::*;

    fn lard(n: usize) -> Lard {
        Lard::new(n, &DispatchConfig::default()).unwrap()
    }

    #[test]
    fn first_request_goes_to_the_least_loaded_and_sticks() {
        let mut l = lard(3);
        assert_eq!(l.assign(7, &[5, 2, 9], 0), 1);
        // Sticks while its node is not overloaded, even if others are idler.
        assert_eq!(l.assign(7, &[0, 65, 0], 0), 1);
        assert_eq!(l.server(7), Some(1));
        assert_eq!(l.stats().reassignments, 0);
    }

    #[test]
    fn moves_above_t_high_only_when_a_node_is_below_t_low() {
        let mut l = lard(3);
        l.assign(7, &[0, 1, 1], 0);
        // 66 > T_high, but nobody is below T_low = 25: stays.
        assert_eq!(l.assign(7, &[66, 25, 30], 0), 0);
        // Node 2 drops to 24 < T_low: moves there.
        assert_eq!(l.assign(7, &[66, 25, 24], 0), 2);
        assert_eq!(l.server(7), Some(2));
        assert_eq!(l.stats().reassignments, 1);
    }

    #[test]
    fn moves_at_twice_t_high_regardless() {
        let mut l = lard(2);
        l.assign(1, &[0, 0], 0);
        assert_eq!(l.assign(1, &[129, 100], 0), 0);
        assert_eq!(l.assign(1, &[130, 100], 0), 1);
    }

    #[test]
    fn a_down_node_loses_its_targets_and_is_not_chosen() {
        let mut l = lard(3);
        assert_eq!(l.assign(1, &[0, 5, 5], 0), 0);
        assert_eq!(l.assign(2, &[1, 0, 5], 0), 1);
        l.set_up(0, false);
        assert_eq!(l.server(1), None);
        assert_eq!(l.server(2), Some(1));
        assert_eq!(l.stats().forgotten, 1);
        // Target 1 goes to the least loaded node that is up, though node 0 is idler.
        assert_eq!(l.assign(1, &[0, 9, 4], 0), 2);
        // Node 0 back: chosen again as least loaded for new targets; old ones stay.
        l.set_up(0, true);
        assert_eq!(l.assign(3, &[0, 9, 4], 0), 0);
        assert_eq!(l.assign(1, &[0, 9, 4], 0), 2);
    }

    #[test]
    fn rejects_inverted_thresholds() {
        let cfg = DispatchConfig {
            t_low: 70,
            ..DispatchConfig::default()
        };
        assert!(Lard::new(2, &cfg).is_err());
    }
}
