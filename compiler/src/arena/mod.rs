//! The arena plan of a graph, end to end: schedule → liveness → offsets → verifier, with the
//! figures a report needs (lower bound, naive sum, layer-wise bound, weights), the memory
//! budget ([`budget`]), the text/JSON report ([`report`]) and the picture ([`svg`]).
//!
//! ```text
//! Graph ──fuse_elementwise (plan_graph only)──▶ Graph ──schedule──▶ order ──liveness──▶ buffers (intervals) ──place──▶ offsets ──verify──▶ ArenaPlan
//! ```
//!
//! Liveness takes the memory decisions over the order as passes, each proposing and judged by
//! one measure (the buffers its decisions give), in the order of
//! [`crate::analysis::liveness::PASSES`]:
//! 1. `scratch`: each node's workspace, an im2col Conv's panel at its smallest tile;
//! 2. `shrinking in-place`: poolings writing their smaller output over their input, each kept
//!    when it lowers the peak;
//! 3. `in-place concat`: Concat inputs computed into their slice, the set with the lowest peak;
//! 4. `conv tiles`: each im2col Conv's largest tile that keeps that peak.
//!
//! The schedule search measures candidate orders by the same passes
//! ([`crate::analysis::schedule::peak_bytes`]).

pub mod budget;
pub mod control;
pub mod report;
pub mod svg;

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crate::analysis::act_type::{ActReport, ActType, retype_activations_with};
use crate::analysis::fuse::residual::fuse_residual;
use crate::analysis::fuse::{FuseStats, fuse_elementwise, fuse_elementwise16};
use crate::analysis::liveness::{Buffer, Liveness, LivenessOptions, liveness};
use crate::analysis::patches::{self, PatchInfo};
use crate::analysis::schedule::{ScheduleOptions, schedule};
use crate::error::Error;
pub use crate::error::budget::{grouped, human_bytes};
use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::plan::offsets::place;
use crate::plan::verify::{ValueSlot, verify_placement, verify_values};
use crate::plan::{ALIGN, Placement, align_up, lower_bound};

/// Options for [`plan_arena`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// Run the nodes in the file's order instead of the memory-aware schedule.
    pub keep_file_order: bool,
    /// What liveness merges (views, in-place) and adds (scratch).
    pub liveness: LivenessOptions,
    /// Alignment of every buffer (a power of two).
    pub align: usize,
    /// Fuse chains of element-wise nodes into one node before planning
    /// ([`crate::analysis::fuse::fuse_elementwise`]), and a residual Add after a Conv into the
    /// Conv ([`crate::analysis::fuse::residual::fuse_residual`]). Only [`plan_graph`], which may rewrite
    /// the graph, reads it; [`plan_arena`] plans the graph it is given.
    pub fuse_elementwise: bool,
    /// The type intermediates are stored in (`--activations`): f16/bf16 retype the graph's
    /// f32 intermediates before fusion ([`crate::analysis::act_type::retype_activations`]).
    /// Only [`plan_graph`] reads it.
    pub activations: ActType,
    /// With 16-bit `activations`: an f32 graph input read only in its narrow form is stored
    /// narrow, rounded on copy-in ([`retype_activations_with`]; default on). Only
    /// [`plan_graph`] reads it; the subgraphs of control nodes are planned without it (their
    /// inputs are written by the node, not the session).
    pub narrow_inputs: bool,
    /// Run the leading stage of a CNN patch by patch when that lowers the arena
    /// ([`crate::analysis::patches`]). Only [`plan_graph`] reads it.
    pub patches: bool,
    /// With `patches`: the FLOPs the halos (and the passes of a stage holding global pools)
    /// may recompute, in percent of the model's (default
    /// [`patches::MAX_EXTRA_FLOPS`], 10%).
    pub patch_flops: u32,
    /// With `patches`: the patched plans' [`LivenessOptions::winograd_growth`] (default
    /// [`crate::analysis::liveness::PATCHED_WINOGRAD_GROWTH`]; 0 when a `--memory-limit`
    /// needs those bytes).
    pub patched_winograd_growth: u32,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            keep_file_order: false,
            liveness: LivenessOptions::full(),
            align: ALIGN,
            fuse_elementwise: true,
            activations: ActType::F32,
            narrow_inputs: true,
            patches: false,
            patch_flops: patches::DEFAULT_PATCH_FLOPS,
            patched_winograd_growth: crate::analysis::liveness::PATCHED_WINOGRAD_GROWTH,
        }
    }
}

/// Constant tensors read by the graph's nodes (or returned as outputs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WeightStats {
    /// Constant values read.
    pub tensors: usize,
    /// Their bytes, each distinct buffer counted once (folded views such as an Identity or a
    /// Reshape of an initializer share their source's bytes).
    pub bytes: usize,
}

/// Counts the constants `g` reads (its subgraphs' included), each distinct byte buffer once.
pub fn weight_stats(g: &Graph) -> WeightStats {
    let mut stats = WeightStats::default();
    let mut seen: BTreeSet<(usize, usize)> = BTreeSet::new();
    count_weights(g, &mut stats, &mut seen);
    stats
}

fn count_weights(g: &Graph, stats: &mut WeightStats, seen: &mut BTreeSet<(usize, usize)>) {
    let mut read: BTreeSet<ValueId> = g.outputs.iter().copied().collect();
    for (_, n) in g.nodes() {
        read.extend(n.inputs.iter().copied());
        for (_, sub) in n.op.subgraphs() {
            count_weights(sub, stats, seen);
        }
    }
    for &v in &read {
        if let ValueKind::Constant(t) = &g.value(v).kind {
            stats.tensors += 1;
            if seen.insert((t.bytes().as_ptr() as usize, t.bytes().len())) {
                stats.bytes += t.bytes().len();
            }
        }
    }
}

/// A verified arena plan and the figures it is measured against.
#[derive(Clone, Debug)]
pub struct ArenaPlan {
    /// The options it was planned with.
    pub options: PlanOptions,
    /// The execution order (step `i` runs `schedule[i]`).
    pub schedule: Vec<NodeId>,
    /// The arena buffers over that order.
    pub liveness: Liveness,
    /// One offset per buffer of `liveness`.
    pub placement: Placement,
    /// Arena size in bytes.
    pub arena_bytes: usize,
    /// The most bytes live at one step of this order (no placement can do better).
    pub lower_bound_bytes: usize,
    /// The step at which `lower_bound_bytes` is reached (the peak).
    pub peak_step: usize,
    /// Every buffer of the layer-wise liveness in file order, aligned and summed: no reuse.
    pub naive_bytes: usize,
    /// The lower bound of the layer-wise liveness in file order (every value its own buffer
    /// from producer to last consumer, no views, no in-place, no scratch).
    pub layer_wise_bound_bytes: usize,
    /// Constants read by the graph.
    pub weights: WeightStats,
    /// Wall-clock time of schedule + liveness + placement + verification.
    pub planning_time: Duration,
    /// What element-wise fusion did before planning (zero unless planned by [`plan_graph`]
    /// with [`PlanOptions::fuse_elementwise`]).
    pub fusion: FuseStats,
    /// The plans of the graphs control-flow nodes hold (an `If`'s branches), by node, in
    /// [`crate::ops::Op::subgraphs`] order ([`control`]): each from offset 0 of its own arena,
    /// which is the node's scratch buffer in this one.
    pub sub_plans: control::SubPlans,
    /// What retyping the activations did (`activations: f32` and empty unless planned by
    /// [`plan_graph`] with [`PlanOptions::activations`]).
    pub activations: ActReport,
    /// The stage run patch by patch, when [`PlanOptions::patches`] found one that lowers the
    /// arena (planned by [`plan_graph`] only).
    pub patches: Option<PatchInfo>,
}

impl ArenaPlan {
    /// Arena plus weights: what running the model needs in memory.
    pub fn total_bytes(&self) -> usize {
        self.arena_bytes.saturating_add(self.weights.bytes)
    }

    /// Lower bound / arena (1.0 for an empty arena).
    pub fn efficiency(&self) -> f64 {
        if self.arena_bytes == 0 {
            1.0
        } else {
            self.lower_bound_bytes as f64 / self.arena_bytes as f64
        }
    }

    /// Arena byte offset of value `v` (its buffer's offset plus its offset within the
    /// buffer); `None` for a value without an arena buffer (a constant).
    pub fn value_offset(&self, v: ValueId) -> Option<usize> {
        let b = *self.liveness.value_buffer.get(&v)?;
        self.placement
            .offsets
            .get(b)?
            .checked_add(self.liveness.offset_of(v))
    }

    /// The node running at the peak step, if the graph has any node.
    pub fn peak_node(&self) -> Option<NodeId> {
        self.schedule.get(self.peak_step).copied()
    }

    /// The `k` largest buffers live at the peak step, largest first (ties: buffer order),
    /// with their index in `liveness.buffers`.
    pub fn peak_buffers(&self, k: usize) -> Vec<(usize, &Buffer)> {
        let mut live: Vec<(usize, &Buffer)> = self
            .liveness
            .buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.interval.start <= self.peak_step && self.peak_step < b.interval.end)
            .collect();
        live.sort_by(|a, b| {
            b.1.interval
                .size
                .cmp(&a.1.interval.size)
                .then(a.0.cmp(&b.0))
        });
        live.truncate(k);
        live
    }
}

/// Plans `g`'s arena: the subgraphs of its control nodes first (each as it is, recursively:
/// [`control`]), then schedule, liveness, offsets, then the independent verifier (always: it
/// costs O(n log n) plus the pairs live together). A verifier failure is
/// [`Error::PlanInternal`].
pub fn plan_arena(g: &Graph, opts: &PlanOptions) -> Result<ArenaPlan, Error> {
    let (sub_plans, patched) = control::plan_as_is(g, opts)?;
    let mut plan = plan_flat(patched.as_ref().unwrap_or(g), opts)?;
    plan.sub_plans = sub_plans;
    Ok(plan)
}

/// [`plan_arena`] of `g` alone, its control nodes' scratch taken as recorded in their ops.
fn plan_flat(g: &Graph, opts: &PlanOptions) -> Result<ArenaPlan, Error> {
    if !opts.align.is_power_of_two() {
        return Err(Error::PlanInternal(format!(
            "alignment {} is not a power of two",
            opts.align
        )));
    }
    let started = Instant::now();
    let order = schedule(
        g,
        &ScheduleOptions {
            keep_file_order: opts.keep_file_order,
            ..ScheduleOptions::default()
        },
    );
    let live = liveness(g, &order, opts.liveness);
    let intervals = live.intervals();
    let placement = place(&intervals, opts.align);
    verify_placement(&intervals, &placement, opts.align)
        .map_err(|e| Error::PlanInternal(e.to_string()))?;
    verify_values(&intervals, &value_slots(g, &live))
        .map_err(|e| Error::PlanInternal(e.to_string()))?;
    if !placement.arena_bytes.is_multiple_of(opts.align) {
        return Err(Error::PlanInternal(format!(
            "arena of {} bytes is not a multiple of the {}-byte alignment",
            placement.arena_bytes, opts.align
        )));
    }
    let planning_time = started.elapsed();
    let (lower_bound_bytes, peak_step) = lower_bound(&intervals, opts.align);
    if placement.arena_bytes < lower_bound_bytes {
        return Err(Error::PlanInternal(format!(
            "arena of {} bytes is below the lower bound {lower_bound_bytes}",
            placement.arena_bytes
        )));
    }
    let (naive_bytes, layer_wise_bound_bytes) = layer_wise(g, opts.align);
    let mut plan = ArenaPlan {
        options: *opts,
        schedule: order,
        arena_bytes: placement.arena_bytes,
        liveness: live,
        placement,
        lower_bound_bytes,
        peak_step,
        naive_bytes,
        layer_wise_bound_bytes,
        weights: weight_stats(g),
        planning_time,
        fusion: FuseStats::default(),
        sub_plans: control::SubPlans::new(),
        activations: ActReport::default(),
        patches: None,
    };
    // Winograd's transformed weights precomputed into the weights region grow it.
    plan.weights.bytes =
        plan.weights
            .bytes
            .saturating_add(crate::analysis::liveness::winograd::precomputed_growth(
                g, &plan,
            ));
    Ok(plan)
}

/// The values of `live`'s buffers for [`verify_values`], each with its own life recomputed
/// from the graph and the schedule (producer's step, or 0 for an input, to one past its last
/// read, or to the end for a graph output).
fn value_slots(g: &Graph, live: &Liveness) -> Vec<ValueSlot> {
    let n = live.order.len();
    let mut start: HashMap<ValueId, usize> = HashMap::new();
    let mut end: HashMap<ValueId, usize> = HashMap::new();
    let mut is_view: HashMap<ValueId, bool> = HashMap::new();
    for (step, &id) in live.order.iter().enumerate() {
        let node = g.node(id);
        for &v in &node.outputs {
            start.insert(v, step);
            // A view stores its first input's bytes under another shape; the same op's output
            // may instead be written into a Concat slice (when views are off): not a view then.
            let of = live.alias_of.get(&v);
            is_view.insert(
                v,
                node.op.is_view() && of.is_some() && of == node.inputs.first(),
            );
        }
        for &v in &node.inputs {
            end.insert(v, step + 1);
        }
    }
    let ids: Vec<ValueId> = g
        .value_ids()
        .filter(|v| live.value_buffer.contains_key(v))
        .collect();
    let index: HashMap<ValueId, usize> = ids.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    ids.iter()
        .map(|&v| {
            let s = start.get(&v).copied().unwrap_or(0);
            let mut e = end.get(&v).copied().unwrap_or(0).max(s + 1);
            if g.outputs.contains(&v) {
                e = e.max(n);
            }
            ValueSlot {
                buffer: live.value_buffer.get(&v).copied().unwrap_or(usize::MAX),
                offset: live.offset_of(v),
                size: g.value(v).ty.bytes().unwrap_or(0),
                start: s,
                end: e,
                alias_of: live.alias_of.get(&v).and_then(|a| index.get(a)).copied(),
                view: is_view.get(&v).copied().unwrap_or(false),
            }
        })
        .collect()
}

/// The naive sum and the layer-wise bound of `g` (layer-wise liveness in file order).
fn layer_wise(g: &Graph, align: usize) -> (usize, usize) {
    let base = liveness(g, g.order(), LivenessOptions::layer_wise()).intervals();
    let naive = base.iter().fold(0usize, |acc, i| {
        acc.saturating_add(align_up(i.size, align).unwrap_or(usize::MAX))
    });
    (naive, lower_bound(&base, align).0)
}

/// The planning pipeline: the graph passes that precede planning, in order, then
/// [`plan_arena`]. The passes rewrite `g` in place (code generation must then use this `g`):
/// 1. [`fuse_residual`] then [`fuse_elementwise`], when [`PlanOptions::fuse_elementwise`];
/// 2. the subgraphs of control nodes, each through this same pipeline, their sub-arenas
///    recorded in their ops ([`control`]).
///
/// The naive sum and the layer-wise bound stay those of the graph as given (before the
/// passes): they measure a runtime without arenac's rewrites. In debug builds the rewritten
/// graph is verified; a failure is [`Error::PlanInternal`] naming the pass.
pub fn plan_graph(g: &mut Graph, opts: &PlanOptions) -> Result<ArenaPlan, Error> {
    let activations = retype_activations_with(g, opts.activations, opts.narrow_inputs);
    if cfg!(debug_assertions)
        && opts.activations != ActType::F32
        && let Err(e) = crate::ir::verify::verify(g)
    {
        return Err(Error::PlanInternal(format!(
            "graph invalid after retype_activations: {e}"
        )));
    }
    let (naive_bytes, layer_wise_bound_bytes) = layer_wise(g, opts.align);
    let fusion = if opts.fuse_elementwise {
        // Residual Adds into the Conv before them first: the Relu after each stays a node
        // (the conv epilogue's), not an element-wise group's member.
        let residuals = fuse_residual(g);
        let mut stats = fuse_elementwise(g);
        stats.residuals = residuals;
        // The 16-bit chains of `--activations f16|bf16` (retyped above).
        let narrow = fuse_elementwise16(g, opts.activations.dtype());
        stats.groups += narrow.groups;
        stats.nodes_fused += narrow.nodes_fused;
        if cfg!(debug_assertions)
            && let Err(e) = crate::ir::verify::verify(g)
        {
            return Err(Error::PlanInternal(format!(
                "graph invalid after fuse_elementwise: {e}"
            )));
        }
        stats
    } else {
        FuseStats::default()
    };
    let sub_plans = control::plan_in_place(g, opts)?;
    let mut plan = plan_flat(g, opts)?;
    if opts.patches {
        let started = Instant::now();
        // The analysis predicts without Winograd (its pass never raises the peak). The
        // patched plan keeps the pass: a patch's Conv takes Winograd where its own plane has
        // the tiles that repay the per-run weight transform (`winograd::wins`, so once per
        // patch) and the transformed weights fit under the patched peak; the Convs after the
        // stage likewise, so a smaller arena can cost them Winograd.
        let predict = LivenessOptions {
            winograd: false,
            ..opts.liveness
        };
        // Stage by stage: each found on the graph the previous one rewrote, kept while the
        // planned arena shrinks.
        let unpatched_bytes = plan.arena_bytes;
        // The budget is shared by the stages: each later one gets what the earlier left.
        // Complete plans (stages taken one after another, each planned) of a few policies;
        // the fastest by the time proxy near the smallest arena kept (`patches::whole`).
        let budget = f64::from(opts.patch_flops) / 100.0;
        let keep = PlanOptions {
            keep_file_order: true,
            liveness: LivenessOptions {
                winograd_growth: opts.patched_winograd_growth,
                ..opts.liveness
            },
            ..*opts
        };
        let whole = patches::whole::plan_whole(g, &plan, predict, budget, |ng| {
            if cfg!(debug_assertions)
                && let Err(e) = crate::ir::verify::verify(ng)
            {
                return Err(Error::PlanInternal(format!(
                    "graph invalid after the patch rewrite: {e}"
                )));
            }
            // The rewrite's file order runs each patch to the end of the stage, then the
            // rest in the schedule just found: searching again only costs time.
            let mut patched = plan_flat(ng, &keep)?;
            patched.options.keep_file_order = opts.keep_file_order;
            Ok(patched)
        })?;
        if let Some(w) = whole {
            let mut stages = w.stages.into_iter();
            if let Some(first) = stages.next() {
                *g = w.graph;
                plan = w.plan;
                plan.patches = Some(PatchInfo {
                    unpatched_bytes,
                    later: stages.collect(),
                    ..first
                });
            }
        }
        plan.planning_time += started.elapsed();
    }
    plan.sub_plans = sub_plans;
    plan.naive_bytes = naive_bytes;
    plan.layer_wise_bound_bytes = layer_wise_bound_bytes;
    plan.fusion = fusion;
    plan.activations = activations;
    Ok(plan)
}

#[cfg(test)]
pub(crate) mod tests;
