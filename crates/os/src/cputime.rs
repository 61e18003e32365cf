//! CPU time of the calling thread and process (`clock_gettime`), for per-burst accounting.

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

/// CPU time consumed by the calling thread so far (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_time() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time consumed by the whole process so far (`CLOCK_PROCESS_CPUTIME_ID`).
pub fn process_cpu_time() -> Duration {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
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
    }
}
