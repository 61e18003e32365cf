//! `os`: the kernel boundary. Everything in triage that touches the kernel's files or its
//! per-thread state goes through here: files beneath a document root ([`beneath`]), cgroups ([`cgroup`]), `/proc` readers ([`procfs`]),
//! CPU affinity ([`cpu`]), network namespaces ([`netns`], `setns`), kernel parameters
//! ([`sysctl`]), thread priority and scheduler slice ([`prio`], `setpriority`,
//! `sched_setattr`), CPU clocks ([`cputime`]), the allocator's freed memory ([`heap`]), process liveness ([`task`]) and keeping started processes in
//! reach ([`reaper`]: child subreaper, processes marked in their environment), following
//! processes' run/wait transitions ([`proctrace`]: BPF tracepoints or /proc polling) and
//! raising and restoring them per task ([`lever`]: nice, slice, cgroup weight, journaled). Other crates call these; none reads `/proc` or
//! `/sys`, or makes these system calls, itself (`scripts/check_layout.py` checks it).
#![warn(missing_docs)]
pub mod beneath;
pub mod cgroup;
pub mod cgroup_place;
pub mod cpu;
pub mod cpusplit;
pub mod cputime;
pub mod dynmods;
pub mod heap;
pub mod lever;
pub mod netns;
pub mod prio;
pub mod procfs;
pub mod proctrace;
pub mod reaper;
pub mod sysctl;
pub mod task;

pub use cgroup::{probe, Cgroup, CgroupError, CgroupRoot, CpuStat, Mounts, Version};
pub use cputime::{process_cpu_time, thread_cpu_time, ThreadClock};
