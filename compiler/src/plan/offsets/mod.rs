//! Offset assignment: greedy heuristics, tie-break variants and a search for small instances.
//!
//! Every heuristic feeds buffers in some order to one placer that puts each at the smallest
//! gap (best fit) among the already-placed buffers live at a common step, or on top of them
//! (TFLite's `simple_memory_arena`). The orders:
//! 1. [`Strategy::GreedyBySize`]: largest first, ties earlier start then index (TFLite; Pisarchyk
//!    & Lee, "Efficient Memory Management for Deep Neural Net Inference", arXiv 2001.03288).
//! 2. [`Strategy::Skyline`] (`skyline.rs`, not an order for that placer): buffers stacked
//!    bottom-up along the time axis, the lowest run of steps filled first with the
//!    longest-lived buffer that fits inside it (three keys: longest then larger, longest then
//!    smaller, area). Patched plans (long-lived stage inputs and accumulated outputs beside many
//!    short per-patch buffers and a tail of large one-step scratch) reach their lower bound
//!    with it where the size-first orders stopped 2-12% above. Bounded by a work budget.
//! 3. [`Strategy::LongestLivedFirst`]: longest interval first, then larger (XLA heap simulator).
//! 4. [`Strategy::BusiestStepFirst`]: repeatedly the step with the most unplaced live bytes,
//!    its unplaced buffers largest first (Glow).
//! 5. [`Strategy::Search`]: three tie-break variants (largest first then longest; largest first
//!    then latest start; largest area first; earliest start first, larger or longer first),
//!    then up to 8 rounds of greedy-by-size on sizes scaled by fixed pseudo-random factors in
//!    [1, 1.25) (this reorders equal-size buffers: it brings DenseNet-121's layer-wise plan
//!    from 1.048x to exactly the bound), then a few rounds of local improvement (the
//!    buffer that sets the arena's top moves to the front of the best order so far), both cheap
//!    at any size; then a local search over orders from the best one (`local.rs`: up to 1000
//!    moves of a top buffer or one of its time neighbours, decoded by first fit, kept when not
//!    larger, bounded by `LOCAL_WORK`; only in [`place`], not in [`place_for_decisions`]);
//!    then for at most `search::MAX_BUFFERS` (14) non-empty buffers a branch and
//!    bound over placement orders (`search`), exact when it finishes within its fixed budget.
//!
//! The smallest arena wins; on ties the earlier strategy in that list, so a plan is the same
//! run to run. Greedy-by-size is tried first and only beaten strictly, so the result is never
//! larger than greedy-by-size.
//!
//! Sizes are rounded up to the alignment before placing, so every offset is a multiple of it.
//! Each buffer's time neighbours (those live with it at some step) are found once by a sweep;
//! placing a buffer gathers its placed neighbours, sorts them by offset and scans for gaps, so a
//! placement costs O(d log d) for d neighbours (when the pairs would pass 8 Mi entries, every
//! placed buffer is scanned instead). See `examples/plan_speed.rs` for timings.

mod greedy;
mod local;
mod search;
mod skyline;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;

use super::{Interval, Placement, Strategy};
use greedy::{Fit, Neighbours, busiest_step_order, order_by, place_in_order};
use skyline::{Key, skyline};

/// Work (steps and buffers scanned) each skyline may use before it gives up.
const SKYLINE_WORK: usize = 1 << 24;

/// Work (buffers plus neighbour entries, summed over rounds) the perturbed rounds may use.
const PERTURB_WORK: usize = 1 << 17;

/// Most perturbed rounds.
const PERTURB_ROUNDS: usize = 8;

/// Work (neighbour entries plus buffers, summed over decodings) the local search may use.
const LOCAL_WORK: usize = 1 << 20;

/// Most re-placements the local improvement tries.
const PROMOTIONS: usize = 4;

/// One buffer as the placer sees it: its interval, its size rounded up to the alignment, and
/// its index in the input.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rec {
    start: usize,
    end: usize,
    size: usize,
    index: usize,
}

impl Rec {
    fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }
}

/// Plain greedy-by-size with best fit (TFLite): the baseline `place` never exceeds.
pub fn place_greedy_by_size(intervals: &[Interval], align: usize) -> Placement {
    let recs = records(intervals, align);
    let nb = Neighbours::new(&recs);
    let (offsets, arena_bytes) =
        place_in_order(&recs, nb.as_ref(), &greedy_by_size_order(&recs), Fit::Best);
    Placement {
        offsets,
        arena_bytes,
        strategy: Strategy::GreedyBySize,
    }
}

/// The best placement arenac finds for these intervals: every heuristic is tried and the
/// smallest arena kept; never larger than greedy-by-size. Deterministic.
///
/// `align` of 0 is treated as 1. Sizes whose aligned total would overflow `usize` saturate (the
/// arena then reads `usize::MAX`, which no memory budget accepts).
pub fn place(intervals: &[Interval], align: usize) -> Placement {
    place_with(intervals, align, true, 0)
}

/// [`place`] without its local search (`local.rs`): the placement the planner's memory
/// decisions compare (`liveness::decide`, tens of placements per plan, where the local search
/// cost 10-15 ms each on 655 buffers); the plan's final placement ([`place`]) runs it once.
/// Never larger than greedy-by-size, never smaller than [`place`].
pub fn place_for_decisions(intervals: &[Interval], align: usize) -> Placement {
    place_with(intervals, align, false, 0)
}

/// Whether [`place_for_decisions`] places these intervals in at most `limit` bytes: the
/// same answer, its strategies stopped at the first that gets there (greedy-by-size, tried
/// first, mostly does).
pub fn fits_for_decisions(intervals: &[Interval], align: usize, limit: usize) -> bool {
    place_with(intervals, align, false, limit).arena_bytes <= limit
}

/// [`place`], with the local search only when `local`; returns as soon as the arena is at
/// most `enough` (or the lower bound): the smallest placement found by then.
fn place_with(intervals: &[Interval], align: usize, local: bool, enough: usize) -> Placement {
    let recs = records(intervals, align);
    let nb = Neighbours::new(&recs);
    let candidate = |strategy: Strategy, order: &[usize]| {
        let (offsets, arena_bytes) = place_in_order(&recs, nb.as_ref(), order, Fit::Best);
        Placement {
            offsets,
            arena_bytes,
            strategy,
        }
    };
    let mut best_order = greedy_by_size_order(&recs);
    let mut best = candidate(Strategy::GreedyBySize, &best_order);
    let lb = lower_bound(&recs);
    // Every strategy below stops once the arena is at most `stop`.
    let stop = lb.max(enough);
    let consider = |p: Placement, best: &mut Placement| {
        if p.arena_bytes < best.arena_bytes {
            *best = p;
        }
    };
    // The skyline, with each of its keys in turn until one reaches the bound.
    for key in [Key::LongThenLarge, Key::LongThenSmall, Key::Area] {
        if best.arena_bytes <= stop {
            return best;
        }
        let Some((offsets, arena_bytes)) = skyline(&recs, key, SKYLINE_WORK) else {
            break;
        };
        if arena_bytes < best.arena_bytes {
            // Placed in the order of their offsets, first fit gives back at most this arena
            // (`search`'s argument): the order the local improvement starts from.
            best_order = order_by(&recs, |r| offsets[r.index]);
            best = Placement {
                offsets,
                arena_bytes,
                strategy: Strategy::Skyline,
            };
        }
    }
    // Later orders are built only if needed: each is tried in turn until one reaches the bound.
    type OrderFn = fn(&[Rec]) -> Vec<usize>;
    let others: [(Strategy, OrderFn); 7] = [
        (Strategy::LongestLivedFirst, |r| {
            order_by(r, |r| (Reverse(r.len()), Reverse(r.size), r.start))
        }),
        (Strategy::BusiestStepFirst, busiest_step_order),
        // Tie-break variants, each still largest first, then by area.
        (Strategy::Search, |r| {
            order_by(r, |r| (Reverse(r.size), Reverse(r.len()), r.start))
        }),
        (Strategy::Search, |r| {
            order_by(r, |r| (Reverse(r.size), Reverse(r.start)))
        }),
        (Strategy::Search, |r| {
            order_by(r, |r| {
                (Reverse((r.size as u128) * (r.len() as u128)), r.start)
            })
        }),
        (Strategy::Search, |r| {
            order_by(r, |r| (r.start, Reverse(r.size)))
        }),
        (Strategy::Search, |r| {
            order_by(r, |r| (r.start, Reverse(r.end)))
        }),
    ];
    for (strategy, order) in others {
        if best.arena_bytes <= stop {
            return best;
        }
        let order = order(&recs);
        let p = candidate(strategy, &order);
        if p.arena_bytes < best.arena_bytes {
            (best, best_order) = (p, order);
        }
    }
    // Perturbed greedy-by-size: sizes scaled by a fixed pseudo-random factor in [1, 1.25), which
    // mostly reorders equal and near-equal buffers. Rounds are bounded by a work count.
    let cost = nb
        .as_ref()
        .map_or(recs.len().saturating_mul(recs.len()), |n| n.len())
        .saturating_add(recs.len())
        .max(1);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..(PERTURB_WORK / cost).min(PERTURB_ROUNDS) {
        if best.arena_bytes <= stop {
            return best;
        }
        let keys: Vec<u128> = recs
            .iter()
            .map(|r| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                (r.size as u128) * u128::from(1024 + (rng % 256))
            })
            .collect();
        let order = order_by(&recs, |r| (Reverse(keys[r.index]), r.start));
        let p = candidate(Strategy::Search, &order);
        if p.arena_bytes < best.arena_bytes {
            (best, best_order) = (p, order);
        }
    }
    // Local improvement: the buffer that sets the arena's top goes first, and the rest keep
    // their order; repeated while it helps, a few times at most.
    for _ in 0..PROMOTIONS {
        if best.arena_bytes <= stop {
            return best;
        }
        let Some(&top) = best_order.iter().find(|&&i| {
            best.offsets[i].saturating_add(recs[i].size) == best.arena_bytes && recs[i].size > 0
        }) else {
            break;
        };
        let mut order = Vec::with_capacity(best_order.len());
        order.push(top);
        order.extend(best_order.iter().copied().filter(|&i| i != top));
        let p = candidate(Strategy::Search, &order);
        if p.arena_bytes >= best.arena_bytes {
            break;
        }
        (best, best_order) = (p, order);
    }
    // Local search over orders from the best order so far.
    if local
        && best.arena_bytes > stop
        && let Some(n) = nb.as_ref()
        && let Some((offsets, arena_bytes)) =
            local::improve(&recs, n, &best_order, best.arena_bytes, lb, LOCAL_WORK)
    {
        best = Placement {
            offsets,
            arena_bytes,
            strategy: Strategy::Search,
        };
    }
    let nonempty: Vec<Rec> = recs.iter().copied().filter(|r| r.size > 0).collect();
    if best.arena_bytes > stop && nonempty.len() <= search::MAX_BUFFERS {
        // The search sees only non-empty buffers, indexed by their position in `nonempty`.
        let local: Vec<Rec> = nonempty
            .iter()
            .enumerate()
            .map(|(k, r)| Rec { index: k, ..*r })
            .collect();
        let order = greedy_by_size_order(&local);
        if let Some((offs, arena)) = search::search(&local, &order, best.arena_bytes, lb) {
            let mut offsets = vec![0usize; recs.len()];
            for (r, o) in nonempty.iter().zip(offs) {
                offsets[r.index] = o;
            }
            consider(
                Placement {
                    offsets,
                    arena_bytes: arena,
                    strategy: Strategy::Search,
                },
                &mut best,
            );
        }
    }
    best
}

/// The placer's records: sizes rounded up to the alignment (saturating).
fn records(intervals: &[Interval], align: usize) -> Vec<Rec> {
    let align = align.max(1);
    intervals
        .iter()
        .enumerate()
        .map(|(index, iv)| Rec {
            start: iv.start,
            end: iv.end,
            size: iv
                .size
                .div_ceil(align)
                .checked_mul(align)
                .unwrap_or(usize::MAX - (usize::MAX % align)),
            index,
        })
        .collect()
}

/// TFLite's order: largest first, then earlier start, then index.
fn greedy_by_size_order(recs: &[Rec]) -> Vec<usize> {
    order_by(recs, |r| (Reverse(r.size), r.start))
}

/// Largest sum of (aligned) sizes live at one step, by a sweep over sorted interval ends (no
/// table indexed by step, so huge step numbers cost nothing). Saturates.
fn lower_bound(recs: &[Rec]) -> usize {
    let mut events: Vec<(usize, bool, usize)> = Vec::with_capacity(2 * recs.len());
    for r in recs.iter().filter(|r| r.start < r.end) {
        events.push((r.start, true, r.size));
        events.push((r.end, false, r.size));
    }
    // At equal steps, ends (false) sort before starts: half-open intervals.
    events.sort_unstable();
    let (mut live, mut best) = (0u128, 0u128);
    for (_, is_start, size) in events {
        if is_start {
            live += size as u128;
            best = best.max(live);
        } else {
            live -= size as u128;
        }
    }
    usize::try_from(best).unwrap_or(usize::MAX)
}
