//! Reference evaluation of Resize: nearest (without extrapolation) gathers bytes, any dtype;
//! the interpolating modes run one 1-d pass per axis in f64 over [`axis_taps`] tables, as
//! ONNX's reference implementation does.

use bytes::Bytes;

use super::coords::axis_taps;
use super::{ResizeAttrs, ResizeMode, infer};
use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{TensorType, checked_numel, strides};
use crate::ops::Op;
use crate::ops::util::{unravel, wrong_family};

/// Whether the op is a plain byte gather (nearest, no extrapolation possible).
pub(crate) fn is_gather(a: &ResizeAttrs) -> bool {
    a.mode == ResizeMode::Nearest && a.coordinate_transformation != "tf_crop_and_resize"
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let Op::Resize(a) = op else {
        return Err(wrong_family(op, "resize"));
    };
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    infer(op, &types)?;
    let x = inputs[0];
    let in_shape = x.shape().to_vec();
    let out_shape = a.output_shape.clone();
    if out_shape.contains(&0) {
        return Ok(vec![Tensor::from_f64(x.dtype(), out_shape, &[])]);
    }
    if is_gather(a) {
        let maps: Vec<Vec<usize>> = (0..in_shape.len())
            .map(|d| axis_taps(a, d, in_shape[d], out_shape[d]).idx)
            .collect();
        let st = strides(&in_shape);
        let sz = x.dtype().size();
        let src = x.bytes();
        let n = checked_numel(&out_shape).unwrap_or(0);
        let mut data = Vec::with_capacity(n * sz);
        for flat in 0..n {
            let idx = unravel(flat, &out_shape);
            let s: usize = (0..idx.len()).map(|d| maps[d][idx[d]] * st[d]).sum();
            data.extend_from_slice(&src[s * sz..(s + 1) * sz]);
        }
        let t = Tensor::from_bytes(x.dtype(), out_shape, Bytes::from(data))
            .map_err(|e| OpError::Unsupported(format!("Resize output: {e}")))?;
        return Ok(vec![t]);
    }
    // One 1-d pass per axis: cur has out dims before d, in dims from d on.
    let mut cur = x.to_f64_vec();
    let mut shape = in_shape.clone();
    let e = f64::from(a.extrapolation_value);
    for d in 0..shape.len() {
        let (len_in, len_out) = (in_shape[d], out_shape[d]);
        let t = axis_taps(a, d, len_in, len_out);
        if t.is_identity(len_in) {
            continue;
        }
        let outer = checked_numel(&shape[..d]).unwrap_or(0);
        let inner = checked_numel(&shape[d + 1..]).unwrap_or(0);
        let mut next = vec![0.0; outer * len_out * inner];
        for o in 0..len_out {
            let taps = o * t.n..(o + 1) * t.n;
            for b in 0..outer {
                for k in 0..inner {
                    let v = if t.extrap[o] {
                        e
                    } else {
                        t.idx[taps.clone()]
                            .iter()
                            .zip(&t.w[taps.clone()])
                            .map(|(&i, &w)| w * cur[(b * len_in + i) * inner + k])
                            .sum()
                    };
                    next[(b * len_out + o) * inner + k] = v;
                }
            }
        }
        cur = next;
        shape[d] = len_out;
    }
    Ok(vec![Tensor::from_f64(x.dtype(), out_shape, &cur)])
}
