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

fn pick(rng: &mut Rng, lo: usize, hi: usize) -> usize {
    lo + (rng.next() as usize) % (hi - lo + 1)
}

/// A random shape of rank `lo..=hi` with dims in `1..=6`.
fn random_shape(rng: &mut Rng, lo: usize, hi: usize) -> Vec<usize> {
    let r = pick(rng, lo, hi);
    (0..r).map(|_| pick(rng, 1, 6)).collect()
}

/// Adds parameter `name` as a run-time input (`runtime`) or a constant.
fn param(
    mb: ModelBuilder,
    inputs: &mut Vec<Tensor>,
    name: &str,
    t: Tensor,
    runtime: bool,
) -> ModelBuilder {
    if runtime {
        let s = t.shape().to_vec();
        inputs.push(t);
        mb.input(name, DType::F32, &dims(&s))
    } else {
        mb.initializer(name, &t)
    }
}

#[test]
fn instance_and_group_normalization_random() {
    let mut rng = Rng(0x1a57);
    for case in 0..40 {
        let mut s = random_shape(&mut rng, 2, 5);
        let groups = pick(&mut rng, 1, 3);
        s[1] = groups * pick(&mut rng, 1, 3);
        let c = s[1];
        let runtime = case % 2 == 0;
        let eps = [1e-5, 1e-2][case % 2];
        let (op, opset, plen): (&str, i64, usize) = match case % 3 {
            0 => ("InstanceNormalization", 6 + (case % 17) as i64, c),
            1 => ("GroupNormalization", 21, c),
            _ => ("GroupNormalization", 18, groups),
        };
        let mut inputs = vec![rng.tensor(&s, -3.0, 3.0)];
        let mut mb = ModelBuilder::new("n", opset.max(7)).input("x", DType::F32, &dims(&s));
        mb = param(mb, &mut inputs, "g", rng.tensor(&[plen], 0.5, 2.0), runtime);
        mb = param(
            mb,
            &mut inputs,
            "b",
            rng.tensor(&[plen], -1.0, 1.0),
            runtime,
        );
        let mut attrs = vec![("epsilon", Attr::Float(eps))];
        if op == "GroupNormalization" {
            attrs.push(("num_groups", Attr::Int(groups as i64)));
        }
        let m = mb
            .output("y", DType::F32, &dims(&s))
            .node("n", op, &["x", "g", "b"], &["y"], attrs)
            .build();
        check(m, &inputs, RTOL, ATOL);
    }
}

#[test]
fn mean_variance_and_rms_normalization_random() {
    let mut rng = Rng(0x3e4);
    for case in 0..40 {
        let s = random_shape(&mut rng, 1, 5);
        let r = s.len();
        let mut inputs = vec![rng.tensor(&s, -3.0, 3.0)];
        let mb = ModelBuilder::new("n", 23).input("x", DType::F32, &dims(&s));
        let m = if case % 2 == 0 {
            // A random non-empty subset of the axes, negative half the time.
            let mut axes: Vec<i64> = (0..r as i64)
                .filter(|_| rng.next().is_multiple_of(2))
                .collect();
            if axes.is_empty() {
                axes.push((rng.next() % r as u64) as i64);
            }
            if case % 4 == 0 {
                axes.iter_mut().for_each(|a| *a -= r as i64);
            }
            let attrs = if r == 4 && case % 8 == 2 {
                vec![]
            } else {
                vec![("axes", Attr::Ints(axes))]
            };
            mb.output("y", DType::F32, &dims(&s))
                .node("n", "MeanVarianceNormalization", &["x"], &["y"], attrs)
                .build()
        } else {
            let axis = pick(&mut rng, 0, r - 1);
            // The scale: the normalized dims, some broadcast as 1, leading ones dropped.
            let mut ps: Vec<usize> = s[axis..]
                .iter()
                .map(|&d| if rng.next().is_multiple_of(3) { 1 } else { d })
                .collect();
            if rng.next().is_multiple_of(2) && ps.len() > 1 {
                ps.remove(0);
            }
            let mb = param(
                mb,
                &mut inputs,
                "g",
                rng.tensor(&ps, 0.5, 2.0),
                case % 3 == 0,
            );
            let neg = if case % 4 == 1 { r as i64 } else { 0 };
            mb.output("y", DType::F32, &dims(&s))
                .node(
                    "n",
                    "RMSNormalization",
                    &["x", "g"],
                    &["y"],
                    vec![
                        ("axis", Attr::Int(axis as i64 - neg)),
                        ("epsilon", Attr::Float(1e-3)),
                    ],
                )
                .build()
        };
        check(m, &inputs, RTOL, ATOL);
    }
}

#[test]
fn layer_normalization_statistics_outputs() {
    let mut rng = Rng(0x5a7);
    for case in 0..30 {
        let s = random_shape(&mut rng, 1, 4);
        let r = s.len();
        let axis = pick(&mut rng, 0, r - 1);
        let mut stat = s[..axis].to_vec();
        stat.resize(r, 1);
        let mut inputs = vec![rng.tensor(&s, -3.0, 3.0)];
        let mut mb = ModelBuilder::new("ln", 17).input("x", DType::F32, &dims(&s));
        // Scale and bias over the normalized dims, sometimes broadcast along some of them.
        let ps: Vec<usize> = s[axis..]
            .iter()
            .map(|&d| {
                if case % 3 == 1 && rng.next().is_multiple_of(2) {
                    1
                } else {
                    d
                }
            })
            .collect();
        mb = param(
            mb,
            &mut inputs,
            "g",
            rng.tensor(&ps, 0.5, 2.0),
            case % 2 == 0,
        );
        let mut ins = vec!["x", "g"];
        if case % 4 != 3 {
            mb = param(
                mb,
                &mut inputs,
                "b",
                rng.tensor(&ps, -1.0, 1.0),
                case % 3 == 0,
            );
            ins.push("b");
        }
        // All three outputs, or Y and one statistic.
        let outs: &[&str] = match case % 3 {
            0 => &["y", "mean", "inv"],
            1 => &["y", "mean"],
            _ => &["y", "", "inv"],
        };
        mb = mb.output("y", DType::F32, &dims(&s));
        for &o in &outs[1..] {
            if !o.is_empty() {
                mb = mb.output(o, DType::F32, &dims(&stat));
            }
        }
        let m = mb
            .node(
                "ln",
                "LayerNormalization",
                &ins,
                outs,
                vec![
                    ("axis", Attr::Int(axis as i64)),
                    ("epsilon", Attr::Float(1e-4)),
                ],
            )
            .build();
        check(m, &inputs, RTOL, ATOL);
    }
}

#[test]
fn batch_normalization_runtime_parameters_and_training() {
    let mut rng = Rng(0xb17);
    for case in 0..24 {
        let mut s = random_shape(&mut rng, 2, 5);
        s[0] = pick(&mut rng, 1, 3);
        let c = s[1];
        let training = case % 2 == 1;
        let mut inputs = vec![rng.tensor(&s, -3.0, 3.0)];
        let mut mb = ModelBuilder::new("bn", 15).input("x", DType::F32, &dims(&s));
        for (i, (name, lo, hi)) in [
            ("scale", 0.5, 2.0),
            ("bias", -1.0, 1.0),
            ("mean", -1.0, 1.0),
            ("var", 0.5, 2.0),
        ]
        .into_iter()
        .enumerate()
        {
            // At least one run-time parameter unless in training mode.
            let runtime = (case / 2 + i) % 3 != 0;
            mb = param(mb, &mut inputs, name, rng.tensor(&[c], lo, hi), runtime);
        }
        let mut attrs = vec![("epsilon", Attr::Float(1e-3))];
        let outs: &[&str] = if training {
            attrs.push(("training_mode", Attr::Int(1)));
            attrs.push(("momentum", Attr::Float(0.8)));
            mb = mb
                .output("rm", DType::F32, &dims(&[c]))
                .output("rv", DType::F32, &dims(&[c]));
            &["y", "rm", "rv"]
        } else {
            &["y"]
        };
        let m = mb
            .output("y", DType::F32, &dims(&s))
            .node(
                "bn",
                "BatchNormalization",
                &["x", "scale", "bias", "mean", "var"],
                outs,
                attrs,
            )
            .build();
        check(m, &inputs, RTOL, ATOL);
    }
}
