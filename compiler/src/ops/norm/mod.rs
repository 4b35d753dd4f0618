//! Normalizations: BatchNormalization (inference and training mode), LayerNormalization,
//! InstanceNormalization, GroupNormalization, MeanVarianceNormalization, RMSNormalization
//! (the statistics-based ones in [`stats`]), LRN, Softmax, LogSoftmax.
//!
//! Every op here is float-only; the reference evaluation computes in `f64` and rounds to the
//! input dtype at the end.

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType, checked_numel};
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::util::{expect_arity, fmt_f32, fmt_list, fmt_shape, wrong_family};
use crate::ops::{MAX_OPSET, Op, OpDef};

/// LRN attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrnAttrs {
    /// Channels summed over (odd).
    pub size: usize,
    /// Scale.
    pub alpha: f32,
    /// Exponent.
    pub beta: f32,
    /// Bias.
    pub bias: f32,
}

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    OpDef {
        op_type: "BatchNormalization",
        since: 7,
        until: MAX_OPSET,
        convert: convert_batchnorm,
    },
    OpDef {
        op_type: "LayerNormalization",
        since: 17,
        until: MAX_OPSET,
        convert: convert_layernorm,
    },
    OpDef {
        op_type: "InstanceNormalization",
        since: 7,
        until: MAX_OPSET,
        convert: convert_instancenorm,
    },
    OpDef {
        op_type: "GroupNormalization",
        since: 18,
        until: MAX_OPSET,
        convert: convert_groupnorm,
    },
    OpDef {
        op_type: "MeanVarianceNormalization",
        since: 9,
        until: MAX_OPSET,
        convert: convert_mvn,
    },
    OpDef {
        op_type: "RMSNormalization",
        since: 23,
        until: MAX_OPSET,
        convert: convert_rmsnorm,
    },
    OpDef {
        op_type: "LRN",
        since: 7,
        until: MAX_OPSET,
        convert: convert_lrn,
    },
    OpDef {
        op_type: "Softmax",
        since: 7,
        until: MAX_OPSET,
        convert: convert_softmax,
    },
    OpDef {
        op_type: "LogSoftmax",
        since: 7,
        until: MAX_OPSET,
        convert: convert_log_softmax,
    },
];

fn convert_batchnorm(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(5, 5)?;
    if ctx.opset < 9 && ctx.attr_int("spatial", 1)? != 1 {
        return Err(OpError::Unsupported(
            "BatchNormalization with spatial=0 (per-element statistics)".into(),
        ));
    }
    let training = ctx.opset >= 14 && ctx.attr_int("training_mode", 0)? != 0;
    if training {
        return Ok(Op::BatchNormalization {
            epsilon: ctx.attr_float("epsilon", 1e-5)?,
            training: Some(ctx.attr_float("momentum", 0.9)?),
        });
    }
    if (1..5).any(|i| ctx.has_output(i)) {
        return Err(OpError::Unsupported(
            "BatchNormalization statistics outputs without training_mode=1 (opset >= 14)".into(),
        ));
    }
    Ok(Op::BatchNormalization {
        epsilon: ctx.attr_float("epsilon", 1e-5)?,
        training: None,
    })
}

/// The float dtype named by a `stash_type` attribute (default float).
fn stash_type(ctx: &NodeCtx<'_>) -> Result<DType, OpError> {
    let code = ctx.attr_int("stash_type", 1)?;
    i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .filter(|d| d.is_float())
        .ok_or_else(|| OpError::attr("stash_type", format!("{code} is not a float type")))
}

fn convert_layernorm(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 3)?;
    let rank = ctx.input_type(0)?.shape.len();
    let axis = norm_axis("axis", ctx.attr_int("axis", -1)?, rank)?;
    // stash_type selects the precision of the intermediate computation (the reference
    // computes in f64 regardless) and the dtype of the Mean and InvStdDev outputs.
    let stash = stash_type(ctx)?;
    Ok(Op::LayerNormalization {
        axis,
        epsilon: ctx.attr_float("epsilon", 1e-5)?,
        stats: (ctx.has_output(1) || ctx.has_output(2)).then_some(stash),
    })
}

fn convert_instancenorm(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(3, 3)?;
    Ok(Op::InstanceNormalization {
        epsilon: ctx.attr_float("epsilon", 1e-5)?,
    })
}

fn convert_groupnorm(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(3, 3)?;
    stash_type(ctx)?;
    let groups = ctx
        .attr_int_opt("num_groups")?
        .ok_or_else(|| OpError::attr("num_groups", "required"))?;
    let groups = usize::try_from(groups)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| OpError::attr("num_groups", format!("{groups} must be positive")))?;
    Ok(Op::GroupNormalization {
        groups,
        epsilon: ctx.attr_float("epsilon", 1e-5)?,
        per_channel: ctx.opset >= 21,
    })
}

fn convert_mvn(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let rank = ctx.input_type(0)?.shape.len();
    let given = ctx.attr_ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]);
    let mut axes = given
        .iter()
        .map(|&a| norm_axis("axes", a, rank))
        .collect::<Result<Vec<_>, _>>()?;
    axes.sort_unstable();
    if axes.windows(2).any(|w| w[0] == w[1]) {
        return Err(OpError::attr("axes", "repeated axis"));
    }
    Ok(Op::MeanVarianceNormalization { axes })
}

fn convert_rmsnorm(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    stash_type(ctx)?;
    let rank = ctx.input_type(0)?.shape.len();
    Ok(Op::RmsNormalization {
        axis: norm_axis("axis", ctx.attr_int("axis", -1)?, rank)?,
        epsilon: ctx.attr_float("epsilon", 1e-5)?,
    })
}

fn convert_lrn(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let size = ctx
        .attr_int_opt("size")?
        .ok_or_else(|| OpError::attr("size", "required"))?;
    if size < 1 {
        return Err(OpError::attr("size", format!("{size} must be positive")));
    }
    let size = usize::try_from(size).map_err(|_| OpError::attr("size", "too large"))?;
    Ok(Op::Lrn(LrnAttrs {
        size,
        alpha: ctx.attr_float("alpha", 1e-4)?,
        beta: ctx.attr_float("beta", 0.75)?,
        bias: ctx.attr_float("bias", 1.0)?,
    }))
}

fn convert_softmax_any(ctx: &mut NodeCtx<'_>, log: bool) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let rank = ctx.input_type(0)?.shape.len();
    let coerce_2d = ctx.opset < 13;
    let default = if coerce_2d { 1 } else { -1 };
    let axis = norm_axis("axis", ctx.attr_int("axis", default)?, rank)?;
    Ok(Op::Softmax {
        axis,
        log,
        coerce_2d,
    })
}

fn convert_softmax(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    convert_softmax_any(ctx, false)
}

fn convert_log_softmax(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    convert_softmax_any(ctx, true)
}

/// Printed op name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::BatchNormalization { .. } => "BatchNormalization",
        Op::LayerNormalization { .. } => "LayerNormalization",
        Op::InstanceNormalization { .. } => "InstanceNormalization",
        Op::GroupNormalization { .. } => "GroupNormalization",
        Op::MeanVarianceNormalization { .. } => "MeanVarianceNormalization",
        Op::RmsNormalization { .. } => "RMSNormalization",
        Op::Lrn(_) => "LRN",
        Op::Softmax { log: false, .. } => "Softmax",
        Op::Softmax { log: true, .. } => "LogSoftmax",
        _ => "?",
    }
}

fn expect_float(inputs: &[TensorType], i: usize) -> Result<DType, OpError> {
    let dtype = inputs
        .get(i)
        .map(|t| t.dtype)
        .ok_or_else(|| OpError::Arity {
            expected: format!("input {i}"),
            actual: inputs.len(),
        })?;
    if !dtype.is_float() {
        return Err(OpError::DType {
            input: i,
            dtype,
            expected: "a float type".into(),
        });
    }
    Ok(dtype)
}

fn numel(ty: &TensorType) -> Result<usize, OpError> {
    ty.numel()
        .ok_or_else(|| OpError::Overflow(format!("shape {}", fmt_shape(&ty.shape))))
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    match op {
        Op::BatchNormalization { .. }
        | Op::LayerNormalization { .. }
        | Op::InstanceNormalization { .. }
        | Op::GroupNormalization { .. }
        | Op::MeanVarianceNormalization { .. }
        | Op::RmsNormalization { .. } => stats::infer(op, inputs),
        Op::Lrn(_) => {
            expect_arity(inputs, 1)?;
            expect_float(inputs, 0)?;
            let x = &inputs[0];
            if x.shape.len() < 2 {
                return Err(OpError::shape(
                    "X must have rank >= 2 (N, C, ...)",
                    &[&x.shape],
                ));
            }
            numel(x)?;
            Ok(vec![x.clone()])
        }
        Op::Softmax { axis, .. } => {
            expect_arity(inputs, 1)?;
            expect_float(inputs, 0)?;
            let x = &inputs[0];
            if *axis >= x.shape.len() {
                return Err(OpError::shape(
                    format!("axis {axis} out of range"),
                    &[&x.shape],
                ));
            }
            numel(x)?;
            Ok(vec![x.clone()])
        }
        _ => Err(wrong_family(op, "norm")),
    }
}

fn input<'a>(inputs: &[&'a Tensor], i: usize) -> Result<&'a Tensor, OpError> {
    inputs.get(i).copied().ok_or_else(|| OpError::Arity {
        expected: format!("input {i}"),
        actual: inputs.len(),
    })
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    if stats::is_stats(op) {
        return stats::eval(op, inputs);
    }
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    infer(op, &types)?;
    let x = input(inputs, 0)?;
    let shape = x.shape().to_vec();
    let xv = x.to_f64_vec();
    let out = match op {
        Op::Lrn(a) => {
            let c = shape[1];
            let inner = checked_numel(&shape[2..]).unwrap_or(0);
            let n = shape[0];
            let below = a.size.saturating_sub(1) / 2; // floor((size-1)/2)
            let above = a.size / 2; // ceil((size-1)/2)
            let (alpha, beta, bias) = (f64::from(a.alpha), f64::from(a.beta), f64::from(a.bias));
            let mut y = vec![0.0; xv.len()];
            for b in 0..n {
                for ch in 0..c {
                    let lo = ch.saturating_sub(below);
                    let hi = ch.saturating_add(above).min(c - 1);
                    for s in 0..inner {
                        let at = |k: usize| (b * c + k) * inner + s;
                        let sq: f64 = (lo..=hi).map(|k| xv[at(k)] * xv[at(k)]).sum();
                        let den = (bias + alpha / a.size as f64 * sq).powf(beta);
                        y[at(ch)] = xv[at(ch)] / den;
                    }
                }
            }
            y
        }
        Op::Softmax {
            axis,
            log,
            coerce_2d,
        } => {
            // Rows of `len` elements `stride` apart: coerce_2d normalizes each contiguous
            // row of prod(dims[axis..]); otherwise each line along `axis`.
            let (outer, len, stride) = if *coerce_2d {
                let len = checked_numel(&shape[*axis..]).unwrap_or(0);
                (checked_numel(&shape[..*axis]).unwrap_or(0), len, 1)
            } else {
                let stride = checked_numel(&shape[*axis + 1..]).unwrap_or(0);
                let outer = checked_numel(&shape[..*axis]).unwrap_or(0) * stride;
                (outer, shape[*axis], stride)
            };
            let mut y = vec![0.0; xv.len()];
            for o in 0..outer {
                let base = if *coerce_2d {
                    o * len
                } else {
                    (o / stride) * len * stride + o % stride
                };
                let idx = |k: usize| base + k * stride;
                let max = (0..len)
                    .map(|k| xv[idx(k)])
                    .fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = (0..len).map(|k| (xv[idx(k)] - max).exp()).sum();
                for k in 0..len {
                    let d = xv[idx(k)] - max;
                    y[idx(k)] = if *log { d - sum.ln() } else { d.exp() / sum };
                }
            }
            y
        }
        _ => return Err(wrong_family(op, "norm")),
    };
    Ok(vec![Tensor::from_f64(x.dtype(), shape, &out)])
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::BatchNormalization { epsilon, training } => {
            let mut v = vec![("epsilon", fmt_f32(*epsilon))];
            if let Some(m) = training {
                v.push(("momentum", fmt_f32(*m)));
            }
            v
        }
        Op::LayerNormalization {
            axis,
            epsilon,
            stats,
        } => {
            let mut v = vec![("axis", axis.to_string()), ("epsilon", fmt_f32(*epsilon))];
            if let Some(d) = stats {
                v.push(("stats", d.name().to_string()));
            }
            v
        }
        Op::InstanceNormalization { epsilon } => vec![("epsilon", fmt_f32(*epsilon))],
        Op::GroupNormalization {
            groups,
            epsilon,
            per_channel,
        } => vec![
            ("num_groups", groups.to_string()),
            ("epsilon", fmt_f32(*epsilon)),
            ("per_channel", u8::from(*per_channel).to_string()),
        ],
        Op::MeanVarianceNormalization { axes } => vec![("axes", fmt_list(axes))],
        Op::RmsNormalization { axis, epsilon } => {
            vec![("axis", axis.to_string()), ("epsilon", fmt_f32(*epsilon))]
        }
        Op::Lrn(a) => vec![
            ("size", a.size.to_string()),
            ("alpha", fmt_f32(a.alpha)),
            ("beta", fmt_f32(a.beta)),
            ("bias", fmt_f32(a.bias)),
        ],
        Op::Softmax {
            axis, coerce_2d, ..
        } => vec![
            ("axis", axis.to_string()),
            ("coerce_2d", u8::from(*coerce_2d).to_string()),
        ],
        _ => Vec::new(),
    }
}

pub mod stats;
#[cfg(test)]
mod tests;
