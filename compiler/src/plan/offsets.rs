//! Offset assignment: greedy heuristics and a search for small instances. (To be implemented:
//! the placeholder places buffers sequentially, which is correct but reuses nothing.)

use super::{Interval, Placement, place_sequential};

/// The best placement arenac finds for these intervals: every heuristic is tried and the
/// smallest arena kept; never larger than greedy-by-size. Deterministic.
pub fn place(intervals: &[Interval], align: usize) -> Placement {
    place_sequential(intervals, align)
}
