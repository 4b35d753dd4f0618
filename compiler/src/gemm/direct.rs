//! Direct convolution (no im2col): the AVX-512 path of [`super::conv`] for ungrouped
//! convolutions at horizontal stride 1 or 2 whose output rows are wide enough to fill
//! 16-lane vectors; whole groups of 64 output channels at any stride take [`cl`] (channels
//! in the lanes) instead, "same" stride-1 convolutions [`super::direct_flat`].
//!
//! The weights are packed at compile time ([`pack`], [`super::conv::prepare_weights`] with
//! `packed_a` = [`DIRECT_PACKED`]): per panel of 12 output channels, each K step's 12 weights
//! side by side (the broadcast order), rows past `M` zero: the size of the GEMM kernel's
//! packed A, so the weights region and the plan are the same as for the im2col path (whose
//! scratch is left unused here).
//!
//! One *unit* is one image, one output row and one panel of up to 12 output channels. The
//! row is walked in chunks of `NV` 16-pixel vectors; for each chunk an `MB x NV` block of
//! accumulators (`MB` = 12, 8 or 4 channels: the last panel of `M % 12` rows takes the
//! smallest that covers it) sums, for every tap `(ci, ky, kx)` in K order, one broadcast
//! weight times `NV` input vectors loaded at the tap's column offset (stride 2: the even
//! lanes of two loads, one permute). Input columns outside the row (the padding) are masked
//! off the loads (zero); input rows outside the plane are left out of the row's tap range.
//! Bias, a fused residual ([`ConvParams::accumulate`]: a masked load of the lanes about to
//! be stored) and the fused activation ([`super::act::x86::act512`]) are applied in registers
//! before a masked store.
//!
//! Each output element is summed in K order by the same instructions whatever unit, chunk or
//! thread computes it: results are bit-identical at every thread count.

use super::conv::ConvParams;
use super::lowp::conv::Reduced;
use super::split::SyncPtr;

pub(crate) mod act16;
mod cl;

/// Reduced weights ([`super::lowp::conv`]) and the scratch whose per-thread slots
/// ([`super::lowp::conv::direct_slot_floats`] floats each) receive one widened block of
/// output channels at a time; `None`: f32 weights, read in place.
pub(super) type Lowp = Option<(Reduced, *mut f32)>;

/// Widest kernel the path takes (the per-chunk load masks live on the stack).
const MAX_KW: usize = 16;

/// [`ConvParams::packed_a`] of weights packed by [`pack`].
pub(super) const DIRECT_PACKED: u64 = 2;

/// The element index of weight (output channel `r`, K step `s`) in [`pack`]'s layout for
/// `p`, as a function of `(r, s)`.
pub(crate) fn packed_index(p: &ConvParams) -> impl Fn(usize, usize) -> usize {
    let (m, k, cl) = (p.m as usize, p.k(), cl::fits(p));
    move |r, s| {
        if cl {
            cl::index(m, k, r, s)
        } else {
            (r / 12) * k * 12 + s * 12 + r % 12
        }
    }
}

/// Elements of [`pack`]'s layout (rows past `m` included).
pub(crate) fn packed_elems(p: &ConvParams) -> usize {
    let (m, k) = (p.m as usize, p.k());
    if cl::fits(p) {
        m.saturating_mul(k)
    } else {
        m.div_ceil(12).saturating_mul(12).saturating_mul(k)
    }
}

/// Output channels of the widest block a unit of [`run`] reads: a group of the
/// channels-in-lanes kernel, else a 12-channel panel (whose `12 k` weights are contiguous).
pub(crate) fn block_rows(p: &ConvParams) -> usize {
    if cl::fits(p) { cl::NB * 16 } else { 12 }
}

/// Packs `p`'s `m x k` weights (row-major) into `out` (`m.div_ceil(12) * 12 * k` floats) for
/// the kernel [`run`] takes: [`cl::pack`] for the channels-in-lanes kernel, else [`pack_rows`].
pub(super) fn pack(p: &ConvParams, w: &[f32], out: &mut [f32]) {
    let (m, k) = (p.m as usize, p.k());
    if cl::fits(p) {
        cl::pack(m, k, w, out);
    } else {
        pack_rows(m, k, w, out);
    }
}

/// Packs `m x k` weights (row-major) into `out` (`m.div_ceil(12) * 12 * k` floats): row `r`,
/// step `s` at `(r / 12) * k * 12 + s * 12 + r % 12`, rows past `m` zero.
fn pack_rows(m: usize, k: usize, w: &[f32], out: &mut [f32]) {
    for (ip, panel) in out.chunks_exact_mut(k * 12).enumerate() {
        for (s, step) in panel.chunks_exact_mut(12).enumerate() {
            for (r, o) in step.iter_mut().enumerate() {
                let row = ip * 12 + r;
                *o = if row < m {
                    w.get(row * k + s).copied().unwrap_or(0.0)
                } else {
                    0.0
                };
            }
        }
    }
}

/// Whether [`run`] computes `p`: AVX-512 selected, constant weights (`packed_a != 0`), no groups,
/// not pointwise, and a geometry of the channels-in-lanes kernel ([`cl::fits`]), of the flat
/// kernel ([`super::direct_flat`]: stride 1, output plane the input's size) or of the row
/// kernel ([`row_fits`]) (and `ARENAC_CONV_DIRECT` is
/// not `0`: im2col instead, for comparisons).
pub(super) fn applies(p: &ConvParams) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("ARENAC_CONV_DIRECT").map_or(true, |v| v != "0"))
        && cfg!(target_arch = "x86_64")
        && p.packed_a != 0
        && super::selected_kernel().name.starts_with("avx512")
        && p.group <= 1
        && !p.is_pointwise()
        && super::selected_kernel().mr == 12
        && (cl::fits(p) || super::direct_flat::geometry_fits(p) || row_fits(p))
}

/// Whether the row kernel computes the geometry: horizontal stride 1 (or 2 with at most 4
/// input channels), a kernel of at most [`MAX_KW`] columns, output rows of 14+ pixels.
fn row_fits(p: &ConvParams) -> bool {
    // Stride 2 beats im2col (measured) only for few input channels: first layers.
    (p.stride_w == 1 || (p.stride_w == 2 && p.c <= 4))
        && p.stride_h >= 1
        && p.kw as usize <= MAX_KW
        && p.ow >= 14
}

/// The geometry as `usize`s.
#[derive(Clone, Copy)]
pub(super) struct Geom {
    pub(super) c: usize,
    pub(super) h: usize,
    pub(super) w: usize,
    pub(super) m: usize,
    pub(super) kh: usize,
    pub(super) kw: usize,
    pub(super) pt: isize,
    pub(super) pl: isize,
    pub(super) sh: usize,
    pub(super) sw: usize,
    pub(super) dh: usize,
    pub(super) dw: usize,
    pub(super) oh: usize,
    pub(super) ow: usize,
    pub(super) k: usize,
    /// A fused residual ([`ConvParams::accumulate`]): the output holds it on entry, each
    /// stored vector adds it (a masked load of the same lanes) before the activation.
    pub(super) acc: bool,
}

impl Geom {
    pub(super) fn new(p: &ConvParams) -> Self {
        let u = |v: u64| v as usize;
        let k = p.k();
        Geom {
            c: u(p.c),
            h: u(p.h),
            w: u(p.w),
            m: u(p.m),
            kh: u(p.kh),
            kw: u(p.kw),
            pt: p.pad_t as isize,
            pl: p.pad_l as isize,
            sh: u(p.stride_h).max(1),
            sw: u(p.stride_w).max(1),
            dh: u(p.dil_h).max(1),
            dw: u(p.dil_w).max(1),
            oh: u(p.oh),
            ow: u(p.ow),
            k,
            acc: p.accumulate != 0,
        }
    }
}

/// The reduced-weights tasks of the row and flat kernels: (image, 12-channel panel, range of
/// `count` items — output rows or pixel chunks), about 3 per thread. Each task widens its
/// panel (12 x K weights and their scales, [`Reduced::widen`]) into its thread's slot of the
/// scratch ([`super::lowp::conv::direct_slot_floats`] floats), then calls `body(w, image,
/// panel, items)` with `w` placed so that the kernel's read of panel `ip` at `w + 12 ip k`
/// lands in the slot. Every element still goes through the same instructions as with f32
/// weights of the widened values.
///
/// # Safety
/// `lowp` holds weights packed by [`super::lowp::conv::pack`] in 12-row panels of `K = p.k()`
/// and a scratch writable for one slot per thread of the current pool (at most
/// `p.threads`); `body` writes only what its items own.
pub(super) unsafe fn reduced_panels(
    p: &ConvParams,
    count: usize,
    (r, scratch): (Reduced, *mut f32),
    body: impl Fn(*const f32, usize, usize, std::ops::Range<usize>) + Sync,
) {
    let (k, panels) = (p.k(), (p.m as usize).div_ceil(12));
    let width = (p.threads.max(1) as usize).min(crate::par::threads());
    let splits = (3 * width)
        .div_ceil(p.n as usize * panels)
        .clamp(1, count.max(1));
    let tasks = p.n as usize * panels * splits;
    let slot = super::lowp::conv::direct_slot_floats(p);
    let scratch = SyncPtr(scratch);
    crate::par::for_each(tasks, width, |task, thread| {
        let (img, ip, sp) = (
            task / (panels * splits),
            (task / splits) % panels,
            task % splits,
        );
        let items = count * sp / splits..count * (sp + 1) / splits;
        if items.is_empty() {
            return;
        }
        let wp = scratch.get().wrapping_add(thread * slot);
        // SAFETY: panel ip's 12 k elements (and 12 scales) exist in the packed weights;
        // thread < width owns its slot of `slot >= 12 k` floats (contract).
        unsafe { r.widen(ip * k * 12, 12 * k, wp, (ip * 12, 12)) };
        body(wp.cast_const().wrapping_sub(ip * k * 12), img, ip, items);
    });
}

/// [`run`] on the channels-in-lanes kernel whatever `p.m` (a multiple of 16): the 16-bit
/// staged bands' blocks of output channels (`crate::gemm::stage16`), each a Conv of its own
/// on f32 weights in the kernel's layout for `p.m` channels, where the whole Conv takes it.
///
/// # Safety
/// That of [`run`] with f32 weights packed by [`cl::pack`] for `p`, `p.m % 16 == 0`, and the
/// geometry one the kernel takes (`cl::fits` of `p` with its channels rounded up to 64).
pub(super) unsafe fn run_cl(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
) {
    // SAFETY: this function's contract.
    unsafe { cl::run(p, x, w, bias, y, None) };
}

/// `y = act(conv(x, w) + bias)` for `p` ([`applies`]), spread over the current pool; with
/// `p.accumulate`, `y = act(conv(x, w) + bias + y)` (every kernel: rows, flat, [`cl`]).
///
/// With reduced weights (`lowp`), each task widens the block of output channels it computes
/// into its thread's slot once and runs the f32 kernel on it; the row and flat kernels then
/// take tasks of one panel's rows or chunks (the same instructions per output element:
/// results are still the same at every thread count).
///
/// # Safety
/// That of [`super::conv::arenac_conv2d`] without the scratch, with `p.packed_a` =
/// [`DIRECT_PACKED`] (so `w` holds the weights packed by [`pack`], or by
/// [`super::lowp::conv::pack`] with `lowp`, whose scratch is writable for
/// [`super::lowp::conv::direct_scratch_bytes`]) and an AVX-512F CPU.
pub(super) unsafe fn run(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    lowp: Lowp,
) {
    if cl::fits(p) {
        // SAFETY: this function's contract, the weights packed by `cl::pack` (`pack`).
        unsafe { cl::run(p, x, w, bias, y, lowp) };
        return;
    }
    if super::direct_flat::geometry_fits(p) {
        // SAFETY: this function's contract is the flat path's.
        unsafe { super::direct_flat::run(p, x, w, bias, y, lowp) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let g = Geom::new(p);
        let act = p.activation();
        let panels = g.m.div_ceil(12);
        let width = (p.threads.max(1) as usize).min(crate::par::threads());
        if let Some(lowp) = lowp {
            let bias = (p.has_bias != 0).then_some(SyncPtr(bias.cast_mut()));
            let (x, y) = (SyncPtr(x.cast_mut()), SyncPtr(y));
            let run = |wv: *const f32, img: usize, ip: usize, rows: std::ops::Range<usize>| {
                let xi = x.get().cast_const().wrapping_add(img * g.c * g.h * g.w);
                let yi = y.get().wrapping_add(img * g.m * g.oh * g.ow);
                let b = bias.as_ref().map(|b| b.get().cast_const());
                for oy in rows {
                    // SAFETY: as for the f32 units below, the panel's weights at `wv`.
                    unsafe {
                        if g.sw == 2 {
                            x86::row::<2>(&g, xi, wv, b, act, yi, oy, ip)
                        } else {
                            x86::row::<1>(&g, xi, wv, b, act, yi, oy, ip)
                        }
                    };
                }
            };
            // SAFETY: the weights are packed by `lowp::conv::pack` in 12-row panels of K
            // (contract); each row of a range is written by its task only.
            unsafe { reduced_panels(p, g.oh, lowp, run) };
            return;
        }
        let units = p.n as usize * g.oh * panels;
        let unit_macs = 12 * g.ow * g.k;
        let per = (super::split::MIN_TASK_MACS / unit_macs.max(1)).max(1);
        let tasks = units.div_ceil(per);
        let bias = (p.has_bias != 0).then_some(SyncPtr(bias.cast_mut()));
        let (x, w, y) = (SyncPtr(x.cast_mut()), SyncPtr(w.cast_mut()), SyncPtr(y));
        crate::par::for_each(tasks, width, |t, _| {
            for u in t * per..((t + 1) * per).min(units) {
                // Panels innermost: consecutive units share their input rows.
                let (img, oy, ip) = (u / (g.oh * panels), (u / panels) % g.oh, u % panels);
                let xi = x.get().cast_const().wrapping_add(img * g.c * g.h * g.w);
                let yi = y.get().wrapping_add(img * g.m * g.oh * g.ow);
                let b = bias.as_ref().map(|b| b.get().cast_const());
                // SAFETY: the contract; unit u writes only output row oy of its panel's
                // channels of image img; the CPU has AVX-512F (`applies`).
                unsafe {
                    if g.sw == 2 {
                        x86::row::<2>(&g, xi, w.get().cast_const(), b, act, yi, oy, ip)
                    } else {
                        x86::row::<1>(&g, xi, w.get().cast_const(), b, act, yi, oy, ip)
                    }
                };
            }
        });
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, x, w, bias, y, lowp);
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use super::{Geom, MAX_KW};
    use crate::gemm::act::Activation;
    use crate::gemm::act::x86::act512;
    use core::arch::x86_64::*;

    /// How the kernel reads its input and writes its output: f32 planes, or 16-bit planes
    /// (`super::act16`) widened on load and rounded once on store.
    pub(in crate::gemm) trait Elem {
        /// The stored element.
        type T;
        /// The lanes of `m` of the 16 values at `p` as f32 (zero elsewhere).
        ///
        /// # Safety
        /// The CPU has the features of the caller's kernel; the lanes of `m` readable.
        unsafe fn load(m: __mmask16, p: *const Self::T) -> __m512;
        /// `v` stored into the lanes of `m` at `p`.
        ///
        /// # Safety
        /// As [`Elem::load`], the lanes of `m` writable.
        unsafe fn store(m: __mmask16, p: *mut Self::T, v: __m512);
    }

    /// f32 planes.
    pub(in crate::gemm) struct F32;

    impl Elem for F32 {
        type T = f32;
        #[inline(always)]
        unsafe fn load(m: __mmask16, p: *const f32) -> __m512 {
            // SAFETY: the caller's contract.
            unsafe { _mm512_maskz_loadu_ps(m, p) }
        }
        #[inline(always)]
        unsafe fn store(m: __mmask16, p: *mut f32, v: __m512) {
            // SAFETY: the caller's contract.
            unsafe { _mm512_mask_storeu_ps(p, m, v) }
        }
    }

    /// Output row `oy` of panel `ip` (channels `12 ip ..`) of one image (`x`, `y` at the
    /// image), every chunk of it.
    ///
    /// # Safety
    /// AVX-512F; `x` readable for the image's `c*h*w` floats, `w` the packed weights,
    /// `bias` (if any) `m` floats, `y` writable for the image's `m*oh*ow` floats.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn row<const S: usize>(
        g: &Geom,
        x: *const f32,
        w: *const f32,
        bias: Option<*const f32>,
        act: Activation,
        y: *mut f32,
        oy: usize,
        ip: usize,
    ) {
        // SAFETY: the contract, passed on.
        unsafe { row_of::<F32, S>(g, x, w, bias, act, y, oy, ip) }
    }

    /// [`row`] over the elements `E` reads and writes (inlined into each caller's features).
    ///
    /// # Safety
    /// [`row`]'s, `x` and `y` holding `E::T`s, and the features `E` needs.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(in crate::gemm) unsafe fn row_of<E: Elem, const S: usize>(
        g: &Geom,
        x: *const E::T,
        w: *const f32,
        bias: Option<*const f32>,
        act: Activation,
        y: *mut E::T,
        oy: usize,
        ip: usize,
    ) {
        let rows = (g.m - ip * 12).min(12);
        let mut ox = 0;
        // SAFETY: the contract of this function, passed on to each chunk inside the row.
        unsafe {
            match rows {
                9..=12 => {
                    while ox < g.ow {
                        let nv = (g.ow - ox).div_ceil(16);
                        match nv {
                            1 => chunk::<E, 12, 1, S>(g, x, w, bias, act, y, oy, ip, rows, ox),
                            _ => chunk::<E, 12, 2, S>(g, x, w, bias, act, y, oy, ip, rows, ox),
                        }
                        ox += 32;
                    }
                }
                5..=8 => {
                    while ox < g.ow {
                        match (g.ow - ox).div_ceil(16) {
                            1 => chunk::<E, 8, 1, S>(g, x, w, bias, act, y, oy, ip, rows, ox),
                            2 => chunk::<E, 8, 2, S>(g, x, w, bias, act, y, oy, ip, rows, ox),
                            _ => chunk::<E, 8, 3, S>(g, x, w, bias, act, y, oy, ip, rows, ox),
                        }
                        ox += 48;
                    }
                }
                _ => {
                    while ox < g.ow {
                        match (g.ow - ox).div_ceil(16) {
                            1 => chunk::<E, 4, 1, S>(g, x, w, bias, act, y, oy, ip, rows, ox),
                            2 => chunk::<E, 4, 2, S>(g, x, w, bias, act, y, oy, ip, rows, ox),
                            3 => chunk::<E, 4, 3, S>(g, x, w, bias, act, y, oy, ip, rows, ox),
                            _ => chunk::<E, 4, 4, S>(g, x, w, bias, act, y, oy, ip, rows, ox),
                        }
                        ox += 64;
                    }
                }
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

    /// Output pixels `ox .. ox + 16 NV` (clipped to the row) of row `oy`, channels
    /// `12 ip .. 12 ip + rows` (`rows <= MB`).
    ///
    /// # Safety
    /// That of [`row`], and `rows <= MB`, `ox < ow`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn chunk<E: Elem, const MB: usize, const NV: usize, const S: usize>(
        g: &Geom,
        x: *const E::T,
        w: *const f32,
        bias: Option<*const f32>,
        act: Activation,
        y: *mut E::T,
        oy: usize,
        ip: usize,
        rows: usize,
        ox: usize,
    ) {
        // SAFETY: AVX-512F (inlined into `row`) and the memory of the contract: every
        // access below stays inside the operands it names.
        unsafe {
            // Load masks per kernel column, vector and (stride 2) half: input columns inside
            // the row. Lane i of vector v reads column (ox + 16 v + i) S + kx dw - pl.
            let mut masks = [[0u16; 8]; MAX_KW];
            for (kx, mk) in masks.iter_mut().enumerate().take(g.kw) {
                for (j, m) in mk.iter_mut().enumerate().take(NV * S) {
                    let (v, half) = (j / S, j % S);
                    let c0 = ((ox + 16 * v) * S + 16 * half + kx * g.dw) as isize - g.pl;
                    *m = lanes(-c0, g.w as isize - c0);
                }
            }
            let mut acc = [[_mm512_setzero_ps(); NV]; MB];
            let evens =
                _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            let plane = g.h * g.w;
            // Taps ky0..ky1 fall inside the input (iy grows with ky).
            let iy_of = |ky: usize| (oy * g.sh + ky * g.dh) as isize - g.pt;
            let ky0 = (0..g.kh).find(|&ky| iy_of(ky) >= 0).unwrap_or(g.kh);
            let ky1 = (ky0..g.kh)
                .find(|&ky| iy_of(ky) >= g.h as isize)
                .unwrap_or(g.kh);
            // Panel ip: element (row r, step s) at s * 12 + r.
            let wpanel = w.wrapping_add(ip * g.k * 12);
            for ci in 0..g.c {
                for ky in ky0..ky1 {
                    let iy = iy_of(ky) as usize;
                    let row = x.wrapping_add(ci * plane + iy * g.w);
                    let wrow = wpanel.wrapping_add(((ci * g.kh + ky) * g.kw) * 12);
                    for (kx, mk) in masks.iter().enumerate().take(g.kw) {
                        let c0 = (ox * S + kx * g.dw) as isize - g.pl;
                        let mut xs = [_mm512_setzero_ps(); NV];
                        for (v, xv) in xs.iter_mut().enumerate() {
                            // Only lanes inside input row iy of channel ci are read.
                            let at = row.wrapping_offset(c0 + (16 * S * v) as isize);
                            *xv = if S == 1 {
                                E::load(mk[v], at)
                            } else {
                                // Columns 2i of 32: the even lanes of two loads.
                                let lo = E::load(mk[2 * v], at);
                                let hi = E::load(mk[2 * v + 1], at.wrapping_add(16));
                                _mm512_permutex2var_ps(lo, evens, hi)
                            };
                        }
                        let wp = wrow.wrapping_add(kx * 12);
                        for (r, ar) in acc.iter_mut().enumerate() {
                            // Row r < MB <= 12 of this K step of the packed panel.
                            let wv = _mm512_set1_ps(*wp.add(r));
                            for (a, &xv) in ar.iter_mut().zip(&xs) {
                                *a = _mm512_fmadd_ps(wv, xv, *a);
                            }
                        }
                    }
                }
            }
            let out = g.oh * g.ow;
            for (r, ar) in acc.iter().enumerate().take(rows) {
                let ch = ip * 12 + r;
                // Channel ch < m of the bias.
                let b = _mm512_set1_ps(bias.map_or(0.0, |b| *b.add(ch)));
                let dst = y.wrapping_add(ch * out + oy * g.ow + ox);
                for (v, &a) in ar.iter().enumerate() {
                    let m = lanes(0, g.ow as isize - (ox + 16 * v) as isize);
                    let mut a = _mm512_add_ps(a, b);
                    if g.acc {
                        // The residual in the lanes about to be stored.
                        a = _mm512_add_ps(a, E::load(m, dst.wrapping_add(16 * v)));
                    }
                    let a = act512(act, a);
                    // Pixels ox + 16 v + i < ow of row oy of channel ch.
                    E::store(m, dst.wrapping_add(16 * v), a);
                }
            }
        }
    }
}
