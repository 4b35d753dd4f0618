//! View ops: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (inference), BitCast — the
//! output is the input's bytes under another shape (BitCast: another element type of the same
//! size).
//!
//! Every op here is dtype-agnostic: inference only computes the output shape (and BitCast's
//! type), and evaluation reinterprets the input with [`Tensor::reshaped`] (BitCast: its bytes
//! under the new type).

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, Shape, TensorType, checked_numel};
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::util::{expect_arity, fmt_list, wrong_family};
use crate::ops::{MAX_OPSET, MIN_OPSET, Op, OpDef};

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    OpDef {
        op_type: "Reshape",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_reshape,
    },
    OpDef {
        op_type: "Flatten",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_flatten,
    },
    OpDef {
        op_type: "Squeeze",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_squeeze,
    },
    OpDef {
        op_type: "Unsqueeze",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_unsqueeze,
    },
    OpDef {
        op_type: "Identity",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_identity,
    },
    OpDef {
        op_type: "Dropout",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: crate::ops::sample::dropout::convert,
    },
    OpDef {
        op_type: "BitCast",
        since: 26,
        until: MAX_OPSET,
        convert: convert_bitcast,
    },
];

fn convert_bitcast(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let code = ctx
        .attr_int_opt("to")?
        .ok_or_else(|| OpError::attr("to", "is required"))?;
    let to = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .ok_or_else(|| OpError::attr("to", format!("element type {code} is not supported")))?;
    let from = ctx.input_type(0)?.dtype;
    if from.size() != to.size() {
        return Err(OpError::attr(
            "to",
            format!(
                "{} ({} bytes) has not the size of the input's {} ({} bytes)",
                to.name(),
                to.size(),
                from.name(),
                from.size()
            ),
        ));
    }
    if to == DType::Bool && from != DType::Bool {
        return Err(OpError::Unsupported(format!(
            "BitCast from {} to bool (bytes other than 0 and 1 are not booleans)",
            from.name()
        )));
    }
    Ok(Op::BitCast { to })
}

fn convert_reshape(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let allowzero = if ctx.opset >= 14 {
        ctx.attr_int("allowzero", 0)? != 0
    } else {
        false
    };
    let shape_ty = ctx.input_type(1)?;
    if shape_ty.shape.len() != 1 {
        return Err(OpError::shape(
            "the shape input must be 1-d",
            &[&ctx.input_type(0)?.shape, &shape_ty.shape],
        ));
    }
    let shape = ctx.take_const_ints(1)?.unwrap_or_default();
    if allowzero && shape.contains(&0) && shape.contains(&-1) {
        return Err(OpError::attr(
            "shape",
            "with allowzero=1 the shape cannot contain both 0 and -1",
        ));
    }
    Ok(Op::Reshape { shape, allowzero })
}

fn convert_flatten(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let rank = ctx.input_type(0)?.shape.len() as i64;
    let axis = ctx.attr_int("axis", 1)?;
    if axis < -rank || axis > rank {
        return Err(OpError::attr(
            "axis",
            format!("axis {axis} out of range for rank {rank} (valid: -{rank}..={rank})"),
        ));
    }
    let axis = if axis < 0 { axis + rank } else { axis } as usize;
    Ok(Op::Flatten { axis })
}

/// Normalizes, checks for duplicates and sorts a list of axes against `rank`.
fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>, OpError> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let a = norm_axis("axes", a, rank)?;
        if out.contains(&a) {
            return Err(OpError::attr("axes", format!("axis {a} given twice")));
        }
        out.push(a);
    }
    out.sort_unstable();
    Ok(out)
}

/// The axes of Squeeze/Unsqueeze: an attribute before opset 13, input 1 since.
fn axes_operand(ctx: &mut NodeCtx<'_>) -> Result<Option<Vec<i64>>, OpError> {
    if ctx.opset >= 13 {
        ctx.expect_inputs(1, 2)?;
        ctx.take_const_ints(1)
    } else {
        ctx.expect_inputs(1, 1)?;
        ctx.attr_ints("axes")
    }
}

fn convert_squeeze(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let axes = axes_operand(ctx)?.unwrap_or_default();
    let rank = ctx.input_type(0)?.shape.len();
    Ok(Op::Squeeze {
        axes: norm_axes(&axes, rank)?,
    })
}

fn convert_unsqueeze(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let axes =
        axes_operand(ctx)?.ok_or_else(|| OpError::attr("axes", "Unsqueeze requires axes"))?;
    let out_rank = ctx.input_type(0)?.shape.len() + axes.len();
    Ok(Op::Unsqueeze {
        axes: norm_axes(&axes, out_rank)?,
    })
}

fn convert_identity(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    Ok(Op::Identity)
}

/// Printed op name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::Reshape { .. } => "Reshape",
        Op::Flatten { .. } => "Flatten",
        Op::Squeeze { .. } => "Squeeze",
        Op::Unsqueeze { .. } => "Unsqueeze",
        Op::Identity => "Identity",
        Op::BitCast { .. } => "BitCast",
        _ => "?",
    }
}

/// The output shape of a Reshape of `input` to `target`.
fn reshape_shape(input: &[usize], target: &[i64], allowzero: bool) -> Result<Shape, OpError> {
    let target_dims: Vec<usize> = target.iter().map(|&d| d.max(0) as usize).collect();
    let err = |detail: String| OpError::shape(detail, &[input, &target_dims]);
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 => {
                if infer_at.is_some() {
                    return Err(err("more than one -1 in the Reshape target".into()));
                }
                infer_at = Some(i);
                out.push(1);
            }
            0 if !allowzero => match input.get(i) {
                Some(&k) => out.push(k),
                None => {
                    return Err(err(format!(
                        "target dim {i} is 0 (copy) but the input has rank {}",
                        input.len()
                    )));
                }
            },
            d if d >= 0 => out.push(d as usize),
            d => return Err(err(format!("invalid target dim {d}"))),
        }
    }
    let in_numel =
        checked_numel(input).ok_or_else(|| OpError::Overflow("Reshape input size".into()))?;
    let known =
        checked_numel(&out).ok_or_else(|| OpError::Overflow("Reshape target size".into()))?;
    if let Some(i) = infer_at {
        if known == 0 || in_numel % known != 0 {
            return Err(err(format!(
                "cannot infer the -1 dim: {in_numel} elements do not divide by {known}"
            )));
        }
        out[i] = in_numel / known;
    } else if known != in_numel {
        return Err(err(format!(
            "element counts differ: input has {in_numel}, target {known}"
        )));
    }
    Ok(out)
}

/// Checks that resolved axes are strictly increasing (sorted, no duplicates).
fn check_sorted(axes: &[usize], input: &[usize]) -> Result<(), OpError> {
    if axes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(OpError::shape(
            format!("axes {} are not sorted and unique", fmt_list(axes)),
            &[input],
        ));
    }
    Ok(())
}

/// The output shape of `op` for an input of shape `input`.
fn out_shape(op: &Op, input: &[usize]) -> Result<Shape, OpError> {
    if let Op::Squeeze { axes } | Op::Unsqueeze { axes } = op {
        check_sorted(axes, input)?;
    }
    match op {
        Op::Reshape { shape, allowzero } => reshape_shape(input, shape, *allowzero),
        Op::Flatten { axis } => {
            let Some((head, tail)) = input.split_at_checked(*axis) else {
                return Err(OpError::shape(
                    format!("Flatten axis {axis} exceeds the rank"),
                    &[input],
                ));
            };
            let ovf = || OpError::Overflow("Flatten size".into());
            Ok(vec![
                checked_numel(head).ok_or_else(ovf)?,
                checked_numel(tail).ok_or_else(ovf)?,
            ])
        }
        Op::Squeeze { axes } => {
            if axes.is_empty() {
                return Ok(input.iter().copied().filter(|&d| d != 1).collect());
            }
            for &a in axes {
                match input.get(a) {
                    Some(1) => {}
                    Some(d) => {
                        return Err(OpError::shape(
                            format!("cannot squeeze axis {a} of size {d}"),
                            &[input],
                        ));
                    }
                    None => {
                        return Err(OpError::shape(
                            format!("squeeze axis {a} out of range"),
                            &[input],
                        ));
                    }
                }
            }
            Ok(input
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, &d)| d)
                .collect())
        }
        Op::Unsqueeze { axes } => {
            let out_rank = input.len() + axes.len();
            if axes.iter().any(|&a| a >= out_rank) {
                return Err(OpError::shape(
                    format!(
                        "unsqueeze axes {} out of range for output rank {out_rank}",
                        fmt_list(axes)
                    ),
                    &[input],
                ));
            }
            let mut rest = input.iter();
            Ok((0..out_rank)
                .map(|i| {
                    if axes.contains(&i) {
                        1
                    } else {
                        rest.next().copied().unwrap_or(1)
                    }
                })
                .collect())
        }
        Op::Identity | Op::BitCast { .. } => Ok(input.to_vec()),
        _ => Err(wrong_family(op, "view")),
    }
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    // Reject foreign ops before looking at the inputs.
    if name(op) == "?" {
        return Err(wrong_family(op, "view"));
    }
    expect_arity(inputs, 1)?;
    let x = &inputs[0];
    let dtype = match op {
        Op::BitCast { to } if to.size() != x.dtype.size() => {
            return Err(OpError::DType {
                input: 0,
                dtype: x.dtype,
                expected: format!(
                    "a {}-byte element type to bit-cast to {}",
                    to.size(),
                    to.name()
                ),
            });
        }
        Op::BitCast { to } => *to,
        _ => x.dtype,
    };
    Ok(vec![TensorType::new(dtype, out_shape(op, &x.shape)?)])
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    if name(op) == "?" {
        return Err(wrong_family(op, "view"));
    }
    let [x] = inputs else {
        return Err(OpError::Arity {
            expected: "1".into(),
            actual: inputs.len(),
        });
    };
    let shape = out_shape(op, x.shape())?;
    if let Op::BitCast { to } = op {
        infer(op, &[x.ty()])?;
        let y = Tensor::from_bytes(*to, shape, x.bytes().clone())
            .map_err(|e| OpError::Unsupported(format!("BitCast: {e}")))?;
        return Ok(vec![y]);
    }
    let y = x.reshaped(shape.clone()).ok_or_else(|| {
        OpError::shape("element count changed in a view op", &[x.shape(), &shape])
    })?;
    Ok(vec![y])
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::Reshape { shape, allowzero } => vec![
            ("shape", fmt_list(shape)),
            ("allowzero", u8::from(*allowzero).to_string()),
        ],
        Op::Flatten { axis } => vec![("axis", axis.to_string())],
        Op::Squeeze { axes } | Op::Unsqueeze { axes } => vec![("axes", fmt_list(axes))],
        Op::BitCast { to } => vec![("to", to.name().to_string())],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::types::DType;
    use crate::ops::test_util::{
        cnst, convert_node as convert, data, data_named, int_attr, ints_attr, node,
    };
    use arenac_proto::AttributeProto;

    fn ty(shape: &[usize]) -> TensorType {
        TensorType::new(DType::F32, shape.to_vec())
    }

    fn shape_of(op: &Op, input: &[usize]) -> Result<Shape, OpError> {
        infer(op, &[ty(input)]).map(|v| v[0].shape.clone())
    }

    #[test]
    fn reshape_zero_and_minus_one() {
        let n = node("Reshape", 1, vec![]);
        let (op, data_in) = convert(
            &n,
            13,
            vec![data(&[2, 3, 4]), cnst(Tensor::i64(vec![3], &[0, -1, 2]))],
        )
        .unwrap();
        assert_eq!(data_in, vec![0]);
        assert_eq!(shape_of(&op, &[2, 3, 4]).unwrap(), vec![2, 6, 2]);
        assert_eq!(
            attrs(&op),
            vec![("shape", "[0,-1,2]".into()), ("allowzero", "0".into())]
        );
        let x = Tensor::f32(
            vec![2, 3, 4],
            &(0..24).map(|v| v as f32).collect::<Vec<_>>(),
        );
        let y = eval(&op, &[&x]).unwrap().remove(0);
        assert_eq!(y.shape(), &[2, 6, 2]);
        assert_eq!(y.to_f32_vec(), x.to_f32_vec());
    }

    #[test]
    fn reshape_allowzero() {
        // allowzero=1: 0 is a real zero dim.
        let op = Op::Reshape {
            shape: vec![0, 4],
            allowzero: true,
        };
        assert_eq!(shape_of(&op, &[0, 4]).unwrap(), vec![0, 4]);
        assert!(matches!(
            shape_of(&op, &[3, 4]),
            Err(OpError::ShapeMismatch { .. })
        ));
        // The attribute is read since opset 14 only.
        let n = node("Reshape", 1, vec![int_attr("allowzero", 1)]);
        let s = || cnst(Tensor::i64(vec![2], &[0, 4]));
        let (op14, _) = convert(&n, 14, vec![data(&[3, 4]), s()]).unwrap();
        assert_eq!(op14, op);
        let (op13, _) = convert(&n, 13, vec![data(&[3, 4]), s()]).unwrap();
        assert_eq!(shape_of(&op13, &[3, 4]).unwrap(), vec![3, 4]);
        // 0 and -1 together with allowzero is invalid.
        let bad = convert(
            &n,
            14,
            vec![data(&[3, 4]), cnst(Tensor::i64(vec![2], &[0, -1]))],
        );
        assert!(matches!(bad, Err(OpError::InvalidAttribute { .. })));
    }

    #[test]
    fn reshape_errors() {
        let op = Op::Reshape {
            shape: vec![5, -1],
            allowzero: false,
        };
        assert!(matches!(
            shape_of(&op, &[2, 3]),
            Err(OpError::ShapeMismatch { .. })
        ));
        let op = Op::Reshape {
            shape: vec![-1, -1],
            allowzero: false,
        };
        assert!(shape_of(&op, &[2, 3]).is_err());
        let op = Op::Reshape {
            shape: vec![7],
            allowzero: false,
        };
        assert!(matches!(
            shape_of(&op, &[2, 3]),
            Err(OpError::ShapeMismatch { .. })
        ));
        // Not a constant shape.
        let n = node("Reshape", 1, vec![]);
        let r = convert(&n, 13, vec![data(&[2, 3]), data(&[2])]);
        assert!(matches!(r, Err(OpError::NotConstant { input: 1, .. })));
    }

    #[test]
    fn flatten() {
        let n = node("Flatten", 1, vec![int_attr("axis", -1)]);
        let (op, _) = convert(&n, 13, vec![data(&[2, 3, 4])]).unwrap();
        assert_eq!(op, Op::Flatten { axis: 2 });
        assert_eq!(shape_of(&op, &[2, 3, 4]).unwrap(), vec![6, 4]);
        let n = node("Flatten", 1, vec![]);
        let (op, _) = convert(&n, 9, vec![data(&[2, 3, 4])]).unwrap();
        assert_eq!(shape_of(&op, &[2, 3, 4]).unwrap(), vec![2, 12]);
        assert_eq!(
            shape_of(&Op::Flatten { axis: 0 }, &[2, 3]).unwrap(),
            vec![1, 6]
        );
        assert_eq!(
            shape_of(&Op::Flatten { axis: 2 }, &[2, 3]).unwrap(),
            vec![6, 1]
        );
        assert!(shape_of(&Op::Flatten { axis: 3 }, &[2, 3]).is_err());
        let n = node("Flatten", 1, vec![int_attr("axis", 4)]);
        assert!(convert(&n, 13, vec![data(&[2, 3, 4])]).is_err());
    }

    #[test]
    fn squeeze_both_opset_styles() {
        // Opset 11: axes attribute.
        let n = node("Squeeze", 1, vec![ints_attr("axes", &[-1, 0])]);
        let (op, _) = convert(&n, 11, vec![data(&[1, 3, 1])]).unwrap();
        assert_eq!(op, Op::Squeeze { axes: vec![0, 2] });
        assert_eq!(shape_of(&op, &[1, 3, 1]).unwrap(), vec![3]);
        // Opset 13: axes input.
        let n = node("Squeeze", 1, vec![]);
        let (op, data_in) = convert(
            &n,
            13,
            vec![data(&[1, 3, 1]), cnst(Tensor::i64(vec![1], &[2]))],
        )
        .unwrap();
        assert_eq!(data_in, vec![0]);
        assert_eq!(shape_of(&op, &[1, 3, 1]).unwrap(), vec![1, 3]);
        // No axes: every size-1 dim.
        let (op, _) = convert(&n, 13, vec![data(&[1, 3, 1])]).unwrap();
        assert_eq!(shape_of(&op, &[1, 3, 1]).unwrap(), vec![3]);
        // Squeezing a dim that is not 1.
        assert!(shape_of(&Op::Squeeze { axes: vec![2, 0] }, &[1, 3, 1]).is_err());
        assert!(shape_of(&Op::Unsqueeze { axes: vec![0, 0] }, &[3]).is_err());
        let op = Op::Squeeze { axes: vec![1] };
        assert!(matches!(
            shape_of(&op, &[1, 3, 1]),
            Err(OpError::ShapeMismatch { .. })
        ));
        let x = Tensor::f32(vec![1, 2, 1], &[1.0, 2.0]);
        let y = eval(&Op::Squeeze { axes: vec![] }, &[&x])
            .unwrap()
            .remove(0);
        assert_eq!(y.shape(), &[2]);
        assert_eq!(y.to_f32_vec(), vec![1.0, 2.0]);
    }

    #[test]
    fn unsqueeze_both_opset_styles() {
        let n = node("Unsqueeze", 1, vec![ints_attr("axes", &[0, -1])]);
        let (op, _) = convert(&n, 11, vec![data(&[3, 4])]).unwrap();
        // Axes refer to the output (rank 4): -1 is 3.
        assert_eq!(op, Op::Unsqueeze { axes: vec![0, 3] });
        assert_eq!(shape_of(&op, &[3, 4]).unwrap(), vec![1, 3, 4, 1]);
        let n = node("Unsqueeze", 1, vec![]);
        let (op, _) = convert(
            &n,
            13,
            vec![data(&[3, 4]), cnst(Tensor::i64(vec![2], &[1, 3]))],
        )
        .unwrap();
        assert_eq!(shape_of(&op, &[3, 4]).unwrap(), vec![3, 1, 4, 1]);
        assert_eq!(attrs(&op), vec![("axes", "[1,3]".into())]);
        // Duplicates and missing axes are errors.
        let dup = convert(
            &n,
            13,
            vec![data(&[3, 4]), cnst(Tensor::i64(vec![2], &[1, -3]))],
        );
        assert!(matches!(dup, Err(OpError::InvalidAttribute { .. })));
        assert!(convert(&n, 13, vec![data(&[3, 4])]).is_err());
        let x = Tensor::f32(vec![2], &[5.0, 6.0]);
        let y = eval(&Op::Unsqueeze { axes: vec![0] }, &[&x])
            .unwrap()
            .remove(0);
        assert_eq!(y.shape(), &[1, 2]);
        assert_eq!(y.to_f32_vec(), vec![5.0, 6.0]);
    }

    #[test]
    fn identity_and_dropout() {
        let x = Tensor::i64(vec![2], &[7, 8]);
        assert_eq!(eval(&Op::Identity, &[&x]).unwrap(), vec![x.clone()]);
        assert_eq!(name(&Op::Identity), "Identity");
        assert!(infer(&Op::Identity, &[]).is_err());
        // Opset 7 with a ratio attribute.
        let n = node(
            "Dropout",
            1,
            vec![AttributeProto {
                name: Some("ratio".into()),
                f: Some(0.3),
                ..Default::default()
            }],
        );
        assert_eq!(convert(&n, 7, vec![data(&[2])]).unwrap().0, Op::Identity);
        // Opset 12: ratio ignored, training_mode false.
        let n = node("Dropout", 1, vec![]);
        let (op, data_in) = convert(
            &n,
            13,
            vec![
                data(&[2]),
                data(&[]),
                cnst(Tensor::from_i64(DType::Bool, vec![], &[0])),
            ],
        )
        .unwrap();
        assert_eq!((op, data_in), (Op::Identity, vec![0]));
        let train = convert(
            &n,
            13,
            vec![
                data(&[2]),
                data(&[]),
                cnst(Tensor::from_i64(DType::Bool, vec![], &[1])),
            ],
        );
        assert!(matches!(train, Err(OpError::Unsupported(_))));
        // A run-time training_mode is checked when running (it must be a bool scalar).
        let flag = || data_named("t", TensorType::new(DType::Bool, vec![]));
        let (op, data_in) = convert(&n, 13, vec![data(&[2]), data(&[]), flag()]).unwrap();
        let check = crate::ops::sample::DropoutAttrs {
            check: true,
            ratio: true,
            mask: false,
        };
        assert_eq!(op, Op::Sample(crate::ops::SampleOp::Dropout(check)));
        assert_eq!(data_in, vec![0, 1, 2]);
        let ratio0 = cnst(Tensor::f32(vec![], &[0.0]));
        let (op, data_in) = convert(&n, 13, vec![data(&[2]), ratio0, flag()]).unwrap();
        assert_eq!((op, data_in), (Op::Identity, vec![0]));
        let bad = convert(&n, 13, vec![data(&[2]), data(&[]), data(&[])]);
        assert!(matches!(bad, Err(OpError::DType { .. })));
        // A declared mask output is produced (all true).
        let n = node("Dropout", 2, vec![]);
        let mask = crate::ops::sample::DropoutAttrs {
            check: false,
            ratio: false,
            mask: true,
        };
        assert_eq!(
            convert(&n, 13, vec![data(&[2])]).unwrap().0,
            Op::Sample(crate::ops::SampleOp::Dropout(mask))
        );
    }

    #[test]
    fn foreign_op() {
        assert!(infer(&Op::MatMul, &[ty(&[2])]).is_err());
        assert_eq!(name(&Op::MatMul), "?");
    }
}
