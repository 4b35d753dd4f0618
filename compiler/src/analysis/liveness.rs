//! Buffer lifetimes over a schedule.
//!
//! Conventions (steps are positions in the schedule, `0..n`; intervals are half-open):
//! - a value computed at step `i` and last read at step `j` lives over `[i, j + 1)`;
//! - graph inputs live in the arena from step 0: `[0, last read + 1)`;
//! - graph outputs live in the arena until the end: `[producer, n)`;
//! - weights and other constants are not in the arena (a separate read-only region);
//! - a computed value that nothing reads and that is not an output lives `[i, i + 1)`.
//!
//! A buffer may hold several values ([`Buffer::values`]), each at a byte offset
//! ([`Liveness::value_offset`], 0 unless it is a Concat slice): its interval runs from its first
//! value's start to the last read of any value stored in it (to `n` when one of them is a graph
//! output: the buffer is then of kind [`BufferKind::Output`], unless it is an input's).
//! - **Views** ([`LivenessOptions::views`]; ops with [`crate::ops::Op::is_view`]): the output
//!   is the input's bytes under another shape, stored in the input's buffer (zero bytes, zero
//!   copies). A view of a graph input extends the input's buffer. A view of a constant gets a
//!   buffer of its own (a copy out of the read-only region).
//! - **In-place** ([`LivenessOptions::in_place`]): an elementwise node (Unary, Binary,
//!   Variadic, Where, FusedElementwise, and inference BatchNormalization — a per-channel
//!   affine map, element `i` of the output depends only on element `i` of X and on
//!   constants) writes its output into the buffer of a data input when the output has
//!   that input's shape and element size, the node is the last reader of every value stored in
//!   that buffer, the buffer is not a graph input's and holds no graph output, and no other
//!   input of the node lives in that buffer (the same value read twice is fine). The first such
//!   input in input order is chosen. A residual `Add` writing into its dead operand is the
//!   main case; a Conv with a fused residual (`ConvAttrs::sum`, `analysis::fuse::residual`)
//!   writes over that residual (its fourth input) under the same rule. The same holds for ops whose kernel declares it may write over its input
//!   ([`crate::ops::Op::may_write_over_input`]: LRN, and MaxPool/AveragePool whose geometry
//!   lets each output row overwrite only input rows no later row reads). A pooling output
//!   smaller than its input takes the first bytes of the input's buffer, which then keeps its
//!   size until the output's last read: such writes are tried one at a time in schedule
//!   order and kept only when they lower the peak of aligned live bytes.
//! - **In-place Concat** ([`LivenessOptions::concat_in_place`]): the producer of a Concat
//!   input writes straight into the input's slice of the Concat's output, and the Concat
//!   copies nothing for it (rules in `concat.rs`: the slice must be contiguous, the input
//!   computed by a non-view node, read once by that Concat, not a graph output). The input is
//!   stored in the output's buffer at its slice's byte offset ([`Liveness::value_offset`]),
//!   `alias_of` the Concat's output, and the buffer lives from the first slice's producer.
//!   Nested Concats compose (an inner Concat's output is itself a slice of the outer one).
//!   A slice's producer never also writes in place; views and in-place writes of a value
//!   stored at an offset keep that offset. A Conv whose output only a unary activation
//!   reads, and whose activation output has a slot, may be computed into that slice too
//!   (`through`, the `conv into slice` pass): the activation then runs there in place, in
//!   the Conv's epilogue.
//! - **Scratch** ([`LivenessOptions::scratch`]): a node whose op needs a workspace
//!   ([`crate::ops::Op::scratch_bytes`]) gets a buffer `<node name>:scratch` of kind
//!   [`BufferKind::Scratch`] living `[step, step + 1)`. An im2col Conv's scratch is sized for
//!   the largest tile that keeps the peak as low as its smallest tile would (`tiles.rs`): the
//!   default tile everywhere but at the peak.
//!
//! With every option off this is the layer-wise baseline: each value in its own buffer.
//!
//! Buffers are listed inputs first (value table order), then in schedule order (a node's
//! outputs' new buffers, then its scratch).

use std::collections::{HashMap, HashSet};

use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::plan::Interval;

pub use decide::{PASSES, Pass};

mod concat;
mod decide;
#[cfg(test)]
mod tests;
mod tiles;
pub mod winograd;

/// What to merge or add when computing buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LivenessOptions {
    /// Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity) share their input's buffer.
    pub views: bool,
    /// Elementwise ops write into an input buffer whose life ends at that step.
    pub in_place: bool,
    /// Nodes' kernel scratch is planned as buffers living for one step.
    pub scratch: bool,
    /// Concat inputs are computed straight into their slice of the Concat's output.
    pub concat_in_place: bool,
    /// Threads the kernels run on: parallel kernels get one slot of per-thread scratch each
    /// (im2col panels, GEMM A packing), so the planned arena is exact for this count.
    pub threads: usize,
    /// 3 x 3 stride-1 Convs may run Winograd F(4x4, 3x3) where its scratch does not raise
    /// the peak (the `winograd` pass, [`winograd`]).
    pub winograd: bool,
    /// Winograd may read the transformed weights of small Convs precomputed in the weights
    /// region instead of transforming them into its scratch at every run
    /// ([`winograd::precomputed`], [`crate::gemm::winograd::mark`]): only for f32 weights (off
    /// with `--weights f16|bf16|int8`), and turned off when the weights' growth is what keeps
    /// a plan above its `--memory-limit`.
    pub winograd_precompute: bool,
    /// Per mille of the placed arena the `winograd` pass may add for a Conv whose every
    /// Winograd size raises the peak (its slack step, [`winograd`]); 0: never more arena.
    /// Patched plans take [`PATCHED_WINOGRAD_GROWTH`]: they trade time for memory already.
    pub winograd_growth: u32,
}

/// [`LivenessOptions::winograd_growth`] of a patched plan: 6%. A patch policy values 1% of
/// arena at 0.3% of time (`analysis::patches::whole::ARENA_WEIGHT`), and a Conv that keeps
/// Winograd runs 1.5 to 2.4 times faster (ResNet-18's 64-channel 56 x 56 Convs after the stem
/// stage run as strips: the stage's arena, 1,762,432 bytes, holds a block input and its
/// first Conv's output but is 1% short of the smallest Winograd scratch beside them). With
/// f32 Convs on the direct kernels planned no scratch (`gemm::conv::conv2d_plan_bytes`) the
/// 2-thread ResNet-18 patched plan at 2% lost Winograd on four 56 x 56 Convs: arena 0.473 of
/// unpatched at 1.16x the CPU time; at 6% 0.501 at 0.97x (15%: 0.529).
pub const PATCHED_WINOGRAD_GROWTH: u32 = 60;

impl LivenessOptions {
    /// The layer-wise baseline: every value its own buffer, no scratch.
    pub fn layer_wise() -> LivenessOptions {
        LivenessOptions {
            views: false,
            in_place: false,
            scratch: false,
            concat_in_place: false,
            threads: 1,
            winograd: false,
            winograd_precompute: true,
            winograd_growth: 0,
        }
    }

    /// Everything arenac does.
    pub fn full() -> LivenessOptions {
        LivenessOptions {
            views: true,
            in_place: true,
            scratch: true,
            concat_in_place: true,
            threads: 1,
            winograd: true,
            winograd_precompute: true,
            winograd_growth: 0,
        }
    }

    /// These options for kernels running on `threads` threads (at least 1).
    pub fn with_threads(self, threads: usize) -> LivenessOptions {
        LivenessOptions {
            threads: threads.max(1),
            ..self
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
    /// Values stored in it: the root first (for a Concat's buffer, the outermost Concat's
    /// output, written last), then slices, views and in-place successors in order.
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
    /// For a value stored in another value's buffer (view or in-place), that value; for a
    /// Concat slice, the Concat's output.
    pub alias_of: HashMap<ValueId, ValueId>,
    /// Byte offset of a value within its buffer; absent means 0 (only Concat slices and what
    /// aliases them sit at a non-zero offset).
    pub value_offset: HashMap<ValueId, usize>,
}

impl Liveness {
    /// Byte offset of `v` within its buffer (0 by default).
    pub fn offset_of(&self, v: ValueId) -> usize {
        self.value_offset.get(&v).copied().unwrap_or(0)
    }

    /// The buffers' intervals, in buffer order (the planner's input).
    pub fn intervals(&self) -> Vec<Interval> {
        self.buffers.iter().map(|b| b.interval).collect()
    }
}

/// Whether `op` may write an output of type `output` over an input of type `input` (the
/// static half of the in-place rule; liveness decides whether the input is dead).
pub(crate) fn in_place_compatible(op: &Op, input: &TensorType, output: &TensorType) -> bool {
    matches!(
        op,
        Op::Unary(_)
            | Op::ClipDynamic { .. }
            | Op::Binary(_)
            | Op::Variadic(_)
            | Op::Where
            | Op::BatchNormalization { .. }
            | Op::FusedElementwise(_)
            | Op::PatchWrite { .. }
    ) && input.dtype.size() == output.dtype.size()
        && input.shape == output.shape
        && input.bytes().is_some()
        && input.bytes() == output.bytes()
        || (op.may_write_over_input(input, output)
            && input.bytes().is_some()
            && input.bytes() == output.bytes())
}

/// Whether `op` may write a *smaller* output of type `output` over an input of type `input`
/// (a pooling that shrinks its input). Such a write is not always a gain: the output keeps
/// the input's whole buffer until its own last read, so [`liveness`] keeps only those that
/// lower the peak.
fn shrinking_in_place(op: &Op, input: &TensorType, output: &TensorType) -> bool {
    op.may_write_over_input(input, output)
        && input
            .bytes()
            .zip(output.bytes())
            .is_some_and(|(i, o)| o < i)
}

/// Whether a value is a compile-time constant (not in the arena).
pub(crate) fn is_constant(g: &Graph, v: ValueId) -> bool {
    matches!(g.value(v).kind, ValueKind::Constant(_))
}

/// The scratch bytes a node asks for when its kernel runs on `threads` threads.
pub(crate) fn node_scratch(g: &Graph, id: NodeId, threads: usize) -> usize {
    let node = g.node(id);
    let ins: Vec<TensorType> = node.inputs.iter().map(|&v| g.value(v).ty.clone()).collect();
    let consts: Vec<bool> = node.inputs.iter().map(|&v| is_constant(g, v)).collect();
    let outs: Vec<TensorType> = node
        .outputs
        .iter()
        .map(|&v| g.value(v).ty.clone())
        .collect();
    node.op.scratch_bytes(&ins, &outs, &consts, threads)
}

/// Per-buffer bookkeeping while walking the schedule.
struct Open {
    /// One past the last step any value in it is produced or read.
    end: usize,
    /// Holds a graph output.
    pinned: bool,
}

/// Computes buffers for `g` run in `order` (a topological order of all its nodes): the
/// memory decisions of [`PASSES`] (those `opts` enables: scratch, shrinking in-place writes,
/// in-place Concats, Conv tiles; `decide.rs`), then the buffers they give.
pub fn liveness(g: &Graph, order: &[NodeId], opts: LivenessOptions) -> Liveness {
    decide::run(g, order, opts, PASSES)
}

/// [`liveness`] with only the passes `keep` accepts (by [`Pass::name`]), in [`PASSES`]
/// order: e.g. without `conv tiles`, every im2col panel at its smallest tile.
pub fn liveness_with(
    g: &Graph,
    order: &[NodeId],
    opts: LivenessOptions,
    keep: impl Fn(&str) -> bool,
) -> Liveness {
    let passes: Vec<&Pass> = PASSES.iter().filter(|p| keep(p.name)).collect();
    decide::run_refs(g, order, opts, &passes)
}

/// The buffers of `g` run in `order` with these decisions: the in-place Concat slots, the
/// shrinking in-place writes and the scratch bytes per step (the one measure every pass uses).
fn build(
    g: &Graph,
    order: &[NodeId],
    opts: LivenessOptions,
    slots: &concat::ConcatSlots,
    shrink: &HashSet<NodeId>,
    scratch: &[usize],
    through: &HashMap<ValueId, ValueId>,
) -> Liveness {
    let n = order.len();
    let nv = g.values().len();
    let mut last_read: Vec<Option<usize>> = vec![None; nv];
    for (step, &id) in order.iter().enumerate() {
        for &v in &g.node(id).inputs {
            if let Some(slot) = last_read.get_mut(v.index()) {
                *slot = Some(step);
            }
        }
    }
    let mut is_output = vec![false; nv];
    for &v in &g.outputs {
        if let Some(slot) = is_output.get_mut(v.index()) {
            *slot = true;
        }
    }
    let out_of = |v: ValueId| is_output.get(v.index()).copied().unwrap_or(false);
    // One past the last step value `v` (produced at `start`) needs its bytes.
    let value_end = |v: ValueId, start: usize| {
        let read = last_read.get(v.index()).copied().flatten();
        read.map_or(start + 1, |s| (s + 1).max(start + 1))
    };

    let mut live = Liveness {
        order: order.to_vec(),
        ..Liveness::default()
    };
    let mut open: Vec<Open> = Vec::new();
    let new_buffer = |live: &mut Liveness, open: &mut Vec<Open>, v: ValueId, start, kind| {
        let val = g.value(v);
        live.value_buffer.insert(v, live.buffers.len());
        live.buffers.push(Buffer {
            name: val.name.clone(),
            kind,
            interval: Interval::new(start, start + 1, val.ty.bytes().unwrap_or(0)),
            values: vec![v],
            node: None,
        });
        open.push(Open {
            end: value_end(v, start),
            pinned: out_of(v),
        });
    };

    for v in g.value_ids() {
        if g.value(v).kind == ValueKind::Input {
            new_buffer(&mut live, &mut open, v, 0, BufferKind::Input);
        }
    }
    // Activation outputs whose Conv input was computed into their Concat slice (`through`),
    // and that input.
    let mut acts: HashMap<ValueId, ValueId> = HashMap::new();
    for (step, &id) in order.iter().enumerate() {
        let node = g.node(id);
        for (k, &out) in node.outputs.iter().enumerate() {
            if live.value_buffer.contains_key(&out) {
                // The outermost Concat output of a buffer its slices opened: already placed.
                continue;
            }
            // A Conv output `through` names is placed at its activation's slot.
            let at = match through.get(&out) {
                Some(&v) if slots.get(out).is_none() && slots.get(v).is_some() => {
                    acts.insert(v, out);
                    v
                }
                _ => out,
            };
            if let Some((root, offset)) = slots.resolve(at) {
                let b = match live.value_buffer.get(&root) {
                    Some(&b) => b,
                    None => {
                        new_buffer(&mut live, &mut open, root, step, BufferKind::Intermediate);
                        live.buffers.len() - 1
                    }
                };
                // The activation runs in place over its input's bytes in the slice.
                if let Some(of) = acts.get(&out).copied().or(slots.get(at).map(|(of, _)| of)) {
                    live.alias_of.insert(out, of);
                }
                live.value_offset.insert(out, offset);
                live.value_buffer.insert(out, b);
                if let (Some(buf), Some(o)) = (live.buffers.get_mut(b), open.get_mut(b)) {
                    buf.values.push(out);
                    o.end = o.end.max(value_end(out, step));
                }
                continue;
            }
            let target = if k > 0 {
                None
            } else if opts.views && node.op.is_view() {
                node.inputs
                    .first()
                    .filter(|&&v| !is_constant(g, v))
                    .and_then(|&v| Some((v, *live.value_buffer.get(&v)?)))
            } else if opts.in_place {
                in_place_target(g, &live, &open, id, step, shrink)
            } else {
                None
            };
            match target {
                Some((src, b)) => {
                    live.alias_of.insert(out, src);
                    live.value_buffer.insert(out, b);
                    let offset = live.offset_of(src);
                    if offset > 0 {
                        live.value_offset.insert(out, offset);
                    }
                    if let (Some(buf), Some(o)) = (live.buffers.get_mut(b), open.get_mut(b)) {
                        buf.values.push(out);
                        let size = g.value(out).ty.bytes().unwrap_or(0);
                        buf.interval.size = buf.interval.size.max(size.saturating_add(offset));
                        o.end = o.end.max(value_end(out, step));
                        o.pinned |= out_of(out);
                    }
                }
                None => new_buffer(&mut live, &mut open, out, step, BufferKind::Intermediate),
            }
        }
        if opts.scratch {
            let size = scratch.get(step).copied().unwrap_or(0);
            if size > 0 {
                live.buffers.push(Buffer {
                    name: format!("{}:scratch", node.name),
                    kind: BufferKind::Scratch,
                    interval: Interval::new(step, step + 1, size),
                    values: Vec::new(),
                    node: Some(id),
                });
                open.push(Open {
                    end: step + 1,
                    pinned: false,
                });
            }
        }
    }
    for (buf, o) in live.buffers.iter_mut().zip(&open) {
        let start = buf.interval.start;
        let mut end = o.end.max(start + 1);
        if o.pinned {
            end = end.max(n);
            if buf.kind == BufferKind::Intermediate {
                buf.kind = BufferKind::Output;
            }
        }
        buf.interval.end = end;
    }
    live
}

/// The input whose buffer node `id` at `step` may write its output into, with that buffer.
fn in_place_target(
    g: &Graph,
    live: &Liveness,
    open: &[Open],
    id: NodeId,
    step: usize,
    shrink: &HashSet<NodeId>,
) -> Option<(ValueId, usize)> {
    let node = g.node(id);
    let out = g.value(*node.outputs.first()?);
    node.inputs.iter().enumerate().find_map(|(k, &v)| {
        // A run-time Clip on a non-f32 dtype is two kernels (max, then min in place): its
        // output may take x's buffer, not a bound's (read again after the first write).
        if k > 0 && matches!(node.op, Op::ClipDynamic { .. }) {
            return None;
        }
        let ty = &g.value(v).ty;
        let ok = match &node.op {
            // A fused residual (input 3) is read element by element just before the same
            // element of the output is written (`gemm::conv::ConvParams::accumulate`).
            Op::Conv(a) if a.sum => {
                k == 3
                    && ty.dtype == out.ty.dtype
                    && ty.shape == out.ty.shape
                    && ty.bytes().is_some()
            }
            op => {
                in_place_compatible(op, ty, &out.ty)
                    || (shrink.contains(&id) && shrinking_in_place(op, ty, &out.ty))
            }
        };
        if is_constant(g, v) || !ok {
            return None;
        }
        let b = *live.value_buffer.get(&v)?;
        let buf = live.buffers.get(b)?;
        let o = open.get(b)?;
        let dead = o.end == step + 1 && !o.pinned && buf.kind == BufferKind::Intermediate;
        // A Conv reads its data input through windows: it must not be the residual too.
        let conv = matches!(node.op, Op::Conv(_));
        let alone =
            node.inputs.iter().enumerate().all(|(j, &w)| {
                j == k || (w == v && !conv) || live.value_buffer.get(&w) != Some(&b)
            });
        (dead && alone).then_some((v, b))
    })
}
