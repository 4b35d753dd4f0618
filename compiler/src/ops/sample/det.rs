//! Det (opset 11): the determinant of each square matrix in the last two dims
//! (<https://onnx.ai/onnx/operators/onnx__Det.html>), by LU decomposition with partial
//! pivoting in f64 (numpy's `linalg.det` is LAPACK's LU too).

use super::{Real, float_input};
use crate::error::OpError;
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::ctx::NodeCtx;
use crate::ops::sample::SampleOp;

pub(super) fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    Ok(Op::Sample(SampleOp::Det))
}

pub(super) fn infer(inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let [x] = inputs else {
        return Err(OpError::Unsupported("Det takes one input".into()));
    };
    float_input(0, x)?;
    let r = x.shape.len();
    if r < 2 || x.shape[r - 1] != x.shape[r - 2] {
        return Err(OpError::shape(
            "X must be [*, M, M] (square matrices in the last two dims)",
            &[&x.shape],
        ));
    }
    Ok(vec![TensorType::new(x.dtype, x.shape[..r - 2].to_vec())])
}

/// The matrices' order `M` of input shape `x`.
pub fn order(x: &[usize]) -> usize {
    x.last().copied().unwrap_or(0)
}

/// `y[b] = det(x[b])` for the `m x m` matrices of `x`; `lu` (at least `m * m` long) is the
/// work space.
pub fn det<T: Real>(m: usize, x: &[T], y: &mut [T], lu: &mut [f64]) {
    let mm = m * m;
    if lu.len() < mm {
        return;
    }
    let lu = &mut lu[..mm];
    for (b, out) in y.iter_mut().enumerate() {
        let Some(src) = x.get(b * mm..(b + 1) * mm) else {
            return;
        };
        for (d, s) in lu.iter_mut().zip(src) {
            *d = s.get();
        }
        let mut det = 1.0f64;
        for k in 0..m {
            // The largest pivot of column k at or below the diagonal.
            let p = (k..m)
                .max_by(|&i, &j| lu[i * m + k].abs().total_cmp(&lu[j * m + k].abs()))
                .unwrap_or(k);
            if lu[p * m + k] == 0.0 {
                det = 0.0;
                break;
            }
            if p != k {
                for j in 0..m {
                    lu.swap(p * m + j, k * m + j);
                }
                det = -det;
            }
            let pivot = lu[k * m + k];
            det *= pivot;
            for i in k + 1..m {
                let f = lu[i * m + k] / pivot;
                if f != 0.0 {
                    for j in k + 1..m {
                        lu[i * m + j] -= f * lu[k * m + j];
                    }
                }
            }
        }
        *out = T::put(det);
    }
}
