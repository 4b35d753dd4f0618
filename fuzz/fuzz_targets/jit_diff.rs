//! Random small f32 graphs compiled by the JIT and run in an arena, against the reference
//! evaluation (rtol 1e-3, atol 1e-4 of the output's magnitude). A typed compile error is fine;
//! a panic, a crash or a mismatch is a finding. Run with
//! `cargo +nightly fuzz run jit_diff fuzz/corpus/jit_diff`; replayed on stable by
//! `tests/fuzz_replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    arenac_tests::fuzzing::fuzz_jit_diff(data);
});
