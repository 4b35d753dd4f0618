//! Elementwise ops: unary math, binary arithmetic and comparison with numpy broadcasting, variadic Sum/Mean/Max/Min, Where, Cast.
//!
//! (skeleton: converters, inference and reference evaluation to be filled in)

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::util::wrong_family;
use crate::ops::{Op, OpDef};

/// One-input elementwise ops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// max(x, 0)
    Relu,
    /// x < 0 ? alpha * x : x
    LeakyRelu {
        /// Slope for negative inputs.
        alpha: f32,
    },
    /// 1 / (1 + exp(-x))
    Sigmoid,
    /// tanh(x)
    Tanh,
    /// erf(x)
    Erf,
    /// x * Phi(x); the tanh approximation when `tanh_approx`.
    Gelu {
        /// ONNX `approximate="tanh"`.
        tanh_approx: bool,
    },
    /// max(0, min(1, alpha * x + beta))
    HardSigmoid {
        /// Slope.
        alpha: f32,
        /// Offset.
        beta: f32,
    },
    /// x * HardSigmoid(x) with alpha 1/6, beta 0.5.
    HardSwish,
    /// min(max(x, min), max); a bound is absent when `None`.
    Clip {
        /// Lower bound.
        min: Option<f64>,
        /// Upper bound.
        max: Option<f64>,
    },
    /// sqrt(x)
    Sqrt,
    /// 1 / x
    Reciprocal,
    /// exp(x)
    Exp,
    /// ln(x)
    Log,
    /// -x
    Neg,
    /// |x|
    Abs,
}

/// Two-input elementwise ops (numpy broadcasting; PRelu broadcasts its slope to X).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// a + b
    Add,
    /// a - b
    Sub,
    /// a * b
    Mul,
    /// a / b (integer division truncates)
    Div,
    /// a ^ b
    Pow,
    /// Remainder; `fmod` follows C fmod (sign of a), else the sign of b (Python).
    Mod {
        /// ONNX `fmod` attribute.
        fmod: bool,
    },
    /// x < 0 ? slope * x : x
    PRelu,
    /// a == b (bool output)
    Equal,
    /// a < b (bool output)
    Less,
    /// a > b (bool output)
    Greater,
}

/// N-input elementwise reductions with broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VariadicOp {
    /// Sum of inputs.
    Sum,
    /// Mean of inputs.
    Mean,
    /// Elementwise max.
    Max,
    /// Elementwise min.
    Min,
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
    Err(wrong_family(op, "elementwise"))
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let _ = inputs;
    Err(wrong_family(op, "elementwise"))
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    let _ = op;
    Vec::new()
}
