//! Patch-based execution through a YOLOv8-style CSP block (`analysis::patches::window::
//! channel_split`): a Split along channels in a stage, each output computed per patch as a
//! `Slice` of the input's window, a bottleneck whose residual Add reads one of them, and the
//! channel Concat joining them; then an SPPF-like chain of MaxPools. Every stage and grid is
//! compared with the unpatched program, bit for bit.

use arenac_compiler::analysis::liveness::LivenessOptions;
use arenac_compiler::analysis::patches::analyze;
use arenac_compiler::arena::plan_graph;

use crate::common::*;
use crate::patches::every_stage_and_grid;

/// Conv 3x3/s2 + SiLU (`x * sigmoid(x)`), Conv 1x1 + SiLU, Split along channels into
/// `parts` (unequal when asked), a bottleneck (two Conv 3x3 + SiLU) on the last part with a
/// residual Add of it, Concat of every part and the bottleneck's output, Conv 1x1 + SiLU,
/// MaxPool 5x5/s1 twice and the Concat of the three (SPPF; without `sppf`, Conv 1x1 on the
/// block's output alone), Conv 1x1 to the output.
fn csp(h: usize, w: usize, parts: &[usize], sppf: bool, rng: &mut Rng) -> ModelProto {
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let c: usize = parts.iter().sum();
    let last = *parts.last().expect("parts");
    let mut t = |name: &str, shape: &[usize]| (name.to_string(), rng.tensor(shape, -0.5, 0.5));
    let inits = [
        t("w0", &[c, 3, 3, 3]),
        t("b0", &[c]),
        t("w1", &[c, c, 1, 1]),
        t("b1", &[c]),
        t("wm1", &[last, last, 3, 3]),
        t("bm1", &[last]),
        t("wm2", &[last, last, 3, 3]),
        t("bm2", &[last]),
        t("w2", &[c, c + last, 1, 1]),
        t("b2", &[c]),
        t("w3", &[4, if sppf { 3 * c } else { c }, 1, 1]),
    ];
    let mut mb = ModelBuilder::new("csp", 13)
        .input("x", DType::F32, &dims(&[1, 3, h, w]))
        .output("y", DType::F32, &[]);
    for (name, tensor) in &inits {
        mb = mb.initializer(name, tensor);
    }
    let sizes: Vec<i64> = parts.iter().map(|&p| p as i64).collect();
    mb = mb.initializer("split", &Tensor::i64(vec![parts.len()], &sizes));
    let pad1 = || vec![("pads", ints(&[1, 1, 1, 1]))];
    let silu = |mb: ModelBuilder, x: &str, y: &str| {
        let s = format!("{y}_s");
        mb.node(&format!("{y}_sig"), "Sigmoid", &[x], &[&s], vec![])
            .node(&format!("{y}_mul"), "Mul", &[x, &s], &[y], vec![])
    };
    mb = mb.node(
        "c0",
        "Conv",
        &["x", "w0", "b0"],
        &["a0"],
        vec![("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))],
    );
    mb = silu(mb, "a0", "s0");
    mb = mb.node("c1", "Conv", &["s0", "w1", "b1"], &["a1"], vec![]);
    mb = silu(mb, "a1", "s1");
    let outs: Vec<String> = (0..parts.len()).map(|i| format!("p{i}")).collect();
    let outs_ref: Vec<&str> = outs.iter().map(String::as_str).collect();
    mb = mb.node(
        "sp",
        "Split",
        &["s1", "split"],
        &outs_ref,
        vec![("axis", Attr::Int(1))],
    );
    let tail = outs.last().expect("parts").clone();
    mb = mb.node("m1", "Conv", &[&tail, "wm1", "bm1"], &["am1"], pad1());
    mb = silu(mb, "am1", "sm1");
    mb = mb.node("m2", "Conv", &["sm1", "wm2", "bm2"], &["am2"], pad1());
    mb = silu(mb, "am2", "sm2");
    mb = mb.node("add", "Add", &[&tail, "sm2"], &["res"], vec![]);
    let mut cat: Vec<&str> = outs_ref.clone();
    cat.push("res");
    mb = mb.node("k0", "Concat", &cat, &["cat"], vec![("axis", Attr::Int(1))]);
    mb = mb.node("c2", "Conv", &["cat", "w2", "b2"], &["a2"], vec![]);
    mb = silu(mb, "a2", "s2");
    if !sppf {
        return mb.node("c3", "Conv", &["s2", "w3"], &["y"], vec![]).build();
    }
    let pool = || {
        vec![
            ("kernel_shape", ints(&[5, 5])),
            ("strides", ints(&[1, 1])),
            ("pads", ints(&[2, 2, 2, 2])),
        ]
    };
    mb.node("mp1", "MaxPool", &["s2"], &["q1"], pool())
        .node("mp2", "MaxPool", &["q1"], &["q2"], pool())
        .node(
            "k1",
            "Concat",
            &["s2", "q1", "q2"],
            &["spp"],
            vec![("axis", Attr::Int(1))],
        )
        .node("c3", "Conv", &["spp", "w3"], &["y"], vec![])
        .build()
}

/// Stages through a channel Split (equal and unequal parts, three parts), the bottleneck's
/// residual Add and the Concat, on every grid down to one pixel per patch, with and without
/// cached rows: each patched program computes the unpatched one's bits.
#[test]
fn stages_through_a_csp_block_match_bit_for_bit() {
    let mut rng = Rng(0xc5f);
    let (mut graphs, mut exact) = (0, 0);
    for (h, w, parts) in [
        (18, 14, vec![4, 4]),
        (11, 16, vec![2, 6]),
        (13, 9, vec![3, 2, 5]),
    ] {
        let model = csp(h, w, &parts, true, &mut rng);
        let x = rng.tensor(&[1, 3, h, w], -1.0, 1.0);
        let mut g = import(&model);
        let plan = plan_graph(&mut g, &PlanOptions::default()).expect("plans");
        let report = analyze(&g, &plan.schedule, LivenessOptions::full(), usize::MAX);
        let through = |name: &str| {
            report.candidates.iter().any(|s| {
                plan.schedule[s.start..s.nodes]
                    .iter()
                    .any(|&id| g.node(id).name == name)
            })
        };
        assert!(
            through("sp") && through("k0") && through("mp2"),
            "{h}x{w} {parts:?}: no stage through the Split, the Concat and the pools"
        );
        let (n, e, _) = every_stage_and_grid(&model, &x, &format!("csp {h}x{w} {parts:?}"));
        graphs += n;
        exact += e;
    }
    assert!(graphs > 40, "only {graphs} rewritten graphs");
    assert_eq!(exact, graphs, "{exact} of {graphs} bit-identical");
}

/// The planner patches a CSP block (`--patches`): a smaller arena and the outputs of the
/// unpatched plan. Without Winograd both plans run the same kernels on every output, so bit
/// for bit; with it the two plans may give Winograd different Convs (the patched arena leaves
/// room for other ones), and Winograd's tiles round differently from the direct / im2col
/// sums, so within rounding (1e-5 of the output's scale, as `large_patches_keep_winograd`).
#[test]
fn plan_graph_patches_a_csp_block() {
    let mut rng = Rng(0x5b1);
    let (h, w) = (96, 80);
    let model = csp(h, w, &[8, 8], false, &mut rng);
    let x = rng.tensor(&[1, 3, h, w], -1.0, 1.0);
    for winograd in [false, true] {
        let base = PlanOptions::default();
        let plain_opts = PlanOptions {
            liveness: LivenessOptions {
                winograd,
                ..base.liveness
            },
            ..base
        };
        let mut plain = import(&model);
        let p0 = plan_graph(&mut plain, &plain_opts).expect("plans");
        let mut g = import(&model);
        let opts = PlanOptions {
            patches: true,
            ..plain_opts
        };
        let p1 = plan_graph(&mut g, &opts).expect("plans");
        assert!(p1.patches.is_some(), "winograd {winograd}: not patched");
        assert!(
            p1.arena_bytes < p0.arena_bytes,
            "winograd {winograd}: arena {} vs {} unpatched",
            p1.arena_bytes,
            p0.arena_bytes
        );
        let want = run(
            &compile(&plain, &p0).expect("compiles"),
            std::slice::from_ref(&x),
        );
        let got = run(
            &compile(&g, &p1).expect("compiles"),
            std::slice::from_ref(&x),
        );
        for (a, b) in want.iter().zip(&got) {
            assert_eq!(a.shape(), b.shape());
            let (a, b) = (a.to_f32_vec(), b.to_f32_vec());
            if !winograd {
                let same = a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(same, "patched outputs differ without Winograd");
                continue;
            }
            let scale = a.iter().fold(0f32, |m, v| m.max(v.abs()));
            let err = a
                .iter()
                .zip(&b)
                .fold(0f32, |m, (p, q)| m.max((p - q).abs()));
            assert!(
                err <= 1e-5 * scale,
                "with Winograd: max error {err} of scale {scale}"
            );
        }
    }
}
