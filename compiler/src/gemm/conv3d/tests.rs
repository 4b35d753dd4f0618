//! The 3-d convolution against a plain f64 reference, and bit-identical across threads.

use super::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// `y[n, m, od, oh, ow]` by the definition, in f64.
fn reference(p: &Conv3d, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f64> {
    let (cg, mg) = (p.c / p.groups, p.m / p.groups);
    let [d, h, wd] = p.input;
    let [od, oh, ow] = p.output;
    let [kd, kh, kw] = p.kernel;
    let mut y = vec![0f64; p.n * p.m * od * oh * ow];
    let tap = |o: usize, k: usize, dim: usize, size: usize| {
        (o * p.strides[dim] + k * p.dilations[dim])
            .checked_sub(p.pad_begin[dim])
            .filter(|&i| i < size)
    };
    for n in 0..p.n {
        for m in 0..p.m {
            let g = m / mg;
            for z in 0..od {
                for yy in 0..oh {
                    for xx in 0..ow {
                        let mut s = bias.map_or(0.0, |b| f64::from(b[m]));
                        for ci in 0..cg {
                            for a in 0..kd {
                                for b in 0..kh {
                                    for e in 0..kw {
                                        let (Some(i), Some(j), Some(l)) =
                                            (tap(z, a, 0, d), tap(yy, b, 1, h), tap(xx, e, 2, wd))
                                        else {
                                            continue;
                                        };
                                        let c = g * cg + ci;
                                        let xv = x[(((n * p.c + c) * d + i) * h + j) * wd + l];
                                        let wv = w[(((m * cg + ci) * kd + a) * kh + b) * kw + e];
                                        s += f64::from(xv) * f64::from(wv);
                                    }
                                }
                            }
                        }
                        y[(((n * p.m + m) * od + z) * oh + yy) * ow + xx] =
                            f64::from(p.act.apply(s as f32));
                    }
                }
            }
        }
    }
    y
}

/// Output size of one dim, as ONNX computes it (explicit pads).
fn out_dim(i: usize, k: usize, s: usize, d: usize, pb: usize, pe: usize) -> usize {
    (i + pb + pe - (k - 1) * d - 1) / s + 1
}

#[allow(clippy::type_complexity)]
fn case(
    (n, c, m, g): (usize, usize, usize, usize),
    input: [usize; 3],
    kernel: [usize; 3],
    strides: [usize; 3],
    dil: [usize; 3],
    pads: [usize; 6],
) -> Conv3d {
    let output: Vec<usize> = (0..3)
        .map(|i| {
            out_dim(
                input[i],
                kernel[i],
                strides[i],
                dil[i],
                pads[i],
                pads[3 + i],
            )
        })
        .collect();
    let x = [&[n, c][..], &input[..]].concat();
    let y = [&[n, m][..], &output[..]].concat();
    let w = [&[m, c / g][..], &kernel[..]].concat();
    Conv3d::from_shapes(&x, &y, &w, &kernel, &strides, &dil, &pads, g).expect("valid geometry")
}

fn run_with(p: &Conv3d, threads: usize, x: &[f32], w: &[f32], b: Option<&[f32]>) -> Vec<f32> {
    let p = Conv3d { threads, ..*p };
    let mut bytes = vec![0u8; p.weights_bytes() + 64];
    // 64-byte aligned start, as the weights region gives.
    let at = bytes.as_ptr().align_offset(64);
    let wb = &mut bytes[at..at + p.weights_bytes()];
    match (p.packed_a, p.wtype.is_reduced()) {
        (true, true) => p.pack_weights_lowp(&|i| w[i], wb, &mut |_| {}),
        (true, false) => {
            let mut out = vec![0f32; p.weights_bytes() / 4];
            p.pack_weights(w, &mut out);
            wb.iter_mut()
                .zip(out.iter().flat_map(|v| v.to_ne_bytes()))
                .for_each(|(d, s)| *d = s);
        }
        (false, _) => wb
            .iter_mut()
            .zip(w.iter().flat_map(|v| v.to_ne_bytes()))
            .for_each(|(d, s)| *d = s),
    }
    let w = &bytes[at..at + p.weights_bytes()];
    let mut y = vec![f32::NAN; p.lens()[1]];
    let mut scratch = vec![f32::NAN; p.scratch_bytes() / 4];
    let pool = crate::par::Pool::new(threads).expect("pool");
    crate::par::with_pool(Some(&pool), || {
        crate::par::Pool::set_eager(&pool, true);
        p.run(x, w, b, &mut y, &mut scratch);
    });
    y
}

#[test]
fn matches_the_reference_on_random_geometries() {
    let cases = [
        case(
            (1, 3, 8, 1),
            [5, 9, 11],
            [3, 3, 3],
            [1, 1, 1],
            [1, 1, 1],
            [1, 1, 1, 1, 1, 1],
        ),
        case(
            (2, 4, 6, 2),
            [6, 7, 8],
            [2, 3, 1],
            [2, 1, 2],
            [1, 2, 1],
            [0, 1, 0, 1, 2, 0],
        ),
        case(
            (1, 6, 6, 6),
            [4, 10, 9],
            [3, 3, 3],
            [1, 2, 1],
            [2, 1, 1],
            [2, 1, 1, 2, 1, 1],
        ),
        case(
            (1, 5, 3, 1),
            [3, 4, 5],
            [1, 1, 1],
            [1, 1, 1],
            [1, 1, 1],
            [0; 6],
        ),
        case(
            (1, 2, 4, 1),
            [7, 5, 6],
            [3, 5, 2],
            [3, 2, 3],
            [1, 1, 2],
            [1, 2, 0, 0, 1, 1],
        ),
        // Several tiles per plane (K = 432: 576-pixel tiles of a 40x40 plane).
        case(
            (1, 16, 5, 1),
            [3, 40, 40],
            [3, 3, 3],
            [1, 1, 1],
            [1, 1, 1],
            [1, 1, 1, 1, 1, 1],
        ),
    ];
    assert_eq!(cases[5].tile(), 576, "the last case spans several tiles");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (i, base) in cases.iter().enumerate() {
        for (bias, act, packed_a, wtype, tol) in [
            (false, Activation::None, false, WeightType::F32, 1e-5),
            (true, Activation::Relu, false, WeightType::F32, 1e-5),
            (true, Activation::Relu, true, WeightType::F32, 1e-5),
            (false, Activation::Sigmoid, true, WeightType::F32, 1e-5),
            // Reduced weights: the rounding of the weights bounds the error.
            (true, Activation::None, true, WeightType::F16, 2e-3),
            (true, Activation::Relu, true, WeightType::Bf16, 2e-2),
            (false, Activation::None, true, WeightType::I8, 3e-2),
        ] {
            let p = Conv3d {
                has_bias: bias,
                act,
                packed_a,
                wtype,
                ..*base
            };
            let (xl, wl) = (p.lens()[0], p.m * p.kernel_len());
            let (x, w, b) = (rng.vec(xl), rng.vec(wl), rng.vec(p.m));
            let b = bias.then_some(&b[..]);
            let want = reference(&p, &x, &w, b);
            let got = run_with(&p, 1, &x, &w, b);
            let scale = want.iter().fold(1e-6f64, |a, v| a.max(v.abs()));
            for (j, (g, e)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (f64::from(*g) - e).abs() <= tol * scale,
                    "case {i} bias {bias} packed {packed_a} {wtype:?}: element {j}: {g} vs {e}"
                );
            }
            let two = run_with(&p, 2, &x, &w, b);
            assert!(
                got.iter()
                    .zip(&two)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "case {i}: 2 threads differ from 1"
            );
        }
    }
}

#[test]
fn inconsistent_shapes_have_no_geometry() {
    let k = [3, 3, 3];
    let ones = [1, 1, 1];
    // Output depth off by one, channel groups that do not divide, weights of another kernel.
    let bad_y = Conv3d::from_shapes(
        &[1, 4, 5, 5, 5],
        &[1, 8, 4, 3, 3],
        &[8, 4, 3, 3, 3],
        &k,
        &ones,
        &ones,
        &[0; 6],
        1,
    );
    let bad_g = Conv3d::from_shapes(
        &[1, 4, 5, 5, 5],
        &[1, 6, 3, 3, 3],
        &[6, 1, 3, 3, 3],
        &k,
        &ones,
        &ones,
        &[0; 6],
        3,
    );
    let bad_w = Conv3d::from_shapes(
        &[1, 4, 5, 5, 5],
        &[1, 8, 3, 3, 3],
        &[8, 4, 3, 3, 1],
        &k,
        &ones,
        &ones,
        &[0; 6],
        1,
    );
    let good = Conv3d::from_shapes(
        &[1, 4, 5, 5, 5],
        &[1, 8, 3, 3, 3],
        &[8, 4, 3, 3, 3],
        &k,
        &ones,
        &ones,
        &[0; 6],
        1,
    );
    assert!(bad_y.is_none() && bad_g.is_none() && bad_w.is_none());
    assert!(good.is_some());
}
