//! LpNormalization (opsets 7-28): `x / ||x||_p` along one axis (default -1), p = 1 or 2
//! (default 2), in `f64`; where the norm is 0 the output is 0 (onnx's reference).

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::reduce::arg::split3;
use crate::ops::util::{expect_arity, wrong_family};

/// Converts LpNormalization.
pub fn convert_norm(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let rank = ctx.input_type(0)?.shape.len();
    let axis = norm_axis("axis", ctx.attr_int("axis", -1)?, rank)?;
    let p = match ctx.attr_int("p", 2)? {
        1 => 1,
        2 => 2,
        p => return Err(OpError::attr("p", format!("{p} is not 1 or 2"))),
    };
    Ok(Op::LpNormalization { axis, p })
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let Op::LpNormalization { axis, .. } = op else {
        return Err(wrong_family(op, "lp"));
    };
    expect_arity(inputs, 1)?;
    let x = &inputs[0];
    if !x.dtype.is_float() {
        return Err(OpError::DType {
            input: 0,
            dtype: x.dtype,
            expected: "a float type".into(),
        });
    }
    if *axis >= x.shape.len() || x.numel().is_none() {
        return Err(OpError::shape(
            format!("axis {axis} must be below the rank"),
            &[&x.shape],
        ));
    }
    Ok(vec![x.clone()])
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let Op::LpNormalization { axis, p } = op else {
        return Err(wrong_family(op, "lp"));
    };
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    infer(op, &types)?;
    let x = inputs[0];
    let v = x.to_f64_vec();
    let (outer, len, inner) = split3(x.shape(), *axis, false);
    let mut y = vec![0.0; v.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let s: f64 = (0..len)
                .map(|k| {
                    let e = v[at(k)];
                    if *p == 1 { e.abs() } else { e * e }
                })
                .sum();
            let norm = if *p == 1 { s } else { s.sqrt() };
            for k in 0..len {
                y[at(k)] = if norm == 0.0 { 0.0 } else { v[at(k)] / norm };
            }
        }
    }
    Ok(vec![Tensor::from_f64(x.dtype(), x.shape().to_vec(), &y)])
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::LpNormalization { axis, p } => {
            vec![("axis", axis.to_string()), ("p", p.to_string())]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l1_l2_and_zero_norm() {
        let x = Tensor::f32(vec![2, 2], &[3.0, -4.0, 0.0, 0.0]);
        let run = |p| {
            let op = Op::LpNormalization { axis: 1, p };
            eval(&op, &[&x]).unwrap().remove(0).to_f64_vec()
        };
        let r2 = run(2);
        assert!((r2[0] - 0.6).abs() < 1e-7 && (r2[1] + 0.8).abs() < 1e-7);
        assert_eq!(&r2[2..], &[0.0, 0.0]);
        let r1 = run(1);
        assert!((r1[0] - 3.0 / 7.0).abs() < 1e-7);
    }
}
