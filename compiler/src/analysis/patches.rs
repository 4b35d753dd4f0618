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

use std::collections::HashMap;
use std::ops::Range;

use crate::analysis::liveness::{Liveness, LivenessOptions, liveness_with};
use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::plan::{ALIGN, align_up};

/// A window of a 4-d value's plane: rows and columns, half-open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Rows.
    pub rows: Range<usize>,
    /// Columns.
    pub cols: Range<usize>,
}

/// How a stage node maps an output window to an input window, per spatial dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Local {
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    pb: [usize; 2],
    /// An integer nearest upsampling (Resize): output row `o` reads input row `o / up`.
    up: [usize; 2],
}

impl Local {
    /// The input range (clamped to `0..size`) the output range `o` reads along `dim`.
    fn back(&self, o: &Range<usize>, dim: usize, size: usize) -> Range<usize> {
        let up = self.up[dim];
        if up > 1 {
            if o.is_empty() {
                return 0..0;
            }
            return (o.start / up).min(size)..((o.end - 1) / up + 1).min(size);
        }
        back(o, self.k[dim], self.s[dim], self.d[dim], self.pb[dim], size)
    }
}

/// The integer factors of a nearest Resize upsampling a 4-d plane whose output row `o` reads
/// input row `o / f` (and columns alike): half-pixel coordinates with either rounding, or
/// asymmetric ones rounded down; `None` for any other Resize.
fn upsampling(r: &crate::ops::ResizeAttrs, x: &TensorType) -> Option<[usize; 2]> {
    use crate::ops::resize::ResizeMode;
    let coord = r.coordinate_transformation.as_str();
    let near = r.nearest_mode.as_str();
    let ok = r.mode == ResizeMode::Nearest
        && r.roi.is_empty()
        && (matches!(coord, "half_pixel" | "pytorch_half_pixel")
            && matches!(near, "round_prefer_floor" | "round_prefer_ceil")
            || coord == "asymmetric" && matches!(near, "floor" | "simple"));
    if !ok || r.scales.len() != 4 || r.scales[0] != 1.0 || r.scales[1] != 1.0 {
        return None;
    }
    let mut f = [1usize; 2];
    for (d, fd) in f.iter_mut().enumerate() {
        let s = *r.scales.get(2 + d)?;
        if s < 1.0 || s.fract() != 0.0 || s > 64.0 {
            return None;
        }
        *fd = s as usize;
        if r.output_shape.get(2 + d)? != &(x.shape.get(2 + d)? * *fd) {
            return None;
        }
    }
    (r.output_shape.get(..2) == x.shape.get(..2)).then_some(f)
}

/// The input rows (or columns) an output range `o` reads through one dim of `l`, clamped to
/// `0..size`.
fn back(o: &Range<usize>, k: usize, s: usize, d: usize, pb: usize, size: usize) -> Range<usize> {
    if o.is_empty() {
        return 0..0;
    }
    let lo = (o.start * s).saturating_sub(pb);
    let hi = ((o.end - 1) * s + (k - 1) * d + 1).saturating_sub(pb);
    lo.min(size)..hi.min(size)
}

/// Whether `t` is a 4-d batch-1 tensor with a static size.
fn plane(t: &TensorType) -> bool {
    t.shape.len() == 4 && t.shape.first() == Some(&1) && t.bytes().is_some()
}

/// The window rule of node `id`, when it may be in a stage: `Some(None)` for element-wise
/// (receptive field 1), `Some(Some(local))` for a 2-d Conv or pooling.
fn rule(g: &Graph, id: NodeId) -> Option<Option<Local>> {
    let node = g.node(id);
    let y = g.value(*node.outputs.first()?);
    if node.outputs.len() != 1 || !plane(&y.ty) {
        return None;
    }
    let two = |v: &[usize]| -> Option<[usize; 2]> { Some([*v.first()?, *v.get(1)?]) };
    let local = |k: &[usize], s: &[usize], d: &[usize], pads: &[usize]| {
        Some(Local {
            k: two(k)?,
            s: two(s)?,
            d: two(d)?,
            pb: two(pads)?,
            up: [1, 1],
        })
    };
    match &node.op {
        Op::Conv(a) if a.kernel.len() == 2 => {
            local(&a.kernel, &a.strides, &a.dilations, &a.pads).map(Some)
        }
        Op::MaxPool(a) | Op::AveragePool(a) if a.kernel.len() == 2 => {
            local(&a.kernel, &a.strides, &a.dilations, &a.pads).map(Some)
        }
        // Nearest upsampling by integer factors (a decoder's or an FPN's).
        Op::Resize(r) => {
            let x = g.value(*node.inputs.first()?);
            let up = upsampling(r, &x.ty)?;
            Some(Some(Local {
                k: [1, 1],
                s: [1, 1],
                d: [1, 1],
                pb: [0, 0],
                up,
            }))
        }
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Variadic(_)
        | Op::ClipDynamic { .. }
        | Op::Cast { .. }
        | Op::FusedElementwise(_)
        | Op::BatchNormalization { .. } => {
            // Every arena input has the output's shape (constants broadcast per channel; a
            // pooled value, one pixel per channel, is read whole: `passes::broadcast`).
            let same = node.inputs.iter().all(|&v| {
                matches!(g.value(v).kind, ValueKind::Constant(_))
                    || g.value(v).ty.shape == y.ty.shape
                    || node
                        .outputs
                        .first()
                        .is_some_and(|&o| passes::broadcast(g, v, o))
                        && g.value(v).ty.shape.get(..2) == y.ty.shape.get(..2)
            });
            same.then_some(None)
        }
        // Along channels: every input is read at the output's window (a CSP block's join).
        Op::Concat { axis: 1 } => {
            let plane_of = |t: &TensorType| t.shape.get(2..4).map(<[usize]>::to_vec);
            let same = node.inputs.iter().all(|&v| {
                !matches!(g.value(v).kind, ValueKind::Constant(_))
                    && plane(&g.value(v).ty)
                    && plane_of(&g.value(v).ty) == plane_of(&y.ty)
            });
            same.then_some(None)
        }
        _ => None,
    }
}

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
    /// Patches per side.
    pub grid: usize,
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
    /// The candidate with the lowest peak whose recomputed FLOPs (with the slow ones,
    /// [`PatchPlan::slow_flops`]) are at most `max_extra` of the whole graph's (ties: fewer
    /// FLOPs), when it is below today's peak.
    pub fn best(&self, max_extra: f64) -> Option<&PatchPlan> {
        self.ranked(max_extra).into_iter().next()
    }

    /// The candidates [`Self::best`] chooses from (within `max_extra` of the FLOPs, below
    /// today's peak), best first: by predicted peak, then recomputed FLOPs.
    pub fn ranked(&self, max_extra: f64) -> Vec<&PatchPlan> {
        let mut v: Vec<&PatchPlan> = self
            .candidates
            .iter()
            .filter(|c| {
                c.extra_flops.saturating_add(c.slow_flops) as f64
                    <= max_extra * self.total_flops as f64
            })
            .filter(|c| c.peak_bytes < self.unpatched_bytes)
            .collect();
        v.sort_by_key(|c| (c.peak_bytes, c.extra_flops));
        v
    }
}

fn aligned(b: usize) -> usize {
    align_up(b, ALIGN).unwrap_or(usize::MAX)
}

fn flops_of(g: &Graph, id: NodeId) -> u64 {
    let n = g.node(id);
    let ins: Vec<TensorType> = n.inputs.iter().map(|&v| g.value(v).ty.clone()).collect();
    let outs: Vec<TensorType> = n.outputs.iter().map(|&v| g.value(v).ty.clone()).collect();
    crate::ops::cost::flops(&n.op, &ins, &outs)
}

/// `0..len` cut into `p` ranges, the first `len % p` one longer.
fn split(len: usize, p: usize) -> Vec<Range<usize>> {
    let (q, r) = (len / p, len % p);
    let mut at = 0;
    (0..p)
        .map(|i| {
            let n = q + usize::from(i < r);
            let out = at..at + n;
            at += n;
            out
        })
        .collect()
}

/// The windows of the stage values for one patch `w` of the stage output `out`, the stage
/// being `order[..n]`: rows and columns found apart ([`ranges`]), windows being products of
/// the two (a union of windows is taken per dim).
pub fn windows(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    out: ValueId,
    w: Window,
) -> HashMap<ValueId, Window> {
    windows_of(g, order, n, &[(out, w)])
}

/// [`windows`] for several leaving values at once: each stage value's window is the union of
/// what every seed `(value, window)` reads of it (a seed's own window included).
pub fn windows_of(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    seeds: &[(ValueId, Window)],
) -> HashMap<ValueId, Window> {
    windows_cut(g, order, n, seeds, &Cut::default())
}

/// [`windows_of`] for one pass of a multi-pass stage ([`ranges_cut`]).
pub fn windows_cut(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    seeds: &[(ValueId, Window)],
    cut: &Cut,
) -> HashMap<ValueId, Window> {
    let pick = |dim: usize| -> Vec<(ValueId, Range<usize>)> {
        seeds
            .iter()
            .map(|(v, w)| {
                (
                    *v,
                    if dim == 0 {
                        w.rows.clone()
                    } else {
                        w.cols.clone()
                    },
                )
            })
            .collect()
    };
    let rows = ranges_cut(g, order, n, &pick(0), 0, cut);
    let cols = ranges_cut(g, order, n, &pick(1), 1, cut);
    g.value_ids()
        .filter_map(|v| {
            let rows = rows.get(v.index())?.clone()?;
            let cols = cols.get(v.index())?.clone()?;
            Some((v, Window { rows, cols }))
        })
        .collect()
}

/// The range along spatial dim `dim` (0: rows, 1: columns) of every stage value that the
/// seeds — ranges `r` of leaving values `v` — read (a seed's own range included), the stage
/// being `order[..n]`; indexed by value id. Seeds must be non-empty ranges.
pub fn ranges(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    seeds: &[(ValueId, Range<usize>)],
    dim: usize,
) -> Vec<Option<Range<usize>>> {
    ranges_cut(g, order, n, seeds, dim, &Cut::default())
}

/// What a pass of a multi-pass stage does not compute per patch ([`passes`]): values
/// computed once, whole (pooled values and what is made from them alone), and values an
/// earlier pass wrote whole (a checkpoint: windows are found for it, its producers are not
/// visited).
#[derive(Clone, Debug, Default)]
pub struct Cut {
    /// Computed once, whole: never given a window.
    pub global: std::collections::HashSet<ValueId>,
    /// Read whole from an earlier pass.
    pub stop: std::collections::HashSet<ValueId>,
}

/// [`ranges`] of one pass: nothing is propagated through `cut`'s values.
pub fn ranges_cut(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    seeds: &[(ValueId, Range<usize>)],
    dim: usize,
    cut: &Cut,
) -> Vec<Option<Range<usize>>> {
    let mut win: Vec<Option<Range<usize>>> = vec![None; g.values().len()];
    for (v, r) in seeds {
        if let Some(o) = win.get_mut(v.index()) {
            *o = Some(r.clone());
        }
    }
    for &id in order[..n].iter().rev() {
        let node = g.node(id);
        let Some(wo) = node
            .outputs
            .first()
            .and_then(|y| win.get(y.index()))
            .cloned()
            .flatten()
        else {
            continue;
        };
        let Some(&y) = node.outputs.first() else {
            continue;
        };
        if cut.stop.contains(&y) || cut.global.contains(&y) {
            continue;
        }
        let Some(rule) = rule(g, id) else {
            continue;
        };
        // A Conv's or pooling's data input; every arena input of an element-wise node.
        let reads = match rule {
            Some(_) => &node.inputs[..1.min(node.inputs.len())],
            None => &node.inputs[..],
        };
        for &v in reads {
            if matches!(g.value(v).kind, ValueKind::Constant(_))
                || cut.global.contains(&v)
                || passes::broadcast(g, v, y)
            {
                continue;
            }
            let size = g.value(v).ty.shape.get(2 + dim).copied().unwrap_or(1);
            let wi = match rule {
                None => wo.clone(),
                Some(l) => l.back(&wo, dim, size),
            };
            if let Some(slot) = win.get_mut(v.index()) {
                *slot = Some(match slot.take() {
                    Some(old) => old.start.min(wi.start)..old.end.max(wi.end),
                    None => wi,
                });
            }
        }
    }
    win
}

/// The highest step after a stage of `n` steps whose output is `out`, from today's buffers:
/// the buffer holding `out` may have been an earlier, larger value's (an in-place chain from
/// the stem, a pooling written over its input); patched, it holds `out` and the values
/// written in place after the stage only, so it counts at their size.
fn rest_peak(
    g: &Graph,
    live: &Liveness,
    at: &[usize],
    step_of: &HashMap<NodeId, usize>,
    n: usize,
    out: ValueId,
) -> usize {
    let steps = live.order.len();
    let Some(b) = live
        .value_buffer
        .get(&out)
        .and_then(|&b| live.buffers.get(b))
    else {
        return at
            .get(n..steps)
            .and_then(|r| r.iter().copied().max())
            .unwrap_or(0);
    };
    let produced = |v: ValueId| match g.value(v).kind {
        ValueKind::Computed(p) => step_of.get(&p).copied().unwrap_or(0),
        _ => 0,
    };
    let held = b
        .values
        .iter()
        .filter(|&&v| v == out || produced(v) >= n)
        .map(|&v| {
            g.value(v)
                .ty
                .bytes()
                .unwrap_or(0)
                .saturating_add(live.offset_of(v))
        })
        .max()
        .unwrap_or(0);
    let (was, now) = (aligned(b.interval.size), aligned(held));
    (n..steps)
        .map(|t| {
            let here = at.get(t).copied().unwrap_or(0);
            if b.interval.start <= t && t < b.interval.end {
                here.saturating_sub(was).saturating_add(now)
            } else {
                here
            }
        })
        .max()
        .unwrap_or(0)
}

/// Measures every patchable stage of `g` run in `order` on grids of 2x2 up to `max_grid`
/// (or up to the first grid whose stage fits under the rest's peak: finer ones only
/// recompute more),
/// against the buffers of the memory passes with `opts` but `conv tiles`: patched, the
/// panels grow back only up to the new peak, so today's panels, grown up to today's peak,
/// would hide the gain.
pub fn analyze(g: &Graph, order: &[NodeId], opts: LivenessOptions, max_grid: usize) -> PatchReport {
    let base = liveness_with(g, order, opts, |name| name != "conv tiles");
    let live = &base;
    let steps = order.len();
    // Live aligned bytes of today's buffers per step.
    let mut at = vec![0usize; steps + 1];
    for b in &live.buffers {
        for t in at
            .iter_mut()
            .take(b.interval.end.min(steps))
            .skip(b.interval.start)
        {
            *t = t.saturating_add(aligned(b.interval.size));
        }
    }
    let unpatched_bytes = at.iter().copied().max().unwrap_or(0);
    let total_flops = order.iter().map(|&id| flops_of(g, id)).sum();
    let step_of: HashMap<NodeId, usize> =
        order.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let mut last_read: HashMap<ValueId, usize> = HashMap::new();
    for (s, &id) in order.iter().enumerate() {
        for &v in &g.node(id).inputs {
            last_read.insert(v, s);
        }
    }
    let global = passes::globals(g, order);
    let epilogue = ends::epilogue_inputs(g, order);
    let wino = fast::winograd_convs(g, live, &opts);
    let mut candidates = Vec::new();
    // The highest step before each one, counting live values (a buffer's interval spans
    // every value placed in it, so today's buffers would count a late value's buffer from
    // its first one's step): each value not stored in another's, from its producer's step
    // to the last read of it or of a value stored in it.
    let mut by_value = vec![0usize; steps + 1];
    {
        let root = |mut v: ValueId| {
            for _ in 0..64 {
                // In place or a view (same bytes); not a Concat's slice, which a segment
                // holding the Concat makes its own value.
                match live.alias_of.get(&v) {
                    Some(&w) if w != v && g.value(w).ty.bytes() == g.value(v).ty.bytes() => v = w,
                    _ => break,
                }
            }
            v
        };
        let mut span: HashMap<ValueId, (usize, usize)> = HashMap::new();
        for (t, &id) in order.iter().enumerate() {
            let node = g.node(id);
            for &v in node.outputs.iter().chain(&node.inputs) {
                if !live.value_buffer.contains_key(&v) {
                    continue;
                }
                let r = root(v);
                let born = match g.value(r).kind {
                    ValueKind::Computed(p) => step_of.get(&p).copied().unwrap_or(t),
                    _ => 0,
                };
                let e = span.entry(r).or_insert((born.min(t), t));
                e.0 = e.0.min(born).min(t);
                e.1 = e.1.max(t);
            }
        }
        for (v, (s0, s1)) in span {
            let end = if g.outputs.contains(&v) {
                steps
            } else {
                s1 + 1
            };
            let b = aligned(g.value(v).ty.bytes().unwrap_or(0));
            for x in by_value.iter_mut().take(end.min(steps)).skip(s0) {
                *x = x.saturating_add(b);
            }
        }
    }
    let mut before_max = vec![0usize; steps + 1];
    for t in 1..=steps {
        before_max[t] = before_max[t - 1].max(by_value[t - 1]);
    }
    let produced = |v: ValueId| match g.value(v).kind {
        ValueKind::Computed(p) => step_of.get(&p).copied(),
        _ => Some(0),
    };
    for a in 0..steps {
        // A later segment only when the steps before it are below today's peak.
        if a > 0 && before_max[a] >= unpatched_bytes {
            break;
        }
        if a > 0 && rule(g, order[a]).is_none() {
            continue;
        }
        let sub = &order[a..];
        // Values made before the segment (and graph inputs) it reads or that outlive it:
        // whole during the stage.
        let held: usize = if a == 0 {
            0
        } else {
            g.value_ids()
                .filter(|&v| !matches!(g.value(v).kind, ValueKind::Constant(_)))
                .filter(|&v| {
                    produced(v).is_some_and(|s| s < a || g.value(v).kind == ValueKind::Input)
                })
                .filter(|&v| g.outputs.contains(&v) || last_read.get(&v).is_some_and(|&s| s >= a))
                .map(|v| aligned(g.value(v).ty.bytes().unwrap_or(0)))
                .sum()
        };
        segment(
            g,
            order,
            a,
            sub,
            steps,
            &global,
            &epilogue,
            &wino,
            &last_read,
            &step_of,
            live,
            &at,
            &by_value,
            held,
            before_max[a],
            unpatched_bytes,
            max_grid,
            &mut candidates,
        );
    }
    PatchReport {
        unpatched_bytes,
        total_flops,
        candidates,
    }
}

/// The candidates of stages starting at step `a` (`sub = order[a..]`): [`analyze`]'s body.
#[allow(clippy::too_many_arguments)]
fn segment(
    g: &Graph,
    order: &[NodeId],
    a: usize,
    sub: &[NodeId],
    steps: usize,
    global: &std::collections::HashSet<ValueId>,
    epilogue: &std::collections::HashSet<ValueId>,
    wino: &HashMap<NodeId, crate::gemm::conv::ConvParams>,
    last_read: &HashMap<ValueId, usize>,
    step_of: &HashMap<NodeId, usize>,
    live: &Liveness,
    at: &[usize],
    by_value: &[usize],
    held: usize,
    before: usize,
    unpatched_bytes: usize,
    max_grid: usize,
    candidates: &mut Vec<PatchPlan>,
) {
    let global = global.clone();
    let max_len = if a == 0 {
        steps
    } else {
        (a + MAX_SEGMENT).min(steps)
    };
    for n in a + 1..=max_len {
        let m = n - a;
        let last = g.node(order[n - 1]);
        let once = !last.outputs.is_empty() && last.outputs.iter().all(|v| global.contains(v));
        if rule(g, order[n - 1]).is_none() && !once {
            break;
        }
        // Values made in the stage and read after it (or graph outputs): 4-d, each written
        // whole patch by patch; the last made is the stage output. Pooled values (and what
        // is made from them alone) are computed whole, once.
        let made: Vec<ValueId> = order[a..n]
            .iter()
            .flat_map(|&id| g.node(id).outputs.clone())
            .collect();
        let mut leaving: Vec<ValueId> = made
            .iter()
            .copied()
            .filter(|v| !global.contains(v))
            .filter(|v| g.outputs.contains(v) || last_read.get(v).is_some_and(|&s| s >= n))
            .collect();
        let Some(out) = leaving.pop() else {
            continue;
        };
        let out = &out;
        let oty = &g.value(*out).ty;
        if !plane(oty) || !leaving.iter().all(|&v| plane(&g.value(v).ty)) {
            continue;
        }
        let all: Vec<ValueId> = std::iter::once(*out).chain(leaving.clone()).collect();
        // Not between a Conv and its epilogue's activation (the stage one node longer).
        if all.iter().any(|v| epilogue.contains(v)) {
            continue;
        }
        // A stage holding global pools runs in passes; one pass without.
        // After a later segment: live values, as before it.
        let rest_bytes = if a == 0 {
            rest_peak(g, live, at, step_of, n, *out)
        } else {
            by_value
                .get(n..steps)
                .and_then(|r| r.iter().copied().max())
                .unwrap_or(0)
        };
        if a > 0 && rest_bytes.max(before) >= unpatched_bytes {
            continue;
        }
        let Some(plan) = passes::plan(g, sub, m, &global, &all) else {
            break;
        };
        let targets: Vec<Vec<ValueId>> = plan
            .iter()
            .map(|pass| passes::targets(g, pass, &all))
            .collect();
        let cut_of: Vec<Cut> = plan
            .iter()
            .map(|pass| Cut {
                global: global.clone(),
                stop: pass.read.into_iter().collect(),
            })
            .collect();
        // Every value a pass writes or pools is cut into the grid's cells.
        let side = targets
            .iter()
            .flatten()
            .map(|&v| {
                let s = &g.value(v).ty.shape;
                s.get(2)
                    .copied()
                    .unwrap_or(0)
                    .min(s.get(3).copied().unwrap_or(0))
            })
            .min()
            .unwrap_or(0);
        let whole: usize = leaving
            .iter()
            .map(|&v| aligned(g.value(v).ty.bytes().unwrap_or(0)))
            .sum();
        let bytes_of =
            |v: Option<ValueId>| v.map_or(0, |v| aligned(g.value(v).ty.bytes().unwrap_or(0)));
        // Graph inputs stay whole until the last pass reading them (a later segment: the
        // values made before it, over every pass).
        let inputs: usize = if a > 0 {
            held
        } else {
            g.value_ids()
                .filter(|&v| g.value(v).kind == ValueKind::Input)
                .map(|v| aligned(g.value(v).ty.bytes().unwrap_or(0)))
                .sum()
        };
        let inputs_until = plan
            .iter()
            .enumerate()
            .filter(|(q, _)| {
                a > 0
                    || passes::closure(g, sub, m, &targets[*q], &cut_of[*q].stop, &global)
                        .iter()
                        .any(|&id| {
                            g.node(id)
                                .inputs
                                .iter()
                                .any(|&v| g.value(v).kind == ValueKind::Input)
                        })
            })
            .map(|(q, _)| q)
            .max()
            .unwrap_or(0);
        let stage_flops: u64 = order[a..n].iter().map(|&id| flops_of(g, id)).sum();
        // Each stage value but the output and the pooled ones: (value, producer's step, last
        // reader's step clamped to the stage, bytes per pixel).
        let spans: Vec<(ValueId, usize, usize, usize)> = made
            .iter()
            .filter(|&&v| v != *out && !global.contains(&v))
            .map(|&v| {
                let start = match g.value(v).kind {
                    ValueKind::Computed(p) => step_of.get(&p).copied().unwrap_or(a),
                    _ => a,
                }
                .saturating_sub(a);
                let end = last_read
                    .get(&v)
                    .copied()
                    .unwrap_or(a + start)
                    .saturating_sub(a)
                    .clamp(start, m - 1);
                let t = &g.value(v).ty;
                let elem = t.shape.get(1).copied().unwrap_or(1) * t.dtype.size();
                (v, start.min(m - 1), end, elem)
            })
            .collect();
        let len = |m: &[Option<Range<usize>>], v: ValueId| {
            m.get(v.index())
                .and_then(Option::as_ref)
                .map_or(0, |r| r.len())
        };
        for p in 2..=max_grid.min(side) {
            let mut stage_bytes = 0usize;
            // Output elements computed over all patches of all passes, per value.
            let mut area: HashMap<ValueId, usize> = HashMap::new();
            // Per value, the summed row and column lengths of its windows (the last pass
            // computing it).
            let mut sums: HashMap<ValueId, (usize, usize)> = HashMap::new();
            for (q, pass) in plan.iter().enumerate() {
                let t = &targets[q];
                let cut = &cut_of[q];
                let cuts = |dim: usize| -> Vec<Vec<Option<Range<usize>>>> {
                    (0..p)
                        .map(|i| {
                            let seeds = cells(g, t[0], &t[1..], p, dim, i);
                            ranges_cut(g, sub, m, &seeds, dim, cut)
                        })
                        .collect()
                };
                let (rows, cols) = (cuts(0), cuts(1));
                // Per row (column) range of the grid: each span value's row (column) count.
                let lens = |ms: &[Vec<Option<Range<usize>>>]| -> Vec<Vec<usize>> {
                    ms.iter()
                        .map(|m| spans.iter().map(|&(v, ..)| len(m, v)).collect())
                        .collect()
                };
                let (row_lens, col_lens) = (lens(&rows), lens(&cols));
                let mut worst = 0usize;
                let mut diff = vec![0isize; m + 1];
                for rl in &row_lens {
                    for cl in &col_lens {
                        // Live bytes per step: each value from its producer's step to its
                        // last reader's (a difference array, then its running sum).
                        diff.fill(0);
                        for (k, &(_, start, end, elem)) in spans.iter().enumerate() {
                            let b = aligned(elem * rl[k] * cl[k]) as isize;
                            diff[start] += b;
                            diff[end + 1] -= b;
                        }
                        let mut live_bytes = 0isize;
                        for d in &diff[..m] {
                            live_bytes += d;
                            worst = worst.max(live_bytes.max(0) as usize);
                        }
                    }
                }
                // Whole values live in this pass: the checkpoints read and written, the
                // leaving values in the last pass, the graph inputs until read.
                let mut here = bytes_of(pass.read).saturating_add(bytes_of(pass.write));
                if pass.pool.is_none() {
                    here = here
                        .saturating_add(aligned(oty.bytes().unwrap_or(0)))
                        .saturating_add(whole);
                }
                if q <= inputs_until {
                    here = here.saturating_add(inputs);
                }
                stage_bytes = stage_bytes.max(here.saturating_add(worst));
                // (sum of row lengths) x (sum of column lengths) per value computed here.
                for &id in &order[a..n] {
                    let Some(&y) = g.node(id).outputs.first() else {
                        continue;
                    };
                    if cut.stop.contains(&y) {
                        continue;
                    }
                    let (rs, cs) = (
                        rows.iter().map(|m| len(m, y)).sum::<usize>(),
                        cols.iter().map(|m| len(m, y)).sum::<usize>(),
                    );
                    *area.entry(y).or_insert(0) += rs * cs;
                    sums.insert(y, (rs, cs));
                }
            }
            let extra_flops: u64 = order[a..n]
                .iter()
                .filter_map(|&id| Some((id, *g.node(id).outputs.first()?)))
                .map(|(id, y)| {
                    let full = g
                        .value(y)
                        .ty
                        .shape
                        .get(2..4)
                        .map_or(1, |s| s.iter().product());
                    let f = flops_of(g, id);
                    let done = match area.get(&y).copied().unwrap_or(0) {
                        0 => full,
                        a => a,
                    };
                    let scaled = (f as f64 * done as f64 / full.max(1) as f64) as u64;
                    scaled.saturating_sub(f)
                })
                .sum();
            // Winograd Convs whose mean window no longer takes it.
            let slow_flops: u64 = order[a..n]
                .iter()
                .filter_map(|&id| {
                    let wp = wino.get(&id)?;
                    let &(rs, cs) = sums.get(g.node(id).outputs.first()?)?;
                    (!fast::keeps_winograd(wp, rs / p, cs / p))
                        .then(|| fast::slow_flops(flops_of(g, id)))
                })
                .sum();
            candidates.push(PatchPlan {
                start: a,
                nodes: n,
                output: *out,
                leaving: leaving.clone(),
                grid: p,
                passes: plan.clone(),
                peak_bytes: stage_bytes.max(rest_bytes).max(before),
                stage_bytes,
                rest_bytes,
                extra_flops,
                slow_flops,
                stage_flops,
            });
            // Finer grids only recompute more: the rest of the graph is the peak now.
            if stage_bytes <= rest_bytes {
                break;
            }
        }
    }
}

/// Longest later segment tried (nodes).
pub const MAX_SEGMENT: usize = 48;

/// Row (`dim` 0) or column (1) range `i` of a `p`-way cut of each leaving value: the
/// stage output `out` first, then `others`.
pub fn cells(
    g: &Graph,
    out: ValueId,
    others: &[ValueId],
    p: usize,
    dim: usize,
    i: usize,
) -> Vec<(ValueId, Range<usize>)> {
    std::iter::once(out)
        .chain(others.iter().copied())
        .filter_map(|v| {
            let len = *g.value(v).ty.shape.get(2 + dim)?;
            Some((v, split(len, p).get(i)?.clone()))
        })
        .collect()
}

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
    let report = analyze(g, order, opts, MAX_GRID);
    // The best candidate the rewrite expresses (a later segment may hold what it cannot:
    // then the next best, not no stage at all).
    let (best, ng) = report
        .ranked(max_extra)
        .into_iter()
        .take(RETRIES)
        .find_map(|c| lower::rewrite(g, order, c).map(|ng| (c, ng)))?;
    Some((
        ng,
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
        },
    ))
}

mod ends;
mod fast;
mod info;
mod lower;
pub mod passes;
pub use info::PatchInfo;
pub use lower::rewrite;

#[cfg(test)]
mod tests;
