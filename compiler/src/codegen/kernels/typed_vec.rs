//! Four-lane steps of the typed element-wise kernels, for the innermost dim when every input
//! walks it contiguously or is broadcast along it: f32 ↔ f16 Cast, Where on 4-byte elements
//! and f32 comparisons. [`super::typed::TypedDesc`] runs them over `len / 4` steps and the
//! scalar kernel over the tail.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32X4, I8X16, I32, I32X4};
use cranelift_codegen::ir::{Endianness, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::cast::{f16x4_to_f32, f32x4_to_f16};
use super::mem;
use super::typed::TOp;
use crate::ir::types::DType;

/// One four-element step: input pointers (at element `i`), their innermost strides (0 or 1),
/// then the output pointer.
pub(crate) type Step = fn(&mut FunctionBuilder<'_>, TOp, &[Value], &[usize]);

/// The four-lane step for this op and these dtypes, if there is one and every innermost
/// stride is 0 or 1 (`contiguous`: all of them 1).
pub(crate) fn step(op: TOp, ins: &[DType], out: DType, last: &[usize]) -> Option<Step> {
    let contiguous = last.iter().all(|&s| s == 1);
    let simple = last.iter().all(|&s| s <= 1);
    match (op, ins.first(), out) {
        (TOp::Cast, Some(DType::F32), DType::F16) if contiguous => Some(|b, _, p, _| {
            f32x4_to_f16(b, p[0], p[1]);
        }),
        (TOp::Cast, Some(DType::F16), DType::F32) if contiguous => Some(|b, _, p, _| {
            f16x4_to_f32(b, p[0], p[1]);
        }),
        (TOp::Where, _, o) if o.size() == 4 && simple => Some(where4),
        (
            TOp::Equal | TOp::Less | TOp::Greater | TOp::GreaterEq | TOp::LessEq,
            Some(DType::F32),
            _,
        ) if simple => Some(compare_f32),
        _ => None,
    }
}

fn little() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// Four lanes of `ty` from `p`: a vector load (stride 1) or a splatted scalar (stride 0).
fn lanes(b: &mut FunctionBuilder<'_>, ty: Type, p: Value, stride: usize) -> Value {
    if stride == 1 {
        b.ins().load(ty, mem(), p, 0)
    } else {
        let s = b.ins().load(ty.lane_type(), mem(), p, 0);
        b.ins().splat(ty, s)
    }
}

/// `cond ? x : y` on 4-byte elements: four condition bytes widened to lane masks.
fn where4(b: &mut FunctionBuilder<'_>, _: TOp, p: &[Value], st: &[usize]) {
    let c = if st[0] == 1 {
        let w = b.ins().load(I32, mem(), p[0], 0);
        let v = b.ins().scalar_to_vector(I32X4, w);
        let v = b.ins().bitcast(I8X16, little(), v);
        let v = b.ins().uwiden_low(v);
        b.ins().uwiden_low(v)
    } else {
        let c = b.ins().uload8(I32, mem(), p[0], 0);
        b.ins().splat(I32X4, c)
    };
    let z = b.ins().iconst(I32, 0);
    let z = b.ins().splat(I32X4, z);
    let mask = b.ins().icmp(IntCC::NotEqual, c, z);
    let x = lanes(b, I32X4, p[1], st[1]);
    let y = lanes(b, I32X4, p[2], st[2]);
    let r = b.ins().bitselect(mask, x, y);
    b.ins().store(mem(), r, p[3], 0);
}

/// Four f32 comparisons narrowed to four bool bytes.
fn compare_f32(b: &mut FunctionBuilder<'_>, op: TOp, p: &[Value], st: &[usize]) {
    let x = lanes(b, F32X4, p[0], st[0]);
    let y = lanes(b, F32X4, p[1], st[1]);
    let cc = match op {
        TOp::Equal => FloatCC::Equal,
        TOp::Less => FloatCC::LessThan,
        TOp::GreaterEq => FloatCC::GreaterThanOrEqual,
        TOp::LessEq => FloatCC::LessThanOrEqual,
        _ => FloatCC::GreaterThan,
    };
    let m = b.ins().fcmp(cc, x, y);
    let one = b.ins().iconst(I32, 1);
    let one = b.ins().splat(I32X4, one);
    let m = b.ins().bitcast(I32X4, little(), m);
    let bits = b.ins().band(m, one);
    let h = b.ins().unarrow(bits, bits);
    let q = b.ins().unarrow(h, h);
    let w = b.ins().bitcast(I32X4, little(), q);
    let lo = b.ins().extractlane(w, 0);
    b.ins().store(mem(), lo, p[2], 0);
}
