//! The candidate search and its cost model ([`analyze`]): for each stage start and end in
//! the schedule and each grid, the predicted peak with patches (the stage: inputs, leaving
//! values whole and the largest patch working set; the rest: today's buffers after it), the
//! recomputed FLOPs and the FLOPs of Convs that lose Winograd (`fast.rs`).

use std::collections::HashMap;
use std::ops::Range;

use super::window::{Cut, Slots, cells, plane, ranges_in, rule, slot_len};
use super::{PatchPlan, PatchReport, cache, ends, fast, passes};
use crate::analysis::liveness::{Liveness, LivenessOptions, liveness_with};
use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::types::TensorType;
use crate::plan::{ALIGN, align_up};

/// Per stage value (by slot, [`Slots`]): its rows summed over the patch rows and its columns
/// over the columns.
pub(super) type Sums = Vec<Option<(usize, usize)>>;

/// The area (rows x columns) a stage computes of each value in `sums`, by slot.
fn areas(sums: &Sums) -> Vec<usize> {
    sums.iter().map(|s| s.map_or(0, |(r, c)| r * c)).collect()
}

fn aligned(b: usize) -> usize {
    align_up(b, ALIGN).unwrap_or(usize::MAX)
}

pub(super) fn flops_of(g: &Graph, id: NodeId) -> u64 {
    let n = g.node(id);
    let ins: Vec<TensorType> = n.inputs.iter().map(|&v| g.value(v).ty.clone()).collect();
    let outs: Vec<TensorType> = n.outputs.iter().map(|&v| g.value(v).ty.clone()).collect();
    crate::ops::cost::flops(&n.op, &ins, &outs)
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
    // Each step's FLOPs, found once.
    let flops_at: Vec<u64> = order.iter().map(|&id| flops_of(g, id)).collect();
    let total_flops = flops_at.iter().sum();
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
    // The slots of the values of the segment at hand (refilled per segment).
    let mut slots = Slots::default();
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
    // Per later segment start `a`, the values made before it (and graph inputs) that it reads
    // or that outlive it, whole during the stage: each value counts from the step after its
    // producer's to its last reader's (the end for graph outputs); a difference array.
    let mut held_at = vec![0usize; steps + 2];
    {
        let mut diff = vec![0isize; steps + 2];
        for v in g.value_ids() {
            if matches!(g.value(v).kind, ValueKind::Constant(_)) {
                continue;
            }
            let Some(s) = produced(v) else {
                continue;
            };
            let hi = if g.outputs.contains(&v) {
                steps
            } else {
                match last_read.get(&v) {
                    Some(&r) => r.min(steps),
                    None => continue,
                }
            };
            if hi < s + 1 {
                continue;
            }
            let b = aligned(g.value(v).ty.bytes().unwrap_or(0)) as isize;
            diff[s + 1] += b;
            diff[hi + 1] -= b;
        }
        let mut run = 0isize;
        for (t, d) in diff.iter().enumerate().take(steps + 1) {
            run += d;
            held_at[t] = run.max(0) as usize;
        }
    }
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
        let held = if a == 0 {
            0
        } else {
            held_at.get(a).copied().unwrap_or(0)
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
            &flops_at,
            &mut slots,
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
    flops_at: &[u64],
    slots: &mut Slots,
    candidates: &mut Vec<PatchPlan>,
) {
    let global = global.clone();
    let max_len = if a == 0 {
        steps
    } else {
        (a + MAX_SEGMENT).min(steps)
    };
    // A stage node: local, or making pooled values only.
    let takes = |n: usize| {
        let last = g.node(order[n - 1]);
        let once = !last.outputs.is_empty() && last.outputs.iter().all(|v| global.contains(v));
        rule(g, order[n - 1]).is_some() || once
    };
    // The longest stage from `a`: its values numbered once for every end.
    let end = (a + 1..=max_len)
        .find(|&n| !takes(n))
        .map_or(max_len, |n| n - 1);
    slots.refill(g, &order[a..end]);
    let slots = &*slots;
    for n in a + 1..=end {
        let m = n - a;
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
        let stage_flops: u64 = flops_at.get(a..n).map_or(0, |f| f.iter().sum());
        // The stage's nodes with their FLOPs.
        let with_flops = || order[a..n].iter().zip(flops_at.get(a..n).unwrap_or(&[]));
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
        let len = |m: &[Option<Range<usize>>], v: ValueId| slot_len(slots, m, v);
        let extra_of = |area: &[usize]| -> u64 {
            with_flops()
                .filter_map(|(&id, &f)| Some((f, *g.node(id).outputs.first()?)))
                .map(|(f, y)| {
                    let full = g
                        .value(y)
                        .ty
                        .shape
                        .get(2..4)
                        .map_or(1, |s| s.iter().product());
                    let done = match slots.get(y).and_then(|k| area.get(k)).copied().unwrap_or(0) {
                        0 => full,
                        a => a,
                    };
                    let scaled = (f as f64 * done as f64 / full.max(1) as f64) as u64;
                    scaled.saturating_sub(f)
                })
                .sum()
        };
        // Winograd Convs whose mean window no longer takes it.
        let slow_of = |sums: &Sums, p: usize, q: usize| -> u64 {
            with_flops()
                .filter_map(|(&id, &f)| {
                    let wp = wino.get(&id)?;
                    let k = slots.get(*g.node(id).outputs.first()?)?;
                    let (rs, cs) = sums.get(k).copied().flatten()?;
                    (!fast::keeps_winograd(wp, rs / p, cs / q)).then(|| fast::slow_flops(f))
                })
                .sum()
        };
        // The rows side of a one-pass stage per number of patch rows: shared by its
        // recomputing and cached square grids and its strips.
        let mut row_plans: HashMap<usize, cache::RowPlan> = HashMap::new();
        let one = plan.len() == 1;
        for p in 2..=max_grid.min(side) {
            let mut stage_bytes = 0usize;
            // Output elements computed over all patches of all passes, per value.
            let mut area: Vec<usize> = vec![0; slots.len()];
            // Per value, the summed row and column lengths of its windows (the last pass
            // computing it).
            let mut sums: Sums = vec![None; slots.len()];
            // A one-pass stage with cached halo rows: its working set, and per value the
            // summed new rows and the column lengths.
            let mut cached: Option<(usize, Sums)> = None;
            for (q, pass) in plan.iter().enumerate() {
                let t = &targets[q];
                let cut = &cut_of[q];
                let cuts = |dim: usize| -> Vec<Vec<Option<Range<usize>>>> {
                    (0..p)
                        .map(|i| {
                            let seeds = cells(g, t[0], &t[1..], p, dim, i);
                            ranges_in(sub, m, &seeds, dim, cut, slots)
                        })
                        .collect()
                };
                if one && !row_plans.contains_key(&p) {
                    row_plans.insert(p, cache::row_plan(g, sub, m, t, p, cut, slots));
                }
                let own;
                let rows: &[Vec<Option<Range<usize>>>] = match row_plans.get(&p).filter(|_| one) {
                    Some(rp) => &rp.wins,
                    None => {
                        own = cuts(0);
                        &own
                    }
                };
                let cols = cuts(1);
                // Per row (column) range of the grid: each span value's row (column) count.
                let lens = |ms: &[Vec<Option<Range<usize>>>]| -> Vec<Vec<usize>> {
                    ms.iter()
                        .map(|m| spans.iter().map(|&(v, ..)| len(m, v)).collect())
                        .collect()
                };
                let (row_lens, col_lens) = (lens(rows), lens(&cols));
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
                if let Some(rp) = row_plans.get(&p).filter(|_| one) {
                    let (cworst, csums) =
                        cache::stage_cost(g, m, &order[a..n], rp, &cols, &spans, slots);
                    cached = Some((here.saturating_add(cworst), csums));
                }
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
                    if let Some(k) = slots.get(y) {
                        if let Some(x) = area.get_mut(k) {
                            *x += rs * cs;
                        }
                        if let Some(x) = sums.get_mut(k) {
                            *x = Some((rs, cs));
                        }
                    }
                }
            }
            let (extra_flops, slow_flops) = (extra_of(&area), slow_of(&sums, p, p));
            if let Some((cstage, csums)) = &cached {
                let carea = areas(csums);
                candidates.push(PatchPlan {
                    start: a,
                    nodes: n,
                    output: *out,
                    leaving: leaving.clone(),
                    grid: p,
                    columns: p,
                    cached: true,
                    passes: plan.clone(),
                    peak_bytes: (*cstage).max(rest_bytes).max(before),
                    stage_bytes: *cstage,
                    rest_bytes,
                    extra_flops: extra_of(&carea),
                    slow_flops: slow_of(csums, p, p),
                    stage_flops,
                });
            }
            candidates.push(PatchPlan {
                start: a,
                nodes: n,
                output: *out,
                leaving: leaving.clone(),
                grid: p,
                columns: p,
                cached: false,
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
        // Strips of whole rows, cached: no halo recomputed at all (a one-pass stage).
        if let ([pass], [t], [cut]) = (&plan[..], &targets[..], &cut_of[..])
            && pass.pool.is_none()
        {
            let here = bytes_of(pass.read)
                .saturating_add(bytes_of(pass.write))
                .saturating_add(aligned(oty.bytes().unwrap_or(0)))
                .saturating_add(whole)
                .saturating_add(inputs);
            let cols = vec![ranges_in(
                sub,
                m,
                &cells(g, t[0], &t[1..], 1, 1, 0),
                1,
                cut,
                slots,
            )];
            let high = t
                .iter()
                .filter_map(|&v| g.value(v).ty.shape.get(2).copied())
                .min()
                .unwrap_or(0);
            // Dense Convs (not depthwise, not 1x1) run direct on few rows far below their
            // whole-plane speed, which the FLOPs do not show (DBNet-320's 3x3 Convs on 16
            // strips of 2-5 rows: 66 vs 104 GFLOP/s, the run 1.55x): strips leave each at
            // least `MIN_STRIP_ROWS` output rows. Stems (few input channels, cheap rows) do
            // not count: MobileNetV2's on 28 strips of 4 rows ran as fast as whole.
            let dense_h = order[a..n]
                .iter()
                .filter(|&&id| match &g.node(id).op {
                    crate::ops::Op::Conv(c) => {
                        let cin = g
                            .node(id)
                            .inputs
                            .first()
                            .and_then(|&x| g.value(x).ty.shape.get(1).copied());
                        c.group == 1
                            && c.kernel.iter().product::<usize>() > 1
                            && cin.is_some_and(|ci| ci >= MIN_DENSE_CHANNELS)
                    }
                    _ => false,
                })
                .filter_map(|&id| {
                    let y = *g.node(id).outputs.first()?;
                    g.value(y).ty.shape.get(2).copied()
                })
                .min()
                .unwrap_or(usize::MAX);
            let most = MAX_STRIPS.min(high).min(dense_h / MIN_STRIP_ROWS);
            for p in 2..=most {
                let rp = row_plans
                    .entry(p)
                    .or_insert_with(|| cache::row_plan(g, sub, m, t, p, cut, slots));
                let (w, sums) = cache::stage_cost(g, m, &order[a..n], rp, &cols, &spans, slots);
                let stage_bytes = here.saturating_add(w);
                let area = areas(&sums);
                candidates.push(PatchPlan {
                    start: a,
                    nodes: n,
                    output: *out,
                    leaving: leaving.clone(),
                    grid: p,
                    columns: 1,
                    cached: true,
                    passes: plan.clone(),
                    peak_bytes: stage_bytes.max(rest_bytes).max(before),
                    stage_bytes,
                    rest_bytes,
                    extra_flops: extra_of(&area),
                    slow_flops: slow_of(&sums, p, 1),
                    stage_flops,
                });
                if stage_bytes <= rest_bytes {
                    break;
                }
            }
        }
    }
}

/// Most strips (patches of whole rows, [`PatchPlan::columns`] 1) tried.
pub const MAX_STRIPS: usize = 32;

/// Fewest output rows per strip of a stage's dense (not depthwise, not pointwise) Convs.
pub const MIN_STRIP_ROWS: usize = 8;

/// Input channels from which a Conv counts as dense for [`MIN_STRIP_ROWS`].
pub const MIN_DENSE_CHANNELS: usize = 16;

/// Longest later segment tried (nodes).
pub const MAX_SEGMENT: usize = 48;
