//! In-place Concat: producers write straight into their slice of the Concat's output (the
//! plan stores them there) and the Concat copies only what is not in place. Each graph is
//! checked against the reference, and the plan is checked to really use the slices.

use crate::common::*;
use arenac_compiler::ir::graph::ValueId;

fn v(g: &Graph, name: &str) -> ValueId {
    g.find_value(name).expect("value")
}

/// Plans `g` with the default options and asserts that each `(input, concat)` pair is stored
/// in place: `input` aliases `concat` (directly, or through the Conv output its Relu runs
/// over in place: the Conv is computed into the slice too), shares its buffer, at `offset`
/// bytes.
fn assert_slices(g: &Graph, slices: &[(&str, &str, usize)]) {
    let plan = plan_arena(g, &PlanOptions::default()).expect("plans");
    let live = &plan.liveness;
    for &(input, concat, offset) in slices {
        let mut of = live.alias_of.get(&v(g, input)).copied();
        if let Some(up) = of.filter(|&u| u != v(g, concat)) {
            assert_eq!(
                live.value_buffer[&up],
                live.value_buffer[&v(g, input)],
                "{input}"
            );
            assert_eq!(live.offset_of(up), offset, "{input}: its Conv output");
            of = live.alias_of.get(&up).copied();
        }
        assert_eq!(of, Some(v(g, concat)), "{input}");
        assert_eq!(
            live.value_buffer[&v(g, input)],
            live.value_buffer[&v(g, concat)],
            "{input}"
        );
        assert_eq!(live.offset_of(v(g, input)), offset, "{input}");
    }
}

fn conv(
    b: ModelBuilder,
    rng: &mut Rng,
    name: &str,
    x: &str,
    cin: usize,
    cout: usize,
    k: usize,
) -> ModelBuilder {
    let w = format!("{name}.w");
    let pad = (k / 2) as i64;
    b.initializer(&w, &rng.tensor(&[cout, cin, k, k], -0.5, 0.5))
        .node(
            name,
            "Conv",
            &[x, &w],
            &[&format!("{name}.c")],
            vec![
                ("kernel_shape", Attr::Ints(vec![k as i64, k as i64])),
                ("pads", Attr::Ints(vec![pad; 4])),
            ],
        )
        .node(
            &format!("{name}.relu"),
            "Relu",
            &[&format!("{name}.c")],
            &[name],
            vec![],
        )
}

#[test]
fn inception_like_branches() {
    let mut rng = Rng(0xca7);
    for (c, h, w) in [(3, 6, 6), (5, 7, 3), (2, 9, 11)] {
        let (c1, c3, cp) = (
            1 + rng.next() as usize % 4,
            1 + rng.next() as usize % 5,
            1 + rng.next() as usize % 3,
        );
        let total = c1 + c3 + cp + c;
        let mut b = ModelBuilder::new("inception", 13)
            .input("x", DType::F32, &dims(&[1, c, h, w]))
            .output("y", DType::F32, &dims(&[1, total, h, w]));
        b = conv(b, &mut rng, "b1", "x", c, c1, 1);
        b = conv(b, &mut rng, "b3", "x", c, c3, 3);
        b = b.node(
            "pool",
            "MaxPool",
            &["x"],
            &["p"],
            vec![
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("pads", Attr::Ints(vec![1; 4])),
            ],
        );
        b = conv(b, &mut rng, "bp", "p", c, cp, 1);
        // A fourth branch is the graph input itself: copied into its slice.
        let m = b
            .node(
                "cat",
                "Concat",
                &["b1", "b3", "bp", "x"],
                &["cat"],
                vec![("axis", Attr::Int(1))],
            )
            .node("out", "Sigmoid", &["cat"], &["y"], vec![])
            .build();
        let g = import(&m);
        let row = h * w * 4;
        assert_slices(
            &g,
            &[("b3", "cat", c1 * row), ("bp", "cat", (c1 + c3) * row)],
        );
        // Where the direct kernels run (AVX-512), the 3x3 branch plans no scratch
        // (`gemm::conv::conv2d_plan_bytes`) and the chooser may leave `b1` out of its slice.
        if !arenac_compiler::gemm::kernel_name().starts_with("avx512") {
            assert_slices(&g, &[("b1", "cat", 0)]);
        }
        check_graph(&g, &[rng.tensor(&[1, c, h, w], -1.0, 1.0)], RTOL, ATOL);
    }
}

#[test]
fn nested_concats_dense_block() {
    let mut rng = Rng(0xde5e);
    let (c, h, w, k) = (3, 5, 4, 2);
    let mut b = ModelBuilder::new("dense", 13)
        .input("x", DType::F32, &dims(&[1, c, h, w]))
        .output("y", DType::F32, &dims(&[1, c + 3 * k, h, w]));
    // A wide stem sets the peak, so that nesting the Concats in place never raises it.
    b = conv(b, &mut rng, "wide", "x", c, 16 * c, 1);
    b = conv(b, &mut rng, "f0", "wide", 16 * c, c, 1);
    // DenseNet: each layer reads the concat of everything before and adds k channels.
    let mut feats = "f0".to_string();
    let mut cin = c;
    for layer in 1..=3 {
        let name = format!("l{layer}");
        b = conv(b, &mut rng, &name, &feats, cin, k, 1);
        let cat = format!("cat{layer}");
        b = b.node(
            &cat,
            "Concat",
            &[&feats, &name],
            &[&cat],
            vec![("axis", Attr::Int(1))],
        );
        feats = cat;
        cin += k;
    }
    let m = b.node("out", "Tanh", &[&feats], &["y"], vec![]).build();
    let g = import(&m);
    let row = h * w * 4;
    assert_slices(
        &g,
        &[
            ("f0", "cat1", 0),
            ("l1", "cat1", c * row),
            ("cat1", "cat2", 0),
            ("l2", "cat2", (c + k) * row),
            ("cat2", "cat3", 0),
            ("l3", "cat3", (c + 2 * k) * row),
        ],
    );
    check_graph(&g, &[rng.tensor(&[1, c, h, w], -1.0, 1.0)], RTOL, ATOL);
}

#[test]
fn concat_inputs_read_by_other_nodes_and_views() {
    let mut rng = Rng(0x5ee);
    let (n, d) = (3, 5);
    let m = ModelBuilder::new("shared", 13)
        .input("x", DType::F32, &dims(&[n, d]))
        .initializer("flat", &Tensor::i64(vec![1], &[(n * d) as i64]))
        .output("y", DType::F32, &dims(&[3 * n, d]))
        .output("z", DType::F32, &dims(&[n, d]))
        .output("r", DType::F32, &dims(&[n * d]))
        .output("t", DType::F32, &dims(&[d, n]))
        .node("a", "Relu", &["x"], &["a"], vec![])
        .node("b", "Sigmoid", &["x"], &["b"], vec![])
        .node("e", "Neg", &["x"], &["e"], vec![])
        // Outermost axis: each slice is contiguous even with d > 1.
        .node(
            "cat",
            "Concat",
            &["a", "b", "e"],
            &["y"],
            vec![("axis", Attr::Int(0))],
        )
        // a and b are read again after the Concat; e through a view.
        .node("z", "Mul", &["a", "b"], &["z"], vec![])
        .node("r", "Reshape", &["e", "flat"], &["r"], vec![])
        .node("t", "Transpose", &["a"], &["t"], vec![])
        .build();
    let g = import(&m);
    let slice = n * d * 4;
    assert_slices(
        &g,
        &[("a", "y", 0), ("b", "y", slice), ("e", "y", 2 * slice)],
    );
    // The output r is a view of the slice e: its slot sits inside the Concat's buffer.
    let exe = check_graph(&g, &[rng.tensor(&[n, d], -1.0, 1.0)], RTOL, ATOL);
    let at = |name: &str| exe.outputs().iter().find(|s| s.name == name).expect("slot");
    assert_eq!(at("r").offset, at("y").offset + 2 * slice);
}

#[test]
fn inner_axis_and_batch_concats_copy() {
    // Not contiguous (an outer dim above 1): every input keeps its own buffer and is copied.
    let mut rng = Rng(0xbad);
    for (axis, a, b, out) in [
        (1, [2, 3, 4], [2, 1, 4], [2, 4, 4]),
        (2, [1, 3, 2], [1, 3, 5], [1, 3, 7]),
    ] {
        let m = ModelBuilder::new("copy", 13)
            .input("x", DType::F32, &dims(&a))
            .input("w", DType::F32, &dims(&b))
            .output("y", DType::F32, &dims(&out))
            .node("p", "Relu", &["x"], &["p"], vec![])
            .node("q", "Neg", &["w"], &["q"], vec![])
            .node(
                "cat",
                "Concat",
                &["p", "q"],
                &["y"],
                vec![("axis", Attr::Int(axis))],
            )
            .build();
        let g = import(&m);
        let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
        assert!(plan.liveness.value_offset.is_empty());
        assert!(!plan.liveness.alias_of.contains_key(&v(&g, "p")));
        check_graph(
            &g,
            &[rng.tensor(&a, -1.0, 1.0), rng.tensor(&b, -1.0, 1.0)],
            0.0,
            0.0,
        );
    }
}
