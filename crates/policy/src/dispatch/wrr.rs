//! `wrr`: weighted round robin, the load-balancing baseline of the LARD paper (seed 004): the
//! node is chosen by weight alone, whatever the target, so every node sees every target.
//!
//! Smooth weighted round robin (the nginx algorithm): each pick adds every node's weight to its
//! credit, takes the node with the most credit (ties: lowest index) and charges it the total
//! weight. Over any window of `sum(weights)` picks node `i` is chosen exactly `weights[i]` times,
//! interleaved rather than in runs. Equal weights give plain rotation 0, 1, ..., n-1, 0, ...
//! A node that is down takes no credit and no turn; the others share its turns by weight.

use super::members::Members;
use super::{Dispatch, DispatchConfig, Entry, NodeId, Target};
use crate::config::PolicyError;
use crate::Nanos;

/// Weighted round robin. See the module docs.
#[derive(Debug, Clone)]
pub struct Wrr {
    weights: Vec<i64>,
    credit: Vec<i64>,
    total: i64,
    members: Members,
}

impl Wrr {
    /// `weights` (one per node, at least one positive).
    pub fn new(weights: &[u32]) -> Result<Self, PolicyError> {
        if weights.is_empty() || weights.iter().all(|&w| w == 0) {
            return Err(PolicyError::Invalid {
                policy: "wrr",
                msg: "needs at least one node with a positive weight".into(),
            });
        }
        let weights: Vec<i64> = weights.iter().map(|&w| i64::from(w)).collect();
        Ok(Self {
            total: weights.iter().sum(),
            credit: vec![0; weights.len()],
            weights,
            members: Members::new(),
        })
    }

    fn from_config(nodes: usize, cfg: &DispatchConfig) -> Result<Self, PolicyError> {
        if cfg.weights.is_empty() {
            Self::new(&vec![1; nodes])
        } else if cfg.weights.len() != nodes {
            Err(PolicyError::Invalid {
                policy: "wrr",
                msg: format!("{} weights for {nodes} nodes", cfg.weights.len()),
            })
        } else {
            Self::new(&cfg.weights)
        }
    }
}

impl Dispatch for Wrr {
    fn name(&self) -> &str {
        "wrr"
    }

    fn nodes(&self) -> usize {
        self.weights.len()
    }

    fn assign(&mut self, _target: Target, _loads: &[u32], _now: Nanos) -> NodeId {
        let n = self.weights.len();
        let m = &self.members;
        let live = |i: usize| m.is_up(i) && self.weights[i] > 0;
        if m.all_up() || !(0..n).any(live) {
            let mut best = 0;
            for i in 0..n {
                self.credit[i] += self.weights[i];
                if self.credit[i] > self.credit[best] {
                    best = i;
                }
            }
            self.credit[best] -= self.total;
            return best;
        }
        let mut best = None::<usize>;
        let mut total = 0;
        for i in (0..n).filter(|&i| m.is_up(i)) {
            self.credit[i] += self.weights[i];
            total += self.weights[i];
            if best.is_none_or(|b| self.credit[i] > self.credit[b]) {
                best = Some(i);
            }
        }
        let best = best.unwrap_or(0);
        self.credit[best] -= total;
        best
    }

    fn set_up(&mut self, node: NodeId, up: bool) {
        if node < self.weights.len() && self.members.set(node, up) {
            // A node rejoins (or leaves) with no credit: smooth WRR stays exact over the
            // nodes that are up.
            self.credit[node] = 0;
        }
    }
}

/// Registry entry.
pub const ENTRY: Entry = Entry {
    name: "wrr",
    about: "weighted round robin (smooth, nginx-style): load only, ignores the target",
    build: |n, cfg| Ok(Box::new(Wrr::from_config(n, cfg)?)),
};

#[cfg(test)]
mod tests {
    use super::*;

    fn picks(w: &mut Wrr, k: usize) -> Vec<NodeId> {
        (0..k).map(|i| w.assign(i as u64, &[], 0)).collect()
    }

    #[test]
    fn equal_weights_rotate() {
        let mut w = Wrr::new(&[1, 1, 1]).unwrap();
        assert_eq!(picks(&mut w, 7), vec![0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn weights_are_smooth_and_exact_per_round() {
        // nginx's documented sequence for weights 5, 1, 1: a a b a c a a.
        let mut w = Wrr::new(&[5, 1, 1]).unwrap();
        assert_eq!(picks(&mut w, 7), vec![0, 0, 1, 0, 2, 0, 0]);
        let mut w = Wrr::new(&[3, 0, 2]).unwrap();
        let p = picks(&mut w, 500);
        for chunk in p.chunks(5) {
            let count = |n| chunk.iter().filter(|&&x| x == n).count();
            assert_eq!((count(0), count(1), count(2)), (3, 0, 2));
        }
    }

    #[test]
    fn a_down_node_gets_no_turn_and_rejoins() {
        let mut w = Wrr::new(&[1, 1, 1]).unwrap();
        w.set_up(1, false);
        assert_eq!(picks(&mut w, 4), vec![0, 2, 0, 2]);
        w.set_up(1, true);
        let p = picks(&mut w, 6);
        assert_eq!(p.iter().filter(|&&n| n == 1).count(), 2, "{p:?}");
        // Every node down: it still answers (the mechanism has nowhere to send it).
        for n in 0..3 {
            w.set_up(n, false);
        }
        assert!(picks(&mut w, 3).iter().all(|&n| n < 3));
    }

    #[test]
    fn rejects_bad_weights() {
        assert!(Wrr::new(&[0, 0]).is_err());
        let cfg = DispatchConfig {
            weights: vec![1, 2],
            ..DispatchConfig::default()
        };
        assert!(Wrr::from_config(3, &cfg).is_err());
        assert!(Wrr::from_config(2, &cfg).is_ok());
    }
}
