//! `--activations f16|bf16` (`analysis::act_type`, `gemm::stage16`): each staged op's
//! 16-bit program against the same graph's f32 program, within a tolerance relative to the
//! largest output magnitude (f16 1e-2, bf16 4e-2: the input, every intermediate and the output
//! each rounded once), at 1 and 2 threads; the op must have run staged (none kept in f32) and,
//! where given, the arena must be at most a ratio of f32's (these graphs are small: the staging
//! blocks' 16 KiB floor weighs; the 0.52x on the benchmark models is measured by
//! `scripts/precision.py --activations`).

use arenac_compiler::analysis::act_type::{ActReport, ActType};
use arenac_compiler::arena::plan_graph;

use crate::common::*;

/// Compiles `g` with `act` activations and runs it: outputs, report, arena bytes.
fn run_act(
    g: &Graph,
    inputs: &[Tensor],
    act: ActType,
    threads: usize,
) -> (Vec<Tensor>, ActReport, usize) {
    let mut g = g.clone();
    let opts = PlanOptions {
        activations: act,
        liveness: arenac_compiler::analysis::liveness::LivenessOptions::full()
            .with_threads(threads),
        ..PlanOptions::default()
    };
    let plan = plan_graph(&mut g, &opts).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles ({}): {e}", act.name()));
    let out = run(&exe, inputs);
    (out, plan.activations.clone(), plan.arena_bytes)
}

/// Checks `model` in f16 and bf16 against f32; `staged` nodes must run staged.
fn check_act(model: ModelProto, inputs: &[Tensor], staged: usize, arena_ratio: Option<f64>) {
    let g = import(&model);
    let (want, _, arena32) = run_act(&g, inputs, ActType::F32, 1);
    for (act, tol) in [(ActType::F16, 1e-2f32), (ActType::Bf16, 4e-2)] {
        for threads in [1, 2] {
            let (got, r, arena) = run_act(&g, inputs, act, threads);
            assert!(
                r.kept.is_empty(),
                "{}: kept in f32: {:?}",
                act.name(),
                r.kept
            );
            assert_eq!(r.staged_nodes, staged, "{}: {r:?}", act.name());
            if let (1, Some(arena_ratio)) = (threads, arena_ratio) {
                let ratio = arena as f64 / arena32 as f64;
                assert!(
                    ratio <= arena_ratio,
                    "{}: arena {arena} vs f32 {arena32}",
                    act.name()
                );
            }
            for (o, (a, b)) in got.iter().zip(&want).enumerate() {
                assert_eq!(a.dtype(), b.dtype(), "outputs keep their type");
                let (a, b) = (a.to_f32_vec(), b.to_f32_vec());
                let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
                for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                    assert!(
                        (x - y).abs() <= tol * scale,
                        "{} output {o} element {i}: got {x}, f32 {y} (scale {scale})",
                        act.name()
                    );
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn conv_model(
    rng: &mut Rng,
    x: &[usize],
    m: usize,
    k: usize,
    stride: usize,
    pad: usize,
    group: usize,
    act: Option<&'static str>,
) -> ModelProto {
    let c = x[1];
    let w = rng.tensor(&[m, c / group, k, k], -0.5, 0.5);
    let b = rng.tensor(&[m], -0.5, 0.5);
    let (p, s, k) = (pad as i64, stride as i64, k as i64);
    let mut mb = ModelBuilder::new("act16", 18)
        .input("x", DType::F32, &dims(x))
        .initializer("w", &w)
        .initializer("b", &b)
        .node(
            "conv",
            "Conv",
            &["x", "w", "b"],
            &[if act.is_some() { "c" } else { "y" }],
            vec![
                ("kernel_shape", Attr::Ints(vec![k, k])),
                ("strides", Attr::Ints(vec![s, s])),
                ("pads", Attr::Ints(vec![p, p, p, p])),
                ("group", Attr::Int(group as i64)),
            ],
        );
    if let Some(a) = act {
        mb = mb.node("act", a, &["c"], &["y"], vec![]);
    }
    // A Neg after the conv keeps its output an intermediate (a graph output stays f32).
    mb.node("neg", "Neg", &["y"], &["z"], vec![])
        .output("z", DType::F32, &[])
        .build()
}

#[test]
#[allow(clippy::type_complexity)]
fn conv_paths_in_bands() {
    let mut rng = Rng(0x5eed_1616);
    // (input, m, k, stride, pad, group, activation)
    let cases: Vec<(
        Vec<usize>,
        usize,
        usize,
        usize,
        usize,
        usize,
        Option<&'static str>,
    )> = vec![
        (vec![1, 8, 40, 40], 16, 3, 1, 1, 1, Some("Relu")),
        (vec![1, 8, 41, 37], 16, 3, 2, 1, 1, None),
        (vec![2, 16, 30, 30], 24, 1, 1, 0, 1, Some("Relu")),
        (vec![1, 16, 33, 33], 16, 3, 1, 1, 16, Some("Sigmoid")),
        (vec![1, 16, 33, 33], 16, 3, 2, 1, 16, None),
        // Depthwise by 8-channel blocks in row bands (`stage16::conv::dw_bands`): two
        // images, odd sizes, stride 2, 5x5; 12 groups (not whole blocks) by whole planes.
        (vec![2, 24, 57, 43], 24, 3, 2, 1, 24, Some("Relu")),
        (vec![1, 16, 30, 30], 16, 5, 1, 2, 16, None),
        (vec![1, 12, 40, 40], 12, 3, 1, 1, 12, None),
        (vec![1, 3, 64, 64], 16, 7, 2, 3, 1, Some("Relu")),
        // First layers the direct row kernel runs on the 16-bit planes, unstaged
        // (`gemm::direct::act16`): SqueezeNet's 3x3/s2 stem, odd sizes.
        (vec![1, 3, 224, 224], 64, 3, 2, 0, 1, Some("Relu")),
        (vec![1, 3, 45, 47], 16, 3, 2, 1, 1, None),
        // ResNet-18's shapes: the 7x7 stem, a 3x3 stage-1 conv, a strided 1x1 downsample.
        (vec![1, 3, 224, 224], 64, 7, 2, 3, 1, Some("Relu")),
        (vec![1, 64, 56, 56], 64, 3, 1, 1, 1, Some("Relu")),
        (vec![1, 64, 56, 56], 128, 1, 2, 0, 1, None),
        (vec![1, 128, 28, 28], 128, 3, 1, 1, 1, None),
        // Pointwise convs by pixel runs across row ends (`stage16::conv::pw_pixels`): 7x7 and
        // 14x14 planes (the small-plane kernel's layout), 1x1 planes of two images
        // (squeeze-excitation), 28x28 (the GEMM's 16-column panels).
        (vec![1, 320, 7, 7], 96, 1, 1, 0, 1, None),
        (vec![1, 384, 14, 14], 64, 1, 1, 0, 1, Some("Relu")),
        (vec![2, 96, 1, 1], 24, 1, 1, 0, 1, None),
        (vec![1, 24, 28, 28], 144, 1, 1, 0, 1, Some("Relu")),
    ];
    for (x, m, k, s, p, g, act) in cases {
        let model = conv_model(&mut rng, &x, m, k, s, p, g, act);
        let input = rng.tensor(&x, -1.0, 1.0);
        // The activation node is staged too (and applied by the conv's epilogue). Graphs this
        // small need not shrink (a depthwise conv has no f32 scratch to start with).
        check_act(model, &[input], 1 + usize::from(act.is_some()), None);
    }
}

#[test]
fn pooling_gap_and_activations() {
    let mut rng = Rng(0x9001);
    let x = [1, 12, 37, 37];
    let model = ModelBuilder::new("act16", 18)
        .input("x", DType::F32, &dims(&x))
        .node("r", "Relu", &["x"], &["r"], vec![])
        .node(
            "mp",
            "MaxPool",
            &["r"],
            &["m"],
            vec![
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("strides", Attr::Ints(vec![2, 2])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
            ],
        )
        .node(
            "ap",
            "AveragePool",
            &["m"],
            &["a"],
            vec![
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
                ("count_include_pad", Attr::Int(1)),
            ],
        )
        .node("s", "Sigmoid", &["a"], &["s"], vec![])
        .node("e", "Erf", &["s"], &["e"], vec![])
        .node("c", "Clip", &["e"], &["c"], vec![])
        .node("g", "GlobalAveragePool", &["c"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let input = rng.tensor(&x, -3.0, 3.0);
    check_act(model, &[input], 7, Some(0.8));
}

/// An AveragePool's staging scratch is sized as for an AveragePool (blocks of planes), not as
/// for a MaxPool the 16-bit kernel takes (one plane): VGG-19's 512-plane 7x7 average pool
/// (kernel 1, after AdaptiveAvgPool's export) failed to compile under `--activations f16`.
#[test]
fn average_pools_on_many_planes_plan_their_scratch() {
    let mut rng = Rng(0x9002);
    let x = [1, 512, 7, 7];
    let model = ModelBuilder::new("act16", 18)
        .input("x", DType::F32, &dims(&x))
        .node("r", "Relu", &["x"], &["r"], vec![])
        .node(
            "a1",
            "AveragePool",
            &["r"],
            &["a"],
            vec![("kernel_shape", Attr::Ints(vec![1, 1]))],
        )
        .node("s", "Sigmoid", &["a"], &["s"], vec![])
        .node(
            "a2",
            "AveragePool",
            &["s"],
            &["b"],
            vec![
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("strides", Attr::Ints(vec![2, 2])),
                ("count_include_pad", Attr::Int(1)),
                ("pads", Attr::Ints(vec![0, 0, 1, 1])),
            ],
        )
        .node("t", "Tanh", &["b"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let input = rng.tensor(&x, -3.0, 3.0);
    check_act(model, &[input], 5, None);
}

#[test]
fn silu_after_conv_and_alone() {
    let mut rng = Rng(0x0005_1100);
    let x = [1, 8, 20, 20];
    let w = rng.tensor(&[8, 8, 3, 3], -0.3, 0.3);
    let model = ModelBuilder::new("act16", 18)
        .input("x", DType::F32, &dims(&x))
        .initializer("w", &w)
        .node(
            "conv",
            "Conv",
            &["x", "w"],
            &["c"],
            vec![
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
            ],
        )
        .node("s", "Sigmoid", &["c"], &["s"], vec![])
        .node("m", "Mul", &["c", "s"], &["m"], vec![])
        .node("a", "Add", &["m", "x"], &["a"], vec![])
        .node("s2", "Sigmoid", &["a"], &["s2"], vec![])
        .node("m2", "Mul", &["s2", "a"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let input = rng.tensor(&x, -2.0, 2.0);
    // Conv (SiLU in its epilogue) and the second SiLU as one staged fused node; too small
    // for the arena to shrink past the staging blocks' 16 KiB floor.
    check_act(model, &[input], 3, None);
}

#[test]
fn products_softmax_and_layer_norm() {
    let mut rng = Rng(0xa77e);
    let (b, s, d) = (2, 24, 40);
    let wq = rng.tensor(&[d, d], -0.3, 0.3);
    let scale = rng.tensor(&[d], 0.5, 1.5);
    let bias = rng.tensor(&[d], -0.5, 0.5);
    let gw = rng.tensor(&[16, d], -0.3, 0.3);
    let gc = rng.tensor(&[16], -0.5, 0.5);
    let gemm = ModelBuilder::new("act16", 18)
        .input("x", DType::F32, &dims(&[s, d]))
        .initializer("gw", &gw)
        .initializer("gc", &gc)
        .node("n", "Neg", &["x"], &["n"], vec![])
        .node(
            "g",
            "Gemm",
            &["n", "gw", "gc"],
            &["g"],
            vec![
                ("transB", Attr::Int(1)),
                ("alpha", Attr::Float(0.5)),
                ("beta", Attr::Float(2.0)),
            ],
        )
        .node("y", "Neg", &["g"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    check_act(gemm, &[rng.tensor(&[s, d], -1.0, 1.0)], 1, None);
    let attn = ModelBuilder::new("act16", 18)
        .input("x", DType::F32, &dims(&[b, s, d]))
        .initializer("wq", &wq)
        .initializer("scale", &scale)
        .initializer("bias", &bias)
        .node("q", "MatMul", &["x", "wq"], &["q"], vec![])
        .node(
            "kt",
            "Transpose",
            &["x"],
            &["kt"],
            vec![("perm", Attr::Ints(vec![0, 2, 1]))],
        )
        .node("sc", "MatMul", &["q", "kt"], &["sc"], vec![])
        .node(
            "p",
            "Softmax",
            &["sc"],
            &["p"],
            vec![("axis", Attr::Int(-1))],
        )
        .node("o", "MatMul", &["p", "x"], &["o"], vec![])
        .node(
            "ln",
            "LayerNormalization",
            &["o", "scale", "bias"],
            &["ln"],
            vec![("axis", Attr::Int(-1))],
        )
        .node("y", "Neg", &["ln"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    // MatMul x3 (constant B, run-time B twice), Softmax, LayerNormalization.
    check_act(attn, &[rng.tensor(&[b, s, d], -1.0, 1.0)], 5, None);
}

/// The native binary ops on 16-bit data (the chunked `stage16::ew` kernel where each
/// operand broadcasts as one block of dims, the typed kernel otherwise): a residual Add, a
/// squeeze-excitation Mul by a run-time `[1, C, 1, 1]`, constants per channel, per column
/// and scalar, and a broadcast with a gap (`[1, C, 1, W]`) that the chunked kernel declines.
#[test]
fn binary_ops_with_broadcasts() {
    let mut rng = Rng(0xb1a5);
    let x = [1, 6, 9, 11];
    let pc = rng.tensor(&[6, 1, 1], 0.5, 1.5);
    let col = rng.tensor(&[11], 0.5, 1.5);
    let half = Tensor::f32(vec![], &[0.5]);
    let gap = rng.tensor(&[1, 6, 1, 11], -1.0, 1.0);
    let model = ModelBuilder::new("act16", 18)
        .input("x", DType::F32, &dims(&x))
        .initializer("pc", &pc)
        .initializer("col", &col)
        .initializer("half", &half)
        .initializer("gapc", &gap)
        .node("r", "Relu", &["x"], &["r"], vec![])
        .node("g", "GlobalAveragePool", &["r"], &["g"], vec![])
        .node("s", "Sigmoid", &["g"], &["s"], vec![])
        .node("se", "Mul", &["r", "s"], &["se"], vec![])
        .node("res", "Add", &["se", "r"], &["res"], vec![])
        .node("m", "Mul", &["pc", "res"], &["m"], vec![])
        .node("d", "Div", &["m", "col"], &["d"], vec![])
        .node("h", "Sub", &["half", "d"], &["h"], vec![])
        .node("a", "Add", &["h", "gapc"], &["a"], vec![])
        .node("y", "Relu", &["a"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let input = rng.tensor(&x, -2.0, 2.0);
    // Relu x2, GlobalAveragePool, Sigmoid staged; the binary ops native.
    check_act(model, &[input], 4, None);
}

/// The planner grows a staged Conv's staging budget where its step is below the peak and
/// the placed arena does not grow (`analysis::liveness::tiles`): a 3x3 Conv before a wide
/// pointwise one (the peak) gets more than its smallest scratch; outputs as f32's. (A
/// pointwise Conv on this plane runs unstaged, without scratch: `pw_big_direct`.)
#[test]
fn staged_conv_budget_grows_below_the_peak() {
    use arenac_compiler::analysis::liveness::BufferKind;
    let mut rng = Rng(0x0b0d);
    let x = [1, 16, 32, 32];
    let w1 = rng.tensor(&[16, 16, 3, 3], -0.5, 0.5);
    let w2 = rng.tensor(&[128, 16, 1, 1], -0.5, 0.5);
    let model = ModelBuilder::new("act16", 18)
        .input("x", DType::F32, &dims(&x))
        .initializer("w1", &w1)
        .initializer("w2", &w2)
        .node("n", "Neg", &["x"], &["n"], vec![])
        .node(
            "c1",
            "Conv",
            &["n", "w1"],
            &["c1"],
            vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .node("c2", "Conv", &["c1", "w2"], &["c2"], vec![])
        .node("y", "Neg", &["c2"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let input = rng.tensor(&x, -1.0, 1.0);
    check_act(model.clone(), std::slice::from_ref(&input), 2, None);
    let mut g = import(&model);
    let opts = PlanOptions {
        activations: ActType::F16,
        ..PlanOptions::default()
    };
    let plan = plan_graph(&mut g, &opts).expect("plans");
    let (id, _) = g.nodes().find(|(_, n)| n.name == "c1").expect("c1");
    let scratch = plan
        .liveness
        .buffers
        .iter()
        .find(|b| b.kind == BufferKind::Scratch && b.node == Some(id))
        .map_or(0, |b| b.interval.size);
    // The smallest budget's scratch: what the node asks for before the planner grows it.
    let n = g.node(id);
    let tys: Vec<_> = n.inputs.iter().map(|&v| g.value(v).ty.clone()).collect();
    let y = g.value(n.outputs[0]).ty.clone();
    let smallest = arenac_compiler::ops::stage16::scratch_bytes(
        &n.op,
        &tys,
        &y,
        &[false, true],
        opts.liveness.threads.max(1),
    )
    .expect("staged");
    assert!(
        scratch > smallest,
        "c1's scratch {scratch} not grown past {smallest}"
    );
}

/// GELU between two products on 16-bit data: after the retyping, element-wise fusion makes
/// its Div, Erf, Add, Mul, Mul one 16-bit fused node (`analysis::fuse::fuse_elementwise16`)
/// that the staged element-wise kernel runs (the vector erf inside); outputs as f32's at 1
/// and 2 threads.
#[test]
fn gelu_chain_fused_on_16_bit_data() {
    let mut rng = Rng(0x6e1);
    let (s, d, f) = (20, 32, 48);
    let w1 = rng.tensor(&[d, f], -0.4, 0.4);
    let w2 = rng.tensor(&[f, d], -0.4, 0.4);
    let scalar = |v: f32| Tensor::f32(vec![], &[v]);
    let model = ModelBuilder::new("act16", 18)
        .input("x", DType::F32, &dims(&[s, d]))
        .initializer("w1", &w1)
        .initializer("w2", &w2)
        .initializer("s2", &scalar(std::f32::consts::SQRT_2))
        .initializer("one", &scalar(1.0))
        .initializer("half", &scalar(0.5))
        .node("h", "MatMul", &["x", "w1"], &["h"], vec![])
        .node("dv", "Div", &["h", "s2"], &["dv"], vec![])
        .node("e", "Erf", &["dv"], &["e"], vec![])
        .node("a", "Add", &["e", "one"], &["a"], vec![])
        .node("m", "Mul", &["h", "a"], &["m"], vec![])
        .node("gl", "Mul", &["m", "half"], &["gl"], vec![])
        .node("y", "MatMul", &["gl", "w2"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let g = import(&model);
    let mut g16 = g.clone();
    let opts = PlanOptions {
        activations: ActType::F16,
        ..PlanOptions::default()
    };
    plan_graph(&mut g16, &opts).expect("plans");
    let fused: Vec<_> = g16
        .nodes()
        .filter(|(_, n)| matches!(n.op, arenac_compiler::ops::Op::FusedElementwise(_)))
        .map(|(_, n)| g16.value(n.outputs[0]).ty.dtype)
        .collect();
    assert_eq!(fused, vec![DType::F16], "one fused 16-bit GELU node");
    // MatMul x2 and Erf staged (counted by the retyping, before fusion).
    check_act(model, &[rng.tensor(&[s, d], -2.0, 2.0)], 3, None);
}

/// A staged 3 x 3 stride-1 Conv runs Winograd bands (`gemm::stage16::conv::wino_bands`):
/// on precomputed transformed weights when they fit a quarter of the model's weights (a
/// large Gemm beside it: the weights region grows by them), else on its weights transformed
/// once per run into the scratch; never with `winograd: false`. The 16-bit arena is the
/// same with and without it (the planner only grows scratch below the peak); outputs within
/// the tolerance of f32's at 1 and 2 threads.
#[test]
fn staged_winograd_bands_on_precomputed_or_per_run_weights() {
    use arenac_compiler::analysis::liveness::LivenessOptions;
    use arenac_compiler::analysis::liveness::winograd::{
        chosen_nodes, precomputed, precomputed_growth,
    };
    let mut rng = Rng(0x3a3);
    let wt = rng.tensor(&[32, 16, 3, 3], -0.5, 0.5);
    let fc = rng.tensor(&[32, 2048], -0.1, 0.1);
    let x = [2, 16, 38, 35];
    let big = [1, 8, 256, 256];
    let build = |with_fc: bool| {
        let b = ModelBuilder::new("act16_wino", 18)
            .input("x", DType::F32, &dims(&x))
            .input("b", DType::F32, &dims(&big))
            .output("z", DType::F32, &[])
            .initializer("w", &wt)
            // The peak, beside the conv: its scratch may grow.
            .node(
                "cat",
                "Concat",
                &["b", "b"],
                &["bb"],
                vec![("axis", Attr::Int(1))],
            )
            .node("gz", "GlobalAveragePool", &["bb"], &["z"], vec![])
            .node("n", "Neg", &["x"], &["n"], vec![])
            .node(
                "c",
                "Conv",
                &["n", "w"],
                &["c"],
                vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))],
            )
            .node("r", "Relu", &["c"], &["r"], vec![]);
        if with_fc {
            b.initializer("fc", &fc)
                .node("gap", "GlobalAveragePool", &["r"], &["g"], vec![])
                .node("flat", "Flatten", &["g"], &["f"], vec![])
                .node("head", "Gemm", &["f", "fc"], &["y"], vec![])
                .output("y", DType::F32, &[])
                .build()
        } else {
            b.node("y", "Neg", &["r"], &["y"], vec![])
                .output("y", DType::F32, &[])
                .build()
        }
    };
    let plan_with = |g: &mut Graph, winograd: bool| {
        let liveness = LivenessOptions {
            winograd,
            ..LivenessOptions::full()
        };
        let opts = PlanOptions {
            activations: ActType::F16,
            liveness,
            ..PlanOptions::default()
        };
        (plan_graph(g, &opts).expect("plans"), liveness)
    };
    for with_fc in [true, false] {
        let model = build(with_fc);
        let mut g = import(&model);
        let (plan, o) = plan_with(&mut g, true);
        let (id, _) = g.nodes().find(|(_, n)| n.name == "c").expect("c");
        assert_eq!(chosen_nodes(&g, &plan), vec![id], "fc {with_fc}");
        assert_eq!(precomputed(&g, &o).len(), usize::from(with_fc));
        let growth = precomputed_growth(&g, &plan);
        if with_fc {
            assert!(growth >= 3 * 32 * 16 * 9 * 4, "growth {growth}");
        } else {
            assert_eq!(growth, 0);
        }
        let mut g0 = import(&model);
        let (plan0, _) = plan_with(&mut g0, false);
        assert!(chosen_nodes(&g0, &plan0).is_empty());
        assert_eq!(plan.arena_bytes, plan0.arena_bytes, "fc {with_fc}");
        let inputs = [rng.tensor(&x, -1.0, 1.0), rng.tensor(&big, -1.0, 1.0)];
        // One program planned for 2 threads: the same bits inline and on a pool of 2 (the
        // bands' Winograd units and the per-run transform split over the workers).
        let mut g2 = import(&model);
        let liveness = LivenessOptions::full().with_threads(2);
        let opts = PlanOptions {
            activations: ActType::F16,
            liveness,
            ..PlanOptions::default()
        };
        let plan2 = plan_graph(&mut g2, &opts).expect("plans");
        assert_eq!(
            chosen_nodes(&g2, &plan2).len(),
            1,
            "fc {with_fc}, 2 threads"
        );
        let exe = compile(&g2, &plan2).unwrap_or_else(|e| panic!("compiles: {e}"));
        let inline = run(&exe, &inputs);
        let pool = arenac_compiler::par::Pool::new(2).expect("threads");
        pool.set_eager(true);
        let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
        for (slot, t) in exe.inputs().iter().zip(&inputs) {
            let n = slot.stored_bytes().expect("static");
            slot.store(
                t.bytes(),
                &mut arena.as_mut_slice()[slot.offset..slot.offset + n],
            );
        }
        // SAFETY: the arena is 64-aligned, `arena_bytes` long, ours alone, inputs written.
        unsafe { exe.run_with(arena.as_mut_ptr(), Some(&pool)) }.expect("no fault");
        assert!(pool.jobs() >= 1, "no kernel went parallel");
        for (o, (slot, want)) in exe.outputs().iter().zip(&inline).enumerate() {
            let b = want.bytes();
            assert!(
                arena.as_slice()[slot.offset..slot.offset + b.len()] == *b,
                "output {o}: 2 threads differ from inline"
            );
        }
        let staged = if with_fc { 4 } else { 3 };
        check_act(model, &inputs, staged, None);
    }
}
