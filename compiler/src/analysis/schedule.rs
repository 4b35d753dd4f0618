//! The execution order. (Placeholder: the file's topological order; the memory-aware schedule
//! is to be implemented.)

use std::time::Duration;

use crate::ir::graph::{Graph, NodeId};

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

/// A topological order of every node of `g`.
pub fn schedule(g: &Graph, opts: &ScheduleOptions) -> Vec<NodeId> {
    let _ = opts;
    g.order().to_vec()
}
