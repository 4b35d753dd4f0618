//! RoiAlign (opsets 10 and 16): <https://onnx.ai/onnx/operators/onnx__RoiAlign.html>, as
//! onnx's reference (`op_roi_align.py`, after onnxruntime's kernel) computes it.
//!
//! Each region of interest `[x1, y1, x2, y2]` (scaled by `spatial_scale`, shifted by half a
//! pixel in `half_pixel` mode, at least 1 pixel wide in `output_half_pixel` mode) is cut into
//! `output_height x output_width` bins; each bin averages (or, `max`, takes the largest of)
//! `sampling_ratio^2` bilinear samples (`ceil(bin size)` per dim when `sampling_ratio` is 0).
//! A sample beyond a pixel outside the image reads 0; one within clamps to the edge. `max`
//! keeps the reference's definition: the largest of the four weighted corner terms. Region
//! geometry is computed in f32 as the reference does (it decides the sample counts).

use super::{Real, float_input};
use crate::error::OpError;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::ctx::NodeCtx;
use crate::ops::sample::SampleOp;

/// RoiAlign's attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoiAttrs {
    /// `max` pooling of the samples (else `avg`).
    pub max: bool,
    /// `half_pixel` coordinates (opset 16's default; else `output_half_pixel`).
    pub half_pixel: bool,
    /// Bins per region, vertically.
    pub out_h: usize,
    /// Bins per region, horizontally.
    pub out_w: usize,
    /// Samples per bin and dim; 0: `ceil(bin size)`.
    pub sampling_ratio: usize,
    /// Factor from region coordinates to pixels.
    pub spatial_scale: f32,
}

pub(super) fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(3, 3)?;
    let max = match ctx.attr_string("mode", "avg")?.as_str() {
        "avg" => false,
        "max" => true,
        other => {
            return Err(OpError::attr(
                "mode",
                format!("'{other}' is not avg or max"),
            ));
        }
    };
    let default = if ctx.opset >= 16 {
        "half_pixel"
    } else {
        "output_half_pixel"
    };
    let half_pixel = match ctx
        .attr_string("coordinate_transformation_mode", default)?
        .as_str()
    {
        "half_pixel" => true,
        "output_half_pixel" => false,
        other => {
            return Err(OpError::attr(
                "coordinate_transformation_mode",
                format!("'{other}' is not half_pixel or output_half_pixel"),
            ));
        }
    };
    let size = |name: &str, min: i64| -> Result<usize, OpError> {
        let v = ctx.attr_int(name, min.max(1))?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v as i64 >= min)
            .ok_or_else(|| OpError::attr(name, format!("{v} must be at least {min}")))
    };
    let a = RoiAttrs {
        max,
        half_pixel,
        out_h: size("output_height", 1)?,
        out_w: size("output_width", 1)?,
        sampling_ratio: {
            let v = ctx.attr_int("sampling_ratio", 0)?;
            usize::try_from(v)
                .map_err(|_| OpError::attr("sampling_ratio", format!("{v} is negative")))?
        },
        spatial_scale: ctx.attr_float("spatial_scale", 1.0)?,
    };
    Ok(Op::Sample(SampleOp::RoiAlign(a)))
}

pub(super) fn infer(a: &RoiAttrs, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let [x, rois, idx] = inputs else {
        return Err(OpError::Unsupported(
            "RoiAlign takes X, rois and batch_indices".into(),
        ));
    };
    float_input(0, x)?;
    float_input(1, rois)?;
    if idx.dtype != DType::I64 {
        return Err(OpError::DType {
            input: 2,
            dtype: idx.dtype,
            expected: "int64 batch indices".into(),
        });
    }
    let r = idx.shape.first().copied().unwrap_or(0);
    if x.shape.len() != 4 || rois.shape != [r, 4] || idx.shape.len() != 1 {
        return Err(OpError::shape(
            "X must be [N, C, H, W], rois [R, 4] and batch_indices [R]",
            &[&x.shape, &rois.shape, &idx.shape],
        ));
    }
    Ok(vec![TensorType::new(
        x.dtype,
        vec![r, x.shape[1], a.out_h, a.out_w],
    )])
}

/// One bilinear sample: four pixel offsets and weights (all 0 outside the image).
fn sample(y: f32, x: f32, h: usize, w: usize) -> [(usize, f32); 4] {
    if y < -1.0 || y > h as f32 || x < -1.0 || x > w as f32 {
        return [(0, 0.0); 4];
    }
    let along = |v: f32, n: usize| -> (usize, usize, f32) {
        let v = v.max(0.0);
        let low = v as usize;
        if low + 1 >= n {
            (n - 1, n - 1, 0.0)
        } else {
            (low, low + 1, v - low as f32)
        }
    };
    let (y0, y1, ly) = along(y, h);
    let (x0, x1, lx) = along(x, w);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    [
        (y0 * w + x0, hy * hx),
        (y0 * w + x1, hy * lx),
        (y1 * w + x0, ly * hx),
        (y1 * w + x1, ly * lx),
    ]
}

/// RoiAlign of `x` (`[N, C, H, W]` as `xs`) over `rois` (`[R, 4]`) of images `batch` into `y`
/// (`[R, C, out_h, out_w]`). A batch index outside `[0, N)` gives that region zeros (the
/// lowering checks indices first and reports a fault).
pub fn roi_align<T: Real>(
    a: &RoiAttrs,
    xs: [usize; 4],
    rois: &[T],
    batch: &[i64],
    x: &[T],
    y: &mut [T],
) {
    let [n, c, h, w] = xs;
    if h == 0 || w == 0 {
        y.fill(T::put(0.0));
        return;
    }
    let (oh, ow) = (a.out_h, a.out_w);
    let offset = if a.half_pixel { 0.5f32 } else { 0.0 };
    for (r, &b) in batch.iter().enumerate() {
        let coord = |k: usize| {
            rois.get(r * 4 + k).map_or(0.0, |v| v.get()) as f32 * a.spatial_scale - offset
        };
        let (x1, y1, x2, y2) = (coord(0), coord(1), coord(2), coord(3));
        let (mut rw, mut rh) = (x2 - x1, y2 - y1);
        if !a.half_pixel {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bh, bw) = (rh / oh as f32, rw / ow as f32);
        let grid = |bin: f32| -> usize {
            if a.sampling_ratio > 0 {
                a.sampling_ratio
            } else {
                // Non-negative and finite for a sane region; anything else samples nothing.
                let g = bin.ceil();
                if g.is_finite() && g > 0.0 {
                    g.min(1e6) as usize
                } else {
                    0
                }
            }
        };
        let (gh, gw) = (grid(bh), grid(bw));
        let count = (gh * gw).max(1) as f64;
        let image = usize::try_from(b).ok().filter(|&b| b < n);
        for ph in 0..oh {
            for pw in 0..ow {
                let out = |ch: usize| (r * c + ch) * oh * ow + ph * ow + pw;
                for ch in 0..c {
                    if let Some(v) = y.get_mut(out(ch)) {
                        *v = T::put(0.0);
                    }
                }
                let Some(b) = image else { continue };
                let mut first = true;
                for iy in 0..gh {
                    let yy = y1 + ph as f32 * bh + (iy as f32 + 0.5) * bh / gh as f32;
                    for ix in 0..gw {
                        let xx = x1 + pw as f32 * bw + (ix as f32 + 0.5) * bw / gw as f32;
                        let s = sample(yy, xx, h, w);
                        for ch in 0..c {
                            let base = (b * c + ch) * h * w;
                            let px = |k: usize| {
                                let (off, wt) = s[k];
                                f64::from(wt) * x.get(base + off).map_or(0.0, |v| v.get())
                            };
                            let Some(o) = y.get_mut(out(ch)) else {
                                continue;
                            };
                            let v = if a.max {
                                let m = px(0).max(px(1)).max(px(2)).max(px(3));
                                if first { m } else { o.get().max(m) }
                            } else {
                                o.get() + px(0) + px(1) + px(2) + px(3)
                            };
                            *o = T::put(v);
                        }
                        first = false;
                    }
                }
                if !a.max {
                    for ch in 0..c {
                        if let Some(o) = y.get_mut(out(ch)) {
                            *o = T::put(o.get() / count);
                        }
                    }
                }
            }
        }
    }
}
