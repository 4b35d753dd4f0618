//! One MaxPool output row in explicit vectors, for the common geometry: no dilation, stride 1
//! or 2 along the row, a row that fits the stack buffer (every CNN's MaxPool: SqueezeNet's
//! 3x3/s2 ceil_mode ones, ResNet's 3x3/s2 pad 1).
//!
//! Two passes, each one loop of whole vectors:
//! - vertical: the max of the window's valid input rows, one vector of input columns at a
//!   time (each row loaded once, one store), into the buffer `t` at column `pl + ix`; the
//!   buffer's padding columns (`0..pl` and past `pl + w`) hold `-inf`;
//! - horizontal: output `i` is the max of `t[i * s + kx]` over `kx < kw`: unaligned loads for
//!   stride 1, the even lanes of two loads for stride 2 ([`super::stride2::pass`]).
//!
//! The generic row path does the same with a copy and one pass per window row plus scalar
//! tails; this one runs 27-31% fewer instructions on SqueezeNet's and ResNet's MaxPools
//! (callgrind, `examples/maxpool_bench.rs`, AVX2). Maxima are exact, so the result is bitwise
//! the reference's for NaN-free planes (a plane with a NaN never comes here: `exact_path`).

use super::{CAP, Geom, stride2};

/// Floats of the buffer the row of `g` needs: the input columns with their left padding, and
/// what the horizontal pass reads past the last output (whole vectors of 16 outputs).
fn need(g: &Geom) -> usize {
    let ow16 = g.ow.div_ceil(16) * 16;
    let horizontal = ow16 * g.sw + g.kw + 16;
    (g.pl + g.w + 16).max(horizontal)
}

/// Whether the row of `g` takes this path (variant `V` not portable).
#[inline(always)]
pub(super) fn fits<const V: u8>(g: &Geom) -> bool {
    V != stride2::PORTABLE
        && g.max
        && g.dh == 1
        && g.dw == 1
        && (g.sw == 1 || g.sw == 2)
        && g.kw >= 1
        && g.kh >= 1
        && g.w >= 1
        && need(g) <= CAP
}

/// Output row `oy` of the plane `x` into `yrow` (`ow` floats).
///
/// # Safety
/// The CPU has the features of `V`; [`fits`] holds for `g`; `x` holds the plane (`h * w`
/// floats), `yrow` at least `ow`.
#[inline(always)]
pub(super) unsafe fn row<const V: u8>(
    g: &Geom,
    x: &[f32],
    oy: usize,
    yrow: &mut [f32],
    t: &mut [f32; CAP],
) {
    let (ky0, ky1) = super::valid_taps(oy, g.sh, g.kh, g.dh, g.pt, g.h);
    if ky0 >= ky1 {
        // No input row in the window: the reference's lowest finite value.
        yrow[..g.ow].fill(f32::MIN);
        return;
    }
    let n = need(g);
    t[..g.pl].fill(f32::NEG_INFINITY);
    t[g.pl + g.w..n].fill(f32::NEG_INFINITY);
    let first = oy * g.sh + ky0 - g.pt;
    let rows = ky1 - ky0;
    // Every row of the window lies inside the plane (valid taps).
    debug_assert!((first + rows) * g.w <= x.len());
    let out = &mut yrow[..g.ow];
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rows `first .. first + rows` are inside `x`; `t` holds `need(g) <= CAP` floats
    // (fits); the CPU features of V (caller).
    unsafe {
        let src = x.as_ptr().add(first * g.w);
        let dst = t.as_mut_ptr().add(g.pl);
        match V {
            stride2::AVX512 => x86::vertical512(src, g.w, rows, dst),
            _ => x86::vertical256(src, g.w, rows, dst),
        }
        if g.sw == 2 {
            stride2::pass::<V>(t, g.kw, 1, true, out);
        } else {
            match V {
                stride2::AVX512 => x86::stride1_512(t, g.kw, out),
                _ => x86::stride1_256(t, g.kw, out),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (rows, out);
    // Columns whose window is all padding (only at the edges: dilation 1): the reference's
    // lowest finite value instead of the buffer's `-inf`.
    let row = &mut yrow[..g.ow];
    for (ox, v) in row.iter_mut().enumerate() {
        if ox * g.sw + g.kw > g.pl {
            break;
        }
        *v = f32::MIN;
    }
    for (ox, v) in row.iter_mut().enumerate().rev() {
        if ox * g.sw < g.pl + g.w {
            break;
        }
        *v = f32::MIN;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::CAP;
    use core::arch::x86_64::*;

    /// `dst[j] = max over r < rows of src[r * w + j]` for `j < w`.
    ///
    /// # Safety
    /// AVX-512F; `src` readable for `rows * w` floats, `dst` writable for `w`; `rows >= 1`.
    #[target_feature(enable = "avx512f,avx2")]
    pub(super) unsafe fn vertical512(src: *const f32, w: usize, rows: usize, dst: *mut f32) {
        let mut j = 0;
        // SAFETY: every access is at `r * w + j .. + 16` with `j + 16 <= w`, or masked to `w`.
        unsafe {
            if rows == 3 {
                // The 3-row window of every CNN's MaxPool, unrolled.
                let (a, b, c) = (src, src.add(w), src.add(2 * w));
                while j + 16 <= w {
                    let m = _mm512_max_ps(_mm512_loadu_ps(a.add(j)), _mm512_loadu_ps(b.add(j)));
                    _mm512_storeu_ps(dst.add(j), _mm512_max_ps(m, _mm512_loadu_ps(c.add(j))));
                    j += 16;
                }
            }
            while j + 16 <= w {
                let mut acc = _mm512_loadu_ps(src.add(j));
                for r in 1..rows {
                    acc = _mm512_max_ps(acc, _mm512_loadu_ps(src.add(r * w + j)));
                }
                _mm512_storeu_ps(dst.add(j), acc);
                j += 16;
            }
            if j < w {
                let m = ((1u32 << (w - j)) - 1) as u16;
                let mut acc = _mm512_maskz_loadu_ps(m, src.add(j));
                for r in 1..rows {
                    acc = _mm512_max_ps(acc, _mm512_maskz_loadu_ps(m, src.add(r * w + j)));
                }
                _mm512_mask_storeu_ps(dst.add(j), m, acc);
            }
        }
    }

    /// [`vertical512`] in 8-lane vectors.
    ///
    /// # Safety
    /// AVX2; as [`vertical512`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn vertical256(src: *const f32, w: usize, rows: usize, dst: *mut f32) {
        let mut j = 0;
        // SAFETY: every access is at `r * w + j .. + 8` with `j + 8 <= w`, or masked to `w`.
        unsafe {
            if rows == 3 {
                // The 3-row window of every CNN's MaxPool, unrolled.
                let (a, b, c) = (src, src.add(w), src.add(2 * w));
                while j + 8 <= w {
                    let m = _mm256_max_ps(_mm256_loadu_ps(a.add(j)), _mm256_loadu_ps(b.add(j)));
                    _mm256_storeu_ps(dst.add(j), _mm256_max_ps(m, _mm256_loadu_ps(c.add(j))));
                    j += 8;
                }
            }
            while j + 8 <= w {
                let mut acc = _mm256_loadu_ps(src.add(j));
                for r in 1..rows {
                    acc = _mm256_max_ps(acc, _mm256_loadu_ps(src.add(r * w + j)));
                }
                _mm256_storeu_ps(dst.add(j), acc);
                j += 8;
            }
            if j < w {
                // Lanes below `w - j` (sign bit set) load and store; the others read as 0.
                let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                let m = _mm256_cmpgt_epi32(_mm256_set1_epi32((w - j) as i32), lane);
                let mut acc = _mm256_maskload_ps(src.add(j), m);
                for r in 1..rows {
                    acc = _mm256_max_ps(acc, _mm256_maskload_ps(src.add(r * w + j), m));
                }
                _mm256_maskstore_ps(dst.add(j), m, acc);
            }
        }
    }

    /// `out[i] = max over kx < kw of t[i + kx]`.
    ///
    /// # Safety
    /// AVX-512F; `out.len()` rounded up to 16, plus `kw`, is at most `CAP`.
    #[target_feature(enable = "avx512f,avx2")]
    pub(super) unsafe fn stride1_512(t: &[f32; CAP], kw: usize, out: &mut [f32]) {
        let nb = out.len();
        let tp = t.as_ptr();
        let mut i = 0;
        // SAFETY: reads t[i + kx .. + 16] below CAP (contract); stores masked to `nb`.
        unsafe {
            while i < nb {
                let mut acc = _mm512_loadu_ps(tp.add(i));
                for kx in 1..kw {
                    acc = _mm512_max_ps(acc, _mm512_loadu_ps(tp.add(i + kx)));
                }
                let n = (nb - i).min(16);
                let m = ((1u32 << n) - 1) as u16;
                _mm512_mask_storeu_ps(out.as_mut_ptr().add(i), m, acc);
                i += 16;
            }
        }
    }

    /// [`stride1_512`] in 8-lane vectors.
    ///
    /// # Safety
    /// AVX2; as [`stride1_512`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn stride1_256(t: &[f32; CAP], kw: usize, out: &mut [f32]) {
        let nb = out.len();
        let tp = t.as_ptr();
        let mut i = 0;
        // SAFETY: reads t[i + kx .. + 8] below CAP (contract); stores inside `out`.
        unsafe {
            while i < nb {
                let mut acc = _mm256_loadu_ps(tp.add(i));
                for kx in 1..kw {
                    acc = _mm256_max_ps(acc, _mm256_loadu_ps(tp.add(i + kx)));
                }
                let n = (nb - i).min(8);
                if n == 8 {
                    _mm256_storeu_ps(out.as_mut_ptr().add(i), acc);
                } else {
                    let mut v = [0.0f32; 8];
                    _mm256_storeu_ps(v.as_mut_ptr(), acc);
                    out[i..i + n].copy_from_slice(&v[..n]);
                }
                i += 8;
            }
        }
    }
}
