//! RoiAlign, MaxUnpool and Det (precompiled Rust kernels): the JIT against the reference
//! evaluation, plain formulas written here (RoiAlign of a ramp, a scatter, cofactor
//! determinants), and run-time indices out of range reported as the run's fault.

use crate::common::*;

fn roi_model(x: &[usize], r: usize, attrs: Vec<(&str, Attr)>, opset: i64) -> ModelProto {
    ModelBuilder::new("roi", opset)
        .input("x", DType::F32, &dims(x))
        .input("rois", DType::F32, &dims(&[r, 4]))
        .input("b", DType::I64, &dims(&[r]))
        .output("y", DType::F32, &[])
        .node("my_roi", "RoiAlign", &["x", "rois", "b"], &["y"], attrs)
        .build()
}

#[test]
fn roi_align_modes_and_sampling_match_the_reference() {
    let mut rng = Rng(0x5eed_0a01);
    let xs = [2, 3, 6, 7];
    let x = rng.tensor(&xs, -1.0, 1.0);
    // Regions inside, across the border, outside, degenerate.
    let rois = Tensor::f32(
        vec![5, 4],
        &[
            0.0, 0.0, 5.0, 4.0, 1.3, 0.7, 9.9, 8.1, -3.0, -2.0, 1.0, 2.5, 9.0, 9.0, 12.0, 11.0,
            2.0, 2.0, 2.0, 2.0,
        ],
    );
    let b = Tensor::i64(vec![5], &[0, 1, 1, 0, 1]);
    for mode in ["avg", "max"] {
        for ctm in ["half_pixel", "output_half_pixel"] {
            for ratio in [0, 2] {
                let attrs = vec![
                    ("mode", Attr::Str(mode.into())),
                    ("coordinate_transformation_mode", Attr::Str(ctm.into())),
                    ("output_height", Attr::Int(3)),
                    ("output_width", Attr::Int(2)),
                    ("sampling_ratio", Attr::Int(ratio)),
                    ("spatial_scale", Attr::Float(0.75)),
                ];
                let m = roi_model(&xs, 5, attrs, 16);
                check(m, &[x.clone(), rois.clone(), b.clone()], 1e-4, 1e-5);
            }
        }
    }
}

#[test]
fn roi_align_of_a_ramp_is_its_mean_position() {
    // X[h, w] = w: bilinear samples of a ramp are exact, so a bin's average is the mean of
    // its sample columns. Opset 10: output_half_pixel; region [0, 3] x [0, 3], 1 bin,
    // 3 x 3 samples at columns 0.5, 1.5, 2.5.
    let v: Vec<f32> = (0..16).map(|i| (i % 4) as f32).collect();
    let x = Tensor::f32(vec![1, 1, 4, 4], &v);
    let rois = Tensor::f32(vec![1, 4], &[0.0, 0.0, 3.0, 3.0]);
    let b = Tensor::i64(vec![1], &[0]);
    let exe = check(
        roi_model(&[1, 1, 4, 4], 1, vec![], 10),
        &[x.clone(), rois.clone(), b.clone()],
        1e-5,
        1e-6,
    );
    let y = run(&exe, &[x, rois, b])[0].to_f32_vec();
    assert!((y[0] - 1.5).abs() < 1e-6, "{y:?}");
}

#[test]
fn roi_align_batch_index_out_of_range_is_a_fault() {
    let m = roi_model(&[2, 1, 4, 4], 1, vec![], 16);
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).expect("compiles");
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    let x = Tensor::f32(vec![2, 1, 4, 4], &[0.5; 32]);
    let rois = Tensor::f32(vec![1, 4], &[0.0, 0.0, 2.0, 2.0]);
    let ok = run_in(
        &exe,
        &mut arena,
        &[x.clone(), rois.clone(), Tensor::i64(vec![1], &[1])],
    );
    assert!((ok.expect("in range")[0].to_f32_vec()[0] - 0.5).abs() < 1e-6);
    let e = run_in(&exe, &mut arena, &[x, rois, Tensor::i64(vec![1], &[2])]).expect_err("bad");
    assert!(
        e.contains("my_roi") && e.contains("RoiAlign") && e.contains('2'),
        "{e}"
    );
}

fn unpool_model(x: &[usize], out: Option<&[i64]>) -> ModelProto {
    let mut m = ModelBuilder::new("unpool", 11)
        .input("x", DType::F32, &dims(x))
        .input("i", DType::I64, &dims(x))
        .output("y", DType::F32, &[]);
    let mut ins = vec!["x", "i"];
    if let Some(s) = out {
        m = m.initializer("s", &Tensor::i64(vec![s.len()], s));
        ins.push("s");
    }
    m.node(
        "my_unpool",
        "MaxUnpool",
        &ins,
        &["y"],
        vec![
            ("kernel_shape", Attr::Ints(vec![2, 2])),
            ("strides", Attr::Ints(vec![2, 2])),
        ],
    )
    .build()
}

#[test]
fn max_unpool_scatters_to_the_indices() {
    let mut rng = Rng(0x5eed_0a02);
    // X [1, 2, 2, 3] unpools to [1, 2, 4, 6] (48 values); indices: a window's element each.
    let xs = [1, 2, 2, 3];
    let x = rng.tensor(&xs, -1.0, 1.0);
    let mut idx = Vec::new();
    for c in 0..2 {
        for h in 0..2 {
            for w in 0..3 {
                let (dh, dw) = ((c + h) % 2, (w + 1) % 2);
                idx.push((c * 24 + (2 * h + dh) * 6 + 2 * w + dw) as i64);
            }
        }
    }
    let i = Tensor::i64(xs.to_vec(), &idx);
    for out in [None, Some(&[1i64, 2, 5, 7][..])] {
        let exe = check(unpool_model(&xs, out), &[x.clone(), i.clone()], 0.0, 0.0);
        let y = run(&exe, &[x.clone(), i.clone()])[0].to_f32_vec();
        let (oh, ow) = out.map_or((4, 6), |s| (s[2] as usize, s[3] as usize));
        let mut want = vec![0.0f32; 2 * oh * ow];
        for (k, &j) in idx.iter().enumerate() {
            let j = j as usize;
            let (c, h, w) = (j / 24, j % 24 / 6, j % 6);
            want[(c * oh + h) * ow + w] = x.to_f32_vec()[k];
        }
        assert_eq!(y, want);
    }
    let g = import(&unpool_model(&xs, None));
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).expect("compiles");
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    let mut bad = idx.clone();
    bad[3] = 48;
    let e = run_in(&exe, &mut arena, &[x, Tensor::i64(xs.to_vec(), &bad)]).expect_err("bad");
    assert!(e.contains("my_unpool") && e.contains("48"), "{e}");
}

/// The determinant by cofactor expansion along the first row.
fn cofactor(m: &[f64], n: usize) -> f64 {
    if n == 1 {
        return m[0];
    }
    (0..n)
        .map(|j| {
            let minor: Vec<f64> = (1..n)
                .flat_map(|r| (0..n).filter(move |&c| c != j).map(move |c| (r, c)))
                .map(|(r, c)| m[r * n + c])
                .collect();
            let sign = if j % 2 == 0 { 1.0 } else { -1.0 };
            sign * m[j] * cofactor(&minor, n - 1)
        })
        .sum()
}

#[test]
fn det_matches_cofactor_expansion() {
    let mut rng = Rng(0x5eed_0a03);
    for shape in [
        &[1usize, 1][..],
        &[2, 2],
        &[3, 3, 3],
        &[2, 2, 4, 4],
        &[5, 5],
    ] {
        let m = ModelBuilder::new("det", 11)
            .input("x", DType::F32, &dims(shape))
            .output("y", DType::F32, &[])
            .node("my_det", "Det", &["x"], &["y"], vec![])
            .build();
        let x = rng.tensor(shape, -2.0, 2.0);
        let exe = check(m, std::slice::from_ref(&x), 1e-4, 1e-5);
        let y = run(&exe, std::slice::from_ref(&x))[0].to_f32_vec();
        let n = shape[shape.len() - 1];
        let v = x.to_f64_vec();
        for (b, got) in y.iter().enumerate() {
            let want = cofactor(&v[b * n * n..(b + 1) * n * n], n);
            assert!(
                (f64::from(*got) - want).abs() <= 1e-4 * (1.0 + want.abs()),
                "{shape:?}[{b}]: {got} vs {want}"
            );
        }
    }
    // A singular matrix: exactly 0.
    let m = ModelBuilder::new("det", 11)
        .input("x", DType::F32, &dims(&[3, 3]))
        .output("y", DType::F32, &[])
        .node("my_det", "Det", &["x"], &["y"], vec![])
        .build();
    let x = Tensor::f32(vec![3, 3], &[1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 0.5, 1.0, 7.0]);
    let exe = check(m, std::slice::from_ref(&x), 0.0, 0.0);
    assert_eq!(run(&exe, &[x])[0].to_f32_vec(), vec![0.0]);
}
