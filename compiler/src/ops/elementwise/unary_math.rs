//! Float unary math and activations carried by [`super::UnaryOp::Math`]: rounding (Floor,
//! Ceil, Round half to even), Sign, trigonometric and hyperbolic functions and their inverses,
//! the exponential-linear family (Elu, Selu, Celu), Softplus, Softsign, ThresholdedRelu,
//! Shrink, Mish, Swish, and the float predicates IsNaN and IsInf (bool output).
//!
//! Specs: <https://onnx.ai/onnx/operators/> (each op's page). Opsets from each op's first
//! version up to [`MAX_OPSET`]: later versions only widened the type lists.
//!
//! The reference evaluation is in `f64` (see [`eval_f64`]); Sign also takes integers.

use crate::error::OpError;
use crate::ops::ctx::NodeCtx;
use crate::ops::util::fmt_f32;
use crate::ops::{MAX_OPSET, Op, OpDef};

use super::UnaryOp;

/// One float unary math op (with its attributes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MathOp {
    /// floor(x)
    Floor,
    /// ceil(x)
    Ceil,
    /// x rounded to the nearest integer, halves to even.
    Round,
    /// -1, 0 or 1 by the sign of x (NaN stays NaN).
    Sign,
    /// sin(x)
    Sin,
    /// cos(x)
    Cos,
    /// tan(x)
    Tan,
    /// asin(x)
    Asin,
    /// acos(x)
    Acos,
    /// atan(x)
    Atan,
    /// sinh(x)
    Sinh,
    /// cosh(x)
    Cosh,
    /// asinh(x)
    Asinh,
    /// acosh(x)
    Acosh,
    /// atanh(x)
    Atanh,
    /// x < 0 ? alpha (exp(x) - 1) : x
    Elu {
        /// Scale of the negative part.
        alpha: f32,
    },
    /// x <= 0 ? gamma alpha (exp(x) - 1) : gamma x
    Selu {
        /// Scale of the negative part.
        alpha: f32,
        /// Overall scale.
        gamma: f32,
    },
    /// max(0, x) + min(0, alpha (exp(x / alpha) - 1))
    Celu {
        /// Scale (non-zero).
        alpha: f32,
    },
    /// ln(1 + exp(x))
    Softplus,
    /// x / (1 + |x|)
    Softsign,
    /// x > alpha ? x : 0
    ThresholdedRelu {
        /// Threshold.
        alpha: f32,
    },
    /// x < -lambd ? x + bias : x > lambd ? x - bias : 0
    Shrink {
        /// Shift toward zero.
        bias: f32,
        /// Half width of the zeroed band.
        lambd: f32,
    },
    /// x tanh(softplus(x))
    Mish,
    /// x sigmoid(alpha x)
    Swish {
        /// Slope inside the sigmoid.
        alpha: f32,
    },
    /// x is NaN (bool output).
    IsNaN,
    /// x is +inf (when `pos`) or -inf (when `neg`) (bool output).
    IsInf {
        /// ONNX `detect_positive`.
        pos: bool,
        /// ONNX `detect_negative`.
        neg: bool,
    },
}

const fn def(op_type: &'static str, since: i64, convert: Convert) -> OpDef {
    OpDef {
        op_type,
        since,
        until: MAX_OPSET,
        convert,
    }
}

type Convert = fn(&mut NodeCtx<'_>) -> Result<Op, OpError>;

/// Converters of these ops.
pub const DEFS: &[OpDef] = &[
    def("Floor", 7, |c| math(c, MathOp::Floor)),
    def("Ceil", 7, |c| math(c, MathOp::Ceil)),
    def("Round", 11, |c| math(c, MathOp::Round)),
    def("Sign", 9, |c| math(c, MathOp::Sign)),
    def("Sin", 7, |c| math(c, MathOp::Sin)),
    def("Cos", 7, |c| math(c, MathOp::Cos)),
    def("Tan", 7, |c| math(c, MathOp::Tan)),
    def("Asin", 7, |c| math(c, MathOp::Asin)),
    def("Acos", 7, |c| math(c, MathOp::Acos)),
    def("Atan", 7, |c| math(c, MathOp::Atan)),
    def("Sinh", 9, |c| math(c, MathOp::Sinh)),
    def("Cosh", 9, |c| math(c, MathOp::Cosh)),
    def("Asinh", 9, |c| math(c, MathOp::Asinh)),
    def("Acosh", 9, |c| math(c, MathOp::Acosh)),
    def("Atanh", 9, |c| math(c, MathOp::Atanh)),
    def("Elu", 7, convert_elu),
    def("Selu", 7, convert_selu),
    def("Celu", 12, convert_celu),
    def("Softplus", 7, |c| math(c, MathOp::Softplus)),
    def("Softsign", 7, |c| math(c, MathOp::Softsign)),
    def("ThresholdedRelu", 10, convert_thresholded_relu),
    def("Shrink", 9, convert_shrink),
    def("Mish", 18, |c| math(c, MathOp::Mish)),
    def("Swish", 24, convert_swish),
    def("IsNaN", 9, |c| math(c, MathOp::IsNaN)),
    def("IsInf", 10, convert_is_inf),
];

fn math(ctx: &mut NodeCtx<'_>, op: MathOp) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    Ok(Op::Unary(UnaryOp::Math(op)))
}

fn convert_elu(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let alpha = ctx.attr_float("alpha", 1.0)?;
    math(ctx, MathOp::Elu { alpha })
}

fn convert_selu(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let alpha = ctx.attr_float("alpha", 1.673_263_2)?;
    let gamma = ctx.attr_float("gamma", 1.050_701)?;
    math(ctx, MathOp::Selu { alpha, gamma })
}

fn convert_celu(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let alpha = ctx.attr_float("alpha", 1.0)?;
    if alpha == 0.0 || !alpha.is_finite() {
        return Err(OpError::attr(
            "alpha",
            format!("{alpha} must be finite and non-zero"),
        ));
    }
    math(ctx, MathOp::Celu { alpha })
}

fn convert_thresholded_relu(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let alpha = ctx.attr_float("alpha", 1.0)?;
    math(ctx, MathOp::ThresholdedRelu { alpha })
}

fn convert_shrink(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let bias = ctx.attr_float("bias", 0.0)?;
    let lambd = ctx.attr_float("lambd", 0.5)?;
    math(ctx, MathOp::Shrink { bias, lambd })
}

fn convert_swish(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let alpha = ctx.attr_float("alpha", 1.0)?;
    math(ctx, MathOp::Swish { alpha })
}

fn flag(ctx: &NodeCtx<'_>, name: &str) -> Result<bool, OpError> {
    match ctx.attr_int(name, 1)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(OpError::attr(name, format!("{v} is neither 0 nor 1"))),
    }
}

fn convert_is_inf(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let pos = flag(ctx, "detect_positive")?;
    let neg = flag(ctx, "detect_negative")?;
    math(ctx, MathOp::IsInf { pos, neg })
}

impl MathOp {
    /// The ONNX op type.
    pub fn name(self) -> &'static str {
        match self {
            MathOp::Floor => "Floor",
            MathOp::Ceil => "Ceil",
            MathOp::Round => "Round",
            MathOp::Sign => "Sign",
            MathOp::Sin => "Sin",
            MathOp::Cos => "Cos",
            MathOp::Tan => "Tan",
            MathOp::Asin => "Asin",
            MathOp::Acos => "Acos",
            MathOp::Atan => "Atan",
            MathOp::Sinh => "Sinh",
            MathOp::Cosh => "Cosh",
            MathOp::Asinh => "Asinh",
            MathOp::Acosh => "Acosh",
            MathOp::Atanh => "Atanh",
            MathOp::Elu { .. } => "Elu",
            MathOp::Selu { .. } => "Selu",
            MathOp::Celu { .. } => "Celu",
            MathOp::Softplus => "Softplus",
            MathOp::Softsign => "Softsign",
            MathOp::ThresholdedRelu { .. } => "ThresholdedRelu",
            MathOp::Shrink { .. } => "Shrink",
            MathOp::Mish => "Mish",
            MathOp::Swish { .. } => "Swish",
            MathOp::IsNaN => "IsNaN",
            MathOp::IsInf { .. } => "IsInf",
        }
    }

    /// Whether the output is bool (IsNaN, IsInf) rather than the input's dtype.
    pub fn is_predicate(self) -> bool {
        matches!(self, MathOp::IsNaN | MathOp::IsInf { .. })
    }

    /// Whether integer inputs are accepted (Sign only; every op takes floats).
    pub fn takes_integers(self) -> bool {
        self == MathOp::Sign
    }

    /// Whether the op is exact in any float precision (rounding, Sign, the predicates): these
    /// have kernels on f64 too.
    pub fn is_exact(self) -> bool {
        matches!(
            self,
            MathOp::Floor
                | MathOp::Ceil
                | MathOp::Round
                | MathOp::Sign
                | MathOp::IsNaN
                | MathOp::IsInf { .. }
        )
    }

    /// Attributes for the printer.
    pub fn attrs(self) -> Vec<(&'static str, String)> {
        match self {
            MathOp::Elu { alpha }
            | MathOp::Celu { alpha }
            | MathOp::ThresholdedRelu { alpha }
            | MathOp::Swish { alpha } => vec![("alpha", fmt_f32(alpha))],
            MathOp::Selu { alpha, gamma } => {
                vec![("alpha", fmt_f32(alpha)), ("gamma", fmt_f32(gamma))]
            }
            MathOp::Shrink { bias, lambd } => {
                vec![("bias", fmt_f32(bias)), ("lambd", fmt_f32(lambd))]
            }
            MathOp::IsInf { pos, neg } => vec![
                ("detect_positive", u8::from(pos).to_string()),
                ("detect_negative", u8::from(neg).to_string()),
            ],
            _ => Vec::new(),
        }
    }
}

/// `ln(1 + exp(x))` without overflow: `max(x, 0) + ln_1p(exp(-|x|))`.
fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// Sign keeping NaN and signed zeros (Rust's `signum` maps ±0 to ±1).
fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

/// The op on one value in `f64` (a predicate gives 1.0 or 0.0).
pub fn eval_f64(op: MathOp, x: f64) -> f64 {
    let truth = |b: bool| if b { 1.0 } else { 0.0 };
    match op {
        MathOp::Floor => x.floor(),
        MathOp::Ceil => x.ceil(),
        MathOp::Round => x.round_ties_even(),
        MathOp::Sign => sign(x),
        MathOp::Sin => x.sin(),
        MathOp::Cos => x.cos(),
        MathOp::Tan => x.tan(),
        MathOp::Asin => x.asin(),
        MathOp::Acos => x.acos(),
        MathOp::Atan => x.atan(),
        MathOp::Sinh => x.sinh(),
        MathOp::Cosh => x.cosh(),
        MathOp::Asinh => x.asinh(),
        MathOp::Acosh => x.acosh(),
        MathOp::Atanh => x.atanh(),
        MathOp::Elu { alpha } => {
            if x < 0.0 {
                f64::from(alpha) * x.exp_m1()
            } else {
                x
            }
        }
        MathOp::Selu { alpha, gamma } => {
            let (a, g) = (f64::from(alpha), f64::from(gamma));
            if x <= 0.0 { g * a * x.exp_m1() } else { g * x }
        }
        MathOp::Celu { alpha } => {
            let a = f64::from(alpha);
            if x.is_nan() {
                x
            } else {
                x.max(0.0) + (a * (x / a).exp_m1()).min(0.0)
            }
        }
        MathOp::Softplus => softplus(x),
        MathOp::Softsign => x / (1.0 + x.abs()),
        MathOp::ThresholdedRelu { alpha } => {
            if x > f64::from(alpha) {
                x
            } else {
                0.0
            }
        }
        MathOp::Shrink { bias, lambd } => {
            let (b, l) = (f64::from(bias), f64::from(lambd));
            if x < -l {
                x + b
            } else if x > l {
                x - b
            } else {
                0.0
            }
        }
        MathOp::Mish => x * softplus(x).tanh(),
        MathOp::Swish { alpha } => x / (1.0 + (-f64::from(alpha) * x).exp()),
        MathOp::IsNaN => truth(x.is_nan()),
        MathOp::IsInf { pos, neg } => {
            truth((pos && x == f64::INFINITY) || (neg && x == f64::NEG_INFINITY))
        }
    }
}

/// Sign of an integer (`unsigned`: u64 held in the i64 domain).
pub fn sign_i64(x: i64, unsigned: bool) -> i64 {
    if unsigned {
        i64::from(x != 0)
    } else {
        x.signum()
    }
}
