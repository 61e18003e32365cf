//! `os`: the only code that touches the kernel's files (cgroups, scheduling attributes, /proc).
pub mod cgroup;
pub mod cputime;
pub mod prio;
pub mod procfs;
pub mod task;

pub use cgroup::{probe, Cgroup, CgroupError, CgroupRoot, CpuStat, Mounts, Version};
pub use cputime::{process_cpu_time, thread_cpu_time};
