//! Constant indices checked at compile time: an index operand known at import (an initializer,
//! a folded value, a frozen input) of Gather, GatherElements, GatherND, ScatterElements,
//! ScatterND — or ReverseSequence's lengths — that is out of range is an error naming the node,
//! not a clamped read at run time ([`OpError::OutOfRange`]). Run-time values are checked by the
//! kernels (`codegen::fault`).

use super::index::MoveOp;
use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::Op;

/// Checks the constant index operands of `op`: `inputs` are the node's data input types,
/// `values[i]` the value of input `i` when known at compile time.
pub fn check_constant_indices(
    op: &Op,
    inputs: &[TensorType],
    values: &[Option<&Tensor>],
) -> Result<(), OpError> {
    let (Some(data), Some(Some(idx))) = (inputs.first(), values.get(1)) else {
        return Ok(());
    };
    let dim = |axis: usize| data.shape.get(axis).copied().unwrap_or(0);
    let along = |axis: usize| -> Result<(), OpError> {
        let d = dim(axis);
        let bad = idx
            .to_i64_vec()
            .into_iter()
            .find(|&v| v < -(d as i64) || v >= d as i64);
        bad.map_or(Ok(()), |v| Err(OpError::index(1, v, d)))
    };
    match op {
        Op::Gather { axis }
        | Op::Move(MoveOp::GatherElements { axis } | MoveOp::ScatterElements { axis, .. }) => {
            along(*axis)
        }
        Op::Move(MoveOp::GatherNd { batch_dims: b }) => rows(idx, |j| dim(b + j)),
        Op::Move(MoveOp::ScatterNd { .. }) => rows(idx, dim),
        Op::Move(MoveOp::ReverseSequence { time_axis, .. }) => {
            let steps = dim(*time_axis) as i64;
            match idx
                .to_i64_vec()
                .into_iter()
                .find(|&l| !(0..=steps).contains(&l))
            {
                None => Ok(()),
                Some(l) => Err(OpError::OutOfRange {
                    input: 1,
                    what: "sequence length",
                    value: l,
                    lo: 0,
                    hi: steps,
                }),
            }
        }
        _ => Ok(()),
    }
}

/// GatherND/ScatterND index rows: entry `j` of each row (the last dim of `idx`) indexes a dim
/// of `dim_of(j)`.
fn rows(idx: &Tensor, dim_of: impl Fn(usize) -> usize) -> Result<(), OpError> {
    let k = idx.shape().last().copied().unwrap_or(0);
    if k == 0 {
        return Ok(());
    }
    for row in idx.to_i64_vec().chunks(k) {
        for (j, &v) in row.iter().enumerate() {
            let d = dim_of(j);
            if v < -(d as i64) || v >= d as i64 {
                return Err(OpError::index(1, v, d));
            }
        }
    }
    Ok(())
}
