//! Patch-based execution (issue 16): which leading stage of a CNN can run patch by patch, on
//! which grid, and the arena peak and recomputed FLOPs that gives ([`analyze`], a pure
//! function of the graph, its schedule and its buffers); [`patch`] takes the best candidate
//! and rewrites the graph to run it (`lower.rs`), and `arena::plan_graph` keeps the rewrite
//! when its planned arena is smaller.
//!
//! A stage is a prefix of the schedule whose nodes are all spatially local (2-d Conv,
//! depthwise included, Max/AveragePool, element-wise nodes whose arena inputs have the
//! output's shape and Concat along channels: receptive field 1) and whose values leave it as 4-d values: the last made,
//! the stage output, and any others (a U-Net's skip connections, the resolutions an FPN
//! reads). Each leaving value is cut into a `p x p` grid of cells (explicit ranges, the first
//! ones one row/column larger when `p` does not divide); patch `(i, j)` computes cell `(i, j)`
//! of every one. For each patch the window of every stage value is found backwards
//! (`PATCHES.md` §0.1; the union of what the cells read): an output window
//! `[o0, o1)` of a node with kernel `k`, stride `s`, dilation `d` and begin padding `p_b`
//! reads input rows `[o0 s - p_b, (o1 - 1) s - p_b + (k - 1) d + 1)`, clamped to the input;
//! a value read by several stage nodes takes the union of their windows.
//!
//! Predicted peak of the patched program = max(stage, rest):
//! - stage: the graph inputs and the leaving values whole (each written patch by patch
//!   into its buffer), plus the largest per-patch working set — each stage
//!   intermediate at its window's size, live from its producer to its last reader in schedule
//!   order (kernel scratch not counted);
//! - rest: the live bytes of today's buffers at every step after the stage.
//!
//! Recomputed FLOPs: each stage node's FLOPs scaled by the summed area of its output windows
//! over the patches against its output's area, less the node's own FLOPs.

use crate::analysis::liveness::LivenessOptions;
use crate::ir::graph::{Graph, NodeId, ValueId};

pub use search::{MAX_SEGMENT, analyze};
pub use window::{Cut, Window, cells, ranges, ranges_cut, windows, windows_cut, windows_of};
use window::{Local, rule};

/// One candidate: a stage of the first `nodes` scheduled nodes on a `grid x grid` grid.
#[derive(Clone, Debug, PartialEq)]
pub struct PatchPlan {
    /// The stage's first scheduled node: 0 for a prefix; a later segment reads the values
    /// made before it (and the graph inputs) whole.
    pub start: usize,
    /// The end of the stage in the schedule (exclusive): its nodes are `start..nodes`.
    pub nodes: usize,
    /// The stage output: the value leaving the stage made last (the grid cuts its plane).
    pub output: ValueId,
    /// The other values leaving the stage (a U-Net's skip connections, an FPN's
    /// resolutions), in schedule order: each also cut into `grid x grid` cells, patch `(i,
    /// j)` writing cell `(i, j)` of each, so each is written whole, patch by patch.
    pub leaving: Vec<ValueId>,
    /// Patches per column of the grid (rows of patches).
    pub grid: usize,
    /// Patches per row of the grid (columns of patches): `grid` for a square grid, 1 for
    /// strips of whole rows (cached ones only: [`Self::cached`]).
    pub columns: usize,
    /// Halo rows cached between vertically adjacent patches instead of recomputed
    /// (`cache.rs`: the grid run column by column, top to bottom); one-pass stages only.
    pub cached: bool,
    /// The passes over the grid: one, or one per global pool in the stage plus one
    /// ([`passes`]).
    pub passes: Vec<passes::Pass>,
    /// Predicted peak of live bytes with patches (64-byte aligned buffers).
    pub peak_bytes: usize,
    /// The stage's share of it: inputs + stage output + the largest patch working set.
    pub stage_bytes: usize,
    /// The rest's share: the highest step after the stage.
    pub rest_bytes: usize,
    /// FLOPs recomputed in the halos.
    pub extra_flops: u64,
    /// FLOPs of the stage's Convs that lose Winograd on their windows, counted at
    /// [`fast::SLOW_SHARE`]: held by the recompute budget with `extra_flops`.
    pub slow_flops: u64,
    /// FLOPs of the stage's nodes run once.
    pub stage_flops: u64,
}

/// What the analysis found for a graph.
#[derive(Clone, Debug, PartialEq)]
pub struct PatchReport {
    /// Today's peak of live bytes (the liveness given, aligned).
    pub unpatched_bytes: usize,
    /// FLOPs of the whole graph.
    pub total_flops: u64,
    /// Every stage and grid measured, stage by stage, grids 2.. upward.
    pub candidates: Vec<PatchPlan>,
}

impl PatchReport {
    /// The first of [`Self::ranked`]: of the stage with the lowest predicted peak (whose
    /// recomputed FLOPs, with the slow ones, [`PatchPlan::slow_flops`], are at most
    /// `max_extra` of the whole graph's, below today's peak), the grid with the least of
    /// them within [`PEAK_SLACK`] of its lowest peak.
    pub fn best(&self, max_extra: f64) -> Option<&PatchPlan> {
        self.ranked(max_extra).into_iter().next()
    }

    /// The candidates [`Self::best`] chooses from (within `max_extra` of the FLOPs, below
    /// today's peak), best first: stages by the lowest predicted peak of their grids (stages
    /// tied on it by the least time proxy of their grids at that peak, then the earlier); within
    /// a stage, the grids within [`PEAK_SLACK`] of that peak by their time proxy (recomputed
    /// and slow FLOPs: cached strips over a finer grid recomputing its halos), then peak; then
    /// its other grids by peak, then recomputed FLOPs. (Across stages the slack is not
    /// taken: a shorter stage's predicted peak was 14-18% low once planned.)
    pub fn ranked(&self, max_extra: f64) -> Vec<&PatchPlan> {
        self.ranked_with(max_extra, PEAK_SLACK, |_| true, |_| 0)
    }

    /// [`Self::ranked`] over the candidates `keep` takes (a family: `whole.rs`), a stage's
    /// grids within `slack` of its lowest predicted peak ranked by their time proxy, which
    /// `cost` adds to (`whole.rs`: the weights a stage streams again per patch).
    pub fn ranked_with(
        &self,
        max_extra: f64,
        slack: f64,
        keep: impl Fn(&PatchPlan) -> bool,
        cost: impl Fn(&PatchPlan) -> u64,
    ) -> Vec<&PatchPlan> {
        let mut v: Vec<&PatchPlan> = self
            .candidates
            .iter()
            .filter(|c| keep(c))
            .filter(|c| {
                c.extra_flops.saturating_add(c.slow_flops) as f64
                    <= max_extra * self.total_flops as f64
            })
            .filter(|c| c.peak_bytes < self.unpatched_bytes)
            .collect();
        // Per stage (its start and end), the lowest predicted peak of its grids.
        let mut low: std::collections::HashMap<(usize, usize), usize> =
            std::collections::HashMap::new();
        for c in &v {
            let e = low.entry((c.start, c.nodes)).or_insert(c.peak_bytes);
            *e = (*e).min(c.peak_bytes);
        }
        let time = |c: &PatchPlan| {
            c.extra_flops
                .saturating_add(c.slow_flops)
                .saturating_add(cost(c))
        };
        // Per stage, the least time proxy of its grids at its lowest peak: of stages whose
        // lowest peaks tie, the one that costs less time first (DBNet-320: the FPN stage
        // from step 35 and from step 37 both predict 8.19 MB, but the earlier one holds the
        // backbone's last 512-channel Convs, re-streaming 19 MB of weights per patch).
        let mut fastest: std::collections::HashMap<(usize, usize), u64> =
            std::collections::HashMap::new();
        for c in &v {
            if low.get(&(c.start, c.nodes)) == Some(&c.peak_bytes) {
                let t = time(c);
                let e = fastest.entry((c.start, c.nodes)).or_insert(t);
                *e = (*e).min(t);
            }
        }
        // Each key found once (the cost reads the stage's weights): a stable sort as before.
        v.sort_by_cached_key(|c| {
            let best = low
                .get(&(c.start, c.nodes))
                .copied()
                .unwrap_or(c.peak_bytes);
            let near = best.saturating_add((best as f64 * slack) as usize);
            let close = c.peak_bytes <= near;
            let time = time(c);
            (
                best,
                fastest.get(&(c.start, c.nodes)).copied().unwrap_or(0),
                c.start,
                c.nodes,
                !close,
                if close { time } else { 0 },
                c.peak_bytes,
                c.extra_flops,
            )
        });
        v
    }
}

impl PatchReport {
    /// [`Self::ranked_with`] across stages: the candidates within `slack` of the lowest
    /// predicted peak of all (any stage) first, by their time proxy (recomputed, slow and
    /// `cost` FLOPs), then peak; then the others in [`Self::ranked_with`]'s order. A stage
    /// predicted a little higher than the lowest may plan to the same arena recomputing far
    /// less (DBNet-640: a 20-node stage from step 38, 1.8% recomputed, against a 25-node one
    /// from step 33, 9.2%, both 0.541 of the unpatched arena once planned).
    pub fn ranked_across(
        &self,
        max_extra: f64,
        slack: f64,
        keep: impl Fn(&PatchPlan) -> bool,
        cost: impl Fn(&PatchPlan) -> u64,
    ) -> Vec<&PatchPlan> {
        let v = self.ranked_with(max_extra, slack, &keep, &cost);
        let Some(low) = v.iter().map(|c| c.peak_bytes).min() else {
            return v;
        };
        let near = low.saturating_add((low as f64 * slack) as usize);
        let (mut close, rest): (Vec<&PatchPlan>, Vec<&PatchPlan>) =
            v.into_iter().partition(|c| c.peak_bytes <= near);
        close.sort_by_cached_key(|c| {
            (
                c.extra_flops
                    .saturating_add(c.slow_flops)
                    .saturating_add(cost(c)),
                c.peak_bytes,
            )
        });
        close.extend(rest);
        close
    }
}

/// How far above its stage's lowest predicted peak a grid may be and still be chosen for a
/// smaller time proxy ([`PatchReport::ranked`]).
pub const PEAK_SLACK: f64 = 0.0;

/// Stages taken one after another (`arena::plan_graph`: each on the graph the previous one
/// rewrote).
pub const MAX_STAGES: usize = 4;

/// Grids tried: up to this many patches per side.
pub const MAX_GRID: usize = 8;

/// Recomputed FLOPs allowed by default, as a share of the whole graph's.
pub const MAX_EXTRA_FLOPS: f64 = 0.10;

/// [`MAX_EXTRA_FLOPS`] in percent (`PlanOptions::patch_flops`' default).
pub const DEFAULT_PATCH_FLOPS: u32 = 10;

/// Candidates [`patch`] tries to rewrite, best first, before giving up.
const RETRIES: usize = 8;

/// The best candidate of [`analyze`] (lowest predicted peak whose recomputed FLOPs are at
/// most `max_extra` of the model's, [`MAX_EXTRA_FLOPS`] by default) as a rewritten graph, or
/// `None` when no candidate lowers the peak or the rewrite expresses none of the best
/// [`RETRIES`] (then the next best is taken, not no stage). `order`
/// is the schedule the graph is planned in today.
pub fn patch(
    g: &Graph,
    order: &[NodeId],
    opts: LivenessOptions,
    max_extra: f64,
) -> Option<(Graph, PatchInfo)> {
    alternatives(g, order, opts, max_extra).into_iter().next()
}

/// The best candidate of each family (halos recomputed, halo rows cached), best first, each
/// as a rewritten graph: the caller plans them and keeps the smaller arena. The predicted
/// peaks of the two families err differently once planned (U-Net: a cached 8x1 stage
/// predicted below a recomputing 3x3 one planned 12% above it; MobileNetV2 the reverse).
pub fn alternatives(
    g: &Graph,
    order: &[NodeId],
    opts: LivenessOptions,
    max_extra: f64,
) -> Vec<(Graph, PatchInfo)> {
    let report = analyze(g, order, opts, MAX_GRID);
    let ranked = report.ranked(max_extra);
    let mut out = Vec::new();
    for cached in [false, true] {
        // The best candidate the rewrite expresses (a later segment may hold what it
        // cannot: then the next best, not no stage at all).
        let found = ranked
            .iter()
            .filter(|c| c.cached == cached)
            .take(RETRIES)
            .find_map(|&c| lower::rewrite_as_planned(g, order, c).map(|ng| (c, ng)));
        if let Some((best, ng)) = found {
            out.push((best.peak_bytes, info_of(g, &report, best), ng));
        }
    }
    out.sort_by_key(|(peak, _, _)| *peak);
    out.into_iter().map(|(_, info, ng)| (ng, info)).collect()
}

/// The report of candidate `best` of `report` on `g`.
fn info_of(g: &Graph, report: &PatchReport, best: &PatchPlan) -> PatchInfo {
    PatchInfo {
        start: best.start,
        stage_nodes: best.nodes - best.start,
        output: g.value(best.output).name.clone(),
        leaving: best
            .leaving
            .iter()
            .map(|&v| g.value(v).name.clone())
            .collect(),
        grid: best.grid,
        columns: best.columns,
        cached: best.cached,
        passes: best.passes.len().max(1),
        checkpoints: best
            .passes
            .iter()
            .filter_map(|p| p.write)
            .map(|v| g.value(v).name.clone())
            .collect(),
        unpatched_bytes: report.unpatched_bytes,
        predicted_bytes: best.peak_bytes,
        extra_flops: best.extra_flops,
        total_flops: report.total_flops,
        later: Vec::new(),
    }
}

mod cache;
mod cached;
mod ends;
mod fast;
mod info;
mod lower;
pub mod passes;
mod search;
pub mod whole;
mod window;
pub use info::PatchInfo;
pub use lower::{rewrite, rewrite_as_planned};

#[cfg(test)]
mod tests;
