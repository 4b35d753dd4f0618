//! Converters of the movement family: ONNX nodes (every opset 7..=23 form) to [`Op`]s.

use super::{PadMode, SliceAxis, check_perm};
use crate::error::OpError;
use crate::ir::types::DType;
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::util::fmt_list;
use crate::ops::{Op, ScalarArg};

/// Rank of input 0.
fn rank(ctx: &NodeCtx<'_>) -> Result<usize, OpError> {
    Ok(ctx.input_type(0)?.shape.len())
}

/// Non-negative sizes from an int list.
fn sizes(attr: &str, v: &[i64]) -> Result<Vec<usize>, OpError> {
    v.iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| OpError::attr(attr, format!("negative value in {}", fmt_list(v))))
        })
        .collect()
}

/// Takes input `i` as a constant 1-d integer tensor.
fn const_ints(ctx: &mut NodeCtx<'_>, i: usize, what: &str) -> Result<Option<Vec<i64>>, OpError> {
    if !ctx.has_input(i) {
        return Ok(None);
    }
    let ty = ctx.input_type(i)?;
    if !matches!(ty.dtype, DType::I32 | DType::I64) || ty.shape.len() != 1 {
        return Err(OpError::DType {
            input: i,
            dtype: ty.dtype,
            expected: format!(
                "{what} as a 1-d i32/i64 tensor (got rank {})",
                ty.shape.len()
            ),
        });
    }
    ctx.take_const_ints(i)
}

pub(super) fn transpose(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let shape = ctx.input_type(0)?.shape.clone();
    let perm = match ctx.attr_ints("perm")? {
        None => (0..shape.len()).rev().collect(),
        Some(p) => p
            .iter()
            .map(|&v| {
                usize::try_from(v).map_err(|_| {
                    OpError::attr("perm", format!("{} has a negative entry", fmt_list(&p)))
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    check_perm(&perm, &shape)?;
    Ok(Op::Transpose { perm })
}

pub(super) fn concat(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, usize::MAX)?;
    let axis = ctx
        .attr_int_opt("axis")?
        .ok_or_else(|| OpError::attr("axis", "Concat requires an axis"))?;
    Ok(Op::Concat {
        axis: norm_axis("axis", axis, rank(ctx)?)?,
    })
}

pub(super) fn split(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let given = if ctx.opset >= 13 {
        ctx.expect_inputs(1, 2)?;
        const_ints(ctx, 1, "split")?
    } else {
        ctx.expect_inputs(1, 1)?;
        ctx.attr_ints("split")?
    };
    let shape = ctx.input_type(0)?.shape.clone();
    let axis = norm_axis("axis", ctx.attr_int("axis", 0)?, shape.len())?;
    let dim = shape[axis];
    let num_outputs = if ctx.opset >= 18 {
        ctx.attr_int_opt("num_outputs")?
    } else {
        None
    };
    let sizes = match (given, num_outputs) {
        (Some(_), Some(_)) => {
            return Err(OpError::attr(
                "num_outputs",
                "given together with the split input",
            ));
        }
        (Some(s), None) => sizes("split", &s)?,
        (None, Some(n)) => {
            let n = usize::try_from(n)
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| OpError::attr("num_outputs", format!("{n} is not positive")))?;
            if n != ctx.output_count() {
                return Err(OpError::attr(
                    "num_outputs",
                    format!("{n} but the node has {} outputs", ctx.output_count()),
                ));
            }
            // Chunks of ceil(dim / n); the last one is smaller when dim does not divide.
            let chunk = dim.div_ceil(n);
            let last = dim.checked_sub(chunk * (n - 1)).ok_or_else(|| {
                OpError::shape(
                    format!("dim {axis} cannot split into {n} chunks"),
                    &[&shape],
                )
            })?;
            let mut v = vec![chunk; n - 1];
            v.push(last);
            v
        }
        (None, None) => {
            let n = ctx.output_count();
            if n == 0 || dim % n != 0 {
                return Err(OpError::shape(
                    format!("dim {axis} does not split evenly into {n} outputs"),
                    &[&shape],
                ));
            }
            vec![dim / n; n]
        }
    };
    let sum = sizes.iter().try_fold(0usize, |a, &s| a.checked_add(s));
    if sum != Some(dim) {
        return Err(OpError::shape(
            format!(
                "split sizes {} do not add up to dim {axis} ({dim})",
                fmt_list(&sizes)
            ),
            &[&shape],
        ));
    }
    Ok(Op::Split { axis, sizes })
}

/// Normalizes Slice operands against `shape` per the ONNX rules: negative starts/ends count
/// from the back, then clamp to `[0, dim]` (positive steps) or `[0, dim-1]` / `[-1, dim-1]`
/// (negative steps). The result is sorted by axis.
pub(super) fn slice_axes(
    shape: &[usize],
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> Result<Vec<SliceAxis>, OpError> {
    let n = starts.len();
    let default_axes: Vec<i64> = (0..n as i64).collect();
    let axes = axes.unwrap_or(&default_axes);
    let ones = vec![1; n];
    let steps = steps.unwrap_or(&ones);
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return Err(OpError::attr(
            "starts",
            format!(
                "starts, ends, axes and steps differ in length ({n}, {}, {}, {})",
                ends.len(),
                axes.len(),
                steps.len()
            ),
        ));
    }
    let mut out: Vec<SliceAxis> = Vec::with_capacity(n);
    for k in 0..n {
        let axis = norm_axis("axes", axes[k], shape.len())?;
        if out.iter().any(|a| a.axis == axis) {
            return Err(OpError::attr("axes", format!("axis {axis} repeated")));
        }
        let step = steps[k];
        if step == 0 {
            return Err(OpError::attr("steps", "a step is 0"));
        }
        let dim = shape[axis] as i64;
        let from_back = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (start, end) = (from_back(starts[k]), from_back(ends[k]));
        let (start, end) = if step > 0 {
            (start.clamp(0, dim), end.clamp(0, dim))
        } else {
            // `max` then `min` (not clamp): dim may be 0, making the range [0, -1].
            (start.max(0).min(dim - 1), end.max(-1).min(dim - 1))
        };
        out.push(SliceAxis {
            axis,
            start,
            end,
            step,
        });
    }
    out.sort_by_key(|a| a.axis);
    Ok(out)
}

pub(super) fn slice(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let shape = ctx.input_type(0)?.shape.clone();
    let axes = if ctx.opset >= 10 {
        ctx.expect_inputs(3, 5)?;
        let starts = const_ints(ctx, 1, "starts")?.unwrap_or_default();
        let ends = const_ints(ctx, 2, "ends")?.unwrap_or_default();
        let axes = const_ints(ctx, 3, "axes")?;
        let steps = const_ints(ctx, 4, "steps")?;
        slice_axes(&shape, &starts, &ends, axes.as_deref(), steps.as_deref())?
    } else {
        ctx.expect_inputs(1, 1)?;
        let starts = ctx
            .attr_ints("starts")?
            .ok_or_else(|| OpError::attr("starts", "required"))?;
        let ends = ctx
            .attr_ints("ends")?
            .ok_or_else(|| OpError::attr("ends", "required"))?;
        let axes = ctx.attr_ints("axes")?;
        slice_axes(&shape, &starts, &ends, axes.as_deref(), None)?
    };
    Ok(Op::Slice { axes })
}

pub(super) fn gather(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let axis = norm_axis("axis", ctx.attr_int("axis", 0)?, rank(ctx)?)?;
    Ok(Op::Gather { axis })
}

pub(super) fn expand(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let shape = const_ints(ctx, 1, "shape")?.unwrap_or_default();
    Ok(Op::Expand {
        shape: sizes("shape", &shape)?,
    })
}

pub(super) fn tile(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let repeats = sizes(
        "repeats",
        &const_ints(ctx, 1, "repeats")?.unwrap_or_default(),
    )?;
    if repeats.len() != rank(ctx)? {
        return Err(OpError::attr(
            "repeats",
            format!("{} needs one entry per dim", fmt_list(&repeats)),
        ));
    }
    Ok(Op::Tile { repeats })
}

/// Pad's `constant_value` (input 2, opset 11 on): only constant mode reads it (other modes
/// ignore it, so it is never needed); known at compile time it is kept in the op, otherwise
/// it stays a data input read by the kernel ([`ScalarArg::Input`]): it decides no shape.
fn pad_value(ctx: &mut NodeCtx<'_>, mode: PadMode) -> Result<ScalarArg<f64>, OpError> {
    if mode != PadMode::Constant || !ctx.has_input(2) {
        ctx.ignore_input(2);
        return Ok(ScalarArg::Const(0.0));
    }
    let dtype = ctx.input_type(0)?.dtype;
    let ty = ctx.input_type(2)?;
    if ty.numel() != Some(1) || ty.dtype != dtype {
        return Err(OpError::attr(
            "constant_value",
            format!("must be one {dtype} element (got {ty})"),
        ));
    }
    if !ctx.is_const(2) {
        return Ok(ScalarArg::Input);
    }
    Ok(ScalarArg::Const(
        ctx.take_const(2)?
            .and_then(|t| t.scalar_at(0))
            .map_or(0.0, |s| s.as_f64()),
    ))
}

pub(super) fn pad(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let rank = rank(ctx)?;
    let mode = match ctx.attr_string("mode", "constant")?.as_str() {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" if ctx.opset >= 19 => PadMode::Wrap,
        other => {
            return Err(OpError::attr(
                "mode",
                format!("'{other}' is not a Pad mode at opset {}", ctx.opset),
            ));
        }
    };
    let (pads, value) = if ctx.opset >= 11 {
        ctx.expect_inputs(2, if ctx.opset >= 18 { 4 } else { 3 })?;
        let pads = const_ints(ctx, 1, "pads")?.unwrap_or_default();
        let value = pad_value(ctx, mode)?;
        let pads = match const_ints(ctx, 3, "axes")? {
            None => pads,
            Some(axes) => {
                let n = axes.len();
                if pads.len() != 2 * n {
                    return Err(OpError::attr(
                        "pads",
                        format!("{} needs 2 entries per axis in axes", fmt_list(&pads)),
                    ));
                }
                let mut full = vec![0; 2 * rank];
                let mut seen = vec![false; rank];
                for (k, &a) in axes.iter().enumerate() {
                    let a = norm_axis("axes", a, rank)?;
                    if std::mem::replace(&mut seen[a], true) {
                        return Err(OpError::attr("axes", format!("axis {a} repeated")));
                    }
                    full[a] = pads[k];
                    full[a + rank] = pads[k + n];
                }
                full
            }
        };
        (pads, value)
    } else {
        ctx.expect_inputs(1, 1)?;
        let pads = ctx
            .attr_ints("pads")?
            .ok_or_else(|| OpError::attr("pads", "required"))?;
        (
            pads,
            ScalarArg::Const(f64::from(ctx.attr_float("value", 0.0)?)),
        )
    };
    if pads.len() != 2 * rank {
        return Err(OpError::attr(
            "pads",
            format!("{} needs 2 entries per dim (rank {rank})", fmt_list(&pads)),
        ));
    }
    Ok(Op::Pad { mode, pads, value })
}
