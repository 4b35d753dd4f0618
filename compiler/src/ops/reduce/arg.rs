//! ArgMax, ArgMin (opsets 7-28; `select_last_index` from 12) and Hardmax (opsets 7-28: before
//! 13 over the input flattened to 2-d at `axis`, from 13 along one axis, default -1).
//!
//! NaN: like numpy, a NaN wins over any number (ArgMax and ArgMin both return the first NaN,
//! or the last with `select_last_index`). Ties: the first index (the last with
//! `select_last_index`). An empty reduced axis has no answer: an error.

use std::cmp::Ordering;

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::util::{expect_arity, wrong_family};

/// ArgMax/ArgMin attributes, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgAttrs {
    /// ArgMax when true, else ArgMin.
    pub max: bool,
    /// Normalized axis.
    pub axis: usize,
    /// Keep the reduced dim as size 1.
    pub keepdims: bool,
    /// On ties, the last index instead of the first.
    pub last: bool,
}

/// Converts ArgMax (`max`) or ArgMin.
pub fn convert_arg(ctx: &mut NodeCtx<'_>, max: bool) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let rank = ctx.input_type(0)?.shape.len();
    let axis = norm_axis("axis", ctx.attr_int("axis", 0)?, rank)?;
    let last = ctx.opset >= 12 && ctx.attr_int("select_last_index", 0)? != 0;
    Ok(Op::ArgReduce(ArgAttrs {
        max,
        axis,
        keepdims: ctx.attr_int("keepdims", 1)? != 0,
        last,
    }))
}

/// Converts Hardmax.
pub fn convert_hardmax(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let rank = ctx.input_type(0)?.shape.len();
    let coerce_2d = ctx.opset < 13;
    let axis = ctx.attr_int("axis", if coerce_2d { 1 } else { -1 })?;
    let axis = norm_axis("axis", axis, rank)?;
    Ok(Op::Hardmax { axis, coerce_2d })
}

/// `(outer, len, inner)`: the shape seen as three dims around `axis` (or, `coerce_2d`, as
/// `prod(shape[..axis]) x prod(shape[axis..])`).
pub fn split3(shape: &[usize], axis: usize, coerce_2d: bool) -> (usize, usize, usize) {
    let prod = |d: &[usize]| d.iter().product::<usize>();
    let outer = prod(shape.get(..axis).unwrap_or_default());
    if coerce_2d {
        return (outer, prod(shape.get(axis..).unwrap_or_default()), 1);
    }
    let len = shape.get(axis).copied().unwrap_or(1);
    (outer, len, prod(shape.get(axis + 1..).unwrap_or_default()))
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    expect_arity(inputs, 1)?;
    let x = &inputs[0];
    let axis = match op {
        Op::ArgReduce(a) => a.axis,
        Op::Hardmax { axis, .. } => *axis,
        _ => return Err(wrong_family(op, "arg")),
    };
    if x.dtype == DType::Bool {
        return Err(OpError::DType {
            input: 0,
            dtype: x.dtype,
            expected: "a float or integer type".into(),
        });
    }
    if axis >= x.shape.len() || x.numel().is_none() {
        return Err(OpError::shape(
            format!("axis {axis} must be below the rank"),
            &[&x.shape],
        ));
    }
    match op {
        Op::ArgReduce(a) => {
            if x.shape.get(axis) == Some(&0) {
                return Err(OpError::shape(
                    "ArgMax/ArgMin over an empty axis has no answer",
                    &[&x.shape],
                ));
            }
            let mut shape = x.shape.clone();
            if a.keepdims {
                shape[axis] = 1;
            } else {
                shape.remove(axis);
            }
            Ok(vec![TensorType::new(DType::I64, shape)])
        }
        _ => Ok(vec![x.clone()]),
    }
}

/// A tensor's values for comparing: floats in f64, integers in i64 (u64 compared unsigned).
pub(crate) enum Vals {
    /// Float values.
    F(Vec<f64>),
    /// Integer values and whether they are unsigned 64-bit.
    I(Vec<i64>, bool),
}

impl Vals {
    /// The values of `t`.
    pub(crate) fn of(t: &Tensor) -> Vals {
        if t.dtype().is_float() {
            Vals::F(t.to_f64_vec())
        } else {
            Vals::I(t.to_i64_vec(), t.dtype() == DType::U64)
        }
    }

    /// IEEE comparison of elements `a` and `b` (`None` when either is NaN).
    pub(crate) fn cmp(&self, a: usize, b: usize) -> Option<Ordering> {
        match self {
            Vals::F(v) => v[a].partial_cmp(&v[b]),
            Vals::I(v, true) => Some((v[a] as u64).cmp(&(v[b] as u64))),
            Vals::I(v, false) => Some(v[a].cmp(&v[b])),
        }
    }

    /// Whether element `a` is NaN.
    pub(crate) fn nan(&self, a: usize) -> bool {
        matches!(self, Vals::F(v) if v[a].is_nan())
    }

    /// A total order: IEEE, with NaN above every number and equal to NaN.
    pub(crate) fn total(&self, a: usize, b: usize) -> Ordering {
        match (self.nan(a), self.nan(b)) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => self.cmp(a, b).unwrap_or(Ordering::Equal),
        }
    }
}

/// Whether element `v` replaces the current best `best` of an ArgMax (`max`) or ArgMin scan.
fn takes(x: &Vals, v: usize, best: usize, max: bool, last: bool) -> bool {
    let want = if max {
        Ordering::Greater
    } else {
        Ordering::Less
    };
    let c = x.cmp(v, best);
    if last {
        c == Some(want) || c == Some(Ordering::Equal) || x.nan(v)
    } else {
        c == Some(want) || (x.nan(v) && !x.nan(best))
    }
}

/// The winning position along the axis of each `(outer, inner)` row.
fn arg_rows(
    x: &Vals,
    (outer, len, inner): (usize, usize, usize),
    max: bool,
    last: bool,
) -> Vec<usize> {
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let mut best = 0;
            for k in 1..len {
                if takes(x, at(k), at(best), max, last) {
                    best = k;
                }
            }
            out.push(best);
        }
    }
    out
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out_ty = infer(op, &types)?.remove(0);
    let x = inputs[0];
    let vals = Vals::of(x);
    match op {
        Op::ArgReduce(a) => {
            let dims = split3(x.shape(), a.axis, false);
            let idx: Vec<i64> = arg_rows(&vals, dims, a.max, a.last)
                .into_iter()
                .map(|k| k as i64)
                .collect();
            Ok(vec![Tensor::i64(out_ty.shape, &idx)])
        }
        Op::Hardmax { axis, coerce_2d } => {
            let (outer, len, inner) = split3(x.shape(), *axis, *coerce_2d);
            let mut y = vec![0i64; x.numel()];
            if len > 0 {
                let best = arg_rows(&vals, (outer, len, inner), true, false);
                for o in 0..outer {
                    for i in 0..inner {
                        y[(o * len + best[o * inner + i]) * inner + i] = 1;
                    }
                }
            }
            Ok(vec![Tensor::from_i64(x.dtype(), out_ty.shape, &y)])
        }
        _ => Err(wrong_family(op, "arg")),
    }
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::ArgReduce(a) => vec![
            ("axis", a.axis.to_string()),
            ("keepdims", u8::from(a.keepdims).to_string()),
            ("select_last_index", u8::from(a.last).to_string()),
        ],
        Op::Hardmax { axis, coerce_2d } => vec![
            ("axis", axis.to_string()),
            ("coerce_2d", u8::from(*coerce_2d).to_string()),
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_argmin_ties_nan_and_last() {
        let x = Tensor::f32(vec![2, 3], &[1.0, 3.0, 3.0, f32::NAN, 0.0, f32::NAN]);
        let arg = |max, last, axis, keepdims| {
            let op = Op::ArgReduce(ArgAttrs {
                max,
                axis,
                keepdims,
                last,
            });
            eval(&op, &[&x]).unwrap().remove(0)
        };
        assert_eq!(arg(true, false, 1, false).to_i64_vec(), vec![1, 0]);
        assert_eq!(arg(true, true, 1, false).to_i64_vec(), vec![2, 2]);
        assert_eq!(arg(false, false, 1, true).to_i64_vec(), vec![0, 0]);
        assert_eq!(arg(false, false, 1, true).shape(), &[2, 1]);
        assert_eq!(arg(false, false, 0, false).to_i64_vec(), vec![1, 1, 1]);
    }

    #[test]
    fn hardmax_axis_and_coerce() {
        let x = Tensor::f32(vec![2, 2], &[1.0, 5.0, 5.0, 2.0]);
        let y = eval(
            &Op::Hardmax {
                axis: 0,
                coerce_2d: false,
            },
            &[&x],
        )
        .unwrap();
        assert_eq!(y[0].to_f64_vec(), vec![0.0, 1.0, 1.0, 0.0]);
        let y = eval(
            &Op::Hardmax {
                axis: 0,
                coerce_2d: true,
            },
            &[&x],
        )
        .unwrap();
        assert_eq!(y[0].to_f64_vec(), vec![0.0, 1.0, 0.0, 0.0]);
    }
}
