//! The one list of ready-queue policies. Adding a policy is one file defining a
//! `pub const ENTRY: Entry` plus one line in [`REGISTRY`].
//!
//! The configuration types live in [`crate::config`]; they are re-exported here, where callers
//! that build policies by name have always found them.

pub use crate::config::{
    parse_rw, parse_slp, BuildFn, Entry, PolicyConfig, PolicyError, PosTail, RwRule, Tunable,
};
use crate::queue::Policy;
use crate::share::{Share, ShareSpec};

/// Every policy the mechanisms can be asked for.
pub const REGISTRY: &[Entry] = &[
    crate::fifo::ENTRY,
    crate::pos::ENTRY,
    crate::posbsd::ENTRY,
    crate::content::ENTRY,
    crate::timeshare::ENTRY,
    crate::delayed::ENTRY,
    crate::share::ENTRY,
];

/// Names of all registered policies.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}

/// Build the policy called `name` (a [`BuildFn`]).
pub fn build(name: &str, cfg: &PolicyConfig) -> Result<Box<dyn Policy>, PolicyError> {
    match REGISTRY.iter().find(|e| e.name == name) {
        Some(e) => (e.build)(cfg),
        None => Err(PolicyError::Unknown {
            name: name.to_owned(),
            known: names().join(", "),
        }),
    }
}

impl Share {
    /// Build the `share` tree of `spec` with its inner policies taken from [`REGISTRY`]
    /// ([`Share::from_spec`] with [`build`]).
    pub fn new(spec: &ShareSpec) -> Result<Self, PolicyError> {
        Self::from_spec(spec, build)
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
