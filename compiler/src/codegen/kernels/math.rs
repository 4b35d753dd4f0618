//! More f32 math in IR on [`Math`] widths: `ln` (Cephes `logf`: exponent split from the bits,
//! a degree-8 polynomial on the mantissa), `pow` through `exp(y ln |x|)` with `powf`'s
//! special cases, and integer powers by repeated squaring.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::types::{I32, I32X4};
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::Math;

/// Cephes `logf` polynomial, highest degree first.
const LOG_POLY: [f32; 9] = [
    7.037_683_6e-2,
    -1.151_461e-1,
    1.167_699_9e-1,
    -1.242_014_1e-1,
    1.424_932_3e-1,
    -1.666_805_8e-1,
    2.000_071_4e-1,
    -2.499_999_4e-1,
    3.333_333e-1,
];

impl Math {
    fn iconst(self, b: &mut FunctionBuilder<'_>, v: i32) -> Value {
        let s = b.ins().iconst(I32, i64::from(v));
        if self.vector() {
            b.ins().splat(I32X4, s)
        } else {
            s
        }
    }

    fn int_ty(self) -> cranelift_codegen::ir::Type {
        if self.vector() { I32X4 } else { I32 }
    }

    /// `ln(x)`: denormals are scaled by 2^23 first; `x = 2^e m` with `m` in
    /// `[sqrt(1/2), sqrt(2))`; `ln(m)` by the Cephes polynomial; `e ln 2` added in two parts.
    /// `ln(0) = -inf`, `ln(+inf) = +inf`, negative or NaN inputs give NaN.
    pub(crate) fn log(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let ity = self.int_ty();
        // Denormals: scale into the normal range, remember the 23 in the exponent.
        let min_normal = self.c(b, f32::MIN_POSITIVE);
        let tiny = b.ins().fcmp(FloatCC::LessThan, x, min_normal);
        let two23 = self.c(b, 8_388_608.0);
        let scaled = b.ins().fmul(x, two23);
        let xs = self.select(b, tiny, scaled, x);
        let zero = self.c(b, 0.0);
        let m23 = self.c(b, -23.0);
        let eadj = self.select(b, tiny, m23, zero);
        // Exponent and mantissa in [0.5, 1).
        let bits = self.bitcast(b, ity, xs);
        let eb = b.ins().ushr_imm_u(bits, 23);
        let bias = self.iconst(b, 126);
        let ei = b.ins().isub(eb, bias);
        let e = b.ins().fcvt_from_sint(self.ty, ei);
        let e = b.ins().fadd(e, eadj);
        let mask = self.iconst(b, 0x007f_ffff);
        let mbits = b.ins().band(bits, mask);
        let half = self.iconst(b, 0x3f00_0000);
        let mbits = b.ins().bor(mbits, half);
        let m = self.bitcast(b, self.ty, mbits);
        // m < sqrt(1/2): m = 2m - 1, e -= 1; else m = m - 1.
        let sqrth = self.c(b, std::f32::consts::FRAC_1_SQRT_2);
        let low = b.ins().fcmp(FloatCC::LessThan, m, sqrth);
        let one = self.c(b, 1.0);
        let m2 = b.ins().fadd(m, m);
        let mm = self.select(b, low, m2, m);
        let m = b.ins().fsub(mm, one);
        let e1 = b.ins().fsub(e, one);
        let e = self.select(b, low, e1, e);
        let z = b.ins().fmul(m, m);
        let mut p = self.c(b, LOG_POLY[0]);
        for &k in &LOG_POLY[1..] {
            let kc = self.c(b, k);
            p = b.ins().fma(p, m, kc);
        }
        let mz = b.ins().fmul(m, z);
        let y = b.ins().fmul(p, mz);
        let c2 = self.c(b, -2.121_944_4e-4);
        let y = b.ins().fma(e, c2, y);
        let mhalf = self.c(b, -0.5);
        let y = b.ins().fma(z, mhalf, y);
        let r = b.ins().fadd(m, y);
        let c1 = self.c(b, 0.693_359_4);
        let r = b.ins().fma(e, c1, r);
        // Special cases.
        let inf = self.c(b, f32::INFINITY);
        let is_inf = b.ins().fcmp(FloatCC::Equal, x, inf);
        let r = self.select(b, is_inf, inf, r);
        let ninf = self.c(b, f32::NEG_INFINITY);
        let is_zero = b.ins().fcmp(FloatCC::Equal, x, zero);
        let r = self.select(b, is_zero, ninf, r);
        let nan = self.c(b, f32::NAN);
        let ok = b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, zero);
        self.select(b, ok, r, nan)
    }

    /// `x^y` for `x > 0` as `exp(y ln x)` (`exp` clamps its argument to about ±88).
    pub(crate) fn pow_pos(self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
        let l = self.log(b, x);
        let t = b.ins().fmul(l, y);
        self.exp(b, t)
    }

    /// `x^y` with C `powf`'s special cases: `exp(y ln|x|)` (overflow to inf, results below
    /// 2^-126 flushed to 0), negated for a negative `x` and an odd integer `y`, NaN for a
    /// negative `x` and a non-integer `y`; `x^0 = 1^y = 1`; `0^y` is 0 for `y > 0` and inf
    /// for `y < 0`. Relative error about `(1 + |y ln x|) 2^-23`.
    pub(crate) fn pow(self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
        let ax = b.ins().fabs(x);
        let l = self.log(b, ax);
        let t = b.ins().fmul(l, y);
        let mut r = self.exp(b, t);
        let zero = self.c(b, 0.0);
        let one = self.c(b, 1.0);
        let inf = self.c(b, f32::INFINITY);
        // Negative bases: integer exponents keep the magnitude, odd ones flip the sign.
        let yi = b.ins().nearest(y);
        let is_int = b.ins().fcmp(FloatCC::Equal, yi, y);
        let half_c = self.c(b, 0.5);
        let h = b.ins().fmul(y, half_c);
        let hi_ = b.ins().nearest(h);
        let even = b.ins().fcmp(FloatCC::Equal, hi_, h);
        let neg = b.ins().fcmp(FloatCC::LessThan, x, zero);
        let nr = b.ins().fneg(r);
        let flipped = self.select(b, even, r, nr);
        let nan = self.c(b, f32::NAN);
        let signed = self.select(b, is_int, flipped, nan);
        r = self.select(b, neg, signed, r);
        // Zero bases.
        let ypos = b.ins().fcmp(FloatCC::GreaterThan, y, zero);
        let zr = self.select(b, ypos, zero, inf);
        let is_zero = b.ins().fcmp(FloatCC::Equal, x, zero);
        r = self.select(b, is_zero, zr, r);
        // x^0 = 1 (even for NaN x), 1^y = 1 (even for NaN y).
        let y0 = b.ins().fcmp(FloatCC::Equal, y, zero);
        r = self.select(b, y0, one, r);
        let x1 = b.ins().fcmp(FloatCC::Equal, x, one);
        self.select(b, x1, one, r)
    }

    /// `x^n` for an integer `n` by repeated squaring (`1 / x^-n` for negative `n`).
    pub(crate) fn powi(self, b: &mut FunctionBuilder<'_>, x: Value, n: i32) -> Value {
        let mut e = n.unsigned_abs();
        let mut acc: Option<Value> = None;
        let mut sq = x;
        while e > 0 {
            if e & 1 == 1 {
                acc = Some(match acc {
                    Some(a) => b.ins().fmul(a, sq),
                    None => sq,
                });
            }
            e >>= 1;
            if e > 0 {
                sq = b.ins().fmul(sq, sq);
            }
        }
        let one = self.c(b, 1.0);
        let p = acc.unwrap_or(one);
        if n < 0 { b.ins().fdiv(one, p) } else { p }
    }
}
