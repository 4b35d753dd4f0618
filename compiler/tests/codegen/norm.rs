//! Normalization and reductions: Softmax/LogSoftmax, BatchNormalization, Reduce*, LayerNormalization.

use crate::common::*;

fn softmax_model(op: &str, shape: &[usize], axis: i64, opset: i64) -> ModelProto {
    ModelBuilder::new("softmax", opset)
        .input("x", DType::F32, &dims(shape))
        .output("y", DType::F32, &dims(shape))
        .node("sm", op, &["x"], &["y"], vec![("axis", Attr::Int(axis))])
        .build()
}

#[test]
fn softmax_axes() {
    let mut rng = Rng(31337);
    let cases: [(&[usize], i64); 7] = [
        (&[3, 10], -1),
        (&[2, 3, 4], 1),
        (&[2, 6, 5], 1),
        (&[2, 3, 9], 2),
        (&[4, 3], 0),
        (&[2, 2, 3, 4], 1),
        (&[7], 0),
    ];
    for op in ["Softmax", "LogSoftmax"] {
        for opset in [11, 13] {
            for (s, axis) in cases {
                let x = rng.tensor(s, -8.0, 8.0);
                check(softmax_model(op, s, axis, opset), &[x], 1e-5, 1e-6);
            }
        }
    }
}

#[test]
fn batch_normalization() {
    let mut rng = Rng(4242);
    let s = [2, 3, 4, 5];
    let m = ModelBuilder::new("bn", 15)
        .input("x", DType::F32, &dims(&s))
        .initializer("scale", &rng.tensor(&[3], 0.5, 2.0))
        .initializer("bias", &rng.tensor(&[3], -1.0, 1.0))
        .initializer("mean", &rng.tensor(&[3], -1.0, 1.0))
        .initializer("var", &rng.tensor(&[3], 0.5, 2.0))
        .output("y", DType::F32, &dims(&s))
        .node(
            "bn",
            "BatchNormalization",
            &["x", "scale", "bias", "mean", "var"],
            &["y"],
            vec![("epsilon", Attr::Float(1e-5))],
        )
        .build();
    check(m, &[rng.tensor(&s, -3.0, 3.0)], RTOL, ATOL);
}

#[test]
fn reductions_and_layer_norm() {
    let mut rng = Rng(321);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    for op in ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"] {
        for (s, axes, keep, out) in [
            (vec![2, 3, 4, 5], vec![2, 3], 1, vec![2, 3, 1, 1]),
            (vec![2, 3, 4], vec![1], 0, vec![2, 4]),
            (vec![3, 7], vec![0, 1], 0, vec![]),
        ] {
            let m = ModelBuilder::new("r", 13)
                .input("x", DType::F32, &dims(&s))
                .output("y", DType::F32, &dims(&out))
                .node(
                    "r",
                    op,
                    &["x"],
                    &["y"],
                    vec![("axes", ints(&axes)), ("keepdims", Attr::Int(keep))],
                )
                .build();
            check(m, &[rng.tensor(&s, -2.0, 2.0)], RTOL, ATOL);
        }
    }
    for (s, axis, bias) in [
        (vec![4, 10], -1, true),
        (vec![2, 3, 7], 1, false),
        (vec![2, 3], -1, true),
    ] {
        let ax = if axis < 0 { s.len() - 1 } else { axis as usize };
        let ps: Vec<usize> = s[ax..].to_vec();
        let mut mb = ModelBuilder::new("ln", 17)
            .input("x", DType::F32, &dims(&s))
            .initializer("g", &rng.tensor(&ps, 0.5, 1.5));
        let mut ins = vec!["x", "g"];
        if bias {
            mb = mb.initializer("b", &rng.tensor(&ps, -1.0, 1.0));
            ins.push("b");
        }
        let m = mb
            .output("y", DType::F32, &dims(&s))
            .node(
                "ln",
                "LayerNormalization",
                &ins,
                &["y"],
                vec![("axis", Attr::Int(axis)), ("epsilon", Attr::Float(1e-5))],
            )
            .build();
        check(m, &[rng.tensor(&s, -2.0, 2.0)], RTOL, ATOL);
    }
}
