//! Winograd convolutions as a planning decision: the `winograd` pass of
//! [`super::decide::PASSES`], after `conv tiles`.
//!
//! A 3 x 3 stride-1 Conv ([`crate::gemm::winograd::applies`]) runs Winograd F(4x4, 3x3) when
//! its step has the scratch [`crate::gemm::winograd::scratch_bytes`] asks (the transformed
//! weights and one tile block per thread) at one of its tile blocks. The pass grows a Conv's
//! scratch to the largest block whose step's live bytes stay at or below the peak of the
//! decisions so far (measured as `tiles.rs` measures it), so the arena's peak does not grow;
//! a Conv whose planned scratch already holds one takes it as it is. `ARENAC_WINOGRAD=1` grows it wherever the geometry
//! fits (benchmarks), `0` never. The code generator runs the path where [`chosen`] holds —
//! the same rule on the planned bytes — and names the kernel `conv2d winograd`.

use super::decide::{Decide, Decisions, aligned, step_bytes};
use super::{BufferKind, is_constant};
use crate::arena::ArenaPlan;
use crate::gemm::conv::ConvParams;
use crate::gemm::winograd;
use crate::ir::graph::{Graph, NodeId};
use crate::ops::Op;

/// The geometry of node `id` when it is a Conv Winograd may run ([`winograd::applies`]) on
/// `threads` threads; `None` otherwise.
pub fn winograd_conv(g: &Graph, id: NodeId, threads: usize) -> Option<ConvParams> {
    let node = g.node(id);
    let Op::Conv(a) = &node.op else {
        return None;
    };
    let x = g.value(*node.inputs.first()?);
    let y = g.value(*node.outputs.first()?);
    if x.ty.dtype != crate::ir::types::DType::F32 || y.ty.dtype != crate::ir::types::DType::F32 {
        return None;
    }
    let constant = node.inputs.get(1).is_some_and(|&w| is_constant(g, w));
    let p = crate::ops::conv::scratch_params(a, &x.ty, &y.ty, constant, threads)?;
    winograd::applies(&p).then_some(p)
}

/// Whether node `id` of the plan runs Winograd: enabled in the plan's options, a Conv it
/// applies to, and `planned` scratch bytes at least [`winograd::scratch_bytes`] at one of its
/// [`winograd::block_sizes`].
pub fn chosen(g: &Graph, plan: &ArenaPlan, id: NodeId, planned: usize) -> bool {
    let o = plan.options.liveness;
    o.winograd
        && o.scratch
        && winograd_conv(g, id, o.threads.max(1))
            .is_some_and(|p| winograd::block_for_scratch(&p, planned).is_some())
}

/// The Convs of the plan that run Winograd, in schedule order.
pub fn chosen_nodes(g: &Graph, plan: &ArenaPlan) -> Vec<NodeId> {
    plan.liveness
        .buffers
        .iter()
        .filter(|b| b.kind == BufferKind::Scratch)
        .filter_map(|b| b.node.filter(|&id| chosen(g, plan, id, b.interval.size)))
        .collect()
}

/// The `winograd` pass: each Winograd-able Conv's scratch grown to
/// [`winograd::scratch_bytes`] where its step stays at or below the peak of aligned live
/// bytes of the buffers decided so far; then, since a larger buffer can still place worse,
/// the arena is placed ([`place`]) with all of them and, if it grew, they are taken one at a
/// time (the most multiply-adds first), each kept only when the placed arena does not grow.
pub(super) fn choose(cx: &Decide<'_>, d: &mut Decisions) {
    let live = cx.measure(d);
    let (mut total, peak) = step_bytes(&live);
    let forced = winograd::forced();
    // (step, bytes, multiply-adds) of the Convs whose step keeps the peak.
    let mut picks = Vec::new();
    for b in &live.buffers {
        if b.kind != BufferKind::Scratch {
            continue;
        }
        let Some(p) = b
            .node
            .and_then(|id| winograd_conv(cx.g, id, cx.opts.threads))
        else {
            continue;
        };
        let step = b.interval.start;
        let Some(t) = total.get_mut(step) else {
            continue;
        };
        if winograd::block_for_scratch(&p, b.interval.size).is_some() || step >= d.scratch.len() {
            continue;
        }
        let rest = *t - aligned(b.interval.size);
        // The largest tile block whose step keeps the peak (forced: the default block).
        let fits = winograd::block_sizes(&p)
            .map(|tb| winograd::scratch_bytes(&winograd::with_block(&p, tb)))
            .find(|&bytes| forced || rest + aligned(bytes) <= peak);
        if let Some(bytes) = fits {
            *t = rest + aligned(bytes);
            picks.push((step, bytes, p.m * p.c * p.oh * p.ow * p.n));
        }
    }
    if picks.is_empty() {
        return;
    }
    let base = if forced {
        usize::MAX
    } else {
        cx.placed_arena(d)
    };
    let before: Vec<usize> = picks.iter().map(|&(s, _, _)| d.scratch[s]).collect();
    for &(s, bytes, _) in &picks {
        d.scratch[s] = bytes;
    }
    if cx.placed_arena(d) <= base {
        return;
    }
    for (&(s, _, _), &b) in picks.iter().zip(&before) {
        d.scratch[s] = b;
    }
    picks.sort_by_key(|&(_, _, macs)| std::cmp::Reverse(macs));
    for (s, bytes, _) in picks {
        let old = d.scratch[s];
        d.scratch[s] = bytes;
        if cx.placed_arena(d) > base {
            d.scratch[s] = old;
        }
    }
}
