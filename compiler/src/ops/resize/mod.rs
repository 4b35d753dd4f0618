//! Resize (opset 10..28) and the deprecated Upsample (opset 7..9) with nearest, linear and
//! cubic modes (antialias, exclude_outside, tf_crop_and_resize with a constant roi, axes,
//! keep_aspect_ratio_policy), resolved to a static output shape.
//!
//! Scales or sizes are constant inputs (or Upsample-7's attribute). Output dims are
//! `floor(input * scale)` for scales; sizes are taken as given and the scale is `size / input`.
//! Resize-10 and Upsample use asymmetric coordinates and the legacy "simple" nearest rounding
//! (floor when upsampling an axis, ceil when downsampling it), as onnxruntime does.
//! The reference evaluation follows the ONNX reference implementation: interpolation is
//! separable (one 1-d pass per axis over [`coords::axis_taps`] weights, edge-clamped),
//! nearest clamps the source index.

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType, checked_numel};
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::util::{expect_arity, fmt_f32, fmt_list, fmt_shape, wrong_family};
use crate::ops::{MAX_OPSET, Op, OpDef};

/// Resize interpolation mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeMode {
    /// Nearest neighbour.
    Nearest,
    /// (Multi-)linear.
    Linear,
    /// Cubic (Keys) with coefficient `cubic_coeff_a`.
    Cubic,
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
    /// Scale per dim (output / input as given, or derived from sizes in f64).
    pub scales: Vec<f64>,
    /// Output shape.
    pub output_shape: Vec<usize>,
    /// Cubic coefficient `A` (`cubic_coeff_a`, -0.75 by default).
    pub cubic_coeff_a: f32,
    /// `exclude_outside`: out-of-range taps get weight 0 (the rest renormalized).
    pub exclude_outside: bool,
    /// `antialias`: linear / cubic filters widen by `1 / scale` when downsampling.
    pub antialias: bool,
    /// Output value of extrapolated coordinates (tf_crop_and_resize).
    pub extrapolation_value: f32,
    /// Region of interest per dim, `[starts..., ends...]` of length `2 * rank`
    /// (tf_crop_and_resize only; empty otherwise).
    pub roi: Vec<f64>,
    /// The roi tensor is f64 (the reference does a float roi's arithmetic in f32).
    pub roi_double: bool,
}

/// Attributes beyond the scales: mode, coordinates and filter options.
#[derive(Clone, Debug, PartialEq)]
struct Opts {
    mode: ResizeMode,
    coord: String,
    nearest: String,
    cubic_coeff_a: f32,
    exclude_outside: bool,
    antialias: bool,
    extrapolation_value: f32,
    /// As given (per `axes` entry when axes are given).
    roi: Option<Vec<f64>>,
    roi_double: bool,
    keep_aspect: String,
}

impl Opts {
    fn legacy(mode: ResizeMode) -> Opts {
        Opts {
            mode,
            coord: "asymmetric".into(),
            nearest: "simple".into(),
            cubic_coeff_a: -0.75,
            exclude_outside: false,
            antialias: false,
            extrapolation_value: 0.0,
            roi: None,
            roi_double: false,
            keep_aspect: "stretch".into(),
        }
    }
}

/// Supported `coordinate_transformation_mode` values.
pub const COORDINATE_MODES: &[&str] = &[
    "tf_crop_and_resize",
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
        "cubic" => Ok(ResizeMode::Cubic),
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
        return resolve(&Opts::legacy(mode), &in_shape, Some(&scales), None, None);
    }
    ctx.expect_inputs(1, 4)?;
    let coord = ctx.attr_string("coordinate_transformation_mode", "half_pixel")?;
    let nearest = ctx.attr_string("nearest_mode", "round_prefer_floor")?;
    if nearest == "simple" {
        return Err(OpError::attr("nearest_mode", "unknown mode 'simple'"));
    }
    let exclude_outside = ctx.attr_int("exclude_outside", 0)? != 0;
    if mode == ResizeMode::Nearest && exclude_outside {
        return Err(OpError::Unsupported(
            "Resize exclude_outside=1 with nearest mode".into(),
        ));
    }
    // roi only matters for tf_crop_and_resize (where it is frozen into a constant).
    let (roi, roi_double) = if coord == "tf_crop_and_resize" {
        let r = take_nonempty(ctx, 1)?.ok_or_else(|| {
            OpError::attr(
                "roi",
                "required by coordinate_transformation_mode 'tf_crop_and_resize'",
            )
        })?;
        (Some(r.to_f64_vec()), r.dtype() == DType::F64)
    } else {
        ctx.ignore_input(1);
        (None, false)
    };
    let mut axes: Option<Vec<usize>> = None;
    let mut antialias = false;
    let mut keep_aspect = "stretch".to_string();
    if ctx.opset >= 18 {
        antialias = ctx.attr_int("antialias", 0)? != 0;
        if antialias && mode == ResizeMode::Nearest {
            return Err(OpError::attr(
                "antialias",
                "not supported with mode 'nearest'",
            ));
        }
        keep_aspect = ctx.attr_string("keep_aspect_ratio_policy", "stretch")?;
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
    let opts = Opts {
        mode,
        coord,
        nearest,
        cubic_coeff_a: ctx.attr_float("cubic_coeff_a", -0.75)?,
        exclude_outside,
        antialias,
        extrapolation_value: ctx.attr_float("extrapolation_value", 0.0)?,
        roi,
        roi_double,
        keep_aspect,
    };
    let scales = take_nonempty(ctx, 2)?;
    let sizes = take_nonempty(ctx, 3)?;
    match (scales, sizes) {
        (Some(s), None) => {
            let s = s.to_f32_vec();
            resolve(&opts, &in_shape, Some(&s), None, axes.as_deref())
        }
        (None, Some(z)) => {
            let z = z.to_i64_vec();
            resolve(&opts, &in_shape, None, Some(&z), axes.as_deref())
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
    if mode == ResizeMode::Cubic {
        return Err(OpError::attr("mode", "Upsample has no mode 'cubic'"));
    }
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
    resolve(&Opts::legacy(mode), &in_shape, Some(&scales), None, None)
}

/// Builds the op from scales or sizes given for `axes` (every axis when `None`).
fn resolve(
    o: &Opts,
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
    let mut out_scales = vec![1.0f64; rank];
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
            out_scales[d] = f64::from(s);
            out_shape[d] = out as usize;
        } else if let Some(z) = sizes {
            let size = usize::try_from(z[k])
                .map_err(|_| OpError::attr("sizes", format!("{} must be >= 0", z[k])))?;
            out_scales[d] = if input == 0 {
                1.0
            } else {
                size as f64 / input as f64
            };
            out_shape[d] = size;
        }
    }
    if sizes.is_some() && o.keep_aspect != "stretch" {
        let picked = axes.iter().map(|&d| out_scales[d]);
        let scale = match o.keep_aspect.as_str() {
            "not_larger" => picked.fold(f64::INFINITY, f64::min),
            "not_smaller" => picked.fold(f64::NEG_INFINITY, f64::max),
            p => {
                return Err(OpError::attr(
                    "keep_aspect_ratio_policy",
                    format!("unknown policy '{p}'"),
                ));
            }
        };
        if !(scale.is_finite() && scale > 0.0) {
            return Err(OpError::attr(
                "sizes",
                format!("keep_aspect_ratio_policy gives scale {scale}"),
            ));
        }
        for &d in axes {
            out_scales[d] = scale;
            // round half up, as the reference does
            let v = (scale * in_shape[d] as f64 + 0.5).floor();
            if v >= usize::MAX as f64 {
                return Err(OpError::Overflow(format!("Resize output dim {v}")));
            }
            out_shape[d] = v as usize;
        }
    }
    // roi: given per axis ([starts, ends] of the axes); expanded to every dim.
    let roi = match &o.roi {
        None => Vec::new(),
        Some(r) => {
            if r.len() != 2 * axes.len() {
                return Err(OpError::attr(
                    "roi",
                    format!("has {} entries for {} axes", r.len(), axes.len()),
                ));
            }
            let mut full = vec![0.0; rank];
            full.extend(std::iter::repeat_n(1.0, rank));
            for (k, &d) in axes.iter().enumerate() {
                full[d] = r[k];
                full[rank + d] = r[axes.len() + k];
            }
            full
        }
    };
    let op = Op::Resize(ResizeAttrs {
        mode: o.mode,
        coordinate_transformation: o.coord.clone(),
        nearest_mode: o.nearest.clone(),
        scales: out_scales,
        output_shape: out_shape,
        cubic_coeff_a: o.cubic_coeff_a,
        exclude_outside: o.exclude_outside,
        antialias: o.antialias,
        extrapolation_value: o.extrapolation_value,
        roi,
        roi_double: o.roi_double,
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
    if a.coordinate_transformation == "tf_crop_and_resize"
        && (a.roi.len() != 2 * in_shape.len() || a.roi.iter().any(|r| !r.is_finite()))
    {
        return Err(OpError::attr(
            "roi",
            format!("needs 2 finite values per dim, has {:?}", a.roi),
        ));
    }
    if !a.cubic_coeff_a.is_finite() {
        return Err(OpError::attr("cubic_coeff_a", "must be finite"));
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
    if !eval::is_gather(a) && !x.dtype.is_float() {
        return Err(OpError::DType {
            input: 0,
            dtype: x.dtype,
            expected: "a float type (linear, cubic or tf_crop_and_resize)".into(),
        });
    }
    check(op, &x.shape)?;
    Ok(vec![TensorType::new(x.dtype, a.output_shape.clone())])
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::Resize(a) => {
            let scales: Vec<String> = a.scales.iter().map(|&s| fmt_f32(s as f32)).collect();
            let mut v = vec![
                (
                    "mode",
                    match a.mode {
                        ResizeMode::Nearest => "nearest",
                        ResizeMode::Linear => "linear",
                        ResizeMode::Cubic => "cubic",
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
            ];
            // Only the non-default options, so plain resizes print as before.
            if a.mode == ResizeMode::Cubic {
                v.push(("cubic_coeff_a", fmt_f32(a.cubic_coeff_a)));
            }
            if a.exclude_outside {
                v.push(("exclude_outside", "1".into()));
            }
            if a.antialias {
                v.push(("antialias", "1".into()));
            }
            if !a.roi.is_empty() {
                let r: Vec<String> = a.roi.iter().map(|&x| fmt_f32(x as f32)).collect();
                v.push(("roi", fmt_list(&r)));
                v.push(("extrapolation_value", fmt_f32(a.extrapolation_value)));
            }
            v
        }
        _ => Vec::new(),
    }
}

mod coords;
mod eval;
#[cfg(test)]
mod tests;

pub(crate) use coords::{AxisTaps, axis_taps};
pub use eval::eval;
pub(crate) use eval::is_gather;
