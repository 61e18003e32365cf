//! CPUs and CPU affinity: how many CPUs the machine has online, and pinning the calling
//! thread (or a child between fork and exec) to a set of CPUs with `sched_setaffinity`.

use std::io;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// CPUs online on the machine (not only those this thread may use).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// A set of CPUs prepared in advance, so that applying it makes one system call and allocates
/// nothing: safe between fork and exec (`Command::pre_exec`).
#[derive(Debug, Clone, Copy)]
pub struct CpuMask(CpuSet);

impl CpuMask {
    /// The set holding CPU `cpu` alone.
    pub fn one(cpu: usize) -> io::Result<CpuMask> {
        let mut s = CpuSet::new();
        s.set(cpu)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu}: {e}")))?;
        Ok(CpuMask(s))
    }

    /// The set holding every CPU of `cpus` (an error names a CPU the kernel's set cannot hold).
    pub fn of(cpus: &[usize]) -> io::Result<CpuMask> {
        let mut s = CpuSet::new();
        for &cpu in cpus {
            s.set(cpu).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu}: {e}"))
            })?;
        }
        Ok(CpuMask(s))
    }

    /// The CPUs in the set, in increasing order.
    pub fn cpus(&self) -> Vec<usize> {
        (0..CpuSet::count()).filter(|&c| self.contains(c)).collect()
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: usize) -> bool {
        self.0.is_set(cpu).unwrap_or(false)
    }

    /// Restrict the calling thread to this set (async-signal-safe: one `sched_setaffinity`).
    /// Threads and processes it starts afterwards inherit it.
    pub fn apply_to_current_thread(&self) -> io::Result<()> {
        sched_setaffinity(Pid::from_raw(0), &self.0).map_err(io::Error::from)
    }

    /// The CPUs the calling thread may run on.
    pub fn of_current_thread() -> io::Result<CpuMask> {
        sched_getaffinity(Pid::from_raw(0))
            .map(CpuMask)
            .map_err(io::Error::from)
    }
}

/// The CPUs the calling thread may run on (its affinity), in increasing order; every online
/// CPU if the affinity cannot be read.
pub fn allowed_cpus() -> Vec<usize> {
    CpuMask::of_current_thread()
        .map(|m| m.cpus())
        .unwrap_or_else(|_| (0..online_cpus()).collect())
}

/// Pin the calling thread to CPU `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    CpuMask::one(cpu)?.apply_to_current_thread()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pinned_to_one_cpu_runs_there_only() {
        assert!(online_cpus() >= 1);
        let before = CpuMask::of_current_thread().unwrap();
        let cpu = (0..1024).find(|&c| before.contains(c)).unwrap();
        // On a thread of its own: pinning must not leak into the test harness's thread.
        let seen = std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            let m = CpuMask::of_current_thread().unwrap();
            (0..1024).filter(|&c| m.contains(c)).collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        assert_eq!(seen, vec![cpu]);
        assert_eq!(CpuMask::of(&[cpu]).unwrap().cpus(), vec![cpu]);
        assert_eq!(CpuMask::of(&[0, 3]).unwrap().cpus(), vec![0, 3]);
        assert_eq!(before.cpus(), allowed_cpus());
        assert!(CpuMask::one(usize::MAX).is_err());
    }
}
