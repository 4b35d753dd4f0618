//! Per-axis source coordinates and interpolation weights of Resize, shared by the reference
//! evaluation and the code generator's compile-time tables (so they agree by construction).
//!
//! Follows ONNX's reference implementation (`onnx/reference/ops/op_resize.py`): each resized
//! axis maps output index `y` to a source coordinate `x`; an interpolating mode takes `n`
//! neighbours of `x` (edge-clamped indices) weighted by the mode's coefficients; antialias
//! widens the linear / cubic filter by `1 / scale` when downsampling; `exclude_outside`
//! zeroes the weights of out-of-range neighbours and renormalizes; `tf_crop_and_resize`
//! marks coordinates outside the input as extrapolated (their output is the extrapolation
//! value).

use super::{ResizeAttrs, ResizeMode};

/// A `tf_crop_and_resize` region along one axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Roi {
    /// Start (fraction of the input extent).
    pub start: f64,
    /// End.
    pub end: f64,
    /// Arithmetic in f32: the reference computes `end - start` and `start * (len - 1)` in
    /// the roi tensor's type (numpy scalars), f32 unless the roi is f64.
    pub single: bool,
}

/// The source coordinate of output index `x` along one axis (`roi` is used by
/// `tf_crop_and_resize` only).
pub(crate) fn source_coord(
    coord: &str,
    x: usize,
    scale: f64,
    len_in: usize,
    len_out: usize,
    roi: Roi,
) -> f64 {
    let (x, s) = (x as f64, scale);
    let li = len_in as f64;
    // The resized length before flooring, as the reference has it.
    let ow = s * li;
    match coord {
        "half_pixel_symmetric" => {
            let adjustment = len_out as f64 / ow;
            let offset = li / 2.0 * (1.0 - adjustment);
            offset + (x + 0.5) / s - 0.5
        }
        "pytorch_half_pixel" if ow == 1.0 => -0.5,
        "pytorch_half_pixel" => (x + 0.5) / s - 0.5,
        "align_corners" if ow == 1.0 => 0.0,
        "align_corners" => x * (li - 1.0) / (ow - 1.0),
        "asymmetric" => x / s,
        "tf_half_pixel_for_nearest" => (x + 0.5) / s,
        "tf_crop_and_resize" => {
            let (diff, base, mid) = if roi.single {
                let (s0, s1, l) = (roi.start as f32, roi.end as f32, len_in as f32 - 1.0);
                let d = s1 - s0;
                (f64::from(d), f64::from(s0 * l), f64::from(d * l / 2.0))
            } else {
                let d = roi.end - roi.start;
                (d, roi.start * (li - 1.0), d * (li - 1.0) / 2.0)
            };
            let c = if ow == 1.0 {
                mid
            } else {
                x * diff * (li - 1.0) / (ow - 1.0)
            };
            c + base
        }
        // half_pixel
        _ => (x + 0.5) / s - 0.5,
    }
}

/// Rounds a source coordinate to an index per `nearest_mode`.
pub(crate) fn round_nearest(mode: &str, x: f64, scale: f64) -> f64 {
    let half = x - x.floor() == 0.5;
    match mode {
        "round_prefer_ceil" if half => x.ceil(),
        "round_prefer_floor" if half => x.floor(),
        "round_prefer_ceil" | "round_prefer_floor" => x.round(),
        "floor" => x.floor(),
        "ceil" => x.ceil(),
        // simple: ceil when downsampling, else floor.
        _ if scale < 1.0 => x.ceil(),
        _ => x.floor(),
    }
}

/// The input index nearest mode picks for coordinate `x`. The standard modes follow the
/// reference's two-tap window exactly (its coefficients `[1, 0]` or `[0, 1]` by the fraction,
/// the window placed from `x + 1` in f64, which differs from plain rounding where that sum
/// rounds to an integer); the legacy "simple" rounds `x`.
fn nearest_index(mode: &str, x: f64, scale: f64, len_in: usize) -> usize {
    let second = |ratio: f64| match mode {
        _ if ratio == 1.0 => Some(true),
        "round_prefer_floor" => Some(ratio > 0.5),
        "round_prefer_ceil" => Some(ratio >= 0.5),
        "floor" => Some(false),
        "ceil" => Some(true),
        _ => None,
    };
    let f = x.floor();
    let ratio = if x == f { 1.0 } else { x - f };
    match second(ratio) {
        Some(second) => {
            let xp = x + 1.0;
            let pp = xp.floor();
            let start = if xp - pp == 0.0 { pp - 2.0 } else { pp - 1.0 };
            clamp_index(start + if second { 1.0 } else { 0.0 }, len_in)
        }
        None => clamp_index(round_nearest(mode, x, scale), len_in),
    }
}

/// Clamps an index (possibly out of range or negative) into `0..len` (`len > 0`).
pub(crate) fn clamp_index(i: f64, len: usize) -> usize {
    i.max(0.0).min(len.saturating_sub(1) as f64) as usize
}

/// One axis's interpolation: output index `o` reads input indices `idx[o*n..(o+1)*n]`
/// (clamped into range) with weights `w[o*n..(o+1)*n]`; `extrap[o]` replaces it by the
/// extrapolation value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AxisTaps {
    /// Taps per output index.
    pub n: usize,
    /// Input index of each tap.
    pub idx: Vec<usize>,
    /// Weight of each tap.
    pub w: Vec<f64>,
    /// Output indices whose coordinate lies outside the input (tf_crop_and_resize).
    pub extrap: Vec<bool>,
}

impl AxisTaps {
    /// Whether output index `o` is input index `o` (the axis is not resized).
    pub fn is_identity(&self, len_in: usize) -> bool {
        let len_out = self.extrap.len();
        len_out == len_in
            && self.n == 1
            && !self.extrap.contains(&true)
            && self.idx.iter().enumerate().all(|(i, &j)| i == j)
            && self.w.iter().all(|&w| w == 1.0)
    }
}

/// `math.isclose(a, b)` with Python's default relative tolerance.
fn isclose(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn cubic_coeffs(r: f64, a: f64) -> Vec<f64> {
    let s = 1.0 - r;
    vec![
        ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
        ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
        ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,
        ((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a,
    ]
}

fn cubic_coeffs_antialias(r: f64, scale: f64, a: f64) -> Vec<f64> {
    let scale = scale.min(1.0);
    let k = |x: f64| {
        let x = x.abs();
        let (x2, x3) = (x * x, x * x * x);
        if x <= 1.0 {
            (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
        } else if x < 2.0 {
            a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
        } else {
            0.0
        }
    };
    let start = (-2.0 / scale).floor() as i64 + 1;
    let end = 2 - start;
    let c: Vec<f64> = (start..end).map(|i| k(scale * (i as f64 - r))).collect();
    let sum: f64 = c.iter().sum();
    c.iter().map(|v| v / sum).collect()
}

fn linear_coeffs_antialias(r: f64, scale: f64) -> Vec<f64> {
    let scale = scale.min(1.0);
    let start = (-1.0 / scale).floor() as i64 + 1;
    let footprint = 2 - 2 * start;
    let c: Vec<f64> = (start..start + footprint)
        .map(|i| (1.0 - ((i as f64 - r) * scale).abs()).clamp(0.0, 1.0))
        .collect();
    let sum: f64 = c.iter().sum();
    c.iter().map(|v| v / sum).collect()
}

/// The interpolation of axis `d` from `len_in` to `len_out` (`len_in > 0`).
pub(crate) fn axis_taps(a: &ResizeAttrs, d: usize, len_in: usize, len_out: usize) -> AxisTaps {
    let scale = a.scales.get(d).copied().unwrap_or(1.0);
    let coord = a.coordinate_transformation.as_str();
    let crop = coord == "tf_crop_and_resize";
    let r = a.roi.len() / 2;
    let roi = Roi {
        start: if crop {
            a.roi.get(d).copied().unwrap_or(0.0)
        } else {
            0.0
        },
        end: if crop {
            a.roi.get(r + d).copied().unwrap_or(1.0)
        } else {
            1.0
        },
        single: !a.roi_double,
    };
    let identity = AxisTaps {
        n: 1,
        idx: (0..len_out).collect(),
        w: vec![1.0; len_out],
        extrap: vec![false; len_out],
    };
    // The reference skips an axis that is not resized.
    if isclose(scale, 1.0) && len_out == len_in && isclose(roi.start, 0.0) && isclose(roi.end, 1.0)
    {
        return identity;
    }
    let mut t = AxisTaps {
        n: 0,
        idx: Vec::new(),
        w: Vec::new(),
        extrap: Vec::with_capacity(len_out),
    };
    let lim = len_in as f64 - 1.0;
    for o in 0..len_out {
        let x = source_coord(coord, o, scale, len_in, len_out, roi);
        t.extrap.push(crop && (x < 0.0 || x > lim));
        let coeffs = match a.mode {
            ResizeMode::Nearest => {
                t.n = 1;
                t.idx.push(nearest_index(&a.nearest_mode, x, scale, len_in));
                t.w.push(1.0);
                continue;
            }
            _ => {
                let f = x.floor();
                let ratio = if x == f { 1.0 } else { x - f };
                let ca = f64::from(a.cubic_coeff_a);
                match (a.mode, a.antialias) {
                    (ResizeMode::Cubic, true) => cubic_coeffs_antialias(ratio, scale, ca),
                    (ResizeMode::Cubic, false) => cubic_coeffs(ratio, ca),
                    (_, true) => linear_coeffs_antialias(ratio, scale),
                    (_, false) => vec![1.0 - ratio, ratio],
                }
            }
        };
        let n = coeffs.len();
        t.n = n;
        // The n neighbours nearest x in the edge-padded axis, ties to the smaller.
        let pad = n.div_ceil(2) as f64;
        let xp = x + pad;
        let pp = xp.floor();
        let frac = xp - pp;
        let off = if n % 2 == 0 {
            if frac == 0.0 {
                -((n / 2) as f64)
            } else {
                1.0 - (n / 2) as f64
            }
        } else {
            let base = -(((n - 1) / 2) as f64);
            if frac <= 0.5 { base } else { base + 1.0 }
        };
        let start = pp + off - pad;
        let mut w = coeffs;
        if a.exclude_outside {
            for (k, wk) in w.iter_mut().enumerate() {
                let j = start + k as f64;
                if j < 0.0 || j > lim {
                    *wk = 0.0;
                }
            }
            let sum: f64 = w.iter().sum();
            let sum = if sum == 0.0 { 1.0 } else { sum };
            w.iter_mut().for_each(|v| *v /= sum);
        }
        for (k, wk) in w.into_iter().enumerate() {
            t.idx.push(clamp_index(start + k as f64, len_in));
            t.w.push(wk);
        }
    }
    if len_out == 0 {
        t.n = 1;
    }
    t
}
