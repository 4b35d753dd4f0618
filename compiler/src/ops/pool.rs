//! Pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.
//!
//! (skeleton: converters, inference and reference evaluation to be filled in)

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::util::wrong_family;
use crate::ops::{Op, OpDef};

/// Pooling attributes, resolved (`auto_pad` turned into `pads`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolAttrs {
    /// Window size per spatial dim.
    pub kernel: Vec<usize>,
    /// Stride per spatial dim.
    pub strides: Vec<usize>,
    /// Dilation per spatial dim.
    pub dilations: Vec<usize>,
    /// `[begin_0.., end_0..]` per spatial dim.
    pub pads: Vec<usize>,
    /// Output size rounds up instead of down.
    pub ceil_mode: bool,
    /// AveragePool: padding counts in the divisor.
    pub count_include_pad: bool,
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
    Err(wrong_family(op, "pool"))
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let _ = inputs;
    Err(wrong_family(op, "pool"))
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    let _ = op;
    Vec::new()
}
