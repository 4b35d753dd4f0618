//! `If`: folded (the taken branch inlined) or a run-time branch ([`crate::ops::Op::If`]).

use arenac_proto::{GraphProto, NodeProto};

use super::super::tensor_proto::{ExternalData, tensor_from_proto};
use super::super::{Importer, topological_order};
use super::{Captures, add_node, graph_attr, import_subgraph};
use crate::error::{Error, OpError, Result};
use crate::ir::graph::ValueKind;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::control::{IfAttrs, Unrunnable, branch_mismatch};

/// `If(cond)`: a branch chosen by a one-element bool. A condition known at compile time
/// inlines the taken branch. Otherwise both branches are imported; when they give the same
/// output types the node is a run-time [`Op::If`]. When one branch cannot be imported with
/// these shapes (silero-vad's branch for the other sample rate, given this rate's frame
/// length), the node runs the other and taking it is a run-time fault ([`Unrunnable`]).
/// Branches whose outputs differ in shape make the condition decide a shape: it is asked for
/// as a constant ([`OpError::NotConstant`]; an input the user gave is then frozen).
pub(super) fn import_if(
    imp: &mut Importer,
    node: &NodeProto,
    label: &str,
    mut external: Option<&mut ExternalData>,
) -> Result<()> {
    let node_err = |source: OpError| Error::Node {
        node: label.to_string(),
        op: "If".into(),
        source,
    };
    let then_g = graph_attr(node, "then_branch").map_err(node_err)?;
    let else_g = graph_attr(node, "else_branch").map_err(node_err)?;
    let cond_name = node
        .input
        .first()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            node_err(OpError::Arity {
                expected: "1 (the condition)".into(),
                actual: node.input.len(),
            })
        })?;
    if node.input.len() > 1 {
        return Err(node_err(OpError::Arity {
            expected: "1 (the condition)".into(),
            actual: node.input.len(),
        }));
    }
    let cond = *imp
        .by_name
        .get(cond_name)
        .ok_or_else(|| Error::MissingValue {
            node: label.to_string(),
            op: "If".into(),
            value: cond_name.clone(),
        })?;
    let cv = imp.graph.value(cond);
    if cv.ty.dtype != DType::Bool || cv.ty.numel() != Some(1) {
        return Err(node_err(OpError::DType {
            input: 0,
            dtype: cv.ty.dtype,
            expected: format!("a one-element bool condition (got {})", cv.ty),
        }));
    }
    for (g, which) in [(then_g, "then_branch"), (else_g, "else_branch")] {
        if g.output.len() != node.output.len() {
            return Err(node_err(OpError::attr(
                which,
                format!(
                    "has {} outputs but the node has {}",
                    g.output.len(),
                    node.output.len()
                ),
            )));
        }
        if !g.input.is_empty() {
            return Err(node_err(OpError::attr(
                which,
                format!("has {} inputs; a branch takes none", g.input.len()),
            )));
        }
    }
    match &cv.kind {
        ValueKind::Constant(t) => {
            let taken = t.to_i64_vec().first().copied().unwrap_or(0) != 0;
            let (g, which) = if taken {
                (then_g, "then")
            } else {
                (else_g, "else")
            };
            inline(imp, g, node, &format!("{label}/{which}"), external)
        }
        _ => {
            let caps = Captures::resolve(imp, node, 1, label)?;
            let then_branch = import_subgraph(
                imp,
                then_g,
                &[],
                &caps,
                &format!("{label}/then"),
                external.as_deref_mut(),
            );
            let else_branch =
                import_subgraph(imp, else_g, &[], &caps, &format!("{label}/else"), external);
            // One branch that cannot be imported with these shapes runs the other; taking it
            // is a run-time fault (as in onnxruntime, which only looks at a branch it takes).
            let (then_branch, else_branch, unrunnable) = match (then_branch, else_branch) {
                (Ok(t), Ok(e)) => (t, e, None),
                (Ok(t), Err(e)) if runnable_elsewhere(&e) => {
                    (t.clone(), t, Some(Unrunnable::new(false, &e)))
                }
                (Err(e), Ok(t)) if runnable_elsewhere(&e) => {
                    (t.clone(), t, Some(Unrunnable::new(true, &e)))
                }
                (Err(e), _) | (_, Err(e)) => return Err(e),
            };
            let types = |g: &crate::ir::graph::Graph| -> Vec<TensorType> {
                g.outputs.iter().map(|&v| g.value(v).ty.clone()).collect()
            };
            let (t, e) = (types(&then_branch), types(&else_branch));
            if t != e {
                let same_dtypes =
                    t.len() == e.len() && t.iter().zip(&e).all(|(a, b)| a.dtype == b.dtype);
                return Err(node_err(if same_dtypes {
                    OpError::NotConstant {
                        input: 0,
                        name: cond_name.clone(),
                    }
                } else {
                    branch_mismatch(&t, &e)
                }));
            }
            let mut inputs = vec![cond];
            inputs.extend(caps.inputs.iter().copied());
            let op = Op::If(Box::new(IfAttrs {
                then_branch,
                else_branch,
                arena_bytes: 0,
                unrunnable,
            }));
            add_node(imp, node, label, op, &inputs, t)
        }
    }
}

/// Whether a branch's import error `e` leaves the `If` usable through its other branch: any
/// error but a value needed at compile time ([`OpError::NotConstant`],
/// [`OpError::DataDependent`]), which may yet be had by freezing an input the user gave.
fn runnable_elsewhere(e: &Error) -> bool {
    !matches!(
        e,
        Error::Node {
            source: OpError::NotConstant { .. } | OpError::DataDependent { .. },
            ..
        }
    )
}

/// Imports the nodes of `branch` into the importer's graph as if the file had them in place
/// of `node`, whose outputs then name the branch's outputs. `prefix` labels the branch's
/// unnamed nodes (`<If node>/then#3`).
fn inline(
    imp: &mut Importer,
    branch: &GraphProto,
    node: &NodeProto,
    prefix: &str,
    mut external: Option<&mut ExternalData>,
) -> Result<()> {
    for t in &branch.initializer {
        let tensor = tensor_from_proto(t, external.as_deref_mut())?;
        imp.define(
            t.name(),
            format!("an initializer of '{prefix}'"),
            tensor.ty(),
            ValueKind::Constant(tensor),
        )?;
    }
    let order = topological_order(branch, &imp.by_name, prefix)?;
    let saved = std::mem::replace(&mut imp.prefix, prefix.to_string());
    let mut result = Ok(());
    for i in order {
        result = imp.import_node(&branch.node[i], i, external.as_deref_mut());
        if result.is_err() {
            break;
        }
    }
    imp.prefix = saved;
    result?;
    for (out, src) in node.output.iter().zip(&branch.output) {
        if out.is_empty() {
            continue;
        }
        let id = *imp
            .by_name
            .get(src.name())
            .ok_or_else(|| Error::MissingOutput(format!("{} (of '{prefix}')", src.name())))?;
        if let Some(first) = imp.definer.get(out) {
            return Err(Error::DuplicateValue {
                name: out.clone(),
                first: first.clone(),
                second: format!("node '{}'", node.name()),
            });
        }
        imp.by_name.insert(out.clone(), id);
        imp.definer
            .insert(out.clone(), format!("the inlined branch '{prefix}'"));
    }
    Ok(())
}
