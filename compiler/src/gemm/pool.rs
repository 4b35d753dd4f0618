//! 2-d MaxPool and AveragePool (f32, NCHW), called from JIT code through [`arenac_pool2d`].
//!
//! Both are separable: the window's max (or sum) is the max (sum) over its columns of the
//! max (sum) over its rows. Each output row is computed in blocks of output columns: a
//! vertical pass reduces the valid input rows of the window into a stack buffer that covers
//! the block's input columns (padding columns hold the identity, `-inf` or `0`), then a
//! horizontal pass reduces `kw` taps of that buffer per output column (`t[i * sw + kx * dw]`,
//! no bounds checks: the padding is in the buffer). Both passes are straight loops that LLVM
//! vectorizes (contiguous for the vertical one, stride 1 or 2 interleaved loads for the
//! horizontal one, strides 1 and 2 being specialized). A last pass fixes what the identity
//! cannot express: AveragePool divides by the number of counted taps (rows times columns,
//! separable too; `0 / 0` is NaN for an empty window, like the reference), MaxPool writes
//! `f32::MIN` for a window made of padding only (the reference's lowest finite value).
//!
//! MaxPool rows without dilation at stride 1 or 2 (every CNN's) take `pool/direct.rs`: the
//! same two passes in explicit vectors, the vertical one reading each window row once.
//!
//! NaN: the reference's max propagates NaN (`v > m || v.is_nan()`), which a vector max does
//! not; a plane holding a NaN (checked first, vectorized) takes an exact per-window path.
//!
//! The body is generic and inlined into `#[target_feature]` variants (AVX-512F, AVX2) and a
//! portable one, chosen like the GEMM kernels (`ARENAC_GEMM_KERNEL` selects them too).

/// Geometry and kind of one 2-d pooling (sizes in elements).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolParams {
    /// Planes (N * C).
    pub planes: u64,
    /// Input height.
    pub h: u64,
    /// Input width.
    pub w: u64,
    /// Output height.
    pub oh: u64,
    /// Output width.
    pub ow: u64,
    /// Kernel height.
    pub kh: u64,
    /// Kernel width.
    pub kw: u64,
    /// Vertical stride.
    pub sh: u64,
    /// Horizontal stride.
    pub sw: u64,
    /// Top padding.
    pub pt: u64,
    /// Left padding.
    pub pl: u64,
    /// Vertical dilation.
    pub dh: u64,
    /// Horizontal dilation.
    pub dw: u64,
    /// Bottom padding (counted by AveragePool with `count_include_pad`).
    pub pb: u64,
    /// Right padding (likewise).
    pub pr: u64,
    /// [`POOL_MAX`], [`POOL_AVG`] or [`POOL_AVG_INCLUDE_PAD`].
    pub kind: u64,
}

/// [`PoolParams::kind`]: MaxPool.
pub const POOL_MAX: u64 = 0;
/// [`PoolParams::kind`]: AveragePool dividing by the taps inside the input.
pub const POOL_AVG: u64 = 1;
/// [`PoolParams::kind`]: AveragePool dividing by the taps inside the input and its pads.
pub const POOL_AVG_INCLUDE_PAD: u64 = 2;

impl PoolParams {
    /// The fields in declaration order (the `repr(C)` layout: 8 bytes each).
    pub fn fields(&self) -> [u64; 16] {
        [
            self.planes,
            self.h,
            self.w,
            self.oh,
            self.ow,
            self.kh,
            self.kw,
            self.sh,
            self.sw,
            self.pt,
            self.pl,
            self.dh,
            self.dw,
            self.pb,
            self.pr,
            self.kind,
        ]
    }
}

/// Floats of the stack buffer of the vertical pass.
const CAP: usize = 4096;

/// The geometry as `usize`, strides and dilations at least 1.
#[derive(Clone, Copy, Debug)]
struct Geom {
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    pt: usize,
    pl: usize,
    dh: usize,
    dw: usize,
    pb: usize,
    pr: usize,
    max: bool,
    include_pad: bool,
    /// In place: the row lag of [`in_place_lag`] (0 otherwise).
    lag: usize,
}

impl Geom {
    fn new(p: &PoolParams) -> Self {
        let u = |v: u64| v as usize;
        Geom {
            h: u(p.h),
            w: u(p.w),
            oh: u(p.oh),
            ow: u(p.ow),
            kh: u(p.kh),
            kw: u(p.kw),
            sh: u(p.sh).max(1),
            sw: u(p.sw).max(1),
            pt: u(p.pt),
            pl: u(p.pl),
            dh: u(p.dh).max(1),
            dw: u(p.dw).max(1),
            pb: u(p.pb),
            pr: u(p.pr),
            max: p.kind == POOL_MAX,
            include_pad: p.kind == POOL_AVG_INCLUDE_PAD,
            lag: 0,
        }
    }
}

/// Taps `k0..k1` of a window along one dim (output `o`, stride `s`, `k` taps, dilation `d`,
/// leading pad `pad`) that fall inside `0..n`; `k0 >= k1` when none does.
#[inline(always)]
pub(crate) fn valid_taps(
    o: usize,
    s: usize,
    k: usize,
    d: usize,
    pad: usize,
    n: usize,
) -> (usize, usize) {
    let start = o * s;
    let k0 = if start >= pad {
        0
    } else {
        (pad - start).div_ceil(d).min(k)
    };
    let k1 = if n + pad > start {
        ((n + pad - start - 1) / d + 1).min(k)
    } else {
        0
    };
    (k0, k1)
}

/// Taps counted by AveragePool along one dim: inside the input, or (`include_pad`) inside the
/// input plus its pads (`pad`, `pad_end`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn counted(
    o: usize,
    s: usize,
    k: usize,
    d: usize,
    pad: usize,
    pad_end: usize,
    n: usize,
    include_pad: bool,
) -> usize {
    if include_pad {
        // Padded coordinates start at 0 at the first leading pad.
        let (_, k1) = valid_taps(o, s, k, d, 0, n + pad + pad_end);
        k1
    } else {
        let (k0, k1) = valid_taps(o, s, k, d, pad, n);
        k1.saturating_sub(k0)
    }
}

/// The max of NaN-free inputs. `f32::max`, not a select: LLVM turns `d = if v > d { v } else
/// { d }` over a slice into a conditional (masked) store, several times slower.
#[inline(always)]
fn vmax(a: f32, v: f32) -> f32 {
    a.max(v)
}

/// Whether `x` holds a NaN (vectorized: no early exit inside a chunk).
#[inline(always)]
fn has_nan(x: &[f32]) -> bool {
    // An integer OR reduction: LLVM vectorizes it (a `bool` fold stayed scalar: about as
    // costly as the pooling itself).
    x.chunks(512)
        .any(|c| c.iter().fold(0u32, |a, &v| a | u32::from(v.is_nan())) != 0)
}

/// One output row `oy` (`y`: `ow` floats), exactly as the reference computes it (NaN
/// propagates), one window at a time.
fn row_exact(g: &Geom, x: &[f32], oy: usize, y: &mut [f32]) {
    let (ky0, ky1) = valid_taps(oy, g.sh, g.kh, g.dh, g.pt, g.h);
    let ch = counted(oy, g.sh, g.kh, g.dh, g.pt, g.pb, g.h, g.include_pad);
    for (ox, out) in y.iter_mut().enumerate().take(g.ow) {
        let (kx0, kx1) = valid_taps(ox, g.sw, g.kw, g.dw, g.pl, g.w);
        let (mut m, mut sum, mut any) = (f32::MIN, 0.0f32, false);
        for ky in ky0..ky1 {
            let iy = oy * g.sh + ky * g.dh - g.pt;
            for kx in kx0..kx1 {
                let v = x[iy * g.w + ox * g.sw + kx * g.dw - g.pl];
                m = if !any || v > m || v.is_nan() { v } else { m };
                any = true;
                sum += v;
            }
        }
        *out = if g.max {
            m
        } else {
            let cw = counted(ox, g.sw, g.kw, g.dw, g.pl, g.pr, g.w, g.include_pad);
            sum / (ch * cw) as f32
        };
        // A window of padding only keeps `f32::MIN` (the max) or gives 0 / 0 = NaN.
    }
}

/// One output row `oy` (`yrow`: `ow` floats) by the separable passes; `S` is the horizontal
/// stride (0: any). Reads `x` only, writes `yrow` only at the end of each column block.
#[inline(always)]
fn row_fast<const S: usize, const V: u8>(
    g: &Geom,
    x: &[f32],
    oy: usize,
    yrow: &mut [f32],
    t: &mut [f32; CAP],
) {
    let sw = if S == 0 { g.sw } else { S };
    let ident = if g.max { f32::NEG_INFINITY } else { 0.0 };
    let span = (g.kw - 1) * g.dw + 1;
    // Block of nb outputs reads (nb - 1) * sw + span columns, plus sw of identity past them
    // so the horizontal pass can take whole chunks of sw.
    let nb_max = (CAP - span - sw) / sw + 1;
    // The vector pass reads whole vectors past the block: at most 2 * nb16 + span - 2.
    let simd = S == 2 && V != stride2::PORTABLE;
    let nb_max = if simd {
        nb_max.min((CAP - span) / 2 / 16 * 16).max(1)
    } else {
        nb_max
    };
    {
        let (ky0, ky1) = valid_taps(oy, g.sh, g.kh, g.dh, g.pt, g.h);
        let mut ox0 = 0;
        while ox0 < g.ow {
            let nb = (g.ow - ox0).min(nb_max);
            let len = (nb - 1) * sw + span + sw;
            let tb = &mut t[..len];
            // Buffer column j is input column ix0 + j.
            let ix0 = (ox0 * sw) as isize - g.pl as isize;
            let jlo = (-ix0).clamp(0, len as isize) as usize;
            let jhi = ((g.w as isize - ix0).clamp(0, len as isize) as usize).max(jlo);
            tb[..jlo].fill(ident);
            tb[jhi..].fill(ident);
            let cols = |iy: usize| {
                let a = (iy * g.w) as isize + ix0 + jlo as isize;
                let a = a as usize;
                &x[a..a + (jhi - jlo)]
            };
            let mid = &mut tb[jlo..jhi];
            if ky0 >= ky1 {
                mid.fill(ident);
            } else {
                mid.copy_from_slice(cols(oy * g.sh + ky0 * g.dh - g.pt));
                for ky in ky0 + 1..ky1 {
                    let src = cols(oy * g.sh + ky * g.dh - g.pt);
                    if g.max {
                        mid.iter_mut().zip(src).for_each(|(d, &v)| *d = vmax(*d, v));
                    } else {
                        mid.iter_mut().zip(src).for_each(|(d, &v)| *d += v);
                    }
                }
            }
            let out = &mut yrow[ox0..ox0 + nb];
            if simd {
                // SAFETY: the variant's CPU features (V names them; the caller runs in a
                // function enabling them); t holds CAP >= 2 * nb16 + span - 1 floats.
                unsafe { stride2::pass::<V>(t, g.kw, g.dw, g.max, out) };
                ox0 += nb;
                continue;
            }
            for kx in 0..g.kw {
                let src = &tb[kx * g.dw..kx * g.dw + nb * sw];
                let taps = src.chunks_exact(sw).map(|c| c[0]);
                if kx == 0 {
                    out.iter_mut().zip(taps).for_each(|(d, v)| *d = v);
                } else if g.max {
                    out.iter_mut().zip(taps).for_each(|(d, v)| *d = vmax(*d, v));
                } else {
                    out.iter_mut().zip(taps).for_each(|(d, v)| *d += v);
                }
            }
            ox0 += nb;
        }
        // Interior columns lo..hi have every tap inside the input row.
        let lo = g.pl.div_ceil(g.sw).min(g.ow);
        let hi = if g.w + g.pl >= span {
            ((g.w + g.pl - span) / g.sw + 1).clamp(lo, g.ow)
        } else {
            lo
        };
        if g.max {
            if ky0 >= ky1 {
                yrow.fill(f32::MIN);
            } else {
                for ox in (0..lo).chain(hi..g.ow) {
                    let (kx0, kx1) = valid_taps(ox, g.sw, g.kw, g.dw, g.pl, g.w);
                    if kx0 >= kx1 {
                        yrow[ox] = f32::MIN;
                    }
                }
            }
        } else {
            let ch = counted(oy, g.sh, g.kh, g.dh, g.pt, g.pb, g.h, g.include_pad);
            let inner = (ch * g.kw) as f32;
            yrow[lo..hi].iter_mut().for_each(|v| *v /= inner);
            for ox in (0..lo).chain(hi..g.ow) {
                let cw = counted(ox, g.sw, g.kw, g.dw, g.pl, g.pr, g.w, g.include_pad);
                yrow[ox] /= (ch * cw) as f32;
            }
        }
    }
}

/// Whether a plane `x` takes the exact per-window path (degenerate windows, a window too
/// wide for the stack buffer, or a NaN under MaxPool).
#[inline(always)]
fn exact_path(g: &Geom, x: &[f32]) -> bool {
    let span = (g.kw.max(1) - 1).saturating_mul(g.dw).saturating_add(1);
    g.kh == 0
        || g.kw == 0
        || g.ow == 0
        || span.saturating_add(2 * g.sw) > CAP
        || (g.max && has_nan(x))
}

/// Output row `oy` of plane `x` into `yrow` by the path `exact` chose.
#[inline(always)]
fn row<const V: u8>(
    g: &Geom,
    exact: bool,
    x: &[f32],
    oy: usize,
    yrow: &mut [f32],
    t: &mut [f32; CAP],
) {
    if exact {
        return row_exact(g, x, oy, yrow);
    }
    if direct::fits::<V>(g) {
        // SAFETY: the caller runs in a function enabling V's features; `fits` holds; `x` is
        // the plane, `yrow` holds `ow` floats (callers' contract).
        return unsafe { direct::row::<V>(g, x, oy, yrow, t) };
    }
    match g.sw {
        1 => row_fast::<1, V>(g, x, oy, yrow, t),
        2 => row_fast::<2, V>(g, x, oy, yrow, t),
        _ => row_fast::<0, V>(g, x, oy, yrow, t),
    }
}

/// One plane (`x`: `h*w` floats, `y`: `oh*ow`, disjoint), by the fastest exact path.
#[inline(always)]
fn plane<const V: u8>(g: &Geom, x: &[f32], y: &mut [f32], t: &mut [f32; CAP]) {
    let exact = exact_path(g, x);
    for (oy, yrow) in y.chunks_exact_mut(g.ow.max(1)).take(g.oh).enumerate() {
        row::<V>(g, exact, x, oy, yrow, t);
    }
}

/// One plane in place, with a lag of `lag` rows: output row `oy` is computed into slot
/// `oy % (lag + 1)` of `r` from the input plane at `x`, and written to row `oy` of the output
/// plane at `y` once row `oy + lag` is computed (the last rows after the loop).
///
/// # Safety
/// `x` is valid for `h*w` floats, `y` for `oh*ow`, nothing else refers to them during the
/// call, `(lag + 1) * ow <= CAP`, and writing output row `oy` then covers no input float that
/// a row computed later reads ([`in_place_lag`]; `y` may overlap `x`).
#[inline(always)]
unsafe fn plane_in_place<const V: u8>(
    g: &Geom,
    lag: usize,
    x: *const f32,
    y: *mut f32,
    t: &mut [f32; CAP],
    r: &mut [f32; CAP],
) {
    let n = g.h * g.w;
    let ow = g.ow;
    let slots = lag + 1;
    if slots.saturating_mul(ow) > CAP {
        return;
    }
    let write = |r: &[f32; CAP], oy: usize| {
        let from = &r[(oy % slots) * ow..(oy % slots + 1) * ow];
        // SAFETY: row `oy` of the output plane is in bounds; `r` is a stack buffer, disjoint
        // from the arena.
        unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), y.add(oy * ow), ow) };
    };
    // SAFETY: `x` is valid for `n` floats; the slice ends before any write.
    let exact = exact_path(g, unsafe { std::slice::from_raw_parts(x, n) });
    for oy in 0..g.oh {
        {
            // SAFETY: as above; this shared slice is dropped before any row is written.
            let xs = unsafe { std::slice::from_raw_parts(x, n) };
            let slot = oy % slots;
            row::<V>(g, exact, xs, oy, &mut r[slot * ow..(slot + 1) * ow], t);
        }
        if oy >= lag {
            write(r, oy - lag);
        }
    }
    for oy in g.oh.saturating_sub(lag)..g.oh {
        write(r, oy);
    }
}

/// The smallest row lag (0, 1 or 2) with which [`arenac_pool2d`] may write its output over
/// its input (`y == x`), or None: the output is no larger than the input, `lag + 1` output
/// rows fit the row buffer, and for every plane `c` and output row `i`, the output written up
/// to the end of row `i` (`c*oh*ow + (i+1)*ow` floats, written once row `i + lag` is
/// computed) stays below the first input float a row computed later or a later plane reads
/// (`c*h*w + min(max(0, (i+lag+1)*sh - pt), h)*w`, or `(c+1)*h*w` for rows written after the
/// last row is computed). Since `oh*ow <= h*w`, plane 0 is the tightest. A stride-1 pooling
/// with one row of top padding needs a lag of one row.
pub fn in_place_lag(p: &PoolParams) -> Option<usize> {
    let g = Geom::new(p);
    if g.oh.saturating_mul(g.ow) > g.h.saturating_mul(g.w) {
        return None;
    }
    (0..=2usize).find(|&lag| {
        (lag + 1).saturating_mul(g.ow) <= CAP
            && (0..g.oh).all(|i| {
                let next = if i + lag + 1 >= g.oh {
                    g.h
                } else {
                    (i + lag + 1)
                        .saturating_mul(g.sh)
                        .saturating_sub(g.pt)
                        .min(g.h)
                };
                (i + 1).saturating_mul(g.ow) <= next.saturating_mul(g.w)
            })
    })
}

/// Whether [`arenac_pool2d`] may write its output over its input ([`in_place_lag`]).
pub fn in_place_ok(p: &PoolParams) -> bool {
    in_place_lag(p).is_some()
}

/// The geometry of a 1-d or 2-d pooling on an `N x C x ...` input of shape `xs` with output
/// shape `ys` (1-d as 2-d of height 1; `pads` as ONNX: begins then ends), MaxPool kind; None
/// for another rank. The same mapping as the lowering's.
pub fn pool_params(
    xs: &[usize],
    ys: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[usize],
) -> Option<PoolParams> {
    let d = kernel.len();
    if !(1..=2).contains(&d) || xs.len() != d + 2 || ys.len() != d + 2 {
        return None;
    }
    let two = |v: &[usize], at: usize, fill: usize| -> [u64; 2] {
        let g = |i: usize| v.get(at + i).copied().unwrap_or(fill) as u64;
        if d == 1 {
            [fill as u64, g(0)]
        } else {
            [g(0), g(1)]
        }
    };
    let [h, w] = two(xs, 2, 1);
    let [oh, ow] = two(ys, 2, 1);
    let [kh, kw] = two(kernel, 0, 1);
    let [sh, sw] = two(strides, 0, 1);
    let [dh, dw] = two(dilations, 0, 1);
    let [pt, pl] = two(pads, 0, 0);
    let [pb, pr] = two(pads, d, 0);
    let planes = xs.first()?.checked_mul(*xs.get(1)?)? as u64;
    Some(PoolParams {
        planes,
        h,
        w,
        oh,
        ow,
        kh,
        kw,
        sh,
        sw,
        pt,
        pl,
        dh,
        dw,
        pb,
        pr,
        kind: POOL_MAX,
    })
}

/// A plane pass: `(geometry, x, y, stack buffer, row buffer when in place)`.
type PlaneFn = unsafe fn(&Geom, *const f32, *mut f32, &mut [f32; CAP], Option<&mut [f32; CAP]>);

/// One plane, in place when `r` is given.
///
/// # Safety
/// Out of place (`r` is `None`): `x` is valid for `h*w` floats, `y` for `oh*ow`, and they are
/// disjoint. In place: [`plane_in_place`]'s contract holds with `g.lag`.
#[inline(always)]
unsafe fn plane_any<const V: u8>(
    g: &Geom,
    x: *const f32,
    y: *mut f32,
    t: &mut [f32; CAP],
    r: Option<&mut [f32; CAP]>,
) {
    match r {
        // SAFETY: by this function's contract.
        Some(r) => unsafe { plane_in_place::<V>(g, g.lag, x, y, t, r) },
        None => {
            // SAFETY: by this function's contract (disjoint, in bounds).
            let (xs, ys) = unsafe {
                (
                    std::slice::from_raw_parts(x, g.h * g.w),
                    std::slice::from_raw_parts_mut(y, g.oh * g.ow),
                )
            };
            plane::<V>(g, xs, ys, t);
        }
    }
}

/// The portable variant.
///
/// # Safety
/// As [`plane_any`].
unsafe fn plane_portable(
    g: &Geom,
    x: *const f32,
    y: *mut f32,
    t: &mut [f32; CAP],
    r: Option<&mut [f32; CAP]>,
) {
    // SAFETY: forwarded contract.
    unsafe { plane_any::<{ stride2::PORTABLE }>(g, x, y, t, r) }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{CAP, Geom, plane_any, stride2};

    /// The AVX2 variant.
    ///
    /// # Safety
    /// The CPU supports AVX2; [`plane_any`]'s contract holds.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn plane_avx2(
        g: &Geom,
        x: *const f32,
        y: *mut f32,
        t: &mut [f32; CAP],
        r: Option<&mut [f32; CAP]>,
    ) {
        // SAFETY: forwarded contract.
        unsafe { plane_any::<{ stride2::AVX2 }>(g, x, y, t, r) }
    }

    /// The AVX-512F variant.
    ///
    /// # Safety
    /// The CPU supports AVX-512F and AVX2; [`plane_any`]'s contract holds.
    #[target_feature(enable = "avx512f,avx2")]
    pub(super) unsafe fn plane_avx512(
        g: &Geom,
        x: *const f32,
        y: *mut f32,
        t: &mut [f32; CAP],
        r: Option<&mut [f32; CAP]>,
    ) {
        // SAFETY: forwarded contract.
        unsafe { plane_any::<{ stride2::AVX512 }>(g, x, y, t, r) }
    }
}

/// The variant for the GEMM kernel selected on this CPU (same override, same features).
fn selected() -> PlaneFn {
    #[cfg(target_arch = "x86_64")]
    {
        let name = super::selected_kernel().name;
        if name.starts_with("avx512") && is_x86_feature_detected!("avx512f") {
            return x86::plane_avx512;
        }
        if name.starts_with("avx") && is_x86_feature_detected!("avx2") {
            return x86::plane_avx2;
        }
    }
    plane_portable
}

/// `y = pool(x)` over `planes` planes; in place when `y == x`.
///
/// # Safety
/// `p` points to a valid [`PoolParams`] whose output size is what the window gives for its
/// input (every output row and column has its first tap below `h + pt`, `w + pl`, and
/// `(o - 1) * s + (k - 1) * d < in + pad + pad_end` as ONNX's shape rule ensures); `x` is
/// readable for `planes*h*w` floats, `y` writable for `planes*oh*ow` floats; either they
/// overlap nowhere, or `y == x` and [`in_place_ok`] holds for `p`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn arenac_pool2d(p: *const PoolParams, x: *const f32, y: *mut f32) {
    // SAFETY: valid by the contract.
    let p = unsafe { *p };
    let mut g = Geom::new(&p);
    let f = selected();
    let (xplane, yplane) = (g.h * g.w, g.oh * g.ow);
    let mut t = [0.0f32; CAP];
    let in_place = std::ptr::eq(x, y.cast_const());
    if in_place {
        g.lag = in_place_lag(&p).unwrap_or(0);
    }
    if in_place {
        // Plane i's output overwrites input planes earlier ones read: one after the other.
        let mut r = [0.0f32; CAP];
        for i in 0..p.planes as usize {
            // SAFETY: plane i of the input and of the output, inside the sizes of the
            // contract; the output plane starts at or before the input plane and
            // `in_place_ok` holds (earlier planes' outputs end before this input plane); the
            // selected variant's CPU features were detected in `selected`.
            unsafe {
                f(
                    &g,
                    x.add(i * xplane),
                    y.add(i * yplane),
                    &mut t,
                    Some(&mut r),
                )
            };
        }
        return;
    }
    // Out of place: runs of planes spread over the current pool (each plane computed as
    // single-threaded: bit-identical at every thread count).
    let planes = p.planes as usize;
    let work = planes
        .saturating_mul(yplane)
        .saturating_mul((p.kh * p.kw) as usize);
    let width = crate::par::width(crate::par::cost::gemm_ns(work), crate::par::threads());
    let runs = (work / super::split::MIN_TASK_MACS)
        .min(width * 4)
        .clamp(1, planes.max(1));
    let (xs, ys) = (
        super::split::SyncPtr(x.cast_mut()),
        super::split::SyncPtr(y),
    );
    let g = &g;
    crate::par::for_each(runs, width, |run, _| {
        let mut t = [0.0f32; CAP];
        for i in planes * run / runs..planes * (run + 1) / runs {
            // SAFETY: plane i of the input and of the output, inside the sizes of the
            // contract, disjoint (out of place), each output plane in one run only; the
            // selected variant's CPU features were detected in `selected`.
            unsafe {
                f(
                    g,
                    xs.get().add(i * xplane),
                    ys.get().add(i * yplane),
                    &mut t,
                    None,
                )
            };
        }
    });
}

mod direct;
mod stride2;

#[cfg(test)]
mod tests;
