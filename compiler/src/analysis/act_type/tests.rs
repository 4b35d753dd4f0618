use super::*;
use crate::import::builder::Dim;
use crate::import::builder::ModelBuilder;
use crate::import::{ImportOptions, import_model};
use crate::ir::tensor::Tensor;

fn graph(dt: DType) -> Graph {
    let m = ModelBuilder::new("act", 18)
        .input("x", dt, &[Dim::N(2), Dim::N(3)])
        .node("t", "Transpose", &["x"], &["t"], vec![])
        .node("a", "Add", &["t", "t"], &["a"], vec![])
        .node("n", "Neg", &["a"], &["y"], vec![])
        .output("y", dt, &[])
        .build();
    import_model(&m, None, &ImportOptions::default())
        .expect("imports")
        .graph
}

#[test]
fn f32_is_a_no_op_and_f16_retypes_intermediates_only() {
    let mut g = graph(DType::F32);
    let before = crate::ir::print::print_graph(&g);
    assert_eq!(retype_activations(&mut g, ActType::F32).narrow_nodes, 0);
    assert_eq!(crate::ir::print::print_graph(&g), before);
    let r = retype_activations(&mut g, ActType::F16);
    crate::ir::verify::verify(&g).expect("valid");
    assert_eq!((r.narrow_nodes, r.casts), (3, 2), "{r:?}");
    assert!(r.kept.is_empty());
    // Inputs and outputs keep their names and types.
    let x = g.inputs[0];
    let y = g.outputs[0];
    assert_eq!(
        (g.value(x).name.as_str(), g.value(x).ty.dtype),
        ("x", DType::F32)
    );
    assert_eq!(
        (g.value(y).name.as_str(), g.value(y).ty.dtype),
        ("y", DType::F32)
    );
    let narrow = g
        .values()
        .iter()
        .filter(|v| v.ty.dtype == DType::F16)
        .count();
    assert_eq!(narrow, 4, "{}", crate::ir::print::print_graph(&g));
}

#[test]
fn an_f16_model_is_a_no_op_with_a_note() {
    let mut g = graph(DType::F16);
    let r = retype_activations(&mut g, ActType::Bf16);
    assert_eq!(r.narrow_nodes, 0);
    assert!(r.notes[0].contains("no f32 intermediates"), "{:?}", r.notes);
}

/// A node whose output is a graph output and larger than its input (a decoder's logits)
/// computes in f32 and writes the output directly: its narrow input is widened (8 floats)
/// instead of a narrow copy of the output (512 halves) living beside the f32 output. A
/// node whose input is the larger keeps the narrow path and the Cast at the end.
#[test]
fn a_large_graph_output_is_written_in_f32() {
    // Relu then MatMul by a constant `k x n`, retyped to f16: what produces the output.
    let producer = |k: usize, n: usize| {
        let w = Tensor::f32(vec![k, n], &vec![0.5; k * n]);
        let m = ModelBuilder::new("head", 18)
            .input("x", DType::F32, &[Dim::N(1), Dim::N(k)])
            .initializer("w", &w)
            .node("r", "Relu", &["x"], &["r"], vec![])
            .node("mm", "MatMul", &["r", "w"], &["y"], vec![])
            .output("y", DType::F32, &[])
            .build();
        let mut g = import_model(&m, None, &ImportOptions::default())
            .expect("imports")
            .graph;
        retype_activations(&mut g, ActType::F16);
        crate::ir::verify::verify(&g).expect("valid");
        let op = match g.value(g.outputs[0]).kind {
            ValueKind::Computed(p) => g.node(p).op.name(),
            _ => "none",
        };
        (op, crate::ir::print::print_graph(&g))
    };
    let (op, ir) = producer(8, 512);
    assert_eq!(op, "MatMul", "{ir}");
    // The other way round (8 outputs from 512 inputs): the product narrows, a Cast widens.
    let (op, ir) = producer(512, 8);
    assert_eq!(op, "Cast", "{ir}");
}
