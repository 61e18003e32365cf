//! `content`: placeholder until the policy lands (being written now).

/// Registry entry.
pub const ENTRY: crate::registry::Entry = crate::registry::Entry {
    name: "content",
    about: "(not yet implemented)",
    build: |_| Ok(Box::new(crate::fifo::Fifo::new())),
};
