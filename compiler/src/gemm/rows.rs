//! Products with few rows of A (`m <= ROWS_MAX`): a batch-1 MatMul, a recurrent step, a
//! classifier head. The micro-kernels always compute `MR` rows (12 for AVX-512), so on one row
//! they would waste most of their work; here each B panel row is read once and multiplied into
//! every row of A, with [`SPLIT`] partial sums per row over interleaved steps of K so the
//! multiply-add chains overlap. A is read in place (no packing, no scratch).
//!
//! Same contract as the blocked product for row-major A; the partial sums make the rounding
//! differ from it (both are within the usual float error of a dot product).

use super::{BView, NR};

/// Most rows of A taken by this path.
pub(crate) const ROWS_MAX: usize = 4;

/// Partial sums per row (interleaved steps of K).
const SPLIT: usize = 4;

/// `unsafe fn(m, n, k, a, lda, b, c, ldc, accumulate)` for `m <= ROWS_MAX`.
pub(crate) type RowsFn =
    unsafe fn(usize, usize, usize, *const f32, usize, &BView, *mut f32, usize, bool);

/// `C (+)= A * B` for `R` rows; `FMA` fuses each multiply-add (only where the CPU has FMA).
///
/// # Safety
/// `a` readable for `R` rows of `k` floats at stride `lda`; `b` panels holding `k` rows each
/// ([`BView::panel`]); `c` readable and writable for `R` rows of `n` floats at stride `ldc`,
/// overlapping neither.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn body<const R: usize, const FMA: bool>(
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: &BView,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    let madd = |x: f32, y: f32, acc: f32| if FMA { x.mul_add(y, acc) } else { acc + x * y };
    // SAFETY: R rows of k floats at stride lda, by the contract.
    let rows: [&[f32]; R] =
        std::array::from_fn(|r| unsafe { std::slice::from_raw_parts(a.wrapping_add(r * lda), k) });
    for jp in 0..n.div_ceil(NR) {
        let (bp, brs) = b.panel(jp, 0);
        let mut acc = [[[0.0f32; NR]; R]; SPLIT];
        // Step p of K into partial sum `part`.
        let step = |part: &mut [[f32; NR]; R], p: usize| {
            // SAFETY: row p < k of panel jp: NR floats at bp + p * brs, by the contract.
            let brow = unsafe { &*bp.wrapping_add(p * brs).cast::<[f32; NR]>() };
            for (row, sums) in rows.iter().zip(part.iter_mut()) {
                let x = row.get(p).copied().unwrap_or(0.0);
                for (s, &y) in sums.iter_mut().zip(brow) {
                    *s = madd(x, y, *s);
                }
            }
        };
        let mut p = 0;
        while p + SPLIT <= k {
            for (q, part) in acc.iter_mut().enumerate() {
                step(part, p + q);
            }
            p += SPLIT;
        }
        while p < k {
            step(&mut acc[0], p);
            p += 1;
        }
        let j0 = jp * NR;
        let w = NR.min(n - j0);
        let [a0, a1, a2, a3] = &acc;
        for (r, (((s0, s1), s2), s3)) in a0.iter().zip(a1).zip(a2).zip(a3).enumerate() {
            // SAFETY: row r < R, columns j0..j0 + w <= n of C, by the contract.
            let dst = unsafe { std::slice::from_raw_parts_mut(c.add(r * ldc + j0), w) };
            for (l, d) in dst.iter_mut().enumerate() {
                let sum = (s0[l] + s1[l]) + (s2[l] + s3[l]);
                *d = if accumulate { *d + sum } else { sum };
            }
        }
    }
}

/// Dispatches on `m` (1 to [`ROWS_MAX`]; other values do nothing).
///
/// # Safety
/// That of [`body`] for `m` rows.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn rows<const FMA: bool>(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: &BView,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    // SAFETY: the caller's contract, for m rows.
    unsafe {
        match m {
            1 => body::<1, FMA>(n, k, a, lda, b, c, ldc, accumulate),
            2 => body::<2, FMA>(n, k, a, lda, b, c, ldc, accumulate),
            3 => body::<3, FMA>(n, k, a, lda, b, c, ldc, accumulate),
            4 => body::<4, FMA>(n, k, a, lda, b, c, ldc, accumulate),
            _ => {}
        }
    }
}

/// Portable form (vectorized with the baseline ISA).
///
/// # Safety
/// See [`RowsFn`] and [`body`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rows_scalar(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: &BView,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    // SAFETY: the caller's contract.
    unsafe { rows::<false>(m, n, k, a, lda, b, c, ldc, accumulate) }
}

/// AVX2 + FMA form.
///
/// # Safety
/// See [`RowsFn`] and [`body`]; the CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rows_avx2(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: &BView,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    // SAFETY: the caller's contract.
    unsafe { rows::<true>(m, n, k, a, lda, b, c, ldc, accumulate) }
}

/// AVX-512 form (one 16-float row of a panel per register).
///
/// # Safety
/// See [`RowsFn`] and [`body`]; the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rows_avx512(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: &BView,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    // SAFETY: the caller's contract.
    unsafe { rows::<true>(m, n, k, a, lda, b, c, ldc, accumulate) }
}
