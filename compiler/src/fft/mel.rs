//! MelWeightMatrix's filters ([`mel_fill`], shared by the reference evaluation and the
//! run-time kernel) and the kernel for a sample rate or edge frequencies known only at run
//! time ([`arenac_mel`]; a node whose inputs are constants folds at import instead).
//!
//! The formula is onnx's reference: `mel(f) = 2595 log10(1 + f / 700)`; band edges
//! `mel(lower) + j (mel(upper) - mel(lower)) / (bands + 2)` for `j < bands + 2`, each turned
//! into the spectrogram bin `floor((dft_length + 1) hz / sample_rate)` (numpy's float floor
//! division); band `i` rises linearly from edge `i` to 1 at edge `i + 1` and falls to 0 at edge
//! `i + 2`.

use crate::ir::tensor::{read_f64, write_f64};
use crate::ir::types::DType;

/// numpy's float floor division (`a // b`: `(a - fmod(a, b)) / b`, floored and corrected).
fn floor_div(a: f64, b: f64) -> f64 {
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    let f = div.floor();
    if div - f > 0.5 { f + 1.0 } else { f }
}

/// The sizes and input/output types of one MelWeightMatrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MelShape {
    /// Mel bands (columns).
    pub bands: usize,
    /// The DFT length; rows are its `dft_length / 2 + 1` one-sided bins.
    pub dft_length: usize,
}

impl MelShape {
    /// Rows of the matrix.
    pub fn rows(&self) -> usize {
        self.dft_length / 2 + 1
    }
}

/// Calls `set(flat index, value)` for every non-zero entry of the `[rows, bands]` matrix
/// (row-major) of `sample_rate` and the edge frequencies; the caller zeroes the rest.
/// `edges_f32`: the edges are float32, whose `mel(f)` the reference computes in float32 (numpy
/// keeps the input's type) before the rest in float64. An edge outside the rows (negative
/// frequencies, an upper edge far above the Nyquist frequency, a non-positive sample rate) is
/// an error, as it is for the reference, and nothing is set. Allocates nothing.
pub fn mel_fill(
    m: MelShape,
    sample_rate: f64,
    lower: f64,
    upper: f64,
    edges_f32: bool,
    mut set: impl FnMut(usize, f64),
) -> Result<(), String> {
    let ln10 = std::f64::consts::LN_10;
    let mel = |hz: f64| {
        if edges_f32 {
            f64::from(2595.0f32 * (hz as f32 / 700.0f32).ln_1p()) / ln10
        } else {
            2595.0 * (hz / 700.0).ln_1p() / ln10
        }
    };
    let (bands, rows) = (m.bands, m.rows());
    let (low, high) = (mel(lower), mel(upper));
    let step = (high - low) / (bands + 2) as f64;
    let edge = |j: usize| {
        let hz = 700.0 * ((j as f64 * step + low) / 2595.0 * ln10).exp_m1();
        floor_div((m.dft_length as f64 + 1.0) * hz, sample_rate)
    };
    let ok = |e: f64| e >= 0.0 && e < rows as f64;
    // `sample_rate > 0` is false for NaN too.
    let rate_ok = sample_rate > 0.0;
    if !rate_ok || !(0..bands + 2).all(|j| ok(edge(j))) {
        return Err(format!(
            "mel band edges fall outside the {rows} spectrogram bins (sample_rate \
             {sample_rate}, edges {lower}..{upper} Hz)"
        ));
    }
    for i in 0..bands {
        let (l, c, h) = (edge(i) as usize, edge(i + 1) as usize, edge(i + 2) as usize);
        if c == l {
            set(c * bands + i, 1.0);
        } else {
            for j in l..=c {
                set(j * bands + i, (j - l) as f64 / (c - l) as f64);
            }
        }
        if h > c {
            for j in c..h {
                set(j * bands + i, (h - j) as f64 / (h - c) as f64);
            }
        }
    }
    Ok(())
}

/// A MelWeightMatrix computed at run time: its sizes and element types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MelKernel {
    /// Sizes.
    pub shape: MelShape,
    /// Type of the sample rate (int32 or int64).
    pub rate: DType,
    /// Type of the edge frequencies (a float type).
    pub edges: DType,
    /// Output element type.
    pub out: DType,
}

/// Writes the matrix of `k` for the scalars at `sr`, `lo`, `hi` into `y`. Band edges outside
/// the matrix (which the reference refuses) give an all-NaN matrix for a float output, all
/// zeros for an integer one.
///
/// # Safety
/// `k` points to a live [`MelKernel`]; `sr`, `lo`, `hi` are readable for one element of their
/// types; `y` is writable for `rows * bands` elements of the output type and overlaps none of
/// the inputs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn arenac_mel(
    k: *const MelKernel,
    sr: *const u8,
    lo: *const u8,
    hi: *const u8,
    y: *mut u8,
) {
    // SAFETY: by the contract: a live kernel, readable scalars of the kernel's types, and an
    // output of `rows * bands` elements overlapping nothing else.
    let (k, rate, lower, upper, y) = unsafe {
        let k = &*k;
        let scalar =
            |p: *const u8, dt: DType| read_f64(dt, std::slice::from_raw_parts(p, dt.size()));
        let len = k.shape.rows() * k.shape.bands * k.out.size();
        (
            k,
            scalar(sr, k.rate),
            scalar(lo, k.edges),
            scalar(hi, k.edges),
            std::slice::from_raw_parts_mut(y, len),
        )
    };
    y.fill(0);
    let e = k.out.size();
    let put = |y: &mut [u8], i: usize, v: f64| {
        if let Some(d) = y.get_mut(i * e..(i + 1) * e) {
            write_f64(d, k.out, v);
        }
    };
    let edges_f32 = k.edges == DType::F32;
    if mel_fill(k.shape, rate, lower, upper, edges_f32, |i, v| put(y, i, v)).is_err()
        && k.out.is_float()
    {
        for i in 0..k.shape.rows() * k.shape.bands {
            put(y, i, f64::NAN);
        }
    }
}
