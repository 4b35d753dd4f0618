//! f16/bf16/f64 nodes widened to f32 (`analysis::widen`): the reference evaluation of the
//! widened graph equals the op computed in f32 then rounded once, bit for bit; the JIT
//! matches that reference on random shapes and attributes; the table leaves f32 graphs and
//! ops with kernels of their own alone.

use arenac_compiler::ir::graph::ValueKind;
use arenac_compiler::ir::verify::verify;
use arenac_compiler::ops::Op;

use crate::common::*;

/// One random node: op type, attributes, run-time inputs and constant inputs (floats in
/// f32, converted to the dtype under test; integer constants kept).
struct Case {
    op: &'static str,
    attrs: Vec<(&'static str, Attr)>,
    inputs: Vec<(&'static str, Tensor)>,
    consts: Vec<(&'static str, Tensor)>,
    /// Input names in the node's order (run-time and constant).
    order: Vec<&'static str>,
}

fn to(t: &Tensor, dt: DType) -> Tensor {
    if !t.dtype().is_float() {
        return t.clone();
    }
    Tensor::from_f64(dt, t.shape().to_vec(), &t.to_f64_vec())
}

impl Case {
    /// The model with every float operand rounded to `round`, then held in `dt` (exactly
    /// when `dt` is wider), and its run-time inputs.
    fn model(&self, round: DType, dt: DType) -> (ModelProto, Vec<Tensor>) {
        let conv = |t: &Tensor| to(&to(t, round), dt);
        let mut b = ModelBuilder::new("widen", 18).output("y", dt, &[]);
        let mut ins = Vec::new();
        for (name, t) in &self.inputs {
            let t = conv(t);
            b = b.input(name, t.dtype(), &dims(t.shape()));
            ins.push(t);
        }
        for (name, t) in &self.consts {
            b = b.initializer(name, &conv(t));
        }
        let m = b
            .node("n", self.op, &self.order, &["y"], self.attrs.clone())
            .build();
        (m, ins)
    }
}

/// A random case generator.
type MakeCase = fn(&mut Rng) -> Case;

fn pick(rng: &mut Rng, n: usize) -> usize {
    (rng.next() % n as u64) as usize
}

fn shape(rng: &mut Rng, rank: usize, max: usize) -> Vec<usize> {
    (0..rank).map(|_| 1 + pick(rng, max)).collect()
}

fn matmul(rng: &mut Rng) -> Case {
    let (m, k, n) = (1 + pick(rng, 9), 1 + pick(rng, 17), 1 + pick(rng, 9));
    let batch_rank = pick(rng, 3);
    let batch = shape(rng, batch_rank, 3);
    let mut a = batch.clone();
    a.extend([m, k]);
    let mut bs: Vec<usize> = if pick(rng, 2) == 0 { batch } else { vec![] };
    bs.extend([k, n]);
    if pick(rng, 4) == 0 {
        a = vec![k];
    }
    let (at, bt) = (rng.tensor(&a, -2.0, 2.0), rng.tensor(&bs, -2.0, 2.0));
    let b_const = pick(rng, 2) == 0;
    Case {
        op: "MatMul",
        attrs: vec![],
        inputs: if b_const {
            vec![("a", at)]
        } else {
            vec![("a", at), ("b", bt.clone())]
        },
        consts: if b_const { vec![("b", bt)] } else { vec![] },
        order: vec!["a", "b"],
    }
}

fn softmax(rng: &mut Rng) -> Case {
    let rank = 1 + pick(rng, 4);
    let s = shape(rng, rank, 7);
    let axis = pick(rng, rank) as i64 - if pick(rng, 2) == 0 { rank as i64 } else { 0 };
    Case {
        op: if pick(rng, 2) == 0 {
            "Softmax"
        } else {
            "LogSoftmax"
        },
        attrs: vec![("axis", Attr::Int(axis))],
        inputs: vec![("x", rng.tensor(&s, -6.0, 6.0))],
        consts: vec![],
        order: vec!["x"],
    }
}

fn reduce_max(rng: &mut Rng) -> Case {
    let rank = 1 + pick(rng, 4);
    let s = shape(rng, rank, 6);
    let axes: Vec<i64> = (0..rank as i64).filter(|_| pick(rng, 2) == 0).collect();
    let axes = if axes.is_empty() { vec![0] } else { axes };
    Case {
        op: "ReduceMax",
        attrs: vec![("keepdims", Attr::Int(pick(rng, 2) as i64))],
        inputs: vec![("x", rng.tensor(&s, -50.0, 50.0))],
        consts: vec![("axes", Tensor::i64(vec![axes.len()], &axes))],
        order: vec!["x", "axes"],
    }
}

fn conv(rng: &mut Rng) -> Case {
    let (n, c, m) = (1 + pick(rng, 2), 1 + pick(rng, 4), 1 + pick(rng, 5));
    let k = [1 + pick(rng, 3), 1 + pick(rng, 3)];
    let hw = [k[0] + pick(rng, 7), k[1] + pick(rng, 7)];
    let stride = 1 + pick(rng, 2) as i64;
    let pad = pick(rng, 2) as i64;
    let x = rng.tensor(&[n, c, hw[0], hw[1]], -1.0, 1.0);
    let w = rng.tensor(&[m, c, k[0], k[1]], -1.0, 1.0);
    let bias = rng.tensor(&[m], -1.0, 1.0);
    Case {
        op: "Conv",
        attrs: vec![
            ("strides", Attr::Ints(vec![stride, stride])),
            ("pads", Attr::Ints(vec![pad, pad, pad, pad])),
        ],
        inputs: vec![("x", x)],
        consts: vec![("w", w), ("b", bias)],
        order: vec!["x", "w", "b"],
    }
}

/// Tolerances of the JIT against the reference after rounding to `dt`: one unit in the last
/// place of the narrow type (f32's for f64) (the f32 kernels sum in another order than the f64 reference, so
/// a result close to a rounding boundary may round the other way).
fn tolerance(dt: DType) -> (f32, f32) {
    if dt == DType::F64 {
        (1e-5, 1e-5)
    } else if dt == DType::F16 {
        (2e-3, 1e-3)
    } else {
        (1.6e-2, 1e-2)
    }
}

/// The graph of `case` in `dt` is widened: the op node reads and writes f32, Casts around it.
fn assert_widened(g: &Graph, op: &str) {
    verify(g).unwrap_or_else(|e| panic!("the widened graph verifies: {e}"));
    let node = g
        .nodes()
        .map(|(_, n)| n)
        .find(|n| n.op.name() == op)
        .unwrap_or_else(|| panic!("no {op} node"));
    for &v in node.inputs.iter().chain(&node.outputs) {
        let ty = &g.value(v).ty;
        assert!(
            ty.dtype == DType::F32 || !ty.dtype.is_float(),
            "{op} still has a {} operand",
            ty.dtype.name()
        );
    }
    assert!(
        g.nodes().any(|(_, n)| matches!(n.op, Op::Cast { .. })),
        "no Cast around {op}"
    );
}

/// MatMul, Softmax/LogSoftmax, ReduceMax and Conv on random shapes in f16, bf16 and f64
/// (ReduceMax: f16 and bf16; its f64 kernel is native): widened, the widened graph's reference equals the f32 op's reference rounded once, and
/// the JIT matches it.
#[test]
fn widened_ops_equal_f32_then_rounded() {
    let mut rng = Rng(0x1de_f16);
    let cases: [(&str, MakeCase); 4] = [
        ("MatMul", matmul),
        ("Softmax", softmax),
        ("ReduceMax", reduce_max),
        ("Conv", conv),
    ];
    for (what, make) in cases {
        for round in 0..6 {
            let case = make(&mut rng);
            for dt in [DType::F16, DType::BF16, DType::F64] {
                let (m, ins) = case.model(dt, dt);
                let g = import(&m);
                if what == "ReduceMax" && dt == DType::F64 {
                    // Reductions have an f64 kernel of their own: not widened, exact.
                    assert_eq!(g.node_count(), 1, "ReduceMax on f64 is not widened");
                    check_graph(&g, &ins, 0.0, 0.0);
                    continue;
                }
                let op = g
                    .nodes()
                    .map(|(_, n)| n.op.name())
                    .find(|n| *n != "Cast")
                    .expect("the op");
                assert_widened(&g, op);
                // The op computed in f32 on the same (exactly widened) values, then rounded.
                let (m32, ins32) = case.model(dt, DType::F32);
                let want32 = eval_graph(&import(&m32), &ins32).expect("f32 reference");
                let want = to(&want32[0], dt);
                let got = eval_graph(&g, &ins).expect("widened reference");
                assert_eq!(
                    (got[0].dtype(), got[0].shape()),
                    (want.dtype(), want.shape()),
                    "{what} round {round} {}",
                    dt.name()
                );
                assert_eq!(
                    got[0].bytes(),
                    want.bytes(),
                    "{what} round {round} {}: reference of the widened graph",
                    dt.name()
                );
                let (rtol, atol) = tolerance(dt);
                check_graph(&g, &ins, rtol, atol);
            }
        }
    }
}

/// An attention-shaped chain in f16/bf16: MatMul → Mul (typed kernel, not widened) →
/// Softmax → MatMul. Widened nodes read each other's narrow outputs through Casts; the JIT
/// (fusion and planning included) matches the reference.
#[test]
fn attention_chain_runs_widened() {
    let mut rng = Rng(0xa77e);
    for dt in [DType::F16, DType::BF16] {
        for _ in 0..3 {
            let (s, d) = (1 + pick(&mut rng, 8), 1 + pick(&mut rng, 16));
            let q = to(&rng.tensor(&[2, s, d], -1.0, 1.0), dt);
            let k = to(&rng.tensor(&[2, d, s], -1.0, 1.0), dt);
            let v = to(&rng.tensor(&[2, s, d], -1.0, 1.0), dt);
            let scale = to(&Tensor::f32(vec![], &[0.125]), dt);
            let m = ModelBuilder::new("attn", 18)
                .input("q", dt, &dims(&[2, s, d]))
                .input("k", dt, &dims(&[2, d, s]))
                .input("v", dt, &dims(&[2, s, d]))
                .initializer("scale", &scale)
                .output("y", dt, &[])
                .node("qk", "MatMul", &["q", "k"], &["qk"], vec![])
                .node("sc", "Mul", &["qk", "scale"], &["qks"], vec![])
                .node(
                    "sm",
                    "Softmax",
                    &["qks"],
                    &["p"],
                    vec![("axis", Attr::Int(-1))],
                )
                .node("pv", "MatMul", &["p", "v"], &["y"], vec![])
                .build();
            let g = import(&m);
            let mul = g
                .nodes()
                .map(|(_, n)| n)
                .find(|n| n.name == "sc")
                .expect("Mul node");
            assert_eq!(g.value(mul.outputs[0]).ty.dtype, dt, "Mul keeps its dtype");
            let (rtol, atol) = tolerance(dt);
            check_graph(&g, &[q, k, v], rtol, atol);
        }
    }
}

/// The table: f32 graphs, ops with kernels of their own (Neg, Add on f16) and integer
/// MatMul are left alone; a constant input is converted at compile time (no Cast node reads
/// a constant); one f16 value read by two widened nodes is cast once.
#[test]
fn widening_follows_the_table() {
    let f32_mm = ModelBuilder::new("w", 18)
        .input("a", DType::F32, &dims(&[2, 3]))
        .input("b", DType::F32, &dims(&[3, 4]))
        .output("y", DType::F32, &[])
        .node("mm", "MatMul", &["a", "b"], &["y"], vec![])
        .build();
    assert_eq!(import(&f32_mm).node_count(), 1);
    for op in ["Neg", "Abs"] {
        let m = ModelBuilder::new("w", 18)
            .input("x", DType::F16, &dims(&[5]))
            .output("y", DType::F16, &[])
            .node("n", op, &["x"], &["y"], vec![])
            .build();
        assert_eq!(import(&m).node_count(), 1, "{op} on f16 has its own kernel");
    }
    let int_mm = ModelBuilder::new("w", 18)
        .input("a", DType::I32, &dims(&[2, 3]))
        .input("b", DType::I32, &dims(&[3, 4]))
        .output("y", DType::I32, &[])
        .node("mm", "MatMul", &["a", "b"], &["y"], vec![])
        .build();
    assert_eq!(
        import(&int_mm).node_count(),
        1,
        "integers are never widened"
    );

    let mut rng = Rng(0x7ab1e);
    let w = to(&rng.tensor(&[3, 4], -1.0, 1.0), DType::F16);
    let m = ModelBuilder::new("w", 18)
        .input("x", DType::F16, &dims(&[2, 3]))
        .initializer("w", &w)
        .output("y", DType::F16, &[])
        .output("r", DType::F16, &[])
        .node("mm", "MatMul", &["x", "w"], &["y"], vec![])
        .node(
            "rm",
            "ReduceMax",
            &["x"],
            &["r"],
            vec![("keepdims", Attr::Int(0))],
        )
        .build();
    let g = import(&m);
    let casts: Vec<_> = g
        .nodes()
        .filter(|(_, n)| matches!(n.op, Op::Cast { .. }))
        .map(|(_, n)| n)
        .collect();
    // x → f32 once, and each output back to f16.
    assert_eq!(
        casts.len(),
        3,
        "casts: {:?}",
        casts.iter().map(|n| &n.name).collect::<Vec<_>>()
    );
    for c in &casts {
        assert!(
            !matches!(g.value(c.inputs[0]).kind, ValueKind::Constant(_)),
            "Cast '{}' reads a constant",
            c.name
        );
    }
    let names: Vec<&str> = g
        .outputs
        .iter()
        .map(|&v| g.value(v).name.as_str())
        .collect();
    assert_eq!(names, ["y", "r"], "graph outputs keep their names");
    let x = to(&rng.tensor(&[2, 3], -1.0, 1.0), DType::F16);
    check_graph(&g, &[x], 2e-3, 1e-3);
}

/// Element-wise ops that have only f32x4 kernels (Relu, Sigmoid, Exp, Tanh, HardSwish, Sqrt,
/// PRelu, Mean of three) run widened on f16, bf16 and f64, JIT against the reference.
#[test]
fn elementwise_without_narrow_kernels_run_widened() {
    let mut rng = Rng(0xe1e);
    let s = [3, 7];
    for dt in [DType::F16, DType::BF16, DType::F64] {
        let (rtol, atol) = tolerance(dt);
        for op in ["Relu", "Sigmoid", "Exp", "Tanh", "HardSwish", "Sqrt"] {
            let lo = if op == "Sqrt" { 0.0 } else { -4.0 };
            let x = to(&rng.tensor(&s, lo, 4.0), dt);
            let m = ModelBuilder::new("ew", 18)
                .input("x", dt, &dims(&s))
                .output("y", dt, &[])
                .node("n", op, &["x"], &["y"], vec![])
                .build();
            let g = import(&m);
            assert_widened(&g, op);
            check_graph(&g, &[x], rtol, atol);
        }
        let ins: Vec<Tensor> = (0..3).map(|_| to(&rng.tensor(&s, -4.0, 4.0), dt)).collect();
        let m = ModelBuilder::new("ew", 18)
            .input("a", dt, &dims(&s))
            .input("b", dt, &dims(&s))
            .input("c", dt, &dims(&s))
            .output("p", dt, &[])
            .output("y", dt, &[])
            .node("pr", "PRelu", &["a", "b"], &["p"], vec![])
            .node("mean", "Mean", &["a", "b", "c"], &["y"], vec![])
            .build();
        let g = import(&m);
        assert_widened(&g, "PRelu");
        assert_widened(&g, "Mean");
        check_graph(&g, &ins, rtol, atol);
    }
}

/// MaxPool on u8 and i8 runs widened (exact): random 2-d windows, strides and pads, the JIT
/// equal to the reference, and the reference equal to the f32 pooling of the same values.
#[test]
fn maxpool_on_bytes_runs_widened() {
    let mut rng = Rng(0x8b17);
    for dt in [DType::U8, DType::I8] {
        for _ in 0..4 {
            let k = [1 + pick(&mut rng, 3), 1 + pick(&mut rng, 3)];
            let s = [
                1,
                1 + pick(&mut rng, 3),
                k[0] + pick(&mut rng, 6),
                k[1] + pick(&mut rng, 6),
            ];
            let pad = pick(&mut rng, k[0].min(k[1])) as i64;
            let stride = 1 + pick(&mut rng, 2) as i64;
            let n: usize = s.iter().product();
            let v: Vec<i64> = (0..n)
                .map(|_| {
                    let r = (rng.next() % 256) as i64;
                    if dt == DType::I8 { r - 128 } else { r }
                })
                .collect();
            let x = Tensor::from_i64(dt, s.to_vec(), &v);
            let attrs = vec![
                ("kernel_shape", Attr::Ints(vec![k[0] as i64, k[1] as i64])),
                ("strides", Attr::Ints(vec![stride, stride])),
                ("pads", Attr::Ints(vec![pad, pad, pad, pad])),
            ];
            let model = |t: DType| {
                ModelBuilder::new("mp", 18)
                    .input("x", t, &dims(&s))
                    .output("y", t, &[])
                    .node("n", "MaxPool", &["x"], &["y"], attrs.clone())
                    .build()
            };
            let g = import(&model(dt));
            assert_widened(&g, "MaxPool");
            let x32 = Tensor::from_i64(DType::F32, s.to_vec(), &v);
            let want32 = eval_graph(&import(&model(DType::F32)), &[x32]).expect("f32 reference");
            let want = Tensor::from_f64(dt, want32[0].shape().to_vec(), &want32[0].to_f64_vec());
            let got = eval_graph(&g, std::slice::from_ref(&x)).expect("widened reference");
            assert_eq!(got[0], want, "{} reference", dt.name());
            check_graph(&g, &[x], 0.0, 0.0);
        }
        // Width 2, window 2 with dilation 3, pads 1: the one window reads columns -1 and 2,
        // both padding; its max is the dtype's lowest value, not f32's: left alone.
        let m = ModelBuilder::new("mp", 18)
            .input("x", dt, &dims(&[1, 1, 1, 2]))
            .output("y", dt, &[])
            .node(
                "n",
                "MaxPool",
                &["x"],
                &["y"],
                vec![
                    ("kernel_shape", Attr::Ints(vec![1, 2])),
                    ("dilations", Attr::Ints(vec![1, 3])),
                    ("pads", Attr::Ints(vec![0, 1, 0, 1])),
                ],
            )
            .build();
        let g = import(&m);
        assert_eq!(g.value(g.outputs[0]).ty.shape, [1, 1, 1, 1]);
        assert_eq!(g.node_count(), 1, "padding-only windows are not widened");
    }
}

/// Fusion still works around widened nodes: an f32 element-wise chain after a widened f16
/// MatMul (Cast → Relu → Add → Sigmoid) fuses into one node, and the JIT matches the
/// reference.
#[test]
fn fusion_works_after_widening() {
    use arenac_compiler::analysis::fuse::fuse_elementwise;
    let mut rng = Rng(0xf05e);
    for dt in [DType::F16, DType::BF16] {
        let (m, k, n) = (
            1 + pick(&mut rng, 6),
            1 + pick(&mut rng, 9),
            1 + pick(&mut rng, 6),
        );
        let a = to(&rng.tensor(&[m, k], -1.0, 1.0), dt);
        let b = to(&rng.tensor(&[k, n], -1.0, 1.0), dt);
        let bias = rng.tensor(&[n], -1.0, 1.0);
        let model = ModelBuilder::new("fw", 18)
            .input("a", dt, &dims(&[m, k]))
            .input("b", dt, &dims(&[k, n]))
            .initializer("bias", &bias)
            .output("y", DType::F32, &[])
            .node("mm", "MatMul", &["a", "b"], &["p"], vec![])
            .node(
                "c",
                "Cast",
                &["p"],
                &["p32"],
                vec![("to", Attr::Int(i64::from(DType::F32.to_onnx())))],
            )
            .node("r", "Relu", &["p32"], &["q"], vec![])
            .node("ad", "Add", &["q", "bias"], &["s"], vec![])
            .node("sg", "Sigmoid", &["s"], &["y"], vec![])
            .build();
        let g = import(&model);
        assert_widened(&g, "MatMul");
        let mut fused = g.clone();
        let stats = fuse_elementwise(&mut fused);
        assert_eq!((stats.groups, stats.nodes_fused), (1, 3), "{}", dt.name());
        let (rtol, atol) = tolerance(dt);
        check_graph(&g, &[a, b], rtol, atol);
    }
}

/// Statistics normalizations and the reduce family in f16/bf16 (LayerNormalization,
/// InstanceNormalization, ArgMax, CumSum, TopK): widened, JIT against the reference; ArgMax
/// and TopK's indices exactly.
#[test]
fn norm_and_reduce_families_run_widened() {
    let mut rng = Rng(0x5eed);
    for dt in [DType::F16, DType::BF16] {
        let (rtol, atol) = tolerance(dt);
        let s = [2, 3, 1 + pick(&mut rng, 7)];
        let c = s[1];
        let x = to(&rng.tensor(&s, -3.0, 3.0), dt);
        let scale = to(&rng.tensor(&[s[2]], 0.5, 1.5), dt);
        let bias = to(&rng.tensor(&[s[2]], -1.0, 1.0), dt);
        let cscale = to(&rng.tensor(&[c], 0.5, 1.5), dt);
        let cbias = to(&rng.tensor(&[c], -1.0, 1.0), dt);
        let m = ModelBuilder::new("nr", 18)
            .input("x", dt, &dims(&s))
            .initializer("scale", &scale)
            .initializer("bias", &bias)
            .initializer("cscale", &cscale)
            .initializer("cbias", &cbias)
            .initializer("axis", &Tensor::i64(vec![], &[1]))
            .initializer("k", &Tensor::i64(vec![1], &[2]))
            .output("ln", dt, &[])
            .output("inorm", dt, &[])
            .output("am", DType::I64, &[])
            .output("cs", dt, &[])
            .output("tv", dt, &[])
            .output("ti", DType::I64, &[])
            .node(
                "ln",
                "LayerNormalization",
                &["x", "scale", "bias"],
                &["ln"],
                vec![("axis", Attr::Int(-1))],
            )
            .node(
                "in",
                "InstanceNormalization",
                &["x", "cscale", "cbias"],
                &["inorm"],
                vec![],
            )
            .node(
                "am",
                "ArgMax",
                &["x"],
                &["am"],
                vec![("axis", Attr::Int(2))],
            )
            .node("cs", "CumSum", &["x", "axis"], &["cs"], vec![])
            .node(
                "tk",
                "TopK",
                &["x", "k"],
                &["tv", "ti"],
                vec![("axis", Attr::Int(1))],
            )
            .build();
        let g = import(&m);
        for op in [
            "LayerNormalization",
            "InstanceNormalization",
            "ArgMax",
            "CumSum",
            "TopK",
        ] {
            assert_widened(&g, op);
        }
        check_graph(&g, &[x], rtol, atol);
    }
}
