//! Shape and type inference of the index-driven movement ops, validating everything the
//! reference evaluation and the kernels rely on.

use super::MoveOp;
use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::ScalarArg;
use crate::ops::movement::{axis_in, checked_type};
use crate::ops::util::{fmt_list, fmt_shape};

fn index_dtype(t: &TensorType, input: usize) -> Result<(), OpError> {
    if matches!(t.dtype, DType::I32 | DType::I64) {
        Ok(())
    } else {
        Err(OpError::DType {
            input,
            dtype: t.dtype,
            expected: "i32 or i64 indices".into(),
        })
    }
}

fn arity(inputs: &[TensorType], n: usize) -> Result<(), OpError> {
    crate::ops::util::expect_arity(inputs, n)
}

/// `idx` has `data`'s rank and no dim larger than `data`'s outside `axis`.
fn elementwise_indices(data: &[usize], idx: &[usize], axis: usize) -> Result<(), OpError> {
    if idx.len() != data.len() || axis >= data.len() {
        return Err(OpError::shape(
            format!("indices must have the data's rank, and axis {axis} be in it"),
            &[data, idx],
        ));
    }
    for d in 0..data.len() {
        if d != axis && idx[d] > data[d] {
            return Err(OpError::shape(
                format!("indices dim {d} is larger than the data's"),
                &[data, idx],
            ));
        }
    }
    Ok(())
}

/// GatherND/ScatterND geometry: `(k, slice dims)` after checking the indices' last dim.
fn nd_geometry(
    data: &[usize],
    idx: &[usize],
    batch_dims: usize,
) -> Result<(usize, Vec<usize>), OpError> {
    let Some(&k) = idx.last() else {
        return Err(OpError::shape("indices must have rank >= 1", &[data, idx]));
    };
    let q = idx.len();
    if data.is_empty()
        || batch_dims >= q.min(data.len())
        || batch_dims + k > data.len()
        || data[..batch_dims] != idx[..batch_dims]
    {
        return Err(OpError::shape(
            format!(
                "indices rows of {k} entries with batch_dims {batch_dims} do not address the data"
            ),
            &[data, idx],
        ));
    }
    Ok((k, data[batch_dims + k..].to_vec()))
}

/// The output types of `op` (validating everything `eval` and the kernels rely on).
pub fn infer(op: &MoveOp, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let name = op.name();
    match op {
        MoveOp::GatherElements { axis } => {
            arity(inputs, 2)?;
            let (x, i) = (&inputs[0], &inputs[1]);
            index_dtype(i, 1)?;
            elementwise_indices(&x.shape, &i.shape, *axis)?;
            if x.shape[*axis] == 0 && !i.shape.contains(&0) {
                return Err(OpError::shape("gathering from an empty axis", &[&x.shape]));
            }
            Ok(vec![checked_type(x.dtype, i.shape.clone(), name)?])
        }
        MoveOp::GatherNd { batch_dims } => {
            arity(inputs, 2)?;
            let (x, i) = (&inputs[0], &inputs[1]);
            index_dtype(i, 1)?;
            let (_, slice) = nd_geometry(&x.shape, &i.shape, *batch_dims)?;
            let mut shape = i.shape[..i.shape.len() - 1].to_vec();
            shape.extend_from_slice(&slice);
            Ok(vec![checked_type(x.dtype, shape, name)?])
        }
        MoveOp::ScatterElements { axis, .. } => {
            arity(inputs, 3)?;
            let (x, i, u) = (&inputs[0], &inputs[1], &inputs[2]);
            index_dtype(i, 1)?;
            elementwise_indices(&x.shape, &i.shape, *axis)?;
            same_updates(x, u, &i.shape)?;
            if x.shape[*axis] == 0 && !i.shape.contains(&0) {
                return Err(OpError::shape("scattering into an empty axis", &[&x.shape]));
            }
            Ok(vec![x.clone()])
        }
        MoveOp::ScatterNd { .. } => {
            arity(inputs, 3)?;
            let (x, i, u) = (&inputs[0], &inputs[1], &inputs[2]);
            index_dtype(i, 1)?;
            let (_, slice) = nd_geometry(&x.shape, &i.shape, 0)?;
            let mut shape = i.shape[..i.shape.len() - 1].to_vec();
            shape.extend_from_slice(&slice);
            same_updates(x, u, &shape)?;
            Ok(vec![x.clone()])
        }
        MoveOp::OneHot { axis, depth } => {
            arity(inputs, 2)?;
            let (i, v) = (&inputs[0], &inputs[1]);
            if !(i.dtype.is_int() || matches!(i.dtype, DType::F32 | DType::F64)) {
                return Err(OpError::DType {
                    input: 0,
                    dtype: i.dtype,
                    expected: "integer, f32 or f64 indices".into(),
                });
            }
            if v.numel() != Some(2) {
                return Err(OpError::shape(
                    "values must hold 2 elements (off, on)",
                    &[&v.shape],
                ));
            }
            if *axis > i.shape.len() {
                return Err(OpError::attr(
                    "axis",
                    format!("{axis} out of range for rank {}", i.shape.len() + 1),
                ));
            }
            let mut shape = i.shape.clone();
            shape.insert(*axis, *depth);
            Ok(vec![checked_type(v.dtype, shape, name)?])
        }
        MoveOp::Trilu { k, .. } => {
            arity(inputs, 1 + usize::from(*k == ScalarArg::Input))?;
            if let Some(t) = inputs.get(1)
                && (t.dtype != DType::I64 || t.numel() != Some(1))
            {
                return Err(OpError::DType {
                    input: 1,
                    dtype: t.dtype,
                    expected: "one int64 element (k)".into(),
                });
            }
            if inputs[0].shape.len() < 2 {
                return Err(OpError::shape("Trilu needs rank >= 2", &[&inputs[0].shape]));
            }
            Ok(vec![inputs[0].clone()])
        }
        MoveOp::DepthToSpace { block, .. } | MoveOp::SpaceToDepth { block, .. } => {
            arity(inputs, 1)?;
            let x = &inputs[0];
            let b = *block;
            let ok = match (op, x.shape.as_slice()) {
                (MoveOp::DepthToSpace { .. }, &[_, c, _, _]) => {
                    b > 0 && c % b.saturating_mul(b).max(1) == 0
                }
                (MoveOp::SpaceToDepth { .. }, &[_, _, h, w]) => b > 0 && h % b == 0 && w % b == 0,
                _ => false,
            };
            let view = op
                .space_depth_view(&x.shape)
                .filter(|_| ok)
                .ok_or_else(|| {
                    OpError::shape(
                        format!("{name} needs NCHW dims divisible by blocksize {b}"),
                        &[&x.shape],
                    )
                })?;
            let (in6, perm) = view;
            let out6: Vec<usize> = perm.iter().map(|&p| in6[p]).collect();
            let shape = match op {
                MoveOp::DepthToSpace { .. } => {
                    vec![out6[0], out6[1], out6[2] * out6[3], out6[4] * out6[5]]
                }
                _ => vec![out6[0], out6[1] * out6[2] * out6[3], out6[4], out6[5]],
            };
            Ok(vec![checked_type(x.dtype, shape, name)?])
        }
        MoveOp::ReverseSequence {
            batch_axis,
            time_axis,
        } => {
            arity(inputs, 2)?;
            let (x, l) = (&inputs[0], &inputs[1]);
            if x.shape.len() < 2 || *batch_axis + *time_axis != 1 {
                return Err(OpError::shape(
                    "ReverseSequence needs rank >= 2 and batch/time axes 0 and 1",
                    &[&x.shape],
                ));
            }
            if !matches!(l.dtype, DType::I32 | DType::I64) {
                return Err(OpError::DType {
                    input: 1,
                    dtype: l.dtype,
                    expected: "i64 (or i32) sequence lengths".into(),
                });
            }
            if l.shape != [x.shape[*batch_axis]] {
                return Err(OpError::shape(
                    "sequence_lens must have one entry per batch entry",
                    &[&x.shape, &l.shape],
                ));
            }
            Ok(vec![x.clone()])
        }
        MoveOp::Compress { axis, keep } => {
            arity(inputs, 1)?;
            let x = &inputs[0];
            let (dim, shape) = match axis {
                Some(a) => {
                    let dim = axis_in(*a, &x.shape)?;
                    let mut s = x.shape.clone();
                    s[*a] = keep.len();
                    (dim, s)
                }
                None => (x.numel().unwrap_or(0), vec![keep.len()]),
            };
            if keep.iter().any(|&k| k >= dim) {
                return Err(OpError::shape(
                    format!("condition longer than the compressed dim ({dim})"),
                    &[&x.shape],
                ));
            }
            Ok(vec![checked_type(x.dtype, shape, name)?])
        }
        MoveOp::EyeLike { dtype, .. } => {
            arity(inputs, 1)?;
            let x = &inputs[0];
            if x.shape.len() != 2 {
                return Err(OpError::shape("EyeLike needs a 2-d input", &[&x.shape]));
            }
            Ok(vec![TensorType::new(
                dtype.unwrap_or(x.dtype),
                x.shape.clone(),
            )])
        }
        MoveOp::Col2Im(a) => {
            arity(inputs, 1)?;
            let x = &inputs[0];
            let taps: usize = a.block.iter().product();
            let blocks = a.blocks().unwrap_or_default();
            let ok = match x.shape.as_slice() {
                &[_, ck, l] => {
                    taps > 0
                        && ck % taps == 0
                        && blocks.len() == a.image.len()
                        && l == blocks.iter().product::<usize>()
                }
                _ => false,
            };
            if !ok || !x.dtype.is_float() {
                return Err(OpError::shape(
                    format!(
                        "Col2Im needs a float [N, C * {taps}, L] input whose L is the number \
                         of blocks of image {} (blocks {})",
                        fmt_list(&a.image),
                        fmt_list(&blocks)
                    ),
                    &[&x.shape],
                ));
            }
            let mut shape = vec![x.shape[0], x.shape[1] / taps];
            shape.extend_from_slice(&a.image);
            Ok(vec![checked_type(x.dtype, shape, name)?])
        }
        MoveOp::Folded { outputs, .. } => {
            arity(inputs, 0)?;
            Ok(outputs.iter().map(Tensor::ty).collect())
        }
    }
}

fn same_updates(x: &TensorType, u: &TensorType, shape: &[usize]) -> Result<(), OpError> {
    if u.dtype != x.dtype {
        return Err(OpError::DType {
            input: 2,
            dtype: u.dtype,
            expected: format!("{} like the data", x.dtype),
        });
    }
    if u.shape != shape {
        return Err(OpError::shape(
            format!("updates must have shape {}", fmt_shape(shape)),
            &[&x.shape, &u.shape],
        ));
    }
    Ok(())
}
