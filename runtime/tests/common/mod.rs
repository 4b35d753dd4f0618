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

/// Compiles the digits model (import, plan, code generation) with `N` bound.
pub fn digits(n: usize) -> Model {
    let opts = CompileOptions::default().with_shape("N", vec![n]);
    compile_file(&repo("models/digits/digits.onnx"), &opts)
        .unwrap_or_else(|e| panic!("digits does not compile: {e}"))
}

/// Runs the `arenac` binary: (exit code, stdout, stderr).
pub fn arenac(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_arenac"))
        .args(args)
        .output()
        .expect("run arenac");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
