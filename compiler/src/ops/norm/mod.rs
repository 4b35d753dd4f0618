//! Normalizations: BatchNormalization (inference), LayerNormalization, LRN, Softmax, LogSoftmax.
//!
//! Every op here is float-only; the reference evaluation computes in `f64` and rounds to the
//! input dtype at the end.

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType, checked_numel};
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::util::{
    broadcast_index_map, broadcast_shapes, expect_arity, fmt_f32, fmt_shape, wrong_family,
};
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
    if ctx.opset >= 14 && ctx.attr_int("training_mode", 0)? != 0 {
        return Err(OpError::Unsupported(
            "BatchNormalization training_mode=1 (arenac compiles inference only)".into(),
        ));
    }
    if (1..5).any(|i| ctx.has_output(i)) {
        return Err(OpError::Unsupported(
            "BatchNormalization running/saved statistics outputs (training only)".into(),
        ));
    }
    Ok(Op::BatchNormalization {
        epsilon: ctx.attr_float("epsilon", 1e-5)?,
    })
}

fn convert_layernorm(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 3)?;
    if ctx.has_output(1) || ctx.has_output(2) {
        return Err(OpError::Unsupported(
            "LayerNormalization Mean/InvStdDev outputs (training only)".into(),
        ));
    }
    let rank = ctx.input_type(0)?.shape.len();
    let axis = norm_axis("axis", ctx.attr_int("axis", -1)?, rank)?;
    // stash_type only selects the precision of the intermediate computation; the reference
    // computes in f64 regardless.
    Ok(Op::LayerNormalization {
        axis,
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
        Op::BatchNormalization { .. } => {
            expect_arity(inputs, 5)?;
            for i in 0..5 {
                expect_float(inputs, i)?;
            }
            let x = &inputs[0];
            if x.shape.len() < 2 {
                return Err(OpError::shape(
                    "X must have rank >= 2 (N, C, ...)",
                    &[&x.shape],
                ));
            }
            let c = x.shape[1];
            for p in &inputs[1..] {
                if p.shape != [c] {
                    return Err(OpError::shape(
                        format!("scale, B, mean and var must have shape [{c}]"),
                        &[&x.shape, &p.shape],
                    ));
                }
            }
            numel(x)?;
            Ok(vec![x.clone()])
        }
        Op::LayerNormalization { axis, .. } => {
            if inputs.len() != 2 && inputs.len() != 3 {
                return Err(OpError::Arity {
                    expected: "2 to 3".into(),
                    actual: inputs.len(),
                });
            }
            for i in 0..inputs.len() {
                expect_float(inputs, i)?;
            }
            let x = &inputs[0];
            if *axis >= x.shape.len() {
                return Err(OpError::shape(
                    format!("axis {axis} out of range"),
                    &[&x.shape],
                ));
            }
            numel(x)?;
            // Scale and bias broadcast (numpy-style) to X's shape without growing it.
            for p in &inputs[1..] {
                let b = broadcast_shapes(&[&x.shape, &p.shape])?;
                if b != x.shape {
                    return Err(OpError::shape(
                        "scale/bias must broadcast to X's shape",
                        &[&x.shape, &p.shape],
                    ));
                }
            }
            Ok(vec![x.clone()])
        }
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
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    infer(op, &types)?;
    let x = input(inputs, 0)?;
    let shape = x.shape().to_vec();
    let xv = x.to_f64_vec();
    let out = match op {
        Op::BatchNormalization { epsilon } => {
            let [scale, b, mean, var] = [1, 2, 3, 4].map(|i| inputs[i].to_f64_vec());
            let c = shape[1];
            let inner = checked_numel(&shape[2..]).unwrap_or(0);
            let eps = f64::from(*epsilon);
            let mut y = vec![0.0; xv.len()];
            for (i, (yi, &xi)) in y.iter_mut().zip(&xv).enumerate() {
                let ch = (i / inner.max(1)) % c.max(1);
                *yi = (xi - mean[ch]) / (var[ch] + eps).sqrt() * scale[ch] + b[ch];
            }
            y
        }
        Op::LayerNormalization { axis, epsilon } => {
            let inner = checked_numel(&shape[*axis..]).unwrap_or(0);
            let eps = f64::from(*epsilon);
            let mut y = vec![0.0; xv.len()];
            if inner > 0 {
                for (row_x, row_y) in xv.chunks(inner).zip(y.chunks_mut(inner)) {
                    let n = inner as f64;
                    let mean = row_x.iter().sum::<f64>() / n;
                    let var = row_x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
                    let inv = 1.0 / (var + eps).sqrt();
                    for (yi, &xi) in row_y.iter_mut().zip(row_x) {
                        *yi = (xi - mean) * inv;
                    }
                }
            }
            let scale = input(inputs, 1)?;
            let sv = scale.to_f64_vec();
            let smap = broadcast_index_map(scale.shape(), &shape);
            for (yi, &si) in y.iter_mut().zip(&smap) {
                *yi *= sv[si];
            }
            if let Some(bias) = inputs.get(2) {
                let bv = bias.to_f64_vec();
                let bmap = broadcast_index_map(bias.shape(), &shape);
                for (yi, &bi) in y.iter_mut().zip(&bmap) {
                    *yi += bv[bi];
                }
            }
            y
        }
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
        Op::BatchNormalization { epsilon } => vec![("epsilon", fmt_f32(*epsilon))],
        Op::LayerNormalization { axis, epsilon } => {
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

#[cfg(test)]
mod tests;
