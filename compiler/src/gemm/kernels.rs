//! Micro-kernels: `MR x NR` tiles of `C (+)= A_panel * B_panel` over `kc` steps.
//!
//! Every kernel has the same shape of arguments ([`KernelFn`]):
//! - `a`: a packed A micro-panel, `kc` groups of `MR` floats (column `p` of the `MR` rows);
//! - `b`: a B micro-panel, `kc` rows of [`NR`] floats, row `p` at `b + p * brs` (`brs` is
//!   [`NR`] for a packed panel, the row stride for a row-major B); wide kernels (`MR x 2NR`)
//!   also read the next panel, at `b + bstride` (ignored by the others);
//! - `c`: a full `MR x NR` tile at row stride `ldc`, read (when `accumulate`) and written;
//! - `pf`, `pf_lines`: a hint: the kernel may prefetch the `pf_lines` cache lines (of `NR`
//!   floats) at `pf + i * brs` (the next B panel; wide kernels also from `pf + bstride`), spread
//!   over its steps; `pf` need not be valid.
//!
//! The driver sends edge tiles to a stack buffer, so kernels always handle full tiles.

use super::NR;

/// `unsafe fn(kc, a, b, bstride, brs, c, ldc, accumulate, pf, pf_lines)`; see the module
/// documentation.
pub(crate) type KernelFn = unsafe fn(
    usize,
    *const f32,
    *const f32,
    usize,
    usize,
    *mut f32,
    usize,
    bool,
    *const f32,
    usize,
);

/// Rows of the portable kernel.
pub(crate) const SCALAR_MR: usize = 4;

/// Portable kernel (`4 x 16`), written so that LLVM vectorizes it with the baseline ISA.
///
/// # Safety
/// `a` readable for `kc * 4` floats, `b` for `kc` rows of `NR` floats at stride `brs`, `c` readable and writable for
/// 4 rows of `NR` floats at row stride `ldc`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn kernel_scalar(
    kc: usize,
    a: *const f32,
    b: *const f32,
    _bstride: usize,
    brs: usize,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
    _pf: *const f32,
    _pf_lines: usize,
) {
    const MR: usize = SCALAR_MR;
    let mut acc = [[0.0f32; NR]; MR];
    // SAFETY: the caller guarantees `a` holds kc * MR floats.
    let a = unsafe { core::slice::from_raw_parts(a, kc * MR) };
    for (p, ap) in a.chunks_exact(MR).enumerate() {
        // SAFETY: row p < kc of the B panel, NR floats at b + p * brs by the caller's contract.
        let bp = unsafe { core::slice::from_raw_parts(b.wrapping_add(p * brs), NR) };
        for (row, &av) in acc.iter_mut().zip(ap) {
            for (x, &bv) in row.iter_mut().zip(bp) {
                *x += av * bv;
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        // SAFETY: row i < MR of the tile, NR floats, valid by the caller's contract; C does
        // not overlap the panels (which are only read, through slices made above).
        let dst = unsafe { core::slice::from_raw_parts_mut(c.add(i * ldc), NR) };
        if accumulate {
            for (d, &x) in dst.iter_mut().zip(row) {
                *d += x;
            }
        } else {
            dst.copy_from_slice(row);
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::NR;
    use core::arch::x86_64::*;

    /// Rows of the AVX2 kernel: 6 rows x 2 ymm = 12 accumulators, 2 B loads, 6 broadcasts.
    pub(crate) const AVX2_MR: usize = 6;

    /// AVX2 + FMA kernel, `6 x 16`.
    ///
    /// # Safety
    /// The CPU supports AVX2 and FMA; `a` readable for `kc * 6` floats, `b` for `kc` rows of 16 at stride `brs`, `c`
    /// readable and writable for 6 rows of 16 floats at row stride `ldc`.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn kernel_avx2(
        kc: usize,
        a: *const f32,
        b: *const f32,
        _bstride: usize,
        brs: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
        pf: *const f32,
        pf_lines: usize,
    ) {
        const MR: usize = AVX2_MR;
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        let mut a = a;
        let mut b = b;
        let mut pf = pf;
        let pf_steps = pf_lines.min(kc);
        let mut step = |a: *const f32, b: *const f32| {
            // SAFETY: each step reads NR floats of `b` (one row) and MR floats of `a`, kc steps in
            // all, within the panels the caller guarantees; unaligned loads need no alignment.
            unsafe {
                let b0 = _mm256_loadu_ps(b);
                let b1 = _mm256_loadu_ps(b.add(8));
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*a.add(i));
                    row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                    row[1] = _mm256_fmadd_ps(av, b1, row[1]);
                }
            }
        };
        for _ in 0..pf_steps {
            // A prefetch never faults, whatever the address (hence wrapping arithmetic).
            _mm_prefetch::<_MM_HINT_T0>(pf.cast::<i8>());
            pf = pf.wrapping_add(brs);
            step(a, b);
            a = a.wrapping_add(MR);
            b = b.wrapping_add(brs);
        }
        for _ in pf_steps..kc {
            step(a, b);
            a = a.wrapping_add(MR);
            b = b.wrapping_add(brs);
        }
        for (i, row) in acc.iter().enumerate() {
            // SAFETY: row i < MR of the C tile, 16 floats, readable and writable by the
            // caller's contract.
            unsafe {
                let p = c.add(i * ldc);
                let (mut r0, mut r1) = (row[0], row[1]);
                if accumulate {
                    r0 = _mm256_add_ps(r0, _mm256_loadu_ps(p));
                    r1 = _mm256_add_ps(r1, _mm256_loadu_ps(p.add(8)));
                }
                _mm256_storeu_ps(p, r0);
                _mm256_storeu_ps(p.add(8), r1);
            }
        }
    }

    /// Floats of A prefetched ahead by the AVX-512 kernels (32 steps: about a memory latency
    /// of `12 x 32` steps).
    const A_AHEAD: usize = AVX512_MR * 32;

    /// Rows of the AVX-512 kernels: `12 x 16` (12 zmm accumulators) for a last odd panel, and
    /// `12 x 32` over two panels (24 accumulators, 2 B loads and 12 broadcasts per 24 FMAs).
    pub(crate) const AVX512_MR: usize = 12;

    /// AVX-512F kernel, `12 x 16`.
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `a` readable for `kc * 12` floats, `b` for `kc` rows of 16 at stride `brs`, `c`
    /// readable and writable for 12 rows of 16 floats at row stride `ldc`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn kernel_avx512(
        kc: usize,
        a: *const f32,
        b: *const f32,
        _bstride: usize,
        brs: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
        pf: *const f32,
        pf_lines: usize,
    ) {
        const MR: usize = AVX512_MR;
        let mut acc = [_mm512_setzero_ps(); MR];
        let mut a = a;
        let mut b = b;
        let mut pf = pf;
        let pf_steps = pf_lines.min(kc);
        let mut step = |a: *const f32, b: *const f32| {
            // SAFETY: each step reads NR floats of `b` (one row) and MR floats of `a`, kc steps in
            // all, within the panels the caller guarantees; unaligned loads need no alignment.
            unsafe {
                // As in the wide kernel: fetch A ahead (a hint).
                _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add(A_AHEAD).cast::<i8>());
                let bv = _mm512_loadu_ps(b);
                for (i, row) in acc.iter_mut().enumerate() {
                    *row = _mm512_fmadd_ps(_mm512_set1_ps(*a.add(i)), bv, *row);
                }
            }
        };
        for _ in 0..pf_steps {
            // A prefetch never faults, whatever the address (hence wrapping arithmetic).
            _mm_prefetch::<_MM_HINT_T0>(pf.cast::<i8>());
            pf = pf.wrapping_add(brs);
            step(a, b);
            a = a.wrapping_add(MR);
            b = b.wrapping_add(brs);
        }
        for _ in pf_steps..kc {
            step(a, b);
            a = a.wrapping_add(MR);
            b = b.wrapping_add(brs);
        }
        for (i, &row) in acc.iter().enumerate() {
            // SAFETY: row i < MR of the C tile, 16 floats, readable and writable by the
            // caller's contract.
            unsafe {
                let p = c.add(i * ldc);
                let r = if accumulate {
                    _mm512_add_ps(row, _mm512_loadu_ps(p))
                } else {
                    row
                };
                _mm512_storeu_ps(p, r);
            }
        }
    }

    /// AVX-512F wide kernel, `12 x 32`, over the panels at `b` and `b + bstride`.
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `a` readable for `kc * 12` floats, `b` and `b + bstride` for
    /// `kc` rows of 16 at stride `brs` each, `c` readable and writable for 12 rows of 32 floats at row stride `ldc`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn kernel_avx512_wide(
        kc: usize,
        a: *const f32,
        b: *const f32,
        bstride: usize,
        brs: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
        pf: *const f32,
        pf_lines: usize,
    ) {
        const MR: usize = AVX512_MR;
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        let mut a = a;
        let mut b = b;
        let mut pf = pf;
        let pf_steps = pf_lines.min(kc);
        let mut step = |a: *const f32, b: *const f32| {
            // SAFETY: each step reads NR floats at `b` and at `b + bstride` and MR floats of
            // `a`, kc steps in all, within the panels the caller guarantees; unaligned loads.
            unsafe {
                // A packed once (conv weights) may come from memory: fetch it ahead (a hint,
                // it never faults, hence wrapping arithmetic).
                _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add(A_AHEAD).cast::<i8>());
                let b0 = _mm512_loadu_ps(b);
                let b1 = _mm512_loadu_ps(b.add(bstride));
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*a.add(i));
                    row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                    row[1] = _mm512_fmadd_ps(av, b1, row[1]);
                }
            }
        };
        for _ in 0..pf_steps {
            // A prefetch never faults, whatever the address (hence wrapping arithmetic).
            _mm_prefetch::<_MM_HINT_T0>(pf.cast::<i8>());
            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(bstride).cast::<i8>());
            pf = pf.wrapping_add(brs);
            step(a, b);
            a = a.wrapping_add(MR);
            b = b.wrapping_add(brs);
        }
        for _ in pf_steps..kc {
            step(a, b);
            a = a.wrapping_add(MR);
            b = b.wrapping_add(brs);
        }
        for (i, row) in acc.iter().enumerate() {
            // SAFETY: row i < MR of the C tile, 32 floats, readable and writable by the
            // caller's contract.
            unsafe {
                let p = c.add(i * ldc);
                let (mut r0, mut r1) = (row[0], row[1]);
                if accumulate {
                    r0 = _mm512_add_ps(r0, _mm512_loadu_ps(p));
                    r1 = _mm512_add_ps(r1, _mm512_loadu_ps(p.add(NR)));
                }
                _mm512_storeu_ps(p, r0);
                _mm512_storeu_ps(p.add(NR), r1);
            }
        }
    }
}

/// Edge kernels: the last micro-panel of a block when it has `h < MR` rows. The packed A
/// micro-panel keeps its `MR`-float groups (`MR - h` zero rows), but only `h` rows are
/// computed and stored, straight into C when the columns are whole: same chain of fused
/// multiply-adds per element as the full kernel, so the same bits.
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_edge {
    use super::{KernelFn, NR};
    use core::arch::x86_64::*;

    /// `M x (W * 16)` over an AVX-512 micro-panel (`MR = 12` floats per step).
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `a` readable for `kc * 12` floats, each of the `W` panels
    /// (at `b + j * bstride`) for `kc` rows of 16 at `brs`, `c` readable and writable for `M`
    /// rows of `W * 16` floats at `ldc`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn avx512<const M: usize, const W: usize>(
        kc: usize,
        a: *const f32,
        b: *const f32,
        bstride: usize,
        brs: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
        pf: *const f32,
        pf_lines: usize,
    ) {
        const MR: usize = super::x86::AVX512_MR;
        let mut acc = [[_mm512_setzero_ps(); W]; M];
        let pf_steps = pf_lines.min(kc);
        for p in 0..kc {
            if p < pf_steps {
                // A hint: never faults, whatever the address.
                for j in 0..W {
                    _mm_prefetch::<_MM_HINT_T0>(
                        pf.wrapping_add(p * brs + j * bstride).cast::<i8>(),
                    );
                }
            }
            // SAFETY: row p < kc of each panel and step p of the micro-panel (M < MR rows
            // of it), in bounds by the contract; unaligned loads.
            unsafe {
                let bp = b.add(p * brs);
                let mut bv = [_mm512_setzero_ps(); W];
                for (j, v) in bv.iter_mut().enumerate() {
                    *v = _mm512_loadu_ps(bp.add(j * bstride));
                }
                let ap = a.add(p * MR);
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*ap.add(i));
                    for (r, &v) in row.iter_mut().zip(&bv) {
                        *r = _mm512_fmadd_ps(av, v, *r);
                    }
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            for (j, &r) in row.iter().enumerate() {
                // SAFETY: row i < M, columns j*16..j*16+16 of the C tile.
                unsafe {
                    let p = c.add(i * ldc + j * NR);
                    let v = if accumulate {
                        _mm512_add_ps(r, _mm512_loadu_ps(p))
                    } else {
                        r
                    };
                    _mm512_storeu_ps(p, v);
                }
            }
        }
    }

    /// `M x 16` over an AVX2 micro-panel (`MR = 6` floats per step).
    ///
    /// # Safety
    /// The CPU supports AVX2 and FMA; `a` readable for `kc * 6` floats, `b` for `kc` rows of
    /// 16 at `brs`, `c` readable and writable for `M` rows of 16 floats at `ldc`.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn avx2<const M: usize>(
        kc: usize,
        a: *const f32,
        b: *const f32,
        _bstride: usize,
        brs: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
        pf: *const f32,
        pf_lines: usize,
    ) {
        const MR: usize = super::x86::AVX2_MR;
        let mut acc = [[_mm256_setzero_ps(); 2]; M];
        let pf_steps = pf_lines.min(kc);
        for p in 0..kc {
            if p < pf_steps {
                // A hint: never faults, whatever the address.
                _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(p * brs).cast::<i8>());
            }
            // SAFETY: row p < kc of the panel and step p of the micro-panel (M < MR rows).
            unsafe {
                let bp = b.add(p * brs);
                let (b0, b1) = (_mm256_loadu_ps(bp), _mm256_loadu_ps(bp.add(8)));
                let ap = a.add(p * MR);
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*ap.add(i));
                    row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                    row[1] = _mm256_fmadd_ps(av, b1, row[1]);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            // SAFETY: row i < M of the C tile, 16 floats.
            unsafe {
                let p = c.add(i * ldc);
                let (mut r0, mut r1) = (row[0], row[1]);
                if accumulate {
                    r0 = _mm256_add_ps(r0, _mm256_loadu_ps(p));
                    r1 = _mm256_add_ps(r1, _mm256_loadu_ps(p.add(8)));
                }
                _mm256_storeu_ps(p, r0);
                _mm256_storeu_ps(p.add(8), r1);
            }
        }
    }

    /// The AVX-512 edge kernel for `h` rows (1..=11) of `panels` (1 or 2) panels.
    pub(crate) fn avx512_edge(h: usize, panels: usize) -> Option<KernelFn> {
        /// Lists one instantiation per row count (no logic).
        macro_rules! sel {
            ($($n:literal),*) => {
                match (h, panels) {
                    $(($n, 1) => Some(avx512::<$n, 1> as KernelFn),
                      ($n, 2) => Some(avx512::<$n, 2> as KernelFn),)*
                    _ => None,
                }
            };
        }
        sel!(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    }

    /// The AVX2 edge kernel for `h` rows (1..=5) of one panel.
    pub(crate) fn avx2_edge(h: usize, panels: usize) -> Option<KernelFn> {
        if panels != 1 {
            return None;
        }
        match h {
            1 => Some(avx2::<1> as KernelFn),
            2 => Some(avx2::<2> as KernelFn),
            3 => Some(avx2::<3> as KernelFn),
            4 => Some(avx2::<4> as KernelFn),
            5 => Some(avx2::<5> as KernelFn),
            _ => None,
        }
    }
}

/// The small-`m` kernels of [`super::small`] for x86 (see there for the contract).
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_small {
    use super::NR;
    use crate::gemm::small::SmallFn;
    use core::arch::x86_64::*;

    /// `M x (W * 16)` with AVX-512F: `W` panels at `b + j * bstride`.
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `a` readable for `M` rows of `kc` floats at `lda`, each of
    /// the `W` panels for `kc` rows of 16 at `brs`, `c` for `M` rows of `W * 16` at `ldc`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn avx512_mw<const M: usize, const W: usize>(
        kc: usize,
        a: *const f32,
        lda: usize,
        b: *const f32,
        bstride: usize,
        brs: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        let mut acc = [[_mm512_setzero_ps(); W]; M];
        for p in 0..kc {
            // SAFETY: row p < kc of each panel, column p of each of the M rows of A: in
            // bounds by the contract; unaligned loads.
            unsafe {
                let bp = b.add(p * brs);
                let mut bv = [_mm512_setzero_ps(); W];
                for (j, v) in bv.iter_mut().enumerate() {
                    *v = _mm512_loadu_ps(bp.add(j * bstride));
                }
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*a.add(i * lda + p));
                    for (r, &v) in row.iter_mut().zip(&bv) {
                        *r = _mm512_fmadd_ps(av, v, *r);
                    }
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            for (j, &r) in row.iter().enumerate() {
                // SAFETY: row i < M, columns j*16..j*16+16 of the C tile.
                unsafe {
                    let p = c.add(i * ldc + j * NR);
                    let v = if accumulate {
                        _mm512_add_ps(r, _mm512_loadu_ps(p))
                    } else {
                        r
                    };
                    _mm512_storeu_ps(p, v);
                }
            }
        }
    }

    /// `M x 16` with AVX2 + FMA (two ymm per row).
    ///
    /// # Safety
    /// The CPU supports AVX2 and FMA; `a` readable for `M` rows of `kc` floats at `lda`, `b`
    /// for `kc` rows of 16 at `brs`, `c` for `M` rows of 16 at `ldc`.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn avx2_m<const M: usize>(
        kc: usize,
        a: *const f32,
        lda: usize,
        b: *const f32,
        _bstride: usize,
        brs: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        let mut acc = [[_mm256_setzero_ps(); 2]; M];
        for p in 0..kc {
            // SAFETY: row p < kc of the panel, column p of the M rows of A.
            unsafe {
                let bp = b.add(p * brs);
                let (b0, b1) = (_mm256_loadu_ps(bp), _mm256_loadu_ps(bp.add(8)));
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*a.add(i * lda + p));
                    row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                    row[1] = _mm256_fmadd_ps(av, b1, row[1]);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            // SAFETY: row i < M of the C tile, 16 floats.
            unsafe {
                let p = c.add(i * ldc);
                let (mut r0, mut r1) = (row[0], row[1]);
                if accumulate {
                    r0 = _mm256_add_ps(r0, _mm256_loadu_ps(p));
                    r1 = _mm256_add_ps(r1, _mm256_loadu_ps(p.add(8)));
                }
                _mm256_storeu_ps(p, r0);
                _mm256_storeu_ps(p.add(8), r1);
            }
        }
    }

    /// Lists one instantiation per row count (no logic).
    macro_rules! table {
        ($f:ident, $w:literal, $m:expr, [$($n:literal),*]) => {
            match $m {
                $($n => Some($f::<$n, $w> as SmallFn),)*
                _ => None,
            }
        };
    }

    /// The AVX-512 small kernel for `m` rows (1..=11) of `panels` (1 or 2) panels.
    pub(crate) fn avx512(m: usize, panels: usize) -> Option<SmallFn> {
        match panels {
            1 => table!(avx512_mw, 1, m, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
            2 => table!(avx512_mw, 2, m, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
            _ => None,
        }
    }

    /// The AVX2 small kernel for `m` rows (1..=5) of one panel.
    pub(crate) fn avx2(m: usize) -> Option<SmallFn> {
        match m {
            1 => Some(avx2_m::<1> as SmallFn),
            2 => Some(avx2_m::<2> as SmallFn),
            3 => Some(avx2_m::<3> as SmallFn),
            4 => Some(avx2_m::<4> as SmallFn),
            5 => Some(avx2_m::<5> as SmallFn),
            _ => None,
        }
    }
}
