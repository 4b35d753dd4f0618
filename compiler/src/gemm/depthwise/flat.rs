//! Depthwise convolution over flat phase planes: no masks, no per-row work in the inner loop.
//!
//! The input plane is copied into a zero-padded scratch split into `sh * sw` *phase planes*
//! (phase `(ry, rx)` holds padded input rows `i * sh + ry`, columns `j * sw + rx`), each
//! `hh x wh` with `wh = ow + (kw-1)*dw/sw`. Tap `(ky, kx)` of output `(oy, ox)` is then
//! element `(oy + ky*dh/sh) * wh + ox + kx*dw/sw` of phase `((ky*dh) % sh, (kx*dw) % sw)`:
//! an offset from the *flat* index `q = oy * wh + ox`. So the output is computed in vectors
//! of consecutive `q` (up to four at once, independent accumulators), each tap one unaligned
//! load and one fused multiply-add, whatever the stride, dilation or padding; lanes whose `q`
//! falls in a row's last `wh - ow` columns are computed and dropped (the store is masked per
//! output row). Stride 2 is deinterleaved while copying the input, so the loads stay
//! contiguous. Taps are summed (`ky`, then `kx`) into two or four partial sums (tap `t` into
//! sum `t % P`, `P` fixed by how many vectors remain at that point of the plane) added
//! pairwise at the end: the same order at every thread count.
//!
//! The scratch lives on the stack of the task ([`SCRATCH`] floats, zeroed once per task: the
//! padding positions are the same for every plane and are never written); geometries whose
//! phase planes do not fit, or where [`Layout::pays_off`] says the row kernel is faster, take
//! the row kernel of the parent module.

use super::Geom;
use crate::gemm::conv::Activation;

/// Floats of the per-task stack scratch (64 KiB): a 112x112 plane with a 3x3 kernel fits.
pub(super) const SCRATCH: usize = 16 * 1024;
/// Floats of scratch at stride 1 up to which the flat kernel is used (32 KiB, an L1 cache).
const L1_FLOATS: usize = 8 * 1024;
/// Most taps (`kh * kw`) the flat kernel takes.
const MAX_TAPS: usize = 64;
/// Most floats one group of vectors covers (four AVX-512 vectors).
const GROUP: usize = 64;

/// Where the phase planes of one geometry sit in the scratch, and each tap's offset.
#[derive(Clone, Copy)]
pub(super) struct Layout {
    /// Rows and columns of one phase plane.
    hh: usize,
    wh: usize,
    /// Floats of the scratch used (every read of every vector lies below).
    len: usize,
    /// Offset of tap `ky * kw + kx` from the flat output index, in the scratch.
    taps: [u32; MAX_TAPS],
}

impl Layout {
    /// The layout, or None when it does not fit [`SCRATCH`] or the kernel has more than
    /// [`MAX_TAPS`] taps (or the output is empty).
    pub(super) fn new(g: &Geom) -> Option<Self> {
        let ntaps = g.kh.checked_mul(g.kw)?;
        if g.oh == 0 || g.ow == 0 || ntaps == 0 || ntaps > MAX_TAPS || g.sh == 0 || g.sw == 0 {
            return None;
        }
        let hh = (g.oh - 1).checked_add((g.kh - 1).checked_mul(g.dh)? / g.sh + 1)?;
        let wh = (g.ow - 1).checked_add((g.kw - 1).checked_mul(g.dw)? / g.sw + 1)?;
        let plane = hh.checked_mul(wh)?;
        if plane.checked_mul(g.sh.checked_mul(g.sw)?)? > SCRATCH {
            return None;
        }
        let mut taps = [0u32; MAX_TAPS];
        let mut max_off = 0;
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                let (vy, vx) = (ky * g.dh, kx * g.dw);
                let phase = (vy % g.sh) * g.sw + vx % g.sw;
                let off = phase * plane + (vy / g.sh) * wh + vx / g.sw;
                max_off = max_off.max(off);
                taps[ky * g.kw + kx] = off as u32;
            }
        }
        // The last group starts below oh * wh and reads GROUP floats from there.
        let len = (plane * g.sh * g.sw).max(max_off + g.oh * wh + GROUP);
        (len <= SCRATCH).then_some(Layout { hh, wh, len, taps })
    }

    /// Whether the flat kernel beats the row kernel on `g` (measured on EfficientNet-B0 and
    /// MobileNetV2, AVX-512): at stride 1 while the phase plane stays within L1 (a 56x56
    /// plane yes, 112x112 no: the copy then costs more than the masks it saves), at other
    /// strides from 25 taps on (5x5: faster; 3x3 at stride 2: the deinterleaving copy costs
    /// more than the row kernel's permutes).
    pub(super) fn pays_off(&self, g: &Geom) -> bool {
        if g.sh == 1 && g.sw == 1 {
            self.len <= L1_FLOATS
        } else {
            g.kh * g.kw >= 25
        }
    }
}

/// Copies input plane `x` into the phase planes of `buf` (whose padding positions are
/// already zero), deinterleaving columns with `deinterleave` when `sw == 2`.
#[inline(always)]
fn fill(
    g: &Geom,
    l: &Layout,
    buf: &mut [f32],
    x: &[f32],
    deinterleave: impl Fn(&[f32], &mut [f32]),
) {
    let plane = l.hh * l.wh;
    for ry in 0..g.sh {
        for rx in 0..g.sw {
            let start = (ry * g.sw + rx) * plane;
            let Some(ph) = buf.get_mut(start..start + plane) else {
                return;
            };
            // Columns j with 0 <= j*sw + rx - pl < w.
            let j0 = g.pl.saturating_sub(rx).div_ceil(g.sw);
            let j1 = if g.w + g.pl > rx {
                ((g.w + g.pl - rx - 1) / g.sw + 1).min(l.wh)
            } else {
                0
            };
            if j0 >= j1 {
                continue;
            }
            let n = j1 - j0;
            let s0 = j0 * g.sw + rx - g.pl;
            for i in 0..l.hh {
                let iy = (i * g.sh + ry).wrapping_sub(g.pt);
                if iy >= g.h {
                    continue;
                }
                let src = &x[iy * g.w + s0..(iy + 1) * g.w];
                let dst = &mut ph[i * l.wh + j0..i * l.wh + j1];
                match g.sw {
                    1 => dst.copy_from_slice(&src[..n]),
                    2 => deinterleave(&src[..2 * n - 1], dst),
                    s => dst
                        .iter_mut()
                        .zip(src.iter().step_by(s))
                        .for_each(|(d, v)| *d = *v),
                }
            }
        }
    }
}

/// The even-indexed floats of `src` into `dst` (`src.len() == 2 * dst.len() - 1`).
#[inline(always)]
fn evens_portable(src: &[f32], dst: &mut [f32]) {
    dst.iter_mut()
        .zip(src.iter().step_by(2))
        .for_each(|(d, v)| *d = *v);
}

/// The kernel one CPU variant provides: one plane, `buf` the zeroed-once scratch of `l.len()`.
pub(super) type FlatFn =
    unsafe fn(&Geom, &Layout, &mut [f32], &[f32], &[f32], f32, Activation, &mut [f32]);

/// Runs `kernel` over `planes` (input plane, filter, bias, output plane) with one stack
/// scratch for all of them.
///
/// # Safety
/// `kernel` runs on this CPU; each plane has the sizes [`super::plane`] documents for `g`,
/// and `l` is `Layout::new(g)`.
pub(super) unsafe fn run_planes<'a>(
    kernel: FlatFn,
    g: &Geom,
    l: &Layout,
    act: Activation,
    planes: impl Iterator<Item = (&'a [f32], &'a [f32], f32, &'a mut [f32])>,
) {
    let mut store = std::mem::MaybeUninit::<[f32; SCRATCH]>::uninit();
    let len = l.len.min(SCRATCH);
    let ptr = store.as_mut_ptr().cast::<f32>();
    // SAFETY: the first `len <= SCRATCH` floats of `store` are zeroed, then borrowed once.
    let buf = unsafe {
        std::ptr::write_bytes(ptr, 0, len);
        std::slice::from_raw_parts_mut(ptr, len)
    };
    for (x, wt, bias, y) in planes {
        // SAFETY: the caller's contract.
        unsafe { kernel(g, l, buf, x, wt, bias, act, y) };
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use super::{Geom, Layout, evens_portable, fill};
    use crate::gemm::act::x86::{act256, act512};
    use crate::gemm::conv::Activation;
    use core::arch::x86_64::*;

    /// Lanes `lo..hi` of a 16-bit mask, clipped to `0..16`.
    #[inline(always)]
    fn lanes16(lo: isize, hi: isize) -> u16 {
        let (lo, hi) = (lo.clamp(0, 16) as u32, hi.clamp(0, 16) as u32);
        if hi <= lo {
            0
        } else {
            ((((1u32 << hi) - 1) >> lo) << lo) as u16
        }
    }

    /// Even floats of `src` into `dst` (`src.len() == 2 * dst.len() - 1`), 16 at a time.
    ///
    /// # Safety
    /// AVX-512F.
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn evens512(src: &[f32], dst: &mut [f32]) {
        let idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let (n, raw) = (dst.len() as isize, src.len() as isize);
        let mut k = 0isize;
        while k < n {
            // SAFETY: masked loads read only src[2k + r] with 2k + r < raw, masked stores
            // write only dst[k + r] with k + r < n.
            unsafe {
                let p = src.as_ptr().offset(2 * k);
                let a = _mm512_maskz_loadu_ps(lanes16(0, raw - 2 * k), p);
                let b = _mm512_maskz_loadu_ps(lanes16(0, raw - 2 * k - 16), p.wrapping_add(16));
                let v = _mm512_permutex2var_ps(a, idx, b);
                _mm512_mask_storeu_ps(dst.as_mut_ptr().offset(k), lanes16(0, n - k), v);
            }
            k += 16;
        }
    }

    /// The AVX-512F flat kernel (see the module docs).
    ///
    /// # Safety
    /// AVX-512F, AVX2 and FMA; `l` is `Layout::new(g)`, `buf` has `l.len()` floats whose
    /// padding positions are zero, `x`, `wt`, `y` hold `h*w`, `kh*kw`, `oh*ow` floats.
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(in crate::gemm::depthwise) unsafe fn plane512(
        g: &Geom,
        l: &Layout,
        buf: &mut [f32],
        x: &[f32],
        wt: &[f32],
        bias: f32,
        act: Activation,
        y: &mut [f32],
    ) {
        // SAFETY: AVX-512F by the contract.
        fill(g, l, buf, x, |s, d| unsafe { evens512(s, d) });
        let n = g.oh * l.wh;
        let ntaps = g.kh * g.kw;
        if buf.len() < l.len || wt.len() < ntaps || y.len() < g.oh * g.ow {
            return;
        }
        let mut q = 0;
        while q < n {
            // SAFETY: AVX-512F; q < n and the slice sizes checked above.
            unsafe {
                match (n - q).div_ceil(16) {
                    1 => group512::<1, 4>(g, l, buf, wt, bias, act, y, q),
                    2 => group512::<2, 4>(g, l, buf, wt, bias, act, y, q),
                    3 => group512::<3, 2>(g, l, buf, wt, bias, act, y, q),
                    _ => group512::<4, 2>(g, l, buf, wt, bias, act, y, q),
                }
            }
            q += 64;
        }
    }

    /// `U` vectors of flat outputs from `q`, stored row by row.
    ///
    /// # Safety
    /// As [`plane512`], with `buf.len() >= l.len`, `wt.len() >= kh*kw`, `y.len() >= oh*ow`,
    /// `q < oh * wh`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn group512<const U: usize, const P: usize>(
        g: &Geom,
        l: &Layout,
        buf: &[f32],
        wt: &[f32],
        bias: f32,
        act: Activation,
        y: &mut [f32],
        q: usize,
    ) {
        // SAFETY: every load reads buf[off + q .. off + q + 16 U] with off <= the largest tap
        // offset and q < oh * wh, below `l.len` (Layout::new); wt has kh*kw floats.
        unsafe {
            // Tap t goes to partial sum t % P (U * P independent chains hide the FMA
            // latency), the partial sums added pairwise at the end.
            let mut part = [[_mm512_setzero_ps(); U]; P];
            part[0] = [_mm512_set1_ps(bias); U];
            let base = buf.as_ptr().add(q);
            let ntaps = g.kh * g.kw;
            for (c, offs) in l.taps[..ntaps].chunks(P).enumerate() {
                for (k, &off) in offs.iter().enumerate() {
                    let wv = _mm512_set1_ps(*wt.get_unchecked(c * P + k));
                    let p = base.add(off as usize);
                    for (u, a) in part[k].iter_mut().enumerate() {
                        *a = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p.add(16 * u)), *a);
                    }
                }
            }
            let mut acc = part[0];
            for (u, a) in acc.iter_mut().enumerate() {
                *a = if P == 4 {
                    _mm512_add_ps(
                        _mm512_add_ps(part[0][u], part[1][u]),
                        _mm512_add_ps(part[2][u], part[3][u]),
                    )
                } else {
                    _mm512_add_ps(part[0][u], part[1][u])
                };
            }
            let (wh, ow) = (l.wh as isize, g.ow as isize);
            for (u, &a) in acc.iter().enumerate() {
                let qu = (q + 16 * u) as isize;
                let v = act512(act, a);
                let mut oy = qu / wh;
                // Output row oy's column 0 is lane oy*wh - qu; store its lanes < ow.
                while (oy as usize) < g.oh && oy * wh - qu < 16 {
                    let start = oy * wh - qu;
                    let m = lanes16(start, start + ow);
                    // Lane r goes to y[oy*ow + (r - start)], r in start..start+ow: inside row
                    // oy of y (oy < oh); masked-out lanes are not written.
                    let p = y.as_mut_ptr().wrapping_offset(oy * ow - start);
                    _mm512_mask_storeu_ps(p, m, v);
                    oy += 1;
                }
            }
        }
    }

    /// Even floats of `src` into `dst` (`src.len() == 2 * dst.len() - 1`), 8 at a time.
    ///
    /// # Safety
    /// AVX2.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn evens256(src: &[f32], dst: &mut [f32]) {
        let n = dst.len();
        let mut k = 0;
        while k + 8 <= n && 2 * k + 16 <= src.len() {
            // SAFETY: reads src[2k .. 2k+16], writes dst[k .. k+8], both in bounds (checked).
            unsafe {
                let p = src.as_ptr().add(2 * k);
                let a = _mm256_loadu_ps(p);
                let b = _mm256_loadu_ps(p.add(8));
                // [a0 a2 b0 b2 | a4 a6 b4 b6] -> 64-bit pairs 0, 2, 1, 3.
                let s = _mm256_shuffle_ps::<0b10_00_10_00>(a, b);
                let v =
                    _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(s)));
                _mm256_storeu_ps(dst.as_mut_ptr().add(k), v);
            }
            k += 8;
        }
        evens_portable(&src[2 * k..], &mut dst[k..]);
    }

    /// The AVX2+FMA flat kernel (8 lanes; see [`plane512`]).
    ///
    /// # Safety
    /// That of [`plane512`] with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(in crate::gemm::depthwise) unsafe fn plane256(
        g: &Geom,
        l: &Layout,
        buf: &mut [f32],
        x: &[f32],
        wt: &[f32],
        bias: f32,
        act: Activation,
        y: &mut [f32],
    ) {
        // SAFETY: AVX2 by the contract.
        fill(g, l, buf, x, |s, d| unsafe { evens256(s, d) });
        let n = g.oh * l.wh;
        if buf.len() < l.len || wt.len() < g.kh * g.kw || y.len() < g.oh * g.ow {
            return;
        }
        let mut q = 0;
        while q < n {
            // SAFETY: AVX2; q < n and the slice sizes checked above.
            unsafe {
                match (n - q).div_ceil(8) {
                    1 => group256::<1, 4>(g, l, buf, wt, bias, act, y, q),
                    2 => group256::<2, 4>(g, l, buf, wt, bias, act, y, q),
                    3 => group256::<3, 2>(g, l, buf, wt, bias, act, y, q),
                    _ => group256::<4, 2>(g, l, buf, wt, bias, act, y, q),
                }
            }
            q += 32;
        }
    }

    /// [`group512`] with 8-lane vectors.
    ///
    /// # Safety
    /// As [`group512`] with AVX2 and FMA.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn group256<const U: usize, const P: usize>(
        g: &Geom,
        l: &Layout,
        buf: &[f32],
        wt: &[f32],
        bias: f32,
        act: Activation,
        y: &mut [f32],
        q: usize,
    ) {
        // SAFETY: as in group512 (8-lane vectors, GROUP covers 4 of them).
        unsafe {
            // Tap t goes to partial sum t % P (U * P independent chains hide the FMA
            // latency), the partial sums added pairwise at the end.
            let mut part = [[_mm256_setzero_ps(); U]; P];
            part[0] = [_mm256_set1_ps(bias); U];
            let base = buf.as_ptr().add(q);
            let ntaps = g.kh * g.kw;
            for (c, offs) in l.taps[..ntaps].chunks(P).enumerate() {
                for (k, &off) in offs.iter().enumerate() {
                    let wv = _mm256_set1_ps(*wt.get_unchecked(c * P + k));
                    let p = base.add(off as usize);
                    for (u, a) in part[k].iter_mut().enumerate() {
                        *a = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p.add(8 * u)), *a);
                    }
                }
            }
            let mut acc = part[0];
            for (u, a) in acc.iter_mut().enumerate() {
                *a = if P == 4 {
                    _mm256_add_ps(
                        _mm256_add_ps(part[0][u], part[1][u]),
                        _mm256_add_ps(part[2][u], part[3][u]),
                    )
                } else {
                    _mm256_add_ps(part[0][u], part[1][u])
                };
            }
            let (wh, ow) = (l.wh as isize, g.ow as isize);
            let iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            for (u, &a) in acc.iter().enumerate() {
                let qu = (q + 8 * u) as isize;
                let v = act256(act, a);
                let mut oy = qu / wh;
                while (oy as usize) < g.oh && oy * wh - qu < 8 {
                    let start = oy * wh - qu;
                    // Lanes start <= r < start + ow (r > start - 1, start + ow > r).
                    let lo =
                        _mm256_cmpgt_epi32(iota, _mm256_set1_epi32((start - 1).max(-1) as i32));
                    let hi =
                        _mm256_cmpgt_epi32(_mm256_set1_epi32((start + ow).min(8) as i32), iota);
                    let m = _mm256_and_si256(lo, hi);
                    // As in group512: only lanes inside row oy of y are written.
                    let p = y.as_mut_ptr().wrapping_offset(oy * ow - start);
                    _mm256_maskstore_ps(p, m, v);
                    oy += 1;
                }
            }
        }
    }
}
