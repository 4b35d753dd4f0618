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
    let g = [spatial, k];
    case_with(
        rng,
        g,
        [c, mg, groups, stride, pad, dil, out_pad],
        bias,
        false,
    );
}

/// A case with `[c, mg, groups, stride, pad, dil, out_pad]`; `runtime`: the weights and the
/// bias are run-time inputs (rearranged by the kernel into its scratch).
fn case_with(
    rng: &mut Rng,
    [spatial, k]: [&[usize]; 2],
    [c, mg, groups, stride, pad, dil, out_pad]: [usize; 7],
    bias: bool,
    runtime: bool,
) {
    let d = spatial.len();
    let mut xs = vec![2, c];
    xs.extend_from_slice(spatial);
    let mut ws = vec![c, mg];
    ws.extend_from_slice(k);
    let w = rng.tensor(&ws, -1.0, 1.0);
    let mut inputs = vec![rng.tensor(&xs, -1.0, 1.0)];
    let mut b = ModelBuilder::new("ct", 17)
        .input("x", DType::F32, &dims(&xs))
        .output("y", DType::F32, &dims(&[1]));
    if runtime {
        b = b.input("w", DType::F32, &dims(&ws));
        inputs.push(w);
    } else {
        b = b.initializer("w", &w);
    }
    let mut ins = vec!["x", "w"];
    if bias {
        let bt = rng.tensor(&[mg * groups], -1.0, 1.0);
        if runtime {
            b = b.input("b", DType::F32, &dims(&[mg * groups]));
            inputs.push(bt);
        } else {
            b = b.initializer("b", &bt);
        }
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
    check(m, &inputs, 1e-4, 1e-4);
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

#[test]
fn conv_transpose_runtime_weights() {
    let mut rng = Rng(9);
    for case in 0..40 {
        let pick = |rng: &mut Rng, lo: usize, hi: usize| lo + (rng.next() as usize) % (hi - lo + 1);
        let d = pick(&mut rng, 1, 3);
        let groups = pick(&mut rng, 1, 3);
        let (c, mg) = (groups * pick(&mut rng, 1, 3), pick(&mut rng, 1, 3));
        let (stride, dil) = (pick(&mut rng, 1, 3), pick(&mut rng, 1, 2));
        let k: Vec<usize> = (0..d).map(|_| pick(&mut rng, 1, 3)).collect();
        let spatial: Vec<usize> = (0..d).map(|_| pick(&mut rng, 1, 6)).collect();
        let out_pad = pick(&mut rng, 0, stride.max(dil) - 1);
        // Pads that leave at least one output element along every dim.
        let full = |x: usize, k: usize| stride * (x - 1) + (k - 1) * dil + 1 + out_pad;
        let room = spatial
            .iter()
            .zip(&k)
            .map(|(&x, &k)| full(x, k))
            .min()
            .unwrap_or(1);
        let pad = pick(&mut rng, 0, 2).min((room - 1) / 2);
        let g = [spatial.as_slice(), k.as_slice()];
        let attrs = [c, mg, groups, stride, pad, dil, out_pad];
        case_with(&mut rng, g, attrs, case % 3 != 0, true);
    }
}
