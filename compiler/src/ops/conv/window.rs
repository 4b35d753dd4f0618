//! Attribute helpers shared by the windowed ops (Conv, ConvTranspose, MaxPool, AveragePool):
//! reading kernel/strides/dilations/pads, resolving `auto_pad`, and the window tap walk of the
//! reference evaluations.

use crate::error::OpError;
use crate::ir::types::{DType, TensorType, checked_numel};
use crate::ops::ctx::NodeCtx;
use crate::ops::util::fmt_shape;

/// The dtypes Conv, ConvTranspose, Gemm and the float pools accept (bf16, f16 and f64 are
/// computed by the f32 kernels: `analysis::widen`).
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

/// Checks that input `input` has one of `allowed` dtypes.
pub(crate) fn check_dtype(input: usize, dtype: DType, allowed: &[DType]) -> Result<(), OpError> {
    if allowed.contains(&dtype) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
    Err(OpError::DType {
        input,
        dtype,
        expected: names.join(", "),
    })
}

/// Checks a "2 to 3 inputs, all one float dtype" signature (Conv, ConvTranspose, Gemm: data,
/// weights, optional bias).
pub(crate) fn check_float_operands(inputs: &[TensorType]) -> Result<(), OpError> {
    if !(2..=3).contains(&inputs.len()) {
        return Err(OpError::Arity {
            expected: "2 to 3".into(),
            actual: inputs.len(),
        });
    }
    let dt = inputs[0].dtype;
    check_dtype(0, dt, FLOATS)?;
    for (i, t) in inputs.iter().enumerate().skip(1) {
        check_dtype(i, t.dtype, &[dt])?;
    }
    Ok(())
}

/// An INTS attribute with one positive entry per spatial dim; `default` when absent.
pub(crate) fn spatial_ints(
    ctx: &NodeCtx<'_>,
    name: &str,
    n: usize,
    default: usize,
) -> Result<Vec<usize>, OpError> {
    match ctx.attr_ints(name)? {
        None => Ok(vec![default; n]),
        Some(v) => {
            if v.len() != n {
                return Err(OpError::attr(
                    name,
                    format!(
                        "has {} entries, expected one per spatial dim ({n})",
                        v.len()
                    ),
                ));
            }
            v.iter()
                .map(|&x| {
                    usize::try_from(x)
                        .ok()
                        .filter(|&u| u >= 1)
                        .ok_or_else(|| OpError::attr(name, format!("value {x} must be >= 1")))
                })
                .collect()
        }
    }
}

/// A non-negative INTS attribute of `len` entries (pads, output_padding); zeros when absent.
pub(crate) fn nonneg_ints(
    ctx: &NodeCtx<'_>,
    name: &str,
    len: usize,
) -> Result<Vec<usize>, OpError> {
    match ctx.attr_ints(name)? {
        None => Ok(vec![0; len]),
        Some(v) => {
            if v.len() != len {
                return Err(OpError::attr(
                    name,
                    format!("has {} entries, expected {len}", v.len()),
                ));
            }
            v.iter()
                .map(|&x| {
                    usize::try_from(x)
                        .map_err(|_| OpError::attr(name, format!("value {x} must be >= 0")))
                })
                .collect()
        }
    }
}

/// ONNX `auto_pad`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AutoPad {
    /// Explicit `pads`.
    NotSet,
    /// No padding.
    Valid,
    /// Output `ceil(in / stride)`, the larger half of the padding at the end.
    SameUpper,
    /// Output `ceil(in / stride)`, the larger half of the padding at the beginning.
    SameLower,
}

/// Reads `auto_pad`.
pub(crate) fn read_auto_pad(ctx: &NodeCtx<'_>) -> Result<AutoPad, OpError> {
    match ctx.attr_string("auto_pad", "NOTSET")?.as_str() {
        "NOTSET" | "" => Ok(AutoPad::NotSet),
        "VALID" => Ok(AutoPad::Valid),
        "SAME_UPPER" => Ok(AutoPad::SameUpper),
        "SAME_LOWER" => Ok(AutoPad::SameLower),
        other => Err(OpError::attr(
            "auto_pad",
            format!("'{other}' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER"),
        )),
    }
}

/// Effective window extent `(k - 1) * d + 1`.
pub(crate) fn effective(kernel: usize, dilation: usize) -> Result<usize, OpError> {
    kernel
        .checked_sub(1)
        .and_then(|k| k.checked_mul(dilation))
        .and_then(|k| k.checked_add(1))
        .ok_or_else(|| OpError::Overflow(format!("kernel {kernel} with dilation {dilation}")))
}

/// Explicit `[begin.., end..]` pads for a windowed op (Conv, pools) from `auto_pad`.
/// `input` is the input's spatial dims.
pub(crate) fn resolve_pads(
    ctx: &NodeCtx<'_>,
    auto_pad: AutoPad,
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
) -> Result<Vec<usize>, OpError> {
    let n = kernel.len();
    match auto_pad {
        AutoPad::NotSet => nonneg_ints(ctx, "pads", 2 * n),
        AutoPad::Valid => Ok(vec![0; 2 * n]),
        AutoPad::SameUpper | AutoPad::SameLower => {
            let mut pads = vec![0; 2 * n];
            for i in 0..n {
                let (x, s) = (input[i], strides[i]);
                let eff = effective(kernel[i], dilations[i])?;
                let out = x.div_ceil(s);
                // total = (out - 1) * s + eff - x, clamped at 0.
                let need = out
                    .saturating_sub(1)
                    .checked_mul(s)
                    .and_then(|v| v.checked_add(eff))
                    .ok_or_else(|| OpError::Overflow("auto_pad padding".into()))?;
                let total = need.saturating_sub(x);
                let (small, big) = (total / 2, total - total / 2);
                (pads[i], pads[n + i]) = if auto_pad == AutoPad::SameUpper {
                    (small, big)
                } else {
                    (big, small)
                };
            }
            Ok(pads)
        }
    }
}

/// Checks that the resolved attribute lists of a windowed op agree with `n` spatial dims and
/// hold valid values (the op may have been built directly, not by a converter).
pub(crate) fn check_window_attrs(
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[usize],
) -> Result<(), OpError> {
    let n = kernel.len();
    if n == 0 {
        return Err(OpError::attr(
            "kernel_shape",
            "needs at least one spatial dim",
        ));
    }
    for (name, v, len) in [
        ("kernel_shape", kernel, n),
        ("strides", strides, n),
        ("dilations", dilations, n),
        ("pads", pads, 2 * n),
    ] {
        if v.len() != len {
            return Err(OpError::attr(
                name,
                format!("has {} entries, expected {len}", v.len()),
            ));
        }
        if name != "pads" && v.contains(&0) {
            return Err(OpError::attr(name, "entries must be >= 1"));
        }
    }
    Ok(())
}

/// Checks an output shape's element count.
pub(crate) fn checked_out(shape: Vec<usize>) -> Result<Vec<usize>, OpError> {
    checked_numel(&shape)
        .map(|_| shape.clone())
        .ok_or_else(|| OpError::Overflow(format!("output shape {}", fmt_shape(&shape))))
}

/// The element offset within one spatial plane of `dims` reached from window origin `origin`
/// (may be negative) by kernel tap `k` with dilation `dil`; `None` when outside the plane.
pub(crate) fn tap_offset(
    origin: &[i128],
    k: &[usize],
    dil: &[usize],
    dims: &[usize],
    dim_strides: &[usize],
) -> Option<usize> {
    let mut off = 0usize;
    for i in 0..dims.len() {
        let p = origin[i] + (k[i] as i128) * (dil[i] as i128);
        if p < 0 || p >= dims[i] as i128 {
            return None;
        }
        off += p as usize * dim_strides[i];
    }
    Some(off)
}
