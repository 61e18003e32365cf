//! The field names of a struct whose `Deserialize` is derived, read from the derive itself: it
//! hands them to `Deserializer::deserialize_struct`, which a probe records before failing.
//! So a list of keys (for an error message, or to check a table) is never written twice.

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// The probe: records the fields and refuses everything.
struct Probe<'a>(&'a mut &'static [&'static str]);

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("probe"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The field names of `T` (empty if `T` is not a struct with a derived `Deserialize`).
pub fn of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

#[cfg(test)]
mod tests {
    #[test]
    fn lists_the_fields_of_policy_config() {
        assert_eq!(
            super::of::<policy::PolicyConfig>(),
            &[
                "slp",
                "rw",
                "rw_rule",
                "pos_tail",
                "period",
                "starvation_bound",
                "slp_floor"
            ]
        );
        assert!(super::of::<u32>().is_empty());
    }
}
