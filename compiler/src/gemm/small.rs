//! Products with fewer rows than the micro-kernel (`m < MR`): `M=1` Gemm/MatMul (one sample
//! through a dense layer, a decoder step, a recurrent cell at batch 1) and the last rows of an
//! M-split.
//!
//! The `MR x 2NR` micro-kernel would compute `MR` rows, all but `m` of them on zero padding
//! (11 of 12 FMAs wasted at `m = 1`). These kernels compute exactly `m` rows, read A in place
//! (row-major, no packing) and B panel by panel as the core does, over the same K blocks. Each
//! element is the same chain of fused multiply-adds over `k` (plain multiply-adds for the
//! portable kernel, as its micro-kernel), then added to C: the same bits as the micro-kernel
//! gives, so splitting a product by rows never changes a result.

#[cfg(target_arch = "x86_64")]
use super::kernels::x86_small;
use super::{BView, KC, Kernel, NR};

/// Widest tile a small kernel writes: two panels.
const W2: usize = 2 * NR;

/// `unsafe fn(kc, a, lda, b, bstride, brs, c, ldc, accumulate)`: `m` rows (fixed by the
/// function) of one panel (or two, at `b` and `b + bstride`) over `kc` steps; A row-major at
/// stride `lda`, B rows at stride `brs`; C is a full tile at stride `ldc`.
pub(crate) type SmallFn =
    unsafe fn(usize, *const f32, usize, *const f32, usize, usize, *mut f32, usize, bool);

/// The small kernel for `m` rows of `panels` (1 or 2) panels on `kernel`'s instruction set,
/// if it has one for that many rows.
pub(crate) fn small_kernel(kernel: &Kernel, m: usize, panels: usize) -> Option<SmallFn> {
    if m == 0 || m >= kernel.mr {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if kernel.name.starts_with("avx512") {
            return x86_small::avx512(m, panels);
        }
        if kernel.name.starts_with("avx2") {
            return (panels == 1).then(|| x86_small::avx2(m)).flatten();
        }
    }
    (panels == 1).then(|| portable(m)).flatten()
}

/// Whether [`sgemm_small`] takes an `m`-row product on `kernel`.
pub(crate) fn takes(kernel: &Kernel, m: usize) -> bool {
    small_kernel(kernel, m, 1).is_some()
}

/// `C = A * B (+ C)` for `m < MR` rows (see [`takes`]), A row-major.
///
/// # Safety
/// `a` readable for `m` rows of `k` floats at stride `lda`; `b` as the core reads it; `c`
/// readable and writable for `m` rows of `n` floats at stride `ldc`, overlapping nothing else;
/// `takes(kernel, m)`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm_small(
    kernel: &Kernel,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: BView,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
    mut pbuf: Option<&mut super::lowp::PanelBuf>,
) {
    let panels = n.div_ceil(NR);
    let kblocks = k.div_ceil(KC);
    let kc_max = k.div_ceil(kblocks.max(1));
    let mut pc = 0;
    while pc < k {
        let kc = kc_max.min(k - pc);
        let acc = accumulate || pc > 0;
        let mut jp = 0;
        while jp < panels {
            // Two panels at once where the micro-kernel would (two in-place panels left) and
            // the instruction set has a two-panel small kernel.
            let wide = (jp + 1 < panels && jp + 1 < b.full)
                .then(|| small_kernel(kernel, m, 2))
                .flatten();
            let (f, np) = match wide {
                Some(f) => (f, 2),
                None => match small_kernel(kernel, m, 1) {
                    Some(f) => (f, 1),
                    None => return,
                },
            };
            let width = np * NR;
            let j0 = jp * NR;
            let w = width.min(n - j0);
            // SAFETY: panels jp..jp+np exist (the contract on B).
            let (bp, brs, bstride) = unsafe { b.panels((jp, np), (pc, kc), pbuf.as_deref_mut()) };
            let ap = a.wrapping_add(pc);
            if w == width {
                // SAFETY: rows 0..m, columns j0..j0+width of C and columns pc..pc+kc of A
                // are in bounds by the contract; the panels hold kc rows at stride brs.
                unsafe { f(kc, ap, lda, bp, bstride, brs, c.add(j0), ldc, acc) };
            } else {
                let mut tile = [0.0f32; 12 * W2];
                // SAFETY: the tile holds m < 12 rows of `width` floats; A and B as above.
                unsafe {
                    f(
                        kc,
                        ap,
                        lda,
                        bp,
                        bstride,
                        brs,
                        tile.as_mut_ptr(),
                        width,
                        false,
                    )
                };
                for (r, trow) in tile.chunks_exact(width).take(m).enumerate() {
                    // SAFETY: row r < m, columns j0..j0+w <= n of C.
                    let dst = unsafe { std::slice::from_raw_parts_mut(c.add(r * ldc + j0), w) };
                    if acc {
                        for (d, &x) in dst.iter_mut().zip(trow) {
                            *d += x;
                        }
                    } else {
                        dst.copy_from_slice(&trow[..w]);
                    }
                }
            }
            jp += np;
        }
        pc += kc;
    }
}

/// The portable small kernel for `m` rows (the portable micro-kernel has 4).
fn portable(m: usize) -> Option<SmallFn> {
    match m {
        1 => Some(small_portable::<1>),
        2 => Some(small_portable::<2>),
        3 => Some(small_portable::<3>),
        _ => None,
    }
}

/// `M x 16`, written like the portable micro-kernel (multiply, then add).
///
/// # Safety
/// As [`SmallFn`]: `a` readable for `M` rows of `kc` floats at `lda`, `b` for `kc` rows of 16
/// at `brs`, `c` for `M` rows of 16 at `ldc`.
#[allow(clippy::too_many_arguments)]
unsafe fn small_portable<const M: usize>(
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
    let mut acc = [[0.0f32; NR]; M];
    for p in 0..kc {
        // SAFETY: row p < kc of the panel.
        let bp = unsafe { core::slice::from_raw_parts(b.add(p * brs), NR) };
        for (i, row) in acc.iter_mut().enumerate() {
            // SAFETY: row i < M of A, column p < kc.
            let av = unsafe { *a.add(i * lda + p) };
            for (x, &bv) in row.iter_mut().zip(bp) {
                *x += av * bv;
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        // SAFETY: row i < M of the tile.
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
