//! The report of a patched stage ([`PatchInfo`]): what `arenac plan` prints (text, and the
//! JSON field `patches`) and the runtime's summary carries.

/// The patched stage of a plan, for reports (`arenac plan`: text and the JSON field
/// `patches`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PatchInfo {
    /// The stage's first step in the schedule it was found in: 0 for a prefix.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub start: usize,
    /// Nodes in the stage (before the rewrite).
    pub stage_nodes: usize,
    /// The stage output's name.
    pub output: String,
    /// The other values leaving the stage, written whole patch by patch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaving: Vec<String>,
    /// Patches per side.
    pub grid: usize,
    /// Patches per row of the grid (1: strips of whole rows); 0 in reports written before it
    /// existed (square grids).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub columns: usize,
    /// Halo rows cached between vertically adjacent patches (only the columns' halos
    /// recomputed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// Passes over the grid: 1, or one more than the global pools in the stage (each pool's
    /// map computed patch by patch, summed per cell, then computed again).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub passes: usize,
    /// The checkpoints written whole between passes (instead of recomputing before them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<String>,
    /// The arena without patches.
    pub unpatched_bytes: usize,
    /// The peak [`super::analyze`] predicted with patches.
    pub predicted_bytes: usize,
    /// FLOPs recomputed in the halos.
    pub extra_flops: u64,
    /// FLOPs of the whole graph, unpatched.
    pub total_flops: u64,
    /// The stages found after this one was rewritten, in the order they were taken (each a
    /// later segment of the rewritten graph's schedule).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub later: Vec<PatchInfo>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

impl PatchInfo {
    /// One line: the stage, the grid, the arena `arena_bytes` against the unpatched one, the
    /// recomputed FLOPs.
    pub fn describe(&self, arena_bytes: usize) -> String {
        let also = match self.leaving.len() {
            0 => String::new(),
            k => format!(
                " (and {k} more value{} leaving it)",
                if k == 1 { "" } else { "s" }
            ),
        };
        let passes = match self.passes {
            0 | 1 => String::new(),
            k => format!(
                " in {k} passes ({} global pool{} averaged cell by cell{})",
                k - 1,
                if k == 2 { "" } else { "s" },
                match self.checkpoints.len() {
                    0 => String::new(),
                    c => format!(
                        ", {c} checkpoint{} written whole",
                        if c == 1 { "" } else { "s" }
                    ),
                }
            ),
        };
        let what = if self.passes > 1 {
            "the halos and passes"
        } else if self.cached {
            "the columns' halos (rows cached)"
        } else {
            "the halos"
        };
        let from = match self.start {
            0 => String::new(),
            s => format!(" from step {s}"),
        };
        let later: String = self
            .later
            .iter()
            .map(|l| {
                format!(
                    "; then a stage of {} nodes from step {} up to '{}' as {}x{} patches \
                     (+{:.1}% FLOPs)",
                    l.stage_nodes,
                    l.start,
                    l.output,
                    l.grid,
                    if l.columns == 0 { l.grid } else { l.columns },
                    100.0 * l.extra_flops as f64 / l.total_flops.max(1) as f64
                )
            })
            .collect();
        format!(
            "stage of {} nodes{from} up to '{}'{also} run as {}x{} patches{passes}; arena without \
             patches {} ({:.2}x of it now), {what} recompute {:.1}% of the model's FLOPs{later}",
            self.stage_nodes,
            self.output,
            self.grid,
            if self.columns == 0 {
                self.grid
            } else {
                self.columns
            },
            crate::error::budget::human_bytes(self.unpatched_bytes),
            arena_bytes as f64 / self.unpatched_bytes.max(1) as f64,
            100.0 * self.extra_flops as f64 / self.total_flops.max(1) as f64
        )
    }
}
