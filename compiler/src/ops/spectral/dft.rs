//! DFT (opsets 17-19: `axis` attribute, default 1; 20 on: `axis` input, default -2). Input
//! `[..., 1]` (real) or `[..., 2]` (complex); the transform runs along `axis`, which may not be
//! the last dim. `dft_length` (a constant) zero-pads or truncates the signal; its default is
//! the axis length, or `2 * (len - 1)` for a one-sided inverse (IRFFT). Output: `dft_length`
//! complex bins, `dft_length / 2 + 1` for a one-sided forward transform (RFFT), `dft_length`
//! real samples for IRFFT.

use super::{FLOATS, positive, scalar_const};
use crate::error::OpError;
use crate::fft::DftGeometry;
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::conv::check_dtype;
use crate::ops::ctx::NodeCtx;
use crate::ops::util::expect_arity;

/// DFT attributes, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DftAttrs {
    /// The transformed axis (non-negative, below the last dim).
    pub axis: usize,
    /// The transform length (`dft_length`, or its default).
    pub length: usize,
    /// Inverse transform (scaled by `1 / length`).
    pub inverse: bool,
    /// One-sided: RFFT forward, IRFFT inverse.
    pub onesided: bool,
}

/// Converts DFT.
pub(super) fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let axis_input = ctx.opset >= 20;
    ctx.expect_inputs(1, if axis_input { 3 } else { 2 })?;
    let x = ctx.input_type(0)?.clone();
    let r = x.shape.len();
    if r < 2 || !matches!(x.shape.last(), Some(1 | 2)) {
        return Err(OpError::shape(
            "the input must be [signal dims..., 1] (real) or [signal dims..., 2] (complex)",
            &[&x.shape],
        ));
    }
    let axis = if axis_input {
        scalar_const(ctx, 2, "axis")?.unwrap_or(-2)
    } else {
        ctx.attr_int("axis", 1)?
    };
    let ri = r as i64;
    let axis = match axis {
        a if (0..ri - 1).contains(&a) => a as usize,
        a if (-ri..-1).contains(&a) => (a + ri) as usize,
        a => {
            return Err(OpError::attr(
                "axis",
                format!(
                    "{a} is out of range for rank {r}: the last dim holds the real and \
                     imaginary parts (valid: {} to {}, or -{r} to -2)",
                    0,
                    r - 2
                ),
            ));
        }
    };
    let inverse = ctx.attr_int("inverse", 0)? != 0;
    let onesided = ctx.attr_int("onesided", 0)? != 0;
    let len = x.shape[axis];
    let length = match scalar_const(ctx, 1, "dft_length")? {
        Some(l) => positive("dft_length", l)?,
        None if inverse && onesided => {
            positive("dft_length", 2 * (len as i64 - 1)).map_err(|_| {
                OpError::attr(
                    "dft_length",
                    format!(
                        "the one-sided inverse of {len} bin(s) has no default length \
                         (2 * ({len} - 1)); give dft_length"
                    ),
                )
            })?
        }
        None => positive("dft_length", len as i64).map_err(|_| {
            OpError::shape("the signal axis is empty: give dft_length", &[&x.shape])
        })?,
    };
    Ok(Op::Dft(DftAttrs {
        axis,
        length,
        inverse,
        onesided,
    }))
}

/// The geometry of a DFT on `inputs` (one input).
pub(super) fn geometry(a: &DftAttrs, inputs: &[TensorType]) -> Result<DftGeometry, OpError> {
    expect_arity(inputs, 1)?;
    let x = &inputs[0];
    check_dtype(0, x.dtype, FLOATS)?;
    let s = &x.shape;
    let r = s.len();
    if r < 2 || a.axis + 1 >= r || !matches!(s[r - 1], 1 | 2) || a.length == 0 {
        return Err(OpError::shape(
            format!(
                "a DFT along axis {} needs an input [signal dims..., 1 or 2] with the axis \
                 before the last dim",
                a.axis
            ),
            &[s],
        ));
    }
    let n = a.length;
    Ok(DftGeometry {
        outer: s[..a.axis].iter().product(),
        frames: 1,
        step: 0,
        len_in: s[a.axis],
        inner: s[a.axis + 1..r - 1].iter().product(),
        in_c: s[r - 1],
        n,
        out_len: if a.onesided && !a.inverse {
            n / 2 + 1
        } else {
            n
        },
        out_c: if a.onesided && a.inverse { 1 } else { 2 },
        inverse: a.inverse,
        windowed: false,
    })
}
