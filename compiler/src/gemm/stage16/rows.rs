//! Softmax / LogSoftmax and LayerNormalization on 16-bit data, a row at a time: the row
//! widened into f32 scratch (one row, planned), normalized there in f32 (sums in f64), and
//! narrowed into the output. Rows are contiguous (`len` elements each). The per-row math
//! keeps [`LANES`] independent maxima and f64 sums and uses [`super::math::exp_le0`], so it
//! vectorizes (compiled once more with AVX2+FMA, chosen at run time; the same bits on both
//! paths).

use super::split::{self, Shared};
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

/// [`softmax_row`] for AVX-512F CPUs (the same operations in 16 lanes: the same bits).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
fn softmax_row_avx512(buf: &mut [f32], log: bool) {
    softmax_row(buf, log);
}

/// [`softmax_row`] by the widest vectors this CPU and the selected kernel family allow.
fn softmax_row_best(buf: &mut [f32], log: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if super::convert::isa() == super::convert::Isa::Avx512 && avx2() {
            // SAFETY: the CPU has AVX-512F (`isa`) and FMA (`avx2`).
            return unsafe { softmax_row_avx512(buf, log) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { softmax_row_avx2(buf, log) };
        }
    }
    softmax_row(buf, log);
}

/// Softmax (LogSoftmax when `log`) of each of `rows` contiguous f32 rows of `len` values,
/// computed in the output itself (no scratch): a row copied from `x` unless in place, then
/// normalized there (the f32 lowering's path for rows over the last axis: 8 or 16 lanes
/// where the JIT's kernel has 4). Pieces of rows spread over the threads.
///
/// # Safety
/// `x` readable and `y` writable for `rows * len` floats, equal or not overlapping.
pub unsafe fn softmax_f32(rows: usize, len: usize, log: bool, x: *const f32, y: *mut f32) {
    let (xs, ys) = (Shared::of(x), Shared(y));
    let cost = crate::par::cost::elems_ns(rows.saturating_mul(len).saturating_mul(4));
    split::for_pieces(rows, 1, crate::par::threads(), cost, |r0, r1, _| {
        for r in r0..r1 {
            // SAFETY: row `r` of `y` (this piece's alone).
            let dst = unsafe { std::slice::from_raw_parts_mut(ys.get().add(r * len), len) };
            if xs.get().cast_const() != ys.get().cast_const() {
                // SAFETY: row `r` of `x`, apart from `y` (the contract).
                let src = unsafe { std::slice::from_raw_parts(xs.get().add(r * len), len) };
                dst.copy_from_slice(src);
            }
            softmax_row_best(dst, log);
        }
    });
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

/// [`layer_norm_row`] for AVX-512F CPUs (the same operations in 16 lanes: the same bits).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
fn layer_norm_row_avx512(buf: &mut [f32], eps: f32, scale: &[f32], bias: Option<&[f32]>) {
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

/// Scratch bytes for `rows` rows of `len` elements at `threads` threads: one f32 row per
/// slot ([`split::slot_count`]: one per thread when the rows fill them).
pub fn scratch_bytes(rows: usize, len: usize, threads: usize) -> usize {
    row_floats(len)
        .saturating_mul(4)
        .saturating_mul(split::slot_count(rows, threads))
}

/// Floats of one row's slot (64-byte aligned).
fn row_floats(len: usize) -> usize {
    len.next_multiple_of(16)
}

/// Runs `f(r, buf)` for each of `rows` rows of `len` values (`buf`: the row widened into
/// the scratch slot of the thread running it, narrowed into `y` after `f`), pieces of rows
/// spread over the slots [`scratch_bytes`] planned at `threads` threads.
///
/// # Safety
/// `x` readable and `y` writable for `rows * len` values (equal, or not overlapping);
/// `scratch` writable for [`scratch_bytes`] bytes, overlapping neither.
#[allow(clippy::too_many_arguments)]
unsafe fn each_row(
    t: N16,
    rows: usize,
    len: usize,
    threads: usize,
    x: *const u16,
    y: *mut u16,
    scratch: *mut f32,
    f: impl Fn(&mut [f32]) + Sync,
) {
    let slots = split::slot_count(rows, threads);
    let (xs, ys, ss) = (Shared::of(x), Shared(y), Shared(scratch));
    // Softmax/LayerNorm cost a few passes per element.
    let cost = crate::par::cost::elems_ns(rows.saturating_mul(len).saturating_mul(4));
    split::for_pieces(rows, 1, slots, cost, |r0, r1, th| {
        // SAFETY: slot `th < slots` of the scratch holds one row by the contract.
        let buf =
            unsafe { std::slice::from_raw_parts_mut(ss.get().add(th * row_floats(len)), len) };
        for r in r0..r1 {
            {
                // SAFETY: row `r` of `x`; dropped before `y` is written.
                let src = unsafe { std::slice::from_raw_parts(xs.get().add(r * len), len) };
                widen(t, src, buf);
            }
            f(buf);
            // SAFETY: row `r` of `y` (this piece's alone); no other live reference to it.
            let dst = unsafe { std::slice::from_raw_parts_mut(ys.get().add(r * len), len) };
            narrow(t, buf, dst);
        }
    });
}

/// Softmax (or LogSoftmax when `log`) of each of `rows` rows of `len` values.
///
/// # Safety
/// `x` readable and `y` writable for `rows * len` values (equal, or not overlapping);
/// `scratch` writable for [`scratch_bytes`] bytes at `threads`, overlapping neither.
#[allow(clippy::too_many_arguments)]
pub unsafe fn softmax(
    t: N16,
    rows: usize,
    len: usize,
    log: bool,
    threads: usize,
    x: *const u16,
    y: *mut u16,
    scratch: *mut f32,
) {
    let f = |buf: &mut [f32]| softmax_row_best(buf, log);
    // SAFETY: the contract passed on.
    unsafe { each_row(t, rows, len, threads, x, y, scratch, f) };
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
    threads: usize,
    scale: *const f32,
    bias: *const f32,
    x: *const u16,
    y: *mut u16,
    scratch: *mut f32,
) {
    // SAFETY: by the contract.
    let scale = unsafe { std::slice::from_raw_parts(scale, len) };
    // SAFETY: by the contract.
    let bias = (!bias.is_null()).then(|| unsafe { std::slice::from_raw_parts(bias, len) });
    let fast = avx2();
    #[cfg(target_arch = "x86_64")]
    let wide = fast && super::convert::isa() == super::convert::Isa::Avx512;
    let f = |buf: &mut [f32]| {
        if fast {
            #[cfg(target_arch = "x86_64")]
            if wide {
                // SAFETY: `wide` only where the CPU has AVX-512F (`isa`) and FMA (`avx2`).
                unsafe { layer_norm_row_avx512(buf, eps, scale, bias) };
            } else {
                // SAFETY: `fast` only where the CPU has AVX2 and FMA.
                unsafe { layer_norm_row_avx2(buf, eps, scale, bias) };
            }
        } else {
            layer_norm_row(buf, eps, scale, bias);
        }
    };
    // SAFETY: the contract passed on.
    unsafe { each_row(t, rows, len, threads, x, y, scratch, f) };
}

#[cfg(test)]
mod tests;
