//! `Einsum` (opset 12+) as Transpose/Reshape/Slice/ReduceSum/Mul/MatMul nodes, the classic
//! rewrite, so contractions run on the GEMM core:
//! 1. a label repeated in one operand (a diagonal) — the repeated dims moved last, flattened
//!    to `d^k` and sliced with step `(d^k - 1) / (d - 1)`, which walks the diagonal;
//! 2. a label used by one operand only and not in the output is summed there (ReduceSum);
//! 3. operands are combined left to right, two at a time: labels in both and needed later
//!    are batch dims, labels in both and needed nowhere else are contracted, the rest are the
//!    row (first operand) and column (second) dims. With contracted labels and rows or
//!    columns: `Transpose → Reshape [batch.., m, k]` times `[batch.., k, n]` by MatMul
//!    (batch dims broadcast), reshaped back; with only batch dims, or no contracted label,
//!    a broadcasting Mul (then ReduceSum over the contracted dims);
//! 4. the last operand transposed to the output's order.
//!
//! Constant operands fold at import (a weight's transpose is done once). The equation's
//! grammar and broadcasting are in [`parse`].

mod parse;

use std::collections::BTreeSet;

use arenac_proto::NodeProto;

use super::{Emitter, input, int_attr, output, unsupported};
use crate::error::OpError;
use crate::ops::ctx::NodeCtx;
use parse::{Equation, Label};

/// One operand while the expansion runs: its value name, one label per dim, its shape.
#[derive(Clone, Debug)]
struct Operand {
    name: String,
    labels: Vec<Label>,
    shape: Vec<usize>,
}

/// Expands one Einsum node.
pub(super) fn expand(ctx: &NodeCtx<'_>, node: &NodeProto, e: &mut Emitter) -> Result<(), OpError> {
    let n = ctx.input_count();
    if n == 0 {
        return Err(unsupported("Einsum needs at least one input"));
    }
    let mut ops = Vec::with_capacity(n);
    for i in 0..n {
        let (name, ty) =
            input(ctx, node, i).ok_or_else(|| unsupported(format!("input {i} is missing")))?;
        ops.push((name, ty));
    }
    let dtype = ops[0].1.dtype;
    if let Some((_, t)) = ops.iter().find(|(_, t)| t.dtype != dtype) {
        return Err(unsupported(format!(
            "the inputs must share one dtype (got {dtype} and {})",
            t.dtype
        )));
    }
    let equation = ctx.attr_string("equation", "")?;
    let shapes: Vec<&[usize]> = ops.iter().map(|(_, t)| t.shape.as_slice()).collect();
    let eq = parse::parse(&equation, &shapes)?;
    let out = output(node, 0).ok_or_else(|| unsupported("the output is missing"))?;
    let ops: Vec<Operand> = ops
        .iter()
        .zip(&eq.inputs)
        .map(|((name, ty), labels)| Operand {
            name: name.to_string(),
            labels: labels.clone(),
            shape: ty.shape.clone(),
        })
        .collect();
    let result = lower(e, &eq, ops)?;
    finish(e, result, &eq.output, out);
    Ok(())
}

/// Steps 1 to 3: the operands reduced to one whose labels are the output's (in any order).
fn lower(e: &mut Emitter, eq: &Equation, ops: Vec<Operand>) -> Result<Operand, OpError> {
    let mut ops: Vec<Operand> = ops.into_iter().map(|op| diagonals(e, op)).collect();
    loop {
        sum_unshared(e, &mut ops, &eq.output);
        if ops.len() < 2 {
            break;
        }
        let a = ops.remove(0);
        let b = ops.remove(0);
        let later: BTreeSet<Label> = ops
            .iter()
            .flat_map(|o| o.labels.iter().copied())
            .chain(eq.output.iter().copied())
            .collect();
        let c = contract(e, a, b, &later);
        ops.insert(0, c);
    }
    ops.pop()
        .ok_or_else(|| unsupported("Einsum needs at least one input"))
}

/// Step 1: every label repeated in `op` replaced by its diagonal (the label once, last).
fn diagonals(e: &mut Emitter, mut op: Operand) -> Operand {
    while let Some(l) = op
        .labels
        .iter()
        .copied()
        .find(|l| op.labels.iter().filter(|m| *m == l).count() > 1)
    {
        let (rep, rest): (Vec<usize>, Vec<usize>) =
            (0..op.labels.len()).partition(|&i| op.labels[i] == l);
        let d = op.shape[rep[0]];
        let k = rep.len() as u32;
        let perm: Vec<usize> = rest.iter().chain(&rep).copied().collect();
        let moved = transpose(e, &op.name, &perm);
        let flat = d.saturating_pow(k);
        let mut shape: Vec<usize> = rest.iter().map(|&i| op.shape[i]).collect();
        shape.push(flat);
        let r = e.reshape(&moved, &shape, None);
        // Element (j, j, .., j) of the flattened `d^k` dim is at j * (1 + d + .. + d^(k-1)).
        let step = if d > 1 { (flat - 1) / (d - 1) } else { 1 };
        let axis = shape.len() as i64 - 1;
        let name = e.slice(&r, axis, 0, flat as i64, step as i64);
        shape.pop();
        shape.push(d);
        let mut labels: Vec<Label> = rest.iter().map(|&i| op.labels[i]).collect();
        labels.push(l);
        op = Operand {
            name,
            labels,
            shape,
        };
    }
    op
}

/// Step 2: in each operand, the labels no other operand and not the output uses are summed.
fn sum_unshared(e: &mut Emitter, ops: &mut [Operand], output: &[Label]) {
    for i in 0..ops.len() {
        let used_elsewhere = |l: &Label| {
            output.contains(l)
                || ops
                    .iter()
                    .enumerate()
                    .any(|(j, o)| j != i && o.labels.contains(l))
        };
        let axes: Vec<usize> = (0..ops[i].labels.len())
            .filter(|&a| !used_elsewhere(&ops[i].labels[a]))
            .collect();
        if !axes.is_empty() {
            ops[i] = reduce_sum(e, &ops[i], &axes, false);
        }
    }
}

/// `ReduceSum` of `op` over `axes`; with `keep` the dims stay (size 1).
fn reduce_sum(e: &mut Emitter, op: &Operand, axes: &[usize], keep: bool) -> Operand {
    let a = e.ints(&axes.iter().map(|&x| x as i64).collect::<Vec<_>>());
    let name = e.op(
        "ReduceSum",
        &[&op.name, &a],
        vec![int_attr("keepdims", i64::from(keep))],
    );
    let mut labels = Vec::new();
    let mut shape = Vec::new();
    for (i, (&l, &d)) in op.labels.iter().zip(&op.shape).enumerate() {
        if !axes.contains(&i) {
            labels.push(l);
            shape.push(d);
        } else if keep {
            labels.push(l);
            shape.push(1);
        }
    }
    Operand {
        name,
        labels,
        shape,
    }
}

/// `Transpose(x) {perm}`, or `x` itself for the identity permutation.
fn transpose(e: &mut Emitter, x: &str, perm: &[usize]) -> String {
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return x.to_string();
    }
    let p: Vec<i64> = perm.iter().map(|&x| x as i64).collect();
    e.transpose(x, &p, None)
}

/// `op` with its dims in the order of `labels` (a permutation of its labels), and the shape.
fn arrange(e: &mut Emitter, op: &Operand, labels: &[Label]) -> (String, Vec<usize>) {
    let perm: Vec<usize> = labels
        .iter()
        .filter_map(|l| op.labels.iter().position(|m| m == l))
        .collect();
    let shape = perm.iter().map(|&i| op.shape[i]).collect();
    (transpose(e, &op.name, &perm), shape)
}

/// `Reshape(x, shape)` unless `x` has that shape already.
fn reshape(e: &mut Emitter, x: &str, from: &[usize], to: &[usize]) -> String {
    if from == to {
        return x.to_string();
    }
    e.reshape(x, to, None)
}

/// Step 3: one operand from `a` and `b`; `later` are the labels the output or the remaining
/// operands use.
fn contract(e: &mut Emitter, mut a: Operand, mut b: Operand, later: &BTreeSet<Label>) -> Operand {
    let in_b = |l: &Label| b.labels.contains(l);
    let batch: Vec<Label> = a
        .labels
        .iter()
        .copied()
        .filter(|l| in_b(l) && later.contains(l))
        .collect();
    let sum: Vec<Label> = a
        .labels
        .iter()
        .copied()
        .filter(|l| in_b(l) && !later.contains(l))
        .collect();
    let rows: Vec<Label> = a.labels.iter().copied().filter(|l| !in_b(l)).collect();
    let cols: Vec<Label> = b
        .labels
        .iter()
        .copied()
        .filter(|l| !a.labels.contains(l))
        .collect();
    // A summed label of size 1 on one side only (broadcast): sum the other side first.
    let size = |o: &Operand, l: &Label| {
        o.labels
            .iter()
            .position(|m| m == l)
            .map_or(1, |i| o.shape[i])
    };
    let pos = |o: &Operand, l: &Label| o.labels.iter().position(|m| m == l);
    let a_sum: Vec<usize> = sum
        .iter()
        .filter(|l| size(&a, l) != 1 && size(&b, l) == 1)
        .filter_map(|l| pos(&a, l))
        .collect();
    if !a_sum.is_empty() {
        a = reduce_sum(e, &a, &a_sum, true);
    }
    let b_sum: Vec<usize> = sum
        .iter()
        .filter(|l| size(&b, l) != 1 && size(&a, l) == 1)
        .filter_map(|l| pos(&b, l))
        .collect();
    if !b_sum.is_empty() {
        b = reduce_sum(e, &b, &b_sum, true);
    }
    let dims = |o: &Operand, ls: &[Label]| ls.iter().map(|l| size(o, l)).collect::<Vec<_>>();
    let prod = |v: &[usize]| v.iter().product::<usize>();
    let (a_batch, b_batch) = (dims(&a, &batch), dims(&b, &batch));
    let out_batch: Vec<usize> = a_batch
        .iter()
        .zip(&b_batch)
        .map(|(&x, &y)| if x == 1 { y } else { x })
        .collect();
    let (row_dims, col_dims, sum_dims) = (dims(&a, &rows), dims(&b, &cols), dims(&a, &sum));
    let labels: Vec<Label> = batch.iter().chain(&rows).chain(&cols).copied().collect();
    let shape: Vec<usize> = out_batch
        .iter()
        .chain(&row_dims)
        .chain(&col_dims)
        .copied()
        .collect();

    if sum.is_empty() || (prod(&row_dims) == 1 && prod(&col_dims) == 1) {
        // Broadcasting Mul over [batch, rows, cols, sum], then the sum.
        let a_order: Vec<Label> = batch.iter().chain(&rows).chain(&sum).copied().collect();
        let (an, ashape) = arrange(e, &a, &a_order);
        let b_order: Vec<Label> = batch.iter().chain(&cols).chain(&sum).copied().collect();
        let (bn, bshape) = arrange(e, &b, &b_order);
        let ones = |k: usize| std::iter::repeat_n(1, k);
        let a_to: Vec<usize> = a_batch
            .iter()
            .chain(&row_dims)
            .copied()
            .chain(ones(cols.len()))
            .chain(dims(&a, &sum))
            .collect();
        let b_to: Vec<usize> = b_batch
            .iter()
            .copied()
            .chain(ones(rows.len()))
            .chain(col_dims.iter().copied())
            .chain(dims(&b, &sum))
            .collect();
        let ar = reshape(e, &an, &ashape, &a_to);
        let br = reshape(e, &bn, &bshape, &b_to);
        let m = e.op("Mul", &[&ar, &br], vec![]);
        let mut full = Operand {
            name: m,
            labels: labels.iter().chain(&sum).copied().collect(),
            shape: shape.iter().copied().chain(sum_dims).collect(),
        };
        if !sum.is_empty() {
            let axes: Vec<usize> = (labels.len()..full.labels.len()).collect();
            full = reduce_sum(e, &full, &axes, false);
        }
        return full;
    }

    // MatMul: [batch.., m, k] x [batch.., k, n].
    let a_order: Vec<Label> = batch.iter().chain(&rows).chain(&sum).copied().collect();
    let (an, ashape) = arrange(e, &a, &a_order);
    let b_order: Vec<Label> = batch.iter().chain(&sum).chain(&cols).copied().collect();
    let (bn, bshape) = arrange(e, &b, &b_order);
    let (m, k, n) = (prod(&row_dims), prod(&sum_dims), prod(&col_dims));
    let a_to: Vec<usize> = a_batch.iter().copied().chain([m, k]).collect();
    let b_to: Vec<usize> = b_batch.iter().copied().chain([k, n]).collect();
    let ar = reshape(e, &an, &ashape, &a_to);
    let br = reshape(e, &bn, &bshape, &b_to);
    let mm = e.op("MatMul", &[&ar, &br], vec![]);
    let mm_shape: Vec<usize> = out_batch.iter().copied().chain([m, n]).collect();
    let name = reshape(e, &mm, &mm_shape, &shape);
    Operand {
        name,
        labels,
        shape,
    }
}

/// Step 4: `op` (whose labels are the output's) transposed to the output's order and written
/// to `out` (the last node's output renamed, or an Identity when no node was needed).
fn finish(e: &mut Emitter, op: Operand, output: &[Label], out: &str) {
    let (name, _) = arrange(e, &op, output);
    match e.nodes.last_mut() {
        Some(last) if last.output.first().is_some_and(|o| *o == name) => {
            last.output[0] = out.to_string();
        }
        _ => {
            e.op_to("Identity", &[&name], vec![], out);
        }
    }
}
