//! `fuse_elementwise`: groups of connected f32 element-wise nodes become one
//! [`Op::FusedElementwise`] node, computed in one loop with the intermediates in registers.
//!
//! A group has one output node (its *root*) and grows backwards from it: a node producing a
//! value that a member reads joins when
//! - it is fusible: [`Op::Unary`], [`Op::ClipDynamic`] (its run-time bounds of no higher rank
//!   than its output), [`Op::Binary`] (Add, Sub, Mul, Div, Pow, PRelu) or [`Op::Variadic`], one
//!   output, every input and output f32;
//! - every reader of that value is already a member (so the value is needed nowhere else and
//!   never has to exist in memory) and the value is not a graph output;
//! - that value has the root's output shape (inputs from outside the group may broadcast, but
//!   nothing inside the group changes the shape).
//!
//! Only the root's value leaves the group, so the group is convex: the fused node can take
//! the root's place in the order. A group of one node is left alone. Scalar constants read by
//! members are folded into the program; other constants and non-members' values become the
//! fused node's inputs. Nothing else in the graph changes (names, order of the other nodes).
//!
//! [`fuse_elementwise16`] does the same on the 16-bit data of `--activations f16|bf16`
//! (after `crate::analysis::act_type` retyped it): members are the ops the staged program
//! runs (the 16-bit unary activations, Add/Sub/Mul/Div), every input and output of the one
//! 16-bit type, and a group is kept only when `crate::gemm::stage16::ew` runs its program
//! (its steps and inputs within that kernel's bounds, each input broadcasting as one block
//! of dims): GELU's Div, Erf, Add, Mul, Mul become one pass over the data, computed in f32
//! and rounded once.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::types::DType;
use crate::ops::{BinaryOp, FusedArg, FusedAttrs, FusedStep, Op};

/// Most nodes in one group (bounds the size of a kernel).
pub const MAX_GROUP_NODES: usize = 48;

/// What [`fuse_elementwise`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FuseStats {
    /// Fused nodes created.
    pub groups: usize,
    /// Nodes they replaced.
    pub nodes_fused: usize,
    /// Residual `Add`s fused into the Conv before them ([`residual::fuse_residual`]).
    pub residuals: usize,
}

/// Whether node `n` may be a member of a fused group on data of type `dt` (f32, or the
/// 16-bit type of [`fuse_elementwise16`]).
fn fusible(g: &Graph, id: NodeId, dt: DType) -> bool {
    let n = g.node(id);
    let out_rank = n.outputs.first().map_or(0, |&v| g.value(v).ty.shape.len());
    let op_ok = match &n.op {
        _ if dt != DType::F32 => match &n.op {
            Op::Unary(u) => crate::analysis::act_type::unary16(u),
            Op::Binary(b) => matches!(
                b,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
            ),
            _ => false,
        },
        Op::Unary(_) | Op::Variadic(_) => true,
        // A bound of shape [1] on a scalar x would not broadcast in the fused loop nest.
        Op::ClipDynamic { .. } => n
            .inputs
            .iter()
            .all(|&v| g.value(v).ty.shape.len() <= out_rank),
        Op::Binary(b) => matches!(
            b,
            BinaryOp::Add
                | BinaryOp::Sub
                | BinaryOp::Mul
                | BinaryOp::Div
                | BinaryOp::Pow
                | BinaryOp::PRelu
        ),
        _ => false,
    };
    op_ok
        && n.outputs.len() == 1
        && n.inputs
            .iter()
            .chain(&n.outputs)
            .all(|&v| g.value(v).ty.dtype == dt)
}

/// Fuses every group of two or more element-wise nodes (see the module doc) in `g`.
pub fn fuse_elementwise(g: &mut Graph) -> FuseStats {
    fuse_groups(g, find_groups(g, DType::F32))
}

/// Fuses the groups of 16-bit element-wise nodes of type `dt` (F16 or BF16) that the staged
/// element-wise kernel runs (see the module doc); nothing for another `dt`.
pub fn fuse_elementwise16(g: &mut Graph, dt: DType) -> FuseStats {
    if !matches!(dt, DType::F16 | DType::BF16) {
        return FuseStats::default();
    }
    let groups: Vec<Vec<NodeId>> = find_groups(g, dt)
        .into_iter()
        .filter(|members| runs16(g, members, dt))
        .collect();
    fuse_groups(g, groups)
}

/// Whether `crate::gemm::stage16::ew` runs the fused program of `members` (the root last):
/// the program within its bounds, every input of type `dt` broadcasting as one block of the
/// root's output dims.
fn runs16(g: &Graph, members: &[NodeId], dt: DType) -> bool {
    use crate::gemm::stage16::ew;
    let Some(&out) = members.last().and_then(|&r| g.node(r).outputs.first()) else {
        return false;
    };
    let y = &g.value(out).ty.shape;
    let (op, inputs) = program(g, members);
    ew::Program::of(&op, inputs.len()).is_some()
        && inputs.iter().all(|&v| {
            let t = &g.value(v).ty;
            t.dtype == dt && ew::bcast(&t.shape, y).is_some()
        })
}

fn fuse_groups(g: &mut Graph, groups: Vec<Vec<NodeId>>) -> FuseStats {
    if groups.is_empty() {
        return FuseStats::default();
    }
    let stats = FuseStats {
        groups: groups.len(),
        nodes_fused: groups.iter().map(|m| m.len()).sum(),
        residuals: 0,
    };
    *g = rebuild(g, &groups);
    stats
}

/// The groups on data of type `dt`, each as its members in execution order (the root last).
fn find_groups(g: &Graph, dt: DType) -> Vec<Vec<NodeId>> {
    let mut readers: HashMap<ValueId, BTreeSet<NodeId>> = HashMap::new();
    for (id, n) in g.nodes() {
        for &v in &n.inputs {
            readers.entry(v).or_default().insert(id);
        }
    }
    let pos: HashMap<NodeId, usize> = g.order().iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let outputs: BTreeSet<ValueId> = g.outputs.iter().copied().collect();
    let mut taken: BTreeSet<NodeId> = BTreeSet::new();
    let mut groups = Vec::new();
    for &root in g.order().iter().rev() {
        if taken.contains(&root) || !fusible(g, root, dt) {
            continue;
        }
        let Some(&out) = g.node(root).outputs.first() else {
            continue;
        };
        let shape = &g.value(out).ty.shape;
        let mut members: BTreeSet<NodeId> = BTreeSet::from([root]);
        loop {
            let mut grew = false;
            let candidates: Vec<ValueId> = members
                .iter()
                .flat_map(|&m| g.node(m).inputs.iter().copied())
                .collect();
            for v in candidates {
                if members.len() >= MAX_GROUP_NODES {
                    break;
                }
                let ValueKind::Computed(p) = g.value(v).kind else {
                    continue;
                };
                let joins = !members.contains(&p)
                    && !taken.contains(&p)
                    && fusible(g, p, dt)
                    && !outputs.contains(&v)
                    && g.value(v).ty.shape == *shape
                    && readers
                        .get(&v)
                        .is_some_and(|r| r.iter().all(|c| members.contains(c)));
                if joins {
                    members.insert(p);
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
        if members.len() < 2 {
            continue;
        }
        taken.extend(members.iter().copied());
        let mut ordered: Vec<NodeId> = members.into_iter().collect();
        ordered.sort_by_key(|n| pos.get(n).copied().unwrap_or(usize::MAX));
        groups.push(ordered);
    }
    groups
}

/// The fused op of one group and its external inputs.
fn program(g: &Graph, members: &[NodeId]) -> (Op, Vec<ValueId>) {
    let step_of: BTreeMap<ValueId, usize> = members
        .iter()
        .enumerate()
        .filter_map(|(k, &m)| g.node(m).outputs.first().map(|&v| (v, k)))
        .collect();
    let mut inputs: Vec<ValueId> = Vec::new();
    let mut steps = Vec::with_capacity(members.len());
    for &m in members {
        let n = g.node(m);
        let args = n
            .inputs
            .iter()
            .map(|&v| {
                if let Some(&k) = step_of.get(&v) {
                    return FusedArg::Step(k);
                }
                if let ValueKind::Constant(t) = &g.value(v).kind
                    && t.numel() == 1
                {
                    return FusedArg::Const(t.clone());
                }
                let i = inputs.iter().position(|&x| x == v).unwrap_or_else(|| {
                    inputs.push(v);
                    inputs.len() - 1
                });
                FusedArg::Input(i)
            })
            .collect();
        steps.push(FusedStep {
            op: n.op.clone(),
            args,
        });
    }
    (Op::FusedElementwise(FusedAttrs { steps }), inputs)
}

/// A copy of `g` with each group replaced by one fused node at its root's place. Input and
/// constant values keep their relative order, computed values theirs.
fn rebuild(g: &Graph, groups: &[Vec<NodeId>]) -> Graph {
    let mut group_of: HashMap<NodeId, usize> = HashMap::new();
    for (i, m) in groups.iter().enumerate() {
        for &n in m {
            group_of.insert(n, i);
        }
    }
    rebuild_with(g, |id| {
        match group_of.get(&id).and_then(|&i| groups.get(i)) {
            Some(members) if members.last() == Some(&id) => {
                let (op, inputs) = program(g, members);
                let n = g.node(id);
                Emit::Replace(Box::new(NewNode {
                    name: n.name.clone(),
                    op,
                    inputs,
                    outputs: n.outputs.to_vec(),
                }))
            }
            Some(_) => Emit::Skip,
            None => Emit::Keep,
        }
    })
}

/// What [`rebuild_with`] writes for one node of the old graph.
pub(crate) enum Emit {
    /// The node as it is.
    Keep,
    /// Nothing (the node is part of another's replacement).
    Skip,
    /// Another node at this place.
    Replace(Box<NewNode>),
}

/// A node [`rebuild_with`] writes instead of an old one: its name, op, inputs and outputs
/// (values of the old graph; the outputs' names and types are kept).
pub(crate) struct NewNode {
    /// Node name.
    pub name: String,
    /// The op.
    pub op: Op,
    /// Inputs (old graph's values).
    pub inputs: Vec<ValueId>,
    /// Outputs (old graph's values).
    pub outputs: Vec<ValueId>,
}

/// A copy of `g` with each node written as `emit` says, in `g`'s order. Input and constant
/// values keep their relative order, computed values theirs.
pub(crate) fn rebuild_with(g: &Graph, emit: impl Fn(NodeId) -> Emit) -> Graph {
    let mut ng = Graph::new(g.name.clone(), g.opset);
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    for v in g.value_ids() {
        let val = g.value(v);
        if !matches!(val.kind, ValueKind::Computed(_)) {
            map.insert(
                v,
                ng.add_value(val.name.clone(), val.ty.clone(), val.kind.clone()),
            );
        }
    }
    for (id, n) in g.nodes() {
        let (name, op, inputs, outputs) = match emit(id) {
            Emit::Skip => continue,
            Emit::Keep => (
                n.name.clone(),
                n.op.clone(),
                n.inputs.to_vec(),
                n.outputs.to_vec(),
            ),
            Emit::Replace(n) => (n.name, n.op, n.inputs, n.outputs),
        };
        let ins: Vec<ValueId> = inputs
            .iter()
            .map(|v| map.get(v).copied().unwrap_or(*v))
            .collect();
        let outs: Vec<(String, _)> = outputs
            .iter()
            .map(|&v| (g.value(v).name.clone(), g.value(v).ty.clone()))
            .collect();
        let nid = ng.add_node(name, op, &ins, &outs);
        for (&old, &new) in outputs.iter().zip(ng.node(nid).outputs.iter()) {
            map.insert(old, new);
        }
    }
    ng.inputs = g
        .inputs
        .iter()
        .map(|v| map.get(v).copied().unwrap_or(*v))
        .collect();
    ng.outputs = g
        .outputs
        .iter()
        .map(|v| map.get(v).copied().unwrap_or(*v))
        .collect();
    ng
}

pub mod residual;
#[cfg(test)]
mod tests;
