//! Element-wise nodes (Unary, Binary, Variadic, Where, Cast): f32 math goes to the f32x4
//! kernels of [`Ew`]; every other dtype, comparisons, logical/bitwise/shift ops, Mod, Where
//! and Cast go to the typed scalar kernels of [`TypedDesc`]. A fused node becomes one
//! [`FusedDesc`] kernel.

use super::{Ctx, ew_call, ew_split, rows_call, variadic};
use crate::codegen::kernels::elementwise::{Ew, EwDesc};
use crate::codegen::kernels::fused::{FArg, FusedDesc};
use crate::codegen::kernels::storage;
use crate::codegen::kernels::typed::{TOp, TypedDesc};
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::gemm::stage16::ew;
use crate::ir::graph::ValueId;
use crate::ir::lowp::CastMode;
use crate::ir::types::DType;
use crate::ops::{BinaryOp, FusedArg, FusedAttrs, MathOp, Op, UnaryOp, VariadicOp};

/// The f32x4 form of a unary op (`None`: the predicates IsNaN and IsInf, whose output is
/// bool, have only typed kernels).
fn unary(u: &UnaryOp) -> Option<Ew> {
    Some(match *u {
        // Bool and integer ops: infer rejects f32, so they never take the f32x4 path.
        UnaryOp::Not | UnaryOp::BitwiseNot => return None,
        UnaryOp::Relu => Ew::Relu,
        UnaryOp::LeakyRelu { alpha } => Ew::LeakyRelu(alpha),
        UnaryOp::Clip { min, max } => Ew::Clip(
            min.map_or(f32::NEG_INFINITY, |x| x as f32),
            max.map_or(f32::INFINITY, |x| x as f32),
        ),
        UnaryOp::Neg => Ew::Neg,
        UnaryOp::Abs => Ew::Abs,
        UnaryOp::Sqrt => Ew::Sqrt,
        UnaryOp::Reciprocal => Ew::Reciprocal,
        UnaryOp::Exp => Ew::Exp,
        UnaryOp::Log => Ew::Log,
        UnaryOp::Sigmoid => Ew::Sigmoid,
        UnaryOp::Tanh => Ew::Tanh,
        UnaryOp::Erf => Ew::Erf,
        UnaryOp::Gelu { tanh_approx } => {
            if tanh_approx {
                Ew::GeluTanh
            } else {
                Ew::Gelu
            }
        }
        UnaryOp::HardSigmoid { alpha, beta } => Ew::HardSigmoid(alpha, beta),
        UnaryOp::HardSwish => Ew::HardSwish,
        UnaryOp::Math(m) if m.is_predicate() => return None,
        UnaryOp::Math(m) => Ew::Math(m),
    })
}

/// The typed form of a unary op on a non-f32 dtype (`None`: no kernel).
fn unary_typed(u: &UnaryOp, dt: DType) -> Option<TOp> {
    Some(match *u {
        UnaryOp::Math(MathOp::IsNaN) => TOp::IsNaN,
        UnaryOp::Math(MathOp::IsInf { pos, neg }) => TOp::IsInf { pos, neg },
        UnaryOp::Math(m) => TOp::Math(m),
        UnaryOp::Not => TOp::Not,
        UnaryOp::BitwiseNot => TOp::BitNot,
        UnaryOp::Neg => TOp::Neg,
        UnaryOp::Abs => TOp::Abs,
        UnaryOp::Relu if dt != DType::F64 => TOp::Relu,
        UnaryOp::Clip { min, max } if !dt.is_float() => {
            // The bounds came from a tensor of the input's dtype (the reference's reading).
            let bound = |v: f64| {
                if dt == DType::U64 {
                    v as u64 as i64
                } else {
                    v as i64
                }
            };
            TOp::Clip {
                lo: min.map(bound),
                hi: max.map(bound),
            }
        }
        _ => return None,
    })
}

fn binary_typed(b: BinaryOp) -> Option<TOp> {
    Some(match b {
        BinaryOp::Add => TOp::Add,
        BinaryOp::Sub => TOp::Sub,
        BinaryOp::Mul => TOp::Mul,
        BinaryOp::Div => TOp::Div,
        BinaryOp::Mod { fmod } => TOp::Mod { fmod },
        BinaryOp::Equal => TOp::Equal,
        BinaryOp::Less => TOp::Less,
        BinaryOp::Greater => TOp::Greater,
        BinaryOp::GreaterOrEqual => TOp::GreaterEq,
        BinaryOp::LessOrEqual => TOp::LessEq,
        // Bools are 0 or 1 in the i64 domain: the logical ops are the bitwise ones.
        BinaryOp::And | BinaryOp::BitwiseAnd => TOp::And,
        BinaryOp::Or | BinaryOp::BitwiseOr => TOp::Or,
        BinaryOp::Xor | BinaryOp::BitwiseXor => TOp::Xor,
        BinaryOp::BitShift { left: true } => TOp::Shl,
        BinaryOp::BitShift { left: false } => TOp::Shr,
        BinaryOp::Pow | BinaryOp::PRelu => return None,
    })
}

/// Emits the calls of an element-wise node.
pub(super) fn lower(cx: &Ctx<'_>, prog: &mut Program, w: &mut WeightsBuilder) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let ins: Vec<ValueId> = n.inputs.to_vec();
    let y = cx.output()?;
    let x0 = cx.input(0)?;
    let dt = cx.ty(x0).dtype;
    let f32_only = n
        .inputs
        .iter()
        .chain(&n.outputs)
        .all(|&v| cx.ty(v).dtype == DType::F32);
    let no_kernel = || {
        cx.err(format!(
            "no kernel for {} on {} yet",
            n.op.name(),
            dt.name()
        ))
    };
    let vector = |e: Ew, prog: &mut Program, w: &mut WeightsBuilder| -> Result<(), Error> {
        let out_shape = &cx.ty(y).shape;
        let shapes: Vec<&[usize]> = ins.iter().map(|&v| &cx.ty(v).shape[..]).collect();
        let desc = EwDesc::new(e, &shapes, out_shape);
        let args = ins
            .iter()
            .map(|&v| cx.operand(v, w))
            .collect::<Result<Vec<_>, _>>()?;
        ew_call(cx, prog, w, desc, args, cx.arena(y)?)
    };
    let typed = |op: TOp, prog: &mut Program, w: &mut WeightsBuilder| -> Result<(), Error> {
        let args = ins
            .iter()
            .map(|&v| cx.operand(v, w))
            .collect::<Result<Vec<_>, _>>()?;
        let shapes: Vec<(DType, &[usize])> = ins
            .iter()
            .map(|&v| (cx.ty(v).dtype, &cx.ty(v).shape[..]))
            .collect();
        let yt = cx.ty(y);
        let desc = TypedDesc::new(op, &shapes, yt.dtype, &yt.shape);
        typed_call(cx, prog, desc, args, cx.arena(y)?)
    };
    match &n.op {
        Op::Unary(_) if f32_only && native(cx, prog, w)? => Ok(()),
        Op::Unary(u) if f32_only => vector(unary(u).ok_or_else(no_kernel)?, prog, w),
        Op::Unary(u) => typed(unary_typed(u, dt).ok_or_else(no_kernel)?, prog, w),
        Op::ClipDynamic { min, max } => clip_dynamic(cx, *min, *max, prog, w),
        Op::Binary(BinaryOp::Pow) => pow(cx, prog, w),
        Op::Binary(BinaryOp::PRelu) if f32_only => vector(Ew::PRelu, prog, w),
        Op::Binary(b @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div))
            if f32_only =>
        {
            let e = match b {
                BinaryOp::Add => Ew::Add,
                BinaryOp::Sub => Ew::Sub,
                BinaryOp::Mul => Ew::Mul,
                _ => Ew::Div,
            };
            vector(e, prog, w)
        }
        Op::Binary(b) => typed(binary_typed(*b).ok_or_else(no_kernel)?, prog, w),
        Op::Variadic(v) if f32_only => {
            let e = match (v, ins.len()) {
                (_, 1) => Ew::Copy,
                (VariadicOp::Sum, 2) => Ew::Add,
                (VariadicOp::Mean, 2) => Ew::Mean2,
                (VariadicOp::Max, 2) => Ew::Max,
                (VariadicOp::Min, 2) => Ew::Min,
                (kind, _) => return variadic(cx, *kind, prog, w),
            };
            vector(e, prog, w)
        }
        Op::Variadic(v) => variadic_typed(cx, *v, prog, w),
        Op::Where => typed(TOp::Where, prog, w),
        Op::Cast { to, .. } if *to == dt => typed(TOp::Copy, prog, w),
        Op::Cast { to, mode } if to.is_storage() || dt.is_storage() => {
            storage_cast(cx, prog, w, *to, *mode)
        }
        Op::Cast { .. } => typed(TOp::Cast, prog, w),
        _ => Err(no_kernel()),
    }
}

/// Appends to `out` the f32 steps of a Clip with run-time bounds over operands `x`, then `lo`
/// when `min`, then `hi` when `max`: `max(x, lo)` then `min(., hi)` (an absent bound's step
/// left out; neither: a copy).
fn clip_steps(min: bool, max: bool, x: FArg, bounds: &[FArg], out: &mut Vec<(Ew, Vec<FArg>)>) {
    let mut acc = x;
    let mut next = bounds.iter().copied();
    let first = out.len();
    for (given, e) in [(min, Ew::Max), (max, Ew::Min)] {
        if !given {
            continue;
        }
        if let Some(bound) = next.next() {
            out.push((e, vec![acc, bound]));
            acc = FArg::Step(out.len() - 1);
        }
    }
    if out.len() == first {
        out.push((Ew::Copy, vec![x]));
    }
}

/// Clip with run-time bounds (one element each, read as broadcast scalars): on f32 one kernel
/// running `max(x, lo)` then `min(., hi)` on values in registers; on other dtypes the typed
/// Max then Min kernels, the second in place on the output.
fn clip_dynamic(
    cx: &Ctx<'_>,
    min: bool,
    max: bool,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let (x, y) = (cx.input(0)?, cx.output()?);
    let (xt, yt) = (cx.ty(x).clone(), cx.ty(y).clone());
    let bounds = n.inputs.get(1..).unwrap_or_default();
    if bounds.len() != usize::from(min) + usize::from(max) {
        return Err(cx.err("Clip's bound inputs do not match its attributes"));
    }
    let mut args = vec![cx.operand(x, w)?];
    for &v in bounds {
        args.push(cx.operand(v, w)?);
    }
    let out = cx.arena(y)?;
    // Each bound holds one element: a scalar to the loop nest, whatever its shape.
    let scalar: &[usize] = &[];
    if xt.dtype == DType::F32 {
        let ins: Vec<FArg> = (1..=bounds.len()).map(FArg::In).collect();
        let mut steps = Vec::new();
        clip_steps(min, max, FArg::In(0), &ins, &mut steps);
        let mut shapes: Vec<&[usize]> = vec![&xt.shape];
        shapes.extend(std::iter::repeat_n(scalar, bounds.len()));
        let desc = FusedDesc::new(steps, &shapes, &yt.shape).map_err(|e| cx.err(e))?;
        let (node, op) = cx.label();
        let f = prog.kernel(
            format!("fused {desc:?}"),
            args.len() + 1,
            (&node, &op),
            |b, p, _| desc.emit(b, p),
        )?;
        args.push(out);
        prog.call(f, args);
        return Ok(());
    }
    let dt = xt.dtype;
    let ops: Vec<TOp> = [(min, TOp::Max), (max, TOp::Min)]
        .into_iter()
        .filter_map(|(given, op)| given.then_some(op))
        .collect();
    if ops.is_empty() {
        let desc = TypedDesc::new(TOp::Copy, &[(dt, &xt.shape)], dt, &yt.shape);
        return typed_call(cx, prog, desc, vec![args[0]], out);
    }
    let mut cur = args[0];
    for (op, &bound) in ops.into_iter().zip(&args[1..]) {
        let desc = TypedDesc::new(op, &[(dt, &xt.shape), (dt, scalar)], dt, &yt.shape);
        typed_call(cx, prog, desc, vec![cur, bound], out)?;
        cur = out;
    }
    Ok(())
}

/// A Cast from or to a storage type: one call of the Rust helper over the whole tensor (a
/// Cast's input and output have the same shape, both contiguous).
fn storage_cast(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
    to: DType,
    mode: CastMode,
) -> Result<(), Error> {
    let (x, y) = (cx.input(0)?, cx.output()?);
    let from = cx.ty(x).dtype;
    let n = cx
        .ty(y)
        .numel()
        .ok_or_else(|| cx.err("the output has too many elements"))?;
    let spec = storage::cast_spec(from, to, mode);
    let (node, op) = cx.label();
    let f = prog.kernel(
        format!("cast_storage {spec:#x} {n}"),
        2,
        (&node, &op),
        |b, p, _| storage::emit_cast(b, p, n, spec),
    )?;
    prog.call(f, vec![cx.operand(x, w)?, cx.arena(y)?]);
    Ok(())
}

/// Calls the typed kernel of `desc` on `args` then `out` (an error names what has no kernel).
fn typed_call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    desc: TypedDesc,
    mut args: Vec<Operand>,
    out: Operand,
) -> Result<(), Error> {
    if let Some(what) = desc.unsupported() {
        return Err(cx.err(format!("no kernel for {what} yet")));
    }
    let (node, op) = cx.label();
    let n = desc.strides.len() + 1;
    let f = prog.kernel(format!("typed {desc:?}"), n, (&node, &op), |b, p, _| {
        desc.emit(b, p)
    })?;
    args.push(out);
    prog.call(f, args);
    Ok(())
}

/// Max/Min (and Sum on f64) of N inputs of a non-f32 dtype: like the f32 `variadic`, the
/// output starts as the input already in its buffer (if any), then takes each other input.
fn variadic_typed(
    cx: &Ctx<'_>,
    kind: VariadicOp,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let y = cx.output()?;
    let out = cx.arena(y)?;
    let yt = cx.ty(y).clone();
    let op = match kind {
        VariadicOp::Max => TOp::Max,
        VariadicOp::Min => TOp::Min,
        VariadicOp::Sum => TOp::Add,
        VariadicOp::Mean => {
            return Err(cx.err(format!(
                "no kernel for Mean on {} yet (f32 only)",
                yt.dtype.name()
            )));
        }
    };
    let ins: Vec<ValueId> = n.inputs.to_vec();
    let mut first = 0;
    for (i, &v) in ins.iter().enumerate() {
        if cx.constant(v).is_none() && cx.arena(v)? == out {
            first = i;
        }
    }
    let x0 = ins[first];
    let desc = TypedDesc::new(
        TOp::Copy,
        &[(yt.dtype, &cx.ty(x0).shape)],
        yt.dtype,
        &yt.shape,
    );
    typed_call(cx, prog, desc, vec![cx.operand(x0, w)?], out)?;
    for (i, &v) in ins.iter().enumerate() {
        if i == first {
            continue;
        }
        let desc = TypedDesc::new(
            op,
            &[(yt.dtype, &yt.shape), (yt.dtype, &cx.ty(v).shape)],
            yt.dtype,
            &yt.shape,
        );
        typed_call(cx, prog, desc, vec![out, cx.operand(v, w)?], out)?;
    }
    Ok(())
}

/// Pow on f32: a constant scalar exponent of 1, 0.5 or -1 is Copy, Sqrt or Reciprocal;
/// another constant integer up to 64 in magnitude is repeated squaring; anything else (any
/// constant, or an f32 tensor, broadcast) is the general `exp(y ln |x|)` kernel. A constant
/// exponent of another dtype is converted to f32 first. Other types: [`super::pow`].
fn pow(cx: &Ctx<'_>, prog: &mut Program, w: &mut WeightsBuilder) -> Result<(), Error> {
    let (x, e, y) = (cx.input(0)?, cx.input(1)?, cx.output()?);
    let (xt, et, yt) = (cx.ty(x), cx.ty(e), cx.ty(y));
    let konst = cx.constant(e);
    if xt.dtype != DType::F32 || (et.dtype != DType::F32 && konst.is_none()) {
        // Integer bases and run-time exponents of other types: the host kernel.
        return super::pow::pow_any(cx, prog, w);
    }
    let (xs, es, ys) = (xt.shape.clone(), et.shape.clone(), yt.shape.clone());
    let xo = cx.operand(x, w)?;
    let out = cx.arena(y)?;
    let unary = |op: Ew, prog: &mut Program, w: &mut WeightsBuilder| {
        ew_call(cx, prog, w, EwDesc::new(op, &[&xs], &ys), vec![xo], out)
    };
    let scalar = konst.filter(|t| t.numel() == 1).map(|t| t.to_f64_vec()[0]);
    match scalar {
        Some(1.0) => return unary(Ew::Copy, prog, w),
        Some(0.5) => return unary(Ew::Sqrt, prog, w),
        Some(-1.0) => return unary(Ew::Reciprocal, prog, w),
        Some(k) if k.fract() == 0.0 && k.abs() <= 64.0 => {
            return unary(Ew::Powi(k as i32), prog, w);
        }
        _ => {}
    }
    let eo = match konst {
        Some(t) if t.dtype() != DType::F32 => Operand::Weights(w.tensor_f32(t)),
        _ => cx.operand(e, w)?,
    };
    let desc = EwDesc::new(Ew::Pow, &[&xs, &es], &ys);
    ew_call(cx, prog, w, desc, vec![xo, eo], out)
}

/// The [`Ew`] steps of one fused step `op` over `args` (already mapped to kernel operands),
/// appended to `out`; `None`: no f32 kernel for it. Pow by a constant and Variadic follow
/// the unfused lowering (Pow's special exponents; N inputs as a chain of two-input steps,
/// Mean scaled by 1/N at the end).
fn fused_step(op: &Op, args: &[FArg], out: &mut Vec<(Ew, Vec<FArg>)>) -> Option<()> {
    let bin = |e: Ew| (e, args.to_vec());
    match op {
        Op::Unary(u) => out.push((unary(u)?, args.to_vec())),
        Op::Binary(BinaryOp::Add) => out.push(bin(Ew::Add)),
        Op::Binary(BinaryOp::Sub) => out.push(bin(Ew::Sub)),
        Op::Binary(BinaryOp::Mul) => out.push(bin(Ew::Mul)),
        Op::Binary(BinaryOp::Div) => out.push(bin(Ew::Div)),
        Op::Binary(BinaryOp::PRelu) => out.push(bin(Ew::PRelu)),
        Op::Binary(BinaryOp::Pow) => {
            let x = vec![*args.first()?];
            out.push(match args.get(1)? {
                FArg::K(1.0) => (Ew::Copy, x),
                FArg::K(0.5) => (Ew::Sqrt, x),
                FArg::K(-1.0) => (Ew::Reciprocal, x),
                FArg::K(k) if k.fract() == 0.0 && k.abs() <= 64.0 => (Ew::Powi(*k as i32), x),
                _ => bin(Ew::Pow),
            });
        }
        Op::ClipDynamic { min, max } => {
            let (&x, bounds) = args.split_first()?;
            clip_steps(*min, *max, x, bounds, out);
        }
        Op::Variadic(v) => {
            let (&first, rest) = args.split_first()?;
            if rest.is_empty() {
                out.push((Ew::Copy, vec![first]));
                return Some(());
            }
            if let (VariadicOp::Mean, [b]) = (v, rest) {
                out.push((Ew::Mean2, vec![first, *b]));
                return Some(());
            }
            let e = match v {
                VariadicOp::Sum | VariadicOp::Mean => Ew::Add,
                VariadicOp::Max => Ew::Max,
                VariadicOp::Min => Ew::Min,
            };
            let mut acc = first;
            for &b in rest {
                out.push((e, vec![acc, b]));
                acc = FArg::Step(out.len() - 1);
            }
            if *v == VariadicOp::Mean {
                out.push((Ew::Scale(1.0 / args.len() as f32), vec![acc]));
            }
        }
        _ => return None,
    }
    Some(())
}

/// Whether f32 nodes may take the host's vector loops where those beat the f32x4 kernels
/// (fused programs with `Erf`/`Sigmoid`/`Tanh`, Softmax over the last axis):
/// `ARENAC_NATIVE_EW=0` keeps the JIT's kernels (A/B benchmarks).
pub(super) fn native_on() -> bool {
    std::env::var_os("ARENAC_NATIVE_EW").is_none_or(|v| v != "0")
}

/// Emits f32 node `cx` (a fused program, or one unary op) as a host call of [`ew::run`] when
/// [`ew::native_f32`] finds its program faster there than in the f32x4 kernels (GELU's
/// `Erf`, `Sigmoid`, `Tanh`: 8 or 16 lanes instead of 4) and its inputs broadcast as that
/// loop reads them; `false`: not so.
pub(super) fn native(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<bool, Error> {
    let n = cx.g.node(cx.id);
    let ys = &cx.ty(cx.output()?).shape;
    let planned = match &n.op {
        Op::Unary(u) if n.inputs.len() == 1 && cx.ty(cx.input(0)?).shape == *ys => Some((
            ew::Program {
                steps: vec![ew::Step::Unary(*u, ew::Arg::Input(0))],
            },
            vec![ew::Bcast {
                inner: 1,
                count: ys.iter().product(),
            }],
        )),
        _ => super::act16::node_ew_plan(cx),
    };
    match planned {
        Some((program, bc)) if ew::native_f32(&program) && native_on() => {
            super::act16::ew_host(cx, ew::F32, program, bc, prog, w)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Emits the one kernel call of a fused element-wise node (f32 only).
pub(super) fn fused(
    cx: &Ctx<'_>,
    attrs: &FusedAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    cx.all_f32()?;
    if native(cx, prog, w)? {
        return Ok(());
    }
    let n = cx.g.node(cx.id);
    let y = cx.output()?;
    let mut steps: Vec<(Ew, Vec<FArg>)> = Vec::new();
    // Where each fused step's result is among the kernel steps.
    let mut result: Vec<usize> = Vec::with_capacity(attrs.steps.len());
    for (k, s) in attrs.steps.iter().enumerate() {
        let args = s
            .args
            .iter()
            .map(|a| match a {
                FusedArg::Input(i) => Ok(FArg::In(*i)),
                FusedArg::Step(j) => result
                    .get(*j)
                    .map(|&r| FArg::Step(r))
                    .ok_or_else(|| cx.err(format!("fused step {k} reads step {j}"))),
                FusedArg::Const(t) => match (t.dtype(), t.to_f32_vec().as_slice()) {
                    (DType::F32, [v]) => Ok(FArg::K(*v)),
                    _ => Err(cx.err(format!(
                        "no kernel for a fused {} constant of shape {:?} yet (f32 scalars only)",
                        t.dtype().name(),
                        t.shape()
                    ))),
                },
            })
            .collect::<Result<Vec<_>, _>>()?;
        fused_step(&s.op, &args, &mut steps)
            .ok_or_else(|| cx.err(format!("no kernel for fused step {k} ({})", s.op.name())))?;
        result.push(steps.len().saturating_sub(1));
    }
    let shapes: Vec<&[usize]> = n.inputs.iter().map(|&v| &cx.ty(v).shape[..]).collect();
    let desc = FusedDesc::new(steps, &shapes, &cx.ty(y).shape).map_err(|e| cx.err(e))?;
    let mut args = n
        .inputs
        .iter()
        .map(|&v| cx.operand(v, w))
        .collect::<Result<Vec<_>, _>>()?;
    args.push(cx.arena(y)?);
    let (node, op) = cx.label();
    let split = ew_split(&desc.loops.dims, &desc.loops.strides);
    let n_ptrs = n.inputs.len() + 1;
    rows_call(cx, prog, w, split, args, &mut |prog, rows| {
        let mut d = desc.clone();
        d.loops.dims[0] = rows;
        prog.kernel(format!("fused {d:?}"), n_ptrs, (&node, &op), |b, p, _| {
            d.emit(b, p)
        })
    })
}
