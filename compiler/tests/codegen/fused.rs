//! Fused element-wise kernels: the graph is evaluated by the reference BEFORE fusing, then
//! fused, planned and compiled; the fused program must give the unfused reference's answers.
//! Named patterns (SiLU, GELU, residual Add+Relu, a LayerNorm-like tail) and random DAGs of
//! element-wise ops with broadcasting inputs and folded scalar constants.

use arenac_compiler::analysis::fuse::FuseStats;
use arenac_compiler::arena::plan_graph;
use arenac_compiler::ir::graph::ValueKind;
use arenac_compiler::ops::Op;

use crate::common::*;

/// Reference of the unfused graph vs the fused compiled program; returns the fusion stats.
fn check_fused(model: ModelProto, inputs: &[Tensor], rtol: f32, atol: f32) -> FuseStats {
    let unfused = import(&model);
    let want = eval_graph(&unfused, inputs).expect("reference");
    let mut g = unfused.clone();
    let plan = plan_graph(&mut g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
    let got = run(&exe, inputs);
    assert_eq!(got.len(), want.len());
    for (o, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(a.shape(), b.shape(), "output {o} shape");
        let (a, b) = (a.to_f32_vec(), b.to_f32_vec());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let ok = (x - y).abs() <= atol + rtol * y.abs() || (x.is_nan() && y.is_nan());
            assert!(ok, "output {o} element {i}: got {x}, want {y}");
        }
    }
    assert_eq!(
        plan.fusion.nodes_fused,
        unfused.node_count() - g.node_count() + plan.fusion.groups,
        "each group replaced its members by one node"
    );
    plan.fusion
}

fn scalar(v: f32) -> Tensor {
    Tensor::f32(vec![], &[v])
}

#[test]
fn silu() {
    let mut rng = Rng(0x5151);
    for s in [&[1, 8, 7, 7][..], &[3], &[2, 5, 13]] {
        let m = ModelBuilder::new("silu", 13)
            .input("x", DType::F32, &dims(s))
            .output("y", DType::F32, &[])
            .node("s", "Sigmoid", &["x"], &["sx"], vec![])
            .node("m", "Mul", &["x", "sx"], &["y"], vec![])
            .build();
        let x = rng.tensor(s, -8.0, 8.0);
        let f = check_fused(m, &[x], 2e-6, 1e-7);
        assert_eq!((f.groups, f.nodes_fused), (1, 2));
    }
}

#[test]
fn gelu_erf_chain() {
    let mut rng = Rng(0x6e1);
    let s = [2, 9, 33];
    let m = ModelBuilder::new("gelu", 13)
        .input("x", DType::F32, &dims(&s))
        .output("y", DType::F32, &[])
        .initializer("s2", &scalar(std::f32::consts::SQRT_2))
        .initializer("one", &scalar(1.0))
        .initializer("half", &scalar(0.5))
        .node("d", "Div", &["x", "s2"], &["xd"], vec![])
        .node("e", "Erf", &["xd"], &["xe"], vec![])
        .node("a", "Add", &["xe", "one"], &["xa"], vec![])
        .node("m", "Mul", &["x", "xa"], &["xm"], vec![])
        .node("h", "Mul", &["xm", "half"], &["y"], vec![])
        .build();
    let x = rng.tensor(&s, -5.0, 5.0);
    let f = check_fused(m, &[x], RTOL, 1e-6);
    assert_eq!((f.groups, f.nodes_fused), (1, 5));
}

#[test]
fn residual_add_relu_in_place() {
    let mut rng = Rng(0xadd);
    let s = [2, 4, 5, 5];
    let m = ModelBuilder::new("res", 13)
        .input("x", DType::F32, &dims(&s))
        .input("r", DType::F32, &dims(&s))
        .input("b", DType::F32, &dims(&[4, 1, 1]))
        .output("y", DType::F32, &[])
        .node("e", "Exp", &["x"], &["t"], vec![])
        .node("a", "Add", &["t", "b"], &["u"], vec![])
        .node("add", "Add", &["u", "r"], &["v"], vec![])
        .node("relu", "Relu", &["v"], &["w"], vec![])
        .node("neg", "Neg", &["w"], &["y"], vec![])
        .build();
    let ins = [
        rng.tensor(&s, -2.0, 2.0),
        rng.tensor(&s, -2.0, 2.0),
        rng.tensor(&[4, 1, 1], -2.0, 2.0),
    ];
    let f = check_fused(m, &ins, RTOL, ATOL);
    assert_eq!((f.groups, f.nodes_fused), (1, 5));
}

#[test]
fn fused_node_writes_into_its_dead_input() {
    // t comes from a Transpose (not fusible) and dies at the fused node y = -Relu(t * t + t).
    let m = ModelBuilder::new("inplace", 13)
        .input("x", DType::F32, &dims(&[16, 4]))
        .output("y", DType::F32, &[])
        .node("tr", "Transpose", &["x"], &["t"], vec![])
        .node("m", "Mul", &["t", "t"], &["tt"], vec![])
        .node("a", "Add", &["tt", "t"], &["u"], vec![])
        .node("r", "Relu", &["u"], &["v"], vec![])
        .node("ng", "Neg", &["v"], &["y"], vec![])
        .build();
    let mut g = import(&m);
    let plan = plan_graph(&mut g, &PlanOptions::default()).expect("plans");
    let (_, fused) = g
        .nodes()
        .find(|(_, n)| matches!(n.op, Op::FusedElementwise(_)))
        .expect("a fused node");
    let (t, y) = (g.find_value("t").expect("t"), g.find_value("y").expect("y"));
    assert_eq!(fused.inputs.as_slice(), &[t]);
    assert!(matches!(g.value(y).kind, ValueKind::Computed(_)));
    let lv = &plan.liveness;
    assert_eq!(
        lv.value_buffer.get(&t),
        lv.value_buffer.get(&y),
        "y written over dead t"
    );
    let mut rng = Rng(7);
    check_fused(m, &[rng.tensor(&[16, 4], -2.0, 2.0)], RTOL, ATOL);
}

#[test]
fn layer_norm_like_tail() {
    let mut rng = Rng(0x1a7e);
    let (n, c) = (6, 40);
    let m = ModelBuilder::new("ln", 13)
        .input("x", DType::F32, &dims(&[n, c]))
        .initializer("gamma", &rng.tensor(&[c], 0.5, 1.5))
        .initializer("beta", &rng.tensor(&[c], -1.0, 1.0))
        .initializer("eps", &scalar(1e-5))
        .initializer("two", &scalar(2.0))
        .output("y", DType::F32, &[])
        .node(
            "mu",
            "ReduceMean",
            &["x"],
            &["mean"],
            vec![("axes", Attr::Ints(vec![-1]))],
        )
        .node("d", "Sub", &["x", "mean"], &["xc"], vec![])
        .node("p", "Pow", &["xc", "two"], &["sq"], vec![])
        .node(
            "vm",
            "ReduceMean",
            &["sq"],
            &["var"],
            vec![("axes", Attr::Ints(vec![-1]))],
        )
        .node("ae", "Add", &["var", "eps"], &["ve"], vec![])
        .node("sd", "Sqrt", &["ve"], &["std"], vec![])
        .node("dv", "Div", &["xc", "std"], &["xn"], vec![])
        .node("g", "Mul", &["xn", "gamma"], &["xg"], vec![])
        .node("b", "Add", &["xg", "beta"], &["y"], vec![])
        .build();
    let f = check_fused(m, &[rng.tensor(&[n, c], -3.0, 3.0)], RTOL, ATOL);
    // Add+Sqrt on [n, 1]; Div, Mul, Add on [n, c] (xc is read by Pow too: Sub stays).
    assert_eq!((f.groups, f.nodes_fused), (2, 5));
}

/// A random DAG of element-wise ops over `x` (full shape) and broadcasting inputs `b0, b1`
/// (positive), with scalar constants; some intermediates become extra outputs or are read
/// by a Transpose, which must keep them out of the groups.
fn random_dag(rng: &mut Rng, shape: &[usize], b_shapes: [&[usize]; 2], steps: usize) -> ModelProto {
    let mut m = ModelBuilder::new("dag", 20)
        .input("x", DType::F32, &dims(shape))
        .input("b0", DType::F32, &dims(b_shapes[0]))
        .input("b1", DType::F32, &dims(b_shapes[1]))
        .initializer("k_half", &scalar(0.5))
        .initializer("k_two", &scalar(2.0))
        .initializer("k_three", &scalar(3.0));
    let mut full: Vec<String> = vec!["x".into()];
    let small = ["b0", "b1", "k_half", "k_two"];
    let pick = |rng: &mut Rng, v: &[String]| v[(rng.next() % v.len() as u64) as usize].clone();
    let mut extra_outputs = Vec::new();
    for k in 0..steps {
        let a = pick(rng, &full);
        let y = format!("v{k}");
        let other = if rng.next().is_multiple_of(2) {
            pick(rng, &full)
        } else {
            small[(rng.next() % small.len() as u64) as usize].to_string()
        };
        let (op, ins, attrs): (&str, Vec<String>, Vec<(&str, Attr)>) = match rng.next() % 19 {
            0 => ("Relu", vec![a], vec![]),
            1 => ("Neg", vec![a], vec![]),
            2 => ("Abs", vec![a], vec![]),
            3 => ("Sigmoid", vec![a], vec![]),
            4 => ("Tanh", vec![a], vec![]),
            5 => ("Erf", vec![a], vec![]),
            6 => ("LeakyRelu", vec![a], vec![("alpha", Attr::Float(0.2))]),
            7 => ("HardSwish", vec![a], vec![]),
            8 => ("Gelu", vec![a], vec![]),
            9 => ("Add", vec![a, other], vec![]),
            10 => ("Sub", vec![other, a], vec![]),
            11 => ("Mul", vec![a, other], vec![]),
            // Divisors: the positive broadcast inputs or 2.
            12 => (
                "Div",
                vec![a, ["b0", "b1", "k_two"][(rng.next() % 3) as usize].into()],
                vec![],
            ),
            13 => ("Max", vec![a, other], vec![]),
            14 => ("Min", vec![other, a], vec![]),
            15 => ("Mean", vec![a, other, pick(rng, &full)], vec![]),
            16 => ("Sum", vec![a, other], vec![]),
            17 => ("PRelu", vec![a, "b1".into()], vec![]),
            _ => (
                "Pow",
                vec![
                    a,
                    ["k_two", "k_three", "k_half"][(rng.next() % 3) as usize].into(),
                ],
                vec![],
            ),
        };
        // Pow by 0.5 of a negative value is NaN in both; keep it on |a| to compare numbers.
        let ins = if op == "Pow" {
            let abs = format!("abs{k}");
            m = m.node(&format!("na{k}"), "Abs", &[&ins[0]], &[&abs], vec![]);
            vec![abs, ins[1].clone()]
        } else {
            ins
        };
        // Bound the magnitudes: squash every fourth step.
        let refs: Vec<&str> = ins.iter().map(|s| s.as_str()).collect();
        if k % 4 == 3 {
            let raw = format!("r{k}");
            m = m.node(&format!("n{k}"), op, &refs, &[&raw], attrs);
            m = m.node(&format!("t{k}"), "Tanh", &[&raw], &[&y], vec![]);
        } else {
            m = m.node(&format!("n{k}"), op, &refs, &[&y], attrs);
        }
        match rng.next() % 10 {
            0 => extra_outputs.push(y.clone()),
            1 => {
                let t = format!("tr{k}");
                m = m.node(&format!("tr{k}"), "Transpose", &[&y], &[&t], vec![]);
                extra_outputs.push(t);
            }
            _ => {}
        }
        full.push(y);
    }
    m = m.output(&format!("v{}", steps - 1), DType::F32, &[]);
    for o in extra_outputs {
        if o != format!("v{}", steps - 1) {
            m = m.output(&o, DType::F32, &[]);
        }
    }
    m.build()
}

#[test]
fn random_elementwise_dags() {
    let mut rng = Rng(0xf00d_cafe);
    let cases: [(&[usize], [&[usize]; 2]); 5] = [
        (&[2, 3, 9], [&[3, 1], &[9]]),
        (&[4, 33], [&[33], &[4, 1]]),
        (&[1, 6, 5, 7], [&[6, 1, 1], &[1, 1, 7]]),
        (&[5], [&[1], &[5]]),
        (&[2, 2, 2, 8], [&[2, 1, 1, 8], &[1]]),
    ];
    let mut total = FuseStats::default();
    for round in 0..8 {
        for (shape, b_shapes) in cases {
            let steps = 3 + (round % 6);
            let m = random_dag(&mut rng, shape, b_shapes, steps);
            let ins = [
                rng.tensor(shape, -2.0, 2.0),
                rng.tensor(b_shapes[0], 0.5, 1.5),
                rng.tensor(b_shapes[1], 0.5, 1.5),
            ];
            let f = check_fused(m, &ins, 1e-4, 1e-5);
            total.groups += f.groups;
            total.nodes_fused += f.nodes_fused;
        }
    }
    assert!(total.groups > 20, "random DAGs fused: {total:?}");
}
