//! Packing A (row-major, `lda` floats per row) into the micro-kernel's `mr`-row panels, the
//! layout of the contract in `gemm/mod.rs`: panel `ip` at `ip * kc * mr`, element (row `ii`,
//! column `p`) at `p * mr + ii`, rows past `mc` zero. A transpose of each panel: done on
//! every call for an A that is not a constant (MatMul and Gemm on activations: a
//! transformer's projections), where the scalar gather cost a tenth of a GPT decoder's run.
//!
//! With the AVX-512 kernel's 12-row panels, 16 columns at a time: the panel's rows loaded as
//! 16-lane vectors (masked at the last columns), transposed 16 x 16 in registers (rows 12..15
//! zero), each column stored as 12 floats; with the AVX2 kernel's 6-row panels, 8 columns at
//! a time by an 8 x 8 transpose. The same values as the scalar loop (a copy).

/// Packs `mc x kc` of A (at `a`, row stride `lda`) into `mr`-row micro-panels at `dst`.
///
/// # Safety
/// `a` readable for `mc` rows of `kc` floats at stride `lda`; `dst` writable for
/// `mc.div_ceil(mr) * mr * kc` floats, not overlapping A.
pub(super) unsafe fn pack_a(
    mr: usize,
    mc: usize,
    kc: usize,
    a: *const f32,
    lda: usize,
    dst: *mut f32,
) {
    #[cfg(target_arch = "x86_64")]
    if mr == x86::MR && kc >= 16 && std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F; the contract passed on.
        return unsafe { x86::pack_a_12(mc, kc, a, lda, dst) };
    }
    #[cfg(target_arch = "x86_64")]
    if mr == x86::MR2 && kc >= 8 && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2; the contract passed on.
        return unsafe { x86::pack_a_6(mc, kc, a, lda, dst) };
    }
    // SAFETY: the contract passed on.
    unsafe { pack_a_scalar(mr, mc, kc, a, lda, dst) }
}

/// [`pack_a`] one element at a time.
///
/// # Safety
/// As [`pack_a`].
unsafe fn pack_a_scalar(mr: usize, mc: usize, kc: usize, a: *const f32, lda: usize, dst: *mut f32) {
    // Column by column of the panel: the writes are contiguous (a cache line at a time) and
    // the reads walk `mr` rows side by side, each sequentially. Twice as fast as writing one
    // row at a time at stride `mr` (compile-time packing of conv weights was a fifth of
    // ResNet-18's compile time).
    for ip in 0..mc.div_ceil(mr) {
        // SAFETY: panel ip of the destination, writable by the contract, disjoint from A.
        let panel = unsafe { std::slice::from_raw_parts_mut(dst.add(ip * kc * mr), kc * mr) };
        let rows = mr.min(mc - ip * mr);
        for (p, col) in panel.chunks_exact_mut(mr).enumerate() {
            for (ii, x) in col[..rows].iter_mut().enumerate() {
                // SAFETY: row ip * mr + ii < mc, column p < kc of A: readable by the contract.
                *x = unsafe { *a.add((ip * mr + ii) * lda + p) };
            }
            col[rows..].fill(0.0);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// The AVX-512 micro-kernel's panel rows (`kernels::x86::AVX512_MR`).
    pub(super) const MR: usize = 12;

    /// Transposes the 16 x 16 block in `r` (row `i` in `r[i]`) in place: afterwards `r[p]`
    /// holds column `p`.
    #[inline(always)]
    unsafe fn transpose16(r: &mut [__m512; 16]) {
        // SAFETY: AVX-512F (the caller's target feature); register operations only.
        unsafe {
            let mut t = [_mm512_setzero_ps(); 16];
            for q in 0..8 {
                t[2 * q] = _mm512_unpacklo_ps(r[2 * q], r[2 * q + 1]);
                t[2 * q + 1] = _mm512_unpackhi_ps(r[2 * q], r[2 * q + 1]);
            }
            for q in 0..4 {
                let (a, b, c, d) = (
                    _mm512_castps_pd(t[4 * q]),
                    _mm512_castps_pd(t[4 * q + 1]),
                    _mm512_castps_pd(t[4 * q + 2]),
                    _mm512_castps_pd(t[4 * q + 3]),
                );
                r[4 * q] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
                r[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
                r[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
                r[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
            }
            for h in 0..2 {
                let o = 8 * h;
                for q in 0..4 {
                    t[o + q] = _mm512_shuffle_f32x4::<0x88>(r[o + q], r[o + q + 4]);
                    t[o + q + 4] = _mm512_shuffle_f32x4::<0xdd>(r[o + q], r[o + q + 4]);
                }
            }
            for q in 0..8 {
                r[q] = _mm512_shuffle_f32x4::<0x88>(t[q], t[q + 8]);
                r[q + 8] = _mm512_shuffle_f32x4::<0xdd>(t[q], t[q + 8]);
            }
        }
    }

    /// The AVX2 micro-kernel's panel rows (`kernels::x86::AVX2_MR`).
    pub(super) const MR2: usize = 6;

    /// Transposes the 8 x 8 block in `r` in place (afterwards `r[p]` holds column `p`).
    #[inline(always)]
    unsafe fn transpose8(r: &mut [__m256; 8]) {
        // SAFETY: AVX (the caller's target feature); register operations only.
        unsafe {
            let mut t = [_mm256_setzero_ps(); 8];
            for q in 0..4 {
                t[2 * q] = _mm256_unpacklo_ps(r[2 * q], r[2 * q + 1]);
                t[2 * q + 1] = _mm256_unpackhi_ps(r[2 * q], r[2 * q + 1]);
            }
            let mut u = [_mm256_setzero_ps(); 8];
            for h in 0..2 {
                let o = 4 * h;
                u[o] = _mm256_shuffle_ps::<0x44>(t[o], t[o + 2]);
                u[o + 1] = _mm256_shuffle_ps::<0xee>(t[o], t[o + 2]);
                u[o + 2] = _mm256_shuffle_ps::<0x44>(t[o + 1], t[o + 3]);
                u[o + 3] = _mm256_shuffle_ps::<0xee>(t[o + 1], t[o + 3]);
            }
            for q in 0..4 {
                r[q] = _mm256_permute2f128_ps::<0x20>(u[q], u[q + 4]);
                r[q + 4] = _mm256_permute2f128_ps::<0x31>(u[q], u[q + 4]);
            }
        }
    }

    /// `super::pack_a` for `mr` = [`MR2`].
    ///
    /// # Safety
    /// As `super::pack_a`; the CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pack_a_6(mc: usize, kc: usize, a: *const f32, lda: usize, dst: *mut f32) {
        // Lanes `0..n` set (all bits), the rest clear.
        let below = |n: usize| {
            _mm256_cmpgt_epi32(
                _mm256_set1_epi32(n as i32),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            )
        };
        for ip in 0..mc.div_ceil(MR2) {
            let rows = MR2.min(mc - ip * MR2);
            // SAFETY: panel `ip` of the destination (`kc * MR2` floats), by the contract.
            let panel = unsafe { dst.add(ip * kc * MR2) };
            let mut p0 = 0;
            while p0 < kc {
                let w = 8.min(kc - p0);
                let lanes = below(w);
                let mut r = [_mm256_setzero_ps(); 8];
                for (ii, v) in r.iter_mut().enumerate().take(rows) {
                    let src = a.wrapping_add((ip * MR2 + ii) * lda + p0);
                    // SAFETY: row `ip * MR2 + ii < mc`, columns `p0..p0 + w <= kc` of A (a
                    // partial block through the mask).
                    *v = unsafe {
                        if w == 8 {
                            _mm256_loadu_ps(src)
                        } else {
                            _mm256_maskload_ps(src, lanes)
                        }
                    };
                }
                // SAFETY: AVX2 (this function's feature).
                unsafe { transpose8(&mut r) };
                for (p, v) in r.iter().enumerate().take(w) {
                    let at = panel.wrapping_add((p0 + p) * MR2);
                    // SAFETY: column `p0 + p < kc` of the panel: `MR2` floats from
                    // `(p0 + p) * MR2`, inside it; rows past `rows` are the zeros loaded. All
                    // 8 lanes are stored but for the panel's last column (the 2 past a column
                    // are the next column's, written after): masked stores (`vmaskmovps`) are
                    // microcoded on AMD's cores, a plain store is not.
                    unsafe {
                        if p0 + p + 1 < kc {
                            _mm256_storeu_ps(at, *v);
                        } else {
                            _mm_storeu_ps(at, _mm256_castps256_ps128(*v));
                            let hi = _mm256_extractf128_ps::<1>(*v);
                            _mm_store_sd(at.add(4).cast::<f64>(), _mm_castps_pd(hi));
                        }
                    }
                }
                p0 += w;
            }
        }
    }

    /// `super::pack_a` for `mr` = [`MR`].
    ///
    /// # Safety
    /// As `super::pack_a`; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn pack_a_12(mc: usize, kc: usize, a: *const f32, lda: usize, dst: *mut f32) {
        let col_mask: __mmask16 = (1 << MR) - 1;
        for ip in 0..mc.div_ceil(MR) {
            let rows = MR.min(mc - ip * MR);
            // SAFETY: panel `ip` of the destination (`kc * MR` floats), by the contract.
            let panel = unsafe { dst.add(ip * kc * MR) };
            let mut p0 = 0;
            while p0 < kc {
                let w = 16.min(kc - p0);
                let lanes: __mmask16 = if w == 16 { !0 } else { (1 << w) - 1 };
                let mut r = [_mm512_setzero_ps(); 16];
                for (ii, v) in r.iter_mut().enumerate().take(rows) {
                    // SAFETY: row `ip * MR + ii < mc`, columns `p0..p0 + w <= kc` of A (the
                    // mask keeps the load inside them).
                    *v = unsafe { _mm512_maskz_loadu_ps(lanes, a.add((ip * MR + ii) * lda + p0)) };
                }
                // SAFETY: AVX-512F (this function's feature).
                unsafe { transpose16(&mut r) };
                for (p, v) in r.iter().enumerate().take(w) {
                    // SAFETY: column `p0 + p < kc` of the panel: `MR` floats from
                    // `(p0 + p) * MR`, inside it; rows past `rows` are the zeros loaded.
                    unsafe { _mm512_mask_storeu_ps(panel.add((p0 + p) * MR), col_mask, *v) };
                }
                p0 += w;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{pack_a, pack_a_scalar};

    #[test]
    fn packed_panels_equal_the_scalar_packing() {
        let mut s = 7u32;
        for &(mr, mc, kc, lda) in &[
            (12usize, 12usize, 16usize, 16usize),
            (12, 96, 384, 400),
            (12, 13, 17, 20),
            (12, 5, 33, 33),
            (12, 64, 1, 3),
            (12, 30, 250, 256),
            (6, 20, 40, 41),
            (6, 6, 8, 8),
            (6, 7, 9, 9),
            (6, 96, 384, 390),
            (6, 4, 3, 5),
        ] {
            let a: Vec<f32> = (0..mc * lda)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 17;
                    s ^= s << 5;
                    s as f32
                })
                .collect();
            let len = mc.div_ceil(mr) * mr * kc;
            let (mut want, mut got) = (vec![f32::NAN; len], vec![f32::NAN; len]);
            // SAFETY: `a` holds `mc` rows of `lda >= kc` floats; both outputs `len` floats.
            unsafe {
                pack_a_scalar(mr, mc, kc, a.as_ptr(), lda, want.as_mut_ptr());
                pack_a(mr, mc, kc, a.as_ptr(), lda, got.as_mut_ptr());
            }
            let same = want
                .iter()
                .zip(&got)
                .all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "mr {mr} mc {mc} kc {kc} lda {lda}");
        }
    }
}
