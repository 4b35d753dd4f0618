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

use std::ops::Range;

use super::search::Sums;
use super::window::{CUT_GLOBAL, Cut, Slots, ranges_in, slot_len};
use crate::ir::graph::{Graph, NodeId, ValueId};

/// One patch row of a cached stage, per value slot ([`Slots`]: the values the stage's nodes
/// read or make; `None`: nothing).
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

impl Rows {
    /// The rows of `v` made in this patch row.
    pub(super) fn new_of(&self, slots: &Slots, v: ValueId) -> Option<Range<usize>> {
        self.new.get(slots.get(v)?).cloned().flatten()
    }

    /// The rows of `v` its readers read in this patch row.
    pub(super) fn read_of(&self, slots: &Slots, v: ValueId) -> Option<Range<usize>> {
        self.read.get(slots.get(v)?).cloned().flatten()
    }

    /// The first row of `v` kept after this patch row.
    pub(super) fn keep_of(&self, slots: &Slots, v: ValueId) -> Option<usize> {
        self.keep.get(slots.get(v)?).copied().flatten()
    }

    /// The last row of `v` made so far (exclusive).
    pub(super) fn made_to_of(&self, slots: &Slots, v: ValueId) -> Option<usize> {
        self.made_to.get(slots.get(v)?).copied().flatten()
    }
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
/// per patch row are `wins` (today's rows per value slot of `slots`, one entry per patch row)
/// and whose written cells per patch row are `cells`.
pub(super) fn rows(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    wins: &[Vec<Option<Range<usize>>>],
    cells: &[Vec<(ValueId, Range<usize>)>],
    cut: &Cut,
    slots: &Slots,
) -> Vec<Rows> {
    let count = slots.len();
    let stage = &order[..n.min(order.len())];
    let steps = &slots.steps()[..stage.len().min(slots.steps().len())];
    let flags = slots.cut_flags(cut);
    let flag = |k: usize| flags.get(k).copied().unwrap_or(0);
    // The slots of the values made in the stage.
    let made: Vec<usize> = stage
        .iter()
        .flat_map(|&id| g.node(id).outputs.iter().copied())
        .filter_map(|v| slots.get(v))
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
        for &k in &made {
            let Some(w) = win.get(k).cloned().flatten() else {
                continue;
            };
            let Some(e) = end.get_mut(k) else {
                continue;
            };
            let from = e.map_or(w.start, |e| e.max(w.start));
            if w.end > from {
                if let Some(nk) = r.new.get_mut(k) {
                    *nk = Some(from..w.end);
                }
                *e = Some(w.end);
            }
        }
        r.made_to.clone_from(&end);
        for st in steps {
            let (Some(local), Some(_)) = (st.rule, st.y) else {
                continue;
            };
            let Some(ny) = st.window(&r.new) else {
                continue;
            };
            if flag(st.ys) != 0 {
                continue;
            }
            for &(_, k, size, windowed) in &st.reads {
                if flag(k) & CUT_GLOBAL != 0 {
                    continue;
                }
                let want = match local {
                    Some(l) if windowed => l.back(&ny, 0, size[0]),
                    _ => ny.clone(),
                };
                if let Some(slot) = r.read.get_mut(k) {
                    *slot = union(slot.take(), want);
                }
            }
        }
        for (v, c) in cells.get(i).into_iter().flatten() {
            if let Some(slot) = slots.get(*v).and_then(|k| r.read.get_mut(k)) {
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
            let (Some(here), Some(below)) = (head.get_mut(i), tail.first()) else {
                continue;
            };
            for &k in &made {
                let read = below.read.get(k).cloned().flatten();
                let before = here.made_to.get(k).copied().flatten();
                let (Some(read), Some(before), Some(f)) = (read, before, first.get_mut(k)) else {
                    continue;
                };
                if read.start < before {
                    *f = Some(f.map_or(read.start, |f| f.min(read.start)));
                }
            }
            for &k in &made {
                let made_to = here.made_to.get(k).copied().flatten();
                let f = first.get(k).copied().flatten();
                if let Some(keep) = here.keep.get_mut(k) {
                    *keep = f.filter(|&f| made_to.is_some_and(|e| f < e));
                }
            }
        }
    }
    out
}

/// Rows (per patch row) and the values' new rows summed over the patch rows: what a cached
/// stage computes of each value along the rows.
pub(super) fn new_rows(rows: &[Rows], slots: &Slots, v: ValueId) -> usize {
    rows.iter()
        .map(|r| r.new_of(slots, v).map_or(0, |x| x.len()))
        .sum()
}

/// The rows of `v` held during patch row `i` (its readers' rows and its new rows: the cache
/// joined to the new rows), and the rows of its cache kept after it.
pub(super) fn held(rows: &[Rows], slots: &Slots, i: usize, v: ValueId) -> (usize, usize) {
    let Some(r) = rows.get(i) else {
        return (0, 0);
    };
    let span = match (r.new_of(slots, v), r.read_of(slots, v)) {
        (Some(a), Some(b)) => a.start.min(b.start)..a.end.max(b.end),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => 0..0,
    };
    let kept = match (r.keep_of(slots, v), r.made_to_of(slots, v)) {
        (Some(f), Some(e)) => e.saturating_sub(f),
        _ => 0,
    };
    (span.len(), kept)
}

/// The rows side of a cached one-pass stage on `p` patch rows: the cells written per patch
/// row, each row's windows (per value slot) and the row plan ([`rows`]). Shared by the
/// square cached grid and the strips of the same `p`, and its windows by the recomputing
/// grid (`search.rs`).
pub(super) struct RowPlan {
    /// The windows per patch row (today's: halos recomputed), per value slot.
    pub(super) wins: Vec<Vec<Option<Range<usize>>>>,
    /// The cached row plan.
    pub(super) rows: Vec<Rows>,
}

/// The [`RowPlan`] of the stage `sub[..m]` writing `t` (the stage output first) on `p` patch
/// rows.
pub(super) fn row_plan(
    g: &Graph,
    sub: &[NodeId],
    m: usize,
    t: &[ValueId],
    p: usize,
    cut: &Cut,
    slots: &Slots,
) -> RowPlan {
    let Some((&first, others)) = t.split_first() else {
        return RowPlan {
            wins: Vec::new(),
            rows: Vec::new(),
        };
    };
    let row_cells: Vec<Vec<(ValueId, Range<usize>)>> = (0..p)
        .map(|i| super::cells(g, first, others, p, 0, i))
        .collect();
    let wins: Vec<Vec<Option<Range<usize>>>> = row_cells
        .iter()
        .map(|c| ranges_in(sub, m, c, 0, cut, slots))
        .collect();
    let rows = rows(g, sub, m, &wins, &row_cells, cut, slots);
    RowPlan { wins, rows }
}

/// The cost of the cached stage `stage` (`sub[..m]`) on the row plan `plan` and the columns
/// `cols` (each column's windows per value slot): the largest patch working set — each value
/// in `spans` (value, producer's step, last reader's step, bytes per pixel) on its rows held
/// ([`held`]) from producer to last reader, plus the caches read and kept, all the patch — and
/// per stage value its new rows summed over the patch rows and its column lengths summed over
/// the columns.
pub(super) fn stage_cost(
    g: &Graph,
    m: usize,
    stage: &[NodeId],
    plan: &RowPlan,
    cols: &[Vec<Option<Range<usize>>>],
    spans: &[(ValueId, usize, usize, usize)],
    slots: &Slots,
) -> (usize, Sums) {
    let aligned = |b: usize| crate::plan::align_up(b, crate::plan::ALIGN).unwrap_or(usize::MAX);
    let plan = &plan.rows;
    let col_lens: Vec<Vec<usize>> = cols
        .iter()
        .map(|w| spans.iter().map(|&(v, ..)| slot_len(slots, w, v)).collect())
        .collect();
    let mut worst = 0usize;
    let mut diff = vec![0isize; m + 1];
    let mut kept_before = vec![0usize; spans.len()];
    for i in 0..plan.len() {
        let here: Vec<(usize, usize)> = spans
            .iter()
            .map(|&(v, ..)| held(plan, slots, i, v))
            .collect();
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
    let mut sums: Sums = vec![None; slots.len()];
    for y in stage
        .iter()
        .filter_map(|&id| g.node(id).outputs.first().copied())
    {
        let cs = cols.iter().map(|w| slot_len(slots, w, y)).sum::<usize>();
        if let Some(x) = slots.get(y).and_then(|k| sums.get_mut(k)) {
            *x = Some((new_rows(plan, slots, y), cs));
        }
    }
    (worst, sums)
}
