//! Kernel emitters: each kernel is a Cranelift function of pointer parameters, specialized to
//! exact shapes, built from the small IR helpers here (static-count loops, f32/f32x4 math).

pub mod arg;
pub(crate) mod cast;
pub mod conv;
pub mod convt;
pub mod elementwise;
pub(crate) mod ewmath;
pub mod fused;
pub mod lppool;
pub mod lrn;
pub(crate) mod math;
pub mod matmul;
pub mod movement;
pub mod norm;
pub mod reduce;
pub mod reduce_any;
pub mod resize;
pub mod scan;
pub mod softmax;
pub mod storage;
pub mod typed;
pub(crate) mod typed_math;
pub(crate) mod typed_vec;

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::immediates::Ieee32;
use cranelift_codegen::ir::types::{F32, F32X4, I32, I32X4, I64};
use cranelift_codegen::ir::{BlockArg, Endianness, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;

/// Flags of every arena/weights access: never traps (addresses come from the plan), may be
/// unaligned for vectors.
pub(crate) fn mem() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Emits `for i in 0..n { body(i) }` with a static trip count (`i` is an i64 value).
pub(crate) fn for_range(
    b: &mut FunctionBuilder<'_>,
    n: usize,
    body: &mut dyn FnMut(&mut FunctionBuilder<'_>, Value),
) {
    if n == 0 {
        return;
    }
    if n == 1 {
        let z = b.ins().iconst(I64, 0);
        body(b, z);
        return;
    }
    let header = b.create_block();
    let exit = b.create_block();
    b.append_block_param(header, I64);
    let z = b.ins().iconst(I64, 0);
    b.ins().jump(header, &[BlockArg::Value(z)]);
    b.switch_to_block(header);
    let i = b.block_params(header)[0];
    body(b, i);
    let next = b.ins().iadd_imm_s(i, 1);
    let more = b.ins().icmp_imm_u(IntCC::UnsignedLessThan, next, n as i64);
    b.ins()
        .brif(more, header, &[BlockArg::Value(next)], exit, &[]);
    b.switch_to_block(exit);
}

/// `p + i * scale` (bytes).
pub(crate) fn offset(b: &mut FunctionBuilder<'_>, p: Value, i: Value, scale: usize) -> Value {
    if scale == 0 {
        return p;
    }
    let s = b.ins().imul_imm_u(i, scale as i64);
    b.ins().iadd(p, s)
}

/// f32 math on either scalars (`F32`) or vectors (`F32X4`).
#[derive(Clone, Copy)]
pub(crate) struct Math {
    /// `F32` or `F32X4`.
    pub ty: Type,
}

impl Math {
    pub(crate) fn vector(self) -> bool {
        self.ty == F32X4
    }

    fn ity(self) -> Type {
        if self.vector() { I32X4 } else { I32 }
    }

    /// A constant of this width.
    pub(crate) fn c(self, b: &mut FunctionBuilder<'_>, x: f32) -> Value {
        let s = b.ins().f32const(Ieee32::with_float(x));
        if self.vector() {
            b.ins().splat(F32X4, s)
        } else {
            s
        }
    }

    /// Loads one value of this width from `p + off`.
    pub(crate) fn load(self, b: &mut FunctionBuilder<'_>, p: Value, off: i32) -> Value {
        b.ins().load(self.ty, mem(), p, off)
    }

    /// Loads a scalar and broadcasts it to this width.
    pub(crate) fn load_splat(self, b: &mut FunctionBuilder<'_>, p: Value, off: i32) -> Value {
        let s = b.ins().load(F32, mem(), p, off);
        if self.vector() {
            b.ins().splat(F32X4, s)
        } else {
            s
        }
    }

    pub(crate) fn store(self, b: &mut FunctionBuilder<'_>, v: Value, p: Value, off: i32) {
        b.ins().store(mem(), v, p, off);
    }

    /// `cond ? x : y` for an `fcmp` result of this width.
    pub(crate) fn select(
        self,
        b: &mut FunctionBuilder<'_>,
        cond: Value,
        x: Value,
        y: Value,
    ) -> Value {
        if self.vector() {
            let mask = self.bitcast(b, F32X4, cond);
            b.ins().bitselect(mask, x, y)
        } else {
            b.ins().select(cond, x, y)
        }
    }

    /// `x > y ? x : y` (fcmp + select: cheaper than `fmax`'s NaN semantics).
    pub(crate) fn max(self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
        let c = b.ins().fcmp(FloatCC::GreaterThan, x, y);
        self.select(b, c, x, y)
    }

    /// `x < y ? x : y`.
    pub(crate) fn min(self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
        let c = b.ins().fcmp(FloatCC::LessThan, x, y);
        self.select(b, c, x, y)
    }

    pub(crate) fn bitcast(self, b: &mut FunctionBuilder<'_>, to: Type, v: Value) -> Value {
        let flags = if self.vector() {
            MemFlagsData::new().with_endianness(Endianness::Little)
        } else {
            MemFlagsData::new()
        };
        b.ins().bitcast(to, flags, v)
    }

    /// `exp(x)`: range reduction `x = n ln2 + r`, a degree-6 polynomial in `r` (Cephes
    /// `expf`), times `2^n` built in the exponent bits. About 1 ulp on `[-87, 88]`; above
    /// `ln(f32::MAX)` it is inf, below -87.34 (results under 2^-126) 0; NaN stays NaN.
    pub(crate) fn exp(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let x0 = x;
        // Up to the largest argument whose exp is finite: 2^n is applied in two halves below,
        // so n = 128 (x just under 88.72) still scales exactly.
        let hi = self.c(b, 88.722_84);
        let lo = self.c(b, -87.3);
        // Clamp so that a NaN passes through (`x > hi ? hi : x`).
        let above = b.ins().fcmp(FloatCC::GreaterThan, x, hi);
        let x = self.select(b, above, hi, x);
        let below = b.ins().fcmp(FloatCC::LessThan, x, lo);
        let x = self.select(b, below, lo, x);
        let log2e = self.c(b, std::f32::consts::LOG2_E);
        let t = b.ins().fmul(x, log2e);
        let n = b.ins().nearest(t);
        let c1 = self.c(b, -0.693_359_4);
        let c2 = self.c(b, 2.121_944_4e-4);
        let r = b.ins().fma(n, c1, x);
        let r = b.ins().fma(n, c2, r);
        let coeffs = [
            1.987_569_1e-4,
            1.398_199_9e-3,
            8.333_452e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            0.5,
        ];
        let mut p = self.c(b, coeffs[0]);
        for &k in &coeffs[1..] {
            let kc = self.c(b, k);
            p = b.ins().fma(p, r, kc);
        }
        let r2 = b.ins().fmul(r, r);
        let one = self.c(b, 1.0);
        let r1 = b.ins().fadd(r, one);
        let p = b.ins().fma(p, r2, r1);
        let ni = b.ins().fcvt_to_sint_sat(self.ity(), n);
        let bias = if self.vector() {
            let s = b.ins().iconst(I32, 127);
            b.ins().splat(I32X4, s)
        } else {
            b.ins().iconst(I32, 127)
        };
        // 2^n = 2^(n >> 1) * 2^(n - (n >> 1)): each half is a normal float for n in
        // [-126, 128], where a single 2^128 would not be.
        let n1 = b.ins().sshr_imm_u(ni, 1);
        let n2 = b.ins().isub(ni, n1);
        let mut r = p;
        for half in [n1, n2] {
            let e = b.ins().iadd(half, bias);
            let e = b.ins().ishl_imm_u(e, 23);
            let scale = self.bitcast(b, self.ty, e);
            r = b.ins().fmul(r, scale);
        }
        let max_arg = self.c(b, 88.722_84);
        let over = b.ins().fcmp(FloatCC::GreaterThan, x0, max_arg);
        let inf = self.c(b, f32::INFINITY);
        let r = self.select(b, over, inf, r);
        let min_arg = self.c(b, -87.336_55);
        let under = b.ins().fcmp(FloatCC::LessThan, x0, min_arg);
        let zero = self.c(b, 0.0);
        self.select(b, under, zero, r)
    }

    /// `1 / (1 + exp(-x))`.
    pub(crate) fn sigmoid(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let nx = b.ins().fneg(x);
        let e = self.exp(b, nx);
        let one = self.c(b, 1.0);
        let d = b.ins().fadd(one, e);
        b.ins().fdiv(one, d)
    }

    /// `tanh(x)`: an odd polynomial below |x| = 0.625 (Cephes `tanhf`), else
    /// `sign(x) (1 - 2 / (exp(2|x|) + 1))`.
    pub(crate) fn tanh(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let ax = b.ins().fabs(x);
        let two = self.c(b, 2.0);
        let one = self.c(b, 1.0);
        let t = b.ins().fmul(ax, two);
        let e = self.exp(b, t);
        let d = b.ins().fadd(e, one);
        let q = b.ins().fdiv(two, d);
        let big = b.ins().fsub(one, q);
        let zero = self.c(b, 0.0);
        let neg = b.ins().fcmp(FloatCC::LessThan, x, zero);
        let nbig = b.ins().fneg(big);
        let big = self.select(b, neg, nbig, big);
        let z = b.ins().fmul(x, x);
        let coeffs = [
            -5.704_988_7e-3,
            2.063_909e-2,
            -5.373_971_6e-2,
            1.333_144_2e-1,
            -3.333_328e-1,
        ];
        let mut p = self.c(b, coeffs[0]);
        for &k in &coeffs[1..] {
            let kc = self.c(b, k);
            p = b.ins().fma(p, z, kc);
        }
        let pz = b.ins().fmul(p, z);
        let small = b.ins().fma(pz, x, x);
        let limit = self.c(b, 0.625);
        let is_small = b.ins().fcmp(FloatCC::LessThan, ax, limit);
        self.select(b, is_small, small, big)
    }

    /// `erf(x)`: Abramowitz-Stegun 7.1.26 (absolute error below 1.5e-7) with the exp above.
    pub(crate) fn erf(self, b: &mut FunctionBuilder<'_>, x: Value) -> Value {
        let ax = b.ins().fabs(x);
        let one = self.c(b, 1.0);
        let p = self.c(b, 0.327_591_1);
        let d = b.ins().fma(p, ax, one);
        let t = b.ins().fdiv(one, d);
        let coeffs = [
            1.061_405_4,
            -1.453_152,
            1.421_413_8,
            -0.284_496_74,
            0.254_829_6,
        ];
        let mut poly = self.c(b, coeffs[0]);
        for &k in &coeffs[1..] {
            let kc = self.c(b, k);
            poly = b.ins().fma(poly, t, kc);
        }
        poly = b.ins().fmul(poly, t);
        let x2 = b.ins().fmul(x, x);
        let nx2 = b.ins().fneg(x2);
        let e = self.exp(b, nx2);
        let pe = b.ins().fmul(poly, e);
        let r = b.ins().fsub(one, pe);
        let zero = self.c(b, 0.0);
        let neg = b.ins().fcmp(FloatCC::LessThan, x, zero);
        let nr = b.ins().fneg(r);
        self.select(b, neg, nr, r)
    }

    /// Horizontal reduction of an f32x4 with `f` (max or add), to a scalar.
    pub(crate) fn hreduce(
        b: &mut FunctionBuilder<'_>,
        v: Value,
        f: fn(&mut FunctionBuilder<'_>, Value, Value) -> Value,
    ) -> Value {
        let l0 = b.ins().extractlane(v, 0);
        let l1 = b.ins().extractlane(v, 1);
        let l2 = b.ins().extractlane(v, 2);
        let l3 = b.ins().extractlane(v, 3);
        let a = f(b, l0, l1);
        let c = f(b, l2, l3);
        f(b, a, c)
    }
}
