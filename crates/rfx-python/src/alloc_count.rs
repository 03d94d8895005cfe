//! A counting global allocator, compiled in only with the `alloc-count` feature (the test
//! build made by `cargo xtask test`): `rfxjit._rfx.allocations()` returns how many times Rust
//! code in this module has allocated or reallocated since it was loaded, so that a test can
//! check that a bound call with `out=` allocates nothing. Frees are not counted; the memory
//! itself comes from the system allocator as without the feature.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;

/// Allocations (and reallocations) made so far, by every thread.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting.
struct Counting;

// SAFETY: every method forwards its arguments unchanged to `System`, which upholds
// `GlobalAlloc`'s contract; the counter is an atomic that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract (a non-zero-sized layout).
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `realloc`'s contract (`ptr` allocated here with `layout`).
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `dealloc`'s contract (`ptr` allocated here with `layout`).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// How many allocations and reallocations Rust code in this module has made since it was
/// loaded (all threads; only in builds with the `alloc-count` feature).
#[pyfunction]
fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Adds `allocations` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(allocations, m)?)
}
