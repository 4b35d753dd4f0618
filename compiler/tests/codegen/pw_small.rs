//! Pointwise convolutions on small planes (`gemm/pw_small.rs`: output channels in the
//! vector lanes, pixels as the tile's rows, an in-register transpose on store): plane sizes
//! from one pixel (squeeze-excitation) to 196, tile edges (pixels not a multiple of the
//! tile's 12 or 6 rows, channels not a multiple of 16 or 32), K from 1 to past the GEMM's K
//! block, batch 2, with and without bias, the epilogue activations in registers (fused
//! Relu, Clip, Sigmoid, SiLU); against the reference evaluation. Run also with
//! `ARENAC_GEMM_KERNEL=avx2` (the AVX2 tiles) and `ARENAC_CONV_PW_SMALL=0` (the GEMM path).

use arenac_compiler::arena::plan_graph;

use crate::common::*;

/// `Conv(x, w[, b])`, then the activation nodes, then `Neg` (so the activation is planned
/// over the conv's buffer and fused into its epilogue).
fn model(x: &[usize], m: usize, bias: bool, act: usize, rng: &mut Rng) -> ModelProto {
    let w = [m, x[1], 1, 1];
    let y = [x[0], m, x[2], x[3]];
    let mut mb = ModelBuilder::new("pw", 14)
        .input("x", DType::F32, &dims(x))
        .initializer("w", &rng.tensor(&w, -1.0, 1.0))
        .initializer("lo", &Tensor::f32(vec![], &[-0.25]))
        .initializer("hi", &Tensor::f32(vec![], &[0.5]))
        .output("y", DType::F32, &dims(&y));
    let mut ins = vec!["x", "w"];
    if bias {
        mb = mb.initializer("b", &rng.tensor(&[m], -1.0, 1.0));
        ins.push("b");
    }
    mb = mb.node("conv", "Conv", &ins, &["c"], vec![]);
    mb = match act {
        0 => mb.node("a", "Identity", &["c"], &["a"], vec![]),
        1 => mb.node("a", "Relu", &["c"], &["a"], vec![]),
        2 => mb.node("a", "Clip", &["c", "lo", "hi"], &["a"], vec![]),
        3 => mb.node("a", "Sigmoid", &["c"], &["a"], vec![]),
        _ => mb.node("s", "Sigmoid", &["c"], &["s"], vec![]).node(
            "a",
            "Mul",
            &["c", "s"],
            &["a"],
            vec![],
        ),
    };
    mb.node("neg", "Neg", &["a"], &["y"], vec![]).build()
}

#[test]
fn small_plane_pointwise_against_reference() {
    let mut rng = Rng(0x9e1);
    // (input shape, output channels)
    let cases: [(Vec<usize>, usize); 14] = [
        // 14x14 with K >= 256 (this path) and K < 256 (the GEMM path).
        (vec![1, 260, 14, 14], 45),
        (vec![1, 40, 10, 13], 20),
        (vec![1, 5, 7, 7], 7),
        (vec![2, 37, 7, 7], 50),
        (vec![1, 48, 1, 1], 1152),
        (vec![1, 300, 1, 1], 33),
        (vec![2, 17, 3, 5], 64),
        (vec![1, 20, 8, 8], 33),
        (vec![1, 1, 2, 1], 3),
        (vec![1, 400, 7, 7], 40),
        (vec![1, 16, 4, 4], 16),
        (vec![1, 24, 1, 2], 17),
        (vec![1, 9, 3, 3], 100),
        (vec![2, 64, 6, 6], 31),
    ];
    for (i, (x, m)) in cases.iter().enumerate() {
        let act = i % 5;
        let bias = i % 3 != 1;
        let g = import(&model(x, *m, bias, act, &mut rng));
        let xt = rng.tensor(x, -2.0, 2.0);
        let mut g2 = g.clone();
        let plan = plan_graph(&mut g2, &PlanOptions::default()).expect("plans");
        let exe = compile(&g2, &plan).unwrap_or_else(|e| panic!("case {i}: compiles: {e}"));
        let got = run(&exe, std::slice::from_ref(&xt))[0].to_f32_vec();
        let want = eval_graph(&g, std::slice::from_ref(&xt)).expect("reference")[0].to_f32_vec();
        assert_eq!(got.len(), want.len());
        for (e, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= ATOL + RTOL * b.abs(),
                "case {i} {x:?} -> {m} act {act} bias {bias}: element {e}: got {a}, want {b}"
            );
        }
        if act > 0 {
            assert_eq!(
                exe.kernel_count(),
                2,
                "case {i}: the activation was not fused into the conv"
            );
        }
    }
}
