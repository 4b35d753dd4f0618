//! Where a stage may end: not between a Conv and the activation its kernel applies in its
//! epilogue (`codegen::lower::epilogue`). Cut there, the activation runs after the stage as
//! a node of its own over the whole map (EfficientNet-B0's SiLU after a depthwise Conv: a
//! 144 x 56 x 56 `Sigmoid`/`Mul` pass, 0.68 ms of a 14.7 ms run), where inside the stage
//! each patch's Conv applies it in registers. The stage one node longer (the activation is
//! element-wise) has the same windows and peak.

use std::collections::HashSet;

use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ops::{BinaryOp, FusedArg, Op, UnaryOp};

/// Whether `y` is a Conv's output read only by an activation a conv epilogue applies: one
/// activation node of `y` alone (Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid,
/// HardSwish, or a fused `y * sigmoid(y)`), or `Sigmoid(y)` and the `Mul` of both (SiLU
/// unfused). The graph-side half of `codegen::lower::epilogue::fused_activation` (which also
/// asks the plan for in-place placement).
pub fn feeds_epilogue(g: &Graph, y: ValueId) -> bool {
    let ValueKind::Computed(p) = g.value(y).kind else {
        return false;
    };
    if !matches!(g.node(p).op, Op::Conv(_)) || g.outputs.contains(&y) {
        return false;
    }
    let alone = |id| g.node(id).inputs[..] == [y];
    match g.consumers(y)[..] {
        [r] => {
            alone(r)
                && match &g.node(r).op {
                    Op::FusedElementwise(f) => silu(&f.steps),
                    op => activation(op),
                }
        }
        [a, b] => {
            let (s, m) = if g.node(a).op == Op::Unary(UnaryOp::Sigmoid) {
                (a, b)
            } else {
                (b, a)
            };
            let Some(&so) = g.node(s).outputs.first() else {
                return false;
            };
            g.node(s).op == Op::Unary(UnaryOp::Sigmoid)
                && alone(s)
                && g.node(m).op == Op::Binary(BinaryOp::Mul)
                && (g.node(m).inputs[..] == [y, so] || g.node(m).inputs[..] == [so, y])
        }
        _ => false,
    }
}

/// The one-input activations a conv epilogue applies.
fn activation(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(
            UnaryOp::Relu
                | UnaryOp::LeakyRelu { .. }
                | UnaryOp::Clip { .. }
                | UnaryOp::Sigmoid
                | UnaryOp::Tanh
                | UnaryOp::HardSigmoid { .. }
                | UnaryOp::HardSwish
        )
    )
}

/// Whether a fused element-wise program of one input is `x * sigmoid(x)`.
fn silu(steps: &[crate::ops::FusedStep]) -> bool {
    let [s, m] = steps else {
        return false;
    };
    let (x, s0) = (FusedArg::Input(0), FusedArg::Step(0));
    s.op == Op::Unary(UnaryOp::Sigmoid)
        && s.args == [x.clone()]
        && m.op == Op::Binary(BinaryOp::Mul)
        && (m.args == [x.clone(), s0.clone()] || m.args == [s0, x])
}

/// The values of `order`'s Convs that [`feeds_epilogue`] holds for: no stage ends at one.
pub fn epilogue_inputs(g: &Graph, order: &[NodeId]) -> HashSet<ValueId> {
    order
        .iter()
        .filter(|&&id| matches!(g.node(id).op, Op::Conv(_)))
        .filter_map(|&id| g.node(id).outputs.first().copied())
        .filter(|&y| feeds_epilogue(g, y))
        .collect()
}
