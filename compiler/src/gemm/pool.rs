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
        }
    }
}

/// Taps `k0..k1` of a window along one dim (output `o`, stride `s`, `k` taps, dilation `d`,
/// leading pad `pad`) that fall inside `0..n`; `k0 >= k1` when none does.
#[inline(always)]
fn valid_taps(o: usize, s: usize, k: usize, d: usize, pad: usize, n: usize) -> (usize, usize) {
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
    x.chunks(512)
        .any(|c| c.iter().fold(false, |a, &v| a | v.is_nan()))
}

/// One output plane, exactly as the reference computes it (NaN propagates), one window at a
/// time.
fn plane_exact(g: &Geom, x: &[f32], y: &mut [f32]) {
    for oy in 0..g.oh {
        let (ky0, ky1) = valid_taps(oy, g.sh, g.kh, g.dh, g.pt, g.h);
        let ch = counted(oy, g.sh, g.kh, g.dh, g.pt, g.pb, g.h, g.include_pad);
        for ox in 0..g.ow {
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
            y[oy * g.ow + ox] = if g.max {
                m
            } else {
                let cw = counted(ox, g.sw, g.kw, g.dw, g.pl, g.pr, g.w, g.include_pad);
                sum / (ch * cw) as f32
            };
            // A window of padding only keeps `f32::MIN` (the max) or gives 0 / 0 = NaN.
        }
    }
}

/// One output plane by the separable passes; `S` is the horizontal stride (0: any).
#[inline(always)]
fn plane_fast<const S: usize>(g: &Geom, x: &[f32], y: &mut [f32], t: &mut [f32; CAP]) {
    let sw = if S == 0 { g.sw } else { S };
    let ident = if g.max { f32::NEG_INFINITY } else { 0.0 };
    let span = (g.kw - 1) * g.dw + 1;
    // Block of nb outputs reads (nb - 1) * sw + span columns, plus sw of identity past them
    // so the horizontal pass can take whole chunks of sw.
    let nb_max = (CAP - span - sw) / sw + 1;
    for (oy, yrow) in y.chunks_exact_mut(g.ow).take(g.oh).enumerate() {
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

/// One plane (`x`: `h*w` floats, `y`: `oh*ow`), by the fastest exact path.
#[inline(always)]
fn plane(g: &Geom, x: &[f32], y: &mut [f32], t: &mut [f32; CAP]) {
    let span = (g.kw.max(1) - 1).saturating_mul(g.dw).saturating_add(1);
    if g.kh == 0
        || g.kw == 0
        || g.ow == 0
        || span.saturating_add(2 * g.sw) > CAP
        || (g.max && has_nan(x))
    {
        plane_exact(g, x, y);
        return;
    }
    match g.sw {
        1 => plane_fast::<1>(g, x, y, t),
        2 => plane_fast::<2>(g, x, y, t),
        _ => plane_fast::<0>(g, x, y, t),
    }
}

type PlaneFn = fn(&Geom, &[f32], &mut [f32], &mut [f32; CAP]);

fn plane_portable(g: &Geom, x: &[f32], y: &mut [f32], t: &mut [f32; CAP]) {
    plane(g, x, y, t);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{CAP, Geom, plane};

    /// The AVX2 variant.
    ///
    /// # Safety
    /// The CPU supports AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn plane_avx2(g: &Geom, x: &[f32], y: &mut [f32], t: &mut [f32; CAP]) {
        plane(g, x, y, t);
    }

    /// The AVX-512F variant.
    ///
    /// # Safety
    /// The CPU supports AVX-512F and AVX2.
    #[target_feature(enable = "avx512f,avx2")]
    pub(super) unsafe fn plane_avx512(g: &Geom, x: &[f32], y: &mut [f32], t: &mut [f32; CAP]) {
        plane(g, x, y, t);
    }
}

/// The variant for the GEMM kernel selected on this CPU (same override, same features).
fn selected() -> PlaneFn {
    #[cfg(target_arch = "x86_64")]
    {
        let name = super::selected_kernel().name;
        if name.starts_with("avx512") && is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above; the AVX-512 GEMM kernel is only
            // selected where AVX2 is available too.
            return |g, x, y, t| unsafe { x86::plane_avx512(g, x, y, t) };
        }
        if name.starts_with("avx") && is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected just above.
            return |g, x, y, t| unsafe { x86::plane_avx2(g, x, y, t) };
        }
    }
    plane_portable
}

/// `y = pool(x)` over `planes` planes.
///
/// # Safety
/// `p` points to a valid [`PoolParams`] whose output size is what the window gives for its
/// input (every output row and column has its first tap below `h + pt`, `w + pl`, and
/// `(o - 1) * s + (k - 1) * d < in + pad + pad_end` as ONNX's shape rule ensures); `x` is
/// readable for `planes*h*w` floats, `y` writable for `planes*oh*ow` floats and overlaps `x`
/// nowhere.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn arenac_pool2d(p: *const PoolParams, x: *const f32, y: *mut f32) {
    // SAFETY: valid by the contract.
    let p = unsafe { *p };
    let g = Geom::new(&p);
    let f = selected();
    let (xplane, yplane) = (g.h * g.w, g.oh * g.ow);
    let mut t = [0.0f32; CAP];
    for i in 0..p.planes as usize {
        // SAFETY: plane i of the input and of the output, inside the sizes of the contract;
        // they do not overlap.
        let (xs, ys) = unsafe {
            (
                std::slice::from_raw_parts(x.add(i * xplane), xplane),
                std::slice::from_raw_parts_mut(y.add(i * yplane), yplane),
            )
        };
        f(&g, xs, ys, &mut t);
    }
}

#[cfg(test)]
mod tests;
