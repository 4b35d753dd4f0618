//! Control-flow nodes. A subgraph is lowered by the same node lowering as the main graph,
//! inside a [`Frame`]: its plan's offsets are relative to the holding node's scratch buffer
//! (the sub-arena), and its outer values are the holding node's input operands.
//!
//! - `If`: both branches lowered into blocks of the entry function, chosen at run time by the
//!   condition byte; each branch ends by copying its outputs into the node's outputs.
//! - `Loop`/`Scan`: the body lowered once into a counted loop of the entry function (not
//!   unrolled). Before it, the initial condition and carried values are copied into the body's
//!   input buffers; each iteration stores its number into the body's iteration input, copies
//!   its slice of every scan input in (an [`Operand::Indexed`] source moving with the
//!   counter), runs the body, copies every scan output's slice out to its place in the node's
//!   output, then copies the next condition and carried values back into the body's inputs
//!   (planned live through the whole body, so nothing else shares their bytes). After it, the
//!   carried values are copied to the node's outputs. A loop that may stop early checks the
//!   condition byte before each iteration.

use super::super::fault::{FaultSink, emit_trap};
use super::super::kernels::movement::CopyDesc;
use super::super::program::{LoopSpec, Operand, Program};
use super::super::weights::WeightsBuilder;
use super::movement::copy_call;
use super::{Ctx, Frame, dense};
use crate::arena::ArenaPlan;
use crate::error::Error;
use crate::ir::graph::{Graph, ValueId, ValueKind};
use crate::ir::types::TensorType;
use crate::ops::control::{IfAttrs, LoopAttrs};

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
    let frame = Frame {
        base,
        outer,
        depth: cx.frame.depth,
    };
    let mut branch = |g: &Graph, plan: &ArenaPlan, prog: &mut Program| -> Result<(), Error> {
        lower_graph(g, plan, &frame, prog, w)?;
        for (&v, &o) in g.outputs.iter().zip(&n.outputs) {
            let src = sub_operand(cx, g, plan, &frame, v, w)?;
            copy_value(cx, prog, &g.value(v).ty, src, cx.arena(o)?)?;
        }
        Ok(())
    };
    // A branch that cannot run is a call of the trap kernel: it reports a fault, and the
    // node's outputs are left as they were (the run's outputs are not valid then).
    let mut arm = |then: bool, prog: &mut Program| -> Result<(), Error> {
        match a.unrunnable.as_ref().filter(|u| u.then == then) {
            Some(u) => {
                let (node, op) = cx.label();
                let args = prog.trap_sink(&node, &op, u.message());
                let f = prog.kernel("trap".into(), 2, (&node, &op), |b, p, _| {
                    if let [record, tag] = *p {
                        emit_trap(b, FaultSink { record, tag }, i64::from(then));
                    }
                })?;
                prog.call(f, args.to_vec());
                Ok(())
            }
            None if then => branch(&a.then_branch, then_plan, prog),
            None => branch(&a.else_branch, else_plan, prog),
        }
    };
    if let Some(t) = cx.constant(cond) {
        let taken = t.to_i64_vec().first().copied().unwrap_or(0) != 0;
        return arm(taken, prog);
    }
    let cond = cx.arena(cond)?;
    prog.open();
    arm(true, prog)?;
    let then_block = prog.close();
    prog.open();
    arm(false, prog)?;
    let else_block = prog.close();
    prog.branch(cond, then_block, else_block);
    Ok(())
}

/// The copy of one slice along `axis` of a tensor of type `full` (from the full tensor into a
/// contiguous slice when `into_slice`, else back), and the bytes between two slices.
fn slice_copy(
    cx: &Ctx<'_>,
    full: &TensorType,
    axis: usize,
    into_slice: bool,
) -> Result<(CopyDesc, usize), Error> {
    let elem = full.dtype.size();
    if ![1, 2, 4, 8].contains(&elem) || axis >= full.shape.len() {
        return Err(cx.err(format!("no kernel for slicing {full} along axis {axis}")));
    }
    let strides = crate::ir::types::strides(&full.shape);
    let mut dims = full.shape.clone();
    dims.remove(axis);
    let mut outer: Vec<i64> = strides.iter().map(|&s| s as i64).collect();
    outer.remove(axis);
    let inner: Vec<i64> = crate::ir::types::strides(&dims)
        .iter()
        .map(|&s| s as i64)
        .collect();
    let desc = if into_slice {
        CopyDesc::new(elem, &dims, &outer, &inner)
    } else {
        CopyDesc::new(elem, &dims, &inner, &outer)
    };
    Ok((desc, strides[axis] * elem))
}

/// `op` (the whole scan tensor) as the address of iteration `i`'s slice: slice `i`, or slice
/// `trips - 1 - i` when `reverse`, `step` bytes apart; `level` is the loop's nesting level.
fn indexed(
    cx: &Ctx<'_>,
    op: Operand,
    step: usize,
    trips: usize,
    reverse: bool,
    level: usize,
) -> Result<Operand, Error> {
    let (weights, base) = match op {
        Operand::Arena(o) => (false, o),
        Operand::Weights(o) => (true, o),
        other => return Err(cx.err(format!("a scan tensor at {other:?} cannot be sliced"))),
    };
    let last = trips.saturating_sub(1).saturating_mul(step);
    let step = isize::try_from(step).map_err(|_| cx.err("scan slices too far apart"))?;
    Ok(if reverse {
        Operand::Indexed {
            weights,
            offset: base + last,
            step: -step,
            level,
        }
    } else {
        Operand::Indexed {
            weights,
            offset: base,
            step,
            level,
        }
    })
}

/// `Loop`/`Scan` (see the module doc).
pub(super) fn lower_loop(
    cx: &Ctx<'_>,
    a: &LoopAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let [plan] = sub_plans(cx)? else {
        return Err(cx.err("expected one body plan (a planner bug)"));
    };
    let base = sub_arena(cx, plan.arena_bytes)?;
    let ins: Vec<Operand> = n
        .inputs
        .iter()
        .map(|&v| cx.operand(v, w))
        .collect::<Result<_, _>>()?;
    let level = cx.frame.depth;
    let frame = Frame {
        base,
        outer: ins.clone(),
        depth: level + 1,
    };
    let body = &a.body;
    let (c, first) = (usize::from(a.cond), a.first_carried_input());
    let (bin, bout) = (&body.inputs, &body.outputs);
    let missing = || cx.err("the body's signature does not match the node (an import bug)");
    let input = |i: usize| bin.get(i).copied().ok_or_else(missing);
    let output = |i: usize| bout.get(i).copied().ok_or_else(missing);
    let node_in = |i: usize| ins.get(i).copied().ok_or_else(missing);
    let ty = |v: ValueId| body.value(v).ty.clone();
    let iter_slot = match a.iter_input {
        true => Some(sub_operand(cx, body, plan, &frame, input(0)?, w)?),
        false => None,
    };
    let cond_slot = match a.cond {
        true => Some(sub_operand(cx, body, plan, &frame, input(first - 1)?, w)?),
        false => None,
    };
    // The initial state.
    if let Some(slot) = cond_slot {
        copy_value(cx, prog, &ty(input(first - 1)?), node_in(0)?, slot)?;
    }
    for j in 0..a.carried {
        let v = input(first + j)?;
        let slot = sub_operand(cx, body, plan, &frame, v, w)?;
        copy_value(cx, prog, &ty(v), node_in(c + j)?, slot)?;
    }
    prog.open();
    for (k, s) in a.scan_in.iter().enumerate() {
        let x = *n.inputs.get(c + a.carried + k).ok_or_else(missing)?;
        let slice = input(first + a.carried + k)?;
        if ty(slice).numel() == Some(0) {
            continue;
        }
        let (desc, step) = slice_copy(cx, cx.ty(x), s.axis, true)?;
        let src = indexed(
            cx,
            node_in(c + a.carried + k)?,
            step,
            a.trips,
            s.reverse,
            level,
        )?;
        let dst = sub_operand(cx, body, plan, &frame, slice, w)?;
        copy_call(cx, prog, desc, src, dst)?;
    }
    lower_graph(body, plan, &frame, prog, w)?;
    for (k, s) in a.scan_out.iter().enumerate() {
        let v = output(c + a.carried + k)?;
        let y = *n.outputs.get(a.carried + k).ok_or_else(missing)?;
        if ty(v).numel() == Some(0) {
            continue;
        }
        let (desc, step) = slice_copy(cx, cx.ty(y), s.axis, false)?;
        let src = sub_operand(cx, body, plan, &frame, v, w)?;
        let dst = indexed(cx, cx.arena(y)?, step, a.trips, s.reverse, level)?;
        copy_call(cx, prog, desc, src, dst)?;
    }
    // The next state into the body's inputs.
    if let Some(slot) = cond_slot {
        let v = output(0)?;
        let src = sub_operand(cx, body, plan, &frame, v, w)?;
        copy_value(cx, prog, &ty(v), src, slot)?;
    }
    for j in 0..a.carried {
        let v = output(c + j)?;
        let src = sub_operand(cx, body, plan, &frame, v, w)?;
        let slot = sub_operand(cx, body, plan, &frame, input(first + j)?, w)?;
        copy_value(cx, prog, &ty(v), src, slot)?;
    }
    let block = prog.close();
    let spec = LoopSpec {
        trips: a.trips,
        iter: iter_slot,
        cond: if a.early_exit { cond_slot } else { None },
    };
    prog.repeat(spec, block);
    // The final state.
    for j in 0..a.carried {
        let v = input(first + j)?;
        let slot = sub_operand(cx, body, plan, &frame, v, w)?;
        let y = *n.outputs.get(j).ok_or_else(missing)?;
        copy_value(cx, prog, &ty(v), slot, cx.arena(y)?)?;
    }
    Ok(())
}
