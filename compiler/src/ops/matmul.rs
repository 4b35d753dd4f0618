//! Gemm and MatMul.
//!
//! (skeleton: converters, inference and reference evaluation to be filled in)

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::util::wrong_family;
use crate::ops::{Op, OpDef};

/// Gemm attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmAttrs {
    /// Scale of A*B.
    pub alpha: f32,
    /// Scale of C.
    pub beta: f32,
    /// A is transposed.
    pub trans_a: bool,
    /// B is transposed.
    pub trans_b: bool,
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
    Err(wrong_family(op, "matmul"))
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let _ = inputs;
    Err(wrong_family(op, "matmul"))
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    let _ = op;
    Vec::new()
}
