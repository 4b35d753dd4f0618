//! The storage types (8-/4-bit floats, 4-/2-bit integers): Cast between each of them and
//! every dtype in both directions, under every saturate / round_mode, byte for byte against
//! the reference evaluation; storage tensors through views, Transpose and graph outputs;
//! float8/float4 QuantizeLinear and DequantizeLinear; the errors for ops that do not take them.

use arenac_compiler::ir::lowp::{self, CastMode};

use crate::common::*;

const STORAGE: [DType; 10] = [
    DType::F8E4M3FN,
    DType::F8E4M3FNUZ,
    DType::F8E5M2,
    DType::F8E5M2FNUZ,
    DType::F8E8M0,
    DType::F4E2M1,
    DType::I4,
    DType::U4,
    DType::I2,
    DType::U2,
];

/// Values that exercise every conversion: zeros, ties, subnormals of the small formats,
/// overflow of each, infinities and NaN (integer sources truncate and wrap them).
const VALUES: [f64; 24] = [
    0.0,
    -0.0,
    0.5,
    -1.5,
    2.5,
    5.0,
    -7.0,
    9.0,
    -9.0,
    100.0,
    1.0625,
    0.001_953_125,
    1e-7,
    -1e-7,
    240.0,
    448.0,
    464.0,
    -500.0,
    57344.0,
    61440.0,
    1e6,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

/// Runs `model` by the JIT and by the reference on `inputs`: the outputs must be the same
/// bytes.
fn check_bytes(model: ModelProto, inputs: &[Tensor], what: &str) {
    let g = import(&model);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("{what}: compiles: {e}"));
    let got = run(&exe, inputs);
    let want = eval_graph(&g, inputs).expect("reference");
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.ty(), b.ty(), "{what}");
        for (i, (x, y)) in a.bytes().iter().zip(b.bytes().iter()).enumerate() {
            assert_eq!(x, y, "{what}: byte {i} ({:?})", a.dtype());
        }
    }
}

fn cast_model(from: DType, to: DType, n: usize, attrs: Vec<(&'static str, Attr)>) -> ModelProto {
    let mut a = vec![("to", Attr::Int(i64::from(to.to_onnx())))];
    a.extend(attrs);
    ModelBuilder::new("cast", 24)
        .input("x", from, &dims(&[n]))
        .node("c", "Cast", &["x"], &["y"], a)
        .output("y", to, &dims(&[n]))
        .build()
}

/// Every mode that changes a cast to `to`.
fn modes(to: DType) -> Vec<Vec<(&'static str, Attr)>> {
    let sat = |s: i64| ("saturate", Attr::Int(s));
    let round = |r: &str| ("round_mode", Attr::Str(r.to_string()));
    match to {
        DType::F8E8M0 => [0, 1]
            .into_iter()
            .flat_map(|s| ["up", "down", "nearest"].map(|r| vec![sat(s), round(r)]))
            .collect(),
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ => {
            vec![vec![sat(0)], vec![sat(1)]]
        }
        _ => vec![vec![]],
    }
}

#[test]
fn casts_to_and_from_every_dtype() {
    let mut models = 0;
    for s in STORAGE {
        for d in DType::ALL {
            let into_s = Tensor::from_f64(d, vec![VALUES.len()], &VALUES);
            for attrs in modes(s) {
                let what = format!("Cast {d} -> {s} {attrs:?}");
                check_bytes(
                    cast_model(d, s, VALUES.len(), attrs),
                    std::slice::from_ref(&into_s),
                    &what,
                );
                models += 1;
            }
            // Every code of the storage type (its low bits), back to `d`.
            let codes: Vec<u8> = (0..=255u8).map(|c| lowp::canonical(s, c)).collect();
            let from_s = Tensor::from_bytes(s, vec![256], codes.into()).expect("codes");
            for attrs in modes(d) {
                let what = format!("Cast {s} -> {d} {attrs:?}");
                check_bytes(
                    cast_model(s, d, 256, attrs),
                    std::slice::from_ref(&from_s),
                    &what,
                );
                models += 1;
            }
        }
    }
    assert!(models > 460, "{models}");
}

/// The JIT's Cast to float8 is onnx's, not only the reference's: f32 inputs against the
/// conversion functions that `compiler/tests/lowp.rs` checks against onnx's values.
#[test]
fn cast_to_float8_is_the_lowp_conversion() {
    let xs: Vec<f32> = VALUES.iter().map(|&v| v as f32).collect();
    let x = Tensor::f32(vec![xs.len()], &xs);
    for to in [DType::F8E4M3FN, DType::F8E5M2FNUZ] {
        for saturate in [false, true] {
            let attrs = vec![("saturate", Attr::Int(i64::from(saturate)))];
            let g = import(&cast_model(DType::F32, to, xs.len(), attrs));
            let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
            let exe = compile(&g, &plan).expect("compiles");
            let got = run(&exe, std::slice::from_ref(&x));
            let mode = CastMode {
                saturate,
                ..CastMode::DEFAULT
            };
            let want: Vec<u8> = xs
                .iter()
                .map(|&v| lowp::encode_float(to, v, mode))
                .collect();
            assert_eq!(got[0].bytes().as_ref(), want.as_slice(), "{to} {saturate}");
        }
    }
}

/// Storage tensors move through views, Transpose and Pad, come out of ConstantOfShape, stay
/// graph outputs, and cast back.
#[test]
fn views_and_transpose_carry_storage_types() {
    for s in STORAGE {
        let codes: Vec<u8> = (0..24u8).map(|c| lowp::canonical(s, c * 11)).collect();
        let x = Tensor::from_bytes(s, vec![2, 3, 4], codes.into()).expect("codes");
        let kv = Attr::Tensor(Tensor::from_f64(s, vec![1], &[3.0]));
        let model = ModelBuilder::new("views", 24)
            .input("x", s, &dims(&[2, 3, 4]))
            .initializer("shape", &Tensor::i64(vec![2], &[4, 6]))
            .node(
                "t",
                "Transpose",
                &["x"],
                &["t"],
                vec![("perm", Attr::Ints(vec![2, 0, 1]))],
            )
            .node("r", "Reshape", &["t", "shape"], &["r"], vec![])
            .node("i", "Identity", &["r"], &["y"], vec![])
            .node("u", "Unsqueeze", &["r", "axes"], &["u"], vec![])
            .initializer("axes", &Tensor::i64(vec![1], &[0]))
            .node(
                "c",
                "Cast",
                &["u"],
                &["f"],
                vec![("to", Attr::Int(i64::from(DType::F32.to_onnx())))],
            )
            .node("p", "Pad", &["y", "pads", "pv"], &["p"], vec![])
            .initializer("pads", &Tensor::i64(vec![4], &[1, 0, 0, 2]))
            .initializer("pv", &Tensor::from_f64(s, vec![], &[-1.5]))
            .node(
                "k",
                "ConstantOfShape",
                &["kshape"],
                &["k"],
                vec![("value", kv.clone())],
            )
            .initializer("kshape", &Tensor::i64(vec![1], &[3]))
            .output("y", s, &dims(&[4, 6]))
            .output("f", DType::F32, &dims(&[1, 4, 6]))
            .output("p", s, &dims(&[5, 8]))
            .output("k", s, &dims(&[3]))
            .build();
        check_bytes(model, &[x], &format!("views of {s}"));
    }
}

/// A storage constant (initializer, packed in the file) read by a Cast, and a constant Cast
/// folded at import into a storage output.
#[test]
fn storage_constants_unpack_and_fold() {
    for s in [DType::I4, DType::U2, DType::F4E2M1, DType::F8E4M3FN] {
        let vals = [1.0, -2.0, 3.0, 0.5, -1.0];
        let w = Tensor::from_f64(s, vec![5], &vals);
        let model = ModelBuilder::new("const", 24)
            .input("x", DType::F32, &dims(&[5]))
            .initializer("w", &w)
            .node(
                "c",
                "Cast",
                &["w"],
                &["wf"],
                vec![("to", Attr::Int(i64::from(DType::F32.to_onnx())))],
            )
            .node("a", "Add", &["x", "wf"], &["y"], vec![])
            .output("y", DType::F32, &dims(&[5]))
            .build();
        let x = Tensor::f32(vec![5], &[0.0; 5]);
        let g = import(&model);
        let got = run(
            &compile(&g, &plan_arena(&g, &PlanOptions::default()).expect("plans")).expect("c"),
            &[x],
        );
        assert_eq!(got[0].to_f64_vec(), w.to_f64_vec(), "{s}");
        // A Cast of constants folds at import; the folded storage output is copied into the
        // arena like any constant output.
        let folded = ModelBuilder::new("fold", 24)
            .input("x", DType::F32, &dims(&[1]))
            .initializer("c", &Tensor::f32(vec![5], &[1.0, -2.0, 3.0, 0.5, -1.0]))
            .node(
                "k",
                "Cast",
                &["c"],
                &["y"],
                vec![("to", Attr::Int(i64::from(s.to_onnx())))],
            )
            .output("y", s, &dims(&[5]))
            .build();
        let g = import(&folded);
        assert!(
            g.nodes()
                .all(|(_, n)| !matches!(n.op, arenac_compiler::ops::Op::Cast { .. })),
            "{s}: the Cast folds"
        );
        let got = run(
            &compile(&g, &plan_arena(&g, &PlanOptions::default()).expect("plans")).expect("c"),
            &[Tensor::f32(vec![1], &[0.0])],
        );
        assert_eq!(got[0].bytes(), w.bytes(), "{s}: folded output");
    }
}

fn quant_model(
    op: &str,
    x: DType,
    y: DType,
    zero: Option<&Tensor>,
    attrs: Vec<(&'static str, Attr)>,
) -> ModelProto {
    let mut m = ModelBuilder::new("q", 24)
        .input("x", x, &dims(&[6]))
        .initializer("s", &Tensor::f32(vec![], &[0.5]));
    let mut ins = vec!["x", "s"];
    if let Some(z) = zero {
        m = m.initializer("z", z);
        ins.push("z");
    }
    m.node("q", op, &ins, &["y"], attrs)
        .output("y", y, &dims(&[6]))
        .build()
}

#[test]
fn float8_and_float4_quantize_and_dequantize() {
    let xs = [0.0f32, 0.3, -1.7, 100.0, 300.0, -1e5];
    let x = Tensor::f32(vec![6], &xs);
    for to in [
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F4E2M1,
    ] {
        let zero = Tensor::from_f64(to, vec![], &[0.0]);
        for saturate in [0, 1] {
            let attrs = vec![("saturate", Attr::Int(saturate))];
            let model = quant_model("QuantizeLinear", DType::F32, to, Some(&zero), attrs);
            check_bytes(model.clone(), std::slice::from_ref(&x), &format!("Q {to}"));
            let g = import(&model);
            let exe = compile(&g, &plan_arena(&g, &PlanOptions::default()).expect("p"));
            let got = run(&exe.expect("compiles"), std::slice::from_ref(&x));
            let mode = CastMode {
                saturate: saturate == 1,
                ..CastMode::DEFAULT
            };
            // onnx: x / scale converted (float4 always saturates; the zero point is 0).
            let want: Vec<u8> = xs
                .iter()
                .map(|&v| lowp::encode_float(to, v / 0.5, mode))
                .collect();
            assert_eq!(
                got[0].bytes().as_ref(),
                want.as_slice(),
                "Q {to} {saturate}"
            );
        }
        let codes: Vec<u8> = [0u8, 1, 0x38, 0x7e, 0xc5, 0x7f]
            .iter()
            .map(|&c| lowp::canonical(to, c))
            .collect();
        let q = Tensor::from_bytes(to, vec![6], codes.clone().into()).expect("codes");
        let model = quant_model("DequantizeLinear", to, DType::F32, Some(&zero), vec![]);
        check_bytes(model.clone(), std::slice::from_ref(&q), &format!("DQ {to}"));
        let g = import(&model);
        let exe = compile(&g, &plan_arena(&g, &PlanOptions::default()).expect("p"));
        let got = run(&exe.expect("compiles"), &[q]).remove(0).to_f32_vec();
        for (g, &c) in got.iter().zip(&codes) {
            let want = lowp::decode_float(to, c) * 0.5;
            assert!(
                g.to_bits() == want.to_bits() || g.is_nan() && want.is_nan(),
                "{to}"
            );
        }
    }
}

#[test]
fn a_nonzero_float8_zero_point_is_an_error() {
    let zero = Tensor::from_f64(DType::F8E5M2, vec![], &[1.0]);
    for op in ["QuantizeLinear", "DequantizeLinear"] {
        let (x, y) = if op == "QuantizeLinear" {
            (DType::F32, DType::F8E5M2)
        } else {
            (DType::F8E5M2, DType::F32)
        };
        let model = quant_model(op, x, y, Some(&zero), vec![]);
        let err = import_model(&model, None, &ImportOptions::default())
            .expect_err("refused")
            .to_string();
        assert!(err.contains("'q'") && err.contains("must be 0"), "{err}");
    }
}

/// Ops other than Cast, views, Transpose, Expand, Pad and ConstantOfShape refuse the storage
/// types, naming the node, the op, the type and what to do.
#[test]
fn other_ops_refuse_storage_types() {
    let add = ModelBuilder::new("add", 24)
        .input("a", DType::F8E4M3FN, &dims(&[3]))
        .input("b", DType::F8E4M3FN, &dims(&[3]))
        .node("plus", "Add", &["a", "b"], &["y"], vec![])
        .output("y", DType::F8E4M3FN, &dims(&[3]))
        .build();
    let relu = ModelBuilder::new("relu", 24)
        .input("a", DType::I4, &dims(&[3]))
        .node("r", "Relu", &["a"], &["y"], vec![])
        .output("y", DType::I4, &dims(&[3]))
        .build();
    for (model, node, op, dt) in [(add, "plus", "Add", "f8e4m3fn"), (relu, "r", "Relu", "i4")] {
        let err = import_model(&model, None, &ImportOptions::default())
            .expect_err("refused")
            .to_string();
        for part in [node, op, dt, "Cast to a wider type first"] {
            assert!(err.contains(part), "{part}: {err}");
        }
    }
}
