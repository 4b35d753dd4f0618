use super::*;
use crate::analysis::liveness::{LivenessOptions, liveness};
use crate::import::text::parse_model_text;
use crate::import::{ImportOptions, import_model};
use crate::ir::eval::eval_graph;
use crate::ir::tensor::Tensor;
use crate::ir::verify::verify;

fn graph(src: &str) -> Graph {
    let m = parse_model_text(src).expect("parse");
    import_model(&m, None, &ImportOptions::default())
        .expect("import")
        .graph
}

/// `src` with `fuse_residual` applied: the count, the graph (verified), and the reference
/// outputs before and after within 1e-5 (one rounding less after).
fn fused(src: &str) -> (usize, Graph) {
    let before = graph(src);
    let mut after = before.clone();
    let n = fuse_residual(&mut after);
    verify(&after).expect("fused graph verifies");
    let x: Vec<Tensor> = before
        .inputs
        .iter()
        .map(|&v| {
            let ty = &before.value(v).ty;
            let n: usize = ty.shape.iter().product();
            let vals: Vec<f64> = (0..n)
                .map(|i| ((i * 37) % 23) as f64 / 11.0 - 1.0)
                .collect();
            Tensor::from_f64(ty.dtype, ty.shape.clone(), &vals)
        })
        .collect();
    let a = eval_graph(&before, &x).expect("evaluates");
    let b = eval_graph(&after, &x).expect("evaluates");
    for (a, b) in a.iter().zip(&b) {
        for (p, q) in a.to_f64_vec().iter().zip(b.to_f64_vec()) {
            assert!((p - q).abs() <= 1e-5 * (1.0 + p.abs()), "{p} vs {q}");
        }
    }
    (n, after)
}

fn sums(g: &Graph) -> Vec<(String, usize)> {
    g.nodes()
        .filter(|(_, n)| matches!(&n.op, Op::Conv(a) if a.sum))
        .map(|(_, n)| (n.name.clone(), n.inputs.len()))
        .collect()
}

fn adds(g: &Graph) -> usize {
    g.nodes()
        .filter(|(_, n)| n.op == Op::Binary(BinaryOp::Add))
        .count()
}

const BLOCK: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
block (float[1, 4, 6, 6] X, float[4, 4, 3, 3] W1, float[4, 4, 3, 3] W2) => (float[1, 4, 6, 6] Y)
<float[4] B1 = {0.1, -0.2, 0.3, 0.0}, float[4] B2 = {0.5, 0.0, -0.5, 0.25}, float[1, 4, 6, 6] C = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36}>
{
    S = Relu(X)
    U = Conv <pads = [1, 1, 1, 1]> (S, W1, B1)
    V = Relu(U)
    T = Conv <pads = [1, 1, 1, 1]> (V, W2, B2)
    Z = Add(T, S)
    Y = Relu(Z)
}
"#;

#[test]
fn basic_block_fuses_and_writes_over_the_skip() {
    let (n, g) = fused(BLOCK);
    assert_eq!(n, 1);
    assert_eq!(sums(&g), vec![("#3".to_string(), 4)]);
    assert_eq!(adds(&g), 0);
    assert!(g.find_value("T").is_none(), "the conv's own output is gone");
    // Z (the fused conv's output) is planned in S's buffer: S dies there.
    let l = liveness(&g, g.order(), LivenessOptions::full());
    let buf = |name: &str| l.value_buffer[&g.find_value(name).expect("value")];
    assert_eq!(buf("Z"), buf("S"));
    assert_ne!(buf("Z"), buf("V"), "never over the conv's data input");
}

#[test]
fn either_operand_order_and_a_downsample_branch() {
    // Add(S, T): swapped operands.
    let (n, g) = fused(&BLOCK.replace("Add(T, S)", "Add(S, T)"));
    assert_eq!((n, adds(&g)), (1, 0));
    // Add of two Convs (a ResNet block with a 1x1 downsample): one fusion, the first Conv.
    let src = r#"
<ir_version: 8, opset_import: ["" : 13]>
down (float[1, 4, 6, 6] X, float[8, 4, 3, 3] W1, float[8, 4, 1, 1] W2) => (float[1, 8, 3, 3] Y)
<float[8] B1 = {0, 1, 0, 1, 0, 1, 0, 1}, float[8] B2 = {1, 0, 1, 0, 1, 0, 1, 0}>
{
    T = Conv <pads = [1, 1, 1, 1], strides = [2, 2]> (X, W1, B1)
    D = Conv <strides = [2, 2]> (X, W2, B2)
    Z = Add(T, D)
    Y = Relu(Z)
}
"#;
    let (n, g) = fused(src);
    assert_eq!((n, adds(&g)), (1, 0));
    assert_eq!(sums(&g).len(), 1);
    // The fused node comes after the branch it reads (placed at the Add).
    let pos = |name: &str| {
        g.order()
            .iter()
            .position(|&id| g.node(id).outputs.contains(&g.find_value(name).expect("v")))
    };
    assert!(pos("D") < pos("Z"));
}

#[test]
fn not_fused_where_the_rules_say_no() {
    let cases = [
        // The conv's output read twice.
        ("Y = Relu(Z)", "Y = Add(Z, T)"),
        // A broadcast residual.
        (
            "Z = Add(T, S)",
            "P = GlobalAveragePool(S)\n    Z = Add(T, P)",
        ),
        // A constant residual.
        ("Z = Add(T, S)", "Z = Add(T, C)"),
        // No bias.
        ("(V, W2, B2)", "(V, W2)"),
        // Grouped.
        (
            "T = Conv <pads = [1, 1, 1, 1]> (V, W2, B2)",
            "T = Conv <pads = [1, 1, 1, 1], group = 2> (V, W2h, B2)",
        ),
        // A Sub, not an Add.
        ("Z = Add(T, S)", "Z = Sub(T, S)"),
    ];
    for (from, to) in cases {
        let src = BLOCK.replace(from, to).replace(
            "float[4, 4, 3, 3] W2)",
            "float[4, 4, 3, 3] W2, float[4, 2, 3, 3] W2h)",
        );
        let (n, g) = fused(&src);
        assert_eq!(n, 0, "{to}");
        assert!(sums(&g).is_empty(), "{to}");
    }
    // The conv's output is a graph output.
    let src = BLOCK.replace(
        "=> (float[1, 4, 6, 6] Y)",
        "=> (float[1, 4, 6, 6] Y, float[1, 4, 6, 6] T)",
    );
    assert_eq!(fused(&src).0, 0);
}

#[test]
fn residual_read_later_is_not_overwritten() {
    let src = BLOCK.replace("Y = Relu(Z)", "A = Relu(Z)\n    Y = Add(A, S)");
    let (n, g) = fused(&src);
    assert_eq!(n, 1);
    let l = liveness(&g, g.order(), LivenessOptions::full());
    let buf = |name: &str| l.value_buffer[&g.find_value(name).expect("value")];
    assert_ne!(buf("Z"), buf("S"), "S is read after the Conv");
}
