//! The plan verifier, independent of the planner: given the intervals and a placement, checks
//! 1. one offset per interval;
//! 2. every offset is a multiple of the alignment;
//! 3. every buffer lies inside the arena (`offset + size <= arena_bytes`, no overflow);
//! 4. no two buffers live at a common step overlap in bytes (zero-size buffers never overlap).
//!
//! It sorts by start step and sweeps, so it costs O(n log n + overlapping pairs).

use super::{Interval, Placement};

/// A broken rule, naming the buffers by their index in the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanViolation {
    /// The placement has a different number of offsets than there are intervals.
    #[error("{offsets} offsets for {intervals} buffers")]
    Count {
        /// Intervals given.
        intervals: usize,
        /// Offsets in the placement.
        offsets: usize,
    },
    /// An offset is not aligned.
    #[error("buffer {index} at offset {offset} is not {align}-byte aligned")]
    Misaligned {
        /// Buffer index.
        index: usize,
        /// Its offset.
        offset: usize,
        /// Required alignment.
        align: usize,
    },
    /// A buffer ends past the arena.
    #[error("buffer {index} ({offset}+{size}) ends past the arena of {arena} bytes")]
    OutOfBounds {
        /// Buffer index.
        index: usize,
        /// Offset.
        offset: usize,
        /// Size.
        size: usize,
        /// Arena bytes.
        arena: usize,
    },
    /// Two buffers live at the same step share bytes.
    #[error("buffers {a} and {b} are live together and overlap in bytes")]
    Overlap {
        /// First buffer index.
        a: usize,
        /// Second buffer index.
        b: usize,
    },
    /// An interval is empty or reversed.
    #[error("buffer {index} has an empty interval [{start}, {end})")]
    EmptyInterval {
        /// Buffer index.
        index: usize,
        /// Start step.
        start: usize,
        /// End step.
        end: usize,
    },
}

/// Checks the rules listed in the module docs.
pub fn verify_placement(
    intervals: &[Interval],
    p: &Placement,
    align: usize,
) -> Result<(), PlanViolation> {
    if p.offsets.len() != intervals.len() {
        return Err(PlanViolation::Count {
            intervals: intervals.len(),
            offsets: p.offsets.len(),
        });
    }
    for (index, (iv, &offset)) in intervals.iter().zip(&p.offsets).enumerate() {
        if iv.start >= iv.end {
            return Err(PlanViolation::EmptyInterval {
                index,
                start: iv.start,
                end: iv.end,
            });
        }
        if align > 0 && offset % align != 0 {
            return Err(PlanViolation::Misaligned {
                index,
                offset,
                align,
            });
        }
        if offset
            .checked_add(iv.size)
            .is_none_or(|e| e > p.arena_bytes)
        {
            return Err(PlanViolation::OutOfBounds {
                index,
                offset,
                size: iv.size,
                arena: p.arena_bytes,
            });
        }
    }
    // Sweep over buffers sorted by start; `active` holds those whose interval is still open.
    let mut order: Vec<usize> = (0..intervals.len())
        .filter(|&i| intervals[i].size > 0)
        .collect();
    order.sort_by_key(|&i| (intervals[i].start, i));
    let mut active: Vec<usize> = Vec::new();
    for &b in &order {
        let ib = &intervals[b];
        active.retain(|&a| intervals[a].end > ib.start);
        let (lo, hi) = (p.offsets[b], p.offsets[b] + ib.size);
        for &a in &active {
            let (alo, ahi) = (p.offsets[a], p.offsets[a] + intervals[a].size);
            if lo < ahi && alo < hi {
                return Err(PlanViolation::Overlap {
                    a: a.min(b),
                    b: a.max(b),
                });
            }
        }
        active.push(b);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Strategy;
    use super::*;

    fn placement(offsets: Vec<usize>, arena: usize) -> Placement {
        Placement {
            offsets,
            arena_bytes: arena,
            strategy: Strategy::Sequential,
        }
    }

    #[test]
    fn catches_each_violation() {
        let iv = [
            Interval::new(0, 2, 64),
            Interval::new(1, 3, 64),
            Interval::new(2, 3, 64),
        ];
        assert!(verify_placement(&iv, &placement(vec![0, 64, 0], 128), 64).is_ok());
        assert_eq!(
            verify_placement(&iv, &placement(vec![0, 0, 64], 128), 64),
            Err(PlanViolation::Overlap { a: 0, b: 1 })
        );
        assert!(matches!(
            verify_placement(&iv, &placement(vec![0, 64, 32], 128), 64),
            Err(PlanViolation::Misaligned { index: 2, .. })
        ));
        assert!(matches!(
            verify_placement(&iv, &placement(vec![0, 64, 128], 128), 64),
            Err(PlanViolation::OutOfBounds { index: 2, .. })
        ));
        assert!(matches!(
            verify_placement(&iv, &placement(vec![0, 64], 128), 64),
            Err(PlanViolation::Count { .. })
        ));
        // Buffer 2 reuses buffer 0's bytes: their lives touch but do not overlap ([0,2) vs [2,3)).
        assert!(verify_placement(&iv, &placement(vec![0, 64, 0], 128), 64).is_ok());
    }
}
