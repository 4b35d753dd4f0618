//! Buffer lifetimes over a schedule.
//!
//! Conventions (steps are positions in the schedule, `0..n`; intervals are half-open):
//! - a value computed at step `i` and last read at step `j` lives over `[i, j + 1)`;
//! - graph inputs live in the arena from step 0: `[0, last read + 1)`;
//! - graph outputs live in the arena until the end: `[producer, n)`;
//! - weights and other constants are not in the arena (a separate read-only region);
//! - a computed value that nothing reads and that is not an output lives `[i, i + 1)`.
//!
//! (Placeholder: every value in its own buffer — the layer-wise baseline. Views, in-place
//! reuse and kernel scratch are to be implemented.)

use std::collections::HashMap;

use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::plan::Interval;

/// What to merge or add when computing buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LivenessOptions {
    /// Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity) share their input's buffer.
    pub views: bool,
    /// Elementwise ops write into an input buffer whose life ends at that step.
    pub in_place: bool,
    /// Nodes' kernel scratch is planned as buffers living for one step.
    pub scratch: bool,
}

impl LivenessOptions {
    /// The layer-wise baseline: every value its own buffer, no scratch.
    pub fn layer_wise() -> LivenessOptions {
        LivenessOptions {
            views: false,
            in_place: false,
            scratch: false,
        }
    }

    /// Everything arenac does.
    pub fn full() -> LivenessOptions {
        LivenessOptions {
            views: true,
            in_place: true,
            scratch: true,
        }
    }
}

/// What a buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferKind {
    /// A graph input (written by the caller before a run).
    Input,
    /// Holds a graph output (read by the caller after a run).
    Output,
    /// An intermediate value.
    Intermediate,
    /// Kernel scratch of one node.
    Scratch,
}

/// One arena buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// Name of the value that first writes it (scratch: `<node name>:scratch`).
    pub name: String,
    /// Kind.
    pub kind: BufferKind,
    /// Live steps and bytes.
    pub interval: Interval,
    /// Values stored in it: the root first, then views and in-place successors in order.
    pub values: Vec<ValueId>,
    /// For scratch, the node that uses it.
    pub node: Option<NodeId>,
}

/// Buffers of a graph over one schedule.
#[derive(Clone, Debug, Default)]
pub struct Liveness {
    /// The schedule the steps refer to.
    pub order: Vec<NodeId>,
    /// Arena buffers.
    pub buffers: Vec<Buffer>,
    /// The buffer holding each non-constant value.
    pub value_buffer: HashMap<ValueId, usize>,
    /// For a value stored in another value's buffer (view or in-place), that value.
    pub alias_of: HashMap<ValueId, ValueId>,
}

impl Liveness {
    /// The buffers' intervals, in buffer order (the planner's input).
    pub fn intervals(&self) -> Vec<Interval> {
        self.buffers.iter().map(|b| b.interval).collect()
    }
}

/// Computes buffers for `g` run in `order` (a topological order of all its nodes).
pub fn liveness(g: &Graph, order: &[NodeId], opts: LivenessOptions) -> Liveness {
    let _ = opts;
    let n = order.len();
    let step_of: HashMap<NodeId, usize> =
        order.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let mut last_read: HashMap<ValueId, usize> = HashMap::new();
    for (step, &id) in order.iter().enumerate() {
        for &v in &g.node(id).inputs {
            last_read.insert(v, step);
        }
    }
    let mut live = Liveness {
        order: order.to_vec(),
        ..Liveness::default()
    };
    for v in g.value_ids() {
        let val = g.value(v);
        let (start, kind) = match val.kind {
            ValueKind::Constant(_) => continue,
            ValueKind::Input => (0, BufferKind::Input),
            ValueKind::Computed(p) => (
                step_of.get(&p).copied().unwrap_or(0),
                BufferKind::Intermediate,
            ),
        };
        let is_output = g.outputs.contains(&v);
        let end = if is_output {
            n.max(start + 1)
        } else {
            last_read.get(&v).map_or(start + 1, |&s| s + 1)
        };
        let kind = if is_output && kind == BufferKind::Intermediate {
            BufferKind::Output
        } else {
            kind
        };
        live.value_buffer.insert(v, live.buffers.len());
        live.buffers.push(Buffer {
            name: val.name.clone(),
            kind,
            interval: Interval::new(start, end, val.ty.bytes().unwrap_or(0)),
            values: vec![v],
            node: None,
        });
    }
    live
}
