//! Typed element-wise kernels: integer arithmetic, comparisons, Mod, Where on any dtype, f64
//! arithmetic and Cast between every pair of dtypes, compared exactly with the reference.
//! The logical, bitwise and shift ops are in [`crate::logical`].

use crate::common::*;

pub(crate) const INTS: [DType; 8] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
];

/// Random integers of `dt` (wrapped into its range by `from_i64`), never 0 when `nonzero`.
pub(crate) fn ints(rng: &mut Rng, dt: DType, shape: &[usize], nonzero: bool) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n)
        .map(|_| {
            let r = rng.next();
            let mut x = match r % 4 {
                0 => (r >> 8) as i64,             // any bits
                1 => ((r >> 8) % 41) as i64 - 20, // small, both signs
                // Extremes, and f16/f32 rounding ties (2049, 2051, 65520, 2^24 + 1).
                2 => [
                    i64::MIN,
                    i64::MAX,
                    -1,
                    1,
                    2049,
                    2051,
                    65520,
                    16_777_217,
                    -2049,
                ][((r >> 8) % 9) as usize],
                _ => ((r >> 8) % 2001) as i64 - 1000, // medium
            };
            let t = Tensor::from_i64(dt, vec![1], &[x]);
            if nonzero && t.to_i64_vec()[0] == 0 {
                x = 3;
            }
            x
        })
        .collect();
    Tensor::from_i64(dt, shape.to_vec(), &v)
}

/// Compiles, runs and compares every output with the reference: integers and bools byte for
/// byte, floats by value (NaN equals NaN; the sign of zero counts).
pub(crate) fn check_exact(m: ModelProto, inputs: &[Tensor]) {
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
    let got = run(&exe, inputs);
    let want = eval_graph(&g, inputs).expect("reference");
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.dtype(), b.dtype());
        assert_eq!(a.shape(), b.shape());
        if a.dtype().is_float() {
            for (i, (x, y)) in a.to_f64_vec().iter().zip(b.to_f64_vec()).enumerate() {
                let same = (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits();
                assert!(
                    same,
                    "{} element {i}: got {x:e}, want {y:e}",
                    a.dtype().name()
                );
            }
        } else {
            assert_eq!(a.bytes(), b.bytes(), "{}", a.dtype().name());
        }
    }
}

fn binary(op: &str, dt: DType, out: DType, shapes: Shapes3<'_>) -> ModelBuilder {
    ModelBuilder::new("b", 13)
        .input("a", dt, &dims(shapes.0))
        .input("b", dt, &dims(shapes.1))
        .output("y", out, &dims(shapes.2))
        .node("n", op, &["a", "b"], &["y"], vec![])
}

#[test]
fn integer_arithmetic_every_int_dtype() {
    let mut rng = Rng(0x5eed);
    let shapes: [Shapes3<'_>; 3] = [
        (&[2, 3, 4], &[3, 1], &[2, 3, 4]),
        (&[7], &[7], &[7]),
        (&[], &[2, 5], &[2, 5]),
    ];
    for dt in INTS {
        for op in ["Add", "Sub", "Mul", "Div", "Mod", "Mod1"] {
            for s in shapes {
                let (name, attrs) = match op {
                    "Mod" => ("Mod", vec![("fmod", Attr::Int(0))]),
                    "Mod1" => ("Mod", vec![("fmod", Attr::Int(1))]),
                    _ => (op, vec![]),
                };
                let m = ModelBuilder::new("b", 13)
                    .input("a", dt, &dims(s.0))
                    .input("b", dt, &dims(s.1))
                    .output("y", dt, &dims(s.2))
                    .node("n", name, &["a", "b"], &["y"], attrs)
                    .build();
                let divides = matches!(op, "Div" | "Mod" | "Mod1");
                let ins = [
                    ints(&mut rng, dt, s.0, false),
                    ints(&mut rng, dt, s.1, divides),
                ];
                check_exact(m, &ins);
            }
        }
    }
}

#[test]
fn integer_division_by_zero_is_zero() {
    for dt in [DType::I64, DType::I32, DType::U8, DType::U64] {
        for (op, fmod) in [("Div", 0), ("Mod", 0), ("Mod", 1)] {
            let attrs = if op == "Mod" {
                vec![("fmod", Attr::Int(fmod))]
            } else {
                vec![]
            };
            let m = ModelBuilder::new("z", 13)
                .input("a", dt, &dims(&[4]))
                .input("b", dt, &dims(&[4]))
                .output("y", dt, &dims(&[4]))
                .node("n", op, &["a", "b"], &["y"], attrs)
                .build();
            let g = import(&m);
            let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
            let exe = compile(&g, &plan).expect("compiles");
            let a = Tensor::from_i64(dt, vec![4], &[7, -7, 0, i64::MIN]);
            let b = Tensor::from_i64(dt, vec![4], &[0; 4]);
            let y = run(&exe, &[a, b]);
            // The documented definition: integer Div and Mod by zero give 0.
            assert_eq!(y[0].to_i64_vec(), vec![0; 4], "{op} on {}", dt.name());
        }
    }
}

#[test]
fn integer_unary_and_clip() {
    let mut rng = Rng(99);
    for dt in INTS {
        let signed = matches!(dt, DType::I8 | DType::I16 | DType::I32 | DType::I64);
        let ops: &[&str] = if signed {
            &["Neg", "Abs", "Relu"]
        } else {
            &["Abs", "Relu"]
        };
        for op in ops {
            let m = ModelBuilder::new("u", 14)
                .input("x", dt, &dims(&[3, 9]))
                .output("y", dt, &dims(&[3, 9]))
                .node("n", op, &["x"], &["y"], vec![])
                .build();
            check_exact(m, &[ints(&mut rng, dt, &[3, 9], false)]);
        }
        let lo = Tensor::from_i64(dt, vec![], &[-5]);
        let hi = Tensor::from_i64(dt, vec![], &[100]);
        let m = ModelBuilder::new("c", 13)
            .input("x", dt, &dims(&[3, 9]))
            .initializer("lo", &lo)
            .initializer("hi", &hi)
            .output("y", dt, &dims(&[3, 9]))
            .node("n", "Clip", &["x", "lo", "hi"], &["y"], vec![])
            .build();
        check_exact(m, &[ints(&mut rng, dt, &[3, 9], false)]);
    }
}

#[test]
fn integer_and_f64_variadic() {
    let mut rng = Rng(4242);
    for (dt, ops) in [
        (DType::I64, &["Max", "Min"][..]),
        (DType::I32, &["Max", "Min"][..]),
        (DType::U64, &["Max", "Min"][..]),
        (DType::F64, &["Max", "Min", "Sum"][..]),
    ] {
        for op in ops {
            let m = ModelBuilder::new("v", 13)
                .input("a", dt, &dims(&[2, 3]))
                .input("b", dt, &dims(&[3]))
                .input("c", dt, &dims(&[2, 1]))
                .output("y", dt, &dims(&[2, 3]))
                .node("v", op, &["a", "b", "c"], &["y"], vec![])
                .build();
            let make = |rng: &mut Rng, s: &[usize]| {
                if dt == DType::F64 {
                    let n: usize = s.iter().product();
                    let v: Vec<f64> = (0..n).map(|_| f64::from(rng.f32(-9.0, 9.0))).collect();
                    Tensor::from_f64(dt, s.to_vec(), &v)
                } else {
                    ints(rng, dt, s, false)
                }
            };
            let ins = [
                make(&mut rng, &[2, 3]),
                make(&mut rng, &[3]),
                make(&mut rng, &[2, 1]),
            ];
            check_exact(m, &ins);
        }
    }
}

#[test]
fn f64_arithmetic() {
    let mut rng = Rng(31);
    for op in ["Add", "Sub", "Mul", "Div"] {
        let m = binary(op, DType::F64, DType::F64, (&[4, 5], &[5], &[4, 5])).build();
        let a: Vec<f64> = (0..20).map(|_| f64::from(rng.f32(-5.0, 5.0))).collect();
        let b: Vec<f64> = (0..5).map(|_| f64::from(rng.f32(0.5, 5.0))).collect();
        let ins = [
            Tensor::from_f64(DType::F64, vec![4, 5], &a),
            Tensor::from_f64(DType::F64, vec![5], &b),
        ];
        check_exact(m, &ins);
    }
}

/// Floats with ties, NaN, infinities, zeros of both signs, f16 subnormals and overflow.
pub(crate) fn float_values(rng: &mut Rng, n: usize) -> Vec<f64> {
    let edge = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        0.5,
        -0.5,
        2.5,
        -2.5,
        1.0,
        65504.0,
        65520.0,
        -65536.0,
        6e-8,
        1e-6,
        3e-5,
        1e-40,
        300.7,
        -129.9,
        255.5,
        1e10,
        -1e10,
        1e20,
        9.3e18,
        f64::from(f32::MAX),
        1.000_000_119_209_289_6,
        1e300,
        // f16 ties: to even below (1 + 2^-11, 2^-25) and above (1 + 3 * 2^-11, 3 * 2^-25).
        1.0 + 2f64.powi(-11),
        1.0 + 3.0 * 2f64.powi(-11),
        2f64.powi(-25),
        3.0 * 2f64.powi(-25),
        // f64 → f16 rounds through f32: this tie-plus-a-bit lands on the even 1.0.
        1.0 + 2f64.powi(-11) + 2f64.powi(-40),
        // bf16 ties: to even (1 + 2^-8), and a tie plus the lowest f32 bit (up).
        1.0 + 2f64.powi(-8),
        1.0 + 2f64.powi(-8) + 2f64.powi(-23),
        1.0 + 2f64.powi(-8) + 2f64.powi(-40),
    ];
    let mut v: Vec<f64> = edge.to_vec();
    while v.len() < n {
        let r = rng.next();
        v.push(match r % 3 {
            0 => f64::from(rng.f32(-300.0, 300.0)),
            1 => f64::from(f32::from_bits((r >> 32) as u32)),
            _ => f64::from(rng.f32(-1.0, 1.0)) * 1e-4,
        });
    }
    v
}

#[test]
fn cast_every_dtype_pair() {
    let mut rng = Rng(0xca57);
    let sources = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ];
    for from in sources {
        // Not a multiple of 4: the f32 <-> f16 vector loop and its scalar tail.
        let n = 67;
        let x = if from.is_float() {
            Tensor::from_f64(from, vec![n], &float_values(&mut rng, n))
        } else {
            ints(&mut rng, from, &[n], false)
        };
        for to in sources {
            let m = ModelBuilder::new("c", 13)
                .input("x", from, &dims(&[n]))
                .output("y", to, &dims(&[n]))
                .node(
                    "n",
                    "Cast",
                    &["x"],
                    &["y"],
                    vec![("to", Attr::Int(i64::from(to.to_onnx())))],
                )
                .build();
            check_exact(m, std::slice::from_ref(&x));
        }
    }
}

#[test]
fn comparisons_with_broadcasting() {
    let mut rng = Rng(1717);
    // The second shape broadcasts b along the innermost dim (a splat in the four-lane step).
    let shapes: [Shapes3<'_>; 2] = [
        (&[2, 1, 5], &[3, 5], &[2, 3, 5]),
        (&[2, 3, 6], &[3, 1], &[2, 3, 6]),
    ];
    for s in shapes {
        for dt in [
            DType::F32,
            DType::F64,
            DType::F16,
            DType::I64,
            DType::I32,
            DType::U8,
            DType::U64,
        ] {
            for op in ["Equal", "Less", "Greater"] {
                let m = binary(op, dt, DType::Bool, s).build();
                let make = |rng: &mut Rng, shape: &[usize]| {
                    if dt.is_float() {
                        // Small integers so that equal pairs occur, and one NaN.
                        let n: usize = shape.iter().product();
                        let mut v: Vec<f64> =
                            (0..n).map(|_| (rng.next() % 5) as f64 - 2.0).collect();
                        v[0] = f64::NAN;
                        Tensor::from_f64(dt, shape.to_vec(), &v)
                    } else {
                        let n: usize = shape.iter().product();
                        let v: Vec<i64> = (0..n).map(|_| (rng.next() % 5) as i64 - 2).collect();
                        Tensor::from_i64(dt, shape.to_vec(), &v)
                    }
                };
                let ins = [make(&mut rng, s.0), make(&mut rng, s.1)];
                check_exact(m, &ins);
            }
        }
    }
    let s = shapes[0];
    let m = binary("Equal", DType::Bool, DType::Bool, s).build();
    let a = Tensor::from_i64(DType::Bool, vec![2, 1, 5], &[1, 0, 1, 1, 0, 0, 1, 0, 0, 1]);
    let b = ints(&mut rng, DType::Bool, &[3, 5], false);
    check_exact(m, &[a, b]);
}

#[test]
fn float_mod() {
    let mut rng = Rng(808);
    for dt in [DType::F32, DType::F64] {
        let m = ModelBuilder::new("m", 13)
            .input("a", dt, &dims(&[4, 16]))
            .input("b", dt, &dims(&[16]))
            .output("y", dt, &dims(&[4, 16]))
            .node(
                "n",
                "Mod",
                &["a", "b"],
                &["y"],
                vec![("fmod", Attr::Int(1))],
            )
            .build();
        let a: Vec<f64> = (0..64)
            .map(|i| f64::from(rng.f32(-1000.0, 1000.0)) * if i % 7 == 0 { 1e5 } else { 1.0 })
            .collect();
        let mut b: Vec<f64> = (0..16).map(|_| f64::from(rng.f32(-10.0, 10.0))).collect();
        b[3] = 0.0;
        b[4] = f64::INFINITY;
        b[5] = 0.1;
        let ins = [
            Tensor::from_f64(dt, vec![4, 16], &a),
            Tensor::from_f64(dt, vec![16], &b),
        ];
        check_exact(m, &ins);
    }
}

#[test]
fn where_on_every_element_size() {
    let mut rng = Rng(2024);
    for dt in [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::I64,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::Bool,
    ] {
        // Innermost 7: one four-lane step and a scalar tail; y broadcast along it.
        let m = ModelBuilder::new("w", 13)
            .input("c", DType::Bool, &dims(&[2, 1, 7]))
            .input("x", dt, &dims(&[3, 7]))
            .input("y", dt, &dims(&[2, 3, 1]))
            .output("o", dt, &dims(&[2, 3, 7]))
            .node("w", "Where", &["c", "x", "y"], &["o"], vec![])
            .build();
        let ins = [
            ints(&mut rng, DType::Bool, &[2, 1, 7], false),
            ints(&mut rng, dt, &[3, 7], false),
            ints(&mut rng, dt, &[2, 3, 1], false),
        ];
        check_exact(m, &ins);
    }
}

#[test]
fn unsupported_dtypes_are_errors() {
    // f16 Pow runs on the host kernel up to 8 dims; beyond, no kernel.
    let nine = [1, 1, 1, 1, 1, 1, 1, 1, 3];
    let cases = [(
        "Pow",
        DType::F16,
        DType::F16,
        "no kernel for Pow of f16 ^ f16",
    )];
    for (op, dt, out, msg) in cases {
        let mut b = ModelBuilder::new("u", 13)
            .input("a", dt, &dims(&nine))
            .output("y", out, &dims(&nine));
        b = if op == "Cast" {
            b.node(
                "bad",
                op,
                &["a"],
                &["y"],
                vec![("to", Attr::Int(i64::from(out.to_onnx())))],
            )
        } else {
            b.input("b", dt, &dims(&nine))
                .node("bad", op, &["a", "b"], &["y"], vec![])
        };
        let g = import(&b.build());
        let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
        let err = compile(&g, &plan).expect_err("no kernel");
        let text = err.to_string();
        assert!(
            text.contains(&format!("node 'bad' ({op})")) && text.contains(msg),
            "{text}"
        );
    }
}
