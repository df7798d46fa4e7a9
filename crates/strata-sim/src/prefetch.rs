//! A software prefetch hint, the one place this crate reaches for a CPU
//! intrinsic: the stack-distance pass hashes a request a few places ahead
//! and asks for its map slot early, so the slot's cache miss overlaps the
//! work on the requests before it.

/// Asks the CPU to bring the cache line holding `r` into its caches. A
/// hint only: it never faults and changes no value.
#[inline(always)]
pub(crate) fn read<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint that cannot fault, whatever the
        // address; here it is a live reference, and SSE (which the
        // instruction needs) is part of the x86_64 baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
