//! Thread scheduling priority: read and set the nice value of one thread (`setpriority` on a
//! thread id), so a mechanism can pass a policy's "serve first" decision on to the kernel while
//! a marked worker's burst runs (the server's `--boost nice`).
//!
//! Linux applies `setpriority(PRIO_PROCESS, tid, ..)` to a single thread when given a thread id
//! (`gettid`), not to the whole process. [`FifoGuard`] runs a thread real-time (`SCHED_FIFO`)
//! for a while: a measuring client. Lowering the nice value (raising priority) needs
//! `CAP_SYS_NICE` (root); without it the call fails with [`PrioError::Permission`].

/// Kernel thread id.
pub type Tid = i32;

/// Why a priority change failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PrioError {
    /// A nice value outside the kernel's range.
    #[error("nice value {0} out of range -20..=19")]
    Range(i32),
    /// Raising a priority needs `CAP_SYS_NICE`.
    #[error("no permission to set nice {nice} on thread {tid} (needs CAP_SYS_NICE)")]
    Permission {
        /// The thread.
        tid: Tid,
        /// The nice value asked for.
        nice: i32,
    },
    /// Any other failure of the system call.
    #[error("thread {tid}: {err}")]
    Sys {
        /// The thread.
        tid: Tid,
        /// The system's error.
        err: String,
    },
}

/// Id of the calling thread (`gettid`).
pub fn current_tid() -> Tid {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Set the nice value of thread `tid` (`-20..=19`, lower runs first).
pub fn set_thread_nice(tid: Tid, nice: i32) -> Result<(), PrioError> {
    if !(-20..=19).contains(&nice) {
        return Err(PrioError::Range(nice));
    }
    // SAFETY: plain syscall wrapper; invalid ids are reported through errno.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    check(r == 0, tid, nice, "setpriority")
}

/// `Ok` if the call succeeded, else the error errno names (no permission, or another).
fn check(ok: bool, tid: Tid, nice: i32, call: &str) -> Result<(), PrioError> {
    if ok {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => Err(PrioError::Permission { tid, nice }),
        _ => Err(PrioError::Sys {
            tid,
            err: format!("{call}: {err}"),
        }),
    }
}

/// Nice value of thread `tid`.
pub fn thread_nice(tid: Tid) -> Result<i32, PrioError> {
    // getpriority may legitimately return -1: clear errno first and check it after.
    // SAFETY: errno location is thread-local and always valid.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: plain syscall wrapper.
    let r = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) };
    let errno = std::io::Error::last_os_error();
    if r == -1 && errno.raw_os_error().unwrap_or(0) != 0 {
        return Err(PrioError::Sys {
            tid,
            err: format!("getpriority: {errno}"),
        });
    }
    Ok(r)
}

/// `struct sched_attr` (include/uapi/linux/sched/types.h, SCHED_ATTR_SIZE_VER1).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// Set the time slice the kernel's fair scheduler (EEVDF, Linux 6.12+) asks for on behalf of
/// thread `tid` (`sched_setattr` with `sched_runtime` under `SCHED_OTHER`), keeping its nice
/// value; `None` returns to the default slice. A shorter slice gives an earlier virtual
/// deadline: the thread is picked sooner and may preempt a task with a longer slice when it
/// wakes, while its share of the CPU (its weight) is unchanged. The kernel clamps the slice to
/// 0.1..100 ms.
pub fn set_thread_slice(tid: Tid, slice: Option<std::time::Duration>) -> Result<(), PrioError> {
    let nice = thread_nice(tid)?;
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_nice: nice,
        sched_runtime: slice.map_or(0, |d| d.as_nanos() as u64),
        ..Default::default()
    };
    // SAFETY: sched_setattr reads `size` bytes of a valid, initialised struct.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0) };
    check(r == 0, tid, nice, "sched_setattr (slice)")
}

/// A slice request prepared before a `fork`, applied in the child before `exec`
/// ([`SliceHook::apply`] only makes one system call: async-signal-safe, no allocation). The
/// child keeps the nice value the preparing thread had.
pub struct SliceHook {
    attr: SchedAttr,
}

impl SliceHook {
    /// A request for `slice` at the calling thread's current nice value (0 if unreadable).
    pub fn new(slice: std::time::Duration) -> Self {
        Self {
            attr: SchedAttr {
                size: std::mem::size_of::<SchedAttr>() as u32,
                sched_policy: libc::SCHED_OTHER as u32,
                sched_nice: thread_nice(current_tid()).unwrap_or(0),
                sched_runtime: slice.as_nanos() as u64,
                ..Default::default()
            },
        }
    }

    /// Ask for the slice for the calling process (best effort: a kernel without custom slices
    /// ignores or refuses it, and the process keeps the default slice).
    ///
    /// # Safety
    /// Meant for a freshly forked child: it makes only the `sched_setattr` system call.
    pub unsafe fn apply(&self) {
        libc::syscall(
            libc::SYS_sched_setattr,
            0,
            &self.attr as *const SchedAttr,
            0,
        );
    }
}

/// A nice value prepared before a `fork`, applied by the child to itself before `exec`
/// ([`NiceHook::apply`] makes one system call: async-signal-safe, no allocation): a child
/// that is raised before it runs its program (the CGI lever, `os::lever`). Apply it after a
/// [`SliceHook`], which sets the preparing thread's nice value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NiceHook {
    /// The nice value the child gives itself.
    nice: i32,
}

impl NiceHook {
    /// A hook setting nice `nice` (`-20..=19`).
    pub fn new(nice: i32) -> Result<Self, PrioError> {
        if !(-20..=19).contains(&nice) {
            return Err(PrioError::Range(nice));
        }
        Ok(Self { nice })
    }

    /// The nice value it sets.
    pub fn nice(&self) -> i32 {
        self.nice
    }

    /// Set the calling process's nice value; whether the kernel accepted it (without
    /// `CAP_SYS_NICE` a negative value is refused and the child keeps its inherited one).
    ///
    /// # Safety
    /// Meant for a freshly forked child: it makes only the `setpriority` system call.
    pub unsafe fn apply(&self) -> bool {
        libc::setpriority(libc::PRIO_PROCESS, 0, self.nice) == 0
    }
}

/// The slice thread `tid` asks for (`sched_getattr`'s `sched_runtime` for a fair task), in
/// nanoseconds; kernels before custom slices report 0.
pub fn thread_slice_ns(tid: Tid) -> Result<u64, PrioError> {
    let mut attr = SchedAttr::default();
    // SAFETY: sched_getattr writes at most `size` bytes into the struct.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0,
        )
    };
    if r == 0 {
        Ok(attr.sched_runtime)
    } else {
        Err(PrioError::Sys {
            tid,
            err: format!("sched_getattr: {}", std::io::Error::last_os_error()),
        })
    }
}

/// Raises the calling thread to `nice` while alive and restores the previous value on drop.
#[derive(Debug)]
pub struct NiceGuard {
    tid: Tid,
    previous: i32,
}

impl NiceGuard {
    /// Set the calling thread's nice value to `nice`, remembering the old one.
    pub fn raise_current(nice: i32) -> Result<Self, PrioError> {
        let tid = current_tid();
        let previous = thread_nice(tid)?;
        set_thread_nice(tid, nice)?;
        Ok(Self { tid, previous })
    }
}

impl Drop for NiceGuard {
    fn drop(&mut self) {
        let _ = set_thread_nice(self.tid, self.previous);
    }
}

/// Whether thread `tid` runs under the real-time `SCHED_FIFO` policy (`sched_getscheduler`).
pub fn thread_is_fifo(tid: Tid) -> Result<bool, PrioError> {
    Ok(thread_policy(tid)? == libc::SCHED_FIFO)
}

/// The scheduling policy of thread `tid` (`sched_getscheduler`, without
/// `SCHED_RESET_ON_FORK`): `libc::SCHED_OTHER`, `SCHED_FIFO`, ...
pub fn thread_policy(tid: Tid) -> Result<i32, PrioError> {
    // SAFETY: plain syscall wrapper; invalid ids are reported through errno.
    let r = unsafe { libc::sched_getscheduler(tid) };
    if r < 0 {
        return Err(PrioError::Sys {
            tid,
            err: format!("sched_getscheduler: {}", std::io::Error::last_os_error()),
        });
    }
    Ok(r & !libc::SCHED_RESET_ON_FORK)
}

/// Put thread `tid` under `SCHED_FIFO` at `priority` (1..=99). Refused
/// ([`PrioError::Permission`]) without `CAP_SYS_NICE`, and, with real-time group scheduling,
/// when the thread's cgroup has no real-time budget (`cpu.rt_runtime_us` 0, a new cgroup's
/// value).
pub fn set_thread_fifo(tid: Tid, priority: i32) -> Result<(), PrioError> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler reads a valid sched_param.
    let r = unsafe { libc::sched_setscheduler(tid, libc::SCHED_FIFO, &param) };
    check(r == 0, tid, 0, "sched_setscheduler (SCHED_FIFO)")
}

/// Put thread `tid` back under the fair class (`SCHED_OTHER`) at nice `nice`.
pub fn set_thread_fair(tid: Tid, nice: i32) -> Result<(), PrioError> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as above.
    let r = unsafe { libc::sched_setscheduler(tid, libc::SCHED_OTHER, &param) };
    check(r == 0, tid, nice, "sched_setscheduler (SCHED_OTHER)")?;
    set_thread_nice(tid, nice)
}

/// Runs the calling thread under `SCHED_FIFO` while alive (and every child it starts
/// meanwhile, which inherits the policy), then returns it to the fair class at the nice value
/// it had. A real-time thread preempts every fair-class task on its CPU as soon as it wakes:
/// a measuring client (the events lab's load generator and wrk) then answers the server
/// within microseconds whatever builds share its CPU, where a nice value only weighs its
/// share (under EEVDF a woken nice -10 thread may wait out a running task's slice, about
/// 1.5 ms, on every wake-up). The kernel's real-time throttling
/// (`/proc/sys/kernel/sched_rt_runtime_us`, 95% by default) keeps the rest of the CPU for
/// the others. Needs `CAP_SYS_NICE` (root): without it [`PrioError::Permission`].
#[derive(Debug)]
pub struct FifoGuard {
    tid: Tid,
    nice: i32,
}

impl FifoGuard {
    /// `SCHED_FIFO` at `priority` (1..=99; the lowest, 1, is enough to preempt every fair
    /// task) for the calling thread.
    pub fn raise_current(priority: i32) -> Result<Self, PrioError> {
        let tid = current_tid();
        let nice = thread_nice(tid)?;
        set_thread_fifo(tid, priority)?;
        Ok(Self { tid, nice })
    }
}

impl Drop for FifoGuard {
    fn drop(&mut self) {
        // Back to the fair class at the nice value it had.
        let _ = set_thread_fair(self.tid, self.nice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_is_set_and_reset_keeping_nice() {
        std::thread::spawn(|| {
            let tid = current_tid();
            set_thread_nice(tid, 3).unwrap();
            let default = thread_slice_ns(tid).unwrap();
            match set_thread_slice(tid, Some(std::time::Duration::from_micros(200))) {
                Err(PrioError::Sys { err, .. }) if err.contains("Invalid argument") => {
                    eprintln!("SKIP slice: this kernel has no custom slices ({err})");
                    return;
                }
                r => r.unwrap(),
            }
            assert_eq!(
                thread_nice(tid).unwrap(),
                3,
                "the slice keeps the nice value"
            );
            if default != 0 {
                assert_eq!(thread_slice_ns(tid).unwrap(), 200_000);
                set_thread_slice(tid, None).unwrap();
                assert_eq!(thread_slice_ns(tid).unwrap(), default);
            } else {
                eprintln!("SKIP slice read-back: sched_getattr reports no slice here");
            }
            assert_eq!(thread_nice(tid).unwrap(), 3);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn rejects_out_of_range() {
        assert_eq!(
            set_thread_nice(current_tid(), 25),
            Err(PrioError::Range(25))
        );
    }

    #[test]
    fn sets_and_restores_own_thread() {
        // Runs in a fresh thread so the test harness's thread keeps its priority.
        std::thread::spawn(|| {
            let tid = current_tid();
            let before = thread_nice(tid).unwrap();
            // Raising the nice value (lowering priority) needs no privilege.
            set_thread_nice(tid, 5).unwrap();
            assert_eq!(thread_nice(tid).unwrap(), 5);
            // Lowering it back may need CAP_SYS_NICE.
            match set_thread_nice(tid, before) {
                Ok(()) => assert_eq!(thread_nice(tid).unwrap(), before),
                Err(PrioError::Permission { .. }) => {
                    eprintln!(
                        "SKIP sets_and_restores_own_thread: restoring nice needs CAP_SYS_NICE"
                    )
                }
                Err(e) => panic!("{e}"),
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn guard_restores_on_drop() {
        std::thread::spawn(|| {
            let tid = current_tid();
            let before = thread_nice(tid).unwrap();
            match NiceGuard::raise_current(-5) {
                Ok(g) => {
                    assert_eq!(thread_nice(tid).unwrap(), -5);
                    drop(g);
                    assert_eq!(thread_nice(tid).unwrap(), before);
                }
                Err(PrioError::Permission { .. }) => {
                    eprintln!("SKIP guard_restores_on_drop: needs CAP_SYS_NICE (root)")
                }
                Err(e) => panic!("{e}"),
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn fifo_guard_raises_and_returns_to_the_fair_class() {
        std::thread::spawn(|| {
            let tid = current_tid();
            set_thread_nice(tid, 4).unwrap();
            assert!(!thread_is_fifo(tid).unwrap());
            match FifoGuard::raise_current(1) {
                Ok(g) => {
                    assert!(thread_is_fifo(tid).unwrap());
                    // A child thread started meanwhile inherits the policy.
                    let child = std::thread::spawn(|| thread_is_fifo(current_tid()).unwrap());
                    assert!(child.join().unwrap());
                    drop(g);
                    assert!(!thread_is_fifo(tid).unwrap());
                    assert_eq!(thread_nice(tid).unwrap(), 4, "the nice value it had");
                }
                Err(PrioError::Permission { .. }) => {
                    eprintln!("SKIP fifo_guard_raises_and_returns_to_the_fair_class: not root")
                }
                Err(e) => panic!("{e}"),
            }
        })
        .join()
        .unwrap();
    }
}
