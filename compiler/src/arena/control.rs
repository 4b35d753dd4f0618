//! Planning the graphs held by control-flow nodes (an `If`'s branches, a `Loop`'s body),
//! recursively: each subgraph gets an arena plan of its own, made by the same pipeline, whose
//! offsets start at 0; at run time that arena is the node's scratch buffer in the enclosing
//! arena. The node's scratch ([`crate::ops::Op::scratch_bytes`]) is the size recorded in its
//! op: for an `If`, the larger branch's arena (the branches never run together, so they share
//! it); for a `Loop`, the body's arena. A loop body's carried inputs are planned live through
//! the whole body ([`pinned_inputs`]): the loop copies the next state into them at the end of
//! each iteration.
//!
//! The enclosing graph's liveness sees the node as one opaque step: its inputs (condition and
//! captured values) are read at that step, so they stay live (and are not overwritten) while
//! the subgraph runs; its outputs are written at that step.

use std::collections::BTreeMap;

use super::{ArenaPlan, PlanOptions, plan_arena, plan_graph};
use crate::error::Error;
use crate::ir::graph::{Graph, NodeId};
use crate::ops::control::{pinned_inputs, planning_parts, recorded_arena};

/// The plans of the subgraphs of each control node, by node, in
/// [`crate::ops::Op::subgraphs`] order.
pub type SubPlans = BTreeMap<NodeId, Vec<ArenaPlan>>;

/// The nodes of `g` holding subgraphs, in order.
fn control_nodes(g: &Graph) -> Vec<NodeId> {
    g.order()
        .iter()
        .copied()
        .filter(|&id| !g.node(id).op.subgraphs().is_empty())
        .collect()
}

/// The arena a node's subgraph plans need: the largest (they never run at the same time).
fn sub_arena(plans: &[ArenaPlan]) -> usize {
    plans.iter().map(|p| p.arena_bytes).max().unwrap_or(0)
}

/// Plans every subgraph of `g` with [`plan_graph`] (their own passes rewrite them in place)
/// and records each node's sub-arena in its op.
pub(super) fn plan_in_place(g: &mut Graph, opts: &PlanOptions) -> Result<SubPlans, Error> {
    let mut all = SubPlans::new();
    for id in control_nodes(g) {
        let name = g.node(id).name.clone();
        let pins = pinned_inputs(&g.node(id).op);
        let Some((graphs, arena)) = planning_parts(g.op_mut(id)) else {
            continue;
        };
        let mut plans = Vec::with_capacity(graphs.len());
        for (sub, pins) in graphs.into_iter().zip(pins) {
            // Planned with the pinned inputs as extra outputs (the passes keep outputs and
            // remap their ids), which are then dropped again.
            let n = sub.outputs.len();
            sub.outputs.extend(pins);
            // Their inputs are written by the node: stored as typed.
            let sub_opts = PlanOptions {
                narrow_inputs: false,
                ..*opts
            };
            let plan = plan_graph(sub, &sub_opts);
            sub.outputs.truncate(n);
            plans.push(plan.map_err(|e| within(&name, e))?);
        }
        *arena = sub_arena(&plans);
        all.insert(id, plans);
    }
    Ok(all)
}

/// Plans every subgraph of `g` as it is ([`plan_arena`]). When a node's recorded sub-arena is
/// not the planned one (a graph not planned by [`plan_graph`]), also returns a copy of `g`
/// recording the planned sizes, for the enclosing liveness (same node and value ids).
pub(super) fn plan_as_is(
    g: &Graph,
    opts: &PlanOptions,
) -> Result<(SubPlans, Option<Graph>), Error> {
    let mut all = SubPlans::new();
    let mut patched: Option<Graph> = None;
    for id in control_nodes(g) {
        let node = g.node(id);
        let mut plans = Vec::new();
        for ((_, sub), pins) in node.op.subgraphs().into_iter().zip(pinned_inputs(&node.op)) {
            let plan = if pins.is_empty() {
                plan_arena(sub, opts)
            } else {
                let mut pinned = sub.clone();
                pinned.outputs.extend(pins);
                plan_arena(&pinned, opts)
            };
            plans.push(plan.map_err(|e| within(&node.name, e))?);
        }
        let need = sub_arena(&plans);
        if recorded_arena(&node.op) != need {
            let copy = patched.get_or_insert_with(|| g.clone());
            if let Some((_, arena)) = planning_parts(copy.op_mut(id)) {
                *arena = need;
            }
        }
        all.insert(id, plans);
    }
    Ok((all, patched))
}

/// A planning failure inside node `name`'s subgraph, naming it.
fn within(name: &str, e: Error) -> Error {
    match e {
        Error::PlanInternal(m) => {
            Error::PlanInternal(format!("in a subgraph of node '{name}': {m}"))
        }
        other => other,
    }
}
