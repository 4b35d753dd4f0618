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
    // Pow of an integer exponent (a host kernel) over more dims than that kernel takes.
    let nine = [1, 1, 1, 1, 1, 1, 1, 2, 3];
    let m = ModelBuilder::new("pow", 13)
        .input("a", DType::F32, &dims(&nine))
        .input("b", DType::I64, &dims(&nine))
        .output("y", DType::F32, &dims(&nine))
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

/// One math op: name, attributes, input range, rtol, atol.
type MathCase<'a> = (&'a str, Vec<(&'a str, Attr)>, f32, f32, f32, f32);

fn math_cases() -> Vec<MathCase<'static>> {
    let a = |v: f32| Attr::Float(v);
    vec![
        ("Floor", vec![], -50.0, 50.0, 0.0, 0.0),
        ("Ceil", vec![], -50.0, 50.0, 0.0, 0.0),
        ("Round", vec![], -8.0, 8.0, 0.0, 0.0),
        ("Sign", vec![], -2.0, 2.0, 0.0, 0.0),
        ("Sin", vec![], -100.0, 100.0, 1e-5, 1e-6),
        ("Sin", vec![], -1.0, 1.0, 1e-6, 1e-7),
        ("Cos", vec![], -100.0, 100.0, 1e-5, 1e-6),
        ("Cos", vec![], -1.0, 1.0, 1e-6, 1e-7),
        ("Tan", vec![], -1.5, 1.5, 1e-5, 1e-6),
        ("Tan", vec![], -20.0, 20.0, 1e-4, 1e-5),
        ("Asin", vec![], -1.0, 1.0, 1e-6, 1e-7),
        ("Acos", vec![], -1.0, 1.0, 1e-6, 1e-7),
        ("Atan", vec![], -10.0, 10.0, 1e-6, 1e-7),
        ("Atan", vec![], -0.5, 0.5, 1e-6, 1e-7),
        ("Sinh", vec![], -10.0, 10.0, 1e-5, 1e-7),
        ("Sinh", vec![], -1.2, 1.2, 1e-6, 1e-7),
        ("Cosh", vec![], -10.0, 10.0, 1e-5, 1e-7),
        ("Asinh", vec![], -3000.0, 3000.0, 1e-6, 1e-7),
        ("Asinh", vec![], -1.0, 1.0, 1e-6, 1e-7),
        ("Acosh", vec![], 1.0, 3000.0, 1e-6, 1e-7),
        ("Acosh", vec![], 1.0, 2.0, 2e-6, 1e-6),
        ("Atanh", vec![], -1.0, 1.0, 1e-5, 1e-7),
        ("Elu", vec![], -4.0, 4.0, 1e-6, 1e-7),
        ("Elu", vec![("alpha", a(0.7))], -0.6, 0.6, 1e-6, 1e-8),
        ("Selu", vec![], -4.0, 4.0, 1e-6, 1e-7),
        (
            "Selu",
            vec![("alpha", a(2.0)), ("gamma", a(3.0))],
            -1.0,
            1.0,
            1e-6,
            1e-7,
        ),
        ("Celu", vec![("alpha", a(2.0))], -5.0, 5.0, 1e-6, 1e-7),
        ("Softplus", vec![], -30.0, 30.0, 1e-6, 1e-10),
        ("Softsign", vec![], -30.0, 30.0, 1e-6, 1e-7),
        (
            "ThresholdedRelu",
            vec![("alpha", a(0.5))],
            -2.0,
            2.0,
            0.0,
            0.0,
        ),
        ("Shrink", vec![], -2.0, 2.0, 1e-6, 1e-7),
        (
            "Shrink",
            vec![("bias", a(1.5)), ("lambd", a(1.0))],
            -3.0,
            3.0,
            1e-6,
            1e-7,
        ),
        ("Mish", vec![], -10.0, 10.0, 2e-6, 1e-7),
        ("Swish", vec![("alpha", a(0.5))], -10.0, 10.0, 2e-6, 1e-7),
    ]
}

/// Every math op on its own (no fusion) over random shapes, against the reference.
#[test]
fn math_unary_ops() {
    let mut rng = Rng(0x3a711);
    let shapes: [&[usize]; 3] = [&[3, 7, 5], &[1], &[2, 33]];
    for (op, attrs, lo, hi, rtol, atol) in math_cases() {
        for s in shapes {
            let x = rng.tensor(s, lo, hi);
            check(unary_model(op, s, attrs.clone(), 24), &[x], rtol, atol);
        }
    }
}

/// Compiles `m` unfused and compares with the reference: equal values (infinities too), both
/// NaN, or within `atol + rtol * |want|`.
fn check_close(m: ModelProto, inputs: &[Tensor], rtol: f32, atol: f32, what: &str) {
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("{what} compiles: {e}"));
    let got = run(&exe, inputs);
    let want = eval_graph(&g, inputs).expect("reference");
    for (a, b) in got.iter().zip(&want) {
        assert_eq!((a.dtype(), a.shape()), (b.dtype(), b.shape()), "{what}");
        for (i, (p, q)) in a.to_f32_vec().iter().zip(&b.to_f32_vec()).enumerate() {
            let ok = p == q || (p.is_nan() && q.is_nan()) || (p - q).abs() <= atol + rtol * q.abs();
            assert!(ok, "{what}: element {i}: got {p}, want {q}");
        }
    }
}

/// [`check_close`] on one f32 vector; tiny results may be 0 (the f32 `exp` flushes results
/// below 2^-126 to 0, and Mish multiplies such a Softplus by x).
fn check_special(op: &str, m: ModelProto, x: &[f32], rtol: f32) {
    let t = Tensor::f32(vec![x.len()], x);
    check_close(m, &[t], rtol, 1e-35, op);
}

/// Special values through the f32x4 lanes and the scalar tail.
#[test]
fn math_special_values() {
    let v = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0];
    for (op, attrs, ..) in math_cases() {
        check_special(op, unary_model(op, &[5], attrs, 24), &v, 1e-6);
    }
    // Halves round to even.
    let h = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4_194_304.5];
    check_special("Round", unary_model("Round", &[8], vec![], 11), &h, 0.0);
    // Domain edges and points outside.
    let d = [-1.0, 1.0, 1.5, -1.5, 0.5, 0.99, -0.99, 2.0, 1.000_001];
    for op in ["Asin", "Acos", "Atanh", "Acosh"] {
        check_special(op, unary_model(op, &[9], vec![], 9), &d, 2e-6);
    }
    // Exp (and Sigmoid, Softmax through it) up to the largest finite result: 88.3..88.72
    // used to be clamped to exp(88.3).
    let e = [
        88.0, 88.3, 88.5, 88.7, 88.72, 88.722_83, 88.73, -87.3, -87.0,
    ];
    check_special("Exp", unary_model("Exp", &[9], vec![], 13), &e, 2e-6);
    // Overflow edges, huge and tiny arguments.
    let big = [88.0, 89.0, -89.2, 90.0, -100.0, 1e-3, -1e-6, 1e-20, 1e30];
    for op in [
        "Sinh", "Cosh", "Softplus", "Elu", "Mish", "Asinh", "Softsign",
    ] {
        check_special(op, unary_model(op, &[9], vec![], 22), &big, 2e-5);
    }
}

/// Fuses `x -> op -> Add(b) -> Mul(x)` and `Mul(x, c) -> op -> Sub`: fusion on must equal the
/// unfused reference, and the plain (unfused) compile too.
#[test]
fn math_ops_fused_with_neighbours() {
    use arenac_compiler::arena::plan_graph;
    let mut rng = Rng(0xf05e);
    for (op, attrs, lo, hi, rtol, atol) in math_cases() {
        let m = ModelBuilder::new("fm", 24)
            .input("x", DType::F32, &dims(&[2, 9]))
            .input("b", DType::F32, &dims(&[9]))
            .initializer("c", &Tensor::f32(vec![], &[0.75]))
            .output("y", DType::F32, &dims(&[2, 9]))
            .output("z", DType::F32, &dims(&[2, 9]))
            .node("u", op, &["x"], &["ux"], attrs.clone())
            .node("a", "Add", &["ux", "b"], &["s"], vec![])
            .node("m", "Mul", &["s", "x"], &["y"], vec![])
            .node("k", "Mul", &["x", "c"], &["xc"], vec![])
            .node("v", op, &["xc"], &["vx"], attrs.clone())
            .node("d", "Sub", &["vx", "b"], &["z"], vec![])
            .build();
        let ins = [rng.tensor(&[2, 9], lo, hi), rng.tensor(&[9], -1.0, 1.0)];
        let unfused = import(&m);
        check_graph(&unfused, &ins, rtol, atol.max(1e-6));
        let want = eval_graph(&unfused, &ins).expect("reference");
        let mut g = unfused.clone();
        let plan = plan_graph(&mut g, &PlanOptions::default()).expect("plans");
        assert_eq!(plan.fusion.groups, 2, "{op}: both chains fuse");
        let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("{op} compiles: {e}"));
        for (a, b) in run(&exe, &ins).iter().zip(&want) {
            for (x, y) in a.to_f32_vec().iter().zip(&b.to_f32_vec()) {
                let ok = (x - y).abs() <= atol.max(1e-6) + rtol * y.abs() * 4.0
                    || (x.is_nan() && y.is_nan());
                assert!(ok, "{op} fused: got {x}, want {y}");
            }
        }
    }
}

fn typed_unary(
    op: &str,
    dt: DType,
    out: DType,
    s: &[usize],
    attrs: Vec<(&str, Attr)>,
) -> ModelProto {
    ModelBuilder::new("tu", 24)
        .input("x", dt, &dims(s))
        .output("y", out, &dims(s))
        .node("n", op, &["x"], &["y"], attrs)
        .build()
}

fn cast(t: &Tensor, dt: DType) -> Tensor {
    Tensor::from_f64(dt, t.shape().to_vec(), &t.to_f64_vec())
}

/// f16 and bf16 math (computed in f32, rounded on store), exact ops on f64, Sign on integers.
#[test]
fn math_on_other_dtypes() {
    let mut rng = Rng(0x16);
    let s = [3, 6];
    for dt in [DType::F16, DType::BF16] {
        for (op, attrs, lo, hi, ..) in math_cases() {
            let x = cast(&rng.tensor(&s, lo.max(-20.0), hi.min(20.0)), dt);
            let tol = if dt == DType::F16 { 1e-3 } else { 8e-3 };
            check_close(typed_unary(op, dt, dt, &s, attrs), &[x], tol, 1e-3, op);
        }
    }
    for op in ["Floor", "Ceil", "Round", "Sign"] {
        let x = cast(&rng.tensor(&s, -9.0, 9.0), DType::F64);
        check_close(
            typed_unary(op, DType::F64, DType::F64, &s, vec![]),
            &[x],
            0.0,
            0.0,
            op,
        );
    }
    for dt in [DType::I8, DType::I32, DType::I64, DType::U8, DType::U64] {
        let x = Tensor::from_i64(dt, vec![6], &[-3, 0, 5, -1, 1, 100]);
        check_close(
            typed_unary("Sign", dt, dt, &[6], vec![]),
            &[x],
            0.0,
            0.0,
            "Sign",
        );
    }
    let err = typed_unary("Sin", DType::F64, DType::F64, &s, vec![]);
    let g = import(&err);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let text = compile(&g, &plan).expect_err("no f64 Sin").to_string();
    assert!(
        text.contains("(Sin)") && text.contains("no kernel"),
        "{text}"
    );
}

/// IsNaN and IsInf (every detect flag) on f32, f16 and f64, the f32 through both loops.
#[test]
fn nan_inf_predicates() {
    let v = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -1.5,
        3.0,
        f64::NAN,
    ];
    for dt in [DType::F32, DType::F16, DType::F64] {
        let x = Tensor::from_f64(dt, vec![7], &v);
        check(
            typed_unary("IsNaN", dt, DType::Bool, &[7], vec![]),
            std::slice::from_ref(&x),
            0.0,
            0.0,
        );
        for (p, n) in [(1, 1), (1, 0), (0, 1), (0, 0)] {
            let attrs = vec![
                ("detect_positive", Attr::Int(p)),
                ("detect_negative", Attr::Int(n)),
            ];
            let m = typed_unary("IsInf", dt, DType::Bool, &[7], attrs);
            check(m, std::slice::from_ref(&x), 0.0, 0.0);
        }
    }
}

/// Max/Min/Mod/Add/Div on f16 (and bf16): computed in f32, rounded to nearest even on store;
/// Mod with fmod=0 on floats (opset 28) is numpy's floored mod.
#[test]
fn half_precision_binary() {
    let mut rng = Rng(0xf16);
    for dt in [DType::F16, DType::BF16] {
        for (op, attrs) in [
            ("Max", vec![]),
            ("Min", vec![]),
            ("Add", vec![]),
            ("Div", vec![]),
            ("Mod", vec![("fmod", Attr::Int(1))]),
            ("Mod", vec![("fmod", Attr::Int(0))]),
        ] {
            let m = ModelBuilder::new("hb", 28)
                .input("a", dt, &dims(&[3, 5]))
                .input("b", dt, &dims(&[5]))
                .output("y", dt, &dims(&[3, 5]))
                .node("n", op, &["a", "b"], &["y"], attrs)
                .build();
            let a = cast(&rng.tensor(&[3, 5], -9.0, 9.0), dt);
            let b = cast(&rng.tensor(&[5], 0.5, 4.0), dt);
            let tol = if dt == DType::F16 { 1e-3 } else { 8e-3 };
            check_close(m, &[a, b], tol, 1e-2, op);
        }
    }
    let p = [
        0.0,
        -0.0,
        -3.0,
        3.0,
        -1.0,
        1.0,
        f32::INFINITY,
        1.0,
        5.5,
        -5.5,
    ];
    let q = [
        -2.0,
        2.0,
        f32::INFINITY,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
        2.0,
        0.0,
        -2.0,
        2.0,
    ];
    for dt in [DType::F32, DType::F64, DType::F16] {
        let m = ModelBuilder::new("mod", 28)
            .input("a", dt, &dims(&[10]))
            .input("b", dt, &dims(&[10]))
            .output("y", dt, &dims(&[10]))
            .node(
                "n",
                "Mod",
                &["a", "b"],
                &["y"],
                vec![("fmod", Attr::Int(0))],
            )
            .build();
        let ins = [
            cast(&Tensor::f32(vec![10], &p), dt),
            cast(&Tensor::f32(vec![10], &q), dt),
        ];
        check_close(m, &ins, 0.0, 0.0, "Mod fmod=0");
    }
}
