//! Activations fused into the Conv epilogue: Sigmoid, Tanh, HardSigmoid, HardSwish, and
//! SiLU (`Sigmoid` then `Mul(x, sigmoid(x))`, either operand order) both as the fused
//! element-wise node the fusion pass makes of them and as two nodes (`Mul(x, s)` only: the
//! planner puts `Mul(s, x)` over `s`'s buffer, so that one stays two kernels); on the
//! im2col, pointwise and depthwise paths. Each against the reference evaluation, and the conv must have applied the
//! activation itself (only the conv's and the final Neg's kernels compiled).

use arenac_compiler::arena::plan_graph;

use crate::common::*;
use crate::dense::{RandomConv, random_conv};

/// The activation nodes after `c`, writing `a`.
type ActNodes = Vec<(&'static str, Vec<&'static str>, Vec<(&'static str, Attr)>)>;

fn activations() -> Vec<(&'static str, ActNodes)> {
    let one = |op: &'static str, attrs: Vec<(&'static str, Attr)>| vec![(op, vec!["c"], attrs)];
    vec![
        ("Sigmoid", one("Sigmoid", vec![])),
        ("Tanh", one("Tanh", vec![])),
        (
            "HardSigmoid",
            one(
                "HardSigmoid",
                vec![("alpha", Attr::Float(0.3)), ("beta", Attr::Float(0.6))],
            ),
        ),
        ("HardSwish", one("HardSwish", vec![])),
        (
            "SiLU x*s",
            vec![
                ("Sigmoid", vec!["c"], vec![]),
                ("Mul", vec!["c", "s"], vec![]),
            ],
        ),
        (
            "SiLU s*x",
            vec![
                ("Sigmoid", vec!["c"], vec![]),
                ("Mul", vec!["s", "c"], vec![]),
            ],
        ),
    ]
}

/// Conv `c` (random geometry), the activation nodes, then `y = Neg(a)` (so the activation's
/// result is no graph output and may be planned in place over the conv's).
fn model(c: &RandomConv, act: &ActNodes, rng: &mut Rng) -> ModelProto {
    let mut mb = ModelBuilder::new("conv_act", 14)
        .input("x", DType::F32, &dims(&c.x))
        .initializer("w", &rng.tensor(&c.w, -1.0, 1.0));
    let mut ins = vec!["x", "w"];
    if c.bias {
        mb = mb.initializer("b", &rng.tensor(&[c.w[0]], -1.0, 1.0));
        ins.push("b");
    }
    mb =
        mb.output("y", DType::F32, &dims(&c.y))
            .node("conv", "Conv", &ins, &["c"], c.attrs.clone());
    for (i, (op, inputs, attrs)) in act.iter().enumerate() {
        let out = if i + 1 == act.len() { "a" } else { "s" };
        mb = mb.node(&format!("act{i}"), op, inputs, &[out], attrs.clone());
    }
    mb.node("neg", "Neg", &["a"], &["y"], vec![]).build()
}

/// Compiles `g` as planned (fused by `plan_graph` when `fuse`), runs it, compares with the
/// reference; returns the kernel count.
fn check_planned(g: &Graph, x: &Tensor, fuse: bool, what: &str) -> usize {
    let mut g2 = g.clone();
    let opts = PlanOptions {
        fuse_elementwise: fuse,
        ..PlanOptions::default()
    };
    let plan = plan_graph(&mut g2, &opts).expect("plans");
    let exe = compile(&g2, &plan).unwrap_or_else(|e| panic!("{what}: compiles: {e}"));
    let got = run(&exe, std::slice::from_ref(x))[0].to_f32_vec();
    let want = eval_graph(g, std::slice::from_ref(x)).expect("reference")[0].to_f32_vec();
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            (a - b).abs() <= ATOL + RTOL * b.abs(),
            "{what}: element {i}: got {a}, want {b}"
        );
    }
    exe.kernel_count()
}

#[test]
fn conv_epilogue_activations_against_reference() {
    let mut rng = Rng(0xac7);
    let acts = activations();
    for case in 0..72 {
        // Every third case 1-d; groups, depthwise, strides, dilations and pads drawn.
        let c = random_conv(&mut rng, if case % 3 == 2 { 1 } else { 2 });
        let (name, act) = &acts[case % acts.len()];
        let g = import(&model(&c, act, &mut rng));
        let x = rng.tensor(&c.x, -4.0, 4.0);
        for fuse in [false, true] {
            let what = format!("case {case} {name} fuse={fuse} {:?} -> {:?}", c.x, c.y);
            let kernels = check_planned(&g, &x, fuse, &what);
            // Unfused `Mul(s, c)` is planned over `s`, not the conv's buffer: left unfused.
            if fuse || *name != "SiLU s*x" {
                assert_eq!(
                    kernels, 2,
                    "{what}: the activation was not fused into the conv"
                );
            }
        }
    }
}

/// The three conv paths by name, with SiLU: pointwise, im2col, depthwise (with padding and
/// a plane width that is no multiple of 16).
#[test]
fn silu_on_every_conv_path() {
    let mut rng = Rng(0x5117);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let cases = [
        (vec![1, 24, 9, 11], vec![40, 24, 1, 1], vec![]),
        (
            vec![1, 5, 13, 19],
            vec![7, 5, 3, 3],
            vec![("pads", ints(&[1, 1, 1, 1]))],
        ),
        (
            vec![2, 12, 21, 23],
            vec![12, 1, 5, 5],
            vec![
                ("group", Attr::Int(12)),
                ("pads", ints(&[2, 2, 2, 2])),
                ("strides", ints(&[2, 2])),
            ],
        ),
        (
            vec![1, 8, 30, 37],
            vec![8, 1, 3, 3],
            vec![("group", Attr::Int(8)), ("pads", ints(&[1, 1, 1, 1]))],
        ),
    ];
    let silu = &activations()[4].1;
    for (x, w, attrs) in cases {
        let k = w[2];
        let pad = attrs.iter().any(|(n, _)| *n == "pads") as usize * (k / 2);
        let stride = if attrs.iter().any(|(n, _)| *n == "strides") {
            2
        } else {
            1
        };
        let out = |n: usize| (n + 2 * pad - k) / stride + 1;
        let c = RandomConv {
            y: vec![x[0], w[0], out(x[2]), out(x[3])],
            x,
            w,
            attrs,
            bias: true,
        };
        let g = import(&model(&c, silu, &mut rng));
        let xt = rng.tensor(&c.x, -6.0, 6.0);
        let kernels = check_planned(&g, &xt, true, &format!("{:?}", c.w));
        assert_eq!(kernels, 2, "{:?}: SiLU not fused", c.w);
    }
}
