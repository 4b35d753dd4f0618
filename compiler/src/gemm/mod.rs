//! The dense-math core: single-precision GEMM on pre-packed B, called from JIT code.
//!
//! Cranelift's x64 backend has 128-bit vectors only, which caps a GEMM it generates at about a
//! third of this CPU's peak (../shared/CRANELIFT.md), so GEMM is precompiled Rust here and the
//! generated program calls [`arenac_sgemm`] once per matrix product.
//!
//! Contract (stable: the code generator and the planner rely on it):
//! - B is packed once by [`pack_b`] (weights: at compile time, into the weights region) or by
//!   [`arenac_pack_b`] at run time into arena scratch, into [`packed_b_len`]`(k, n)` floats;
//! - [`arenac_sgemm`] computes `C = A * B (+ C if accumulate)` for row-major A (`m x k`, row
//!   stride `lda`) and C (`m x n`, row stride `ldc`), using at most [`A_SCRATCH_FLOATS`] floats
//!   of caller-provided scratch (from the arena plan) — it never allocates.
//!
//! (Current implementation: straightforward and correct; the vectorized micro-kernel is being
//! written behind the same contract.)

/// Floats of scratch [`arenac_sgemm`] may use for packing A panels.
pub const A_SCRATCH_FLOATS: usize = 0;

/// Length in floats of B (`k x n`) once packed.
pub fn packed_b_len(k: usize, n: usize) -> usize {
    k.saturating_mul(n)
}

/// Packs B given by element strides (`b[i * rs + j * cs]` is row i, column j of the `k x n`
/// matrix) into `out`, which must hold [`packed_b_len`]`(k, n)` floats.
///
/// # Panics
/// If `b` is too short for the strides or `out` too short (caller bugs; the code generator
/// sizes both from checked types).
pub fn pack_b(k: usize, n: usize, b: &[f32], rs: usize, cs: usize, out: &mut [f32]) {
    for i in 0..k {
        for j in 0..n {
            out[i * n + j] = b[i * rs + j * cs];
        }
    }
}

/// Run-time packing of B from arena memory (for a product of two activations).
///
/// # Safety
/// `b` must be valid for reads of every `b[i * rs + j * cs]` (`i < k`, `j < n`) and `out` for
/// writes of [`packed_b_len`]`(k, n)` floats; the two must not overlap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn arenac_pack_b(
    k: usize,
    n: usize,
    b: *const f32,
    rs: usize,
    cs: usize,
    out: *mut f32,
) {
    for i in 0..k {
        for j in 0..n {
            // SAFETY: in bounds by the caller's contract above.
            unsafe { *out.add(i * n + j) = *b.add(i * rs + j * cs) };
        }
    }
}

/// `C = A * B (+ C when accumulate != 0)`.
///
/// # Safety
/// `a` valid for reads of `m` rows of `k` floats at row stride `lda`; `packed_b` for
/// [`packed_b_len`]`(k, n)` floats packed by [`pack_b`]/[`arenac_pack_b`]; `c` valid for reads
/// and writes of `m` rows of `n` floats at row stride `ldc`; `scratch` for
/// [`A_SCRATCH_FLOATS`] floats; C must not overlap A, B or scratch.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn arenac_sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    packed_b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: u32,
    scratch: *mut f32,
) {
    let _ = scratch;
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f32;
            for p in 0..k {
                // SAFETY: in bounds by the caller's contract above.
                acc += unsafe { *a.add(i * lda + p) * *packed_b.add(p * n + j) };
            }
            // SAFETY: in bounds by the caller's contract above.
            unsafe {
                let dst = c.add(i * ldc + j);
                *dst = if accumulate != 0 { *dst + acc } else { acc };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_product() {
        // A 2x3, B 3x2 given transposed (n x k storage: rs = 1, cs = 3).
        let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let bt = [7.0f32, 9.0, 11.0, 8.0, 10.0, 12.0];
        let mut packed = vec![0.0; packed_b_len(3, 2)];
        pack_b(3, 2, &bt, 1, 3, &mut packed);
        let mut c = [1.0f32; 4];
        let mut scratch = vec![0.0f32; A_SCRATCH_FLOATS + 1];
        // SAFETY: sizes match the contract.
        unsafe {
            arenac_sgemm(
                2,
                2,
                3,
                a.as_ptr(),
                3,
                packed.as_ptr(),
                c.as_mut_ptr(),
                2,
                1,
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(c, [59.0, 65.0, 140.0, 155.0]);
    }
}
