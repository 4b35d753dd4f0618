//! Halo rows cached between vertically adjacent patches (StreamNet's stream buffers, TVM's
//! rolling buffers, DeFiNES' H-cached mode; `PATCHES.md` §1 end) instead of recomputed.
//!
//! The grid runs column by column, top to bottom, so only one column's caches are alive at
//! once. For a stage value `V` and patch row `i`, today's window ([`super::ranges_cut`], the
//! halo formula backwards) gives `V`'s rows `[s_i, e_i)`; the rows up to `e_{i-1}` were made
//! by the patch above. So patch row `i` makes only the *new* rows `[max(s_i, e_{i-1}), e_i)`
//! of `V` ([`Rows::new`]), its node reading the input rows the halo formula gives for them;
//! the rows its readers need ([`Rows::read`]: the union over the stage nodes reading `V` of
//! what their new rows read, and the cell written when `V` leaves the stage) that lie above
//! the new ones come from the cache, a copy of the last rows of `V` the patch above kept
//! ([`Rows::keep`]: from the first row a later patch row reads above its new ones). Columns
//! are still cut with their halos, recomputed.

use std::collections::HashMap;
use std::ops::Range;

use super::passes;
use super::window::{Cut, rule};
use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};

/// One patch row of a cached stage, per value id (`None`: nothing).
#[derive(Clone, Debug, Default)]
pub(super) struct Rows {
    /// The rows made in this patch row (stage values only).
    pub(super) new: Vec<Option<Range<usize>>>,
    /// The rows read by the stage nodes (from their new rows) and the cells written.
    pub(super) read: Vec<Option<Range<usize>>>,
    /// The first row kept after this patch row for the rows below (the cache runs from there
    /// to the last row made so far); `None` when no later patch row reads above its new rows.
    pub(super) keep: Vec<Option<usize>>,
    /// The last row made so far (exclusive), after this patch row.
    pub(super) made_to: Vec<Option<usize>>,
}

fn union(a: Option<Range<usize>>, b: Range<usize>) -> Option<Range<usize>> {
    if b.is_empty() {
        return a;
    }
    Some(match a {
        Some(a) => a.start.min(b.start)..a.end.max(b.end),
        None => b,
    })
}

/// The cached row plan of the stage `order[..n]` (values made there: `made`) whose windows
/// per patch row are `wins` (today's rows per value id, one entry per patch row) and whose
/// written cells per patch row are `cells`.
pub(super) fn rows(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    wins: &[Vec<Option<Range<usize>>>],
    cells: &[Vec<(ValueId, Range<usize>)>],
    cut: &Cut,
) -> Vec<Rows> {
    let count = g.values().len();
    let stage = &order[..n.min(order.len())];
    let made: Vec<ValueId> = stage
        .iter()
        .flat_map(|&id| g.node(id).outputs.iter().copied())
        .collect();
    let mut out: Vec<Rows> = Vec::with_capacity(wins.len());
    let mut end: Vec<Option<usize>> = vec![None; count];
    for (i, win) in wins.iter().enumerate() {
        let mut r = Rows {
            new: vec![None; count],
            read: vec![None; count],
            keep: vec![None; count],
            made_to: vec![None; count],
        };
        for &v in &made {
            let Some(w) = win.get(v.index()).cloned().flatten() else {
                continue;
            };
            let from = end[v.index()].map_or(w.start, |e| e.max(w.start));
            if w.end > from {
                r.new[v.index()] = Some(from..w.end);
                end[v.index()] = Some(w.end);
            }
        }
        r.made_to.clone_from(&end);
        for &id in stage {
            let node = g.node(id);
            let Some(&y) = node.outputs.first() else {
                continue;
            };
            let Some(ny) = r.new.get(y.index()).cloned().flatten() else {
                continue;
            };
            if cut.stop.contains(&y) || cut.global.contains(&y) {
                continue;
            }
            let Some(local) = rule(g, id) else {
                continue;
            };
            let reads = match local {
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
                let size = g.value(v).ty.shape.get(2).copied().unwrap_or(1);
                let want = match local {
                    None => ny.clone(),
                    Some(l) => l.back(&ny, 0, size),
                };
                if let Some(slot) = r.read.get_mut(v.index()) {
                    *slot = union(slot.take(), want);
                }
            }
        }
        for (v, c) in cells.get(i).into_iter().flatten() {
            if let Some(slot) = r.read.get_mut(v.index()) {
                *slot = union(slot.take(), c.clone());
            }
        }
        out.push(r);
    }
    // What each patch row keeps for the rows below: from the first row a later one reads
    // above its own new rows (what the rows before it made).
    let mut first: Vec<Option<usize>> = vec![None; count];
    for i in (0..out.len()).rev() {
        if i + 1 < out.len() {
            let (head, tail) = out.split_at_mut(i + 1);
            let (here, below) = (&mut head[i], &tail[0]);
            for &v in &made {
                let k = v.index();
                let (Some(read), Some(before)) = (below.read[k].clone(), here.made_to[k]) else {
                    continue;
                };
                if read.start < before {
                    first[k] = Some(first[k].map_or(read.start, |f| f.min(read.start)));
                }
            }
            for &v in &made {
                let k = v.index();
                here.keep[k] = first[k].filter(|&f| here.made_to[k].is_some_and(|e| f < e));
            }
        }
    }
    out
}

/// Rows (per patch row) and the values' new rows summed over the patch rows: what a cached
/// stage computes of each value along the rows, per value id.
pub(super) fn new_rows(rows: &[Rows], v: ValueId) -> usize {
    rows.iter()
        .map(|r| {
            r.new
                .get(v.index())
                .cloned()
                .flatten()
                .map_or(0, |x| x.len())
        })
        .sum()
}

/// The rows of `v` held during patch row `i` (its readers' rows and its new rows: the cache
/// joined to the new rows), and the rows of its cache kept after it.
pub(super) fn held(rows: &[Rows], i: usize, v: ValueId) -> (usize, usize) {
    let Some(r) = rows.get(i) else {
        return (0, 0);
    };
    let k = v.index();
    let new = r.new.get(k).cloned().flatten();
    let read = r.read.get(k).cloned().flatten();
    let span = match (new, read) {
        (Some(a), Some(b)) => a.start.min(b.start)..a.end.max(b.end),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => 0..0,
    };
    let kept = match (
        r.keep.get(k).copied().flatten(),
        r.made_to.get(k).copied().flatten(),
    ) {
        (Some(f), Some(e)) => e.saturating_sub(f),
        _ => 0,
    };
    (span.len(), kept)
}

/// The cost of the cached stage `stage` (`sub[..m]`, writing `t`, the stage output first) on
/// `p` rows of patches and the columns `cols` (each column's windows per value id): the
/// largest patch working set — each value in `spans` (value, producer's step, last reader's
/// step, bytes per pixel) on its rows held ([`held`]) from producer to last reader, plus the
/// caches read and kept, all the patch — and per stage value its new rows summed over the
/// patch rows and its column lengths summed over the columns.
#[allow(clippy::too_many_arguments)]
pub(super) fn stage_cost(
    g: &Graph,
    sub: &[NodeId],
    m: usize,
    stage: &[NodeId],
    t: &[ValueId],
    p: usize,
    cols: &[Vec<Option<Range<usize>>>],
    spans: &[(ValueId, usize, usize, usize)],
    cut: &Cut,
) -> (usize, HashMap<ValueId, (usize, usize)>) {
    let aligned = |b: usize| crate::plan::align_up(b, crate::plan::ALIGN).unwrap_or(usize::MAX);
    let len = |w: &[Option<Range<usize>>], v: ValueId| {
        w.get(v.index())
            .and_then(Option::as_ref)
            .map_or(0, |r| r.len())
    };
    let Some((&first, others)) = t.split_first() else {
        return (0, HashMap::new());
    };
    let row_cells: Vec<Vec<(ValueId, Range<usize>)>> = (0..p)
        .map(|i| super::cells(g, first, others, p, 0, i))
        .collect();
    let wins: Vec<Vec<Option<Range<usize>>>> = row_cells
        .iter()
        .map(|c| super::ranges_cut(g, sub, m, c, 0, cut))
        .collect();
    let plan = rows(g, sub, m, &wins, &row_cells, cut);
    let col_lens: Vec<Vec<usize>> = cols
        .iter()
        .map(|w| spans.iter().map(|&(v, ..)| len(w, v)).collect())
        .collect();
    let mut worst = 0usize;
    let mut diff = vec![0isize; m + 1];
    let mut kept_before = vec![0usize; spans.len()];
    for i in 0..p {
        let here: Vec<(usize, usize)> = spans.iter().map(|&(v, ..)| held(&plan, i, v)).collect();
        for cl in &col_lens {
            diff.fill(0);
            let mut tails = 0usize;
            for (k, &(_, start, end, elem)) in spans.iter().enumerate() {
                let b = aligned(elem * here[k].0 * cl[k]) as isize;
                if let Some(d) = diff.get_mut(start) {
                    *d += b;
                }
                if let Some(d) = diff.get_mut(end + 1) {
                    *d -= b;
                }
                tails = tails.saturating_add(aligned(elem * (here[k].1 + kept_before[k]) * cl[k]));
            }
            let mut live = 0isize;
            for d in diff.iter().take(m) {
                live += d;
                worst = worst.max((live.max(0) as usize).saturating_add(tails));
            }
        }
        kept_before = here.iter().map(|h| h.1).collect();
    }
    let sums = stage
        .iter()
        .filter_map(|&id| g.node(id).outputs.first().copied())
        .map(|y| {
            let cs = cols.iter().map(|w| len(w, y)).sum::<usize>();
            (y, (new_rows(&plan, y), cs))
        })
        .collect();
    (worst, sums)
}
