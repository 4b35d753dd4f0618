//! Graph-level helpers of the importer: the nodes' topological order (file order first),
//! the values a name is computed from, node labels for messages, and the value of a
//! `Constant` node.

use std::collections::{BTreeSet, HashMap};

use arenac_proto::{GraphProto, NodeProto};

use super::scope;
use super::tensor_proto::{ExternalData, tensor_from_proto};
use crate::error::{Error, OpError, Result};
use crate::ir::graph::ValueId;
use crate::ir::tensor::Tensor;

/// The names `name` is computed from in `gp`: itself and every value upstream of it through
/// the nodes that produce them (graph inputs among them). Nodes of subgraphs count too (a value
/// computed inside a branch or a loop body), and a node's implicit inputs (the outer values its
/// subgraphs read) are among what its outputs are computed from.
pub(super) fn upstream_inputs(gp: &GraphProto, name: &str) -> BTreeSet<String> {
    fn producers<'g>(g: &'g GraphProto, map: &mut HashMap<&'g str, &'g NodeProto>) {
        for n in &g.node {
            for o in &n.output {
                map.insert(o.as_str(), n);
            }
            for sub in scope::subgraphs(n) {
                producers(sub, map);
            }
        }
    }
    let mut producer: HashMap<&str, &NodeProto> = HashMap::new();
    producers(gp, &mut producer);
    let mut seen = BTreeSet::new();
    let mut stack = vec![name.to_string()];
    while let Some(v) = stack.pop() {
        if v.is_empty() || !seen.insert(v.clone()) {
            continue;
        }
        if let Some(node) = producer.get(v.as_str()) {
            stack.extend(scope::all_inputs(node));
        }
    }
    seen
}

/// Name of node `i` for messages: its name, or `#i` when it has none (`<prefix>#i` for a node
/// of a subgraph, `prefix` naming the node holding it and the branch or body).
pub(super) fn node_label(node: &NodeProto, i: usize, prefix: &str) -> String {
    if node.name().is_empty() {
        format!("{prefix}#{i}")
    } else {
        node.name().to_string()
    }
}

/// The value of a `Constant` node, from whichever attribute it uses.
pub(super) fn constant_node_value(
    node: &NodeProto,
    external: Option<&mut ExternalData>,
) -> Result<Tensor, OpError> {
    use arenac_proto::attribute_proto::AttributeType;
    let attr = node
        .attribute
        .first()
        .ok_or_else(|| OpError::attr("value", "Constant has no value attribute"))?;
    let name = attr.name();
    let t = match name {
        "value" => {
            let tp = attr
                .t
                .as_ref()
                .ok_or_else(|| OpError::attr(name, "TENSOR attribute without a tensor"))?;
            tensor_from_proto(tp, external).map_err(|e| OpError::attr(name, e.to_string()))?
        }
        "value_float" => Tensor::f32(vec![], &[attr.f()]),
        "value_floats" => Tensor::f32(vec![attr.floats.len()], &attr.floats),
        "value_int" => Tensor::i64(vec![], &[attr.i()]),
        "value_ints" => Tensor::i64(vec![attr.ints.len()], &attr.ints),
        other => {
            let _ = AttributeType::Undefined;
            return Err(OpError::Unsupported(format!(
                "Constant attribute '{other}'"
            )));
        }
    };
    Ok(t)
}

/// A topological order of the nodes that keeps file order wherever dependencies allow
/// (Kahn's algorithm taking the lowest file index first). Reports undefined inputs and cycles.
///
/// A node depends on the producers of its inputs and of its implicit inputs (the outer values
/// its subgraphs read, [`scope::implicit_inputs`]). `prefix` labels unnamed nodes in messages.
pub(super) fn topological_order(
    gp: &GraphProto,
    known: &HashMap<String, ValueId>,
    prefix: &str,
) -> Result<Vec<usize>> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in gp.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if let Some(&j) = producer.get(o.as_str()) {
                return Err(Error::DuplicateValue {
                    name: o.clone(),
                    first: format!("node '{}'", node_label(&gp.node[j], j, prefix)),
                    second: format!("node '{}'", node_label(n, i, prefix)),
                });
            }
            if known.contains_key(o) {
                return Err(Error::DuplicateValue {
                    name: o.clone(),
                    first: "a graph input or initializer".into(),
                    second: format!("node '{}'", node_label(n, i, prefix)),
                });
            }
            producer.insert(o, i);
        }
    }
    let n = gp.node.len();
    let mut indegree = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in gp.node.iter().enumerate() {
        let mut deps = BTreeSet::new();
        for name in scope::all_inputs(node) {
            match producer.get(name.as_str()) {
                Some(&p) => {
                    deps.insert(p);
                }
                None if known.contains_key(&name) => {}
                None => {
                    return Err(Error::MissingValue {
                        node: node_label(node, i, prefix),
                        op: node.op_type().to_string(),
                        value: name,
                    });
                }
            }
        }
        indegree[i] = deps.len();
        for p in deps {
            users[p].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &u in &users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.insert(u);
            }
        }
    }
    if order.len() < n {
        let stuck = (0..n).find(|&i| indegree[i] > 0).unwrap_or(0);
        return Err(Error::Cycle {
            node: node_label(&gp.node[stuck], stuck, prefix),
        });
    }
    Ok(order)
}
