//! Structure-aware random valid graphs through import, the IR verifier and arena planning with
//! random options (file order or schedule, each liveness option, alignments), each plan checked
//! independently (`plan::verify`, lower bound, every value's buffer); and random interval sets
//! through every placement strategy. Run with
//! `cargo +nightly fuzz run graph_plan fuzz/corpus/graph_plan`; replayed on stable by
//! `tests/fuzz_replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| arenac_tests::fuzzing::fuzz_graph_plan(data));
