//! Dropout when inference needs more than an Identity: its `mask` output is read (all true
//! at inference), or `training_mode` is a run-time input. Training with a nonzero ratio is
//! random and not supported: a constant true is refused when importing, a run-time true is
//! reported as the run's fault (`training_mode 1 is out of range (valid: 0 to 0)`); with
//! ratio 0 training changes nothing (`y = x / (1 - 0)`, every mask bit true), so it is
//! accepted either way. The plain inference case stays `Op::Identity` (`ops::view`).

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::ctx::NodeCtx;
use crate::ops::sample::SampleOp;

/// The Dropout op's shape: data inputs `x`, then (`ratio`) a run-time ratio, then (`check`)
/// the run-time `training_mode`; outputs `y` then (`mask`) the mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropoutAttrs {
    /// A run-time `training_mode` input that must be false (unless the ratio is 0).
    pub check: bool,
    /// A run-time ratio input (read only with `check`: training is fine at ratio 0).
    pub ratio: bool,
    /// The mask output is produced.
    pub mask: bool,
}

/// What is known of the ratio when compiling.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ratio {
    Zero,
    NonZero,
    RunTime,
}

/// Dropout's converter (every opset): `Op::Identity` when that is all it is.
pub fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let mask = ctx.has_output(1);
    let (mut check, mut run_ratio) = (false, false);
    if ctx.opset >= 12 {
        ctx.expect_inputs(1, 3)?;
        // Ratio: a constant scalar, omitted (0.5), or known only at run time.
        let ratio = match ctx.take_const(1) {
            Ok(Some(t)) if t.to_f64_vec().iter().all(|&r| r == 0.0) => Ratio::Zero,
            Ok(_) => Ratio::NonZero,
            Err(OpError::NotConstant { .. }) => {
                let ty = ctx.input_type(1)?;
                if !ty.dtype.is_float() || ty.numel() != Some(1) {
                    return Err(OpError::DType {
                        input: 1,
                        dtype: ty.dtype,
                        expected: "a float scalar ratio".into(),
                    });
                }
                Ratio::RunTime
            }
            Err(e) => return Err(e),
        };
        let ratio_zero = ratio == Ratio::Zero;
        if ctx.has_input(2) {
            let ty = ctx.input_type(2)?.clone();
            if ty.dtype != DType::Bool || ty.numel() != Some(1) {
                return Err(OpError::DType {
                    input: 2,
                    dtype: ty.dtype,
                    expected: "a bool scalar training_mode".into(),
                });
            }
            match ctx.take_const(2) {
                Ok(t) => {
                    let training = t.is_some_and(|t| t.to_i64_vec().iter().any(|&v| v != 0));
                    if training && !ratio_zero {
                        return Err(OpError::Unsupported(
                            "Dropout with training_mode=true and a nonzero ratio (random; only \
                             inference is supported)"
                                .into(),
                        ));
                    }
                }
                Err(OpError::NotConstant { .. }) if ratio_zero => ctx.ignore_input(2),
                Err(OpError::NotConstant { .. }) => {
                    check = true;
                    run_ratio = ratio == Ratio::RunTime;
                }
                Err(e) => return Err(e),
            }
        }
        if ratio == Ratio::RunTime && !run_ratio {
            ctx.ignore_input(1);
        }
    } else {
        ctx.expect_inputs(1, 1)?;
    }
    if !check && !mask {
        return Ok(Op::Identity);
    }
    Ok(Op::Sample(SampleOp::Dropout(DropoutAttrs {
        check,
        ratio: run_ratio,
        mask,
    })))
}

pub(super) fn infer(a: &DropoutAttrs, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let want = 1 + usize::from(a.check) + usize::from(a.ratio);
    let Some(x) = inputs.first().filter(|_| inputs.len() == want) else {
        return Err(OpError::Arity {
            expected: want.to_string(),
            actual: inputs.len(),
        });
    };
    let mut out = vec![x.clone()];
    if a.mask {
        out.push(TensorType::new(DType::Bool, x.shape.clone()));
    }
    Ok(out)
}

/// Reference evaluation: `y = x`, the mask all true; a true `training_mode` with a nonzero
/// ratio is an error.
pub(super) fn eval(a: &DropoutAttrs, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out = infer(a, &types)?;
    let nonzero = |t: &&Tensor| t.to_f64_vec().iter().any(|&v| v != 0.0);
    let ratio = !a.ratio || inputs.get(1).is_some_and(nonzero);
    let training = inputs.get(1 + usize::from(a.ratio)).is_some_and(nonzero);
    if a.check && training && ratio {
        return Err(OpError::Unsupported(
            "Dropout with training_mode=true (random; only inference is supported)".into(),
        ));
    }
    let mut ys = vec![inputs[0].clone()];
    if let Some(m) = out.get(1) {
        let n = m.numel().unwrap_or(0);
        ys.push(Tensor::from_i64(DType::Bool, m.shape.clone(), &vec![1; n]));
    }
    Ok(ys)
}
