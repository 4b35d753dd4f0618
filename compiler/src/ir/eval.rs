//! Whole-graph reference evaluation: runs every node's [`crate::ops::Op::eval`] in order.
//! Slow and simple on purpose — the oracle that kernels and whole models are checked against.

use std::collections::HashMap;

use super::graph::{Graph, ValueId, ValueKind};
use super::tensor::Tensor;
use crate::error::{Error, OpError};

/// Evaluates the graph on `inputs` (one tensor per graph input, in order) and returns the graph
/// outputs in order. Input types must equal the graph's input types.
pub fn eval_graph(g: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
    eval_graph_outer(g, inputs, &[])
}

/// [`eval_graph`] for a subgraph: its outer values ([`ValueKind::Outer`]`(k)`) are `outer[k]`,
/// the holding node's inputs.
pub fn eval_graph_outer(
    g: &Graph,
    inputs: &[Tensor],
    outer: &[&Tensor],
) -> Result<Vec<Tensor>, Error> {
    if inputs.len() != g.inputs.len() {
        return Err(Error::InvalidModel(format!(
            "graph has {} inputs, {} given",
            g.inputs.len(),
            inputs.len()
        )));
    }
    let mut env: HashMap<ValueId, Tensor> = HashMap::new();
    for (&id, t) in g.inputs.iter().zip(inputs) {
        let want = &g.value(id).ty;
        if &t.ty() != want {
            return Err(Error::InvalidModel(format!(
                "input '{}' is {} but the graph expects {want}",
                g.value(id).name,
                t.ty()
            )));
        }
        env.insert(id, t.clone());
    }
    for id in g.value_ids() {
        match &g.value(id).kind {
            ValueKind::Constant(t) => {
                env.insert(id, t.clone());
            }
            ValueKind::Outer(k) => {
                let t = outer.get(*k).ok_or_else(|| {
                    Error::InvalidModel(format!(
                        "outer value '{}' reads input {k} of a node with {}",
                        g.value(id).name,
                        outer.len()
                    ))
                })?;
                env.insert(id, (*t).clone());
            }
            _ => {}
        }
    }
    for (_, n) in g.nodes() {
        let args: Vec<&Tensor> = n
            .inputs
            .iter()
            .map(|v| env.get(v))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                Error::InvalidModel(format!("node '{}' reads an undefined value", n.name))
            })?;
        let outs = n.op.eval(&args).map_err(|source| Error::Node {
            node: n.name.clone(),
            op: n.op.name().to_string(),
            source,
        })?;
        if outs.len() < n.outputs.len() {
            return Err(Error::Node {
                node: n.name.clone(),
                op: n.op.name().to_string(),
                source: OpError::Unsupported("evaluation returned too few outputs".into()),
            });
        }
        for (&o, t) in n.outputs.iter().zip(outs) {
            env.insert(o, t);
        }
    }
    g.outputs
        .iter()
        .map(|o| {
            env.get(o)
                .cloned()
                .ok_or_else(|| Error::MissingOutput(g.value(*o).name.clone()))
        })
        .collect()
}
