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
        assert_eq!(imported.frozen[0].name, "sr");
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

fn fixture(name: &str) -> Graph {
    let path = repo_root().join(format!("tests/fixtures/control/{name}.onnxtxt"));
    let src = std::fs::read_to_string(&path).expect("reads the fixture");
    import(&parse(&src))
}

#[test]
fn counted_loop_with_iteration_number_and_scan_output() {
    let g = fixture("loop_counted");
    let mut rng = Rng(21);
    let cases: Vec<Vec<Tensor>> = (0..3)
        .map(|_| vec![rng.tensor(&[3], -1.0, 1.0), rng.tensor(&[3], -1.0, 1.0)])
        .collect();
    check_each(&g, &cases);
}

#[test]
fn loop_stops_early_when_the_body_says_so() {
    let g = fixture("loop_early_exit");
    // Doubling from x reaches 10 after a number of steps that depends on x; a false initial
    // condition runs no iteration at all.
    let cases: Vec<Vec<Tensor>> = [(0.3f32, true), (4.0, true), (20.0, true), (1.0, false)]
        .iter()
        .map(|&(x, go)| vec![Tensor::f32(vec![1], &[x]), flag(go)])
        .collect();
    let exe = check_each(&g, &cases);
    let n = |x: f32| run(&exe, &[Tensor::f32(vec![1], &[x]), flag(true)])[1].to_i64_vec();
    assert_eq!(n(0.3), vec![6], "0.3 doubles 6 times to pass 10");
    assert_eq!(n(20.0), vec![1]);
}

#[test]
fn scan_with_axes_and_directions() {
    let g = fixture("scan");
    let mut rng = Rng(8);
    let cases: Vec<Vec<Tensor>> = (0..2)
        .map(|_| {
            vec![
                rng.tensor(&[2], -1.0, 1.0),
                rng.tensor(&[2, 5], -1.0, 1.0),
                rng.tensor(&[5, 2], -1.0, 1.0),
            ]
        })
        .collect();
    check_each(&g, &cases);
}

#[test]
fn swapped_carried_values_and_zero_trips() {
    // Each iteration swaps a and b and adds the iteration number to the new a: the next b is
    // the incoming a itself, which the copy-back of the next a must not overwrite first.
    let src = |m: i64| {
        format!(
            r#"<ir_version: 8, opset_import: ["" : 17]>
            g (float[2] A, float[2] B) => (float[2] a, float[2] b)
            <int64 M = {{{m}}}>
            {{
                a, b = Loop(M, , A, B) <body = step (int64 i, bool c, float[2] x, float[2] y) => (bool co, float[2] xo, float[2] yo) {{
                    co = Identity(c)
                    f = Cast <to = 1> (i)
                    xo = Add(y, f)
                    yo = Identity(x)
                }}>
            }}"#
        )
    };
    let mut rng = Rng(4);
    let (a, b) = (rng.tensor(&[2], -1.0, 1.0), rng.tensor(&[2], -1.0, 1.0));
    for m in [0, 1, 5] {
        let g = import(&parse(&src(m)));
        check_each(&g, &[vec![a.clone(), b.clone()]]);
    }
}

#[test]
fn nested_loops_and_an_if_inside_a_loop() {
    // The outer loop scans the rows of X; the inner loop sums a row's elements (scan input of
    // the inner Scan is a value of the outer body); an If inside picks by the row's sign.
    let m = parse(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[3, 4] X, float s0) => (float S, float[3] R)
        <float zero = {0}>
        {
            S, R = Scan(s0, X) <num_scan_inputs = 1, body = rows (float s, float[4] row) => (float so, float r) {
                t = Scan(zero, row) <num_scan_inputs = 1, body = elems (float a, float e) => (float ao) {
                    ao = Add(a, e)
                }>
                pos = Greater(t, zero)
                r = If(pos) <then_branch = p () => (float u) {
                    u = Mul(t, t)
                }, else_branch = q () => (float v) {
                    v = Neg(t)
                }>
                so = Add(s, r)
            }>
        }"#,
    );
    let g = import(&m);
    let mut rng = Rng(33);
    let cases: Vec<Vec<Tensor>> = (0..3)
        .map(|_| vec![rng.tensor(&[3, 4], -1.0, 1.0), Tensor::f32(vec![], &[0.5])])
        .collect();
    check_each(&g, &cases);
}

#[test]
fn slice_moving_with_the_iteration_number() {
    let g = fixture("loop_moving_slice");
    let mut rng = Rng(17);
    let cases: Vec<Vec<Tensor>> = (0..2)
        .map(|_| vec![rng.tensor(&[3, 6], -1.0, 1.0)])
        .collect();
    let exe = check_each(&g, &cases);
    // Iteration i reads columns i and i + 1 of the first two rows.
    let x: Vec<f32> = (0..18).map(|v| v as f32).collect();
    let out = run(&exe, &[Tensor::f32(vec![3, 6], &x)]);
    let t = out[1].to_f32_vec();
    assert_eq!(&t[..4], &[0.0, 1.0, 6.0, 7.0]);
    assert_eq!(&t[16..], &[4.0, 5.0, 10.0, 11.0]);
}

#[test]
fn long_loop_over_constants_is_not_folded() {
    // All inputs are constants, but 70,000 iterations are more than import folds
    // (MAX_FOLDED_TRIPS): the loop runs in the generated code, reading its initial value
    // from the weights.
    let m = parse(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float x) => (float s, float y)
        <int64 M = {70000}, float[2] init = {0, 1}, float[2] step = {0.5, -0.25}>
        {
            s2 = Loop(M, , init) <body = b (int64 i, bool c, float[2] a) => (bool co, float[2] ao) {
                co = Identity(c)
                ao = Add(a, step)
            }>
            s = ReduceSum <keepdims = 0> (s2)
            y = Mul(x, s)
        }"#,
    );
    let g = import(&m);
    assert!(g.nodes().any(|(_, n)| n.op.name() == "Loop"), "not folded");
    let exe = check_each(&g, &[vec![Tensor::f32(vec![], &[2.0])]]);
    let out = run(&exe, &[Tensor::f32(vec![], &[2.0])]);
    // 70000 * (0.5 - 0.25) + 1, exact in f32.
    assert_eq!(out[0].to_f32_vec(), vec![17501.0]);
}

/// Checks `plan` and its subgraph plans (recursively) with the independent verifier, each
/// subgraph arena inside its node's scratch; returns the buffers of every plan.
fn verify_nested(g: &Graph, plan: &arenac_compiler::arena::ArenaPlan) -> usize {
    use arenac_compiler::plan::verify::verify_placement;
    let intervals = plan.liveness.intervals();
    verify_placement(&intervals, &plan.placement, plan.options.align).expect("verified");
    let mut buffers = plan.liveness.buffers.len();
    for (&id, subs) in &plan.sub_plans {
        let scratch = plan
            .liveness
            .buffers
            .iter()
            .find(|b| b.node == Some(id))
            .map_or(0, |b| b.interval.size);
        for ((_, sg), sp) in g.node(id).op.subgraphs().into_iter().zip(subs) {
            assert!(
                sp.arena_bytes <= scratch,
                "sub-arena inside the node's scratch"
            );
            buffers += verify_nested(sg, sp);
        }
    }
    buffers
}

#[test]
fn nested_plans_verify_and_report() {
    use arenac_compiler::arena::report::build_report;
    use arenac_compiler::arena::svg::render_svg;
    use arenac_compiler::ops::Op;
    let mut g = fixture("loop_counted");
    let plan = arenac_compiler::arena::plan_graph(&mut g, &PlanOptions::default()).expect("plans");
    let buffers = verify_nested(&g, &plan);
    // The loop's carried input lives through the whole body (the copy-back writes it last).
    let (&id, subs) = plan.sub_plans.iter().next().expect("a loop");
    let Op::Loop(a) = &g.node(id).op else {
        panic!("a Loop node")
    };
    let body_plan = &subs[0];
    let carried = a.body.inputs[a.first_carried_input()];
    let b = body_plan.liveness.value_buffer[&carried];
    assert_eq!(
        body_plan.liveness.buffers[b].interval.end,
        body_plan.schedule.len()
    );
    // The report nests the body's; the picture draws every plan's buffers.
    let report = build_report(&g, &plan);
    assert_eq!(report.subgraphs.len(), 1);
    assert_eq!(report.subgraphs[0].role, "body");
    assert!(report.to_json().contains("\"subgraphs\""));
    let svg = render_svg(&g, &plan);
    assert_eq!(svg.matches("<rect").count(), buffers);
    // Nested: an If inside a Scan inside a Scan.
    let m = parse(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3] X, bool c) => (float[2, 3] Y)
        {
            Y = Scan(X) <num_scan_inputs = 1, body = rows (float[3] r) => (float[3] o) {
                o = If(c) <then_branch = t () => (float[3] p) { p = Relu(r) },
                           else_branch = e () => (float[3] q) { q = Neg(r) }>
            }>
        }"#,
    );
    let mut g = import(&m);
    let plan = arenac_compiler::arena::plan_graph(&mut g, &PlanOptions::default()).expect("plans");
    assert!(verify_nested(&g, &plan) >= 4);
    let x = Rng(2).tensor(&[2, 3], -1.0, 1.0);
    check_each(&g, &[vec![x.clone(), flag(true)], vec![x, flag(false)]]);
}

/// An If whose else-branch cannot be imported with these shapes (a MatMul of [1, 4] by
/// [3, 4]: silero-vad's branch for the other sample rate): the import warns and freezes
/// nothing, a run whose condition takes the then-branch computes it, and a run taking the
/// else-branch reports a fault naming the node and the branch; the arena serves the next run.
#[test]
fn if_branch_that_cannot_run_faults_only_when_taken() {
    let path = repo_root().join("tests/fixtures/control/if_unrunnable_branch.onnxtxt");
    let m = parse(&std::fs::read_to_string(&path).expect("reads the fixture"));
    let imported = import_model(&m, None, &ImportOptions::default()).expect("imports");
    assert!(imported.frozen.is_empty());
    assert_eq!(imported.warnings.len(), 1, "{:?}", imported.warnings);
    let w = &imported.warnings[0];
    assert!(
        w.contains("(If)") && w.contains("else_branch") && w.contains("MatMul"),
        "{w}"
    );
    let mut g = imported.graph;
    let plan = arenac_compiler::arena::plan_graph(&mut g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
    let sr = |v: i64| Tensor::i64(vec![1], &[v]);
    let x = Rng(11).tensor(&[1, 4], -1.0, 1.0);
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    let good = |arena: &mut AlignedBytes| {
        let inputs = [sr(16000), x.clone()];
        let got = run_in(&exe, arena, &inputs).unwrap_or_else(|f| panic!("faulted: {f}"));
        let relu: Vec<f32> = x.to_f32_vec().iter().map(|v| v.max(0.0)).collect();
        assert_eq!(got[0].to_f32_vec(), relu);
        assert_eq!(
            eval_graph(&g, &inputs).expect("reference")[0].to_f32_vec(),
            relu
        );
    };
    good(&mut arena);
    let e = run_in(&exe, &mut arena, &[sr(8000), x.clone()]).expect_err("else faults");
    assert!(
        e.starts_with("node '") && e.contains("(If): the condition chose the else_branch"),
        "{e}"
    );
    assert!(e.contains("MatMul"), "{e}");
    let eval = eval_graph(&g, &[sr(8000), x.clone()]).expect_err("the reference refuses too");
    assert!(eval.to_string().contains("else_branch"), "{eval}");
    good(&mut arena);
}

/// Both branches failing is the import's error (the first branch's), not a warning.
#[test]
fn if_with_no_runnable_branch_is_an_import_error() {
    let m = parse(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (bool c, float[1, 4] X) => (float[1, 4] Y)
        <float[3, 4] W = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}>
        {
            Y = If(c) <then_branch = t () => (float[1, 4] a) { a = MatMul(X, W) },
                       else_branch = e () => (float[1, 4] b) { b = MatMul(W, X) }>
        }"#,
    );
    let err = import_model(&m, None, &ImportOptions::default()).expect_err("no branch runs");
    assert!(err.to_string().contains("MatMul"), "{err}");
}

/// A while-loop's carried counter, counted in float (Paddle's exports: SLANet's table
/// decoder), bounds a Slice and a Range: both get static shapes, and the answer is the
/// hand-computed one (also onnxruntime's for this fixture).
#[test]
fn loop_counter_bounds_slice_and_range() {
    let g = fixture("loop_counter_range");
    let x = Rng(13).tensor(&[3, 5], -1.0, 1.0);
    let exe = check_each(&g, &[vec![x.clone()]]);
    let out = run(&exe, std::slice::from_ref(&x));
    let twice: Vec<f32> = x.to_f32_vec().iter().map(|v| 2.0 * v).collect();
    assert_eq!(out[0].to_f32_vec(), twice);
    assert_eq!(out[1].to_i64_vec(), vec![0, 1, 2, 3, 4]);
}

/// A Range whose limit is `min(i + 1, 5)` is compiled as one element `[i]`; a run where the
/// cap binds (i = 5: ONNX's range is then empty) faults naming the check, not a silent
/// wrong answer; other runs of the same program answer.
#[test]
fn capped_range_limit_is_checked_at_run_time() {
    let m = parse(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (int64[1] start, int64[1] stop) => (int64[8] seen)
        <int64 M = {16}, bool go = {1}, int64[8] s0 = {-1, -1, -1, -1, -1, -1, -1, -1}, int64[1] cap = {5}, float one = {1}, int64 unit = {1}>
        {
            i_end, seen = Loop(M, go, start, s0) <body = step (int64 it, bool c, int64[1] i, int64[8] s) => (bool co, int64[1] io, int64[8] so) {
                fi = Cast <to = 1> (i)
                fi1 = Add(fi, one)
                i1 = Cast <to = 7> (fi1)
                e = Min(cap, i1)
                si = Squeeze(i)
                se = Squeeze(e)
                r = Range(si, se, unit)
                so = ScatterElements <axis = 0> (s, r, r)
                io = Identity(i1)
                more = Less(i1, stop)
                co = Squeeze(more)
            }>
        }"#,
    );
    let mut g = import(&m);
    let plan = arenac_compiler::arena::plan_graph(&mut g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    let mut seen = |from: i64, to: i64| {
        let inputs = [Tensor::i64(vec![1], &[from]), Tensor::i64(vec![1], &[to])];
        run_in(&exe, &mut arena, &inputs).map(|o| o[0].to_i64_vec())
    };
    assert_eq!(seen(0, 5).unwrap(), [0, 1, 2, 3, 4, -1, -1, -1]);
    // i = 3, 4 run; at i = 5 the cap binds.
    let e = seen(3, 7).expect_err("the cap binds at i = 5");
    assert!(e.contains("/limit-check") && e.contains("(Gather)"), "{e}");
    // From 6 it binds at once (ONNX: an empty range).
    assert!(seen(6, 7).is_err());
    assert_eq!(seen(1, 3).unwrap(), [-1, 1, 2, -1, -1, -1, -1, -1]);
}
