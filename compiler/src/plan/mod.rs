//! Arena planning as a pure function over buffer records: each buffer lives over a half-open
//! step interval `[start, end)` and needs `size` bytes; a placement gives each an offset in one
//! arena so that no two buffers live at the same step overlap in bytes.
//!
//! Nothing here knows ops, graphs or kernels: the records come from
//! [`crate::analysis::liveness`], and the result is checked by the independent
//! [`verify::verify_placement`].

pub mod offsets;
pub mod verify;

/// Alignment of every buffer in the arena, in bytes.
pub const ALIGN: usize = 64;

/// One buffer to place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interval {
    /// First step at which the buffer is live.
    pub start: usize,
    /// One past the last step at which it is live (`start < end`).
    pub end: usize,
    /// Bytes needed (0 allowed: such a buffer takes no space).
    pub size: usize,
}

impl Interval {
    /// Builds an interval.
    pub fn new(start: usize, end: usize, size: usize) -> Interval {
        Interval { start, end, size }
    }

    /// Whether two buffers are live at a common step.
    pub fn overlaps_in_time(&self, other: &Interval) -> bool {
        self.start < other.end && other.start < self.end
    }
}

/// How offsets were chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    /// Largest first, best-fit gap (TFLite; Pisarchyk & Lee).
    GreedyBySize,
    /// Longest-lived first, best-fit gap (XLA).
    LongestLivedFirst,
    /// Buffers of the busiest step first (Glow).
    BusiestStepFirst,
    /// Stacked bottom-up along the time axis, the lowest part of the skyline filled first.
    Skyline,
    /// Exhaustive or search-based improvement on a small instance.
    Search,
    /// Every buffer in its own region, one after another (no reuse).
    Sequential,
}

impl Strategy {
    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::GreedyBySize => "greedy-by-size",
            Strategy::LongestLivedFirst => "longest-lived-first",
            Strategy::BusiestStepFirst => "busiest-step-first",
            Strategy::Skyline => "skyline",
            Strategy::Search => "search",
            Strategy::Sequential => "sequential",
        }
    }
}

/// Offsets for a set of intervals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Offset of each interval, in input order; each a multiple of the alignment.
    pub offsets: Vec<usize>,
    /// Arena size: max over buffers of offset + size, rounded up to the alignment.
    pub arena_bytes: usize,
    /// Which strategy produced it.
    pub strategy: Strategy,
}

/// Rounds `n` up to a multiple of `align` (`align` a power of two), `None` on overflow.
pub fn align_up(n: usize, align: usize) -> Option<usize> {
    Some(n.checked_add(align - 1)? & !(align - 1))
}

/// The lower bound for any placement of these intervals: the largest sum of (aligned) sizes
/// live at one step. Returns `(bound, step at which it is reached)`; `(0, 0)` when empty.
pub fn lower_bound(intervals: &[Interval], align: usize) -> (usize, usize) {
    let steps = intervals.iter().map(|i| i.end).max().unwrap_or(0);
    let mut delta = vec![0i128; steps + 1];
    for i in intervals {
        let size = align_up(i.size, align).unwrap_or(usize::MAX) as i128;
        delta[i.start] += size;
        delta[i.end] -= size;
    }
    let (mut best, mut at, mut live) = (0i128, 0usize, 0i128);
    for (step, d) in delta.iter().enumerate().take(steps) {
        live += d;
        if live > best {
            best = live;
            at = step;
        }
    }
    (usize::try_from(best).unwrap_or(usize::MAX), at)
}

/// Every buffer in its own region: the naive arena (no reuse), for comparison.
pub fn place_sequential(intervals: &[Interval], align: usize) -> Placement {
    let mut offsets = Vec::with_capacity(intervals.len());
    let mut top = 0usize;
    for i in intervals {
        offsets.push(top);
        top = top.saturating_add(align_up(i.size, align).unwrap_or(usize::MAX));
    }
    Placement {
        offsets,
        arena_bytes: top,
        strategy: Strategy::Sequential,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_and_sequential() {
        let iv = [
            Interval::new(0, 2, 10),
            Interval::new(1, 3, 20),
            Interval::new(3, 4, 5),
        ];
        assert_eq!(lower_bound(&iv, 1), (30, 1));
        assert_eq!(lower_bound(&iv, 64), (128, 1));
        let p = place_sequential(&iv, 1);
        assert_eq!((p.offsets, p.arena_bytes), (vec![0, 10, 30], 35));
        assert_eq!(lower_bound(&[], 64), (0, 0));
    }
}
