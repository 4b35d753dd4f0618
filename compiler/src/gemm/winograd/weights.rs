//! [`run`](super::run)'s step 1: the 36 transformed weight matrices `U_p = (G g Gᵀ)_p` of a
//! convolution from its OIHW weights (f32, or stored reduced), packed for the selected
//! micro-kernel: per run into the scratch's head ([`transform_per_run`],
//! [`transform_channels`] for a staged Conv's passes) or at compile time into the weights
//! region ([`transform_weights`]); the same code, the same bits.

use super::transform::{self, L};
use super::{Isa, POS, isa, u_len, weights_floats};
use crate::gemm::conv::ConvParams;
use crate::gemm::lowp::conv::{Layout, Reduced, WINO_CI};
use crate::gemm::split::SyncPtr;
use crate::gemm::{KC, selected_kernel};

/// [`run`](super::run)'s step 1: the 36 transformed weight matrices of `p` from its OIHW weights `w`
/// (f32, or stored reduced as `p.wtype` says) into `u`, whole micro-panels of rows (at most
/// [`L`]) per task over the current pool: the bits [`transform_weights`] writes. Also what a
/// staged Conv's Winograd bands read, transformed once per run
/// (`crate::gemm::stage16::conv`).
///
/// # Safety
/// `w` readable for `m * c * 9` floats (or the reduced OIHW weights `p.wtype` names); `u`
/// writable for [`weights_floats`] floats, 64-aligned, overlapping nothing else.
pub(crate) unsafe fn transform_per_run(p: &ConvParams, w: *const f32, u: *mut f32) {
    // SAFETY: the caller's contract.
    unsafe { transform_src(p, (w, Reduced::of(p, w, Layout::Oihw)), u) };
}

/// [`transform_per_run`] of output channels `m0 .. m0 + mc` of `p` only (the matrices of
/// `p` restricted to `mc` channels): a pass of a staged Conv's Winograd bands.
///
/// # Safety
/// `w` as [`transform_per_run`] says for the whole `p`, `m0 + mc <= p.m`; `u` writable for
/// [`weights_floats`] of `mc` channels, 64-aligned, overlapping nothing else.
pub(crate) unsafe fn transform_channels(
    p: &ConvParams,
    w: *const f32,
    (m0, mc): (usize, usize),
    u: *mut f32,
) {
    let k = p.c as usize * 9;
    let pm = ConvParams { m: mc as u64, ..*p };
    let lowp = Reduced::of(p, w, Layout::Oihw).map(|r| r.rows_from(m0, k));
    // SAFETY: rows m0.. of the weights (f32, or reduced through the shifted view).
    unsafe { transform_src(&pm, (w.wrapping_add(m0 * k), lowp), u) };
}

/// [`transform_per_run`] from the weights `src`.
///
/// # Safety
/// As [`transform_per_run`], `src` the weights of `p`'s `m` channels.
unsafe fn transform_src(p: &ConvParams, src: Src, u: *mut f32) {
    let mr = selected_kernel().mr;
    let m_pad = (p.m as usize).div_ceil(mr) * mr;
    let u_one = u_len(p);
    let width = (p.threads.max(1) as usize).min(crate::par::threads());
    let isa = isa();
    let (w, lowp) = src;
    let (ws, us) = (SyncPtr(w.cast_mut()), SyncPtr(u));
    let per_task = L / mr * mr;
    let groups = m_pad.div_ceil(per_task);
    crate::par::for_each(groups, width, |gi, _| {
        let rows = gi * per_task..((gi + 1) * per_task).min(m_pad);
        let src = (ws.get().cast_const(), lowp);
        // SAFETY: rows `rows` of the 36 packed matrices in `u`, written by this task only;
        // the weights readable for m * c * 9 floats, or stored reduced in `lowp::conv`'s
        // OIHW layout (contract).
        unsafe { weights_dispatch(isa, p, src, us.get(), (u_one, m_pad, mr), rows) };
    });
}

/// Writes the 36 transformed weight matrices of `p` ([`run`](super::run)'s step 1, the same code and
/// the same bits) for the selected kernel from the OIHW f32 weights `w` into `out`: what
/// [`WINOGRAD_U_PACKED`](super::WINOGRAD_U_PACKED) reads. At compile time, on the calling thread. `false` (nothing
/// written) when `w` holds fewer than `m * c * 9` floats or `out` fewer than
/// [`weights_floats`].
pub fn transform_weights(p: &ConvParams, w: &[f32], out: &mut [f32]) -> bool {
    let (m, c) = (p.m as usize, p.c as usize);
    if w.len() < m.saturating_mul(c).saturating_mul(9) || out.len() < weights_floats(p) {
        return false;
    }
    let mr = selected_kernel().mr;
    let m_pad = m.div_ceil(mr) * mr;
    let per_task = L / mr * mr;
    let p32 = ConvParams { wtype: 0, ..*p };
    for gi in 0..m_pad.div_ceil(per_task) {
        let rows = gi * per_task..((gi + 1) * per_task).min(m_pad);
        // SAFETY: `w` holds m * c * 9 floats, `out` the 36 matrices of u_len floats (both
        // checked above); rows are whole micro-panels inside m_pad.
        unsafe {
            weights_dispatch(
                isa(),
                &p32,
                (w.as_ptr(), None),
                out.as_mut_ptr(),
                (u_len(p), m_pad, mr),
                rows,
            )
        };
    }
    true
}
/// Input channels whose taps [`weights_rows`] gathers, then transforms, then stores
/// together (45 KiB of stack at 16).
const CB: usize = 16;

/// The weights [`weights_body`] reads: f32 OIHW at the pointer, or reduced ones
/// ([`crate::gemm::lowp::conv`], OIHW) when given.
type Src = (*const f32, Option<Reduced>);

/// [`weights_body`] compiled for `isa`.
///
/// # Safety
/// That of [`weights_body`].
unsafe fn weights_dispatch(
    isa: Isa,
    p: &ConvParams,
    w: Src,
    u: *mut f32,
    lay: (usize, usize, usize),
    rows: std::ops::Range<usize>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn avx512(
            p: &ConvParams,
            w: Src,
            u: *mut f32,
            lay: (usize, usize, usize),
            rows: std::ops::Range<usize>,
        ) {
            // SAFETY: the caller's contract.
            unsafe { weights_body(p, w, u, lay, rows) }
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(
            p: &ConvParams,
            w: Src,
            u: *mut f32,
            lay: (usize, usize, usize),
            rows: std::ops::Range<usize>,
        ) {
            // SAFETY: the caller's contract.
            unsafe { weights_body(p, w, u, lay, rows) }
        }
        match isa {
            // SAFETY: the variant matches the selected kernel, which this CPU runs.
            Isa::Avx512 => return unsafe { avx512(p, w, u, lay, rows) },
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { avx2(p, w, u, lay, rows) },
            Isa::Portable => {}
        }
    }
    let _ = isa;
    // SAFETY: the caller's contract.
    unsafe { weights_body(p, w, u, lay, rows) }
}

/// [`weights_rows`] for the micro-panel height `lay.2` (12, 6 or 4, the kernels' `MR`: each
/// column copy a fixed-size move; any other height through a copy of that length).
///
/// # Safety
/// That of [`weights_rows`].
#[inline(always)]
unsafe fn weights_body(
    p: &ConvParams,
    w: Src,
    u: *mut f32,
    lay: (usize, usize, usize),
    rows: std::ops::Range<usize>,
) {
    // SAFETY: the caller's contract; `MR` is `lay.2` (or 0: the run-time height).
    unsafe {
        match lay.2 {
            12 => weights_rows::<12>(p, w, u, lay, rows),
            6 => weights_rows::<6>(p, w, u, lay, rows),
            4 => weights_rows::<4>(p, w, u, lay, rows),
            _ => weights_rows::<0>(p, w, u, lay, rows),
        }
    }
}

/// Rows `rows` (whole micro-panels of `mr` rows, at most [`L`], inside `m_pad`) of the 36
/// transformed weight matrices, each `u_one` floats from `u` and packed for micro-kernels of
/// `mr` rows (`lay = (u_one, m_pad, mr)`: [`crate::gemm::pack_a_all`]'s layout); rows past `m` are
/// zeros. Each position's micro-panel column is `mr` contiguous floats: one copy.
///
/// With reduced weights (`w.1`), each row's run of up to [`WINO_CI`] input channels is
/// widened (exactly, or `q * scale`) into a stack buffer as the transform reaches it: the
/// matrices are those f32 weights of the widened values would give.
///
/// `MR` is `mr` (a fixed-size copy per column), or 0 for a copy of `mr` floats.
/// Columns go out [`CB`] at a time, each matrix's run of them contiguous.
///
/// # Safety
/// `w.0` readable for `m * c * 9` floats, or the reduced OIHW weights `w.1` describes; `u`
/// writable for `36 * u_one` floats; nothing else writes these rows meanwhile.
#[inline(always)]
unsafe fn weights_rows<const MR: usize>(
    p: &ConvParams,
    (w, lowp): Src,
    u: *mut f32,
    (u_one, m_pad, mr): (usize, usize, usize),
    rows: std::ops::Range<usize>,
) {
    let (m, k) = (p.m as usize, p.c as usize);
    let kc_max = k.div_ceil(k.div_ceil(KC));
    let lanes = rows.len();
    // The taps of up to CB input channels, gathered lane by lane before any is transformed
    // (a vector load right after the scalar stores of its lanes stalled on forwarding).
    let mut gb = [[[0.0f32; L]; 9]; CB];
    // The transformed kernels of up to CB consecutive input channels, stored after them: each
    // matrix's micro-panel then takes CB columns as one contiguous run (36 interleaved
    // single-column stores overran the write buffers on VGG's 512-channel convs).
    let mut tb = [[[0.0f32; L]; POS]; CB];
    // Reduced weights: lane l's taps of input channels ci0 .. ci0 + WINO_CI, widened.
    let mut wide = [[0.0f32; WINO_CI * 9]; L];
    let mut pc = 0;
    while pc < k {
        let kc = kc_max.min(k - pc);
        let mut c0 = pc;
        while c0 < pc + kc {
            let nb = CB.min(pc + kc - c0);
            for (q, g) in gb.iter_mut().enumerate().take(nb) {
                let ci = c0 + q;
                if let Some(r) = &lowp {
                    let j = (ci - pc) % WINO_CI;
                    if j == 0 {
                        let n = WINO_CI.min(pc + kc - ci) * 9;
                        for (l, row) in rows.clone().enumerate() {
                            if row < m {
                                // SAFETY: row < m, channels ci .. ci + n / 9 <= c: n
                                // elements of row `row` of the OIHW weights, and its scale;
                                // lane l's buffer holds WINO_CI * 9 >= n floats.
                                unsafe {
                                    r.widen((row * k + ci) * 9, n, wide[l].as_mut_ptr(), (row, 1))
                                };
                            }
                        }
                    }
                    for (l, row) in rows.clone().enumerate() {
                        for (s, gs) in g.iter_mut().enumerate() {
                            gs[l] = if row < m { wide[l][j * 9 + s] } else { 0.0 };
                        }
                    }
                } else {
                    for (l, row) in rows.clone().enumerate() {
                        for (s, gs) in g.iter_mut().enumerate() {
                            gs[l] = if row < m {
                                // SAFETY: row < m, ci < c, s < 9: inside the weights.
                                unsafe { *w.add((row * k + ci) * 9 + s) }
                            } else {
                                0.0
                            };
                        }
                    }
                }
            }
            for (g, t) in gb.iter().zip(tb.iter_mut()).take(nb) {
                transform::weights(g, t);
            }
            for pos in 0..POS {
                let mut l = 0;
                while l < lanes {
                    let row = rows.start + l;
                    // Micro-panel row / mr of K block pc, columns c0 - pc .. + nb.
                    let at = pos * u_one + pc * m_pad + row / mr * mr * kc + (c0 - pc) * mr;
                    for (q, t) in tb.iter().enumerate().take(nb) {
                        let src = t[pos].as_ptr().wrapping_add(l);
                        // SAFETY: rows row..row+mr (one micro-panel, row a multiple of mr)
                        // of column c0 + q < pc + kc: mr floats inside matrix pos
                        // (packed_a_len(m, k) floats); lanes l..l+mr < L of t[pos].
                        unsafe {
                            let dst = u.add(at + q * mr);
                            if MR == 0 {
                                std::ptr::copy_nonoverlapping(src, dst, mr);
                            } else {
                                std::ptr::copy_nonoverlapping(src, dst, MR);
                            }
                        }
                    }
                    l += mr;
                }
            }
            c0 += nb;
        }
        pc += kc;
    }
}
