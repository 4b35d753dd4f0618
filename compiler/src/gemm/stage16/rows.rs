//! Softmax / LogSoftmax and LayerNormalization on 16-bit data, a row at a time: the row
//! widened into f32 scratch (one row, planned), normalized there in f32 (sums in f64), and
//! narrowed into the output. Rows are contiguous (`len` elements each). The per-row math
//! keeps [`LANES`] independent maxima and f64 sums and uses [`super::math::exp_le0`], so it
//! vectorizes (compiled once more with AVX2+FMA, chosen at run time; the same bits on both
//! paths).

use super::{N16, narrow, widen};

/// Independent accumulators per row (one AVX2 vector of f32, two of f64).
const LANES: usize = 8;

/// The maximum of `v` (NaN ignored, as `f32::max` does; -inf for an empty row).
#[inline(always)]
fn row_max(v: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut it = v.chunks_exact(LANES);
    for c in &mut it {
        for (a, &e) in acc.iter_mut().zip(c) {
            *a = a.max(e);
        }
    }
    let m = it
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &e| m.max(e));
    acc.iter().fold(m, |m, &a| m.max(a))
}

/// The f64 sum of `f(e)` over `v` in [`LANES`] running sums.
#[inline(always)]
fn row_sum(v: &[f32], f: impl Fn(f32) -> f64) -> f64 {
    let mut acc = [0f64; LANES];
    let mut it = v.chunks_exact(LANES);
    for c in &mut it {
        for (a, &e) in acc.iter_mut().zip(c) {
            *a += f(e);
        }
    }
    let r: f64 = it.remainder().iter().map(|&e| f(e)).sum();
    acc.iter().sum::<f64>() + r
}

/// One widened row of Softmax (`log`: LogSoftmax), in place.
#[inline(always)]
fn softmax_row(buf: &mut [f32], log: bool) {
    let max = row_max(buf);
    let sum = if log {
        row_sum(buf, |v| f64::from(super::math::exp_le0(v - max)))
    } else {
        buf.iter_mut()
            .for_each(|v| *v = super::math::exp_le0(*v - max));
        row_sum(buf, f64::from)
    };
    if log {
        let ls = sum.ln() as f32;
        buf.iter_mut().for_each(|v| *v = *v - max - ls);
    } else {
        let inv = (1.0 / sum) as f32;
        buf.iter_mut().for_each(|v| *v *= inv);
    }
}

/// [`softmax_row`] for AVX2+FMA CPUs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn softmax_row_avx2(buf: &mut [f32], log: bool) {
    softmax_row(buf, log);
}

/// One widened row of LayerNormalization, in place.
#[inline(always)]
fn layer_norm_row(buf: &mut [f32], eps: f32, scale: &[f32], bias: Option<&[f32]>) {
    let n = buf.len().max(1) as f64;
    let mean = row_sum(buf, f64::from) / n;
    let var = row_sum(buf, |v| {
        let d = f64::from(v) - mean;
        d * d
    }) / n;
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
}

/// [`layer_norm_row`] for AVX2+FMA CPUs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn layer_norm_row_avx2(buf: &mut [f32], eps: f32, scale: &[f32], bias: Option<&[f32]>) {
    layer_norm_row(buf, eps, scale, bias);
}

/// Whether the AVX2+FMA copies run here.
fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

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
    let fast = avx2();
    for r in 0..rows {
        {
            // SAFETY: row `r` of `x`; dropped before `y` is written.
            let src = unsafe { std::slice::from_raw_parts(x.add(r * len), len) };
            widen(t, src, buf);
        }
        if fast {
            // SAFETY: `fast` only where the CPU has AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                softmax_row_avx2(buf, log)
            };
        } else {
            softmax_row(buf, log);
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
    let fast = avx2();
    for r in 0..rows {
        {
            // SAFETY: row `r` of `x`; dropped before `y` is written.
            let src = unsafe { std::slice::from_raw_parts(x.add(r * len), len) };
            widen(t, src, buf);
        }
        if fast {
            // SAFETY: `fast` only where the CPU has AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                layer_norm_row_avx2(buf, eps, scale, bias)
            };
        } else {
            layer_norm_row(buf, eps, scale, bias);
        }
        // SAFETY: row `r` of `y`; no other live reference to it.
        let dst = unsafe { std::slice::from_raw_parts_mut(y.add(r * len), len) };
        narrow(t, buf, dst);
    }
}
