//! The reduction family: Reduce* over constant axes (here), ArgMax/ArgMin/Hardmax
//! ([`arg`]), CumSum/CumProd ([`scan`]), TopK ([`topk`]) and LpNormalization/LpPool
//! ([`lp`], [`lppool`]). This file also dispatches the family's name/infer/eval/attrs.
//!
//! Reduce*: axes are an attribute before the opset where they became an input (ReduceSum: 13,
//! the others: 18); an input is taken as a constant. Absent or empty axes reduce every dim,
//! unless `noop_with_empty_axes=1` (input versions only) makes the op an identity.
//! Floats reduce in `f64`; integers in `i64` (wrapping, like the fixed-width integer), except
//! ReduceMean/L2/LogSum/LogSumExp of integers, computed in `f64` and truncated, like the ONNX
//! reference's `np.<op>(...).astype(dtype)`. An empty reduction gives the identity: 0 (Sum,
//! L1, L2, SumSquare), 1 (Prod), -inf (LogSum, LogSumExp; floats), the dtype's lowest/highest
//! value (Max/Min), NaN (Mean of floats). ReduceLogSumExp is computed as
//! `m + ln(sum(exp(x - m)))` with `m` the largest element when finite, else `m = 0`.

pub mod arg;
pub mod lp;
pub mod lppool;
pub mod scan;
pub mod topk;

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, Shape, TensorType, checked_numel, strides};
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::util::{expect_arity, fmt_list, fmt_shape, unravel, wrong_family};
use crate::ops::{MAX_OPSET, Op, OpDef};

/// Which reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    /// Mean.
    Mean,
    /// Sum.
    Sum,
    /// Max.
    Max,
    /// Min.
    Min,
    /// Sum of absolute values.
    L1,
    /// Square root of the sum of squares.
    L2,
    /// Natural log of the sum.
    LogSum,
    /// Natural log of the sum of exponentials.
    LogSumExp,
    /// Product.
    Prod,
    /// Sum of squares.
    SumSquare,
}

/// Reduction attributes, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceAttrs {
    /// Which reduction.
    pub kind: ReduceKind,
    /// Normalized, sorted, distinct axes. "Reduce over all dims" lists every axis explicitly;
    /// empty means no reduction at all (`noop_with_empty_axes=1`, or a rank-0 input): the op
    /// is then an identity.
    pub axes: Vec<usize>,
    /// Keep reduced dims as size 1.
    pub keepdims: bool,
}

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    OpDef {
        op_type: "ReduceMean",
        since: 7,
        until: MAX_OPSET,
        convert: convert_mean,
    },
    OpDef {
        op_type: "ReduceSum",
        since: 7,
        until: MAX_OPSET,
        convert: convert_sum,
    },
    OpDef {
        op_type: "ReduceMax",
        since: 7,
        until: MAX_OPSET,
        convert: convert_max,
    },
    OpDef {
        op_type: "ReduceMin",
        since: 7,
        until: MAX_OPSET,
        convert: convert_min,
    },
    OpDef {
        op_type: "ReduceL1",
        since: 7,
        until: MAX_OPSET,
        convert: |c| convert(c, ReduceKind::L1, 18),
    },
    OpDef {
        op_type: "ReduceL2",
        since: 7,
        until: MAX_OPSET,
        convert: |c| convert(c, ReduceKind::L2, 18),
    },
    OpDef {
        op_type: "ReduceLogSum",
        since: 7,
        until: MAX_OPSET,
        convert: |c| convert(c, ReduceKind::LogSum, 18),
    },
    OpDef {
        op_type: "ReduceLogSumExp",
        since: 7,
        until: MAX_OPSET,
        convert: |c| convert(c, ReduceKind::LogSumExp, 18),
    },
    OpDef {
        op_type: "ReduceProd",
        since: 7,
        until: MAX_OPSET,
        convert: |c| convert(c, ReduceKind::Prod, 18),
    },
    OpDef {
        op_type: "ReduceSumSquare",
        since: 7,
        until: MAX_OPSET,
        convert: |c| convert(c, ReduceKind::SumSquare, 18),
    },
    OpDef {
        op_type: "ArgMax",
        since: 7,
        until: MAX_OPSET,
        convert: |c| arg::convert_arg(c, true),
    },
    OpDef {
        op_type: "ArgMin",
        since: 7,
        until: MAX_OPSET,
        convert: |c| arg::convert_arg(c, false),
    },
    OpDef {
        op_type: "Hardmax",
        since: 7,
        until: MAX_OPSET,
        convert: arg::convert_hardmax,
    },
    OpDef {
        op_type: "CumSum",
        since: 11,
        until: MAX_OPSET,
        convert: |c| scan::convert(c, false),
    },
    OpDef {
        op_type: "CumProd",
        since: 26,
        until: MAX_OPSET,
        convert: |c| scan::convert(c, true),
    },
    OpDef {
        op_type: "TopK",
        since: 7,
        until: MAX_OPSET,
        convert: topk::convert,
    },
    OpDef {
        op_type: "LpNormalization",
        since: 7,
        until: MAX_OPSET,
        convert: lp::convert_norm,
    },
    OpDef {
        op_type: "LpPool",
        since: 7,
        until: MAX_OPSET,
        convert: lppool::convert,
    },
];

fn convert_mean(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    convert(ctx, ReduceKind::Mean, 18)
}

fn convert_sum(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    convert(ctx, ReduceKind::Sum, 13)
}

fn convert_max(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    convert(ctx, ReduceKind::Max, 18)
}

fn convert_min(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    convert(ctx, ReduceKind::Min, 18)
}

/// `axes_input_since`: the opset where `axes` moved from an attribute to input 1.
fn convert(ctx: &mut NodeCtx<'_>, kind: ReduceKind, axes_input_since: i64) -> Result<Op, OpError> {
    let rank = ctx.input_type(0)?.shape.len();
    let (given, noop) = if ctx.opset >= axes_input_since {
        ctx.expect_inputs(1, 2)?;
        let axes = ctx.take_const_ints(1)?;
        (axes, ctx.attr_int("noop_with_empty_axes", 0)? != 0)
    } else {
        ctx.expect_inputs(1, 1)?;
        (ctx.attr_ints("axes")?, false)
    };
    let keepdims = ctx.attr_int("keepdims", 1)? != 0;
    let axes = match given {
        Some(a) if !a.is_empty() => {
            let mut axes = a
                .iter()
                .map(|&x| norm_axis("axes", x, rank))
                .collect::<Result<Vec<_>, _>>()?;
            axes.sort_unstable();
            if axes.windows(2).any(|w| w[0] == w[1]) {
                return Err(OpError::attr("axes", format!("{a:?} names an axis twice")));
            }
            axes
        }
        _ if noop => Vec::new(),
        _ => (0..rank).collect(),
    };
    Ok(Op::Reduce(ReduceAttrs {
        kind,
        axes,
        keepdims,
    }))
}

/// Printed op name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::Reduce(a) => match a.kind {
            ReduceKind::Mean => "ReduceMean",
            ReduceKind::Sum => "ReduceSum",
            ReduceKind::Max => "ReduceMax",
            ReduceKind::Min => "ReduceMin",
            ReduceKind::L1 => "ReduceL1",
            ReduceKind::L2 => "ReduceL2",
            ReduceKind::LogSum => "ReduceLogSum",
            ReduceKind::LogSumExp => "ReduceLogSumExp",
            ReduceKind::Prod => "ReduceProd",
            ReduceKind::SumSquare => "ReduceSumSquare",
        },
        Op::ArgReduce(a) if a.max => "ArgMax",
        Op::ArgReduce(_) => "ArgMin",
        Op::Hardmax { .. } => "Hardmax",
        Op::CumScan(a) if a.prod => "CumProd",
        Op::CumScan(_) => "CumSum",
        Op::TopK(_) => "TopK",
        Op::LpNormalization { .. } => "LpNormalization",
        Op::LpPool(_) => "LpPool",
        _ => "?",
    }
}

/// The output shape: reduced dims become 1 (`keepdims`) or disappear.
fn out_shape(a: &ReduceAttrs, shape: &[usize]) -> Shape {
    let mut out = Vec::with_capacity(shape.len());
    for (d, &n) in shape.iter().enumerate() {
        if !a.axes.contains(&d) {
            out.push(n);
        } else if a.keepdims {
            out.push(1);
        }
    }
    out
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    match op {
        Op::Reduce(_) => {}
        Op::ArgReduce(_) | Op::Hardmax { .. } => return arg::infer(op, inputs),
        Op::CumScan(_) => return scan::infer(op, inputs),
        Op::TopK(_) => return topk::infer(op, inputs),
        Op::LpNormalization { .. } => return lp::infer(op, inputs),
        Op::LpPool(_) => return lppool::infer(op, inputs),
        _ => return Err(wrong_family(op, "reduce")),
    }
    let Op::Reduce(a) = op else {
        return Err(wrong_family(op, "reduce"));
    };
    expect_arity(inputs, 1)?;
    let x = &inputs[0];
    let ok = match a.kind {
        ReduceKind::Max | ReduceKind::Min => true,
        _ => x.dtype != DType::Bool,
    };
    if !ok {
        return Err(OpError::DType {
            input: 0,
            dtype: x.dtype,
            expected: "a float or integer type".into(),
        });
    }
    let rank = x.shape.len();
    if a.axes.iter().any(|&d| d >= rank) || a.axes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(OpError::shape(
            format!(
                "axes {} must be sorted, distinct and below the rank",
                fmt_list(&a.axes)
            ),
            &[&x.shape],
        ));
    }
    if x.numel().is_none() {
        return Err(OpError::Overflow(format!("shape {}", fmt_shape(&x.shape))));
    }
    Ok(vec![TensorType::new(x.dtype, out_shape(a, &x.shape))])
}

/// For each input element, the flat index of the output element it reduces into.
fn out_index_map(a: &ReduceAttrs, shape: &[usize]) -> Vec<usize> {
    // Index into the keepdims shape (same flat layout as the squeezed one).
    let kept: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if a.axes.contains(&d) { 1 } else { n })
        .collect();
    let st = strides(&kept);
    let n = checked_numel(shape).unwrap_or(0);
    (0..n)
        .map(|flat| {
            let idx = unravel(flat, shape);
            (0..shape.len())
                .filter(|d| !a.axes.contains(d))
                .map(|d| idx[d] * st[d])
                .sum()
        })
        .collect()
}

/// Smallest and largest value of an integer (or bool) dtype, in the i64 domain.
fn int_range(dtype: DType) -> (i64, i64) {
    match dtype {
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::Bool => (0, 1),
        // U64 values above i64::MAX wrap in the i64 domain (see ir::tensor); u64::MAX is -1
        // there, and U64 compares unsigned.
        DType::U64 => (0, -1),
        _ => (i64::MIN, i64::MAX),
    }
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    match op {
        Op::Reduce(_) => {}
        Op::ArgReduce(_) | Op::Hardmax { .. } => return arg::eval(op, inputs),
        Op::CumScan(_) => return scan::eval(op, inputs),
        Op::TopK(_) => return topk::eval(op, inputs),
        Op::LpNormalization { .. } => return lp::eval(op, inputs),
        Op::LpPool(_) => return lppool::eval(op, inputs),
        _ => return Err(wrong_family(op, "reduce")),
    }
    let Op::Reduce(a) = op else {
        return Err(wrong_family(op, "reduce"));
    };
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out_ty = infer(op, &types)?.remove(0);
    let x = inputs[0];
    let n_out = checked_numel(&out_ty.shape).unwrap_or(0);
    let map = out_index_map(a, x.shape());
    // Elements folded into each output.
    let mut count = vec![0usize; n_out];
    for &o in &map {
        count[o] += 1;
    }
    let dtype = x.dtype();
    let in_f64 = dtype.is_float()
        || matches!(
            a.kind,
            ReduceKind::Mean | ReduceKind::L2 | ReduceKind::LogSum | ReduceKind::LogSumExp
        );
    let out = if in_f64 {
        let xs: Vec<f64> = if dtype.is_float() {
            x.to_f64_vec()
        } else if dtype == DType::U64 {
            x.to_i64_vec().iter().map(|&v| v as u64 as f64).collect()
        } else {
            x.to_i64_vec().iter().map(|&v| v as f64).collect()
        };
        let acc = reduce_f64(a.kind, &map, &xs, n_out, &count);
        Tensor::from_f64(dtype, out_ty.shape, &acc)
    } else {
        // Reducing an empty set gives the identity: 0, 1, or the dtype's min (Max) / max (Min).
        let (lo, hi) = int_range(dtype);
        let unsigned = dtype == DType::U64;
        let init = match a.kind {
            ReduceKind::Max => lo,
            ReduceKind::Min => hi,
            ReduceKind::Prod => 1,
            _ => 0,
        };
        let gt = |p: i64, q: i64| {
            if unsigned {
                (p as u64) > (q as u64)
            } else {
                p > q
            }
        };
        let mut acc = vec![init; n_out];
        for (&o, v) in map.iter().zip(x.to_i64_vec()) {
            // Wraps on overflow like the fixed-width integer it stands for.
            acc[o] = match a.kind {
                ReduceKind::Max if gt(v, acc[o]) => v,
                ReduceKind::Min if gt(acc[o], v) => v,
                ReduceKind::Max | ReduceKind::Min => acc[o],
                ReduceKind::Prod => acc[o].wrapping_mul(v),
                ReduceKind::SumSquare => acc[o].wrapping_add(v.wrapping_mul(v)),
                ReduceKind::L1 if !unsigned => acc[o].wrapping_add(v.wrapping_abs()),
                _ => acc[o].wrapping_add(v),
            };
        }
        Tensor::from_i64(dtype, out_ty.shape, &acc)
    };
    Ok(vec![out])
}

/// The float reductions, in `f64`: `map[i]` is the output of element `i`.
fn reduce_f64(kind: ReduceKind, map: &[usize], xs: &[f64], n: usize, count: &[usize]) -> Vec<f64> {
    let init = match kind {
        ReduceKind::Max => f64::NEG_INFINITY,
        ReduceKind::Min => f64::INFINITY,
        ReduceKind::Prod => 1.0,
        _ => 0.0,
    };
    let mut acc = vec![init; n];
    // LogSumExp: the shift `m` per output (the largest element, NaN ignored, 0 unless finite).
    let mut shift = vec![0.0f64; n];
    if kind == ReduceKind::LogSumExp {
        let mut m = vec![f64::NEG_INFINITY; n];
        for (&o, &v) in map.iter().zip(xs) {
            if v > m[o] {
                m[o] = v;
            }
        }
        for (s, v) in shift.iter_mut().zip(m) {
            *s = if v.is_finite() { v } else { 0.0 };
        }
    }
    for (&o, &v) in map.iter().zip(xs) {
        acc[o] = match kind {
            // NaN propagates, like numpy.
            ReduceKind::Max if v.is_nan() || v > acc[o] => v,
            ReduceKind::Min if v.is_nan() || v < acc[o] => v,
            ReduceKind::Max | ReduceKind::Min => acc[o],
            ReduceKind::Prod => acc[o] * v,
            ReduceKind::L1 => acc[o] + v.abs(),
            ReduceKind::L2 | ReduceKind::SumSquare => acc[o] + v * v,
            ReduceKind::LogSumExp => acc[o] + (v - shift[o]).exp(),
            ReduceKind::Mean | ReduceKind::Sum | ReduceKind::LogSum => acc[o] + v,
        };
    }
    for ((s, &c), &m) in acc.iter_mut().zip(count).zip(&shift) {
        *s = match kind {
            ReduceKind::Mean => *s / c as f64, // an empty mean is NaN (0 for integers)
            ReduceKind::L2 => s.sqrt(),
            ReduceKind::LogSum => s.ln(),
            ReduceKind::LogSumExp => m + s.ln(),
            _ => *s,
        };
    }
    acc
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::ArgReduce(_) | Op::Hardmax { .. } => arg::attrs(op),
        Op::CumScan(_) => scan::attrs(op),
        Op::TopK(_) => topk::attrs(op),
        Op::LpNormalization { .. } => lp::attrs(op),
        Op::LpPool(_) => lppool::attrs(op),
        Op::Reduce(a) => vec![
            ("axes", fmt_list(&a.axes)),
            ("keepdims", u8::from(a.keepdims).to_string()),
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
