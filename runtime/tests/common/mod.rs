//! Helpers shared by the runtime tests.
#![allow(dead_code)]

use std::path::PathBuf;

use arenac::{CompileOptions, Model, compile_file};

/// A file under the repository root.
pub fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
}

/// True when `e` is the placeholder code generator's "no kernel yet" error.
pub fn is_codegen_missing(e: &impl std::fmt::Display) -> bool {
    e.to_string().contains("no kernel yet")
}

/// Compiles the digits model with `N` bound; `None` (after printing "skipped: codegen not
/// available") while code generation has not landed.
pub fn digits(n: usize) -> Option<Model> {
    let opts = CompileOptions::default().with_shape("N", vec![n]);
    match compile_file(&repo("models/digits/digits.onnx"), &opts) {
        Ok(m) => Some(m),
        Err(e) if is_codegen_missing(&e) => {
            println!("skipped: codegen not available ({e})");
            None
        }
        Err(e) => panic!("digits does not compile: {e}"),
    }
}
