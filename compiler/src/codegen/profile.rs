//! Per-node profiling support, all decided at compile time.
//!
//! With [`super::CodegenOptions::profile`] on, the entry function calls
//! [`arenac_profile_mark`] before the first kernel call of every *executed* node (one that
//! emits at least one call: a view sharing its input's bytes, or an activation applied by its
//! producer's conv epilogue, emits none) and once after the last call. Mark `k` stores the
//! time since the sink's origin, in nanoseconds, into slot `k`: node `k` ran from stamp `k` to
//! stamp `k + 1`. Without profiling the entry has no such call (nor anything else): the marks
//! cost nothing unless asked for.
//!
//! What the profile needs besides times is computed here once, at compile time, into one
//! [`NodeProfile`] per executed node: names, op types (those fused into the node too), types,
//! bytes read and written, FLOPs ([`crate::ops::cost::flops`]), the kernel class and the arena
//! bytes live at the node's step (from the plan's liveness).

use std::time::Instant;

use crate::analysis::liveness::BufferKind;
use crate::arena::ArenaPlan;
use crate::gemm::conv::ConvParams;
use crate::ir::graph::{Graph, NodeId, ValueKind};
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::cost::flops;

/// Where the profiling hook writes: the origin of the times and the stamp slots of one run.
/// Built on the stack by [`super::Executable::run_profiled`] for the duration of one run.
pub struct MarkSink {
    /// Time zero of the stamps.
    pub origin: Instant,
    /// First slot.
    pub stamps: *mut u64,
    /// Number of slots.
    pub len: usize,
}

/// The hook the profiling entry function calls between nodes: stores the nanoseconds since
/// `sink.origin` into slot `index`. A null sink or an index past the slots does nothing (a
/// profiling program run without a sink, e.g. by [`super::Executable::run`]).
///
/// # Safety
/// `sink` is null or points to a live [`MarkSink`] whose `stamps` are valid for writes of `len`
/// `u64`s and not accessed by anything else during the run.
pub unsafe extern "C" fn arenac_profile_mark(sink: *mut MarkSink, index: u64) {
    // SAFETY: per the contract, a non-null `sink` is a live, exclusively used MarkSink.
    let Some(sink) = (unsafe { sink.as_mut() }) else {
        return;
    };
    let Ok(i) = usize::try_from(index) else {
        return;
    };
    if i < sink.len {
        let ns = u64::try_from(sink.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: `i < len` and `stamps` is valid for `len` writes (the contract above).
        unsafe { sink.stamps.add(i).write(ns) };
    }
}

/// What the profile knows of one executed node, fixed at compile time.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeProfile {
    /// The node's name.
    pub name: String,
    /// Its op type as printed (`Conv`, `FusedElementwise`...).
    pub op_type: &'static str,
    /// The op types this node computes: its own, or the steps of a fused element-wise node,
    /// or a Conv followed by the activation applied in its epilogue (`["Conv", "Relu"]`).
    pub computes: Vec<&'static str>,
    /// The kernel path, for grouping the time by what runs: `conv 3x3/s1 im2col`, `conv 3x3/s2
    /// depthwise`, `conv 1x1 pointwise`, `gemm`, `gemv` (one row), `matmul`, or the op type.
    pub kernel: String,
    /// Position of the node in the graph's node order (the printed IR's order).
    pub node_index: usize,
    /// Step of the node in the schedule.
    pub step: usize,
    /// Types of the node's inputs.
    pub inputs: Vec<TensorType>,
    /// Types of the node's outputs.
    pub outputs: Vec<TensorType>,
    /// Bytes of the inputs that live in the arena (activations).
    pub activation_bytes: u64,
    /// Bytes of the constant inputs (weights, read from the weights region).
    pub parameter_bytes: u64,
    /// Bytes of the outputs.
    pub output_bytes: u64,
    /// Floating-point operations ([`crate::ops::cost::flops`], the fused activation included).
    pub flops: u64,
    /// Bytes of arena buffers live at this step (scratch included).
    pub live_bytes: u64,
    /// Bytes of those that are kernel scratch.
    pub scratch_bytes: u64,
}

impl NodeProfile {
    /// Bytes moved: activations and parameters read plus outputs written.
    pub fn bytes_moved(&self) -> u64 {
        self.activation_bytes
            .saturating_add(self.parameter_bytes)
            .saturating_add(self.output_bytes)
    }
}

/// The compile-time half of a profile: one entry per executed node, in run order (the mark
/// index).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileInfo {
    /// Executed nodes in the order they run.
    pub nodes: Vec<NodeProfile>,
    /// Calls of [`arenac_profile_mark`] in the entry function, counted in its IR.
    pub hook_calls: usize,
}

impl ProfileInfo {
    /// Stamp slots one run writes: one per node plus the end.
    pub fn stamps_per_run(&self) -> usize {
        self.nodes.len() + 1
    }
}

/// Arena bytes live at each step (all buffers, and scratch only), from the plan's liveness.
pub(super) fn live_bytes_per_step(plan: &ArenaPlan) -> Vec<(u64, u64)> {
    let n = plan.schedule.len();
    let mut delta = vec![(0i128, 0i128); n + 1];
    for b in &plan.liveness.buffers {
        let (s, e) = (b.interval.start.min(n), b.interval.end.min(n));
        if s >= e {
            continue;
        }
        let size = b.interval.size as i128;
        let scratch = if b.kind == BufferKind::Scratch {
            size
        } else {
            0
        };
        delta[s].0 += size;
        delta[s].1 += scratch;
        delta[e].0 -= size;
        delta[e].1 -= scratch;
    }
    let mut out = Vec::with_capacity(n);
    let (mut live, mut scratch) = (0i128, 0i128);
    for d in delta.iter().take(n) {
        live += d.0;
        scratch += d.1;
        out.push((live.max(0) as u64, scratch.max(0) as u64));
    }
    out
}

/// The kernel class of node `id` (see [`NodeProfile::kernel`]).
fn kernel_class(g: &Graph, id: NodeId) -> String {
    let n = g.node(id);
    let ty = |i: usize| n.inputs.get(i).map(|&v| &g.value(v).ty);
    let out = n.outputs.first().map(|&v| &g.value(v).ty);
    match &n.op {
        Op::Conv(a) => {
            let (Some(x), Some(y)) = (ty(0), out) else {
                return "conv".into();
            };
            let Some(p) = ConvParams::from_shapes(
                &x.shape,
                &y.shape,
                &a.kernel,
                &a.strides,
                &a.dilations,
                &a.pads,
                a.group,
            ) else {
                return "conv".into();
            };
            let path = if p.is_depthwise() {
                "depthwise"
            } else if (ConvParams { packed_a: 1, ..p }).is_pointwise_small() {
                // (with constant weights: `gemm/pw_small.rs`)
                "pointwise small"
            } else if p.is_pointwise() {
                "pointwise"
            } else if (ConvParams { packed_a: 1, ..p }).is_direct() {
                // (with constant weights, packed at compile time)
                "direct"
            } else if p.group > 1 {
                "grouped im2col"
            } else {
                "im2col"
            };
            format!(
                "conv {}x{}/s{} {path}",
                p.kh,
                p.kw,
                p.stride_h.max(p.stride_w)
            )
        }
        Op::Gemm(a) => {
            let rows = ty(0).and_then(|t| {
                if a.trans_a {
                    t.shape.get(1)
                } else {
                    t.shape.first()
                }
            });
            if rows == Some(&1) { "gemv" } else { "gemm" }.into()
        }
        Op::MatMul => {
            let rows = ty(0).and_then(|t| t.shape.iter().rev().nth(1).copied());
            let one_row = rows.is_none_or(|r| r == 1);
            let b_const = n
                .inputs
                .get(1)
                .is_some_and(|&v| matches!(g.value(v).kind, ValueKind::Constant(_)));
            match (one_row, b_const) {
                (true, _) => "gemv",
                (false, true) => "matmul (constant B)",
                (false, false) => "matmul",
            }
            .into()
        }
        Op::FusedElementwise(f) => {
            let names: Vec<&str> = f.steps.iter().map(|s| s.op.name()).collect();
            format!("fused {}", names.join("+"))
        }
        op => op.name().to_string(),
    }
}

/// The profile entry of node `id` (at `node_index` in the graph's order) run at `step`;
/// `activation` are the nodes whose work its kernel also does (a Conv's epilogue activation),
/// `live` the step's `(live, scratch)` bytes.
pub(super) fn node_profile(
    g: &Graph,
    (id, node_index): (NodeId, usize),
    step: usize,
    activation: &[NodeId],
    live: (u64, u64),
) -> NodeProfile {
    let n = g.node(id);
    let types = |vs: &[crate::ir::graph::ValueId]| -> Vec<TensorType> {
        vs.iter().map(|&v| g.value(v).ty.clone()).collect()
    };
    let (inputs, outputs) = (types(&n.inputs), types(&n.outputs));
    let bytes = |t: &TensorType| t.bytes().map_or(0, |b| b as u64);
    let (mut activation_bytes, mut parameter_bytes) = (0u64, 0u64);
    for &v in &n.inputs {
        let b = bytes(&g.value(v).ty);
        match g.value(v).kind {
            ValueKind::Constant(_) => parameter_bytes = parameter_bytes.saturating_add(b),
            _ => activation_bytes = activation_bytes.saturating_add(b),
        }
    }
    let output_bytes = outputs.iter().map(bytes).fold(0u64, u64::saturating_add);
    let mut total = flops(&n.op, &inputs, &outputs);
    let mut computes: Vec<&'static str> = match &n.op {
        Op::FusedElementwise(f) => f.steps.iter().map(|s| s.op.name()).collect(),
        op => vec![op.name()],
    };
    for &act in activation {
        let a = g.node(act);
        total = total.saturating_add(flops(&a.op, &outputs, &outputs));
        match &a.op {
            Op::FusedElementwise(f) => computes.extend(f.steps.iter().map(|s| s.op.name())),
            op => computes.push(op.name()),
        }
    }
    NodeProfile {
        name: n.name.clone(),
        op_type: n.op.name(),
        computes,
        kernel: kernel_class(g, id),
        node_index,
        step,
        inputs,
        outputs,
        activation_bytes,
        parameter_bytes,
        output_bytes,
        flops: total,
        live_bytes: live.0,
        scratch_bytes: live.1,
    }
}
