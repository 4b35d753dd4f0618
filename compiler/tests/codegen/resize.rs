//! Resize (every mode, coordinate transformation and nearest rounding the import accepts) and
//! Upsample, on random shapes and scales or sizes, against the reference evaluation.

use crate::common::*;

const COORDS: [&str; 6] = [
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nearest",
];

const NEAREST: [&str; 4] = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"];

fn pick<'a>(rng: &mut Rng, v: &[&'a str]) -> &'a str {
    v[(rng.next() % v.len() as u64) as usize]
}

#[test]
fn resize_random_modes_and_scales() {
    let mut rng = Rng(2024);
    let scale_set = [0.5f32, 0.75, 1.0, 1.5, 2.0, 3.0, 0.6];
    for case in 0..120 {
        let linear = case % 2 == 1;
        let rank = 1 + (rng.next() % 4) as usize;
        let s: Vec<usize> = (0..rank).map(|_| 1 + (rng.next() % 6) as usize).collect();
        let coord = pick(&mut rng, &COORDS);
        let nearest = pick(&mut rng, &NEAREST);
        let use_sizes = rng.next().is_multiple_of(3);
        let mut b = ModelBuilder::new("rs", 19)
            .input("x", DType::F32, &dims(&s))
            .initializer("roi", &Tensor::f32(vec![0], &[]))
            .output("y", DType::F32, &dims(&[1]));
        let inputs: Vec<&str> = if use_sizes {
            let sizes: Vec<i64> = s
                .iter()
                .map(|&d| 1 + (rng.next() % (2 * d as u64 + 2)) as i64)
                .collect();
            b = b.initializer("sizes", &Tensor::i64(vec![rank], &sizes));
            vec!["x", "roi", "", "sizes"]
        } else {
            let mut scales: Vec<f32> = (0..rank)
                .map(|_| scale_set[(rng.next() % scale_set.len() as u64) as usize])
                .collect();
            // No dim may shrink to zero.
            for (sc, &d) in scales.iter_mut().zip(&s) {
                if (d as f32 * *sc).floor() < 1.0 {
                    *sc = 1.0;
                }
            }
            b = b.initializer("scales", &Tensor::f32(vec![rank], &scales));
            vec!["x", "roi", "scales"]
        };
        let m = b
            .node(
                "r",
                "Resize",
                &inputs,
                &["y"],
                vec![
                    (
                        "mode",
                        Attr::Str(if linear { "linear" } else { "nearest" }.into()),
                    ),
                    ("coordinate_transformation_mode", Attr::Str(coord.into())),
                    ("nearest_mode", Attr::Str(nearest.into())),
                ],
            )
            .build();
        check(m, &[rng.tensor(&s, -1.0, 1.0)], 1e-5, 1e-5);
    }
}

#[test]
fn resize_nearest_integers_and_nchw_upsampling() {
    let mut rng = Rng(31);
    // U-Net style 2x nearest upsampling of NCHW f32, and of i64 / bool data.
    for dt in [DType::F32, DType::I64, DType::Bool] {
        let s = [2, 3, 5, 7];
        let x = if dt == DType::F32 {
            rng.tensor(&s, -1.0, 1.0)
        } else {
            let v: Vec<i64> = (0..2 * 3 * 5 * 7)
                .map(|_| (rng.next() % 2) as i64)
                .collect();
            Tensor::from_i64(dt, s.to_vec(), &v)
        };
        let m = ModelBuilder::new("up", 13)
            .input("x", dt, &dims(&s))
            .initializer("roi", &Tensor::f32(vec![0], &[]))
            .initializer("scales", &Tensor::f32(vec![4], &[1.0, 1.0, 2.0, 2.0]))
            .output("y", dt, &dims(&[1]))
            .node("r", "Resize", &["x", "roi", "scales"], &["y"], vec![])
            .build();
        check(m, &[x], 0.0, 0.0);
    }
    // Linear over NHWC-like layout (resized middle dims, contiguous channel rows).
    let m = ModelBuilder::new("nhwc", 13)
        .input("x", DType::F32, &dims(&[1, 4, 5, 9]))
        .initializer("roi", &Tensor::f32(vec![0], &[]))
        .initializer("scales", &Tensor::f32(vec![4], &[1.0, 2.0, 1.5, 1.0]))
        .output("y", DType::F32, &dims(&[1]))
        .node(
            "r",
            "Resize",
            &["x", "roi", "scales"],
            &["y"],
            vec![("mode", Attr::Str("linear".into()))],
        )
        .build();
    check(m, &[rng.tensor(&[1, 4, 5, 9], -1.0, 1.0)], 1e-5, 1e-5);
}

#[test]
fn resize10_and_upsample() {
    let mut rng = Rng(5);
    for (opset, op) in [(10, "Resize"), (9, "Upsample"), (7, "Upsample")] {
        for mode in ["nearest", "linear"] {
            let s = [1, 2, 3, 4];
            let scales = [1.0f32, 1.0, 2.0, 0.5];
            let mut b = ModelBuilder::new("u", opset)
                .input("x", DType::F32, &dims(&s))
                .output("y", DType::F32, &dims(&[1]));
            let mut attrs = vec![("mode", Attr::Str(mode.into()))];
            let ins: Vec<&str> = if opset == 7 {
                attrs.push(("scales", Attr::Floats(scales.to_vec())));
                vec!["x"]
            } else {
                b = b.initializer("scales", &Tensor::f32(vec![4], &scales));
                vec!["x", "scales"]
            };
            let m = b.node("r", op, &ins, &["y"], attrs).build();
            check(m, &[rng.tensor(&s, -1.0, 1.0)], 1e-5, 1e-5);
        }
    }
}

/// Cubic (any `cubic_coeff_a`, exclude_outside), antialiased linear and cubic, and every
/// coordinate mode, on random shapes and scales or sizes (with axes and aspect policies).
#[test]
fn resize_cubic_antialias_random() {
    let mut rng = Rng(77);
    let scale_set = [0.25f32, 0.5, 0.6, 0.75, 1.0, 1.5, 2.0, 3.0];
    for case in 0..90 {
        let rank = 1 + (rng.next() % 4) as usize;
        let s: Vec<usize> = (0..rank).map(|_| 1 + (rng.next() % 7) as usize).collect();
        let coord = pick(&mut rng, &COORDS[..5]);
        let cubic = case % 3 != 0;
        let antialias = rng.next().is_multiple_of(2);
        let exclude = rng.next().is_multiple_of(2);
        let a = -0.5 - (rng.next() % 4) as f32 * 0.125;
        // axes: all, or a random nonempty subset in random order.
        let mut axes: Vec<usize> = (0..rank).collect();
        let use_axes = rng.next().is_multiple_of(2);
        if use_axes {
            for i in (1..rank).rev() {
                axes.swap(i, (rng.next() % (i as u64 + 1)) as usize);
            }
            axes.truncate(1 + (rng.next() % rank as u64) as usize);
        }
        let use_sizes = rng.next().is_multiple_of(3);
        let mut b = ModelBuilder::new("rc", 19)
            .input("x", DType::F32, &dims(&s))
            .output("y", DType::F32, &dims(&[1]));
        let mut attrs = vec![
            (
                "mode",
                Attr::Str(if cubic { "cubic" } else { "linear" }.into()),
            ),
            ("coordinate_transformation_mode", Attr::Str(coord.into())),
            ("antialias", Attr::Int(i64::from(antialias))),
            ("exclude_outside", Attr::Int(i64::from(exclude))),
            ("cubic_coeff_a", Attr::Float(a)),
        ];
        if use_axes {
            attrs.push(("axes", Attr::Ints(axes.iter().map(|&d| d as i64).collect())));
        }
        let inputs: Vec<&str> = if use_sizes {
            let sizes: Vec<i64> = axes
                .iter()
                .map(|&d| 1 + (rng.next() % (2 * s[d] as u64 + 2)) as i64)
                .collect();
            let policy = pick(&mut rng, &["stretch", "not_larger", "not_smaller"]);
            attrs.push(("keep_aspect_ratio_policy", Attr::Str(policy.into())));
            b = b.initializer("sizes", &Tensor::i64(vec![axes.len()], &sizes));
            vec!["x", "", "", "sizes"]
        } else {
            let scales: Vec<f32> = axes
                .iter()
                .map(|&d| {
                    let sc = scale_set[(rng.next() % scale_set.len() as u64) as usize];
                    if (s[d] as f32 * sc).floor() < 1.0 {
                        1.0
                    } else {
                        sc
                    }
                })
                .collect();
            b = b.initializer("scales", &Tensor::f32(vec![axes.len()], &scales));
            vec!["x", "", "scales"]
        };
        let m = b.node("r", "Resize", &inputs, &["y"], attrs).build();
        check(m, &[rng.tensor(&s, -1.0, 1.0)], 1e-5, 1e-5);
    }
}

/// tf_crop_and_resize with a constant roi (inside and beyond the input) and extrapolation
/// value, linear, cubic and nearest, with and without axes.
#[test]
fn resize_tf_crop_and_resize_random() {
    let mut rng = Rng(91);
    for case in 0..60 {
        let rank = 1 + (rng.next() % 4) as usize;
        let s: Vec<usize> = (0..rank).map(|_| 1 + (rng.next() % 6) as usize).collect();
        let mode = ["linear", "cubic", "nearest"][case % 3];
        // Every axis, the last one, or the first one (leaving contiguous f32x4 rows).
        let axes: Vec<usize> = match case % 4 {
            0 | 2 => (0..rank).collect(),
            1 => vec![rank - 1],
            _ => vec![0],
        };
        let s: Vec<usize> = if case % 4 == 3 {
            s.iter()
                .enumerate()
                .map(|(i, &d)| if i == 0 { d } else { d + 3 })
                .collect()
        } else {
            s
        };
        let mut roi = vec![0.0f32; 2 * axes.len()];
        for k in 0..axes.len() {
            let lo = (rng.next() % 9) as f32 * 0.2 - 0.4;
            let hi = lo + (rng.next() % 8) as f32 * 0.2 - 0.2;
            roi[k] = lo;
            roi[axes.len() + k] = hi;
        }
        let sizes: Vec<i64> = axes
            .iter()
            .map(|&d| 1 + (rng.next() % (2 * s[d] as u64 + 1)) as i64)
            .collect();
        let extrap = (rng.next() % 5) as f32 - 2.0;
        let mut attrs = vec![
            ("mode", Attr::Str(mode.into())),
            (
                "coordinate_transformation_mode",
                Attr::Str("tf_crop_and_resize".into()),
            ),
            ("extrapolation_value", Attr::Float(extrap)),
        ];
        if axes.len() < rank {
            attrs.push(("axes", Attr::Ints(axes.iter().map(|&d| d as i64).collect())));
        }
        let m = ModelBuilder::new("crop", 19)
            .input("x", DType::F32, &dims(&s))
            .initializer("roi", &Tensor::f32(vec![roi.len()], &roi))
            .initializer("sizes", &Tensor::i64(vec![sizes.len()], &sizes))
            .output("y", DType::F32, &dims(&[1]))
            .node("r", "Resize", &["x", "roi", "", "sizes"], &["y"], attrs)
            .build();
        check(m, &[rng.tensor(&s, -1.0, 1.0)], 1e-5, 1e-5);
    }
}

/// Wide antialiased filters on several axes: more tap combinations than the kernel unrolls,
/// so some axes loop over their taps at run time (rows of 1, 3 and 4+ elements).
#[test]
fn resize_antialias_wide_filters_loop_taps() {
    let mut rng = Rng(123);
    for (s, scales, mode) in [
        (vec![9, 8, 10], vec![0.25f32, 0.25, 0.2], "cubic"),
        (vec![2, 12, 9, 3], vec![1.0f32, 0.2, 0.25, 1.0], "cubic"),
        (vec![8, 9, 11, 6], vec![0.3f32, 0.25, 0.1, 1.0], "linear"),
        (vec![7, 9, 5], vec![0.3f32, 0.25, 0.5], "cubic"),
    ] {
        let m = ModelBuilder::new("aa", 19)
            .input("x", DType::F32, &dims(&s))
            .initializer("scales", &Tensor::f32(vec![s.len()], &scales))
            .output("y", DType::F32, &dims(&[1]))
            .node(
                "r",
                "Resize",
                &["x", "", "scales"],
                &["y"],
                vec![
                    ("mode", Attr::Str(mode.into())),
                    ("antialias", Attr::Int(1)),
                ],
            )
            .build();
        check(m, &[rng.tensor(&s, -1.0, 1.0)], 1e-5, 1e-5);
    }
}
