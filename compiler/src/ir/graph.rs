//! The graph IR: nodes on a petgraph `StableDiGraph`, values in a table indexed by [`ValueId`].
//!
//! Invariants (checked by [`crate::ir::verify::verify`]):
//! - every value has a dtype and a static shape;
//! - every node input is a graph input, a constant, an outer value (in a subgraph: see
//!   [`ValueKind::Outer`]) or the output of an earlier node in
//!   [`Graph::order`], which is a topological order of all nodes;
//! - each value has at most one producer; an edge `a -> b` carrying value `v` exists for every
//!   use of `v` (output of `a`) as an input of `b`.

use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use smallvec::SmallVec;

use super::tensor::Tensor;
use super::types::TensorType;
use crate::ops::Op;

/// Identifies a node of a [`Graph`]; printed as the node's position in the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(NodeIndex<u32>);

/// Identifies a value of a [`Graph`]; printed as `%N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(u32);

impl ValueId {
    /// Position in the value table (what `%N` prints).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for ValueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// Where a value comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueKind {
    /// A graph input, supplied at run time.
    Input,
    /// Known at compile time: an initializer, a `Constant` node, or a folded subgraph.
    Constant(Tensor),
    /// Computed by a node.
    Computed(NodeId),
    /// In a subgraph (a branch of an `If`, the body of a `Loop`): a value of the enclosing
    /// graph, read in place (no buffer of its own, like a constant): the enclosing node's
    /// input number `k`. The enclosing graph sees it as an ordinary input of that node, so it
    /// stays live across the node.
    Outer(usize),
}

/// A value: an SSA tensor with a static type.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// The name in the ONNX file (unique in the graph).
    pub name: String,
    /// Dtype and static shape.
    pub ty: TensorType,
    /// Origin.
    pub kind: ValueKind,
}

/// A node: one op applied to values.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The name in the ONNX file, or `#k` (k its position in the file) when it has none.
    pub name: String,
    /// The op with its attributes (constant operands that decide shapes are attributes here).
    pub op: Op,
    /// Data inputs, in the op's order.
    pub inputs: SmallVec<[ValueId; 4]>,
    /// Outputs, in the op's order.
    pub outputs: SmallVec<[ValueId; 2]>,
}

/// A typed, statically shaped dataflow graph.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Graph name from the file.
    pub name: String,
    /// Default-domain opset the model was written against.
    pub opset: i64,
    nodes: StableDiGraph<Node, ValueId>,
    values: Vec<Value>,
    order: Vec<NodeId>,
    /// Graph inputs supplied at run time, in file order.
    pub inputs: Vec<ValueId>,
    /// Graph outputs, in file order.
    pub outputs: Vec<ValueId>,
}

/// Graphs are equal when they have the same name, opset, values, inputs, outputs and the same
/// nodes in the same order (what the printer shows); node ids are not compared.
impl PartialEq for Graph {
    fn eq(&self, other: &Graph) -> bool {
        self.name == other.name
            && self.opset == other.opset
            && self.values == other.values
            && self.inputs == other.inputs
            && self.outputs == other.outputs
            && self.order.len() == other.order.len()
            && self
                .nodes()
                .zip(other.nodes())
                .all(|((_, a), (_, b))| a == b)
    }
}

impl Graph {
    /// An empty graph.
    pub fn new(name: impl Into<String>, opset: i64) -> Graph {
        Graph {
            name: name.into(),
            opset,
            ..Graph::default()
        }
    }

    /// Adds a value and returns its id.
    pub fn add_value(
        &mut self,
        name: impl Into<String>,
        ty: TensorType,
        kind: ValueKind,
    ) -> ValueId {
        let id = ValueId(u32::try_from(self.values.len()).unwrap_or(u32::MAX));
        self.values.push(Value {
            name: name.into(),
            ty,
            kind,
        });
        id
    }

    /// Renames value `v`; the caller keeps names unique.
    pub fn rename_value(&mut self, v: ValueId, name: impl Into<String>) {
        if let Some(val) = self.values.get_mut(v.index()) {
            val.name = name.into();
        }
    }

    /// Appends a node whose inputs already exist; its outputs are created from `output_types`
    /// and named `output_names`. The node goes last in [`Graph::order`].
    pub fn add_node(
        &mut self,
        name: impl Into<String>,
        op: Op,
        inputs: &[ValueId],
        outputs: &[(String, TensorType)],
    ) -> NodeId {
        let idx = self.nodes.add_node(Node {
            name: name.into(),
            op,
            inputs: inputs.iter().copied().collect(),
            outputs: SmallVec::new(),
        });
        let id = NodeId(idx);
        let outs: SmallVec<[ValueId; 2]> = outputs
            .iter()
            .map(|(n, t)| self.add_value(n.clone(), t.clone(), ValueKind::Computed(id)))
            .collect();
        self.nodes[idx].outputs = outs;
        for &v in inputs {
            if let ValueKind::Computed(p) = self.values[v.index()].kind {
                self.nodes.add_edge(p.0, idx, v);
            }
        }
        self.order.push(id);
        id
    }

    /// The value with this id. Ids come from this graph, so the lookup cannot miss.
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    /// The node with this id.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0]
    }

    /// The op of node `id`, to rewrite its attributes in place (planning records a control
    /// op's sub-arena there). The caller keeps the op's inferred types unchanged.
    pub fn op_mut(&mut self, id: NodeId) -> &mut Op {
        &mut self.nodes[id.0].op
    }

    /// Every value, indexed by `ValueId::index`.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// All value ids in table order.
    pub fn value_ids(&self) -> impl Iterator<Item = ValueId> + '_ {
        (0..self.values.len()).map(|i| ValueId(i as u32))
    }

    /// Nodes in execution (topological) order.
    pub fn order(&self) -> &[NodeId] {
        &self.order
    }

    /// Nodes in execution order, with their ids.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &Node)> + '_ {
        self.order.iter().map(|&id| (id, &self.nodes[id.0]))
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.order.len()
    }

    /// The underlying petgraph (edges carry the value flowing from producer to consumer).
    pub fn petgraph(&self) -> &StableDiGraph<Node, ValueId> {
        &self.nodes
    }

    /// Nodes that read `v`, in execution order (a node reading `v` twice appears once).
    pub fn consumers(&self, v: ValueId) -> Vec<NodeId> {
        self.nodes()
            .filter(|(_, n)| n.inputs.contains(&v))
            .map(|(id, _)| id)
            .collect()
    }

    /// The value named `name`, if any.
    pub fn find_value(&self, name: &str) -> Option<ValueId> {
        self.values
            .iter()
            .position(|v| v.name == name)
            .map(|i| ValueId(i as u32))
    }
}
