//! Floating-point work of one node, from its op and its (static) types: what the profiler
//! divides by time to report GFLOP/s. Computed at compile time, never while running.
//!
//! Conventions, one function per family (approximate by design; the point is a stable figure
//! to compare kernels by, as ONNX Runtime's and PyTorch's profilers count):
//! - **dense** (Conv, ConvTranspose, Gemm, MatMul): 2 FLOPs per multiply-add; a Gemm's `C`
//!   adds one per output element;
//! - **element-wise** (Unary, Binary, Where, Cast): one per output element, whatever the
//!   function (an `exp` counts as one); Variadic with `k` inputs: `k - 1` per element; a fused
//!   element-wise node: one per step per element;
//! - **pooling**: one per window tap per output element (global pooling: one per input
//!   element); LpPool and LRN twice that (a power and an add);
//! - **normalization**: BatchNormalization 2 per element (a multiply-add); Layer, Instance,
//!   Group, MeanVariance and RMS normalization 5 per element (mean, variance, normalize, scale,
//!   shift); Softmax 3 (max, exp-sum, divide); LpNormalization 3;
//! - **reductions** and scans: one per input element; TopK, Arg*, Hardmax likewise;
//! - **Resize**: one per output element per interpolation tap (nearest: none);
//! - **control flow**: If, the larger branch's nodes; Loop/Scan, the body's nodes times the
//!   trip count;
//! - **DFT/STFT**: `5 log2(n)` per output element, `n` the input's element count (an upper
//!   bound of the transform length); MelWeightMatrix 0;
//! - **data movement** and views (Transpose, Concat, Gather, Pad...), constants: 0.
//!
//! Counts saturate instead of overflowing.

use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::resize::ResizeMode;
use crate::ops::sample::{GridMode, SampleOp};

fn numel(t: Option<&TensorType>) -> u64 {
    t.and_then(TensorType::numel).map_or(0, |n| n as u64)
}

fn product(dims: &[usize]) -> u64 {
    dims.iter()
        .fold(1u64, |acc, &d| acc.saturating_mul(d as u64))
}

/// FLOPs of every node of `g` (subgraphs included).
fn graph_flops(g: &crate::ir::graph::Graph) -> u64 {
    g.nodes().fold(0u64, |acc, (_, n)| {
        let ins: Vec<TensorType> = n.inputs.iter().map(|&v| g.value(v).ty.clone()).collect();
        let outs: Vec<TensorType> = n.outputs.iter().map(|&v| g.value(v).ty.clone()).collect();
        acc.saturating_add(flops(&n.op, &ins, &outs))
    })
}

/// FLOPs node work: `op` reading `inputs` and writing `outputs` (see the module doc).
pub fn flops(op: &Op, inputs: &[TensorType], outputs: &[TensorType]) -> u64 {
    let out = numel(outputs.first());
    let inp = numel(inputs.first());
    match op {
        Op::Conv(a) => {
            // Per output element: (C_in / group) * kernel taps multiply-adds.
            let c_in = inputs
                .first()
                .and_then(|x| x.shape.get(1))
                .map_or(0, |&c| c as u64);
            let per = (c_in / a.group.max(1) as u64).saturating_mul(product(&a.kernel));
            // A fused residual adds one per output element.
            let sum = if a.sum { out } else { 0 };
            out.saturating_mul(per)
                .saturating_mul(2)
                .saturating_add(sum)
        }
        Op::ConvTranspose(a) => {
            // Per input element: (C_out / group) * kernel taps multiply-adds.
            let c_out = outputs
                .first()
                .and_then(|y| y.shape.get(1))
                .map_or(0, |&c| c as u64);
            let per = (c_out / a.group.max(1) as u64).saturating_mul(product(&a.kernel));
            inp.saturating_mul(per).saturating_mul(2)
        }
        Op::Gemm(a) => {
            let k = inputs
                .first()
                .and_then(|x| {
                    let s = &x.shape;
                    if a.trans_a { s.first() } else { s.get(1) }
                })
                .map_or(0, |&k| k as u64);
            let c = if inputs.len() > 2 { out } else { 0 };
            out.saturating_mul(k).saturating_mul(2).saturating_add(c)
        }
        Op::MatMul => {
            // K is A's last dim (a 1-d A is [K]).
            let k = inputs
                .first()
                .and_then(|x| x.shape.last())
                .map_or(0, |&k| k as u64);
            out.saturating_mul(k).saturating_mul(2)
        }
        Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast { .. } | Op::ClipDynamic { .. } => out,
        // The FFT's work per element grows with log2 of the length: 5 log2(n) per output
        // element (the usual FFT count); the mel matrix is a constant table.
        Op::Dft(_) | Op::Stft(_) => {
            let n = inputs
                .first()
                .map_or(1, |x| x.numel().unwrap_or(1).max(2) as u64);
            out.saturating_mul(5 * u64::from(n.ilog2()))
        }
        Op::MelWeightMatrix(_) => 0,
        // Per output element, a multiply-add per tap (at most 4 per dim).
        Op::Sample(SampleOp::GridSample(a)) => {
            let dims = inputs
                .first()
                .map_or(0, |x| x.shape.len().saturating_sub(2)) as u32;
            let per: u64 = match a.mode {
                GridMode::Nearest => 1,
                GridMode::Linear => 2,
                GridMode::Cubic => 4,
            };
            out.saturating_mul(per.saturating_pow(dims))
                .saturating_mul(2)
        }
        Op::Sample(SampleOp::AffineGrid { size, .. }) => {
            out.saturating_mul(2 * (size.len() as u64 + 1))
        }
        // Four taps per sample; the sample count depends on the regions (run time).
        Op::Sample(SampleOp::RoiAlign(_)) => out.saturating_mul(8),
        Op::Sample(SampleOp::MaxUnpool(_) | SampleOp::Dropout(_) | SampleOp::TensorScatter(_)) => 0,
        // Per output: a bilinear sample (4 multiply-adds) and a multiply-add per tap and
        // input channel of the group.
        Op::Sample(SampleOp::DeformConv(a)) => {
            let icg = inputs
                .get(1)
                .and_then(|w| w.shape.get(1))
                .map_or(0, |&c| c as u64);
            let taps = (a.kernel[0] * a.kernel[1]) as u64;
            out.saturating_mul(icg)
                .saturating_mul(taps)
                .saturating_mul(10)
        }
        Op::Sample(SampleOp::MaxPoolIndices(a)) => out.saturating_mul(product(&a.pool.kernel)),
        // Per step and key/value head: decay, correction, update and reads of the state.
        Op::Sample(SampleOp::LinearAttention(_)) => {
            let state = numel(outputs.get(1));
            let steps = inputs
                .first()
                .and_then(|q| q.shape.get(1))
                .map_or(1, |&t| t as u64);
            state.saturating_mul(steps).saturating_mul(8)
        }
        // LU: m^3 / 3 multiply-adds per matrix.
        Op::Sample(SampleOp::Det) => {
            let m = inputs
                .first()
                .map_or(0, |x| x.shape.last().copied().unwrap_or(0)) as u64;
            out.saturating_mul(m.saturating_pow(3) * 2 / 3)
        }
        // Control flow: the larger branch; a loop's body once per trip (an early exit is not
        // known at compile time).
        Op::If(a) => graph_flops(&a.then_branch).max(graph_flops(&a.else_branch)),
        Op::Loop(a) => graph_flops(&a.body).saturating_mul(a.trips as u64),
        Op::Variadic(_) => out.saturating_mul(inputs.len().saturating_sub(1) as u64),
        Op::FusedElementwise(f) => out.saturating_mul(f.steps.len() as u64),
        Op::MaxPool(a) | Op::AveragePool(a) => out.saturating_mul(product(&a.kernel)),
        Op::LpPool(a) => out
            .saturating_mul(product(&a.pool.kernel))
            .saturating_mul(2),
        Op::GlobalAveragePool | Op::GlobalMaxPool => inp,
        Op::Lrn(a) => out.saturating_mul(a.size as u64).saturating_mul(2),
        Op::BatchNormalization { .. } => out.saturating_mul(2),
        Op::LayerNormalization { .. }
        | Op::InstanceNormalization { .. }
        | Op::GroupNormalization { .. }
        | Op::MeanVarianceNormalization { .. }
        | Op::RmsNormalization { .. } => inp.saturating_mul(5),
        Op::Softmax { .. } | Op::LpNormalization { .. } => inp.saturating_mul(3),
        Op::Reduce(_) | Op::ArgReduce(_) | Op::Hardmax { .. } | Op::CumScan(_) | Op::TopK(_) => inp,
        Op::Resize(a) => {
            let spatial = a
                .scales
                .iter()
                .filter(|&&s| (s - 1.0).abs() > f64::EPSILON)
                .count() as u32;
            let taps: u64 = match a.mode {
                ResizeMode::Nearest => 0,
                ResizeMode::Linear => 2u64.saturating_pow(spatial),
                ResizeMode::Cubic => 4u64.saturating_pow(spatial),
            };
            out.saturating_mul(taps)
        }
        Op::Reshape { .. }
        | Op::Flatten { .. }
        | Op::Squeeze { .. }
        | Op::Unsqueeze { .. }
        | Op::Identity
        | Op::BitCast { .. }
        | Op::Transpose { .. }
        | Op::Concat { .. }
        | Op::Split { .. }
        | Op::Slice { .. }
        | Op::PatchWrite { .. }
        | Op::Gather { .. }
        | Op::Expand { .. }
        | Op::Tile { .. }
        | Op::Pad { .. }
        | Op::Move(_)
        | Op::Shape { .. }
        | Op::Size
        | Op::ConstantOfShape { .. }
        | Op::Range { .. }
        | Op::Window { .. } => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::types::DType;
    use crate::ops::{ConvAttrs, GemmAttrs, UnaryOp};

    fn t(s: &[usize]) -> TensorType {
        TensorType::new(DType::F32, s.to_vec())
    }

    #[test]
    fn dense_ops_count_two_per_multiply_add() {
        let conv = Op::Conv(ConvAttrs {
            kernel: vec![3, 3],
            strides: vec![1, 1],
            dilations: vec![1, 1],
            pads: vec![1, 1, 1, 1],
            group: 1,
            sum: false,
        });
        let (x, w, y) = (t(&[1, 16, 8, 8]), t(&[32, 16, 3, 3]), t(&[1, 32, 8, 8]));
        assert_eq!(flops(&conv, &[x, w], &[y]), 2 * 32 * 64 * 16 * 9);
        let dw = Op::Conv(ConvAttrs {
            kernel: vec![3, 3],
            strides: vec![1, 1],
            dilations: vec![1, 1],
            pads: vec![1, 1, 1, 1],
            group: 16,
            sum: false,
        });
        let (x, w, y) = (t(&[1, 16, 8, 8]), t(&[16, 1, 3, 3]), t(&[1, 16, 8, 8]));
        assert_eq!(flops(&dw, &[x, w], &[y]), 2 * 16 * 64 * 9);
        let gemm = Op::Gemm(GemmAttrs {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: true,
        });
        let (a, b, c, y) = (t(&[4, 10]), t(&[6, 10]), t(&[6]), t(&[4, 6]));
        assert_eq!(flops(&gemm, &[a, b, c], &[y]), 2 * 4 * 6 * 10 + 24);
        let (a, b, y) = (t(&[2, 3, 4, 5]), t(&[5, 7]), t(&[2, 3, 4, 7]));
        assert_eq!(flops(&Op::MatMul, &[a, b], &[y]), 2 * 24 * 7 * 5);
    }

    #[test]
    fn element_wise_and_movement() {
        let y = t(&[2, 8]);
        assert_eq!(
            flops(
                &Op::Unary(UnaryOp::Relu),
                std::slice::from_ref(&y),
                std::slice::from_ref(&y)
            ),
            16
        );
        let tr = Op::Transpose { perm: vec![1, 0] };
        assert_eq!(flops(&tr, &[t(&[8, 2])], &[y]), 0);
    }
}
