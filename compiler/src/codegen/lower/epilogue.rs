//! Activations fused into a Conv's epilogue: which nodes after a Conv its kernel can apply
//! itself (they then emit nothing), decided from the graph and the plan alone so that the
//! Conv's lowering and the skipped nodes' agree.

use crate::arena::ArenaPlan;
use crate::gemm::conv::Activation;
use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::types::DType;
use crate::ops::{BinaryOp, FusedArg, FusedStep, Op, UnaryOp};

/// An activation a Conv applies in its epilogue, and the nodes it stands for.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct FusedAct {
    /// The activation.
    pub act: Activation,
    /// The node whose output the Conv's result becomes (its value lives at the Conv output's
    /// offset).
    pub last: NodeId,
    /// The nodes that emit nothing: `last`, and before it a `Sigmoid` of an unfused SiLU.
    pub nodes: Vec<NodeId>,
}

/// The activation of a one-input element-wise op, when a conv epilogue has it.
fn unary_act(op: &Op) -> Option<Activation> {
    Some(match op {
        Op::Unary(UnaryOp::Relu) => Activation::Relu,
        Op::Unary(UnaryOp::LeakyRelu { alpha }) => Activation::LeakyRelu(*alpha),
        Op::Unary(UnaryOp::Clip { min, max }) => Activation::Clip(
            min.map_or(f32::NEG_INFINITY, |x| x as f32),
            max.map_or(f32::INFINITY, |x| x as f32),
        ),
        Op::Unary(UnaryOp::Sigmoid) => Activation::Sigmoid,
        Op::Unary(UnaryOp::Tanh) => Activation::Tanh,
        Op::Unary(UnaryOp::HardSigmoid { alpha, beta }) => Activation::HardSigmoid(*alpha, *beta),
        Op::Unary(UnaryOp::HardSwish) => Activation::HardSwish,
        _ => return None,
    })
}

/// The activation a fused element-wise program of one input computes: `x * sigmoid(x)`
/// (either operand order) is SiLU.
fn program_act(steps: &[FusedStep]) -> Option<Activation> {
    let [s, m] = steps else {
        return None;
    };
    let (x, s0) = (FusedArg::Input(0), FusedArg::Step(0));
    let silu = s.op == Op::Unary(UnaryOp::Sigmoid)
        && s.args == [x.clone()]
        && m.op == Op::Binary(BinaryOp::Mul)
        && (m.args == [x.clone(), s0.clone()] || m.args == [s0, x]);
    silu.then_some(Activation::Silu)
}

/// The activation fused into the epilogue of Conv node `id`. The Conv's f32 result `y` (not a
/// graph output) is read only by either
/// - one node computing an activation of `y` alone — Relu, Clip, LeakyRelu, Sigmoid, Tanh,
///   HardSigmoid, HardSwish, or a fused element-wise `y * sigmoid(y)` (SiLU) — or
/// - `s = Sigmoid(y)` (read only by the next node) and `Mul(y, s)` or `Mul(s, y)`: SiLU
///   when element-wise fusion is off,
///
/// and the last node's output has `y`'s type and is planned at `y`'s arena offset (in place).
pub(super) fn fused_activation(g: &Graph, plan: &ArenaPlan, id: NodeId) -> Option<FusedAct> {
    let n = g.node(id);
    if !matches!(n.op, Op::Conv(_)) || n.outputs.len() != 1 {
        return None;
    }
    let y = n.outputs[0];
    // f16/bf16: a Conv staged for `--activations` (its epilogue runs in f32 before rounding).
    let dt = g.value(y).ty.dtype;
    if g.outputs.contains(&y) || !matches!(dt, DType::F32 | DType::F16 | DType::BF16) {
        return None;
    }
    let readers = g.consumers(y);
    let (act, nodes) = match readers[..] {
        [r] => {
            let rn = g.node(r);
            let act = match &rn.op {
                Op::FusedElementwise(f) => program_act(&f.steps)?,
                op => unary_act(op)?,
            };
            (rn.inputs[..] == [y]).then_some(())?;
            (act, vec![r])
        }
        [a, b] => {
            let (s, m) = if g.node(a).op == Op::Unary(UnaryOp::Sigmoid) {
                (a, b)
            } else {
                (b, a)
            };
            let (sn, mn) = (g.node(s), g.node(m));
            let s_out = *sn.outputs.first()?;
            let ok = sn.op == Op::Unary(UnaryOp::Sigmoid)
                && sn.inputs[..] == [y]
                && sn.outputs.len() == 1
                && !g.outputs.contains(&s_out)
                && g.consumers(s_out) == [m]
                && mn.op == Op::Binary(BinaryOp::Mul)
                && (mn.inputs[..] == [y, s_out] || mn.inputs[..] == [s_out, y]);
            ok.then_some(())?;
            (Activation::Silu, vec![s, m])
        }
        _ => return None,
    };
    let last = *nodes.last()?;
    let ln = g.node(last);
    let out = *ln.outputs.first()?;
    if ln.outputs.len() != 1 || g.value(out).ty != g.value(y).ty {
        return None;
    }
    // The value's address: its buffer's offset and its offset inside it (a Concat slice).
    let offset = |v: ValueId| {
        let b = *plan.liveness.value_buffer.get(&v)?;
        let at = plan.placement.offsets.get(b).copied()?;
        at.checked_add(plan.liveness.offset_of(v))
    };
    (offset(y)? == offset(out)?).then_some(FusedAct { act, last, nodes })
}

/// Whether node `id` is part of an activation its producer's conv epilogue applies.
pub(super) fn fused_into_conv(g: &Graph, plan: &ArenaPlan, id: NodeId) -> bool {
    if !matches!(
        g.node(id).op,
        Op::Unary(_) | Op::Binary(BinaryOp::Mul) | Op::FusedElementwise(_)
    ) {
        return false;
    }
    g.node(id).inputs.iter().any(|&x| match g.value(x).kind {
        ValueKind::Computed(conv) => {
            fused_activation(g, plan, conv).is_some_and(|f| f.nodes.contains(&id))
        }
        _ => false,
    })
}
