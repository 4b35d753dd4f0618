//! Ops whose output *shape* depends on input values: NonZero, Unique, NonMaxSuppression.
//! arenac's shapes are static, so these are computed at conversion time from constant (or
//! frozen) inputs and always fold; a run-time input is [`OpError::DataDependent`].

use std::cmp::Ordering;

use super::MoveOp;
use super::convert::data_dependent;
use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ops::Op;
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::util::unravel;

/// Input `i` as a constant, or why the op cannot be static.
fn value(ctx: &mut NodeCtx<'_>, i: usize) -> Result<Option<Tensor>, OpError> {
    ctx.take_const(i).map_err(data_dependent)
}

fn folded(op: &'static str, outputs: Vec<Tensor>) -> Op {
    Op::Move(MoveOp::Folded { op, outputs })
}

pub(super) fn non_zero(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let x = value(ctx, 0)?.ok_or_else(|| OpError::attr("X", "required"))?;
    let shape = x.shape().to_vec();
    let hits: Vec<usize> = x
        .to_f64_vec()
        .iter()
        .enumerate()
        .filter(|(_, v)| **v != 0.0)
        .map(|(i, _)| i)
        .collect();
    let r = shape.len();
    let mut out = vec![0i64; r * hits.len()];
    for (j, &h) in hits.iter().enumerate() {
        for (d, c) in unravel(h, &shape).into_iter().enumerate() {
            out[d * hits.len() + j] = c as i64;
        }
    }
    Ok(folded(
        "NonZero",
        vec![Tensor::i64(vec![r, hits.len()], &out)],
    ))
}

pub(super) fn unique(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let x = value(ctx, 0)?.ok_or_else(|| OpError::attr("X", "required"))?;
    let sorted = ctx.attr_int("sorted", 1)? != 0;
    let shape = x.shape().to_vec();
    // The input as `outer x n x inner`, the unique items being the n slices of `outer*inner`.
    let (axis, view) = match ctx.attr_int_opt("axis")? {
        None => (None, vec![1, x.numel(), 1]),
        Some(a) => {
            let a = norm_axis("axis", a, shape.len())?;
            let outer: usize = shape[..a].iter().product();
            let inner: usize = shape[a + 1..].iter().product();
            (Some(a), vec![outer, shape[a], inner])
        }
    };
    let (outer, n, inner) = (view[0], view[1], view[2]);
    let ints = x.dtype().is_int() || !x.dtype().is_float();
    let (iv, fv) = if ints {
        (x.to_i64_vec(), Vec::new())
    } else {
        (Vec::new(), x.to_f64_vec())
    };
    let at = |s: usize, o: usize, i: usize| (o * n + s) * inner + i;
    let cmp = |a: usize, b: usize| -> Ordering {
        for o in 0..outer {
            for i in 0..inner {
                let c = if ints {
                    iv[at(a, o, i)].cmp(&iv[at(b, o, i)])
                } else {
                    fv[at(a, o, i)].total_cmp(&fv[at(b, o, i)])
                };
                if c != Ordering::Equal {
                    return c;
                }
            }
        }
        Ordering::Equal
    };
    // Slices sorted by value then position; runs of equal ones are the unique items.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| cmp(a, b).then(a.cmp(&b)));
    let mut groups: Vec<(usize, usize)> = Vec::new(); // (first position, count)
    let mut group_of = vec![0usize; n];
    for (k, &s) in order.iter().enumerate() {
        if k == 0 || cmp(order[k - 1], s) != Ordering::Equal {
            groups.push((s, 0));
        }
        let g = groups.len() - 1;
        groups[g].1 += 1;
        group_of[s] = g;
    }
    // Output order: by value (sorted) or by first occurrence.
    let mut rank: Vec<usize> = (0..groups.len()).collect();
    if !sorted {
        rank.sort_by_key(|&g| groups[g].0);
    }
    let mut pos = vec![0usize; groups.len()];
    for (p, &g) in rank.iter().enumerate() {
        pos[g] = p;
    }
    let sz = x.dtype().size();
    let bytes = x.bytes();
    let mut y = Vec::with_capacity(outer * rank.len() * inner * sz);
    for o in 0..outer {
        for &g in &rank {
            let s = groups[g].0;
            y.extend_from_slice(&bytes[at(s, o, 0) * sz..at(s, o, inner) * sz]);
        }
    }
    let y_shape = match axis {
        None => vec![rank.len()],
        Some(a) => {
            let mut s = shape.clone();
            s[a] = rank.len();
            s
        }
    };
    let y = Tensor::from_bytes(x.dtype(), y_shape, y.into())
        .map_err(|e| OpError::Overflow(e.to_string()))?;
    let u = rank.len();
    let first: Vec<i64> = rank.iter().map(|&g| groups[g].0 as i64).collect();
    let inverse: Vec<i64> = group_of.iter().map(|&g| pos[g] as i64).collect();
    let counts: Vec<i64> = rank.iter().map(|&g| groups[g].1 as i64).collect();
    Ok(folded(
        "Unique",
        vec![
            y,
            Tensor::i64(vec![u], &first),
            Tensor::i64(vec![n], &inverse),
            Tensor::i64(vec![u], &counts),
        ],
    ))
}

/// `(x_min, y_min, x_max, y_max)` of a box in either encoding.
fn corners(b: &[f64], center: bool) -> [f64; 4] {
    if center {
        let (w, h) = (b[2] / 2.0, b[3] / 2.0);
        [b[0] - w, b[1] - h, b[0] + w, b[1] + h]
    } else {
        [
            b[1].min(b[3]),
            b[0].min(b[2]),
            b[1].max(b[3]),
            b[0].max(b[2]),
        ]
    }
}

/// Whether the IoU of two boxes exceeds `threshold` (onnx's reference rules).
fn suppresses(a: [f64; 4], b: [f64; 4], threshold: f64) -> bool {
    let (x0, x1) = (a[0].max(b[0]), a[2].min(b[2]));
    let (y0, y1) = (a[1].max(b[1]), a[3].min(b[3]));
    if x1 <= x0 || y1 <= y0 {
        return false;
    }
    let inter = (x1 - x0) * (y1 - y0);
    let area = |c: [f64; 4]| (c[2] - c[0]) * (c[3] - c[1]);
    let (a1, a2) = (area(a), area(b));
    let union = a1 + a2 - inter;
    if inter <= 0.0 || a1 <= 0.0 || a2 <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > threshold
}

pub(super) fn non_max_suppression(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 5)?;
    let boxes = value(ctx, 0)?.ok_or_else(|| OpError::attr("boxes", "required"))?;
    let scores = value(ctx, 1)?.ok_or_else(|| OpError::attr("scores", "required"))?;
    let first = |t: Option<Tensor>| t.and_then(|t| t.scalar_at(0)).map(|s| s.as_f64());
    let max_out = first(value(ctx, 2)?).unwrap_or(0.0).max(0.0) as usize;
    let iou = first(value(ctx, 3)?).unwrap_or(0.0);
    let score_min = first(value(ctx, 4)?);
    let center = ctx.attr_int("center_point_box", 0)? != 0;
    let (bs, ss) = (boxes.shape(), scores.shape());
    let (&[nb, n, 4], &[sb, nc, sn]) = (bs, ss) else {
        return Err(OpError::shape(
            "boxes must be [batches, boxes, 4] and scores [batches, classes, boxes]",
            &[bs, ss],
        ));
    };
    if sb != nb || sn != n {
        return Err(OpError::shape("boxes and scores disagree", &[bs, ss]));
    }
    let (bv, sv) = (boxes.to_f64_vec(), scores.to_f64_vec());
    let mut out: Vec<i64> = Vec::new();
    for b in 0..nb {
        let corner: Vec<[f64; 4]> = (0..n)
            .map(|i| corners(&bv[(b * n + i) * 4..(b * n + i) * 4 + 4], center))
            .collect();
        for c in 0..nc {
            let s = &sv[(b * nc + c) * n..(b * nc + c + 1) * n];
            let mut cand: Vec<usize> = (0..n)
                .filter(|&i| score_min.is_none_or(|m| s[i] > m))
                .collect();
            // Highest score first, the lower index first among equal scores.
            cand.sort_by(|&i, &j| s[j].total_cmp(&s[i]).then(i.cmp(&j)));
            let mut kept: Vec<usize> = Vec::new();
            for i in cand {
                if kept.len() >= max_out {
                    break;
                }
                if kept.iter().all(|&k| !suppresses(corner[i], corner[k], iou)) {
                    kept.push(i);
                    out.extend_from_slice(&[b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    let rows = out.len() / 3;
    Ok(folded(
        "NonMaxSuppression",
        vec![Tensor::i64(vec![rows, 3], &out)],
    ))
}
