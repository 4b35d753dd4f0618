//! DeformConv (2-d, a host kernel): the JIT against the reference evaluation over groups,
//! offset groups, masks, bias, strides, dilations and pads; with zero offsets and no mask it
//! is an ordinary Conv, which arenac already computes.

use crate::common::*;

#[allow(clippy::too_many_arguments)]
fn model(
    x: &[usize],
    w: &[usize],
    out: [usize; 2],
    og: usize,
    group: i64,
    strides: &[i64],
    dil: &[i64],
    pads: &[i64],
    bias: bool,
    mask: bool,
) -> ModelProto {
    let taps = og * w[2] * w[3];
    let mut m = ModelBuilder::new("deform", 19)
        .input("x", DType::F32, &dims(x))
        .input("w", DType::F32, &dims(w))
        .input("off", DType::F32, &dims(&[x[0], 2 * taps, out[0], out[1]]));
    let mut ins = vec!["x", "w", "off"];
    if bias {
        m = m.input("b", DType::F32, &dims(&[w[0]]));
    }
    ins.push(if bias { "b" } else { "" });
    if mask {
        m = m.input("m", DType::F32, &dims(&[x[0], taps, out[0], out[1]]));
        ins.push("m");
    } else {
        ins.pop_if(|s| s.is_empty());
    }
    m.output("y", DType::F32, &[])
        .node(
            "my_deform",
            "DeformConv",
            &ins,
            &["y"],
            vec![
                ("group", Attr::Int(group)),
                ("offset_group", Attr::Int(og as i64)),
                ("strides", Attr::Ints(strides.to_vec())),
                ("dilations", Attr::Ints(dil.to_vec())),
                ("pads", Attr::Ints(pads.to_vec())),
            ],
        )
        .build()
}

#[test]
fn deform_conv_matches_the_reference() {
    let mut rng = Rng(0x5eed_0f01);
    // x, w, output, offset groups, group, strides, dilations, pads, bias, mask.
    let x = [2usize, 4, 6, 7];
    for (w, out, og, group, s, d, p, bias, mask) in [
        (
            [3usize, 4, 3, 3],
            [4usize, 5],
            1,
            1,
            [1i64, 1],
            [1i64, 1],
            [0i64; 4],
            false,
            false,
        ),
        (
            [4, 2, 2, 3],
            [3, 4],
            2,
            2,
            [2, 2],
            [1, 1],
            [0, 1, 1, 1],
            true,
            true,
        ),
        (
            [2, 4, 2, 2],
            [6, 7],
            4,
            1,
            [1, 1],
            [2, 1],
            [1, 1, 1, 0],
            true,
            false,
        ),
    ] {
        let taps = og * w[2] * w[3];
        let mut ins = vec![
            rng.tensor(&x, -1.0, 1.0),
            rng.tensor(&w, -1.0, 1.0),
            rng.tensor(&[x[0], 2 * taps, out[0], out[1]], -1.5, 1.5),
        ];
        if bias {
            ins.push(rng.tensor(&[w[0]], -1.0, 1.0));
        }
        if mask {
            ins.push(rng.tensor(&[x[0], taps, out[0], out[1]], 0.0, 1.0));
        }
        check(
            model(&x, &w, out, og, group, &s, &d, &p, bias, mask),
            &ins,
            1e-4,
            1e-5,
        );
    }
}

#[test]
fn deform_conv_with_zero_offsets_is_a_conv() {
    let mut rng = Rng(0x5eed_0f02);
    let (x, w) = ([1usize, 2, 5, 5], [3usize, 2, 3, 3]);
    let xs = rng.tensor(&x, -1.0, 1.0);
    let ws = rng.tensor(&w, -1.0, 1.0);
    let off = Tensor::f32(vec![1, 18, 5, 5], &[0.0; 450]);
    let m = model(
        &x,
        &w,
        [5, 5],
        1,
        1,
        &[1, 1],
        &[1, 1],
        &[1, 1, 1, 1],
        false,
        false,
    );
    let exe = check(m, &[xs.clone(), ws.clone(), off.clone()], 1e-4, 1e-5);
    let got = run(&exe, &[xs.clone(), ws.clone(), off])[0].to_f32_vec();
    let conv = ModelBuilder::new("conv", 13)
        .input("x", DType::F32, &dims(&x))
        .input("w", DType::F32, &dims(&w))
        .output("y", DType::F32, &[])
        .node(
            "c",
            "Conv",
            &["x", "w"],
            &["y"],
            vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .build();
    let exe = check(conv, &[xs.clone(), ws.clone()], 1e-4, 1e-5);
    let want = run(&exe, &[xs, ws])[0].to_f32_vec();
    for (a, b) in got.iter().zip(&want) {
        assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
    }
}
