//! The execution order: a memory-aware topological order of the graph.
//!
//! Several candidate orders are built and measured with the real
//! [`liveness`](crate::analysis::liveness::liveness) (all options on) and
//! [`lower_bound`](crate::plan::lower_bound) at [`ALIGN`](crate::plan::ALIGN); the one with
//! the lowest peak wins, ties going to the file's order (then to the candidates in the order
//! listed):
//! 1. the file's order;
//! 2. a greedy list scheduler: among ready nodes, the one leaving the fewest live bytes after
//!    it runs (bytes it allocates minus bytes whose last read it is; views and in-place
//!    writes allocate nothing), then the lowest peak during its step, then file order;
//! 3. the same greedy keyed on the peak so far first, then live bytes after;
//! 4. a beam search (the idea of Serenity, Ahn et al. 2020: states with the same set of
//!    scheduled nodes are merged, keeping the best) keyed like 3, its width chosen from a work
//!    budget counted in state words so that the search is deterministic and bounded; the wall
//!    clock [`ScheduleOptions::time_budget`] only abandons it as a safety cap on huge graphs.
//!
//! The cost model inside the search mirrors liveness (views share their input's bytes,
//! elementwise nodes write into a dead input of the same shape, scratch lives one step), so
//! the search and the measure agree; the measure has the last word anyway.

use std::time::{Duration, Instant};

use crate::analysis::liveness::{LivenessOptions, liveness};
use crate::ir::graph::{Graph, NodeId};
use crate::plan::{ALIGN, lower_bound};

mod search;

/// Options for [`schedule`].
#[derive(Clone, Debug)]
pub struct ScheduleOptions {
    /// Keep the file's (topological) order instead of searching for a lower-peak one.
    pub keep_file_order: bool,
    /// Wall-clock budget for the search; the result stays deterministic (the search is
    /// bounded by work counts, the budget only cuts it short on huge graphs).
    pub time_budget: Duration,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions {
            keep_file_order: false,
            time_budget: Duration::from_millis(500),
        }
    }
}

/// The peak live bytes of `order`: the lower bound of its full liveness at [`ALIGN`].
pub fn peak_bytes(g: &Graph, order: &[NodeId]) -> usize {
    lower_bound(
        &liveness(g, order, LivenessOptions::full()).intervals(),
        ALIGN,
    )
    .0
}

/// A topological order of every node of `g`; never a higher [`peak_bytes`] than the file's.
pub fn schedule(g: &Graph, opts: &ScheduleOptions) -> Vec<NodeId> {
    let file = g.order().to_vec();
    if opts.keep_file_order || file.len() < 2 {
        return file;
    }
    let deadline = Instant::now() + opts.time_budget;
    let model = search::Model::new(g);
    let mut best_peak = peak_bytes(g, &file);
    let mut best = file;
    for cand in model.candidates(deadline) {
        let order: Vec<NodeId> = cand.iter().filter_map(|&i| model.node_id(i)).collect();
        if order.len() != best.len() {
            continue;
        }
        let peak = peak_bytes(g, &order);
        if peak < best_peak {
            best_peak = peak;
            best = order;
        }
    }
    best
}

#[cfg(test)]
mod tests;
