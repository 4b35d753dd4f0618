//! Resize with nearest and linear modes.
//!
//! (skeleton: converters, inference and reference evaluation to be filled in)

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::util::wrong_family;
use crate::ops::{Op, OpDef};

/// Resize interpolation mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeMode {
    /// Nearest neighbour.
    Nearest,
    /// (Multi-)linear.
    Linear,
}

/// Resize attributes, resolved to a static output shape.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizeAttrs {
    /// Mode.
    pub mode: ResizeMode,
    /// ONNX `coordinate_transformation_mode` (e.g. "half_pixel", "asymmetric").
    pub coordinate_transformation: String,
    /// ONNX `nearest_mode` (e.g. "round_prefer_floor", "floor").
    pub nearest_mode: String,
    /// Scale per dim (output / input as given or derived from sizes).
    pub scales: Vec<f32>,
    /// Output shape.
    pub output_shape: Vec<usize>,
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
    Err(wrong_family(op, "resize"))
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let _ = inputs;
    Err(wrong_family(op, "resize"))
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    let _ = op;
    Vec::new()
}
