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

/// Compiles `g` once (through `plan_graph`, as the library does: fusion inside the branches
/// too) and checks every input set against the reference evaluation.
fn check_each(g: &Graph, cases: &[Vec<Tensor>]) -> Executable {
    let mut g = g.clone();
    let plan = arenac_compiler::arena::plan_graph(&mut g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
    for (c, inputs) in cases.iter().enumerate() {
        let got = run(&exe, inputs);
        let want = eval_graph(&g, inputs).expect("reference");
        assert_eq!(got.len(), want.len());
        for (o, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_eq!(a.shape(), b.shape(), "case {c} output {o} shape");
            for (i, (x, y)) in a.to_f32_vec().iter().zip(b.to_f32_vec()).enumerate() {
                assert!(
                    (x - y).abs() <= ATOL + RTOL * y.abs(),
                    "case {c} output {o} element {i}: got {x}, want {y}"
                );
            }
        }
    }
    exe
}

fn flag(b: bool) -> Tensor {
    Tensor::from_i64(DType::Bool, vec![], &[i64::from(b)])
}

#[test]
fn runtime_if_takes_each_branch() {
    let m = parse(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (bool c, float[2, 3] X) => (float[2, 3] Y, float[2, 3] Z)
        <float[3] W = {1, -2, 3}>
        {
            Y = If(c) <then_branch = t () => (float[2, 3] a) {
                s = Add(X, W)
                a = Relu(s)
            }, else_branch = e () => (float[2, 3] b) {
                m = Mul(X, W)
                b = Tanh(m)
            }>
            Z = Sub(Y, X)
        }"#,
    );
    let g = import(&m);
    assert!(g.nodes().any(|(_, n)| n.op.name() == "If"));
    let x = Rng(3).tensor(&[2, 3], -2.0, 2.0);
    let exe = check_each(
        &g,
        &[vec![flag(true), x.clone()], vec![flag(false), x.clone()]],
    );
    // The two branches really differ on this input.
    let (t, e) = (
        run(&exe, &[flag(true), x.clone()]),
        run(&exe, &[flag(false), x]),
    );
    assert_ne!(t[0].to_f32_vec(), e[0].to_f32_vec());
}

#[test]
fn nested_runtime_ifs_with_captured_values() {
    let m = parse(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (bool c, bool d, float[4] X, float[4] V) => (float[4] Y, float[2] K)
        {
            Y, K = If(c) <then_branch = t () => (float[4] a, float[2] k1) {
                a = Identity(X)
                k1 = Constant <value = float[2] {1, 2}> ()
            }, else_branch = e () => (float[4] b, float[2] k2) {
                w = Add(X, V)
                b = If(d) <then_branch = t2 () => (float[4] p) {
                    p = Mul(w, V)
                }, else_branch = e2 () => (float[4] q) {
                    q = Sigmoid(X)
                }>
                k2 = Constant <value = float[2] {3, 4}> ()
            }>
        }"#,
    );
    let g = import(&m);
    let mut rng = Rng(11);
    let (x, v) = (rng.tensor(&[4], -1.0, 1.0), rng.tensor(&[4], -1.0, 1.0));
    let cases: Vec<Vec<Tensor>> = [(true, true), (true, false), (false, true), (false, false)]
        .iter()
        .map(|&(c, d)| vec![flag(c), flag(d), x.clone(), v.clone()])
        .collect();
    check_each(&g, &cases);
}

#[test]
fn if_scratch_holds_the_larger_branch() {
    // The then branch needs a large intermediate; the else branch almost nothing.
    let m = parse(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (bool c, float[1, 64] X) => (float[1, 64] Y)
        <int64[2] sa = {64, 256}, int64[2] sb = {256, 64}>
        {
            A = ConstantOfShape <value = float[1] {0.5}> (sa)
            B = ConstantOfShape <value = float[1] {0.25}> (sb)
            Y = If(c) <then_branch = t () => (float[1, 64] a) {
                h = MatMul(X, A)
                r = Relu(h)
                a = MatMul(r, B)
            }, else_branch = e () => (float[1, 64] b) {
                b = Neg(X)
            }>
        }"#,
    );
    let mut g = import(&m);
    let plan = arenac_compiler::arena::plan_graph(&mut g, &PlanOptions::default()).expect("plans");
    let (&id, subs) = plan
        .sub_plans
        .iter()
        .next()
        .expect("the If's branches are planned");
    assert_eq!(subs.len(), 2);
    let larger = subs[0].arena_bytes.max(subs[1].arena_bytes);
    assert!(subs[0].arena_bytes > subs[1].arena_bytes, "then needs more");
    let scratch = plan
        .liveness
        .buffers
        .iter()
        .find(|b| b.node == Some(id))
        .expect("the If has a scratch buffer");
    assert_eq!(scratch.interval.size, larger);
    assert!(plan.arena_bytes >= larger);
    let x = Rng(5).tensor(&[1, 64], -1.0, 1.0);
    check_each(&g, &[vec![flag(true), x.clone()], vec![flag(false), x]]);
}
