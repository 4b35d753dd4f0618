//! Control flow: ops holding graphs (`If`'s branches, a `Loop`'s or `Scan`'s body:
//! [`loops`]). Imported by `crate::import::control` (not through the converter registry: a
//! converter sees one node, these import graphs).
//!
//! A subgraph is a [`Graph`] of its own whose outer-scope reads are values of kind
//! [`ValueKind::Outer`]`(k)`: the holding node's input `k`. The enclosing graph sees the node
//! as one opaque node whose inputs include every captured value (so they stay live across it)
//! and whose kernel scratch ([`crate::ops::Op::scratch_bytes`]) is the arena its subgraphs
//! were planned in (`arena_bytes`, recorded by planning).
//!
//! [`infer`] checks what ties a subgraph to its node (each outer value's type is the node
//! input's type, the branches agree on their outputs), so the IR verifier checks it too.

pub mod loops;

use crate::error::OpError;
use crate::ir::eval::eval_graph_outer;
use crate::ir::graph::{Graph, ValueKind};
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::util::wrong_family;
pub use loops::{LoopAttrs, LoopKind, ScanAxis};

/// `If`: one of two graphs run, chosen by a one-element bool. Node inputs: the condition, then
/// the captured outer values (read by the branches as [`ValueKind::Outer`]); node outputs: the
/// branch's outputs, which both branches give with the same types.
#[derive(Clone, Debug, PartialEq)]
pub struct IfAttrs {
    /// Run when the condition is true; no graph inputs.
    pub then_branch: Graph,
    /// Run when the condition is false; no graph inputs.
    pub else_branch: Graph,
    /// Bytes of the arena both branches are planned in (the larger branch's), recorded by
    /// planning (`crate::arena::plan_graph`); 0 before. The node's kernel scratch.
    pub arena_bytes: usize,
    /// A branch that cannot run with the shapes the graph was compiled for, if any.
    pub unrunnable: Option<Unrunnable>,
}

/// A branch of a run-time `If` that cannot run with the shapes the graph was compiled for:
/// importing it failed (a shape mismatch, an op refused for these types...), as it would in
/// onnxruntime only if a run took it. The branch's graph is then a copy of the other branch's
/// (so types, verification and planning line up), is never lowered nor evaluated: a run whose
/// condition takes it reports a fault naming the node and `reason`.
#[derive(Clone, Debug, PartialEq)]
pub struct Unrunnable {
    /// True for the then-branch, false for the else-branch.
    pub then: bool,
    /// Why it cannot run (the import error, one line).
    pub reason: String,
}

impl Unrunnable {
    /// The branch (`then`: the then-branch) that failed to import with `e`.
    pub fn new(then: bool, e: &crate::error::Error) -> Unrunnable {
        Unrunnable {
            then,
            reason: e.to_string(),
        }
    }

    /// The branch's attribute name (`then_branch`, `else_branch`).
    pub fn which(&self) -> &'static str {
        if self.then {
            "then_branch"
        } else {
            "else_branch"
        }
    }

    /// One line for a run that takes the branch (and for the compile-time warning).
    pub fn message(&self) -> String {
        format!(
            "the condition chose the {}, which cannot run with the shapes this program was \
             compiled for ({})",
            self.which(),
            self.reason
        )
    }
}

/// Op name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::If(_) => "If",
        Op::Loop(a) => match a.kind {
            LoopKind::Loop => "Loop",
            LoopKind::Scan => "Scan",
        },
        _ => "?",
    }
}

/// The graphs `op` holds, in a fixed order (If: then, else).
pub fn subgraphs(op: &Op) -> Vec<(&'static str, &Graph)> {
    match op {
        Op::If(a) => vec![
            ("then_branch", &a.then_branch),
            ("else_branch", &a.else_branch),
        ],
        Op::Loop(a) => vec![("body", &a.body)],
        _ => Vec::new(),
    }
}

/// Checks that every outer value of `g` reads an existing node input of its type, at index
/// `first` or later (the inputs before are the node's own operands, not captures).
pub(super) fn check_outer(
    g: &Graph,
    what: &str,
    inputs: &[TensorType],
    first: usize,
) -> Result<(), OpError> {
    for v in g.values() {
        if let ValueKind::Outer(k) = v.kind {
            let Some(t) = inputs.get(k).filter(|_| k >= first) else {
                return Err(OpError::Unsupported(format!(
                    "{what} reads outer value '{}' as node input {k}, which is not a captured \
                     input (inputs {first}..{})",
                    v.name,
                    inputs.len()
                )));
            };
            if *t != v.ty {
                return Err(OpError::Unsupported(format!(
                    "{what} reads outer value '{}' as {}, but node input {k} is {t}",
                    v.name, v.ty
                )));
            }
        }
    }
    Ok(())
}

/// The types of `g`'s outputs.
fn output_types(g: &Graph) -> Vec<TensorType> {
    g.outputs.iter().map(|&v| g.value(v).ty.clone()).collect()
}

/// Output types: the branches' (which must agree); checks the condition and the captures.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    match op {
        Op::If(a) => {
            let cond = inputs.first().ok_or_else(|| OpError::Arity {
                expected: "at least 1 (the condition)".into(),
                actual: 0,
            })?;
            if cond.dtype != DType::Bool || cond.numel() != Some(1) {
                return Err(OpError::DType {
                    input: 0,
                    dtype: cond.dtype,
                    expected: format!("a one-element bool condition (got {cond})"),
                });
            }
            check_outer(&a.then_branch, "then_branch", inputs, 1)?;
            check_outer(&a.else_branch, "else_branch", inputs, 1)?;
            for b in [&a.then_branch, &a.else_branch] {
                if !b.inputs.is_empty() {
                    return Err(OpError::Unsupported("a branch has graph inputs".into()));
                }
            }
            let (t, e) = (output_types(&a.then_branch), output_types(&a.else_branch));
            if t != e {
                return Err(branch_mismatch(&t, &e));
            }
            Ok(t)
        }
        Op::Loop(a) => loops::infer(a, inputs),
        _ => Err(wrong_family(op, "control")),
    }
}

/// The error for branches whose outputs differ.
pub fn branch_mismatch(then: &[TensorType], other: &[TensorType]) -> OpError {
    let show = |ts: &[TensorType]| {
        ts.iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    OpError::Unsupported(format!(
        "the branches give different outputs: then ({}), else ({})",
        show(then),
        show(other)
    ))
}

/// Reference evaluation: the taken branch, evaluated with the node's inputs as outer values.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    match op {
        Op::If(a) => {
            let cond = inputs
                .first()
                .and_then(|t| t.to_i64_vec().first().copied())
                .ok_or_else(|| OpError::Unsupported("If without a condition value".into()))?;
            if let Some(u) = a.unrunnable.as_ref().filter(|u| u.then == (cond != 0)) {
                return Err(OpError::Unsupported(u.message()));
            }
            let (g, which) = if cond != 0 {
                (&a.then_branch, "then_branch")
            } else {
                (&a.else_branch, "else_branch")
            };
            eval_graph_outer(g, &[], inputs)
                .map_err(|e| OpError::Unsupported(format!("evaluating the {which}: {e}")))
        }
        Op::Loop(a) => loops::eval(a, inputs),
        _ => Err(wrong_family(op, "control")),
    }
}

/// Attributes for the printer (the subgraphs print below the node).
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::Loop(a) => loops::attrs(a),
        _ => Vec::new(),
    }
}

/// The graphs `op` holds, mutably, with its recorded sub-arena size (`None` for an op holding
/// none): what planning rewrites (each subgraph's own passes) and records.
pub fn planning_parts(op: &mut Op) -> Option<(Vec<&mut Graph>, &mut usize)> {
    match op {
        Op::If(a) => {
            let a = &mut **a;
            Some((
                vec![&mut a.then_branch, &mut a.else_branch],
                &mut a.arena_bytes,
            ))
        }
        Op::Loop(a) => {
            let a = &mut **a;
            Some((vec![&mut a.body], &mut a.arena_bytes))
        }
        _ => None,
    }
}

/// The sub-arena size recorded in `op` (0 for an op holding no graph).
pub fn recorded_arena(op: &Op) -> usize {
    match op {
        Op::If(a) => a.arena_bytes,
        Op::Loop(a) => a.arena_bytes,
        _ => 0,
    }
}

/// Per subgraph of `op` (in [`subgraphs`] order), the graph inputs whose buffers the node
/// writes between runs of the subgraph: a loop's condition and carried values, copied back
/// from the body's outputs at the end of each iteration. Planning keeps them live through the
/// whole body (as if they were outputs too), so no value of the body shares their bytes and
/// the copies cannot overwrite a value another copy still reads.
pub fn pinned_inputs(op: &Op) -> Vec<Vec<crate::ir::graph::ValueId>> {
    match op {
        Op::Loop(a) => {
            let from = usize::from(a.iter_input);
            let to = a.first_carried_input() + a.carried;
            vec![a.body.inputs.get(from..to).unwrap_or_default().to_vec()]
        }
        op => subgraphs(op).iter().map(|_| Vec::new()).collect(),
    }
}
