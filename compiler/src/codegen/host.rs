//! Precompiled kernels written in Rust for ops whose inner loop is data-dependent gathering
//! (GridSample, AffineGrid, RoiAlign, MaxUnpool, Det, 3-d pooling): a [`HostKernel`] made at
//! compile time (geometry fixed, a closure over plain slices) and kept by the program, called
//! from the generated code through [`arenac_host`] with up to eight addresses (buffers, then a
//! checking kernel's fault record and tag: `super::fault::report`).

/// Addresses a host kernel takes.
pub const SLOTS: usize = 8;

/// One precompiled kernel: called with the node's buffer addresses in the order its lowering
/// passed them (unused slots are null). The closure knows every buffer's length and reads
/// or writes only within it; it must not allocate on the hot path it documents.
pub struct HostKernel {
    run: Box<dyn Fn([*mut u8; SLOTS]) + Send + Sync>,
}

impl HostKernel {
    /// A kernel running `run` on the buffer addresses.
    ///
    /// # Contract
    /// `run` is called only with addresses the lowering planned for this node: each
    /// readable (inputs) or writable (outputs) for the element counts `run` was made for,
    /// outputs overlapping no input.
    pub fn new(run: impl Fn([*mut u8; SLOTS]) + Send + Sync + 'static) -> HostKernel {
        HostKernel { run: Box::new(run) }
    }
}

/// Calls the kernel `k` on the addresses `a`..`h`.
///
/// # Safety
/// `k` points to a live [`HostKernel`]; the addresses satisfy the contract of
/// [`HostKernel::new`] for the kernel's geometry.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn arenac_host(
    k: *const HostKernel,
    a: *mut u8,
    b: *mut u8,
    c: *mut u8,
    d: *mut u8,
    e: *mut u8,
    f: *mut u8,
    g: *mut u8,
    h: *mut u8,
) {
    // SAFETY: `k` is live by the contract.
    let k = unsafe { &*k };
    (k.run)([a, b, c, d, e, f, g, h]);
}

/// `len` elements of `T` at `p` as a slice (empty when `len` is 0).
///
/// # Safety
/// `p` is readable for `len` elements of `T`, aligned, and not written while the slice
/// lives.
pub unsafe fn input<'a, T>(p: *mut u8, len: usize) -> &'a [T] {
    if len == 0 {
        return &[];
    }
    // SAFETY: by the contract.
    unsafe { std::slice::from_raw_parts(p.cast::<T>(), len) }
}

/// `len` elements of `T` at `p` as a mutable slice (empty when `len` is 0).
///
/// # Safety
/// `p` is writable for `len` elements of `T`, aligned, and overlaps no other slice in use.
pub unsafe fn output<'a, T>(p: *mut u8, len: usize) -> &'a mut [T] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: by the contract.
    unsafe { std::slice::from_raw_parts_mut(p.cast::<T>(), len) }
}
