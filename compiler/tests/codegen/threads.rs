//! Threads: every parallel kernel (Conv by units and split products, pointwise and depthwise
//! Conv, pooling, Gemm/MatMul, row-split element-wise, fused, Softmax and normalization
//! loops) planned and compiled for 1, 2 and 3 threads, run on a pool of that size: the
//! outputs are bit-identical to one thread's, and match the reference evaluation.

use arenac_compiler::analysis::liveness::LivenessOptions;
use arenac_compiler::arena::plan_graph;
use arenac_compiler::codegen::weights::AlignedBytes;
use arenac_compiler::par::Pool;

use crate::common::*;

/// Plans `g` for `threads` threads, compiles it and runs it on a pool of that size; returns
/// the outputs' bits and the arena size. With several threads, some job must have gone to
/// the pool's workers (else the comparison would prove nothing).
fn run_on(g: &Graph, inputs: &[Tensor], threads: usize) -> (Vec<Vec<u8>>, usize) {
    let mut g = g.clone();
    let opts = PlanOptions {
        liveness: LivenessOptions::full().with_threads(threads),
        ..PlanOptions::default()
    };
    let plan = plan_graph(&mut g, &opts).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
    assert_eq!(exe.threads(), threads);
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    let pool = Pool::new(threads).expect("threads");
    // Small test inputs: every kernel's split path, whatever its cost (the cost thresholds
    // are tested in par/tests.rs).
    pool.set_eager(true);
    // Twice: the second run reuses the parked workers. The inputs are written before each
    // run, as `Session::run` does: an input's buffer is free for later values once the input
    // is dead, so the first run may have overwritten it.
    for _ in 0..2 {
        for (slot, t) in exe.inputs().iter().zip(inputs) {
            let n = slot.stored_bytes().expect("static");
            slot.store(
                t.bytes(),
                &mut arena.as_mut_slice()[slot.offset..slot.offset + n],
            );
        }
        // SAFETY: the arena is 64-aligned, `arena_bytes` long, ours alone, inputs written.
        unsafe { exe.run_with(arena.as_mut_ptr(), Some(&pool)) }.expect("no fault");
    }
    if threads > 1 {
        assert!(
            pool.jobs() >= 2,
            "no kernel went parallel on {threads} threads"
        );
    }
    let outs = exe
        .outputs()
        .iter()
        .map(|s| {
            let n = s.ty.bytes().expect("static");
            arena.as_slice()[s.offset..s.offset + n].to_vec()
        })
        .collect();
    (outs, exe.arena_bytes())
}

/// The model at 1, 2 and 3 threads: identical bits; one thread against the reference.
fn same_at_every_count(model: ModelProto, inputs: &[Tensor], rtol: f32, atol: f32) {
    let g = import(&model);
    check_graph(&g, inputs, rtol, atol);
    let (one, arena1) = run_on(&g, inputs, 1);
    for threads in [2, 3] {
        let (many, arena) = run_on(&g, inputs, threads);
        assert!(arena >= arena1, "more threads never shrink the arena");
        for (o, (a, b)) in one.iter().zip(&many).enumerate() {
            assert!(a == b, "output {o}: {threads} threads differ from one");
        }
    }
}

/// Conv + Relu, or with `silu` Conv + Sigmoid + Mul (fused into the conv's epilogue, whose
/// vectorized exp must give the same bits however the product is cut).
fn conv_model(
    x: &[usize],
    w: &[usize],
    attrs: Vec<(&str, Attr)>,
    silu: bool,
    rng: &mut Rng,
) -> ModelProto {
    let wt = rng.tensor(w, -0.5, 0.5);
    let bt = rng.tensor(&[w[0]], -0.5, 0.5);
    let mb = ModelBuilder::new("conv", 13)
        .input("x", DType::F32, &dims(x))
        .output("y", DType::F32, &[])
        .initializer("w", &wt)
        .initializer("b", &bt)
        .node("c", "Conv", &["x", "w", "b"], &["c"], attrs);
    if silu {
        mb.node("s", "Sigmoid", &["c"], &["s"], vec![])
            .node("m", "Mul", &["c", "s"], &["m"], vec![])
            .node("n", "Neg", &["m"], &["y"], vec![])
            .build()
    } else {
        mb.node("r", "Relu", &["c"], &["y"], vec![]).build()
    }
}

#[test]
fn convolutions() {
    let mut rng = Rng(0x7123);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    type Case<'a> = (Vec<usize>, Vec<usize>, Vec<(&'a str, Attr)>);
    let cases: Vec<Case<'_>> = vec![
        // Many units (a large plane): whole tiles per thread (im2col: rows under 14 pixels,
        // not "same").
        (
            vec![1, 16, 200, 12],
            vec![32, 16, 3, 3],
            vec![("pads", ints(&[0, 1, 0, 1]))],
        ),
        // Direct at stride 2 (few input channels). Enough output channels that the im2col
        // path (AVX2) also splits its units: alone in the graph, this conv is the peak and
        // gets the smallest tile (64 pixels).
        (
            vec![1, 3, 61, 67],
            vec![64, 3, 3, 3],
            vec![("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))],
        ),
        // Direct rows (stride 1, wide rows, not "same"; AVX-512): rows of 12-channel panels
        // and a last panel of 4, rows ending mid-vector.
        (
            vec![1, 16, 40, 40],
            vec![32, 16, 3, 3],
            vec![("pads", ints(&[0, 1, 0, 1]))],
        ),
        // Direct over the flat plane ("same", stride 1; AVX-512): chunks across row ends,
        // panels innermost (input the larger operand), batch 2, a last panel of 10.
        (
            vec![2, 20, 17, 45],
            vec![70, 20, 3, 5],
            vec![("pads", ints(&[1, 2, 1, 2]))],
        ),
        // Flat with chunks innermost (weights the larger operand), a last chunk of 1 pixel.
        (
            vec![1, 64, 7, 7],
            vec![40, 64, 3, 3],
            vec![("pads", ints(&[1, 1, 1, 1]))],
        ),
        // Channels in lanes (whole groups of 64 channels, AVX-512): stride 2 with many
        // input channels, regions of every tap range, chunks across region rows.
        (
            vec![1, 32, 23, 19],
            vec![128, 32, 3, 3],
            vec![("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))],
        ),
        // Channels in lanes over a 7 x 7 plane (stride 1, "same"), batch 2.
        (
            vec![2, 64, 7, 7],
            vec![192, 64, 3, 3],
            vec![("pads", ints(&[1, 1, 1, 1]))],
        ),
        // One tile: the product split over threads; edge rows (m = 70).
        (vec![1, 64, 9, 9], vec![70, 64, 3, 3], vec![]),
        // One tile, fewer pixels (64) than output channels (200): the product split over
        // threads, its im2col panel (k = 1152 rows) built by the threads together.
        (
            vec![1, 128, 16, 16],
            vec![200, 128, 3, 3],
            vec![("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))],
        ),
        // One tile of more pixels (100) than output channels: cut into a tile per thread
        // (64 + 36 pixels), each thread building its own panel.
        (
            vec![1, 32, 20, 20],
            vec![24, 32, 3, 3],
            vec![("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))],
        ),
        // 1x1 stride 2 (ResNet's downsampling), one tile of 225 pixels cut per thread.
        (
            vec![1, 64, 30, 30],
            vec![40, 64, 1, 1],
            vec![("strides", ints(&[2, 2]))],
        ),
        // Pointwise, one tile of 196 pixels cut per thread (112 + 84), edge rows (m = 52).
        (vec![1, 64, 14, 14], vec![52, 64, 1, 1], vec![]),
        // Pointwise with a partial last panel (pixels % 16 != 0), batch 2.
        (vec![2, 96, 15, 15], vec![48, 96, 1, 1], vec![]),
        // Small-plane pointwise (gemm/pw_small.rs): 7x7, channel blocks of 32 per task, a
        // last block of 8 channels; and a 1x1 plane (squeeze-excitation), batch 2.
        (vec![1, 160, 7, 7], vec![136, 160, 1, 1], vec![]),
        (vec![2, 200, 1, 1], vec![1000, 200, 1, 1], vec![]),
        // Grouped, strided.
        (
            vec![1, 32, 30, 30],
            vec![64, 8, 3, 3],
            vec![("group", Attr::Int(4)), ("strides", ints(&[2, 2]))],
        ),
        // Depthwise.
        (
            vec![1, 64, 56, 56],
            vec![64, 1, 3, 3],
            vec![("group", Attr::Int(64)), ("pads", ints(&[1, 1, 1, 1]))],
        ),
    ];
    for (x, w, attrs) in cases {
        for silu in [false, true] {
            let m = conv_model(&x, &w, attrs.clone(), silu, &mut rng);
            let xt = rng.tensor(&x, -1.0, 1.0);
            same_at_every_count(m, &[xt], 1e-4, 1e-4);
        }
    }
}

#[test]
fn pooling() {
    let mut rng = Rng(0x9001);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    for op in ["MaxPool", "AveragePool"] {
        // The input is a graph input (never written over): out of place, parallel planes.
        let m = ModelBuilder::new("pool", 13)
            .input("x", DType::F32, &dims(&[2, 64, 40, 40]))
            .output("y", DType::F32, &[])
            .node(
                "p",
                op,
                &["x"],
                &["y"],
                vec![
                    ("kernel_shape", ints(&[3, 3])),
                    ("strides", ints(&[2, 2])),
                    ("pads", ints(&[1, 1, 1, 1])),
                ],
            )
            .build();
        let x = rng.tensor(&[2, 64, 40, 40], -1.0, 1.0);
        same_at_every_count(m, &[x], 1e-5, 1e-6);
    }
}

#[test]
fn products() {
    let mut rng = Rng(0x4711);
    // Gemm with M = 1 (a column split), a MatMul of two activations (run-time B), batched.
    let w = rng.tensor(&[512, 1000], -0.1, 0.1);
    let m = ModelBuilder::new("gemv", 13)
        .input("x", DType::F32, &dims(&[1, 512]))
        .output("y", DType::F32, &[])
        .initializer("w", &w)
        .node("g", "Gemm", &["x", "w"], &["y"], vec![])
        .build();
    let x = rng.tensor(&[1, 512], -1.0, 1.0);
    same_at_every_count(m, &[x], 1e-4, 1e-4);
    let m = ModelBuilder::new("bmm", 13)
        .input("a", DType::F32, &dims(&[4, 100, 96]))
        .input("b", DType::F32, &dims(&[4, 96, 130]))
        .output("y", DType::F32, &[])
        .node("mm", "MatMul", &["a", "b"], &["y"], vec![])
        .build();
    let a = rng.tensor(&[4, 100, 96], -1.0, 1.0);
    let b = rng.tensor(&[4, 96, 130], -1.0, 1.0);
    same_at_every_count(m, &[a, b], 1e-4, 1e-4);
}

#[test]
fn row_split_loops() {
    let mut rng = Rng(0x2b2b);
    // A flat element-wise loop of an odd length (chunks in whole 4-lane groups), a fused
    // SiLU over rows with a broadcast per-channel operand, Softmax rows, LayerNormalization.
    let s = [1, 3, 25_001];
    let m = ModelBuilder::new("add", 13)
        .input("a", DType::F32, &dims(&s))
        .input("b", DType::F32, &dims(&s))
        .output("y", DType::F32, &[])
        .node("add", "Add", &["a", "b"], &["y"], vec![])
        .build();
    let (a, b) = (rng.tensor(&s, -1.0, 1.0), rng.tensor(&s, -1.0, 1.0));
    same_at_every_count(m, &[a, b], 1e-6, 1e-6);

    let s = [1, 48, 40, 40];
    let c = rng.tensor(&[1, 48, 1, 1], -1.0, 1.0);
    let m = ModelBuilder::new("silu", 13)
        .input("x", DType::F32, &dims(&s))
        .output("y", DType::F32, &[])
        .initializer("c", &c)
        .node("a", "Add", &["x", "c"], &["t"], vec![])
        .node("s", "Sigmoid", &["t"], &["st"], vec![])
        .node("m", "Mul", &["t", "st"], &["y"], vec![])
        .build();
    let x = rng.tensor(&s, -4.0, 4.0);
    same_at_every_count(m, &[x], 1e-5, 1e-6);

    let s = [4, 128, 130];
    let m = ModelBuilder::new("softmax", 13)
        .input("x", DType::F32, &dims(&s))
        .output("y", DType::F32, &[])
        .node(
            "sm",
            "Softmax",
            &["x"],
            &["y"],
            vec![("axis", Attr::Int(-1))],
        )
        .build();
    let x = rng.tensor(&s, -4.0, 4.0);
    same_at_every_count(m, &[x], 1e-5, 1e-6);

    let s = [2, 200, 256];
    let (g, bt) = (rng.tensor(&[256], 0.5, 1.5), rng.tensor(&[256], -0.5, 0.5));
    let m = ModelBuilder::new("ln", 17)
        .input("x", DType::F32, &dims(&s))
        .output("y", DType::F32, &[])
        .initializer("g", &g)
        .initializer("b", &bt)
        .node(
            "ln",
            "LayerNormalization",
            &["x", "g", "b"],
            &["y"],
            vec![("axis", Attr::Int(-1)), ("epsilon", Attr::Float(1e-5))],
        )
        .build();
    let x = rng.tensor(&s, -2.0, 2.0);
    same_at_every_count(m, &[x], 1e-4, 1e-5);
}

/// Winograd F(4x4, 3x3) convolutions: taken by the planner only where their scratch keeps
/// the peak, so each model also concatenates a large second input (the peak) and pools it
/// while the conv runs beside it. One tile block with the output channels split over the threads, a
/// batch of 2 with an odd plane, uneven pads and 70 channels (a partial row block and
/// micro-panel), and several tile blocks per image; Relu or a SiLU epilogue.
#[test]
fn winograd_convolutions() {
    let mut rng = Rng(0x3141);
    /// Input shape, weight shape, pads, SiLU epilogue.
    type Case = (&'static [usize], &'static [usize], &'static [i64], bool);
    let cases: [Case; 3] = [
        (&[1, 16, 40, 40], &[16, 16, 3, 3], &[1, 1, 1, 1], false),
        (&[2, 20, 37, 45], &[70, 20, 3, 3], &[0, 1, 2, 1], true),
        (&[1, 8, 70, 66], &[24, 8, 3, 3], &[1, 1, 1, 1], false),
    ];
    for (x, w, pads, silu) in cases {
        let wt = rng.tensor(w, -0.5, 0.5);
        let bt = rng.tensor(&[w[0]], -0.5, 0.5);
        let big = [1, 4, 512, 512];
        let mb = ModelBuilder::new("wino", 13)
            .input("x", DType::F32, &dims(x))
            .input("b", DType::F32, &dims(&big))
            .output("y", DType::F32, &[])
            .output("z", DType::F32, &[])
            .initializer("w", &wt)
            .initializer("bias", &bt)
            .node(
                "cat",
                "Concat",
                &["b", "b"],
                &["bb"],
                vec![("axis", Attr::Int(1))],
            )
            .node("gap", "GlobalAveragePool", &["bb"], &["z"], vec![])
            .node(
                "c",
                "Conv",
                &["x", "w", "bias"],
                &["c"],
                vec![("pads", Attr::Ints(pads.to_vec()))],
            );
        let model = if silu {
            mb.node("s", "Sigmoid", &["c"], &["s"], vec![])
                .node("m", "Mul", &["c", "s"], &["y"], vec![])
                .build()
        } else {
            mb.node("r", "Relu", &["c"], &["y"], vec![]).build()
        };
        let g = import(&model);
        for threads in [1, 2, 3] {
            let mut gp = g.clone();
            let opts = PlanOptions {
                liveness: LivenessOptions::full().with_threads(threads),
                ..PlanOptions::default()
            };
            let plan = plan_graph(&mut gp, &opts).expect("plans");
            let chosen = arenac_compiler::analysis::liveness::winograd::chosen_nodes(&gp, &plan);
            assert_eq!(
                chosen.len(),
                1,
                "{x:?}: the conv runs Winograd at {threads} threads"
            );
        }
        let inputs = [rng.tensor(x, -1.0, 1.0), rng.tensor(&big, -1.0, 1.0)];
        same_at_every_count(model, &inputs, 1e-4, 1e-4);
    }
}

/// A graph input whose buffer is free once it is read (`b`, read only by the Concat) while
/// a parallel Conv runs beside it: `run_on` writes the inputs before each of its runs, as a
/// session does, so the second run reads `b` again and not what the first run left in its
/// buffer (before, this harness wrote them once, and the second run's `z` held the Conv's
/// output at one thread).
#[test]
fn an_input_buffer_reused_after_its_last_read() {
    let mut rng = Rng(0x51ab);
    let wt = rng.tensor(&[16, 8, 3, 3], -0.5, 0.5);
    let model = ModelBuilder::new("reuse", 13)
        .input("x", DType::F32, &dims(&[1, 8, 32, 32]))
        .input("b", DType::F32, &dims(&[1, 4, 8, 8]))
        .output("y", DType::F32, &[])
        .output("z", DType::F32, &[])
        .initializer("w", &wt)
        .node(
            "z",
            "Concat",
            &["b", "b"],
            &["z"],
            vec![("axis", Attr::Int(1))],
        )
        .node(
            "c",
            "Conv",
            &["x", "w"],
            &["y"],
            vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .build();
    let inputs = [
        rng.tensor(&[1, 8, 32, 32], -1.0, 1.0),
        rng.tensor(&[1, 4, 8, 8], -1.0, 1.0),
    ];
    same_at_every_count(model, &inputs, 1e-4, 1e-5);
}

/// Winograd's precomputed weights: a 3 x 3 Conv whose transformed weights (4x its own) fit in
/// a quarter of the model's weights (a large Gemm beside it) reads them from the weights
/// region (the executable's region holds them, and the plan's scratch has no head); alone,
/// the growth would be 3x the model's weights, so it transforms per run; with reduced
/// weights (`winograd_precompute: false`) never. Outputs as in `winograd_convolutions`.
#[test]
fn winograd_precomputed_weights_within_a_share_of_the_model() {
    use arenac_compiler::analysis::liveness::winograd::{chosen_nodes, precomputed};
    let mut rng = Rng(0x9e37);
    let wt = rng.tensor(&[32, 16, 3, 3], -0.5, 0.5);
    // 36 transformed 32 x 16 matrices (rows padded to the micro-kernel's) ~ 83 KB, about
    // 64 KB more than the 18 KB of weights: within a quarter of 18 + 262 KB, not of 18 KB.
    let fc = rng.tensor(&[32, 2048], -0.1, 0.1);
    let big = [1, 4, 256, 256];
    let build = |with_fc: bool| {
        let b = ModelBuilder::new("wino_pre", 13)
            .input("x", DType::F32, &dims(&[1, 16, 32, 32]))
            .input("b", DType::F32, &dims(&big))
            .output("y", DType::F32, &[])
            .output("z", DType::F32, &[])
            .initializer("w", &wt)
            // The peak, beside the conv (as in `winograd_convolutions`).
            .node(
                "cat",
                "Concat",
                &["b", "b"],
                &["bb"],
                vec![("axis", Attr::Int(1))],
            )
            .node("gz", "GlobalAveragePool", &["bb"], &["z"], vec![])
            .node(
                "c",
                "Conv",
                &["x", "w"],
                &["c"],
                vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))],
            );
        if with_fc {
            b.initializer("fc", &fc)
                .node("gap", "GlobalAveragePool", &["c"], &["g"], vec![])
                .node("flat", "Flatten", &["g"], &["f"], vec![])
                .node("head", "Gemm", &["f", "fc"], &["y"], vec![])
                .build()
        } else {
            b.node("r", "Relu", &["c"], &["y"], vec![]).build()
        }
    };
    for (with_fc, winograd_precompute, want) in
        [(true, true, 1), (false, true, 0), (true, false, 0)]
    {
        let model = build(with_fc);
        let mut g = import(&model);
        let o = LivenessOptions {
            winograd_precompute,
            ..LivenessOptions::full()
        };
        let plan = plan_graph(
            &mut g,
            &PlanOptions {
                liveness: o,
                ..PlanOptions::default()
            },
        )
        .expect("plans");
        assert_eq!(
            precomputed(&g, &o).len(),
            want,
            "fc {with_fc}, f32 {winograd_precompute}"
        );
        assert_eq!(chosen_nodes(&g, &plan).len(), 1, "Winograd either way");
        let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
        let own = 4 * (32 * 16 * 9 + if with_fc { 32 * 2048 } else { 0 });
        let growth = arenac_compiler::analysis::liveness::winograd::precomputed_growth(&g, &plan);
        if want == 1 {
            assert!(growth >= 3 * 32 * 16 * 9 * 4, "growth {growth}");
            assert!(
                exe.weights_bytes() >= own + growth,
                "{} bytes",
                exe.weights_bytes()
            );
        } else {
            assert_eq!(growth, 0);
        }
        let inputs = [
            rng.tensor(&[1, 16, 32, 32], -1.0, 1.0),
            rng.tensor(&big, -1.0, 1.0),
        ];
        same_at_every_count(model, &inputs, 1e-4, 1e-4);
    }
}
