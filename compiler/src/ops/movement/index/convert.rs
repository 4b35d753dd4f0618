//! Converters of the index-driven movement ops: ONNX nodes to [`MoveOp`]s (CenterCropPad to a
//! cropping/padding [`Op::Pad`]).

use super::{Col2ImAttrs, MoveOp, Reduction};
use crate::error::OpError;
use crate::ir::types::DType;
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::util::fmt_list;
use crate::ops::{Op, PadMode, ScalarArg};

fn rank(ctx: &NodeCtx<'_>) -> Result<usize, OpError> {
    Ok(ctx.input_type(0)?.shape.len())
}

/// A not-constant input whose values decide the output shape, said so.
pub(super) fn data_dependent(e: OpError) -> OpError {
    match e {
        OpError::NotConstant { input, name } => OpError::DataDependent { input, name },
        other => other,
    }
}

pub(super) fn gather_elements(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let axis = norm_axis("axis", ctx.attr_int("axis", 0)?, rank(ctx)?)?;
    Ok(Op::Move(MoveOp::GatherElements { axis }))
}

pub(super) fn gather_nd(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let b = ctx.attr_int("batch_dims", 0)?;
    let batch_dims =
        usize::try_from(b).map_err(|_| OpError::attr("batch_dims", format!("{b} is negative")))?;
    Ok(Op::Move(MoveOp::GatherNd { batch_dims }))
}

fn reduction(ctx: &NodeCtx<'_>) -> Result<Reduction, OpError> {
    let r = ctx.attr_string("reduction", "none")?;
    let (red, since) = match r.as_str() {
        "none" => (Reduction::None, 0),
        "add" => (Reduction::Add, 16),
        "mul" => (Reduction::Mul, 16),
        "max" => (Reduction::Max, 18),
        "min" => (Reduction::Min, 18),
        _ => (Reduction::None, i64::MAX),
    };
    if ctx.opset < since {
        return Err(OpError::attr(
            "reduction",
            format!("'{r}' is not a reduction at opset {}", ctx.opset),
        ));
    }
    Ok(red)
}

pub(super) fn scatter_elements(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(3, 3)?;
    let axis = norm_axis("axis", ctx.attr_int("axis", 0)?, rank(ctx)?)?;
    Ok(Op::Move(MoveOp::ScatterElements {
        axis,
        reduction: reduction(ctx)?,
        // ScatterElements starts at opset 11, where Scatter ends.
        legacy: ctx.opset < 11,
    }))
}

pub(super) fn scatter_nd(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(3, 3)?;
    Ok(Op::Move(MoveOp::ScatterNd {
        reduction: reduction(ctx)?,
    }))
}

pub(super) fn one_hot(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(3, 3)?;
    let r = rank(ctx)?;
    let depth = ctx
        .take_const(1)?
        .filter(|t| t.numel() == 1)
        .and_then(|t| t.scalar_at(0))
        .map(|s| s.as_f64())
        .ok_or_else(|| OpError::attr("depth", "must be one number"))?;
    if !(depth >= 1.0 && depth <= (1u64 << 40) as f64) {
        return Err(OpError::attr(
            "depth",
            format!("{depth} is not a positive size"),
        ));
    }
    let axis = norm_axis("axis", ctx.attr_int("axis", -1)?, r + 1)?;
    Ok(Op::Move(MoveOp::OneHot {
        axis,
        depth: depth as usize,
    }))
}

/// Trilu's `k` (input 1) decides no shape: known at compile time it is kept in the op,
/// otherwise the kernel reads it ([`ScalarArg::Input`]).
pub(super) fn trilu(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 2)?;
    if ctx.has_input(1) {
        let ty = ctx.input_type(1)?;
        if ty.dtype != DType::I64 || ty.numel() != Some(1) {
            return Err(OpError::attr(
                "k",
                format!("must be one int64 element (got {ty})"),
            ));
        }
    }
    let k = if ctx.has_input(1) && !ctx.is_const(1) {
        ScalarArg::Input
    } else {
        match ctx.take_const_ints(1)? {
            None => ScalarArg::Const(0),
            Some(v) if v.len() == 1 => ScalarArg::Const(v[0]),
            Some(v) => {
                return Err(OpError::attr(
                    "k",
                    format!("{} is not one number", fmt_list(&v)),
                ));
            }
        }
    };
    Ok(Op::Move(MoveOp::Trilu {
        upper: ctx.attr_int("upper", 1)? != 0,
        k,
    }))
}

fn block_and_mode(ctx: &NodeCtx<'_>) -> Result<(usize, bool), OpError> {
    let b = ctx
        .attr_int_opt("blocksize")?
        .ok_or_else(|| OpError::attr("blocksize", "required"))?;
    let block = usize::try_from(b)
        .ok()
        .filter(|&b| b >= 1)
        .ok_or_else(|| OpError::attr("blocksize", format!("{b} is not positive")))?;
    let crd = match ctx.attr_string("mode", "DCR")?.as_str() {
        "DCR" => false,
        "CRD" => true,
        other => {
            return Err(OpError::attr(
                "mode",
                format!("'{other}' is not DCR or CRD"),
            ));
        }
    };
    Ok((block, crd))
}

pub(super) fn depth_to_space(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let (block, crd) = block_and_mode(ctx)?;
    Ok(Op::Move(MoveOp::DepthToSpace { block, crd }))
}

pub(super) fn space_to_depth(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let (block, crd) = block_and_mode(ctx)?;
    Ok(Op::Move(MoveOp::SpaceToDepth { block, crd }))
}

pub(super) fn reverse_sequence(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let r = rank(ctx)?;
    let batch_axis = norm_axis("batch_axis", ctx.attr_int("batch_axis", 1)?, r)?;
    let time_axis = norm_axis("time_axis", ctx.attr_int("time_axis", 0)?, r)?;
    if batch_axis + time_axis != 1 {
        return Err(OpError::attr(
            "time_axis",
            format!("batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1"),
        ));
    }
    Ok(Op::Move(MoveOp::ReverseSequence {
        batch_axis,
        time_axis,
    }))
}

/// CenterCropPad is a constant-mode Pad whose negative pads crop: per axis, the difference
/// split with the smaller half first.
pub(super) fn center_crop_pad(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let shape = ctx.input_type(0)?.shape.clone();
    let r = shape.len();
    let target = ctx.take_const_ints(1)?.unwrap_or_default();
    let axes: Vec<usize> = match ctx.attr_ints("axes")? {
        None => (0..r).collect(),
        Some(a) => a
            .iter()
            .map(|&a| norm_axis("axes", a, r))
            .collect::<Result<_, _>>()?,
    };
    if axes.len() != target.len() {
        return Err(OpError::attr(
            "axes",
            format!("{} axes for shape {}", axes.len(), fmt_list(&target)),
        ));
    }
    let mut pads = vec![0i64; 2 * r];
    let mut seen = vec![false; r];
    for (&a, &s) in axes.iter().zip(&target) {
        if std::mem::replace(&mut seen[a], true) {
            return Err(OpError::attr("axes", format!("axis {a} repeated")));
        }
        if s < 0 {
            return Err(OpError::attr("shape", format!("{s} is negative")));
        }
        let diff = s - shape[a] as i64;
        // Crop (diff < 0) or pad (diff > 0), the begin side taking floor(|diff| / 2).
        let begin = diff.abs() / 2 * diff.signum();
        pads[a] = begin;
        pads[a + r] = diff - begin;
    }
    Ok(Op::Pad {
        mode: PadMode::Constant,
        pads,
        value: ScalarArg::Const(0.0),
    })
}

pub(super) fn compress(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let r = rank(ctx)?;
    let axis = match ctx.attr_int_opt("axis")? {
        None => None,
        Some(a) => Some(norm_axis("axis", a, r)?),
    };
    let cond = ctx
        .take_const(1)
        .map_err(data_dependent)?
        .unwrap_or_else(|| crate::ir::tensor::Tensor::from_i64(DType::Bool, vec![0], &[]));
    if cond.shape().len() != 1 {
        return Err(OpError::shape("condition must be 1-d", &[cond.shape()]));
    }
    let keep = cond
        .to_f64_vec()
        .iter()
        .enumerate()
        .filter(|(_, c)| **c != 0.0)
        .map(|(i, _)| i)
        .collect();
    Ok(Op::Move(MoveOp::Compress { axis, keep }))
}

pub(super) fn eye_like(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let dtype = match ctx.attr_int_opt("dtype")? {
        None => None,
        Some(code) => Some(
            i32::try_from(code)
                .ok()
                .and_then(DType::from_onnx)
                .ok_or_else(|| OpError::attr("dtype", format!("{code} is not a supported type")))?,
        ),
    };
    Ok(Op::Move(MoveOp::EyeLike {
        dtype,
        k: ctx.attr_int("k", 0)?,
    }))
}

pub(super) fn col2im(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(3, 3)?;
    let sizes = |name: &str, v: Vec<i64>, min: i64| -> Result<Vec<usize>, OpError> {
        v.iter()
            .map(|&d| {
                usize::try_from(d)
                    .ok()
                    .filter(|&d| d as i64 >= min)
                    .ok_or_else(|| OpError::attr(name, format!("{} has a bad entry", fmt_list(&v))))
            })
            .collect()
    };
    let image = sizes(
        "image_shape",
        ctx.take_const_ints(1)?.unwrap_or_default(),
        1,
    )?;
    let block = sizes(
        "block_shape",
        ctx.take_const_ints(2)?.unwrap_or_default(),
        1,
    )?;
    let nd = image.len();
    let list = |name: &str, default: i64, n: usize, min: i64| -> Result<Vec<usize>, OpError> {
        let v = ctx.attr_ints(name)?.unwrap_or_else(|| vec![default; n]);
        if v.len() != n {
            return Err(OpError::attr(name, format!("needs {n} entries")));
        }
        sizes(name, v, min)
    };
    if block.len() != nd || nd == 0 {
        return Err(OpError::attr(
            "block_shape",
            "needs one entry per image dim",
        ));
    }
    Ok(Op::Move(MoveOp::Col2Im(Col2ImAttrs {
        strides: list("strides", 1, nd, 1)?,
        dilations: list("dilations", 1, nd, 1)?,
        pads: list("pads", 0, 2 * nd, 0)?,
        image,
        block,
    })))
}
