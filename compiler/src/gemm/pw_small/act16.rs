//! The small-plane pointwise kernel on 16-bit planes (`--activations f16|bf16`), unstaged:
//! the tiles read the input planes' f16/bf16 values and write the output planes' values
//! directly, with the f32 kernel's task split and threading and no scratch.
//!
//! A task is a run of whole tiles of one image over every output channel. For each tile the
//! first block of channels widens the tile's pixels of all of K into a stack buffer (one
//! masked 16-lane load and one conversion per input channel, `vcvtph2ps` / a shift for bf16:
//! `crate::gemm::stage16::convert`'s `widen16`), [`AHEAD`] rows ahead of the row it
//! multiplies, so the conversions overlap the multiply-adds; the other blocks of its group
//! read the buffer. Each block accumulates exactly as the f32 tile does from the planes: one
//! fused multiply-add chain per element over all of K in order, from zero. The epilogue (int8
//! scales, a fused residual — `ConvParams::accumulate`: the tile's 16-bit outputs loaded
//! under the mask, widened and transposed, added where the f32 tile adds its residual —
//! bias, activation) is the f32 tile's; after the in-register transpose each
//! channel's pixels are rounded to nearest even (`narrow16`, the rounding of
//! `crate::gemm::stage16::narrow`) and stored as 16-bit values under a mask. So every output
//! is the f32 kernel's result on the widened input rounded once: the bits of the staged path
//! (widen, f32 kernel, narrow).
//!
//! Tiles of 1..12 pixels run the kernel of 1, 2, 4, 8 or 12 rows (the rows past the tile
//! read zeros and are not stored). AVX-512 (F, BW, VL) only: elsewhere the Conv stays staged.

use super::{Epilogue, Isa, NR, isa};
use crate::gemm::conv::{Activation, ConvParams};
use crate::gemm::lowp::conv::{Layout, Reduced};
use crate::gemm::split::{MIN_TASK_MACS, SyncPtr};
use crate::gemm::stage16::N16;

/// Input channels a chunked tile widens into its stack buffer at a time (8 KiB of f32 rows).
const KC: usize = 128;

/// Rows a tile widens ahead of the row it multiplies.
const AHEAD: usize = 8;

/// 16-bit planes of f16 (the planes' element type `E` of the kernels).
const F16: u8 = 1;
/// Of bf16.
const BF16: u8 = 2;

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
/// the current pool; the weights stored reduced when `p.wtype` says so ([`Layout::PwSmall`]).
///
/// Where K fits the stack buffer ([`KMAX`]) and the plane has a tile per thread, a task is a
/// run of whole tiles of one image over every output channel: each tile's pixels widened
/// once for all of K, then every block of channels computed from that buffer (blocks in
/// groups whose weights stay in L2, [`GROUP_BYTES`]), so the widening is shared by the
/// blocks. Otherwise (1x1 planes, K above [`KMAX`]) the f32 kernel's tasks (one block of
/// channels of one image, or a run of its tiles) with K widened in chunks per tile.
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
    let (k, m, c, n) = (p.k(), p.m as usize, p.c as usize, p.n as usize);
    let pixels = (p.oh * p.ow) as usize;
    let blocks = m.div_ceil(BLOCK);
    let macs = n.saturating_mul(m).saturating_mul(k).saturating_mul(pixels);
    let width = if macs >= 2 * MIN_TASK_MACS {
        crate::par::width(crate::par::cost::gemm_ns(macs), p.threads.max(1) as usize)
    } else {
        1
    };
    let tiles = pixels.div_ceil(MR);
    let (tcode, bytes, scales) = match lowp {
        Some(r) => (r.t.code(), r.t.bytes(), r.scales),
        None => (0, 4, std::ptr::null()),
    };
    let e = match t {
        N16::F16 => F16,
        N16::Bf16 => BF16,
    };
    let op = Op {
        x: SyncPtr(x.cast_mut().cast()),
        w: SyncPtr(w.cast_mut().cast()),
        bias: SyncPtr(if p.has_bias != 0 {
            bias.cast_mut()
        } else {
            std::ptr::null_mut()
        }),
        y: SyncPtr(y.cast()),
        scales: SyncPtr(scales.cast_mut()),
        act: p.activation(),
        dims: (k, m, c, pixels, bytes),
        kinds: (tcode, e),
        acc: p.accumulate != 0,
    };
    if k <= KMAX && tiles >= width {
        // Runs of whole tiles, cut where `pixels * part / parts` rounds to a tile boundary
        // (49 pixels in two: 24 + 25).
        let cut = |part: usize| {
            if part == width {
                pixels
            } else {
                ((pixels * part / width + MR / 2) / MR * MR).min(pixels)
            }
        };
        let group = (GROUP_BYTES / (k * BLOCK * bytes).max(1)).max(1);
        crate::par::for_each(n * width, width, |i, _| {
            let (img, part) = (i / width, i % width);
            // SAFETY: the contract; this task alone writes pixels cut(part)..cut(part + 1)
            // of image img's output rows.
            unsafe { op.shared(img, cut(part)..cut(part + 1), 0..blocks, group) };
        });
        return;
    }
    // The f32 kernel's split: (image, block) units, each block's tiles cut in `parts` runs
    // where the units do not divide evenly among the threads.
    let units = n * blocks;
    let parts = if width > 1 && !units.is_multiple_of(width) && units < 4 * width {
        width.min(tiles)
    } else {
        1
    };
    crate::par::for_each(units * parts, width, |i, _| {
        let (u, part) = (i / parts, i % parts);
        let (img, jb) = (u / blocks, u % blocks);
        let px =
            (tiles * part / parts * MR).min(pixels)..(tiles * (part + 1) / parts * MR).min(pixels);
        // SAFETY: the contract; this task alone writes pixels px of block jb's rows.
        unsafe { op.chunked(img, px, jb) };
    });
}

/// Output channels per block: two 16-lane panels.
const BLOCK: usize = 2 * NR;
/// Pixels per tile (the AVX-512 f32 kernel's tile rows).
const MR: usize = 12;
/// Most input channels of a tile widened whole on the stack (64 KiB of f32 rows).
const KMAX: usize = 1024;
/// Bytes of weights a group of blocks computed from one widened tile may span (they stay in
/// L2 while the group's tiles run).
const GROUP_BYTES: usize = 640 << 10;

/// The operands of one [`run16`] and what its tasks share.
#[derive(Clone, Copy)]
struct Op {
    x: SyncPtr<u16>,
    w: SyncPtr<u8>,
    bias: SyncPtr<f32>,
    y: SyncPtr<u16>,
    scales: SyncPtr<f32>,
    act: Activation,
    /// K, M, C, pixels per plane, bytes per weight element.
    dims: (usize, usize, usize, usize, usize),
    /// The weights' type code and the planes' element type.
    kinds: (u64, u8),
    /// A fused residual (`ConvParams::accumulate`): the output holds it on entry.
    acc: bool,
}

impl Op {
    /// Block `jb`'s first panel, its first channel's output row of image `img`, the number
    /// of its channels and its epilogue.
    fn block(&self, img: usize, jb: usize) -> (*const u8, *mut u16, usize, Epilogue) {
        let (k, m, _, pixels, bytes) = self.dims;
        let ch0 = jb * BLOCK;
        let b = self
            .w
            .get()
            .cast_const()
            .wrapping_add(ch0 / NR * k * NR * bytes);
        let y = self.y.get().wrapping_add((img * m + ch0) * pixels);
        let at = |p: *mut f32| {
            if p.is_null() {
                std::ptr::null()
            } else {
                p.cast_const().wrapping_add(ch0)
            }
        };
        let epi = Epilogue {
            bias: at(self.bias.get()),
            scales: at(self.scales.get()),
            act: self.act,
            acc: self.acc,
        };
        (b, y, BLOCK.min(m - ch0), epi)
    }

    /// Pixels `px` of image `img`, blocks `blocks` in groups of `group`: each tile widened
    /// whole once per group ([`x86::widen`]), each block of the group from that buffer.
    ///
    /// # Safety
    /// The contract of [`run16`]; `k <= KMAX`; only this task writes these pixels.
    unsafe fn shared(
        &self,
        img: usize,
        px: std::ops::Range<usize>,
        blocks: std::ops::Range<usize>,
        group: usize,
    ) {
        #[cfg(target_arch = "x86_64")]
        {
            let (k, _, c, pixels, _) = self.dims;
            let (tcode, e) = self.kinds;
            let x = self.x.get().cast_const().wrapping_add(img * c * pixels);
            let mut buf = std::mem::MaybeUninit::<[core::arch::x86_64::__m512; KMAX]>::uninit();
            let rows = buf.as_mut_ptr().cast::<core::arch::x86_64::__m512>();
            let mut g0 = blocks.start;
            while g0 < blocks.end {
                let g1 = (g0 + group).min(blocks.end);
                let mut px0 = px.start;
                while px0 < px.end {
                    let h = MR.min(px.end - px0);
                    for jb in g0..g1 {
                        let (b, y, nch, epi) = self.block(img, jb);
                        let Some((first, wide)) =
                            x86::shared_for(tile_rows(h), nch.div_ceil(NR), tcode, e)
                        else {
                            continue;
                        };
                        let y = y.wrapping_add(px0);
                        // SAFETY: the group's first block widens k <= KMAX rows of h pixels
                        // from px0 of the k planes (the contract) into the buffer as it
                        // computes; the others read them. The block's panels; pixels px0..
                        // of its output rows (this task's).
                        unsafe {
                            if jb == g0 {
                                let x = x.wrapping_add(px0);
                                first(k, x, pixels, rows, b, k * NR, y, pixels, (nch, h), epi)
                            } else {
                                wide(k, rows.cast(), b, k * NR, y, pixels, (nch, h), epi)
                            }
                        };
                    }
                    px0 += h;
                }
                g0 = g1;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (img, px, blocks, group);
    }

    /// Pixels `px` of block `jb` of image `img`, K widened in chunks per tile.
    ///
    /// # Safety
    /// The contract of [`run16`]; only this task writes these pixels of the block.
    unsafe fn chunked(&self, img: usize, px: std::ops::Range<usize>, jb: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let (k, _, c, pixels, _) = self.dims;
            let (tcode, e) = self.kinds;
            let x = self.x.get().cast_const().wrapping_add(img * c * pixels);
            let (b, y, nch, epi) = self.block(img, jb);
            let mut px0 = px.start;
            while px0 < px.end {
                let h = MR.min(px.end - px0);
                if let Some(f) = x86::tile_for(tile_rows(h), nch.div_ceil(NR), tcode, e) {
                    // SAFETY: pixels px0..px0+h of the k planes and of the nch output rows
                    // (the contract); the panels.
                    unsafe {
                        f(
                            k,
                            x.wrapping_add(px0),
                            pixels,
                            b,
                            k * NR,
                            y.wrapping_add(px0),
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
        let _ = (img, px, jb);
    }
}

/// The kernel rows for a tile of `h` pixels: 1, 2, 4, 8 or 12.
fn tile_rows(h: usize) -> usize {
    if h <= 2 { h } else { h.next_multiple_of(4) }
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

/// `unsafe fn(k, x, ldx, rows, b, bstride, y, ldy, (nch, h), epilogue)`: as [`Tile16`], all
/// `k` rows of the input widened into `rows` (16 floats each) as they are used.
type First16 = unsafe fn(
    usize,
    *const u16,
    usize,
    *mut Row,
    *const u8,
    usize,
    *mut u16,
    usize,
    (usize, usize),
    Epilogue,
);

/// A widened input row (16 floats).
#[cfg(target_arch = "x86_64")]
type Row = core::arch::x86_64::__m512;
#[cfg(not(target_arch = "x86_64"))]
type Row = [f32; 16];

/// `unsafe fn(k, rows, b, bstride, y, ldy, (nch, h), epilogue)`: as [`Tile16`], the input
/// the `k` rows of 16 floats a [`First16`] wrote.
type Wide16 =
    unsafe fn(usize, *const f32, *const u8, usize, *mut u16, usize, (usize, usize), Epilogue);

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::x86::{B_AHEAD, elem_bytes, load16, transpose16};
    use super::{AHEAD, BF16, Epilogue, F16, First16, KC, NR, Tile16, Wide16};
    use crate::gemm::act::x86::act512;
    use crate::gemm::stage16::N16;
    use crate::gemm::stage16::convert::x86::{narrow16, widen16};
    use core::arch::x86_64::*;
    use std::mem::MaybeUninit;

    /// The planes' type `E` as [`N16`].
    const fn n16(e: u8) -> N16 {
        if e == F16 { N16::F16 } else { N16::Bf16 }
    }

    /// The first `h` lanes set.
    fn lanes(h: usize) -> __mmask16 {
        ((1u32 << h.min(16)) - 1) as u16
    }

    /// Rows `0..kc` of `h` values (`x`, stride `ldx`, type `E`) widened into `rows` (16
    /// floats each, the lanes past `h` zero), each [`AHEAD`] rows before [`accumulate`] adds
    /// it (with the weights' rows `p0..p0 + kc`) into `acc`: the conversions overlap the
    /// multiply-adds.
    ///
    /// # Safety
    /// The CPU has AVX-512F/BW/VL and FMA; `x` readable for `kc` rows of `h <= 16` values at
    /// stride `ldx`; `rows` writable for `kc` vectors; the weights as [`accumulate`] reads
    /// them.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn widen_accumulate<const M: usize, const W: usize, const T: u64, const E: u8>(
        acc: &mut [[__m512; W]; M],
        (x, ldx, h): (*const u16, usize, usize),
        rows: *mut __m512,
        (kc, p0): (usize, usize),
        b: *const u8,
        bstride: usize,
    ) {
        let (t, m) = (n16(E), lanes(h));
        // SAFETY: the first h values of row r < kc (masked: nothing past them is read);
        // vector r of `rows` (the contract).
        let put = |r: usize| unsafe {
            rows.add(r).write(widen16(
                t,
                _mm256_maskz_loadu_epi16(m, x.add(r * ldx).cast()),
            ))
        };
        for r in 0..AHEAD.min(kc) {
            put(r);
        }
        for r in 0..kc {
            if r + AHEAD < kc {
                put(r + AHEAD);
            }
            // SAFETY: row r was written above; the weights' row p0 + r (the contract).
            unsafe { accumulate::<M, W, T>(acc, rows.cast::<f32>(), (r, r + 1, p0), b, bstride) };
        }
    }

    /// Rows `r0..r1` of the widened input (`xs`: 16 floats per row, row `r` the input
    /// channel `p0 + r`) times the weights' rows `p0 + r` added into `acc`, one multiply-add
    /// per element and row in order (the f32 tile's chain).
    ///
    /// # Safety
    /// The CPU has AVX-512F and FMA; `xs` readable for rows `r0..r1`; `b` for `W` panels
    /// (at element `j * bstride`) of rows `p0 + r1` of 16 elements of type `T`.
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[inline]
    unsafe fn accumulate<const M: usize, const W: usize, const T: u64>(
        acc: &mut [[__m512; W]; M],
        xs: *const f32,
        (r0, r1, p0): (usize, usize, usize),
        b: *const u8,
        bstride: usize,
    ) {
        let eb = elem_bytes(T);
        for r in r0..r1 {
            let p = p0 + r;
            // As in the f32 tile: the weights ahead (a hint, never faults).
            for j in 0..W {
                let ahead = b.wrapping_add(((p + B_AHEAD) * NR + j * bstride) * eb);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast::<i8>());
            }
            // SAFETY: row p of each panel, row r of the widened input (the contract).
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
    }

    /// The f32 tile's epilogue on `acc` (int8 scales, the residual `y` holds when the
    /// epilogue's `acc` says so: its `h` values of each of the `nch` rows widened and
    /// transposed as the store's inverse, added as the f32 tile adds it; bias, activation),
    /// transposed and stored rounded (type `E`) as the first `h` values of `nch` rows of `y`
    /// at stride `ldy`.
    ///
    /// # Safety
    /// The CPU has AVX-512F/BW/VL; `y` readable (with a residual) and writable for
    /// `nch <= 16 W` rows of `h` values at stride `ldy`; the epilogue's bias null or
    /// readable for `nch`, scales null or readable for `16 W`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    #[inline]
    unsafe fn finish<const M: usize, const W: usize, const E: u8>(
        mut acc: [[__m512; W]; M],
        y: *mut u16,
        ldy: usize,
        (nch, h): (usize, usize),
        Epilogue {
            bias,
            scales,
            act,
            acc: residual,
        }: Epilogue,
    ) {
        let (t, hmask) = (n16(E), lanes(h));
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
                let mut tr = [_mm512_setzero_ps(); 16];
                for (ci, r) in tr.iter_mut().take(chans).enumerate() {
                    // SAFETY: the first h values of row j*16 + ci < nch of y (masked).
                    *r = widen16(t, unsafe {
                        _mm256_maskz_loadu_epi16(hmask, y.add((j * NR + ci) * ldy).cast())
                    });
                }
                let cols = transpose16(tr);
                for (row, &r) in acc.iter_mut().zip(&cols) {
                    row[j] = _mm512_add_ps(row[j], r);
                }
            }
            let bv = if bias.is_null() {
                _mm512_setzero_ps()
            } else {
                // SAFETY: channels j*16..j*16+chans < nch of the bias (the contract).
                unsafe { _mm512_maskz_loadu_ps(lanes(chans), bias.add(j * NR)) }
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

    /// `M` pixels (the first `h` stored) x `W` panels of 16 channels of weights of type `T`,
    /// on planes of type `E`, K widened [`KC`] rows at a time on the stack.
    ///
    /// # Safety
    /// The CPU has AVX-512F/BW/VL, AVX2 and FMA; `x` readable for `k` rows of `h <= M <= 16`
    /// values at stride `ldx`; `b` for `W` panels (at element `j * bstride`) of `k` rows of
    /// 16 elements of type `T`; as [`finish`] for `y` and the epilogue.
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
        epi: Epilogue,
    ) {
        let mut acc = [[_mm512_setzero_ps(); W]; M];
        let mut buf = MaybeUninit::<[__m512; KC]>::uninit();
        let rows = buf.as_mut_ptr().cast::<__m512>();
        let mut p0 = 0;
        while p0 < k {
            let kc = KC.min(k - p0);
            // SAFETY: rows p0..p0+kc of the input into the buffer's first kc vectors,
            // accumulated with the weights' rows p0.. (the contract).
            unsafe {
                widen_accumulate::<M, W, T, E>(
                    &mut acc,
                    (x.add(p0 * ldx), ldx, h),
                    rows,
                    (kc, p0),
                    b,
                    bstride,
                )
            };
            p0 += kc;
        }
        // SAFETY: the contract.
        unsafe { finish::<M, W, E>(acc, y, ldy, (nch, h), epi) };
    }

    /// As [`tile`], the input already widened: `k` rows of 16 floats at `xs` ([`widen`]).
    ///
    /// # Safety
    /// As [`tile`], `xs` readable for `k` rows of 16 floats.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn wide<const M: usize, const W: usize, const T: u64, const E: u8>(
        k: usize,
        xs: *const f32,
        b: *const u8,
        bstride: usize,
        y: *mut u16,
        ldy: usize,
        (nch, h): (usize, usize),
        epi: Epilogue,
    ) {
        let mut acc = [[_mm512_setzero_ps(); W]; M];
        // SAFETY: the contract.
        unsafe {
            accumulate::<M, W, T>(&mut acc, xs, (0, k, 0), b, bstride);
            finish::<M, W, E>(acc, y, ldy, (nch, h), epi);
        }
    }

    /// As [`tile`] with all `k` rows widened into `rows` (left there for [`wide`]).
    ///
    /// # Safety
    /// As [`tile`], `rows` writable for `k` vectors.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn first<const M: usize, const W: usize, const T: u64, const E: u8>(
        k: usize,
        x: *const u16,
        ldx: usize,
        rows: *mut __m512,
        b: *const u8,
        bstride: usize,
        y: *mut u16,
        ldy: usize,
        (nch, h): (usize, usize),
        epi: Epilogue,
    ) {
        let mut acc = [[_mm512_setzero_ps(); W]; M];
        // SAFETY: the contract.
        unsafe {
            widen_accumulate::<M, W, T, E>(&mut acc, (x, ldx, h), rows, (k, 0), b, bstride);
            finish::<M, W, E>(acc, y, ldy, (nch, h), epi);
        }
    }

    /// The chunked tile of `m` rows (1, 2, 4, 8 or 12) for `panels` (1 or 2) panels of
    /// weights of type `t` (0..=3, [`crate::gemm::lowp::WeightType::code`]) on planes of
    /// type `e`.
    pub(super) fn tile_for(m: usize, panels: usize, t: u64, e: u8) -> Option<Tile16> {
        Some(select(m, panels, t, e)?.0)
    }

    /// As [`tile_for`], the tiles of a group of blocks sharing one widened input: the
    /// first block's (widening it whole) and the others'.
    pub(super) fn shared_for(m: usize, panels: usize, t: u64, e: u8) -> Option<(First16, Wide16)> {
        let (_, f, w) = select(m, panels, t, e)?;
        Some((f, w))
    }

    /// Both kernels of [`tile_for`]'s arguments.
    fn select(m: usize, panels: usize, t: u64, e: u8) -> Option<(Tile16, First16, Wide16)> {
        match e {
            F16 => of_elem::<F16>(m, panels, t),
            BF16 => of_elem::<BF16>(m, panels, t),
            _ => None,
        }
    }

    /// [`select`] on planes of type `E`.
    fn of_elem<const E: u8>(m: usize, panels: usize, t: u64) -> Option<(Tile16, First16, Wide16)> {
        match t {
            0 => of::<0, E>(m, panels),
            1 => of::<1, E>(m, panels),
            2 => of::<2, E>(m, panels),
            3 => of::<3, E>(m, panels),
            _ => None,
        }
    }

    /// [`select`] for weights of type `T` on planes of type `E`.
    fn of<const T: u64, const E: u8>(m: usize, panels: usize) -> Option<(Tile16, First16, Wide16)> {
        /// Lists one instantiation per row count (no logic).
        macro_rules! sel {
            ($($n:literal),*) => {
                match (m, panels) {
                    $(($n, 1) => Some((tile::<$n, 1, T, E> as Tile16, first::<$n, 1, T, E> as First16, wide::<$n, 1, T, E> as Wide16)),
                      ($n, 2) => Some((tile::<$n, 2, T, E> as Tile16, first::<$n, 2, T, E> as First16, wide::<$n, 2, T, E> as Wide16)),)*
                    _ => None,
                }
            };
        }
        sel!(1, 2, 4, 8, 12)
    }
}
