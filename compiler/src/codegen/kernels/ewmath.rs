//! The f32 math of [`MathOp`] in IR on [`Math`] widths (f32x4 lanes or one f32), used by the
//! element-wise and fused kernels (through [`super::elementwise::Ew::Math`]) and, widened to
//! f32, by the typed kernels on f16 and bf16 (their other helpers: [`super::typed_math`]).
//!
//! Trigonometric and hyperbolic functions follow Cephes' single-precision routines (`sinf`,
//! `cosf`, `tanf`, `asinf`, `acosf`, `atanf`, `sinhf`, `coshf`, `asinhf`, `acoshf`, `atanhf`):
//! a few ulp on their main domains. Sin, Cos and Tan reduce by multiples of pi/4 in f32
//! (three-part pi/4 with fma), so they stay accurate for |x| up to about 8192 and lose
//! accuracy beyond. `exp(x) - 1` is a degree-8 Taylor polynomial below |x| = 0.5 (no
//! cancellation), `ln(1 + u)` is Goldberg's `ln(w) u / (w - 1)`.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::I32;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::Math;
use crate::ops::MathOp;

const PI: f32 = std::f32::consts::PI;
const PIO2: f32 = std::f32::consts::FRAC_PI_2;
const PIO4: f32 = std::f32::consts::FRAC_PI_4;
/// ln 2 in two parts (the first exact in few bits).
const LN2_HI: f32 = 0.693_359_4;
/// The rest of ln 2.
const LN2_LO: f32 = -2.121_944_4e-4;

impl Math {
    /// An i32 constant of this width.
    fn icst(self, b: &mut FunctionBuilder<'_>, v: i32) -> Value {
        let s = b.ins().iconst(I32, i64::from(v));
        if self.vector() {
            b.ins().splat(self.ity(), s)
        } else {
            s
        }
    }

    /// Horner: `((c0 z + c1) z + ...) + cn`.
    fn poly(self, b: &mut FunctionBuilder<'_>, z: Value, coeffs: &[f32]) -> Value {
        let mut p = self.c(b, coeffs[0]);
        for &k in &coeffs[1..] {
            let kc = self.c(b, k);
            p = b.ins().fma(p, z, kc);
        }
        p
    }

    /// `v` with its sign bit flipped where `sbit` (i32 lanes: 0 or `0x8000_0000`) is set.
    fn xor_sign(self, b: &mut FunctionBuilder<'_>, v: Value, sbit: Value) -> Value {
        let bits = self.bitcast(b, self.ity(), v);
        let r = b.ins().bxor(bits, sbit);
        self.bitcast(b, self.ty, r)
    }

    /// The sign bit of `x` (i32 lanes).
    fn sign_bit(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let bits = self.bitcast(b, self.ity(), x);
        let m = self.icst(b, i32::MIN);
        b.ins().band(bits, m)
    }

    /// `|x|` as `j pi/4 + r` with `j` even and `|r| <= pi/4` (Cephes): `(r, j)`.
    fn reduce_pio4(self, b: &mut FunctionBuilder<'_>, ax: Value) -> (Value, Value) {
        let fopi = self.c(b, 4.0 / PI);
        let t = b.ins().fmul(ax, fopi);
        let j = b.ins().fcvt_to_sint_sat(self.ity(), t);
        let one = self.icst(b, 1);
        let odd = b.ins().band(j, one);
        let j = b.ins().iadd(j, odd);
        let y = b.ins().fcvt_from_sint(self.ty, j);
        let mut r = ax;
        for dp in [-0.785_156_25, -2.418_756_5e-4, -3.774_895e-8] {
            let d = self.c(b, dp);
            r = b.ins().fma(y, d, r);
        }
        (r, j)
    }

    /// `(sin r, cos r)` for `|r| <= pi/4`.
    fn sincos_poly(self, b: &mut FunctionBuilder<'_>, r: Value) -> (Value, Value) {
        let z = b.ins().fmul(r, r);
        let ps = self.poly(b, z, &[-1.951_529_6e-4, 8.332_161e-3, -1.666_665_5e-1]);
        let pz = b.ins().fmul(ps, z);
        let s = b.ins().fma(pz, r, r);
        let pc = self.poly(b, z, &[2.443_315_7e-5, -1.388_731_6e-3, 4.166_664_6e-2]);
        let z2 = b.ins().fmul(z, z);
        let mh = self.c(b, -0.5);
        let one = self.c(b, 1.0);
        let c = b.ins().fma(z, mh, one);
        let c = b.ins().fma(pc, z2, c);
        (s, c)
    }

    /// `v` where `ax` (an absolute value) is finite, NaN where it is inf or NaN (the range
    /// reduction of Sin, Cos and Tan has no answer there).
    fn finite_or_nan(self, b: &mut FunctionBuilder<'_>, ax: Value, v: Value) -> Value {
        let inf = self.c(b, f32::INFINITY);
        let fin = b.ins().fcmp(FloatCC::LessThan, ax, inf);
        let nan = self.c(b, f32::NAN);
        self.select(b, fin, v, nan)
    }

    /// `(j & bit) != 0` as a lane mask.
    fn bit_set(self, b: &mut FunctionBuilder<'_>, j: Value, bit: i32) -> Value {
        let m = self.icst(b, bit);
        let a = b.ins().band(j, m);
        let z = self.icst(b, 0);
        b.ins().icmp(IntCC::NotEqual, a, z)
    }

    /// `(j & 4) << 29`: the sign bit when bit 2 of `j` is set.
    fn bit2_sign(self, b: &mut FunctionBuilder<'_>, j: Value) -> Value {
        let m = self.icst(b, 4);
        let a = b.ins().band(j, m);
        b.ins().ishl_imm_u(a, 29)
    }

    /// `sin(x)`.
    pub(crate) fn sin(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let ax = b.ins().fabs(x);
        let (r, j) = self.reduce_pio4(b, ax);
        let (s, c) = self.sincos_poly(b, r);
        let use_cos = self.bit_set(b, j, 2);
        let v = self.select(b, use_cos, c, s);
        let flip = self.bit2_sign(b, j);
        let sx = self.sign_bit(b, x);
        let sbit = b.ins().bxor(flip, sx);
        let r = self.xor_sign(b, v, sbit);
        self.finite_or_nan(b, ax, r)
    }

    /// `cos(x)`.
    pub(crate) fn cos(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let ax = b.ins().fabs(x);
        let (r, j) = self.reduce_pio4(b, ax);
        let (s, c) = self.sincos_poly(b, r);
        let use_sin = self.bit_set(b, j, 2);
        let v = self.select(b, use_sin, s, c);
        let two = self.icst(b, 2);
        let j2 = b.ins().iadd(j, two);
        let sbit = self.bit2_sign(b, j2);
        let r = self.xor_sign(b, v, sbit);
        self.finite_or_nan(b, ax, r)
    }

    /// `tan(x)`.
    pub(crate) fn tan(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let ax = b.ins().fabs(x);
        let (r, j) = self.reduce_pio4(b, ax);
        let z = b.ins().fmul(r, r);
        let p = self.poly(
            b,
            z,
            &[
                9.385_402e-3,
                3.119_922_3e-3,
                2.443_013_5e-2,
                5.341_128e-2,
                1.333_88e-1,
                3.333_315_7e-1,
            ],
        );
        let pz = b.ins().fmul(p, z);
        let t = b.ins().fma(pz, r, r);
        let one = self.c(b, -1.0);
        let inv = b.ins().fdiv(one, t);
        let odd = self.bit_set(b, j, 2);
        let v = self.select(b, odd, inv, t);
        let sx = self.sign_bit(b, x);
        let r = self.xor_sign(b, v, sx);
        self.finite_or_nan(b, ax, r)
    }

    /// `asin(v)` for `|v| <= 0.5` (Cephes polynomial).
    fn asin_small(self, b: &mut FunctionBuilder<'_>, v: Value) -> Value {
        let z = b.ins().fmul(v, v);
        let p = self.poly(
            b,
            z,
            &[
                4.216_32e-2,
                2.418_131e-2,
                4.547_002_6e-2,
                7.495_300_3e-2,
                1.666_675_2e-1,
            ],
        );
        let pz = b.ins().fmul(p, z);
        b.ins().fma(pz, v, v)
    }

    /// `sqrt((1 - a) / 2)`.
    fn half_gap_sqrt(self, b: &mut FunctionBuilder<'_>, a: Value) -> Value {
        let one = self.c(b, 1.0);
        let h = self.c(b, 0.5);
        let d = b.ins().fsub(one, a);
        let d = b.ins().fmul(d, h);
        b.ins().sqrt(d)
    }

    /// `asin(x)`: NaN outside [-1, 1].
    pub(crate) fn asin(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let a = b.ins().fabs(x);
        let h = self.c(b, 0.5);
        let big = b.ins().fcmp(FloatCC::GreaterThan, a, h);
        let s = self.half_gap_sqrt(b, a);
        let v = self.select(b, big, s, a);
        let p = self.asin_small(b, v);
        let pio2 = self.c(b, PIO2);
        let p2 = b.ins().fadd(p, p);
        let far = b.ins().fsub(pio2, p2);
        let r = self.select(b, big, far, p);
        let sx = self.sign_bit(b, x);
        self.xor_sign(b, r, sx)
    }

    /// `acos(x)`: NaN outside [-1, 1].
    pub(crate) fn acos(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let a = b.ins().fabs(x);
        let h = self.c(b, 0.5);
        let big = b.ins().fcmp(FloatCC::GreaterThan, a, h);
        let s = self.half_gap_sqrt(b, a);
        let v = self.select(b, big, s, x);
        let p = self.asin_small(b, v);
        let pio2 = self.c(b, PIO2);
        let near = b.ins().fsub(pio2, p);
        let p2 = b.ins().fadd(p, p);
        let pi = self.c(b, PI);
        let neg_far = b.ins().fsub(pi, p2);
        let z = self.c(b, 0.0);
        let neg = b.ins().fcmp(FloatCC::LessThan, x, z);
        let far = self.select(b, neg, neg_far, p2);
        self.select(b, big, far, near)
    }

    /// `atan(x)`.
    pub(crate) fn atan(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let a = b.ins().fabs(x);
        let one = self.c(b, 1.0);
        let t3 = self.c(b, 2.414_213_5);
        let t1 = self.c(b, 0.414_213_57);
        let big = b.ins().fcmp(FloatCC::GreaterThan, a, t3);
        let mid = b.ins().fcmp(FloatCC::GreaterThan, a, t1);
        let m1 = self.c(b, -1.0);
        let inv = b.ins().fdiv(m1, a);
        let num = b.ins().fsub(a, one);
        let den = b.ins().fadd(a, one);
        let q = b.ins().fdiv(num, den);
        let v = self.select(b, mid, q, a);
        let v = self.select(b, big, inv, v);
        let z = self.c(b, 0.0);
        let pio4 = self.c(b, PIO4);
        let pio2 = self.c(b, PIO2);
        let y0 = self.select(b, mid, pio4, z);
        let y0 = self.select(b, big, pio2, y0);
        let zz = b.ins().fmul(v, v);
        let p = self.poly(
            b,
            zz,
            &[8.053_744e-2, -1.387_768_6e-1, 1.997_771_1e-1, -3.333_295e-1],
        );
        let pz = b.ins().fmul(p, zz);
        let r = b.ins().fma(pz, v, v);
        let r = b.ins().fadd(y0, r);
        let sx = self.sign_bit(b, x);
        self.xor_sign(b, r, sx)
    }

    /// `exp(a) / 2` as `exp(a / 2 - ln 2 / 2)^2`: finite up to `a = ln(2 f32::MAX)` (`exp`
    /// alone overflows at `ln(f32::MAX)`).
    fn half_exp(self, b: &mut FunctionBuilder<'_>, a: Value) -> Value {
        let h = self.c(b, 0.5);
        let t = b.ins().fmul(a, h);
        let hi = self.c(b, -0.5 * LN2_HI);
        let lo = self.c(b, -0.5 * LN2_LO);
        let t = b.ins().fadd(t, hi);
        let t = b.ins().fadd(t, lo);
        let e = self.exp(b, t);
        b.ins().fmul(e, e)
    }

    /// `sinh(x)`: a Cephes polynomial for |x| <= 1, else `(e^|x| - e^-|x|) / 2` with the sign.
    pub(crate) fn sinh(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let a = b.ins().fabs(x);
        let e = self.half_exp(b, a);
        let q = self.c(b, 0.25);
        let qe = b.ins().fdiv(q, e);
        let big = b.ins().fsub(e, qe);
        let sx = self.sign_bit(b, x);
        let big = self.xor_sign(b, big, sx);
        let z = b.ins().fmul(x, x);
        let p = self.poly(b, z, &[2.037_219_1e-4, 8.330_284e-3, 1.666_671_6e-1]);
        let pz = b.ins().fmul(p, z);
        let small = b.ins().fma(pz, x, x);
        let one = self.c(b, 1.0);
        let is_big = b.ins().fcmp(FloatCC::GreaterThan, a, one);
        self.select(b, is_big, big, small)
    }

    /// `cosh(x) = (e^|x| + e^-|x|) / 2`.
    pub(crate) fn cosh(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let a = b.ins().fabs(x);
        let e = self.half_exp(b, a);
        let q = self.c(b, 0.25);
        let qe = b.ins().fdiv(q, e);
        b.ins().fadd(e, qe)
    }

    /// `asinh(x)`: a polynomial below |x| = 0.5, `ln(|x| + sqrt(x^2 + 1))` up to 1500,
    /// `ln(2 |x|)` above (where `x^2` could overflow); with the sign of x.
    pub(crate) fn asinh(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let a = b.ins().fabs(x);
        let one = self.c(b, 1.0);
        let a2 = b.ins().fmul(a, a);
        let s = b.ins().fadd(a2, one);
        let s = b.ins().sqrt(s);
        let s = b.ins().fadd(a, s);
        let lim = self.c(b, 1500.0);
        let is_far = b.ins().fcmp(FloatCC::GreaterThan, a, lim);
        let twice = b.ins().fadd(a, a);
        let arg = self.select(b, is_far, twice, s);
        let r = self.log(b, arg);
        let p = self.poly(
            b,
            a2,
            &[2.012_200_3e-2, -4.269_934e-2, 7.484_759e-2, -1.666_628_8e-1],
        );
        let pz = b.ins().fmul(p, a2);
        let small = b.ins().fma(pz, a, a);
        let h = self.c(b, 0.5);
        let is_small = b.ins().fcmp(FloatCC::LessThan, a, h);
        let r = self.select(b, is_small, small, r);
        let sx = self.sign_bit(b, x);
        self.xor_sign(b, r, sx)
    }

    /// `acosh(x)`: NaN below 1; `sqrt(z) P(z)` for `z = x - 1 < 0.5`, `ln(x + sqrt(z (x + 1)))`
    /// up to 1500, `ln(2x)` above.
    pub(crate) fn acosh(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let one = self.c(b, 1.0);
        let z = b.ins().fsub(x, one);
        let xp = b.ins().fadd(x, one);
        let s = b.ins().fmul(z, xp);
        let s = b.ins().sqrt(s);
        let s = b.ins().fadd(x, s);
        let lim = self.c(b, 1500.0);
        let is_far = b.ins().fcmp(FloatCC::GreaterThan, x, lim);
        let twice = b.ins().fadd(x, x);
        let arg = self.select(b, is_far, twice, s);
        let r = self.log(b, arg);
        let p = self.poly(
            b,
            z,
            &[
                1.759_688_1e-3,
                -7.527_288_7e-3,
                2.645_490_5e-2,
                -1.178_474_2e-1,
                std::f32::consts::SQRT_2,
            ],
        );
        let sz = b.ins().sqrt(z);
        let small = b.ins().fmul(p, sz);
        let h = self.c(b, 0.5);
        let is_small = b.ins().fcmp(FloatCC::LessThan, z, h);
        // z < 0 (x < 1) has sqrt(z) = NaN in the small branch.
        self.select(b, is_small, small, r)
    }

    /// `atanh(x)`: a polynomial below |x| = 0.5, else `ln((1 + x) / (1 - x)) / 2` (±inf at
    /// ±1, NaN beyond).
    pub(crate) fn atanh(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let a = b.ins().fabs(x);
        let one = self.c(b, 1.0);
        let num = b.ins().fadd(one, x);
        let den = b.ins().fsub(one, x);
        let q = b.ins().fdiv(num, den);
        let l = self.log(b, q);
        let h = self.c(b, 0.5);
        let big = b.ins().fmul(l, h);
        let z = b.ins().fmul(x, x);
        let p = self.poly(
            b,
            z,
            &[
                1.817_400_8e-1,
                8.243_703e-2,
                1.466_914_3e-1,
                1.997_821_6e-1,
                3.333_373e-1,
            ],
        );
        let pz = b.ins().fmul(p, z);
        let small = b.ins().fma(pz, x, x);
        let is_small = b.ins().fcmp(FloatCC::LessThan, a, h);
        self.select(b, is_small, small, big)
    }

    /// `exp(x) - 1`: the Taylor polynomial to degree 8 below |x| = 0.5, else `exp(x) - 1`.
    pub(crate) fn expm1(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let e = self.exp(b, x);
        let one = self.c(b, 1.0);
        let big = b.ins().fsub(e, one);
        // 1/8!, 1/7!, ..., 1/2!.
        let p = self.poly(
            b,
            x,
            &[
                2.480_158_7e-5,
                1.984_127e-4,
                1.388_888_9e-3,
                8.333_334e-3,
                4.166_666_8e-2,
                1.666_666_7e-1,
                0.5,
            ],
        );
        let x2 = b.ins().fmul(x, x);
        let small = b.ins().fma(p, x2, x);
        let a = b.ins().fabs(x);
        let h = self.c(b, 0.5);
        let is_small = b.ins().fcmp(FloatCC::LessThan, a, h);
        self.select(b, is_small, small, big)
    }

    /// `ln(1 + exp(x))` as `max(x, 0) + ln(1 + exp(-|x|))`, the log by Goldberg's
    /// `ln(w) u / (w - 1)` for `w = 1 + u` (exact for tiny `u`).
    pub(crate) fn softplus(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let a = b.ins().fabs(x);
        let na = b.ins().fneg(a);
        let u = self.exp(b, na);
        let one = self.c(b, 1.0);
        let w = b.ins().fadd(one, u);
        let d = b.ins().fsub(w, one);
        let lw = self.log(b, w);
        let q = b.ins().fdiv(u, d);
        let l = b.ins().fmul(lw, q);
        let z = self.c(b, 0.0);
        let d0 = b.ins().fcmp(FloatCC::Equal, d, z);
        let l = self.select(b, d0, u, l);
        let pos = b.ins().fcmp(FloatCC::GreaterThan, x, z);
        let m = self.select(b, pos, x, z);
        let r = b.ins().fadd(m, l);
        // NaN in, NaN out (the max above dropped it).
        let nan = b.ins().fcmp(FloatCC::Unordered, x, x);
        self.select(b, nan, x, r)
    }

    /// The f32 math of `op` (not a predicate: those have bool outputs, see [`super::typed_math::is_nan_inf`]).
    pub(crate) fn math(self, b: &mut FunctionBuilder<'_>, op: MathOp, x: Value) -> Value {
        let z = self.c(b, 0.0);
        match op {
            MathOp::Floor => b.ins().floor(x),
            MathOp::Ceil => b.ins().ceil(x),
            MathOp::Round => b.ins().nearest(x),
            MathOp::Sign => {
                let one = self.c(b, 1.0);
                let m1 = self.c(b, -1.0);
                let pos = b.ins().fcmp(FloatCC::GreaterThan, x, z);
                let neg = b.ins().fcmp(FloatCC::LessThan, x, z);
                let r = self.select(b, neg, m1, x);
                self.select(b, pos, one, r)
            }
            MathOp::Sin => self.sin(b, x),
            MathOp::Cos => self.cos(b, x),
            MathOp::Tan => self.tan(b, x),
            MathOp::Asin => self.asin(b, x),
            MathOp::Acos => self.acos(b, x),
            MathOp::Atan => self.atan(b, x),
            MathOp::Sinh => self.sinh(b, x),
            MathOp::Cosh => self.cosh(b, x),
            MathOp::Asinh => self.asinh(b, x),
            MathOp::Acosh => self.acosh(b, x),
            MathOp::Atanh => self.atanh(b, x),
            MathOp::Elu { alpha } => {
                let e = self.expm1(b, x);
                let k = self.c(b, alpha);
                let n = b.ins().fmul(e, k);
                let neg = b.ins().fcmp(FloatCC::LessThan, x, z);
                self.select(b, neg, n, x)
            }
            MathOp::Selu { alpha, gamma } => {
                let e = self.expm1(b, x);
                let k = self.c(b, alpha * gamma);
                let n = b.ins().fmul(e, k);
                let g = self.c(b, gamma);
                let p = b.ins().fmul(x, g);
                let pos = b.ins().fcmp(FloatCC::GreaterThan, x, z);
                let r = self.select(b, pos, p, n);
                let nan = b.ins().fcmp(FloatCC::Unordered, x, x);
                self.select(b, nan, x, r)
            }
            MathOp::Celu { alpha } => {
                let k = self.c(b, alpha);
                let s = b.ins().fdiv(x, k);
                let e = self.expm1(b, s);
                let n = b.ins().fmul(e, k);
                let pos = b.ins().fcmp(FloatCC::GreaterThan, x, z);
                self.select(b, pos, x, n)
            }
            MathOp::Softplus => self.softplus(b, x),
            MathOp::Softsign => {
                let one = self.c(b, 1.0);
                let a = b.ins().fabs(x);
                let d = b.ins().fadd(one, a);
                b.ins().fdiv(x, d)
            }
            MathOp::ThresholdedRelu { alpha } => {
                let k = self.c(b, alpha);
                let above = b.ins().fcmp(FloatCC::GreaterThan, x, k);
                self.select(b, above, x, z)
            }
            MathOp::Shrink { bias, lambd } => {
                let l = self.c(b, lambd);
                let nl = self.c(b, -lambd);
                let bc = self.c(b, bias);
                let lo = b.ins().fadd(x, bc);
                let hi = b.ins().fsub(x, bc);
                let below = b.ins().fcmp(FloatCC::LessThan, x, nl);
                let above = b.ins().fcmp(FloatCC::GreaterThan, x, l);
                let r = self.select(b, above, hi, z);
                self.select(b, below, lo, r)
            }
            MathOp::Mish => {
                // tanh(ln(1 + e)) = n / (n + 2) with n = e (e + 2), e = exp(x): one exp, no
                // cancellation; 1 in f32 above x = 20 (where n would overflow later).
                let e = self.exp(b, x);
                let two = self.c(b, 2.0);
                let e2 = b.ins().fadd(e, two);
                let n = b.ins().fmul(e, e2);
                let d = b.ins().fadd(n, two);
                let q = b.ins().fdiv(n, d);
                let r = b.ins().fmul(x, q);
                let lim = self.c(b, 20.0);
                let big = b.ins().fcmp(FloatCC::GreaterThan, x, lim);
                self.select(b, big, x, r)
            }
            MathOp::Swish { alpha } => {
                let k = self.c(b, alpha);
                let ax = b.ins().fmul(x, k);
                let s = self.sigmoid(b, ax);
                b.ins().fmul(x, s)
            }
            // Predicates have no f32 result; the lowering sends them to the typed kernels.
            MathOp::IsNaN | MathOp::IsInf { .. } => x,
        }
    }
}
