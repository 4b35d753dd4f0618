//! Packing A (row-major, `lda` floats per row) into the micro-kernel's `mr`-row panels, the
//! layout of the contract in `gemm/mod.rs`: panel `ip` at `ip * kc * mr`, element (row `ii`,
//! column `p`) at `p * mr + ii`, rows past `mc` zero. A transpose of each panel: done on
//! every call for an A that is not a constant (MatMul and Gemm on activations: a
//! transformer's projections), where the scalar gather cost a tenth of a GPT decoder's run.
//!
//! With the AVX-512 kernel's 12-row panels, 16 columns at a time: the panel's rows loaded as
//! 16-lane vectors (masked at the last columns), transposed 16 x 16 in registers (rows 12..15
//! zero), each column stored as 12 floats. The same values as the scalar loop (a copy).

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
