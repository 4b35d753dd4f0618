//! The plan report: one record per value (and per scratch buffer) with its bytes, offset and
//! steps, as text or as JSON. The JSON schema is documented in `docs/PLAN-REPORT.md`; bump
//! [`SCHEMA_VERSION`] on any incompatible change.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{ArenaPlan, grouped, human_bytes};
use crate::analysis::liveness::BufferKind;
use crate::ir::graph::{Graph, ValueId, ValueKind};

/// Version of the JSON schema.
pub const SCHEMA_VERSION: u32 = 1;

fn one() -> usize {
    1
}

/// The whole report (serialized as the JSON document).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The graph's name.
    pub graph: String,
    /// Steps in the schedule (= nodes after folding).
    pub steps: usize,
    /// Buffer alignment in bytes.
    pub align: usize,
    /// Whether the file's order was kept (`--keep-order`).
    pub keep_file_order: bool,
    /// Threads the plan is for (`--threads`): each parallel kernel's scratch holds one
    /// per-thread slot per thread. Absent in reports written before it existed (read as 1).
    #[serde(default = "one")]
    pub threads: usize,
    /// Arena bytes.
    pub arena_bytes: usize,
    /// Lower bound of this schedule and liveness: most bytes live at one step.
    pub lower_bound_bytes: usize,
    /// `lower_bound_bytes / arena_bytes`.
    pub efficiency: f64,
    /// Every buffer of the layer-wise liveness in file order, summed (no reuse at all).
    pub naive_bytes: usize,
    /// Lower bound of the layer-wise liveness in file order.
    pub layer_wise_bound_bytes: usize,
    /// Bytes of the constants the graph reads (each shared buffer once).
    pub weights_bytes: usize,
    /// Constant values read.
    pub weight_tensors: usize,
    /// The step where the lower bound is reached.
    pub peak_step: usize,
    /// The node run at the peak step (`null` for a graph without nodes).
    pub peak_node: Option<String>,
    /// Its op type.
    pub peak_op: Option<String>,
    /// The offset strategy that won.
    pub strategy: String,
    /// Planning time in milliseconds.
    pub planning_ms: f64,
    /// Arena buffers (the rectangles of the picture).
    pub arena_buffers: usize,
    /// One entry per value in the arena and per scratch buffer, sorted by first step.
    pub buffers: Vec<BufferEntry>,
    /// The plans of the graphs control-flow nodes hold (an `If`'s branches), in schedule
    /// order of their nodes; empty for a graph without any.
    #[serde(default)]
    pub subgraphs: Vec<SubgraphEntry>,
    /// The weights in a reduced storage type (`--weights f16|bf16|int8`): bytes by type, the
    /// saving against f32, the nodes kept in f32. Absent for f32 weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_storage: Option<crate::analysis::weights_type::WeightsStorage>,
    /// The intermediates in a 16-bit type (`--activations f16|bf16`): the arena against the
    /// f32 plan, the nodes kept in f32. Absent for f32 activations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activations_storage: Option<crate::analysis::act_type::ActivationsStorage>,
    /// The leading stage run patch by patch (`--patches`), when the planner kept it: the
    /// stage, the grid, the arena without patches and the FLOPs the halos recompute. Absent
    /// when nothing is patched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<crate::analysis::patches::PatchInfo>,
    /// The Convs that run Winograd F(4x4, 3x3) (the planner's `winograd` pass: their
    /// scratch holds the per-run transformed weights), in schedule order; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub winograd: Vec<String>,
}

/// The plan of one graph held by a control-flow node: its own arena lives in the node's
/// scratch buffer, at `offset` of the enclosing arena; its report's offsets count from there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubgraphEntry {
    /// The holding node.
    pub node: String,
    /// Its op type.
    pub op: String,
    /// Which graph of the node (`then_branch`, `else_branch`).
    pub role: String,
    /// Offset of the sub-arena in the enclosing arena.
    pub offset: usize,
    /// The subgraph's plan report.
    pub report: PlanReport,
}

/// Offset of node `id`'s scratch buffer in `plan`'s arena (a control node's sub-arena).
pub fn scratch_offset(plan: &ArenaPlan, id: crate::ir::graph::NodeId) -> Option<usize> {
    let (i, _) = plan
        .liveness
        .buffers
        .iter()
        .enumerate()
        .find(|(_, b)| b.kind == BufferKind::Scratch && b.node == Some(id))?;
    plan.placement.offsets.get(i).copied()
}

/// One value (or scratch buffer) in the arena.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferEntry {
    /// Value name (scratch: `<node>:scratch`).
    pub name: String,
    /// Bytes: for a buffer's root value the buffer's size, for an alias its own size.
    pub bytes: usize,
    /// Offset in the arena of its buffer (an alias has its root's offset).
    pub offset: usize,
    /// Offset of the value within its buffer: 0, except for an in-place Concat slice (and
    /// what aliases it), whose bytes start at `offset + offset_in_buffer`.
    pub offset_in_buffer: usize,
    /// First step at which it is live.
    pub first_step: usize,
    /// Last step at which it is live (inclusive).
    pub last_step: usize,
    /// `input`, `output`, `intermediate` or `scratch`: for a buffer's root the buffer's kind
    /// (`output` when the buffer ends up holding a graph output), for an alias its own role.
    pub kind: String,
    /// Index of its arena buffer.
    pub buffer: usize,
    /// `null`, or the value whose buffer it reuses (a view's input, an in-place result's dead
    /// operand, or for an in-place Concat input the Concat's output).
    pub alias_of: Option<String>,
}

fn kind_name(k: BufferKind) -> &'static str {
    match k {
        BufferKind::Input => "input",
        BufferKind::Output => "output",
        BufferKind::Intermediate => "intermediate",
        BufferKind::Scratch => "scratch",
    }
}

/// Builds the report of `plan` for `g`.
pub fn build_report(g: &Graph, plan: &ArenaPlan) -> PlanReport {
    let live = &plan.liveness;
    let n = plan.schedule.len();
    // Each value's own life (used for aliases; a root reports its whole buffer).
    let step_of: HashMap<_, _> = plan
        .schedule
        .iter()
        .enumerate()
        .map(|(i, &id)| (id, i))
        .collect();
    let mut last_read: HashMap<ValueId, usize> = HashMap::new();
    for (step, &id) in plan.schedule.iter().enumerate() {
        for &v in &g.node(id).inputs {
            last_read.insert(v, step);
        }
    }
    let own_life = |v: ValueId| -> (usize, usize) {
        let start = match g.value(v).kind {
            ValueKind::Computed(p) => step_of.get(&p).copied().unwrap_or(0),
            _ => 0,
        };
        let end = if g.outputs.contains(&v) {
            n.max(start + 1)
        } else {
            last_read.get(&v).map_or(start + 1, |&s| s + 1)
        };
        (start, end.saturating_sub(1).max(start))
    };
    let value_kind = |v: ValueId| -> &'static str {
        if g.outputs.contains(&v) {
            "output"
        } else if matches!(g.value(v).kind, ValueKind::Input) {
            "input"
        } else {
            "intermediate"
        }
    };
    let mut buffers = Vec::new();
    for (bi, b) in live.buffers.iter().enumerate() {
        let offset = plan.placement.offsets.get(bi).copied().unwrap_or(0);
        let iv = b.interval;
        let mut root = BufferEntry {
            name: b.name.clone(),
            bytes: iv.size,
            offset,
            first_step: iv.start,
            last_step: iv.end.saturating_sub(1).max(iv.start),
            kind: kind_name(b.kind).to_string(),
            buffer: bi,
            offset_in_buffer: 0,
            alias_of: None,
        };
        let Some((&first, rest)) = b.values.split_first() else {
            buffers.push(root);
            continue;
        };
        root.name = g.value(first).name.clone();
        buffers.push(root);
        for &v in rest {
            let (first_step, last_step) = own_life(v);
            let of = live.alias_of.get(&v).copied().unwrap_or(first);
            buffers.push(BufferEntry {
                name: g.value(v).name.clone(),
                bytes: g.value(v).ty.bytes().unwrap_or(0),
                offset,
                first_step,
                last_step,
                kind: value_kind(v).to_string(),
                buffer: bi,
                offset_in_buffer: live.offset_of(v),
                alias_of: Some(g.value(of).name.clone()),
            });
        }
    }
    buffers.sort_by(|a, b| {
        (a.first_step, a.buffer, a.alias_of.is_some()).cmp(&(
            b.first_step,
            b.buffer,
            b.alias_of.is_some(),
        ))
    });
    let peak = plan.peak_node().map(|id| g.node(id));
    let mut subgraphs = Vec::new();
    for &id in &plan.schedule {
        let Some(subs) = plan.sub_plans.get(&id) else {
            continue;
        };
        let node = g.node(id);
        for ((role, sg), sp) in node.op.subgraphs().into_iter().zip(subs) {
            subgraphs.push(SubgraphEntry {
                node: node.name.clone(),
                op: node.op.name().to_string(),
                role: role.to_string(),
                offset: scratch_offset(plan, id).unwrap_or(0),
                report: build_report(sg, sp),
            });
        }
    }
    PlanReport {
        schema_version: SCHEMA_VERSION,
        graph: g.name.clone(),
        steps: n,
        align: plan.options.align,
        keep_file_order: plan.options.keep_file_order,
        threads: plan.options.liveness.threads.max(1),
        arena_bytes: plan.arena_bytes,
        lower_bound_bytes: plan.lower_bound_bytes,
        efficiency: plan.efficiency(),
        naive_bytes: plan.naive_bytes,
        layer_wise_bound_bytes: plan.layer_wise_bound_bytes,
        weights_bytes: plan.weights.bytes,
        weight_tensors: plan.weights.tensors,
        peak_step: plan.peak_step,
        peak_node: peak.map(|n| n.name.clone()),
        peak_op: peak.map(|n| n.op.name().to_string()),
        strategy: plan.placement.strategy.name().to_string(),
        // Microsecond resolution is all a timing is good for.
        planning_ms: (plan.planning_time.as_secs_f64() * 1e6).round() / 1e3,
        arena_buffers: live.buffers.len(),
        buffers,
        subgraphs,
        weights_storage: None,
        activations_storage: None,
        patches: plan.patches.clone(),
        winograd: crate::analysis::liveness::winograd::chosen_nodes(g, plan)
            .into_iter()
            .map(|id| g.node(id).name.clone())
            .collect(),
    }
}

impl PlanReport {
    /// Pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain structs of strings and numbers cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The human-readable report: the figures, then the per-buffer table.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let line =
            |label: &str, n: usize| format!("{label:<22}{:>16}  {}", grouped(n), human_bytes(n));
        let ratio = |n: usize| {
            if self.arena_bytes == 0 {
                String::new()
            } else {
                format!("  ({:.2}x arena)", n as f64 / self.arena_bytes as f64)
            }
        };
        let _ = writeln!(
            out,
            "graph \"{}\": {} steps, {} arena buffers, {}-byte alignment, {} thread{}{}",
            self.graph,
            self.steps,
            self.arena_buffers,
            self.align,
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            if self.keep_file_order {
                ", file order kept"
            } else {
                ""
            }
        );
        let _ = writeln!(out, "{}", line("arena", self.arena_bytes));
        let _ = writeln!(out, "{}", line("lower bound", self.lower_bound_bytes));
        let _ = writeln!(
            out,
            "{}{}",
            line("naive sum (no reuse)", self.naive_bytes),
            ratio(self.naive_bytes)
        );
        let _ = writeln!(
            out,
            "{}{}",
            line("layer-wise bound", self.layer_wise_bound_bytes),
            ratio(self.layer_wise_bound_bytes)
        );
        let _ = writeln!(
            out,
            "{:<22}{:>16.4}  (lower bound / arena)",
            "efficiency", self.efficiency
        );
        let _ = writeln!(
            out,
            "{}  in {} tensors",
            line("weights", self.weights_bytes),
            self.weight_tensors
        );
        if let Some(w) = &self.weights_storage {
            out.push_str(&w.to_text(20));
        }
        if let Some(a) = &self.activations_storage {
            out.push_str(&a.to_text(20));
        }
        if let Some(p) = &self.patches {
            let _ = writeln!(out, "{:<22}{}", "patches", p.describe(self.arena_bytes));
        }
        let peak = match (&self.peak_node, &self.peak_op) {
            (Some(n), Some(op)) => format!("step {}: '{n}' ({op})", self.peak_step),
            _ => format!("step {}", self.peak_step),
        };
        let _ = writeln!(out, "{:<22}{peak}", "peak");
        if !self.winograd.is_empty() {
            let _ = writeln!(
                out,
                "{:<22}{} conv{}: {}",
                "winograd",
                self.winograd.len(),
                if self.winograd.len() == 1 { "" } else { "s" },
                self.winograd.join(", ")
            );
        }
        let _ = writeln!(out, "{:<22}{}", "strategy", self.strategy);
        let _ = writeln!(out, "{:<22}{:.3} ms", "planning time", self.planning_ms);
        let _ = writeln!(out);
        let width = self
            .buffers
            .iter()
            .map(|b| b.name.chars().count())
            .max()
            .unwrap_or(0)
            .clamp(5, 48);
        let _ = writeln!(
            out,
            "{:<width$}  {:>14}  {:>14}  {:>6}  {:>6}  {:<12}  alias of",
            "value", "bytes", "offset", "first", "last", "kind"
        );
        for b in &self.buffers {
            let alias = match (&b.alias_of, b.offset_in_buffer) {
                (None, _) => "-".to_string(),
                (Some(a), 0) => a.clone(),
                (Some(a), at) => format!("{a} at +{}", grouped(at)),
            };
            let _ = writeln!(
                out,
                "{:<width$}  {:>14}  {:>14}  {:>6}  {:>6}  {:<12}  {}",
                b.name,
                grouped(b.bytes),
                grouped(b.offset),
                b.first_step,
                b.last_step,
                b.kind,
                alias
            );
        }
        for sub in &self.subgraphs {
            let _ = writeln!(
                out,
                "\n{} of node '{}' ({}): its own arena, in the node's scratch at offset {}",
                sub.role,
                sub.node,
                sub.op,
                grouped(sub.offset)
            );
            for line in sub.report.to_text().lines() {
                if line.is_empty() {
                    out.push('\n');
                } else {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
        out
    }
}
