//! Conv and ConvTranspose (NCHW, any number of spatial dims, groups, dilation, padding).
//!
//! (skeleton: converters, inference and reference evaluation to be filled in)

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::util::wrong_family;
use crate::ops::{Op, OpDef};

/// Conv attributes, resolved: `auto_pad` is already turned into explicit `pads`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvAttrs {
    /// Spatial kernel size.
    pub kernel: Vec<usize>,
    /// Stride per spatial dim.
    pub strides: Vec<usize>,
    /// Dilation per spatial dim.
    pub dilations: Vec<usize>,
    /// `[begin_0.., end_0..]` per spatial dim.
    pub pads: Vec<usize>,
    /// Channel groups.
    pub group: usize,
}

/// ConvTranspose attributes, resolved (`output_shape`/`auto_pad` turned into `pads`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvTransposeAttrs {
    /// Spatial kernel size.
    pub kernel: Vec<usize>,
    /// Stride per spatial dim.
    pub strides: Vec<usize>,
    /// Dilation per spatial dim.
    pub dilations: Vec<usize>,
    /// `[begin_0.., end_0..]` per spatial dim.
    pub pads: Vec<usize>,
    /// Extra size added at the end of each spatial output dim.
    pub output_padding: Vec<usize>,
    /// Channel groups.
    pub group: usize,
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
    Err(wrong_family(op, "conv"))
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let _ = inputs;
    Err(wrong_family(op, "conv"))
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    let _ = op;
    Vec::new()
}
