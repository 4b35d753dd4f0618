//! The element types of [`super`]'s planes: f32, or 16-bit values (`--activations`) read by
//! converting loads and written by narrowing stores (or through f32 rows on the stack where
//! an activation runs in a second pass), the bits of `crate::gemm::stage16`'s conversions.

/// Element types of the planes ([`run`]'s `E`): f32, or 16-bit data (`--activations`) read
/// by converting loads into the ring (exact, as `crate::gemm::stage16::widen`) and written
/// through an f32 row (or the task's outputs, [`Ring::whole`]) on the stack, narrowed by
/// `crate::gemm::stage16::narrow`: the f32 kernel's bits, rounded once.
pub(in crate::gemm::depthwise) const F32: u8 = 0;
/// IEEE half planes.
pub(in crate::gemm::depthwise) const F16: u8 = 1;
/// bfloat16 planes.
pub(in crate::gemm::depthwise) const BF16: u8 = 2;

/// `p` moved by `i` elements of type `E` (f32, or 16 bits).
#[inline(always)]
pub(super) fn elem<const E: u8>(p: *const f32, i: usize) -> *const f32 {
    if E == F32 {
        p.wrapping_add(i)
    } else {
        p.cast::<u16>().wrapping_add(i).cast()
    }
}

/// [`elem`] for output pointers.
#[inline(always)]
pub(super) fn elem_mut<const E: u8>(p: *mut f32, i: usize) -> *mut f32 {
    elem::<E>(p, i).cast_mut()
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use super::{BF16, F16, F32};
    use crate::gemm::conv::Activation;
    use crate::gemm::depthwise::chan8::BLOCK;
    use crate::gemm::stage16::N16;
    use core::arch::x86_64::*;

    /// The 16-bit narrowing of element type `E`.
    #[inline(always)]
    fn n16<const E: u8>() -> N16 {
        if E == BF16 { N16::Bf16 } else { N16::F16 }
    }

    /// For 16-bit `E`: `len` f32 outputs of each channel `l < nc` at `obuf + l * stride`,
    /// the activation `post` applied, narrowed into `len` values at `dst[l]` — in one call
    /// each where the runs are contiguous (`stride == len`; `dst` consecutive when
    /// `planes`: the task's whole planes).
    ///
    /// # Safety
    /// `obuf` holds those written floats; each `dst[l]` is writable for `len` values of type
    /// `E`, overlapping nothing else (with `planes`, `dst[l] = dst[0] + l * len`).
    #[inline(always)]
    pub(in crate::gemm::depthwise) unsafe fn flush<const E: u8>(
        post: Option<Activation>,
        obuf: *mut f32,
        (stride, len): (usize, usize),
        dst: &[*mut f32; BLOCK],
        nc: usize,
        planes: bool,
    ) {
        if let Some(post) = post {
            if stride == len {
                // SAFETY: the contract: `nc * len` floats.
                let all = unsafe { std::slice::from_raw_parts_mut(obuf, nc * len) };
                crate::gemm::act::bias_act(all, 0.0, post);
            } else {
                for l in 0..nc {
                    // SAFETY: the contract.
                    let src = unsafe { std::slice::from_raw_parts_mut(obuf.add(l * stride), len) };
                    crate::gemm::act::bias_act(src, 0.0, post);
                }
            }
        }
        let (runs, len) = if planes && stride == len {
            (1, nc * len)
        } else {
            (nc, len)
        };
        for (l, &d) in dst.iter().enumerate().take(runs) {
            // SAFETY: the contract.
            let (src, d) = unsafe {
                (
                    std::slice::from_raw_parts(obuf.add(l * stride), len),
                    std::slice::from_raw_parts_mut(d.cast::<u16>(), len),
                )
            };
            crate::gemm::stage16::narrow(n16::<E>(), src, d);
        }
    }

    /// 8 values stored at `p` as type `O` (rounded to nearest even: the bits of
    /// `crate::gemm::stage16::narrow`).
    ///
    /// # Safety
    /// AVX2 and F16C; `p` writable for 8 values of type `O`.
    #[inline(always)]
    pub(in crate::gemm::depthwise) unsafe fn store8<const O: u8>(p: *mut f32, v: __m256) {
        // SAFETY: the contract.
        unsafe {
            match O {
                F32 => _mm256_storeu_ps(p, v),
                F16 => _mm_storeu_si128(p.cast(), _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v)),
                _ => {
                    // Round to nearest even on the bits; a NaN kept quiet (as `half`).
                    let bits = _mm256_castps_si256(v);
                    let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
                    let r =
                        _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
                    let quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x0040_0000));
                    let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                    let r = _mm256_srli_epi32::<16>(_mm256_blendv_epi8(r, quiet, nan));
                    let packed = _mm_packus_epi32(
                        _mm256_castsi256_si128(r),
                        _mm256_extracti128_si256::<1>(r),
                    );
                    _mm_storeu_si128(p.cast(), packed);
                }
            }
        }
    }

    /// One value stored at `p` as type `O` (`half`'s rounding, as the stage16 tails).
    ///
    /// # Safety
    /// `p` writable for one value of type `O`.
    #[inline(always)]
    pub(in crate::gemm::depthwise) unsafe fn store1<const O: u8>(p: *mut f32, v: f32) {
        // SAFETY: the contract.
        unsafe {
            match O {
                F32 => *p = v,
                F16 => *p.cast::<u16>() = half::f16::from_f32(v).to_bits(),
                _ => *p.cast::<u16>() = half::bf16::from_f32(v).to_bits(),
            }
        }
    }

    /// 8 values of type `E` at `p` widened (a bf16 NaN comes out quiet, as `half` and
    /// `crate::gemm::stage16::widen` widen it).
    ///
    /// # Safety
    /// AVX2 and F16C; `p` readable for 8 values of type `E`.
    #[inline(always)]
    pub(in crate::gemm::depthwise) unsafe fn load8<const E: u8>(p: *const f32) -> __m256 {
        // SAFETY: the contract.
        unsafe {
            match E {
                F32 => _mm256_loadu_ps(p),
                F16 => _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
                _ => {
                    let h = _mm_loadu_si128(p.cast());
                    let v = _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)));
                    let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v);
                    let quiet = _mm256_castsi256_ps(_mm256_set1_epi32(0x0040_0000));
                    _mm256_or_ps(v, _mm256_and_ps(nan, quiet))
                }
            }
        }
    }

    /// One value of type `E` at `p` widened (`half`'s conversion, as the stage16 tails).
    ///
    /// # Safety
    /// `p` readable for one value of type `E`.
    #[inline(always)]
    pub(in crate::gemm::depthwise) unsafe fn load1<const E: u8>(p: *const f32) -> f32 {
        // SAFETY: the contract.
        unsafe {
            match E {
                F32 => *p,
                F16 => half::f16::from_bits(*p.cast::<u16>()).to_f32(),
                _ => half::bf16::from_bits(*p.cast::<u16>()).to_f32(),
            }
        }
    }
}
