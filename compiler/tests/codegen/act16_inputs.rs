//! `--activations f16|bf16` stores an f32 graph input read only in its narrow form narrowed
//! (`analysis::act_type`, `PlanOptions::narrow_inputs`): its Cast dropped, the input rounded
//! on copy-in (`IoSlot::store`). The outputs are those of the plan with the explicit Cast,
//! bit for bit; the arena loses the f32 input at its peak; an input also read in f32 is not
//! narrowed.

use arenac_compiler::analysis::act_type::{ActReport, ActType};
use arenac_compiler::arena::plan_graph;

use crate::common::*;

/// Plans `g` with `act` activations, inputs narrowed or not, compiles and runs it: outputs,
/// report, arena bytes and the input slots' stored types.
fn run_narrowed(
    g: &Graph,
    inputs: &[Tensor],
    act: ActType,
    narrow_inputs: bool,
    threads: usize,
) -> (Vec<Tensor>, ActReport, usize, Vec<DType>) {
    let mut g = g.clone();
    let opts = PlanOptions {
        activations: act,
        narrow_inputs,
        liveness: arenac_compiler::analysis::liveness::LivenessOptions::full()
            .with_threads(threads),
        ..PlanOptions::default()
    };
    let plan = plan_graph(&mut g, &opts).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles ({}): {e}", act.name()));
    for (slot, t) in exe.inputs().iter().zip(inputs) {
        // The caller's view is the declared one.
        assert_eq!(
            slot.ty.dtype,
            t.dtype(),
            "input {} keeps its type",
            slot.name
        );
        assert_eq!(
            slot.ty.shape,
            t.shape(),
            "input {} keeps its shape",
            slot.name
        );
    }
    let stored = exe.inputs().iter().map(|s| s.stored).collect();
    let out = run(&exe, inputs);
    (out, plan.activations.clone(), plan.arena_bytes, stored)
}

/// Conv (3x3, stride 2) + Relu + Neg on an input of shape `x`.
fn conv_model(rng: &mut Rng, x: &[usize], m: usize) -> ModelProto {
    let w = rng.tensor(&[m, x[1], 3, 3], -0.5, 0.5);
    let b = rng.tensor(&[m], -0.5, 0.5);
    ModelBuilder::new("incast", 18)
        .input("x", DType::F32, &dims(x))
        .initializer("w", &w)
        .initializer("b", &b)
        .node(
            "conv",
            "Conv",
            &["x", "w", "b"],
            &["c"],
            vec![
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("strides", Attr::Ints(vec![2, 2])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
            ],
        )
        .node("relu", "Relu", &["c"], &["y"], vec![])
        .node("neg", "Neg", &["y"], &["z"], vec![])
        .output("z", DType::F32, &[])
        .build()
}

fn bits(ts: &[Tensor]) -> Vec<Vec<u8>> {
    ts.iter().map(|t| t.bytes().to_vec()).collect()
}

/// Bit for bit the explicit Cast's outputs, f16 and bf16, 1 and 2 threads; odd sizes; the
/// input stored narrow and listed; one Cast fewer.
#[test]
fn narrowed_input_gives_the_explicit_casts_bits() {
    let mut rng = Rng(0x1ca5_7000);
    for x in [vec![1, 3, 96, 96], vec![1, 3, 45, 47], vec![1, 1, 1, 1]] {
        let model = conv_model(&mut rng, &x, 8);
        let g = import(&model);
        let mut input = rng.tensor(&x, -3.0, 3.0);
        if x.iter().product::<usize>() > 10 {
            // Values that round differently in f16 and bf16, and out of f16's range.
            let mut v = input.to_f32_vec();
            v[0] = 70000.0;
            v[1] = 1.000_976_6;
            v[2] = -1e-8;
            input = Tensor::f32(x.clone(), &v);
        }
        let inputs = [input];
        for act in [ActType::F16, ActType::Bf16] {
            for threads in [1, 2] {
                let (want, r0, _, s0) = run_narrowed(&g, &inputs, act, false, threads);
                let (got, r1, _, s1) = run_narrowed(&g, &inputs, act, true, threads);
                let what = format!("{} {x:?} {threads} threads", act.name());
                assert_eq!(bits(&got), bits(&want), "{what}");
                assert_eq!((s0, s1), (vec![DType::F32], vec![act.dtype()]), "{what}");
                assert!(r0.narrowed_inputs.is_empty(), "{what}");
                assert_eq!(r1.narrowed_inputs, vec!["x".to_string()], "{what}");
                assert_eq!(r1.casts + 1, r0.casts, "{what}");
            }
        }
    }
}

/// The input's f32 copy is gone from the peak: with the explicit Cast the peak is step 0,
/// the f32 input beside its narrow copy; narrowed, the arena is the narrow input plus what
/// the Conv's step adds (its quarter-size output and scratch).
#[test]
fn narrowed_input_leaves_the_peak() {
    let mut rng = Rng(0x1ca5_7001);
    let x = [1, 3, 256, 256];
    let g = import(&conv_model(&mut rng, &x, 4));
    let inputs = [rng.tensor(&x, -1.0, 1.0)];
    let f32_input = x.iter().product::<usize>() * 4;
    let narrow_input = f32_input / 2;
    for act in [ActType::F16, ActType::Bf16] {
        let (_, _, cast, _) = run_narrowed(&g, &inputs, act, false, 1);
        let (_, _, narrowed, _) = run_narrowed(&g, &inputs, act, true, 1);
        let what = format!(
            "{}: arena {narrowed} narrowed vs {cast} with the Cast",
            act.name()
        );
        assert_eq!(cast, f32_input + narrow_input, "{what}");
        assert!(narrowed < narrow_input * 3 / 2, "{what}");
    }
}

/// An input also read by a node kept in f32 (Pow has no 16-bit path) or that is also a graph
/// output keeps its f32 slot and its Cast.
#[test]
fn input_read_in_f32_is_not_narrowed() {
    let mut rng = Rng(0x1ca5_7002);
    let x = [1, 4, 8, 8];
    let two = Tensor::f32(vec![1], &[2.0]);
    let kept = ModelBuilder::new("kept", 18)
        .input("x", DType::F32, &dims(&x))
        .initializer("two", &two)
        .node("relu", "Relu", &["x"], &["r"], vec![])
        .node("pow", "Pow", &["x", "two"], &["p"], vec![])
        .node("add", "Add", &["r", "p"], &["a"], vec![])
        .node("neg", "Neg", &["a"], &["z"], vec![])
        .output("z", DType::F32, &[])
        .build();
    let echoed = ModelBuilder::new("echo", 18)
        .input("x", DType::F32, &dims(&x))
        .node("relu", "Relu", &["x"], &["r"], vec![])
        .node("neg", "Neg", &["r"], &["z"], vec![])
        .output("z", DType::F32, &[])
        .output("x", DType::F32, &[])
        .build();
    let inputs = [rng.tensor(&x, -2.0, 2.0)];
    for (name, model) in [("kept", kept), ("echoed", echoed)] {
        let g = import(&model);
        let (want, _, _, _) = run_narrowed(&g, &inputs, ActType::F16, false, 1);
        let (got, r, _, stored) = run_narrowed(&g, &inputs, ActType::F16, true, 1);
        assert!(r.narrowed_inputs.is_empty(), "{name}: {r:?}");
        assert_eq!(stored, vec![DType::F32], "{name}");
        assert_eq!(bits(&got), bits(&want), "{name}");
    }
}

/// Two inputs, one narrowed (read by a Conv) and one not (read by Pow too), and a
/// 0-element input: each stored as decided, the outputs those of the explicit Casts.
#[test]
fn inputs_are_decided_one_by_one_and_empty_ones_work() {
    let mut rng = Rng(0x1ca5_7003);
    let two = Tensor::f32(vec![1], &[2.0]);
    let model = ModelBuilder::new("two", 18)
        .input("a", DType::F32, &dims(&[1, 5, 7]))
        .input("b", DType::F32, &dims(&[1, 5, 7]))
        .input("e", DType::F32, &dims(&[0, 3]))
        .initializer("two", &two)
        .node("ra", "Relu", &["a"], &["ra"], vec![])
        .node("pb", "Pow", &["b", "two"], &["pb"], vec![])
        .node("rb", "Sigmoid", &["b"], &["rb"], vec![])
        .node("s", "Add", &["ra", "rb"], &["s"], vec![])
        .node("t", "Add", &["s", "pb"], &["t"], vec![])
        .node("n", "Neg", &["t"], &["z"], vec![])
        .node("re", "Relu", &["e"], &["re"], vec![])
        .node("ne", "Neg", &["re"], &["ze"], vec![])
        .output("z", DType::F32, &[])
        .output("ze", DType::F32, &[])
        .build();
    let g = import(&model);
    let inputs = [
        rng.tensor(&[1, 5, 7], -2.0, 2.0),
        rng.tensor(&[1, 5, 7], -2.0, 2.0),
        Tensor::f32(vec![0, 3], &[]),
    ];
    for act in [ActType::F16, ActType::Bf16] {
        let (want, _, _, _) = run_narrowed(&g, &inputs, act, false, 1);
        let (got, r, _, stored) = run_narrowed(&g, &inputs, act, true, 1);
        assert!(r.narrowed_inputs.iter().any(|n| n == "a"), "{r:?}");
        assert!(!r.narrowed_inputs.iter().any(|n| n == "b"), "{r:?}");
        assert_eq!(stored[..2], [act.dtype(), DType::F32], "{}", act.name());
        assert_eq!(bits(&got), bits(&want), "{}", act.name());
    }
}
