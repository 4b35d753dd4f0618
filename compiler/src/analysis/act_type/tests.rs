use super::*;
use crate::import::builder::Dim;
use crate::import::builder::ModelBuilder;
use crate::import::{ImportOptions, import_model};

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
