//! The x86-64 widening loops of the reduced weight types: AVX2 + F16C (8 lanes) and AVX-512
//! (16 lanes), and int8 widened and scaled in one pass.

use super::{NR, WeightType, load1};
use std::arch::x86_64::*;

/// AVX2 + F16C widening, 8 lanes; see [`super::Widener::widen`].
///
/// # Safety
/// That of [`super::Widener::widen`], on a CPU with AVX2 and F16C.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn widen_avx2(
    t: WeightType,
    src: *const u8,
    n: usize,
    dst: *mut f32,
    scales: Option<*const f32>,
) {
    let body = n / 8 * 8;
    let mut i = 0;
    // SAFETY: every access is below n elements (the contract); unaligned loads/stores.
    unsafe {
        while i < body {
            let v = match t {
                WeightType::F32 => _mm256_loadu_ps(src.cast::<f32>().add(i)),
                WeightType::F16 => {
                    _mm256_cvtph_ps(_mm_loadu_si128(src.add(i * 2).cast::<__m128i>()))
                }
                WeightType::Bf16 => _mm256_castsi256_ps(_mm256_slli_epi32(
                    _mm256_cvtepu16_epi32(_mm_loadu_si128(src.add(i * 2).cast::<__m128i>())),
                    16,
                )),
                WeightType::I8 => _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
                    src.add(i).cast::<__m128i>(),
                ))),
            };
            let v = match scales {
                Some(s) => _mm256_mul_ps(v, _mm256_loadu_ps(s.add(i % NR))),
                None => v,
            };
            _mm256_storeu_ps(dst.add(i), v);
            i += 8;
        }
        for i in body..n {
            let x = load1(t, src, i);
            *dst.add(i) = scales.map_or(x, |s| x * *s.add(i % NR));
        }
    }
}

/// AVX-512F widening, 16 lanes; see [`super::Widener::widen`].
///
/// # Safety
/// That of [`super::Widener::widen`], on a CPU with AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn widen_avx512(
    t: WeightType,
    src: *const u8,
    n: usize,
    dst: *mut f32,
    scales: Option<*const f32>,
) {
    let body = n / 16 * 16;
    let mut i = 0;
    // SAFETY: every access is below n elements (the contract); unaligned loads/stores;
    // with scales, i is a multiple of 16 = NR so the scale vector is scales[0..16].
    unsafe {
        let sv = scales.map(|s| _mm512_loadu_ps(s));
        while i < body {
            let v = match t {
                WeightType::F32 => _mm512_loadu_ps(src.cast::<f32>().add(i)),
                WeightType::F16 => {
                    _mm512_cvtph_ps(_mm256_loadu_si256(src.add(i * 2).cast::<__m256i>()))
                }
                WeightType::Bf16 => _mm512_castsi512_ps(_mm512_slli_epi32(
                    _mm512_cvtepu16_epi32(_mm256_loadu_si256(src.add(i * 2).cast::<__m256i>())),
                    16,
                )),
                WeightType::I8 => _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                    src.add(i).cast::<__m128i>(),
                ))),
            };
            let v = match sv {
                Some(s) => _mm512_mul_ps(v, s),
                None => v,
            };
            _mm512_storeu_ps(dst.add(i), v);
            i += 16;
        }
        for i in body..n {
            let x = load1(t, src, i);
            *dst.add(i) = scales.map_or(x, |s| x * *s.add(i % NR));
        }
    }
}

/// Int8 widening times per-channel scales in one pass, 16 lanes: element `i` of `n`
/// becomes `q as f32 * scales[i % period]` (`period` 1, or a multiple of 16 dividing
/// `n`): the bits of [`widen_avx512`] followed by a multiply by the scale.
///
/// # Safety
/// `src` readable for `n` bytes, `dst` writable for `n` floats, `scales` for `period`
/// floats; AVX-512F.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn widen_i8_scaled_avx512(
    src: *const u8,
    n: usize,
    dst: *mut f32,
    scales: *const f32,
    period: usize,
) {
    // SAFETY: the contract; every access below n elements (period elements of scales).
    unsafe {
        macro_rules! load {
            ($i:expr) => {
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                    src.add($i).cast::<__m128i>(),
                )))
            };
        }
        if period == 1 {
            let sv = _mm512_set1_ps(*scales);
            let body = n / 16 * 16;
            let mut i = 0;
            while i < body {
                _mm512_storeu_ps(dst.add(i), _mm512_mul_ps(load!(i), sv));
                i += 16;
            }
            for i in body..n {
                *dst.add(i) = load1(WeightType::I8, src, i) * *scales;
            }
            return;
        }
        let mut i = 0;
        while i + period <= n {
            let mut j = 0;
            while j < period {
                let sv = _mm512_loadu_ps(scales.add(j));
                _mm512_storeu_ps(dst.add(i + j), _mm512_mul_ps(load!(i + j), sv));
                j += 16;
            }
            i += period;
        }
    }
}
