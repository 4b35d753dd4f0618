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

/// A small CNN-and-attention-style model written to a temporary file: a 3x3 Conv + Relu over
/// a 32x32 plane, MaxPool, a depthwise Conv, a Softmax over rows and a Gemm — every parallel
/// kernel family, large enough to go parallel. Input `x` f32[1,16,32,32], output `y`.
pub fn parallel_model() -> tempfile::NamedTempFile {
    use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
    use arenac_compiler::ir::tensor::Tensor;
    use arenac_compiler::ir::types::DType;
    use prost::Message;
    let seq =
        |n: usize, k: f32| -> Vec<f32> { (0..n).map(|i| ((i % 13) as f32 - 6.0) * k).collect() };
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let d = |v: &[usize]| v.iter().map(|&x| Dim::N(x)).collect::<Vec<_>>();
    let m = ModelBuilder::new("parallel", 13)
        .input("x", DType::F32, &d(&[1, 16, 32, 32]))
        .output("y", DType::F32, &[])
        .initializer(
            "w1",
            &Tensor::f32(vec![32, 16, 3, 3], &seq(32 * 16 * 9, 0.01)),
        )
        .initializer("w2", &Tensor::f32(vec![32, 1, 3, 3], &seq(32 * 9, 0.05)))
        .initializer("shape", &Tensor::i64(vec![2], &[32, 256]))
        .initializer("w3", &Tensor::f32(vec![256, 300], &seq(256 * 300, 0.002)))
        .node(
            "c1",
            "Conv",
            &["x", "w1"],
            &["c1"],
            vec![("pads", ints(&[1, 1, 1, 1]))],
        )
        .node("r1", "Relu", &["c1"], &["r1"], vec![])
        .node(
            "p1",
            "MaxPool",
            &["r1"],
            &["p1"],
            vec![("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
        )
        .node(
            "c2",
            "Conv",
            &["p1", "w2"],
            &["c2"],
            vec![("group", Attr::Int(32)), ("pads", ints(&[1, 1, 1, 1]))],
        )
        .node("f", "Reshape", &["c2", "shape"], &["f"], vec![])
        .node(
            "sm",
            "Softmax",
            &["f"],
            &["s"],
            vec![("axis", Attr::Int(-1))],
        )
        .node("g", "MatMul", &["s", "w3"], &["y"], vec![])
        .build();
    let mut file = tempfile::Builder::new()
        .suffix(".onnx")
        .tempfile()
        .expect("temp file");
    std::io::Write::write_all(&mut file, &m.encode_to_vec()).expect("write model");
    file
}
