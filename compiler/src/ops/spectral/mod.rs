//! The signal ops (opset 17 on): DFT (17 and 20 forms), STFT and MelWeightMatrix.
//! <https://onnx.ai/onnx/operators/onnx__DFT.html>,
//! <https://onnx.ai/onnx/operators/onnx__STFT.html>,
//! <https://onnx.ai/onnx/operators/onnx__MelWeightMatrix.html>.
//!
//! DFT and STFT share one geometry ([`geometry`], a [`DftGeometry`]): the kernel
//! (`crate::fft`, f32, FFT plans made at compile time) and the reference evaluation here (the
//! definition in f64, O(n^2) per frame, independent of any FFT) both read it. Their
//! shape-deciding operands (`dft_length`, DFT's `axis` input, STFT's `frame_step` and
//! `frame_length`) are taken as constants; the signal and STFT's window are data.
//! MelWeightMatrix's sizes are constants, its sample rate and band edges data (it usually
//! folds: all its inputs are constants).

mod dft;
mod mel;
mod stft;
#[cfg(test)]
mod tests;

pub use dft::DftAttrs;
pub use mel::{MelAttrs, mel_weights};
pub use stft::StftAttrs;

use crate::error::OpError;
use crate::fft::{DftGeometry, Transform};
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::ctx::NodeCtx;
use crate::ops::util::wrong_family;
use crate::ops::{MAX_OPSET, Op, OpDef};

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    OpDef {
        op_type: "DFT",
        since: 17,
        until: MAX_OPSET,
        convert: dft::convert,
    },
    OpDef {
        op_type: "STFT",
        since: 17,
        until: MAX_OPSET,
        convert: stft::convert,
    },
    OpDef {
        op_type: "MelWeightMatrix",
        since: 17,
        until: MAX_OPSET,
        convert: mel::convert,
    },
];

/// The float types the signal ops read (computed in f32: f16/bf16/f64 nodes are widened).
const FLOATS: &[DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

/// Input `i` as an int32/int64 scalar constant (`None` when omitted); `what` names it.
fn scalar_const(ctx: &mut NodeCtx<'_>, i: usize, what: &str) -> Result<Option<i64>, OpError> {
    if !ctx.has_input(i) {
        return Ok(None);
    }
    let ty = ctx.input_type(i)?.clone();
    if !matches!(ty.dtype, DType::I32 | DType::I64) || ty.numel() != Some(1) {
        return Err(OpError::DType {
            input: i,
            dtype: ty.dtype,
            expected: format!("an int32 or int64 scalar {what}"),
        });
    }
    Ok(ctx.take_const_ints(i)?.and_then(|v| v.first().copied()))
}

/// A positive size from an ONNX integer; `what` names it in the error.
fn positive(what: &str, v: i64) -> Result<usize, OpError> {
    usize::try_from(v)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| OpError::attr(what, format!("{v} must be at least 1")))
}

/// The op's printed name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::Dft(_) => "DFT",
        Op::Stft(_) => "STFT",
        Op::MelWeightMatrix(_) => "MelWeightMatrix",
        _ => "?",
    }
}

/// The geometry of a DFT or STFT node with data inputs `inputs` (checked: an error says what
/// does not fit).
pub fn geometry(op: &Op, inputs: &[TensorType]) -> Result<DftGeometry, OpError> {
    let g = match op {
        Op::Dft(a) => dft::geometry(a, inputs)?,
        Op::Stft(a) => stft::geometry(a, inputs)?,
        _ => return Err(wrong_family(op, "DFT/STFT")),
    };
    g.check().map_err(OpError::Unsupported)?;
    Ok(g)
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    match op {
        Op::Dft(a) => {
            let g = geometry(op, inputs)?;
            let mut shape = inputs[0].shape.clone();
            shape[a.axis] = g.out_len;
            if let Some(last) = shape.last_mut() {
                *last = g.out_c;
            }
            Ok(vec![TensorType::new(inputs[0].dtype, shape)])
        }
        Op::Stft(_) => {
            let g = geometry(op, inputs)?;
            let shape = vec![g.outer, g.frames, g.out_len, 2];
            Ok(vec![TensorType::new(inputs[0].dtype, shape)])
        }
        Op::MelWeightMatrix(a) => mel::infer(a, inputs),
        _ => Err(wrong_family(op, "spectral")),
    }
}

/// Reference evaluation: DFT and STFT by their definition in f64; MelWeightMatrix by its
/// formula.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out = infer(op, &types)?.remove(0);
    let values = match op {
        Op::Dft(_) | Op::Stft(_) => {
            let g = geometry(op, &types)?;
            let x = inputs[0].to_f64_vec();
            let w = inputs.get(1).map(|t| t.to_f64_vec());
            naive_dft(&g, &x, w.as_deref())
        }
        Op::MelWeightMatrix(a) => {
            let scalar = |i: usize| inputs[i].to_f64_vec().first().copied().unwrap_or(0.0);
            let edges_f32 = inputs[1].dtype() == DType::F32;
            mel_weights(a, scalar(0), scalar(1), scalar(2), edges_f32)?
        }
        _ => return Err(wrong_family(op, "spectral")),
    };
    Ok(vec![Tensor::from_f64(out.dtype, out.shape, &values)])
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::Dft(a) => vec![
            ("axis", a.axis.to_string()),
            ("length", a.length.to_string()),
            ("inverse", u8::from(a.inverse).to_string()),
            ("onesided", u8::from(a.onesided).to_string()),
        ],
        Op::Stft(a) => vec![
            ("frame_step", a.frame_step.to_string()),
            ("frame_length", a.frame_length.to_string()),
            ("onesided", u8::from(a.onesided).to_string()),
        ],
        Op::MelWeightMatrix(a) => vec![
            ("num_mel_bins", a.num_mel_bins.to_string()),
            ("dft_length", a.dft_length.to_string()),
            ("dtype", a.dtype.name().to_string()),
        ],
        _ => Vec::new(),
    }
}

/// Kernel scratch of a DFT or STFT node (0 for other ops and invalid types):
/// [`crate::fft::scratch_bytes`] of its geometry.
pub fn scratch_bytes(op: &Op, inputs: &[TensorType]) -> usize {
    geometry(op, inputs).map_or(0, |g| crate::fft::scratch_bytes(&g))
}

/// The transform of every frame of `g` by its definition, in f64, in the output layout of
/// [`DftGeometry`]: `X[k] = sum_t x[t] e^(-2 pi i k t / n)` forward, `x[t] = (1/n) sum_k X[k]
/// e^(2 pi i k t / n)` inverse; a one-sided inverse first extends its `n/2 + 1` bins by
/// conjugate symmetry (the imaginary parts of the zero and Nyquist bins dropped, as numpy's
/// `irfft`). Angles are reduced exactly (`k t mod n`) before the trigonometry.
pub fn naive_dft(g: &DftGeometry, x: &[f64], w: Option<&[f64]>) -> Vec<f64> {
    let n = g.n;
    let mut y = vec![0.0f64; g.output_floats().unwrap_or(0)];
    let sign = if g.inverse { 1.0 } else { -1.0 };
    let scale = if g.inverse { 1.0 / n as f64 } else { 1.0 };
    // e^(sign 2 pi i j / n) for j < n.
    let twiddle: Vec<(f64, f64)> = (0..n)
        .map(|j| {
            let a = sign * 2.0 * std::f64::consts::PI * j as f64 / n as f64;
            (a.cos(), a.sin())
        })
        .collect();
    let c2r = g.transform() == Transform::C2r;
    let mut sig = vec![(0.0f64, 0.0f64); n];
    for o in 0..g.outer {
        for f in 0..g.frames {
            let start = f * g.step;
            let avail = g.len_in.saturating_sub(start).min(n);
            for i in 0..g.inner {
                let take = if c2r { avail.min(n / 2 + 1) } else { avail };
                for (t, s) in sig.iter_mut().enumerate() {
                    *s = if t < take {
                        let p = ((o * g.len_in + start + t) * g.inner + i) * g.in_c;
                        let wt = w.and_then(|w| w.get(t).copied()).unwrap_or(1.0);
                        let im = if g.in_c == 2 { x[p + 1] } else { 0.0 };
                        (x[p] * wt, im * wt)
                    } else {
                        (0.0, 0.0)
                    };
                }
                if c2r {
                    sig[0].1 = 0.0;
                    if n.is_multiple_of(2) {
                        sig[n / 2].1 = 0.0;
                    }
                    for k in n / 2 + 1..n {
                        let (re, im) = sig[n - k];
                        sig[k] = (re, -im);
                    }
                }
                for k in 0..g.out_len {
                    let (mut re, mut im) = (0.0, 0.0);
                    // j = k t mod n, stepped without a product that could overflow.
                    let mut j = 0;
                    for &(a, b) in &sig {
                        let (c, s) = twiddle[j];
                        re += a * c - b * s;
                        im += a * s + b * c;
                        j += k;
                        if j >= n {
                            j -= n;
                        }
                    }
                    let q = (((o * g.frames + f) * g.out_len + k) * g.inner + i) * g.out_c;
                    y[q] = re * scale;
                    if g.out_c == 2 {
                        y[q + 1] = im * scale;
                    }
                }
            }
        }
    }
    y
}
