//! Reference evaluation of the index-driven movement ops: plain loops over multi-indices,
//! elements copied as raw bytes (any dtype); scatter reductions computed in f64 (floats) or
//! i64 (integers).

use bytes::Bytes;

use super::{MoveOp, Reduction, eye_like, infer};
use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{TensorType, strides};
use crate::ops::ScalarArg;
use crate::ops::movement::{build, flat};
use crate::ops::util::unravel;

/// `i` (negative counts from the end) as an index into a dim of `dim`, or an error (the
/// indices are input 1 of every op here).
fn norm(i: i64, dim: usize) -> Result<usize, OpError> {
    let j = if i < 0 {
        i.saturating_add(dim as i64)
    } else {
        i
    };
    usize::try_from(j)
        .ok()
        .filter(|&j| j < dim)
        .ok_or_else(|| OpError::index(1, i, dim))
}

fn to_tensor(x: &Tensor, shape: Vec<usize>, bytes: Vec<u8>) -> Result<Tensor, OpError> {
    Tensor::from_bytes(x.dtype(), shape, Bytes::from(bytes))
        .map_err(|e| OpError::Overflow(e.to_string()))
}

/// Reference evaluation.
pub fn eval(op: &MoveOp, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out_types = infer(op, &types)?;
    if let MoveOp::Folded { outputs, .. } = op {
        return Ok(outputs.clone());
    }
    if let MoveOp::EyeLike { .. } = op {
        let eye = types.first().and_then(|t| eye_like(op, t));
        return Ok(vec![
            eye.ok_or_else(|| OpError::Overflow("EyeLike output".into()))?,
        ]);
    }
    let shape = out_types[0].shape.clone();
    let x = inputs[0];
    let xst = strides(x.shape());
    let y = match op {
        MoveOp::GatherElements { axis } => {
            let dim = x.shape()[*axis];
            let idx = inputs[1]
                .to_i64_vec()
                .into_iter()
                .map(|i| norm(i, dim))
                .collect::<Result<Vec<_>, _>>()?;
            let ist = strides(&shape);
            build(x, shape, None, |o| {
                let mut c = o.to_vec();
                c[*axis] = *idx.get(flat(o, &ist))?;
                Some(flat(&c, &xst))
            })?
        }
        MoveOp::GatherNd { batch_dims } => {
            let (rows, _) = nd_rows(x.shape(), inputs[1], *batch_dims)?;
            let q1 = inputs[1].shape().len() - 1;
            let rst = strides(&inputs[1].shape()[..q1]);
            build(x, shape, None, |o| {
                let row = rows.get(flat(&o[..q1], &rst))?;
                let mut c = o[..*batch_dims].to_vec();
                c.extend_from_slice(row);
                c.extend_from_slice(&o[q1..]);
                Some(flat(&c, &xst))
            })?
        }
        MoveOp::ScatterElements {
            axis, reduction, ..
        } => {
            let (idx, upd) = (inputs[1], inputs[2]);
            let dim = x.shape()[*axis];
            let ist = strides(idx.shape());
            let n = idx.numel();
            let mut pairs = Vec::with_capacity(n);
            for (j, &i) in idx.to_i64_vec().iter().enumerate() {
                let mut c = unravel(j, idx.shape());
                c[*axis] = norm(i, dim)?;
                pairs.push((flat(&c, &xst), flat(&unravel(j, idx.shape()), &ist)));
            }
            scatter(x, upd, &pairs, *reduction)?
        }
        MoveOp::ScatterNd { reduction } => {
            let (idx, upd) = (inputs[1], inputs[2]);
            let (rows, k) = nd_rows(x.shape(), idx, 0)?;
            let slice: usize = x.shape()[k..].iter().product();
            let mut pairs = Vec::with_capacity(rows.len() * slice);
            for (r, row) in rows.iter().enumerate() {
                let base = flat(row, &xst[..k]);
                for e in 0..slice {
                    pairs.push((base + e, r * slice + e));
                }
            }
            scatter(x, upd, &pairs, *reduction)?
        }
        MoveOp::OneHot { axis, depth } => {
            let (idx, values) = (inputs[0].to_f64_vec(), inputs[1]);
            let sz = values.dtype().size();
            let vb = values.bytes();
            let ishape = inputs[0].shape().to_vec();
            let ist = strides(&ishape);
            let n: usize = shape.iter().product();
            let mut out = Vec::with_capacity(n * sz);
            for f in 0..n {
                let mut o = unravel(f, &shape);
                let hot = o.remove(*axis);
                let v = idx.get(flat(&o, &ist)).copied().unwrap_or(f64::NAN);
                let v = if v < 0.0 { v + *depth as f64 } else { v };
                let on = v == hot as f64;
                let at = usize::from(on) * sz;
                out.extend_from_slice(&vb[at..at + sz]);
            }
            to_tensor(values, shape, out)?
        }
        MoveOp::Trilu { upper, k } => {
            let k = match k {
                ScalarArg::Const(k) => *k,
                ScalarArg::Input => inputs
                    .get(1)
                    .and_then(|t| t.to_i64_vec().first().copied())
                    .ok_or_else(|| OpError::Unsupported("Trilu's k input is missing".into()))?,
            };
            let k = &k;
            let zero = vec![0u8; x.dtype().size()];
            let r = shape.len();
            build(x, shape, Some(&zero), |o| {
                let d = o[r - 1] as i64 - o[r - 2] as i64;
                let keep = if *upper { d >= *k } else { d <= *k };
                keep.then(|| flat(o, &xst))
            })?
        }
        MoveOp::DepthToSpace { .. } | MoveOp::SpaceToDepth { .. } => {
            let (in6, perm) = op
                .space_depth_view(x.shape())
                .ok_or_else(|| OpError::shape("NCHW input expected", &[x.shape()]))?;
            let out6: Vec<usize> = perm.iter().map(|&p| in6[p]).collect();
            let st6 = strides(&in6);
            let y = build(x, out6, None, |o| {
                let mut c = [0usize; 6];
                for (i, &p) in perm.iter().enumerate() {
                    c[p] = o[i];
                }
                Some(flat(&c, &st6))
            })?;
            y.reshaped(shape)
                .ok_or_else(|| OpError::Overflow("reshaping the result".into()))?
        }
        MoveOp::ReverseSequence {
            batch_axis,
            time_axis,
        } => {
            let steps = x.shape()[*time_axis] as i64;
            let lens = inputs[1].to_i64_vec();
            if let Some(&l) = lens.iter().find(|&&l| !(0..=steps).contains(&l)) {
                return Err(OpError::OutOfRange {
                    input: 1,
                    what: "sequence length",
                    value: l,
                    lo: 0,
                    hi: steps,
                });
            }
            build(x, shape, None, |o| {
                let len = *lens.get(o[*batch_axis])?;
                let t = o[*time_axis] as i64;
                let mut c = o.to_vec();
                c[*time_axis] = if t < len {
                    (len - 1 - t) as usize
                } else {
                    t as usize
                };
                Some(flat(&c, &xst))
            })?
        }
        MoveOp::Compress { axis, keep } => match axis {
            Some(a) => build(x, shape, None, |o| {
                let mut c = o.to_vec();
                c[*a] = *keep.get(o[*a])?;
                Some(flat(&c, &xst))
            })?,
            None => build(x, shape, None, |o| keep.get(o[0]).copied())?,
        },
        MoveOp::Col2Im(a) => {
            let targets = a
                .targets()
                .ok_or_else(|| OpError::Overflow("Col2Im geometry".into()))?;
            let xv = x.to_f64_vec();
            let plane: usize = a.image.iter().product();
            let per = targets.len();
            let n: usize = shape.iter().product();
            let mut out = vec![0.0f64; n];
            for (img, chunk) in xv.chunks(per.max(1)).enumerate() {
                for (&t, &v) in targets.iter().zip(chunk) {
                    if let Some(t) = t {
                        out[img * plane + t] += v;
                    }
                }
            }
            Tensor::from_f64(x.dtype(), shape, &out)
        }
        // Returned above.
        MoveOp::EyeLike { .. } | MoveOp::Folded { .. } => {
            return Err(OpError::Unsupported("evaluated earlier".into()));
        }
    };
    Ok(vec![y])
}

/// Index rows of GatherND/ScatterND, normalized: one `Vec` of `k` entries per row (all batch
/// rows in order), and `k`.
fn nd_rows(
    data: &[usize],
    idx: &Tensor,
    batch_dims: usize,
) -> Result<(Vec<Vec<usize>>, usize), OpError> {
    let k = idx.shape().last().copied().unwrap_or(0);
    if k == 0 {
        // Every row is empty: one per index position except the last dim.
        let n: usize = idx.shape().iter().rev().skip(1).product();
        return Ok((vec![Vec::new(); n], 0));
    }
    let rows = idx
        .to_i64_vec()
        .chunks(k)
        .map(|row| {
            row.iter()
                .enumerate()
                .map(|(j, &i)| norm(i, data[batch_dims + j]))
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((rows, k))
}

/// `out = x`, then `out[t] = combine(out[t], u[s])` for each `(t, s)` in order.
fn scatter(
    x: &Tensor,
    u: &Tensor,
    pairs: &[(usize, usize)],
    red: Reduction,
) -> Result<Tensor, OpError> {
    let shape = x.shape().to_vec();
    let oob = || OpError::Unsupported("scatter target outside the data (an arenac bug)".into());
    if red == Reduction::None {
        let sz = x.dtype().size();
        let mut out = x.bytes().to_vec();
        let ub = u.bytes();
        for &(t, s) in pairs {
            let src = ub.get(s * sz..(s + 1) * sz).ok_or_else(oob)?;
            out.get_mut(t * sz..(t + 1) * sz)
                .ok_or_else(oob)?
                .copy_from_slice(src);
        }
        return to_tensor(x, shape, out);
    }
    if x.dtype().is_float() {
        let (mut out, uv) = (x.to_f64_vec(), u.to_f64_vec());
        for &(t, s) in pairs {
            let b = *uv.get(s).ok_or_else(oob)?;
            let a = out.get_mut(t).ok_or_else(oob)?;
            *a = match red {
                Reduction::Add => *a + b,
                Reduction::Mul => *a * b,
                _ if a.is_nan() || b.is_nan() => f64::NAN,
                Reduction::Max => a.max(b),
                Reduction::Min => a.min(b),
                Reduction::None => b,
            };
        }
        Ok(Tensor::from_f64(x.dtype(), shape, &out))
    } else if x.dtype().is_int() {
        let (mut out, uv) = (x.to_i64_vec(), u.to_i64_vec());
        for &(t, s) in pairs {
            let b = *uv.get(s).ok_or_else(oob)?;
            let a = out.get_mut(t).ok_or_else(oob)?;
            *a = match red {
                Reduction::Add => a.wrapping_add(b),
                Reduction::Mul => a.wrapping_mul(b),
                Reduction::Max => (*a).max(b),
                Reduction::Min => (*a).min(b),
                Reduction::None => b,
            };
        }
        Ok(Tensor::from_i64(x.dtype(), shape, &out))
    } else {
        Err(OpError::Unsupported(format!(
            "scatter reduction '{}' on {}",
            red.name(),
            x.dtype()
        )))
    }
}
