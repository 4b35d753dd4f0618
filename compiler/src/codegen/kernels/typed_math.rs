//! Helpers of the typed element-wise kernels for float math: the exact [`MathOp`]s on f64,
//! Sign on integers, the float predicates IsNaN/IsInf, numpy's floored float Mod, and the
//! f32 → f16/bf16 narrowing of results computed in f32.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, F64, I8, I32, I64};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;

use super::cast::f32_to_f16_bits;
use crate::ir::types::DType;
use crate::ops::MathOp;

/// The exact ops (Floor, Ceil, Round, Sign) on one f64 value; `None` for the others.
pub(crate) fn exact_f64(b: &mut FunctionBuilder<'_>, op: MathOp, x: Value) -> Option<Value> {
    Some(match op {
        MathOp::Floor => b.ins().floor(x),
        MathOp::Ceil => b.ins().ceil(x),
        MathOp::Round => b.ins().nearest(x),
        MathOp::Sign => {
            let z = b.ins().f64const(0.0);
            let one = b.ins().f64const(1.0);
            let m1 = b.ins().f64const(-1.0);
            let pos = b.ins().fcmp(FloatCC::GreaterThan, x, z);
            let neg = b.ins().fcmp(FloatCC::LessThan, x, z);
            let r = b.ins().select(neg, m1, x);
            b.ins().select(pos, one, r)
        }
        _ => return None,
    })
}

/// Sign of one integer in the i64 domain (`unsigned`: u64).
pub(crate) fn sign_i64(b: &mut FunctionBuilder<'_>, x: Value, unsigned: bool) -> Value {
    let z = b.ins().iconst(I64, 0);
    let nz = b.ins().icmp(IntCC::NotEqual, x, z);
    let p = b.ins().uextend(I64, nz);
    if unsigned {
        return p;
    }
    let neg = b.ins().icmp(IntCC::SignedLessThan, x, z);
    let m1 = b.ins().iconst(I64, -1);
    b.ins().select(neg, m1, p)
}

/// IsNaN (`inf` = `None`) or IsInf (`Some((pos, neg))`) of one f32 or f64 value: an i8 0/1.
pub(crate) fn is_nan_inf(
    b: &mut FunctionBuilder<'_>,
    x: Value,
    inf: Option<(bool, bool)>,
) -> Value {
    let Some((pos, neg)) = inf else {
        return b.ins().fcmp(FloatCC::Unordered, x, x);
    };
    let f64_ = b.func.dfg.value_type(x) == F64;
    let (pi, ni) = if f64_ {
        (
            b.ins().f64const(f64::INFINITY),
            b.ins().f64const(f64::NEG_INFINITY),
        )
    } else {
        (
            b.ins().f32const(f32::INFINITY),
            b.ins().f32const(f32::NEG_INFINITY),
        )
    };
    let p = b.ins().fcmp(FloatCC::Equal, x, pi);
    let n = b.ins().fcmp(FloatCC::Equal, x, ni);
    match (pos, neg) {
        (true, true) => b.ins().bor(p, n),
        (true, false) => p,
        (false, true) => n,
        (false, false) => b.ins().iconst(I8, 0),
    }
}

/// numpy's floored `mod` from C fmod's `r` (same width, f32 or f64): a non-zero `r` whose
/// sign differs from `q`'s moves by `q`; a zero takes `q`'s sign.
pub(crate) fn floored_mod(b: &mut FunctionBuilder<'_>, r: Value, q: Value) -> Value {
    let ty = b.func.dfg.value_type(r);
    let z = if ty == F64 {
        b.ins().f64const(0.0)
    } else {
        b.ins().f32const(0.0)
    };
    let r_neg = b.ins().fcmp(FloatCC::LessThan, r, z);
    let r_pos = b.ins().fcmp(FloatCC::GreaterThan, r, z);
    let q_neg = b.ins().fcmp(FloatCC::LessThan, q, z);
    let q_pos = b.ins().fcmp(FloatCC::GreaterThan, q, z);
    let a = b.ins().band(r_neg, q_pos);
    let c = b.ins().band(r_pos, q_neg);
    let fix = b.ins().bor(a, c);
    let moved = b.ins().fadd(r, q);
    let r2 = b.ins().select(fix, moved, r);
    let is_zero = b.ins().fcmp(FloatCC::Equal, r, z);
    let signed_zero = b.ins().fcopysign(z, q);
    b.ins().select(is_zero, signed_zero, r2)
}

/// An f32 result narrowed to the storage of `out`: f16 or bf16 bits (round to nearest even;
/// NaN stays a quiet NaN) in an i32; any other value is returned as it is.
pub(crate) fn narrow(b: &mut FunctionBuilder<'_>, out: DType, v: Value) -> Value {
    if b.func.dfg.value_type(v) != F32 {
        return v;
    }
    match out {
        DType::F16 => f32_to_f16_bits(b, v),
        DType::BF16 => {
            let bits = b.ins().bitcast(I32, MemFlagsData::new(), v);
            let hi = b.ins().ushr_imm_u(bits, 16);
            let lsb = b.ins().band_imm_u(hi, 1);
            let r = b.ins().iadd_imm_s(bits, 0x7fff);
            let r = b.ins().iadd(r, lsb);
            let r = b.ins().ushr_imm_u(r, 16);
            let quiet = b.ins().bor_imm_u(hi, 0x40);
            let nan = b.ins().fcmp(FloatCC::Unordered, v, v);
            b.ins().select(nan, quiet, r)
        }
        _ => v,
    }
}
