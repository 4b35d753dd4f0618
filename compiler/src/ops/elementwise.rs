//! Elementwise ops: unary math, binary arithmetic and comparison with numpy broadcasting,
//! logical (bool) and bitwise (integer) ops and BitShift, variadic Sum/Mean/Max/Min, Where,
//! Cast and CastLike.
//!
//! Floats are evaluated in `f64` and rounded to the element type; integers and bools in `i64`
//! (with `u64` compared and divided as unsigned). Integer arithmetic wraps like the element
//! type would; integer division or remainder by zero is an error.

mod erf;
mod eval;
mod logical;
#[cfg(test)]
mod tests;
mod unary_math;

pub(crate) use eval::int_pow;
pub(crate) use eval::unary_f64;

use crate::error::OpError;
use crate::ir::lowp::{CastMode, E8m0Round};
use crate::ir::types::{DType, Shape, TensorType, checked_numel};
use crate::ops::ctx::NodeCtx;
use crate::ops::util::{broadcast_shapes, expect_arity, fmt_f32, wrong_family};
use crate::ops::{MAX_OPSET, Op, OpDef};

pub use erf::erf;
pub use eval::eval;
pub use unary_math::{DEFS as MATH_DEFS, MathOp, eval_f64 as math_f64, sign_i64};

/// One-input elementwise ops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// Logical not (bool).
    Not,
    /// Bitwise not (integers).
    BitwiseNot,
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
    /// Float math and activations (Floor, Sin, Elu, Softplus, IsNaN...).
    Math(MathOp),
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
    /// Remainder; `fmod` follows C fmod (sign of a), else the sign of b (Python; on floats
    /// from opset 28).
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
    /// a >= b (bool output)
    GreaterOrEqual,
    /// a <= b (bool output)
    LessOrEqual,
    /// Logical and (bool)
    And,
    /// Logical or (bool)
    Or,
    /// Logical xor (bool)
    Xor,
    /// Bitwise and (integers)
    BitwiseAnd,
    /// Bitwise or (integers)
    BitwiseOr,
    /// Bitwise xor (integers)
    BitwiseXor,
    /// a << b or a >> b (integers; logical for unsigned, arithmetic for signed). A shift
    /// outside `0..bits` gives 0 (a negative `a` shifted right: -1), like onnx's reference.
    BitShift {
        /// ONNX `direction="LEFT"`.
        left: bool,
    },
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

const fn def(op_type: &'static str, since: i64, convert: Convert) -> OpDef {
    OpDef {
        op_type,
        since,
        until: MAX_OPSET,
        convert,
    }
}

type Convert = fn(&mut NodeCtx<'_>) -> Result<Op, OpError>;

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    def("Relu", 7, |c| unary(c, UnaryOp::Relu)),
    def("LeakyRelu", 7, convert_leaky_relu),
    def("Sigmoid", 7, |c| unary(c, UnaryOp::Sigmoid)),
    def("Tanh", 7, |c| unary(c, UnaryOp::Tanh)),
    def("Erf", 9, |c| unary(c, UnaryOp::Erf)),
    def("Gelu", 20, convert_gelu),
    def("HardSigmoid", 7, convert_hard_sigmoid),
    def("HardSwish", 14, |c| unary(c, UnaryOp::HardSwish)),
    def("Clip", 7, convert_clip),
    def("Sqrt", 7, |c| unary(c, UnaryOp::Sqrt)),
    def("Reciprocal", 7, |c| unary(c, UnaryOp::Reciprocal)),
    def("Exp", 7, |c| unary(c, UnaryOp::Exp)),
    def("Log", 7, |c| unary(c, UnaryOp::Log)),
    def("Neg", 7, |c| unary(c, UnaryOp::Neg)),
    def("Abs", 7, |c| unary(c, UnaryOp::Abs)),
    def("Add", 7, |c| binary(c, BinaryOp::Add)),
    def("Sub", 7, |c| binary(c, BinaryOp::Sub)),
    def("Mul", 7, |c| binary(c, BinaryOp::Mul)),
    def("Div", 7, |c| binary(c, BinaryOp::Div)),
    def("Pow", 7, |c| binary(c, BinaryOp::Pow)),
    def("Mod", 10, convert_mod),
    def("PRelu", 7, |c| binary(c, BinaryOp::PRelu)),
    def("Equal", 7, |c| binary(c, BinaryOp::Equal)),
    def("Less", 7, |c| binary(c, BinaryOp::Less)),
    def("Greater", 7, |c| binary(c, BinaryOp::Greater)),
    def("GreaterOrEqual", 12, |c| {
        binary(c, BinaryOp::GreaterOrEqual)
    }),
    def("LessOrEqual", 12, |c| binary(c, BinaryOp::LessOrEqual)),
    def("And", 7, |c| binary(c, BinaryOp::And)),
    def("Or", 7, |c| binary(c, BinaryOp::Or)),
    def("Xor", 7, |c| binary(c, BinaryOp::Xor)),
    def("Not", 1, |c| unary(c, UnaryOp::Not)),
    def("BitwiseAnd", 18, |c| binary(c, BinaryOp::BitwiseAnd)),
    def("BitwiseOr", 18, |c| binary(c, BinaryOp::BitwiseOr)),
    def("BitwiseXor", 18, |c| binary(c, BinaryOp::BitwiseXor)),
    def("BitwiseNot", 18, |c| unary(c, UnaryOp::BitwiseNot)),
    def("BitShift", 11, logical::convert_bit_shift),
    def("CastLike", 15, logical::convert_cast_like),
    def("Sum", 7, |c| variadic(c, VariadicOp::Sum)),
    def("Mean", 7, |c| variadic(c, VariadicOp::Mean)),
    def("Max", 7, |c| variadic(c, VariadicOp::Max)),
    def("Min", 7, |c| variadic(c, VariadicOp::Min)),
    def("Where", 9, convert_where),
    def("Cast", 6, convert_cast),
];

fn unary(ctx: &mut NodeCtx<'_>, op: UnaryOp) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    Ok(Op::Unary(op))
}

fn binary(ctx: &mut NodeCtx<'_>, op: BinaryOp) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    Ok(Op::Binary(op))
}

fn variadic(ctx: &mut NodeCtx<'_>, op: VariadicOp) -> Result<Op, OpError> {
    ctx.expect_inputs(1, usize::MAX)?;
    Ok(Op::Variadic(op))
}

fn convert_leaky_relu(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let alpha = ctx.attr_float("alpha", 0.01)?;
    unary(ctx, UnaryOp::LeakyRelu { alpha })
}

fn convert_gelu(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let tanh_approx = match ctx.attr_string("approximate", "none")?.as_str() {
        "none" => false,
        "tanh" => true,
        other => {
            return Err(OpError::attr(
                "approximate",
                format!("'{other}' is neither \"none\" nor \"tanh\""),
            ));
        }
    };
    unary(ctx, UnaryOp::Gelu { tanh_approx })
}

fn convert_hard_sigmoid(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let alpha = ctx.attr_float("alpha", 0.2)?;
    let beta = ctx.attr_float("beta", 0.5)?;
    unary(ctx, UnaryOp::HardSigmoid { alpha, beta })
}

/// Clip-6 has `min`/`max` attributes; Clip-11 on takes them as optional scalar inputs. Bounds
/// known at compile time become attributes ([`UnaryOp::Clip`], the fast path); when either is
/// computed at run time (a log-mel front end clips at `max - 80 dB`), every given bound stays
/// a data input ([`Op::ClipDynamic`]): they decide no shape, so nothing needs their value.
fn convert_clip(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    if ctx.opset < 11 {
        ctx.expect_inputs(1, 1)?;
        let min = ctx.attr_float_opt("min")?.map(f64::from);
        let max = ctx.attr_float_opt("max")?.map(f64::from);
        return Ok(Op::Unary(UnaryOp::Clip { min, max }));
    }
    ctx.expect_inputs(1, 3)?;
    for (i, what) in [(1, "min"), (2, "max")] {
        check_clip_bound(ctx, i, what)?;
    }
    let known = |ctx: &NodeCtx<'_>, i: usize| !ctx.has_input(i) || ctx.is_const(i);
    if !(known(ctx, 1) && known(ctx, 2)) {
        return Ok(Op::ClipDynamic {
            min: ctx.has_input(1),
            max: ctx.has_input(2),
        });
    }
    let bound = |ctx: &mut NodeCtx<'_>, i: usize| -> Result<Option<f64>, OpError> {
        Ok(ctx
            .take_const(i)?
            .and_then(|t| t.scalar_at(0))
            .map(|s| s.as_f64()))
    };
    let min = bound(ctx, 1)?;
    let max = bound(ctx, 2)?;
    Ok(Op::Unary(UnaryOp::Clip { min, max }))
}

/// A given Clip bound must be one element of x's dtype (its shape is known even when its
/// value is not).
fn check_clip_bound(ctx: &NodeCtx<'_>, i: usize, what: &str) -> Result<(), OpError> {
    if !ctx.has_input(i) {
        return Ok(());
    }
    let x = ctx.input_type(0)?;
    let t = ctx.input_type(i)?;
    if t.dtype != x.dtype {
        return Err(OpError::DType {
            input: i,
            dtype: t.dtype,
            expected: format!("{} (the dtype of input 0)", x.dtype),
        });
    }
    if t.numel() != Some(1) {
        return Err(OpError::shape(
            format!("Clip's {what} must be a scalar"),
            &[x.shape.as_slice(), t.shape.as_slice()],
        ));
    }
    Ok(())
}

fn convert_mod(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let fmod = match ctx.attr_int("fmod", 0)? {
        0 => false,
        1 => true,
        v => return Err(OpError::attr("fmod", format!("{v} is neither 0 nor 1"))),
    };
    // Mod-28 defined fmod=0 on floats (floored, sign of the divisor); before, it was an error.
    let dtype = ctx.input_type(0)?.dtype;
    if !fmod && dtype.is_float() && ctx.opset < 28 {
        return Err(OpError::attr(
            "fmod",
            format!("must be 1 for float inputs ({dtype}) before opset 28"),
        ));
    }
    binary(ctx, BinaryOp::Mod { fmod })
}

fn convert_where(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(3, 3)?;
    Ok(Op::Where)
}

fn convert_cast(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let code = ctx
        .attr_int_opt("to")?
        .ok_or_else(|| OpError::attr("to", "required attribute is missing"))?;
    let to = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .ok_or_else(|| {
            OpError::Unsupported(format!(
                "Cast to element type {code} (strings, complex and 6-bit floats are not \
                 supported)"
            ))
        })?;
    let mode = cast_mode(ctx, to)?;
    Ok(Op::Cast { to, mode })
}

/// Cast's and CastLike's `saturate` (opset 19: float8 and E8M0 targets) and `round_mode`
/// (opset 24: E8M0 targets), normalized for `to`.
pub(super) fn cast_mode(ctx: &NodeCtx<'_>, to: DType) -> Result<CastMode, OpError> {
    let saturate = match ctx.attr_int("saturate", 1)? {
        0 => false,
        1 => true,
        v => return Err(OpError::attr("saturate", format!("{v} is neither 0 nor 1"))),
    };
    let round = match ctx.attr_string("round_mode", "up")?.as_str() {
        "up" => E8m0Round::Up,
        "down" => E8m0Round::Down,
        "nearest" => E8m0Round::Nearest,
        other => {
            return Err(OpError::attr(
                "round_mode",
                format!("'{other}' is none of \"up\", \"down\", \"nearest\""),
            ));
        }
    };
    Ok(CastMode { saturate, round }.normalized(to))
}

/// Printed op name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::Unary(u) => match u {
            UnaryOp::Not => "Not",
            UnaryOp::BitwiseNot => "BitwiseNot",
            UnaryOp::Relu => "Relu",
            UnaryOp::LeakyRelu { .. } => "LeakyRelu",
            UnaryOp::Sigmoid => "Sigmoid",
            UnaryOp::Tanh => "Tanh",
            UnaryOp::Erf => "Erf",
            UnaryOp::Gelu { .. } => "Gelu",
            UnaryOp::HardSigmoid { .. } => "HardSigmoid",
            UnaryOp::HardSwish => "HardSwish",
            UnaryOp::Clip { .. } => "Clip",
            UnaryOp::Sqrt => "Sqrt",
            UnaryOp::Reciprocal => "Reciprocal",
            UnaryOp::Exp => "Exp",
            UnaryOp::Log => "Log",
            UnaryOp::Neg => "Neg",
            UnaryOp::Abs => "Abs",
            UnaryOp::Math(m) => m.name(),
        },
        Op::ClipDynamic { .. } => "Clip",
        Op::Binary(b) => match b {
            BinaryOp::Add => "Add",
            BinaryOp::Sub => "Sub",
            BinaryOp::Mul => "Mul",
            BinaryOp::Div => "Div",
            BinaryOp::Pow => "Pow",
            BinaryOp::Mod { .. } => "Mod",
            BinaryOp::PRelu => "PRelu",
            BinaryOp::Equal => "Equal",
            BinaryOp::Less => "Less",
            BinaryOp::Greater => "Greater",
            BinaryOp::GreaterOrEqual => "GreaterOrEqual",
            BinaryOp::LessOrEqual => "LessOrEqual",
            BinaryOp::And => "And",
            BinaryOp::Or => "Or",
            BinaryOp::Xor => "Xor",
            BinaryOp::BitwiseAnd => "BitwiseAnd",
            BinaryOp::BitwiseOr => "BitwiseOr",
            BinaryOp::BitwiseXor => "BitwiseXor",
            BinaryOp::BitShift { .. } => "BitShift",
        },
        Op::Variadic(v) => match v {
            VariadicOp::Sum => "Sum",
            VariadicOp::Mean => "Mean",
            VariadicOp::Max => "Max",
            VariadicOp::Min => "Min",
        },
        Op::Where => "Where",
        Op::Cast { .. } => "Cast",
        _ => "?",
    }
}

/// Which element types an op accepts.
#[derive(Clone, Copy)]
enum Accept {
    /// Floating point only.
    Float,
    /// Floats and signed integers.
    Signed,
    /// Floats and integers.
    Numeric,
    /// Bool only.
    Bool,
    /// Integers only.
    Integer,
}

fn check_dtype(input: usize, dtype: DType, accept: Accept) -> Result<(), OpError> {
    let (ok, expected) = match accept {
        Accept::Float => (dtype.is_float(), "a float type"),
        Accept::Signed => (
            dtype.is_float() || matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64),
            "a float or signed integer type",
        ),
        Accept::Numeric => (dtype != DType::Bool, "a float or integer type"),
        Accept::Bool => (dtype == DType::Bool, "bool"),
        Accept::Integer => (!dtype.is_float() && dtype != DType::Bool, "an integer type"),
    };
    if ok {
        Ok(())
    } else {
        Err(OpError::DType {
            input,
            dtype,
            expected: expected.to_string(),
        })
    }
}

fn same_dtype(inputs: &[TensorType]) -> Result<DType, OpError> {
    let first = inputs.first().ok_or_else(|| OpError::Arity {
        expected: "at least 1".into(),
        actual: 0,
    })?;
    for (i, t) in inputs.iter().enumerate().skip(1) {
        if t.dtype != first.dtype {
            return Err(OpError::DType {
                input: i,
                dtype: t.dtype,
                expected: format!("{} (the dtype of input 0)", first.dtype),
            });
        }
    }
    Ok(first.dtype)
}

/// Numpy broadcast of the inputs' shapes, with an element count that fits `usize`.
fn broadcast(inputs: &[TensorType]) -> Result<Shape, OpError> {
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
    let out = broadcast_shapes(&shapes)?;
    if checked_numel(&out).is_none() {
        return Err(OpError::Overflow(format!(
            "broadcast shape {out:?} has too many elements"
        )));
    }
    Ok(out)
}

fn unary_accept(u: UnaryOp) -> Accept {
    match u {
        UnaryOp::Not => Accept::Bool,
        UnaryOp::BitwiseNot => Accept::Integer,
        UnaryOp::Relu | UnaryOp::Abs | UnaryOp::Clip { .. } => Accept::Numeric,
        UnaryOp::Neg => Accept::Signed,
        UnaryOp::Math(m) if m.takes_integers() => Accept::Numeric,
        UnaryOp::Math(_) => Accept::Float,
        UnaryOp::LeakyRelu { .. }
        | UnaryOp::Sigmoid
        | UnaryOp::Tanh
        | UnaryOp::Erf
        | UnaryOp::Gelu { .. }
        | UnaryOp::HardSigmoid { .. }
        | UnaryOp::HardSwish
        | UnaryOp::Sqrt
        | UnaryOp::Reciprocal
        | UnaryOp::Exp
        | UnaryOp::Log => Accept::Float,
    }
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    match op {
        Op::Unary(u) => {
            expect_arity(inputs, 1)?;
            let x = &inputs[0];
            check_dtype(0, x.dtype, unary_accept(*u))?;
            if matches!(u, UnaryOp::Math(m) if m.is_predicate()) {
                return Ok(vec![TensorType::new(DType::Bool, x.shape.clone())]);
            }
            Ok(vec![x.clone()])
        }
        Op::ClipDynamic { min, max } => {
            expect_arity(inputs, 1 + usize::from(*min) + usize::from(*max))?;
            let x = &inputs[0];
            check_dtype(0, x.dtype, Accept::Numeric)?;
            for (i, t) in inputs.iter().enumerate().skip(1) {
                if t.dtype != x.dtype {
                    return Err(OpError::DType {
                        input: i,
                        dtype: t.dtype,
                        expected: format!("{} (the dtype of input 0)", x.dtype),
                    });
                }
                if t.numel() != Some(1) {
                    return Err(OpError::shape(
                        "Clip's bounds must be scalars",
                        &[&x.shape, &t.shape],
                    ));
                }
            }
            Ok(vec![x.clone()])
        }
        Op::Binary(b) => {
            expect_arity(inputs, 2)?;
            let (a, c) = (&inputs[0], &inputs[1]);
            match b {
                BinaryOp::Pow => {
                    check_dtype(0, a.dtype, Accept::Numeric)?;
                    check_dtype(1, c.dtype, Accept::Numeric)?;
                }
                BinaryOp::Equal => {
                    same_dtype(inputs)?;
                }
                BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
                    check_dtype(0, a.dtype, Accept::Bool)?;
                    same_dtype(inputs)?;
                }
                BinaryOp::BitwiseAnd
                | BinaryOp::BitwiseOr
                | BinaryOp::BitwiseXor
                | BinaryOp::BitShift { .. } => {
                    check_dtype(0, a.dtype, Accept::Integer)?;
                    same_dtype(inputs)?;
                }
                _ => {
                    check_dtype(0, a.dtype, Accept::Numeric)?;
                    same_dtype(inputs)?;
                }
            }
            let shape = broadcast(inputs)?;
            if *b == BinaryOp::PRelu && shape != a.shape {
                return Err(OpError::shape(
                    "PRelu's slope must broadcast to the shape of X",
                    &[&a.shape, &c.shape],
                ));
            }
            let dtype = if b.is_comparison() {
                DType::Bool
            } else {
                a.dtype
            };
            Ok(vec![TensorType::new(dtype, shape)])
        }
        Op::Variadic(v) => {
            if inputs.is_empty() {
                return Err(OpError::Arity {
                    expected: "at least 1".into(),
                    actual: 0,
                });
            }
            let accept = match v {
                VariadicOp::Sum | VariadicOp::Mean => Accept::Float,
                VariadicOp::Max | VariadicOp::Min => Accept::Numeric,
            };
            check_dtype(0, inputs[0].dtype, accept)?;
            let dtype = same_dtype(inputs)?;
            Ok(vec![TensorType::new(dtype, broadcast(inputs)?)])
        }
        Op::Where => {
            expect_arity(inputs, 3)?;
            if inputs[0].dtype != DType::Bool {
                return Err(OpError::DType {
                    input: 0,
                    dtype: inputs[0].dtype,
                    expected: "bool".into(),
                });
            }
            let dtype = inputs[1].dtype;
            if inputs[2].dtype != dtype {
                return Err(OpError::DType {
                    input: 2,
                    dtype: inputs[2].dtype,
                    expected: format!("{dtype} (the dtype of input 1)"),
                });
            }
            Ok(vec![TensorType::new(dtype, broadcast(inputs)?)])
        }
        Op::Cast { to, .. } => {
            expect_arity(inputs, 1)?;
            Ok(vec![TensorType::new(*to, inputs[0].shape.clone())])
        }
        _ => Err(wrong_family(op, "elementwise")),
    }
}

fn fmt_bound(b: Option<f64>) -> String {
    match b {
        // Bounds read from f32 attributes or tensors print as the f32 they were.
        Some(v) if f64::from(v as f32) == v => fmt_f32(v as f32),
        Some(v) => format!("{v:?}"),
        None => "none".to_string(),
    }
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::Unary(UnaryOp::LeakyRelu { alpha }) => vec![("alpha", fmt_f32(*alpha))],
        Op::Unary(UnaryOp::Gelu { tanh_approx }) => vec![(
            "approximate",
            if *tanh_approx { "tanh" } else { "none" }.to_string(),
        )],
        Op::Unary(UnaryOp::HardSigmoid { alpha, beta }) => {
            vec![("alpha", fmt_f32(*alpha)), ("beta", fmt_f32(*beta))]
        }
        Op::Unary(UnaryOp::Clip { min, max }) => {
            vec![("min", fmt_bound(*min)), ("max", fmt_bound(*max))]
        }
        Op::ClipDynamic { min, max } => {
            let input = |given: bool| if given { "input" } else { "none" }.to_string();
            vec![("min", input(*min)), ("max", input(*max))]
        }
        Op::Binary(BinaryOp::Mod { fmod }) => vec![("fmod", u8::from(*fmod).to_string())],
        Op::Unary(UnaryOp::Math(m)) => m.attrs(),
        Op::Cast { to, mode } => {
            let mut a = vec![("to", to.to_string())];
            if *mode != CastMode::DEFAULT {
                a.push(("saturate", u8::from(mode.saturate).to_string()));
            }
            if mode.round != E8m0Round::Up {
                let r = match mode.round {
                    E8m0Round::Up => "up",
                    E8m0Round::Down => "down",
                    E8m0Round::Nearest => "nearest",
                };
                a.push(("round_mode", r.to_string()));
            }
            a
        }
        _ => Vec::new(),
    }
}
