//! `NegativeLogLikelihoodLoss` and `SoftmaxCrossEntropyLoss` (opset 12+) as
//! Unsqueeze/GatherElements/Gather/Where/Neg/Squeeze/Mul/Reduce*/Div nodes, following ONNX's
//! context-dependent function bodies (onnx/defs/math/defs.cc): the target unsqueezed to
//! `[N, 1, d...]` picks `-input[n, target, d...]`; with `ignore_index` the ignored positions
//! gather class 0 and are then zeroed (loss and weight); `weight[target]` scales the loss;
//! `mean` divides by the sum of the gathered weights (or is a plain mean when there are neither
//! weights nor an ignore index). SoftmaxCrossEntropyLoss first takes LogSoftmax over the class
//! axis (moved last for N-d inputs), which is also its optional `log_prob` output.

use arenac_proto::NodeProto;

use super::{Emitter, input, int_attr, ints_attr, output, unsupported};
use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::ctx::NodeCtx;

/// How the per-element losses are reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reduction {
    /// Per element, shape of the target.
    None,
    /// Sum of the (weighted) losses.
    Sum,
    /// Weighted mean.
    Mean,
}

/// The checked operands and attributes shared by both losses.
struct Loss<'a> {
    /// The target (labels) value name and type.
    target: (&'a str, &'a TensorType),
    /// The optional per-class weight value name.
    weight: Option<&'a str>,
    /// The `reduction` attribute.
    reduction: Reduction,
    /// The `ignore_index` attribute, when given.
    ignore_index: Option<i64>,
}

/// Reads and checks target, weight and attributes against the scores of type `x_ty`.
fn parse<'a>(
    ctx: &'a NodeCtx<'_>,
    node: &'a NodeProto,
    x_ty: &TensorType,
) -> Result<Loss<'a>, OpError> {
    if !x_ty.dtype.is_float() {
        return Err(unsupported(format!(
            "the scores must be a float tensor (got {})",
            x_ty.dtype
        )));
    }
    let shape = &x_ty.shape;
    if shape.len() < 2 {
        return Err(OpError::shape(
            "the scores must be [N, C] or [N, C, d1, ...]",
            &[shape],
        ));
    }
    let (target, t_ty) =
        input(ctx, node, 1).ok_or_else(|| unsupported("the target is required"))?;
    if !matches!(t_ty.dtype, DType::I32 | DType::I64) {
        return Err(unsupported(format!(
            "the target must be int32 or int64 (got {})",
            t_ty.dtype
        )));
    }
    let mut want = vec![shape[0]];
    want.extend_from_slice(&shape[2..]);
    if t_ty.shape != want {
        return Err(OpError::shape(
            "the target must have the scores' shape without the class axis 1",
            &[shape, &t_ty.shape],
        ));
    }
    let weight = match input(ctx, node, 2) {
        Some((w, w_ty)) => {
            if w_ty.dtype != x_ty.dtype || w_ty.shape != [shape[1]] {
                return Err(OpError::shape(
                    format!(
                        "the weight must be a {} vector of the class count {}",
                        x_ty.dtype, shape[1]
                    ),
                    &[&w_ty.shape],
                ));
            }
            Some(w)
        }
        None => None,
    };
    let reduction = match ctx.attr_string("reduction", "mean")?.as_str() {
        "none" => Reduction::None,
        "sum" => Reduction::Sum,
        "mean" => Reduction::Mean,
        other => {
            return Err(OpError::attr(
                "reduction",
                format!("'{other}' is not one of none, sum, mean"),
            ));
        }
    };
    Ok(Loss {
        target: (target, t_ty),
        weight,
        reduction,
        ignore_index: ctx.attr_int_opt("ignore_index")?,
    })
}

/// `Unsqueeze`/`Squeeze` of `x` at axis 1 (axes as an input from opset 13, else an attribute).
fn axis1(e: &mut Emitter, opset: i64, op: &str, x: &str, out: Option<&str>) -> String {
    if opset >= 13 {
        let axes = e.ints(&[1]);
        e.op_maybe_to(op, &[x, &axes], vec![], out)
    } else {
        e.op_maybe_to(op, &[x], vec![ints_attr("axes", &[1])], out)
    }
}

/// The NLL body over log-probabilities `x` (dtype `dt`); writes the loss to `out`.
fn nll_body(e: &mut Emitter, opset: i64, x: &str, dt: DType, l: &Loss<'_>, out: Option<&str>) {
    let (target, t_ty) = l.target;
    let expanded = axis1(e, opset, "Unsqueeze", target, None);
    let zero_f = e.scalar(dt, 0.0);
    // (gather index, mask of ignored positions [N, 1, d...]) .
    let (index, mask) = match l.ignore_index {
        Some(ii) => {
            let t64 = e.cast(&expanded, t_ty.dtype, DType::I64);
            let ii = e.constant(&Tensor::i64(vec![], &[ii]));
            let mask = e.op("Equal", &[&t64, &ii], vec![]);
            let zero_t = e.scalar(t_ty.dtype, 0.0);
            let index = e.op("Where", &[&mask, &zero_t, &expanded], vec![]);
            (index, Some(mask))
        }
        None => (expanded, None),
    };
    let picked = e.op("GatherElements", &[x, &index], vec![int_attr("axis", 1)]);
    let picked = match &mask {
        Some(mask) => e.op("Where", &[mask, &zero_f, &picked], vec![]),
        None => picked,
    };
    let neg = e.op("Neg", &[&picked], vec![]);
    // Per-position weights [N, d...], when any.
    let weight = match (l.weight, &mask) {
        (Some(w), Some(mask)) => {
            let g = e.op("Gather", &[w, &index], vec![]);
            let g = e.op("Where", &[mask, &zero_f, &g], vec![]);
            Some(axis1(e, opset, "Squeeze", &g, None))
        }
        (Some(w), None) => Some(e.op("Gather", &[w, target], vec![])),
        (None, Some(mask)) => {
            let m = axis1(e, opset, "Squeeze", mask, None);
            let one_f = e.scalar(dt, 1.0);
            Some(e.op("Where", &[&m, &zero_f, &one_f], vec![]))
        }
        (None, None) => None,
    };
    let keep0 = || vec![int_attr("keepdims", 0)];
    match (weight, l.reduction) {
        (None, r) => {
            let unweighted = if r == Reduction::None { out } else { None };
            let loss = axis1(e, opset, "Squeeze", &neg, unweighted);
            match r {
                Reduction::None => {}
                Reduction::Sum => {
                    e.op_maybe_to("ReduceSum", &[&loss], keep0(), out);
                }
                Reduction::Mean => {
                    e.op_maybe_to("ReduceMean", &[&loss], keep0(), out);
                }
            }
        }
        (Some(w), r) => {
            let unweighted = axis1(e, opset, "Squeeze", &neg, None);
            let to = if r == Reduction::None { out } else { None };
            let loss = e.op_maybe_to("Mul", &[&unweighted, &w], vec![], to);
            match r {
                Reduction::None => {}
                Reduction::Sum => {
                    e.op_maybe_to("ReduceSum", &[&loss], keep0(), out);
                }
                Reduction::Mean => {
                    let s = e.op("ReduceSum", &[&loss], keep0());
                    let ws = e.op("ReduceSum", &[&w], keep0());
                    e.op_maybe_to("Div", &[&s, &ws], vec![], out);
                }
            }
        }
    }
}

/// Expands one NegativeLogLikelihoodLoss node.
pub(super) fn expand_nll(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
) -> Result<(), OpError> {
    ctx.expect_inputs(2, 3)?;
    let (x, x_ty) = input(ctx, node, 0).ok_or_else(|| unsupported("the input is required"))?;
    let l = parse(ctx, node, x_ty)?;
    nll_body(e, ctx.opset, x, x_ty.dtype, &l, output(node, 0));
    Ok(())
}

/// Expands one SoftmaxCrossEntropyLoss node.
pub(super) fn expand_sce(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
) -> Result<(), OpError> {
    ctx.expect_inputs(2, 3)?;
    let (x, x_ty) = input(ctx, node, 0).ok_or_else(|| unsupported("the scores are required"))?;
    let l = parse(ctx, node, x_ty)?;
    let shape = &x_ty.shape;
    let log_prob_out = output(node, 1);
    // LogSoftmax over the class axis: for [N, C] the last axis; else as [N, C, D] with the
    // classes moved last, then back (as the function body does).
    let log_prob = if shape.len() == 2 {
        e.op_maybe_to("LogSoftmax", &[x], vec![int_attr("axis", 1)], log_prob_out)
    } else {
        let d: usize = shape[2..].iter().product();
        let ncd = e.reshape(x, &[shape[0], shape[1], d], None);
        let ndc = e.transpose(&ncd, &[0, 2, 1], None);
        let lsm = e.op("LogSoftmax", &[&ndc], vec![int_attr("axis", 2)]);
        let back = e.transpose(&lsm, &[0, 2, 1], None);
        e.reshape(&back, shape, log_prob_out)
    };
    nll_body(e, ctx.opset, &log_prob, x_ty.dtype, &l, output(node, 0));
    Ok(())
}
