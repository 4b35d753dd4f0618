//! The shared placer (best fit or first fit against already-placed buffers that overlap in
//! time) and the buffer orders the heuristics feed it.

use super::Rec;

/// How a gap is chosen among those that fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fit {
    /// The smallest gap that fits (TFLite's `simple_memory_arena`); the top if none does.
    Best,
    /// The lowest gap that fits.
    First,
}

/// Most neighbour entries [`Neighbours::new`] stores (32 MiB of `u32`s); past that the packer
/// scans every placed buffer instead.
const MAX_PAIRS: usize = 8 << 20;

/// For each buffer, the buffers live with it at some step (compressed sparse rows), or `None`
/// when there are too many pairs to store.
#[derive(Clone, Debug)]
pub(super) struct Neighbours {
    rows: Vec<usize>,
    cols: Vec<u32>,
}

impl Neighbours {
    /// Finds all pairs of non-empty buffers live at a common step: one sweep over starts
    /// counts them, a second fills the rows.
    pub(super) fn new(recs: &[Rec]) -> Option<Neighbours> {
        u32::try_from(recs.len()).ok()?;
        let mut order: Vec<usize> = (0..recs.len())
            .filter(|&i| recs[i].size > 0 && recs[i].start < recs[i].end)
            .collect();
        order.sort_by_key(|&i| (recs[i].start, i));
        let sweep = |visit: &mut dyn FnMut(usize, usize) -> bool| -> bool {
            let mut active: Vec<usize> = Vec::new();
            for &b in &order {
                active.retain(|&a| recs[a].end > recs[b].start);
                for &a in &active {
                    if !visit(a, b) {
                        return false;
                    }
                }
                active.push(b);
            }
            true
        };
        let mut rows = vec![0usize; recs.len() + 1];
        let mut total = 0usize;
        let counted = sweep(&mut |a, b| {
            rows[a + 1] += 1;
            rows[b + 1] += 1;
            total += 2;
            total <= MAX_PAIRS
        });
        if !counted {
            return None;
        }
        for i in 0..recs.len() {
            rows[i + 1] += rows[i];
        }
        let mut fill = rows.clone();
        let mut cols = vec![0u32; total];
        sweep(&mut |a, b| {
            cols[fill[a]] = b as u32;
            fill[a] += 1;
            cols[fill[b]] = a as u32;
            fill[b] += 1;
            true
        });
        Some(Neighbours { rows, cols })
    }

    /// Number of entries (twice the number of pairs).
    pub(super) fn len(&self) -> usize {
        self.cols.len()
    }

    /// The buffers live with buffer `i` at some step.
    pub(super) fn of(&self, i: usize) -> &[u32] {
        self.rows
            .get(i..i + 2)
            .map_or(&[], |r| &self.cols[r[0]..r[1]])
    }
}

/// Buffers placed so far. A new buffer gathers the placed buffers live with it (from the
/// neighbour lists, or by scanning all placed ones when there are none), sorts them by offset
/// and scans for gaps bottom-up.
#[derive(Clone, Debug)]
pub(super) struct Packer<'a> {
    recs: &'a [Rec],
    neighbours: Option<&'a Neighbours>,
    offsets: Vec<Option<usize>>,
    placed: Vec<usize>,
    scratch: Vec<(usize, usize)>,
    /// Arena so far: max over placed buffers of offset + (aligned) size.
    pub(super) top: usize,
}

impl<'a> Packer<'a> {
    /// An empty arena for `recs`.
    pub(super) fn new(recs: &'a [Rec], neighbours: Option<&'a Neighbours>) -> Packer<'a> {
        Packer {
            recs,
            neighbours,
            offsets: vec![None; recs.len()],
            placed: Vec::new(),
            scratch: Vec::new(),
            top: 0,
        }
    }

    /// The offset buffer `i` would get, without placing it.
    pub(super) fn find(&mut self, i: usize, fit: Fit) -> usize {
        let r = self.recs[i];
        if r.size == 0 {
            return 0;
        }
        self.scratch.clear();
        match self.neighbours {
            Some(n) => {
                for &j in n.of(i) {
                    if let Some(o) = self.offsets[j as usize] {
                        self.scratch
                            .push((o, o.saturating_add(self.recs[j as usize].size)));
                    }
                }
            }
            None => {
                for &j in &self.placed {
                    let p = &self.recs[j];
                    if let Some(o) = self.offsets[j]
                        && p.start < r.end
                        && r.start < p.end
                    {
                        self.scratch.push((o, o.saturating_add(p.size)));
                    }
                }
            }
        }
        self.scratch.sort_unstable();
        let mut cur = 0usize;
        let mut best: Option<(usize, usize)> = None; // (gap, offset)
        for &(lo, hi) in &self.scratch {
            if lo > cur {
                let gap = lo - cur;
                if gap >= r.size && best.is_none_or(|(g, _)| gap < g) {
                    best = Some((gap, cur));
                    if fit == Fit::First || gap == r.size {
                        break;
                    }
                }
            }
            cur = cur.max(hi);
        }
        best.map_or(cur, |(_, o)| o)
    }

    /// Places buffer `i` at `offset` (zero-size buffers are not recorded: they conflict with
    /// nothing).
    pub(super) fn insert(&mut self, i: usize, offset: usize) {
        let size = self.recs[i].size;
        if size == 0 {
            return;
        }
        self.offsets[i] = Some(offset);
        if self.neighbours.is_none() {
            self.placed.push(i);
        }
        self.top = self.top.max(offset.saturating_add(size));
    }

    /// Takes back the last buffer inserted, `i` (undo for the search), restoring the arena top
    /// the caller saved before inserting it.
    pub(super) fn remove_last(&mut self, i: usize, top_before: usize) {
        if self.offsets[i].take().is_some() && self.neighbours.is_none() {
            self.placed.pop();
        }
        self.top = top_before;
    }
}

/// Places the buffers in `order` one by one; returns offsets in input order and the arena.
pub(super) fn place_in_order(
    recs: &[Rec],
    neighbours: Option<&Neighbours>,
    order: &[usize],
    fit: Fit,
) -> (Vec<usize>, usize) {
    let mut packer = Packer::new(recs, neighbours);
    let mut offsets = vec![0usize; recs.len()];
    for &i in order {
        let o = packer.find(i, fit);
        packer.insert(i, o);
        offsets[i] = o;
    }
    (offsets, packer.top)
}

/// Indices sorted by `key`, ties broken by index (so every order is a total, fixed order).
pub(super) fn order_by<K: Ord>(recs: &[Rec], key: impl Fn(&Rec) -> K) -> Vec<usize> {
    let mut order: Vec<usize> = (0..recs.len()).collect();
    order.sort_by_key(|&i| (key(&recs[i]), i));
    order
}

/// Glow's order: repeatedly take the step with the most unplaced live bytes (earliest on ties)
/// and append the unplaced buffers live there, largest first. Steps are compressed to the
/// distinct interval ends, and a max segment tree with range add tracks the live bytes.
pub(super) fn busiest_step_order(recs: &[Rec]) -> Vec<usize> {
    let mut points: Vec<usize> = recs.iter().flat_map(|r| [r.start, r.end]).collect();
    points.sort_unstable();
    points.dedup();
    let slot = |s: usize| points.partition_point(|&p| p < s);
    // Buffer i covers compressed slots [lo, hi).
    let spans: Vec<(usize, usize)> = recs.iter().map(|r| (slot(r.start), slot(r.end))).collect();
    let mut tree = MaxTree::new(points.len().max(1));
    for (r, &(lo, hi)) in recs.iter().zip(&spans) {
        tree.add(lo, hi, r.size as i128);
    }
    // Non-empty buffers by first slot; a buffer live at slot `at` starts within `max_span`
    // slots before it, so only that window is scanned.
    let mut by_start: Vec<usize> = (0..recs.len())
        .filter(|&i| recs[i].size > 0 && spans[i].0 < spans[i].1)
        .collect();
    by_start.sort_by_key(|&i| (spans[i].0, i));
    let max_span = by_start
        .iter()
        .map(|&i| spans[i].1 - spans[i].0)
        .max()
        .unwrap_or(0);
    let mut done = vec![false; recs.len()];
    let mut left = by_start.len();
    let mut order = Vec::with_capacity(recs.len());
    while left > 0 {
        let (_, at) = tree.max();
        let from = by_start.partition_point(|&i| spans[i].0 + max_span <= at);
        let to = by_start.partition_point(|&i| spans[i].0 <= at);
        let mut here: Vec<usize> = by_start[from..to]
            .iter()
            .copied()
            .filter(|&i| !done[i] && at < spans[i].1)
            .collect();
        if here.is_empty() {
            // Cannot happen while unplaced bytes remain; take the rest to be safe.
            here = by_start.iter().copied().filter(|&i| !done[i]).collect();
        }
        here.sort_by_key(|&i| (std::cmp::Reverse(recs[i].size), recs[i].start, i));
        for &i in &here {
            tree.add(spans[i].0, spans[i].1, -(recs[i].size as i128));
            done[i] = true;
        }
        left -= here.len();
        order.extend(here);
    }
    // Then buffers that take no space or live at no step.
    order.extend((0..recs.len()).filter(|&i| !done[i]));
    order
}

/// Segment tree over slots: add a value to a range, query the maximum and its leftmost slot.
struct MaxTree {
    n: usize,
    max: Vec<i128>,
    lazy: Vec<i128>,
}

impl MaxTree {
    fn new(n: usize) -> MaxTree {
        MaxTree {
            n,
            max: vec![0; 4 * n],
            lazy: vec![0; 4 * n],
        }
    }

    fn add(&mut self, lo: usize, hi: usize, v: i128) {
        if lo < hi {
            self.add_at(1, 0, self.n, lo, hi, v);
        }
    }

    fn add_at(&mut self, node: usize, l: usize, r: usize, lo: usize, hi: usize, v: i128) {
        if hi <= l || r <= lo {
            return;
        }
        if lo <= l && r <= hi {
            self.max[node] += v;
            self.lazy[node] += v;
            return;
        }
        let m = (l + r) / 2;
        self.add_at(2 * node, l, m, lo, hi, v);
        self.add_at(2 * node + 1, m, r, lo, hi, v);
        self.max[node] = self.lazy[node] + self.max[2 * node].max(self.max[2 * node + 1]);
    }

    /// (max value, leftmost slot reaching it).
    fn max(&self) -> (i128, usize) {
        let (mut node, mut l, mut r) = (1usize, 0usize, self.n);
        let total = self.max[1];
        let mut acc = 0i128; // sum of lazies above `node`'s children
        while r - l > 1 {
            acc += self.lazy[node];
            let m = (l + r) / 2;
            if acc + self.max[2 * node] == total {
                node *= 2;
                r = m;
            } else {
                node = 2 * node + 1;
                l = m;
            }
        }
        (total, l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_tree_tracks_leftmost_peak() {
        let mut t = MaxTree::new(5);
        t.add(0, 3, 4);
        t.add(2, 5, 3);
        assert_eq!(t.max(), (7, 2));
        t.add(2, 3, -5);
        assert_eq!(t.max(), (4, 0));
        t.add(0, 2, -4);
        assert_eq!(t.max(), (3, 3));
    }
}
