//! Fuzzing support shared by the cargo-fuzz targets (`fuzz/`) and their corpus replay on
//! stable (`fuzz_replay.rs`): a byte stream read as choices ([`source`]), a generator of random
//! valid graphs ([`graph_gen`]), and the bodies of the `graph_plan` ([`plan_check`]) and
//! `jit_diff` ([`jit_diff`]) targets.

pub mod graph_gen;
pub mod jit_diff;
pub mod plan_check;
pub mod source;

pub use jit_diff::fuzz_jit_diff;
pub use plan_check::fuzz_graph_plan;
