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
//! - → bf16 rounds to nearest even from f32 (f64 and integer sources are first rounded to
//!   f32, as ml_dtypes does for onnx's reference); NaN stays NaN, overflow gives ±inf.
//! - f16 and bf16 sources widen exactly to f32 (denormals included).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, F32X4, F64, I16X8, I32, I32X4, I64, I64X2};
use cranelift_codegen::ir::{Endianness, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::mem;
use crate::ir::types::DType;

/// Converts `v` (in the computation domain of `from`: i64, f32 or f64) to the storage value
/// of `to`: i64 for integers (narrowed by the store), an i8 0/1 for bool, f32/f64, or the
/// f16 or bf16 bits in an i32.
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
        DType::F16 => {
            let f = to_f32(b, v, unsigned);
            f32_to_f16_bits(b, f)
        }
        DType::BF16 => {
            let f = to_f32(b, v, unsigned);
            f32_to_bf16_bits(b, f)
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

/// Integer/float helpers on one width: scalar `i32`/`f32` or the `i32x4`/`f32x4` vectors.
#[derive(Clone, Copy)]
pub(crate) struct Lanes {
    /// Vector (4 lanes) or scalar.
    pub vector: bool,
}

impl Lanes {
    fn ity(self) -> Type {
        if self.vector { I32X4 } else { I32 }
    }

    fn fty(self) -> Type {
        if self.vector { F32X4 } else { F32 }
    }

    fn k(self, b: &mut FunctionBuilder<'_>, v: i64) -> Value {
        let s = b.ins().iconst(I32, v);
        if self.vector {
            b.ins().splat(I32X4, s)
        } else {
            s
        }
    }

    fn fk(self, b: &mut FunctionBuilder<'_>, v: f32) -> Value {
        let s = b.ins().f32const(v);
        if self.vector {
            b.ins().splat(F32X4, s)
        } else {
            s
        }
    }

    fn cast(self, b: &mut FunctionBuilder<'_>, to: Type, v: Value) -> Value {
        let flags = if self.vector {
            MemFlagsData::new().with_endianness(Endianness::Little)
        } else {
            MemFlagsData::new()
        };
        b.ins().bitcast(to, flags, v)
    }

    fn bits(self, b: &mut FunctionBuilder<'_>, f: Value) -> Value {
        self.cast(b, self.ity(), f)
    }

    fn float(self, b: &mut FunctionBuilder<'_>, i: Value) -> Value {
        self.cast(b, self.fty(), i)
    }

    fn and(self, b: &mut FunctionBuilder<'_>, x: Value, m: i64) -> Value {
        let k = self.k(b, m);
        b.ins().band(x, k)
    }

    fn or(self, b: &mut FunctionBuilder<'_>, x: Value, m: i64) -> Value {
        let k = self.k(b, m);
        b.ins().bor(x, k)
    }

    fn shr(self, b: &mut FunctionBuilder<'_>, x: Value, n: i64) -> Value {
        let k = b.ins().iconst(I32, n);
        b.ins().ushr(x, k)
    }

    fn shl(self, b: &mut FunctionBuilder<'_>, x: Value, n: i64) -> Value {
        let k = b.ins().iconst(I32, n);
        b.ins().ishl(x, k)
    }

    /// `x cc k` as a condition for [`Lanes::select`].
    fn cmp(self, b: &mut FunctionBuilder<'_>, cc: IntCC, x: Value, k: i64) -> Value {
        let k = self.k(b, k);
        b.ins().icmp(cc, x, k)
    }

    fn select(self, b: &mut FunctionBuilder<'_>, c: Value, x: Value, y: Value) -> Value {
        if self.vector {
            b.ins().bitselect(c, x, y)
        } else {
            b.ins().select(c, x, y)
        }
    }

    /// f16 bits (zero-extended in i32 lanes) to the exact f32: the exponent/mantissa shifted
    /// into f32 position and scaled by 2^112 (normal and subnormal alike), inf/NaN rebuilt.
    pub(crate) fn f16_to_f32(self, b: &mut FunctionBuilder<'_>, h: Value) -> Value {
        let sign = self.and(b, h, 0x8000);
        let sign = self.shl(b, sign, 16);
        let em = self.and(b, h, 0x7fff);
        let sh = self.shl(b, em, 13);
        let f = self.float(b, sh);
        let k = self.fk(b, f32::from_bits(0x7780_0000)); // 2^112
        let f = b.ins().fmul(f, k);
        let fin = self.bits(b, f);
        let special = self.or(b, sh, 0x7f80_0000);
        let is_special = self.cmp(b, IntCC::UnsignedGreaterThanOrEqual, em, 0x7c00);
        let r = self.select(b, is_special, special, fin);
        let r = b.ins().bor(r, sign);
        self.float(b, r)
    }

    /// f32 to f16 bits (in i32 lanes), round to nearest even (F. Giesen's
    /// `float_to_half_fast3_rtne`): overflow to ±inf, NaN quiet with its top mantissa bits,
    /// subnormal results rounded by one f32 add.
    pub(crate) fn f32_to_f16(self, b: &mut FunctionBuilder<'_>, f: Value) -> Value {
        let x = self.bits(b, f);
        let sign = self.and(b, x, 0x8000_0000);
        let a = self.and(b, x, 0x7fff_ffff);
        // NaN / inf / overflow.
        let is_nan = self.cmp(b, IntCC::UnsignedGreaterThan, a, 0x7f80_0000);
        let nm = self.shr(b, a, 13);
        let nm = self.and(b, nm, 0x3ff);
        let nan = self.or(b, nm, 0x7e00);
        let inf = self.k(b, 0x7c00);
        let big_v = self.select(b, is_nan, nan, inf);
        let big = self.cmp(b, IntCC::UnsignedGreaterThanOrEqual, a, 0x4780_0000);
        // Subnormal results: the add rounds to nearest even at the f16 subnormal ulp.
        let small = self.cmp(b, IntCC::UnsignedLessThan, a, 0x3880_0000);
        let af = self.float(b, a);
        let magic = self.fk(b, f32::from_bits(0x3f00_0000));
        let s = b.ins().fadd(af, magic);
        let sb = self.bits(b, s);
        let mk = self.k(b, 0x3f00_0000);
        let small_v = b.ins().isub(sb, mk);
        // Normal results: rebias, round half to even on bit 13.
        let odd = self.shr(b, a, 13);
        let odd = self.and(b, odd, 1);
        let rebias = self.k(b, (-112_i64 << 23) + 0xfff);
        let n = b.ins().iadd(a, rebias);
        let n = b.ins().iadd(n, odd);
        let norm_v = self.shr(b, n, 13);
        let r = self.select(b, small, small_v, norm_v);
        let r = self.select(b, big, big_v, r);
        let sign16 = self.shr(b, sign, 16);
        b.ins().bor(r, sign16)
    }
}

/// f32 to bf16 bits in an i32, round to nearest even (the top half after adding
/// `0x7fff + lsb`); NaN keeps its top mantissa bits and becomes quiet; overflow gives ±inf.
pub(crate) fn f32_to_bf16_bits(b: &mut FunctionBuilder<'_>, f: Value) -> Value {
    let x = b.ins().bitcast(I32, MemFlagsData::new(), f);
    let a = b.ins().band_imm_u(x, 0x7fff_ffff);
    let is_nan = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThan, a, 0x7f80_0000);
    let hi = b.ins().ushr_imm_u(x, 16);
    let nan = b.ins().bor_imm_u(hi, 0x40);
    let lsb = b.ins().band_imm_u(hi, 1);
    let r = b.ins().iadd_imm_s(x, 0x7fff);
    let r = b.ins().iadd(r, lsb);
    let r = b.ins().ushr_imm_u(r, 16);
    b.ins().select(is_nan, nan, r)
}

/// f16 bits (zero-extended in an i32) to the exact f32.
pub(crate) fn f16_bits_to_f32(b: &mut FunctionBuilder<'_>, h: Value) -> Value {
    Lanes { vector: false }.f16_to_f32(b, h)
}

/// f32 to f16 bits in an i32, round to nearest even.
pub(crate) fn f32_to_f16_bits(b: &mut FunctionBuilder<'_>, f: Value) -> Value {
    Lanes { vector: false }.f32_to_f16(b, f)
}

/// Four f32 → f16 conversions: `src` holds 4 f32, `dst` receives 4 f16.
pub(crate) fn f32x4_to_f16(b: &mut FunctionBuilder<'_>, src: Value, dst: Value) {
    let l = Lanes { vector: true };
    let f = b.ins().load(F32X4, mem(), src, 0);
    let h = l.f32_to_f16(b, f);
    // Lanes hold 0..=0xffff: the saturating narrow is exact; the low 8 bytes are the result.
    let n = b.ins().unarrow(h, h);
    let q = l.cast(b, I64X2, n);
    let lo = b.ins().extractlane(q, 0);
    b.ins().store(mem(), lo, dst, 0);
}

/// Four f16 → f32 conversions: `src` holds 4 f16, `dst` receives 4 f32.
pub(crate) fn f16x4_to_f32(b: &mut FunctionBuilder<'_>, src: Value, dst: Value) {
    let l = Lanes { vector: true };
    let q = b.ins().load(I64, mem(), src, 0);
    let v = b.ins().scalar_to_vector(I64X2, q);
    let h = l.cast(b, I16X8, v);
    let w = b.ins().uwiden_low(h);
    let f = l.f16_to_f32(b, w);
    b.ins().store(mem(), f, dst, 0);
}
