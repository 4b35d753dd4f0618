//! The small-plane pointwise kernel on 16-bit planes (`--activations f16|bf16`), unstaged:
//! the tiles read the input planes' f16/bf16 values and write the output planes' values
//! directly, with the f32 kernel's task split and threading and no scratch.
//!
//! A tile widens its pixels' values of a block of [`KC`] input channels into a buffer on the
//! stack (one masked 16-lane load and one conversion per channel, `vcvtph2ps` / a shift for
//! bf16: `crate::gemm::stage16::convert`'s `widen16`), then accumulates that block from the
//! buffer exactly as the f32 tile does from the planes: one fused multiply-add chain per
//! element over all of K in order, from zero. The epilogue (int8 scales, bias, activation) is
//! the f32 tile's; after the in-register transpose each channel's pixels are rounded to
//! nearest even (`narrow16`, the rounding of `crate::gemm::stage16::narrow`) and stored as
//! 16-bit values under a mask. So every output is the f32 kernel's result on the widened
//! input rounded once: the bits of the staged path (widen, f32 kernel, narrow).
//!
//! Tiles of 1..12 pixels run the kernel of 4, 8 or 12 rows (the rows past the tile read
//! zeros and are not stored). AVX-512 (F, BW, VL) only: elsewhere the Conv stays staged.

use super::{BF16, Epilogue, F16, Isa, NR, isa};
use crate::gemm::conv::ConvParams;
use crate::gemm::lowp::conv::{Layout, Reduced};
use crate::gemm::stage16::N16;

/// Input channels a tile widens into its stack buffer at a time (8 KiB of f32 rows).
const KC: usize = 128;

/// Whether [`run16`] computes `p` (weights packed for [`super::run`]: `packed_a` is
/// [`super::PW_SMALL_PACKED`]) on 16-bit planes: [`super::applies`] holds, the AVX-512
/// kernels are selected and the CPU has AVX-512BW/VL (and `ARENAC_PW16_DIRECT` is not `0`:
/// the staged path instead, for comparisons). The planner and the lowering ask the same.
pub(crate) fn direct16(p: &ConvParams) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("ARENAC_PW16_DIRECT").map_or(true, |v| v != "0"))
        && p.packed_a == super::PW_SMALL_PACKED
        && super::applies(p)
        && isa() == Some(Isa::Avx512)
        && cpu_has_bw()
}

fn cpu_has_bw() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `y = act(conv(x, w) + bias)` of a pointwise `p` on 16-bit planes of type `t`, spread over
/// the current pool as [`super::run`] spreads f32 planes; the weights stored reduced when
/// `p.wtype` says so ([`Layout::PwSmall`]).
///
/// # Safety
/// [`direct16`] holds for `p`; that of [`super::run`] with `x` and `y` 16-bit planes
/// (`n*c*pixels` and `n*m*pixels` values of type `t`) and `w` packed for `p` (by
/// [`super::pack`], or `crate::gemm::lowp::conv::pack` in [`Layout::PwSmall`] when
/// `p.wtype` is reduced).
pub(crate) unsafe fn run16(
    t: N16,
    p: &ConvParams,
    x: *const u16,
    w: *const f32,
    bias: *const f32,
    y: *mut u16,
) {
    let lowp = Reduced::of(p, w, Layout::PwSmall);
    let e = match t {
        N16::F16 => F16,
        N16::Bf16 => BF16,
    };
    // SAFETY: the caller's contract; the tiles cast the planes back to 16 bits.
    unsafe { super::run_elem(p, x.cast(), w, bias, y.cast(), lowp, e) };
}

/// [`super::task`] on 16-bit planes of type `e`.
///
/// # Safety
/// That of [`super::task`] with 16-bit planes; [`direct16`] held for the node.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn task(
    e: u8,
    tcode: u64,
    (k, pixels, nch): (usize, usize, usize),
    px: std::ops::Range<usize>,
    x: *const u16,
    b: *const u8,
    y: *mut u16,
    epi: Epilogue,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let panels = nch.div_ceil(NR);
        let mut px0 = px.start;
        while px0 < px.end {
            let h = super::x86::MR512.min(px.end - px0);
            if let Some(f) = x86::tile_for(h.next_multiple_of(4), panels, tcode, e) {
                // SAFETY: pixels px0..px0+h of the k planes and of the nch output rows (the
                // caller's contract); the panels.
                unsafe {
                    f(
                        k,
                        x.add(px0),
                        pixels,
                        b,
                        k * NR,
                        y.add(px0),
                        pixels,
                        (nch, h),
                        epi,
                    )
                };
            }
            px0 += h;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (e, tcode, k, pixels, nch, px, x, b, y, epi);
}

/// `unsafe fn(k, x, ldx, b, bstride, y, ldy, (nch, h), epilogue)`: as the f32 tiles
/// (`super::TileFn`), on 16-bit planes, for the first `h` of the function's rows.
type Tile16 = unsafe fn(
    usize,
    *const u16,
    usize,
    *const u8,
    usize,
    *mut u16,
    usize,
    (usize, usize),
    Epilogue,
);

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::x86::{B_AHEAD, elem_bytes, load16, transpose16};
    use super::{BF16, Epilogue, F16, KC, NR, Tile16};
    use crate::gemm::act::x86::act512;
    use crate::gemm::stage16::N16;
    use crate::gemm::stage16::convert::x86::{narrow16, widen16};
    use core::arch::x86_64::*;
    use std::mem::MaybeUninit;

    /// `M` pixels (the first `h` stored) x `W` panels of 16 channels of weights of type `T`,
    /// on planes of type `E`.
    ///
    /// # Safety
    /// The CPU has AVX-512F/BW/VL, AVX2 and FMA; `x` readable for `k` rows of `h <= M <= 16`
    /// values at stride `ldx`; `b` for `W` panels (at element `j * bstride`) of `k` rows of
    /// 16 elements of type `T`; `y` writable for `nch <= 16 W` rows of `h` values at stride
    /// `ldy`; `bias` null or readable for `nch`, `scales` null or readable for `16 W`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const M: usize, const W: usize, const T: u64, const E: u8>(
        k: usize,
        x: *const u16,
        ldx: usize,
        b: *const u8,
        bstride: usize,
        y: *mut u16,
        ldy: usize,
        (nch, h): (usize, usize),
        Epilogue { bias, scales, act }: Epilogue,
    ) {
        let t = if E == F16 { N16::F16 } else { N16::Bf16 };
        let eb = elem_bytes(T);
        let hmask: __mmask16 = ((1u32 << h.min(16)) - 1) as u16;
        let mut acc = [[_mm512_setzero_ps(); W]; M];
        // The widened rows of a block of input channels (each row's lanes past `h` zero).
        let mut buf = MaybeUninit::<[__m512; KC]>::uninit();
        let rows = buf.as_mut_ptr().cast::<__m512>();
        let mut p0 = 0;
        while p0 < k {
            let kc = KC.min(k - p0);
            for r in 0..kc {
                // SAFETY: the first h values of row p0 + r < k (masked: nothing past them is
                // read); row r < KC of the buffer.
                unsafe {
                    let v = _mm256_maskz_loadu_epi16(hmask, x.add((p0 + r) * ldx).cast());
                    rows.add(r).write(widen16(t, v));
                }
            }
            let xs = rows.cast::<f32>().cast_const();
            for r in 0..kc {
                let p = p0 + r;
                // As in the f32 tile: the weights ahead (a hint, never faults).
                for j in 0..W {
                    let ahead = b.wrapping_add(((p + B_AHEAD) * NR + j * bstride) * eb);
                    _mm_prefetch::<_MM_HINT_T0>(ahead.cast::<i8>());
                }
                // SAFETY: row p < k of each panel (the contract); row r of the buffer, written
                // above.
                unsafe {
                    let mut bv = [_mm512_setzero_ps(); W];
                    for (j, v) in bv.iter_mut().enumerate() {
                        *v = load16::<T>(b, p * NR + j * bstride);
                    }
                    let xp = xs.add(r * 16);
                    for (i, row) in acc.iter_mut().enumerate() {
                        let av = _mm512_set1_ps(*xp.add(i));
                        for (a, &v) in row.iter_mut().zip(&bv) {
                            *a = _mm512_fmadd_ps(av, v, *a);
                        }
                    }
                }
            }
            p0 += kc;
        }
        for j in 0..W {
            let chans = nch.saturating_sub(j * NR).min(NR);
            if !scales.is_null() {
                // SAFETY: the panel's 16 scales (the contract).
                let sv = unsafe { _mm512_loadu_ps(scales.add(j * NR)) };
                for row in acc.iter_mut() {
                    row[j] = _mm512_mul_ps(row[j], sv);
                }
            }
            let bv = if bias.is_null() {
                _mm512_setzero_ps()
            } else {
                let m: __mmask16 = ((1u32 << chans) - 1) as u16;
                // SAFETY: channels j*16..j*16+chans < nch of the bias (the contract).
                unsafe { _mm512_maskz_loadu_ps(m, bias.add(j * NR)) }
            };
            for row in acc.iter_mut() {
                row[j] = act512(act, _mm512_add_ps(row[j], bv));
            }
            let mut tr = [_mm512_setzero_ps(); 16];
            for (i, r) in tr.iter_mut().take(M).enumerate() {
                *r = acc[i][j];
            }
            let cols = transpose16(tr);
            for (ci, &v) in cols.iter().take(chans).enumerate() {
                // SAFETY: the first h values of row j*16 + ci < nch of y.
                unsafe {
                    _mm256_mask_storeu_epi16(
                        y.add((j * NR + ci) * ldy).cast(),
                        hmask,
                        narrow16(t, v),
                    )
                };
            }
        }
    }

    /// The tile of `m` rows (4, 8 or 12) for `panels` (1 or 2) panels of weights of type `t`
    /// (0..=3, [`crate::gemm::lowp::WeightType::code`]) on planes of type `e`.
    pub(super) fn tile_for(m: usize, panels: usize, t: u64, e: u8) -> Option<Tile16> {
        match e {
            F16 => of_elem::<F16>(m, panels, t),
            BF16 => of_elem::<BF16>(m, panels, t),
            _ => None,
        }
    }

    /// [`tile_for`] on planes of type `E`.
    fn of_elem<const E: u8>(m: usize, panels: usize, t: u64) -> Option<Tile16> {
        match t {
            0 => of::<0, E>(m, panels),
            1 => of::<1, E>(m, panels),
            2 => of::<2, E>(m, panels),
            3 => of::<3, E>(m, panels),
            _ => None,
        }
    }

    /// [`tile_for`] for weights of type `T` on planes of type `E`.
    fn of<const T: u64, const E: u8>(m: usize, panels: usize) -> Option<Tile16> {
        /// Lists one instantiation per row count (no logic).
        macro_rules! sel {
            ($($n:literal),*) => {
                match (m, panels) {
                    $(($n, 1) => Some(tile::<$n, 1, T, E> as Tile16),
                      ($n, 2) => Some(tile::<$n, 2, T, E> as Tile16),)*
                    _ => None,
                }
            };
        }
        sel!(4, 8, 12)
    }
}
