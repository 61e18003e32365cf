//! The C library's allocator, whose freed memory is the kernel's to take back or not: keep it
//! for reuse ([`keep_freed_memory`]) and hand it back on demand ([`trim`]). glibc only; a
//! no-op elsewhere.

/// Make glibc's allocator keep freed memory for reuse instead of handing the top of the heap
/// back to the kernel at every `free` past its trim threshold (and mapping larger blocks
/// afresh). A server frees and allocates a connection's buffers at almost every response: the
/// give-back and re-fault cost the front end about a quarter of its CPU per relayed request
/// (docs/front.md) and `triage serve` 15-23% more CPU per request with ten thousand parked
/// connections (docs/events.md). Memory still goes back through [`trim`], which ignores the
/// threshold. Call it before the process's other threads start; it changes the whole
/// process's allocator, so a program that embeds a server or front end decides for itself.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before other threads start.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
    }
}

/// Return the allocator's free memory to the kernel (`malloc_trim`).
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
