//! ConvTranspose over a grid of groups, strides, pads, dilations, output padding and kernel
//! sizes (1-d, 2-d, 3-d), with and without bias, against the reference evaluation.

use crate::common::*;

#[allow(clippy::too_many_arguments)]
fn case(
    rng: &mut Rng,
    spatial: &[usize],
    c: usize,
    mg: usize,
    groups: usize,
    k: &[usize],
    stride: usize,
    pad: usize,
    dil: usize,
    out_pad: usize,
    bias: bool,
) {
    let d = spatial.len();
    let mut xs = vec![2, c];
    xs.extend_from_slice(spatial);
    let mut ws = vec![c, mg];
    ws.extend_from_slice(k);
    let w = rng.tensor(&ws, -1.0, 1.0);
    let mut b = ModelBuilder::new("ct", 17)
        .input("x", DType::F32, &dims(&xs))
        .initializer("w", &w)
        .output("y", DType::F32, &dims(&[1]));
    let mut ins = vec!["x", "w"];
    if bias {
        b = b.initializer("b", &rng.tensor(&[mg * groups], -1.0, 1.0));
        ins.push("b");
    }
    let m = b
        .node(
            "ct",
            "ConvTranspose",
            &ins,
            &["y"],
            vec![
                ("group", Attr::Int(groups as i64)),
                ("strides", Attr::Ints(vec![stride as i64; d])),
                ("pads", Attr::Ints(vec![pad as i64; 2 * d])),
                ("dilations", Attr::Ints(vec![dil as i64; d])),
                ("output_padding", Attr::Ints(vec![out_pad as i64; d])),
            ],
        )
        .build();
    check(m, &[rng.tensor(&xs, -1.0, 1.0)], 1e-4, 1e-4);
}

#[test]
fn conv_transpose_grid_2d() {
    let mut rng = Rng(7);
    let mut n = 0;
    for groups in [1, 2] {
        for stride in [1, 2, 3] {
            for pad in [0, 1, 2] {
                for dil in [1, 2] {
                    for out_pad in [0, 1] {
                        for k in [1, 2, 3] {
                            // ONNX requires output_padding < stride (or dilation).
                            if out_pad >= stride.max(dil) {
                                continue;
                            }
                            let spatial =
                                [1 + (rng.next() % 6) as usize, 1 + (rng.next() % 7) as usize];
                            let full = |x: usize| stride * (x - 1) + (k - 1) * dil + 1 + out_pad;
                            if spatial.iter().any(|&x| 2 * pad >= full(x)) {
                                continue;
                            }
                            let c = groups * (1 + (rng.next() % 3) as usize);
                            let mg = 1 + (rng.next() % 3) as usize;
                            let bias = n % 2 == 0;
                            case(
                                &mut rng,
                                &spatial,
                                c,
                                mg,
                                groups,
                                &[k, k],
                                stride,
                                pad,
                                dil,
                                out_pad,
                                bias,
                            );
                            n += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(n > 50, "{n} cases");
}

#[test]
fn conv_transpose_1d_3d_and_tiles() {
    let mut rng = Rng(8);
    for (stride, pad, k) in [(1, 0, 3), (2, 1, 4), (3, 0, 2), (2, 2, 5)] {
        case(&mut rng, &[9], 4, 3, 2, &[k], stride, pad, 1, 0, true);
        case(
            &mut rng,
            &[3, 4, 2],
            2,
            2,
            1,
            &[k.min(3), 2, k.min(3)],
            stride,
            pad.min(1),
            1,
            0,
            false,
        );
    }
    // Many input rows (several tiles plus a remainder) and a row wider than one tile.
    case(&mut rng, &[70, 9], 3, 2, 1, &[3, 3], 2, 1, 1, 1, true);
    case(&mut rng, &[3, 300], 2, 2, 1, &[2, 2], 2, 0, 1, 0, true);
    // The U-Net decoder's 2x2 stride-2 upsampling.
    case(&mut rng, &[8, 8], 16, 8, 1, &[2, 2], 2, 0, 1, 0, true);
}
