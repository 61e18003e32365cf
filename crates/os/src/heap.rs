//! The allocator, whose freed memory is the kernel's to take back or not. The `triage` binary
//! allocates through mimalloc ([`Allocator`]); the C library's allocator (glibc's) is still
//! the one of C code in the process and of programs that embed the crates without it.
//! [`keep_freed_memory`] keeps glibc's freed memory for reuse; [`trim`] hands both
//! allocators' free memory back on demand, [`collect_thread`] that of the calling thread.
//!
//! Why mimalloc (docs/results-log.md, docs/server.md): with ten thousand parked connections,
//! glibc's allocator cost `triage serve` 14% more CPU per request than with none. The parked
//! connections' small live blocks lie between the blocks that every request allocates and
//! frees (hyper's buffers, headers, the log line), so freed blocks no longer merge into the
//! top of the heap: `malloc` searches and sorts its bins (`_int_malloc` 5.0% of the server's
//! samples against 3.0% without the parked connections, `malloc_consolidate` 1.7% against
//! 0.7%). mimalloc allocates each size from its own pages per thread, so what is parked does
//! not lie in the way of what is served.
//!
//! What mimalloc keeps: a page whose blocks are all free goes back to its arena, and the
//! arena decommits (`MADV_DONTNEED`) what was free for its purge delay (1 s), but only when
//! some thread later allocates or frees pages: after a crowd of connections leaves an idle
//! server, nothing does, and the memory stays resident (5,000 idle connections: 20 -> 190
//! MB, and 190 MB after they closed). [`trim`] forces that purge, and [`collect_thread`]
//! returns the calling thread's empty pages first; a server calls it on every thread that
//! serves connections when a crowd has left.

/// The global allocator of the `triage` binary: mimalloc. Declare it with
/// `#[global_allocator] static ALLOC: os::heap::Allocator = os::heap::Allocator;`.
pub use mimalloc::MiMalloc as Allocator;

/// Make glibc's allocator keep freed memory for reuse instead of handing the top of the heap
/// back to the kernel at every `free` past its trim threshold (and mapping larger blocks
/// afresh). A server frees and allocates a connection's buffers at almost every response: the
/// give-back and re-fault cost the front end about a quarter of its CPU per relayed request
/// (docs/front.md) and `triage serve` 15-23% more CPU per request with ten thousand parked
/// connections (docs/results-log.md) while it allocated through glibc. Memory still goes back
/// through [`trim`], which ignores the threshold. Call it before the process's other threads
/// start; it changes the whole process's allocator, so a program that embeds a server or
/// front end decides for itself. (mimalloc needs no tuning: it keeps freed pages for its
/// purge delay, 1 s, and [`trim`] purges them.)
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before other threads start.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
    }
}

/// Return the free memory of both allocators to the kernel: glibc's (`malloc_trim`) and
/// mimalloc's (the calling thread's empty pages, then every arena's free pages at once,
/// whatever their purge delay). Other threads' empty pages stay theirs until they run
/// [`collect_thread`]. It may take milliseconds: call it off the threads that serve.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
    collect_thread();
}

/// Return the calling thread's empty mimalloc pages to their arenas, take back the blocks
/// other threads freed into its pages, and purge every arena's free pages now (mimalloc's
/// `mi_collect(true)`). Cheap when little is free: a thread that serves connections calls it
/// when a crowd has left.
pub fn collect_thread() {
    // SAFETY: mi_collect has no preconditions; it acts on the calling thread's heap and on
    // the arenas under mimalloc's own locks.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident set of this process, KiB (`VmRSS`).
    fn rss_kib() -> u64 {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn collect_thread_gives_back_what_this_thread_freed() {
        // 64 MiB in 16 KiB blocks through mimalloc (the test binary's allocator is glibc's),
        // touched, then freed: resident until collected.
        let a = Allocator;
        let layout = std::alloc::Layout::from_size_align(16 << 10, 16).unwrap();
        let before = rss_kib();
        let blocks: Vec<*mut u8> = (0..4096)
            .map(|_| {
                // SAFETY: a non-zero layout; each block is written within its size.
                unsafe {
                    let p = std::alloc::GlobalAlloc::alloc(&a, layout);
                    assert!(!p.is_null());
                    std::ptr::write_bytes(p, 1, layout.size());
                    p
                }
            })
            .collect();
        let full = rss_kib();
        assert!(full >= before + (60 << 10), "{before} -> {full} KiB");
        for p in blocks {
            // SAFETY: allocated above with this layout, freed once.
            unsafe { std::alloc::GlobalAlloc::dealloc(&a, p, layout) };
        }
        collect_thread();
        let after = rss_kib();
        assert!(
            after < before + (8 << 10),
            "{before} -> {full} -> {after} KiB after the collection"
        );
    }
}
