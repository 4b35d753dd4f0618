//! The lowering of a one-pass stage with cached halo rows ([`super::PatchPlan::cached`],
//! `cache.rs`): the patches column by column, top to bottom; in each the stage's nodes on
//! their new rows only (the columns with their halos), each value's window for its readers
//! the cache the patch above kept joined to the new rows (`Concat` along the rows), and the
//! cache for the patch below cut right after the value's new rows are made, so only the
//! caches live from one patch to the next. `None` when the windows do not move down
//! monotonically (a cache would have to hold rows it dropped): [`super::rewrite`] then
//! recomputes the halos.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use super::cache;
use super::lower::{Patch, Rewrite};
use super::window::{Slots, ranges_in};
use super::{Cut, Window, cells};
use crate::ir::graph::{NodeId, ValueId};
use crate::ops::Op;

/// Emits the `p x q` patches (`p` rows of `q`) of the stage `stage` (`order[..n]`, values made there: `made`)
/// whose written values are `t` (the stage output first), chaining each one's `PatchWrite`s
/// in `acc`.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    b: &mut Rewrite<'_>,
    order: &[NodeId],
    n: usize,
    stage: &[NodeId],
    made: &HashSet<ValueId>,
    t: &[ValueId],
    (p, q): (usize, usize),
    cut: &Cut,
    acc: &mut [Option<ValueId>],
) -> Option<()> {
    let g = b.g;
    let first = *t.first()?;
    let cut_of = |dim: usize, p: usize| -> Vec<Vec<(ValueId, Range<usize>)>> {
        (0..p)
            .map(|i| cells(g, first, t.get(1..).unwrap_or(&[]), p, dim, i))
            .collect()
    };
    let (row_cells, col_cells) = (cut_of(0, p), cut_of(1, q));
    if row_cells
        .iter()
        .chain(&col_cells)
        .any(|c| c.len() != t.len())
    {
        return None;
    }
    let slots = Slots::of_nodes(g, &order[..n.min(order.len())]);
    let wins: Vec<Vec<Option<Range<usize>>>> = row_cells
        .iter()
        .map(|c| ranges_in(order, n, c, 0, cut, &slots))
        .collect();
    let rows = cache::rows(g, order, n, &wins, &row_cells, cut, &slots);
    let mut k = 0;
    for (j, col_cell) in col_cells.iter().enumerate() {
        let cols = ranges_in(order, n, col_cell, 1, cut, &slots);
        let mut tail: HashMap<ValueId, (ValueId, Window)> = HashMap::new();
        for (i, row_cell) in row_cells.iter().enumerate() {
            let r = rows.get(i)?;
            let (mut win, mut keep) = (HashMap::new(), HashMap::new());
            for &v in made {
                let Some(c) = slots.get(v).and_then(|k| cols.get(k)).cloned().flatten() else {
                    continue;
                };
                if let Some(nr) = r.new_of(&slots, v) {
                    let w = Window {
                        rows: nr,
                        cols: c.clone(),
                    };
                    win.insert(v, w);
                }
                let kept = r.keep_of(&slots, v);
                if let (Some(f), Some(e)) = (kept, r.made_to_of(&slots, v)) {
                    keep.insert(
                        v,
                        Window {
                            rows: f..e,
                            cols: c,
                        },
                    );
                }
            }
            let mut patch = Patch {
                tag: format!("p{i}x{j}"),
                values: HashMap::new(),
                slices: HashMap::new(),
                stop: cut.stop.clone(),
                global: &cut.global,
                tail,
                next_tail: HashMap::new(),
                keep,
            };
            for &id in stage {
                b.node_on_patch(id, &win, made, &mut patch)?;
            }
            k += 1;
            for (idx, (&v, (_, rr))) in t.iter().zip(row_cell).enumerate() {
                let cc = col_cell.get(idx)?.1.clone();
                let want = Window {
                    rows: rr.clone(),
                    cols: cc,
                };
                let pv = b.window_of(v, &want, made, &mut patch)?;
                let vname = g.value(v).name.clone();
                let full = &g.value(v).ty.shape;
                let op = Op::PatchWrite {
                    at: [want.rows.start, want.cols.start],
                    full: [*full.get(2)?, *full.get(3)?],
                };
                let slot = acc.get_mut(idx)?;
                let name = if k == p * q {
                    vname.clone()
                } else {
                    b.fresh(&format!("{vname}@acc{k}"))
                };
                let ins: Vec<ValueId> = slot.iter().copied().chain([pv]).collect();
                *slot = Some(b.add(format!("{vname}@write{k}"), op, &ins, name)?);
            }
            tail = patch.tail;
            tail.extend(patch.next_tail);
        }
    }
    Some(())
}
