//! Conv im2col tiles as a planning decision.
//!
//! An im2col Conv's scratch is one panel of `K` rows by a tile of output pixels
//! ([`crate::gemm::conv::conv2d_tiles`]: 256 by default, down to 64). At a Conv where the peak
//! is reached (its input, its output and the panel live together, AlexNet's and VGG-19's
//! peaks), a smaller tile lowers the peak; elsewhere the default tile is kept, the fastest.
//!
//! The passes make their choices (shrinking pooling writes, in-place Concats) with every such
//! scratch at its smallest tile ([`smallest`]), so they aim at the lowest peak
//! reachable; [`relax`] then gives each Conv the largest tile whose step stays at or below
//! that peak. Only the Convs whose step would otherwise exceed it are shrunk, each just
//! enough, and the peak is the smallest-tile peak. The code generator reads the tile back
//! from the planned bytes ([`crate::gemm::conv::conv2d_tile_for_scratch`]), one function for
//! both sides.
//!
//! A Conv staged on 16-bit data (`--activations f16|bf16`) is planned alike: its scratch at
//! the smallest staging budget while the passes choose, then the largest budget
//! ([`crate::gemm::stage16::conv::budgets`]) whose step stays at or below the peak; the
//! lowering reads it back with [`crate::gemm::stage16::conv::budget_for_scratch`]. A staged
//! Gemm/MatMul likewise by its block of A's rows
//! ([`crate::gemm::stage16::matmul::MmStage::blocks`], read back by `block_for_scratch`).

use super::decide::{Decide, Decisions, aligned, step_bytes};
use super::{BufferKind, is_constant, node_scratch};
use crate::gemm::conv::{ConvParams, conv2d_plan_bytes, conv2d_tiles};
use crate::ir::graph::{Graph, NodeId};
use crate::ops::Op;
use std::collections::BTreeSet;

/// The geometry of a Conv node whose scratch depends on its tile (the im2col path), or whose
/// kernel reads none with its weights kept f32 (`f32_weights`: the direct kernels,
/// `pw_small`; [`crate::gemm::conv::conv2d_plan_bytes`] plans it none); `None` for every
/// other node.
fn tiled_conv(g: &Graph, id: NodeId, threads: usize, f32_weights: bool) -> Option<ConvParams> {
    let node = g.node(id);
    let Op::Conv(a) = &node.op else {
        return None;
    };
    let x = g.value(*node.inputs.first()?);
    let y = g.value(*node.outputs.first()?);
    if x.ty.dtype != crate::ir::types::DType::F32 {
        // A 16-bit staged Conv (`--activations`): its budgets, [`staged_conv`].
        return None;
    }
    let constant = node.inputs.get(1).is_some_and(|&w| is_constant(g, w));
    let p = crate::ops::conv::scratch_params(a, &x.ty, &y.ty, constant, threads)?;
    let none = f32_weights && crate::gemm::conv::f32_reads_no_scratch(&p);
    (conv2d_tiles(&p).count() > 1 || none).then_some(p)
}

/// The scratch sizes a Conv or Gemm/MatMul staged on 16-bit data may be planned at, in the
/// order tried (one per staging budget or block of rows, largest first; a Conv whose
/// weights are precomputed for Winograd, `pre`, first its sizes with Winograd bands:
/// [`crate::gemm::stage16::conv::scratch_sizes`]); `None` for other nodes.
fn staged_conv(
    cx: &Decide<'_>,
    id: NodeId,
    pre: &BTreeSet<crate::ir::graph::ValueId>,
) -> Option<Vec<usize>> {
    staged_sizes(cx, id, pre, false)
}

/// [`staged_conv`]'s sizes, of a Conv with `peak` only those a peak is lowered to
/// ([`crate::gemm::stage16::conv::peak_sizes`]).
fn staged_sizes(
    cx: &Decide<'_>,
    id: NodeId,
    pre: &BTreeSet<crate::ir::graph::ValueId>,
    peak: bool,
) -> Option<Vec<usize>> {
    let (g, threads) = (cx.g, cx.opts.threads);
    let node = g.node(id);
    if !matches!(node.op, Op::Conv(_) | Op::Gemm(_) | Op::MatMul) {
        return None;
    }
    let inputs: Vec<_> = node.inputs.iter().map(|&v| g.value(v).ty.clone()).collect();
    let consts: Vec<bool> = node.inputs.iter().map(|&v| is_constant(g, v)).collect();
    let y = &g.value(*node.outputs.first()?).ty;
    // Only a node the staged kernel runs (it has scratch by `ops::stage16`).
    crate::ops::stage16::scratch_bytes(&node.op, &inputs, y, &consts, threads)?;
    if matches!(node.op, Op::Gemm(_) | Op::MatMul) {
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
        let s = crate::ops::stage16::mm_stage(&node.op, &shapes, &consts, threads)?;
        let sizes: Vec<usize> = s
            .blocks()
            .into_iter()
            .map(|b| s.scratch_bytes_at(b))
            .collect();
        return (sizes.len() > 1).then_some(sizes);
    }
    let Op::Conv(a) = &node.op else {
        return None;
    };
    let wide = |t: &crate::ir::types::TensorType| {
        crate::ir::types::TensorType::new(crate::ir::types::DType::F32, t.shape.clone())
    };
    let p = super::winograd::staged_marked(g, id, &cx.opts, pre).map_or_else(
        || crate::ops::conv::scratch_params(a, &wide(inputs.first()?), &wide(y), true, threads),
        Some,
    )?;
    // `winograd_precompute` holds only with f32 weights (`LivenessOptions`).
    let f32_weights = cx.opts.winograd_precompute;
    let sizes = if peak {
        crate::gemm::stage16::conv::peak_sizes(&p, f32_weights)
    } else {
        crate::gemm::stage16::conv::scratch_sizes_for(&p, f32_weights)
    };
    (sizes.len() > 1).then_some(sizes)
}

/// Whether Conv `id` may be planned no scratch for a kernel that reads none: its weights stay
/// f32 (`winograd_precompute` holds only then, `LivenessOptions`) and Winograd may not take
/// it (the `winograd` pass gives Winograd's scratch where the step keeps the peak: planned
/// none, the unused im2col panels no longer held that room, and a 2-thread ResNet-18 lost
/// Winograd on its four 56 x 56 Convs, 1.24x the time).
fn scratchless(cx: &Decide<'_>, id: NodeId, pre: &BTreeSet<crate::ir::graph::ValueId>) -> bool {
    cx.opts.winograd_precompute
        && !(cx.opts.winograd
            && super::winograd::winograd_conv_in(cx.g, id, &cx.opts, pre).is_some())
}

/// Scratch bytes of `p` run with `tile` output pixels per panel (none for a kernel that
/// reads none with `f32_weights`: [`conv2d_plan_bytes`]).
fn bytes_at(p: &ConvParams, tile: usize, f32_weights: bool) -> usize {
    conv2d_plan_bytes(
        &ConvParams {
            tile: tile as u64,
            ..*p
        },
        f32_weights,
    )
}

/// The `scratch` pass ([`super::decide::PASSES`]): the scratch bytes of each step while the
/// other passes make their choices — an im2col Conv's at its smallest tile, every other
/// node's as it asks ([`node_scratch`]).
pub(super) fn smallest(cx: &Decide<'_>, d: &mut Decisions) {
    let threads = cx.opts.threads;
    let pre = super::winograd::precomputed(cx.g, &cx.opts);
    d.scratch = cx
        .order
        .iter()
        .map(|&id| (id, scratchless(cx, id, &pre)))
        .map(|(id, f32w)| match tiled_conv(cx.g, id, threads, f32w) {
            Some(p) => conv2d_tiles(&p).last().map_or_else(
                || node_scratch(cx.g, id, threads),
                |t| bytes_at(&p, t, f32w),
            ),
            None => node_scratch(cx.g, id, threads),
        })
        .collect();
}

/// The `conv tiles` pass: grows each Conv's scratch to the largest tile whose step stays at
/// or below the peak of aligned live bytes of the buffers decided so far (the peak itself
/// does not change, but for the staged Convs first set to their least, [`least_staged`]).
pub(super) fn relax(cx: &Decide<'_>, d: &mut Decisions) {
    let pre = super::winograd::precomputed(cx.g, &cx.opts);
    least_staged(cx, d, &pre);
    let live = cx.measure(d);
    let (mut total, peak) = step_bytes(&live);
    // Staged 16-bit Convs: (step, planned bytes, the larger sizes that keep the peak).
    let mut staged: Vec<(usize, Vec<usize>)> = Vec::new();
    for b in &live.buffers {
        if b.kind != BufferKind::Scratch {
            continue;
        }
        let Some(id) = b.node else {
            continue;
        };
        let step = b.interval.start;
        let Some(&t) = total.get(step) else {
            continue;
        };
        let rest = t - aligned(b.interval.size);
        let f32w = scratchless(cx, id, &pre);
        if let Some(p) = tiled_conv(cx.g, id, cx.opts.threads, f32w) {
            let (Some(t), Some(planned)) = (total.get_mut(step), d.scratch.get_mut(step)) else {
                continue;
            };
            if let Some(bytes) = conv2d_tiles(&p)
                .map(|tile| bytes_at(&p, tile, f32w))
                .find(|&bytes| bytes >= b.interval.size && rest + aligned(bytes) <= peak)
            {
                *planned = bytes;
                *t = rest + aligned(bytes);
            }
        } else if let Some(sizes) = staged_conv(cx, id, &pre) {
            let fit: Vec<usize> = sizes
                .into_iter()
                .filter(|&bytes| bytes > b.interval.size && rest + aligned(bytes) <= peak)
                .collect();
            if !fit.is_empty() {
                staged.push((step, fit));
            }
        }
    }
    grow_staged(cx, d, staged);
}

/// The staged 16-bit Convs that set the peak lowered to their smallest
/// size ([`staged_sizes`]: with f32 weights the direct bands' slots without an inner part,
/// `crate::gemm::stage16::conv::budgets_for`, else one slot), one peak after the other
/// while a staged Conv sets it, before [`relax`] grows them again where the peak allows.
/// Only those: a Conv left at its least where its growth did not place ran 1.6x slower
/// (VGG-19). Not in [`smallest`]: the passes between choose by the peak with the sizes the
/// nodes ask (a 2-thread ResNet-18 shrinking its MaxPool in place over a 0.26% lower peak
/// lost Winograd on four Convs, +18% time).
fn least_staged(cx: &Decide<'_>, d: &mut Decisions, pre: &BTreeSet<crate::ir::graph::ValueId>) {
    for _ in 0..cx.order.len() {
        let (total, peak) = step_bytes(&cx.measure(d));
        let mut lowered = false;
        for (step, &id) in cx.order.iter().enumerate() {
            if total.get(step) != Some(&peak) || !matches!(cx.g.node(id).op, Op::Conv(_)) {
                continue;
            }
            let least = staged_sizes(cx, id, pre, true).and_then(|s| s.into_iter().min());
            if let (Some(l), Some(planned)) = (least, d.scratch.get_mut(step))
                && l < *planned
            {
                *planned = l;
                lowered = true;
            }
        }
        if !lowered {
            return;
        }
    }
}

/// Grows each staged 16-bit Conv's scratch, in schedule order, to the largest of its sizes
/// (at most [`STAGED_TRIES`] tried, largest first) whose placed arena is no larger than
/// before: a larger transient block can keep the peak of live bytes yet not fit the hole
/// the placement had for it, and the 16-bit arena must not grow for speed.
fn grow_staged(cx: &Decide<'_>, d: &mut Decisions, staged: Vec<(usize, Vec<usize>)>) {
    if staged.is_empty() {
        return;
    }
    let mut base = cx.placed_arena(d);
    for (step, fit) in staged {
        let Some(&old) = d.scratch.get(step) else {
            continue;
        };
        for bytes in fit.into_iter().take(STAGED_TRIES) {
            d.scratch[step] = bytes;
            if cx.placed_within(d, base) {
                base = cx.placed_arena(d);
                break;
            }
            d.scratch[step] = old;
        }
    }
}

/// Sizes [`grow_staged`] tries per Conv (each a placement).
const STAGED_TRIES: usize = 3;
