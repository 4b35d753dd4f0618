//! MelWeightMatrix (opset 17): `[dft_length / 2 + 1, num_mel_bins]` triangular filters on the
//! mel scale `2595 log10(1 + f / 700)`, computed as onnx's reference does (its band edges
//! `num_mel_bins + 2` steps of `(mel(upper) - mel(lower)) / (num_mel_bins + 2)` from
//! `mel(lower)`, each turned into the spectrogram bin `floor((dft_length + 1) hz /
//! sample_rate)`; each triangle rises from its left edge to 1 at its centre and falls to 0 at
//! its right edge). `num_mel_bins` and `dft_length` decide the shape (constants); the sample
//! rate and the edges are data (the node folds when they are constants, as usual).

use super::positive;
use crate::error::OpError;
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

/// numpy's float floor division (`a // b`: `(a - fmod(a, b)) / b`, floored and corrected),
/// which the reference applies to the edge frequencies.
fn floor_div(a: f64, b: f64) -> f64 {
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    let f = div.floor();
    if div - f > 0.5 { f + 1.0 } else { f }
}

/// The matrix (row-major `[dft_length / 2 + 1, num_mel_bins]`) for `sample_rate` and the edge
/// frequencies. `edges_f32`: the edges are float32, whose `mel(f)` the reference computes in
/// float32 (numpy keeps the input's type) before the rest in float64. An edge landing outside
/// the bins (negative frequencies, an upper edge far above the Nyquist frequency) is an error,
/// as it is for the reference.
pub fn mel_weights(
    a: &MelAttrs,
    sample_rate: f64,
    lower: f64,
    upper: f64,
    edges_f32: bool,
) -> Result<Vec<f64>, OpError> {
    let ln10 = std::f64::consts::LN_10;
    let mel = |hz: f64| {
        if edges_f32 {
            f64::from(2595.0f32 * (hz as f32 / 700.0f32).ln_1p()) / ln10
        } else {
            2595.0 * (hz / 700.0).ln_1p() / ln10
        }
    };
    let bands = a.num_mel_bins;
    let rows = a.dft_length / 2 + 1;
    let (low, high) = (mel(lower), mel(upper));
    let step = (high - low) / (bands + 2) as f64;
    let edges: Vec<i64> = (0..bands + 2)
        .map(|j| {
            let hz = 700.0 * ((j as f64 * step + low) / 2595.0 * ln10).exp_m1();
            floor_div((a.dft_length as f64 + 1.0) * hz, sample_rate) as i64
        })
        .collect();
    let bad = |e: i64| e < 0 || e >= rows as i64;
    if sample_rate <= 0.0 || edges.iter().any(|&e| bad(e)) {
        return Err(OpError::Unsupported(format!(
            "mel band edges {edges:?} fall outside the {rows} spectrogram bins (sample_rate \
             {sample_rate}, edges {lower}..{upper} Hz)"
        )));
    }
    let mut out = vec![0.0f64; rows * bands];
    for i in 0..bands {
        let (l, c, h) = (edges[i], edges[i + 1], edges[i + 2]);
        let mut set = |row: i64, v: f64| out[row as usize * bands + i] = v;
        if c == l {
            set(c, 1.0);
        } else {
            for j in l..=c {
                set(j, (j - l) as f64 / (c - l) as f64);
            }
        }
        if h > c {
            for j in c..h {
                set(j, (h - j) as f64 / (h - c) as f64);
            }
        }
    }
    Ok(out)
}
