//! Data movement: Transpose, Concat, Split, Slice, Gather, Expand, Tile, Pad.
//!
//! Every op here is dtype-agnostic: evaluation copies raw elements of `dtype.size()` bytes
//! and builds outputs with [`Tensor::from_bytes`]. Shape-deciding operands (Slice bounds, Pad
//! pads, Expand's shape, Tile's repeats, Split sizes) are taken as constants by the converters.

mod bounds;
mod convert;
pub mod index;
#[cfg(test)]
mod tests;

use bytes::Bytes;

use crate::error::OpError;
use crate::ir::tensor::{Scalar, Tensor};
use crate::ir::types::{DType, Shape, TensorType, checked_numel, strides};
use crate::ops::util::{broadcast_index_map, broadcast_shapes, expect_arity, fmt_list, unravel};
use crate::ops::util::{fmt_shape, wrong_family};
use crate::ops::{MAX_OPSET, MIN_OPSET, Op, OpDef, ScalarArg};

/// One sliced axis, normalized: `start` and `end` clamped to the valid range for `step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceAxis {
    /// The axis.
    pub axis: usize,
    /// First index taken.
    pub start: i64,
    /// Bound (exclusive), may be -1 for negative steps running to the start.
    pub end: i64,
    /// Step (non-zero).
    pub step: i64,
}

impl SliceAxis {
    /// Number of indices taken (`start`, `start + step`, ... strictly before `end`).
    pub fn len(&self) -> usize {
        let (start, end, step) = (
            i128::from(self.start),
            i128::from(self.end),
            i128::from(self.step),
        );
        let n = if step > 0 && end > start {
            (end - start - 1) / step + 1
        } else if step < 0 && start > end {
            (start - end - 1) / -step + 1
        } else {
            0
        };
        usize::try_from(n).unwrap_or(usize::MAX)
    }

    /// True when no index is taken.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `start`/`end` are within the clamped ranges for an axis of size `dim`.
    fn valid_for(&self, dim: usize) -> bool {
        let d = dim as i64;
        if self.step > 0 {
            (0..=d).contains(&self.start) && (0..=d).contains(&self.end)
        } else if self.step < 0 {
            (-1..d).contains(&self.start) && (-1..d).contains(&self.end)
        } else {
            false
        }
    }
}

/// Pad mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    /// Fill with a constant.
    Constant,
    /// Mirror without repeating the edge.
    Reflect,
    /// Repeat the edge.
    Edge,
    /// Wrap around.
    Wrap,
}

impl PadMode {
    fn name(self) -> &'static str {
        match self {
            PadMode::Constant => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Edge => "edge",
            PadMode::Wrap => "wrap",
        }
    }
}

pub use bounds::check_constant_indices;

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    OpDef {
        op_type: "Transpose",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert::transpose,
    },
    OpDef {
        op_type: "Concat",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert::concat,
    },
    OpDef {
        op_type: "Split",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert::split,
    },
    OpDef {
        op_type: "Slice",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert::slice,
    },
    OpDef {
        op_type: "Gather",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert::gather,
    },
    OpDef {
        op_type: "Expand",
        since: 8,
        until: MAX_OPSET,
        convert: convert::expand,
    },
    OpDef {
        op_type: "Tile",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert::tile,
    },
    OpDef {
        op_type: "Pad",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert::pad,
    },
];

/// Printed op name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::Transpose { .. } => "Transpose",
        Op::Concat { .. } => "Concat",
        Op::Split { .. } => "Split",
        Op::Slice { .. } => "Slice",
        Op::PatchWrite { .. } => "PatchWrite",
        Op::Gather { .. } => "Gather",
        Op::Expand { .. } => "Expand",
        Op::Tile { .. } => "Tile",
        Op::Pad { .. } => "Pad",
        Op::Move(m) => m.name(),
        _ => "?",
    }
}

/// Checks that `perm` is a permutation of `0..rank`.
fn check_perm(perm: &[usize], shape: &[usize]) -> Result<(), OpError> {
    let mut seen = vec![false; shape.len()];
    if perm.len() != shape.len() {
        return Err(OpError::shape(
            format!("perm {} does not match the rank", fmt_list(perm)),
            &[shape],
        ));
    }
    for &p in perm {
        match seen.get_mut(p) {
            Some(s) if !*s => *s = true,
            _ => {
                return Err(OpError::attr(
                    "perm",
                    format!(
                        "{} is not a permutation of 0..{}",
                        fmt_list(perm),
                        shape.len()
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn axis_in(axis: usize, shape: &[usize]) -> Result<usize, OpError> {
    shape.get(axis).copied().ok_or_else(|| {
        OpError::shape(
            format!("axis {axis} out of range for rank {}", shape.len()),
            &[shape],
        )
    })
}

fn overflow(what: &str, shape: &[usize]) -> OpError {
    OpError::Overflow(format!("{what} output {}", fmt_shape(shape)))
}

/// Checks that `shape` has a representable byte size for `dtype`.
fn checked_type(dtype: DType, shape: Shape, what: &str) -> Result<TensorType, OpError> {
    let t = TensorType::new(dtype, shape);
    match t.bytes() {
        Some(b) if b <= isize::MAX as usize => Ok(t),
        _ => Err(overflow(what, &t.shape)),
    }
}

/// Per dim of a Pad: `[crop_begin, crop_end, pad_begin, pad_end, kept]` where `kept` is the
/// input dim after cropping (negative pads crop first, then the positive ones pad the cropped
/// input, as ONNX Runtime does).
fn pad_dims(pads: &[i64], shape: &[usize], mode: PadMode) -> Result<Vec<[usize; 5]>, OpError> {
    let rank = shape.len();
    if pads.len() != 2 * rank {
        return Err(OpError::shape(
            format!("pads {} need 2 entries per dim", fmt_list(pads)),
            &[shape],
        ));
    }
    let mut out = Vec::with_capacity(rank);
    for (d, &dim) in shape.iter().enumerate() {
        let (b, e) = (pads[d], pads[d + rank]);
        let as_usize = |v: i64| usize::try_from(v.unsigned_abs()).unwrap_or(usize::MAX);
        let (cb, pb) = if b < 0 {
            (as_usize(b), 0)
        } else {
            (0, as_usize(b))
        };
        let (ce, pe) = if e < 0 {
            (as_usize(e), 0)
        } else {
            (0, as_usize(e))
        };
        let kept = dim
            .checked_sub(cb)
            .and_then(|k| k.checked_sub(ce))
            .ok_or_else(|| {
                OpError::shape(
                    format!("pads {} crop more than dim {d} holds", fmt_list(pads)),
                    &[shape],
                )
            })?;
        // Every mode but constant reads the input to fill the pads: it must not be empty.
        if mode != PadMode::Constant && (pb > 0 || pe > 0) && kept == 0 {
            return Err(OpError::shape(
                format!("{} padding of dim {d}, which is empty", mode.name()),
                &[shape],
            ));
        }
        out.push([cb, ce, pb, pe, kept]);
    }
    Ok(out)
}

/// The output types of `op` (validating everything `eval` relies on).
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    match op {
        Op::Move(m) => index::infer(m, inputs),
        Op::Transpose { perm } => {
            expect_arity(inputs, 1)?;
            let x = &inputs[0];
            check_perm(perm, &x.shape)?;
            let shape = perm.iter().map(|&p| x.shape[p]).collect();
            Ok(vec![TensorType::new(x.dtype, shape)])
        }
        Op::Concat { axis } => {
            let Some(first) = inputs.first() else {
                return Err(OpError::Arity {
                    expected: "at least 1".into(),
                    actual: 0,
                });
            };
            axis_in(*axis, &first.shape)?;
            let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
            let mut total = 0usize;
            for (i, t) in inputs.iter().enumerate() {
                if t.dtype != first.dtype {
                    return Err(OpError::DType {
                        input: i,
                        dtype: t.dtype,
                        expected: format!("{} like input 0", first.dtype),
                    });
                }
                let same = t.shape.len() == first.shape.len()
                    && (0..t.shape.len()).all(|d| d == *axis || t.shape[d] == first.shape[d]);
                if !same {
                    return Err(OpError::shape(
                        format!("input {i} differs from input 0 outside axis {axis}"),
                        &shapes,
                    ));
                }
                total = total
                    .checked_add(t.shape[*axis])
                    .ok_or_else(|| overflow("Concat", &first.shape))?;
            }
            let mut shape = first.shape.clone();
            shape[*axis] = total;
            Ok(vec![checked_type(first.dtype, shape, "Concat")?])
        }
        Op::Split { axis, sizes } => {
            expect_arity(inputs, 1)?;
            let x = &inputs[0];
            let dim = axis_in(*axis, &x.shape)?;
            let sum = sizes.iter().try_fold(0usize, |a, &s| a.checked_add(s));
            if sum != Some(dim) {
                return Err(OpError::shape(
                    format!(
                        "split sizes {} do not add up to dim {axis} ({dim})",
                        fmt_list(sizes)
                    ),
                    &[&x.shape],
                ));
            }
            Ok(sizes
                .iter()
                .map(|&s| {
                    let mut shape = x.shape.clone();
                    shape[*axis] = s;
                    TensorType::new(x.dtype, shape)
                })
                .collect())
        }
        Op::Slice { axes } => {
            expect_arity(inputs, 1)?;
            let x = &inputs[0];
            let mut shape = x.shape.clone();
            let mut seen = vec![false; shape.len()];
            for a in axes {
                let dim = axis_in(a.axis, &x.shape)?;
                if std::mem::replace(&mut seen[a.axis], true) {
                    return Err(OpError::attr("axes", format!("axis {} repeated", a.axis)));
                }
                if !a.valid_for(dim) {
                    return Err(OpError::shape(
                        format!("slice {a:?} not normalized for dim {dim}"),
                        &[&x.shape],
                    ));
                }
                shape[a.axis] = a.len();
            }
            Ok(vec![TensorType::new(x.dtype, shape)])
        }
        Op::Gather { axis } => {
            expect_arity(inputs, 2)?;
            let (x, idx) = (&inputs[0], &inputs[1]);
            axis_in(*axis, &x.shape)?;
            if !matches!(idx.dtype, DType::I32 | DType::I64) {
                return Err(OpError::DType {
                    input: 1,
                    dtype: idx.dtype,
                    expected: "i32 or i64 indices".into(),
                });
            }
            let mut shape = x.shape[..*axis].to_vec();
            shape.extend_from_slice(&idx.shape);
            shape.extend_from_slice(&x.shape[*axis + 1..]);
            Ok(vec![checked_type(x.dtype, shape, "Gather")?])
        }
        Op::Expand { shape } => {
            expect_arity(inputs, 1)?;
            let x = &inputs[0];
            let out = broadcast_shapes(&[&x.shape, shape])?;
            Ok(vec![checked_type(x.dtype, out, "Expand")?])
        }
        Op::Tile { repeats } => {
            expect_arity(inputs, 1)?;
            let x = &inputs[0];
            if repeats.len() != x.shape.len() {
                return Err(OpError::shape(
                    format!("repeats {} need one entry per dim", fmt_list(repeats)),
                    &[&x.shape],
                ));
            }
            let out = x
                .shape
                .iter()
                .zip(repeats)
                .map(|(&d, &r)| d.checked_mul(r))
                .collect::<Option<Shape>>()
                .ok_or_else(|| overflow("Tile", &x.shape))?;
            Ok(vec![checked_type(x.dtype, out, "Tile")?])
        }
        Op::Pad { mode, pads, value } => {
            let runtime_value = *value == ScalarArg::Input;
            expect_arity(inputs, 1 + usize::from(runtime_value))?;
            let x = &inputs[0];
            if let Some(v) = inputs.get(1)
                && (v.dtype != x.dtype || v.numel() != Some(1))
            {
                return Err(OpError::DType {
                    input: 1,
                    dtype: v.dtype,
                    expected: format!("one {} element (constant_value)", x.dtype),
                });
            }
            let dims = pad_dims(pads, &x.shape, *mode)?;
            let out = dims
                .iter()
                .map(|&[_, _, pb, pe, kept]| kept.checked_add(pb)?.checked_add(pe))
                .collect::<Option<Shape>>()
                .ok_or_else(|| overflow("Pad", &x.shape))?;
            Ok(vec![checked_type(x.dtype, out, "Pad")?])
        }
        Op::PatchWrite { at, full } => {
            let (acc, patch) = match inputs {
                [p] => (None, p),
                [a, p] => (Some(a), p),
                _ => {
                    return Err(OpError::Arity {
                        expected: "1 or 2".into(),
                        actual: inputs.len(),
                    });
                }
            };
            let [n, c, h, w] = patch.shape[..] else {
                return Err(OpError::shape(
                    "PatchWrite takes a 4-d patch",
                    &[&patch.shape],
                ));
            };
            if at[0] + h > full[0] || at[1] + w > full[1] {
                return Err(OpError::shape(
                    format!("patch at {at:?} does not fit a {full:?} plane"),
                    &[&patch.shape],
                ));
            }
            let y = TensorType::new(patch.dtype, vec![n, c, full[0], full[1]]);
            if acc.is_some_and(|a| *a != y) {
                return Err(OpError::shape(
                    "PatchWrite's accumulated input must have the output's type",
                    &[&patch.shape],
                ));
            }
            Ok(vec![y])
        }
        _ => Err(wrong_family(op, "movement")),
    }
}

/// Builds a tensor of `shape` whose element `i` is element `src(multi_index(i))` of `x`, or
/// `fill` where `src` gives `None`.
fn build(
    x: &Tensor,
    shape: Shape,
    fill: Option<&[u8]>,
    src: impl Fn(&[usize]) -> Option<usize>,
) -> Result<Tensor, OpError> {
    let sz = x.dtype().size();
    let n = checked_numel(&shape).ok_or_else(|| overflow("reference", &shape))?;
    let data = x.bytes();
    let mut out = Vec::with_capacity(n.saturating_mul(sz));
    for i in 0..n {
        let idx = unravel(i, &shape);
        let bytes = match src(&idx) {
            Some(j) => data.get(j * sz..(j + 1) * sz),
            None => fill,
        };
        let bytes = bytes.ok_or_else(|| {
            OpError::shape(
                format!("element {idx:?} maps outside the input (an arenac bug)"),
                &[x.shape(), &shape],
            )
        })?;
        out.extend_from_slice(bytes);
    }
    Tensor::from_bytes(x.dtype(), shape, Bytes::from(out))
        .map_err(|e| OpError::Overflow(e.to_string()))
}

/// Flat index of a multi-index.
fn flat(idx: &[usize], strides: &[usize]) -> usize {
    idx.iter().zip(strides).map(|(i, s)| i * s).sum()
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    if let Op::Move(m) = op {
        return index::eval(m, inputs);
    }
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out_types = infer(op, &types)?;
    let out_shape = |k: usize| out_types[k].shape.clone();
    let x = inputs[0];
    let st = strides(x.shape());
    let y = match op {
        Op::Transpose { perm } => build(x, out_shape(0), None, |o| {
            // Output dim i is input dim perm[i].
            let mut idx = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                idx[p] = o[i];
            }
            Some(flat(&idx, &st))
        })?,
        Op::Concat { axis } => {
            let shape = out_shape(0);
            let sz = x.dtype().size();
            let outer = checked_numel(&shape[..*axis]).unwrap_or(0);
            let inner = checked_numel(&shape[*axis + 1..]).unwrap_or(0);
            let mut out = Vec::new();
            for o in 0..outer {
                for t in inputs {
                    let chunk = t.shape()[*axis] * inner * sz;
                    let part = t.bytes().get(o * chunk..(o + 1) * chunk).ok_or_else(|| {
                        OpError::shape("Concat input shorter than its shape", &[t.shape()])
                    })?;
                    out.extend_from_slice(part);
                }
            }
            Tensor::from_bytes(x.dtype(), shape, Bytes::from(out))
                .map_err(|e| OpError::Overflow(e.to_string()))?
        }
        Op::Split { axis, sizes } => {
            let mut outs = Vec::with_capacity(sizes.len());
            let mut offset = 0;
            for (k, &s) in sizes.iter().enumerate() {
                outs.push(build(x, out_shape(k), None, |o| {
                    let mut idx = o.to_vec();
                    idx[*axis] += offset;
                    Some(flat(&idx, &st))
                })?);
                offset += s;
            }
            return Ok(outs);
        }
        Op::PatchWrite { at, .. } => {
            let shape = out_shape(0);
            let patch = inputs[inputs.len() - 1];
            let ps = patch.shape();
            let (ph, pw) = (ps[2], ps[3]);
            let sz = patch.dtype().size();
            let n = checked_numel(&shape).ok_or_else(|| overflow("PatchWrite", &shape))?;
            let mut out = match inputs {
                [acc, _] => acc.bytes().to_vec(),
                _ => vec![0u8; n * sz],
            };
            let (h, w) = (shape[2], shape[3]);
            for plane in 0..shape[0] * shape[1] {
                for r in 0..ph {
                    let src = (plane * ph * pw + r * pw) * sz;
                    let dst = (plane * h * w + (at[0] + r) * w + at[1]) * sz;
                    let (Some(from), Some(to)) = (
                        patch.bytes().get(src..src + pw * sz),
                        out.get_mut(dst..dst + pw * sz),
                    ) else {
                        return Err(OpError::shape("PatchWrite window out of range", &[ps]));
                    };
                    to.copy_from_slice(from);
                }
            }
            Tensor::from_bytes(patch.dtype(), shape, Bytes::from(out))
                .map_err(|e| OpError::Overflow(e.to_string()))?
        }
        Op::Slice { axes } => build(x, out_shape(0), None, |o| {
            let mut idx = o.to_vec();
            for a in axes {
                let i = a.start + o[a.axis] as i64 * a.step;
                idx[a.axis] = usize::try_from(i).ok()?;
            }
            Some(flat(&idx, &st))
        })?,
        Op::Gather { axis } => {
            let indices = inputs[1];
            let dim = x.shape()[*axis];
            let mut norm = Vec::with_capacity(indices.numel());
            for v in indices.to_i64_vec() {
                let i = if v < 0 { v + dim as i64 } else { v };
                if i < 0 || i >= dim as i64 {
                    return Err(OpError::index(1, v, dim));
                }
                norm.push(i as usize);
            }
            let istrides = strides(indices.shape());
            let q = indices.shape().len();
            build(x, out_shape(0), None, |o| {
                // o = [outer dims (axis), index dims (q), inner dims].
                let j = norm.get(flat(&o[*axis..*axis + q], &istrides))?;
                let mut idx = o[..*axis].to_vec();
                idx.push(*j);
                idx.extend_from_slice(&o[*axis + q..]);
                Some(flat(&idx, &st))
            })?
        }
        Op::Expand { .. } => {
            let shape = out_shape(0);
            let map = broadcast_index_map(x.shape(), &shape);
            let ostrides = strides(&shape);
            build(x, shape, None, |o| map.get(flat(o, &ostrides)).copied())?
        }
        Op::Tile { .. } => {
            let dims = x.shape().to_vec();
            build(x, out_shape(0), None, |o| {
                let idx: Vec<usize> = o.iter().zip(&dims).map(|(&i, &d)| i % d).collect();
                Some(flat(&idx, &st))
            })?
        }
        Op::Pad { mode, pads, value } => {
            let dims = pad_dims(pads, x.shape(), *mode)?;
            let fill = match value {
                ScalarArg::Const(v) if x.dtype().is_float() => {
                    Tensor::filled(x.dtype(), vec![], Scalar::Float(*v))
                }
                ScalarArg::Const(v) => Tensor::filled(x.dtype(), vec![], Scalar::Int(*v as i64)),
                // The run-time fill value's own bytes (infer checked: one element of x's dtype).
                ScalarArg::Input => (*inputs.get(1).ok_or_else(|| {
                    OpError::Unsupported("Pad's constant_value input is missing".into())
                })?)
                .clone(),
            };
            build(x, out_shape(0), Some(fill.bytes()), |o| {
                let mut idx = Vec::with_capacity(o.len());
                for (&oi, &[cb, _, pb, _, kept]) in o.iter().zip(&dims) {
                    // Position in the cropped input, then mapped back into it per mode.
                    let i = oi as i64 - pb as i64;
                    let k = kept as i64;
                    let j = if (0..k).contains(&i) {
                        i
                    } else {
                        match mode {
                            PadMode::Constant => return None,
                            PadMode::Edge => i.clamp(0, k - 1),
                            // numpy's reflect: periodic with period 2(k-1), so pads may
                            // exceed the dim; a size-1 dim repeats its element.
                            PadMode::Reflect if k == 1 => 0,
                            PadMode::Reflect => {
                                let m = i.rem_euclid(2 * (k - 1));
                                if m < k { m } else { 2 * (k - 1) - m }
                            }
                            PadMode::Wrap => i.rem_euclid(k),
                        }
                    };
                    idx.push(usize::try_from(j).ok()? + cb);
                }
                Some(flat(&idx, &st))
            })?
        }
        _ => return Err(wrong_family(op, "movement")),
    };
    Ok(vec![y])
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::Move(m) => m.attrs(),
        Op::Transpose { perm } => vec![("perm", fmt_list(perm))],
        Op::Concat { axis } | Op::Gather { axis } => vec![("axis", axis.to_string())],
        Op::Split { axis, sizes } => vec![("axis", axis.to_string()), ("split", fmt_list(sizes))],
        Op::PatchWrite { at, full } => vec![("at", fmt_list(at)), ("full", fmt_list(full))],
        Op::Slice { axes } => {
            let col = |f: fn(&SliceAxis) -> i64| fmt_list(&axes.iter().map(f).collect::<Vec<_>>());
            vec![
                ("axes", col(|a| a.axis as i64)),
                ("starts", col(|a| a.start)),
                ("ends", col(|a| a.end)),
                ("steps", col(|a| a.step)),
            ]
        }
        Op::Expand { shape } => vec![("shape", fmt_list(shape))],
        Op::Tile { repeats } => vec![("repeats", fmt_list(repeats))],
        Op::Pad { mode, pads, value } => vec![
            ("mode", mode.name().to_string()),
            ("pads", fmt_list(pads)),
            ("value", value.fmt_arg()),
        ],
        _ => Vec::new(),
    }
}
