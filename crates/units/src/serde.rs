//! Deserializers (and serializers) for config fields, for `#[serde(with = "...")]`.
//!
//! - [`duration`]: a string such as `"30s"`; a bare integer is refused with a message that
//!   says how to write it.
//! - [`opt_duration`]: `"off"` or a duration.
//! - [`size`]: an integer number of bytes, or a string such as `"16KiB"`.
//! - [`opt_size`]: a size in an `Option` field (absent means `None`).
//!
//! Each module serializes the value back in the form it reads.

use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer};
use serde::Serializer;

/// A TOML/JSON value as it was written: a string or a number.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Written {
    Str(String),
    Int(i64),
    Float(f64),
}

fn duration_from<E: de::Error>(w: Written) -> Result<Duration, E> {
    match w {
        Written::Str(s) => crate::parse_duration(&s).map_err(E::custom),
        Written::Int(i) => Err(E::custom(format!(
            "a duration needs a unit: write \"{i}ms\" or \"{i}s\""
        ))),
        Written::Float(f) => Err(E::custom(format!(
            "a duration needs a unit: write \"{f}ms\" or \"{f}s\""
        ))),
    }
}

fn size_from<E: de::Error>(w: Written) -> Result<u64, E> {
    match w {
        Written::Str(s) => crate::parse_size(&s).map_err(E::custom),
        Written::Int(i) if i >= 0 => Ok(i as u64),
        Written::Int(_) => Err(E::custom("a size cannot be negative")),
        Written::Float(_) => Err(E::custom(
            "a size is a whole number of bytes, or a string such as \"16KiB\"",
        )),
    }
}

/// `Duration` fields.
pub mod duration {
    use super::*;

    /// Read a duration string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        duration_from(Written::deserialize(d)?)
    }

    /// Write it back as [`crate::format_duration`] does.
    pub fn serialize<S: Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::format_duration(*v))
    }
}

/// `Option<Duration>` fields written `"off"` or as a duration.
pub mod opt_duration {
    use super::*;

    /// Read `"off"` or a duration string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        match Written::deserialize(d)? {
            Written::Str(s) if s.trim() == "off" => Ok(None),
            w => duration_from(w).map(Some),
        }
    }

    /// Write `"off"` or the duration.
    pub fn serialize<S: Serializer>(v: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_str("off"),
            Some(d) => s.serialize_str(&crate::format_duration(*d)),
        }
    }
}

/// `u64` byte counts.
pub mod size {
    use super::*;

    /// Read an integer (bytes) or a size string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        size_from(Written::deserialize(d)?)
    }

    /// Write it back as [`crate::format_size`] does.
    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::format_size(*v))
    }
}

/// `Option<u64>` byte counts (use with `#[serde(default)]`).
pub mod opt_size {
    use super::*;

    /// Read an integer (bytes) or a size string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        size_from(Written::deserialize(d)?).map(Some)
    }

    /// Write the size, or nothing.
    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(b) => s.serialize_str(&crate::format_size(*b)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[derive(Debug, serde::Deserialize, serde::Serialize, PartialEq)]
    struct Cfg {
        #[serde(with = "crate::serde::duration")]
        timeout: Duration,
        #[serde(with = "crate::serde::opt_duration")]
        guard: Option<Duration>,
        #[serde(with = "crate::serde::size")]
        chunk: u64,
        #[serde(default, with = "crate::serde::opt_size")]
        cap: Option<u64>,
    }

    #[test]
    fn toml_fields_read_and_write_back() {
        let c: Cfg =
            toml::from_str("timeout = \"30s\"\nguard = \"off\"\nchunk = \"16KiB\"\ncap = 100\n")
                .unwrap();
        assert_eq!(
            c,
            Cfg {
                timeout: Duration::from_secs(30),
                guard: None,
                chunk: 16384,
                cap: Some(100)
            }
        );
        let back: Cfg = toml::from_str(&toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn a_bare_integer_duration_says_how_to_write_it() {
        let e = toml::from_str::<Cfg>("timeout = 30\nguard = \"off\"\nchunk = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"30ms\" or \"30s\""), "{e}");
        let e = toml::from_str::<Cfg>("timeout = \"1s\"\nguard = \"off\"\nchunk = \"16k\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ambiguous"), "{e}");
    }
}
