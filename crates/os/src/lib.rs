//! `os`: the only code that touches the kernel's files (cgroups, scheduling attributes, /proc).
pub mod prio;
