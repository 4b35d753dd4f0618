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

/// `y = Gather(table [6, 2], ids [3])`, both run-time inputs (the node is named `embed`),
/// compiled: its kernel checks the indices at run time.
pub fn lookup_model() -> Model {
    use arenac::DType;
    use arenac_compiler::import::builder::{Dim, ModelBuilder};
    use prost::Message;
    let m = ModelBuilder::new("lookup", 13)
        .input("table", DType::F32, &[Dim::N(6), Dim::N(2)])
        .input("ids", DType::I64, &[Dim::N(3)])
        .output("y", DType::F32, &[])
        .node("embed", "Gather", &["table", "ids"], &["y"], vec![])
        .build();
    let dir = std::env::temp_dir().join(format!("arenac-lookup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let path = dir.join("lookup.onnx");
    std::fs::write(&path, m.encode_to_vec()).expect("write the model");
    let model = compile_file(&path, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("lookup does not compile: {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    model
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
