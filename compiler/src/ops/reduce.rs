//! Reductions over constant axes: ReduceMean, ReduceSum, ReduceMax, ReduceMin...
//!
//! (skeleton: converters, inference and reference evaluation to be filled in)

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::util::wrong_family;
use crate::ops::{Op, OpDef};

/// Which reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    /// Mean.
    Mean,
    /// Sum.
    Sum,
    /// Max.
    Max,
    /// Min.
    Min,
}

/// Reduction attributes, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceAttrs {
    /// Which reduction.
    pub kind: ReduceKind,
    /// Normalized, sorted axes; empty means no reduction (noop_with_empty_axes).
    pub axes: Vec<usize>,
    /// Keep reduced dims as size 1.
    pub keepdims: bool,
}

/// Converters of this family.
pub const DEFS: &[OpDef] = &[];

/// Printed op name.
pub fn name(op: &Op) -> &'static str {
    let _ = op;
    "?"
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let _ = inputs;
    Err(wrong_family(op, "reduce"))
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let _ = inputs;
    Err(wrong_family(op, "reduce"))
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    let _ = op;
    Vec::new()
}
