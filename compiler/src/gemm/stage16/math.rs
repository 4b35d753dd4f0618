//! Branch-free f32 math for the staged 16-bit kernels, written per element so their loops
//! vectorize (the slice functions are compiled once more with AVX2+FMA, chosen at run
//! time; `mul_add` is fused on both paths, so both give the same bits):
//! - [`erf_in_place`] (`Erf` nodes, GELU's `Erf` inside a fused program): absolute error below
//!   4e-7 everywhere and relative error below 1e-6 for `|x| < 1` (checked against the f64
//!   reference in the tests), far inside the 16-bit rounding the result gets; NaN stays NaN,
//!   `erf(±inf) = ±1`;
//! - [`exp_le0`]: `exp(x)` for `x <= 0` (Softmax's `exp(x - max)`), relative error about
//!   1e-7, 0 below -87.

/// Where the odd Taylor polynomial hands over to the exp form.
const SPLIT: f32 = 1.0;

/// `2/sqrt(pi) * (-1)^n / (n! (2n+1))`, n = 0..=10: `erf(x) = x * P(x^2)` for `|x| < 1`
/// (truncation error below 2e-9 there).
const TAYLOR: [f32; 11] = [
    std::f32::consts::FRAC_2_SQRT_PI,
    -0.376_126_4,
    0.112_837_92,
    -0.026_866_17,
    0.005_223_977,
    -8.548_328e-4,
    1.205_533e-4,
    -1.492_565_4e-5,
    1.646_211_4e-6,
    -1.636_584_5e-7,
    1.480_719_3e-8,
];

/// Abramowitz-Stegun 7.1.26: `erf(x) = 1 - t P(t) exp(-x^2)`, `t = 1 / (1 + p x)`, for
/// `x >= 0` (absolute error below 1.5e-7).
const AS_P: f32 = 0.327_591_1;
const AS: [f32; 5] = [
    1.061_405_4,
    -1.453_152,
    1.421_413_8,
    -0.284_496_74,
    0.254_829_6,
];

/// `erf` rounds to 1 in f32 from here on (`erf(4) = 1 - 1.5e-8`).
const CLAMP: f32 = 4.0;

/// `v[i] = erf(v[i])`.
pub fn erf_in_place(v: &mut [f32]) {
    map(v, erf1);
}

/// `v[i] = gelu(v[i]) = v[i] / 2 * (1 + erf(v[i] / sqrt 2))` (ONNX `Gelu`, exact form), by
/// [`erf1`] in the same vectors as [`erf_in_place`].
pub fn gelu_in_place(v: &mut [f32]) {
    map(v, |x| {
        0.5 * x * (1.0 + erf1(x * std::f32::consts::FRAC_1_SQRT_2))
    });
}

/// `v[i] = f(v[i])` in the widest vectors this CPU and the selected kernel family allow
/// (`f` is inlined into each copy; `mul_add` is fused on every path: the same bits).
#[inline(always)]
fn map(v: &mut [f32], f: impl Fn(f32) -> f32 + Copy) {
    #[cfg(target_arch = "x86_64")]
    {
        let fma = is_x86_feature_detected!("fma");
        if super::convert::isa() == super::convert::Isa::Avx512 && fma {
            // SAFETY: the CPU has AVX-512F (`isa`) and FMA.
            return unsafe { map_avx512(v, f) };
        }
        if is_x86_feature_detected!("avx2") && fma {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { map_avx2(v, f) };
        }
    }
    v.iter_mut().for_each(|e| *e = f(*e));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn map_avx2(v: &mut [f32], f: impl Fn(f32) -> f32 + Copy) {
    v.iter_mut().for_each(|e| *e = f(*e));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
fn map_avx512(v: &mut [f32], f: impl Fn(f32) -> f32 + Copy) {
    v.iter_mut().for_each(|e| *e = f(*e));
}

/// Below this [`exp_le0`] is 0 (`exp(-87) = 1.6e-38`, the smallest normal scale `2^-126`).
const EXP_MIN: f32 = -87.0;

/// `exp(x)` for `x <= 0`: `2^n * p(r)`, `r = x - n ln 2` (Cephes `expf`'s polynomial,
/// relative error about 1e-7); 0 below [`EXP_MIN`] (and at -inf), NaN stays NaN. Positive
/// `x` are outside the contract (the result is wrong, not undefined behaviour).
#[inline(always)]
pub fn exp_le0(x: f32) -> f32 {
    // max returns the other operand for NaN: `c` is a number in [-87, 0] (`clamp` would
    // keep a NaN, and the unchecked conversion below needs a number).
    #[allow(clippy::manual_clamp)]
    let c = x.max(EXP_MIN).min(0.0);
    let n = (c * std::f32::consts::LOG2_E).round_ties_even();
    let r = n.mul_add(-0.693_359_4, c);
    let r = n.mul_add(2.121_944_4e-4, r);
    let mut p = 1.987_569_1e-4f32;
    for k in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ] {
        p = p.mul_add(r, k);
    }
    let p = p.mul_add(r * r, r + 1.0);
    // SAFETY: `n` is a whole number in [-126, 0] (`c` in [-87, 0]), so it fits an i32; the
    // unchecked conversion vectorizes where `as` (saturating, NaN to 0) does not.
    let ni: i32 = unsafe { n.to_int_unchecked() };
    // 2^n is a normal float.
    let r = p * f32::from_bits(((ni + 127) as u32) << 23);
    if x.is_nan() {
        x
    } else if x < EXP_MIN {
        0.0
    } else {
        r
    }
}

/// One element, both forms computed and one selected (no branches).
#[inline(always)]
fn erf1(x: f32) -> f32 {
    let a = x.abs().min(CLAMP);
    let x2 = a * a;
    let mut p = TAYLOR[10];
    for &k in TAYLOR[..10].iter().rev() {
        p = p.mul_add(x2, k);
    }
    let small = a * p;
    let t = 1.0 / AS_P.mul_add(a, 1.0);
    let mut q = AS[0];
    for &k in &AS[1..] {
        q = q.mul_add(t, k);
    }
    let big = (-(q * t)).mul_add(exp_le0(-x2), 1.0);
    let r = if a < SPLIT { small } else { big };
    let r = r.copysign(x);
    if x.is_nan() { x } else { r }
}

#[cfg(test)]
mod tests {
    use super::{erf_in_place, exp_le0};
    use crate::ops::{UnaryOp, elementwise::unary_f64};

    fn erf(x: f64) -> f64 {
        unary_f64(UnaryOp::Erf, x)
    }

    /// Against the f64 reference over [-6, 6] in steps of 1/1024 (both forms, the switch,
    /// the clamp, every vector tail), tiny values, ±0, ±inf and NaN.
    #[test]
    fn erf_matches_the_reference() {
        let mut xs: Vec<f32> = (-6 * 1024..=6 * 1024).map(|i| i as f32 / 1024.0).collect();
        xs.extend([
            1e-30,
            -1e-20,
            3e-8,
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ]);
        for len in [xs.len(), 7, 1] {
            let mut v = xs[..len].to_vec();
            erf_in_place(&mut v);
            for (&x, &y) in xs.iter().zip(&v) {
                let want = erf(f64::from(x));
                let err = (f64::from(y) - want).abs();
                assert!(err <= 4e-7, "erf({x}) = {y}, reference {want}");
                if x.abs() < 1.0 {
                    assert!(err <= 1e-6 * want.abs(), "erf({x}) = {y}, reference {want}");
                }
                assert_eq!(y.is_sign_negative(), x.is_sign_negative(), "erf({x}) = {y}");
            }
        }
        let mut nan = [f32::NAN; 9];
        erf_in_place(&mut nan);
        assert!(nan.iter().all(|v| v.is_nan()));
    }

    /// Against f64 `exp` over [-90, 0] in steps of 1/256 (the cut at -87, 0 below), -inf,
    /// NaN.
    #[test]
    fn exp_le0_matches_the_reference() {
        for i in -90 * 256..=0 {
            let x = i as f32 / 256.0;
            let y = exp_le0(x);
            let want = f64::from(x).exp();
            if x < -87.0 {
                assert_eq!(y, 0.0, "exp({x})");
            } else {
                let rel = (f64::from(y) - want).abs() / want;
                assert!(rel <= 3e-7, "exp({x}) = {y}, reference {want}");
            }
        }
        assert_eq!(exp_le0(f32::NEG_INFINITY), 0.0);
        assert!(exp_le0(f32::NAN).is_nan());
    }
}
