//! Control-flow nodes. A subgraph is lowered by the same node lowering as the main graph,
//! inside a [`Frame`]: its plan's offsets are relative to the holding node's scratch buffer
//! (the sub-arena), and its outer values are the holding node's input operands.
//!
//! - `If`: both branches lowered into blocks of the entry function, chosen at run time by the
//!   condition byte; each branch ends by copying its outputs into the node's outputs.

use super::super::kernels::movement::CopyDesc;
use super::super::program::{Operand, Program};
use super::super::weights::WeightsBuilder;
use super::movement::copy_call;
use super::{Ctx, Frame, dense};
use crate::arena::ArenaPlan;
use crate::error::Error;
use crate::ir::graph::{Graph, ValueId, ValueKind};
use crate::ir::types::TensorType;
use crate::ops::control::IfAttrs;

/// Lowers every node of `g` in its plan's schedule.
fn lower_graph(
    g: &Graph,
    plan: &ArenaPlan,
    frame: &Frame,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    for &id in &plan.schedule {
        super::node(g, plan, frame, id, prog, w)?;
    }
    Ok(())
}

/// The plans of the node's subgraphs (made with the enclosing plan).
fn sub_plans<'a>(cx: &Ctx<'a>) -> Result<&'a [ArenaPlan], Error> {
    cx.plan
        .sub_plans
        .get(&cx.id)
        .map(Vec::as_slice)
        .ok_or_else(|| cx.err("its subgraphs were not planned (a planner bug)"))
}

/// The arena offset of the node's sub-arena (its scratch buffer), checked to hold `need` bytes.
fn sub_arena(cx: &Ctx<'_>, need: usize) -> Result<usize, Error> {
    if need == 0 {
        return Ok(0);
    }
    match cx.scratch()? {
        Operand::Arena(o) if dense::planned_scratch(cx) >= need => Ok(o),
        _ => Err(cx.err(format!(
            "its subgraphs need a {need}-byte arena but its scratch buffer is {} bytes (a \
             planner bug)",
            dense::planned_scratch(cx)
        ))),
    }
}

/// The operand of value `v` of subgraph `g` (planned by `plan`, placed by `frame`).
fn sub_operand(
    cx: &Ctx<'_>,
    g: &Graph,
    plan: &ArenaPlan,
    frame: &Frame,
    v: ValueId,
    w: &mut WeightsBuilder,
) -> Result<Operand, Error> {
    let val = g.value(v);
    match &val.kind {
        ValueKind::Constant(t) => Ok(Operand::Weights(w.tensor(t))),
        ValueKind::Outer(k) => frame
            .outer
            .get(*k)
            .copied()
            .ok_or_else(|| cx.err(format!("'{}' reads a missing node input {k}", val.name))),
        _ => {
            let offset = plan
                .value_offset(v)
                .filter(|&o| {
                    val.ty
                        .bytes()
                        .and_then(|b| b.checked_add(o))
                        .is_some_and(|end| end <= plan.arena_bytes)
                })
                .ok_or_else(|| {
                    cx.err(format!(
                        "'{}' has no place in its subgraph's arena (a planner bug)",
                        val.name
                    ))
                })?;
            Ok(Operand::Arena(frame.base + offset))
        }
    }
}

/// Copies a value of type `ty` from `src` to `dst` (nothing when they are the same place).
fn copy_value(
    cx: &Ctx<'_>,
    prog: &mut Program,
    ty: &TensorType,
    src: Operand,
    dst: Operand,
) -> Result<(), Error> {
    let n = ty.numel().unwrap_or(0);
    if src == dst || n == 0 {
        return Ok(());
    }
    let elem = ty.dtype.size();
    if ![1, 2, 4, 8].contains(&elem) {
        return Err(cx.err(format!("no kernel for copying {} yet", ty.dtype.name())));
    }
    copy_call(cx, prog, CopyDesc::new(elem, &[n], &[1], &[1]), src, dst)
}

/// `If`: each branch in a block of its own, its outputs copied into the node's outputs; the
/// condition byte chooses the block. A constant condition (a graph built without the import's
/// inlining) lowers the taken branch alone.
pub(super) fn lower_if(
    cx: &Ctx<'_>,
    a: &IfAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let [then_plan, else_plan] = sub_plans(cx)? else {
        return Err(cx.err("expected two branch plans (a planner bug)"));
    };
    let base = sub_arena(cx, then_plan.arena_bytes.max(else_plan.arena_bytes))?;
    let outer: Vec<Operand> = n
        .inputs
        .iter()
        .map(|&v| cx.operand(v, w))
        .collect::<Result<_, _>>()?;
    let cond = cx.input(0)?;
    let frame = Frame { base, outer };
    let mut branch = |g: &Graph, plan: &ArenaPlan, prog: &mut Program| -> Result<(), Error> {
        lower_graph(g, plan, &frame, prog, w)?;
        for (&v, &o) in g.outputs.iter().zip(&n.outputs) {
            let src = sub_operand(cx, g, plan, &frame, v, w)?;
            copy_value(cx, prog, &g.value(v).ty, src, cx.arena(o)?)?;
        }
        Ok(())
    };
    if let Some(t) = cx.constant(cond) {
        let taken = t.to_i64_vec().first().copied().unwrap_or(0) != 0;
        return if taken {
            branch(&a.then_branch, then_plan, prog)
        } else {
            branch(&a.else_branch, else_plan, prog)
        };
    }
    let cond = cx.arena(cond)?;
    prog.open();
    branch(&a.then_branch, then_plan, prog)?;
    let then_block = prog.close();
    prog.open();
    branch(&a.else_branch, else_plan, prog)?;
    let else_block = prog.close();
    prog.branch(cond, then_block, else_block);
    Ok(())
}
