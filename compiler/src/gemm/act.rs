//! The activations the dense kernels apply in their epilogue ([`Activation`]), and
//! [`bias_act`]: bias plus activation over a row of results still in cache.
//!
//! The transcendental ones (Sigmoid, SiLU `x * sigmoid(x)`, Tanh) use one exp: range
//! reduction `x = n ln2 + r`, the Cephes `expf` polynomial in `r` (the JIT's `exp`, about
//! 1 ulp), times `2^n` (AVX-512: `vscalefps`; AVX2: two exponent-bit halves). [`bias_act`]
//! has AVX-512F and AVX2+FMA variants chosen with the GEMM kernel (`ARENAC_GEMM_KERNEL`
//! selects them too) and a portable scalar one. A row's tail is computed by the same vector
//! code through a masked (AVX-512) or stack-copied (AVX2) vector, so every element gets the
//! same instructions wherever the row starts and ends: results do not depend on how a
//! product was cut into blocks, hence not on the thread count.

/// An activation applied in a convolution's epilogue (after the bias).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// None.
    None,
    /// `x > 0 ? x : 0`.
    Relu,
    /// `min(max(x, lo), hi)` in the elementwise kernels' order (NaN becomes `lo`).
    Clip(f32, f32),
    /// `x < 0 ? alpha * x : x`.
    LeakyRelu(f32),
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// `x * sigmoid(x)` (SiLU, Swish with beta 1: `Sigmoid` then `Mul(x, ·)`).
    Silu,
    /// `tanh(x)`.
    Tanh,
    /// `max(0, min(1, alpha * x + beta))`.
    HardSigmoid(f32, f32),
    /// `x * max(0, min(1, x / 6 + 1/2))`.
    HardSwish,
}

impl Activation {
    /// The `(act, act_a, act_b)` fields of [`super::conv::ConvParams`].
    pub fn encode(self) -> [u64; 3] {
        let b = |x: f32| u64::from(x.to_bits());
        match self {
            Activation::None => [0, 0, 0],
            Activation::Relu => [1, 0, 0],
            Activation::Clip(lo, hi) => [2, b(lo), b(hi)],
            Activation::LeakyRelu(a) => [3, b(a), 0],
            Activation::Sigmoid => [4, 0, 0],
            Activation::Silu => [5, 0, 0],
            Activation::Tanh => [6, 0, 0],
            Activation::HardSigmoid(a, c) => [7, b(a), b(c)],
            Activation::HardSwish => [8, 0, 0],
        }
    }

    /// Reads the fields written by [`Activation::encode`] (unknown kinds are `None`).
    pub fn decode(kind: u64, a: u64, b: u64) -> Self {
        let f = |x: u64| f32::from_bits(x as u32);
        match kind {
            1 => Activation::Relu,
            2 => Activation::Clip(f(a), f(b)),
            3 => Activation::LeakyRelu(f(a)),
            4 => Activation::Sigmoid,
            5 => Activation::Silu,
            6 => Activation::Tanh,
            7 => Activation::HardSigmoid(f(a), f(b)),
            8 => Activation::HardSwish,
            _ => Activation::None,
        }
    }

    /// Whether the activation is a compare or two per value (applied in registers by the
    /// direct kernels); the others go through [`bias_act`].
    pub fn is_cheap(self) -> bool {
        matches!(
            self,
            Activation::None | Activation::Relu | Activation::Clip(..) | Activation::LeakyRelu(_)
        )
    }

    /// The activation of one value, for the cheap ones ([`Activation::is_cheap`]; the
    /// others are computed by the portable [`bias_act`]'s formulas).
    #[inline(always)]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::None => x,
            Activation::Relu => {
                if x > 0.0 {
                    x
                } else {
                    0.0
                }
            }
            Activation::Clip(lo, hi) => {
                let t = if x > lo { x } else { lo };
                if t < hi { t } else { hi }
            }
            Activation::LeakyRelu(a) => {
                if x < 0.0 {
                    x * a
                } else {
                    x
                }
            }
            a => scalar(a, x),
        }
    }
}

/// Cephes `expf` polynomial coefficients (highest degree first), as the JIT's `exp`.
const EXP_P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    0.5,
];
/// `ln 2` split in two for an exact range reduction.
const LN2_HI: f32 = -0.693_359_4;
const LN2_LO: f32 = 2.121_944_4e-4;
/// Cephes `tanhf` odd polynomial below |x| = 0.625 (highest degree first).
const TANH_P: [f32; 5] = [
    -5.704_988_7e-3,
    2.063_909e-2,
    -5.373_971_6e-2,
    1.333_144_2e-1,
    -3.333_328e-1,
];
/// Largest argument whose exp is finite.
const EXP_HI: f32 = 88.722_84;
/// Smallest argument the exps reduce (AVX2 and portable: the result is 0 below -87.34).
const EXP_LO: f32 = -87.3;

/// `t` clamped to `[0, 1]`, NaN kept (as the vector `min(1, t)` then `max(0, .)`).
fn unit(t: f32) -> f32 {
    t.clamp(0.0, 1.0)
}

/// The portable formulas of the transcendental activations (and the cheap ones).
fn scalar(act: Activation, x: f32) -> f32 {
    let exp = |x: f32| {
        if x.is_nan() {
            return x;
        }
        if x > EXP_HI {
            return f32::INFINITY;
        }
        if x < -87.336_55 {
            return 0.0;
        }
        let xc = x.max(EXP_LO);
        let n = (xc * std::f32::consts::LOG2_E).round_ties_even();
        let r = n.mul_add(LN2_LO, n.mul_add(LN2_HI, xc));
        let p = EXP_P[1..].iter().fold(EXP_P[0], |p, &k| p.mul_add(r, k));
        let p = p.mul_add(r * r, r + 1.0);
        let ni = n as i32;
        let (n1, n2) = (ni >> 1, ni - (ni >> 1));
        let s = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
        p * s(n1) * s(n2)
    };
    match act {
        Activation::Sigmoid => 1.0 / (1.0 + exp(-x)),
        Activation::Silu => x / (1.0 + exp(-x)),
        Activation::Tanh => {
            let ax = x.abs();
            if ax < 0.625 {
                let z = x * x;
                let p = TANH_P[1..].iter().fold(TANH_P[0], |p, &k| p.mul_add(z, k));
                (p * z).mul_add(x, x)
            } else {
                let t = 1.0 - 2.0 / (exp(2.0 * ax) + 1.0);
                if x < 0.0 { -t } else { t }
            }
        }
        Activation::HardSigmoid(a, b) => unit(a.mul_add(x, b)),
        Activation::HardSwish => x * unit((1.0f32 / 6.0).mul_add(x, 0.5)),
        a => a.apply(x),
    }
}

/// `row[i] = act(row[i] + bias)` for every element, vectorized for this CPU.
pub fn bias_act(row: &mut [f32], bias: f32, act: Activation) {
    #[cfg(target_arch = "x86_64")]
    {
        match variant() {
            // SAFETY: the variant was chosen where the CPU has its features.
            Variant::Avx512 => return unsafe { x86::bias_act_avx512(row, bias, act) },
            // SAFETY: as above.
            Variant::Avx2 => return unsafe { x86::bias_act_avx2(row, bias, act) },
            Variant::Portable => {}
        }
    }
    bias_act_portable(row, bias, act);
}

fn bias_act_portable(row: &mut [f32], bias: f32, act: Activation) {
    match act {
        Activation::None => row.iter_mut().for_each(|v| *v += bias),
        a => row.iter_mut().for_each(|v| *v = scalar(a, *v + bias)),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx512,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx2,
    Portable,
}

/// The variant for the GEMM kernel selected on this CPU (same override, same features).
fn variant() -> Variant {
    static V: std::sync::OnceLock<Variant> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let name = super::selected_kernel().name;
            let fma = is_x86_feature_detected!("fma") && is_x86_feature_detected!("avx2");
            if name.starts_with("avx512") && fma && is_x86_feature_detected!("avx512f") {
                return Variant::Avx512;
            }
            if name.starts_with("avx") && fma {
                return Variant::Avx2;
            }
        }
        Variant::Portable
    })
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use super::{Activation, EXP_HI, EXP_LO, EXP_P, LN2_HI, LN2_LO, TANH_P};
    use core::arch::x86_64::*;

    /// `exp(x)` on 16 lanes: inf above [`EXP_HI`], `exp(EXP_LO)` below [`EXP_LO`], NaN stays
    /// NaN.
    #[inline(always)]
    pub(crate) fn exp512(x: __m512) -> __m512 {
        // SAFETY: (all intrinsics below) callers are `#[target_feature(enable = "avx512f")]`
        // functions inlining this one; value-only intrinsics touch no memory.
        unsafe {
            // min/max return their second operand when either is NaN: NaN passes through.
            let x = _mm512_max_ps(
                _mm512_set1_ps(EXP_LO),
                _mm512_min_ps(_mm512_set1_ps(EXP_HI), x),
            );
            let t = _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E));
            let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(t);
            let r = _mm512_fmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
            let r = _mm512_fmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
            let mut p = _mm512_set1_ps(EXP_P[0]);
            for &k in &EXP_P[1..] {
                p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(k));
            }
            let r2 = _mm512_mul_ps(r, r);
            let p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0)));
            _mm512_scalef_ps(p, n)
        }
    }

    /// `1 / d` for `d >= 1` (NaN stays NaN; above 1e38, including inf, as 1e-38):
    /// `rcp14` refined by one Newton step.
    #[inline(always)]
    fn recip512(d: __m512) -> __m512 {
        // SAFETY: value-only AVX-512F intrinsics inside AVX-512F callers.
        unsafe {
            // min returns its second operand when either is NaN: NaN passes through.
            let d = _mm512_min_ps(_mm512_set1_ps(1e38), d);
            let r = _mm512_rcp14_ps(d);
            _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0)), r)
        }
    }

    /// The activation of 16 values (bias already added).
    #[inline(always)]
    pub(crate) fn act512(act: Activation, v: __m512) -> __m512 {
        // SAFETY: value-only AVX-512F intrinsics inside AVX-512F callers.
        unsafe {
            let one = _mm512_set1_ps(1.0);
            let zero = _mm512_setzero_ps();
            match act {
                Activation::None => v,
                Activation::Relu => _mm512_max_ps(v, zero),
                Activation::Clip(lo, hi) => {
                    _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(lo)), _mm512_set1_ps(hi))
                }
                Activation::LeakyRelu(a) => {
                    let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, zero);
                    _mm512_mask_mul_ps(v, neg, v, _mm512_set1_ps(a))
                }
                // 1 / (1 + e) by the 14-bit reciprocal estimate and one Newton step (a few
                // ulp, cheaper than a division).
                Activation::Sigmoid => {
                    let e = exp512(_mm512_sub_ps(zero, v));
                    recip512(_mm512_add_ps(one, e))
                }
                Activation::Silu => {
                    let e = exp512(_mm512_sub_ps(zero, v));
                    _mm512_mul_ps(v, recip512(_mm512_add_ps(one, e)))
                }
                Activation::Tanh => {
                    let ax = _mm512_abs_ps(v);
                    let e = exp512(_mm512_add_ps(ax, ax));
                    let two = _mm512_set1_ps(2.0);
                    let big = _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(e, one)));
                    // Sign of v on the large branch.
                    let sign = _mm512_set1_epi32(i32::MIN);
                    let big = _mm512_castsi512_ps(_mm512_or_si512(
                        _mm512_castps_si512(big),
                        _mm512_and_si512(_mm512_castps_si512(v), sign),
                    ));
                    let z = _mm512_mul_ps(v, v);
                    let mut p = _mm512_set1_ps(TANH_P[0]);
                    for &k in &TANH_P[1..] {
                        p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(k));
                    }
                    let small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), v, v);
                    let is_small = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(ax, _mm512_set1_ps(0.625));
                    _mm512_mask_blend_ps(is_small, big, small)
                }
                Activation::HardSigmoid(a, b) => {
                    let t = _mm512_fmadd_ps(v, _mm512_set1_ps(a), _mm512_set1_ps(b));
                    _mm512_max_ps(zero, _mm512_min_ps(one, t))
                }
                Activation::HardSwish => {
                    let t = _mm512_fmadd_ps(v, _mm512_set1_ps(1.0 / 6.0), _mm512_set1_ps(0.5));
                    _mm512_mul_ps(v, _mm512_max_ps(zero, _mm512_min_ps(one, t)))
                }
            }
        }
    }

    /// [`super::bias_act`] with AVX-512F: 16 lanes, the tail by masked loads and stores.
    ///
    /// # Safety
    /// The CPU supports AVX-512F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn bias_act_avx512(row: &mut [f32], bias: f32, act: Activation) {
        let b = _mm512_set1_ps(bias);
        let mut chunks = row.chunks_exact_mut(16);
        for c in &mut chunks {
            // SAFETY: 16 floats of `c`.
            unsafe {
                let v = _mm512_add_ps(_mm512_loadu_ps(c.as_ptr()), b);
                _mm512_storeu_ps(c.as_mut_ptr(), act512(act, v));
            }
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let m = ((1u32 << rest.len()) - 1) as u16;
            // SAFETY: only the lanes of `rest` are read and written.
            unsafe {
                let v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, rest.as_ptr()), b);
                _mm512_mask_storeu_ps(rest.as_mut_ptr(), m, act512(act, v));
            }
        }
    }

    /// `exp(x)` on 8 lanes: inf above [`EXP_HI`], 0 below -87.34, NaN stays NaN.
    #[inline(always)]
    pub(crate) fn exp256(x0: __m256) -> __m256 {
        // SAFETY: (all intrinsics below) value-only AVX/AVX2/FMA intrinsics inlined into
        // `#[target_feature(enable = "avx2,fma")]` callers.
        unsafe {
            let x = _mm256_max_ps(
                _mm256_set1_ps(EXP_LO),
                _mm256_min_ps(_mm256_set1_ps(EXP_HI), x0),
            );
            let t = _mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E));
            let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(t);
            let r = _mm256_fmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
            let r = _mm256_fmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
            let mut p = _mm256_set1_ps(EXP_P[0]);
            for &k in &EXP_P[1..] {
                p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(k));
            }
            let r2 = _mm256_mul_ps(r, r);
            let p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0)));
            // 2^n in two halves, each a normal float for n in [-126, 128].
            let ni = _mm256_cvtps_epi32(n);
            let n1 = _mm256_srai_epi32::<1>(ni);
            let n2 = _mm256_sub_epi32(ni, n1);
            let bias = _mm256_set1_epi32(127);
            let s1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n1, bias)));
            let s2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n2, bias)));
            let r = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
            let over = _mm256_cmp_ps::<_CMP_GT_OQ>(x0, _mm256_set1_ps(EXP_HI));
            let r = _mm256_blendv_ps(r, _mm256_set1_ps(f32::INFINITY), over);
            let under = _mm256_cmp_ps::<_CMP_LT_OQ>(x0, _mm256_set1_ps(-87.336_55));
            _mm256_blendv_ps(r, _mm256_setzero_ps(), under)
        }
    }

    /// The activation of 8 values (bias already added).
    #[inline(always)]
    pub(crate) fn act256(act: Activation, v: __m256) -> __m256 {
        // SAFETY: value-only AVX/AVX2/FMA intrinsics inside AVX2+FMA callers.
        unsafe {
            let one = _mm256_set1_ps(1.0);
            let zero = _mm256_setzero_ps();
            match act {
                Activation::None => v,
                // As act512: a NaN input gives the second operand (0, or the bound).
                Activation::Relu => _mm256_max_ps(v, zero),
                Activation::Clip(lo, hi) => {
                    _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(lo)), _mm256_set1_ps(hi))
                }
                Activation::Sigmoid => {
                    let e = exp256(_mm256_sub_ps(zero, v));
                    _mm256_div_ps(one, _mm256_add_ps(one, e))
                }
                Activation::Silu => {
                    let e = exp256(_mm256_sub_ps(zero, v));
                    _mm256_div_ps(v, _mm256_add_ps(one, e))
                }
                Activation::Tanh => {
                    let sign = _mm256_set1_ps(-0.0);
                    let ax = _mm256_andnot_ps(sign, v);
                    let e = exp256(_mm256_add_ps(ax, ax));
                    let two = _mm256_set1_ps(2.0);
                    let big = _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(e, one)));
                    let big = _mm256_or_ps(big, _mm256_and_ps(v, sign));
                    let z = _mm256_mul_ps(v, v);
                    let mut p = _mm256_set1_ps(TANH_P[0]);
                    for &k in &TANH_P[1..] {
                        p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(k));
                    }
                    let small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), v, v);
                    let is_small = _mm256_cmp_ps::<_CMP_LT_OQ>(ax, _mm256_set1_ps(0.625));
                    _mm256_blendv_ps(big, small, is_small)
                }
                Activation::HardSigmoid(a, b) => {
                    let t = _mm256_fmadd_ps(v, _mm256_set1_ps(a), _mm256_set1_ps(b));
                    _mm256_max_ps(zero, _mm256_min_ps(one, t))
                }
                Activation::HardSwish => {
                    let t = _mm256_fmadd_ps(v, _mm256_set1_ps(1.0 / 6.0), _mm256_set1_ps(0.5));
                    _mm256_mul_ps(v, _mm256_max_ps(zero, _mm256_min_ps(one, t)))
                }
                // The cheap ones lane by lane (the compiler vectorizes the scalar form).
                a => {
                    let mut l = [0f32; 8];
                    _mm256_storeu_ps(l.as_mut_ptr(), v);
                    for x in &mut l {
                        *x = a.apply(*x);
                    }
                    _mm256_loadu_ps(l.as_ptr())
                }
            }
        }
    }

    /// [`super::bias_act`] with AVX2+FMA: 8 lanes, the tail through a stack vector.
    ///
    /// # Safety
    /// The CPU supports AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn bias_act_avx2(row: &mut [f32], bias: f32, act: Activation) {
        if act.is_cheap() {
            // Same per-element scalar code wherever the element sits.
            return match act {
                Activation::None => row.iter_mut().for_each(|v| *v += bias),
                a => row.iter_mut().for_each(|v| *v = a.apply(*v + bias)),
            };
        }
        let b = _mm256_set1_ps(bias);
        let mut chunks = row.chunks_exact_mut(8);
        for c in &mut chunks {
            // SAFETY: 8 floats of `c`.
            unsafe {
                let v = _mm256_add_ps(_mm256_loadu_ps(c.as_ptr()), b);
                _mm256_storeu_ps(c.as_mut_ptr(), act256(act, v));
            }
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let mut t = [0f32; 8];
            t[..rest.len()].copy_from_slice(rest);
            // SAFETY: 8 floats of the stack copy.
            unsafe {
                let v = _mm256_add_ps(_mm256_loadu_ps(t.as_ptr()), b);
                _mm256_storeu_ps(t.as_mut_ptr(), act256(act, v));
            }
            rest.copy_from_slice(&t[..rest.len()]);
        }
    }
}

/// The activation in f64 (the tests' reference).
#[cfg(test)]
pub(crate) fn reference(act: Activation, x: f64) -> f64 {
    let unit = |t: f64| t.clamp(0.0, 1.0);
    match act {
        Activation::None => x,
        Activation::Relu => x.max(0.0),
        Activation::Clip(lo, hi) => x.max(f64::from(lo)).min(f64::from(hi)),
        Activation::LeakyRelu(a) => {
            if x < 0.0 {
                f64::from(a) * x
            } else {
                x
            }
        }
        Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Activation::Silu => x / (1.0 + (-x).exp()),
        Activation::Tanh => x.tanh(),
        Activation::HardSigmoid(a, b) => unit(f64::from(a) * x + f64::from(b)),
        Activation::HardSwish => x * unit(x / 6.0 + 0.5),
    }
}

#[cfg(test)]
mod tests;
