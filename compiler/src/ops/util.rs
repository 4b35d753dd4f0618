//! Helpers shared by the op families: numpy broadcasting, index arithmetic, attribute text.

use crate::error::OpError;
use crate::ir::types::{Shape, ShapeDisplay, TensorType, checked_numel, strides};

/// Numpy multidirectional broadcast of several shapes.
pub fn broadcast_shapes(shapes: &[&[usize]]) -> Result<Shape, OpError> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(OpError::shape(
                    format!("dims {} and {d} at axis {} cannot broadcast", *o, off + i),
                    shapes,
                ));
            }
        }
    }
    Ok(out)
}

/// For each flat index of `out_shape`, the flat index into a tensor of shape `in_shape` that
/// broadcasts to it (right-aligned, size-1 dims repeated).
pub fn broadcast_index_map(in_shape: &[usize], out_shape: &[usize]) -> Vec<usize> {
    let n = checked_numel(out_shape).unwrap_or(0);
    let off = out_shape.len() - in_shape.len().min(out_shape.len());
    let in_strides = strides(in_shape);
    // Stride of each output dim in the input (0 where broadcast).
    let bstride: Vec<usize> = (0..out_shape.len())
        .map(|i| {
            if i < off {
                0
            } else {
                let j = i - off;
                if in_shape[j] == 1 { 0 } else { in_strides[j] }
            }
        })
        .collect();
    let mut map = Vec::with_capacity(n);
    let mut idx = vec![0usize; out_shape.len()];
    let mut src = 0usize;
    for _ in 0..n {
        map.push(src);
        // Increment the multi-index like an odometer, updating `src` incrementally.
        for d in (0..out_shape.len()).rev() {
            idx[d] += 1;
            src += bstride[d];
            if idx[d] < out_shape[d] {
                break;
            }
            src -= bstride[d] * idx[d];
            idx[d] = 0;
        }
    }
    map
}

/// Unravels a flat index into a multi-index of `shape`.
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = flat % shape[d];
            flat /= shape[d];
        }
    }
    idx
}

/// Checks an exact input count for ops that take no optional inputs.
pub fn expect_arity(inputs: &[TensorType], n: usize) -> Result<(), OpError> {
    if inputs.len() != n {
        return Err(OpError::Arity {
            expected: n.to_string(),
            actual: inputs.len(),
        });
    }
    Ok(())
}

/// `[1,2,3]` for attribute printing.
pub fn fmt_list<T: std::fmt::Display>(v: &[T]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(","))
}

/// A shape for messages: `[1,3,224,224]`.
pub fn fmt_shape(s: &[usize]) -> String {
    ShapeDisplay(s).to_string()
}

/// Floats print with the shortest representation that round-trips (deterministic).
pub fn fmt_f32(v: f32) -> String {
    format!("{v:?}")
}

/// An error for an `Op` routed to a family that does not own it (a bug in `ops/mod.rs`).
pub fn wrong_family(op: &crate::ops::Op, family: &str) -> OpError {
    OpError::Unsupported(format!("{op:?} is not a {family} op"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast() {
        assert_eq!(
            broadcast_shapes(&[&[2, 1, 3], &[4, 1]]).unwrap(),
            vec![2, 4, 3]
        );
        assert!(broadcast_shapes(&[&[2, 3], &[4]]).is_err());
        assert_eq!(broadcast_shapes(&[&[], &[5]]).unwrap(), vec![5]);
    }

    #[test]
    fn index_map() {
        assert_eq!(broadcast_index_map(&[3], &[2, 3]), vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(
            broadcast_index_map(&[2, 1], &[2, 3]),
            vec![0, 0, 0, 1, 1, 1]
        );
        assert_eq!(broadcast_index_map(&[], &[2]), vec![0, 0]);
        assert_eq!(
            broadcast_index_map(&[1, 2], &[3, 2]),
            vec![0, 1, 0, 1, 0, 1]
        );
    }
}
