//! `sim`: a deterministic discrete-event simulator driving the policy crate in virtual time.
