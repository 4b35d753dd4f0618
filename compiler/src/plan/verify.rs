//! The plan verifier, independent of the planner: given the intervals and a placement, checks
//! 1. one offset per interval;
//! 2. every offset is a multiple of the alignment;
//! 3. every buffer lies inside the arena (`offset + size <= arena_bytes`, no overflow);
//! 4. no two buffers live at a common step overlap in bytes (zero-size buffers never overlap).
//!
//! It sorts by start step and sweeps, so it costs O(n log n + overlapping pairs).
//!
//! [`verify_values`] checks the values stored in those buffers (the aliases: views, in-place
//! successors, Concat slices at a byte offset):
//! 5. each value's bytes `[offset, offset + size)` lie inside its buffer, and its own life
//!    inside the buffer's interval;
//! 6. two values of one buffer live at a common step do not overlap in bytes unless one
//!    aliases the other (directly or through a chain of aliases) once each view is replaced
//!    by the value it views (a view writes nothing: it reads its source's bytes). So two
//!    views of one tensor, or a view of a Concat output and one of that Concat's slices, may
//!    share bytes; two slices, or a write over bytes a live value still needs, may not.

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
    /// A value's bytes or life are not inside its buffer's.
    #[error(
        "value {index} ({offset}+{size}, steps [{start}, {end})) is not inside buffer {buffer}"
    )]
    ValueOutsideBuffer {
        /// Value index.
        index: usize,
        /// Its buffer.
        buffer: usize,
        /// Offset within the buffer.
        offset: usize,
        /// Size.
        size: usize,
        /// First live step.
        start: usize,
        /// One past its last live step.
        end: usize,
    },
    /// Two values of one buffer, live at a common step and neither an alias of the other,
    /// share bytes.
    #[error("values {a} and {b} of buffer {buffer} are live together and overlap in bytes")]
    ValueOverlap {
        /// First value index.
        a: usize,
        /// Second value index.
        b: usize,
        /// Their buffer.
        buffer: usize,
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

/// One value stored in an arena buffer, for [`verify_values`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueSlot {
    /// Index of its buffer in the intervals.
    pub buffer: usize,
    /// Byte offset within the buffer.
    pub offset: usize,
    /// Bytes.
    pub size: usize,
    /// First step the value is live.
    pub start: usize,
    /// One past its last live step.
    pub end: usize,
    /// The value (an index into the same slice) whose bytes this one reuses: a view's input,
    /// an in-place write's dead operand, a Concat slice's output.
    pub alias_of: Option<usize>,
    /// Whether this value is a view of `alias_of`: it writes no bytes, it reads `alias_of`'s
    /// under another shape (false for in-place writes and Concat slices, whose producers
    /// write their bytes).
    pub view: bool,
}

/// Checks rules 5 and 6 of the module docs for `values` stored in `intervals`' buffers.
pub fn verify_values(intervals: &[Interval], values: &[ValueSlot]) -> Result<(), PlanViolation> {
    let mut by_buffer: Vec<Vec<usize>> = vec![Vec::new(); intervals.len()];
    for (index, v) in values.iter().enumerate() {
        let outside = PlanViolation::ValueOutsideBuffer {
            index,
            buffer: v.buffer,
            offset: v.offset,
            size: v.size,
            start: v.start,
            end: v.end,
        };
        let (Some(iv), Some(list)) = (intervals.get(v.buffer), by_buffer.get_mut(v.buffer)) else {
            return Err(outside);
        };
        let inside = v.offset.checked_add(v.size).is_some_and(|e| e <= iv.size)
            && iv.start <= v.start
            && v.start < v.end
            && v.end <= iv.end;
        if !inside {
            return Err(outside);
        }
        if v.size > 0 {
            list.push(index);
        }
    }
    // Whether `a` reaches `b` by following aliases (bounded: a cycle is not an alias chain).
    let reaches = |mut a: usize, b: usize| {
        for _ in 0..values.len() {
            match values.get(a).and_then(|v| v.alias_of) {
                Some(up) if up == b => return true,
                Some(up) => a = up,
                None => return false,
            }
        }
        false
    };
    // The value `a` views, through any chain of views (`a` itself when it is not a view).
    let viewed = |mut a: usize| {
        for _ in 0..values.len() {
            match values.get(a) {
                Some(ValueSlot {
                    view: true,
                    alias_of: Some(up),
                    ..
                }) => a = *up,
                _ => break,
            }
        }
        a
    };
    for (buffer, mut list) in by_buffer.into_iter().enumerate() {
        list.sort_by_key(|&i| (values[i].start, i));
        let mut active: Vec<usize> = Vec::new();
        for &b in &list {
            let vb = &values[b];
            active.retain(|&a| values[a].end > vb.start);
            for &a in &active {
                let va = &values[a];
                let bytes = vb.offset < va.offset + va.size && va.offset < vb.offset + vb.size;
                let (ra, rb) = (viewed(a), viewed(b));
                let related = reaches(a, b)
                    || reaches(b, a)
                    || ra == rb
                    || reaches(ra, rb)
                    || reaches(rb, ra);
                if bytes && !related {
                    return Err(PlanViolation::ValueOverlap {
                        a: a.min(b),
                        b: a.max(b),
                        buffer,
                    });
                }
            }
            active.push(b);
        }
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

    fn val(buffer: usize, offset: usize, size: usize, life: (usize, usize)) -> ValueSlot {
        ValueSlot {
            buffer,
            offset,
            size,
            start: life.0,
            end: life.1,
            alias_of: None,
            view: false,
        }
    }

    #[test]
    fn catches_bad_sub_buffer_values() {
        // One 128-byte buffer holding a Concat output (value 0) and its two 64-byte slices.
        let iv = [Interval::new(0, 4, 128)];
        let slice = |offset, life, of| ValueSlot {
            alias_of: Some(of),
            ..val(0, offset, 64, life)
        };
        let good = [
            val(0, 0, 128, (2, 4)),
            slice(0, (0, 3), 0),
            slice(64, (1, 3), 0),
        ];
        assert_eq!(verify_values(&iv, &good), Ok(()));
        // The second slice placed over the first while both are live.
        let mut bad = good;
        bad[2].offset = 32;
        assert_eq!(
            verify_values(&iv, &bad),
            Err(PlanViolation::ValueOverlap {
                a: 1,
                b: 2,
                buffer: 0
            })
        );
        // The same bytes at disjoint steps are fine.
        bad[1].end = 1;
        assert_eq!(verify_values(&iv, &bad), Ok(()));
        // A slice past its buffer's end, a life outside the buffer's, a missing buffer.
        let mut past = good;
        past[2].offset = 96;
        assert!(matches!(
            verify_values(&iv, &past),
            Err(PlanViolation::ValueOutsideBuffer { index: 2, .. })
        ));
        let mut late = good;
        late[0].end = 5;
        assert!(matches!(
            verify_values(&iv, &late),
            Err(PlanViolation::ValueOutsideBuffer { index: 0, .. })
        ));
        let mut lost = good;
        lost[1].buffer = 1;
        assert!(matches!(
            verify_values(&iv, &lost),
            Err(PlanViolation::ValueOutsideBuffer { index: 1, .. })
        ));
        // A view of a slice overlaps the slice (its alias), not the other slice.
        let view_of = |offset, life, of| ValueSlot {
            view: true,
            ..slice(offset, life, of)
        };
        let mut view = good.to_vec();
        view.push(view_of(0, (1, 3), 1));
        assert_eq!(verify_values(&iv, &view), Ok(()));
        // Two views of the same slice hold the same bytes.
        view.push(view_of(0, (2, 3), 1));
        assert_eq!(verify_values(&iv, &view), Ok(()));
        view[3].offset = 32;
        assert_eq!(
            verify_values(&iv, &view),
            Err(PlanViolation::ValueOverlap {
                a: 2,
                b: 3,
                buffer: 0
            })
        );
        // A view of the Concat output, live while a slice still is (the slice is read after
        // the Concat): the view reads the slice's bytes as they are.
        let mut whole = good.to_vec();
        whole[2].end = 4;
        whole.push(ValueSlot {
            size: 128,
            ..view_of(0, (2, 4), 0)
        });
        assert_eq!(verify_values(&iv, &whole), Ok(()));
        // The same value written in place (not a view) would overwrite the live slice.
        whole[3].view = false;
        assert_eq!(
            verify_values(&iv, &whole),
            Err(PlanViolation::ValueOverlap {
                a: 1,
                b: 3,
                buffer: 0
            })
        );
    }
}
