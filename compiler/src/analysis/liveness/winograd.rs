//! Winograd convolutions as a planning decision: the `winograd` pass of
//! [`super::decide::PASSES`], after `conv tiles`.
//!
//! A 3 x 3 stride-1 Conv ([`crate::gemm::winograd::applies`]) runs Winograd F(4x4, 3x3) when
//! its step has the scratch [`crate::gemm::winograd::scratch_bytes`] asks (the transformed
//! weights unless precomputed in the weights region, [`crate::gemm::winograd::mark`], and
//! one tile block per thread) at one of its tile blocks. The pass grows a Conv's
//! scratch to the largest block whose step's live bytes stay at or below the peak of the
//! decisions so far (measured as `tiles.rs` measures it), so the arena's peak does not grow;
//! a Conv whose planned scratch already holds one takes it as it is. `ARENAC_WINOGRAD=1` grows it wherever the geometry
//! fits (benchmarks), `0` never. The code generator runs the path where [`chosen`] holds —
//! the same rule on the planned bytes — and names the kernel `conv2d winograd`.

use super::decide::{Decide, Decisions, aligned, step_bytes};
use super::{BufferKind, LivenessOptions, is_constant};
use crate::arena::ArenaPlan;
use crate::gemm::conv::ConvParams;
use crate::gemm::{stage16, winograd};
use crate::ir::graph::{Graph, NodeId, ValueId};
use crate::ops::Op;
use std::collections::{BTreeMap, BTreeSet};

/// The largest share of the model's weights (1 / this) Winograd's precomputed transformed
/// weights may add to the weights region: SqueezeNet 1.1's 3 x 3 Convs alone would grow its
/// 4.9 MB of weights 2.4-fold.
const PRECOMPUTE_SHARE: usize = 4;

/// The Conv geometry of node `id` (f32, 3 x 3 stride-1 shapes [`winograd::geometry_fits`]
/// takes) on `threads` threads, and whether its weights are a constant.
fn geometry(g: &Graph, id: NodeId, threads: usize) -> Option<(ConvParams, bool)> {
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
    let p = crate::ops::conv::scratch_params(a, &x.ty, &y.ty, constant, threads.max(1))?;
    winograd::geometry_fits(&p).then_some((p, constant))
}

/// The geometry of node `id` when it is a Conv staged on 16-bit data (`--activations`,
/// `crate::gemm::stage16::conv`) with constant weights and a 3 x 3 stride-1 geometry
/// [`winograd::geometry_fits`] takes: its f32 twin's params (`n`, `threads` as planned).
fn staged_geometry(g: &Graph, id: NodeId, threads: usize) -> Option<ConvParams> {
    use crate::ir::types::{DType, TensorType};
    let node = g.node(id);
    let Op::Conv(a) = &node.op else {
        return None;
    };
    let x = &g.value(*node.inputs.first()?).ty;
    let y = &g.value(*node.outputs.first()?).ty;
    if !matches!(x.dtype, DType::F16 | DType::BF16) || y.dtype != x.dtype {
        return None;
    }
    let w = *node.inputs.get(1)?;
    if !is_constant(g, w) || node.inputs.get(2).is_some_and(|&b| !is_constant(g, b)) {
        return None;
    }
    let wide = |t: &TensorType| TensorType::new(DType::F32, t.shape.clone());
    let p = crate::ops::conv::scratch_params(a, &wide(x), &wide(y), true, threads.max(1))?;
    winograd::geometry_fits(&p).then_some(p)
}

/// `p` (a [`staged_geometry`]) marked `mark` when its bands would run Winograd so marked at
/// its largest staging budget ([`stage16::conv::wino_bands`]).
fn staged_as(p: &ConvParams, mark: u64) -> Option<ConvParams> {
    let p = ConvParams {
        packed_a: mark,
        ..*p
    };
    let top = *stage16::conv::budgets(&p).first()?;
    stage16::conv::wino_bands(&p, top).is_some().then_some(p)
}

/// [`staged_geometry`] marked [`winograd::WINOGRAD_U_PACKED`] when its transformed weights
/// may be precomputed (at most `cap` bytes, [`winograd::mark_within`]) and its bands would
/// run Winograd on them.
fn staged_precomputable(g: &Graph, id: NodeId, threads: usize, cap: usize) -> Option<ConvParams> {
    let mut p = staged_geometry(g, id, threads)?;
    winograd::mark_within(&mut p, true, cap);
    (p.packed_a == winograd::WINOGRAD_U_PACKED)
        .then(|| staged_as(&p, winograd::WINOGRAD_U_PACKED))
        .flatten()
}

/// The params of staged Conv `id` as the planner and the lowering give them to
/// `crate::gemm::stage16::conv`: marked [`winograd::WINOGRAD_U_PACKED`] (bands may run
/// Winograd on precomputed weights) when its weights are in `pre` ([`precomputed`]), else
/// [`winograd::WINOGRAD_PACKED`] (on weights transformed once per run into the scratch:
/// f32 OIHW weights, or with `--weights f16|bf16|int8` the reduced OIHW ones, widened by the
/// transform) where the whole convolution repays the transform ([`winograd::applies`]);
/// `None` when it is not such a Conv or Winograd is off.
pub fn staged_marked(
    g: &Graph,
    id: NodeId,
    o: &LivenessOptions,
    pre: &BTreeSet<ValueId>,
) -> Option<ConvParams> {
    if !o.winograd || !o.scratch {
        return None;
    }
    let w = g.node(id).inputs.get(1)?;
    if pre.contains(w)
        && let Some(p) = staged_precomputable(g, id, o.threads, usize::MAX)
    {
        return Some(p);
    }
    staged_as(
        &staged_geometry(g, id, o.threads)?,
        winograd::WINOGRAD_PACKED,
    )
}

/// Whether staged Conv `id` with `planned` scratch bytes runs Winograd bands (its marked
/// params read back at a budget [`stage16::conv::wino_bands`] takes).
fn staged_chosen(
    g: &Graph,
    id: NodeId,
    o: &LivenessOptions,
    planned: usize,
    pre: &BTreeSet<ValueId>,
) -> Option<ConvParams> {
    let p = staged_marked(g, id, o, pre)?;
    let (q, budget) = stage16::conv::config_for_scratch_for(&p, planned, o.winograd_precompute);
    stage16::conv::wino_bands(&q, budget).is_some().then_some(q)
}

/// The constant weights whose Winograd Convs read their transformed weights precomputed in
/// the weights region ([`winograd::WINOGRAD_U_PACKED`]): with `o.winograd_precompute` (f32
/// weights), among the Convs Winograd applies to with precomputed weights and the 16-bit
/// staged Convs whose bands could run it ([`staged_precomputable`]), within 1 /
/// [`PRECOMPUTE_SHARE`] of the graph's constant bytes in all:
/// 1. first the Convs that would keep Winograd on the windows of a [`PATCH_GRID`] x
///    [`PATCH_GRID`] patch grid ([`on_windows`]), and the window copies of a patched graph
///    (several Convs on one weight tensor): run in a patched stage with the per-run transform
///    they lose it (a window's scratch cannot hold the transformed weights,
///    `analysis/patches/fast.rs`) and run direct. Each may take up to 1 / [`PATCH_CAP_SHARE`]
///    of the share ([`winograd::PRECOMPUTE_MAX`] at least), the largest activations (input
///    plus output over the weights' Convs: where the arena peaks and patching cuts) first;
/// 2. then the others (they only save the per-run transform, or run Winograd on fewer
///    tiles), at most [`winograd::PRECOMPUTE_MAX`] bytes each, the smallest growths first.
///
/// A Conv that does not fit what is left of the share is skipped, the next may. A pure
/// function of the graph and the options: the planner and the lowering agree.
pub fn precomputed(g: &Graph, o: &LivenessOptions) -> BTreeSet<ValueId> {
    let mut out = BTreeSet::new();
    if !o.winograd_precompute || !o.winograd {
        return out;
    }
    let budget = crate::arena::weight_stats(g).bytes / PRECOMPUTE_SHARE;
    let wide = (budget / PATCH_CAP_SHARE).max(winograd::PRECOMPUTE_MAX);
    // Per weight tensor: the first Conv's geometry, its uses, their activation bytes, and
    // whether a use keeps Winograd on its own plane and on a patch grid's windows.
    let mut by_weight: BTreeMap<ValueId, (ConvParams, usize, u64, bool)> = BTreeMap::new();
    for (id, node) in g.nodes() {
        let p = match geometry(g, id, o.threads) {
            Some((mut p, true)) => {
                winograd::mark_within(&mut p, true, wide);
                if p.packed_a != winograd::WINOGRAD_U_PACKED || !winograd::applies(&p) {
                    continue;
                }
                p
            }
            Some((_, false)) => continue,
            None => match staged_precomputable(g, id, o.threads, wide) {
                Some(p) => p,
                None => continue,
            },
        };
        let Some(&w) = node.inputs.get(1) else {
            continue;
        };
        let e = by_weight.entry(w).or_insert((p, 0, 0, false));
        e.1 += 1;
        e.2 = e.2.saturating_add(activation_bytes(&p));
        e.3 |= on_windows(&p);
    }
    // (tier, order key, growth, weights)
    let mut picks = Vec::new();
    for (w, (p, uses, act, windows)) in by_weight {
        let matrices = winograd::weights_floats(&p) * 4;
        let growth = matrices.saturating_sub(g.value(w).ty.bytes().unwrap_or(0));
        // Several Convs on one weight tensor: a patched stage's window copies (they run
        // Winograd on their planes, else they were left out above).
        if uses > 1 || windows {
            picks.push((0u8, std::cmp::Reverse(act), growth, w));
        } else if matrices <= winograd::PRECOMPUTE_MAX {
            picks.push((1, std::cmp::Reverse(0), growth, w));
        }
    }
    picks.sort_unstable();
    let mut used = 0usize;
    for (_, _, growth, w) in picks {
        if used.saturating_add(growth) <= budget {
            used += growth;
            out.insert(w);
        }
    }
    out
}

/// The patch grid [`on_windows`] assumes: the grid most stages take
/// (`analysis/patches`, docs/BENCHMARKS.md).
const PATCH_GRID: u64 = 3;

/// The share of [`precomputed`]'s budget (1 / this) one Conv [`on_windows`] may take.
const PATCH_CAP_SHARE: usize = 4;

/// Whether a Conv of geometry `p` (marked precomputed) would still run Winograd on the output
/// windows of a [`PATCH_GRID`] x [`PATCH_GRID`] grid (as `analysis/patches/fast.rs`
/// `keeps_winograd` asks): enough 4 x 4 tiles on a window.
fn on_windows(p: &ConvParams) -> bool {
    let on = ConvParams {
        oh: p.oh.div_ceil(PATCH_GRID),
        ow: p.ow.div_ceil(PATCH_GRID),
        ..*p
    };
    on.oh > 0 && on.ow > 0 && winograd::applies(&on)
}

/// f32 bytes of a Conv's input and output planes.
fn activation_bytes(p: &ConvParams) -> u64 {
    let x = p.c.saturating_mul(p.h).saturating_mul(p.w);
    let y = p.m.saturating_mul(p.oh).saturating_mul(p.ow);
    x.saturating_add(y).saturating_mul(p.n).saturating_mul(4)
}

/// The geometry of node `id` when it is a Conv Winograd may run ([`winograd::applies`]) with
/// the options `o` (threads, f32 weights), marked by [`winograd::mark`] (transformed weights
/// precomputed when its weights are in [`precomputed`]); `None` otherwise.
pub fn winograd_conv(g: &Graph, id: NodeId, o: &LivenessOptions) -> Option<ConvParams> {
    winograd_conv_in(g, id, o, &precomputed(g, o))
}

/// [`winograd_conv`] with [`precomputed`] given.
pub fn winograd_conv_in(
    g: &Graph,
    id: NodeId,
    o: &LivenessOptions,
    pre: &BTreeSet<ValueId>,
) -> Option<ConvParams> {
    let (mut p, constant) = geometry(g, id, o.threads)?;
    let w = g.node(id).inputs.get(1);
    // Marked first: `wins` asks fewer tiles of precomputed weights.
    // No cap: `precomputed` chose `pre` under its caps.
    winograd::mark_within(
        &mut p,
        constant && w.is_some_and(|w| pre.contains(w)),
        usize::MAX,
    );
    winograd::applies(&p).then_some(p)
}

/// Whether node `id` of the plan runs Winograd: enabled in the plan's options, a Conv it
/// applies to, and `planned` scratch bytes at least [`winograd::scratch_bytes`] at one of its
/// [`winograd::block_sizes`].
pub fn chosen(g: &Graph, plan: &ArenaPlan, id: NodeId, planned: usize) -> bool {
    let o = plan.options.liveness;
    chosen_in(g, plan, id, planned, &precomputed(g, &o))
}

/// [`chosen`] with [`precomputed`] given.
fn chosen_in(
    g: &Graph,
    plan: &ArenaPlan,
    id: NodeId,
    planned: usize,
    pre: &BTreeSet<ValueId>,
) -> bool {
    let o = plan.options.liveness;
    o.winograd
        && o.scratch
        && winograd_conv_in(g, id, &o, pre)
            .is_some_and(|p| winograd::block_for_scratch(&p, planned).is_some())
}

/// The Convs of the plan that run Winograd (the staged 16-bit ones by bands), in schedule
/// order.
pub fn chosen_nodes(g: &Graph, plan: &ArenaPlan) -> Vec<NodeId> {
    let pre = precomputed(g, &plan.options.liveness);
    chosen_scratch(g, plan, &pre)
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

/// [`chosen_nodes`] with their planned scratch bytes, [`precomputed`] given.
fn chosen_scratch(g: &Graph, plan: &ArenaPlan, pre: &BTreeSet<ValueId>) -> Vec<(NodeId, usize)> {
    let o = plan.options.liveness;
    plan.liveness
        .buffers
        .iter()
        .filter(|b| b.kind == BufferKind::Scratch)
        .filter_map(|b| {
            let planned = b.interval.size;
            b.node
                .filter(|&id| {
                    chosen_in(g, plan, id, planned, pre)
                        || staged_chosen(g, id, &o, planned, pre).is_some()
                })
                .map(|id| (id, planned))
        })
        .collect()
}

/// Bytes the weights region holds beyond the constants' own for the Convs of the plan that
/// run Winograd with precomputed transformed weights ([`winograd::WINOGRAD_U_PACKED`]): per
/// distinct weight tensor (a stage's patch copies share theirs), the 36 matrices less its f32
/// weights, which they replace. What `arenac plan` adds to the weights total.
pub fn precomputed_growth(g: &Graph, plan: &ArenaPlan) -> usize {
    let o = plan.options.liveness;
    let pre = precomputed(g, &o);
    let mut seen = BTreeSet::new();
    let mut bytes = 0usize;
    for (id, planned) in chosen_scratch(g, plan, &pre) {
        let Some(p) =
            winograd_conv_in(g, id, &o, &pre).or_else(|| staged_chosen(g, id, &o, planned, &pre))
        else {
            continue;
        };
        let Some(&w) = g.node(id).inputs.get(1) else {
            continue;
        };
        if p.packed_a != winograd::WINOGRAD_U_PACKED || !seen.insert(w) {
            continue;
        }
        let own = g.value(w).ty.bytes().unwrap_or(0);
        bytes = bytes.saturating_add((winograd::weights_floats(&p) * 4).saturating_sub(own));
    }
    bytes
}

/// The `winograd` pass: each Winograd-able Conv's scratch grown to
/// [`winograd::scratch_bytes`] where its step stays at or below the peak of aligned live
/// bytes of the buffers decided so far; then, since a larger buffer can still place worse,
/// the arena is placed ([`place`]) with all of them and, if it grew, they are taken one at a
/// time (the most multiply-adds first), each kept only when the placed arena does not grow.
/// Last, the Convs whose every Winograd size would raise that peak, and those whose size
/// the placement rejected (with their smaller sizes), try the placement's slack
/// ([`into_slack`]).
pub(super) fn choose(cx: &Decide<'_>, d: &mut Decisions) {
    let live = cx.measure(d);
    let (mut total, peak) = step_bytes(&live);
    let forced = winograd::forced();
    let pre = precomputed(cx.g, &cx.opts);
    // (step, bytes, multiply-adds, the step's other live bytes, the smaller sizes) of the
    // Convs whose step keeps the peak.
    let mut picks = Vec::new();
    // The others: (step, the step's other live bytes, Winograd sizes largest first,
    // multiply-adds).
    let mut above = Vec::new();
    // By step, not by scratch buffer: a Conv planned no scratch (the direct kernels on f32
    // weights, `crate::gemm::conv::conv2d_plan_bytes`) has none.
    for (step, &id) in cx.order.iter().enumerate() {
        let Some(p) = winograd_conv_in(cx.g, id, &cx.opts, &pre) else {
            continue;
        };
        let (Some(t), Some(&planned)) = (total.get_mut(step), d.scratch.get(step)) else {
            continue;
        };
        if winograd::block_for_scratch(&p, planned).is_some() {
            continue;
        }
        let rest = *t - aligned(planned);
        let macs = p.m * p.c * p.oh * p.ow * p.n;
        let sizes: Vec<usize> = winograd::block_sizes(&p)
            .map(|tb| winograd::scratch_bytes(&winograd::with_block(&p, tb)))
            .collect();
        // The largest tile block whose step keeps the peak (forced: the default block).
        match sizes
            .iter()
            .copied()
            .find(|&bytes| forced || rest + aligned(bytes) <= peak)
        {
            Some(bytes) => {
                *t = rest + aligned(bytes);
                // Its smaller sizes, should the placement reject this one.
                let smaller: Vec<usize> = sizes.into_iter().filter(|&b| b < bytes).collect();
                picks.push((step, bytes, macs, rest, smaller));
            }
            None => above.push((step, rest, sizes, macs)),
        }
    }
    if forced {
        for &(s, bytes, ..) in &picks {
            d.scratch[s] = bytes;
        }
        return;
    }
    if picks.is_empty() && above.is_empty() {
        return;
    }
    let base = cx.placed_arena(d);
    let before: Vec<usize> = picks.iter().map(|p| d.scratch[p.0]).collect();
    for &(s, bytes, ..) in &picks {
        d.scratch[s] = bytes;
    }
    if !picks.is_empty() && !cx.placed_within(d, base) {
        for (p, &b) in picks.iter().zip(&before) {
            d.scratch[p.0] = b;
        }
        picks.sort_by_key(|p| std::cmp::Reverse(p.2));
        for (s, bytes, macs, rest, smaller) in picks {
            let old = d.scratch[s];
            d.scratch[s] = bytes;
            if !cx.placed_within(d, base) {
                d.scratch[s] = old;
                above.push((s, rest, smaller, macs));
            }
        }
    }
    into_slack(cx, d, above, base);
}

/// Winograd sizes [`into_slack`] tries per Conv (each a placement), largest first.
const SLACK_TRIES: usize = 2;

/// The Convs whose every Winograd size would raise the peak of live bytes (`above`: step,
/// the step's other live bytes, sizes largest first, multiply-adds), the most
/// multiply-adds first: each takes the largest of its sizes (at most [`SLACK_TRIES`]) that
/// fits under the placed arena `base` (plus [`LivenessOptions::winograd_growth`]) at its step
/// and keeps the placed arena at or below that. A placement sits above the live peak where buffers of different lifetimes do not
/// tile (patched plans), and that slack costs nothing: U-Net's patched plan had 2.8 MB free
/// at `conv_34`'s step, whose smallest Winograd scratch raised the live peak by 20 KB.
fn into_slack(
    cx: &Decide<'_>,
    d: &mut Decisions,
    mut above: Vec<(usize, i128, Vec<usize>, u64)>,
    base: usize,
) {
    above.sort_by_key(|&(_, _, _, macs)| std::cmp::Reverse(macs));
    // The arena this step may grow to (`LivenessOptions::winograd_growth`).
    let growth = base.saturating_mul(cx.opts.winograd_growth as usize) / 1000;
    let base = base.saturating_add(growth);
    let bar = base as i128;
    for (s, rest, sizes, _) in above {
        let old = d.scratch[s];
        for bytes in sizes
            .into_iter()
            .filter(|&bytes| rest + aligned(bytes) <= bar)
            .take(SLACK_TRIES)
        {
            d.scratch[s] = bytes;
            if cx.placed_within(d, base) {
                break;
            }
            d.scratch[s] = old;
        }
    }
}

#[cfg(test)]
mod slack_tests;
#[cfg(test)]
mod tests;
