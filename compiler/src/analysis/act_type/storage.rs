//! The activations part of the summary and plan report (JSON field `activations_storage`,
//! docs/PLAN-REPORT.md): the arena against the f32 plan of the same graph, and the nodes
//! kept in f32.

use std::fmt::Write as _;

use super::ActReport;

/// Present when `--activations f16|bf16` was asked for.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ActivationsStorage {
    /// `f16` or `bf16`.
    pub activations: String,
    /// The arena as planned with narrow intermediates.
    pub arena_bytes: usize,
    /// The arena the same graph plans with f32 intermediates.
    pub arena_f32_bytes: usize,
    /// `arena_f32_bytes - arena_bytes` (0 when not smaller).
    pub saving_bytes: usize,
    /// `arena_bytes / arena_f32_bytes`.
    pub ratio: f64,
    /// Nodes computing on narrow data.
    pub narrow_nodes: usize,
    /// Of those, nodes run by a staged 16-bit kernel.
    pub staged_nodes: usize,
    /// Cast nodes added (graph inputs/outputs, around nodes kept in f32).
    pub casts: usize,
    /// Nodes kept in f32 (no 16-bit path), in order.
    pub kept_f32: Vec<KeptNode>,
    /// Notes (e.g. an f16 model: nothing to retype).
    pub notes: Vec<String>,
    /// Graph inputs (declared f32, passed as f32) whose arena slot holds the narrow form,
    /// rounded on copy-in: their Cast dropped. In graph-input order.
    #[serde(default)]
    pub narrowed_inputs: Vec<String>,
}

/// One node of [`ActivationsStorage::kept_f32`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeptNode {
    /// Node name.
    pub node: String,
    /// Op type.
    pub op: String,
}

impl ActivationsStorage {
    /// The entry for report `r` of a plan of `arena_bytes`, the f32 plan being
    /// `arena_f32_bytes`; `None` for f32 activations.
    pub fn new(r: &ActReport, arena_bytes: usize, arena_f32_bytes: usize) -> Option<Self> {
        if r.act == super::ActType::F32 {
            return None;
        }
        Some(ActivationsStorage {
            activations: r.act.name().to_string(),
            arena_bytes,
            arena_f32_bytes,
            saving_bytes: arena_f32_bytes.saturating_sub(arena_bytes),
            ratio: if arena_f32_bytes == 0 {
                1.0
            } else {
                arena_bytes as f64 / arena_f32_bytes as f64
            },
            narrow_nodes: r.narrow_nodes,
            staged_nodes: r.staged_nodes,
            casts: r.casts,
            kept_f32: r
                .kept
                .iter()
                .map(|(node, op)| KeptNode {
                    node: node.clone(),
                    op: op.clone(),
                })
                .collect(),
            notes: r.notes.clone(),
            narrowed_inputs: r.narrowed_inputs.clone(),
        })
    }

    /// Text lines for the summary and the plan report, listing at most `list` kept nodes.
    pub fn to_text(&self, list: usize) -> String {
        let h = crate::arena::human_bytes;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "activations: {}: arena {} vs {} with f32 ({:.2}x, saving {}); {} nodes on {} data \
             ({} staged), {} casts",
            self.activations,
            h(self.arena_bytes),
            h(self.arena_f32_bytes),
            self.ratio,
            h(self.saving_bytes),
            self.narrow_nodes,
            self.activations,
            self.staged_nodes,
            self.casts
        );
        if !self.narrowed_inputs.is_empty() {
            let _ = writeln!(
                out,
                "input{} stored in {} (f32 rounded on copy-in, no Cast): {}",
                if self.narrowed_inputs.len() == 1 {
                    ""
                } else {
                    "s"
                },
                self.activations,
                self.narrowed_inputs.join(", ")
            );
        }
        if !self.kept_f32.is_empty() {
            let _ = writeln!(
                out,
                "kept in f32 (no {} path): {} node{}",
                self.activations,
                self.kept_f32.len(),
                if self.kept_f32.len() == 1 { "" } else { "s" }
            );
            for k in self.kept_f32.iter().take(list) {
                let _ = writeln!(out, "  {} ({})", k.node, k.op);
            }
            if self.kept_f32.len() > list {
                let _ = writeln!(out, "  ... {} more", self.kept_f32.len() - list);
            }
        }
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out
    }
}
