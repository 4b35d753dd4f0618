//! Element-wise kernels on any dtype, one element at a time over the broadcast loop nest of
//! [`EwDesc`]: integer arithmetic, comparisons (bool bytes out), logical and bitwise ops,
//! shifts, Where on any element size, f64, f16 and bf16 arithmetic, float Mod, IsNaN/IsInf,
//! the float math ops on f16/bf16 (and the exact ones on f64, see `typed_math`), and Cast.
//! The f32 math stays in [`super::elementwise`] (f32x4).
//!
//! Values are computed in a domain per dtype, like the reference evaluation: every integer
//! and bool is widened to i64 (sign- or zero-extended) and narrowed on store, so wrapping
//! matches `as` casts; f32 and f64 stay native; f16 and bf16 widen exactly to f32 and their
//! results round to nearest even on store.
//!
//! Defined results where the reference errors or hardware would trap: integer `Div` and
//! `Mod` by zero give 0 (numpy's result), `i64::MIN / -1` wraps to `i64::MIN` and its
//! remainder is 0. Cast conversions are in [`super::cast`].

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, F64, I8, I16, I32, I64};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::cast::{convert, f16_bits_to_f32};
use super::elementwise::{Ew, EwDesc};
use super::typed_math;
use super::typed_vec;
use super::{Math, for_range, mem, offset};
use crate::ir::types::DType;
use crate::ops::MathOp;

/// The operation of one typed element-wise kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TOp {
    /// x (same dtype)
    Copy,
    /// a + b (wrapping for integers)
    Add,
    /// a - b
    Sub,
    /// a * b
    Mul,
    /// a / b (integers truncate toward zero; by zero gives 0)
    Div,
    /// Remainder: `fmod` the sign of a (C), else the sign of b (Python); by zero gives 0
    /// for integers.
    Mod {
        /// ONNX `fmod`.
        fmod: bool,
    },
    /// max(a, b) (floats propagate NaN)
    Max,
    /// min(a, b)
    Min,
    /// -x
    Neg,
    /// |x|
    Abs,
    /// max(x, 0)
    Relu,
    /// min(max(x, lo), hi) on integers, bounds in the i64 domain.
    Clip {
        /// Lower bound.
        lo: Option<i64>,
        /// Upper bound.
        hi: Option<i64>,
    },
    /// a == b (bool out)
    Equal,
    /// a < b (bool out)
    Less,
    /// a > b (bool out)
    Greater,
    /// a >= b (bool out)
    GreaterEq,
    /// a <= b (bool out)
    LessEq,
    /// a & b (integers; on bools the logical and)
    And,
    /// a | b
    Or,
    /// a ^ b
    Xor,
    /// !x on bools (x ^ 1)
    Not,
    /// !x on integers (every bit)
    BitNot,
    /// a << b; an amount outside `0..bits` gives 0.
    Shl,
    /// a >> b (arithmetic for signed dtypes); an amount outside `0..bits` gives 0, or -1
    /// for a negative a.
    Shr,
    /// cond ? x : y (cond a bool byte; x, y any dtype, copied bit for bit)
    Where,
    /// Conversion from the input's dtype to the output's.
    Cast,
    /// Float math of the f32 kernels on f16/bf16 widened to f32; on f64 only the exact
    /// [`MathOp`]s (Floor, Ceil, Round, Sign); on integers only Sign.
    Math(MathOp),
    /// x is NaN (bool out).
    IsNaN,
    /// x is +inf (`pos`) or -inf (`neg`) (bool out).
    IsInf {
        /// Detect +inf.
        pos: bool,
        /// Detect -inf.
        neg: bool,
    },
}

/// One typed element-wise kernel: operand dtypes, output dtype, and the collapsed broadcast
/// loop nest (from [`EwDesc::new`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TypedDesc {
    /// The operation.
    pub op: TOp,
    /// Operand dtypes.
    pub ins: Vec<DType>,
    /// Output dtype.
    pub out: DType,
    /// Output dims after collapsing (at least one).
    pub dims: Vec<usize>,
    /// Per input, element strides over `dims` (0 = broadcast).
    pub strides: Vec<Vec<usize>>,
}

/// Where a dtype's values are computed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Domain {
    /// i64, signed (or unsigned for u64).
    Int { unsigned: bool },
    /// f32 (also f16 and bf16, widened exactly).
    F32,
    /// f64.
    F64,
}

fn domain(dt: DType) -> Domain {
    match dt {
        DType::F32 | DType::F16 | DType::BF16 => Domain::F32,
        DType::F64 => Domain::F64,
        DType::U64 => Domain::Int { unsigned: true },
        _ => Domain::Int { unsigned: false },
    }
}

impl TypedDesc {
    /// The kernel for operands `ins` (dtype, shape) broadcast to `out_shape`, writing `out`.
    pub fn new(op: TOp, ins: &[(DType, &[usize])], out: DType, out_shape: &[usize]) -> TypedDesc {
        let shapes: Vec<&[usize]> = ins.iter().map(|i| i.1).collect();
        let e = EwDesc::new(Ew::Copy, &shapes, out_shape);
        TypedDesc {
            op,
            ins: ins.iter().map(|i| i.0).collect(),
            out,
            dims: e.dims,
            strides: e.strides,
        }
    }

    /// Why no kernel exists for this dtype combination (`None`: supported).
    pub fn unsupported(&self) -> Option<String> {
        let x = *self.ins.get(usize::from(self.op == TOp::Where))?;
        let dom = domain(x);
        let storage = self.ins.iter().chain([&self.out]).any(|d| d.is_storage());
        let ok = match self.op {
            _ if storage => self.op == TOp::Copy,
            TOp::Where | TOp::Copy => true,
            TOp::Cast => true,
            TOp::Equal | TOp::Less | TOp::Greater | TOp::GreaterEq | TOp::LessEq => true,
            TOp::And | TOp::Or | TOp::Xor | TOp::Not | TOp::BitNot | TOp::Shl | TOp::Shr => {
                matches!(dom, Domain::Int { .. })
            }
            TOp::Math(m) => match dom {
                Domain::F32 => x != DType::F32 && !m.is_predicate(),
                Domain::F64 => m.is_exact() && !m.is_predicate(),
                Domain::Int { .. } => m.takes_integers(),
            },
            TOp::IsNaN | TOp::IsInf { .. } => x.is_float(),
            TOp::Mod { .. } => true,
            TOp::Relu | TOp::Clip { .. } => matches!(dom, Domain::Int { .. }),
            // f16 and bf16 compute in f32 and narrow on store; f32 has the f32x4 kernels.
            _ => x != DType::F32,
        };
        (!ok).then(|| match self.op {
            TOp::Cast => format!("Cast from {} to {}", x.name(), self.out.name()),
            op => format!("{op:?} on {}", x.name()),
        })
    }

    /// Emits the body: `ptrs` are the inputs then the output.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, ptrs: &[Value]) {
        self.level(b, 0, ptrs);
    }

    fn level(&self, b: &mut FunctionBuilder<'_>, k: usize, ptrs: &[Value]) {
        let n_in = self.strides.len();
        let last = k + 1 == self.dims.len();
        let out_stride: usize = self.dims[k + 1..].iter().product();
        let len = self.dims[k];
        let inner: Vec<usize> = self.strides.iter().map(|s| s[k]).collect();
        let vstep = typed_vec::step(self.op, &self.ins, self.out, &inner);
        if let (true, Some(f)) = (last, vstep) {
            let sizes: Vec<usize> = self
                .ins
                .iter()
                .chain([&self.out])
                .map(|d| d.size())
                .collect();
            let mut st = inner.clone();
            st.push(1);
            for_range(b, len / 4, &mut |b, i| {
                let next: Vec<Value> = (0..=n_in)
                    .map(|j| offset(b, ptrs[j], i, 4 * st[j] * sizes[j]))
                    .collect();
                f(b, self.op, &next, &inner);
            });
            // The scalar tail, from element len / 4 * 4 on.
            let done = len / 4 * 4;
            let c = b.ins().iconst(I64, done as i64);
            let tail: Vec<Value> = (0..=n_in)
                .map(|j| offset(b, ptrs[j], c, st[j] * sizes[j]))
                .collect();
            for_range(b, len - done, &mut |b, i| {
                let next: Vec<Value> = (0..=n_in)
                    .map(|j| offset(b, tail[j], i, st[j] * sizes[j]))
                    .collect();
                self.element(b, &next);
            });
            return;
        }
        for_range(b, len, &mut |b, i| {
            let mut next: Vec<Value> = Vec::with_capacity(ptrs.len());
            for (j, st) in self.strides.iter().enumerate() {
                next.push(offset(b, ptrs[j], i, st[k] * self.ins[j].size()));
            }
            next.push(offset(b, ptrs[n_in], i, out_stride * self.out.size()));
            if last {
                self.element(b, &next);
            } else {
                self.level(b, k + 1, &next);
            }
        });
    }

    fn element(&self, b: &mut FunctionBuilder<'_>, p: &[Value]) {
        let n_in = self.ins.len();
        let y = match self.op {
            TOp::Where => {
                let c = b.ins().uload8(I64, mem(), p[0], 0);
                let ty = raw_type(self.out);
                let x = b.ins().load(ty, mem(), p[1], 0);
                let z = b.ins().load(ty, mem(), p[2], 0);
                b.ins().select(c, x, z)
            }
            TOp::Copy => b.ins().load(raw_type(self.out), mem(), p[0], 0),
            TOp::Cast => {
                let v = load(b, self.ins[0], p[0]);
                convert(b, v, self.ins[0], self.out)
            }
            TOp::Shl | TOp::Shr => {
                let dt = self.ins[0];
                let (a, q) = (load(b, dt, p[0]), load(b, dt, p[1]));
                shift(b, self.op == TOp::Shl, dt, a, q)
            }
            op => {
                let dt = self.ins[0];
                let vals: Vec<Value> = (0..n_in).map(|j| load(b, dt, p[j])).collect();
                let y = apply(b, op, domain(dt), &vals);
                typed_math::narrow(b, self.out, y)
            }
        };
        store(b, self.out, y, p[n_in]);
    }
}

/// The register type holding a dtype's bits for copying.
fn raw_type(dt: DType) -> Type {
    match dt.size() {
        1 => I8,
        2 => I16,
        4 => I32,
        _ => I64,
    }
}

/// Loads one element into its computation domain.
fn load(b: &mut FunctionBuilder<'_>, dt: DType, p: Value) -> Value {
    match dt {
        DType::F32 => b.ins().load(F32, mem(), p, 0),
        DType::F64 => b.ins().load(F64, mem(), p, 0),
        DType::F16 => {
            let h = b.ins().uload16(I32, mem(), p, 0);
            f16_bits_to_f32(b, h)
        }
        DType::BF16 => {
            let h = b.ins().uload16(I32, mem(), p, 0);
            let s = b.ins().ishl_imm_u(h, 16);
            b.ins().bitcast(F32, MemFlagsData::new(), s)
        }
        DType::I8 => b.ins().sload8(I64, mem(), p, 0),
        DType::U8 => b.ins().uload8(I64, mem(), p, 0),
        // Any nonzero byte is true (the reference's reading): 0 or 1 from here on.
        DType::Bool => {
            let v = b.ins().uload8(I64, mem(), p, 0);
            let t = b.ins().icmp_imm_u(IntCC::NotEqual, v, 0);
            b.ins().uextend(I64, t)
        }
        DType::I16 => b.ins().sload16(I64, mem(), p, 0),
        DType::U16 => b.ins().uload16(I64, mem(), p, 0),
        DType::I32 => b.ins().sload32(mem(), p, 0),
        DType::U32 => b.ins().uload32(mem(), p, 0),
        DType::I64 | DType::U64 => b.ins().load(I64, mem(), p, 0),
        // Only Copy takes the storage types here (`TypedDesc::unsupported`); their Casts are
        // `super::storage`'s.
        DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1
        | DType::I4
        | DType::U4
        | DType::I2
        | DType::U2 => b.ins().uload8(I64, mem(), p, 0),
    }
}

/// Stores `v` as `dt`: a value wider than the element (the i64 of an integer, the i32 of f16
/// bits) is narrowed by the store; others are stored as they are.
fn store(b: &mut FunctionBuilder<'_>, dt: DType, v: Value, p: Value) {
    let width = b.func.dfg.value_type(v).bytes() as usize;
    match dt.size() {
        n if n == width => {
            b.ins().store(mem(), v, p, 0);
        }
        1 => {
            b.ins().istore8(mem(), v, p, 0);
        }
        2 => {
            b.ins().istore16(mem(), v, p, 0);
        }
        _ => {
            b.ins().istore32(mem(), v, p, 0);
        }
    }
}

fn apply(b: &mut FunctionBuilder<'_>, op: TOp, dom: Domain, x: &[Value]) -> Value {
    match dom {
        Domain::Int { unsigned } => int_op(b, op, unsigned, x),
        Domain::F32 | Domain::F64 => float_op(b, op, x),
    }
}

fn int_op(b: &mut FunctionBuilder<'_>, op: TOp, unsigned: bool, x: &[Value]) -> Value {
    let a = x[0];
    let c = x.get(1).copied().unwrap_or(a);
    let (gt, lt) = if unsigned {
        (IntCC::UnsignedGreaterThan, IntCC::UnsignedLessThan)
    } else {
        (IntCC::SignedGreaterThan, IntCC::SignedLessThan)
    };
    let pick = |b: &mut FunctionBuilder<'_>, cc: IntCC, p: Value, q: Value| {
        let t = b.ins().icmp(cc, p, q);
        b.ins().select(t, p, q)
    };
    match op {
        TOp::Copy | TOp::Where | TOp::Cast => a,
        TOp::Add => b.ins().iadd(a, c),
        TOp::Sub => b.ins().isub(a, c),
        TOp::Mul => b.ins().imul(a, c),
        TOp::Div | TOp::Mod { .. } => int_div(b, op, unsigned, a, c),
        TOp::Max => pick(b, gt, a, c),
        TOp::Min => pick(b, lt, a, c),
        TOp::Neg => b.ins().ineg(a),
        TOp::Abs if unsigned => a,
        TOp::Abs => {
            let n = b.ins().ineg(a);
            let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, a, 0);
            b.ins().select(neg, n, a)
        }
        TOp::Relu if unsigned => a,
        TOp::Relu => {
            let z = b.ins().iconst(I64, 0);
            pick(b, gt, a, z)
        }
        TOp::Clip { lo, hi } => {
            let mut r = a;
            if let Some(lo) = lo {
                let l = b.ins().iconst(I64, lo);
                r = pick(b, gt, r, l);
            }
            if let Some(hi) = hi {
                let h = b.ins().iconst(I64, hi);
                r = pick(b, lt, r, h);
            }
            r
        }
        TOp::Equal => b.ins().icmp(IntCC::Equal, a, c),
        TOp::Less => b.ins().icmp(lt, a, c),
        TOp::Greater => b.ins().icmp(gt, a, c),
        TOp::Math(_) => typed_math::sign_i64(b, a, unsigned),
        TOp::IsNaN | TOp::IsInf { .. } => a,
        TOp::GreaterEq => {
            let cc = if unsigned {
                IntCC::UnsignedGreaterThanOrEqual
            } else {
                IntCC::SignedGreaterThanOrEqual
            };
            b.ins().icmp(cc, a, c)
        }
        TOp::LessEq => {
            let cc = if unsigned {
                IntCC::UnsignedLessThanOrEqual
            } else {
                IntCC::SignedLessThanOrEqual
            };
            b.ins().icmp(cc, a, c)
        }
        TOp::And => b.ins().band(a, c),
        TOp::Or => b.ins().bor(a, c),
        TOp::Xor => b.ins().bxor(a, c),
        TOp::Not => b.ins().bxor_imm_u(a, 1),
        TOp::BitNot => b.ins().bnot(a),
        // Shifts need the dtype's width: `TypedDesc::element` emits them with `shift`.
        TOp::Shl | TOp::Shr => a,
    }
}

/// `a << q` or `a >> q` on `dt` (both in the i64 domain, sign- or zero-extended; the store
/// narrows): an amount outside `0..bits` (a negative one is huge as unsigned) gives 0, or
/// the sign fill for a right shift (an arithmetic shift by 63 of the extended value).
fn shift(b: &mut FunctionBuilder<'_>, left: bool, dt: DType, a: Value, q: Value) -> Value {
    let bits = 8 * dt.size() as i64;
    let out = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, q, bits);
    let zero = b.ins().iconst(I64, 0);
    if left {
        let r = b.ins().ishl(a, q);
        return b.ins().select(out, zero, r);
    }
    if dt == DType::U64 {
        let r = b.ins().ushr(a, q);
        return b.ins().select(out, zero, r);
    }
    // Every other dtype is extended to i64, so an arithmetic shift is exact for both.
    let k63 = b.ins().iconst(I64, 63);
    let amount = b.ins().select(out, k63, q);
    b.ins().sshr(a, amount)
}

/// Division and remainder that never trap: the divisor 0 and -1 are replaced by 1 for the
/// hardware instruction and their results patched (by zero: 0; by -1: `-a` and 0).
fn int_div(b: &mut FunctionBuilder<'_>, op: TOp, unsigned: bool, a: Value, q: Value) -> Value {
    let zero = b.ins().iconst(I64, 0);
    let one = b.ins().iconst(I64, 1);
    let is0 = b.ins().icmp_imm_s(IntCC::Equal, q, 0);
    let ism1 = b.ins().icmp_imm_s(IntCC::Equal, q, -1);
    let bad = if unsigned {
        is0
    } else {
        b.ins().bor(is0, ism1)
    };
    let safe = b.ins().select(bad, one, q);
    let r = match (op, unsigned) {
        (TOp::Div, true) => b.ins().udiv(a, safe),
        (TOp::Div, false) => {
            let r = b.ins().sdiv(a, safe);
            let n = b.ins().ineg(a);
            b.ins().select(ism1, n, r)
        }
        (_, true) => b.ins().urem(a, safe),
        (_, false) => {
            let r = b.ins().srem(a, safe);
            let r = b.ins().select(ism1, zero, r);
            if op == (TOp::Mod { fmod: false }) {
                // Python: a nonzero remainder takes the sign of the divisor.
                let rneg = b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0);
                let qneg = b.ins().icmp_imm_s(IntCC::SignedLessThan, q, 0);
                let differ = b.ins().bxor(rneg, qneg);
                let nz = b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
                let fix = b.ins().band(differ, nz);
                let rq = b.ins().iadd(r, q);
                b.ins().select(fix, rq, r)
            } else {
                r
            }
        }
    };
    b.ins().select(is0, zero, r)
}

fn float_op(b: &mut FunctionBuilder<'_>, op: TOp, x: &[Value]) -> Value {
    let a = x[0];
    let c = x.get(1).copied().unwrap_or(a);
    match op {
        TOp::Add => b.ins().fadd(a, c),
        TOp::Sub => b.ins().fsub(a, c),
        TOp::Mul => b.ins().fmul(a, c),
        TOp::Div => b.ins().fdiv(a, c),
        TOp::Max => b.ins().fmax(a, c),
        TOp::Min => b.ins().fmin(a, c),
        TOp::Neg => b.ins().fneg(a),
        TOp::Abs => b.ins().fabs(a),
        TOp::Equal => b.ins().fcmp(FloatCC::Equal, a, c),
        TOp::Less => b.ins().fcmp(FloatCC::LessThan, a, c),
        TOp::Greater => b.ins().fcmp(FloatCC::GreaterThan, a, c),
        TOp::GreaterEq => b.ins().fcmp(FloatCC::GreaterThanOrEqual, a, c),
        TOp::LessEq => b.ins().fcmp(FloatCC::LessThanOrEqual, a, c),
        TOp::Mod { fmod: true } => float_mod(b, a, c),
        TOp::Mod { fmod: false } => {
            let r = float_mod(b, a, c);
            typed_math::floored_mod(b, r, c)
        }
        TOp::Math(m) if b.func.dfg.value_type(a) == F32 => Math { ty: F32 }.math(b, m, a),
        TOp::Math(m) => typed_math::exact_f64(b, m, a).unwrap_or(a),
        TOp::IsNaN => typed_math::is_nan_inf(b, a, None),
        TOp::IsInf { pos, neg } => typed_math::is_nan_inf(b, a, Some((pos, neg))),
        // Relu and Clip on floats take the f32x4 path; Copy/Where/Cast are handled above.
        _ => a,
    }
}

/// C `fmod` in f64: `r = fma(-trunc(a / b), b, a)`, then one correction when the rounded
/// quotient was off by one. Exact while `|a / b| < 2^53` (always for f32 operands whose
/// exponents differ by less than 53; beyond that the result is only approximately right).
fn float_mod(b: &mut FunctionBuilder<'_>, a: Value, c: Value) -> Value {
    let ty = b.func.dfg.value_type(a);
    let (a, c) = if ty == F32 {
        (b.ins().fpromote(F64, a), b.ins().fpromote(F64, c))
    } else {
        (a, c)
    };
    let q = b.ins().fdiv(a, c);
    let t = b.ins().trunc(q);
    let nt = b.ins().fneg(t);
    let r = b.ins().fma(nt, c, a);
    let ac = b.ins().fabs(c);
    let z = b.ins().f64const(0.0);
    // r must have the sign of a and |r| < |c|.
    let a_neg = b.ins().fcmp(FloatCC::LessThan, a, z);
    let r_neg = b.ins().fcmp(FloatCC::LessThan, r, z);
    let r_pos = b.ins().fcmp(FloatCC::GreaterThan, r, z);
    let up = b.ins().fadd(r, ac);
    let down = b.ins().fsub(r, ac);
    let fix_up = b.ins().band_not(r_neg, a_neg);
    let fix_down = b.ins().band(r_pos, a_neg);
    let r = b.ins().select(fix_up, up, r);
    let r = b.ins().select(fix_down, down, r);
    let ar = b.ins().fabs(r);
    let big = b.ins().fcmp(FloatCC::GreaterThanOrEqual, ar, ac);
    let toward = b.ins().fcopysign(ac, r);
    let less = b.ins().fsub(r, toward);
    let r = b.ins().select(big, less, r);
    // fmod(a, ±inf) = a for finite a (the fma above would give 0 * inf = NaN).
    let inf = b.ins().f64const(f64::INFINITY);
    let c_inf = b.ins().fcmp(FloatCC::Equal, ac, inf);
    let aa = b.ins().fabs(a);
    let a_fin = b.ins().fcmp(FloatCC::LessThan, aa, inf);
    let keep = b.ins().band(c_inf, a_fin);
    let r = b.ins().select(keep, a, r);
    if ty == F32 {
        b.ins().fdemote(F32, r)
    } else {
        r
    }
}
