//! TopK (opsets 7-28): the `k` largest (or, from 11, smallest) elements along an axis and
//! their i64 indices. `k` is an attribute before opset 10 and a constant input from 10 (a
//! frozen graph input is one). Outputs are always sorted (best first; `sorted=0` leaves the
//! order unspecified, so sorted is conformant); ties go to the lower index, like onnx's
//! reference (a stable lexicographic sort). NaN counts as larger than every number.

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::reduce::arg::{Vals, split3};
use crate::ops::util::{expect_arity, wrong_family};

/// TopK attributes, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopKAttrs {
    /// Normalized axis.
    pub axis: usize,
    /// How many elements (at most the axis length).
    pub k: usize,
    /// Largest (true) or smallest.
    pub largest: bool,
}

/// Converts TopK.
pub fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let rank = ctx.input_type(0)?.shape.len();
    let k = if ctx.opset < 10 {
        ctx.expect_inputs(1, 1)?;
        ctx.attr_int_opt("k")?
            .ok_or_else(|| OpError::attr("k", "is required"))?
    } else {
        ctx.expect_inputs(2, 2)?;
        match ctx.take_const_ints(1)?.as_deref() {
            Some([k]) => *k,
            other => {
                return Err(OpError::attr(
                    "k",
                    format!("must hold one integer, not {other:?}"),
                ));
            }
        }
    };
    let axis = norm_axis("axis", ctx.attr_int("axis", -1)?, rank)?;
    let len = ctx.input_type(0)?.shape.get(axis).copied().unwrap_or(0);
    let k = usize::try_from(k)
        .ok()
        .filter(|&k| k <= len)
        .ok_or_else(|| OpError::attr("k", format!("{k} must lie in 0..={len}, the axis length")))?;
    let largest = ctx.opset < 11 || ctx.attr_int("largest", 1)? != 0;
    Ok(Op::TopK(TopKAttrs { axis, k, largest }))
}

/// Shape and type inference: values (the input's dtype) and i64 indices.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let Op::TopK(a) = op else {
        return Err(wrong_family(op, "topk"));
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
    if x.shape.get(a.axis).is_none_or(|&n| n < a.k) || x.numel().is_none() {
        return Err(OpError::shape(
            format!(
                "axis {} must be below the rank, k = {} at most its length",
                a.axis, a.k
            ),
            &[&x.shape],
        ));
    }
    let mut shape = x.shape.clone();
    shape[a.axis] = a.k;
    Ok(vec![
        TensorType::new(x.dtype, shape.clone()),
        TensorType::new(DType::I64, shape),
    ])
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let Op::TopK(a) = op else {
        return Err(wrong_family(op, "topk"));
    };
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out = infer(op, &types)?;
    let x = inputs[0];
    let vals = Vals::of(x);
    let (outer, len, inner) = split3(x.shape(), a.axis, false);
    let n_out = outer * a.k * inner;
    let (mut vi, mut idx) = (vec![0usize; n_out], vec![0i64; n_out]);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let mut row: Vec<usize> = (0..len).collect();
            // Stable: equal values keep their index order.
            row.sort_by(|&p, &q| {
                let c = vals.total(at(p), at(q));
                if a.largest { c.reverse() } else { c }
            });
            for (j, &k) in row.iter().take(a.k).enumerate() {
                let dst = (o * a.k + j) * inner + i;
                vi[dst] = at(k);
                idx[dst] = k as i64;
            }
        }
    }
    let values = match vals {
        Vals::F(v) => {
            let picked: Vec<f64> = vi.iter().map(|&s| v[s]).collect();
            Tensor::from_f64(x.dtype(), out[0].shape.clone(), &picked)
        }
        Vals::I(v, _) => {
            let picked: Vec<i64> = vi.iter().map(|&s| v[s]).collect();
            Tensor::from_i64(x.dtype(), out[0].shape.clone(), &picked)
        }
    };
    Ok(vec![values, Tensor::i64(out[1].shape.clone(), &idx)])
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::TopK(a) => vec![
            ("axis", a.axis.to_string()),
            ("k", a.k.to_string()),
            ("largest", u8::from(a.largest).to_string()),
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topk_ties_lower_index_first() {
        let x = Tensor::from_i64(DType::I64, vec![2, 4], &[3, 1, 3, 2, 0, 0, 5, 0]);
        let run = |largest, k| {
            let op = Op::TopK(TopKAttrs {
                axis: 1,
                k,
                largest,
            });
            let r = eval(&op, &[&x]).unwrap();
            (r[0].to_i64_vec(), r[1].to_i64_vec())
        };
        assert_eq!(
            run(true, 3),
            (vec![3, 3, 2, 5, 0, 0], vec![0, 2, 3, 2, 0, 1])
        );
        assert_eq!(run(false, 2), (vec![1, 2, 0, 0], vec![1, 3, 0, 1]));
    }
}
