//! GridSample and AffineGrid (precompiled Rust kernels): the JIT against the reference
//! evaluation over every mode, padding and corner alignment in 1 to 3 dims, and against
//! plain formulas written here (bilinear with zero padding, PyTorch's definition; AffineGrid's
//! identity and a rotation).

use crate::common::*;

fn grid_model(x: &[usize], grid: &[usize], attrs: Vec<(&str, Attr)>, opset: i64) -> ModelProto {
    ModelBuilder::new("grid", opset)
        .input("x", DType::F32, &dims(x))
        .input("grid", DType::F32, &dims(grid))
        .output("y", DType::F32, &[])
        .node("my_grid", "GridSample", &["x", "grid"], &["y"], attrs)
        .build()
}

fn attrs(mode: &str, padding: &str, align: i64) -> Vec<(&'static str, Attr)> {
    vec![
        ("mode", Attr::Str(mode.into())),
        ("padding_mode", Attr::Str(padding.into())),
        ("align_corners", Attr::Int(align)),
    ]
}

#[test]
fn grid_sample_every_mode_padding_and_rank_matches_the_reference() {
    let mut rng = Rng(0x5eed_0901);
    let shapes: &[(&[usize], &[usize])] = &[
        (&[2, 3, 5], &[2, 7, 1]),
        (&[2, 3, 4, 5], &[2, 3, 6, 2]),
        (&[1, 2, 3, 4, 5], &[1, 2, 3, 4, 3]),
    ];
    for (x, g) in shapes {
        for mode in ["nearest", "linear", "cubic"] {
            for padding in ["zeros", "border", "reflection"] {
                for align in [0, 1] {
                    let m = grid_model(x, g, attrs(mode, padding, align), 20);
                    // Points well outside [-1, 1] exercise the padding.
                    let xs = rng.tensor(x, -1.0, 1.0);
                    let gs = rng.tensor(g, -1.6, 1.6);
                    check(m, &[xs, gs], 1e-4, 1e-5);
                }
            }
        }
    }
}

/// PyTorch's bilinear grid sample with zero padding, 2-d, written out.
fn bilinear_zeros(x: &[f32], xs: &[usize], grid: &[f32], gs: &[usize], align: bool) -> Vec<f32> {
    let (n, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
    let (oh, ow) = (gs[1], gs[2]);
    let unnorm = |v: f32, size: usize| {
        if align {
            (v + 1.0) / 2.0 * (size as f32 - 1.0)
        } else {
            ((v + 1.0) * size as f32 - 1.0) / 2.0
        }
    };
    let mut y = vec![0.0; n * c * oh * ow];
    for b in 0..n {
        for i in 0..oh {
            for j in 0..ow {
                let g = ((b * oh + i) * ow + j) * 2;
                let (fx, fy) = (unnorm(grid[g], w), unnorm(grid[g + 1], h));
                let (x0, y0) = (fx.floor(), fy.floor());
                for ch in 0..c {
                    let mut acc = 0.0;
                    for (dy, wy) in [(0.0, 1.0 - (fy - y0)), (1.0, fy - y0)] {
                        for (dx, wx) in [(0.0, 1.0 - (fx - x0)), (1.0, fx - x0)] {
                            let (px, py) = (x0 + dx, y0 + dy);
                            if px >= 0.0 && py >= 0.0 && px < w as f32 && py < h as f32 {
                                let v = x[((b * c + ch) * h + py as usize) * w + px as usize];
                                acc += wx * wy * v;
                            }
                        }
                    }
                    y[((b * c + ch) * oh + i) * ow + j] = acc;
                }
            }
        }
    }
    y
}

#[test]
fn grid_sample_bilinear_matches_pytorchs_formula() {
    let mut rng = Rng(0x5eed_0902);
    let (xs, gs) = ([2, 3, 5, 6], [2, 4, 7, 2]);
    for align in [0, 1] {
        // Opset 16 spells the mode `bilinear`.
        let m = grid_model(&xs, &gs, attrs("bilinear", "zeros", align), 16);
        let (x, g) = (rng.tensor(&xs, -1.0, 1.0), rng.tensor(&gs, -1.2, 1.2));
        let exe = check(m, &[x.clone(), g.clone()], 1e-4, 1e-5);
        let got = run(&exe, &[x.clone(), g.clone()])[0].to_f32_vec();
        let want = bilinear_zeros(&x.to_f32_vec(), &xs, &g.to_f32_vec(), &gs, align == 1);
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5,
                "align {align}: y[{i}] = {a}, want {b}"
            );
        }
    }
}

#[test]
fn affine_grid_is_the_transformed_base_grid() {
    let size = Tensor::i64(vec![4], &[1, 1, 3, 4]);
    let m = |align: i64| {
        ModelBuilder::new("affine", 20)
            .input("theta", DType::F32, &dims(&[2, 2, 3]))
            .initializer("size", &size)
            .output("y", DType::F32, &[])
            .node(
                "my_affine",
                "AffineGrid",
                &["theta", "size"],
                &["y"],
                vec![("align_corners", Attr::Int(align))],
            )
            .build()
    };
    // Identity, then a quarter turn with a shift.
    let theta = Tensor::f32(
        vec![2, 2, 3],
        &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, -1.0, 0.5, 1.0, 0.0, 0.0],
    );
    for align in [0, 1] {
        let exe = check(m(align), std::slice::from_ref(&theta), 1e-5, 1e-6);
        let y = run(&exe, std::slice::from_ref(&theta))[0].to_f32_vec();
        let base = |j: usize, d: usize| {
            if align == 1 {
                -1.0 + 2.0 * j as f32 / (d as f32 - 1.0)
            } else {
                -1.0 + (2.0 * j as f32 + 1.0) / d as f32
            }
        };
        for h in 0..3 {
            for w in 0..4 {
                let (bx, by) = (base(w, 4), base(h, 3));
                let at = |n: usize, k: usize| y[((n * 3 + h) * 4 + w) * 2 + k];
                assert!((at(0, 0) - bx).abs() < 1e-6 && (at(0, 1) - by).abs() < 1e-6);
                assert!((at(1, 0) - (0.5 - by)).abs() < 1e-6 && (at(1, 1) - bx).abs() < 1e-6);
            }
        }
    }
}

#[test]
fn grid_sample_errors_name_the_node() {
    for (x, g, a, want) in [
        (
            &[1, 1, 4, 4][..],
            &[1, 3, 3, 3][..],
            attrs("linear", "zeros", 0),
            "grid",
        ),
        (
            &[1, 1, 4, 4],
            &[1, 3, 3, 2],
            attrs("area", "zeros", 0),
            "'area'",
        ),
        (
            &[1, 1, 4, 4],
            &[1, 3, 3, 2],
            attrs("linear", "wrap", 0),
            "'wrap'",
        ),
    ] {
        let err = import_model(&grid_model(x, g, a, 20), None, &ImportOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("my_grid") && err.contains("GridSample") && err.contains(want),
            "{err}"
        );
    }
}
