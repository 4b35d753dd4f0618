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

use super::decide::{Decide, Decisions};
use super::{BufferKind, is_constant, node_scratch};
use crate::gemm::conv::{ConvParams, conv2d_scratch_bytes, conv2d_tiles};
use crate::ir::graph::{Graph, NodeId};
use crate::ops::Op;
use crate::plan::{ALIGN, align_up};

/// The geometry of a Conv node whose scratch depends on its tile (the im2col path); `None`
/// for every other node.
fn tiled_conv(g: &Graph, id: NodeId, threads: usize) -> Option<ConvParams> {
    let node = g.node(id);
    let Op::Conv(a) = &node.op else {
        return None;
    };
    let x = g.value(*node.inputs.first()?);
    let y = g.value(*node.outputs.first()?);
    if x.ty.dtype != crate::ir::types::DType::F32 {
        // A 16-bit staged Conv (`--activations`) plans its own fixed scratch.
        return None;
    }
    let constant = node.inputs.get(1).is_some_and(|&w| is_constant(g, w));
    let p = crate::ops::conv::scratch_params(a, &x.ty, &y.ty, constant, threads)?;
    (conv2d_tiles(&p).count() > 1).then_some(p)
}

/// Scratch bytes of `p` run with `tile` output pixels per panel.
fn bytes_at(p: &ConvParams, tile: usize) -> usize {
    conv2d_scratch_bytes(&ConvParams {
        tile: tile as u64,
        ..*p
    })
}

/// The `scratch` pass ([`super::decide::PASSES`]): the scratch bytes of each step while the
/// other passes make their choices — an im2col Conv's at its smallest tile, every other
/// node's as it asks ([`node_scratch`]).
pub(super) fn smallest(cx: &Decide<'_>, d: &mut Decisions) {
    let threads = cx.opts.threads;
    d.scratch = cx
        .order
        .iter()
        .map(|&id| match tiled_conv(cx.g, id, threads) {
            Some(p) => conv2d_tiles(&p)
                .last()
                .map_or_else(|| node_scratch(cx.g, id, threads), |t| bytes_at(&p, t)),
            None => node_scratch(cx.g, id, threads),
        })
        .collect();
}

/// The `conv tiles` pass: grows each Conv's scratch to the largest tile whose step stays at
/// or below the peak of aligned live bytes of the buffers decided so far (the peak itself
/// does not change).
pub(super) fn relax(cx: &Decide<'_>, d: &mut Decisions) {
    let live = cx.measure(d);
    let n = live.order.len();
    let aligned = |b: usize| align_up(b, ALIGN).unwrap_or(usize::MAX) as i128;
    let mut total = vec![0i128; n + 1];
    for b in &live.buffers {
        let (s, e) = (b.interval.start.min(n), b.interval.end.min(n));
        for t in total.iter_mut().take(e).skip(s) {
            *t += aligned(b.interval.size);
        }
    }
    let peak = total.iter().copied().max().unwrap_or(0);
    for b in &live.buffers {
        if b.kind != BufferKind::Scratch {
            continue;
        }
        let Some(p) = b.node.and_then(|id| tiled_conv(cx.g, id, cx.opts.threads)) else {
            continue;
        };
        let step = b.interval.start;
        let (Some(t), Some(planned)) = (total.get_mut(step), d.scratch.get_mut(step)) else {
            continue;
        };
        let rest = *t - aligned(b.interval.size);
        if let Some(bytes) = conv2d_tiles(&p)
            .map(|tile| bytes_at(&p, tile))
            .find(|&bytes| bytes >= b.interval.size && rest + aligned(bytes) <= peak)
        {
            *planned = bytes;
            *t = rest + aligned(bytes);
        }
    }
}
