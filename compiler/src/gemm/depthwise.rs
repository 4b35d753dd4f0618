//! Depthwise 2-d convolution (`C/group == 1`, any channel multiplier `M/group`), direct.
//!
//! On AVX-512 CPUs square 3/5/7 filters at stride 1 or 2 without dilation take [`rows`]
//! (plane by plane, blocks of 4 output rows sharing each input row's loads: 1.3-2.7x the
//! channels-in-lanes kernel on MobileNetV2's layers); else on AVX2/AVX-512 CPUs a
//! convolution with `C == M == group` whose rows fit its ring takes [`chan8`] (8 channels in
//! the vector lanes, measured 1.3-3x faster than the per-plane kernels below on MobileNetV2's
//! and EfficientNet-B0's layers); the rest of this module is the per-plane path for the
//! other cases.
//!
//! Output channel `o` reads input channel `o / (M/group)` and its own `kh x kw` filter (the
//! OIHW weights as they are: no preparation). Each output row is cut into an interior, where
//! every tap of every column lies inside the input row, and borders. The interior is computed
//! in chunks of 16 (then 8) columns whose accumulators stay in registers over all taps
//! (`acc[i] += w * x[iy, (ox + i) * sw + kx * dw - pl]`), the last chunk shifted back to end
//! at the interior's end (recomputing a few columns is harmless: the output is only written);
//! the borders and narrow rows are computed one column at a time with bounds checks. Bias and
//! the fused activation are applied before the store (an activation with an exp, by the
//! variants without AVX-512, in a second pass over the plane).
//!
//! The body is one generic function inlined into `#[target_feature]` variants (AVX-512F,
//! AVX2+FMA, each using fused multiply-adds) and a portable one, picked at run time like the
//! GEMM kernels (`ARENAC_GEMM_KERNEL` selects them too); strides 1 and 2 get specialized
//! copies so that LLVM sees contiguous or stride-2 loads.

use super::conv::{Activation, ConvParams};
use super::split::SyncPtr;

mod chan8;
mod flat;
mod rows;

/// The geometry one plane needs.
#[derive(Clone, Copy)]
struct Geom {
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    pt: usize,
    pl: usize,
    dh: usize,
    dw: usize,
    oh: usize,
    ow: usize,
    /// Interior columns `lo..hi`: every tap of these lies inside the input row.
    lo: usize,
    hi: usize,
}

impl Geom {
    fn new(p: &ConvParams) -> Self {
        let u = |v: u64| v as usize;
        let (w, kw, sw, pl, dw, ow) = (
            u(p.w),
            u(p.kw),
            u(p.stride_w).max(1),
            u(p.pad_l),
            u(p.dil_w),
            u(p.ow),
        );
        // ox * sw >= pl (first tap) and ox * sw + (kw - 1) * dw - pl <= w - 1 (last tap).
        let lo = pl.div_ceil(sw).min(ow);
        let span = (kw.saturating_sub(1)) * dw;
        let hi = if w + pl > span {
            ((w - 1 + pl - span) / sw + 1).min(ow)
        } else {
            0
        };
        Geom {
            h: u(p.h),
            w,
            kh: u(p.kh),
            kw,
            sh: u(p.stride_h),
            sw,
            pt: u(p.pad_t),
            pl,
            dh: u(p.dil_h),
            dw,
            oh: u(p.oh),
            ow,
            lo,
            hi: hi.max(lo),
        }
    }
}

/// `acc + w * x`, fused when the variant has FMA.
#[inline(always)]
fn madd<const FMA: bool>(acc: f32, w: f32, x: f32) -> f32 {
    if FMA { w.mul_add(x, acc) } else { acc + w * x }
}

/// `V` interior columns from `ox` (`ox + V <= hi`) of output row `oy`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn chunk<const V: usize, const FMA: bool>(
    g: &Geom,
    sw: usize,
    x: &[f32],
    wt: &[f32],
    bias: f32,
    act: Activation,
    oy: usize,
    ox: usize,
    yrow: &mut [f32],
) {
    let mut acc = [bias; V];
    for ky in 0..g.kh {
        let iy = (oy * g.sh + ky * g.dh).wrapping_sub(g.pt);
        if iy >= g.h {
            continue;
        }
        let xr = &x[iy * g.w..(iy + 1) * g.w];
        let wr = &wt[ky * g.kw..(ky + 1) * g.kw];
        for (kx, &wv) in wr.iter().enumerate() {
            // Interior: ox * sw + kx * dw >= pl, and the last column's tap is < w.
            let base = ox * sw + kx * g.dw - g.pl;
            let xs = &xr[base..base + (V - 1) * sw + 1];
            for (i, a) in acc.iter_mut().enumerate() {
                *a = madd::<FMA>(*a, wv, xs[i * sw]);
            }
        }
    }
    for (d, a) in yrow[ox..ox + V].iter_mut().zip(acc) {
        *d = act.apply(a);
    }
}

/// One output column `ox` of row `oy`, every tap checked.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn column<const FMA: bool>(
    g: &Geom,
    x: &[f32],
    wt: &[f32],
    bias: f32,
    act: Activation,
    oy: usize,
    ox: usize,
) -> f32 {
    let mut acc = bias;
    for ky in 0..g.kh {
        let iy = (oy * g.sh + ky * g.dh).wrapping_sub(g.pt);
        if iy >= g.h {
            continue;
        }
        for kx in 0..g.kw {
            let ix = (ox * g.sw + kx * g.dw).wrapping_sub(g.pl);
            if ix < g.w {
                acc = madd::<FMA>(acc, wt[ky * g.kw + kx], x[iy * g.w + ix]);
            }
        }
    }
    act.apply(acc)
}

/// One output plane from one input plane (`x`: `h*w`, `wt`: `kh*kw`, `y`: `oh*ow`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn plane<const FMA: bool>(
    g: &Geom,
    sw: usize,
    x: &[f32],
    wt: &[f32],
    bias: f32,
    act: Activation,
    y: &mut [f32],
) {
    for (oy, yrow) in y.chunks_exact_mut(g.ow.max(1)).take(g.oh).enumerate() {
        let mut ox = 0;
        while ox < g.lo {
            yrow[ox] = column::<FMA>(g, x, wt, bias, act, oy, ox);
            ox += 1;
        }
        let width = g.hi - g.lo;
        if width >= 16 {
            while ox + 16 <= g.hi {
                chunk::<16, FMA>(g, sw, x, wt, bias, act, oy, ox, yrow);
                ox += 16;
            }
            if ox < g.hi {
                chunk::<16, FMA>(g, sw, x, wt, bias, act, oy, g.hi - 16, yrow);
            }
        } else if width >= 8 {
            chunk::<8, FMA>(g, sw, x, wt, bias, act, oy, ox, yrow);
            if width > 8 {
                chunk::<8, FMA>(g, sw, x, wt, bias, act, oy, g.hi - 8, yrow);
            }
        } else {
            while ox < g.hi {
                yrow[ox] = column::<FMA>(g, x, wt, bias, act, oy, ox);
                ox += 1;
            }
        }
        for (ox, d) in yrow.iter_mut().enumerate().skip(g.hi) {
            *d = column::<FMA>(g, x, wt, bias, act, oy, ox);
        }
    }
}

/// [`plane`] with the stride specialized for 1 and 2.
#[inline(always)]
fn plane_any<const FMA: bool>(
    g: &Geom,
    x: &[f32],
    wt: &[f32],
    bias: f32,
    act: Activation,
    y: &mut [f32],
) {
    match g.sw {
        1 => plane::<FMA>(g, 1, x, wt, bias, act, y),
        2 => plane::<FMA>(g, 2, x, wt, bias, act, y),
        s => plane::<FMA>(g, s, x, wt, bias, act, y),
    }
}

type PlaneFn = fn(&Geom, &[f32], &[f32], f32, Activation, &mut [f32]);

/// [`plane_any`] with a cheap activation ([`Activation::is_cheap`]) applied per value, any
/// other in a second pass over the plane ([`super::act::bias_act`], still in cache).
#[inline(always)]
fn plane_then_act<const FMA: bool>(
    g: &Geom,
    x: &[f32],
    wt: &[f32],
    bias: f32,
    act: Activation,
    y: &mut [f32],
) {
    if act.is_cheap() {
        plane_any::<FMA>(g, x, wt, bias, act, y);
    } else {
        plane_any::<FMA>(g, x, wt, bias, Activation::None, y);
        super::act::bias_act(y, 0.0, act);
    }
}

fn plane_portable(g: &Geom, x: &[f32], wt: &[f32], bias: f32, act: Activation, y: &mut [f32]) {
    plane_then_act::<false>(g, x, wt, bias, act, y);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Activation, Geom, plane_then_act};
    use crate::gemm::act::x86::act512;
    use core::arch::x86_64::*;

    /// The AVX2+FMA variant.
    ///
    /// # Safety
    /// The CPU supports AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn plane_avx2(
        g: &Geom,
        x: &[f32],
        wt: &[f32],
        bias: f32,
        act: Activation,
        y: &mut [f32],
    ) {
        plane_then_act::<true>(g, x, wt, bias, act, y);
    }

    /// The AVX-512F variant: strides 1 and 2 by masked loads (see [`plane_avx512_masked`]),
    /// other strides by the generic body.
    ///
    /// # Safety
    /// The CPU supports AVX-512F, AVX2 and FMA (checked by the caller).
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn plane_avx512(
        g: &Geom,
        x: &[f32],
        wt: &[f32],
        bias: f32,
        act: Activation,
        y: &mut [f32],
    ) {
        match g.sw {
            // SAFETY: AVX-512F is available (caller's contract).
            1 => unsafe { plane_avx512_masked::<1>(g, x, wt, bias, act, y) },
            // SAFETY: as above.
            2 => unsafe { plane_avx512_masked::<2>(g, x, wt, bias, act, y) },
            _ => plane_then_act::<true>(g, x, wt, bias, act, y),
        }
    }

    /// Lanes `lo..hi` of a 16-bit mask (`lo <= hi <= 16`).
    #[inline(always)]
    fn lanes(lo: isize, hi: isize) -> u16 {
        let (lo, hi) = (lo.clamp(0, 16) as u32, hi.clamp(0, 16) as u32);
        if hi <= lo {
            0
        } else {
            ((((1u32 << hi) - 1) >> lo) << lo) as u16
        }
    }

    /// Every output column in vectors of 16, at stride 1 up to four at once (independent
    /// accumulators: the FMA latency is hidden), borders included: each tap loads only the lanes
    /// whose input column lies inside the row (masked loads read nothing else, so padding is
    /// zero), and the last chunk stores only the columns that exist. Stride `S` is 1 or 2
    /// (for 2, 32 input floats are loaded and the even ones kept).
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `S` is `g.sw`; the slices have the sizes [`super::plane`]
    /// documents.
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn plane_avx512_masked<const S: usize>(
        g: &Geom,
        x: &[f32],
        wt: &[f32],
        bias: f32,
        act: Activation,
        y: &mut [f32],
    ) {
        let ow = g.ow;
        let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        for (oy, yrow) in y.chunks_exact_mut(ow.max(1)).take(g.oh).enumerate() {
            // Taps ky0..ky1 fall inside the input (iy grows with ky).
            let iy_of = |ky: usize| (oy * g.sh + ky * g.dh) as isize - g.pt as isize;
            let ky0 = (0..g.kh).find(|&ky| iy_of(ky) >= 0).unwrap_or(g.kh);
            let ky1 = (ky0..g.kh)
                .find(|&ky| iy_of(ky) >= g.h as isize)
                .unwrap_or(g.kh);
            let mut ox = 0;
            while ox < ow {
                // Up to four vectors at once at stride 1: independent accumulators hide the
                // FMA latency (at stride 2, measured slower: one).
                let nv = if S == 1 {
                    (ow - ox).div_ceil(16).min(4)
                } else {
                    1
                };
                let v = Vectors {
                    g,
                    x,
                    wt,
                    bias,
                    act,
                    ky: (ky0, ky1),
                    oy,
                    ox,
                };
                // SAFETY: AVX-512F (this function's contract); columns ox.. of row oy.
                unsafe {
                    match nv {
                        1 => v.run::<S, 1>(yrow, evens),
                        2 => v.run::<S, 2>(yrow, evens),
                        3 => v.run::<S, 3>(yrow, evens),
                        _ => v.run::<S, 4>(yrow, evens),
                    }
                }
                ox += 16 * nv;
            }
        }
    }

    /// Output vectors `ox .. ox + 16 U` (clipped to the row) of output row `oy` whose valid
    /// row taps are `ky`.
    struct Vectors<'a> {
        g: &'a Geom,
        x: &'a [f32],
        wt: &'a [f32],
        bias: f32,
        act: Activation,
        ky: (usize, usize),
        oy: usize,
        ox: usize,
    }

    impl Vectors<'_> {
        /// Computes and stores the `U` vectors; each sums its taps in the same order (kx,
        /// then ky) as a lone vector would.
        ///
        /// # Safety
        /// AVX-512F; `S` is `g.sw`, `ox < ow`, `yrow` the output row.
        #[inline(always)]
        unsafe fn run<const S: usize, const U: usize>(&self, yrow: &mut [f32], evens: __m512i) {
            let (g, ow, w) = (self.g, self.g.ow, self.g.w as isize);
            let iy_of = |ky: usize| (self.oy * g.sh + ky * g.dh) as isize - g.pt as isize;
            // SAFETY: value-only intrinsics, AVX-512F by the contract; the loads and stores
            // are commented below.
            unsafe {
                let mut acc = [_mm512_set1_ps(self.bias); U];
                for kx in 0..g.kw {
                    // Input column of lane (raw float) r of vector u: base[u] + r; the masks
                    // depend on the column only, so they serve every row tap.
                    let mut base = [0isize; U];
                    let mut m0 = [0u16; U];
                    let mut m1 = [0u16; U];
                    for u in 0..U {
                        let b = ((self.ox + 16 * u) * S + kx * g.dw) as isize - g.pl as isize;
                        base[u] = b;
                        m0[u] = lanes(-b, w - b);
                        m1[u] = lanes(-b - 16, w - b - 16);
                    }
                    for ky in self.ky.0..self.ky.1 {
                        let iy = iy_of(ky) as usize;
                        let wv = _mm512_set1_ps(self.wt[ky * g.kw + kx]);
                        let row = self.x[iy * g.w..].as_ptr();
                        for u in 0..U {
                            let p = row.wrapping_offset(base[u]);
                            // Only lanes r with 0 <= base + r < w are read, inside input
                            // row iy < h of `x`; masked-out lanes are neither read nor
                            // faulting (stride 2: raw floats 0..16 and 16..32 from `p`).
                            let v = if S == 1 {
                                _mm512_maskz_loadu_ps(m0[u], p)
                            } else {
                                let a = _mm512_maskz_loadu_ps(m0[u], p);
                                let b = _mm512_maskz_loadu_ps(m1[u], p.wrapping_add(16));
                                _mm512_permutex2var_ps(a, evens, b)
                            };
                            acc[u] = _mm512_fmadd_ps(wv, v, acc[u]);
                        }
                    }
                }
                for (u, &a) in acc.iter().enumerate() {
                    let ox = self.ox + 16 * u;
                    if ox >= ow {
                        break;
                    }
                    let a = act512(self.act, a);
                    let m = lanes(0, (ow - ox).min(16) as isize);
                    // Columns ox..ox+16 (those < ow) of this output row, inside `yrow`.
                    _mm512_mask_storeu_ps(yrow.as_mut_ptr().add(ox), m, a);
                }
            }
        }
    }
}

/// The flat phase-plane kernel ([`flat`]) for the GEMM kernel selected on this CPU (same
/// override, same features), if it has one.
fn selected_flat() -> Option<flat::FlatFn> {
    #[cfg(target_arch = "x86_64")]
    {
        let name = super::selected_kernel().name;
        let fma = is_x86_feature_detected!("fma") && is_x86_feature_detected!("avx2");
        if name.starts_with("avx512") && fma {
            return Some(flat::x86::plane512);
        }
        if name.starts_with("avx") && fma {
            return Some(flat::x86::plane256);
        }
    }
    None
}

/// The variant for the GEMM kernel selected on this CPU (same override, same features).
fn selected() -> PlaneFn {
    #[cfg(target_arch = "x86_64")]
    {
        let name = super::selected_kernel().name;
        let fma = is_x86_feature_detected!("fma") && is_x86_feature_detected!("avx2");
        if name.starts_with("avx512") && fma {
            // SAFETY: the AVX-512 GEMM kernel is only selected where AVX-512F is detected,
            // and AVX2 and FMA were detected just above.
            return |g, x, wt, b, a, y| unsafe { x86::plane_avx512(g, x, wt, b, a, y) };
        }
        if name.starts_with("avx") && fma {
            // SAFETY: AVX2 and FMA were detected just above.
            return |g, x, wt, b, a, y| unsafe { x86::plane_avx2(g, x, wt, b, a, y) };
        }
    }
    plane_portable
}

/// `y = act(depthwise_conv(x, w) + bias)`, its output planes spread over the current pool
/// ([`crate::par`]) in contiguous runs (each plane computed as single-threaded: bit-identical
/// results at every thread count).
///
/// A fused residual ([`super::conv::ConvParams::accumulate`]) is not honoured here: the
/// analysis' fuse rule fuses an `Add` only into group-1 convolutions, never into a depthwise
/// one, so `accumulate` is 0 on this path (a depthwise conv's residual stays a separate
/// `Add`).
///
/// # Safety
/// That of [`super::conv::arenac_conv2d`] (without the scratch), with `C == group` and
/// `accumulate == 0`.
pub(super) unsafe fn run(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
) {
    let g = Geom::new(p);
    let act = p.activation();
    let f = selected();
    let (c, m) = (p.c as usize, p.m as usize);
    let mult = m / c.max(1);
    let (xplane, yplane, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let planes = p.n as usize * m;
    let work = planes.saturating_mul(yplane).saturating_mul(taps);
    let width = crate::par::width(crate::par::cost::gemm_ns(work), p.threads.max(1) as usize);
    let runs = (work / super::split::MIN_TASK_MACS)
        .min(width * 4)
        .clamp(1, planes.max(1));
    // Rows of a plane in 16-lane vectors where this CPU and filter have that kernel.
    let b = (p.has_bias != 0).then_some(bias);
    // SAFETY: the caller's contract.
    if unsafe { rows::run::<{ chan8::F32 }>(&g, act, (p.n as usize, c, m), width, x, w, b, y) } {
        return;
    }
    // Channels in the vector lanes where this CPU has the kernel and its ring fits.
    if let Some(ring) = chan8::Ring::new(&g).filter(|_| mult == 1 && chan8::available()) {
        // SAFETY: the caller's contract, C == M == group, the kernel available.
        return unsafe {
            chan8::run::<{ chan8::F32 }>(&g, &ring, act, p.n as usize, c, width, x, w, b, y)
        };
    }
    let (x, w, bias, y) = (
        SyncPtr(x.cast_mut()),
        SyncPtr(w.cast_mut()),
        SyncPtr(bias.cast_mut()),
        SyncPtr(y),
    );
    // The flat kernel where this CPU has one, the phase planes fit its stack scratch and it
    // is the faster of the two.
    let flat = selected_flat()
        .zip(flat::Layout::new(&g))
        .filter(|(_, l)| l.pays_off(&g));
    crate::par::for_each(runs, width, |r, _| {
        let io = |plane: usize| {
            let (img, o) = (plane / m.max(1), plane % m.max(1));
            let ci = o / mult.max(1);
            // SAFETY: input plane (img, ci) with ci < c, output plane (img, o) with o < m,
            // filter o: inside the n*c*h*w, n*m*oh*ow and m*kh*kw floats of the contract; the
            // output overlaps neither input nor weights, and each output plane belongs to
            // one run only.
            let (xs, ys, ws) = unsafe {
                (
                    std::slice::from_raw_parts(x.get().add((img * c + ci) * xplane), xplane),
                    std::slice::from_raw_parts_mut(y.get().add((img * m + o) * yplane), yplane),
                    std::slice::from_raw_parts(w.get().add(o * taps), taps),
                )
            };
            let b = if p.has_bias != 0 {
                // SAFETY: o < m floats of bias when has_bias != 0.
                unsafe { *bias.get().add(o) }
            } else {
                0.0
            };
            (xs, ws, b, ys)
        };
        let mine = planes * r / runs..planes * (r + 1) / runs;
        match flat {
            // SAFETY: the kernel was selected for this CPU, the layout made from `g`, and
            // `io` gives planes of the sizes `g` implies.
            Some((kernel, l)) => unsafe { flat::run_planes(kernel, &g, &l, act, mine.map(io)) },
            None => {
                for (xs, ws, b, ys) in mine.map(io) {
                    f(&g, xs, ws, b, act, ys);
                }
            }
        }
    });
}

/// Whether [`run16`] computes `p` on this CPU: `C == M == group` and the row kernel
/// ([`rows`]) taking it, or the channel-blocked kernel ([`chan8`]) available with its ring
/// fitting.
pub(crate) fn direct16(p: &ConvParams) -> bool {
    let g = Geom::new(p);
    p.c == p.group
        && p.m == p.group
        && (rows::applies::<{ chan8::F16 }>(&g)
            || chan8::available() && chan8::Ring::new(&g).is_some())
}

/// [`run`] on 16-bit planes (`--activations f16|bf16`), where [`direct16`] holds: [`rows`]
/// widening as it loads and narrowing as it stores, or [`chan8`] widening the input rows
/// into its ring as it loads them and narrowing each output row (the activation applied
/// first, as the f32 kernel's second pass does): the f32 kernel's result on the widened
/// input, rounded once, bit for bit; no scratch.
///
/// # Safety
/// [`direct16`] holds; that of [`super::conv::arenac_conv2d`] (without the scratch) with
/// `x` and `y` 16-bit planes (`n*c*h*w` and `n*m*oh*ow` values of type `t`).
pub(crate) unsafe fn run16(
    t: super::stage16::N16,
    p: &ConvParams,
    x: *const u16,
    w: *const f32,
    bias: *const f32,
    y: *mut u16,
) {
    let g = Geom::new(p);
    let c = p.c as usize;
    let work = (p.n as usize * c)
        .saturating_mul(g.oh * g.ow)
        .saturating_mul(g.kh * g.kw);
    let width = crate::par::width(crate::par::cost::gemm_ns(work), p.threads.max(1) as usize);
    let b = (p.has_bias != 0).then_some(bias);
    let (n, act, x, y) = (
        p.n as usize,
        p.activation(),
        x.cast::<f32>(),
        y.cast::<f32>(),
    );
    use super::stage16::N16;
    let planes = (n, c, c);
    // SAFETY: the caller's contract; the pointers are cast back to `u16` by the kernels.
    let done = unsafe {
        match t {
            N16::F16 => rows::run::<{ chan8::F16 }>(&g, act, planes, width, x, w, b, y),
            N16::Bf16 => rows::run::<{ chan8::BF16 }>(&g, act, planes, width, x, w, b, y),
        }
    };
    let Some(ring) = chan8::Ring::new(&g).filter(|_| !done) else {
        return;
    };
    // SAFETY: the caller's contract; the pointers are cast back to `u16` by the kernel.
    unsafe {
        match t {
            super::stage16::N16::F16 => {
                chan8::run::<{ chan8::F16 }>(&g, &ring, act, n, c, width, x, w, b, y)
            }
            super::stage16::N16::Bf16 => {
                chan8::run::<{ chan8::BF16 }>(&g, &ring, act, n, c, width, x, w, b, y)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fused activation, with parameters that cut through the test values.
    pub(super) const ACTS: [Activation; 9] = [
        Activation::None,
        Activation::Relu,
        Activation::Clip(0.0, 0.1),
        Activation::LeakyRelu(0.2),
        Activation::Sigmoid,
        Activation::Silu,
        Activation::Tanh,
        Activation::HardSigmoid(0.3, 0.4),
        Activation::HardSwish,
    ];

    /// Every variant this CPU can run.
    fn variants() -> Vec<(&'static str, PlaneFn)> {
        let mut v: Vec<(&'static str, PlaneFn)> = vec![("portable", plane_portable)];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                // SAFETY: AVX2 and FMA detected.
                v.push(("avx2", |g, x, w, b, a, y| unsafe {
                    x86::plane_avx2(g, x, w, b, a, y)
                }));
                // SAFETY: AVX2 and FMA detected.
                v.push(("flat avx2", |g, x, w, b, a, y| unsafe {
                    flat_plane(flat::x86::plane256, g, x, w, b, a, y)
                }));
                if is_x86_feature_detected!("avx512f") {
                    // SAFETY: AVX-512F, AVX2 and FMA detected.
                    v.push(("avx512", |g, x, w, b, a, y| unsafe {
                        x86::plane_avx512(g, x, w, b, a, y)
                    }));
                    // SAFETY: as above.
                    v.push(("flat avx512", |g, x, w, b, a, y| unsafe {
                        flat_plane(flat::x86::plane512, g, x, w, b, a, y)
                    }));
                }
            }
        }
        v
    }

    /// One plane through a flat kernel, twice in the same scratch (the second plane sees the
    /// first one's interior, as in a run), or the row kernel when the layout does not fit.
    ///
    /// # Safety
    /// `kernel` runs on this CPU.
    unsafe fn flat_plane(
        kernel: flat::FlatFn,
        g: &Geom,
        x: &[f32],
        w: &[f32],
        b: f32,
        a: Activation,
        y: &mut [f32],
    ) {
        let Some(l) = flat::Layout::new(g) else {
            return plane_portable(g, x, w, b, a, y);
        };
        let other: Vec<f32> = x.iter().map(|v| v * 3.0 + 1.0).collect();
        let mut scratch_y = vec![0.0; y.len()];
        let planes = [(&other[..], w, b + 1.0, &mut scratch_y[..]), (x, w, b, y)];
        // SAFETY: the caller's contract; the planes have the sizes `g` implies.
        unsafe { flat::run_planes(kernel, g, &l, a, planes.into_iter()) };
    }

    #[test]
    fn planes_match_a_plain_loop() {
        let mut s = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for case in 0..600 {
            let pick = |r: u64, lo: u64, hi: u64| lo + r % (hi - lo + 1);
            let (kh, kw) = (pick(next(), 1, 5), pick(next(), 1, 7));
            let (sh, sw) = (pick(next(), 1, 3), pick(next(), 1, 3));
            let (dh, dw) = (pick(next(), 1, 2), pick(next(), 1, 3));
            let (pt, pl, pb, pr) = (
                pick(next(), 0, 3),
                pick(next(), 0, 3),
                pick(next(), 0, 3),
                pick(next(), 0, 3),
            );
            let h = (kh - 1) * dh + 1 + pick(next(), 0, 9);
            let w = (kw - 1) * dw + 1 + pick(next(), 0, 70);
            let oh = (h + pt + pb - (kh - 1) * dh - 1) / sh + 1;
            let ow = (w + pl + pr - (kw - 1) * dw - 1) / sw + 1;
            let p = ConvParams {
                n: 1,
                c: 2,
                h,
                w,
                m: 2,
                group: 2,
                kh,
                kw,
                stride_h: sh,
                stride_w: sw,
                pad_t: pt,
                pad_l: pl,
                dil_h: dh,
                dil_w: dw,
                oh,
                ow,
                ..ConvParams::default()
            };
            let g = Geom::new(&p);
            let u = |v: u64| v as usize;
            let rnd = |r: u64| (r >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            let x: Vec<f32> = (0..h * w).map(|_| rnd(next())).collect();
            let wt: Vec<f32> = (0..kh * kw).map(|_| rnd(next())).collect();
            let bias = rnd(next());
            let act = ACTS[case % ACTS.len()];
            let mut want = vec![0.0f32; u(oh * ow)];
            for oy in 0..u(oh) {
                for ox in 0..u(ow) {
                    let mut acc = f64::from(bias);
                    for ky in 0..u(kh) {
                        for kx in 0..u(kw) {
                            let iy = (oy * u(sh) + ky * u(dh)) as i64 - pt as i64;
                            let ix = (ox * u(sw) + kx * u(dw)) as i64 - pl as i64;
                            if (0..h as i64).contains(&iy) && (0..w as i64).contains(&ix) {
                                acc += f64::from(wt[ky * u(kw) + kx])
                                    * f64::from(x[iy as usize * u(w) + ix as usize]);
                            }
                        }
                    }
                    want[oy * u(ow) + ox] = crate::gemm::act::reference(act, acc) as f32;
                }
            }
            for (name, f) in variants() {
                // Sentinels after the plane catch a store past its end.
                let mut got = vec![f32::NAN; u(oh * ow) + 64];
                got[u(oh * ow)..].fill(-7.0);
                f(&g, &x, &wt, bias, act, &mut got[..u(oh * ow)]);
                assert!(
                    got[u(oh * ow)..].iter().all(|&v| v == -7.0),
                    "{name} case {case} {p:?}: wrote past the plane"
                );
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
                        "{name} case {case} {p:?} element {i}: got {a}, want {b}"
                    );
                }
            }
        }
    }
}
