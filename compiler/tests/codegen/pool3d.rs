//! MaxPool and AveragePool over 3-d windows (a host kernel): the JIT against the reference
//! evaluation over strides, pads, dilations, ceil mode and count_include_pad, and against
//! window means and maxima computed here.

use crate::common::*;

fn model(op: &str, x: &[usize], attrs: Vec<(&str, Attr)>) -> ModelProto {
    ModelBuilder::new("pool3d", 19)
        .input("x", DType::F32, &dims(x))
        .output("y", DType::F32, &[])
        .node("my_pool", op, &["x"], &["y"], attrs)
        .build()
}

/// Kernel, strides, dilations, pads, ceil mode.
type Geometry<'a> = (&'a [i64], &'a [i64], &'a [i64], &'a [i64], i64);

#[test]
fn pool3d_geometries_match_the_reference() {
    let mut rng = Rng(0x5eed_0c01);
    let xs = [2, 3, 5, 6, 7];
    let x = rng.tensor(&xs, -1.0, 1.0);
    let geometries: &[Geometry<'_>] = &[
        (&[2, 2, 2], &[1, 1, 1], &[1, 1, 1], &[0; 6], 0),
        (&[3, 2, 3], &[2, 2, 3], &[1, 1, 1], &[1, 0, 1, 1, 1, 0], 0),
        (&[2, 3, 2], &[2, 1, 2], &[2, 1, 3], &[1, 1, 0, 0, 1, 1], 1),
        (&[3, 3, 3], &[3, 3, 3], &[1, 1, 1], &[1, 1, 1, 1, 1, 1], 1),
    ];
    for op in ["MaxPool", "AveragePool"] {
        for &(k, s, d, p, ceil) in geometries {
            for include in [0, 1] {
                let mut attrs = vec![
                    ("kernel_shape", Attr::Ints(k.to_vec())),
                    ("strides", Attr::Ints(s.to_vec())),
                    ("dilations", Attr::Ints(d.to_vec())),
                    ("pads", Attr::Ints(p.to_vec())),
                    ("ceil_mode", Attr::Int(ceil)),
                ];
                if op == "AveragePool" {
                    attrs.push(("count_include_pad", Attr::Int(include)));
                }
                check(model(op, &xs, attrs), std::slice::from_ref(&x), 1e-5, 1e-6);
            }
        }
    }
}

#[test]
fn pool3d_windows_of_two() {
    // 2 x 2 x 2 windows, stride 2, on [1, 1, 2, 4, 4]: two output rows of two.
    let v: Vec<f32> = (0..32).map(|i| ((i * 7) % 11) as f32).collect();
    let x = Tensor::f32(vec![1, 1, 2, 4, 4], &v);
    for op in ["MaxPool", "AveragePool"] {
        let attrs = vec![
            ("kernel_shape", Attr::Ints(vec![2, 2, 2])),
            ("strides", Attr::Ints(vec![2, 2, 2])),
        ];
        let exe = check(
            model(op, &[1, 1, 2, 4, 4], attrs),
            std::slice::from_ref(&x),
            0.0,
            0.0,
        );
        let got = run(&exe, std::slice::from_ref(&x))[0].to_f32_vec();
        let mut want = Vec::new();
        for h in 0..2 {
            for w in 0..2 {
                let window: Vec<f32> = (0..2)
                    .flat_map(|d| (0..2).flat_map(move |i| (0..2).map(move |j| (d, i, j))))
                    .map(|(d, i, j)| v[d * 16 + (2 * h + i) * 4 + 2 * w + j])
                    .collect();
                want.push(if op == "MaxPool" {
                    window.iter().copied().fold(f32::MIN, f32::max)
                } else {
                    window.iter().sum::<f32>() / 8.0
                });
            }
        }
        assert_eq!(got, want, "{op}");
    }
}
