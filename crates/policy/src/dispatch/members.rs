//! Which nodes a distribution policy may choose. A real front end marks a node down when it
//! fails its health check or leaves the configuration, and up when it is healthy again
//! ([`super::Dispatch::set_up`]); the simulator never does, and with every node up each helper
//! here answers exactly as the plain functions of the policies did (same node, same ties).

use super::{least_loaded, load, NodeId};

/// The nodes that are up, out of `0..nodes`.
#[derive(Debug, Clone, Default)]
pub struct Members {
    down: Vec<bool>,
    downs: usize,
}

impl Members {
    /// Every node up.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no node is down (the fast path: policies then behave as without members).
    pub fn all_up(&self) -> bool {
        self.downs == 0
    }

    /// Whether `node` is up.
    pub fn is_up(&self, node: NodeId) -> bool {
        !self.down.get(node).copied().unwrap_or(false)
    }

    /// Mark `node` up or down; `true` if that changed its state.
    pub fn set(&mut self, node: NodeId, up: bool) -> bool {
        if self.down.len() <= node {
            if up {
                return false;
            }
            self.down.resize(node + 1, false);
        }
        if self.down[node] != up {
            // Already in that state (`down == !up`).
            return false;
        }
        self.down[node] = !up;
        if up {
            self.downs -= 1;
        } else {
            self.downs += 1;
        }
        true
    }

    /// Nodes up among `0..nodes`.
    pub fn count_up(&self, nodes: usize) -> usize {
        (0..nodes).filter(|&n| self.is_up(n)).count()
    }

    /// The least loaded node that is up (ties: lowest index). With every node up, a `loads`
    /// shorter than `nodes` counts the missing loads as 0 (the first missing node). With every
    /// node down: the least loaded of all (the mechanism has nowhere to send it anyway).
    pub fn least(&self, loads: &[u32], nodes: usize) -> NodeId {
        if self.all_up() || self.count_up(nodes) == 0 {
            return if loads.len() >= nodes {
                least_loaded(&loads[..nodes]).unwrap_or(0)
            } else {
                loads.len()
            };
        }
        (0..nodes)
            .filter(|&n| self.is_up(n))
            .min_by_key(|&n| (load(loads, n), n))
            .unwrap_or(0)
    }

    /// Whether some node that is up has a load below `t`.
    pub fn some_below(&self, loads: &[u32], nodes: usize, t: u32) -> bool {
        (0..nodes).any(|n| self.is_up(n) && load(loads, n) < t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_up_matches_least_loaded_and_missing_loads() {
        let m = Members::new();
        assert_eq!(m.least(&[3, 1, 1], 3), 1);
        assert_eq!(m.least(&[3, 1], 3), 2);
        assert!(m.some_below(&[30, 20], 2, 25));
    }

    #[test]
    fn down_nodes_are_skipped_and_counted() {
        let mut m = Members::new();
        assert!(m.set(1, false));
        assert!(!m.set(1, false));
        assert!(!m.all_up());
        assert_eq!(m.least(&[3, 1, 2], 3), 2);
        assert!(!m.some_below(&[30, 1, 30], 3, 25));
        assert_eq!(m.count_up(3), 2);
        assert!(m.set(1, true));
        assert!(m.all_up());
        assert_eq!(m.least(&[3, 1, 2], 3), 1);
        // Marking an unknown node up changes nothing.
        assert!(!m.set(9, true));
    }

    #[test]
    fn all_down_still_answers() {
        let mut m = Members::new();
        m.set(0, false);
        m.set(1, false);
        assert_eq!(m.least(&[5, 2], 2), 1);
    }
}
