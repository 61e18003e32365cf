//! The one list of ready-queue policies. Adding a policy is one file defining a
//! `pub const ENTRY: Entry` plus one line in [`REGISTRY`].

use serde::{Deserialize, Serialize};

use crate::{Nanos, Policy, MS};

/// A parameter that is either fixed or predicted by the policy every period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Tunable<T> {
    Fixed(T),
    Auto,
}

/// How POS predicts RW when it is [`Tunable::Auto`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RwRule {
    /// Seed 001 §3.2 as written: per worker the fewest run/wait changes of a service episode in
    /// the period; RW = the greatest of those.
    #[default]
    Paper,
    /// triage's rule: split the period's episode lengths into two classes and put RW between
    /// them (see `pos`).
    Split,
}

/// How POS orders the workers it does not put at the head (the rest of the ready queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PosTail {
    /// Seed 001 as written: the conventional queue, FIFO by the time each worker became ready,
    /// so workers streaming bodies take turns burst by burst (processor sharing).
    #[default]
    Fifo,
    /// triage's order: by when each worker's service episode began (it left its last wait
    /// longer than SLP; a worker that never did: when it was first seen), FIFO among equal
    /// times. Responses that are not text are then served first come, first served instead of
    /// taking turns, so putting text first delays whole pages less (`docs/policy.md`).
    Episode,
}

/// Everything a policy may be configured with. Fields a policy does not use are ignored by it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyConfig {
    /// POS long-wait threshold.
    pub slp: Tunable<Nanos>,
    /// POS run/wait change threshold.
    pub rw: Tunable<u32>,
    /// Rule used when `rw` is `Auto`.
    pub rw_rule: RwRule,
    /// POS: order of the workers that are not put at the head.
    #[serde(default)]
    pub pos_tail: PosTail,
    /// Prediction period (seed 001: 500 ms).
    pub period: Nanos,
    /// Longest time any ready worker may be overtaken; `None` turns the guard off (faithful
    /// replication of the paper).
    pub starvation_bound: Option<Nanos>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            slp: Tunable::Auto,
            rw: Tunable::Fixed(3),
            rw_rule: RwRule::Paper,
            pos_tail: PosTail::Fifo,
            period: 500 * MS,
            starvation_bound: Some(200 * MS),
        }
    }
}

/// A configuration a policy cannot be built from, or an unknown policy.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("unknown policy `{name}` (known: {known})")]
    Unknown { name: String, known: String },
    #[error("policy `{policy}`: {msg}")]
    Invalid { policy: &'static str, msg: String },
}

/// One registered policy.
pub struct Entry {
    pub name: &'static str,
    /// One line for `--help` and docs.
    pub about: &'static str,
    pub build: fn(&PolicyConfig) -> Result<Box<dyn Policy>, PolicyError>,
}

/// Every policy the mechanisms can be asked for.
pub const REGISTRY: &[Entry] = &[
    crate::fifo::ENTRY,
    crate::pos::ENTRY,
    crate::content::ENTRY,
    crate::timeshare::ENTRY,
    crate::delayed::ENTRY,
    crate::share::ENTRY,
];

/// Names of all registered policies.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}

/// Build the policy called `name`.
pub fn build(name: &str, cfg: &PolicyConfig) -> Result<Box<dyn Policy>, PolicyError> {
    match REGISTRY.iter().find(|e| e.name == name) {
        Some(e) => (e.build)(cfg),
        None => Err(PolicyError::Unknown {
            name: name.to_owned(),
            known: names().join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_buildable() {
        let mut n = names();
        n.sort();
        n.dedup();
        assert_eq!(n.len(), REGISTRY.len());
        for name in names() {
            let p = build(name, &PolicyConfig::default()).expect(name);
            assert_eq!(p.name(), name);
        }
    }

    #[test]
    fn unknown_policy_lists_known_ones() {
        let err = build("lottery", &PolicyConfig::default()).err().unwrap();
        assert!(err.to_string().contains("fifo"), "{err}");
    }
}
