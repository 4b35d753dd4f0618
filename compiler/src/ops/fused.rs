//! `FusedElementwise`: a chain (or small DAG) of element-wise ops computed in one pass, made by
//! [`crate::analysis::fuse::fuse_elementwise`]; it has no ONNX op type and no converter.
//!
//! The payload is a straight-line program. Step `k` applies an element-wise op ([`Op::Unary`],
//! [`Op::ClipDynamic`], [`Op::Binary`] or [`Op::Variadic`]) to arguments that are the node's inputs (`x0, x1...`),
//! earlier steps (`t0, t1...`) or scalar constants folded in; the last step is the node's
//! output. Inputs may broadcast; every step's result has the output's shape (the pass only
//! fuses such groups, [`infer`] checks it).
//!
//! The reference evaluation runs the steps one by one through the original ops' own `eval`
//! (each rounding to its dtype as the unfused graph did), so it computes exactly what the
//! unfused nodes compute.

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::util::wrong_family;

/// An argument of one step of a fused program.
#[derive(Clone, Debug, PartialEq)]
pub enum FusedArg {
    /// The node's input at this position.
    Input(usize),
    /// The result of an earlier step.
    Step(usize),
    /// A scalar constant folded in (one element; its shape may still broadcast).
    Const(Tensor),
}

/// One step: an element-wise op over its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct FusedStep {
    /// The op ([`Op::Unary`], [`Op::ClipDynamic`], [`Op::Binary`] or [`Op::Variadic`]).
    pub op: Op,
    /// Its arguments in the op's input order.
    pub args: Vec<FusedArg>,
}

/// The program of a [`Op::FusedElementwise`] node: steps in order, the last one the output.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct FusedAttrs {
    /// The steps.
    pub steps: Vec<FusedStep>,
}

impl FusedAttrs {
    /// The program as one line: `t0 = Sigmoid(x0); t1 = Mul(x0, t0)`.
    pub fn program(&self) -> String {
        let parts: Vec<String> = self
            .steps
            .iter()
            .enumerate()
            .map(|(k, s)| {
                let args: Vec<String> = s.args.iter().map(fmt_arg).collect();
                let attrs = s.op.attrs();
                let attrs = if attrs.is_empty() {
                    String::new()
                } else {
                    let a: Vec<String> = attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!("[{}]", a.join(" "))
                };
                format!("t{k} = {}{attrs}({})", s.op.name(), args.join(", "))
            })
            .collect();
        parts.join("; ")
    }
}

fn fmt_arg(a: &FusedArg) -> String {
    match a {
        FusedArg::Input(i) => format!("x{i}"),
        FusedArg::Step(k) => format!("t{k}"),
        FusedArg::Const(t) => match t.to_f64_vec().first() {
            Some(v) => format!("{v}"),
            None => "?".into(),
        },
    }
}

fn attrs_of(op: &Op) -> Result<&FusedAttrs, OpError> {
    match op {
        Op::FusedElementwise(a) => Ok(a),
        _ => Err(wrong_family(op, "fused")),
    }
}

fn is_step_op(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_) | Op::ClipDynamic { .. } | Op::Binary(_) | Op::Variadic(_)
    )
}

/// Op name.
pub fn name(_op: &Op) -> &'static str {
    "FusedElementwise"
}

/// Types step by step; every step's shape must equal the last one's (the output's).
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let a = attrs_of(op)?;
    let mut types: Vec<TensorType> = Vec::with_capacity(a.steps.len());
    for (k, s) in a.steps.iter().enumerate() {
        if !is_step_op(&s.op) {
            return Err(OpError::Unsupported(format!(
                "fused step {k} is {}, not an element-wise op",
                s.op.name()
            )));
        }
        let mut tys: Vec<TensorType> = Vec::with_capacity(s.args.len());
        for x in &s.args {
            tys.push(match x {
                FusedArg::Input(i) => inputs.get(*i).cloned().ok_or_else(|| {
                    OpError::Unsupported(format!(
                        "fused step {k} reads input {i} of {}",
                        inputs.len()
                    ))
                })?,
                FusedArg::Step(j) => types.get(*j).cloned().ok_or_else(|| {
                    OpError::Unsupported(format!(
                        "fused step {k} reads step {j}, not an earlier one"
                    ))
                })?,
                FusedArg::Const(t) => t.ty(),
            });
        }
        let out =
            s.op.infer(&tys)?
                .into_iter()
                .next()
                .ok_or_else(|| OpError::Unsupported(format!("fused step {k} has no output")))?;
        types.push(out);
    }
    let last = types
        .last()
        .cloned()
        .ok_or_else(|| OpError::Unsupported("fused program has no steps".into()))?;
    if let Some((k, t)) = types
        .iter()
        .enumerate()
        .find(|(_, t)| t.shape != last.shape)
    {
        return Err(OpError::Unsupported(format!(
            "fused step {k} has shape {t}, not the output's {last}"
        )));
    }
    Ok(vec![last])
}

/// Reference evaluation: each step through its op's own `eval`.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let a = attrs_of(op)?;
    let mut results: Vec<Tensor> = Vec::with_capacity(a.steps.len());
    for (k, s) in a.steps.iter().enumerate() {
        let mut args: Vec<&Tensor> = Vec::with_capacity(s.args.len());
        for x in &s.args {
            args.push(match x {
                FusedArg::Input(i) => inputs.get(*i).copied().ok_or_else(|| {
                    OpError::Unsupported(format!("fused step {k} reads a missing input {i}"))
                })?,
                FusedArg::Step(j) => results.get(*j).ok_or_else(|| {
                    OpError::Unsupported(format!("fused step {k} reads step {j}"))
                })?,
                FusedArg::Const(t) => t,
            });
        }
        let out =
            s.op.eval(&args)?
                .into_iter()
                .next()
                .ok_or_else(|| OpError::Unsupported(format!("fused step {k} gave no output")))?;
        results.push(out);
    }
    results
        .pop()
        .map(|t| vec![t])
        .ok_or_else(|| OpError::Unsupported("fused program has no steps".into()))
}

/// Attributes: the program.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::FusedElementwise(a) => vec![("program", format!("\"{}\"", a.program()))],
        _ => Vec::new(),
    }
}
