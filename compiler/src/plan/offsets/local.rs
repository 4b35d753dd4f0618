//! Local search over placement orders, decoded by first fit.
//!
//! Every order placed by first fit is a placement, and some order reaches the optimum (the
//! argument in `search.rs`), so the search walks orders: a move takes a buffer that sets the
//! arena's top (or a buffer live with one) out of the order and puts it back at a pseudo-random
//! earlier (or any) position; the new order is kept when its arena is not larger (sideways moves
//! let it cross plateaus). The size-first orders and the skyline decide every buffer's height
//! once; on a patched plan's tail (layer-wise, after the stage) they left the arena 8-16% above
//! the bound where a few hundred moves bring it within 3%.
//!
//! Deterministic: a fixed xorshift seed, and a work budget (neighbour entries plus buffers per
//! decoding, summed) instead of a time limit.

use super::Rec;
use super::greedy::{Fit, Neighbours, Packer, place_in_order};

/// Most moves tried.
const MAX_MOVES: usize = 1000;

/// Improves on `order` (decoded by first fit). Returns offsets (input order) and arena of the
/// best placement found, when it is strictly below `beat`; stops at `lower_bound`, after
/// `MAX_MOVES` moves, or once the decodings have scanned `budget` buffers and neighbour entries.
pub(super) fn improve(
    recs: &[Rec],
    nb: &Neighbours,
    order: &[usize],
    beat: usize,
    lower_bound: usize,
    budget: usize,
) -> Option<(Vec<usize>, usize)> {
    let mut work = nb.len().saturating_add(recs.len());
    let mut cur = order.to_vec();
    let (mut cur_off, mut cur_top) = place_in_order(recs, Some(nb), &cur, Fit::First);
    let mut best: Option<(Vec<usize>, usize)> = None;
    if cur_top < beat {
        best = Some((cur_off.clone(), cur_top));
    }
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % (n.max(1) as u64)) as usize
    };
    let mut tops: Vec<usize> = Vec::new();
    for _ in 0..MAX_MOVES {
        if cur_top <= lower_bound || work > budget {
            break;
        }
        tops.clear();
        tops.extend(
            recs.iter()
                .filter(|r| r.size > 0 && cur_off[r.index].saturating_add(r.size) == cur_top)
                .map(|r| r.index),
        );
        if tops.is_empty() {
            break;
        }
        let t = tops[next(tops.len())];
        let mut o = cur.clone();
        let from = if next(2) == 0 {
            // The top buffer moves earlier.
            let Some(p) = o.iter().position(|&i| i == t) else {
                break;
            };
            let q = next(p + 1);
            o.remove(p);
            o.insert(q, t);
            q
        } else {
            // A buffer live with it moves anywhere.
            let row = nb.of(t);
            if row.is_empty() {
                continue;
            }
            let j = row[next(row.len())] as usize;
            let Some(p) = o.iter().position(|&i| i == j) else {
                break;
            };
            o.remove(p);
            let q = next(o.len() + 1);
            o.insert(q, j);
            p.min(q)
        };
        let Some((off, top)) = decode(recs, nb, &o, from, &cur_off, cur_top, &mut work) else {
            continue;
        };
        (cur, cur_off, cur_top) = (o, off, top);
        if cur_top < best.as_ref().map_or(beat, |b| b.1) {
            best = Some((cur_off.clone(), cur_top));
        }
    }
    best
}

/// First fit of `order`, whose first `from` buffers keep their offsets in `prev` (the same
/// buffers in the same order, so first fit would give them these again). `None` as soon as a
/// buffer would end above `limit`. Adds the buffers and neighbour entries it scans to `work`.
fn decode(
    recs: &[Rec],
    nb: &Neighbours,
    order: &[usize],
    from: usize,
    prev: &[usize],
    limit: usize,
    work: &mut usize,
) -> Option<(Vec<usize>, usize)> {
    let mut packer = Packer::new(recs, Some(nb));
    let mut offsets = prev.to_vec();
    *work = work.saturating_add(recs.len());
    for &i in &order[..from] {
        packer.insert(i, prev[i]);
    }
    for &i in &order[from..] {
        *work = work.saturating_add(nb.of(i).len() + 1);
        let o = packer.find(i, Fit::First);
        if o.saturating_add(recs[i].size) > limit {
            return None;
        }
        packer.insert(i, o);
        offsets[i] = o;
    }
    Some((offsets, packer.top))
}
