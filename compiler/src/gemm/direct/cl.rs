//! Direct convolution with output *channels* in the vector lanes (MLAS's NCHWc kernels'
//! register layout, on NCHW tensors): the AVX-512 path of [`super`] for strided
//! convolutions and small planes, where the pixel-vector kernels waste lanes (a 7 x 7 plane
//! fills 49 of 64 lanes) or permute stride-2 loads.
//!
//! Weights ([`pack`]): groups of up to [`NB`] blocks of 16 output channels; in a group of
//! `nb` blocks, K step `s` holds the group's `16 nb` weights side by side (`s * 16 nb + 16 j
//! + l`: channel `16 (4 g + j) + l`); group `g` starts at `64 g k`. `m % 16 == 0` ([`fits`]),
//! so the packing fills `m k` floats, within the GEMM's packed A size.
//!
//! The output plane is cut into *regions*: rectangles of pixels whose windows reach the same
//! taps inside the input (rows `ky0..ky1`, columns `kx0..kx1` of the kernel; the padding is
//! the taps left out), so no load is masked and no pixel branches. A region is walked in
//! chunks of up to [`NP`] pixels (across its rows); for each chunk an `nb x NP` block of
//! accumulators sums, for every tap `(ci, ky, kx)` in K order, `nb` weight vectors times the
//! chunk's input values, one broadcast each. Bias, a fused residual
//! ([`ConvParams::accumulate`]: each pixel's 16 channels gathered from the output planes) and
//! the fused activation are applied in registers; the block is transposed in registers (channels to rows of pixels) and each
//! channel's pixels stored by one masked store per run of consecutive pixels.
//!
//! One *unit* is one image, one channel group and one chunk; units run chunks innermost (a
//! group's weights stay in cache). Each output element is summed over its valid taps in K
//! order by the same instructions whatever unit or thread computes it: results are
//! bit-identical at every thread count.

use super::super::conv::ConvParams;
use super::super::split::SyncPtr;
use super::Geom;

/// Blocks of 16 output channels per group (the accumulator rows).
pub(super) const NB: usize = 4;

/// Most pixels per chunk (the accumulator columns: `NB * NP` = 24 registers).
const NP: usize = 6;

/// Most taps of a kernel (`kh * kw`: a region's tap table lives on the stack).
const MAX_TAPS: usize = 64;

/// Most runs of rows (or columns) with the same tap range ([`Runs`]).
const MAX_RUNS: usize = 24;

/// Whether the geometry is one this path computes (`m` a multiple of 16, at most
/// [`MAX_TAPS`] taps, planes under 2^27 pixels, at most [`MAX_RUNS`] runs
/// of rows and of columns) and is faster on (measured with `examples/conv_bench`, GFLOP/s by
/// CPU time, against the row and flat kernels): whole groups of 64 output channels (the
/// hand-scheduled 4 x 6 block; 16 or 32 channels ran at half speed), `K >= 64` (the store
/// per chunk outweighs 27 taps: 50 vs 66 on a 3-channel 3x3), and not a stride-1 conv over
/// input planes of a multiple of 4 KiB (every channel's rows then fall in the same L1 sets:
/// 89 vs 103 on 64 x 64 planes; 112 vs 97 on 56 x 56). The caller checks the rest: groups,
/// packing, the CPU. `ARENAC_CONV_CL=0` turns it off, `=1` takes it wherever it computes.
pub(super) fn fits(p: &ConvParams) -> bool {
    static MODE: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let mode = *MODE.get_or_init(|| std::env::var("ARENAC_CONV_CL").ok().map(|v| v != "0"));
    if mode == Some(false) {
        return false;
    }
    let possible = p.m.is_multiple_of(16)
        && p.kh.saturating_mul(p.kw) <= MAX_TAPS as u64
        && p.m > 0
        && p.oh.saturating_mul(p.ow).saturating_mul(16) < (1 << 31)
        && p.oh > 0
        && p.ow > 0
        && runs_of(p, true).is_some()
        && runs_of(p, false).is_some();
    if !possible {
        return false;
    }
    if mode == Some(true) {
        return true;
    }
    p.m.is_multiple_of(64)
        && p.k() >= 64
        && (p.stride_h > 1 || p.stride_w > 1 || !p.h.saturating_mul(p.w).is_multiple_of(1024))
}

/// Element index of weight (channel `r`, K step `s`) of `m x k` weights in [`pack`]'s
/// layout.
pub(super) fn index(m: usize, k: usize, r: usize, s: usize) -> usize {
    let (g, j, l) = (r / (NB * 16), r % (NB * 16) / 16, r % 16);
    let nb = (m / 16 - g * NB).min(NB);
    g * NB * 16 * k + (s * nb + j) * 16 + l
}

/// Packs `m x k` weights (row-major, `m % 16 == 0`) into `out` (`m k` floats) in the layout
/// of the module doc.
pub(super) fn pack(m: usize, k: usize, w: &[f32], out: &mut [f32]) {
    let blocks = m / 16;
    for g in 0..blocks.div_ceil(NB) {
        let nb = (blocks - g * NB).min(NB);
        let base = g * NB * 16 * k;
        for s in 0..k {
            for j in 0..nb {
                for l in 0..16 {
                    let ch = (g * NB + j) * 16 + l;
                    if let (Some(o), Some(&v)) =
                        (out.get_mut(base + (s * nb + j) * 16 + l), w.get(ch * k + s))
                    {
                        *o = v;
                    }
                }
            }
        }
    }
}

/// Runs of consecutive output rows (or columns) whose windows reach the same kernel rows
/// (columns) `lo..hi` inside the input: run `r` covers outputs `start[r]..start[r + 1]`.
#[derive(Clone, Copy)]
struct Runs {
    n: usize,
    start: [usize; MAX_RUNS + 1],
    lo: [usize; MAX_RUNS],
    hi: [usize; MAX_RUNS],
}

/// The runs of `p`'s rows (`rows`) or columns, or `None` past [`MAX_RUNS`].
fn runs_of(p: &ConvParams, rows: bool) -> Option<Runs> {
    let u = |v: u64| v as usize;
    let (out, len, k, s, d, pad) = if rows {
        (
            u(p.oh),
            u(p.h),
            u(p.kh),
            u(p.stride_h),
            u(p.dil_h),
            u(p.pad_t),
        )
    } else {
        (
            u(p.ow),
            u(p.w),
            u(p.kw),
            u(p.stride_w),
            u(p.dil_w),
            u(p.pad_l),
        )
    };
    let (s, d) = (s.max(1), d.max(1));
    let mut r = Runs {
        n: 0,
        start: [0; MAX_RUNS + 1],
        lo: [0; MAX_RUNS],
        hi: [0; MAX_RUNS],
    };
    for o in 0..out {
        // Input index of tap t: o s + t d - pad, growing with t.
        let at = |t: usize| (o * s + t * d) as isize - pad as isize;
        let lo = (0..k).find(|&t| at(t) >= 0).unwrap_or(k);
        let hi = (lo..k).find(|&t| at(t) >= len as isize).unwrap_or(k);
        if r.n > 0 && r.lo[r.n - 1] == lo && r.hi[r.n - 1] == hi {
            continue;
        }
        if r.n == MAX_RUNS {
            return None;
        }
        r.start[r.n] = o;
        (r.lo[r.n], r.hi[r.n]) = (lo, hi);
        r.n += 1;
    }
    r.start[r.n] = out;
    Some(r)
}

/// The regions' chunks: how many in one image and group, and which region (row run, column
/// run) and first pixel chunk `i` of them is.
#[derive(Clone, Copy)]
struct Plan {
    rows: Runs,
    cols: Runs,
    chunks: usize,
}

impl Plan {
    fn area(&self, rr: usize, cr: usize) -> (usize, usize) {
        let h = self.rows.start[rr + 1] - self.rows.start[rr];
        let w = self.cols.start[cr + 1] - self.cols.start[cr];
        (h, w)
    }

    /// Region `(rr, cr)` and the chunk's first pixel (row-major inside the region).
    fn locate(&self, mut i: usize) -> (usize, usize, usize) {
        for rr in 0..self.rows.n {
            for cr in 0..self.cols.n {
                let (h, w) = self.area(rr, cr);
                let c = (h * w).div_ceil(NP);
                if i < c {
                    return (rr, cr, i * NP);
                }
                i -= c;
            }
        }
        (0, 0, 0)
    }
}

/// `y = act(conv(x, w) + bias)` for `p` ([`fits`]), spread over the current pool.
///
/// With reduced weights (`lowp`), a task widens the group it computes into its thread's
/// slot whenever the group changes (chunks are innermost: once or twice per task).
///
/// # Safety
/// That of [`super::run`], with `w` packed by [`pack`] (or its reduced form).
pub(super) unsafe fn run(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    lowp: super::Lowp,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let (Some(rows), Some(cols)) = (runs_of(p, true), runs_of(p, false)) else {
            return;
        };
        let mut plan = Plan {
            rows,
            cols,
            chunks: 0,
        };
        for rr in 0..rows.n {
            for cr in 0..cols.n {
                let (h, w) = plan.area(rr, cr);
                plan.chunks += (h * w).div_ceil(NP);
            }
        }
        let g = Geom::new(p);
        let act = p.activation();
        let groups = (g.m / 16).div_ceil(NB);
        let units = p.n as usize * groups * plan.chunks;
        let width = (p.threads.max(1) as usize).min(crate::par::threads());
        let unit_macs = NB * 16 * NP * g.k;
        // Tasks of consecutive units, about 3 per thread: neighbouring chunks write the same
        // cache lines of each channel's output row and read the same input rows, so units
        // dealt one at a time to the threads in turn shared lines and 2 threads ran slower
        // than 1 (ResNet-18's 7x7/s2: 4.4 ms vs 3.1). Measured on ResNet-18 at 2 threads,
        // its 13 3x3/s1 convs: 21.1 ms with single units, 18.5 with 8 blocks per thread,
        // 15.3 with 3 (1 thread: 30.1).
        let per = (super::super::split::MIN_TASK_MACS / unit_macs.max(1))
            .max(units / (3 * width.max(1)))
            .max(1);
        let tasks = units.div_ceil(per);
        let bias = (p.has_bias != 0).then_some(SyncPtr(bias.cast_mut()));
        let (x, w, y) = (SyncPtr(x.cast_mut()), SyncPtr(w.cast_mut()), SyncPtr(y));
        let slot = super::super::lowp::conv::direct_slot_floats(p);
        let lowp = lowp.map(|(r, s)| (r, SyncPtr(s)));
        crate::par::for_each(tasks, width, |t, thread| {
            // The group whose widened weights are in this thread's slot.
            let mut widened = usize::MAX;
            for u in t * per..((t + 1) * per).min(units) {
                let (img, r) = (u / (groups * plan.chunks), u % (groups * plan.chunks));
                let (gi, ci) = (r / plan.chunks, r % plan.chunks);
                let (rr, cr, q0) = plan.locate(ci);
                let (rh, rw) = plan.area(rr, cr);
                let nb = (g.m / 16 - gi * NB).min(NB);
                let np = (rh * rw - q0).min(NP);
                // Pixel q of the region: row rows.start[rr] + q / rw, column .. + q % rw.
                let mut pix = [(0usize, 0usize); NP];
                for (i, px) in pix.iter_mut().enumerate().take(np) {
                    let q = q0 + i;
                    *px = (rows.start[rr] + q / rw, cols.start[cr] + q % rw);
                }
                let taps = Taps {
                    ky0: rows.lo[rr],
                    ky1: rows.hi[rr].max(rows.lo[rr]),
                    kx0: cols.lo[cr],
                    kx1: cols.hi[cr].max(cols.lo[cr]),
                };
                let xi = x.get().cast_const().wrapping_add(img * g.c * g.h * g.w);
                let yi = y.get().wrapping_add(img * g.m * g.oh * g.ow);
                let wg = match &lowp {
                    None => w.get().cast_const().wrapping_add(gi * NB * 16 * g.k),
                    Some((r, scratch)) => {
                        let wp = scratch.get().wrapping_add(thread * slot);
                        if widened != gi {
                            // SAFETY: group gi's 16 nb k elements (and scales) exist in the
                            // packed weights; thread < width owns its slot of `slot >= 64 k`
                            // floats.
                            unsafe {
                                r.widen(
                                    gi * NB * 16 * g.k,
                                    nb * 16 * g.k,
                                    wp,
                                    (gi * NB * 16, nb * 16),
                                )
                            };
                            widened = gi;
                        }
                        wp.cast_const()
                    }
                };
                let b = bias
                    .as_ref()
                    .map(|b| b.get().cast_const().wrapping_add(gi * NB * 16));
                let oc0 = gi * NB * 16;
                // SAFETY: the contract; unit u writes only its chunk's pixels of its group's
                // channels of image img; the CPU has AVX-512F (`super::applies`).
                unsafe { x86::chunk(&g, xi, wg, b, act, yi, oc0, nb, &pix[..np], taps) };
            }
        });
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, x, w, bias, y, lowp);
}

/// The kernel rows `ky0..ky1` and columns `kx0..kx1` a region's windows reach.
#[derive(Clone, Copy)]
struct Taps {
    ky0: usize,
    ky1: usize,
    kx0: usize,
    kx1: usize,
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Geom, MAX_TAPS, NP, Taps};
    use crate::gemm::act::Activation;
    use crate::gemm::act::x86::act512;
    use core::arch::x86_64::*;

    /// One chunk: pixels `pix` (`(oy, ox)`, all of one region with taps `t`) of channels
    /// `oc0 .. oc0 + 16 nb` of one image.
    ///
    /// # Safety
    /// AVX-512F; `x` readable for the image's `c*h*w` floats, `w` the group's packed
    /// weights, `bias` (if any) the group's `16 nb` floats, `y` writable for the image's
    /// `m*oh*ow` floats; `1 <= nb <= 4`, `1 <= pix.len() <= NP`, the taps those of the
    /// pixels' region.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn chunk(
        g: &Geom,
        x: *const f32,
        w: *const f32,
        bias: Option<*const f32>,
        act: Activation,
        y: *mut f32,
        oc0: usize,
        nb: usize,
        pix: &[(usize, usize)],
        t: Taps,
    ) {
        macro_rules! go {
            ($mb:literal) => {
                match pix.len() {
                    1 => body::<$mb, 1>(g, x, w, bias, act, y, oc0, pix, t),
                    2 => body::<$mb, 2>(g, x, w, bias, act, y, oc0, pix, t),
                    3 => body::<$mb, 3>(g, x, w, bias, act, y, oc0, pix, t),
                    4 => body::<$mb, 4>(g, x, w, bias, act, y, oc0, pix, t),
                    5 => body::<$mb, 5>(g, x, w, bias, act, y, oc0, pix, t),
                    _ => body::<$mb, NP>(g, x, w, bias, act, y, oc0, pix, t),
                }
            };
        }
        // SAFETY: the contract of this function, passed on.
        unsafe {
            match nb {
                1 => go!(1),
                2 => go!(2),
                3 => go!(3),
                _ => go!(4),
            }
        }
    }

    /// [`chunk`] with `MB` = `nb` blocks and `P` = `pix.len()` pixels.
    ///
    /// # Safety
    /// That of [`chunk`].
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn body<const MB: usize, const P: usize>(
        g: &Geom,
        x: *const f32,
        w: *const f32,
        bias: Option<*const f32>,
        act: Activation,
        y: *mut f32,
        oc0: usize,
        pix: &[(usize, usize)],
        t: Taps,
    ) {
        // Per pixel: the input element of its first valid tap (ky0, kx0) of channel 0; tap
        // (ci, ky0 + a, kx0 + b) is at ci h w + a dh w + b dw from it, inside the plane.
        let mut base = [x; P];
        for (b, &(oy, ox)) in base.iter_mut().zip(pix) {
            let iy = (oy * g.sh + t.ky0 * g.dh) as isize - g.pt;
            let ix = (ox * g.sw + t.kx0 * g.dw) as isize - g.pl;
            *b = x.wrapping_offset(iy * g.w as isize + ix);
        }
        let hw = g.h * g.w;
        let (ny, nx) = (t.ky1 - t.ky0, t.kx1 - t.kx0);
        // The region's taps of one input channel: input offset from a pixel's base, weight
        // offset from the channel's first K step (ky0 + a, kx0 + b: step (ky0 + a) kw + kx0 + b).
        let mut taps = [(0isize, 0usize); MAX_TAPS];
        let n = ny * nx;
        for (i, tap) in taps.iter_mut().enumerate().take(n) {
            let (a, b) = (i / nx, i % nx);
            *tap = (
                (a * g.dh * g.w + b * g.dw) as isize,
                ((t.ky0 + a) * g.kw + t.kx0 + b) * 16 * MB,
            );
        }
        let taps = &taps[..n];
        // SAFETY: AVX-512F (the caller's target features) and the memory of the contract:
        // every tap read lies inside input plane ci (the region's taps); stores go to the
        // chunk's pixels of channels oc0 .. oc0 + 16 MB < m.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); P]; MB];
            if MB == 4 && P == NP && n > 0 && g.c > 0 {
                // The full block: the hand-scheduled loop (LLVM spilled accumulators here).
                let mut tab = [0i64; 4 + 2 * MAX_TAPS];
                tab[0] = (16 * n) as i64;
                tab[1] = (4 * hw) as i64;
                tab[2] = (4 * g.kh * g.kw * 16 * MB) as i64;
                tab[3] = (4 * hw * g.c) as i64;
                for (e, &(xo, wo)) in tab[4..].chunks_exact_mut(2).zip(taps) {
                    (e[0], e[1]) = (4 * xo as i64, (4 * wo) as i64);
                }
                let mut b6 = [x; NP];
                b6.copy_from_slice(&base[..NP]);
                let a = block_4x6(&tab, &b6, w);
                for (j, aj) in acc.iter_mut().enumerate() {
                    for (pi, v) in aj.iter_mut().enumerate() {
                        *v = a[j * NP + pi];
                    }
                }
            } else {
                // One loop over (ci, tap) in K order (nested loops made the register
                // allocator spill the accumulators at every inner loop's exit).
                let (mut i, mut xc, mut wc) = (0usize, 0isize, w);
                let wstep = g.kh * g.kw * 16 * MB;
                for _ in 0..g.c * n {
                    // SAFETY: i < n (reset on reaching it).
                    let &(xo, wo) = taps.get_unchecked(i);
                    let (o, wp) = (xc + xo, wc.add(wo));
                    let mut wv = [_mm512_setzero_ps(); MB];
                    for (j, v) in wv.iter_mut().enumerate() {
                        *v = _mm512_loadu_ps(wp.add(16 * j));
                    }
                    for (pi, &b) in base.iter().enumerate() {
                        let xb = _mm512_set1_ps(*b.offset(o));
                        for (j, &v) in wv.iter().enumerate() {
                            acc[j][pi] = _mm512_fmadd_ps(v, xb, acc[j][pi]);
                        }
                    }
                    i += 1;
                    if i == n {
                        i = 0;
                        xc += hw as isize;
                        wc = wc.add(wstep);
                    }
                }
            }
            let plane = g.oh * g.ow;
            // Runs of pixels at consecutive offsets of the plane (one row each): run r is
            // lanes of mask `keep[r]`, lane i at offset `at[r] + i` (pixels ascend).
            let (mut keep, mut at, mut nr) = ([0u16; NP], [0usize; NP], 0);
            for (i, &(oy, ox)) in pix.iter().enumerate() {
                let f = oy * g.ow + ox;
                if nr > 0 && at[nr - 1] + i == f {
                    keep[nr - 1] |= 1 << i;
                } else {
                    (keep[nr], at[nr]) = (1 << i, f - i);
                    nr += 1;
                }
            }
            let (keep, at) = (&keep[..nr], &at[..nr]);
            for (j, aj) in acc.iter().enumerate() {
                let b = match bias {
                    Some(b) => _mm512_loadu_ps(b.add(16 * j)),
                    None => _mm512_setzero_ps(),
                };
                let yc = y.add((oc0 + 16 * j) * plane);
                let mut v = [_mm512_setzero_ps(); 8];
                for (o, &a) in v.iter_mut().zip(aj) {
                    *o = _mm512_add_ps(a, b);
                }
                if g.acc {
                    // A fused residual: loaded as the stores below write it (per channel
                    // half and run of pixels, one masked load each), then the transpose
                    // undone: r[p] holds pixel p's 16 channels (zero past the chunk).
                    let mut o = [_mm512_setzero_ps(); 8];
                    for q in 0..4 {
                        for half in 0..2 {
                            let lo = yc.add((q + 8 * half) * plane);
                            let hi = yc.add((q + 4 + 8 * half) * plane).wrapping_sub(8);
                            let mut tv = _mm512_setzero_ps();
                            for (&k, &a) in keep.iter().zip(at) {
                                tv = _mm512_mask_loadu_ps(tv, k, lo.wrapping_add(a));
                                tv = _mm512_mask_loadu_ps(tv, k << 8, hi.wrapping_add(a));
                            }
                            o[q + 4 * half] = tv;
                        }
                    }
                    for (vo, &r) in v.iter_mut().zip(&untranspose(o)) {
                        *vo = _mm512_add_ps(*vo, r);
                    }
                }
                for o in v.iter_mut().take(P) {
                    *o = act512(act, *o);
                }
                // Channel l of the block: its pixels in plane oc0 + 16 j + l, one masked
                // store per run.
                let t = transpose(v);
                for q in 0..4 {
                    for (half, &tv) in [t[q], t[4 + q]].iter().enumerate() {
                        // Channels q + 8 half (low lanes) and q + 4 + 8 half (high lanes).
                        let lo = yc.add((q + 8 * half) * plane);
                        let hi = yc.add((q + 4 + 8 * half) * plane).wrapping_sub(8);
                        for (&k, &a) in keep.iter().zip(at) {
                            _mm512_mask_storeu_ps(lo.wrapping_add(a), k, tv);
                            _mm512_mask_storeu_ps(hi.wrapping_add(a), k << 8, tv);
                        }
                    }
                }
            }
        }
    }

    /// Rows `r[p]` (16 channels of pixel `p`) to channels: vector `q` (< 4) holds channel `q`
    /// in its low 8 lanes and `q + 4` in its high 8, vector `4 + q` channels `q + 8` and
    /// `q + 12`; lane `i` of each half is pixel `i`.
    #[inline(always)]
    pub(super) fn transpose(r: [__m512; 8]) -> [__m512; 8] {
        // SAFETY: value-only AVX-512F intrinsics inside AVX-512F callers.
        unsafe {
            let mut t = [_mm512_setzero_ps(); 8];
            for i in 0..4 {
                // Per 128-bit lane L (channels 4L..): pixels 2i, 2i+1 of channels 4L, 4L+1
                // (t[2i]) and 4L+2, 4L+3 (t[2i+1]).
                t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
            }
            let mut u = [_mm512_setzero_ps(); 8];
            for g in 0..2 {
                // Lane L of u[4g + q]: channel 4L + q, pixels 4g .. 4g + 4.
                u[4 * g] = _mm512_shuffle_ps::<0x44>(t[4 * g], t[4 * g + 2]);
                u[4 * g + 1] = _mm512_shuffle_ps::<0xEE>(t[4 * g], t[4 * g + 2]);
                u[4 * g + 2] = _mm512_shuffle_ps::<0x44>(t[4 * g + 1], t[4 * g + 3]);
                u[4 * g + 3] = _mm512_shuffle_ps::<0xEE>(t[4 * g + 1], t[4 * g + 3]);
            }
            let ia = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
            let ib =
                _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
            let mut o = [_mm512_setzero_ps(); 8];
            for q in 0..4 {
                // Lanes L0 then L1 (channels q, q + 4) and L2, L3 (q + 8, q + 12) of pixels
                // 0..4 (u[q]) and 4..8 (u[4 + q]).
                o[q] = _mm512_permutex2var_ps(u[q], ia, u[4 + q]);
                o[4 + q] = _mm512_permutex2var_ps(u[q], ib, u[4 + q]);
            }
            o
        }
    }

    /// The inverse of [`transpose`]: `untranspose(transpose(r)) == r`.
    #[inline(always)]
    pub(super) fn untranspose(o: [__m512; 8]) -> [__m512; 8] {
        // SAFETY: value-only AVX-512F intrinsics inside AVX-512F callers.
        unsafe {
            // Undo the 128-bit lane interleave: u[q] = lanes 0 and 2 of o[q], then of
            // o[4 + q]; u[4 + q] = lanes 1 and 3 of each.
            let ja = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
            let jb = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
            let mut u = [_mm512_setzero_ps(); 8];
            for q in 0..4 {
                u[q] = _mm512_permutex2var_ps(o[q], ja, o[4 + q]);
                u[4 + q] = _mm512_permutex2var_ps(o[q], jb, o[4 + q]);
            }
            // Per 128-bit lane, a 4 x 4 transpose (its own inverse), as `transpose`'s first
            // two steps.
            let mut r = [_mm512_setzero_ps(); 8];
            for g in 0..2 {
                let (a, b, c, d) = (u[4 * g], u[4 * g + 1], u[4 * g + 2], u[4 * g + 3]);
                let (t0, t1) = (_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
                let (t2, t3) = (_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
                r[4 * g] = _mm512_shuffle_ps::<0x44>(t0, t2);
                r[4 * g + 1] = _mm512_shuffle_ps::<0xEE>(t0, t2);
                r[4 * g + 2] = _mm512_shuffle_ps::<0x44>(t1, t3);
                r[4 * g + 3] = _mm512_shuffle_ps::<0xEE>(t1, t3);
            }
            r
        }
    }

    /// The sums of a full chunk (4 blocks x 6 pixels) over every input channel and tap, in
    /// K order, as [`body`]'s loop computes them (each accumulator `fma(w, x, acc)` per tap,
    /// so the bits are the same): `a[j * 6 + p]` is block `j` of pixel `p`.
    ///
    /// `tab`: bytes per channel of the tap table (`16 n`, `n >= 1`), of an input plane, of a
    /// channel's weights, of all channels' input (`c >= 1`), then per tap its input and
    /// weight offsets in bytes from the pixel's base (`b[p]`) and the channel's weights.
    ///
    /// # Safety
    /// AVX-512F; every `b[p] + ci * plane + xo` and `w + ci * wstep + wo + 0..256` readable.
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn block_4x6(tab: &[i64], b: &[*const f32; 6], w: *const f32) -> [__m512; 24] {
        let z = _mm512_setzero_ps();
        let [mut a0, mut a1, mut a2, mut a3, mut a4, mut a5] = [z; 6];
        let [mut a6, mut a7, mut a8, mut a9, mut a10, mut a11] = [z; 6];
        let [mut a12, mut a13, mut a14, mut a15, mut a16, mut a17] = [z; 6];
        let [mut a18, mut a19, mut a20, mut a21, mut a22, mut a23] = [z; 6];
        let t = tab[4..].as_ptr();
        // SAFETY: the contract; the loop reads the table's header at t - 32 .. t and its
        // entries, the inputs at b[p] + x + xo and the weights at w + wo .. + 256.
        unsafe {
            core::arch::asm!(
                "xor {i}, {i}",
                "2:",
                "mov {o}, qword ptr [{t} + {i} + 8]",
                "vmovups zmm24, zmmword ptr [{w} + {o}]",
                "vmovups zmm25, zmmword ptr [{w} + {o} + 64]",
                "vmovups zmm26, zmmword ptr [{w} + {o} + 128]",
                "vmovups zmm27, zmmword ptr [{w} + {o} + 192]",
                "mov {o}, qword ptr [{t} + {i}]",
                "add {o}, {x}",
                "vbroadcastss zmm28, dword ptr [{b0} + {o}]",
                "vbroadcastss zmm29, dword ptr [{b1} + {o}]",
                "vfmadd231ps zmm0, zmm24, zmm28",
                "vfmadd231ps zmm6, zmm25, zmm28",
                "vfmadd231ps zmm12, zmm26, zmm28",
                "vfmadd231ps zmm18, zmm27, zmm28",
                "vbroadcastss zmm28, dword ptr [{b2} + {o}]",
                "vfmadd231ps zmm1, zmm24, zmm29",
                "vfmadd231ps zmm7, zmm25, zmm29",
                "vfmadd231ps zmm13, zmm26, zmm29",
                "vfmadd231ps zmm19, zmm27, zmm29",
                "vbroadcastss zmm29, dword ptr [{b3} + {o}]",
                "vfmadd231ps zmm2, zmm24, zmm28",
                "vfmadd231ps zmm8, zmm25, zmm28",
                "vfmadd231ps zmm14, zmm26, zmm28",
                "vfmadd231ps zmm20, zmm27, zmm28",
                "vbroadcastss zmm28, dword ptr [{b4} + {o}]",
                "vfmadd231ps zmm3, zmm24, zmm29",
                "vfmadd231ps zmm9, zmm25, zmm29",
                "vfmadd231ps zmm15, zmm26, zmm29",
                "vfmadd231ps zmm21, zmm27, zmm29",
                "vbroadcastss zmm29, dword ptr [{b5} + {o}]",
                "vfmadd231ps zmm4, zmm24, zmm28",
                "vfmadd231ps zmm10, zmm25, zmm28",
                "vfmadd231ps zmm16, zmm26, zmm28",
                "vfmadd231ps zmm22, zmm27, zmm28",
                "vfmadd231ps zmm5, zmm24, zmm29",
                "vfmadd231ps zmm11, zmm25, zmm29",
                "vfmadd231ps zmm17, zmm26, zmm29",
                "vfmadd231ps zmm23, zmm27, zmm29",
                "add {i}, 16",
                "cmp {i}, qword ptr [{t} - 32]",
                "jne 2b",
                "xor {i}, {i}",
                "add {x}, qword ptr [{t} - 24]",
                "add {w}, qword ptr [{t} - 16]",
                "cmp {x}, qword ptr [{t} - 8]",
                "jne 2b",
                t = in(reg) t,
                w = inout(reg) w => _,
                x = inout(reg) 0i64 => _,
                i = out(reg) _,
                o = out(reg) _,
                b0 = in(reg) b[0],
                b1 = in(reg) b[1],
                b2 = in(reg) b[2],
                b3 = in(reg) b[3],
                b4 = in(reg) b[4],
                b5 = in(reg) b[5],
                inout("zmm0") a0, inout("zmm1") a1, inout("zmm2") a2,
                inout("zmm3") a3, inout("zmm4") a4, inout("zmm5") a5,
                inout("zmm6") a6, inout("zmm7") a7, inout("zmm8") a8,
                inout("zmm9") a9, inout("zmm10") a10, inout("zmm11") a11,
                inout("zmm12") a12, inout("zmm13") a13, inout("zmm14") a14,
                inout("zmm15") a15, inout("zmm16") a16, inout("zmm17") a17,
                inout("zmm18") a18, inout("zmm19") a19, inout("zmm20") a20,
                inout("zmm21") a21, inout("zmm22") a22, inout("zmm23") a23,
                out("zmm24") _, out("zmm25") _, out("zmm26") _, out("zmm27") _,
                out("zmm28") _, out("zmm29") _,
                options(nostack, readonly),
            );
        }
        [
            a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18,
            a19, a20, a21, a22, a23,
        ]
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    #[test]
    fn untranspose_inverts_transpose() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        #[target_feature(enable = "avx512f")]
        fn round_trip(src: &[f32; 128]) -> ([f32; 128], [f32; 128]) {
            use core::arch::x86_64::*;
            let mut r = [_mm512_setzero_ps(); 8];
            for (i, v) in r.iter_mut().enumerate() {
                // SAFETY: 16 floats of `src`.
                *v = unsafe { _mm512_loadu_ps(src.as_ptr().add(16 * i)) };
            }
            let t = super::x86::transpose(r);
            let back = super::x86::untranspose(t);
            let (mut tt, mut out) = ([0.0f32; 128], [0.0f32; 128]);
            for i in 0..8 {
                // SAFETY: 16 floats of the arrays.
                unsafe {
                    _mm512_storeu_ps(tt.as_mut_ptr().add(16 * i), t[i]);
                    _mm512_storeu_ps(out.as_mut_ptr().add(16 * i), back[i]);
                }
            }
            (tt, out)
        }
        let src: [f32; 128] = std::array::from_fn(|i| i as f32);
        // SAFETY: AVX-512F detected above.
        let (t, back) = unsafe { round_trip(&src) };
        assert_eq!(back, src);
        // The layout `transpose` documents: vector q (< 4) holds channel q of pixels 0..8 in
        // its low 8 lanes and channel q + 4 in its high 8; vector 4 + q channels q + 8, q + 12.
        for q in 0..4 {
            for half in 0..2 {
                for i in 0..8 {
                    let v = &t[16 * (q + 4 * half)..];
                    assert_eq!(v[i], src[16 * i + q + 8 * half]);
                    assert_eq!(v[8 + i], src[16 * i + q + 4 + 8 * half]);
                }
            }
        }
    }
}
