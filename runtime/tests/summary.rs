//! `Model::summary` counts what a model really holds.

use arenac::{CompileOptions, compile_file};
use arenac_compiler::import::builder::{Dim, ModelBuilder};
use arenac_compiler::ir::tensor::Tensor;
use arenac_compiler::ir::types::DType;
use prost::Message;

#[test]
fn shared_weights_count_once_and_intermediates_sum() {
    // `w` is read directly and through a folded Identity: one buffer of 4 x 4 bytes.
    let m = ModelBuilder::new("g", 13)
        .input("x", DType::F32, &[Dim::N(4)])
        .initializer("w", &Tensor::f32(vec![4], &[1.0, 2.0, 3.0, 4.0]))
        .node("id", "Identity", &["w"], &["w_alias"], vec![])
        .node("a", "Add", &["x", "w"], &["y"], vec![])
        .node("b", "Mul", &["y", "w_alias"], &["z"], vec![])
        .output("z", DType::F32, &[])
        .build();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    // Unfused: the Add and the Mul would otherwise become one node with no intermediate.
    let opts = CompileOptions {
        fuse: false,
        ..CompileOptions::default()
    };
    let s = compile_file(&path, &opts.without_codegen())
        .unwrap()
        .summary();
    assert_eq!(s.nodes, 2);
    assert_eq!(s.weight_tensors, 2);
    assert_eq!(s.weights_bytes, 16);
    assert_eq!(s.naive_intermediate_bytes, 32);
}
