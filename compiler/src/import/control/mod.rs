//! Control flow at import: `If`, `Loop` and `Scan`, whose bodies are graphs held in attributes
//! and read values of the graphs around them by name (see [`super::scope`]).
//!
//! - `If` whose condition is known at compile time (a constant, or computed from constants and
//!   frozen inputs): the taken branch's nodes are imported in place of the `If`
//!   (`branch::inline`), as if the file had them; the other branch is never looked at.
//! - Otherwise each subgraph is imported by an importer of its own ([`import_subgraph`]) into
//!   a [`Graph`] held by the node's [`Op`]. The outer names the subgraphs read
//!   ([`super::scope::implicit_inputs`]) are resolved first ([`Captures`]): an outer constant
//!   becomes a constant of the subgraph (it folds there like any constant, and its weights are
//!   shared: same bytes), any other outer value a [`ValueKind::Outer`] value reading one more
//!   input of the node.
//! - `Loop` and `Scan` with a trip count known at compile time: one [`Op::Loop`] whose body is
//!   imported the same way (`loops`).

mod branch;
mod loops;
mod scan8;

use std::collections::HashMap;

use arenac_proto::{GraphProto, NodeProto};

use super::scope;
use super::tensor_proto::{ExternalData, tensor_from_proto};
use super::{Importer, topological_order};
use crate::error::{Error, OpError, Result};
use crate::ir::graph::{Graph, ValueId, ValueKind};
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::Op;

/// The control-flow ops this module imports (every opset up to [`crate::ops::MAX_OPSET`]).
pub const OPS: &[(&str, i64)] = &[("If", 1), ("Loop", 1), ("Scan", 8)];

/// Whether `op_type` is a control-flow op this module imports.
pub(super) fn is_control(op_type: &str) -> bool {
    OPS.iter().any(|(name, _)| *name == op_type)
}

/// Imports control-flow node `node` (labelled `label` in messages).
pub(super) fn import(
    imp: &mut Importer,
    node: &NodeProto,
    label: &str,
    external: Option<&mut ExternalData>,
) -> Result<()> {
    let node_err = |source: OpError| Error::Node {
        node: label.to_string(),
        op: node.op_type().to_string(),
        source,
    };
    match node.op_type() {
        "If" => branch::import_if(imp, node, label, external),
        "Loop" => loops::import_loop(imp, node, label, external),
        "Scan" => loops::import_scan(imp, node, label, external, false),
        other => Err(node_err(OpError::Unsupported(format!(
            "no import rule for {other}"
        )))),
    }
}

/// Imports the `Scan` node an LSTM/GRU/RNN expansion built (`crate::import::rnn`), whatever
/// the model's opset (the recurrent ops exist from opset 7, Scan's batch-free form from 9).
pub(in crate::import) fn import_recurrence(
    imp: &mut Importer,
    node: &NodeProto,
    label: &str,
) -> Result<()> {
    loops::import_scan(imp, node, label, None, true)
}

/// The graph attribute `name` of `node`.
pub(super) fn graph_attr<'n>(node: &'n NodeProto, name: &str) -> Result<&'n GraphProto, OpError> {
    node.attribute
        .iter()
        .find(|a| a.name() == name)
        .and_then(|a| a.g.as_ref())
        .ok_or_else(|| OpError::attr(name, "missing (a graph attribute is required)"))
}

/// How a control node's subgraphs see one outer name.
#[derive(Clone, Debug)]
enum Capture {
    /// A constant of the enclosing graph: a constant of the subgraph too.
    Constant(Tensor),
    /// Any other value: node input `k` ([`ValueKind::Outer`]`(k)`).
    Outer(usize, TensorType),
}

/// The outer names a control node's subgraphs read, resolved in the enclosing importer.
struct Captures {
    by_name: HashMap<String, Capture>,
    /// The enclosing values read as [`ValueKind::Outer`], in node input order (after the
    /// node's own operands).
    inputs: Vec<ValueId>,
}

impl Captures {
    /// Resolves `node`'s implicit inputs; captured values become node inputs `first..`.
    fn resolve(imp: &Importer, node: &NodeProto, first: usize, label: &str) -> Result<Captures> {
        let mut caps = Captures {
            by_name: HashMap::new(),
            inputs: Vec::new(),
        };
        for name in scope::implicit_inputs(node) {
            let id = *imp.by_name.get(&name).ok_or_else(|| Error::MissingValue {
                node: label.to_string(),
                op: node.op_type().to_string(),
                value: name.clone(),
            })?;
            let v = imp.graph.value(id);
            let cap = match &v.kind {
                ValueKind::Constant(t) => Capture::Constant(t.clone()),
                _ => {
                    caps.inputs.push(id);
                    Capture::Outer(first + caps.inputs.len() - 1, v.ty.clone())
                }
            };
            caps.by_name.insert(name, cap);
        }
        Ok(caps)
    }
}

/// Imports subgraph `gp` of a control node with an importer of its own: its graph inputs typed
/// `inputs` (one per declared input; a declared element type must agree), the outer names it
/// reads from `caps`, then its initializers and nodes as in any graph. `prefix` labels its
/// unnamed nodes. Constants folded inside count against the enclosing import's folding cap.
/// Nodes with an f32 kernel only, on other float types, are widened as in the main graph.
fn import_subgraph(
    imp: &mut Importer,
    gp: &GraphProto,
    inputs: &[TensorType],
    caps: &Captures,
    prefix: &str,
    mut external: Option<&mut ExternalData>,
) -> Result<Graph> {
    let mut sub = Importer::new(gp, imp.graph.opset);
    sub.domain_opsets = imp.domain_opsets.clone();
    sub.max_fold_bytes = imp.max_fold_bytes;
    sub.folded_bytes = imp.folded_bytes;
    sub.prefix = prefix.to_string();
    if gp.input.len() != inputs.len() {
        return Err(Error::InvalidModel(format!(
            "'{prefix}' declares {} inputs where {} are expected",
            gp.input.len(),
            inputs.len()
        )));
    }
    for (decl, ty) in gp.input.iter().zip(inputs) {
        if let Some(declared) = declared_dtype(decl)
            && declared != ty.dtype.to_onnx()
        {
            return Err(Error::InputType {
                input: decl.name().to_string(),
                reason: format!(
                    "an input of '{prefix}' declared with element type {declared}, but it \
                     receives {ty}"
                ),
            });
        }
        let id = sub.define(
            decl.name(),
            format!("an input of '{prefix}'"),
            ty.clone(),
            ValueKind::Input,
        )?;
        sub.graph.inputs.push(id);
    }
    for name in scope::free_names(gp) {
        let by = format!("the graph around '{prefix}'");
        match caps.by_name.get(&name) {
            Some(Capture::Constant(t)) => {
                sub.define(&name, by, t.ty(), ValueKind::Constant(t.clone()))?;
            }
            Some(Capture::Outer(k, ty)) => {
                sub.define(&name, by, ty.clone(), ValueKind::Outer(*k))?;
            }
            None => {
                return Err(Error::MissingOutput(format!("{name} (read by '{prefix}')")));
            }
        }
    }
    for t in &gp.initializer {
        let tensor = tensor_from_proto(t, external.as_deref_mut())?;
        sub.define(
            t.name(),
            format!("an initializer of '{prefix}'"),
            tensor.ty(),
            ValueKind::Constant(tensor),
        )?;
    }
    for i in topological_order(gp, &sub.by_name, prefix)? {
        sub.import_node(&gp.node[i], i, external.as_deref_mut())?;
    }
    for out in &gp.output {
        let id = *sub
            .by_name
            .get(out.name())
            .ok_or_else(|| Error::MissingOutput(format!("{} (of '{prefix}')", out.name())))?;
        sub.graph.outputs.push(id);
    }
    imp.folded_bytes = sub.folded_bytes;
    let mut graph = sub.graph;
    crate::analysis::widen::widen_floats(&mut graph);
    Ok(graph)
}

/// The element type a subgraph input declares, if it declares one.
fn declared_dtype(vi: &arenac_proto::ValueInfoProto) -> Option<i32> {
    use arenac_proto::type_proto;
    match vi.r#type.as_ref()?.value.as_ref()? {
        type_proto::Value::TensorType(t) if t.elem_type() != 0 => Some(t.elem_type()),
        _ => None,
    }
}

/// Most iterations of a loop folded at import (its reference evaluation runs the body that
/// many times); a longer loop over constants runs in the generated code instead.
pub const MAX_FOLDED_TRIPS: usize = 1 << 16;

/// Adds control node `op` (labelled `label`) with `inputs` to the importer's graph; its outputs
/// typed `types` take `node`'s declared output names (an omitted one a synthetic name). When
/// every input is a constant the node is folded instead (its reference evaluation), within the
/// import's folding cap (and, for a loop, [`MAX_FOLDED_TRIPS`]).
fn add_node(
    imp: &mut Importer,
    node: &NodeProto,
    label: &str,
    op: Op,
    inputs: &[ValueId],
    types: Vec<TensorType>,
) -> Result<()> {
    let by = format!("node '{label}'");
    let node_err = |source: OpError| Error::Node {
        node: label.to_string(),
        op: op.name().to_string(),
        source,
    };
    let long_loop = matches!(&op, Op::Loop(a) if a.trips > MAX_FOLDED_TRIPS);
    let consts: Option<Vec<Tensor>> = inputs
        .iter()
        .map(|&v| match &imp.graph.value(v).kind {
            ValueKind::Constant(t) if !long_loop => Some(t.clone()),
            _ => None,
        })
        .collect();
    if let Some(consts) = consts {
        let bytes = types
            .iter()
            .try_fold(0usize, |acc, t| t.bytes()?.checked_add(acc))
            .unwrap_or(usize::MAX);
        let total = imp.folded_bytes.saturating_add(bytes);
        if total > imp.max_fold_bytes {
            return Err(node_err(OpError::Overflow(format!(
                "folding this node would bring the constants computed at compile time to \
                 {total} bytes (limit {})",
                imp.max_fold_bytes
            ))));
        }
        imp.folded_bytes = total;
        let refs: Vec<&Tensor> = consts.iter().collect();
        let values = op.eval(&refs).map_err(node_err)?;
        for (k, name) in node.output.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            let t = values.get(k).cloned().ok_or_else(|| {
                node_err(OpError::Unsupported(format!(
                    "evaluation produced no output {k}"
                )))
            })?;
            imp.define(name, by.clone(), t.ty(), ValueKind::Constant(t))?;
        }
        return Ok(());
    }
    let mut outputs = Vec::with_capacity(types.len());
    for (k, ty) in types.into_iter().enumerate() {
        let name = match node.output.get(k).filter(|n| !n.is_empty()) {
            Some(n) => {
                if let Some(first) = imp.definer.get(n) {
                    return Err(Error::DuplicateValue {
                        name: n.clone(),
                        first: first.clone(),
                        second: by,
                    });
                }
                n.clone()
            }
            None => format!("{label}:unused{k}"),
        };
        outputs.push((name, ty));
    }
    let id = imp.graph.add_node(label, op, inputs, &outputs);
    let ids = imp.graph.node(id).outputs.clone();
    for (k, out) in ids.into_iter().enumerate() {
        if let Some(n) = node.output.get(k).filter(|n| !n.is_empty()) {
            imp.by_name.insert(n.clone(), out);
            imp.definer.insert(n.clone(), by.clone());
        }
    }
    Ok(())
}
