//! MelWeightMatrix (opset 17): `[dft_length / 2 + 1, num_mel_bins]` triangular filters on the
//! mel scale, computed as onnx's reference does ([`crate::fft::mel`] holds the formula, shared
//! with the run-time kernel). `num_mel_bins` and `dft_length` decide the shape (constants);
//! the sample rate and the edges are data (the node folds when they are constants, as usual,
//! else `arenac_mel` computes it at run time).

use super::positive;
use crate::error::OpError;
use crate::fft::mel::{MelShape, mel_fill};
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::ctx::NodeCtx;
use crate::ops::util::expect_arity;

/// MelWeightMatrix attributes, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MelAttrs {
    /// Number of mel bands (columns).
    pub num_mel_bins: usize,
    /// The DFT length; rows are its `dft_length / 2 + 1` one-sided bins.
    pub dft_length: usize,
    /// Output element type (`output_datatype`).
    pub dtype: DType,
}

/// Converts MelWeightMatrix.
pub(super) fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(5, 5)?;
    let mut int = |i: usize, what: &str| -> Result<usize, OpError> {
        let v =
            super::scalar_const(ctx, i, what)?.ok_or_else(|| OpError::attr(what, "is required"))?;
        positive(what, v)
    };
    let num_mel_bins = int(0, "num_mel_bins")?;
    let dft_length = int(1, "dft_length")?;
    let code = ctx.attr_int("output_datatype", 1)?;
    let dtype = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .filter(|d| *d != DType::Bool)
        .ok_or_else(|| {
            OpError::attr(
                "output_datatype",
                format!("element type {code} is not supported"),
            )
        })?;
    let a = MelAttrs {
        num_mel_bins,
        dft_length,
        dtype,
    };
    TensorType::new(dtype, out_shape(&a))
        .bytes()
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| OpError::Overflow(format!("a {num_mel_bins}-band mel matrix")))?;
    Ok(Op::MelWeightMatrix(a))
}

fn out_shape(a: &MelAttrs) -> Vec<usize> {
    vec![a.dft_length / 2 + 1, a.num_mel_bins]
}

impl MelAttrs {
    /// The sizes, for the kernel.
    pub fn mel_shape(&self) -> MelShape {
        MelShape {
            bands: self.num_mel_bins,
            dft_length: self.dft_length,
        }
    }
}

/// Inference: inputs sample_rate (int32/int64), lower and upper edge (one float type), each
/// one element.
pub(super) fn infer(a: &MelAttrs, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    expect_arity(inputs, 3)?;
    for (i, t) in inputs.iter().enumerate() {
        let ok = if i == 0 {
            matches!(t.dtype, DType::I32 | DType::I64)
        } else {
            t.dtype.is_float() && t.dtype == inputs[1].dtype
        };
        if !ok || t.numel() != Some(1) {
            return Err(OpError::DType {
                input: i,
                dtype: t.dtype,
                expected: if i == 0 {
                    "an int32 or int64 scalar sample rate".into()
                } else {
                    "a float scalar edge frequency (both edges of one type)".into()
                },
            });
        }
    }
    Ok(vec![TensorType::new(a.dtype, out_shape(a))])
}

/// The matrix (row-major `[dft_length / 2 + 1, num_mel_bins]`) for `sample_rate` and the edge
/// frequencies, by [`crate::fft::mel::mel_fill`] (`edges_f32`: the edges are float32, whose
/// mel value the reference computes in float32). Edges outside the bins are an error.
pub fn mel_weights(
    a: &MelAttrs,
    sample_rate: f64,
    lower: f64,
    upper: f64,
    edges_f32: bool,
) -> Result<Vec<f64>, OpError> {
    let shape = a.mel_shape();
    let mut out = vec![0.0f64; shape.rows() * shape.bands];
    mel_fill(shape, sample_rate, lower, upper, edges_f32, |i, v| {
        if let Some(o) = out.get_mut(i) {
            *o = v;
        }
    })
    .map_err(OpError::Unsupported)?;
    Ok(out)
}
