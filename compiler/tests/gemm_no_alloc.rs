//! `arenac_sgemm` and `arenac_pack_b` never allocate: a counting global allocator (only possible
//! in a test binary of its own) sees no allocation across calls.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use arenac_compiler::gemm::{A_SCRATCH_FLOATS, arenac_pack_b, arenac_sgemm, packed_b_len};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn sgemm_and_pack_b_do_not_allocate() {
    // Edge shapes (m % MR, n % NR, several K and M blocks) and both accumulate modes.
    let (m, n, k) = (203, 45, 601);
    let a = vec![0.5f32; m * k];
    let b = vec![0.25f32; k * n];
    let mut packed = vec![0.0f32; packed_b_len(k, n)];
    let mut c = vec![1.0f32; m * n];
    let mut scratch = vec![0.0f32; A_SCRATCH_FLOATS];

    // The first call also picks the kernel (a `OnceLock`, no allocation) and is counted too,
    // unless ARENAC_GEMM_KERNEL is set: reading that variable allocates once.
    if std::env::var_os("ARENAC_GEMM_KERNEL").is_some() {
        // SAFETY: every buffer is sized per the contract, and none overlaps another.
        unsafe {
            arenac_sgemm(
                1,
                1,
                1,
                a.as_ptr(),
                k,
                packed.as_ptr(),
                c.as_mut_ptr(),
                n,
                0,
                scratch.as_mut_ptr(),
            )
        };
    }
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for accumulate in [0, 1] {
        // SAFETY: `b` holds k x n floats at (rs, cs) = (n, 1); `packed` holds packed_b_len.
        unsafe { arenac_pack_b(k, n, b.as_ptr(), n, 1, packed.as_mut_ptr()) };
        // SAFETY: every buffer is sized per the contract, and none overlaps another.
        unsafe {
            arenac_sgemm(
                m,
                n,
                k,
                a.as_ptr(),
                k,
                packed.as_ptr(),
                c.as_mut_ptr(),
                n,
                accumulate,
                scratch.as_mut_ptr(),
            )
        };
    }
    let after = ALLOCATIONS.load(Ordering::SeqCst);
    assert_eq!(
        after - before,
        0,
        "allocations inside arenac_sgemm/arenac_pack_b"
    );
    // The product really ran: C = 2 * k * 0.5 * 0.25 after a plain then an accumulating call.
    let want = 2.0 * (k as f32 * 0.125);
    assert!(
        c.iter().all(|&x| (x - want).abs() < 1e-3 * want),
        "{}",
        c[0]
    );
}
