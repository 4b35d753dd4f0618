//! What each node becomes: kernel calls (from the cache or freshly compiled) with the
//! addresses of its operands.

mod convt;
mod dense;
mod elementwise;
mod indexing;
mod movement;
mod norm;
mod reduce;

use super::kernels::conv::PoolDesc;
use super::kernels::elementwise::{Ew, EwDesc};
use super::kernels::lrn::LrnDesc;
use super::kernels::movement::{CopyDesc, GatherDesc};
use super::kernels::reduce::ReduceDesc;
use super::kernels::softmax::SoftmaxDesc;
use super::program::{Operand, Program};
use super::weights::WeightsBuilder;
use crate::analysis::liveness::BufferKind;
use crate::arena::ArenaPlan;
use crate::error::{Error, OpError};
use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::{LrnAttrs, Op, ReduceKind, VariadicOp};
use convt::conv_transpose;
use dense::{conv, fused_into_conv, gemm, matmul, pool_call, window};
use movement::{copy_call, movement, resize};

struct Ctx<'a> {
    g: &'a Graph,
    plan: &'a ArenaPlan,
    id: NodeId,
}

impl Ctx<'_> {
    fn err(&self, what: impl Into<String>) -> Error {
        let n = self.g.node(self.id);
        Error::Node {
            node: n.name.clone(),
            op: n.op.name().to_string(),
            source: OpError::Unsupported(what.into()),
        }
    }

    fn input(&self, i: usize) -> Result<ValueId, Error> {
        self.g
            .node(self.id)
            .inputs
            .get(i)
            .copied()
            .ok_or_else(|| self.err(format!("missing input {i}")))
    }

    fn ty(&self, v: ValueId) -> &TensorType {
        &self.g.value(v).ty
    }

    fn constant(&self, v: ValueId) -> Option<&Tensor> {
        match &self.g.value(v).kind {
            ValueKind::Constant(t) => Some(t),
            _ => None,
        }
    }

    /// The arena address of `v`: its buffer's offset plus its offset within the buffer
    /// (a Concat slice), checked to lie inside the arena with all of `v`'s bytes.
    fn arena(&self, v: ValueId) -> Result<Operand, Error> {
        let name = &self.g.value(v).name;
        let offset = self
            .plan
            .value_offset(v)
            .ok_or_else(|| self.err(format!("value '{name}' has no arena buffer")))?;
        let bytes = self.ty(v).bytes();
        self.inside(offset, bytes, name)?;
        Ok(Operand::Arena(offset))
    }

    /// Checks that `[offset, offset + bytes)` lies inside the arena.
    fn inside(&self, offset: usize, bytes: Option<usize>, what: &str) -> Result<(), Error> {
        let arena = self.plan.arena_bytes;
        if bytes
            .and_then(|b| b.checked_add(offset))
            .is_none_or(|end| end > arena)
        {
            return Err(self.err(format!(
                "'{what}' at arena offset {offset} ({bytes:?} bytes) does not fit in the \
                 {arena}-byte arena (a planner bug)"
            )));
        }
        Ok(())
    }

    fn operand(&self, v: ValueId, w: &mut WeightsBuilder) -> Result<Operand, Error> {
        match self.constant(v) {
            Some(t) => Ok(Operand::Weights(w.tensor(t))),
            None => self.arena(v),
        }
    }

    fn output(&self) -> Result<ValueId, Error> {
        self.g
            .node(self.id)
            .outputs
            .first()
            .copied()
            .ok_or_else(|| self.err("no output"))
    }

    /// The node's scratch buffer (`Null` when it has none), checked to lie inside the arena.
    fn scratch(&self) -> Result<Operand, Error> {
        let Some((i, b)) = self
            .plan
            .liveness
            .buffers
            .iter()
            .enumerate()
            .find(|(_, b)| b.kind == BufferKind::Scratch && b.node == Some(self.id))
        else {
            return Ok(Operand::Null);
        };
        let offset = self
            .plan
            .placement
            .offsets
            .get(i)
            .copied()
            .ok_or_else(|| self.err(format!("scratch '{}' has no offset", b.name)))?;
        self.inside(offset, Some(b.interval.size), &b.name)?;
        Ok(Operand::Arena(offset))
    }

    fn label(&self) -> (String, String) {
        let n = self.g.node(self.id);
        (n.name.clone(), n.op.name().to_string())
    }

    fn all_f32(&self) -> Result<(), Error> {
        let n = self.g.node(self.id);
        for &v in n.inputs.iter().chain(&n.outputs) {
            let dt = self.ty(v).dtype;
            if dt != DType::F32 {
                return Err(self.err(format!(
                    "no kernel for {} on {} yet (f32 only)",
                    n.op.name(),
                    dt.name()
                )));
            }
        }
        Ok(())
    }
}

fn ew_call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    desc: EwDesc,
    mut args: Vec<Operand>,
    out: Operand,
) -> Result<(), Error> {
    let (node, op) = cx.label();
    let n = desc.strides.len() + 1;
    let f = prog.kernel(format!("ew {desc:?}"), n, (&node, &op), |b, p, _| {
        desc.emit(b, p)
    })?;
    args.push(out);
    prog.call(f, args);
    Ok(())
}

fn prod(d: &[usize]) -> usize {
    d.iter().product()
}

/// The activation node whose work node `id`'s kernel does in its epilogue (a Conv's Relu).
pub(super) fn epilogue_activation(g: &Graph, plan: &ArenaPlan, id: NodeId) -> Option<NodeId> {
    dense::fused_activation(g, plan, id).map(|(act, _)| act)
}

/// Emits the calls of node `id`.
pub(super) fn node(
    g: &Graph,
    plan: &ArenaPlan,
    id: NodeId,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let cx = Ctx { g, plan, id };
    let n = g.node(id);
    let op = &n.op;
    // An activation applied in place by its producer's conv epilogue: nothing left to do.
    if matches!(op, Op::Unary(_)) && fused_into_conv(g, plan, id) {
        return Ok(());
    }
    if op.is_view() {
        let (x, y) = (cx.input(0)?, cx.output()?);
        let src = cx.operand(x, w)?;
        let dst = cx.arena(y)?;
        if src == dst {
            return Ok(());
        }
        let ty = cx.ty(y);
        let (elem, len) = (ty.dtype.size(), ty.numel().unwrap_or(0));
        if ![1, 2, 4, 8].contains(&elem) {
            return Err(cx.err(format!("no kernel for copying {} yet", ty.dtype.name())));
        }
        let desc = CopyDesc::new(elem, &[len], &[1], &[1]);
        return copy_call(&cx, prog, desc, src, dst);
    }
    let y = cx.output()?;
    let out_shape = cx.ty(y).shape.clone();
    match op {
        Op::Unary(_) | Op::Binary(_) | Op::Variadic(_) | Op::Where | Op::Cast { .. } => {
            elementwise::lower(&cx, prog, w)
        }
        Op::FusedElementwise(a) => elementwise::fused(&cx, a, prog, w),
        Op::BatchNormalization { training, .. }
            if training.is_some()
                || (1..5).any(|i| n.inputs.get(i).is_some_and(|&v| cx.constant(v).is_none())) =>
        {
            norm::stats_norm(&cx, prog, w)
        }
        Op::LayerNormalization { .. }
        | Op::InstanceNormalization { .. }
        | Op::GroupNormalization { .. }
        | Op::MeanVarianceNormalization { .. }
        | Op::RmsNormalization { .. } => norm::stats_norm(&cx, prog, w),
        Op::BatchNormalization { epsilon, .. } => {
            cx.all_f32()?;
            let x = cx.input(0)?;
            let params: Vec<Vec<f64>> = (1..5)
                .map(|i| {
                    let v = cx.input(i)?;
                    cx.constant(v).map(|t| t.to_f64_vec()).ok_or_else(|| {
                        cx.err("no kernel for non-constant BatchNormalization parameters yet")
                    })
                })
                .collect::<Result<_, _>>()?;
            let (scale, bias, mean, var) = (&params[0], &params[1], &params[2], &params[3]);
            let s: Vec<f32> = scale
                .iter()
                .zip(var)
                .map(|(g, v)| (g / (v + f64::from(*epsilon)).sqrt()) as f32)
                .collect();
            let t: Vec<f32> = bias
                .iter()
                .zip(mean)
                .zip(&s)
                .map(|((b, m), s)| (b - m * f64::from(*s)) as f32)
                .collect();
            let xs = &cx.ty(x).shape;
            let c = xs.get(1).copied().unwrap_or(1);
            let mut cshape = vec![c];
            cshape.extend(std::iter::repeat_n(1, xs.len().saturating_sub(2)));
            let desc = EwDesc::new(Ew::MulAdd, &[xs, &cshape, &cshape], &out_shape);
            let args = vec![
                cx.arena(x)?,
                Operand::Weights(w.f32_vec(s)),
                Operand::Weights(w.f32_vec(t)),
            ];
            ew_call(&cx, prog, desc, args, cx.arena(y)?)
        }
        Op::Softmax {
            axis,
            log,
            coerce_2d,
        } => {
            cx.all_f32()?;
            let s = &out_shape;
            let axis = (*axis).min(s.len().saturating_sub(1));
            let desc = if *coerce_2d {
                SoftmaxDesc {
                    outer: prod(&s[..axis]),
                    len: prod(&s[axis..]),
                    inner: 1,
                    log: *log,
                }
            } else {
                SoftmaxDesc {
                    outer: prod(&s[..axis]),
                    len: s.get(axis).copied().unwrap_or(1),
                    inner: prod(s.get(axis + 1..).unwrap_or_default()),
                    log: *log,
                }
            };
            let x = cx.arena(cx.input(0)?)?;
            let (node, opn) = cx.label();
            let f = prog.kernel(
                format!("softmax {desc:?}"),
                2,
                (&node, &opn),
                |b, p, ext| desc.emit(b, p[0], p[1], ext.logf),
            )?;
            prog.call(f, vec![x, cx.arena(y)?]);
            Ok(())
        }
        Op::Conv(a) => conv(&cx, a, prog, w),
        Op::MaxPool(a) => {
            cx.all_f32()?;
            if n.outputs.len() > 1 {
                return Err(cx.err("no kernel for MaxPool with Indices yet"));
            }
            let x = cx.input(0)?;
            let xs = &cx.ty(x).shape;
            let win = window(
                &cx,
                xs,
                &out_shape,
                &a.kernel,
                &a.strides,
                &a.dilations,
                &a.pads,
            )?;
            let desc = PoolDesc::Max {
                planes: xs[0] * xs[1],
                win,
            };
            pool_call(&cx, prog, desc, cx.arena(x)?, cx.arena(y)?)
        }
        Op::AveragePool(a) => {
            cx.all_f32()?;
            let x = cx.input(0)?;
            let xs = &cx.ty(x).shape;
            let win = window(
                &cx,
                xs,
                &out_shape,
                &a.kernel,
                &a.strides,
                &a.dilations,
                &a.pads,
            )?;
            let d = a.kernel.len();
            let ends = a.pads.get(d..).unwrap_or_default();
            let pad_end = if d == 1 {
                [0, ends.first().copied().unwrap_or(0)]
            } else {
                [
                    ends.first().copied().unwrap_or(0),
                    ends.get(1).copied().unwrap_or(0),
                ]
            };
            let desc = PoolDesc::Average {
                planes: xs[0] * xs[1],
                win,
                pad_end,
                include_pad: a.count_include_pad,
            };
            pool_call(&cx, prog, desc, cx.arena(x)?, cx.arena(y)?)
        }
        Op::GlobalAveragePool => {
            cx.all_f32()?;
            let x = cx.input(0)?;
            let xs = &cx.ty(x).shape;
            if xs.len() < 2 {
                return Err(cx.err("GlobalAveragePool input must have rank >= 2"));
            }
            let desc = PoolDesc::GlobalAverage {
                planes: xs[0] * xs[1],
                len: prod(&xs[2..]),
            };
            pool_call(&cx, prog, desc, cx.arena(x)?, cx.arena(y)?)
        }
        Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Concat { .. }
        | Op::Split { .. }
        | Op::Expand { .. }
        | Op::Tile { .. }
        | Op::Pad { .. } => movement(&cx, prog, w),
        Op::Resize(a) => resize(&cx, a, prog, w),
        Op::Move(m) => indexing::lower(&cx, m, prog, w),
        Op::ConvTranspose(a) => conv_transpose(&cx, a, prog, w),
        Op::Reduce(_)
        | Op::ArgReduce(_)
        | Op::Hardmax { .. }
        | Op::CumScan(_)
        | Op::TopK(_)
        | Op::LpNormalization { .. }
        | Op::LpPool(_) => reduce::lower(&cx, prog, w),
        Op::Gather { axis } => {
            let (d, i) = (cx.input(0)?, cx.input(1)?);
            let (dt, it) = (cx.ty(d).clone(), cx.ty(i).clone());
            let index_bytes = match it.dtype {
                DType::I64 => 8,
                DType::I32 => 4,
                other => {
                    return Err(cx.err(format!(
                        "no kernel for Gather indices of {} yet",
                        other.name()
                    )));
                }
            };
            let elem = dt.dtype.size();
            if ![1, 2, 4, 8].contains(&elem) || dt.shape.get(*axis).is_none_or(|&k| k == 0) {
                return Err(cx.err(format!(
                    "no kernel for this Gather on {} yet",
                    dt.dtype.name()
                )));
            }
            let desc = GatherDesc {
                elem,
                index_bytes,
                outer: prod(&dt.shape[..*axis]),
                dim: dt.shape[*axis],
                count: it.numel().unwrap_or(0),
                inner: prod(&dt.shape[*axis + 1..]),
            };
            let (node, opn) = cx.label();
            let f = prog.kernel(format!("gather {desc:?}"), 3, (&node, &opn), |b, p, _| {
                desc.emit(b, p[0], p[1], p[2])
            })?;
            prog.call(f, vec![cx.operand(d, w)?, cx.operand(i, w)?, cx.arena(y)?]);
            Ok(())
        }
        Op::Lrn(a) => lrn(&cx, a, prog),
        Op::GlobalMaxPool => global_max_pool(&cx, prog),
        Op::Gemm(attrs) => gemm(&cx, attrs, prog, w),
        Op::MatMul => matmul(&cx, prog, w),
        _ => Err(cx.err(format!("no kernel for {} yet", op.name()))),
    }
}

/// Sum/Mean/Max/Min of three or more inputs: the output starts as one input (the one stored
/// in the output's buffer, if any, so that nothing is overwritten before it is read), then
/// takes each other input in turn.
fn variadic(
    cx: &Ctx<'_>,
    kind: VariadicOp,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    cx.all_f32()?;
    let n = cx.g.node(cx.id);
    let y = cx.output()?;
    let out = cx.arena(y)?;
    let ys = cx.ty(y).shape.clone();
    let ins: Vec<ValueId> = n.inputs.to_vec();
    let mut first = 0;
    for (i, &v) in ins.iter().enumerate() {
        if cx.constant(v).is_none() && cx.arena(v)? == out {
            first = i;
        }
    }
    let e = match kind {
        VariadicOp::Sum | VariadicOp::Mean => Ew::Add,
        VariadicOp::Max => Ew::Max,
        VariadicOp::Min => Ew::Min,
    };
    let x0 = ins[first];
    let desc = EwDesc::new(Ew::Copy, &[&cx.ty(x0).shape], &ys);
    ew_call(cx, prog, desc, vec![cx.operand(x0, w)?], out)?;
    for (i, &v) in ins.iter().enumerate() {
        if i == first {
            continue;
        }
        let desc = EwDesc::new(e, &[&ys, &cx.ty(v).shape], &ys);
        ew_call(cx, prog, desc, vec![out, cx.operand(v, w)?], out)?;
    }
    if kind == VariadicOp::Mean {
        let desc = EwDesc::new(Ew::Scale(1.0 / ins.len() as f32), &[&ys], &ys);
        ew_call(cx, prog, desc, vec![out], out)?;
    }
    Ok(())
}

/// LRN on f32 `N x C x ...` (rank >= 3).
fn lrn(cx: &Ctx<'_>, a: &LrnAttrs, prog: &mut Program) -> Result<(), Error> {
    cx.all_f32()?;
    let (x, y) = (cx.input(0)?, cx.output()?);
    let xs = &cx.ty(x).shape;
    if xs.len() < 3 {
        return Err(cx.err("no kernel for LRN on an input of rank < 3"));
    }
    let desc = LrnDesc {
        n: xs[0],
        c: xs[1],
        inner: prod(&xs[2..]),
        size: a.size,
        alpha: a.alpha,
        beta: a.beta,
        bias: a.bias,
    };
    let (node, opn) = cx.label();
    let (xa, ya) = (cx.arena(x)?, cx.arena(y)?);
    if xa != ya {
        let f = prog.kernel(format!("lrn {desc:?}"), 2, (&node, &opn), |b, p, _| {
            desc.emit(b, p[0], p[1])
        })?;
        prog.call(f, vec![xa, ya]);
        return Ok(());
    }
    // Planned in place: the ring of input planes lives in the node's scratch, sized by the
    // same function the planner used (`Op::scratch_bytes`).
    let need = crate::codegen::kernels::lrn::lrn_scratch_bytes(xs, a.size);
    let ring = cx.scratch()?;
    if ring == Operand::Null || dense::planned_scratch(cx) < need {
        return Err(cx.err(format!(
            "LRN planned in place without its {need}-byte scratch ring (a planner bug)"
        )));
    }
    let f = prog.kernel(
        format!("lrn in place {desc:?}"),
        3,
        (&node, &opn),
        |b, p, _| desc.emit_in_place(b, p[0], p[1], p[2]),
    )?;
    prog.call(f, vec![xa, ya, ring]);
    Ok(())
}

/// GlobalMaxPool on f32: a max reduction over the spatial dims.
fn global_max_pool(cx: &Ctx<'_>, prog: &mut Program) -> Result<(), Error> {
    cx.all_f32()?;
    let (x, y) = (cx.input(0)?, cx.output()?);
    let xs = &cx.ty(x).shape;
    if xs.len() < 2 {
        return Err(cx.err("GlobalMaxPool input must have rank >= 2"));
    }
    let axes: Vec<usize> = (2..xs.len()).collect();
    let desc = ReduceDesc::new(ReduceKind::Max, xs, &axes);
    let (node, opn) = cx.label();
    let f = prog.kernel(format!("reduce {desc:?}"), 2, (&node, &opn), |b, p, _| {
        desc.emit(b, p[0], p[1])
    })?;
    prog.call(f, vec![cx.arena(x)?, cx.arena(y)?]);
    Ok(())
}
