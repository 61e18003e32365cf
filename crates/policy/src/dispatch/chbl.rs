//! `chbl`: consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, SODA 2018,
//! as used by HAProxy's `hash-balance-factor` and Google's Cloud load balancers).
//!
//! Every node has `vnodes` points on a 64-bit ring. A request for a target starts at the
//! target's point and walks clockwise to the first node whose load is below the capacity
//! `ceil(c * (L + 1) / n)`, where `L + 1` is the total load including this request. So no assignment
//! ever puts a node above `ceil(c * mean)` (some node is always below the capacity,
//! since `n * capacity >= c * (L + 1) > L`), and a target keeps its node while that node is not
//! full: locality like LARD, with a hard balance bound instead of thresholds. Nodes that are
//! down are passed over on the walk and left out of `n` and `L`.

use super::members::Members;
use super::{mix64, Dispatch, Entry, NodeId, Target};
use crate::config::PolicyError;
use crate::Nanos;

/// Consistent hashing with bounded loads. See the module docs.
#[derive(Debug, Clone)]
pub struct Chbl {
    nodes: usize,
    /// (point, node), sorted.
    ring: Vec<(u64, NodeId)>,
    permille: u64,
    /// Requests not sent to their first choice because it was full.
    spills: u64,
    members: Members,
}

impl Chbl {
    /// `bound_permille` = `c` in thousandths (at least 1000).
    pub fn new(nodes: usize, bound_permille: u32, vnodes: u32) -> Result<Self, PolicyError> {
        if bound_permille < 1000 {
            return Err(PolicyError::Invalid {
                policy: "chbl",
                msg: format!("the load factor c must be >= 1.0 (got {bound_permille}/1000)"),
            });
        }
        let nodes = nodes.max(1);
        let vnodes = vnodes.max(1);
        let mut ring: Vec<(u64, NodeId)> = (0..nodes)
            .flat_map(|n| (0..vnodes).map(move |v| (mix64(((n as u64) << 32) | u64::from(v)), n)))
            .collect();
        ring.sort_unstable();
        Ok(Self {
            nodes,
            ring,
            permille: u64::from(bound_permille),
            spills: 0,
            members: Members::new(),
        })
    }

    /// The capacity for a total load of `total` (this request included) over the nodes that
    /// are up.
    pub fn capacity(&self, total: u64) -> u64 {
        let up = if self.members.all_up() {
            self.nodes
        } else {
            self.members.count_up(self.nodes).max(1)
        };
        (self.permille * total).div_ceil(1000 * up as u64)
    }

    /// Requests that went past their target's first node because it was full.
    pub fn spills(&self) -> u64 {
        self.spills
    }
}

impl Dispatch for Chbl {
    fn name(&self) -> &str {
        "chbl"
    }

    fn nodes(&self) -> usize {
        self.nodes
    }

    fn assign(&mut self, target: Target, loads: &[u32], _now: Nanos) -> NodeId {
        let load = |n: NodeId| u64::from(loads.get(n).copied().unwrap_or(0));
        let m = &self.members;
        // With every node down, walk them all anyway (the mechanism has nowhere to send it).
        let all = m.all_up() || m.count_up(self.nodes) == 0;
        let usable = |n: NodeId| all || m.is_up(n);
        let total: u64 = (0..self.nodes)
            .filter(|&n| usable(n))
            .map(load)
            .sum::<u64>()
            + 1;
        let cap = self.capacity(total);
        let h = mix64(target);
        let start = self.ring.partition_point(|&(p, _)| p < h);
        let len = self.ring.len();
        let first = self.ring[start % len].1;
        for i in 0..len {
            let n = self.ring[(start + i) % len].1;
            if usable(n) && load(n) < cap {
                if n != first {
                    self.spills += 1;
                }
                return n;
            }
        }
        // Unreachable (some node is below the capacity); stay total anyway.
        m.least(loads, self.nodes)
    }

    fn set_up(&mut self, node: NodeId, up: bool) {
        if node < self.nodes {
            self.members.set(node, up);
        }
    }
}

/// Registry entry.
pub const ENTRY: Entry = Entry {
    name: "chbl",
    about: "consistent hashing with bounded loads: ring walk to the first node below \
            ceil(c * mean) (c = bound_permille / 1000)",
    build: |n, cfg| Ok(Box::new(Chbl::new(n, cfg.bound_permille, cfg.vnodes)?)),
};

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn same_target_same_node_when_unloaded() {
        let mut c = Chbl::new(8, 1250, 100).unwrap();
        let loads = [0u32; 8];
        for t in 0..100u64 {
            let a = c.assign(t, &loads, 0);
            assert_eq!(c.assign(t, &loads, 0), a);
        }
        // Targets spread over the nodes.
        let mut used = [false; 8];
        for t in 0..1000u64 {
            used[c.assign(t, &loads, 0)] = true;
        }
        assert!(used.iter().all(|&u| u));
        assert_eq!(c.spills(), 0);
    }

    #[test]
    fn full_node_spills_to_the_next_on_the_ring() {
        let mut c = Chbl::new(4, 1250, 50).unwrap();
        let first = c.assign(42, &[0; 4], 0);
        let mut loads = [1u32; 4];
        // Capacity for total 5: ceil(1.25 * 5 / 4) = 2; the first choice at 2 is full.
        loads[first] = 2;
        let next = c.assign(42, &loads, 0);
        assert_ne!(next, first);
        assert_eq!(c.spills(), 1);
    }

    #[test]
    fn a_down_node_is_passed_over_and_keeps_its_place() {
        let mut c = Chbl::new(4, 1250, 50).unwrap();
        let loads = [0u32; 4];
        let homes: Vec<NodeId> = (0..200u64).map(|t| c.assign(t, &loads, 0)).collect();
        c.set_up(2, false);
        for t in 0..200u64 {
            let n = c.assign(t, &loads, 0);
            assert_ne!(n, 2);
            // Targets of the other nodes stay where they were (consistent hashing).
            if homes[t as usize] != 2 {
                assert_eq!(n, homes[t as usize]);
            }
        }
        c.set_up(2, true);
        let back: Vec<NodeId> = (0..200u64).map(|t| c.assign(t, &loads, 0)).collect();
        assert_eq!(back, homes);
    }

    #[test]
    fn rejects_a_factor_below_one() {
        assert!(Chbl::new(4, 999, 10).is_err());
    }

    proptest! {
        /// Whatever the sequence of arrivals and departures, an assignment never puts a node
        /// above ceil(c * mean load) (mean after the assignment); with arrivals only, no node
        /// is ever above it. (Departures can leave a node above the bound of a smaller total;
        /// the bound governs where new requests go, connections are never moved.)
        #[test]
        fn never_exceeds_the_bound(
            nodes in 1usize..12,
            permille in prop::sample::select(vec![1000u32, 1250, 1500, 2000]),
            ops in prop::collection::vec((0u64..50, any::<bool>(), 0usize..12), 1..400),
        ) {
            let mut c = Chbl::new(nodes, permille, 20).unwrap();
            let mut loads = vec![0u32; nodes];
            let mut departed = false;
            for (target, arrive, who) in ops {
                if arrive || loads.iter().all(|&l| l == 0) {
                    let n = c.assign(target, &loads, 0);
                    loads[n] += 1;
                    let total: u64 = loads.iter().map(|&l| u64::from(l)).sum();
                    let bound = (u64::from(permille) * total).div_ceil(1000 * nodes as u64);
                    prop_assert!(u64::from(loads[n]) <= bound, "loads {loads:?} bound {bound}");
                    if !departed {
                        prop_assert!(loads.iter().all(|&l| u64::from(l) <= bound),
                            "loads {loads:?} bound {bound}");
                    }
                } else {
                    let n = who % nodes;
                    if loads[n] > 0 {
                        loads[n] -= 1;
                        departed = true;
                    }
                }
            }
        }
    }
}
