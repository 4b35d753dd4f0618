//! Widening 16-bit values to f32 and rounding f32 to 16 bits over runs of elements, with
//! SIMD loops inlined in one function per ISA (AVX-512F: 16 lanes, its own f16 conversion
//! instructions; AVX2 + F16C: 8 lanes) and a portable path (`half`'s slice conversions,
//! scalar without F16C). The ISA follows the GEMM kernel's choice
//! (`crate::gemm::selected_kernel`, so `ARENAC_GEMM_KERNEL=avx2|scalar` exercises the
//! others). Every path gives the same bits: f16 rounds to nearest even (the hardware
//! conversion, as `half`), bf16 rounds to nearest even by integer arithmetic on the f32 bits;
//! a NaN stays a quiet NaN with its sign and top payload bits both ways (as `half`).

use super::N16;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// Which loop a conversion takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// `half`'s slice conversions (F16C when present, else scalar).
    Portable,
    /// AVX2 + F16C, 8 lanes.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512F, 16 lanes.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

/// The loop for this CPU and the selected GEMM kernel (decided once).
pub(crate) fn isa() -> Isa {
    static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
    *ISA.get_or_init(detect)
}

fn detect() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        let name = crate::gemm::selected_kernel().name;
        if name.starts_with("avx512") && is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
        if (name.starts_with("avx2") || name.starts_with("avx512"))
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("f16c")
        {
            return Isa::Avx2;
        }
    }
    Isa::Portable
}

/// Whether the register passes round bf16 by AVX512_BF16's `vcvtneps2bf16`
/// ([`x86::narrow16n`] with `NE`): the AVX-512 loops are taken ([`isa`]) and the CPU has
/// AVX512_BF16, DQ (the subnormal test), BW and VL (masked tails). Decided once.
pub(crate) fn bf16_ne() -> bool {
    static NE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *NE.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            isa() == Isa::Avx512
                && std::arch::is_x86_feature_detected!("avx512bf16")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// Writes `src` widened into `dst` (the shorter length of the two) with loop `isa`.
pub(crate) fn widen_with(isa: Isa, t: N16, src: &[u16], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    let done = match isa {
        Isa::Portable => 0,
        // SAFETY: `isa()` returns these only when the CPU has the features.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::widen_avx2(t, src, dst) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above; BW and VL detected for the masked tail.
        Isa::Avx512 => unsafe {
            if std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
            {
                x86::widen_avx512_masked(t, src, dst)
            } else {
                x86::widen_avx512(t, src, dst)
            }
        },
    };
    let (src, dst) = (&src[done..], &mut dst[done..]);
    match t {
        // SAFETY: f16 is `repr(transparent)` over u16.
        N16::F16 => unsafe { &*(src as *const [u16] as *const [f16]) }.convert_to_f32_slice(dst),
        // SAFETY: bf16 is `repr(transparent)` over u16.
        N16::Bf16 => unsafe { &*(src as *const [u16] as *const [bf16]) }.convert_to_f32_slice(dst),
    }
}

/// Writes `src` rounded into `dst` (the shorter length of the two) with loop `isa`.
pub(crate) fn narrow_with(isa: Isa, t: N16, src: &[f32], dst: &mut [u16]) {
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    let done = match isa {
        Isa::Portable => 0,
        // SAFETY: `isa()` returns these only when the CPU has the features.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::narrow_avx2(t, src, dst) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above; `bf16_ne` detected the bf16 instructions, DQ, BW and VL.
        Isa::Avx512 => unsafe {
            if t == N16::Bf16 && bf16_ne() {
                x86::narrow_bf16_ne(src, dst)
            } else {
                x86::narrow_avx512(t, src, dst)
            }
        },
    };
    let (src, dst) = (&src[done..], &mut dst[done..]);
    match t {
        // SAFETY: f16 is `repr(transparent)` over u16.
        N16::F16 => unsafe { &mut *(dst as *mut [u16] as *mut [f16]) }.convert_from_f32_slice(src),
        N16::Bf16 => {
            // SAFETY: bf16 is `repr(transparent)` over u16.
            unsafe { &mut *(dst as *mut [u16] as *mut [bf16]) }.convert_from_f32_slice(src)
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(in crate::gemm) mod x86 {
    use super::N16;
    use std::arch::x86_64::*;

    /// Widens whole vectors of `src` into `dst` (equal lengths); returns how many were done.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn widen_avx2(t: N16, src: &[u16], dst: &mut [f32]) -> usize {
        let n = src.len().min(dst.len()) / 8 * 8;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        // SAFETY: every access is inside the first `n` elements of both slices.
        unsafe {
            while i < n {
                let h = _mm_loadu_si128(s.add(i).cast());
                let v = match t {
                    N16::F16 => _mm256_cvtph_ps(h),
                    N16::Bf16 => {
                        // A NaN comes out quiet, as `half` widens it.
                        let v =
                            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)));
                        let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v);
                        _mm256_or_ps(
                            v,
                            _mm256_and_ps(nan, _mm256_castsi256_ps(_mm256_set1_epi32(0x0040_0000))),
                        )
                    }
                };
                _mm256_storeu_ps(d.add(i), v);
                i += 8;
            }
        }
        n
    }

    /// Narrows whole vectors of `src` into `dst`; returns how many were done.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn narrow_avx2(t: N16, src: &[f32], dst: &mut [u16]) -> usize {
        let n = src.len().min(dst.len()) / 8 * 8;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        // SAFETY: every access is inside the first `n` elements of both slices.
        unsafe {
            while i < n {
                let x = _mm256_loadu_ps(s.add(i));
                let h = match t {
                    N16::F16 => _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x),
                    N16::Bf16 => {
                        let bits = _mm256_castps_si256(x);
                        let lsb =
                            _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
                        let r = _mm256_add_epi32(
                            bits,
                            _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb),
                        );
                        let quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x0040_0000));
                        let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
                        let r = _mm256_blendv_epi8(r, quiet, nan);
                        let r = _mm256_srli_epi32::<16>(r);
                        // Pack to 16 bits: [r0..r3 r0..r3 | r4..r7 r4..r7], then lanes 0 and 2.
                        let p = _mm256_packus_epi32(r, r);
                        _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b1000>(p))
                    }
                };
                _mm_storeu_si128(d.add(i).cast(), h);
                i += 8;
            }
        }
        n
    }

    /// As [`widen_avx2`], 16 lanes, and the tail (all done).
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn widen_avx512(t: N16, src: &[u16], dst: &mut [f32]) -> usize {
        let n = src.len().min(dst.len()) / 16 * 16;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        // SAFETY: every access is inside the first `n` elements of both slices.
        unsafe {
            while i < n {
                _mm512_storeu_ps(d.add(i), load16(t, s.add(i)));
                i += 16;
            }
        }
        // The tail through one vector on the stack (the same lane-wise conversion): a
        // per-call fixed cost far below `half`'s scalar loop on short runs (band rows, small
        // planes).
        let len = src.len().min(dst.len());
        if len > n {
            let r = len - n;
            let mut h = [0u16; 16];
            let mut f = [0f32; 16];
            h[..r].copy_from_slice(&src[n..len]);
            // SAFETY: `h` and `f` hold 16 values each.
            unsafe { _mm512_storeu_ps(f.as_mut_ptr(), load16(t, h.as_ptr())) };
            dst[n..len].copy_from_slice(&f[..r]);
        }
        len
    }

    /// As [`widen_avx512`], the last partial vector through a masked load and store instead
    /// of a copy on the stack (the same bits).
    ///
    /// # Safety
    /// The CPU has AVX-512F, BW and VL.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn widen_avx512_masked(t: N16, src: &[u16], dst: &mut [f32]) -> usize {
        let len = src.len().min(dst.len());
        let n = len / 16 * 16;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        // SAFETY: every access is inside the first `len` elements of both slices (the last
        // vector's lanes past `len` masked off).
        unsafe {
            while i < n {
                _mm512_storeu_ps(d.add(i), load16(t, s.add(i)));
                i += 16;
            }
            if len > n {
                let m: __mmask16 = (1u16 << (len - n)) - 1;
                let h = _mm256_maskz_loadu_epi16(m, s.add(n).cast());
                _mm512_mask_storeu_ps(d.add(n), m, widen16(t, h));
            }
        }
        len
    }

    /// 16 values at `p` widened (a NaN comes out quiet, as `half` widens it).
    ///
    /// # Safety
    /// The CPU has AVX-512F; `p` readable for 16 values.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(in crate::gemm::stage16) unsafe fn load16(t: N16, p: *const u16) -> __m512 {
        // SAFETY: by the contract.
        widen16(t, unsafe { _mm256_loadu_si256(p.cast()) })
    }

    /// 16 values as bits widened. bf16: the bits shifted up, then multiplied by 1.0, which
    /// leaves every value as it is (subnormals too: arenac never sets MXCSR's DAZ) and
    /// quiets a signaling NaN keeping its sign and payload, as `half` widens it — one
    /// operation where a compare and a masked OR took two (a widening FMA pass on Zen 4:
    /// 0.123 ns per value against 0.158; f16's conversion 0.104). The multiply carries
    /// embedded rounding so the compiler cannot fold it away as `x * 1.0 = x`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(in crate::gemm) fn widen16(t: N16, h: __m256i) -> __m512 {
        match t {
            N16::F16 => _mm512_cvtph_ps(h),
            N16::Bf16 => {
                let v = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)));
                _mm512_mul_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                    v,
                    _mm512_set1_ps(1.0),
                )
            }
        }
    }

    /// As [`widen16`], a bf16 signaling NaN left signaling (the bits shifted up, nothing
    /// more): only for sums whose order already differs from the f32 kernel's
    /// (GlobalAveragePool's means, `super::pool::gap`), where a NaN among the values gives a
    /// NaN either way. Not for passes promised bit for bit: where a signaling NaN meets
    /// another NaN, the NaN an operation returns may depend on their kinds, so the payload
    /// could differ from the f32 kernel's on the widened (quieted) values. A widening FMA
    /// pass on Zen 4: 0.102 ns per value against [`widen16`]'s 0.123 (f16 0.104).
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(in crate::gemm) fn widen16_arith(t: N16, h: __m256i) -> __m512 {
        match t {
            N16::F16 => _mm512_cvtph_ps(h),
            N16::Bf16 => _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h))),
        }
    }

    /// 16 values at `p` widened by [`widen16_arith`] (its uses only).
    ///
    /// # Safety
    /// The CPU has AVX-512F; `p` readable for 16 values.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(in crate::gemm) unsafe fn load16_arith(t: N16, p: *const u16) -> __m512 {
        // SAFETY: by the contract.
        widen16_arith(t, unsafe { _mm256_loadu_si256(p.cast()) })
    }

    /// `x` rounded to nearest even, as 16 values' bits.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(in crate::gemm) fn narrow16(t: N16, x: __m512) -> __m256i {
        match t {
            N16::F16 => _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x),
            N16::Bf16 => {
                let bits = _mm512_castps_si512(x);
                let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
                let r = _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
                let quiet = _mm512_or_si512(bits, _mm512_set1_epi32(0x0040_0000));
                let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
                let r = _mm512_mask_blend_epi32(nan, r, quiet);
                _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(r))
            }
        }
    }

    /// As [`narrow16`] for bf16, by AVX512_BF16's `vcvtneps2bf16` (round to nearest even; a
    /// NaN quiet with its sign and top payload bits, as `half`), except where a lane holds a
    /// subnormal f32, which that instruction flushes to zero and `half` rounds: such a
    /// vector by [`narrow16`]'s integer rounding. The same bits, in about two thirds of the
    /// time (a widen-scale-narrow pass on Zen 4: 0.096 ns per value against 0.141).
    #[target_feature(enable = "avx512f,avx512dq,avx512bf16")]
    #[inline]
    pub(in crate::gemm) fn narrow16_bf(x: __m512) -> __m256i {
        // 0x20: the denormal class.
        if _mm512_fpclass_ps_mask::<0x20>(x) == 0 {
            // SAFETY: `__m256bh` and `__m256i` are both 256 bits of plain data.
            unsafe { std::mem::transmute::<__m256bh, __m256i>(_mm512_cvtneps_pbh(x)) }
        } else {
            narrow16(N16::Bf16, x)
        }
    }

    /// [`narrow16`], or with `NE` and bf16 [`narrow16_bf`] (the same bits). Generic so a
    /// register pass is compiled twice, once with the AVX512_BF16 features enabled.
    ///
    /// # Safety
    /// The CPU has AVX-512F; with `NE` also AVX512_BF16 and DQ ([`super::bf16_ne`]), and the
    /// calling function is compiled with them (else each vector is a call).
    #[inline(always)]
    pub(in crate::gemm) unsafe fn narrow16n<const NE: bool>(t: N16, x: __m512) -> __m256i {
        // SAFETY: by the contract.
        unsafe {
            if NE && t == N16::Bf16 {
                narrow16_bf(x)
            } else {
                narrow16(t, x)
            }
        }
    }

    /// [`narrow16n`] stored as 16 values at `p`.
    ///
    /// # Safety
    /// As [`narrow16n`]; `p` writable for 16 values.
    #[inline(always)]
    pub(in crate::gemm) unsafe fn store16n<const NE: bool>(t: N16, x: __m512, p: *mut u16) {
        // SAFETY: by the contract.
        unsafe { _mm256_storeu_si256(p.cast(), narrow16n::<NE>(t, x)) };
    }

    /// `x` rounded to nearest even and stored as 16 values at `p`.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `p` writable for 16 values.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(in crate::gemm::stage16) unsafe fn store16(t: N16, x: __m512, p: *mut u16) {
        // SAFETY: by the contract.
        unsafe { _mm256_storeu_si256(p.cast(), narrow16(t, x)) };
    }

    /// As [`narrow_avx2`], 16 lanes, and the tail (all done).
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn narrow_avx512(t: N16, src: &[f32], dst: &mut [u16]) -> usize {
        let n = src.len().min(dst.len()) / 16 * 16;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        // SAFETY: every access is inside the first `n` elements of both slices.
        unsafe {
            while i < n {
                store16(t, _mm512_loadu_ps(s.add(i)), d.add(i));
                i += 16;
            }
        }
        // The tail through one vector on the stack, as [`widen_avx512`]'s.
        let len = src.len().min(dst.len());
        if len > n {
            let r = len - n;
            let mut f = [0f32; 16];
            let mut h = [0u16; 16];
            f[..r].copy_from_slice(&src[n..len]);
            // SAFETY: `f` and `h` hold 16 values each.
            unsafe { store16(t, _mm512_loadu_ps(f.as_ptr()), h.as_mut_ptr()) };
            dst[n..len].copy_from_slice(&h[..r]);
        }
        len
    }

    /// Narrows all of `src` to bf16 by [`narrow16_bf`] (`vcvtneps2bf16`; a vector holding a
    /// subnormal by the integer rounding), the last partial vector through a masked load
    /// and store; returns how many were done (all; the bits of [`narrow_avx512`]).
    ///
    /// # Safety
    /// The CPU has AVX-512F, BW, VL, DQ and AVX512_BF16.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
    pub(super) unsafe fn narrow_bf16_ne(src: &[f32], dst: &mut [u16]) -> usize {
        let len = src.len().min(dst.len());
        let n = len / 16 * 16;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        // SAFETY: every access is inside the first `len` elements of both slices (the last
        // vector's lanes past `len` masked off).
        unsafe {
            // Pairs of vectors by `vcvtne2ps2bf16` where neither holds a subnormal (0x20:
            // the denormal class): in L1 0.037 ns per value against 0.045 one at a time.
            while i + 32 <= n {
                let (a, b) = (_mm512_loadu_ps(s.add(i)), _mm512_loadu_ps(s.add(i + 16)));
                if _mm512_fpclass_ps_mask::<0x20>(a) | _mm512_fpclass_ps_mask::<0x20>(b) == 0 {
                    let h = std::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(b, a));
                    _mm512_storeu_si512(d.add(i).cast(), h);
                } else {
                    _mm256_storeu_si256(d.add(i).cast(), narrow16_bf(a));
                    _mm256_storeu_si256(d.add(i + 16).cast(), narrow16_bf(b));
                }
                i += 32;
            }
            while i < n {
                _mm256_storeu_si256(d.add(i).cast(), narrow16_bf(_mm512_loadu_ps(s.add(i))));
                i += 16;
            }
            if len > n {
                let m: __mmask16 = (1u16 << (len - n)) - 1;
                let x = _mm512_maskz_loadu_ps(m, s.add(n));
                _mm256_mask_storeu_epi16(d.add(n).cast(), m, narrow16_bf(x));
            }
        }
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every f16/bf16 bit pattern widened, and f32 values around every rounding case
    /// (halfway points, subnormals, overflow, infinities, NaNs) narrowed: each ISA's loop
    /// gives `half`'s bits, over lengths with and without a tail.
    #[test]
    fn every_isa_matches_half_bit_for_bit() {
        let mut isas = vec![Isa::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c") {
                isas.push(Isa::Avx2);
            }
            if is_x86_feature_detected!("avx512f") {
                isas.push(Isa::Avx512);
            }
        }
        let all16: Vec<u16> = (0..=u16::MAX).collect();
        let mut f32s: Vec<f32> = Vec::new();
        for b in (0..=u16::MAX).step_by(7) {
            let hi = u32::from(b) << 16;
            for low in [0u32, 1, 0x7fff, 0x8000, 0x8001, 0xffff] {
                f32s.push(f32::from_bits(hi | low));
            }
        }
        for x in [
            65504.0f32,
            65520.0,
            65519.99,
            6.0e-8,
            2.9802322e-8,
            1.0e-10,
            -0.0,
        ] {
            f32s.push(x);
            f32s.push(-x);
        }
        for t in [N16::F16, N16::Bf16] {
            let want_w: Vec<f32> = all16
                .iter()
                .map(|&b| match t {
                    N16::F16 => f16::from_bits(b).to_f32(),
                    N16::Bf16 => bf16::from_bits(b).to_f32(),
                })
                .collect();
            let want_n: Vec<u16> = f32s
                .iter()
                .map(|&x| match t {
                    N16::F16 => f16::from_f32(x).to_bits(),
                    N16::Bf16 => bf16::from_f32(x).to_bits(),
                })
                .collect();
            for &isa in &isas {
                for len in [all16.len(), 37, 16, 15, 8, 1, 0] {
                    let mut w = vec![0f32; len];
                    widen_with(isa, t, &all16[..len], &mut w);
                    for (i, (a, b)) in w.iter().zip(&want_w).enumerate() {
                        assert_eq!(a.to_bits(), b.to_bits(), "{isa:?} {t:?} widen {i}");
                    }
                }
                for len in [f32s.len(), 37, 16, 15, 8, 1] {
                    let mut h = vec![0u16; len];
                    narrow_with(isa, t, &f32s[..len], &mut h);
                    for (i, (a, b)) in h.iter().zip(&want_n).enumerate() {
                        assert_eq!(a, b, "{isa:?} {t:?} narrow {:e} ({i})", f32s[i]);
                    }
                    // The AVX-512F loops that `narrow_with` / `widen_with` pass over where
                    // the CPU has AVX512_BF16 or BW (integer rounding, tails on the stack).
                    #[cfg(target_arch = "x86_64")]
                    if isa == Isa::Avx512 {
                        let mut h = vec![0u16; len];
                        // SAFETY: the CPU has AVX-512F (`isa`).
                        unsafe { x86::narrow_avx512(t, &f32s[..len], &mut h) };
                        assert_eq!(h[..], want_n[..len], "{t:?} narrow_avx512 {len}");
                        let l = len.min(all16.len());
                        let mut w = vec![0f32; l];
                        // SAFETY: as above.
                        unsafe { x86::widen_avx512(t, &all16[..l], &mut w) };
                        let same = w
                            .iter()
                            .zip(&want_w)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{t:?} widen_avx512 {l}");
                    }
                }
            }
        }
    }
}
