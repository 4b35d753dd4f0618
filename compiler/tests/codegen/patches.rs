//! Patch-based execution (`analysis::patches`): random conv stacks (strides, dilations,
//! asymmetric pads, odd sizes, depthwise, residual adds, ceil-mode pooling) rewritten to run
//! their leading stages patch by patch, on every stage the analysis finds and every grid from
//! one patch to one patch per output pixel. Each rewritten graph is compiled and run; its
//! outputs are compared with the unpatched program's (bit for bit where the kernels take the
//! same path, else within 1e-6 of the output's scale) and its reference evaluation with the
//! original graph's.

use arenac_compiler::analysis::liveness::LivenessOptions;
use arenac_compiler::analysis::patches::{PatchPlan, analyze, has_stage, in_stage, rewrite};
use arenac_compiler::arena::plan_graph;
use arenac_compiler::ops::Op;

use crate::common::*;

/// A stem and a few blocks: conv 3x3/s2 + Relu, depthwise 3x3 + Relu, pointwise expand and
/// project with a residual Add, a dilated conv with asymmetric pads, ceil-mode MaxPool, then
/// GlobalAveragePool (which ends every stage).
fn stack(h: usize, w: usize, c: usize, rng: &mut Rng) -> ModelProto {
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let mut t = |name: &str, shape: &[usize]| (name.to_string(), rng.tensor(shape, -0.5, 0.5));
    let inits = [
        t("w1", &[c, 3, 3, 3]),
        t("b1", &[c]),
        t("wd", &[c, 1, 3, 3]),
        t("bd", &[c]),
        t("we", &[2 * c, c, 1, 1]),
        t("wp", &[c, 2 * c, 1, 1]),
        t("bp", &[c]),
        t("wx", &[c, c, 3, 3]),
        t("s", &[1, c, 1, 1]),
    ];
    let mut mb = ModelBuilder::new("stack", 13)
        .input("x", DType::F32, &dims(&[1, 3, h, w]))
        .output("y", DType::F32, &[]);
    for (name, tensor) in &inits {
        mb = mb.initializer(name, tensor);
    }
    mb.node(
        "stem",
        "Conv",
        &["x", "w1", "b1"],
        &["a"],
        vec![("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))],
    )
    .node("r1", "Relu", &["a"], &["ar"], vec![])
    .node(
        "dw",
        "Conv",
        &["ar", "wd", "bd"],
        &["d"],
        vec![
            ("pads", ints(&[1, 1, 1, 1])),
            ("group", Attr::Int(c as i64)),
        ],
    )
    .node("r2", "Relu", &["d"], &["dr"], vec![])
    .node("exp", "Conv", &["dr", "we"], &["e"], vec![])
    .node("r3", "Relu", &["e"], &["er"], vec![])
    .node("proj", "Conv", &["er", "wp", "bp"], &["p"], vec![])
    .node("add", "Add", &["p", "ar"], &["q"], vec![])
    .node("scale", "Mul", &["q", "s"], &["qs"], vec![])
    .node(
        "dil",
        "Conv",
        &["qs", "wx"],
        &["u"],
        vec![
            ("pads", ints(&[2, 1, 1, 2])),
            ("dilations", ints(&[2, 1])),
            ("strides", ints(&[1, 2])),
        ],
    )
    .node(
        "mp",
        "MaxPool",
        &["u"],
        &["m"],
        vec![
            ("kernel_shape", ints(&[3, 3])),
            ("strides", ints(&[2, 2])),
            ("ceil_mode", Attr::Int(1)),
        ],
    )
    .node("gap", "GlobalAveragePool", &["m"], &["y"], vec![])
    .build()
}

/// `|a - b| <= 1e-6 * max |a|` everywhere; returns whether every element is the same bits.
fn close(a: &Tensor, b: &Tensor, what: &str) -> bool {
    assert_eq!(a.shape(), b.shape(), "{what}: shape");
    let (a, b) = (a.to_f32_vec(), b.to_f32_vec());
    let scale = a.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-30);
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-6 * scale,
            "{what}: element {i}: unpatched {x}, patched {y}"
        );
    }
    a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn every_stage_and_grid_matches_the_unpatched_program() {
    let mut rng = Rng(0x9a7c4);
    let (mut graphs, mut exact) = (0, 0);
    for (h, w, c) in [(23, 19, 8), (16, 16, 5), (31, 9, 12)] {
        let model = stack(h, w, c, &mut rng);
        let x = rng.tensor(&[1, 3, h, w], -1.0, 1.0);
        let mut g = import(&model);
        let want_ref = eval_graph(&g, std::slice::from_ref(&x)).expect("reference");
        let plan = plan_graph(&mut g, &PlanOptions::default()).expect("plans");
        let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
        let want = run(&exe, std::slice::from_ref(&x));
        let report = analyze(&g, &plan.schedule, LivenessOptions::full(), usize::MAX);
        assert!(!report.candidates.is_empty(), "{h}x{w}: no stage found");
        let mut stages: Vec<&PatchPlan> = Vec::new();
        for cand in &report.candidates {
            if stages.last().is_none_or(|s| s.nodes != cand.nodes) {
                stages.push(cand);
            }
        }
        for stage in stages {
            let oshape = &g.value(stage.output).ty.shape;
            let grids = 1..=oshape[2].min(oshape[3]);
            for grid in grids {
                let what = format!("{h}x{w}x{c}, stage of {} nodes, grid {grid}", stage.nodes);
                let cand = PatchPlan {
                    grid,
                    ..stage.clone()
                };
                let mut ng = rewrite(&g, &plan.schedule, &cand)
                    .unwrap_or_else(|| panic!("{what}: not rewritten"));
                arenac_compiler::ir::verify::verify(&ng)
                    .unwrap_or_else(|e| panic!("{what}: invalid graph: {e}"));
                let got_ref = eval_graph(&ng, std::slice::from_ref(&x)).expect("reference");
                for (a, b) in want_ref.iter().zip(&got_ref) {
                    close(a, b, &format!("{what} (reference)"));
                }
                let p = plan_graph(&mut ng, &PlanOptions::default()).expect("plans");
                let exe = compile(&ng, &p).unwrap_or_else(|e| panic!("{what}: compiles: {e}"));
                let got = run(&exe, std::slice::from_ref(&x));
                graphs += 1;
                if want.iter().zip(&got).all(|(a, b)| close(a, b, &what)) {
                    exact += 1;
                }
            }
        }
    }
    assert!(graphs > 40, "only {graphs} rewritten graphs");
    eprintln!("{exact} of {graphs} patched programs bit-identical to the unpatched one");
}

/// With `patches` on, the planner keeps the rewrite only when it plans a smaller arena, and
/// the program computes the same outputs.
#[test]
fn plan_graph_patches_a_large_stem() {
    let mut rng = Rng(0x51ab);
    let model = stack(96, 96, 16, &mut rng);
    let x = rng.tensor(&[1, 3, 96, 96], -1.0, 1.0);
    let mut plain = import(&model);
    let p0 = plan_graph(&mut plain, &PlanOptions::default()).expect("plans");
    assert!(p0.patches.is_none());
    let mut g = import(&model);
    let opts = PlanOptions {
        patches: true,
        ..PlanOptions::default()
    };
    let p1 = plan_graph(&mut g, &opts).expect("plans");
    let info = p1.patches.clone().expect("a stage is patched");
    assert_eq!(info.unpatched_bytes, p0.arena_bytes);
    assert!(
        p1.arena_bytes * 2 < p0.arena_bytes,
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
        close(a, b, "patched by the planner");
    }
}

/// `patches::in_stage` marks exactly the nodes the rewrite emits per patch, and Winograd,
/// kept for the rest of the graph, is never chosen for them.
#[test]
fn in_stage_marks_the_patched_nodes_only() {
    let mut rng = Rng(0x1257);
    let model = stack(40, 40, 8, &mut rng);
    let mut g = import(&model);
    let plan = plan_graph(&mut g, &PlanOptions::default()).expect("plans");
    assert!(g.nodes().all(|(id, _)| !in_stage(&g, id)));
    let report = analyze(&g, &plan.schedule, LivenessOptions::full(), 3);
    let cand = report
        .candidates
        .iter()
        .find(|c| c.nodes + 1 < plan.schedule.len())
        .expect("a stage with nodes after it");
    let mut ng = rewrite(&g, &plan.schedule, cand).expect("rewritten");
    assert!(has_stage(&ng));
    let (mut inside, mut outside) = (0, 0);
    for (id, node) in ng.nodes() {
        if matches!(node.op, Op::PatchWrite { .. }) {
            continue;
        }
        let copy = node.name.contains("@p");
        assert_eq!(in_stage(&ng, id), copy, "{}", node.name);
        if copy {
            inside += 1;
        } else {
            outside += 1;
        }
    }
    assert!(
        inside >= cand.grid * cand.grid * cand.nodes / 2,
        "{inside} copies"
    );
    assert_eq!(outside, plan.schedule.len() - cand.nodes);
    let p = plan_graph(&mut ng, &PlanOptions::default()).expect("plans");
    for id in arenac_compiler::analysis::liveness::winograd::chosen_nodes(&ng, &p) {
        assert!(
            !in_stage(&ng, id),
            "Winograd in the stage: {}",
            ng.node(id).name
        );
    }
}
