//! The reduction family on every dtype it supports: Reduce* (all ten kinds), ArgMax/ArgMin,
//! Hardmax, CumSum/CumProd, TopK, LpNormalization, on random shapes (empty dims included)
//! and attributes, against the reference evaluation: integers and bools byte for byte, floats
//! within `rtol * (1 + |want|)` (NaN equals NaN).

use crate::common::*;

const KINDS: [&str; 10] = [
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceProd",
    "ReduceSumSquare",
];

const DTYPES: [DType; 7] = [
    DType::F32,
    DType::F64,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U64,
    DType::I8,
];

/// Random values of `dt`: floats in [-3, 3) with ties (some values repeat), integers in
/// [-6, 6] (wrapped into unsigned types), bools 0/1.
fn values(rng: &mut Rng, dt: DType, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    if dt.is_float() {
        let v: Vec<f64> = (0..n)
            .map(|_| {
                let x = f64::from(rng.f32(-3.0, 3.0));
                if rng.next().is_multiple_of(4) {
                    x.round()
                } else {
                    x
                }
            })
            .collect();
        return Tensor::from_f64(dt, shape.to_vec(), &v);
    }
    let v: Vec<i64> = (0..n)
        .map(|_| {
            let r = (rng.next() >> 8) as i64;
            if dt == DType::Bool { r % 2 } else { r % 13 - 6 }
        })
        .collect();
    Tensor::from_i64(dt, shape.to_vec(), &v)
}

fn random_shape(rng: &mut Rng, max_rank: usize, allow_empty: bool) -> Vec<usize> {
    let rank = 1 + (rng.next() as usize) % max_rank;
    (0..rank)
        .map(|_| {
            let d = (rng.next() as usize) % 5;
            if d == 0 && !allow_empty { 1 } else { d }
        })
        .collect()
}

/// Compiles, runs and compares every output with the reference.
fn check_typed(m: ModelProto, inputs: &[Tensor], rtol: f64) {
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
    let got = run(&exe, inputs);
    let want = eval_graph(&g, inputs).expect("reference");
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.dtype(), b.dtype());
        assert_eq!(a.shape(), b.shape());
        if a.dtype().is_float() {
            for (i, (x, y)) in a.to_f64_vec().iter().zip(b.to_f64_vec()).enumerate() {
                let ok = (x.is_nan() && y.is_nan())
                    || x == &y
                    || (x - y).abs() <= rtol * (1.0 + y.abs());
                assert!(
                    ok,
                    "{} element {i}: got {x:e}, want {y:e}",
                    a.dtype().name()
                );
            }
        } else {
            assert_eq!(a.bytes(), b.bytes(), "{}", a.dtype().name());
        }
    }
}

fn unary(
    op: &str,
    opset: i64,
    dt: DType,
    shape: &[usize],
    attrs: Vec<(&str, Attr)>,
) -> ModelBuilder {
    ModelBuilder::new("r", opset)
        .input("x", dt, &dims(shape))
        .output("y", dt, &[])
        .node("n", op, &["x"], &["y"], attrs)
}

#[test]
fn reductions_every_kind_and_dtype() {
    let mut rng = Rng(0xbeef_1234);
    for kind in KINDS {
        for dt in DTYPES {
            for _ in 0..6 {
                let shape = random_shape(&mut rng, 4, true);
                let rank = shape.len() as i64;
                // A random subset of axes (possibly empty: every axis), some negative.
                let mut axes: Vec<i64> = Vec::new();
                for a in 0..rank {
                    match rng.next() % 3 {
                        0 => axes.push(a),
                        1 => axes.push(a - rank),
                        _ => {}
                    }
                }
                let keepdims = (rng.next() % 2) as i64;
                let axes_t = Tensor::i64(vec![axes.len()], &axes);
                let m = ModelBuilder::new("r", 18)
                    .input("x", dt, &dims(&shape))
                    .initializer("axes", &axes_t)
                    .output("y", dt, &[])
                    .node(
                        "n",
                        kind,
                        &["x", "axes"],
                        &["y"],
                        vec![("keepdims", Attr::Int(keepdims))],
                    )
                    .build();
                // f32 Sum/Mean accumulate in f32 on the fast kernel.
                check_typed(m, &[values(&mut rng, dt, &shape)], 1e-5);
            }
        }
    }
}

#[test]
fn reduce_max_min_bool_and_empty_identities() {
    let mut rng = Rng(77);
    for kind in ["ReduceMax", "ReduceMin"] {
        for shape in [vec![2, 3, 4], vec![2, 0, 4], vec![5]] {
            let axes = Tensor::i64(vec![1], &[if shape.len() > 1 { 1 } else { 0 }]);
            let m = ModelBuilder::new("r", 20)
                .input("x", DType::Bool, &dims(&shape))
                .initializer("axes", &axes)
                .output("y", DType::Bool, &[])
                .node("n", kind, &["x", "axes"], &["y"], vec![])
                .build();
            check_typed(m, &[values(&mut rng, DType::Bool, &shape)], 0.0);
        }
    }
    // Empty sets on every kind and a float and integer dtype: the identities.
    for kind in KINDS {
        for dt in [DType::F32, DType::I64] {
            let axes = Tensor::i64(vec![1], &[1]);
            let m = ModelBuilder::new("r", 18)
                .input("x", dt, &dims(&[2, 0, 3]))
                .initializer("axes", &axes)
                .output("y", dt, &[])
                .node("n", kind, &["x", "axes"], &["y"], vec![])
                .build();
            check_typed(m, &[values(&mut rng, dt, &[2, 0, 3])], 0.0);
        }
    }
}

#[test]
fn argmax_argmin_hardmax() {
    let mut rng = Rng(0xa5a5);
    for dt in [
        DType::F32,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::U64,
        DType::U8,
    ] {
        for _ in 0..12 {
            let shape = random_shape(&mut rng, 4, false);
            let rank = shape.len() as i64;
            let axis = (rng.next() % rank as u64) as i64
                - if rng.next().is_multiple_of(2) {
                    rank
                } else {
                    0
                };
            for op in ["ArgMax", "ArgMin"] {
                let attrs = vec![
                    ("axis", Attr::Int(axis)),
                    ("keepdims", Attr::Int((rng.next() % 2) as i64)),
                    ("select_last_index", Attr::Int((rng.next() % 2) as i64)),
                ];
                let m = ModelBuilder::new("r", 13)
                    .input("x", dt, &dims(&shape))
                    .output("y", DType::I64, &[])
                    .node("n", op, &["x"], &["y"], attrs)
                    .build();
                check_typed(m, &[values(&mut rng, dt, &shape)], 0.0);
            }
            for opset in [11, 13] {
                let m = unary(
                    "Hardmax",
                    opset,
                    dt,
                    &shape,
                    vec![("axis", Attr::Int(axis))],
                )
                .build();
                check_typed(m, &[values(&mut rng, dt, &shape)], 0.0);
            }
        }
    }
    // NaN wins, first or last.
    let x = Tensor::f32(vec![2, 3], &[1.0, f32::NAN, f32::NAN, 2.0, 2.0, 1.0]);
    for last in [0, 1] {
        let m = ModelBuilder::new("r", 13)
            .input("x", DType::F32, &dims(&[2, 3]))
            .output("y", DType::I64, &[])
            .node(
                "n",
                "ArgMin",
                &["x"],
                &["y"],
                vec![
                    ("axis", Attr::Int(1)),
                    ("select_last_index", Attr::Int(last)),
                ],
            )
            .build();
        check_typed(m, std::slice::from_ref(&x), 0.0);
    }
}

#[test]
fn cumsum_cumprod_modes() {
    let mut rng = Rng(0xc0ffee);
    for (op, opset) in [("CumSum", 14), ("CumProd", 26)] {
        for dt in [DType::F32, DType::F64, DType::I32, DType::I64, DType::U64] {
            for _ in 0..8 {
                let shape = random_shape(&mut rng, 3, true);
                let rank = shape.len() as i64;
                let axis = (rng.next() % rank as u64) as i64
                    - if rng.next().is_multiple_of(2) {
                        rank
                    } else {
                        0
                    };
                let axis_t = Tensor::from_i64(DType::I32, vec![], &[axis]);
                let attrs = vec![
                    ("exclusive", Attr::Int((rng.next() % 2) as i64)),
                    ("reverse", Attr::Int((rng.next() % 2) as i64)),
                ];
                let m = ModelBuilder::new("r", opset)
                    .input("x", dt, &dims(&shape))
                    .initializer("axis", &axis_t)
                    .output("y", dt, &[])
                    .node("n", op, &["x", "axis"], &["y"], attrs)
                    .build();
                check_typed(m, &[values(&mut rng, dt, &shape)], 1e-12);
            }
        }
    }
}

#[test]
fn topk_largest_smallest_ties() {
    let mut rng = Rng(0x70b);
    for dt in [DType::F32, DType::F64, DType::I32, DType::I64, DType::U64] {
        for _ in 0..10 {
            let shape = random_shape(&mut rng, 3, true);
            let rank = shape.len() as i64;
            let a = (rng.next() % rank as u64) as usize;
            let len = shape[a] as u64;
            let k = (rng.next() % (len + 1)) as i64;
            let axis = a as i64
                - if rng.next().is_multiple_of(2) {
                    rank
                } else {
                    0
                };
            let m = ModelBuilder::new("r", 11)
                .input("x", dt, &dims(&shape))
                .initializer("k", &Tensor::i64(vec![1], &[k]))
                .output("v", dt, &[])
                .output("i", DType::I64, &[])
                .node(
                    "n",
                    "TopK",
                    &["x", "k"],
                    &["v", "i"],
                    vec![
                        ("axis", Attr::Int(axis)),
                        ("largest", Attr::Int((rng.next() % 2) as i64)),
                    ],
                )
                .build();
            check_typed(m, &[values(&mut rng, dt, &shape)], 0.0);
        }
    }
    // Longer rows: elements entering a full set, long shifts, many ties.
    for dt in [DType::F32, DType::I32] {
        for k in [1, 7, 37] {
            for largest in [0, 1] {
                let shape = [2, 37, 3];
                let m = ModelBuilder::new("r", 11)
                    .input("x", dt, &dims(&shape))
                    .initializer("k", &Tensor::i64(vec![1], &[k]))
                    .output("v", dt, &[])
                    .output("i", DType::I64, &[])
                    .node(
                        "n",
                        "TopK",
                        &["x", "k"],
                        &["v", "i"],
                        vec![("axis", Attr::Int(1)), ("largest", Attr::Int(largest))],
                    )
                    .build();
                check_typed(m, &[values(&mut rng, dt, &shape)], 0.0);
            }
        }
    }
    // NaN sorts above every number.
    let x = Tensor::f32(vec![5], &[1.0, f32::NAN, 3.0, f32::NAN, 1.0]);
    for largest in [0, 1] {
        let m = ModelBuilder::new("r", 11)
            .input("x", DType::F32, &dims(&[5]))
            .initializer("k", &Tensor::i64(vec![1], &[4]))
            .output("v", DType::F32, &[])
            .output("i", DType::I64, &[])
            .node(
                "n",
                "TopK",
                &["x", "k"],
                &["v", "i"],
                vec![("largest", Attr::Int(largest))],
            )
            .build();
        check_typed(m, std::slice::from_ref(&x), 0.0);
    }
}

#[test]
fn lp_normalization() {
    let mut rng = Rng(0x1b);
    for dt in [DType::F32, DType::F64] {
        for _ in 0..8 {
            let shape = random_shape(&mut rng, 3, true);
            let rank = shape.len() as i64;
            let axis = (rng.next() % rank as u64) as i64
                - if rng.next().is_multiple_of(2) {
                    rank
                } else {
                    0
                };
            for p in [1, 2] {
                let mut x = values(&mut rng, dt, &shape);
                if rng.next().is_multiple_of(3) {
                    // A zero norm: all zeros.
                    x = Tensor::from_f64(dt, shape.clone(), &vec![0.0; x.numel()]);
                }
                let attrs = vec![("axis", Attr::Int(axis)), ("p", Attr::Int(p))];
                let m = unary("LpNormalization", 13, dt, &shape, attrs).build();
                check_typed(m, &[x], 1e-12);
            }
        }
    }
}

#[test]
fn lp_pool_geometries() {
    let mut rng = Rng(0x1bb0);
    for dt in [DType::F32, DType::F64] {
        for case in 0..24 {
            let n = 1 + case % 3;
            let mut shape = vec![1 + (rng.next() % 2) as usize, 1 + (rng.next() % 3) as usize];
            let (mut kernel, mut strides, mut dil, mut pads) =
                (vec![], vec![], vec![], vec![0i64; 2 * n]);
            for i in 0..n {
                let k = 1 + (rng.next() % 3) as i64;
                let d = 1 + (rng.next() % 2) as i64;
                let eff = (k - 1) * d + 1;
                shape.push((eff + (rng.next() % 4) as i64) as usize);
                kernel.push(k);
                strides.push(1 + (rng.next() % 2) as i64);
                dil.push(d);
                pads[i] = (rng.next() % eff as u64) as i64;
                pads[n + i] = (rng.next() % eff as u64) as i64;
            }
            let p = [1, 2, 3, 4, 17][(rng.next() % 5) as usize];
            let mut attrs = vec![
                ("kernel_shape", Attr::Ints(kernel)),
                ("strides", Attr::Ints(strides)),
                ("dilations", Attr::Ints(dil)),
                ("p", Attr::Int(p)),
            ];
            match rng.next() % 3 {
                0 => attrs.push(("pads", Attr::Ints(pads))),
                1 => attrs.push(("auto_pad", Attr::Str("SAME_UPPER".into()))),
                _ => {
                    attrs.push(("pads", Attr::Ints(pads)));
                    attrs.push(("ceil_mode", Attr::Int(1)));
                }
            }
            let m = unary("LpPool", 18, dt, &shape, attrs).build();
            check_typed(m, &[values(&mut rng, dt, &shape)], 1e-12);
        }
    }
}
