//! Seeded synthetic web traces (SURGE-like; Barford & Crovella, SIGMETRICS 1998):
//! - file sizes: lognormal body (mu 9.357, sigma 1.318 on ln bytes: median 11.6 KB) with
//!   probability 0.93, Pareto tail (k = 133 KB, alpha = 1.1) otherwise, truncated at
//!   `max_size`;
//! - popularity: Zipf with exponent `zipf` (SURGE: 1.0; web traces 0.6-0.9) over the files,
//!   independent of size (file i has rank i + 1);
//! - the number of files is chosen so that their total size (the *working set*) reaches
//!   `working_set` bytes.

use rand::Rng;
use rand_distr::{Distribution, LogNormal, Pareto, Zipf};
use serde::Serialize;

use crate::SimError;

/// Parameters of a synthetic trace.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TraceConfig {
    /// Total bytes of distinct files.
    pub working_set: u64,
    /// Requests.
    pub requests: usize,
    /// Zipf exponent of file popularity.
    pub zipf: f64,
    /// Lognormal body: mean of ln(size).
    pub body_mu: f64,
    /// Lognormal body: standard deviation of ln(size).
    pub body_sigma: f64,
    /// Probability that a file's size comes from the Pareto tail.
    pub tail_prob: f64,
    /// Pareto tail: scale (smallest size), bytes.
    pub tail_k: f64,
    /// Pareto tail: shape.
    pub tail_alpha: f64,
    /// Largest file, bytes (the tail is truncated there).
    pub max_size: u64,
    /// Seed.
    pub seed: u64,
}

impl Default for TraceConfig {
    fn default() -> Self {
        Self {
            working_set: 512 << 20,
            requests: 200_000,
            zipf: 0.8,
            body_mu: 9.357,
            body_sigma: 1.318,
            tail_prob: 0.07,
            tail_k: 133_000.0,
            tail_alpha: 1.1,
            max_size: 4 << 20,
            seed: 1,
        }
    }
}

/// A trace: file sizes and the requested file of every request.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Size of each file, bytes (file `i` has popularity rank `i + 1`).
    pub sizes: Vec<u64>,
    /// The file of every request.
    pub requests: Vec<u32>,
}

impl Trace {
    /// Generate a trace.
    pub fn generate(cfg: &TraceConfig) -> Result<Self, SimError> {
        use crate::param;
        if cfg.working_set == 0 || cfg.requests == 0 {
            return Err(param("trace", "working set and requests must be > 0"));
        }
        let body = LogNormal::new(cfg.body_mu, cfg.body_sigma)
            .map_err(|e| param("trace body", e.to_string()))?;
        let tail = Pareto::new(cfg.tail_k, cfg.tail_alpha)
            .map_err(|e| param("trace tail", e.to_string()))?;
        let mut rng = crate::rng(cfg.seed, 0x7ace_0001);
        let mut sizes = Vec::new();
        let mut total = 0u64;
        while total < cfg.working_set {
            let s = if rng.gen_bool(cfg.tail_prob.clamp(0.0, 1.0)) {
                tail.sample(&mut rng)
            } else {
                body.sample(&mut rng)
            };
            let s = (s.round() as u64).clamp(1, cfg.max_size.max(1));
            sizes.push(s);
            total += s;
            if sizes.len() > 50_000_000 {
                return Err(param("trace", "working set needs more than 50 M files"));
            }
        }
        let zipf =
            Zipf::new(sizes.len() as u64, cfg.zipf).map_err(|e| param("zipf", format!("{e:?}")))?;
        let mut rng = crate::rng(cfg.seed, 0x7ace_0002);
        let requests = (0..cfg.requests)
            .map(|_| (zipf.sample(&mut rng) as u64).clamp(1, sizes.len() as u64) as u32 - 1)
            .collect();
        Ok(Self { sizes, requests })
    }

    /// Total size of all files.
    pub fn working_set(&self) -> u64 {
        self.sizes.iter().sum()
    }

    /// Mean size of a requested file (what the back ends actually send).
    pub fn mean_request_size(&self) -> f64 {
        let n = self.requests.len().max(1) as f64;
        self.requests
            .iter()
            .map(|&f| self.sizes[f as usize] as f64)
            .sum::<f64>()
            / n
    }

    /// Bytes of the distinct files the trace requests at least once.
    pub fn touched(&self) -> u64 {
        let mut seen = vec![false; self.sizes.len()];
        let mut t = 0;
        for &f in &self.requests {
            if !std::mem::replace(&mut seen[f as usize], true) {
                t += self.sizes[f as usize];
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reaches_the_working_set_and_is_seeded() {
        let cfg = TraceConfig {
            working_set: 50 << 20,
            requests: 10_000,
            ..TraceConfig::default()
        };
        let a = Trace::generate(&cfg).unwrap();
        assert!(a.working_set() >= 50 << 20);
        assert!(a.working_set() < (50 << 20) + (4 << 20) + 1);
        let b = Trace::generate(&cfg).unwrap();
        assert_eq!(a.requests, b.requests);
        assert_eq!(a.sizes, b.sizes);
        let c = Trace::generate(&TraceConfig { seed: 2, ..cfg }).unwrap();
        assert_ne!(a.requests, c.requests);
        // Zipf: the most popular file is requested far more than the median one.
        let hot = a.requests.iter().filter(|&&f| f == 0).count();
        assert!(hot > 100, "{hot}");
        // Sizes: median near the lognormal body's 11.6 KB.
        let mut s = a.sizes.clone();
        s.sort_unstable();
        let med = s[s.len() / 2];
        assert!((8_000..16_000).contains(&med), "{med}");
    }
}
