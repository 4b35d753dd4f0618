//! The fast path a stage's Convs may lose: Winograd. A 3 x 3 Conv that runs Winograd whole
//! (the planner gave it the scratch) runs it on its patch windows only when its transformed
//! weights are precomputed (the per-run transform's head, four times the weights, does not
//! fit an arena patching shrank: VGG-19's 256 -> 256 Convs need 9.4 MB of it in a 6.2 MiB
//! arena) and the window still has enough 4 x 4 tiles ([`winograd::applies`]). Otherwise the
//! patches run the direct kernels at less than half the speed: VGG-19's second stage
//! recomputed 2% of the model's FLOPs but cost 25% of its time that way.
//!
//! [`analyze`](super::analyze) counts such a Conv's FLOPs at [`SLOW_SHARE`] into
//! [`PatchPlan::slow_flops`](super::PatchPlan::slow_flops), which the recompute budget holds
//! together with the recomputed FLOPs.

use std::collections::HashMap;

use crate::analysis::liveness::winograd::{precomputed, winograd_conv_in};
use crate::analysis::liveness::{BufferKind, Liveness, LivenessOptions};
use crate::gemm::conv::ConvParams;
use crate::gemm::winograd::{self, WINOGRAD_U_PACKED};
use crate::ir::graph::{Graph, NodeId};

/// The share of a Conv's FLOPs its patches lose without Winograd: the direct kernels took
/// 2.3 times as long as Winograd on VGG-19's 56 x 56 planes (52 vs 122 GFLOP/s of direct
/// FLOPs), ResNet-18's 1.5 to 2.4 times; counted at half, the least of those.
pub const SLOW_SHARE: f64 = 0.5;

/// The Convs of `live`'s schedule that run Winograd unpatched: their scratch holds one of
/// its tile blocks ([`winograd::block_for_scratch`], as the lowering decides), with their
/// geometry as [`winograd_conv`] marks it; measured without Winograd (`opts.winograd`
/// off, as the planner predicts), every Conv it applies to.
pub fn winograd_convs(
    g: &Graph,
    live: &Liveness,
    opts: &LivenessOptions,
) -> HashMap<NodeId, ConvParams> {
    if !opts.scratch {
        return HashMap::new();
    }
    if !opts.winograd {
        // The planner predicts without Winograd's scratch (`arena::plan_graph`), then plans
        // with it: every Conv Winograd applies to whole is taken to run it.
        let on = LivenessOptions {
            winograd: true,
            ..*opts
        };
        // The precomputed weights are the graph's choice: found once, not per Conv.
        let pre = precomputed(g, &on);
        return live
            .order
            .iter()
            .filter(|&&id| matches!(g.node(id).op, crate::ops::Op::Conv(_)))
            .filter_map(|&id| Some((id, winograd_conv_in(g, id, &on, &pre)?)))
            .collect();
    }
    let pre = precomputed(g, opts);
    live.buffers
        .iter()
        .filter(|b| b.kind == BufferKind::Scratch)
        .filter_map(|b| {
            let id = b.node?;
            let p = winograd_conv_in(g, id, opts, &pre)?;
            winograd::block_for_scratch(&p, b.interval.size).map(|_| (id, p))
        })
        .collect()
}

/// Whether a Conv of geometry `p` that runs Winograd whole still can on output windows of
/// `rows x cols` (their mean over the grid): precomputed weights and enough tiles.
pub fn keeps_winograd(p: &ConvParams, rows: usize, cols: usize) -> bool {
    let on = ConvParams {
        oh: rows as u64,
        ow: cols as u64,
        ..*p
    };
    p.packed_a == WINOGRAD_U_PACKED && rows > 0 && cols > 0 && winograd::applies(&on)
}

/// The FLOPs counted for a Conv of `flops` FLOPs that loses Winograd on its patches.
pub fn slow_flops(flops: u64) -> u64 {
    (flops as f64 * SLOW_SHARE) as u64
}
