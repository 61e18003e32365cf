//! CPU time: of the calling thread and process (`clock_gettime`, for per-burst accounting), of
//! another process with nanosecond precision (its CPU-time clock), and of this process's
//! waited-for children (`getrusage`).

use std::time::Duration;

fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; the clock ids used here always exist on Linux.
    let r = unsafe { libc::clock_gettime(id, &mut ts) };
    if r != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The numbers a script in another language needs to read its own CPU time with a raw
/// `clock_gettime` system call (Perl's `syscall`, without loading a module: the CPU-bound
/// scripts of `triage lab pos --site cgi`): (system call number on this architecture,
/// `CLOCK_PROCESS_CPUTIME_ID`).
pub fn process_clock_syscall() -> (i64, i32) {
    (libc::SYS_clock_gettime, libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time consumed by the calling thread so far (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_time() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The CPU-time clock of one thread, readable from any thread of the process
/// (`pthread_getcpuclockid`): a runtime reads its worker threads' CPU when asked, instead of
/// each thread reading its own clock (a system call) every time it goes idle.
#[derive(Debug, Clone, Copy)]
pub struct ThreadClock(libc::clockid_t);

impl ThreadClock {
    /// The calling thread's clock (`None` if the kernel refuses, which Linux does not).
    pub fn current() -> Option<Self> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: `id` is a valid out-pointer and `pthread_self()` the calling, live thread.
        let r = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        (r == 0).then_some(Self(id))
    }

    /// CPU time of its thread so far; `None` once the thread has ended (its clock is gone).
    /// Only call it while the thread may still run or just after: the clock names the thread
    /// by its id, which the kernel may give to a later thread of the process.
    pub fn read(&self) -> Option<Duration> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid out-pointer; a clock of an ended thread returns an error.
        if unsafe { libc::clock_gettime(self.0, &mut ts) } != 0 {
            return None;
        }
        Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
}

/// CPU time consumed by the whole process so far (`CLOCK_PROCESS_CPUTIME_ID`).
pub fn process_cpu_time() -> Duration {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time (user + system, all threads) of process `pid` so far, read from its CPU-time
/// clock (`clock_getcpuclockid`): nanosecond precision, where `/proc`'s utime/stime count 10 ms
/// ticks. `None` if the process is gone.
pub fn process_cpu_time_of(pid: i32) -> Option<Duration> {
    let mut id: libc::clockid_t = 0;
    // SAFETY: `id` is a valid out-pointer; the call has no other preconditions.
    if unsafe { libc::clock_getcpuclockid(pid, &mut id) } != 0 {
        return None;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer and `id` a clock the kernel just gave us.
    if unsafe { libc::clock_gettime(id, &mut ts) } != 0 {
        return None;
    }
    Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// CPU time (user + system) used so far by the children of this process that have ended and
/// been waited for (`getrusage(RUSAGE_CHILDREN)`), in microseconds' precision.
pub fn children_cpu_time() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_CHILDREN) {
        Ok(u) => {
            let tv = |t: nix::sys::time::TimeVal| {
                Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000)
            };
            tv(u.user_time()) + tv(u.system_time())
        }
        Err(_) => Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_time_grows_with_work_and_not_with_sleep() {
        let t0 = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(30));
        let slept = thread_cpu_time() - t0;
        let t1 = thread_cpu_time();
        let mut x = 0u64;
        while thread_cpu_time() - t1 < Duration::from_millis(20) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(slept < Duration::from_millis(10), "{slept:?}");
        assert!(process_cpu_time() >= thread_cpu_time());
        let me = process_cpu_time_of(std::process::id() as i32).unwrap();
        assert!(me >= Duration::from_millis(20), "{me:?}");
    }

    #[test]
    fn a_thread_s_clock_is_read_from_another_thread() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let clock = ThreadClock::current().unwrap();
            let t0 = thread_cpu_time();
            while thread_cpu_time() - t0 < Duration::from_millis(20) {
                std::hint::black_box(0u64);
            }
            tx.send(clock).unwrap();
            done_rx.recv().unwrap();
        });
        let clock = rx.recv().unwrap();
        let seen = clock.read().unwrap();
        assert!(seen >= Duration::from_millis(20), "{seen:?}");
        // This thread's own CPU is not the other's.
        let mine = ThreadClock::current().unwrap().read().unwrap();
        assert!((mine.as_nanos() as i128 - thread_cpu_time().as_nanos() as i128).abs() < 5_000_000);
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn children_time_counts_a_waited_child() {
        let before = children_cpu_time();
        let st = std::process::Command::new("/bin/sh")
            .args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(st.success());
        assert!(children_cpu_time() > before);
    }
}
