//! Arbitrary bytes through decode + import + verify: must return Ok or a typed error, never
//! panic, abort or allocate without bound. Run with `cargo +nightly fuzz run import_bytes`.
#![no_main]

use arenac_compiler::import::{ImportOptions, decode_model, import_model};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(model) = decode_model(data.to_vec().into()) {
        if let Ok(imported) = import_model(&model, None, &ImportOptions::default()) {
            if let Err(e) = arenac_compiler::ir::verify::verify(&imported.graph) {
                panic!("verifier rejected an imported graph: {e}");
            }
        }
    }
});
