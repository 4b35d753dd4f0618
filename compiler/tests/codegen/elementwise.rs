//! Element-wise kernels: unary, binary with broadcasting, Where, Clip, Pow, variadic, in-place chains.

use crate::common::*;

fn unary_model(op: &str, shape: &[usize], attrs: Vec<(&str, Attr)>, opset: i64) -> ModelProto {
    ModelBuilder::new("unary", opset)
        .input("x", DType::F32, &dims(shape))
        .output("y", DType::F32, &dims(shape))
        .node("n", op, &["x"], &["y"], attrs)
        .build()
}

type UnaryCase<'a> = (&'a str, Vec<(&'a str, Attr)>, f32, f32, f32, f32);

#[test]
fn unary_ops() {
    let mut rng = Rng(0x1234_5678);
    let shapes: [&[usize]; 4] = [&[3, 7, 5], &[1], &[4], &[2, 33]];
    let cases: Vec<UnaryCase<'_>> = vec![
        ("Relu", vec![], -5.0, 5.0, RTOL, ATOL),
        (
            "LeakyRelu",
            vec![("alpha", Attr::Float(0.1))],
            -5.0,
            5.0,
            RTOL,
            ATOL,
        ),
        ("Neg", vec![], -5.0, 5.0, RTOL, ATOL),
        ("Abs", vec![], -5.0, 5.0, RTOL, ATOL),
        ("Sqrt", vec![], 0.0, 100.0, RTOL, ATOL),
        ("Reciprocal", vec![], 0.5, 10.0, RTOL, ATOL),
        ("Exp", vec![], -80.0, 80.0, 2e-6, 1e-30),
        ("Exp", vec![], -3.0, 3.0, 2e-6, 0.0),
        ("Sigmoid", vec![], -20.0, 20.0, 2e-6, 1e-9),
        ("Tanh", vec![], -10.0, 10.0, 2e-6, 1e-9),
        ("Tanh", vec![], -0.7, 0.7, 2e-6, 1e-9),
        ("Erf", vec![], -4.0, 4.0, RTOL, 1e-6),
        (
            "HardSigmoid",
            vec![("alpha", Attr::Float(0.3))],
            -5.0,
            5.0,
            RTOL,
            ATOL,
        ),
        ("HardSwish", vec![], -5.0, 5.0, RTOL, ATOL),
    ];
    for (op, attrs, lo, hi, rtol, atol) in cases {
        for s in shapes {
            let x = rng.tensor(s, lo, hi);
            check(unary_model(op, s, attrs.clone(), 14), &[x], rtol, atol);
        }
    }
    for approx in ["none", "tanh"] {
        let s = [3, 11];
        let attrs = vec![("approximate", Attr::Str(approx.into()))];
        let x = rng.tensor(&s, -5.0, 5.0);
        check(unary_model("Gelu", &s, attrs, 20), &[x], RTOL, ATOL);
    }
}

#[test]
fn where_with_broadcasting() {
    let mut rng = Rng(66);
    let m = ModelBuilder::new("w", 13)
        .input("c", DType::Bool, &dims(&[2, 1, 4]))
        .input("x", DType::F32, &dims(&[3, 4]))
        .initializer("y", &Tensor::f32(vec![], &[-7.5]))
        .output("out", DType::F32, &dims(&[2, 3, 4]))
        .node("w", "Where", &["c", "x", "y"], &["out"], vec![])
        .build();
    let bits: Vec<u8> = (0..8)
        .map(|i| u8::from(rng.next().is_multiple_of(3) || i == 1))
        .collect();
    let c = Tensor::from_bytes(DType::Bool, vec![2, 1, 4], bits.into()).expect("bool tensor");
    check(m, &[c, rng.tensor(&[3, 4], -1.0, 1.0)], 0.0, 0.0);
}

#[test]
fn clip_with_bounds() {
    let mut rng = Rng(7);
    for (min, max) in [
        (Some(-1.0f32), Some(2.0f32)),
        (Some(0.0), None),
        (None, Some(0.5)),
    ] {
        let mut b = ModelBuilder::new("clip", 13).input("x", DType::F32, &dims(&[5, 6]));
        let mut ins = vec!["x"];
        match min {
            Some(v) => {
                b = b.initializer("lo", &Tensor::f32(vec![], &[v]));
                ins.push("lo");
            }
            None => ins.push(""),
        }
        if let Some(v) = max {
            b = b.initializer("hi", &Tensor::f32(vec![], &[v]));
            ins.push("hi");
        }
        let m = b
            .output("y", DType::F32, &dims(&[5, 6]))
            .node("clip", "Clip", &ins, &["y"], vec![])
            .build();
        check(m, &[rng.tensor(&[5, 6], -3.0, 3.0)], RTOL, ATOL);
    }
}

fn binary_model(op: &str, a: &[usize], b: &[usize], out: &[usize]) -> ModelProto {
    ModelBuilder::new("binary", 13)
        .input("a", DType::F32, &dims(a))
        .input("b", DType::F32, &dims(b))
        .output("y", DType::F32, &dims(out))
        .node("n", op, &["a", "b"], &["y"], vec![])
        .build()
}

#[test]
fn binary_broadcasting() {
    let mut rng = Rng(99);
    let cases: [Shapes3<'_>; 8] = [
        (&[2, 1, 3], &[4, 1], &[2, 4, 3]),
        (&[3, 5], &[], &[3, 5]),
        (&[], &[3, 5], &[3, 5]),
        (&[2, 3, 4, 5], &[3, 1, 5], &[2, 3, 4, 5]),
        (&[17], &[17], &[17]),
        (&[1, 9], &[7, 1], &[7, 9]),
        (&[2, 3, 8], &[2, 3, 8], &[2, 3, 8]),
        (&[4, 1, 6], &[1, 5, 1], &[4, 5, 6]),
    ];
    for op in ["Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"] {
        for (a, b, out) in cases {
            if op == "PRelu" && out != a {
                continue;
            }
            let x = rng.tensor(a, -4.0, 4.0);
            let y = rng.tensor(b, 0.5, 4.0);
            check(binary_model(op, a, b, out), &[x, y], RTOL, ATOL);
        }
    }
}

#[test]
fn binary_with_constant_operand() {
    let mut rng = Rng(5);
    let c = rng.tensor(&[6], -1.0, 1.0);
    let m = ModelBuilder::new("bias", 13)
        .input("x", DType::F32, &dims(&[3, 6]))
        .initializer("c", &c)
        .output("y", DType::F32, &dims(&[3, 6]))
        .node("add", "Add", &["x", "c"], &["y"], vec![])
        .build();
    check(m, &[rng.tensor(&[3, 6], -1.0, 1.0)], RTOL, ATOL);
}

#[test]
fn in_place_chain() {
    // Relu and the second Add write into their dead operands' buffers.
    let mut rng = Rng(11);
    let s = [4, 10];
    let m = ModelBuilder::new("inplace", 13)
        .input("x", DType::F32, &dims(&s))
        .input("y", DType::F32, &dims(&s))
        .input("z", DType::F32, &dims(&s))
        .output("out", DType::F32, &dims(&s))
        .node("add1", "Add", &["x", "y"], &["t"], vec![])
        .node("relu", "Relu", &["t"], &["r"], vec![])
        .node("add2", "Add", &["r", "z"], &["u"], vec![])
        .node("relu2", "Relu", &["u"], &["out"], vec![])
        .build();
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    assert!(
        !plan.liveness.alias_of.is_empty(),
        "the plan writes something in place"
    );
    let ins: Vec<Tensor> = (0..3).map(|_| rng.tensor(&s, -2.0, 2.0)).collect();
    let exe = check_graph(&g, &ins, RTOL, ATOL);
    // Relu and Add kernels are shared between the two layers.
    assert_eq!(exe.kernel_count(), 2);
}

#[test]
fn pow_with_constant_exponents() {
    let mut rng = Rng(9090);
    let exps = [2.0f32, 0.5, 1.0, -1.0, 3.0, -2.0, 0.0, 7.0, 0.75, 2.5, -1.5];
    for e in exps {
        let m = ModelBuilder::new("pow", 13)
            .input("x", DType::F32, &dims(&[3, 7]))
            .initializer("e", &Tensor::f32(vec![], &[e]))
            .output("y", DType::F32, &dims(&[3, 7]))
            .node("p", "Pow", &["x", "e"], &["y"], vec![])
            .build();
        // Negative bases too: NaN for a non-integer exponent, on both sides.
        check(m, &[rng.tensor(&[3, 7], -3.0, 3.0)], 4e-6, 1e-30);
    }
    // An integer-typed constant exponent is converted.
    let m = ModelBuilder::new("pow", 13)
        .input("x", DType::F32, &dims(&[5]))
        .initializer("e", &Tensor::i64(vec![5], &[3, -2, 0, 1, 4]))
        .output("y", DType::F32, &dims(&[5]))
        .node("p", "Pow", &["x", "e"], &["y"], vec![])
        .build();
    check(m, &[rng.tensor(&[5], -3.0, 3.0)], 4e-6, 1e-30);
}

#[test]
fn pow_with_tensor_exponent() {
    let mut rng = Rng(4711);
    let m = ModelBuilder::new("pow", 13)
        .input("x", DType::F32, &dims(&[4, 9]))
        .input("e", DType::F32, &dims(&[9]))
        .output("y", DType::F32, &dims(&[4, 9]))
        .node("p", "Pow", &["x", "e"], &["y"], vec![])
        .build();
    let mut x = rng.tensor(&[4, 9], -4.0, 4.0).to_f32_vec();
    // Zero, one and NaN bases (`check` cannot compare infinities: no 0^negative here).
    x[0] = 0.0;
    x[2] = 1.0;
    x[3] = f32::NAN;
    x[9] = 0.0;
    let e = [2.0f32, -1.5, f32::NAN, 0.0, 3.0, 0.3, -2.0, 11.0, 40.0];
    let ins = [Tensor::f32(vec![4, 9], &x), Tensor::f32(vec![9], &e)];
    check(m, &ins, 4e-6, 1e-30);
}

#[test]
fn unsupported_op_is_an_error() {
    let m = ModelBuilder::new("pow", 13)
        .input("a", DType::F32, &dims(&[2, 3]))
        .input("b", DType::I64, &dims(&[2, 3]))
        .output("y", DType::F32, &dims(&[2, 3]))
        .node("p", "Pow", &["a", "b"], &["y"], vec![])
        .build();
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let err = compile(&g, &plan).expect_err("no Pow kernel");
    let text = err.to_string();
    assert!(
        text.contains("node 'p' (Pow)") && text.contains("no kernel"),
        "{text}"
    );
}

#[test]
fn variadic_many_inputs() {
    let mut rng = Rng(747);
    for op in ["Sum", "Mean", "Max", "Min"] {
        let m = ModelBuilder::new("v", 13)
            .input("a", DType::F32, &dims(&[2, 3, 4]))
            .input("b", DType::F32, &dims(&[3, 1]))
            .input("c", DType::F32, &dims(&[4]))
            .input("d", DType::F32, &dims(&[2, 3, 4]))
            .output("y", DType::F32, &dims(&[2, 3, 4]))
            .node("neg", "Neg", &["d"], &["nd"], vec![])
            .node("v", op, &["b", "nd", "c", "a"], &["y"], vec![])
            .build();
        let ins = [
            rng.tensor(&[2, 3, 4], -1.0, 1.0),
            rng.tensor(&[3, 1], -1.0, 1.0),
            rng.tensor(&[4], -1.0, 1.0),
            rng.tensor(&[2, 3, 4], -1.0, 1.0),
        ];
        check(m, &ins, RTOL, ATOL);
    }
}
