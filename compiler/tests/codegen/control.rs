//! Control flow (If, Loop, Scan; compiler/src/import/control): import rules checked on the
//! graph they produce, and the JIT against the reference evaluation, each branch taken by a
//! different input of one compiled model.

use std::collections::HashMap;

use arenac_compiler::import::text::parse_model_text;

use crate::common::*;

fn parse(src: &str) -> ModelProto {
    parse_model_text(src).unwrap_or_else(|e| panic!("parses: {e}"))
}

/// An If on a scalar setting input whose branches produce different lengths: the condition
/// decides a shape, so a given value freezes the input and the taken branch is inlined.
const RESAMPLE: &str = r#"<ir_version: 8, opset_import: ["" : 17]>
resample (int64 sr, float[1, 8] x) => (float[1, N] y)
<int64 rate = {16000}, int64[1] s0 = {0}, int64[1] s4 = {4}, int64[1] ax = {1}>
{
    c = Equal(sr, rate)
    y = If(c) <then_branch = keep () => (float[1, 8] a) {
        a = Relu(x)
    }, else_branch = half () => (float[1, 4] b) {
        b = Slice(x, s0, s4, ax)
    }>
}"#;

#[test]
fn shape_deciding_condition_freezes_the_input_and_inlines_the_branch() {
    let m = parse(RESAMPLE);
    for (sr, len, op) in [(16000i64, 8usize, "Relu"), (8000, 4, "Slice")] {
        let opts = ImportOptions {
            values: HashMap::from([("sr".to_string(), Tensor::i64(vec![], &[sr]))]),
            ..ImportOptions::default()
        };
        let imported = import_model(&m, None, &opts).expect("imports");
        assert_eq!(imported.frozen.len(), 1, "sr is frozen");
        assert_eq!(imported.frozen[0].0, "sr");
        let g = &imported.graph;
        assert_eq!(g.inputs.len(), 1, "only x stays an input");
        let y = g.outputs[0];
        assert_eq!(g.value(y).ty.shape, vec![1, len]);
        let ops: Vec<&str> = g.nodes().map(|(_, n)| n.op.name()).collect();
        assert!(ops.contains(&op), "{sr}: {ops:?}");
        let x = Rng(7).tensor(&[1, 8], -1.0, 1.0);
        check_graph(g, &[x], RTOL, ATOL);
    }
    // Without a value, the condition is reported as a shape operand.
    let err = import_model(&m, None, &ImportOptions::default()).expect_err("needs sr");
    let msg = err.to_string();
    assert!(msg.contains("'c'") && msg.contains("If"), "{msg}");
}
