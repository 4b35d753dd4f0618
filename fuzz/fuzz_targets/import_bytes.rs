//! Arbitrary bytes through decode + import + IR verifier + arena planning (with its plan
//! verifier): must return Ok or a typed error, never panic, abort or allocate without bound.
//! Run with `cargo +nightly fuzz run import_bytes fuzz/corpus/import_bytes`; the corpus is
//! replayed on stable by `tests/fuzz_replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| arenac_tests::fuzz_import_bytes(data));
