//! `lard-r`: LARD with replication (Pai et al., ASPLOS 1998; seed 004). A target has a *server
//! set*; a hot target gets more nodes when its least loaded one is overloaded, and a set that
//! has not changed for K seconds (paper: 20 s) gives up its most loaded node.
//!
//! ```text
//! if set is empty:  n = least loaded node; set = {n}
//! else:             n = least loaded node in set; m = most loaded node in set
//!                   if (load(n) > T_high and some node < T_low) or load(n) >= 2 T_high:
//!                       p = least loaded node; add p to set; n = p
//!                   if |set| > 1 and now - set.modified > K: remove m from set
//! send to n;  if the set changed: set.modified = now
//! ```
//! Ties: least loaded = lowest load, earliest in the set (or lowest index overall); most loaded
//! = highest load, latest in the set, so `n != m` whenever the set has two nodes. A node going
//! down leaves every set (a set left empty is dropped); only nodes that are up are added.

use super::lard::overloaded;
use super::members::Members;
use super::{check_thresholds, load, Dispatch, DispatchConfig, DispatchStats, Entry};
use super::{NodeId, Target};
use crate::config::PolicyError;
use crate::idhash::IdMap;
use crate::Nanos;

#[derive(Debug, Clone)]
struct ServerSet {
    nodes: Vec<NodeId>,
    modified: Nanos,
}

/// LARD with replication. See the module docs.
#[derive(Debug, Clone)]
pub struct LardR {
    nodes: usize,
    t_low: u32,
    t_high: u32,
    ttl: Nanos,
    sets: IdMap<Target, ServerSet>,
    replications: u64,
    shrinks: u64,
    forgotten: u64,
    members: Members,
}

impl LardR {
    /// For `nodes` back ends, with `cfg`'s thresholds (T_low < T_high) and shrink time.
    pub fn new(nodes: usize, cfg: &DispatchConfig) -> Result<Self, PolicyError> {
        check_thresholds("lard-r", cfg)?;
        Ok(Self {
            nodes: nodes.max(1),
            t_low: cfg.t_low,
            t_high: cfg.t_high,
            ttl: cfg.replica_ttl,
            sets: IdMap::default(),
            replications: 0,
            shrinks: 0,
            forgotten: 0,
            members: Members::new(),
        })
    }

    /// The server set of `target` (empty if none).
    pub fn server_set(&self, target: Target) -> Vec<NodeId> {
        self.sets
            .get(&target)
            .map(|s| s.nodes.clone())
            .unwrap_or_default()
    }

    /// Whether `node` is in `target`'s server set.
    pub(crate) fn in_set(&self, target: Target, node: NodeId) -> bool {
        self.sets
            .get(&target)
            .is_some_and(|s| s.nodes.contains(&node))
    }

    /// Add `node` to `target`'s server set (creating it) at `now`.
    pub(crate) fn add_to_set(&mut self, target: Target, node: NodeId, now: Nanos) {
        match self.sets.get_mut(&target) {
            Some(s) if s.nodes.contains(&node) => {}
            Some(s) => {
                s.nodes.push(node);
                s.modified = now;
                self.replications += 1;
            }
            None => {
                self.sets.insert(
                    target,
                    ServerSet {
                        nodes: vec![node],
                        modified: now,
                    },
                );
            }
        }
    }

    /// The least loaded member of `target`'s server set (ties: earliest), if it has one, and
    /// whether it is overloaded by LARD's rule.
    pub(crate) fn least_in_set(&self, target: Target, loads: &[u32]) -> Option<(NodeId, bool)> {
        let set = self.sets.get(&target)?;
        let mut n = *set.nodes.first()?;
        for &x in &set.nodes {
            if load(loads, x) < load(loads, n) {
                n = x;
            }
        }
        let over = overloaded(
            load(loads, n),
            loads,
            self.nodes,
            &self.members,
            self.t_low,
            self.t_high,
        );
        Some((n, over))
    }
}

impl Dispatch for LardR {
    fn name(&self) -> &str {
        "lard-r"
    }

    fn nodes(&self) -> usize {
        self.nodes
    }

    fn assign(&mut self, target: Target, loads: &[u32], now: Nanos) -> NodeId {
        let (nodes, t_low, t_high, ttl) = (self.nodes, self.t_low, self.t_high, self.ttl);
        let members = &self.members;
        if !members.all_up() && members.count_up(nodes) > 0 {
            // A set can hold a node that is down only if it was added while every node was.
            if let Some(set) = self.sets.get_mut(&target) {
                set.nodes.retain(|&x| members.is_up(x));
                if set.nodes.is_empty() {
                    self.sets.remove(&target);
                }
            }
        }
        let Some(set) = self.sets.get_mut(&target) else {
            let n = members.least(loads, nodes);
            self.sets.insert(
                target,
                ServerSet {
                    nodes: vec![n],
                    modified: now,
                },
            );
            return n;
        };
        let mut n = set.nodes[0];
        let mut m = set.nodes[0];
        for &x in &set.nodes {
            if load(loads, x) < load(loads, n) {
                n = x;
            }
            if load(loads, x) >= load(loads, m) {
                m = x;
            }
        }
        let mut changed = false;
        if overloaded(load(loads, n), loads, nodes, members, t_low, t_high) {
            let p = members.least(loads, nodes);
            if !set.nodes.contains(&p) {
                set.nodes.push(p);
                self.replications += 1;
                changed = true;
            }
            n = p;
        }
        if set.nodes.len() > 1 && now.saturating_sub(set.modified) > ttl && m != n {
            set.nodes.retain(|&x| x != m);
            self.shrinks += 1;
            changed = true;
        }
        if changed {
            set.modified = now;
        }
        n
    }

    fn set_up(&mut self, node: NodeId, up: bool) {
        if node < self.nodes && self.members.set(node, up) && !up {
            let mut forgotten = 0;
            self.sets.retain(|_, s| {
                let before = s.nodes.len();
                s.nodes.retain(|&x| x != node);
                forgotten += (before - s.nodes.len()) as u64;
                !s.nodes.is_empty()
            });
            self.forgotten += forgotten;
        }
    }

    fn stats(&self) -> DispatchStats {
        DispatchStats {
            targets: self.sets.len(),
            reassignments: self.replications,
            shrinks: self.shrinks,
            forgotten: self.forgotten,
        }
    }
}

/// Registry entry.
pub const ENTRY: Entry = Entry {
    name: "lard-r",
    about: "LARD with replication: a hot target's server set grows under load and shrinks after \
            K s (20) without change",
    build: |n, cfg| Ok(Box::new(LardR::new(n, cfg)?)),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SEC;

    fn lard_r(n: usize) -> LardR {
        LardR::new(n, &DispatchConfig::default()).unwrap()
    }

    #[test]
    fn replicates_under_load_and_spreads_over_the_set() {
        let mut l = lard_r(3);
        assert_eq!(l.assign(5, &[3, 0, 9], 0), 1);
        // Not overloaded: stays on its single node.
        assert_eq!(l.assign(5, &[0, 60, 0], SEC), 1);
        // Overloaded while node 0 is idle: node 0 joins the set.
        assert_eq!(l.assign(5, &[10, 66, 30], 2 * SEC), 0);
        assert_eq!(l.server_set(5), vec![1, 0]);
        // Now requests go to the least loaded member.
        assert_eq!(l.assign(5, &[40, 30, 0], 3 * SEC), 1);
        assert_eq!(l.assign(5, &[20, 30, 0], 3 * SEC), 0);
        assert_eq!(l.stats().reassignments, 1);
    }

    #[test]
    fn shrinks_the_most_loaded_after_k_without_change() {
        let mut l = lard_r(3);
        l.assign(5, &[0, 0, 0], 0);
        l.assign(5, &[66, 10, 30], SEC); // set {0, 1}, modified at 1 s
        assert_eq!(l.server_set(5), vec![0, 1]);
        // 20 s later: not yet (needs more than K).
        l.assign(5, &[5, 9, 0], 21 * SEC);
        assert_eq!(l.server_set(5), vec![0, 1]);
        // Later: node 1 (more loaded) leaves; the request goes to node 0.
        assert_eq!(l.assign(5, &[5, 9, 0], 22 * SEC), 0);
        assert_eq!(l.server_set(5), vec![0]);
        assert_eq!(l.stats().shrinks, 1);
        // A single node set never shrinks.
        l.assign(5, &[5, 9, 0], 100 * SEC);
        assert_eq!(l.server_set(5), vec![0]);
    }

    #[test]
    fn a_down_node_leaves_every_set() {
        let mut l = lard_r(3);
        l.assign(5, &[0, 0, 0], 0);
        l.assign(5, &[66, 10, 30], SEC); // set {0, 1}
        l.assign(6, &[0, 1, 1], SEC); // set {0}
        l.set_up(0, false);
        assert_eq!(l.server_set(5), vec![1]);
        assert_eq!(l.server_set(6), Vec::<NodeId>::new());
        assert_eq!(l.stats().forgotten, 2);
        assert_eq!(l.stats().targets, 1);
        // A new set never starts on the down node, though it is idlest.
        assert_eq!(l.assign(6, &[0, 9, 4], 2 * SEC), 2);
    }

    #[test]
    fn grows_at_twice_t_high_even_without_idle_nodes() {
        let mut l = lard_r(2);
        l.assign(1, &[0, 0], 0);
        assert_eq!(l.assign(1, &[130, 100], 0), 1);
        assert_eq!(l.server_set(1), vec![0, 1]);
    }
}
