//! Branch and bound over placement orders for small instances.
//!
//! Every buffer is put at the lowest offset where it fits among the buffers already placed
//! that are live at a common step (first fit). This loses nothing: take an optimal placement
//! and place its buffers in order of their optimal offsets; by induction each one's lowest
//! feasible offset is at most its optimal offset (every earlier buffer it meets in time ends at
//! or below that offset), so some order reproduces an arena no larger than the optimum.
//!
//! Pruning: a branch stops once its arena reaches the best found so far; the whole search stops
//! at the lower bound or after a fixed number of placements (so the result, like everything
//! here, is deterministic). Two buffers not live together place independently, so of two
//! orders differing by swapping such a pair next to each other only the one with the smaller
//! index first is explored; of identical buffers only the lowest-indexed unplaced one is tried.

use super::Rec;
use super::greedy::{Fit, Neighbours, Packer};

/// Largest number of (non-empty) buffers the search is tried on.
pub(super) const MAX_BUFFERS: usize = 14;

/// Placements the search may try before giving up.
const BUDGET: usize = 50_000;

/// Tries to beat `best_arena` on `recs` (given `order`, the branching order: best candidates
/// first). Returns offsets (input order) and arena of a strictly smaller arena, if found.
pub(super) fn search(
    recs: &[Rec],
    order: &[usize],
    best_arena: usize,
    lower_bound: usize,
) -> Option<(Vec<usize>, usize)> {
    let neighbours = Neighbours::new(recs);
    let mut s = State {
        recs,
        order,
        packer: Packer::new(recs, neighbours.as_ref()),
        offsets: vec![0; recs.len()],
        used: vec![false; recs.len()],
        best_arena,
        best: None,
        lower_bound,
        budget: BUDGET,
    };
    s.descend(0, None);
    s.best.map(|o| (o, s.best_arena))
}

struct State<'a> {
    recs: &'a [Rec],
    order: &'a [usize],
    packer: Packer<'a>,
    offsets: Vec<usize>,
    used: Vec<bool>,
    best_arena: usize,
    best: Option<Vec<usize>>,
    lower_bound: usize,
    budget: usize,
}

impl State<'_> {
    /// Whether the search is over: out of budget, or the best is already the lower bound.
    fn done(&self) -> bool {
        self.budget == 0 || self.best_arena <= self.lower_bound
    }

    fn descend(&mut self, depth: usize, prev: Option<usize>) {
        if depth == self.order.len() {
            if self.packer.top < self.best_arena {
                self.best_arena = self.packer.top;
                self.best = Some(self.offsets.clone());
            }
            return;
        }
        for k in 0..self.order.len() {
            if self.done() {
                return;
            }
            let c = self.order[k];
            if self.used[c] || self.shadowed(k) {
                continue;
            }
            let rc = self.recs[c];
            if let Some(p) = prev {
                let rp = &self.recs[p];
                if c < p && !(rc.start < rp.end && rp.start < rc.end) {
                    continue;
                }
            }
            let offset = self.packer.find(c, Fit::First);
            if offset.saturating_add(rc.size) >= self.best_arena {
                continue;
            }
            self.budget -= 1;
            let top = self.packer.top;
            self.packer.insert(c, offset);
            self.offsets[c] = offset;
            self.used[c] = true;
            self.descend(depth + 1, Some(c));
            self.used[c] = false;
            self.packer.remove_last(c, top);
        }
    }

    /// Whether an identical unplaced buffer comes earlier in the branching order.
    fn shadowed(&self, k: usize) -> bool {
        let r = &self.recs[self.order[k]];
        self.order[..k].iter().any(|&j| {
            let q = &self.recs[j];
            !self.used[j] && (q.start, q.end, q.size) == (r.start, r.end, r.size)
        })
    }
}
