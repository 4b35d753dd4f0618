//! `fuse_residual`: a residual `Add` after a Conv becomes part of the Conv.
//!
//! `y = Conv(x, W, B)` followed by `z = Add(y, r)` (either operand order) becomes one Conv
//! with four inputs `[x, W, B, r]` computing `z` ([`crate::ops::ConvAttrs::sum`]) when
//! - the Conv is 2-d with one group and a bias (every BatchNorm-folded ResNet, ResNeXt or
//!   RegNet block's last conv, a MobileNetV2 projection conv);
//! - `y` is f32, or f16/bf16 (`--activations`: the retyping runs first) where every path
//!   of the 16-bit Conv adds the residual (`gemm::stage16::conv::residual_ok`: not the
//!   unstaged row kernel of first layers, at most 4 input channels), read by the Add alone,
//!   and not a graph output;
//! - `r` is computed at run time (not a constant) and has `y`'s type: no broadcast.
//!
//! The kernel reads each output element before writing it (`gemm::conv::ConvParams::
//! accumulate`), so the planner may write `z` over `r` where `r` dies at the Conv
//! (`analysis::liveness`'s in-place rule): `y` never exists, and the block's peak loses one
//! tensor. The Relu that usually follows stays a node; the code generator fuses it into the
//! Conv's epilogue as for any Conv. The fused node takes the Add's place in the order (the
//! Conv's inputs are all computed before it; `r` may be computed after the Conv, as a
//! ResNet's downsample branch is) and keeps the Conv's name.

use std::collections::{HashMap, HashSet};

use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::types::DType;
use crate::ops::{BinaryOp, Op};

use super::{Emit, NewNode, rebuild_with};

/// One Conv and the Add fused into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fusion {
    conv: NodeId,
    add: NodeId,
    residual: ValueId,
}

/// Fuses every residual `Add` after a Conv that the rules of the module doc allow; returns
/// how many.
pub fn fuse_residual(g: &mut Graph) -> usize {
    let found = find(g);
    if found.is_empty() {
        return 0;
    }
    let convs: HashSet<NodeId> = found.iter().map(|f| f.conv).collect();
    let at_add: HashMap<NodeId, Fusion> = found.iter().map(|f| (f.add, *f)).collect();
    *g = rebuild_with(g, |id| {
        if convs.contains(&id) {
            return Emit::Skip;
        }
        let Some(f) = at_add.get(&id) else {
            return Emit::Keep;
        };
        let conv = g.node(f.conv);
        let Op::Conv(a) = &conv.op else {
            return Emit::Keep;
        };
        let mut inputs = conv.inputs.to_vec();
        inputs.push(f.residual);
        Emit::Replace(Box::new(NewNode {
            name: conv.name.clone(),
            op: Op::Conv(crate::ops::ConvAttrs {
                sum: true,
                ..a.clone()
            }),
            inputs,
            outputs: g.node(id).outputs.to_vec(),
        }))
    });
    found.len()
}

/// The Conv/Add pairs to fuse, in order; each Add once.
fn find(g: &Graph) -> Vec<Fusion> {
    let outputs: HashSet<ValueId> = g.outputs.iter().copied().collect();
    // An Add of two Convs' outputs (a ResNet block with a downsample branch) takes the first.
    let mut adds: HashSet<NodeId> = HashSet::new();
    g.order()
        .iter()
        .filter_map(|&id| {
            let n = g.node(id);
            let Op::Conv(a) = &n.op else {
                return None;
            };
            let [y] = n.outputs[..] else {
                return None;
            };
            let yt = &g.value(y).ty;
            let xt = &g.value(*n.inputs.first()?).ty;
            let dtype_ok = match yt.dtype {
                DType::F32 => true,
                DType::F16 | DType::BF16 => {
                    let c = xt.shape.get(1).copied().unwrap_or(0);
                    xt.dtype == yt.dtype && crate::gemm::stage16::conv::residual_ok(c, a.group)
                }
                _ => false,
            };
            let conv_ok = !a.sum
                && a.kernel.len() == 2
                && a.group == 1
                && n.inputs.len() == 3
                && dtype_ok
                && yt.shape.len() == 4
                && yt.bytes().is_some()
                && !outputs.contains(&y);
            if !conv_ok {
                return None;
            }
            let [add] = g.consumers(y)[..] else {
                return None;
            };
            let an = g.node(add);
            let [a0, a1] = an.inputs[..] else {
                return None;
            };
            let [z] = an.outputs[..] else {
                return None;
            };
            let residual = match (a0 == y, a1 == y) {
                (true, false) => a1,
                (false, true) => a0,
                _ => return None,
            };
            let ok = an.op == Op::Binary(BinaryOp::Add)
                && g.value(residual).ty == *yt
                && g.value(z).ty == *yt
                && !matches!(g.value(residual).kind, ValueKind::Constant(_))
                && adds.insert(add);
            ok.then_some(Fusion {
                conv: id,
                add,
                residual,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
