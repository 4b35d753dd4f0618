//! The horizontal pass of a stride-2 pooling row in vectors (MaxPool 3x3/s2 of ResNet and
//! SqueezeNet): output `i` of a block reduces `t[2 i + kx dw]` over the window's columns
//! `kx`, the even lanes of two loads per tap (AVX-512: one two-source permute; AVX2: a
//! shuffle and a lane permute) instead of a gather-like scalar loop.
//!
//! The taps are combined in `kx` order, first tap copied, exactly as the portable loop does:
//! sums have the same bits; maxima the same values (no NaN reaches this pass: a plane with
//! one takes the exact path).

use super::CAP;

/// Variant tag (`plane_any`'s `V`): the portable loops.
pub(super) const PORTABLE: u8 = 0;
/// Variant tag: AVX2 (+ FMA) CPU.
pub(super) const AVX2: u8 = 1;
/// Variant tag: AVX-512F CPU.
pub(super) const AVX512: u8 = 2;

/// `out[i] = op(t[2 i + kx dw] for kx in 0..kw)` (`op`: max, else sum) for every `i < out.len()`.
///
/// # Safety
/// The CPU has the features of variant `V` (not [`PORTABLE`]); `kw >= 1`; with `nb16` =
/// `out.len()` rounded up to 16, `2 * nb16 + (kw - 1) * dw <= CAP` (whole vectors are read
/// past the block; only valid lanes are stored).
#[inline(always)]
pub(super) unsafe fn pass<const V: u8>(
    t: &[f32; CAP],
    kw: usize,
    dw: usize,
    max: bool,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded contract.
    unsafe {
        match V {
            AVX512 => x86::pass512(t, kw, dw, max, out),
            _ => x86::pass256(t, kw, dw, max, out),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (t, kw, dw, max, out);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::CAP;
    use core::arch::x86_64::*;

    /// [`super::pass`] in 16-lane vectors.
    ///
    /// # Safety
    /// AVX-512F; that of [`super::pass`].
    #[target_feature(enable = "avx512f,avx2")]
    pub(super) unsafe fn pass512(t: &[f32; CAP], kw: usize, dw: usize, max: bool, out: &mut [f32]) {
        let nb = out.len();
        let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let tp = t.as_ptr();
        let mut i = 0;
        while i < nb {
            // SAFETY: reads t[2 i + kx dw .. + 32] with 2 i + 32 <= 2 nb16 (contract).
            unsafe {
                let tap = |kx: usize| {
                    let at = tp.add(2 * i + kx * dw);
                    let lo = _mm512_loadu_ps(at);
                    let hi = _mm512_loadu_ps(at.add(16));
                    _mm512_permutex2var_ps(lo, evens, hi)
                };
                let mut acc = tap(0);
                for kx in 1..kw {
                    acc = if max {
                        _mm512_max_ps(acc, tap(kx))
                    } else {
                        _mm512_add_ps(acc, tap(kx))
                    };
                }
                let n = (nb - i).min(16);
                let m = ((1u32 << n) - 1) as u16;
                // Outputs i .. i + n of the block.
                _mm512_mask_storeu_ps(out.as_mut_ptr().add(i), m, acc);
            }
            i += 16;
        }
    }

    /// [`super::pass`] in 8-lane vectors.
    ///
    /// # Safety
    /// AVX2; that of [`super::pass`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pass256(t: &[f32; CAP], kw: usize, dw: usize, max: bool, out: &mut [f32]) {
        let nb = out.len();
        let tp = t.as_ptr();
        let mut i = 0;
        while i < nb {
            // SAFETY: reads t[2 i + kx dw .. + 16] with 2 i + 16 <= 2 nb16 (contract).
            unsafe {
                let tap = |kx: usize| {
                    let at = tp.add(2 * i + kx * dw);
                    let lo = _mm256_loadu_ps(at);
                    let hi = _mm256_loadu_ps(at.add(8));
                    // [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6], then 64-bit lanes 0, 2, 1, 3.
                    let e = _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi);
                    _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(e)))
                };
                let mut acc = tap(0);
                for kx in 1..kw {
                    acc = if max {
                        _mm256_max_ps(acc, tap(kx))
                    } else {
                        _mm256_add_ps(acc, tap(kx))
                    };
                }
                let n = (nb - i).min(8);
                if n == 8 {
                    _mm256_storeu_ps(out.as_mut_ptr().add(i), acc);
                } else {
                    let mut v = [0.0f32; 8];
                    _mm256_storeu_ps(v.as_mut_ptr(), acc);
                    out[i..i + n].copy_from_slice(&v[..n]);
                }
            }
            i += 8;
        }
    }
}
