//! Softmax / LogSoftmax and LayerNormalization on 16-bit data, a row at a time: the row
//! widened into f32 scratch (one row, planned), normalized there in f32 (sums in f64), and
//! narrowed into the output. Rows are contiguous (`len` elements each).

use super::{N16, narrow, widen};

/// Scratch bytes for rows of `len` elements: one f32 row.
pub fn scratch_bytes(len: usize) -> usize {
    len.saturating_mul(4).next_multiple_of(64)
}

/// Softmax (or LogSoftmax when `log`) of each of `rows` rows of `len` values.
///
/// # Safety
/// `x` readable and `y` writable for `rows * len` values (equal, or not overlapping);
/// `scratch` writable for `len` floats, overlapping neither.
pub unsafe fn softmax(
    t: N16,
    rows: usize,
    len: usize,
    log: bool,
    x: *const u16,
    y: *mut u16,
    scratch: *mut f32,
) {
    // SAFETY: the scratch holds one row by the contract.
    let buf = unsafe { std::slice::from_raw_parts_mut(scratch, len) };
    for r in 0..rows {
        {
            // SAFETY: row `r` of `x`; dropped before `y` is written.
            let src = unsafe { std::slice::from_raw_parts(x.add(r * len), len) };
            widen(t, src, buf);
        }
        let max = buf.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let mut sum = 0f64;
        for v in buf.iter_mut() {
            let e = (*v - max).exp();
            sum += f64::from(e);
            if !log {
                *v = e;
            }
        }
        if log {
            let ls = sum.ln() as f32;
            buf.iter_mut().for_each(|v| *v = *v - max - ls);
        } else {
            let inv = (1.0 / sum) as f32;
            buf.iter_mut().for_each(|v| *v *= inv);
        }
        // SAFETY: row `r` of `y`; no other live reference to it.
        let dst = unsafe { std::slice::from_raw_parts_mut(y.add(r * len), len) };
        narrow(t, buf, dst);
    }
}

/// LayerNormalization of each of `rows` rows of `len` values:
/// `(x - mean) / sqrt(var + eps) * scale + bias` (`bias` null for none).
///
/// # Safety
/// As [`softmax`]; `scale` readable for `len` floats, `bias` null or readable for `len`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn layer_norm(
    t: N16,
    rows: usize,
    len: usize,
    eps: f32,
    scale: *const f32,
    bias: *const f32,
    x: *const u16,
    y: *mut u16,
    scratch: *mut f32,
) {
    // SAFETY: by the contract.
    let (buf, scale) = unsafe {
        (
            std::slice::from_raw_parts_mut(scratch, len),
            std::slice::from_raw_parts(scale, len),
        )
    };
    // SAFETY: by the contract.
    let bias = (!bias.is_null()).then(|| unsafe { std::slice::from_raw_parts(bias, len) });
    let n = len.max(1) as f64;
    for r in 0..rows {
        {
            // SAFETY: row `r` of `x`; dropped before `y` is written.
            let src = unsafe { std::slice::from_raw_parts(x.add(r * len), len) };
            widen(t, src, buf);
        }
        let mean = buf.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let var = buf
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / n;
        let inv = (1.0 / (var + f64::from(eps)).sqrt()) as f32;
        let mean = mean as f32;
        match bias {
            Some(b) => {
                for ((v, &s), &b) in buf.iter_mut().zip(scale).zip(b) {
                    *v = (*v - mean) * inv * s + b;
                }
            }
            None => {
                for (v, &s) in buf.iter_mut().zip(scale) {
                    *v = (*v - mean) * inv * s;
                }
            }
        }
        // SAFETY: row `r` of `y`; no other live reference to it.
        let dst = unsafe { std::slice::from_raw_parts_mut(y.add(r * len), len) };
        narrow(t, buf, dst);
    }
}
