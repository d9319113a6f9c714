//! Counting global allocator for the benchmarks (issue 14), behind the cargo feature
//! `alloc-count` (off by default: without it nothing here runs and the binary uses the
//! system allocator directly).
//!
//! With the feature, every allocation, reallocation and free goes through relaxed
//! atomic counters, and when the environment variable `LOWTIDE_ALLOC_STATS` names a
//! file, the totals are written there as JSON when `main` returns:
//! `{"allocs": N, "reallocs": N, "frees": N, "bytes": N}` (`bytes`: requested by
//! allocations and growing reallocations). `scripts/bench-sim.sh` divides the
//! difference between two run lengths by the difference in wire packets, which
//! leaves the steady state's allocations per packet.

/// Writes the counts (feature `alloc-count` and `LOWTIDE_ALLOC_STATS` set) when dropped.
pub struct ReportOnDrop;

#[cfg(feature = "alloc-count")]
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    pub static ALLOCS: AtomicU64 = AtomicU64::new(0);
    pub static REALLOCS: AtomicU64 = AtomicU64::new(0);
    pub static FREES: AtomicU64 = AtomicU64::new(0);
    pub static BYTES: AtomicU64 = AtomicU64::new(0);

    pub struct Counting;

    // SAFETY: every call is forwarded unchanged to the system allocator.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ALLOCS.fetch_add(1, Relaxed);
            BYTES.fetch_add(layout.size() as u64, Relaxed);
            // SAFETY: the caller's contract is passed on.
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            ALLOCS.fetch_add(1, Relaxed);
            BYTES.fetch_add(layout.size() as u64, Relaxed);
            // SAFETY: the caller's contract is passed on.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            FREES.fetch_add(1, Relaxed);
            // SAFETY: the caller's contract is passed on.
            unsafe { System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            REALLOCS.fetch_add(1, Relaxed);
            BYTES.fetch_add(new_size.saturating_sub(layout.size()) as u64, Relaxed);
            // SAFETY: the caller's contract is passed on.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;
}

impl Drop for ReportOnDrop {
    fn drop(&mut self) {
        #[cfg(feature = "alloc-count")]
        if let Some(path) = std::env::var_os("LOWTIDE_ALLOC_STATS") {
            use counting::*;
            use std::sync::atomic::Ordering::Relaxed;
            let json = format!(
                "{{\"allocs\": {}, \"reallocs\": {}, \"frees\": {}, \"bytes\": {}}}\n",
                ALLOCS.load(Relaxed),
                REALLOCS.load(Relaxed),
                FREES.load(Relaxed),
                BYTES.load(Relaxed)
            );
            if let Err(e) = std::fs::write(&path, json) {
                eprintln!(
                    "lowtide: LOWTIDE_ALLOC_STATS {}: {e}",
                    path.to_string_lossy()
                );
            }
        }
    }
}
