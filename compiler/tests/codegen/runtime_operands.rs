//! Operands that decide no shape, computed at run time (never frozen): Clip's min/max (the
//! log-mel `max - 80 dB` floor), Pad's constant_value, Trilu's k. Each kernel against the
//! reference evaluation, on every dtype family it serves, and fused into element-wise chains.

use arenac_compiler::arena::plan_graph;
use arenac_compiler::ops::Op;

use crate::common::*;

/// Random values of `dtype` (integers in `[-20, 20)`, or `[0, 40)` when unsigned).
fn values(rng: &mut Rng, dtype: DType, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    if dtype.is_float() {
        let v: Vec<f64> = (0..n).map(|_| f64::from(rng.f32(-4.0, 4.0))).collect();
        return Tensor::from_f64(dtype, shape.to_vec(), &v);
    }
    let unsigned = matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64);
    let v: Vec<i64> = (0..n)
        .map(|_| (rng.next() % 40) as i64 - if unsigned { 0 } else { 20 })
        .collect();
    Tensor::from_i64(dtype, shape.to_vec(), &v)
}

/// `Clip(x, lo?, hi?)` with the given bounds as graph inputs (`None`: omitted).
fn clip_model(dtype: DType, x: &[usize], lo: Option<&[usize]>, hi: Option<&[usize]>) -> ModelProto {
    let mut b = ModelBuilder::new("clip", 13).input("x", dtype, &dims(x));
    let mut ins = vec!["x"];
    for (name, shape) in [("lo", lo), ("hi", hi)] {
        match shape {
            Some(s) => {
                b = b.input(name, dtype, &dims(s));
                ins.push(name);
            }
            None => ins.push(""),
        }
    }
    while ins.last() == Some(&"") {
        ins.pop();
    }
    b.output("y", dtype, &[])
        .node("clip", "Clip", &ins, &["y"], vec![])
        .build()
}

#[test]
fn clip_with_run_time_bounds() {
    let mut rng = Rng(0xc11b);
    let dtypes = [
        DType::F32,
        DType::F16,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::I8,
    ];
    let xs: [&[usize]; 4] = [&[2, 3, 5], &[7], &[], &[1, 9]];
    let bound_shapes: [&[usize]; 2] = [&[], &[1]];
    for dtype in dtypes {
        for x_shape in xs {
            for bs in bound_shapes {
                for (lo, hi) in [(true, true), (true, false), (false, true)] {
                    let m = clip_model(dtype, x_shape, lo.then_some(bs), hi.then_some(bs));
                    let g = import(&m);
                    let clip = g.nodes().find(|(_, n)| n.name == "clip").expect("a node");
                    assert_eq!(
                        clip.1.op,
                        Op::ClipDynamic { min: lo, max: hi },
                        "the bounds stay run-time inputs"
                    );
                    let mut inputs = vec![values(&mut rng, dtype, x_shape)];
                    for given in [lo, hi] {
                        if given {
                            inputs.push(values(&mut rng, dtype, bs));
                        }
                    }
                    check_graph(&g, &inputs, 0.0, 0.0);
                }
            }
        }
    }
}

/// A bound larger than the other (min > max gives max everywhere), and a constant bound
/// beside a run-time one.
#[test]
fn clip_mixed_and_crossed_bounds() {
    let m = ModelBuilder::new("clip", 13)
        .input("x", DType::F32, &dims(&[6]))
        .input("hi", DType::F32, &dims(&[]))
        .initializer("lo", &Tensor::f32(vec![], &[0.5]))
        .output("y", DType::F32, &[])
        .node("clip", "Clip", &["x", "lo", "hi"], &["y"], vec![])
        .build();
    let x = Tensor::f32(vec![6], &[-2.0, 0.0, 0.5, 0.7, 3.0, 9.0]);
    let g = import(&m);
    for hi in [1.0f32, 0.25, 100.0] {
        let exe = check_graph(&g, &[x.clone(), Tensor::f32(vec![], &[hi])], 0.0, 0.0);
        let y = run(&exe, &[x.clone(), Tensor::f32(vec![], &[hi])]);
        let want: Vec<f32> = x.to_f32_vec().iter().map(|v| v.max(0.5).min(hi)).collect();
        assert_eq!(y[0].to_f32_vec(), want, "hi = {hi}");
    }
}

/// The log-mel front end's dynamic range: `y = Clip(x, ReduceMax(x) - 80)` then scaled, with
/// the element-wise tail fused: the ClipDynamic joins the fused program, and one compiled
/// program serves every input.
#[test]
fn log_mel_floor_fuses_and_serves_any_input() {
    let m = ModelBuilder::new("logmel", 18)
        .input("x", DType::F32, &dims(&[1, 8, 20]))
        .initializer("range", &Tensor::f32(vec![], &[80.0]))
        .initializer("k", &Tensor::f32(vec![], &[0.1]))
        .output("y", DType::F32, &[])
        .node(
            "max",
            "ReduceMax",
            &["x"],
            &["m"],
            vec![("keepdims", Attr::Int(0))],
        )
        .node("floor", "Sub", &["m", "range"], &["lo"], vec![])
        .node("clip", "Clip", &["x", "lo"], &["c"], vec![])
        .node("scale", "Mul", &["c", "k"], &["s"], vec![])
        .node("exp", "Exp", &["s"], &["y"], vec![])
        .build();
    let unfused = import(&m);
    let mut g = unfused.clone();
    let plan = plan_graph(&mut g, &PlanOptions::default()).expect("plans");
    let fused = g
        .nodes()
        .find_map(|(_, n)| match &n.op {
            Op::FusedElementwise(a) => Some(a.program()),
            _ => None,
        })
        .expect("a fused node");
    assert!(fused.contains("Clip[min=input max=none]"), "{fused}");
    let exe = compile(&g, &plan).expect("compiles");
    let mut rng = Rng(0x10_9e1);
    for (lo, hi) in [(-100.0, 0.0), (-30.0, 60.0), (-200.0, -150.0)] {
        // Spread wider than 80 dB so the floor clips something.
        let x = rng.tensor(&[1, 8, 20], lo, hi);
        let got = run(&exe, std::slice::from_ref(&x));
        let want = eval_graph(&unfused, std::slice::from_ref(&x)).expect("reference");
        let max = x.to_f32_vec().iter().fold(f32::MIN, |a, &b| a.max(b));
        for (i, (a, b)) in got[0]
            .to_f32_vec()
            .iter()
            .zip(want[0].to_f32_vec())
            .enumerate()
        {
            assert!((a - b).abs() <= 2e-6 * b.abs(), "{i}: {a} vs {b}");
            let direct = (x.to_f32_vec()[i].max(max - 80.0) * 0.1).exp();
            assert!(
                (a - direct).abs() <= 1e-5 * direct.abs(),
                "{i}: {a} vs {direct}"
            );
        }
    }
}

#[test]
fn pad_with_run_time_value() {
    let mut rng = Rng(0x9ad);
    for dtype in [DType::F32, DType::F16, DType::U8, DType::I64, DType::I32] {
        for (x_shape, pads) in [
            (&[3, 4][..], &[1, 0, 2, 3][..]),
            (&[5], &[3, 9]),
            (&[2, 1, 3], &[0, -1, 1, 1, 2, 0]),
        ] {
            let m = ModelBuilder::new("pad", 18)
                .input("x", dtype, &dims(x_shape))
                .input("v", dtype, &dims(&[]))
                .initializer("pads", &Tensor::i64(vec![pads.len()], pads))
                .output("y", dtype, &[])
                .node("pad", "Pad", &["x", "pads", "v"], &["y"], vec![])
                .build();
            let g = import(&m);
            for _ in 0..2 {
                let x = values(&mut rng, dtype, x_shape);
                let v = values(&mut rng, dtype, &[]);
                check_graph(&g, &[x, v], 0.0, 0.0);
            }
        }
    }
}

#[test]
fn trilu_with_run_time_k() {
    let mut rng = Rng(0x7e1);
    for upper in [0, 1] {
        let m = ModelBuilder::new("trilu", 14)
            .input("x", DType::F32, &dims(&[2, 4, 5]))
            .input("k", DType::I64, &dims(&[]))
            .output("y", DType::F32, &[])
            .node(
                "trilu",
                "Trilu",
                &["x", "k"],
                &["y"],
                vec![("upper", Attr::Int(upper))],
            )
            .build();
        let g = import(&m);
        let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
        let exe = compile(&g, &plan).expect("compiles");
        // One program, every k (beyond the matrix too).
        for k in [-9, -2, -1, 0, 1, 3, 7] {
            let x = rng.tensor(&[2, 4, 5], -1.0, 1.0);
            let kt = Tensor::i64(vec![], &[k]);
            let got = run(&exe, &[x.clone(), kt.clone()]);
            let want = eval_graph(&g, &[x, kt]).expect("reference");
            assert_eq!(got[0].to_f32_vec(), want[0].to_f32_vec(), "k = {k}");
        }
    }
}

/// On integer dtypes a run-time Clip is two kernels (max, then min in place on the output):
/// the output must not take the buffer of `max`, computed here and dying at the Clip.
#[test]
fn clip_output_never_overwrites_a_bound() {
    for shape in [&[][..], &[1], &[3]] {
        let m = ModelBuilder::new("clip", 13)
            .input("x", DType::I32, &dims(shape))
            .input("lo", DType::I32, &dims(&[]))
            .input("h", DType::I32, &dims(shape))
            .initializer("zero", &Tensor::from_i64(DType::I32, vec![], &[0]))
            .output("y", DType::I32, &[])
            .node("hi", "Add", &["h", "zero"], &["hi"], vec![])
            .node("clip", "Clip", &["x", "lo", "hi"], &["y"], vec![])
            .build();
        if shape.len() == 1 && shape[0] == 3 {
            // A bound must hold one element: refused at import.
            assert!(import_model(&m, None, &ImportOptions::default()).is_err());
            continue;
        }
        let g = import(&m);
        let n: usize = shape.iter().product();
        let t = |v: i64| Tensor::from_i64(DType::I32, shape.to_vec(), &vec![v; n]);
        // lo > hi: every element is hi.
        let inputs = [t(5), Tensor::from_i64(DType::I32, vec![], &[3]), t(1)];
        let exe = check_graph(&g, &inputs, 0.0, 0.0);
        assert_eq!(run(&exe, &inputs)[0].to_i64_vec(), vec![1; n]);
    }
}
