//! The direct convolution path (horizontal stride 1, or 2 with at most 4 input channels; no
//! groups; output rows of at least 14 pixels; AVX-512, constant weights): random geometries
//! — kernels 1..7 by 1..7, strides (vertical 1..3), dilations, asymmetric pads wider than
//! the kernel's reach, output channel counts whose last panel has 1..12 rows, rows that end
//! mid-vector, 1-d convs, batches — with no activation, Relu and a fused SiLU, against the
//! reference evaluation. On such a CPU each case must take the path.

use arenac_compiler::gemm::conv::ConvParams;
use arenac_compiler::gemm::kernel_name;

use crate::common::*;

#[test]
fn direct_conv_random_against_reference() {
    let mut rng = Rng(0xd1_2ec7);
    let avx512 = kernel_name().starts_with("avx512");
    let pick = |rng: &mut Rng, lo: usize, hi: usize| lo + (rng.next() as usize) % (hi - lo + 1);
    let ints = |v: &[usize]| Attr::Ints(v.iter().map(|&x| x as i64).collect());
    for case in 0..60 {
        let one_d = case % 5 == 4;
        let (n, c, m) = (
            pick(&mut rng, 1, 2),
            pick(&mut rng, 1, 20),
            pick(&mut rng, 1, 40),
        );
        let (kh, kw) = if one_d {
            (1, pick(&mut rng, 1, 7))
        } else {
            (pick(&mut rng, 1, 7), pick(&mut rng, 1, 7))
        };
        let (dh, dw) = (pick(&mut rng, 1, 2), pick(&mut rng, 1, 2));
        // Pads up to 3 (beyond a small kernel's reach: whole rows and vectors of padding);
        // at least one pad so a 1x1 kernel is no pointwise conv.
        let pads = [0, 1, 2, 3].map(|_| pick(&mut rng, 0, 3));
        let pads = if pads.iter().all(|&p| p == 0) {
            [1, 0, 0, 0]
        } else {
            pads
        };
        let (pt, pl, pb, pr) = if one_d {
            (0, pads[1], 0, pads[3])
        } else {
            (pads[0], pads[1], pads[2], pads[3])
        };
        let (span_h, span_w) = (dh * (kh - 1) + 1, dw * (kw - 1) + 1);
        // Horizontal stride 1 or 2, vertical 1 to 3.
        let (sh, sw) = if one_d {
            (1, pick(&mut rng, 1, 2))
        } else {
            (pick(&mut rng, 1, 3), pick(&mut rng, 1, 2))
        };
        // Stride 2 takes the path with at most 4 input channels.
        let c = if sw == 2 { c.min(4) } else { c };
        let h = if one_d {
            1
        } else {
            span_h + pick(&mut rng, 0, 12)
        };
        // Output widths 14..=80: whole vectors, partial ones, several chunks.
        let ow = pick(&mut rng, 14, 80);
        // At least 13 + 1 - 6 columns; sometimes one more than the last window reads.
        let w = (ow - 1) * sw + span_w - pl - pr + pick(&mut rng, 0, sw - 1);
        let oh = (h + pt + pb - span_h) / sh + 1;
        let (xs, ws, ys, attrs) = if one_d {
            (
                vec![n, c, w],
                vec![m, c, kw],
                vec![n, m, ow],
                vec![
                    ("kernel_shape", ints(&[kw])),
                    ("strides", ints(&[sw])),
                    ("dilations", ints(&[dw])),
                    ("pads", ints(&[pl, pr])),
                ],
            )
        } else {
            (
                vec![n, c, h, w],
                vec![m, c, kh, kw],
                vec![n, m, oh, ow],
                vec![
                    ("kernel_shape", ints(&[kh, kw])),
                    ("strides", ints(&[sh, sw])),
                    ("dilations", ints(&[dh, dw])),
                    ("pads", ints(&[pt, pl, pb, pr])),
                ],
            )
        };
        let spatial = |v: &[usize]| v[2..].to_vec();
        let mut p = ConvParams::from_shapes(
            &xs,
            &ys,
            &spatial(&ws),
            &if one_d { vec![sw] } else { vec![sh, sw] },
            &if one_d { vec![dw] } else { vec![dh, dw] },
            &if one_d {
                vec![pl, pr]
            } else {
                vec![pt, pl, pb, pr]
            },
            1,
        )
        .expect("2-d geometry");
        p.packed_a = 1;
        assert_eq!(
            p.is_direct(),
            avx512,
            "case {case}: {xs:?} * {ws:?} -> {ys:?}"
        );
        let bias = case % 3 != 0;
        let mut mb = ModelBuilder::new("conv", 14)
            .input("x", DType::F32, &dims(&xs))
            .initializer("w", &rng.tensor(&ws, -1.0, 1.0));
        let mut ins = vec!["x", "w"];
        if bias {
            mb = mb.initializer("b", &rng.tensor(&[m], -1.0, 1.0));
            ins.push("b");
        }
        mb = mb
            .output("y", DType::F32, &dims(&ys))
            .node("conv", "Conv", &ins, &["c"], attrs);
        let model = match case % 3 {
            0 => mb.node("r", "Relu", &["c"], &["a"], vec![]),
            1 => mb.node("s", "Sigmoid", &["c"], &["s"], vec![]).node(
                "m",
                "Mul",
                &["c", "s"],
                &["a"],
                vec![],
            ),
            _ => mb.node("r", "Identity", &["c"], &["a"], vec![]),
        }
        .node("neg", "Neg", &["a"], &["y"], vec![])
        .build();
        check(model, &[rng.tensor(&xs, -1.0, 1.0)], RTOL, ATOL);
    }
}

/// The flat direct path ("same" convolutions at stride 1: the output plane is the input's,
/// vectors run across row ends): random kernels 1..7 by 1..7 with dilations, every split of
/// the padding between the two sides, planes from 4 x 4 (one partial chunk) to 20 x 20,
/// output channel counts whose last panel has 1..12 rows, batches, 1-d convs; no
/// activation, Relu and a fused SiLU, against the reference evaluation. On an AVX-512 CPU
/// each case must take the direct path.
#[test]
fn flat_direct_conv_random_against_reference() {
    let mut rng = Rng(0xf1a7);
    let avx512 = kernel_name().starts_with("avx512");
    let pick = |rng: &mut Rng, lo: usize, hi: usize| lo + (rng.next() as usize) % (hi - lo + 1);
    let ints = |v: &[usize]| Attr::Ints(v.iter().map(|&x| x as i64).collect());
    for case in 0..48 {
        let one_d = case % 6 == 5;
        let (n, c, m) = (
            pick(&mut rng, 1, 2),
            pick(&mut rng, 1, 24),
            pick(&mut rng, 1, 40),
        );
        let (kh, kw) = if one_d {
            (1, pick(&mut rng, 2, 7))
        } else {
            (pick(&mut rng, 1, 7), pick(&mut rng, 1, 7))
        };
        // A 1x1 kernel needs padding to be no pointwise conv, so take at least 2 columns.
        let kw = if kh == 1 { kw.max(2) } else { kw };
        let (dh, dw) = (pick(&mut rng, 1, 2), pick(&mut rng, 1, 2));
        let (span_h, span_w) = (dh * (kh - 1) + 1, dw * (kw - 1) + 1);
        // "Same": the pads of each axis sum to the window's span less one, split anyhow.
        let (pt, pl) = (pick(&mut rng, 0, span_h - 1), pick(&mut rng, 0, span_w - 1));
        let (pb, pr) = (span_h - 1 - pt, span_w - 1 - pl);
        let h = if one_d { 1 } else { pick(&mut rng, 4, 20) };
        let w = if one_d {
            pick(&mut rng, 16, 90)
        } else {
            pick(&mut rng, 4, 20)
        };
        let (xs, ws, ys, attrs) = if one_d {
            (
                vec![n, c, w],
                vec![m, c, kw],
                vec![n, m, w],
                vec![
                    ("kernel_shape", ints(&[kw])),
                    ("dilations", ints(&[dw])),
                    ("pads", ints(&[pl, pr])),
                ],
            )
        } else {
            (
                vec![n, c, h, w],
                vec![m, c, kh, kw],
                vec![n, m, h, w],
                vec![
                    ("kernel_shape", ints(&[kh, kw])),
                    ("dilations", ints(&[dh, dw])),
                    ("pads", ints(&[pt, pl, pb, pr])),
                ],
            )
        };
        let spatial = |v: &[usize]| v[2..].to_vec();
        let mut p = ConvParams::from_shapes(
            &xs,
            &ys,
            &spatial(&ws),
            &if one_d { vec![1] } else { vec![1, 1] },
            &if one_d { vec![dw] } else { vec![dh, dw] },
            &if one_d {
                vec![pl, pr]
            } else {
                vec![pt, pl, pb, pr]
            },
            1,
        )
        .expect("2-d geometry");
        p.packed_a = 1;
        // Planes of fewer than 16 pixels stay on im2col.
        let flat = h * w >= 16;
        assert_eq!(
            p.is_direct(),
            avx512 && flat,
            "case {case}: {xs:?} * {ws:?} -> {ys:?}"
        );
        let bias = case % 3 != 1;
        let mut mb = ModelBuilder::new("conv", 14)
            .input("x", DType::F32, &dims(&xs))
            .initializer("w", &rng.tensor(&ws, -1.0, 1.0));
        let mut ins = vec!["x", "w"];
        if bias {
            mb = mb.initializer("b", &rng.tensor(&[m], -1.0, 1.0));
            ins.push("b");
        }
        mb = mb
            .output("y", DType::F32, &dims(&ys))
            .node("conv", "Conv", &ins, &["c"], attrs);
        let model = match case % 3 {
            0 => mb.node("r", "Relu", &["c"], &["y"], vec![]),
            1 => mb.node("s", "Sigmoid", &["c"], &["s"], vec![]).node(
                "m",
                "Mul",
                &["c", "s"],
                &["y"],
                vec![],
            ),
            _ => mb.node("r", "Identity", &["c"], &["y"], vec![]),
        }
        .build();
        check(model, &[rng.tensor(&xs, -1.0, 1.0)], RTOL, ATOL);
    }
}

/// The channels-in-lanes direct path (`gemm/direct/cl.rs`: whole groups of 64 output
/// channels, `K >= 64`, strided or over planes not a multiple of 4 KiB): random kernels 1..7
/// by 1..7, strides 1..3 on each axis, dilations, asymmetric pads up to 3 (regions of every
/// tap range, rows or columns whose windows reach no tap), planes from 1 x 1 to 20 x 23 so
/// chunks of 1..6 pixels cross region rows, 64 or 128 channels, batches; no activation,
/// Relu and a fused SiLU, against the reference evaluation. On an AVX-512 CPU each case must
/// take the direct path.
#[test]
fn channels_in_lanes_direct_conv_random_against_reference() {
    let mut rng = Rng(0xc1_1a9e5);
    let avx512 = kernel_name().starts_with("avx512");
    let pick = |rng: &mut Rng, lo: usize, hi: usize| lo + (rng.next() as usize) % (hi - lo + 1);
    let ints = |v: &[usize]| Attr::Ints(v.iter().map(|&x| x as i64).collect());
    for case in 0..40 {
        let (n, m) = (pick(&mut rng, 1, 2), 64 * pick(&mut rng, 1, 2));
        let (kh, kw) = (pick(&mut rng, 1, 7), pick(&mut rng, 1, 7));
        // K = c kh kw >= 64.
        let c = (64usize.div_ceil(kh * kw)).max(1) + pick(&mut rng, 0, 12);
        let (dh, dw) = (pick(&mut rng, 1, 2), pick(&mut rng, 1, 2));
        let (sh, sw) = (pick(&mut rng, 1, 3), pick(&mut rng, 1, 3));
        // A 1x1 kernel at stride 1 needs padding to be no pointwise conv.
        let pads = [0, 1, 2, 3].map(|_| pick(&mut rng, 0, 3));
        let [pt, pl, pb, pr] = if pads.iter().all(|&p| p == 0) {
            [0, 1, 0, 0]
        } else {
            pads
        };
        let (span_h, span_w) = (dh * (kh - 1) + 1, dw * (kw - 1) + 1);
        let h = (span_h + pick(&mut rng, 0, 14))
            .saturating_sub(pt + pb)
            .max(1);
        let w = (span_w + pick(&mut rng, 0, 16))
            .saturating_sub(pl + pr)
            .max(1);
        let (h, w) = (
            h.max(span_h.saturating_sub(pt + pb)),
            w.max(span_w.saturating_sub(pl + pr)),
        );
        let oh = (h + pt + pb - span_h) / sh + 1;
        let ow = (w + pl + pr - span_w) / sw + 1;
        let (xs, ws, ys) = (vec![n, c, h, w], vec![m, c, kh, kw], vec![n, m, oh, ow]);
        let attrs = vec![
            ("kernel_shape", ints(&[kh, kw])),
            ("strides", ints(&[sh, sw])),
            ("dilations", ints(&[dh, dw])),
            ("pads", ints(&[pt, pl, pb, pr])),
        ];
        let mut p = ConvParams::from_shapes(
            &xs,
            &ys,
            &[kh, kw],
            &[sh, sw],
            &[dh, dw],
            &[pt, pl, pb, pr],
            1,
        )
        .expect("2-d geometry");
        p.packed_a = 1;
        assert_eq!(
            p.is_direct(),
            avx512,
            "case {case}: {xs:?} * {ws:?} -> {ys:?}"
        );
        let bias = case % 3 != 2;
        let mut mb = ModelBuilder::new("conv", 14)
            .input("x", DType::F32, &dims(&xs))
            .initializer("w", &rng.tensor(&ws, -1.0, 1.0));
        let mut ins = vec!["x", "w"];
        if bias {
            mb = mb.initializer("b", &rng.tensor(&[m], -1.0, 1.0));
            ins.push("b");
        }
        mb = mb
            .output("y", DType::F32, &dims(&ys))
            .node("conv", "Conv", &ins, &["c"], attrs);
        let model = match case % 3 {
            0 => mb.node("r", "Relu", &["c"], &["y"], vec![]),
            1 => mb.node("s", "Sigmoid", &["c"], &["s"], vec![]).node(
                "m",
                "Mul",
                &["c", "s"],
                &["y"],
                vec![],
            ),
            _ => mb.node("r", "Identity", &["c"], &["y"], vec![]),
        }
        .build();
        check(model, &[rng.tensor(&xs, -1.0, 1.0)], RTOL, ATOL);
    }
}

/// Two Convs reading one weight initializer whose geometries take different direct kernels
/// (a 16 x 64 plane: 1,024 pixels, the flat/row kernels on 12-row weight panels; an 8 x 64
/// plane: the channels-in-lanes kernel on its own packing) each read the packing made for
/// their kernel: the weights region stores one copy per layout, not per marking. Dilated,
/// so Winograd takes neither.
#[test]
fn shared_weights_packed_per_direct_layout() {
    let mut rng = Rng(0x5a4ed);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let conv_attrs = || {
        vec![
            ("kernel_shape", ints(&[3, 3])),
            ("dilations", ints(&[2, 2])),
            ("pads", ints(&[2, 2, 2, 2])),
        ]
    };
    let model = ModelBuilder::new("shared", 14)
        .input("a", DType::F32, &dims(&[1, 64, 16, 64]))
        .input("b", DType::F32, &dims(&[1, 64, 8, 64]))
        .initializer("w", &rng.tensor(&[64, 64, 3, 3], -0.2, 0.2))
        .output("ya", DType::F32, &dims(&[1, 64, 16, 64]))
        .output("yb", DType::F32, &dims(&[1, 64, 8, 64]))
        .node("ca", "Conv", &["a", "w"], &["ya"], conv_attrs())
        .node("cb", "Conv", &["b", "w"], &["yb"], conv_attrs())
        .build();
    let inputs = [
        rng.tensor(&[1, 64, 16, 64], -1.0, 1.0),
        rng.tensor(&[1, 64, 8, 64], -1.0, 1.0),
    ];
    check(model, &inputs, RTOL, ATOL);
}

/// A whole f32 Conv on a kernel that reads no scratch — the direct kernels (`layer4.0.conv2`
/// of ResNet-18 on 128 channels, the 2-thread peak that two im2col slots of 1.18 MB made) or
/// the small-plane pointwise one — is planned none (`gemm::conv::conv2d_plan_bytes`) at 1, 2
/// and 3 threads; with weights that may be stored reduced (`winograd_precompute: false`), and
/// wherever those kernels do not run (no AVX-512, `ARENAC_CONV_DIRECT=0`), the im2col slots.
/// Every plan runs to the same bits on a pool of its threads, and matches the reference.
#[test]
fn scratchless_convs_planned_without_im2col_slots() {
    use arenac_compiler::analysis::liveness::{BufferKind, LivenessOptions};
    use arenac_compiler::arena::plan_graph;
    use arenac_compiler::gemm::conv::conv2d_scratch_bytes;
    use arenac_compiler::par::Pool;
    let mut rng = Rng(0x05c7_a7c4);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    // (input, weights, pads): direct 3 x 3 "same" on a 7 x 7 plane (4 Winograd tiles: none);
    // pointwise on 49 pixels (`pw_small`; the GEMM path copies a partial panel).
    let cases = [
        ([1, 128, 7, 7], [128, 128, 3, 3], vec![1, 1, 1, 1]),
        ([2, 160, 7, 7], [136, 160, 1, 1], vec![0, 0, 0, 0]),
    ];
    for (xs, ws, pads) in cases {
        let ys = [xs[0], ws[0], 7, 7];
        let model = ModelBuilder::new("conv", 14)
            .input("x", DType::F32, &dims(&xs))
            .initializer("w", &rng.tensor(&ws, -0.5, 0.5))
            .initializer("b", &rng.tensor(&[ws[0]], -0.5, 0.5))
            .output("y", DType::F32, &dims(&ys))
            .node(
                "conv",
                "Conv",
                &["x", "w", "b"],
                &["c"],
                vec![("pads", ints(&pads))],
            )
            .node("r", "Relu", &["c"], &["y"], vec![])
            .build();
        let g = import(&model);
        let x = rng.tensor(&xs, -1.0, 1.0);
        let want = run(
            &check_graph(&g, std::slice::from_ref(&x), RTOL, ATOL),
            std::slice::from_ref(&x),
        );
        let pads_u: Vec<usize> = pads.iter().map(|&p| p as usize).collect();
        let mut p =
            ConvParams::from_shapes(&xs, &ys, &ws[2..], &[1, 1], &[1, 1], &pads_u, 1).unwrap();
        p.packed_a = 1;
        let none = p.is_direct() || p.is_pointwise_small();
        for threads in [1, 2, 3] {
            p.threads = threads as u64;
            for f32_weights in [true, false] {
                let mut gp = g.clone();
                let opts = PlanOptions {
                    liveness: LivenessOptions {
                        winograd_precompute: f32_weights,
                        ..LivenessOptions::full().with_threads(threads)
                    },
                    ..PlanOptions::default()
                };
                let plan = plan_graph(&mut gp, &opts).expect("plans");
                let scratch: usize = plan
                    .liveness
                    .buffers
                    .iter()
                    .filter(|b| b.kind == BufferKind::Scratch)
                    .map(|b| b.interval.size)
                    .sum();
                let im2col = conv2d_scratch_bytes(&p);
                assert!(im2col > 0, "{xs:?}: the GEMM path has scratch");
                assert_eq!(
                    scratch,
                    if none && f32_weights { 0 } else { im2col },
                    "{xs:?} * {ws:?} at {threads} threads, f32 weights {f32_weights}"
                );
                let exe = compile(&gp, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
                let pool = Pool::new(threads).expect("threads");
                pool.set_eager(true);
                let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
                let slot = &exe.inputs()[0];
                arena.as_mut_slice()[slot.offset..slot.offset + x.bytes().len()]
                    .copy_from_slice(x.bytes());
                // SAFETY: the arena is 64-aligned, `arena_bytes` long, ours alone, input written.
                unsafe { exe.run_with(arena.as_mut_ptr(), Some(&pool)) }.expect("no fault");
                let o = &exe.outputs()[0];
                let got = &arena.as_slice()[o.offset..o.offset + want[0].bytes().len()];
                assert!(
                    got == want[0].bytes(),
                    "{xs:?}: {threads} threads differ from one"
                );
            }
        }
    }
}
