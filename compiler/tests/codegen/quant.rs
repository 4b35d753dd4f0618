//! QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and MatMulInteger, expanded at
//! import into ordinary nodes: the JIT against the reference evaluation of the expanded graph
//! (exactly), and against a direct per-element formula written here (an oracle independent of
//! the expansion), on random shapes, axes, block sizes and element types, with exact ties at .5
//! and values that saturate.

use crate::common::*;

/// The quantized types and their ranges.
const QTYPES: [(DType, f32, f32); 8] = [
    (DType::U8, 0.0, 255.0),
    (DType::I8, -128.0, 127.0),
    (DType::U16, 0.0, 65535.0),
    (DType::I16, -32768.0, 32767.0),
    (DType::U4, 0.0, 15.0),
    (DType::I4, -8.0, 7.0),
    (DType::U2, 0.0, 3.0),
    (DType::I2, -2.0, 1.0),
];

fn pick(rng: &mut Rng, n: usize) -> usize {
    (rng.next() % n as u64) as usize
}

/// How scale and zero point map onto x.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// One value (`[]` or `[1]`).
    Tensor { rank1: bool },
    /// Per axis.
    Axis(usize),
    /// Blocked: (axis, block_size).
    Blocked(usize, usize),
}

/// The shape of the scale for x of `shape`.
fn param_shape(mode: Mode, shape: &[usize]) -> Vec<usize> {
    match mode {
        Mode::Tensor { rank1: false } => vec![],
        Mode::Tensor { rank1: true } => vec![1],
        Mode::Axis(a) => vec![shape[a]],
        Mode::Blocked(a, b) => {
            let mut s = shape.to_vec();
            s[a] = shape[a].div_ceil(b);
            s
        }
    }
}

/// The flat scale index of x's element `flat`.
fn param_index(mode: Mode, shape: &[usize], flat: usize) -> usize {
    let mut idx = vec![0; shape.len()];
    let mut r = flat;
    for d in (0..shape.len()).rev() {
        idx[d] = r % shape[d];
        r /= shape[d];
    }
    match mode {
        Mode::Tensor { .. } => 0,
        Mode::Axis(a) => idx[a],
        Mode::Blocked(a, b) => {
            let ps = param_shape(mode, shape);
            idx[a] /= b;
            idx.iter().zip(&ps).fold(0, |acc, (&i, &d)| acc * d + i)
        }
    }
}

fn random_mode(rng: &mut Rng, shape: &[usize]) -> Mode {
    match pick(rng, 3) {
        0 => Mode::Tensor {
            rank1: pick(rng, 2) == 0,
        },
        1 if !shape.is_empty() => Mode::Axis(pick(rng, shape.len())),
        _ if !shape.is_empty() => Mode::Blocked(pick(rng, shape.len()), 1 + pick(rng, 3)),
        _ => Mode::Tensor { rank1: false },
    }
}

/// The axis attribute of `mode` as a (sometimes negative) index.
fn axis_attrs(rng: &mut Rng, mode: Mode, rank: usize) -> Vec<(&'static str, Attr)> {
    let ax = |a: usize, rng: &mut Rng| {
        if pick(rng, 2) == 0 {
            a as i64
        } else {
            a as i64 - rank as i64
        }
    };
    match mode {
        Mode::Tensor { .. } => vec![],
        Mode::Axis(a) => vec![("axis", Attr::Int(ax(a, rng)))],
        Mode::Blocked(a, b) => vec![
            ("axis", Attr::Int(ax(a, rng))),
            ("block_size", Attr::Int(b as i64)),
        ],
    }
}

#[test]
fn quantize_linear_random() {
    let mut rng = Rng(0x9a17_3c11_d00d_0001);
    for case in 0..64 {
        let rank = pick(&mut rng, 5);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + pick(&mut rng, 5)).collect();
        let mode = random_mode(&mut rng, &shape);
        let (qt, lo, hi) = QTYPES[pick(&mut rng, QTYPES.len())];
        let with_zero = pick(&mut rng, 3) != 0;
        let ps = param_shape(mode, &shape);
        let np: usize = ps.iter().product();
        let nx: usize = shape.iter().product();
        // Power-of-two scales make x / scale exact, so the ties below are exact ties.
        let pow2 = case % 2 == 0;
        let scales: Vec<f32> = (0..np)
            .map(|_| {
                if pow2 {
                    [0.25f32, 0.5, 1.0, 2.0][pick(&mut rng, 4)]
                } else {
                    rng.f32(0.01, 3.0)
                }
            })
            .collect();
        let zeros: Vec<i64> = (0..np)
            .map(|_| (lo + (hi - lo) * rng.f32(0.0, 1.0)) as i64)
            .collect();
        let span = (hi - lo) * 1.5;
        let xs: Vec<f32> = (0..nx)
            .map(|i| {
                let s = scales[param_index(mode, &shape, i)];
                match pick(&mut rng, 3) {
                    0 => (rng.f32(-20.0, 20.0).round() + 0.5) * s,
                    1 => rng.f32(-span, span) * s,
                    _ => rng.f32(-4.0, 4.0) * s,
                }
            })
            .collect();
        let mut inputs = vec![
            Tensor::f32(shape.clone(), &xs),
            Tensor::f32(ps.clone(), &scales),
        ];
        let mut m = ModelBuilder::new("q", 21)
            .input("x", DType::F32, &dims(&shape))
            .input("s", DType::F32, &dims(&ps));
        let mut names = vec!["x", "s"];
        let mut attrs = axis_attrs(&mut rng, mode, rank);
        if with_zero {
            m = m.input("z", qt, &dims(&ps));
            inputs.push(Tensor::from_i64(qt, ps.clone(), &zeros));
            names.push("z");
        } else if qt != DType::U8 || pick(&mut rng, 2) == 0 {
            attrs.push(("output_dtype", Attr::Int(i64::from(qt.to_onnx()))));
        }
        let model = m
            .node("q", "QuantizeLinear", &names, &["y"], attrs)
            .output("y", qt, &dims(&shape))
            .build();
        let exe = check(model, &inputs, 0.0, 0.0);
        let got = run(&exe, &inputs)[0].to_i64_vec();
        for (i, &x) in xs.iter().enumerate() {
            let p = param_index(mode, &shape, i);
            let z = if with_zero { zeros[p] as f32 } else { 0.0 };
            let want = ((x / scales[p]).round_ties_even() + z).clamp(lo, hi) as i64;
            assert_eq!(got[i], want, "case {case} {mode:?} {qt} element {i}: x {x}");
        }
    }
}

#[test]
fn dequantize_linear_random() {
    let mut rng = Rng(0x51de_77aa_0123_4567);
    let xtypes = [
        (DType::U8, 0.0f32, 255.0f32),
        (DType::I8, -128.0, 127.0),
        (DType::U16, 0.0, 65535.0),
        (DType::I16, -32768.0, 32767.0),
        (DType::I32, -1.0e6, 1.0e6),
        (DType::U4, 0.0, 15.0),
        (DType::I4, -8.0, 7.0),
        (DType::U2, 0.0, 3.0),
        (DType::I2, -2.0, 1.0),
    ];
    for case in 0..64 {
        let rank = pick(&mut rng, 5);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + pick(&mut rng, 5)).collect();
        let mode = random_mode(&mut rng, &shape);
        let (xt, lo, hi) = xtypes[pick(&mut rng, xtypes.len())];
        let with_zero = pick(&mut rng, 3) != 0;
        let ps = param_shape(mode, &shape);
        let np: usize = ps.iter().product();
        let nx: usize = shape.iter().product();
        let int = |rng: &mut Rng| (lo + (hi - lo) * rng.f32(0.0, 1.0)) as i64;
        let scales: Vec<f32> = (0..np).map(|_| rng.f32(0.001, 2.0)).collect();
        let zeros: Vec<i64> = (0..np).map(|_| int(&mut rng)).collect();
        let xs: Vec<i64> = (0..nx).map(|_| int(&mut rng)).collect();
        let mut inputs = vec![
            Tensor::from_i64(xt, shape.clone(), &xs),
            Tensor::f32(ps.clone(), &scales),
        ];
        let mut m = ModelBuilder::new("dq", 21)
            .input("x", xt, &dims(&shape))
            .input("s", DType::F32, &dims(&ps));
        let mut names = vec!["x", "s"];
        if with_zero {
            m = m.input("z", xt, &dims(&ps));
            inputs.push(Tensor::from_i64(xt, ps.clone(), &zeros));
            names.push("z");
        }
        let attrs = axis_attrs(&mut rng, mode, rank);
        let model = m
            .node("dq", "DequantizeLinear", &names, &["y"], attrs)
            .output("y", DType::F32, &dims(&shape))
            .build();
        let exe = check(model, &inputs, 0.0, 0.0);
        let got = run(&exe, &inputs)[0].to_f32_vec();
        for (i, &x) in xs.iter().enumerate() {
            let p = param_index(mode, &shape, i);
            // onnx's reference: x as f32 minus the zero point (f64 for int32), times the scale.
            let want = if !with_zero {
                x as f32 * scales[p]
            } else if xt == DType::I32 {
                ((x as f32 as f64 - zeros[p] as f64) * f64::from(scales[p])) as f32
            } else {
                (x as f32 - zeros[p] as f32) * scales[p]
            };
            assert_eq!(got[i], want, "case {case} {mode:?} {xt} element {i}");
        }
    }
}

#[test]
fn dequantize_linear_output_dtype_f16() {
    let mut rng = Rng(0x0f16_0f16_0f16_0f16);
    let shape = [3, 4];
    let xs: Vec<i64> = (0..12).map(|_| pick(&mut rng, 256) as i64 - 128).collect();
    let inputs = vec![
        Tensor::from_i64(DType::I8, shape.to_vec(), &xs),
        Tensor::f32(vec![4], &[0.5, 0.1, 2.0, 0.03]),
    ];
    let model = ModelBuilder::new("dq", 23)
        .input("x", DType::I8, &dims(&shape))
        .input("s", DType::F32, &dims(&[4]))
        .node(
            "dq",
            "DequantizeLinear",
            &["x", "s"],
            &["y"],
            vec![
                ("axis", Attr::Int(1)),
                ("output_dtype", Attr::Int(i64::from(DType::F16.to_onnx()))),
            ],
        )
        .output("y", DType::F16, &dims(&shape))
        .build();
    let exe = check(model, &inputs, 0.0, 0.0);
    let got = run(&exe, &inputs)[0].clone();
    assert_eq!(got.dtype(), DType::F16);
    let scales = [0.5f32, 0.1, 2.0, 0.03];
    for (i, (g, &x)) in got.to_f32_vec().iter().zip(&xs).enumerate() {
        let want = x as f32 * scales[i % 4];
        assert!(
            (g - want).abs() <= 1e-3 * want.abs(),
            "element {i}: {g} vs {want}"
        );
    }
}

#[test]
fn dynamic_quantize_linear_random() {
    let mut rng = Rng(0xd1a0_5eed_4242_1717);
    for case in 0..20 {
        let rank = pick(&mut rng, 4);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + pick(&mut rng, 6)).collect();
        let (lo, hi) = match case % 3 {
            0 => (-3.0, 5.0),
            1 => (0.5, 4.0),
            _ => (-6.0, -0.5),
        };
        let x = rng.tensor(&shape, lo, hi);
        let model = ModelBuilder::new("dyn", 11)
            .input("x", DType::F32, &dims(&shape))
            .node(
                "d",
                "DynamicQuantizeLinear",
                &["x"],
                &["y", "s", "z"],
                vec![],
            )
            .output("y", DType::U8, &dims(&shape))
            .output("s", DType::F32, &[])
            .output("z", DType::U8, &[])
            .build();
        let inputs = [x.clone()];
        let exe = check(model, &inputs, 0.0, 0.0);
        let got = run(&exe, &inputs);
        let xs = x.to_f32_vec();
        let min = xs.iter().fold(0.0f32, |a, &b| a.min(b));
        let max = xs.iter().fold(0.0f32, |a, &b| a.max(b));
        let scale = (max - min) / 255.0;
        let zp = (0.0 - min / scale).clamp(0.0, 255.0).round_ties_even();
        assert_eq!(got[1].to_f32_vec(), vec![scale], "case {case} scale");
        assert_eq!(
            got[2].to_i64_vec(),
            vec![zp as i64],
            "case {case} zero point"
        );
        for (i, (&g, &v)) in got[0].to_i64_vec().iter().zip(&xs).enumerate() {
            let want = ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0) as i64;
            assert_eq!(g, want, "case {case} element {i}");
        }
    }
}

#[test]
fn matmul_integer_random() {
    let mut rng = Rng(0x3a7b_1c2d_99ee_0042);
    for case in 0..12 {
        let (m, n) = (1 + pick(&mut rng, 4), 1 + pick(&mut rng, 4));
        // Long reductions (above 258) take the chunked path.
        let k = if case % 3 == 0 {
            259 + pick(&mut rng, 400)
        } else {
            1 + pick(&mut rng, 8)
        };
        let batch = pick(&mut rng, 2) == 0;
        let (a_s, b_s) = if batch {
            (vec![2, m, k], vec![2, k, n])
        } else {
            (vec![m, k], vec![k, n])
        };
        let at = if pick(&mut rng, 2) == 0 {
            DType::U8
        } else {
            DType::I8
        };
        let bt = if pick(&mut rng, 2) == 0 {
            DType::U8
        } else {
            DType::I8
        };
        let val = |dt: DType, rng: &mut Rng| match dt {
            DType::U8 => pick(rng, 256) as i64,
            _ => pick(rng, 256) as i64 - 128,
        };
        let av: Vec<i64> = (0..a_s.iter().product())
            .map(|_| val(at, &mut rng))
            .collect();
        let bv: Vec<i64> = (0..b_s.iter().product())
            .map(|_| val(bt, &mut rng))
            .collect();
        // a_zero_point per row ([M]) or per tensor; b_zero_point per column ([N]).
        let a_row = pick(&mut rng, 2) == 0 && !batch;
        let az: Vec<i64> = (0..if a_row { m } else { 1 })
            .map(|_| val(at, &mut rng))
            .collect();
        let bz: Vec<i64> = (0..n).map(|_| val(bt, &mut rng)).collect();
        let inputs = vec![
            Tensor::from_i64(at, a_s.clone(), &av),
            Tensor::from_i64(bt, b_s.clone(), &bv),
            Tensor::from_i64(at, vec![az.len()], &az),
            Tensor::from_i64(bt, vec![n], &bz),
        ];
        let mut y_s = a_s.clone();
        *y_s.last_mut().expect("rank 2+") = n;
        let model = ModelBuilder::new("mmi", 10)
            .input("A", at, &dims(&a_s))
            .input("B", bt, &dims(&b_s))
            .input("az", at, &dims(&[az.len()]))
            .input("bz", bt, &dims(&[n]))
            .node(
                "mm",
                "MatMulInteger",
                &["A", "B", "az", "bz"],
                &["Y"],
                vec![],
            )
            .output("Y", DType::I32, &dims(&y_s))
            .build();
        let exe = check(model, &inputs, 0.0, 0.0);
        let got = run(&exe, &inputs)[0].to_i64_vec();
        let batches = if batch { 2 } else { 1 };
        for bi in 0..batches {
            for i in 0..m {
                for j in 0..n {
                    let want: i64 = (0..k)
                        .map(|p| {
                            let a = av[(bi * m + i) * k + p] - az[if a_row { i } else { 0 }];
                            let b = bv[(bi * k + p) * n + j] - bz[j];
                            a * b
                        })
                        .sum();
                    assert_eq!(got[(bi * m + i) * n + j], want, "case {case} k {k}");
                }
            }
        }
    }
}

/// Rounds f32 values to f16 and back.
fn to_f16(v: &[f32]) -> Vec<f32> {
    let w: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
    Tensor::from_f64(DType::F16, vec![v.len()], &w).to_f32_vec()
}

#[test]
fn quantize_linear_f16_and_precision() {
    let mut rng = Rng(0x0f16_a5a5_1234_9876);
    for case in 0..8 {
        let shape = [2, 3, 1 + pick(&mut rng, 4)];
        let n: usize = shape.iter().product();
        // f16 x and scale: the division rounds to f16 as numpy's does, unless `precision`
        // asks for f32 (opset 23).
        let precision = case % 2 == 1;
        let scales = to_f16(&[0.3, 0.7, 0.11]);
        let raw: Vec<f32> = (0..n)
            .map(|i| match i % 3 {
                // Quotients near k + 0.5, where rounding the quotient to f16 decides.
                0 | 1 => {
                    let k = rng.f32(-400.0, 400.0).round() + 0.5 + rng.f32(-0.05, 0.05);
                    k * scales[(i / shape[2]) % 3]
                }
                _ => rng.f32(-120.0, 120.0) * scales[(i / shape[2]) % 3],
            })
            .collect();
        let xs = to_f16(&raw);
        let zeros = [3i64, 128, 250];
        let to16 = |v: &[f32], s: &[usize]| {
            let w: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
            Tensor::from_f64(DType::F16, s.to_vec(), &w)
        };
        let inputs = vec![
            to16(&xs, &shape),
            to16(&scales, &[3]),
            Tensor::from_i64(DType::U8, vec![3], &zeros),
        ];
        let mut attrs = vec![("axis", Attr::Int(1))];
        if precision {
            attrs.push(("precision", Attr::Int(i64::from(DType::F32.to_onnx()))));
        }
        let model = ModelBuilder::new("q16", if precision { 23 } else { 21 })
            .input("x", DType::F16, &dims(&shape))
            .input("s", DType::F16, &dims(&[3]))
            .input("z", DType::U8, &dims(&[3]))
            .node("q", "QuantizeLinear", &["x", "s", "z"], &["y"], attrs)
            .output("y", DType::U8, &dims(&shape))
            .build();
        let exe = check(model, &inputs, 0.0, 0.0);
        let got = run(&exe, &inputs)[0].to_i64_vec();
        for (i, &x) in xs.iter().enumerate() {
            let c = (i / shape[2]) % 3;
            let q = x / scales[c];
            let q = if precision { q } else { to_f16(&[q])[0] };
            let want = (q.round_ties_even() + zeros[c] as f32).clamp(0.0, 255.0) as i64;
            assert_eq!(got[i], want, "case {case} element {i}: x {x}");
        }
    }
}

/// Types and shapes the expansion cannot honour are typed import errors naming the node.
#[test]
fn quantize_errors_are_typed() {
    let build = |attrs: Vec<(&'static str, Attr)>, s_shape: &[usize]| {
        ModelBuilder::new("qe", 21)
            .input("x", DType::F32, &dims(&[3, 4]))
            .input("s", DType::F32, &dims(s_shape))
            .node("qnode", "QuantizeLinear", &["x", "s"], &["y"], attrs)
            .output("y", DType::U8, &dims(&[3, 4]))
            .build()
    };
    let cases = [
        // string output (not an arenac dtype).
        (
            build(vec![("output_dtype", Attr::Int(8))], &[]),
            "output_dtype",
        ),
        // E8M0 output (an arenac dtype, not a quantized type).
        (
            build(vec![("output_dtype", Attr::Int(24))], &[]),
            "quantizing to f8e8m0",
        ),
        // a float output type.
        (
            build(vec![("output_dtype", Attr::Int(1))], &[]),
            "quantizing to",
        ),
        // per-axis scale of the wrong length.
        (build(vec![("axis", Attr::Int(1))], &[3]), "y_scale"),
        // blocked scale with the wrong block count.
        (
            build(
                vec![("axis", Attr::Int(1)), ("block_size", Attr::Int(3))],
                &[3, 3],
            ),
            "blocks",
        ),
    ];
    for (model, what) in cases {
        let err = import_model(&model, None, &ImportOptions::default())
            .err()
            .unwrap_or_else(|| panic!("{what}: imports"))
            .to_string();
        assert!(err.contains("qnode") && err.contains(what), "{what}: {err}");
    }
}
