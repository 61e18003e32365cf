//! What a policy is configured with, and how it is registered: the leaf every policy file
//! and the registry module build on.
//!
//! - [`PolicyConfig`]: every parameter a policy may take ([`Tunable`] SLP and RW, [`RwRule`],
//!   [`PosTail`], the prediction period, the starvation bound), read from config files with
//!   the `units` rules and from flags with [`parse_slp`] / [`parse_rw`] / `FromStr`.
//! - [`PolicyError`]: a policy that cannot be built.
//! - [`Entry`]: one registered policy (name, one line of help, builder); [`BuildFn`] builds a
//!   policy by name, as the registry does, for policies that hold other policies (`share`).

use serde::{Deserialize, Serialize};

use crate::queue::Policy;
use crate::{Nanos, MS};

/// A parameter that is either fixed or predicted by the policy every period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Tunable<T> {
    /// This value, always.
    Fixed(T),
    /// Predicted by the policy every period.
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
///
/// It deserializes from a config file with the `units` rules (`slp = "auto"` or `"20s"`,
/// `rw = "auto"` or `3`, `period = "500ms"`, `starvation_bound = "off"` or `"200ms"`); every
/// field is optional and defaults as [`PolicyConfig::default`]. It serializes as plain numbers
/// (nanoseconds), as reports record it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PolicyConfig {
    /// POS long-wait threshold.
    #[serde(deserialize_with = "de::slp")]
    pub slp: Tunable<Nanos>,
    /// POS run/wait change threshold.
    #[serde(deserialize_with = "de::rw")]
    pub rw: Tunable<u32>,
    /// Rule used when `rw` is `Auto`.
    pub rw_rule: RwRule,
    /// POS: order of the workers that are not put at the head.
    pub pos_tail: PosTail,
    /// Prediction period (seed 001: 500 ms).
    #[serde(deserialize_with = "de::nanos")]
    pub period: Nanos,
    /// Longest time any ready worker may be overtaken; `None` turns the guard off (faithful
    /// replication of the paper).
    #[serde(deserialize_with = "de::opt_nanos")]
    pub starvation_bound: Option<Nanos>,
    /// POS with `slp = "auto"`: the smallest SLP a prediction may set; 0 = seed 001's rule as
    /// written. The rule takes the smallest of the workers' longest waits of a period, and a
    /// worker that only paused between the chunks of one response (microseconds, where a
    /// socket write returns at once) pulls SLP down to microseconds: then every chunk leaves a
    /// "long" wait, restarts the run/wait counter and keeps every image marked, and POS orders
    /// like FIFO (`docs/policy.md`, "SLP floor").
    #[serde(deserialize_with = "de::nanos")]
    pub slp_floor: Nanos,
}

/// Parse `auto` or a duration (SLP), e.g. from a command-line flag.
pub fn parse_slp(s: &str) -> Result<Tunable<Nanos>, String> {
    if s.trim() == "auto" {
        return Ok(Tunable::Auto);
    }
    units::parse_duration(s)
        .map(|d| Tunable::Fixed(d.as_nanos() as Nanos))
        .map_err(|e| e.to_string())
}

/// Parse `auto` or a count (RW).
pub fn parse_rw(s: &str) -> Result<Tunable<u32>, String> {
    if s.trim() == "auto" {
        return Ok(Tunable::Auto);
    }
    s.trim()
        .parse()
        .map(Tunable::Fixed)
        .map_err(|_| format!("`{s}` is neither `auto` nor a count"))
}

impl std::str::FromStr for RwRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "paper" => Ok(Self::Paper),
            "split" => Ok(Self::Split),
            _ => Err(format!("unknown rw rule `{s}` (known: paper, split)")),
        }
    }
}

impl std::str::FromStr for PosTail {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "fifo" => Ok(Self::Fifo),
            "episode" => Ok(Self::Episode),
            _ => Err(format!(
                "unknown POS tail order `{s}` (known: fifo, episode)"
            )),
        }
    }
}

/// Deserializers of [`PolicyConfig`]'s fields from config files.
mod de {
    use serde::de::{Deserialize, Deserializer, Error};

    use super::Tunable;
    use crate::Nanos;

    /// A value as written: a string or an integer.
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Written {
        Str(String),
        Int(i64),
    }

    fn duration_nanos<E: Error>(s: &str) -> Result<Nanos, E> {
        units::parse_duration(s)
            .map(|d| d.as_nanos() as Nanos)
            .map_err(E::custom)
    }

    fn needs_unit<E: Error>(i: i64) -> E {
        E::custom(format!(
            "a duration needs a unit: write \"{i}ms\" or \"{i}s\""
        ))
    }

    /// SLP: `"auto"` or a duration.
    pub fn slp<'de, D: Deserializer<'de>>(d: D) -> Result<Tunable<Nanos>, D::Error> {
        match Written::deserialize(d)? {
            Written::Str(s) => super::parse_slp(&s).map_err(D::Error::custom),
            Written::Int(i) => Err(needs_unit(i)),
        }
    }

    /// RW: `"auto"` or a count (string or integer).
    pub fn rw<'de, D: Deserializer<'de>>(d: D) -> Result<Tunable<u32>, D::Error> {
        match Written::deserialize(d)? {
            Written::Str(s) => super::parse_rw(&s).map_err(D::Error::custom),
            Written::Int(i) => u32::try_from(i)
                .map(Tunable::Fixed)
                .map_err(|_| D::Error::custom(format!("rw {i} is not a count"))),
        }
    }

    /// A duration (a string with a unit).
    pub fn nanos<'de, D: Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
        match Written::deserialize(d)? {
            Written::Str(s) => duration_nanos(&s),
            Written::Int(i) => Err(needs_unit(i)),
        }
    }

    /// `"off"` or a duration.
    pub fn opt_nanos<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Nanos>, D::Error> {
        match Written::deserialize(d)? {
            Written::Str(s) if s.trim() == "off" => Ok(None),
            Written::Str(s) => duration_nanos(&s).map(Some),
            Written::Int(i) => Err(needs_unit(i)),
        }
    }
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
            slp_floor: 0,
        }
    }
}

/// A configuration a policy cannot be built from, or an unknown policy.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// No registered policy has this name.
    #[error("unknown policy `{name}` (known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names, comma separated.
        known: String,
    },
    /// The policy exists but refuses this configuration.
    #[error("policy `{policy}`: {msg}")]
    Invalid {
        /// The policy's registry name.
        policy: &'static str,
        /// What is wrong, naming the parameter and value.
        msg: String,
    },
}

/// Builds the policy called `name` from a configuration: the registry's `build`, or any
/// function with its contract, handed to policies that hold other policies by name (`share`).
pub type BuildFn = fn(&str, &PolicyConfig) -> Result<Box<dyn Policy>, PolicyError>;

/// One registered policy: each policy file defines one as `pub const ENTRY`.
pub struct Entry {
    /// Registry name (`fifo`, `pos`, ...), the one [`Policy::name`] returns.
    pub name: &'static str,
    /// One line for `--help` and docs.
    pub about: &'static str,
    /// Builds the policy from a configuration (fields it does not use are ignored).
    pub build: fn(&PolicyConfig) -> Result<Box<dyn Policy>, PolicyError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_reads_human_units_and_defaults_the_rest() {
        #[derive(Deserialize)]
        struct Doc {
            policy: PolicyConfig,
        }
        let d: Doc = toml::from_str(
            "[policy]\nslp = \"20s\"\nrw = \"auto\"\nperiod = \"250ms\"\nstarvation_bound = \"off\"\npos_tail = \"episode\"\n",
        )
        .unwrap();
        assert_eq!(
            d.policy,
            PolicyConfig {
                slp: Tunable::Fixed(20 * crate::SEC),
                rw: Tunable::Auto,
                period: 250 * MS,
                starvation_bound: None,
                pos_tail: PosTail::Episode,
                ..PolicyConfig::default()
            }
        );
        let e = toml::from_str::<Doc>("[policy]\nperiod = 500\n")
            .err()
            .unwrap();
        assert!(e.to_string().contains("\"500ms\""), "{e}");
        let d: Doc = toml::from_str("[policy]\nrw = 6\n").unwrap();
        assert_eq!(d.policy.rw, Tunable::Fixed(6));
        assert!(toml::from_str::<Doc>("[policy]\nslp = \"5\"\n").is_err());
    }

    #[test]
    fn flags_parse_auto_or_a_value() {
        assert_eq!(parse_slp("auto"), Ok(Tunable::Auto));
        assert_eq!(parse_slp("20s"), Ok(Tunable::Fixed(20 * crate::SEC)));
        assert!(parse_slp("20").is_err());
        assert_eq!(parse_rw(" 4 "), Ok(Tunable::Fixed(4)));
        assert_eq!(parse_rw("auto"), Ok(Tunable::Auto));
        assert!(parse_rw("x").is_err());
        assert_eq!("split".parse(), Ok(RwRule::Split));
        assert_eq!("episode".parse(), Ok(PosTail::Episode));
        assert!("lifo".parse::<PosTail>().is_err());
    }
}
