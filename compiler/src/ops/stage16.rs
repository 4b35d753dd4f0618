//! Scratch of the nodes staged on 16-bit data (`--activations f16|bf16`,
//! `crate::analysis::act_type::staged`): the planner and the lowering
//! (`crate::codegen::lower::act16`) size it by the same functions of `crate::gemm::stage16`.

use super::Op;
use crate::ir::types::{DType, TensorType};

/// Scratch bytes of a staged node whose data inputs are `inputs` and first output `y` (the
/// first input and `y` f16 or bf16); `None` for a node that is not staged (its usual rule
/// applies).
pub fn scratch_bytes(
    op: &Op,
    inputs: &[TensorType],
    y: &TensorType,
    constant: &[bool],
    threads: usize,
) -> Option<usize> {
    let x = inputs.first()?;
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
    if !matches!(x.dtype, DType::F16 | DType::BF16) || y.dtype != x.dtype {
        return None;
    }
    let wide = |t: &TensorType| TensorType::new(DType::F32, t.shape.clone());
    let (x32, y32) = (wide(x), wide(y));
    match op {
        Op::Conv(a) if constant.get(1).copied().unwrap_or(false) => {
            let p = super::conv::scratch_params(a, &x32, &y32, true, threads)?;
            Some(crate::gemm::stage16::conv::scratch_bytes(&p))
        }
        Op::MaxPool(a) | Op::AveragePool(a) => {
            let mut p = crate::gemm::pool::pool_params(
                &x.shape,
                &y.shape,
                &a.kernel,
                &a.strides,
                &a.dilations,
                &a.pads,
            )?;
            p.kind = pool_kind(op)?;
            Some(crate::gemm::stage16::pool::scratch_bytes(&p))
        }
        Op::Gemm(_) | Op::MatMul => Some(mm_stage(op, &shapes, constant, threads)?.scratch_bytes()),
        Op::ConvTranspose(a) => {
            Some(convt_stage(a, &shapes, constant, Some(&y.shape), threads)?.scratch_bytes())
        }
        Op::Softmax { .. } | Op::LayerNormalization { .. } => row_stage(op, &shapes, constant)
            .map(|(rows, len)| crate::gemm::stage16::rows::scratch_bytes(rows, len, threads)),
        _ => None,
    }
}

/// `v[i] = u(v[i])` in f32: the activations the conv epilogue has (Relu, LeakyRelu,
/// Sigmoid, Tanh, HardSigmoid, HardSwish) through its vectorized
/// [`crate::gemm::act::bias_act`]; Erf by the vectorized
/// [`crate::gemm::stage16::math::erf_in_place`] (within 4e-7 of the reference), Gelu by it
/// (exact form) or by the epilogue's Tanh (tanh form); Sqrt in f32
/// (the same bits as the reference's f64 square root rounded); the rest through the f64
/// reference, element by element.
pub fn unary_f32(u: super::UnaryOp, v: &mut [f32]) {
    use super::UnaryOp as U;
    use crate::gemm::act::{Activation as A, bias_act};
    let act = match u {
        U::Relu => A::Relu,
        U::LeakyRelu { alpha } => A::LeakyRelu(alpha),
        U::Sigmoid => A::Sigmoid,
        U::Tanh => A::Tanh,
        U::HardSigmoid { alpha, beta } => A::HardSigmoid(alpha, beta),
        U::HardSwish => A::HardSwish,
        U::Erf => return crate::gemm::stage16::math::erf_in_place(v),
        U::Gelu { tanh_approx: false } => return crate::gemm::stage16::math::gelu_in_place(v),
        U::Gelu { tanh_approx: true } => return gelu_tanh(v),
        U::Sqrt => return v.iter_mut().for_each(|e| *e = e.sqrt()),
        _ => {
            v.iter_mut()
                .for_each(|e| *e = super::elementwise::unary_f64(u, f64::from(*e)) as f32);
            return;
        }
    };
    bias_act(v, 0.0, act);
}

/// `v[i] = x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))` (ONNX `Gelu` with
/// `approximate = "tanh"`), the tanh by [`crate::gemm::act::bias_act`]'s vectors a piece at a
/// time.
fn gelu_tanh(v: &mut [f32]) {
    const C: f32 = 0.797_884_6; // sqrt(2 / pi)
    let mut inner = [0f32; 256];
    for piece in v.chunks_mut(inner.len()) {
        let t = &mut inner[..piece.len()];
        for (t, &x) in t.iter_mut().zip(piece.iter()) {
            *t = C * (x + 0.044_715 * x * x * x);
        }
        crate::gemm::act::bias_act(t, 0.0, crate::gemm::act::Activation::Tanh);
        for (x, &t) in piece.iter_mut().zip(t.iter()) {
            *x = 0.5 * *x * (1.0 + t);
        }
    }
}

/// The staged product of a Gemm or MatMul with data input shapes `shapes` (A, B, C...) and
/// constants `constant`: B constant and 2-d (A's leading dims folded into rows), or B a
/// run-time operand with A's batch dims; Gemm without `transA`, its C absent or a constant
/// of one element or `N`. `None` when the node is not staged.
pub fn mm_stage(
    op: &Op,
    shapes: &[&[usize]],
    constant: &[bool],
    threads: usize,
) -> Option<crate::gemm::stage16::matmul::MmStage> {
    use crate::gemm::stage16::matmul::MmStage;
    let (sa, sb) = (*shapes.first()?, *shapes.get(1)?);
    let b_const = constant.get(1).copied().unwrap_or(false);
    let prod = |d: &[usize]| d.iter().product::<usize>();
    match op {
        Op::MatMul => {
            let r = sa.len();
            if r < 2 {
                return None;
            }
            let k = sa[r - 1];
            if b_const {
                if sb.len() != 2 || sb[0] != k {
                    return None;
                }
                let m = prod(&sa[..r - 1]);
                Some(MmStage {
                    batch: 1,
                    m,
                    k,
                    n: sb[1],
                    runtime_b: false,
                    threads,
                })
            } else {
                if sb.len() != r || sb[..r - 2] != sa[..r - 2] || sb[r - 2] != k {
                    return None;
                }
                Some(MmStage {
                    batch: prod(&sa[..r - 2]),
                    m: sa[r - 2],
                    k,
                    n: sb[r - 1],
                    runtime_b: true,
                    threads,
                })
            }
        }
        Op::Gemm(g) => {
            if g.trans_a || !b_const || sa.len() != 2 || sb.len() != 2 {
                return None;
            }
            let (k, n) = if g.trans_b {
                (sb[1], sb[0])
            } else {
                (sb[0], sb[1])
            };
            if sa[1] != k {
                return None;
            }
            if let Some(c) = shapes.get(2) {
                let c_ok = constant.get(2).copied().unwrap_or(false)
                    && (prod(c) == 1 || (prod(c) == n && c.last() == Some(&n)));
                if !c_ok {
                    return None;
                }
            }
            Some(MmStage {
                batch: 1,
                m: sa[0],
                k,
                n,
                runtime_b: false,
                threads,
            })
        }
        _ => None,
    }
}

/// The staged geometry of a ConvTranspose with data input shapes `shapes` (X, W, B) and
/// output shape `y` (`None`: inferred from the attributes, as the retyping asks before the
/// output exists in the new graph): 1-d or 2-d, constant weights and bias. `None` when the
/// node is not staged (kept in f32 between Casts).
pub fn convt_stage(
    a: &super::ConvTransposeAttrs,
    shapes: &[&[usize]],
    constant: &[bool],
    y: Option<&[usize]>,
    threads: usize,
) -> Option<crate::gemm::stage16::convt::ConvT16> {
    let x = *shapes.first()?;
    let w = *shapes.get(1)?;
    if !(1..shapes.len()).all(|i| constant.get(i).copied().unwrap_or(false)) || shapes.len() > 3 {
        return None;
    }
    let d = a.kernel.len();
    let y: Vec<usize> = match y {
        Some(y) => y.to_vec(),
        None => {
            // [N, M, spatial...]: M = W[1] * group, each spatial dim
            // s * (x - 1) + output_padding + (k - 1) * d + 1 - pads.
            let mut y = vec![*x.first()?, w.get(1)? * a.group.max(1)];
            for i in 0..d {
                let full = a.strides.get(i)? * x.get(2 + i)?.checked_sub(1)?
                    + a.output_padding.get(i).copied().unwrap_or(0)
                    + (a.kernel[i].checked_sub(1)?) * a.dilations.get(i)?
                    + 1;
                y.push(full.checked_sub(a.pads.get(i)? + a.pads.get(d + i)?)?);
            }
            y
        }
    };
    crate::gemm::stage16::convt::ConvT16::from_shapes(
        x,
        &y,
        &a.kernel,
        &a.strides,
        &a.dilations,
        &a.pads,
        a.group,
        shapes.len() == 3,
        threads,
    )
}

/// Rows and row length of a staged Softmax/LogSoftmax (normalized over the last axis, or
/// opset < 13's flattening from `axis`) or LayerNormalization (one output; scale and bias
/// constants of the row's length) on data of shape `x`; `None` when not staged.
pub fn row_stage(op: &Op, shapes: &[&[usize]], constant: &[bool]) -> Option<(usize, usize)> {
    let x = *shapes.first()?;
    let r = x.len();
    let split = |axis: usize| -> Option<(usize, usize)> {
        (axis < r).then(|| (x[..axis].iter().product(), x[axis..].iter().product()))
    };
    match op {
        Op::Softmax {
            axis, coerce_2d, ..
        } => {
            if *coerce_2d || *axis + 1 == r {
                split(*axis)
            } else {
                None
            }
        }
        Op::LayerNormalization {
            axis, stats: None, ..
        } => {
            let (rows, len) = split(*axis)?;
            let ok = (1..shapes.len()).all(|i| {
                constant.get(i).copied().unwrap_or(false)
                    && shapes[i].iter().product::<usize>() == len
            });
            (ok && shapes.len() >= 2).then_some((rows, len))
        }
        _ => None,
    }
}

/// The [`crate::gemm::pool::PoolParams::kind`] of a MaxPool or AveragePool node: the planner
/// sizes the staged kernel's scratch by it (a MaxPool the 16-bit kernel takes stages one
/// plane, an AveragePool blocks of planes), the lowering runs it.
pub fn pool_kind(op: &Op) -> Option<u64> {
    use crate::gemm::pool::{POOL_AVG, POOL_AVG_INCLUDE_PAD, POOL_MAX};
    match op {
        Op::MaxPool(_) => Some(POOL_MAX),
        Op::AveragePool(a) if a.count_include_pad => Some(POOL_AVG_INCLUDE_PAD),
        Op::AveragePool(_) => Some(POOL_AVG),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::unary_f32;
    use crate::ops::UnaryOp as U;

    /// The vectorized activations and the reference fallback against the f64 reference,
    /// over a chunk long enough for the vector loops and their tails (and NaN, ±inf).
    #[test]
    fn unary_f32_matches_the_reference() {
        let mut xs: Vec<f32> = (0..1037).map(|i| (i as f32 - 518.0) / 37.0).collect();
        xs.extend([f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 88.0, -104.0]);
        for u in [
            U::Relu,
            U::LeakyRelu { alpha: 0.1 },
            U::Sigmoid,
            U::Tanh,
            U::HardSigmoid {
                alpha: 0.2,
                beta: 0.5,
            },
            U::HardSwish,
            U::Erf,
            U::Gelu { tanh_approx: false },
            U::Gelu { tanh_approx: true },
            U::Sqrt,
        ] {
            let mut v = xs.clone();
            unary_f32(u, &mut v);
            for (&x, &y) in xs.iter().zip(&v) {
                let want = crate::ops::elementwise::unary_f64(u, f64::from(x));
                let ok = if want.is_nan() {
                    y.is_nan()
                } else {
                    f64::from(y) == want
                        || (f64::from(y) - want).abs() <= 2e-6 * want.abs().max(1.0)
                };
                assert!(ok, "{u:?}({x}) = {y}, reference {want}");
            }
        }
        let mut nan = [f32::NAN; 17];
        unary_f32(U::Sigmoid, &mut nan);
        assert!(nan.iter().all(|v| v.is_nan()));
    }
}
