//! Patch-based execution through ConvTranspose (`analysis::patches::window::transposed`): a
//! ConvTranspose whose kernel equals its stride (each output row and column made by one input
//! row and column, one tap) runs on windows, with its pads and `output_padding` recomputed per
//! window; one with overlapping taps stays outside the stages. Every stage and grid is
//! compared with the unpatched program, bit for bit.

use arenac_compiler::analysis::act_type::ActType;
use arenac_compiler::analysis::liveness::LivenessOptions;
use arenac_compiler::analysis::patches::analyze;
use arenac_compiler::arena::plan_graph;

use crate::common::*;
use crate::patches::every_stage_and_grid;

/// Two ConvTransposes with kernel == stride (3x3/s3 with asymmetric pads and an
/// `output_padding` past the pads, so the last output row is bias only; 2x2/s2 in two
/// groups), element-wise nodes between, and a 4x4/s2 one (overlapping taps) at the end.
fn deconvs(h: usize, w: usize, c: usize, rng: &mut Rng) -> ModelProto {
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let mut t = |name: &str, shape: &[usize]| (name.to_string(), rng.tensor(shape, -0.5, 0.5));
    let inits = [
        t("w1", &[c, c, 3, 3]),
        t("b1", &[c]),
        t("w2", &[c, c / 2, 2, 2]),
        t("b2", &[c]),
        t("w3", &[c, 2, 4, 4]),
    ];
    let mut mb = ModelBuilder::new("deconvs", 13)
        .input("x", DType::F32, &dims(&[1, c, h, w]))
        .output("y", DType::F32, &[]);
    for (name, tensor) in &inits {
        mb = mb.initializer(name, tensor);
    }
    mb.node(
        "t1",
        "ConvTranspose",
        &["x", "w1", "b1"],
        &["a"],
        vec![
            ("strides", ints(&[3, 3])),
            ("pads", ints(&[1, 0, 0, 1])),
            ("output_padding", ints(&[2, 1])),
        ],
    )
    .node("r1", "Relu", &["a"], &["ar"], vec![])
    .node(
        "t2",
        "ConvTranspose",
        &["ar", "w2", "b2"],
        &["b"],
        vec![("strides", ints(&[2, 2])), ("group", Attr::Int(2))],
    )
    .node("s2", "Sigmoid", &["b"], &["bs"], vec![])
    .node(
        "t3",
        "ConvTranspose",
        &["bs", "w3"],
        &["y"],
        vec![("strides", ints(&[2, 2])), ("pads", ints(&[1, 1, 1, 1]))],
    )
    .build()
}

/// A DBNet-like head: Conv 3x3 + Relu (`stem`; without it the input has `c` channels),
/// ConvTranspose 2x2/s2, BatchNormalization + Relu, ConvTranspose 2x2/s2 to one channel,
/// Sigmoid (the graph output).
fn head(h: usize, w: usize, c: usize, stem: bool, rng: &mut Rng) -> ModelProto {
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let mut t = |name: &str, shape: &[usize], lo: f32, hi: f32| {
        (name.to_string(), rng.tensor(shape, lo, hi))
    };
    let inits = [
        t("w0", &[c, 3, 3, 3], -0.5, 0.5),
        t("b0", &[c], -0.5, 0.5),
        t("w1", &[c, c, 2, 2], -0.5, 0.5),
        t("b1", &[c], -0.5, 0.5),
        t("g", &[c], 0.5, 1.5),
        t("be", &[c], -0.5, 0.5),
        t("mu", &[c], -0.5, 0.5),
        t("var", &[c], 0.5, 1.5),
        t("w2", &[c, 1, 2, 2], -0.5, 0.5),
        t("b2", &[1], -0.5, 0.5),
    ];
    let cin = if stem { 3 } else { c };
    let mut mb = ModelBuilder::new("head", 13)
        .input("x", DType::F32, &dims(&[1, cin, h, w]))
        .output("y", DType::F32, &[]);
    for (name, tensor) in &inits {
        mb = mb.initializer(name, tensor);
    }
    let s2 = || vec![("strides", ints(&[2, 2]))];
    let first = if stem {
        mb = mb
            .node(
                "c0",
                "Conv",
                &["x", "w0", "b0"],
                &["a"],
                vec![("pads", ints(&[1, 1, 1, 1]))],
            )
            .node("r0", "Relu", &["a"], &["ar"], vec![]);
        "ar"
    } else {
        "x"
    };
    mb.node("t1", "ConvTranspose", &[first, "w1", "b1"], &["u"], s2())
        .node(
            "bn",
            "BatchNormalization",
            &["u", "g", "be", "mu", "var"],
            &["ub"],
            vec![],
        )
        .node("r1", "Relu", &["ub"], &["ur"], vec![])
        .node("t2", "ConvTranspose", &["ur", "w2", "b2"], &["v"], s2())
        .node("sg", "Sigmoid", &["v"], &["y"], vec![])
        .build()
}

/// Stages through ConvTransposes with kernel == stride (pads, output padding past the last
/// tap, groups, odd sizes), on every grid down to one row or column per patch, with and
/// without cached rows: each patched program computes the unpatched one's bits.
#[test]
fn stages_through_conv_transpose_match_bit_for_bit() {
    let mut rng = Rng(0xdec0);
    let (mut graphs, mut exact) = (0, 0);
    for (h, w, c) in [(5, 4, 4), (3, 7, 2), (8, 6, 16)] {
        let model = deconvs(h, w, c, &mut rng);
        let x = rng.tensor(&[1, c, h, w], -1.0, 1.0);
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
            through("t1") && through("t2"),
            "{h}x{w}x{c}: no stage through them"
        );
        assert!(!through("t3"), "{h}x{w}x{c}: overlapping taps in a stage");
        let (n, e, _) = every_stage_and_grid(&model, &x, &format!("deconvs {h}x{w}x{c}"));
        graphs += n;
        exact += e;
    }
    assert!(graphs > 40, "only {graphs} rewritten graphs");
    assert_eq!(exact, graphs, "{exact} of {graphs} bit-identical");
}

/// The planner takes a DBNet-like head (ConvTranspose 2x2/s2 twice, up to the graph's output)
/// into the patched stage: a smaller arena, the same outputs (within 1e-5 of their scale: the
/// 3-channel Conv takes another kernel path on strips, a few ulps apart).
#[test]
fn plan_graph_patches_a_transposed_head() {
    let mut rng = Rng(0x4ead);
    let (h, w, c) = (48, 40, 16);
    let model = head(h, w, c, true, &mut rng);
    let x = rng.tensor(&[1, 3, h, w], -1.0, 1.0);
    let mut plain = import(&model);
    let p0 = plan_graph(&mut plain, &PlanOptions::default()).expect("plans");
    let mut g = import(&model);
    let opts = PlanOptions {
        patches: true,
        ..PlanOptions::default()
    };
    let p1 = plan_graph(&mut g, &opts).expect("plans");
    assert!(p1.patches.is_some(), "not patched");
    let patched: Vec<&str> = g
        .nodes()
        .map(|(_, n)| n)
        .filter(|n| n.name.contains("@p") && n.op.name() == "ConvTranspose")
        .map(|n| n.name.as_str())
        .collect();
    assert!(
        patched.iter().any(|n| n.starts_with("t2@")),
        "the head's last ConvTranspose is not in the stage: {patched:?}"
    );
    assert!(
        p1.arena_bytes * 10 <= p0.arena_bytes * 7,
        "arena {} vs {} unpatched",
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
        let (a, b) = (a.to_f32_vec(), b.to_f32_vec());
        let scale = a.iter().fold(0f32, |m, v| m.max(v.abs()));
        let err = a
            .iter()
            .zip(&b)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(err <= 1e-5 * scale, "max error {err} of scale {scale}");
    }
}

/// The DBNet-like head without its stem, on 16-bit activations (`--activations f16|bf16`:
/// ConvTranspose staged in bands of output rows, `gemm::stage16::convt`): the planner's
/// patched stage runs the ConvTransposes on windows, narrow in and out, and computes the
/// unpatched 16-bit program's bits (each output is one tap after the bias, widened and
/// rounded the same way in a window as in the whole node).
#[test]
fn patched_conv_transpose_on_16_bit_activations_matches_bit_for_bit() {
    let mut rng = Rng(0x16de);
    let (h, w, c) = (24, 20, 16);
    let model = head(h, w, c, false, &mut rng);
    let x = rng.tensor(&[1, c, h, w], -1.0, 1.0);
    for act in [ActType::F16, ActType::Bf16] {
        let opts = |patches: bool| PlanOptions {
            activations: act,
            patches,
            ..PlanOptions::default()
        };
        let mut plain = import(&model);
        let p0 = plan_graph(&mut plain, &opts(false)).expect("plans");
        let mut g = import(&model);
        let p1 = plan_graph(&mut g, &opts(true)).expect("plans");
        assert!(p1.patches.is_some(), "{}: not patched", act.name());
        let narrow: Vec<&str> = g
            .nodes()
            .map(|(_, n)| n)
            .filter(|n| n.name.contains("@p") && n.op.name() == "ConvTranspose")
            .filter(|n| g.value(n.outputs[0]).ty.dtype != DType::F32)
            .map(|n| n.name.as_str())
            .collect();
        assert!(
            !narrow.is_empty(),
            "{}: no ConvTranspose on 16-bit windows",
            act.name()
        );
        assert!(p1.arena_bytes < p0.arena_bytes, "{}: arena", act.name());
        let want = run(
            &compile(&plain, &p0).expect("compiles"),
            std::slice::from_ref(&x),
        );
        let got = run(
            &compile(&g, &p1).expect("compiles"),
            std::slice::from_ref(&x),
        );
        for (a, b) in want.iter().zip(&got) {
            assert_eq!(a.bytes(), b.bytes(), "{}: {narrow:?}", act.name());
        }
    }
}
