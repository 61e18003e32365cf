//! The POS predictors (seed 001 §3.2), as pure functions of what a period observed.
//!
//! - SLP (paper): the smallest of the per-worker longest waits of the period.
//! - RW, paper rule: the greatest of the per-worker smallest service-episode lengths.
//! - RW, split rule (triage): all episode lengths of the recent periods, weighted (this period
//!   1, the one before 1/2, ...), split in two classes by 1-D two-means (Otsu on the sorted
//!   lengths); RW = the short class's longest episode, changed only when the current RW no
//!   longer separates the classes. See `docs/policy.md` for why it beats the paper's rule.

use std::collections::BTreeMap;

use crate::Nanos;

/// SLP for the next period: the smallest of the per-worker longest (completed) waits of the
/// period. `None` when no worker completed a wait (keep the previous SLP).
pub fn slp_paper(longest_waits: impl IntoIterator<Item = Nanos>) -> Option<Nanos> {
    longest_waits.into_iter().min()
}

/// RW for the next period, seed 001's rule: the greatest of the per-worker smallest episode
/// lengths of the period. `None` when no episode completed (keep the previous RW).
pub fn rw_paper(min_episode_per_worker: impl IntoIterator<Item = u32>) -> Option<u32> {
    min_episode_per_worker.into_iter().max().map(|rw| rw.max(1))
}

/// What one instance of a learning policy observed during a period: the inputs of its
/// predictors. A mechanism that runs one instance per lane (the server's per-core gate) merges
/// every lane's ([`Observations::merge`]) so that SLP and RW are predicted once, from all of
/// them, and published to every lane: the same predictions as one instance seeing everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observations {
    /// The smallest of the per-worker longest waits (SLP's input, [`slp_paper`]).
    pub min_longest_wait: Option<Nanos>,
    /// The greatest of the per-worker shortest episodes (RW's input, [`rw_paper`]).
    pub max_min_episode: Option<u32>,
    /// Episodes completed, as (length, count) (the split rule's input, [`SplitRw`]).
    pub episodes: BTreeMap<u32, u64>,
}

impl Observations {
    /// Fold `other` (another lane's period) into this one.
    pub fn merge(&mut self, other: Observations) {
        self.min_longest_wait = match (self.min_longest_wait, other.min_longest_wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max_min_episode = self.max_min_episode.max(other.max_min_episode);
        for (len, n) in other.episodes {
            *self.episodes.entry(len).or_default() += n;
        }
    }
}

/// A two-class split of weighted lengths.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    /// Longest length in the short class.
    pub short_max: u32,
    /// Shortest length in the long class.
    pub long_min: u32,
    /// Weighted mean of the short class.
    pub short_mean: f64,
    /// Weighted mean of the long class.
    pub long_mean: f64,
}

impl Split {
    /// Whether the two classes are far enough apart to be two kinds of work rather than one
    /// spread-out kind: the long class's mean is at least [`MIN_MEAN_RATIO`] times the short
    /// class's.
    pub fn separated(&self) -> bool {
        self.long_mean >= MIN_MEAN_RATIO * self.short_mean
    }
}

/// See [`Split::separated`].
pub const MIN_MEAN_RATIO: f64 = 2.0;

/// The two-means (Otsu) split of `hist`: (length, weight) pairs sorted by length with distinct
/// lengths. Maximises the between-class variance `w0 * w1 * (m0 - m1)^2`; ties go to the lower
/// split. `None` with fewer than two distinct lengths of positive weight.
pub fn two_means(hist: &[(u32, f64)]) -> Option<Split> {
    let pts: Vec<(u32, f64)> = hist.iter().copied().filter(|&(_, w)| w > 0.0).collect();
    if pts.len() < 2 {
        return None;
    }
    let total_w: f64 = pts.iter().map(|&(_, w)| w).sum();
    let total_s: f64 = pts.iter().map(|&(l, w)| f64::from(l) * w).sum();
    let (mut w0, mut s0) = (0.0, 0.0);
    let mut best: Option<(f64, Split)> = None;
    for k in 0..pts.len() - 1 {
        w0 += pts[k].1;
        s0 += f64::from(pts[k].0) * pts[k].1;
        let w1 = total_w - w0;
        if w1 <= 0.0 {
            break;
        }
        let (m0, m1) = (s0 / w0, (total_s - s0) / w1);
        let between = w0 * w1 * (m1 - m0) * (m1 - m0);
        if best.is_none_or(|(b, _)| between > b) {
            best = Some((
                between,
                Split {
                    short_max: pts[k].0,
                    long_min: pts[k + 1].0,
                    short_mean: m0,
                    long_mean: m1,
                },
            ));
        }
    }
    best.map(|(_, s)| s)
}

/// Weight of one episode in [`SplitRw`]'s histogram (halved every period).
const EPISODE_WEIGHT: u64 = 1 << 10;
/// Longer episodes are counted as this long (bounds the histogram).
pub const MAX_EPISODE: u32 = 10_000;

/// The split rule's state: a decaying histogram of episode lengths. Memory is bounded by the
/// number of distinct lengths (at most [`MAX_EPISODE`]), whatever the number of workers.
#[derive(Debug, Clone, Default)]
pub struct SplitRw {
    hist: BTreeMap<u32, u64>,
}

impl SplitRw {
    /// No episode seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// One completed service episode of `len` run/wait changes.
    pub fn add(&mut self, len: u32) {
        self.add_many(len, 1);
    }

    /// `n` completed service episodes of `len` run/wait changes.
    pub fn add_many(&mut self, len: u32, n: u64) {
        *self.hist.entry(len.min(MAX_EPISODE)).or_default() += EPISODE_WEIGHT.saturating_mul(n);
    }

    /// The current two-class split, if there are two distinct lengths.
    pub fn split(&self) -> Option<Split> {
        let h: Vec<(u32, f64)> = self.hist.iter().map(|(&l, &w)| (l, w as f64)).collect();
        two_means(&h)
    }

    /// RW for the next period given the current `rw`: `None` (keep it) without a separated
    /// split or while `rw` still separates the classes (`short_max <= rw < long_min`, the
    /// hysteresis); otherwise the short class's longest episode.
    pub fn predict(&self, rw: u32) -> Option<u32> {
        let s = self.split()?;
        if !s.separated() || (s.short_max <= rw && rw < s.long_min) {
            return None;
        }
        Some(s.short_max.max(1))
    }

    /// End of a period: halve every weight, dropping lengths whose weight reaches zero.
    pub fn decay(&mut self) {
        self.hist.retain(|_, w| {
            *w >>= 1;
            *w > 0
        });
    }

    /// The `q`-quantile (by weight, `q` in (0, 1]) of the lengths up to `max`: the shortest
    /// length at or below which at least that share of their weight lies (`q` = 1: the longest
    /// of them). `None` if no weight lies up to `max`.
    pub fn quantile_upto(&self, max: u32, q: f64) -> Option<u32> {
        let total: u64 = self.hist.range(..=max).map(|(_, &w)| w).sum();
        if total == 0 {
            return None;
        }
        let need = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (&l, &w) in self.hist.range(..=max) {
            acc += w;
            if acc >= need {
                return Some(l);
            }
        }
        self.hist.range(..=max).next_back().map(|(&l, _)| l)
    }

    /// Distinct lengths held.
    pub fn distinct(&self) -> usize {
        self.hist.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_rules() {
        assert_eq!(slp_paper([5, 3, 9]), Some(3));
        assert_eq!(slp_paper([]), None);
        assert_eq!(rw_paper([2, 14, 3]), Some(14));
        assert_eq!(rw_paper([0]), Some(1));
        assert_eq!(rw_paper([]), None);
    }

    #[test]
    fn two_means_finds_the_gap() {
        let h = [(1, 5.0), (3, 5.0), (13, 2.0), (15, 2.0)];
        let s = two_means(&h).unwrap();
        assert_eq!((s.short_max, s.long_min), (3, 13));
        assert!(s.separated());
        assert_eq!(two_means(&[(4, 1.0)]), None);
    }

    #[test]
    fn split_rw_hysteresis_and_decay() {
        let mut p = SplitRw::new();
        for l in [2, 2, 3, 14, 15, 13] {
            p.add(l);
        }
        assert_eq!(p.predict(9), None, "9 still separates 3 | 13");
        assert_eq!(p.predict(14), Some(3));
        assert_eq!(p.predict(1), Some(3));
        for _ in 0..12 {
            p.decay();
        }
        assert_eq!(p.distinct(), 0);
        assert_eq!(p.predict(7), None);
    }

    #[test]
    fn observations_merge_as_one_instance_would_see_them() {
        let mut a = Observations {
            min_longest_wait: Some(50),
            max_min_episode: Some(3),
            episodes: [(2, 1), (14, 1)].into_iter().collect(),
        };
        a.merge(Observations {
            min_longest_wait: Some(20),
            max_min_episode: None,
            episodes: [(2, 2)].into_iter().collect(),
        });
        assert_eq!(a.min_longest_wait, Some(20));
        assert_eq!(a.max_min_episode, Some(3));
        assert_eq!(a.episodes.get(&2), Some(&3));
        a.merge(Observations::default());
        assert_eq!(a.min_longest_wait, Some(20));
        let mut p = SplitRw::new();
        p.add_many(2, 3);
        p.add(2);
        let mut q = SplitRw::new();
        for _ in 0..4 {
            q.add(2);
        }
        assert_eq!(p.hist, q.hist);
    }

    #[test]
    fn one_spread_class_is_not_split() {
        let mut p = SplitRw::new();
        for l in [9, 10, 11, 12, 13] {
            p.add(l);
        }
        assert!(!p.split().unwrap().separated());
        assert_eq!(p.predict(3), None);
    }
}
