//! Dense kernels: Gemm, MatMul, Conv, pooling.

use crate::common::*;

struct GemmCase {
    a: Vec<usize>,
    b: Vec<usize>,
    c: Option<Vec<usize>>,
    trans_a: bool,
    trans_b: bool,
    alpha: f32,
    beta: f32,
    b_const: bool,
    c_const: bool,
}

fn gemm_case(rng: &mut Rng, c: &GemmCase) {
    let (m, n) = (
        if c.trans_a { c.a[1] } else { c.a[0] },
        if c.trans_b { c.b[0] } else { c.b[1] },
    );
    let mut mb = ModelBuilder::new("gemm", 13).input("a", DType::F32, &dims(&c.a));
    let mut inputs = vec![rng.tensor(&c.a, -1.0, 1.0)];
    let bt = rng.tensor(&c.b, -1.0, 1.0);
    if c.b_const {
        mb = mb.initializer("b", &bt);
    } else {
        mb = mb.input("b", DType::F32, &dims(&c.b));
        inputs.push(bt);
    }
    let mut names = vec!["a", "b"];
    if let Some(cs) = &c.c {
        let ct = rng.tensor(cs, -1.0, 1.0);
        if c.c_const {
            mb = mb.initializer("c", &ct);
        } else {
            mb = mb.input("c", DType::F32, &dims(cs));
            inputs.push(ct);
        }
        names.push("c");
    }
    let model = mb
        .output("y", DType::F32, &dims(&[m, n]))
        .node(
            "gemm",
            "Gemm",
            &names,
            &["y"],
            vec![
                ("transA", Attr::Int(c.trans_a.into())),
                ("transB", Attr::Int(c.trans_b.into())),
                ("alpha", Attr::Float(c.alpha)),
                ("beta", Attr::Float(c.beta)),
            ],
        )
        .build();
    check(model, &inputs, RTOL, ATOL);
}

#[test]
fn gemm_variants() {
    let mut rng = Rng(2024);
    let (m, k, n) = (5, 7, 9);
    let biases: [Option<Vec<usize>>; 6] = [
        None,
        Some(vec![n]),
        Some(vec![1, n]),
        Some(vec![m, 1]),
        Some(vec![m, n]),
        Some(vec![]),
    ];
    for trans_a in [false, true] {
        for trans_b in [false, true] {
            for (i, c) in biases.iter().enumerate() {
                for b_const in [true, false] {
                    // Every alpha with both a constant B (folded into its packing) and a
                    // run-time one (scaled after the product); alpha 1 with i == 2.
                    let alpha = 0.5 + i as f32 * 0.25;
                    gemm_case(
                        &mut rng,
                        &GemmCase {
                            a: if trans_a { vec![k, m] } else { vec![m, k] },
                            b: if trans_b { vec![n, k] } else { vec![k, n] },
                            c: c.clone(),
                            trans_a,
                            trans_b,
                            alpha,
                            beta: if i % 2 == 0 { 1.0 } else { -0.75 },
                            b_const,
                            c_const: i % 3 != 1,
                        },
                    );
                }
            }
        }
    }
}

fn matmul_case(rng: &mut Rng, a: &[usize], b: &[usize], out: &[usize], b_const: bool) {
    let bt = rng.tensor(b, -1.0, 1.0);
    let mut mb = ModelBuilder::new("mm", 13).input("a", DType::F32, &dims(a));
    let mut inputs = vec![rng.tensor(a, -1.0, 1.0)];
    if b_const {
        mb = mb.initializer("b", &bt);
    } else {
        mb = mb.input("b", DType::F32, &dims(b));
        inputs.push(bt);
    }
    let model = mb
        .output("y", DType::F32, &dims(out))
        .node("mm", "MatMul", &["a", "b"], &["y"], vec![])
        .build();
    check(model, &inputs, RTOL, ATOL);
}

#[test]
fn matmul_batched_and_broadcast() {
    let mut rng = Rng(77);
    let cases: [Shapes3<'_>; 8] = [
        (&[2, 3, 4, 5], &[3, 5, 6], &[2, 3, 4, 6]),
        (&[4, 5], &[2, 5, 3], &[2, 4, 3]),
        (&[2, 3, 4], &[4, 6], &[2, 3, 6]),
        (&[5], &[5, 3], &[3]),
        (&[2, 4, 5], &[5], &[2, 4]),
        (&[3, 1, 4, 5], &[2, 5, 7], &[3, 2, 4, 7]),
        (&[1, 4, 5], &[3, 5, 2], &[3, 4, 2]),
        (&[6, 8], &[8, 10], &[6, 10]),
    ];
    for (a, b, out) in cases {
        for b_const in [false, true] {
            matmul_case(&mut rng, a, b, out, b_const);
        }
    }
}

struct ConvCase {
    x: Vec<usize>,
    w: Vec<usize>,
    y: Vec<usize>,
    attrs: Vec<(&'static str, Attr)>,
    bias: bool,
}

#[test]
fn conv_variants() {
    let mut rng = Rng(1999);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let cases = vec![
        ConvCase {
            x: vec![1, 3, 7, 7],
            w: vec![8, 3, 3, 3],
            y: vec![1, 8, 7, 7],
            attrs: vec![("pads", ints(&[1, 1, 1, 1]))],
            bias: true,
        },
        ConvCase {
            x: vec![2, 4, 9, 8],
            w: vec![6, 4, 3, 2],
            y: vec![2, 6, 4, 4],
            attrs: vec![("strides", ints(&[2, 2])), ("pads", ints(&[1, 0, 0, 1]))],
            bias: false,
        },
        ConvCase {
            x: vec![1, 6, 8, 8],
            w: vec![6, 1, 3, 3],
            y: vec![1, 6, 8, 8],
            attrs: vec![("group", Attr::Int(6)), ("pads", ints(&[1, 1, 1, 1]))],
            bias: true,
        },
        ConvCase {
            x: vec![1, 4, 10, 10],
            w: vec![10, 2, 3, 3],
            y: vec![1, 10, 6, 6],
            attrs: vec![("group", Attr::Int(2)), ("dilations", ints(&[2, 2]))],
            bias: true,
        },
        ConvCase {
            x: vec![1, 5, 6, 6],
            w: vec![7, 5, 1, 1],
            y: vec![1, 7, 6, 6],
            attrs: vec![],
            bias: true,
        },
        // Depthwise, stride 2, padding, 20 x 20 = 400 output pixels per image (two tiles).
        ConvCase {
            x: vec![2, 8, 39, 39],
            w: vec![8, 1, 3, 3],
            y: vec![2, 8, 20, 20],
            attrs: vec![
                ("group", Attr::Int(8)),
                ("strides", ints(&[2, 2])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
            bias: false,
        },
        // Depthwise at stride 1 over 17 x 19 = 323 pixels: two tiles, a partial last panel.
        ConvCase {
            x: vec![1, 4, 17, 19],
            w: vec![4, 1, 3, 3],
            y: vec![1, 4, 17, 19],
            attrs: vec![("group", Attr::Int(4)), ("pads", ints(&[1, 1, 1, 1]))],
            bias: true,
        },
        // K = 48 * 9 = 432 > KC, M = 100 > MC, 324 output pixels (two tiles).
        ConvCase {
            x: vec![1, 48, 18, 18],
            w: vec![100, 48, 3, 3],
            y: vec![1, 100, 18, 18],
            attrs: vec![("pads", ints(&[1, 1, 1, 1]))],
            bias: true,
        },
        // Groups, stride 2, dilation 2, asymmetric kernel and pads, no bias, 3 tiles.
        ConvCase {
            x: vec![2, 6, 50, 47],
            w: vec![9, 2, 3, 2],
            y: vec![2, 9, 25, 24],
            attrs: vec![
                ("group", Attr::Int(3)),
                ("strides", ints(&[2, 2])),
                ("dilations", ints(&[2, 2])),
                ("pads", ints(&[2, 1, 1, 1])),
            ],
            bias: false,
        },
        // 1x1 stride 2 (no padding), 33 x 33 = 1089 pixels: five tiles.
        ConvCase {
            x: vec![1, 5, 65, 65],
            w: vec![7, 5, 1, 1],
            y: vec![1, 7, 33, 33],
            attrs: vec![("strides", ints(&[2, 2]))],
            bias: true,
        },
        ConvCase {
            x: vec![2, 3, 12],
            w: vec![5, 3, 3],
            y: vec![2, 5, 6],
            attrs: vec![("strides", ints(&[2])), ("pads", ints(&[1, 1]))],
            bias: true,
        },
    ];
    for c in cases {
        let mut mb = ModelBuilder::new("conv", 13)
            .input("x", DType::F32, &dims(&c.x))
            .initializer("w", &rng.tensor(&c.w, -1.0, 1.0));
        let mut ins = vec!["x", "w"];
        if c.bias {
            mb = mb.initializer("b", &rng.tensor(&[c.w[0]], -1.0, 1.0));
            ins.push("b");
        }
        let model = mb
            .output("y", DType::F32, &dims(&c.y))
            .node("conv", "Conv", &ins, &["y"], c.attrs)
            .build();
        check(model, &[rng.tensor(&c.x, -1.0, 1.0)], RTOL, ATOL);
    }
}

#[test]
fn pooling() {
    let mut rng = Rng(606);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    type PoolCase = (Vec<usize>, Vec<usize>, Vec<(&'static str, Attr)>);
    let cases: Vec<PoolCase> = vec![
        (
            vec![1, 3, 8, 8],
            vec![1, 3, 4, 4],
            vec![("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
        ),
        (
            vec![2, 4, 9, 9],
            vec![2, 4, 5, 5],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("strides", ints(&[2, 2])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
        ),
        (
            vec![1, 2, 7, 7],
            vec![1, 2, 3, 3],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("strides", ints(&[2, 2])),
                ("ceil_mode", Attr::Int(0)),
            ],
        ),
    ];
    for (x, y, attrs) in cases {
        let model = ModelBuilder::new("pool", 13)
            .input("x", DType::F32, &dims(&x))
            .output("y", DType::F32, &dims(&y))
            .node("p", "MaxPool", &["x"], &["y"], attrs)
            .build();
        check(model, &[rng.tensor(&x, -5.0, 5.0)], RTOL, ATOL);
    }
    for (include, ceil) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
        let (x, y) = (
            vec![1, 3, 9, 8],
            vec![1, 3, 4 + ceil as usize, 4 + ceil as usize],
        );
        let model = ModelBuilder::new("avg", 13)
            .input("x", DType::F32, &dims(&x))
            .output("y", DType::F32, &dims(&y))
            .node(
                "p",
                "AveragePool",
                &["x"],
                &["y"],
                vec![
                    ("kernel_shape", ints(&[3, 2])),
                    ("strides", ints(&[2, 2])),
                    ("pads", ints(&[1, 1, 0, 0])),
                    ("count_include_pad", Attr::Int(include)),
                    ("ceil_mode", Attr::Int(ceil)),
                ],
            )
            .build();
        check(model, &[rng.tensor(&x, -5.0, 5.0)], RTOL, ATOL);
    }
    for x in [vec![2, 3, 5, 7], vec![1, 4, 2, 2], vec![1, 2, 9]] {
        let mut y = x.clone();
        y[2..].iter_mut().for_each(|d| *d = 1);
        let model = ModelBuilder::new("gap", 13)
            .input("x", DType::F32, &dims(&x))
            .output("y", DType::F32, &dims(&y))
            .node("p", "GlobalAveragePool", &["x"], &["y"], vec![])
            .build();
        check(model, &[rng.tensor(&x, -5.0, 5.0)], RTOL, ATOL);
    }
}

/// A random Conv: 1-d or 2-d, any group count (dense, grouped, depthwise with a channel
/// multiplier), kernel, stride, dilation and asymmetric pads; returns the model pieces.
pub(crate) struct RandomConv {
    pub(crate) x: Vec<usize>,
    pub(crate) w: Vec<usize>,
    pub(crate) y: Vec<usize>,
    pub(crate) attrs: Vec<(&'static str, Attr)>,
    pub(crate) bias: bool,
}

pub(crate) fn random_conv(rng: &mut Rng, d: usize) -> RandomConv {
    let pick = |rng: &mut Rng, lo: usize, hi: usize| lo + (rng.next() as usize) % (hi - lo + 1);
    let n = pick(rng, 1, 2);
    let (c, m, group) = match pick(rng, 0, 3) {
        0 => (pick(rng, 1, 20), pick(rng, 1, 40), 1),
        1 => {
            let g = pick(rng, 2, 3);
            (g * pick(rng, 1, 4), g * pick(rng, 1, 5), g)
        }
        2 => {
            let c = pick(rng, 2, 24);
            (c, c, c)
        }
        _ => {
            let c = pick(rng, 2, 8);
            (c, c * pick(rng, 2, 3), c)
        }
    };
    let (mut xs, mut ys, mut kern, mut strides, mut dils, mut pads) = (
        vec![n, c],
        vec![n, m],
        vec![],
        vec![],
        vec![],
        vec![0; 2 * d],
    );
    for i in 0..d {
        let k = pick(rng, 1, 5);
        let s = pick(rng, 1, 3);
        let dl = pick(rng, 1, 2);
        let (pb, pe) = (pick(rng, 0, 2), pick(rng, 0, 2));
        let span = dl * (k - 1) + 1;
        // Wide enough for at least one output, sometimes wide enough for vector chunks.
        let size = span + pick(rng, 0, if i + 1 == d { 40 } else { 12 });
        let out = (size + pb + pe - span) / s + 1;
        xs.push(size);
        ys.push(out);
        kern.push(k);
        strides.push(s);
        dils.push(dl);
        pads[i] = pb;
        pads[d + i] = pe;
    }
    let mut w = vec![m, c / group];
    w.extend(&kern);
    let ints = |v: &[usize]| Attr::Ints(v.iter().map(|&x| x as i64).collect());
    RandomConv {
        x: xs,
        w,
        y: ys,
        attrs: vec![
            ("group", Attr::Int(group as i64)),
            ("kernel_shape", ints(&kern)),
            ("strides", ints(&strides)),
            ("dilations", ints(&dils)),
            ("pads", ints(&pads)),
        ],
        bias: !rng.next().is_multiple_of(3),
    }
}

#[test]
fn conv_random_against_reference() {
    let mut rng = Rng(0x5eed_c0de);
    for case in 0..120 {
        let c = random_conv(&mut rng, if case % 4 == 3 { 1 } else { 2 });
        let mut mb = ModelBuilder::new("conv", 13)
            .input("x", DType::F32, &dims(&c.x))
            .initializer("w", &rng.tensor(&c.w, -1.0, 1.0));
        let mut ins = vec!["x", "w"];
        if c.bias {
            mb = mb.initializer("b", &rng.tensor(&[c.w[0]], -1.0, 1.0));
            ins.push("b");
        }
        let model = mb
            .output("y", DType::F32, &dims(&c.y))
            .node("conv", "Conv", &ins, &["y"], c.attrs)
            .build();
        check(model, &[rng.tensor(&c.x, -1.0, 1.0)], RTOL, ATOL);
    }
}

/// Conv with weights (and bias) as run-time inputs: the GEMM core packs W as it goes, into
/// the A part of the planned scratch.
#[test]
fn conv_runtime_weights_against_reference() {
    let mut rng = Rng(0x7e1_9e7);
    for case in 0..60 {
        let c = random_conv(&mut rng, if case % 4 == 3 { 1 } else { 2 });
        let mut mb = ModelBuilder::new("conv", 13)
            .input("x", DType::F32, &dims(&c.x))
            .input("w", DType::F32, &dims(&c.w));
        let mut inputs = vec![rng.tensor(&c.x, -1.0, 1.0), rng.tensor(&c.w, -1.0, 1.0)];
        let mut ins = vec!["x", "w"];
        if c.bias {
            let b = rng.tensor(&[c.w[0]], -1.0, 1.0);
            // Half the biases run-time inputs, half constants.
            if case % 2 == 0 {
                mb = mb.input("b", DType::F32, &dims(&[c.w[0]]));
                inputs.push(b);
            } else {
                mb = mb.initializer("b", &b);
            }
            ins.push("b");
        }
        let model = mb
            .output("y", DType::F32, &dims(&c.y))
            .node("conv", "Conv", &ins, &["y"], c.attrs)
            .build();
        check(model, &inputs, RTOL, ATOL);
    }
}

#[test]
fn conv_fused_activations() {
    let mut rng = Rng(77);
    for case in 0..24 {
        let c = random_conv(&mut rng, if case % 4 == 3 { 1 } else { 2 });
        let mut mb = ModelBuilder::new("conv_act", 13)
            .input("x", DType::F32, &dims(&c.x))
            .initializer("w", &rng.tensor(&c.w, -1.0, 1.0))
            .initializer("lo", &Tensor::f32(vec![], &[0.0]))
            .initializer("hi", &Tensor::f32(vec![], &[0.5]));
        let mut ins = vec!["x", "w"];
        if c.bias {
            mb = mb.initializer("b", &rng.tensor(&[c.w[0]], -1.0, 1.0));
            ins.push("b");
        }
        let (op, act_ins, attrs): (&str, Vec<&str>, Vec<(&str, Attr)>) = match case % 3 {
            0 => ("Relu", vec!["c"], vec![]),
            1 => ("Clip", vec!["c", "lo", "hi"], vec![]),
            _ => ("LeakyRelu", vec!["c"], vec![("alpha", Attr::Float(0.1))]),
        };
        // The activation's result feeds a Neg, so it is not a graph output and the planner
        // may run it in place on the conv's buffer: then the conv applies it.
        let model = mb
            .output("y", DType::F32, &dims(&c.y))
            .node("conv", "Conv", &ins, &["c"], c.attrs)
            .node("act", op, &act_ins, &["a"], attrs)
            .node("neg", "Neg", &["a"], &["y"], vec![])
            .build();
        let exe = check(model, &[rng.tensor(&c.x, -1.0, 1.0)], RTOL, ATOL);
        assert_eq!(
            exe.kernel_count(),
            2,
            "case {case} ({op}): the activation was not fused (conv + neg kernels only)"
        );
    }
}

/// ONNX's pooled size of one dim (`ceil_mode` drops a window starting in the end padding);
/// None when the window does not fit.
pub(crate) fn pooled(
    n: usize,
    k: usize,
    s: usize,
    d: usize,
    pads: [usize; 2],
    ceil: bool,
) -> Option<usize> {
    let span = (n + pads[0] + pads[1]).checked_sub((k - 1) * d + 1)?;
    if !ceil {
        return Some(span / s + 1);
    }
    let out = span.div_ceil(s) + 1;
    Some(if (out - 1) * s >= n + pads[0] {
        out - 1
    } else {
        out
    })
}

#[test]
fn pooling_random_attributes() {
    // MaxPool and AveragePool over random geometry and attributes, 1-d and 2-d, inputs with
    // NaN and -inf in some cases; compared with the reference (NaN matches NaN, -inf -inf).
    let mut rng = Rng(0x5eed_f00d);
    let mut done = 0;
    while done < 120 {
        let mut pick = |lo: usize, hi: usize| lo + (rng.next() % (hi - lo + 1) as u64) as usize;
        let d = pick(1, 2);
        let (n, c) = (pick(1, 2), pick(1, 5));
        let sp: Vec<usize> = (0..d)
            .map(|i| if i + 1 == d { pick(1, 40) } else { pick(1, 12) })
            .collect();
        let k: Vec<usize> = (0..d).map(|_| pick(1, 4)).collect();
        let s: Vec<usize> = (0..d).map(|_| pick(1, 3)).collect();
        let dil: Vec<usize> = (0..d).map(|_| pick(1, 2)).collect();
        let pads: Vec<usize> = (0..2 * d).map(|i| pick(0, k[i % d] - 1)).collect();
        let (ceil, max, include) = (pick(0, 1), pick(0, 1) == 1, pick(0, 1));
        let special = pick(0, 2);
        let Some(out_sp) = (0..d)
            .map(|i| pooled(sp[i], k[i], s[i], dil[i], [pads[i], pads[d + i]], ceil == 1))
            .collect::<Option<Vec<usize>>>()
        else {
            continue;
        };
        let x: Vec<usize> = [n, c].iter().chain(&sp).copied().collect();
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
        let model = ModelBuilder::new("pool", 19)
            .input("x", DType::F32, &dims(&x))
            .output("y", DType::F32, &dims(&y))
            .node("p", op, &["x"], &["y"], attrs)
            .build();
        let mut v = rng.tensor(&x, -5.0, 5.0).to_f32_vec();
        for e in v.iter_mut() {
            match (special, rng.next() % 13) {
                (1, 0) => *e = f32::NAN,
                (1 | 2, 1) => *e = f32::NEG_INFINITY,
                _ => {}
            }
        }
        let input = Tensor::f32(x.clone(), &v);
        let g = import(&model);
        let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
        let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
        let got = run(&exe, std::slice::from_ref(&input))
            .remove(0)
            .to_f32_vec();
        let want = eval_graph(&g, &[input])
            .expect("reference")
            .remove(0)
            .to_f32_vec();
        assert_eq!(got.len(), want.len());
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            let ok = a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= ATOL + RTOL * b.abs();
            assert!(
                ok,
                "case {done} {op} x {x:?} k {k:?} s {s:?} d {dil:?} pads {pads:?} ceil {ceil} include {include}: element {i} got {a}, want {b}"
            );
        }
        done += 1;
    }
}

#[test]
fn conv_scratch_is_exact_for_the_path() {
    // Constant weights: the 3x3 conv's are packed at compile time, so its scratch is the
    // im2col panel alone; the depthwise conv needs none; the 1x1 conv over 36 pixels copies one
    // partial 16-column panel (8 input channels x 16 floats). Where the direct kernels (the
    // 3x3, AVX-512) or the small-plane pointwise one (the 1x1) run, they read none and are
    // planned none (`gemm::conv::conv2d_plan_bytes`). Results still match.
    use arenac_compiler::analysis::liveness::BufferKind;
    let mut rng = Rng(77);
    let model = ModelBuilder::new("convs", 13)
        .input("x", DType::F32, &dims(&[1, 4, 6, 6]))
        .initializer("w3", &rng.tensor(&[8, 4, 3, 3], -1.0, 1.0))
        .initializer("wd", &rng.tensor(&[8, 1, 3, 3], -1.0, 1.0))
        .initializer("w1", &rng.tensor(&[5, 8, 1, 1], -1.0, 1.0))
        .output("y", DType::F32, &dims(&[1, 5, 6, 6]))
        .node(
            "c3",
            "Conv",
            &["x", "w3"],
            &["a"],
            vec![("pads", Attr::Ints(vec![1; 4]))],
        )
        .node(
            "dw",
            "Conv",
            &["a", "wd"],
            &["b"],
            vec![("pads", Attr::Ints(vec![1; 4])), ("group", Attr::Int(8))],
        )
        .node("c1", "Conv", &["b", "w1"], &["y"], vec![])
        .build();
    let g = import(&model);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let scratch = |name: &str| {
        plan.liveness
            .buffers
            .iter()
            .find(|b| b.kind == BufferKind::Scratch && b.name == format!("{name}:scratch"))
            .map(|b| b.interval.size)
    };
    let panel = arenac_compiler::gemm::packed_b_len(4 * 9, 36) * 4;
    let params = |x: &[usize], w: &[usize], pads: &[usize]| {
        let y = [1, w[0], 6, 6];
        let mut p = arenac_compiler::gemm::conv::ConvParams::from_shapes(
            x,
            &y,
            &w[2..],
            &[1, 1],
            &[1, 1],
            pads,
            1,
        )
        .expect("2-d");
        p.packed_a = 1;
        p
    };
    let c3 = params(&[1, 4, 6, 6], &[8, 4, 3, 3], &[1; 4]);
    let c1 = params(&[1, 8, 6, 6], &[5, 8, 1, 1], &[0; 4]);
    let planned = |none: bool, bytes: usize| (!none).then_some(bytes);
    assert_eq!(
        scratch("c3"),
        planned(c3.is_direct(), panel.next_multiple_of(64))
    );
    assert_eq!(scratch("dw"), None);
    assert_eq!(scratch("c1"), planned(c1.is_pointwise_small(), 8 * 16 * 4));
    check_graph(&g, &[rng.tensor(&[1, 4, 6, 6], -1.0, 1.0)], RTOL, ATOL);
}

#[test]
fn conv_at_the_peak_runs_with_a_smaller_tile() {
    // A lone im2col conv is its graph's peak (input, output and panel live together), so the
    // planner shrinks its tile to the smallest; the kernel then runs tiles of 64 pixels (a
    // last partial one when the pixel count is not a multiple) inside that smaller scratch.
    // Geometries no direct kernel takes on any CPU (rows under 14 pixels, not "same", fewer
    // than 64 output channels), so the plan is the same everywhere.
    use arenac_compiler::analysis::liveness::BufferKind;
    use arenac_compiler::gemm::conv::{CONV_MIN_TILE, conv2d_tile_for_scratch};
    use arenac_compiler::plan::verify::verify_placement;
    let mut rng = Rng(4242);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    // (x, w, y, strides, pads)
    type Case = ([usize; 4], [usize; 4], [usize; 4], [i64; 2], [i64; 4]);
    let cases: [Case; 3] = [
        (
            [1, 16, 24, 12],
            [16, 16, 3, 3],
            [1, 16, 24, 10],
            [1, 1],
            [1, 0, 1, 0],
        ),
        (
            [1, 12, 23, 13],
            [20, 12, 3, 3],
            [1, 20, 23, 11],
            [1, 1],
            [1, 0, 1, 0],
        ),
        (
            [1, 8, 41, 37],
            [24, 8, 5, 3],
            [1, 24, 19, 18],
            [2, 2],
            [1, 0, 1, 1],
        ),
    ];
    for (x, w, y, strides, pads) in cases {
        let model = ModelBuilder::new("peak_conv", 13)
            .input("x", DType::F32, &dims(&x))
            .initializer("w", &rng.tensor(&w, -1.0, 1.0))
            .initializer("b", &rng.tensor(&[w[0]], -1.0, 1.0))
            .output("y", DType::F32, &dims(&y))
            .node(
                "c",
                "Conv",
                &["x", "w", "b"],
                &["y"],
                vec![("strides", ints(&strides)), ("pads", ints(&pads))],
            )
            .build();
        let g = import(&model);
        let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
        let scratch = plan
            .liveness
            .buffers
            .iter()
            .find(|b| b.kind == BufferKind::Scratch)
            .map(|b| b.interval.size)
            .expect("an im2col scratch");
        let k = w[1] * w[2] * w[3];
        let panel = arenac_compiler::gemm::packed_b_len(k, CONV_MIN_TILE) * 4;
        assert_eq!(scratch, panel, "{x:?}: the panel of the smallest tile");
        let (_, node) = g.nodes().next().expect("one node");
        let arenac_compiler::ops::Op::Conv(a) = &node.op else {
            panic!("a Conv node")
        };
        let ty = |i: usize| g.value(node.inputs[i]).ty.clone();
        let p = arenac_compiler::ops::conv::scratch_params(
            a,
            &ty(0),
            &g.value(node.outputs[0]).ty,
            true,
            1,
        )
        .expect("2-d");
        assert!(!p.is_direct(), "{x:?}: an im2col geometry");
        assert_eq!(conv2d_tile_for_scratch(&p, scratch), Some(CONV_MIN_TILE));
        assert_eq!(plan.arena_bytes, plan.lower_bound_bytes);
        let intervals = plan.liveness.intervals();
        verify_placement(&intervals, &plan.placement, 64).expect("plan verifies");
        check_graph(&g, &[rng.tensor(&x, -1.0, 1.0)], RTOL, ATOL);
    }
}
