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
//! = highest load, latest in the set, so `n != m` whenever the set has two nodes.

use super::lard::{least, overloaded};
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
        })
    }

    /// The server set of `target` (empty if none).
    pub fn server_set(&self, target: Target) -> Vec<NodeId> {
        self.sets
            .get(&target)
            .map(|s| s.nodes.clone())
            .unwrap_or_default()
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
        let Some(set) = self.sets.get_mut(&target) else {
            let n = least(loads, nodes);
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
        if overloaded(load(loads, n), loads, nodes, t_low, t_high) {
            let p = least(loads, nodes);
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

    fn stats(&self) -> DispatchStats {
        DispatchStats {
            targets: self.sets.len(),
            reassignments: self.replications,
            shrinks: self.shrinks,
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
    fn grows_at_twice_t_high_even_without_idle_nodes() {
        let mut l = lard_r(2);
        l.assign(1, &[0, 0], 0);
        assert_eq!(l.assign(1, &[130, 100], 0), 1);
        assert_eq!(l.server_set(1), vec![0, 1]);
    }
}
