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

/// With `narrow_inputs` the input read only in its narrow form becomes narrow itself: no Cast
/// reads it, it keeps its name, it is listed, and every other value is as without.
#[test]
fn an_input_read_only_narrow_is_stored_narrow() {
    let mut plain = graph(DType::F32);
    let r0 = retype_activations(&mut plain, ActType::F16);
    let mut g = graph(DType::F32);
    let r = retype_activations_with(&mut g, ActType::F16, true);
    crate::ir::verify::verify(&g).expect("valid");
    assert_eq!(r.narrowed_inputs, vec!["x".to_string()]);
    assert!(r0.narrowed_inputs.is_empty());
    assert_eq!((r.casts, r.narrow_nodes), (r0.casts - 1, r0.narrow_nodes));
    let x = g.inputs[0];
    assert_eq!(
        (g.value(x).name.as_str(), g.value(x).ty.dtype),
        ("x", DType::F16)
    );
    assert!(
        g.consumers(x)
            .iter()
            .all(|&c| !matches!(g.node(c).op, Op::Cast { .. })),
        "{}",
        crate::ir::print::print_graph(&g)
    );
    assert_eq!(g.value(g.outputs[0]).ty.dtype, DType::F32);
    assert_eq!(g.node_count() + 1, plain.node_count());
}

/// An input a node kept in f32 reads (Pow: no 16-bit path) keeps its type and its Cast.
#[test]
fn an_input_read_in_f32_keeps_its_type() {
    let two = Tensor::f32(vec![1], &[2.0]);
    let m = ModelBuilder::new("kept", 18)
        .input("x", DType::F32, &[Dim::N(2), Dim::N(3)])
        .initializer("two", &two)
        .node("r", "Relu", &["x"], &["r"], vec![])
        .node("p", "Pow", &["x", "two"], &["p"], vec![])
        .node("a", "Add", &["r", "p"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let mut g = import_model(&m, None, &ImportOptions::default())
        .expect("imports")
        .graph;
    let r = retype_activations_with(&mut g, ActType::Bf16, true);
    assert!(r.narrowed_inputs.is_empty(), "{r:?}");
    assert_eq!(g.value(g.inputs[0]).ty.dtype, DType::F32);
    assert_eq!(r.kept.len(), 1, "{r:?}");
}
