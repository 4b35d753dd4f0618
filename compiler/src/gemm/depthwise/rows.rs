//! Depthwise convolution on AVX-512 by blocks of output rows, plane by plane (any channel
//! multiplier): square `K x K` filters (3, 5, 7), strides 1 and 2, no dilation, any padding.
//!
//! A step computes 16 output columns of [`ROWS`] consecutive output rows of one plane: four
//! accumulators. Each input row those rows read is loaded once per filter column (a masked
//! load: lanes outside the row read nothing and count as the zero padding; at stride 2 two
//! loads and a permute keep the even columns) and multiplied into every output row whose
//! window holds it, so a 3 x 3 stride-1 step loads 6 rows x 3 columns for 36 multiply-adds
//! (the per-row kernel loaded 9 vectors for 9). The filter taps are broadcast from memory.
//! Bias and the activation are applied in registers before the (masked) store. Measured on
//! MobileNetV2's layers, one thread: 2.8x the channels-in-lanes kernel ([`super::chan8`]) on
//! 112x112 and 56x56 planes, with no transposes and no ring.
//!
//! The planes may hold 16-bit values instead (`--activations`, element type `E` as in
//! [`super::chan8`]): loads widen (F16C / a shift for bf16), stores round to nearest even as
//! `crate::gemm::stage16::narrow` does: the f32 kernel's result on the widened input, rounded
//! once, bit for bit.
//!
//! Each output element is one chain `bias + w(0,0) x + w(0,1) x + ...` over the taps in
//! (`ky`, `kx`) order whatever block computes it, and a plane is one task: bit-identical at
//! every thread count.

use super::Geom;
use super::chan8::{BF16, F16, F32};
use crate::gemm::conv::Activation;

/// bf16 planes whose stores round by AVX512_BF16's `vcvtneps2bf16` (the same bits as
/// [`BF16`]'s integer rounding; [`kernel`] takes it for [`BF16`] where
/// `crate::gemm::stage16::convert::bf16_ne` holds).
const BF16_NE: u8 = 3;

/// Output rows a step computes.
const ROWS: usize = 4;

/// Most 16-column vectors per output row (the masks of a plane's columns sit on the stack).
const MAX_VECTORS: usize = 64;

/// Most 16-pixel vectors of a plane the flat kernel takes (its masks per vector and tap sit
/// on the stack).
const MAX_FLAT: usize = 16;

/// The planes of one call: where they are and how channels map (output channel `o` reads
/// input channel `o / (m / c)`); plane `i` is image `i / m`, output channel `i % m`.
#[derive(Clone, Copy)]
struct Planes {
    x: *const f32,
    w: *const f32,
    bias: Option<*const f32>,
    y: *mut f32,
    c: usize,
    m: usize,
}

// SAFETY: the pointers are read (x, w, bias) or written by plane (y, each plane by one task
// only: [`run`]).
unsafe impl Sync for Planes {}

impl Planes {
    /// Plane `i`'s input plane, filter, bias and output plane, for planes of type `E`.
    ///
    /// # Safety
    /// `i < n * m` of the buffers [`run`]'s contract gives.
    #[inline(always)]
    unsafe fn plane<const E: u8>(
        &self,
        g: &Geom,
        i: usize,
    ) -> (*const f32, *const f32, f32, *mut f32) {
        let (img, o) = (i / self.m, i % self.m);
        let ci = o / (self.m / self.c.max(1)).max(1);
        // SAFETY: the contract: plane (img, ci) of x, (img, o) of y, filter and bias o.
        unsafe {
            (
                elem::<E>(self.x, (img * self.c + ci) * g.h * g.w),
                self.w.add(o * g.kh * g.kw),
                self.bias.map_or(0.0, |b| *b.add(o)),
                elem::<E>(self.y, (img * self.m + o) * g.oh * g.ow).cast_mut(),
            )
        }
    }
}

/// A kernel: the planes `range` of `planes` with geometry `g`.
type RunFn = unsafe fn(&Geom, &Planes, Activation, std::ops::Range<usize>);

/// The kernel for `g` on this CPU with planes of element type `E`, if this path takes `g`:
/// AVX-512 selected (with BW, VL, F16C), a square 3, 5 or 7 filter, equal strides of 1 or
/// 2, no dilation; output rows of 8 to `16 * MAX_VECTORS` columns by rows, or 3 x 3 "same"
/// stride-1 planes of narrower rows (7x7) and at most `16 * MAX_FLAT` pixels flat. The
/// channels-in-lanes kernel keeps the rest: rows of 7 leave 9 of 16 lanes idle (it ran
/// MobileNetV2's 960-channel 7x7 layer in 46 µs, by rows 58, flat 28), and 5 x 5 taps on
/// 7x7 planes flat took 113 µs against its 80 (EfficientNet-B0's 1152 channels; one
/// thread, `conv_bench`).
fn kernel<const E: u8>(g: &Geom) -> Option<RunFn> {
    kernel_with::<E>(g, E == BF16 && crate::gemm::stage16::convert::bf16_ne())
}

/// [`kernel`], bf16 planes rounded by AVX512_BF16 when `ne` (which only
/// `crate::gemm::stage16::convert::bf16_ne` may make true).
fn kernel_with<const E: u8>(g: &Geom, ne: bool) -> Option<RunFn> {
    #[cfg(target_arch = "x86_64")]
    {
        let square = g.kh == g.kw && g.sh == g.sw && g.dh == 1 && g.dw == 1;
        if !(square && g.oh > 0 && available()) {
            return None;
        }
        let rows = g.ow >= 8 && g.ow.div_ceil(16) <= MAX_VECTORS;
        let same = g.ow == g.w && g.oh == g.h && g.sw == 1;
        let flat = same && g.ow < 8 && (g.oh * g.ow).div_ceil(16) <= MAX_FLAT;
        if E == BF16 && ne {
            let f: RunFn = match (g.kh, g.sw, rows, flat) {
                (3, 1, true, _) => x86::rows_ne::<3, 1>,
                (3, 2, true, _) => x86::rows_ne::<3, 2>,
                (5, 1, true, _) => x86::rows_ne::<5, 1>,
                (5, 2, true, _) => x86::rows_ne::<5, 2>,
                (7, 1, true, _) => x86::rows_ne::<7, 1>,
                (7, 2, true, _) => x86::rows_ne::<7, 2>,
                (3, _, _, true) => x86::flat_ne::<3>,
                _ => return None,
            };
            return Some(f);
        }
        let f: RunFn = match (g.kh, g.sw, rows, flat) {
            (3, 1, true, _) => x86::rows::<3, 1, E>,
            (3, 2, true, _) => x86::rows::<3, 2, E>,
            (5, 1, true, _) => x86::rows::<5, 1, E>,
            (5, 2, true, _) => x86::rows::<5, 2, E>,
            (7, 1, true, _) => x86::rows::<7, 1, E>,
            (7, 2, true, _) => x86::rows::<7, 2, E>,
            (3, _, _, true) => x86::flat::<3, E>,
            _ => return None,
        };
        Some(f)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (g, ne);
        None
    }
}

/// Whether this CPU runs the kernels: the AVX-512 GEMM kernel selected (the same override,
/// `ARENAC_GEMM_KERNEL`), with AVX-512BW/VL (16-bit masked loads) and F16C.
fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::gemm::selected_kernel().name.starts_with("avx512")
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("f16c")
            && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether [`run`] takes `g` (with `E` planes).
pub(super) fn applies<const E: u8>(g: &Geom) -> bool {
    kernel::<E>(g).is_some()
}

/// `y = act(depthwise_conv(x, w) + bias)` for `n` images of `c` input and `m` output
/// channels (output plane `o` reads input plane `o / (m / c)`), the planes spread over
/// `width` threads of the current pool in contiguous runs. Returns `false` (nothing done)
/// where [`applies`] does not hold.
///
/// # Safety
/// That of `crate::gemm::conv::arenac_conv2d` for a depthwise conv (without the scratch),
/// `x` and `y` planes of element type `E` (`n*c*h*w` and `n*m*oh*ow` values), `w` the OIHW
/// filters (`m*kh*kw` floats), `bias` `m` floats when given.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn run<const E: u8>(
    g: &Geom,
    act: Activation,
    planes: (usize, usize, usize),
    width: usize,
    x: *const f32,
    w: *const f32,
    bias: Option<*const f32>,
    y: *mut f32,
) -> bool {
    let ne = E == BF16 && crate::gemm::stage16::convert::bf16_ne();
    // SAFETY: the contract, passed on; `ne` from `bf16_ne`.
    unsafe { run_with::<E>(ne, g, act, planes, width, x, w, bias, y) }
}

/// [`run`] with the bf16 rounding chosen: `ne`, AVX512_BF16's (the same bits).
///
/// # Safety
/// As [`run`]; `ne` only where `crate::gemm::stage16::convert::bf16_ne` holds.
#[allow(clippy::too_many_arguments)]
unsafe fn run_with<const E: u8>(
    ne: bool,
    g: &Geom,
    act: Activation,
    (n, c, m): (usize, usize, usize),
    width: usize,
    x: *const f32,
    w: *const f32,
    bias: Option<*const f32>,
    y: *mut f32,
) -> bool {
    let Some(f) = kernel_with::<E>(g, ne) else {
        return false;
    };
    let planes = Planes {
        x,
        w,
        bias,
        y,
        c: c.max(1),
        m: m.max(1),
    };
    let count = n * m;
    let work = count
        .saturating_mul(g.oh * g.ow)
        .saturating_mul(g.kh * g.kw);
    let runs = (work / crate::gemm::split::MIN_TASK_MACS)
        .min(width * 4)
        .clamp(1, count.max(1));
    crate::par::for_each(runs, width, |r, _| {
        // SAFETY: the contract; the runs' plane ranges are disjoint and inside `0..n*m`.
        unsafe { f(g, &planes, act, count * r / runs..count * (r + 1) / runs) };
    });
    true
}

/// `p` moved by `i` elements of type `E` (f32, or 16 bits).
#[inline(always)]
fn elem<const E: u8>(p: *const f32, i: usize) -> *const f32 {
    if E == F32 {
        p.wrapping_add(i)
    } else {
        p.cast::<u16>().wrapping_add(i).cast()
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{BF16_NE, F16, F32, Geom, MAX_FLAT, MAX_VECTORS, Planes, ROWS, elem};
    use crate::gemm::act::x86::act512;
    use crate::gemm::conv::Activation;
    use crate::gemm::stage16::convert::x86::narrow16_bf;
    use core::arch::x86_64::*;
    use std::ops::Range;

    /// Lanes `lo..hi` of a 16-bit mask (clamped to `0..16`).
    #[inline(always)]
    fn lanes(lo: isize, hi: isize) -> u16 {
        let (lo, hi) = (lo.clamp(0, 16) as u32, hi.clamp(0, 16) as u32);
        if hi <= lo {
            0
        } else {
            ((((1u32 << hi) - 1) >> lo) << lo) as u16
        }
    }

    /// The 16 values of type `E` at `p` whose lanes are set in `m` (the others 0), widened.
    ///
    /// # Safety
    /// AVX-512F/BW/VL and F16C; the masked lanes of `p` readable.
    #[inline(always)]
    unsafe fn load<const E: u8>(m: u16, p: *const f32) -> __m512 {
        // SAFETY: the contract (masked-out lanes are not accessed).
        unsafe {
            match E {
                F32 => _mm512_maskz_loadu_ps(m, p),
                F16 => _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p.cast())),
                _ => _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(
                    _mm256_maskz_loadu_epi16(m, p.cast()),
                ))),
            }
        }
    }

    /// `v`'s lanes set in `m` stored at `p` as type `E` (rounded to nearest even, a NaN kept
    /// quiet: the bits of `crate::gemm::stage16::narrow`).
    ///
    /// # Safety
    /// AVX-512F/BW/VL and F16C; the masked lanes of `p` writable.
    #[inline(always)]
    unsafe fn store<const E: u8>(m: u16, p: *mut f32, v: __m512) {
        // SAFETY: the contract (masked-out lanes are not accessed).
        unsafe {
            match E {
                F32 => _mm512_mask_storeu_ps(p, m, v),
                F16 => _mm256_mask_storeu_epi16(
                    p.cast(),
                    m,
                    _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v),
                ),
                // SAFETY (of the call): AVX512_BF16 and DQ where `E` is this (`rows_ne`).
                BF16_NE => _mm256_mask_storeu_epi16(p.cast(), m, narrow16_bf(v)),
                _ => {
                    let bits = _mm512_castps_si512(v);
                    let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
                    let r =
                        _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
                    let quiet = _mm512_or_si512(bits, _mm512_set1_epi32(0x0040_0000));
                    let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
                    let r = _mm512_srli_epi32::<16>(_mm512_mask_blend_epi32(nan, r, quiet));
                    _mm256_mask_storeu_epi16(p.cast(), m, _mm512_cvtepi32_epi16(r));
                }
            }
        }
    }

    /// Planes `range` of `pl` by blocks of [`ROWS`] output rows: `K x K` filters, stride
    /// `S`, planes of type `E` (see the module).
    ///
    /// # Safety
    /// The CPU has what [`super::available`] checks; `g` has `kh == kw == K`,
    /// `sh == sw == S`, no dilation, `8 <= ow <= 16 * MAX_VECTORS`; `pl` and `range` as
    /// [`super::run`]'s contract gives them.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn rows<const K: usize, const S: usize, const E: u8>(
        g: &Geom,
        pl: &Planes,
        act: Activation,
        range: Range<usize>,
    ) {
        // SAFETY: the contract, passed on.
        unsafe { rows_body::<K, S, E>(g, pl, act, range) }
    }

    /// [`rows`] on bf16 planes rounded by AVX512_BF16 ([`BF16_NE`]).
    ///
    /// # Safety
    /// As [`rows`]; the CPU has AVX512_BF16 and DQ too.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c,avx512dq,avx512bf16")]
    pub(super) unsafe fn rows_ne<const K: usize, const S: usize>(
        g: &Geom,
        pl: &Planes,
        act: Activation,
        range: Range<usize>,
    ) {
        // SAFETY: the contract, passed on.
        unsafe { rows_body::<K, S, BF16_NE>(g, pl, act, range) }
    }

    /// The body of [`rows`] and [`rows_ne`].
    ///
    /// # Safety
    /// As [`rows`]; inlined into a caller with the features `E` needs.
    #[inline(always)]
    unsafe fn rows_body<const K: usize, const S: usize, const E: u8>(
        g: &Geom,
        pl: &Planes,
        act: Activation,
        range: Range<usize>,
    ) {
        let (h, w, oh, ow) = (g.h as isize, g.w as isize, g.oh, g.ow);
        let (pt, left) = (g.pt as isize, g.pl as isize);
        let nvec = ow.div_ceil(16);
        // Per vector: the load masks of each filter column (two per column at stride 2:
        // raw columns 0..16 and 16..32 of the load), then the store mask.
        let mut masks = [[0u16; 2 * 7 + 1]; MAX_VECTORS];
        for (v, mk) in masks.iter_mut().enumerate().take(nvec) {
            for kx in 0..K {
                let b = (v * 16 * S + kx) as isize - left;
                mk[S * kx] = lanes(-b, w - b);
                if S == 2 {
                    mk[S * kx + 1] = lanes(-b - 16, w - b - 16);
                }
            }
            mk[S * K] = lanes(0, (ow - v * 16) as isize);
        }
        // SAFETY: value-only intrinsics (this function's features); the planes are those of
        // the contract; the loads read only lanes inside input row `iy < h`, columns `0..w`
        // (the masks); the stores write only columns `< ow` of output rows `< oh`.
        unsafe {
            let evens =
                _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            let odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
            for i in range {
                let (x, wt, bias, y) = pl.plane::<E>(g, i);
                let taps = broadcast::<K>(wt);
                let mut oy = 0;
                while oy < oh {
                    for (v, mk) in masks.iter().enumerate().take(nvec) {
                        let mut acc = [_mm512_set1_ps(bias); ROWS];
                        for j in 0..(ROWS - 1) * S + K {
                            let iy = (oy * S + j) as isize - pt;
                            if iy < 0 || iy >= h {
                                continue;
                            }
                            let row = elem::<E>(x, (iy * w) as usize);
                            // At stride 2 the load pair of an even column serves the next
                            // one too (its odd lanes).
                            let mut pair = (_mm512_setzero_ps(), _mm512_setzero_ps());
                            for kx in 0..K {
                                let b = (v * 16 * S + kx) as isize - left;
                                let xv = if S == 1 {
                                    load::<E>(mk[kx], offset::<E>(row, b))
                                } else if kx % 2 == 0 {
                                    pair = (
                                        load::<E>(mk[2 * kx], offset::<E>(row, b)),
                                        load::<E>(mk[2 * kx + 1], offset::<E>(row, b + 16)),
                                    );
                                    _mm512_permutex2var_ps(pair.0, evens, pair.1)
                                } else {
                                    _mm512_permutex2var_ps(pair.0, odds, pair.1)
                                };
                                for (r, a) in acc.iter_mut().enumerate() {
                                    let ky = j as isize - (r * S) as isize;
                                    if (0..K as isize).contains(&ky) {
                                        *a = _mm512_fmadd_ps(taps[ky as usize * K + kx], xv, *a);
                                    }
                                }
                            }
                        }
                        for (r, &a) in acc.iter().enumerate().take(oh - oy) {
                            let out = elem::<E>(y, (oy + r) * ow + v * 16).cast_mut();
                            store::<E>(mk[S * K], out, act512(act, a));
                        }
                    }
                    oy += ROWS;
                }
            }
        }
    }

    /// Planes `range` of `pl` flat: 16 consecutive output pixels per vector across row ends,
    /// four vectors at once, each tap one masked load (lanes whose input pixel lies outside
    /// the plane, left and right included, read nothing) — for "same" stride-1 planes of
    /// narrow rows (7x7), where rows leave most lanes idle.
    ///
    /// # Safety
    /// As [`rows`], with `ow == w < 8`, `oh == h`, stride 1 and at most `16 * MAX_FLAT`
    /// pixels.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn flat<const K: usize, const E: u8>(
        g: &Geom,
        pl: &Planes,
        act: Activation,
        range: Range<usize>,
    ) {
        // SAFETY: the contract, passed on.
        unsafe { flat_body::<K, E>(g, pl, act, range) }
    }

    /// [`flat`] on bf16 planes rounded by AVX512_BF16 ([`BF16_NE`]).
    ///
    /// # Safety
    /// As [`flat`]; the CPU has AVX512_BF16 and DQ too.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c,avx512dq,avx512bf16")]
    pub(super) unsafe fn flat_ne<const K: usize>(
        g: &Geom,
        pl: &Planes,
        act: Activation,
        range: Range<usize>,
    ) {
        // SAFETY: the contract, passed on.
        unsafe { flat_body::<K, BF16_NE>(g, pl, act, range) }
    }

    /// The body of [`flat`] and [`flat_ne`].
    ///
    /// # Safety
    /// As [`flat`]; inlined into a caller with the features `E` needs.
    #[inline(always)]
    unsafe fn flat_body<const K: usize, const E: u8>(
        g: &Geom,
        pl: &Planes,
        act: Activation,
        range: Range<usize>,
    ) {
        const U: usize = 4;
        let (w, hw) = (g.w as isize, (g.h * g.w) as isize);
        let (pt, left) = (g.pt as isize, g.pl as isize);
        let nvec = (g.h * g.w).div_ceil(16).next_multiple_of(U);
        // Per vector (all-zero past the plane): each tap's load mask, then the store mask.
        let mut masks = [[0u16; 7 * 7 + 1]; MAX_FLAT.next_multiple_of(U)];
        for (v, mk) in masks.iter_mut().enumerate().take(nvec) {
            let p0 = (v * 16) as isize;
            for kx in 0..K {
                // Lanes whose column moved by the tap stays inside the row.
                let mut cols = 0u16;
                for l in 0..16 {
                    let col = (p0 + l) % w + kx as isize - left;
                    if (0..w).contains(&col) {
                        cols |= 1 << l;
                    }
                }
                for ky in 0..K {
                    let q = p0 + (ky as isize - pt) * w + kx as isize - left;
                    mk[ky * K + kx] = cols & lanes(-q, hw - q);
                }
            }
            mk[K * K] = lanes(0, hw - p0);
        }
        // SAFETY: as in [`rows`]: every load reads only lanes whose pixel lies inside the
        // input plane, every store only pixels of the output plane.
        unsafe {
            for i in range {
                let (x, wt, bias, y) = pl.plane::<E>(g, i);
                let taps = broadcast::<K>(wt);
                for v0 in (0..nvec).step_by(U) {
                    let mut acc = [_mm512_set1_ps(bias); U];
                    for ky in 0..K {
                        for kx in 0..K {
                            let d = (ky as isize - pt) * w + kx as isize - left;
                            for (u, a) in acc.iter_mut().enumerate() {
                                let q = ((v0 + u) * 16) as isize + d;
                                let xv = load::<E>(masks[v0 + u][ky * K + kx], offset::<E>(x, q));
                                *a = _mm512_fmadd_ps(taps[ky * K + kx], xv, *a);
                            }
                        }
                    }
                    for (u, &a) in acc.iter().enumerate() {
                        let out = elem::<E>(y, (v0 + u) * 16).cast_mut();
                        store::<E>(masks[v0 + u][K * K], out, act512(act, a));
                    }
                }
            }
        }
    }

    /// The `K * K` taps at `wt`, each broadcast to a vector (kept in registers where they
    /// fit).
    ///
    /// # Safety
    /// AVX-512F; `wt` readable for `K * K` floats.
    #[inline(always)]
    unsafe fn broadcast<const K: usize>(wt: *const f32) -> [__m512; 49] {
        // SAFETY: the contract.
        unsafe {
            let mut taps = [_mm512_setzero_ps(); 49];
            for (i, t) in taps.iter_mut().enumerate().take(K * K) {
                *t = _mm512_set1_ps(*wt.add(i));
            }
            taps
        }
    }

    /// `p` moved by `i` (possibly negative) elements of type `E`.
    #[inline(always)]
    fn offset<const E: u8>(p: *const f32, i: isize) -> *const f32 {
        if E == F32 {
            p.wrapping_offset(i)
        } else {
            p.cast::<u16>().wrapping_offset(i).cast()
        }
    }
}

#[cfg(test)]
mod tests;
