use super::*;
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

/// The op of the node producing `name`.
fn op_of<'a>(g: &'a Graph, name: &str) -> &'a Op {
    let v = g.find_value(name).expect("value");
    match g.value(v).kind {
        ValueKind::Computed(n) => &g.node(n).op,
        _ => panic!("{name} is not computed"),
    }
}

fn fused(src: &str) -> (Graph, Graph, FuseStats) {
    let before = graph(src);
    let mut after = before.clone();
    let stats = fuse_elementwise(&mut after);
    verify(&after).expect("fused graph verifies");
    (before, after, stats)
}

/// Deterministic inputs of the graph's input types (values in [-2, 2)).
fn inputs(g: &Graph) -> Vec<Tensor> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    g.inputs
        .iter()
        .map(|&v| {
            let ty = &g.value(v).ty;
            let n: usize = ty.shape.iter().product();
            let vals: Vec<f64> = (0..n)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    (s >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
                })
                .collect();
            Tensor::from_f64(ty.dtype, ty.shape.clone(), &vals)
        })
        .collect()
}

/// The fused graph computes bit for bit what the original does under the reference.
fn same_reference(before: &Graph, after: &Graph) {
    let x = inputs(before);
    let a = eval_graph(before, &x).expect("evaluates");
    let b = eval_graph(after, &x).expect("evaluates");
    assert_eq!(a, b);
}

const SILU: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
silu (float[2, 8] X) => (float[2, 8] Y)
{
    S = Sigmoid(X)
    Y = Mul(X, S)
}
"#;

#[test]
fn silu_becomes_one_node() {
    let (before, after, stats) = fused(SILU);
    assert_eq!(
        stats,
        FuseStats {
            groups: 1,
            nodes_fused: 2,
            residuals: 0
        }
    );
    assert_eq!(after.node_count(), 1);
    assert!(after.find_value("S").is_none());
    let Op::FusedElementwise(a) = op_of(&after, "Y") else {
        panic!("Y is not fused");
    };
    assert_eq!(a.program(), "t0 = Sigmoid(x0); t1 = Mul(x0, t0)");
    let (_, n) = after.nodes().next().expect("one node");
    assert_eq!(n.inputs.as_slice(), &[after.find_value("X").expect("X")]);
    assert_eq!(n.name, before.nodes().last().expect("node").1.name);
    same_reference(&before, &after);
}

#[test]
fn gelu_chain_folds_its_scalar_constants() {
    let src = r#"
<ir_version: 8, opset_import: ["" : 13]>
gelu (float[3, 5] X) => (float[3, 5] Y)
<float s2 = {1.4142135}, float one = {1.0}, float half = {0.5}>
{
    D = Div(X, s2)
    E = Erf(D)
    A = Add(E, one)
    M = Mul(X, A)
    Y = Mul(M, half)
}
"#;
    let (before, after, stats) = fused(src);
    assert_eq!(stats.nodes_fused, 5);
    assert_eq!(after.node_count(), 1);
    let Op::FusedElementwise(a) = op_of(&after, "Y") else {
        panic!("Y is not fused");
    };
    assert_eq!(a.steps.len(), 5);
    assert!(matches!(a.steps[0].args[1], FusedArg::Const(_)));
    let (_, n) = after.nodes().next().expect("one node");
    assert_eq!(n.inputs.len(), 1, "constants folded, X read once");
    same_reference(&before, &after);
}

#[test]
fn diamond_fuses_whole() {
    let src = r#"
<ir_version: 8, opset_import: ["" : 13]>
diamond (float[4, 6] X, float[6] B) => (float[4, 6] Y)
{
    A = Exp(X)
    N = Neg(A)
    S = Sigmoid(A)
    P = Add(N, S)
    Y = Add(P, B)
}
"#;
    let (before, after, stats) = fused(src);
    assert_eq!(stats.nodes_fused, 5);
    assert_eq!(after.node_count(), 1);
    for gone in ["A", "N", "S", "P"] {
        assert!(after.find_value(gone).is_none(), "{gone} still exists");
    }
    same_reference(&before, &after);
}

#[test]
fn multi_reader_intermediate_stays() {
    let src = r#"
<ir_version: 8, opset_import: ["" : 13]>
multi (float[4, 6] X) => (float[4, 6] Y, float[6, 4] T)
{
    A = Exp(X)
    N = Neg(A)
    Y = Relu(N)
    T = Transpose(A)
}
"#;
    let (before, after, stats) = fused(src);
    assert_eq!(stats.nodes_fused, 2);
    assert!(
        matches!(op_of(&after, "A"), Op::Unary(_)),
        "A is read outside"
    );
    assert!(after.find_value("N").is_none());
    assert!(matches!(op_of(&after, "Y"), Op::FusedElementwise(_)));
    same_reference(&before, &after);
}

#[test]
fn graph_output_in_the_middle_stays() {
    let src = r#"
<ir_version: 8, opset_import: ["" : 13]>
mid (float[4, 6] X) => (float[4, 6] A, float[4, 6] Y)
{
    A = Exp(X)
    Y = Neg(A)
}
"#;
    let (_, after, stats) = fused(src);
    assert_eq!(stats, FuseStats::default());
    assert!(matches!(op_of(&after, "A"), Op::Unary(_)));
    assert!(matches!(op_of(&after, "Y"), Op::Unary(_)));
}

#[test]
fn shape_change_in_the_middle_splits_the_group() {
    let src = r#"
<ir_version: 8, opset_import: ["" : 13]>
bc (float[1, 6] X, float[4, 6] Z) => (float[4, 6] Y)
{
    A = Exp(X)
    B = Add(A, Z)
    Y = Relu(B)
}
"#;
    let (before, after, stats) = fused(src);
    assert_eq!(stats.nodes_fused, 2);
    assert!(
        matches!(op_of(&after, "A"), Op::Unary(_)),
        "A has another shape"
    );
    assert!(after.find_value("B").is_none());
    let Op::FusedElementwise(a) = op_of(&after, "Y") else {
        panic!("Y is not fused");
    };
    assert_eq!(a.program(), "t0 = Add(x0, x1); t1 = Relu(t0)");
    same_reference(&before, &after);
}

#[test]
fn non_f32_is_left_alone() {
    let src = r#"
<ir_version: 8, opset_import: ["" : 13]>
ints (int64[4] X, double[4] D) => (int64[4] Y, double[4] E)
{
    A = Neg(X)
    Y = Abs(A)
    F = Exp(D)
    E = Neg(F)
}
"#;
    let (before, after, stats) = fused(src);
    assert_eq!(stats, FuseStats::default());
    // Exp on f64 is computed in f32 between two Casts (analysis::widen): 6 nodes, none fused.
    assert_eq!(after.node_count(), before.node_count());
}

#[test]
fn chains_around_a_non_elementwise_node_fuse_apart() {
    let src = r#"
<ir_version: 8, opset_import: ["" : 13]>
two (float[4, 6] X) => (float[6, 4] Y)
{
    A = Exp(X)
    B = Neg(A)
    T = Transpose(B)
    C = Sigmoid(T)
    Y = Mul(T, C)
}
"#;
    let (before, after, stats) = fused(src);
    assert_eq!(
        stats,
        FuseStats {
            groups: 2,
            nodes_fused: 4,
            residuals: 0
        }
    );
    assert_eq!(after.node_count(), 3);
    assert!(matches!(op_of(&after, "B"), Op::FusedElementwise(_)));
    assert!(matches!(op_of(&after, "T"), Op::Transpose { .. }));
    assert!(matches!(op_of(&after, "Y"), Op::FusedElementwise(_)));
    same_reference(&before, &after);
}

#[test]
fn fusing_twice_changes_nothing() {
    let (_, mut after, _) = fused(SILU);
    let again = after.clone();
    assert_eq!(fuse_elementwise(&mut after), FuseStats::default());
    assert_eq!(
        crate::ir::print::print_graph(&after),
        crate::ir::print::print_graph(&again)
    );
}

/// `--activations f16`: after the retyping, the GELU chain on 16-bit data becomes one fused
/// 16-bit node the staged element-wise kernel runs (Erf inside), and the reference gives the
/// same values within the f16 rounding of the unfused steps; in f32 the 16-bit pass does
/// nothing.
#[test]
fn gelu_chain_on_16_bit_data_becomes_one_node() {
    use crate::analysis::act_type::{ActType, retype_activations};
    let src = r#"
<ir_version: 8, opset_import: ["" : 13]>
gelu (float[4, 64] X, float[64, 64] W) => (float[4, 64] Y)
<float s2 = {1.4142135}, float one = {1.0}, float half = {0.5}>
{
    H = MatMul(X, W)
    D = Div(H, s2)
    E = Erf(D)
    A = Add(E, one)
    M = Mul(H, A)
    G = Mul(M, half)
    Y = MatMul(G, W)
}
"#;
    let mut before = graph(src);
    let _ = retype_activations(&mut before, ActType::F16);
    let mut after = before.clone();
    assert_eq!(
        fuse_elementwise16(&mut after, DType::F32),
        FuseStats::default()
    );
    let stats = fuse_elementwise16(&mut after, DType::F16);
    verify(&after).expect("fused graph verifies");
    assert_eq!(
        stats,
        FuseStats {
            groups: 1,
            nodes_fused: 5,
            residuals: 0
        }
    );
    let Op::FusedElementwise(a) = op_of(&after, "G") else {
        panic!("G is not fused");
    };
    assert!(a.program().contains("Erf"), "{}", a.program());
    let gv = after.find_value("G").expect("G");
    assert_eq!(after.value(gv).ty.dtype, DType::F16);
    assert!(after.find_value("E").is_none());
    let x = inputs(&before);
    let (a, b) = (
        eval_graph(&before, &x).expect("evaluates"),
        eval_graph(&after, &x).expect("evaluates"),
    );
    let (a, b) = (a[0].to_f64_vec(), b[0].to_f64_vec());
    let scale = a.iter().fold(0f64, |m, v| m.max(v.abs()));
    for (i, (p, q)) in a.iter().zip(&b).enumerate() {
        assert!(
            (p - q).abs() <= 1e-2 * scale,
            "Y[{i}]: {p} unfused, {q} fused"
        );
    }
}
