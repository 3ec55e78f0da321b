//! Giving freed memory back to the system: the host lives as long as the editor, and a
//! session it loads (a 100k-entry file is 63 MB of text and 12 MB of entries) leaves
//! megabytes of freed buffers behind.
//!
//! glibc keeps freed memory for later allocations instead of returning it: in the bins of each
//! thread's arena, and at the top of an arena up to a trim threshold that, by default, grows
//! with every large block freed (to twice its size, up to 64 MiB). After loading a 100k-entry
//! session the host kept 4-7 MiB so, varying from run to run with the threads that did the work.

/// Fixes the allocator's thresholds, once, at the host's start: blocks of 256 KiB and more are
/// mapped on their own and unmapped when freed, and an arena's free top is returned past
/// 128 KiB (glibc's starting values, made fixed: they no longer grow with each large block
/// freed). The price: such a block is fresh memory each time, a page fault per 4 KiB when it
/// is first written (~1 µs here). A no-op off glibc.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters (under the allocator's lock); it takes no
    // pointer.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
    }
}

/// Returns the free memory of every arena's bins to the system (glibc `malloc_trim`; a no-op
/// elsewhere), after a session's load. Takes ~1 ms: call it off the async runtime.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free pages of the allocator's own arenas; it takes no
    // pointer and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
