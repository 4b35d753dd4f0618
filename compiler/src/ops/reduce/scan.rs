//! CumSum (opsets 11-28) and CumProd (26-28): running sum or product along an axis given as
//! a constant input (a frozen graph input is one), optionally `exclusive` (each output leaves
//! its own element out, the first is the identity) and `reverse` (from the end).
//!
//! Floats accumulate in `f64`, integers in `i64` (wrapping like the fixed-width integer).

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::reduce::arg::split3;
use crate::ops::util::{expect_arity, wrong_family};

/// CumSum/CumProd attributes, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CumAttrs {
    /// CumProd when true, else CumSum.
    pub prod: bool,
    /// Normalized axis.
    pub axis: usize,
    /// Leave each element out of its own output.
    pub exclusive: bool,
    /// Accumulate from the end.
    pub reverse: bool,
}

/// Converts CumSum (`prod` false) or CumProd.
pub fn convert(ctx: &mut NodeCtx<'_>, prod: bool) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let rank = ctx.input_type(0)?.shape.len();
    let axis = match ctx.take_const_ints(1)?.as_deref() {
        Some([a]) => norm_axis("axis", *a, rank)?,
        other => {
            return Err(OpError::attr(
                "axis",
                format!("must hold one integer, not {other:?}"),
            ));
        }
    };
    Ok(Op::CumScan(CumAttrs {
        prod,
        axis,
        exclusive: ctx.attr_int("exclusive", 0)? != 0,
        reverse: ctx.attr_int("reverse", 0)? != 0,
    }))
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let Op::CumScan(a) = op else {
        return Err(wrong_family(op, "scan"));
    };
    expect_arity(inputs, 1)?;
    let x = &inputs[0];
    if x.dtype == DType::Bool {
        return Err(OpError::DType {
            input: 0,
            dtype: x.dtype,
            expected: "a float or integer type".into(),
        });
    }
    if a.axis >= x.shape.len() || x.numel().is_none() {
        return Err(OpError::shape(
            format!("axis {} must be below the rank", a.axis),
            &[&x.shape],
        ));
    }
    Ok(vec![x.clone()])
}

/// The visiting order along the axis: `0..len`, or reversed.
fn order(len: usize, reverse: bool) -> Vec<usize> {
    if reverse {
        (0..len).rev().collect()
    } else {
        (0..len).collect()
    }
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let Op::CumScan(a) = op else {
        return Err(wrong_family(op, "scan"));
    };
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    infer(op, &types)?;
    let x = inputs[0];
    let (outer, len, inner) = split3(x.shape(), a.axis, false);
    let at = |o: usize, k: usize, i: usize| (o * len + k) * inner + i;
    let out = if x.dtype().is_float() {
        let v = x.to_f64_vec();
        let mut y = vec![0.0; v.len()];
        for o in 0..outer {
            for i in 0..inner {
                let mut acc = if a.prod { 1.0 } else { 0.0 };
                for k in order(len, a.reverse) {
                    let e = v[at(o, k, i)];
                    let next = if a.prod { acc * e } else { acc + e };
                    y[at(o, k, i)] = if a.exclusive { acc } else { next };
                    acc = next;
                }
            }
        }
        Tensor::from_f64(x.dtype(), x.shape().to_vec(), &y)
    } else {
        let v = x.to_i64_vec();
        let mut y = vec![0i64; v.len()];
        for o in 0..outer {
            for i in 0..inner {
                let mut acc = i64::from(a.prod);
                for k in order(len, a.reverse) {
                    let e = v[at(o, k, i)];
                    let next = if a.prod {
                        acc.wrapping_mul(e)
                    } else {
                        acc.wrapping_add(e)
                    };
                    y[at(o, k, i)] = if a.exclusive { acc } else { next };
                    acc = next;
                }
            }
        }
        Tensor::from_i64(x.dtype(), x.shape().to_vec(), &y)
    };
    Ok(vec![out])
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::CumScan(a) => vec![
            ("axis", a.axis.to_string()),
            ("exclusive", u8::from(a.exclusive).to_string()),
            ("reverse", u8::from(a.reverse).to_string()),
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cumsum_cumprod_modes() {
        let x = Tensor::from_i64(DType::I32, vec![2, 3], &[1, 2, 3, 4, 5, 6]);
        let run = |prod, axis, exclusive, reverse| {
            let op = Op::CumScan(CumAttrs {
                prod,
                axis,
                exclusive,
                reverse,
            });
            eval(&op, &[&x]).unwrap().remove(0).to_i64_vec()
        };
        assert_eq!(run(false, 1, false, false), vec![1, 3, 6, 4, 9, 15]);
        assert_eq!(run(false, 1, true, false), vec![0, 1, 3, 0, 4, 9]);
        assert_eq!(run(false, 1, true, true), vec![5, 3, 0, 11, 6, 0]);
        assert_eq!(run(false, 0, false, false), vec![1, 2, 3, 5, 7, 9]);
        assert_eq!(run(true, 1, false, true), vec![6, 6, 3, 120, 30, 6]);
        assert_eq!(run(true, 1, true, false), vec![1, 1, 2, 1, 4, 20]);
    }
}
