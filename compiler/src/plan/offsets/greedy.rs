//! The shared placer (best fit or first fit against already-placed buffers that overlap in
//! time) and the buffer orders the heuristics feed it.

use super::Rec;

/// A buffer already in the arena.
#[derive(Clone, Copy, Debug)]
struct Placed {
    offset: usize,
    end_offset: usize,
    start: usize,
    end: usize,
    index: usize,
}

/// How a gap is chosen among those that fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fit {
    /// The smallest gap that fits (TFLite's `simple_memory_arena`); the top if none does.
    Best,
    /// The lowest gap that fits.
    First,
}

/// Buffers placed so far, kept sorted by offset so that a new buffer scans them bottom-up and
/// only looks at those live at a common step.
#[derive(Clone, Debug, Default)]
pub(super) struct Packer {
    placed: Vec<Placed>,
    /// Arena so far: max over placed buffers of offset + (aligned) size.
    pub(super) top: usize,
}

impl Packer {
    /// An empty arena with room for `n` buffers.
    pub(super) fn with_capacity(n: usize) -> Packer {
        Packer {
            placed: Vec::with_capacity(n),
            top: 0,
        }
    }

    /// The offset `r` would get, without placing it.
    pub(super) fn find(&self, r: &Rec, fit: Fit) -> usize {
        if r.size == 0 {
            return 0;
        }
        let mut cur = 0usize;
        let mut best: Option<(usize, usize)> = None; // (gap, offset)
        for p in &self.placed {
            if !(p.start < r.end && r.start < p.end) {
                continue;
            }
            if p.offset > cur {
                let gap = p.offset - cur;
                if gap >= r.size && best.is_none_or(|(g, _)| gap < g) {
                    best = Some((gap, cur));
                    if fit == Fit::First || gap == r.size {
                        break;
                    }
                }
            }
            cur = cur.max(p.end_offset);
        }
        best.map_or(cur, |(_, o)| o)
    }

    /// Places `r` at `offset` (zero-size buffers are not recorded: they conflict with nothing).
    pub(super) fn insert(&mut self, r: &Rec, offset: usize) {
        if r.size == 0 {
            return;
        }
        let end_offset = offset.saturating_add(r.size);
        let at = self
            .placed
            .partition_point(|p| (p.offset, p.index) < (offset, r.index));
        self.placed.insert(
            at,
            Placed {
                offset,
                end_offset,
                start: r.start,
                end: r.end,
                index: r.index,
            },
        );
        self.top = self.top.max(end_offset);
    }

    /// Removes buffer `index` placed at `offset` (undo for the search). Returns the arena top
    /// to restore, which the caller saved before inserting.
    pub(super) fn remove(&mut self, index: usize, offset: usize, top_before: usize) {
        let at = self
            .placed
            .partition_point(|p| (p.offset, p.index) < (offset, index));
        if self.placed.get(at).is_some_and(|p| p.index == index) {
            self.placed.remove(at);
        }
        self.top = top_before;
    }
}

/// Places the buffers in `order` one by one; returns offsets in input order and the arena.
pub(super) fn place_in_order(recs: &[Rec], order: &[usize], fit: Fit) -> (Vec<usize>, usize) {
    let mut packer = Packer::with_capacity(recs.len());
    let mut offsets = vec![0usize; recs.len()];
    for &i in order {
        let r = &recs[i];
        let o = packer.find(r, fit);
        packer.insert(r, o);
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
    let mut unplaced: Vec<usize> = (0..recs.len()).filter(|&i| recs[i].size > 0).collect();
    let mut order = Vec::with_capacity(recs.len());
    while !unplaced.is_empty() {
        let (bytes, at) = tree.max();
        let mut here: Vec<usize> = if bytes > 0 {
            unplaced
                .iter()
                .copied()
                .filter(|&i| spans[i].0 <= at && at < spans[i].1)
                .collect()
        } else {
            Vec::new()
        };
        if here.is_empty() {
            // Only empty intervals remain: take them all.
            here = std::mem::take(&mut unplaced);
        } else {
            unplaced.retain(|&i| !(spans[i].0 <= at && at < spans[i].1));
        }
        here.sort_by_key(|&i| (std::cmp::Reverse(recs[i].size), recs[i].start, i));
        for &i in &here {
            tree.add(spans[i].0, spans[i].1, -(recs[i].size as i128));
        }
        order.extend(here);
    }
    order.extend((0..recs.len()).filter(|&i| recs[i].size == 0));
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
