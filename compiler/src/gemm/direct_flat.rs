//! Direct convolution over the flattened output plane: the AVX-512 path of [`super::direct`]
//! for "same" convolutions at stride 1 (output plane = input plane: `oh == h`, `ow == w`).
//!
//! There, output pixel `p = oy * w + ox` reads, for tap `(ky, kx)`, input element
//! `p + (ky dh - pt) w + (kx dw - pl)` of the flattened plane: one offset per tap for every
//! pixel. So a 16-lane vector can hold 16 consecutive pixels of the plane across row ends
//! (the row kernel fills a vector from one output row only: a 56-wide row uses 64 lanes, a
//! 13-wide one 16), and a plane of 7 x 7 or 13 x 13 takes the direct path too. Lanes whose
//! tap falls in the padding (a column past the row's ends, a row outside the plane) are
//! masked off the loads; those masks are made once per chunk and tap. Bias, a fused residual
//! ([`ConvParams::accumulate`]: a masked load of the lanes about to be stored) and the
//! activation are applied in registers before the masked store.
//!
//! One *unit* is one image, one panel of up to 12 output channels and one chunk of 32 pixels
//! (16 for a last chunk of at most 16). Units run panels innermost when the image's input is
//! the larger operand (consecutive units share the chunk's input), chunks innermost when the
//! weights are (consecutive units share the panel's weights, which then stay in cache).
//! Either way each output element is summed in K order by the same instructions whatever
//! unit, task or thread computes it: results are bit-identical at every thread count.

use super::conv::ConvParams;
use super::direct::Geom;
use super::split::SyncPtr;

/// Most taps (`kh * kw`) the flat path takes (its masks live on the stack).
pub(super) const MAX_TAPS: usize = 49;

/// Pixels per full chunk.
const CHUNK: usize = 32;

/// Whether the geometry is one the flat path computes: stride 1, output plane the input's
/// size, at most [`MAX_TAPS`] taps, and rows that do not already fill the row kernel's
/// 16-pixel vectors (a width not a multiple of 16, or under 32: U-Net's 256-wide planes ran
/// 8% slower flat, 81.3 vs 74.8 ms; ResNet-18 and SqueezeNet unchanged) (the caller checks the
/// rest: groups, packing, the CPU).
pub(super) fn geometry_fits(p: &ConvParams) -> bool {
    p.stride_h == 1
        && p.stride_w == 1
        && p.oh == p.h
        && p.ow == p.w
        && p.kh.saturating_mul(p.kw) <= MAX_TAPS as u64
        && p.oh.saturating_mul(p.ow) >= 16
        && (!p.ow.is_multiple_of(16) || p.ow < 32)
}

/// `y = act(conv(x, w) + bias)` for `p` ([`geometry_fits`]), spread over the current pool.
///
/// # Safety
/// That of [`super::direct::run`] (with reduced weights, `lowp`: tasks of one panel's
/// chunks, the panel widened into the thread's slot once per task).
pub(super) unsafe fn run(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    lowp: super::direct::Lowp,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let g = Geom::new(p);
        let act = p.activation();
        let panels = g.m.div_ceil(12);
        let plane = g.oh * g.ow;
        let chunks = plane.div_ceil(CHUNK);
        let per_img = panels * chunks;
        let units = p.n as usize * per_img;
        // The larger operand is reused by consecutive units.
        let panels_inner = g.c * g.h * g.w >= g.m * g.k;
        let width = (p.threads.max(1) as usize).min(crate::par::threads());
        if let Some(lowp) = lowp {
            let bias = (p.has_bias != 0).then_some(SyncPtr(bias.cast_mut()));
            let (x, y) = (SyncPtr(x.cast_mut()), SyncPtr(y));
            let run = |wv: *const f32, img: usize, ip: usize, range: std::ops::Range<usize>| {
                let xi = x.get().cast_const().wrapping_add(img * g.c * g.h * g.w);
                let yi = y.get().wrapping_add(img * g.m * plane);
                let b = bias.as_ref().map(|b| b.get().cast_const());
                for ci in range {
                    // SAFETY: as for the f32 units below, the panel's weights at `wv`.
                    unsafe { x86::chunk(&g, xi, wv, b, act, yi, ip, ci * CHUNK) };
                }
            };
            // SAFETY: the weights are packed by `lowp::conv::pack` in 12-row panels of K
            // (contract); each chunk of a range is written by its task only.
            unsafe { super::direct::reduced_panels(p, chunks, lowp, run) };
            return;
        }
        let unit_macs = 12 * CHUNK * g.k;
        let per = (super::split::MIN_TASK_MACS / unit_macs.max(1)).max(1);
        let tasks = units.div_ceil(per);
        let bias = (p.has_bias != 0).then_some(SyncPtr(bias.cast_mut()));
        let (x, w, y) = (SyncPtr(x.cast_mut()), SyncPtr(w.cast_mut()), SyncPtr(y));
        crate::par::for_each(tasks, width, |t, _| {
            for u in t * per..((t + 1) * per).min(units) {
                let (img, r) = (u / per_img, u % per_img);
                let (ci, ip) = if panels_inner {
                    (r / panels, r % panels)
                } else {
                    (r % chunks, r / chunks)
                };
                let xi = x.get().cast_const().wrapping_add(img * g.c * g.h * g.w);
                let yi = y.get().wrapping_add(img * g.m * plane);
                let b = bias.as_ref().map(|b| b.get().cast_const());
                // SAFETY: the contract; unit u writes only pixels ci*CHUNK.. of its panel's
                // channels of image img; the CPU has AVX-512F (`direct::applies`).
                unsafe { x86::chunk(&g, xi, w.get().cast_const(), b, act, yi, ip, ci * CHUNK) };
            }
        });
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, x, w, bias, y, lowp);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{CHUNK, Geom, MAX_TAPS};
    use crate::gemm::act::Activation;
    use crate::gemm::act::x86::act512;
    use core::arch::x86_64::*;

    /// Pixels `p0 .. p0 + CHUNK` (clipped to the plane) of panel `ip` of one image.
    ///
    /// # Safety
    /// AVX-512F; `x` readable for the image's `c*h*w` floats, `w` the packed weights,
    /// `bias` (if any) `m` floats, `y` writable for the image's `m*oh*ow` floats;
    /// `p0 < oh*ow`, `12 ip < m`.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn chunk(
        g: &Geom,
        x: *const f32,
        w: *const f32,
        bias: Option<*const f32>,
        act: Activation,
        y: *mut f32,
        ip: usize,
        p0: usize,
    ) {
        let rows = (g.m - ip * 12).min(12);
        let two = g.oh * g.ow - p0 > 16;
        // SAFETY: the contract of this function, passed on.
        unsafe {
            match (rows, two) {
                (9..=12, true) => body::<12, 2>(g, x, w, bias, act, y, ip, rows, p0),
                (9..=12, false) => body::<12, 1>(g, x, w, bias, act, y, ip, rows, p0),
                (5..=8, true) => body::<8, 2>(g, x, w, bias, act, y, ip, rows, p0),
                (5..=8, false) => body::<8, 1>(g, x, w, bias, act, y, ip, rows, p0),
                (_, true) => body::<4, 2>(g, x, w, bias, act, y, ip, rows, p0),
                (_, false) => body::<4, 1>(g, x, w, bias, act, y, ip, rows, p0),
            }
        }
    }

    /// Lanes `lo..hi` of a 16-lane mask (empty when `hi <= lo`).
    #[inline(always)]
    fn lanes(lo: isize, hi: isize) -> u16 {
        let (lo, hi) = (lo.clamp(0, 16), hi.clamp(0, 16));
        if hi <= lo {
            return 0;
        }
        let ones = |n: isize| ((1u32 << n) - 1) as u16;
        ones(hi) & !ones(lo)
    }

    /// [`chunk`] with `MB` accumulator rows (`rows <= MB`) and `NV` vectors of pixels.
    ///
    /// # Safety
    /// That of [`chunk`], and `rows <= MB`, `NV * 16 <= CHUNK`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn body<const MB: usize, const NV: usize>(
        g: &Geom,
        x: *const f32,
        w: *const f32,
        bias: Option<*const f32>,
        act: Activation,
        y: *mut f32,
        ip: usize,
        rows: usize,
        p0: usize,
    ) {
        const { assert!(NV * 16 <= CHUNK) };
        let plane = g.oh * g.ow;
        // Per tap and vector: the lanes whose input pixel lies inside the plane. Lane i of
        // vector v is output pixel p0 + 16 v + i (row oy, column ox); for tap (ky, kx) it
        // reads input row oy + ky dh - pt, column ox + kx dw - pl.
        let mut masks = [[0u16; 2]; MAX_TAPS];
        let (mut ky0, mut ky1) = (g.kh, 0);
        // Row and column of pixel p0 + 16 v + i, stepped without division.
        let (mut oy, mut ox) = ((p0 / g.ow) as isize, (p0 % g.ow) as isize);
        // v indexes the inner arrays of `masks` (per tap), not an array of its own.
        #[allow(clippy::needless_range_loop)]
        for v in 0..NV {
            let mut cols = [0u16; MAX_TAPS];
            let mut rws = [0u16; MAX_TAPS];
            for i in 0..16 {
                if p0 + 16 * v + i >= plane {
                    break;
                }
                for (kx, c) in cols.iter_mut().enumerate().take(g.kw) {
                    let ix = ox + (kx * g.dw) as isize - g.pl;
                    if ix >= 0 && ix < g.w as isize {
                        *c |= 1 << i;
                    }
                }
                for (ky, r) in rws.iter_mut().enumerate().take(g.kh) {
                    let iy = oy + (ky * g.dh) as isize - g.pt;
                    if iy >= 0 && iy < g.h as isize {
                        *r |= 1 << i;
                    }
                }
                ox += 1;
                if ox == g.ow as isize {
                    (oy, ox) = (oy + 1, 0);
                }
            }
            for (ky, &r) in rws.iter().enumerate().take(g.kh) {
                if r != 0 {
                    ky0 = ky0.min(ky);
                    ky1 = ky1.max(ky + 1);
                }
                for (kx, &c) in cols.iter().enumerate().take(g.kw) {
                    masks[ky * g.kw + kx][v] = r & c;
                }
            }
        }
        // SAFETY: AVX-512F (the caller's target features) and the memory of the contract:
        // every unmasked lane reads inside input plane ci; stores stay inside the plane.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); NV]; MB];
            let hw = g.h * g.w;
            let wpanel = w.wrapping_add(ip * g.k * 12);
            // Taps t0..t1 (rows ky0..ky1) reach inside the plane; tap t reads the input at
            // offset offs[t] from the output pixel.
            let (t0, t1) = (ky0 * g.kw, ky1.max(ky0) * g.kw);
            let mut offs = [0isize; MAX_TAPS];
            for (t, o) in offs.iter_mut().enumerate().take(t1).skip(t0) {
                let (ky, kx) = (t / g.kw, t % g.kw);
                *o = ((ky * g.dh) as isize - g.pt) * g.w as isize + (kx * g.dw) as isize - g.pl;
            }
            let (offs, masks) = (&offs[t0..t1], &masks[t0..t1]);
            let taps = g.kh * g.kw;
            for ci in 0..g.c {
                let xc = x.wrapping_add(ci * hw + p0);
                // K step ci * taps + t of panel ip.
                let mut wp = wpanel.wrapping_add((ci * taps + t0) * 12);
                for (&off, mk) in offs.iter().zip(masks) {
                    let mut xs = [_mm512_setzero_ps(); NV];
                    for (v, xv) in xs.iter_mut().enumerate() {
                        // Only lanes inside input plane ci are read.
                        let at = xc.wrapping_offset(off + (16 * v) as isize);
                        *xv = _mm512_maskz_loadu_ps(mk[v], at);
                    }
                    for (r, ar) in acc.iter_mut().enumerate() {
                        // Row r < MB <= 12 of this K step of the packed panel.
                        let wv = _mm512_set1_ps(*wp.add(r));
                        for (a, &xv) in ar.iter_mut().zip(&xs) {
                            *a = _mm512_fmadd_ps(wv, xv, *a);
                        }
                    }
                    wp = wp.wrapping_add(12);
                }
            }
            for (r, ar) in acc.iter().enumerate().take(rows) {
                let ch = ip * 12 + r;
                // Channel ch < m of the bias.
                let b = _mm512_set1_ps(bias.map_or(0.0, |b| *b.add(ch)));
                let dst = y.wrapping_add(ch * plane + p0);
                for (v, &a) in ar.iter().enumerate() {
                    let m = lanes(0, plane as isize - (p0 + 16 * v) as isize);
                    let mut a = _mm512_add_ps(a, b);
                    if g.acc {
                        // The residual in the lanes about to be stored.
                        a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(m, dst.wrapping_add(16 * v)));
                    }
                    let a = act512(act, a);
                    // Pixels p0 + 16 v + i < plane of channel ch.
                    _mm512_mask_storeu_ps(dst.wrapping_add(16 * v), m, a);
                }
            }
        }
    }
}
