//! GridSample (opset 16: 2-d; 20 on: 1 to 3 spatial dims) and AffineGrid (opset 20), as
//! onnx's reference defines them (`onnx/reference/ops/op_grid_sample.py`, PyTorch's
//! `grid_sampler`): <https://onnx.ai/onnx/operators/onnx__GridSample.html>.
//!
//! GridSample: for each output point, the grid's normalized coordinates (last dim, in
//! `x, y[, z]` order: the reverse of `X`'s dims) are mapped to pixel coordinates (computed in
//! f32 as the reference does: `(g + 1) / 2 (d - 1)` with `align_corners`, else
//! `((g + 1) d - 1) / 2`), moved inside for `border`/`reflection` padding, then sampled:
//! `nearest` (round half to even), `linear` (2 taps per dim) or `cubic` (4 taps, Keys
//! `a = -0.75`), a tap outside read as 0 (`zeros`), the edge (`border`) or mirrored
//! (`reflection`). The taps of a point are found once and applied to every channel.

use super::{Real, float_input};
use crate::error::OpError;
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::ctx::NodeCtx;
use crate::ops::sample::SampleOp;

/// Interpolation mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridMode {
    /// The nearest pixel (ties to even).
    Nearest,
    /// Linear in each dim (opset 16's `bilinear`).
    Linear,
    /// Cubic convolution in each dim (opset 16's `bicubic`).
    Cubic,
}

/// What a tap outside `X` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridPadding {
    /// Zero.
    Zeros,
    /// The nearest edge pixel.
    Border,
    /// The pixel mirrored at the border.
    Reflection,
}

/// GridSample's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridAttrs {
    /// Interpolation.
    pub mode: GridMode,
    /// Outside taps.
    pub padding: GridPadding,
    /// `-1` and `1` are the corner pixels' centers (else their outer edges).
    pub align_corners: bool,
}

/// The most spatial dims supported.
const MAX_DIMS: usize = 3;

pub(super) fn convert_grid_sample(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let default = if ctx.opset >= 20 {
        "linear"
    } else {
        "bilinear"
    };
    let mode = match ctx.attr_string("mode", default)?.as_str() {
        "nearest" => GridMode::Nearest,
        "linear" | "bilinear" => GridMode::Linear,
        "cubic" | "bicubic" => GridMode::Cubic,
        other => {
            return Err(OpError::attr(
                "mode",
                format!("'{other}' is not one of linear, nearest, cubic"),
            ));
        }
    };
    let padding = match ctx.attr_string("padding_mode", "zeros")?.as_str() {
        "zeros" => GridPadding::Zeros,
        "border" => GridPadding::Border,
        "reflection" => GridPadding::Reflection,
        other => {
            return Err(OpError::attr(
                "padding_mode",
                format!("'{other}' is not one of zeros, border, reflection"),
            ));
        }
    };
    let align_corners = ctx.attr_int("align_corners", 0)? != 0;
    Ok(Op::Sample(SampleOp::GridSample(GridAttrs {
        mode,
        padding,
        align_corners,
    })))
}

pub(super) fn convert_affine_grid(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let align_corners = ctx.attr_int("align_corners", 0)? != 0;
    let size = ctx.take_const_ints(1)?.ok_or_else(|| {
        OpError::Unsupported(
            "AffineGrid's size must be a constant (it decides the output shape)".into(),
        )
    })?;
    if !(4..=5).contains(&size.len()) {
        return Err(OpError::attr(
            "size",
            format!("{size:?} must be [N, C, H, W] or [N, C, D, H, W]"),
        ));
    }
    let spatial = size[2..]
        .iter()
        .map(|&s| usize::try_from(s).ok().filter(|&s| s >= 1))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| OpError::attr("size", format!("{size:?} has a size below 1")))?;
    Ok(Op::Sample(SampleOp::AffineGrid {
        align_corners,
        size: spatial,
    }))
}

/// The sizes of one GridSample: batch, channels, `X`'s spatial dims, output points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GridGeometry {
    /// Batch.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// `X`'s spatial dims (1 to 3).
    pub dims: Vec<usize>,
    /// Output points per image (the product of the grid's middle dims).
    pub points: usize,
}

impl GridGeometry {
    /// The geometry of `X` of shape `x` sampled at a grid of shape `grid` (checked).
    pub fn new(x: &[usize], grid: &[usize]) -> Result<GridGeometry, OpError> {
        let r = x.len().saturating_sub(2);
        let fits = (1..=MAX_DIMS).contains(&r)
            && grid.len() == x.len()
            && grid.first() == x.first()
            && grid.last() == Some(&r);
        if !fits {
            return Err(OpError::shape(
                format!("X must be [N, C, d1..dr] (r of 1 to {MAX_DIMS}) and grid [N, o1..or, r]"),
                &[x, grid],
            ));
        }
        Ok(GridGeometry {
            n: x[0],
            c: x[1],
            dims: x[2..].to_vec(),
            points: grid[1..grid.len() - 1].iter().product(),
        })
    }
}

pub(super) fn infer_grid_sample(inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let [x, grid] = inputs else {
        return Err(OpError::Unsupported("GridSample takes X and grid".into()));
    };
    float_input(0, x)?;
    float_input(1, grid)?;
    GridGeometry::new(&x.shape, &grid.shape)?;
    let mut shape = vec![x.shape[0], x.shape[1]];
    shape.extend_from_slice(&grid.shape[1..grid.shape.len() - 1]);
    Ok(vec![TensorType::new(x.dtype, shape)])
}

/// Mirrors `x` into `[lo, hi]` (the reference's `_gs_reflect`).
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    let fold = |dx: f64, near: f64, far: f64, dir: f64| {
        let n = (dx / range).trunc();
        let r = dx - n * range;
        if n % 2.0 == 0.0 {
            near + dir * r
        } else {
            far - dir * r
        }
    };
    if x < lo {
        fold(lo - x, lo, hi, 1.0)
    } else if x > hi {
        fold(x - hi, hi, lo, -1.0)
    } else {
        x
    }
}

/// The pixel coordinate of normalized `g` along a dim of size `d`, moved inside for border
/// and reflection padding (f32 arithmetic, as the reference).
fn coordinate(a: &GridAttrs, g: f64, d: usize) -> f64 {
    let (g, df) = (g as f32, d as f32);
    let mut x = if a.align_corners {
        (g + 1.0) / 2.0 * (df - 1.0)
    } else {
        ((g + 1.0) * df - 1.0) / 2.0
    };
    if a.mode == GridMode::Nearest {
        x = x.round_ties_even();
    }
    let (lo, hi) = bounds(a, d);
    let x = f64::from(x);
    if x < lo || x > hi {
        match a.padding {
            GridPadding::Zeros => x,
            GridPadding::Border => x.clamp(0.0, d as f64 - 1.0),
            GridPadding::Reflection => f64::from(reflect(x, lo, hi) as f32),
        }
    } else {
        x
    }
}

/// The border of a dim of size `d`: pixel centers with `align_corners`, else outer edges.
fn bounds(a: &GridAttrs, d: usize) -> (f64, f64) {
    if a.align_corners {
        (0.0, d as f64 - 1.0)
    } else {
        (-0.5, d as f64 - 0.5)
    }
}

/// Integer pixel `i` along a dim of size `d` after padding; `None` reads 0.
fn pixel(a: &GridAttrs, i: i64, d: usize) -> Option<usize> {
    let last = d as i64 - 1;
    let j = match a.padding {
        GridPadding::Zeros => i,
        GridPadding::Border => i.clamp(0, last),
        GridPadding::Reflection => {
            let (lo, hi) = bounds(a, d);
            (reflect(i as f64, lo, hi) as i64).clamp(0, last)
        }
    };
    usize::try_from(j).ok().filter(|&j| j < d)
}

/// Keys' cubic convolution weights (`a = -0.75`) of the taps at `-1, 0, 1, 2` from the
/// floor, for fraction `t`.
fn cubic(t: f64) -> [f64; 4] {
    const A: f64 = -0.75;
    let near = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// Up to 4 taps along one dim: `(pixel, weight)`, `None` reading 0.
type Taps = ([(Option<usize>, f64); 4], usize);

fn taps(a: &GridAttrs, x: f64, d: usize) -> Taps {
    let mut t = [(None, 0.0); 4];
    match a.mode {
        GridMode::Nearest => {
            t[0] = (pixel(a, x as i64, d), 1.0);
            (t, 1)
        }
        GridMode::Linear => {
            let x0 = x.floor();
            let f = x - x0;
            t[0] = (pixel(a, x0 as i64, d), 1.0 - f);
            t[1] = (pixel(a, x0 as i64 + 1, d), f);
            (t, 2)
        }
        GridMode::Cubic => {
            let x0 = x.floor();
            let w = cubic(x - x0);
            for (k, tk) in t.iter_mut().enumerate() {
                *tk = (pixel(a, x0 as i64 + k as i64 - 1, d), w[k]);
            }
            (t, 4)
        }
    }
}

/// GridSample of `x` (`[N, C, dims..]`) at `grid` (`[N, points.., r]`) into `y`
/// (`[N, C, points..]`). Slices shorter than the geometry leave the rest of `y` unwritten.
pub fn grid_sample<T: Real>(a: &GridAttrs, g: &GridGeometry, x: &[T], grid: &[T], y: &mut [T]) {
    let r = g.dims.len();
    let image: usize = g.dims.iter().product();
    // Strides of X's spatial dims.
    let mut stride = [0usize; MAX_DIMS];
    let mut s = 1;
    for i in (0..r).rev() {
        stride[i] = s;
        s *= g.dims[i];
    }
    let mut acc = vec![(0usize, 0.0f64); 64];
    for n in 0..g.n {
        for p in 0..g.points {
            // The taps of each dim (grid coordinates come in reverse dim order).
            let mut per: [Taps; MAX_DIMS] = [([(None, 0.0); 4], 1); MAX_DIMS];
            for (i, t) in per.iter_mut().enumerate().take(r) {
                let gi = grid
                    .get((n * g.points + p) * r + (r - 1 - i))
                    .map_or(0.0, |v| v.get());
                *t = taps(a, coordinate(a, gi, g.dims[i]), g.dims[i]);
            }
            // Their products: one (offset, weight) per tap inside X.
            let mut count = 0;
            let total: usize = per[..r].iter().map(|t| t.1).product();
            'tap: for k in 0..total {
                let (mut off, mut w, mut rem) = (0, 1.0, k);
                for i in (0..r).rev() {
                    let (t, len) = &per[i];
                    let (pix, wi) = t[rem % len];
                    rem /= len;
                    let Some(pix) = pix else { continue 'tap };
                    off += pix * stride[i];
                    w *= wi;
                }
                if let Some(slot) = acc.get_mut(count) {
                    *slot = (off, w);
                    count += 1;
                }
            }
            for c in 0..g.c {
                let base = (n * g.c + c) * image;
                let v: f64 = acc[..count]
                    .iter()
                    .map(|&(off, w)| w * x.get(base + off).map_or(0.0, |v| v.get()))
                    .sum();
                if let Some(out) = y.get_mut((n * g.c + c) * g.points + p) {
                    *out = T::put(v);
                }
            }
        }
    }
}

pub(super) fn infer_affine_grid(
    size: &[usize],
    inputs: &[TensorType],
) -> Result<Vec<TensorType>, OpError> {
    let [theta] = inputs else {
        return Err(OpError::Unsupported("AffineGrid takes theta".into()));
    };
    float_input(0, theta)?;
    let r = size.len();
    if theta.shape.len() != 3 || theta.shape[1] != r || theta.shape[2] != r + 1 {
        return Err(OpError::shape(
            format!("theta must be [N, {r}, {}] for {r} spatial sizes", r + 1),
            &[&theta.shape],
        ));
    }
    let mut shape = vec![theta.shape[0]];
    shape.extend_from_slice(size);
    shape.push(r);
    Ok(vec![TensorType::new(theta.dtype, shape)])
}

/// The base coordinate of pixel `j` of a dim of size `d` in `[-1, 1]`.
fn base(align_corners: bool, j: usize, d: usize) -> f64 {
    if align_corners {
        if d <= 1 {
            -1.0
        } else {
            -1.0 + j as f64 * (2.0 / (d as f64 - 1.0))
        }
    } else {
        let step = 2.0 / d as f64;
        -1.0 + step / 2.0 + j as f64 * step
    }
}

/// AffineGrid: `y[n, p.., k] = sum_j theta[n, k, j] * [x, y(, z), 1]_j` over the output's
/// points (`theta` is `[N, r, r + 1]`, `size` the `r` spatial sizes).
pub fn affine_grid<T: Real>(align_corners: bool, size: &[usize], theta: &[T], y: &mut [T]) {
    let r = size.len();
    let points: usize = size.iter().product();
    let per = r * (r + 1);
    let batches = theta.len() / per.max(1);
    let mut idx = [0usize; MAX_DIMS];
    let mut homo = [0.0f64; MAX_DIMS + 1];
    for n in 0..batches {
        let th = &theta[n * per..(n + 1) * per];
        for p in 0..points {
            let mut rem = p;
            for i in (0..r).rev() {
                idx[i] = rem % size[i];
                rem /= size[i];
            }
            // Homogeneous coordinates in reverse dim order, then 1.
            for (j, h) in homo.iter_mut().enumerate().take(r) {
                let i = r - 1 - j;
                *h = base(align_corners, idx[i], size[i]);
            }
            homo[r] = 1.0;
            for k in 0..r {
                let v: f64 = (0..=r).map(|j| th[k * (r + 1) + j].get() * homo[j]).sum();
                if let Some(out) = y.get_mut((n * points + p) * r + k) {
                    *out = T::put(v);
                }
            }
        }
    }
}
