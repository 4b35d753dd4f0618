//! STFT (opset 17): a DFT of length `frame_length` over each window-weighted frame of the
//! signal, frames `frame_step` samples apart. Signal `[batch, length, 1]` (real),
//! `[batch, length, 2]` (complex) or `[batch, length]` (real, as onnxruntime also reads it);
//! window `[frame_length]` (optional: rectangular). Output `[batch, frames, bins, 2]` with
//! `frames = (length - frame_length) / frame_step + 1` and `bins = frame_length / 2 + 1`
//! when `onesided` (the default) or `frame_length`. A complex signal with `onesided` gives the
//! first `bins` bins of its full transform, as onnx's reference does.

use super::{FLOATS, positive, scalar_const};
use crate::error::OpError;
use crate::fft::DftGeometry;
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::conv::check_dtype;
use crate::ops::ctx::NodeCtx;

/// STFT attributes, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StftAttrs {
    /// Samples between the starts of two frames.
    pub frame_step: usize,
    /// Samples per frame, the DFT length.
    pub frame_length: usize,
    /// Only the `frame_length / 2 + 1` non-redundant bins.
    pub onesided: bool,
}

/// `(batch, length, 1 or 2)` of a signal shape.
fn signal_dims(s: &[usize]) -> Option<(usize, usize, usize)> {
    match *s {
        [b, l] => Some((b, l, 1)),
        [b, l, c @ (1 | 2)] => Some((b, l, c)),
        _ => None,
    }
}

/// Converts STFT.
pub(super) fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 4)?;
    let x = ctx.input_type(0)?.clone();
    let Some((_, length, _)) = signal_dims(&x.shape) else {
        return Err(OpError::shape(
            "the signal must be [batch, length, 1] (real) or [batch, length, 2] (complex)",
            &[&x.shape],
        ));
    };
    let step = scalar_const(ctx, 1, "frame_step")?
        .ok_or_else(|| OpError::attr("frame_step", "is required"))?;
    let frame_step = positive("frame_step", step)?;
    let window = if ctx.has_input(2) {
        Some(ctx.input_type(2)?.shape.clone())
    } else {
        None
    };
    let frame_length = match (scalar_const(ctx, 3, "frame_length")?, &window) {
        (Some(l), _) => positive("frame_length", l)?,
        (None, Some(w)) if w.len() == 1 => positive("frame_length", w[0] as i64)?,
        (None, Some(w)) => {
            return Err(OpError::shape("the window must be 1-d", &[&x.shape, w]));
        }
        (None, None) => positive("frame_length", length as i64)
            .map_err(|_| OpError::shape("the signal is empty", &[&x.shape]))?,
    };
    if let Some(w) = &window
        && w.as_slice() != [frame_length]
    {
        return Err(OpError::shape(
            format!("the window must be 1-d of frame_length ({frame_length}) values"),
            &[&x.shape, w],
        ));
    }
    if frame_length > length {
        return Err(OpError::shape(
            format!(
                "the signal has {length} samples, fewer than one frame of {frame_length}: \
                 no frame fits"
            ),
            &[&x.shape],
        ));
    }
    Ok(Op::Stft(StftAttrs {
        frame_step,
        frame_length,
        onesided: ctx.attr_int("onesided", 1)? != 0,
    }))
}

/// The geometry of an STFT on `inputs` (signal, optional window).
pub(super) fn geometry(a: &StftAttrs, inputs: &[TensorType]) -> Result<DftGeometry, OpError> {
    let Some(x) = inputs.first().filter(|_| (1..=2).contains(&inputs.len())) else {
        return Err(OpError::Arity {
            expected: "1 to 2".into(),
            actual: inputs.len(),
        });
    };
    check_dtype(0, x.dtype, FLOATS)?;
    let Some((batch, length, c)) = signal_dims(&x.shape) else {
        return Err(OpError::shape(
            "the signal must be [batch, length, 1 or 2]",
            &[&x.shape],
        ));
    };
    let n = a.frame_length;
    if let Some(w) = inputs.get(1) {
        if w.dtype != x.dtype {
            return Err(OpError::DType {
                input: 1,
                dtype: w.dtype,
                expected: format!("the signal's {}", x.dtype),
            });
        }
        if w.shape.as_slice() != [n] {
            return Err(OpError::shape(
                format!("the window must be 1-d of frame_length ({n}) values"),
                &[&x.shape, &w.shape],
            ));
        }
    }
    if n == 0 || n > length || a.frame_step == 0 {
        return Err(OpError::shape(
            format!(
                "frames of {n} samples every {} do not fit a signal of {length}",
                a.frame_step
            ),
            &[&x.shape],
        ));
    }
    Ok(DftGeometry {
        outer: batch,
        frames: (length - n) / a.frame_step + 1,
        step: a.frame_step,
        len_in: length,
        inner: 1,
        in_c: c,
        n,
        out_len: if a.onesided { n / 2 + 1 } else { n },
        out_c: 2,
        inverse: false,
        windowed: inputs.len() == 2,
    })
}
