//! GlobalAveragePool means of 16-bit planes in registers (AVX-512): each plane summed
//! straight from its 16-bit values into four 16-lane f32 accumulators (its last partial
//! vector through a masked load), sixteen planes' sums reduced together by a shuffle tree
//! (lane `j` of the result: plane `j`'s total), divided by the plane's length — no widened
//! copy and no per-plane horizontal sum in f64, which cost `super::super::gap`'s staged form
//! about 3x the f32 kernel's time on EfficientNet-B0's 7x7 and 14x14 SE planes.
//!
//! The order of summation differs from the staged form's (lane `l` of accumulator `q` sums
//! the plane's elements `64k + 16q + l`, then the four accumulators and the sixteen lanes in
//! a tree, in f32): an f32 sum of at most `len / 64 + 6` terms per partial, as accurate as
//! the f32 kernel's; the test checks it against an f64 reference. bf16 values are widened
//! without quieting a signaling NaN (`widen16_arith`): a plane holding a NaN has a NaN mean
//! either way.

/// Whether [`means`] runs here: the AVX-512 conversions ([`super::super::convert::isa`]) and
/// BW/VL for the masked 16-bit loads.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::super::convert::isa() == super::super::convert::Isa::Avx512
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `means[p]` = the mean of plane `p` of `x` (`len` values each), for the planes both hold
/// (`min(x.len() / len, means.len())`); returns `false` (nothing written) where
/// [`available`] is false.
pub fn means(t: super::N16, len: usize, x: &[u16], means: &mut [f32]) -> bool {
    if !available() || len == 0 {
        return false;
    }
    let planes = (x.len() / len).min(means.len());
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has AVX-512F, BW and VL (`available`); `x` holds `planes * len`
    // values and `means` `planes` floats.
    unsafe {
        x86::means_avx512(t, planes, len, x.as_ptr(), means.as_mut_ptr())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (t, planes);
    true
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::super::N16;
    use super::super::super::convert::x86::{load16_arith as load16, widen16_arith as widen16};
    use std::arch::x86_64::*;

    /// The sum of one plane of `len` values at `p`, as 16 lane partials.
    ///
    /// # Safety
    /// The CPU has AVX-512F, BW and VL; `p` readable for `len` values.
    #[inline(always)]
    unsafe fn plane(t: N16, p: *const u16, len: usize) -> __m512 {
        // SAFETY: every load lies inside the plane (the last one masked).
        unsafe {
            let mut a = [_mm512_setzero_ps(); 4];
            let mut i = 0;
            while i + 64 <= len {
                for (q, a) in a.iter_mut().enumerate() {
                    *a = _mm512_add_ps(*a, load16(t, p.add(i + 16 * q)));
                }
                i += 64;
            }
            // Fewer than 64 left: up to three whole vectors, then the masked rest.
            let mut q = 0;
            while i + 16 <= len {
                a[q] = _mm512_add_ps(a[q], load16(t, p.add(i)));
                q += 1;
                i += 16;
            }
            if i < len {
                let m: __mmask16 = (1u16 << (len - i)) - 1;
                let h = _mm256_maskz_loadu_epi16(m, p.add(i).cast());
                // The lanes past the plane read as zero bits: +0.0 widened.
                a[3] = _mm512_add_ps(a[3], widen16(t, h));
            }
            _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]))
        }
    }

    /// The four 128-bit lanes of `a` and of `b` added in pairs: `[a0+a1, a2+a3, b0+b1, b2+b3]`.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn half(a: __m512, b: __m512) -> __m512 {
        // SAFETY: by the contract.
        unsafe {
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0b10_00_10_00>(a, b),
                _mm512_shuffle_f32x4::<0b11_01_11_01>(a, b),
            )
        }
    }

    /// One vector whose lane `j` is the sum of `v[j]`'s lanes.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn totals(v: &[__m512; 16]) -> __m512 {
        // SAFETY: by the contract.
        unsafe {
            // Pairs: per 128-bit lane [a0+a2, b0+b2, a1+a3, b1+b3].
            let mut s1 = [_mm512_setzero_ps(); 8];
            for (k, s) in s1.iter_mut().enumerate() {
                let (a, b) = (v[2 * k], v[2 * k + 1]);
                *s = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
            }
            // Quads: per 128-bit lane one partial of each of four planes, in order.
            let mut s2 = [_mm512_setzero_ps(); 4];
            for (k, s) in s2.iter_mut().enumerate() {
                let (a, b) = (s1[2 * k], s1[2 * k + 1]);
                *s = _mm512_add_ps(
                    _mm512_shuffle_ps::<0b01_00_01_00>(a, b),
                    _mm512_shuffle_ps::<0b11_10_11_10>(a, b),
                );
            }
            // The four 128-bit lanes of each quad added: two steps across lanes.
            half(half(s2[0], s2[1]), half(s2[2], s2[3]))
        }
    }

    /// [`super::means`] of `planes` planes.
    ///
    /// # Safety
    /// The CPU has AVX-512F, BW and VL; `x` readable for `planes * len` values, `m`
    /// writable for `planes` floats.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn means_avx512(
        t: N16,
        planes: usize,
        len: usize,
        x: *const u16,
        m: *mut f32,
    ) {
        let div = _mm512_set1_ps(len as f32);
        let mut p0 = 0;
        while p0 < planes {
            let np = (planes - p0).min(16);
            let mut v = [_mm512_setzero_ps(); 16];
            for (j, v) in v.iter_mut().enumerate().take(np) {
                // SAFETY: plane `p0 + j` lies inside `x`.
                *v = unsafe { plane(t, x.add((p0 + j) * len), len) };
            }
            // SAFETY: AVX-512F; means `p0..p0 + np` lie inside `m` (the rest masked off).
            unsafe {
                let r = _mm512_div_ps(totals(&v), div);
                _mm512_mask_storeu_ps(m.add(p0), ((1u32 << np) - 1) as __mmask16, r);
            }
            p0 += np;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::{N16, narrow, widen};
    use super::{available, means};

    /// The register means against an f64 reference, within an f32 sum's error bound
    /// (`terms * eps * sum |x|` over the length, `terms` the longest chain of adds), over
    /// plane counts around the 16-plane groups and lengths around the vector, 64-value and
    /// tail boundaries, f16 and bf16; and the whole GlobalAveragePool against the reference
    /// rounded once.
    #[test]
    fn register_means_against_the_f64_reference() {
        if !available() {
            eprintln!("no AVX-512 BW/VL here: the register means do not run");
            return;
        }
        let mut s = 777u32;
        for t in [N16::F16, N16::Bf16] {
            for len in [1usize, 7, 15, 16, 17, 49, 63, 64, 65, 196, 784, 3136] {
                for planes in [1usize, 5, 16, 17, 40] {
                    let f: Vec<f32> = (0..planes * len)
                        .map(|i| {
                            s ^= s << 13;
                            s ^= s >> 17;
                            s ^= s << 5;
                            let v = (s % 20001) as f32 / 1000.0 - 8.0;
                            if i % 13 == 0 { v * 50.0 } else { v }
                        })
                        .collect();
                    let mut x = vec![0u16; f.len()];
                    narrow(t, &f, &mut x);
                    let mut w = vec![0f32; f.len()];
                    widen(t, &x, &mut w);
                    let mut m = vec![f32::NAN; planes + 1];
                    assert!(means(t, len, &x, &mut m[..planes]));
                    assert!(m[planes].is_nan(), "wrote past the planes");
                    for p in 0..planes {
                        let pl = &w[p * len..(p + 1) * len];
                        let sum: f64 = pl.iter().map(|&v| f64::from(v)).sum();
                        let abs: f64 = pl.iter().map(|&v| f64::from(v).abs()).sum();
                        let terms = (len / 64 + 8) as f64;
                        let bound = terms * f64::from(f32::EPSILON) * abs / len as f64
                            + f64::from(f32::EPSILON) * (sum / len as f64).abs();
                        let err = (f64::from(m[p]) - sum / len as f64).abs();
                        assert!(
                            err <= bound,
                            "{t:?} {planes}x{len} plane {p}: {err} > {bound}"
                        );
                    }
                }
            }
        }
    }
}
