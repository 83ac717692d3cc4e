//! Gives the allocator's free memory back to the system. A large build
//! frees hundreds of megabytes at a time (a segment's working set once it
//! is written out); glibc keeps freed memory in its arenas, where it would
//! count in the process's resident memory until reused. Elsewhere (other
//! C libraries) this does nothing.
#![allow(unsafe_code)]

/// Returns the free pages of every allocator arena to the system.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas, under their locks,
    // and gives back pages no allocation uses.
    unsafe {
        libc::malloc_trim(0);
    }
}
