//! `pos`: placeholder until the policy lands (being written now).

/// Registry entry.
pub const ENTRY: crate::registry::Entry = crate::registry::Entry {
    name: "pos",
    about: "(not yet implemented)",
    build: |_| Ok(Box::new(crate::fifo::Fifo::new())),
};
