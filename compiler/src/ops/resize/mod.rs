//! Resize (opset 10..23) and the deprecated Upsample (opset 7..9) with nearest and linear
//! modes, resolved to a static output shape.
//!
//! Scales or sizes are constant inputs (or Upsample-7's attribute). Output dims are
//! `floor(input * scale)` for scales; sizes are taken as given and the scale is `size / input`.
//! Resize-10 and Upsample use asymmetric coordinates and the legacy "simple" nearest rounding
//! (floor when upsampling an axis, ceil when downsampling it), as onnxruntime does.
//! The reference evaluation follows the ONNX reference implementation: linear is separable
//! (one 1-d pass per axis) with edge clamping, nearest clamps the source index.

use bytes::Bytes;

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{TensorType, checked_numel, strides};
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::util::{expect_arity, fmt_f32, fmt_list, fmt_shape, unravel, wrong_family};
use crate::ops::{MAX_OPSET, Op, OpDef};

/// Resize interpolation mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeMode {
    /// Nearest neighbour.
    Nearest,
    /// (Multi-)linear.
    Linear,
}

/// Resize attributes, resolved to a static output shape.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizeAttrs {
    /// Mode.
    pub mode: ResizeMode,
    /// ONNX `coordinate_transformation_mode`: one of [`COORDINATE_MODES`].
    pub coordinate_transformation: String,
    /// ONNX `nearest_mode` (one of [`NEAREST_MODES`]), or "simple" for Resize-10 and Upsample.
    pub nearest_mode: String,
    /// Scale per dim (output / input as given or derived from sizes).
    pub scales: Vec<f32>,
    /// Output shape.
    pub output_shape: Vec<usize>,
}

/// Supported `coordinate_transformation_mode` values (tf_crop_and_resize is not).
pub const COORDINATE_MODES: &[&str] = &[
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nearest",
];

/// Supported `nearest_mode` values; "simple" is the legacy Resize-10/Upsample rounding.
pub const NEAREST_MODES: &[&str] = &[
    "round_prefer_floor",
    "round_prefer_ceil",
    "floor",
    "ceil",
    "simple",
];

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    OpDef {
        op_type: "Resize",
        since: 10,
        until: MAX_OPSET,
        convert: convert_resize,
    },
    OpDef {
        op_type: "Upsample",
        since: 7,
        until: 9,
        convert: convert_upsample,
    },
];

fn parse_mode(ctx: &NodeCtx<'_>) -> Result<ResizeMode, OpError> {
    match ctx.attr_string("mode", "nearest")?.as_str() {
        "nearest" => Ok(ResizeMode::Nearest),
        "linear" | "bilinear" => Ok(ResizeMode::Linear),
        "cubic" => Err(OpError::Unsupported(
            "Resize mode 'cubic' (only nearest and linear are implemented)".into(),
        )),
        m => Err(OpError::attr("mode", format!("unknown mode '{m}'"))),
    }
}

/// A constant scales/sizes operand; an empty tensor counts as absent.
fn take_nonempty(ctx: &mut NodeCtx<'_>, i: usize) -> Result<Option<Tensor>, OpError> {
    let t = ctx.take_const(i)?;
    Ok(t.filter(|t| t.numel() > 0))
}

fn convert_resize(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let mode = parse_mode(ctx)?;
    let in_shape = ctx.input_type(0)?.shape.clone();
    let rank = in_shape.len();
    if ctx.opset < 11 {
        ctx.expect_inputs(2, 2)?;
        let scales = take_nonempty(ctx, 1)?
            .ok_or_else(|| OpError::attr("scales", "required"))?
            .to_f32_vec();
        return resolve(
            mode,
            "asymmetric",
            "simple",
            &in_shape,
            Some(&scales),
            None,
            None,
        );
    }
    ctx.expect_inputs(1, 4)?;
    let coord = ctx.attr_string("coordinate_transformation_mode", "half_pixel")?;
    if coord == "tf_crop_and_resize" {
        return Err(OpError::Unsupported(
            "Resize coordinate_transformation_mode 'tf_crop_and_resize' (roi cropping)".into(),
        ));
    }
    // roi only matters for tf_crop_and_resize.
    ctx.ignore_input(1);
    let nearest = ctx.attr_string("nearest_mode", "round_prefer_floor")?;
    if nearest == "simple" {
        return Err(OpError::attr("nearest_mode", "unknown mode 'simple'"));
    }
    if mode == ResizeMode::Nearest && ctx.attr_int("exclude_outside", 0)? != 0 {
        return Err(OpError::Unsupported(
            "Resize exclude_outside=1 with nearest mode".into(),
        ));
    }
    let mut axes: Option<Vec<usize>> = None;
    if ctx.opset >= 18 {
        if ctx.attr_int("antialias", 0)? != 0 {
            return Err(OpError::Unsupported("Resize antialias=1".into()));
        }
        if let Some(a) = ctx.attr_ints("axes")? {
            let mut v = a
                .iter()
                .map(|&x| norm_axis("axes", x, rank))
                .collect::<Result<Vec<_>, _>>()?;
            let given = v.clone();
            v.sort_unstable();
            if v.windows(2).any(|w| w[0] == w[1]) {
                return Err(OpError::attr("axes", format!("{a:?} names an axis twice")));
            }
            axes = Some(given);
        }
    }
    let scales = take_nonempty(ctx, 2)?;
    let sizes = take_nonempty(ctx, 3)?;
    match (scales, sizes) {
        (Some(s), None) => {
            let s = s.to_f32_vec();
            resolve(
                mode,
                &coord,
                &nearest,
                &in_shape,
                Some(&s),
                None,
                axes.as_deref(),
            )
        }
        (None, Some(z)) => {
            let policy = if ctx.opset >= 18 {
                ctx.attr_string("keep_aspect_ratio_policy", "stretch")?
            } else {
                "stretch".to_string()
            };
            if policy != "stretch" {
                return Err(OpError::Unsupported(format!(
                    "Resize keep_aspect_ratio_policy '{policy}' (only 'stretch')"
                )));
            }
            let z = z.to_i64_vec();
            resolve(
                mode,
                &coord,
                &nearest,
                &in_shape,
                None,
                Some(&z),
                axes.as_deref(),
            )
        }
        (Some(_), Some(_)) => Err(OpError::attr(
            "scales",
            "both scales and sizes are given; exactly one must be",
        )),
        (None, None) => Err(OpError::attr(
            "scales",
            "neither scales nor sizes is given; exactly one must be",
        )),
    }
}

fn convert_upsample(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let mode = parse_mode(ctx)?;
    let in_shape = ctx.input_type(0)?.shape.clone();
    let scales = if ctx.opset < 9 {
        ctx.expect_inputs(1, 1)?;
        ctx.attr_floats("scales")?
            .ok_or_else(|| OpError::attr("scales", "required"))?
    } else {
        ctx.expect_inputs(2, 2)?;
        take_nonempty(ctx, 1)?
            .ok_or_else(|| OpError::attr("scales", "required"))?
            .to_f32_vec()
    };
    resolve(
        mode,
        "asymmetric",
        "simple",
        &in_shape,
        Some(&scales),
        None,
        None,
    )
}

/// Builds the op from scales or sizes given for `axes` (every axis when `None`).
fn resolve(
    mode: ResizeMode,
    coord: &str,
    nearest: &str,
    in_shape: &[usize],
    scales: Option<&[f32]>,
    sizes: Option<&[i64]>,
    axes: Option<&[usize]>,
) -> Result<Op, OpError> {
    let rank = in_shape.len();
    let all: Vec<usize> = (0..rank).collect();
    let axes = axes.unwrap_or(&all);
    let (what, n) = match (scales, sizes) {
        (Some(s), _) => ("scales", s.len()),
        (None, Some(z)) => ("sizes", z.len()),
        (None, None) => return Err(OpError::attr("scales", "missing")),
    };
    if n != axes.len() {
        return Err(OpError::attr(
            what,
            format!(
                "has {n} entries for {} axes (input rank {rank})",
                axes.len()
            ),
        ));
    }
    let mut out_scales = vec![1.0f32; rank];
    let mut out_shape = in_shape.to_vec();
    for (k, &d) in axes.iter().enumerate() {
        let input = in_shape[d];
        if let Some(s) = scales {
            let s = s[k];
            if !(s.is_finite() && s > 0.0) {
                return Err(OpError::attr("scales", format!("{s} must be positive")));
            }
            let out = (input as f64 * f64::from(s)).floor();
            if out >= usize::MAX as f64 {
                return Err(OpError::Overflow(format!("Resize output dim {out}")));
            }
            out_scales[d] = s;
            out_shape[d] = out as usize;
        } else if let Some(z) = sizes {
            let size = usize::try_from(z[k])
                .map_err(|_| OpError::attr("sizes", format!("{} must be >= 0", z[k])))?;
            out_scales[d] = if input == 0 {
                1.0
            } else {
                (size as f64 / input as f64) as f32
            };
            out_shape[d] = size;
        }
    }
    let op = Op::Resize(ResizeAttrs {
        mode,
        coordinate_transformation: coord.to_string(),
        nearest_mode: nearest.to_string(),
        scales: out_scales,
        output_shape: out_shape,
    });
    // Validate (modes, empty inputs, overflow) now for a clear error at conversion.
    check(&op, in_shape)?;
    Ok(op)
}

fn check(op: &Op, in_shape: &[usize]) -> Result<(), OpError> {
    let Op::Resize(a) = op else {
        return Err(wrong_family(op, "resize"));
    };
    if !COORDINATE_MODES.contains(&a.coordinate_transformation.as_str()) {
        return Err(OpError::Unsupported(format!(
            "Resize coordinate_transformation_mode '{}'",
            a.coordinate_transformation
        )));
    }
    if !NEAREST_MODES.contains(&a.nearest_mode.as_str()) {
        return Err(OpError::Unsupported(format!(
            "Resize nearest_mode '{}'",
            a.nearest_mode
        )));
    }
    if a.scales.len() != in_shape.len() || a.output_shape.len() != in_shape.len() {
        return Err(OpError::shape(
            format!(
                "{} scales and output shape {} for this input",
                a.scales.len(),
                fmt_shape(&a.output_shape)
            ),
            &[in_shape],
        ));
    }
    if a.scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(OpError::attr("scales", "must be positive"));
    }
    for (&i, &o) in in_shape.iter().zip(&a.output_shape) {
        if i == 0 && o > 0 {
            return Err(OpError::shape(
                format!("cannot resize an empty dim to {o}"),
                &[in_shape],
            ));
        }
    }
    if checked_numel(&a.output_shape).is_none() || checked_numel(in_shape).is_none() {
        return Err(OpError::Overflow(format!(
            "Resize output shape {}",
            fmt_shape(&a.output_shape)
        )));
    }
    Ok(())
}

/// Printed op name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::Resize(_) => "Resize",
        _ => "?",
    }
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let Op::Resize(a) = op else {
        return Err(wrong_family(op, "resize"));
    };
    expect_arity(inputs, 1)?;
    let x = &inputs[0];
    if a.mode == ResizeMode::Linear && !x.dtype.is_float() {
        return Err(OpError::DType {
            input: 0,
            dtype: x.dtype,
            expected: "a float type (linear mode)".into(),
        });
    }
    check(op, &x.shape)?;
    Ok(vec![TensorType::new(x.dtype, a.output_shape.clone())])
}

/// The source coordinate of output index `x` along one axis (shared with the code generator's
/// compile-time index tables, so kernels and reference agree by construction).
pub(crate) fn source_coord(
    coord: &str,
    x: usize,
    scale: f32,
    len_in: usize,
    len_out: usize,
) -> f64 {
    let (x, s) = (x as f64, f64::from(scale));
    let (li, lo) = (len_in as f64, len_out as f64);
    match coord {
        "half_pixel_symmetric" => {
            let adjustment = lo / (s * li);
            let offset = li / 2.0 * (1.0 - adjustment);
            offset + (x + 0.5) / s - 0.5
        }
        "pytorch_half_pixel" if len_out > 1 => (x + 0.5) / s - 0.5,
        "pytorch_half_pixel" => 0.0,
        // The resized length is `scale * len_in` before flooring (as ONNX's reference and
        // node tests have it); with `sizes` the scale is `len_out / len_in`, so it is len_out.
        "align_corners" if len_out > 1 && s * li != 1.0 => x * (li - 1.0) / (s * li - 1.0),
        "align_corners" => 0.0,
        "asymmetric" => x / s,
        "tf_half_pixel_for_nearest" => (x + 0.5) / s,
        // half_pixel
        _ => (x + 0.5) / s - 0.5,
    }
}

/// Rounds a source coordinate to an index per `nearest_mode`.
pub(crate) fn round_nearest(mode: &str, x: f64, scale: f32) -> f64 {
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

/// Clamps an index (possibly out of range or negative) into `0..len` (`len > 0`).
pub(crate) fn clamp_index(i: f64, len: usize) -> usize {
    i.max(0.0).min(len.saturating_sub(1) as f64) as usize
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let Op::Resize(a) = op else {
        return Err(wrong_family(op, "resize"));
    };
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    infer(op, &types)?;
    let x = inputs[0];
    let in_shape = x.shape().to_vec();
    let out_shape = a.output_shape.clone();
    let coord = a.coordinate_transformation.as_str();
    match a.mode {
        ResizeMode::Nearest => {
            // Source index along each axis for each output index.
            let maps: Vec<Vec<usize>> = (0..in_shape.len())
                .map(|d| {
                    (0..out_shape[d])
                        .map(|o| {
                            let c = source_coord(coord, o, a.scales[d], in_shape[d], out_shape[d]);
                            let r = round_nearest(&a.nearest_mode, c, a.scales[d]);
                            clamp_index(r, in_shape[d])
                        })
                        .collect()
                })
                .collect();
            let st = strides(&in_shape);
            let sz = x.dtype().size();
            let src = x.bytes();
            let n = checked_numel(&out_shape).unwrap_or(0);
            let mut data = Vec::with_capacity(n * sz);
            for flat in 0..n {
                let idx = unravel(flat, &out_shape);
                let s: usize = (0..idx.len()).map(|d| maps[d][idx[d]] * st[d]).sum();
                data.extend_from_slice(&src[s * sz..(s + 1) * sz]);
            }
            let t = Tensor::from_bytes(x.dtype(), out_shape, Bytes::from(data))
                .map_err(|e| OpError::Unsupported(format!("Resize output: {e}")))?;
            Ok(vec![t])
        }
        ResizeMode::Linear => {
            // One 1-d linear pass per axis: cur has out dims before d, in dims from d on.
            let mut cur = x.to_f64_vec();
            let mut shape = in_shape.clone();
            for d in 0..shape.len() {
                let (len_in, len_out) = (in_shape[d], out_shape[d]);
                let outer = checked_numel(&shape[..d]).unwrap_or(0);
                let inner = checked_numel(&shape[d + 1..]).unwrap_or(0);
                let mut next = vec![0.0; outer * len_out * inner];
                for o in 0..len_out {
                    let c = source_coord(coord, o, a.scales[d], len_in, len_out);
                    let f = c.floor();
                    let t = c - f;
                    let i0 = clamp_index(f, len_in);
                    let i1 = clamp_index(f + 1.0, len_in);
                    for b in 0..outer {
                        for k in 0..inner {
                            let v0 = cur[(b * len_in + i0) * inner + k];
                            let v1 = cur[(b * len_in + i1) * inner + k];
                            next[(b * len_out + o) * inner + k] = (1.0 - t) * v0 + t * v1;
                        }
                    }
                }
                cur = next;
                shape[d] = len_out;
            }
            Ok(vec![Tensor::from_f64(x.dtype(), out_shape, &cur)])
        }
    }
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::Resize(a) => {
            let scales: Vec<String> = a.scales.iter().map(|&s| fmt_f32(s)).collect();
            vec![
                (
                    "mode",
                    match a.mode {
                        ResizeMode::Nearest => "nearest",
                        ResizeMode::Linear => "linear",
                    }
                    .to_string(),
                ),
                (
                    "coordinate_transformation_mode",
                    a.coordinate_transformation.clone(),
                ),
                ("nearest_mode", a.nearest_mode.clone()),
                ("scales", fmt_list(&scales)),
                ("output_shape", fmt_list(&a.output_shape)),
            ]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
