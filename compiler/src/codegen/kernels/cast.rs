//! Cast conversions for the typed element-wise kernels, matching the reference evaluation:
//!
//! - float → integer truncates toward zero to i64, saturating, NaN → 0, then wraps to the
//!   target width (`(v as i64) as T` in Rust). onnxruntime's `static_cast` is undefined
//!   there; this is the reference's choice, kept bit for bit.
//! - float or integer → bool is `v != 0` (NaN → true).
//! - integer → f32 goes through f64 (`(v as f64) as f32`, so i64 rounds twice like the
//!   reference); u64 converts as unsigned.
//! - → f16 rounds to nearest even from f32 (f64 sources are first rounded to f32, which is
//!   what the reference's `half` crate does with F16C and what Eigen does in onnxruntime);
//!   NaN keeps its top mantissa bits and becomes quiet; overflow gives ±inf.
//! - f16 and bf16 sources widen exactly to f32 (denormals included).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, F64, I32, I64};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;

use crate::ir::types::DType;

/// Converts `v` (in the computation domain of `from`: i64, f32 or f64) to the storage value
/// of `to`: i64 for integers (narrowed by the store), an i8 0/1 for bool, f32/f64, or the
/// f16 bits in an i32. bf16 targets are rejected before emission (see `TypedDesc`).
pub(crate) fn convert(b: &mut FunctionBuilder<'_>, v: Value, from: DType, to: DType) -> Value {
    let vt = b.func.dfg.value_type(v);
    let unsigned = from == DType::U64;
    match to {
        DType::Bool => {
            if vt == I64 {
                b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
            } else {
                let z = if vt == F32 {
                    b.ins().f32const(0.0)
                } else {
                    b.ins().f64const(0.0)
                };
                b.ins().fcmp(FloatCC::NotEqual, v, z)
            }
        }
        DType::F64 => to_f64(b, v, unsigned),
        DType::F32 => to_f32(b, v, unsigned),
        DType::F16 | DType::BF16 => {
            let f = to_f32(b, v, unsigned);
            f32_to_f16_bits(b, f)
        }
        _ => {
            if vt == I64 {
                v
            } else {
                b.ins().fcvt_to_sint_sat(I64, v)
            }
        }
    }
}

fn to_f64(b: &mut FunctionBuilder<'_>, v: Value, unsigned: bool) -> Value {
    let vt = b.func.dfg.value_type(v);
    if vt == I64 {
        if unsigned {
            b.ins().fcvt_from_uint(F64, v)
        } else {
            b.ins().fcvt_from_sint(F64, v)
        }
    } else if vt == F32 {
        b.ins().fpromote(F64, v)
    } else {
        v
    }
}

fn to_f32(b: &mut FunctionBuilder<'_>, v: Value, unsigned: bool) -> Value {
    if b.func.dfg.value_type(v) == F32 {
        return v;
    }
    let d = to_f64(b, v, unsigned);
    b.ins().fdemote(F32, d)
}

fn bits(b: &mut FunctionBuilder<'_>, f: Value) -> Value {
    b.ins().bitcast(I32, MemFlagsData::new(), f)
}

fn float(b: &mut FunctionBuilder<'_>, i: Value) -> Value {
    b.ins().bitcast(F32, MemFlagsData::new(), i)
}

/// f16 bits (zero-extended in an i32) to the exact f32: the exponent/mantissa shifted into
/// f32 position and scaled by 2^112 (normal and subnormal alike), inf/NaN rebuilt.
pub(crate) fn f16_bits_to_f32(b: &mut FunctionBuilder<'_>, h: Value) -> Value {
    let sign = b.ins().band_imm_u(h, 0x8000);
    let sign = b.ins().ishl_imm_u(sign, 16);
    let em = b.ins().band_imm_u(h, 0x7fff);
    let sh = b.ins().ishl_imm_u(em, 13);
    let f = float(b, sh);
    let k = b.ins().f32const(f32::from_bits(0x7780_0000)); // 2^112
    let f = b.ins().fmul(f, k);
    let fin = bits(b, f);
    let special = b.ins().bor_imm_u(sh, 0x7f80_0000);
    let is_special = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, em, 0x7c00);
    let r = b.ins().select(is_special, special, fin);
    let r = b.ins().bor(r, sign);
    float(b, r)
}

/// f32 to f16 bits (in an i32), round to nearest even (F. Giesen's `float_to_half_fast3_rtne`):
/// overflow to ±inf, NaN quiet with its top mantissa bits, subnormals rounded by one f32 add.
pub(crate) fn f32_to_f16_bits(b: &mut FunctionBuilder<'_>, f: Value) -> Value {
    let x = bits(b, f);
    let sign = b.ins().band_imm_u(x, 0x8000_0000);
    let a = b.ins().band_imm_u(x, 0x7fff_ffff);
    // NaN / inf / overflow.
    let is_nan = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThan, a, 0x7f80_0000);
    let nm = b.ins().ushr_imm_u(a, 13);
    let nm = b.ins().band_imm_u(nm, 0x3ff);
    let nan = b.ins().bor_imm_u(nm, 0x7e00);
    let inf = b.ins().iconst(I32, 0x7c00);
    let big_v = b.ins().select(is_nan, nan, inf);
    let big = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, a, 0x4780_0000);
    // Subnormal results: the add rounds to nearest even at the f16 subnormal ulp.
    let small = b.ins().icmp_imm_u(IntCC::UnsignedLessThan, a, 0x3880_0000);
    let af = float(b, a);
    let magic = b.ins().f32const(f32::from_bits(0x3f00_0000));
    let s = b.ins().fadd(af, magic);
    let sb = bits(b, s);
    let small_v = b.ins().iadd_imm_s(sb, -0x3f00_0000);
    // Normal results: rebias, round half to even on bit 13.
    let odd = b.ins().ushr_imm_u(a, 13);
    let odd = b.ins().band_imm_u(odd, 1);
    let n = b.ins().iadd_imm_s(a, (-112_i64 << 23) + 0xfff);
    let n = b.ins().iadd(n, odd);
    let norm_v = b.ins().ushr_imm_u(n, 13);
    let r = b.ins().select(small, small_v, norm_v);
    let r = b.ins().select(big, big_v, r);
    let sign16 = b.ins().ushr_imm_u(sign, 16);
    b.ins().bor(r, sign16)
}
