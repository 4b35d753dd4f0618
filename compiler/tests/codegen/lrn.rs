//! LRN, GlobalMaxPool and Log (whose polynomial LRN's general power uses).

use crate::common::*;

fn lrn_model(shape: &[usize], size: i64, alpha: f32, beta: f32, bias: f32) -> ModelProto {
    ModelBuilder::new("lrn", 13)
        .input("x", DType::F32, &dims(shape))
        .output("y", DType::F32, &dims(shape))
        .node(
            "n",
            "LRN",
            &["x"],
            &["y"],
            vec![
                ("size", Attr::Int(size)),
                ("alpha", Attr::Float(alpha)),
                ("beta", Attr::Float(beta)),
                ("bias", Attr::Float(bias)),
            ],
        )
        .build()
}

#[test]
fn lrn_random_shapes_and_attributes() {
    let mut rng = Rng(0x1a2b);
    let shapes: [&[usize]; 5] = [
        &[1, 5, 3, 3],
        &[2, 7, 4, 5],
        &[1, 3, 1],
        &[1, 1, 2, 2],
        &[1, 16, 13],
    ];
    for s in shapes {
        for size in [1, 2, 3, 5, 7] {
            let alpha = rng.f32(1e-4, 2.0);
            let beta = [0.75, 0.5, 1.3, 0.0, 2.0][(rng.next() % 5) as usize];
            let bias = rng.f32(0.5, 3.0);
            let x = rng.tensor(s, -4.0, 4.0);
            check(lrn_model(s, size, alpha, beta, bias), &[x], 2e-5, 1e-6);
        }
    }
}

#[test]
fn lrn_in_a_chain() {
    // Conv-free AlexNet-like tail: Relu -> LRN -> MaxPool over a wide plane.
    let mut rng = Rng(5);
    let m = ModelBuilder::new("chain", 13)
        .input("x", DType::F32, &dims(&[1, 8, 9, 9]))
        .output("y", DType::F32, &dims(&[1, 8, 4, 4]))
        .node("r", "Relu", &["x"], &["a"], vec![])
        .node(
            "l",
            "LRN",
            &["a"],
            &["b"],
            vec![
                ("size", Attr::Int(5)),
                ("alpha", Attr::Float(1e-4)),
                ("beta", Attr::Float(0.75)),
            ],
        )
        .node(
            "p",
            "MaxPool",
            &["b"],
            &["y"],
            vec![
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("strides", Attr::Ints(vec![2, 2])),
            ],
        )
        .build();
    check(m, &[rng.tensor(&[1, 8, 9, 9], -50.0, 50.0)], 2e-5, 1e-6);
}

#[test]
fn global_max_pool() {
    let mut rng = Rng(77);
    for (s, o) in [
        (&[2, 3, 5, 5][..], &[2, 3, 1, 1][..]),
        (&[1, 4, 7], &[1, 4, 1]),
        (&[1, 2, 3, 2, 2], &[1, 2, 1, 1, 1]),
        (&[1, 3, 1, 1], &[1, 3, 1, 1]),
    ] {
        let m = ModelBuilder::new("g", 13)
            .input("x", DType::F32, &dims(s))
            .output("y", DType::F32, &dims(o))
            .node("g", "GlobalMaxPool", &["x"], &["y"], vec![])
            .build();
        check(m, &[rng.tensor(s, -9.0, 9.0)], 0.0, 0.0);
    }
}

/// ulp distance between two f32 of the same sign.
fn ulps(a: f32, b: f32) -> u64 {
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        i64::from(if i < 0 { i32::MIN - i } else { i })
    };
    (key(a) - key(b)).unsigned_abs()
}

#[test]
fn log_accuracy_and_edges() {
    // A sweep over every binade (denormals included) plus the special values; compared
    // with f64 `ln` rounded to f32, in ulps.
    let mut rng = Rng(0x106);
    let mut xs: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::MIN_POSITIVE,
        1e-45,
        1e-40,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        0.707_106_77,
        std::f32::consts::FRAC_1_SQRT_2,
        1.000_000_1,
        0.999_999_94,
        2.0,
        0.5,
    ];
    while xs.len() < 1 << 16 {
        let bits = (rng.next() >> 33) as u32; // positive: sign bit clear
        xs.push(f32::from_bits(bits & 0x7f7f_ffff));
    }
    for _ in 0..4096 {
        xs.push(rng.f32(0.5, 2.0));
    }
    let n = xs.len();
    let m = ModelBuilder::new("log", 13)
        .input("x", DType::F32, &dims(&[n]))
        .output("y", DType::F32, &dims(&[n]))
        .node("l", "Log", &["x"], &["y"], vec![])
        .build();
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).expect("compiles");
    let y = run(&exe, &[Tensor::f32(vec![n], &xs)])[0].to_f32_vec();
    let (mut worst, mut worst_abs) = (0u64, 0f64);
    for (&x, &got) in xs.iter().zip(&y) {
        let want = f64::from(x).ln();
        if want.is_nan() {
            assert!(got.is_nan(), "ln({x:e}) = {got}, want NaN");
            continue;
        }
        if want.is_infinite() {
            assert_eq!(f64::from(got), want, "ln({x:e})");
            continue;
        }
        worst = worst.max(ulps(got, want as f32));
        worst_abs = worst_abs.max((f64::from(got) - want).abs());
    }
    println!("Log: max {worst} ulp, max abs error {worst_abs:e} over {n} values");
    assert!(worst <= 2, "Log max error {worst} ulp");
}

#[test]
fn log_matches_reference_on_random_shapes() {
    let mut rng = Rng(12);
    for s in [&[3, 7, 5][..], &[1], &[4], &[2, 33]] {
        let x = rng.tensor(s, 1e-3, 1e3);
        check(
            ModelBuilder::new("l", 13)
                .input("x", DType::F32, &dims(s))
                .output("y", DType::F32, &dims(s))
                .node("l", "Log", &["x"], &["y"], vec![])
                .build(),
            &[x],
            3e-7,
            3e-7,
        );
    }
}

/// Whether values `a` and `b` of `g` share an arena buffer in its default plan.
fn shares(g: &Graph, a: &str, b: &str) -> bool {
    let plan = plan_arena(g, &PlanOptions::default()).expect("plans");
    let id = |n: &str| g.find_value(n).expect("value");
    plan.liveness.value_buffer.get(&id(a)) == plan.liveness.value_buffer.get(&id(b))
}

#[test]
fn lrn_in_place_when_its_input_dies() {
    // `a` dies at the LRN (in place, the ring in scratch) or is read again (separate buffers).
    let mut rng = Rng(0x11_2e);
    for case in 0..24 {
        let mut pick = |lo: usize, hi: usize| lo + (rng.next() % (hi - lo + 1) as u64) as usize;
        let rank = pick(3, 4);
        let s: Vec<usize> = [pick(1, 2), pick(1, 9)]
            .into_iter()
            .chain((2..rank).map(|_| pick(1, 7)))
            .collect();
        let size = pick(1, 7) as i64;
        let reread = case % 3 == 2;
        let attrs = vec![
            ("size", Attr::Int(size)),
            ("alpha", Attr::Float(rng.f32(1e-4, 2.0))),
            ("beta", Attr::Float(rng.f32(0.0, 2.0))),
            ("bias", Attr::Float(rng.f32(0.5, 3.0))),
        ];
        let mut m = ModelBuilder::new("lrn", 13)
            .input("x", DType::F32, &dims(&s))
            .output("y", DType::F32, &dims(&s))
            .node("r", "Relu", &["x"], &["a"], vec![]);
        m = if reread {
            m.node("l", "LRN", &["a"], &["b"], attrs).node(
                "add",
                "Add",
                &["b", "a"],
                &["y"],
                vec![],
            )
        } else {
            m.node("l", "LRN", &["a"], &["y"], attrs)
        };
        let g = import(&m.build());
        let out = if reread { "b" } else { "y" };
        assert_eq!(
            shares(&g, "a", out),
            !reread,
            "case {case} {s:?} size {size}"
        );
        check_graph(&g, &[rng.tensor(&s, -4.0, 4.0)], 2e-5, 1e-6);
    }
}

#[test]
fn pooling_in_place_when_the_geometry_allows() {
    // `a` = Expand of a narrow input, so writing the pooled output over `a` lowers the peak;
    // the plan does so exactly when the kernel's row condition holds (random geometry,
    // stride 1, pads, ceil_mode, dilations), and the results match the reference.
    use arenac_compiler::gemm::pool::{in_place_ok, pool_params};
    let mut rng = Rng(0x900d_1dea);
    let (mut done, mut in_place, mut stride1) = (0, 0, 0);
    while done < 120 {
        let mut pick = |lo: usize, hi: usize| lo + (rng.next() % (hi - lo + 1) as u64) as usize;
        let d = pick(1, 2);
        let (n, c) = (pick(1, 2), pick(1, 4));
        let sp: Vec<usize> = (0..d).map(|_| pick(2, 14)).collect();
        let k: Vec<usize> = (0..d).map(|_| pick(1, 3)).collect();
        let s: Vec<usize> = (0..d).map(|_| pick(1, 3)).collect();
        let dil: Vec<usize> = (0..d).map(|_| pick(1, 2)).collect();
        let pads: Vec<usize> = (0..2 * d).map(|i| pick(0, k[i % d] - 1)).collect();
        let (ceil, max, include) = (pick(0, 1), pick(0, 1) == 1, pick(0, 1));
        let Some(out_sp) = (0..d)
            .map(|i| {
                crate::dense::pooled(sp[i], k[i], s[i], dil[i], [pads[i], pads[d + i]], ceil == 1)
            })
            .collect::<Option<Vec<usize>>>()
        else {
            continue;
        };
        let x: Vec<usize> = [n, c].iter().chain(&sp).copied().collect();
        let mut x0 = x.clone();
        *x0.last_mut().expect("rank") = 1;
        let y: Vec<usize> = [n, c].iter().chain(&out_sp).copied().collect();
        let i64s = |v: &[usize]| Attr::Ints(v.iter().map(|&u| u as i64).collect());
        let mut attrs = vec![
            ("kernel_shape", i64s(&k)),
            ("strides", i64s(&s)),
            ("pads", i64s(&pads)),
            ("dilations", i64s(&dil)),
            ("ceil_mode", Attr::Int(ceil as i64)),
        ];
        let op = if max {
            "MaxPool"
        } else {
            attrs.push(("count_include_pad", Attr::Int(include as i64)));
            "AveragePool"
        };
        let shape: Vec<i64> = x.iter().map(|&u| u as i64).collect();
        let model = ModelBuilder::new("pool", 19)
            .input("x0", DType::F32, &dims(&x0))
            .initializer("shape", &Tensor::i64(vec![shape.len()], &shape))
            .output("y", DType::F32, &dims(&y))
            .node("e", "Expand", &["x0", "shape"], &["a"], vec![])
            .node("p", op, &["a"], &["y"], attrs)
            .build();
        let g = import(&model);
        let ok = pool_params(&x, &y, &k, &s, &dil, &pads).is_some_and(|p| in_place_ok(&p));
        let shared = shares(&g, "a", "y");
        assert!(
            !shared || ok,
            "case {done} {op} x {x:?} k {k:?} s {s:?} pads {pads:?}"
        );
        in_place += usize::from(shared);
        stride1 += usize::from(shared && s[0] == 1);
        check_graph(&g, &[rng.tensor(&x0, -5.0, 5.0)], RTOL, ATOL);
        done += 1;
    }
    assert!(
        in_place > 10 && in_place < 110 && stride1 > 0,
        "{in_place} in place, {stride1} stride 1"
    );
}
