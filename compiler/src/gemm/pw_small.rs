//! Pointwise (`1 x 1`, stride 1) convolutions on small planes: EfficientNet's and
//! MobileNetV2's 7x7 stages and the squeeze-excitation convs on 1x1 planes.
//!
//! The GEMM path computes `Y = W X` with the pixels in 16-wide column panels: a 7x7 plane
//! (49 pixels) fills four panels (64 columns, 77% useful), a 1x1 plane one (1 of 16 lanes).
//! Here the roles are swapped, `Y^T = X^T W^T`: the output channels go in the vector lanes
//! (`W^T` packed at compile time as the GEMM's 16-wide B panels, [`pack`]), the pixels are the
//! rows of the micro-tile, read in place from the input planes (row `p` of `X^T`'s micro-panel
//! is the `MR` consecutive pixels of input channel `p`: no packing, no scratch). A tile of
//! `h <= MR` pixels x 16 or 32 channels accumulates over all of K in registers (one chain of
//! fused multiply-adds per element, no K blocks), is transposed in registers (16x16 on
//! AVX-512, 8x8 on AVX2) and stored as `h` pixels of each channel's output row (masked).
//! Before the transpose, in registers: int8's scales, a fused residual
//! ([`ConvParams::accumulate`]: the `h` pixels of the tile's channel rows loaded and
//! transposed the other way, or gathered for `h <= 2`), the bias and the activation.
//!
//! Work is cut into tasks of one image and one block of 32 (AVX-512) or 16 (AVX2) output
//! channels; every element is computed by the same code whichever thread runs its task, so
//! results are bit-identical at every thread count. Taken only with constant weights, no
//! groups, small planes ([`applies`]), on AVX-512 or AVX2 (with F16C).
//!
//! Weights stored reduced (`--weights f16|bf16|int8`, `ConvParams::wtype`) keep this path in
//! the same panel layout with their own elements ([`super::lowp::conv::Layout::PwSmall`]):
//! each step's row of the one or two panels is widened in registers as it is loaded
//! (`vcvtph2ps`; bf16 by a zero extension and a shift; int8 by sign extension and
//! `vcvtdq2ps`), so a task reads half (a quarter) of the f32 weights' bytes and needs no
//! buffer; int8's per-channel scales (one per lane) multiply the accumulated sums before the
//! bias.

mod act16;
pub(crate) use act16::{direct16, run16};

use super::conv::{Activation, ConvParams};
use super::lowp::conv::Reduced;
use super::split::{MIN_TASK_MACS, SyncPtr};
use super::{NR, packed_b_len};

/// `ConvParams::packed_a` of weights packed by [`pack`].
pub(super) const PW_SMALL_PACKED: u64 = 3;

/// Planes up to this many pixels always take this path (49: the GEMM path fills 77% of its
/// 16-pixel panels, 1: 6%).
pub const SMALL_PIXELS: usize = 64;

/// Largest plane this path takes, with at least [`MIN_K_LARGER`] input channels and when the
/// GEMM path's 16-pixel panels waste more than 5%: 14x14 planes (196 pixels, 94% useful)
/// gain 4-5% at K = 384..576 and lose 5-11% at K = 64..112, where the transpose on store
/// weighs more; 13x13 (169 pixels, 96% useful) at K = 512 loses 5% (conv_bench, one thread).
pub const MAX_PIXELS: usize = 256;

/// Fewest input channels for planes of more than [`SMALL_PIXELS`] pixels.
pub const MIN_K_LARGER: usize = 256;

/// The instruction set of the selected GEMM kernel, if this path has kernels for it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Isa {
    Avx512,
    Avx2,
}

fn isa() -> Option<Isa> {
    #[cfg(target_arch = "x86_64")]
    {
        let name = super::selected_kernel().name;
        if name.starts_with("avx512") {
            return Some(Isa::Avx512);
        }
        if name.starts_with("avx2") && std::arch::is_x86_feature_detected!("f16c") {
            return Some(Isa::Avx2);
        }
    }
    None
}

/// Whether [`run`] computes `p`: constant weights (`packed_a != 0`), pointwise, no groups, at
/// most [`SMALL_PIXELS`] pixels (or [`MAX_PIXELS`] with `K >= MIN_K_LARGER` and a pixel
/// count more than 5% short of a multiple of 16), an AVX-512 or AVX2 GEMM kernel selected (and
/// `ARENAC_CONV_PW_SMALL` is not `0`: the GEMM path instead, for comparisons).
pub(super) fn applies(p: &ConvParams) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let pixels = (p.oh * p.ow) as usize;
    *ON.get_or_init(|| std::env::var("ARENAC_CONV_PW_SMALL").map_or(true, |v| v != "0"))
        && p.packed_a != 0
        && p.is_pointwise()
        && p.group <= 1
        && p.k() > 0
        && (1..=MAX_PIXELS).contains(&pixels)
        && (pixels <= SMALL_PIXELS
            || (p.k() >= MIN_K_LARGER && pixels.next_multiple_of(NR) * 20 > pixels * 21))
        && isa().is_some()
}

/// Floats [`pack`] writes: `W^T` (`K x M`) as 16-wide B panels.
pub(super) fn packed_len(p: &ConvParams) -> usize {
    packed_b_len(p.k(), p.m as usize)
}

/// Packs the weights (`M x K`, row-major) as `W^T` in the GEMM's B panel layout: panel `jp`
/// holds output channels `16 jp..16 jp + 16` as `K` rows of 16 floats.
pub(super) fn pack(p: &ConvParams, w: &[f32], out: &mut [f32]) {
    let (k, m) = (p.k(), p.m as usize);
    super::pack_b(k, m, w, 1, k, out);
}

/// `y = act(conv(x, w) + bias)` for a geometry [`applies`] accepts, spread over the current
/// pool ([`crate::par`]); with `lowp`, the weights are those at `w` stored reduced.
///
/// # Safety
/// That of [`super::conv::arenac_conv2d`], less the scratch (unused), with `w` packed by
/// [`pack`] in this process, or with `lowp` the view of `w` packed by
/// [`super::lowp::conv::pack`] in [`super::lowp::conv::Layout::PwSmall`].
pub(super) unsafe fn run(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    lowp: Option<Reduced>,
) {
    let Some(isa) = isa() else {
        return;
    };
    let (k, m, c) = (p.k(), p.m as usize, p.c as usize);
    let pixels = (p.oh * p.ow) as usize;
    let block = match isa {
        Isa::Avx512 => 2 * NR,
        Isa::Avx2 => NR,
    };
    let blocks = m.div_ceil(block);
    let units = p.n as usize * blocks;
    let macs = (p.n as usize)
        .saturating_mul(m)
        .saturating_mul(k)
        .saturating_mul(pixels);
    let width = if macs >= 2 * MIN_TASK_MACS {
        crate::par::width(crate::par::cost::gemm_ns(macs), p.threads.max(1) as usize)
    } else {
        1
    };
    // Tile rows (pixels) of the kernels.
    let mr = match isa {
        Isa::Avx512 => 12,
        Isa::Avx2 => 6,
    };
    let tiles = pixels.div_ceil(mr);
    // Few channel blocks that do not divide evenly among the threads (MobileNetV2's 160 or
    // 96 channels: 5 or 3 blocks of 32): each block's pixel tiles are cut into `width` runs,
    // so the threads get near-equal pixel counts. Tile boundaries stay where they are.
    let parts = if width > 1 && !units.is_multiple_of(width) && units < 4 * width {
        width.min(tiles)
    } else {
        1
    };
    let tasks = units * parts;
    let act = p.activation();
    // The weights' element type (0: f32) and bytes, and int8's per-channel scales.
    let (tcode, bytes, scales) = match lowp {
        Some(r) => (r.t.code(), r.t.bytes(), r.scales),
        None => (0, 4, std::ptr::null()),
    };
    let (x, w, bias, y, scales) = (
        SyncPtr(x.cast_mut()),
        SyncPtr(w.cast_mut().cast::<u8>()),
        SyncPtr(bias.cast_mut()),
        SyncPtr(y),
        SyncPtr(scales.cast_mut()),
    );
    crate::par::for_each(tasks, width, |t, _| {
        let (u, part) = (t / parts, t % parts);
        let (img, jb) = (u / blocks, u % blocks);
        let px =
            (tiles * part / parts * mr).min(pixels)..(tiles * (part + 1) / parts * mr).min(pixels);
        let ch0 = jb * block;
        let nch = block.min(m - ch0);
        let xi = x.get().cast_const().wrapping_add(img * c * pixels);
        let yi = y.get().wrapping_add(img * m * pixels);
        // Panels ch0 / 16.. of W^T (ch0 is a multiple of 16).
        let b = w.get().cast_const().wrapping_add(ch0 / NR * k * NR * bytes);
        // SAFETY: the contract: x holds n images of c = k planes of `pixels` floats; W^T's
        // panels for channels ch0..ch0+nch exist (packed_b_len(k, m)); output rows
        // ch0..ch0+nch of image img lie in y, and only this task writes their pixels `px`.
        let bias = if p.has_bias != 0 {
            bias.get().cast_const().wrapping_add(ch0)
        } else {
            std::ptr::null()
        };
        // Int8: the scales of channels ch0.. (one per lane of the panels, padded to whole
        // panels by the layout).
        let scales = if scales.get().is_null() {
            std::ptr::null()
        } else {
            scales.get().cast_const().wrapping_add(ch0)
        };
        // SAFETY: as above; with a bias, channels ch0..ch0+nch of its m floats; the weights'
        // type is tcode (the caller's contract on `lowp`).
        unsafe {
            task(
                (isa, tcode),
                (k, pixels, nch),
                px,
                xi,
                b,
                yi.wrapping_add(ch0 * pixels),
                Epilogue {
                    bias,
                    scales,
                    act,
                    acc: p.accumulate != 0,
                },
            )
        };
    });
}

/// One task: output channels `0..nch` (at most one block) of one image, pixels `px` (from a
/// multiple of the kernel's tile rows).
///
/// # Safety
/// `x` readable for `k` planes of `pixels` floats; `b` for `nch.div_ceil(16)` panels of `k`
/// rows of 16 elements of type `tcode` ([`super::lowp::WeightType::code`]), `k * 16`
/// elements apart; `y` writable for `nch` rows of `pixels` floats; the epilogue's bias null
/// or readable for `nch` floats, its scales null or readable for the panels' channels; the
/// CPU has `isa`.
unsafe fn task(
    (isa, tcode): (Isa, u64),
    (k, pixels, nch): (usize, usize, usize),
    px: std::ops::Range<usize>,
    x: *const f32,
    b: *const u8,
    y: *mut f32,
    epi: Epilogue,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let (mr, panels) = match isa {
            Isa::Avx512 => (x86::MR512, nch.div_ceil(NR)),
            Isa::Avx2 => (x86::MR2, 1),
        };
        let mut px0 = px.start;
        while px0 < px.end {
            let h = mr.min(px.end - px0);
            let f = match isa {
                Isa::Avx512 => x86::avx512(h, panels, tcode),
                Isa::Avx2 => x86::avx2(h, tcode),
            };
            if let Some(f) = f {
                // SAFETY: pixels px0..px0+h of the k planes; the panels; the rows of y from
                // pixel px0 (the caller's contract).
                unsafe {
                    f(
                        k,
                        x.add(px0),
                        pixels,
                        b,
                        k * NR,
                        y.add(px0),
                        pixels,
                        nch,
                        epi,
                    )
                };
            }
            px0 += h;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (isa, tcode, k, pixels, nch, px, x, b, y, epi);
}

/// What a tile applies in registers after the K accumulation, for the task's first channel
/// on: int8's scales (null: none), the residual the output holds on entry (`acc`,
/// [`ConvParams::accumulate`]: loaded and transposed as the store's inverse), the bias (null:
/// none), the activation.
#[derive(Clone, Copy)]
struct Epilogue {
    bias: *const f32,
    scales: *const f32,
    act: Activation,
    acc: bool,
}

/// `unsafe fn(k, x, ldx, b, bstride, y, ldy, nch, epilogue)`: `h` pixels (fixed by the
/// function) x the panels' channels (elements of the function's type, `bstride` elements
/// apart), scaled (int8), plus bias, through the activation, stored as the first `h` floats
/// of `nch` output rows at stride `ldy`.
type TileFn =
    unsafe fn(usize, *const f32, usize, *const u8, usize, *mut f32, usize, usize, Epilogue);

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Epilogue, NR, TileFn};
    use crate::gemm::act::x86::{act256, act512};
    use core::arch::x86_64::*;

    /// Pixels of an AVX-512 tile (12 x 32 channels: 24 accumulators, as the GEMM's kernel).
    pub(super) const MR512: usize = 12;
    /// Pixels of an AVX2 tile (6 x 16 channels: 12 accumulators).
    pub(super) const MR2: usize = 6;

    /// Weight rows (one cache line of an f32 panel each) prefetched ahead: about a memory
    /// latency of 12 x 32 steps.
    pub(super) const B_AHEAD: usize = 32;

    /// Bytes of an element of type `T` ([`crate::gemm::lowp::WeightType::code`]: 0 f32,
    /// 1 f16, 2 bf16, 3 int8).
    pub(super) const fn elem_bytes(t: u64) -> usize {
        match t {
            0 => 4,
            1 | 2 => 2,
            _ => 1,
        }
    }

    /// The 16 elements of type `T` at element `i` of `b`, widened (int8 unscaled).
    ///
    /// # Safety
    /// The CPU has AVX-512F; 16 elements readable there.
    #[target_feature(enable = "avx512f,avx2")]
    #[inline]
    pub(super) unsafe fn load16<const T: u64>(b: *const u8, i: usize) -> __m512 {
        // SAFETY: the caller's contract (unaligned loads).
        unsafe {
            match T {
                0 => _mm512_loadu_ps(b.cast::<f32>().add(i)),
                1 => _mm512_cvtph_ps(_mm256_loadu_si256(b.add(2 * i).cast())),
                2 => _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(
                    _mm256_loadu_si256(b.add(2 * i).cast()),
                ))),
                _ => _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(b.add(i).cast()))),
            }
        }
    }

    /// The 8 elements of type `T` at element `i` of `b`, widened (int8 unscaled).
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C; 8 elements readable there.
    #[target_feature(enable = "avx2,f16c")]
    #[inline]
    unsafe fn load8<const T: u64>(b: *const u8, i: usize) -> __m256 {
        // SAFETY: the caller's contract (unaligned loads).
        unsafe {
            match T {
                0 => _mm256_loadu_ps(b.cast::<f32>().add(i)),
                1 => _mm256_cvtph_ps(_mm_loadu_si128(b.add(2 * i).cast())),
                2 => _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(
                    _mm_loadu_si128(b.add(2 * i).cast()),
                ))),
                _ => _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(b.add(i).cast()))),
            }
        }
    }

    /// 16x16 transpose: lane `j` of `r[i]` becomes lane `i` of the result's vector `j`.
    #[target_feature(enable = "avx512f")]
    pub(super) fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
        let mut t = [_mm512_setzero_ps(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        let mut u = [_mm512_setzero_ps(); 16];
        for q in 0..4 {
            let (a, b, c, d) = (t[4 * q], t[4 * q + 1], t[4 * q + 2], t[4 * q + 3]);
            u[4 * q] = _mm512_shuffle_ps::<0x44>(a, c);
            u[4 * q + 1] = _mm512_shuffle_ps::<0xEE>(a, c);
            u[4 * q + 2] = _mm512_shuffle_ps::<0x44>(b, d);
            u[4 * q + 3] = _mm512_shuffle_ps::<0xEE>(b, d);
        }
        for h in 0..2 {
            for i in 0..4 {
                let (a, b) = (u[8 * h + i], u[8 * h + 4 + i]);
                t[8 * h + i] = _mm512_shuffle_f32x4::<0x88>(a, b);
                t[8 * h + 4 + i] = _mm512_shuffle_f32x4::<0xDD>(a, b);
            }
        }
        let mut o = [_mm512_setzero_ps(); 16];
        for i in 0..8 {
            o[i] = _mm512_shuffle_f32x4::<0x88>(t[i], t[8 + i]);
            o[8 + i] = _mm512_shuffle_f32x4::<0xDD>(t[i], t[8 + i]);
        }
        o
    }

    /// `M` pixels x `W` panels of 16 channels of type `T` with AVX-512F.
    ///
    /// # Safety
    /// The CPU has AVX-512F (and AVX2, FMA); `x` readable for `k` rows of `M` floats at stride
    /// `ldx`; `b` for `W` panels (at element `j * bstride`) of `k` rows of 16 elements of
    /// type `T`; `y` writable for `nch <= 16 W` rows of `M` floats at stride `ldy`; `bias`
    /// null or readable for `nch`, `scales` null or readable for `16 W`.
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile512<const M: usize, const W: usize, const T: u64>(
        k: usize,
        x: *const f32,
        ldx: usize,
        b: *const u8,
        bstride: usize,
        y: *mut f32,
        ldy: usize,
        nch: usize,
        Epilogue {
            bias,
            scales,
            act,
            acc: residual,
        }: Epilogue,
    ) {
        let eb = elem_bytes(T);
        let mut acc = [[_mm512_setzero_ps(); W]; M];
        for p in 0..k {
            // The weights come from memory on a task's first tile: fetch them ahead (a hint,
            // never faults, hence wrapping arithmetic).
            for j in 0..W {
                let ahead = b.wrapping_add(((p + B_AHEAD) * NR + j * bstride) * eb);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast::<i8>());
            }
            // SAFETY: row p < k of each panel and of the M pixels (the contract).
            unsafe {
                let mut bv = [_mm512_setzero_ps(); W];
                for (j, v) in bv.iter_mut().enumerate() {
                    *v = load16::<T>(b, p * NR + j * bstride);
                }
                let xp = x.add(p * ldx);
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*xp.add(i));
                    for (r, &v) in row.iter_mut().zip(&bv) {
                        *r = _mm512_fmadd_ps(av, v, *r);
                    }
                }
            }
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
            if residual {
                // SAFETY: the first M floats of rows j*16.. < nch of y (the contract).
                let r = unsafe { residual512::<M>(y.add(j * NR * ldy), ldy, chans) };
                for (row, &r) in acc.iter_mut().zip(&r) {
                    row[j] = _mm512_add_ps(row[j], r);
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
            if M <= 2 {
                // Few pixels: lanes to memory, then one float per channel and pixel.
                let mut buf = [[0.0f32; NR]; M];
                for (i, row) in buf.iter_mut().enumerate() {
                    // SAFETY: 16 floats of this frame's buffer.
                    unsafe { _mm512_storeu_ps(row.as_mut_ptr(), acc[i][j]) };
                }
                for ci in 0..chans {
                    for (i, row) in buf.iter().enumerate() {
                        // SAFETY: row j*16 + ci < nch, pixel i < M of y.
                        unsafe { *y.add((j * NR + ci) * ldy + i) = row[ci] };
                    }
                }
                continue;
            }
            let mut rows = [_mm512_setzero_ps(); 16];
            for (i, r) in rows.iter_mut().take(M).enumerate() {
                *r = acc[i][j];
            }
            let cols = transpose16(rows);
            let mask: __mmask16 = ((1u32 << M) - 1) as u16;
            for (ci, &v) in cols.iter().take(chans).enumerate() {
                // SAFETY: the first M floats of row j*16 + ci < nch of y.
                unsafe { _mm512_mask_storeu_ps(y.add((j * NR + ci) * ldy), mask, v) };
            }
        }
    }

    /// The residual a tile's store overwrites, in the tile's layout: vector `i` holds pixel
    /// `i` of the `chans` channel rows at `y` (stride `ldy`) in its lanes (zero past
    /// `chans`): the rows' first `M` floats transposed, or for `M <= 2` (stored element by
    /// element) gathered the same way.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `y` readable for `chans <= 16` rows of `M` floats at stride
    /// `ldy`.
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[inline]
    unsafe fn residual512<const M: usize>(y: *const f32, ldy: usize, chans: usize) -> [__m512; M] {
        let mut out = [_mm512_setzero_ps(); M];
        if M <= 2 {
            let mut buf = [[0.0f32; NR]; M];
            for ci in 0..chans {
                for (i, row) in buf.iter_mut().enumerate() {
                    // SAFETY: pixel i < M of row ci < chans (the contract).
                    row[ci] = unsafe { *y.add(ci * ldy + i) };
                }
            }
            for (o, row) in out.iter_mut().zip(&buf) {
                // SAFETY: 16 floats of this frame's buffer.
                *o = unsafe { _mm512_loadu_ps(row.as_ptr()) };
            }
            return out;
        }
        let mask: __mmask16 = ((1u32 << M) - 1) as u16;
        let mut rows = [_mm512_setzero_ps(); 16];
        for (ci, r) in rows.iter_mut().take(chans).enumerate() {
            // SAFETY: the first M floats of row ci < chans (the contract).
            *r = unsafe { _mm512_maskz_loadu_ps(mask, y.add(ci * ldy)) };
        }
        let cols = transpose16(rows);
        out.copy_from_slice(&cols[..M]);
        out
    }

    /// The AVX2 [`residual512`]: 8 channel rows, `M <= 8` pixels, masked by `mask` (lanes
    /// below `M`).
    ///
    /// # Safety
    /// The CPU has AVX2; `y` readable for `chans <= 8` rows of `M` floats at stride `ldy`.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn residual256<const M: usize>(
        y: *const f32,
        ldy: usize,
        chans: usize,
        mask: __m256i,
    ) -> [__m256; M] {
        let mut rows = [_mm256_setzero_ps(); 8];
        for (ci, r) in rows.iter_mut().take(chans).enumerate() {
            // SAFETY: the first M floats of row ci < chans (the contract).
            *r = unsafe { _mm256_maskload_ps(y.add(ci * ldy), mask) };
        }
        let cols = transpose8(rows);
        let mut out = [_mm256_setzero_ps(); M];
        out.copy_from_slice(&cols[..M]);
        out
    }

    /// 8x8 transpose: lane `j` of `r[i]` becomes lane `i` of the result's vector `j`.
    #[target_feature(enable = "avx2")]
    pub(super) fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
        let mut t = [_mm256_setzero_ps(); 8];
        for i in 0..4 {
            t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        let mut u = [_mm256_setzero_ps(); 8];
        for q in 0..2 {
            let (a, b, c, d) = (t[4 * q], t[4 * q + 1], t[4 * q + 2], t[4 * q + 3]);
            u[4 * q] = _mm256_shuffle_ps::<0x44>(a, c);
            u[4 * q + 1] = _mm256_shuffle_ps::<0xEE>(a, c);
            u[4 * q + 2] = _mm256_shuffle_ps::<0x44>(b, d);
            u[4 * q + 3] = _mm256_shuffle_ps::<0xEE>(b, d);
        }
        let mut o = [_mm256_setzero_ps(); 8];
        for i in 0..4 {
            o[i] = _mm256_permute2f128_ps::<0x20>(u[i], u[4 + i]);
            o[4 + i] = _mm256_permute2f128_ps::<0x31>(u[i], u[4 + i]);
        }
        o
    }

    /// `M` pixels x 16 channels (two ymm) of type `T` with AVX2 + FMA.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `x` readable for `k` rows of `M` floats at stride
    /// `ldx`; `b` for `k` rows of 16 elements of type `T`; `y` writable for `nch <= 16` rows
    /// of `M` floats at stride `ldy`; `bias` null or readable for `nch`, `scales` null or
    /// readable for 16.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile2<const M: usize, const T: u64>(
        k: usize,
        x: *const f32,
        ldx: usize,
        b: *const u8,
        _bstride: usize,
        y: *mut f32,
        ldy: usize,
        nch: usize,
        Epilogue {
            bias,
            scales,
            act,
            acc: residual,
        }: Epilogue,
    ) {
        let eb = elem_bytes(T);
        let mut acc = [[_mm256_setzero_ps(); 2]; M];
        for p in 0..k {
            // As in the AVX-512 tile: the panel's rows ahead (a hint).
            _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add((p + B_AHEAD) * NR * eb).cast::<i8>());
            // SAFETY: row p < k of the panel and of the M pixels (the contract).
            unsafe {
                let (b0, b1) = (load8::<T>(b, p * NR), load8::<T>(b, p * NR + 8));
                let xp = x.add(p * ldx);
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*xp.add(i));
                    row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                    row[1] = _mm256_fmadd_ps(av, b1, row[1]);
                }
            }
        }
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(M as i32), lanes);
        for half in 0..2 {
            let chans = nch.saturating_sub(half * 8).min(8);
            if !scales.is_null() {
                // SAFETY: the panel's 16 scales (the contract).
                let sv = unsafe { _mm256_loadu_ps(scales.add(half * 8)) };
                for row in acc.iter_mut() {
                    row[half] = _mm256_mul_ps(row[half], sv);
                }
            }
            if residual {
                // SAFETY: the first M floats of rows half*8.. < nch of y (the contract).
                let r = unsafe { residual256::<M>(y.add(half * 8 * ldy), ldy, chans, mask) };
                for (row, &r) in acc.iter_mut().zip(&r) {
                    row[half] = _mm256_add_ps(row[half], r);
                }
            }
            let bv = if bias.is_null() {
                _mm256_setzero_ps()
            } else {
                let mut t = [0.0f32; 8];
                for (ci, v) in t.iter_mut().take(chans).enumerate() {
                    // SAFETY: channel half*8 + ci < nch of the bias (the contract).
                    *v = unsafe { *bias.add(half * 8 + ci) };
                }
                // SAFETY: 8 floats of this frame's buffer.
                unsafe { _mm256_loadu_ps(t.as_ptr()) }
            };
            for row in acc.iter_mut() {
                row[half] = act256(act, _mm256_add_ps(row[half], bv));
            }
            let mut rows = [_mm256_setzero_ps(); 8];
            for (i, r) in rows.iter_mut().take(M).enumerate() {
                *r = acc[i][half];
            }
            let cols = transpose8(rows);
            for (ci, &v) in cols.iter().take(chans).enumerate() {
                // SAFETY: the first M floats of row half*8 + ci < nch of y.
                unsafe { _mm256_maskstore_ps(y.add((half * 8 + ci) * ldy), mask, v) };
            }
        }
    }

    /// The AVX-512 tile for `h` pixels (1..=12) of `panels` (1 or 2) panels of weights of
    /// type `t` (0..=3, [`crate::gemm::lowp::WeightType::code`]).
    pub(super) fn avx512(h: usize, panels: usize, t: u64) -> Option<TileFn> {
        match t {
            0 => avx512_of::<0>(h, panels),
            1 => avx512_of::<1>(h, panels),
            2 => avx512_of::<2>(h, panels),
            3 => avx512_of::<3>(h, panels),
            _ => None,
        }
    }

    /// [`avx512`] for weights of type `T`.
    fn avx512_of<const T: u64>(h: usize, panels: usize) -> Option<TileFn> {
        /// Lists one instantiation per pixel count (no logic).
        macro_rules! sel {
            ($($n:literal),*) => {
                match (h, panels) {
                    $(($n, 1) => Some(tile512::<$n, 1, T> as TileFn),
                      ($n, 2) => Some(tile512::<$n, 2, T> as TileFn),)*
                    _ => None,
                }
            };
        }
        sel!(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
    }

    /// The AVX2 tile for `h` pixels (1..=6) of weights of type `t` (as [`avx512`]).
    pub(super) fn avx2(h: usize, t: u64) -> Option<TileFn> {
        match t {
            0 => avx2_of::<0>(h),
            1 => avx2_of::<1>(h),
            2 => avx2_of::<2>(h),
            3 => avx2_of::<3>(h),
            _ => None,
        }
    }

    /// [`avx2`] for weights of type `T`.
    fn avx2_of<const T: u64>(h: usize) -> Option<TileFn> {
        match h {
            1 => Some(tile2::<1, T> as TileFn),
            2 => Some(tile2::<2, T> as TileFn),
            3 => Some(tile2::<3, T> as TileFn),
            4 => Some(tile2::<4, T> as TileFn),
            5 => Some(tile2::<5, T> as TileFn),
            6 => Some(tile2::<6, T> as TileFn),
            _ => None,
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use core::arch::x86_64::*;

    #[test]
    fn transposes_match_scalar() {
        if is_x86_feature_detected!("avx512f") {
            let src: Vec<f32> = (0..256).map(|i| i as f32).collect();
            // SAFETY: AVX-512F present; 16 loads of 16 floats from a 256-float vector.
            let out = unsafe {
                let mut r = [_mm512_setzero_ps(); 16];
                for (i, v) in r.iter_mut().enumerate() {
                    *v = _mm512_loadu_ps(src.as_ptr().add(16 * i));
                }
                let o = super::x86::transpose16(r);
                let mut out = vec![0.0f32; 256];
                for (j, v) in o.iter().enumerate() {
                    _mm512_storeu_ps(out.as_mut_ptr().add(16 * j), *v);
                }
                out
            };
            for i in 0..16 {
                for j in 0..16 {
                    assert_eq!(out[16 * j + i], src[16 * i + j], "16x16 at ({i}, {j})");
                }
            }
        }
        if is_x86_feature_detected!("avx2") {
            let src: Vec<f32> = (0..64).map(|i| i as f32).collect();
            // SAFETY: AVX2 present; 8 loads of 8 floats from a 64-float vector.
            let out = unsafe {
                let mut r = [_mm256_setzero_ps(); 8];
                for (i, v) in r.iter_mut().enumerate() {
                    *v = _mm256_loadu_ps(src.as_ptr().add(8 * i));
                }
                let o = super::x86::transpose8(r);
                let mut out = vec![0.0f32; 64];
                for (j, v) in o.iter().enumerate() {
                    _mm256_storeu_ps(out.as_mut_ptr().add(8 * j), *v);
                }
                out
            };
            for i in 0..8 {
                for j in 0..8 {
                    assert_eq!(out[8 * j + i], src[8 * i + j], "8x8 at ({i}, {j})");
                }
            }
        }
    }
}
