//! Conv and ConvTranspose (NCHW, any number of spatial dims, groups, dilation, padding).
//!
//! `auto_pad` and ConvTranspose's `output_shape` are resolved into explicit `pads` by the
//! converters, from the input's static spatial dims. The helpers that read and resolve the
//! windowed-op attributes (kernel, strides, dilations, pads, `auto_pad`) are shared with
//! [`crate::ops::pool`].

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType, checked_numel, strides as row_strides};
use crate::ops::ctx::NodeCtx;
use crate::ops::util::{fmt_list, fmt_shape, unravel, wrong_family};
use crate::ops::{MAX_OPSET, MIN_OPSET, Op, OpDef};

/// Conv attributes, resolved: `auto_pad` is already turned into explicit `pads`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvAttrs {
    /// Spatial kernel size.
    pub kernel: Vec<usize>,
    /// Stride per spatial dim.
    pub strides: Vec<usize>,
    /// Dilation per spatial dim.
    pub dilations: Vec<usize>,
    /// `[begin_0.., end_0..]` per spatial dim.
    pub pads: Vec<usize>,
    /// Channel groups.
    pub group: usize,
}

/// ConvTranspose attributes, resolved (`output_shape`/`auto_pad` turned into `pads`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvTransposeAttrs {
    /// Spatial kernel size.
    pub kernel: Vec<usize>,
    /// Stride per spatial dim.
    pub strides: Vec<usize>,
    /// Dilation per spatial dim.
    pub dilations: Vec<usize>,
    /// `[begin_0.., end_0..]` per spatial dim.
    pub pads: Vec<usize>,
    /// Extra size added at the end of each spatial output dim.
    pub output_padding: Vec<usize>,
    /// Channel groups.
    pub group: usize,
}

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    OpDef {
        op_type: "Conv",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_conv,
    },
    OpDef {
        op_type: "ConvTranspose",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_conv_transpose,
    },
];

// ---------------------------------------------------------------------------------------------
// Attribute helpers shared with pool.rs

/// The dtypes Conv, ConvTranspose and the float pools accept.
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F64, DType::F16];

/// Checks that input `input` has one of `allowed` dtypes.
pub(crate) fn check_dtype(input: usize, dtype: DType, allowed: &[DType]) -> Result<(), OpError> {
    if allowed.contains(&dtype) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
    Err(OpError::DType {
        input,
        dtype,
        expected: names.join(", "),
    })
}

/// An INTS attribute with one positive entry per spatial dim; `default` when absent.
pub(crate) fn spatial_ints(
    ctx: &NodeCtx<'_>,
    name: &str,
    n: usize,
    default: usize,
) -> Result<Vec<usize>, OpError> {
    match ctx.attr_ints(name)? {
        None => Ok(vec![default; n]),
        Some(v) => {
            if v.len() != n {
                return Err(OpError::attr(
                    name,
                    format!(
                        "has {} entries, expected one per spatial dim ({n})",
                        v.len()
                    ),
                ));
            }
            v.iter()
                .map(|&x| {
                    usize::try_from(x)
                        .ok()
                        .filter(|&u| u >= 1)
                        .ok_or_else(|| OpError::attr(name, format!("value {x} must be >= 1")))
                })
                .collect()
        }
    }
}

/// A non-negative INTS attribute of `len` entries (pads, output_padding); zeros when absent.
pub(crate) fn nonneg_ints(
    ctx: &NodeCtx<'_>,
    name: &str,
    len: usize,
) -> Result<Vec<usize>, OpError> {
    match ctx.attr_ints(name)? {
        None => Ok(vec![0; len]),
        Some(v) => {
            if v.len() != len {
                return Err(OpError::attr(
                    name,
                    format!("has {} entries, expected {len}", v.len()),
                ));
            }
            v.iter()
                .map(|&x| {
                    usize::try_from(x)
                        .map_err(|_| OpError::attr(name, format!("value {x} must be >= 0")))
                })
                .collect()
        }
    }
}

/// ONNX `auto_pad`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AutoPad {
    /// Explicit `pads`.
    NotSet,
    /// No padding.
    Valid,
    /// Output `ceil(in / stride)`, the larger half of the padding at the end.
    SameUpper,
    /// Output `ceil(in / stride)`, the larger half of the padding at the beginning.
    SameLower,
}

/// Reads `auto_pad`.
pub(crate) fn read_auto_pad(ctx: &NodeCtx<'_>) -> Result<AutoPad, OpError> {
    match ctx.attr_string("auto_pad", "NOTSET")?.as_str() {
        "NOTSET" | "" => Ok(AutoPad::NotSet),
        "VALID" => Ok(AutoPad::Valid),
        "SAME_UPPER" => Ok(AutoPad::SameUpper),
        "SAME_LOWER" => Ok(AutoPad::SameLower),
        other => Err(OpError::attr(
            "auto_pad",
            format!("'{other}' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER"),
        )),
    }
}

/// Effective window extent `(k - 1) * d + 1`.
pub(crate) fn effective(kernel: usize, dilation: usize) -> Result<usize, OpError> {
    kernel
        .checked_sub(1)
        .and_then(|k| k.checked_mul(dilation))
        .and_then(|k| k.checked_add(1))
        .ok_or_else(|| OpError::Overflow(format!("kernel {kernel} with dilation {dilation}")))
}

/// Explicit `[begin.., end..]` pads for a windowed op (Conv, pools) from `auto_pad`.
/// `input` is the input's spatial dims.
pub(crate) fn resolve_pads(
    ctx: &NodeCtx<'_>,
    auto_pad: AutoPad,
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
) -> Result<Vec<usize>, OpError> {
    let n = kernel.len();
    match auto_pad {
        AutoPad::NotSet => nonneg_ints(ctx, "pads", 2 * n),
        AutoPad::Valid => Ok(vec![0; 2 * n]),
        AutoPad::SameUpper | AutoPad::SameLower => {
            let mut pads = vec![0; 2 * n];
            for i in 0..n {
                let (x, s) = (input[i], strides[i]);
                let eff = effective(kernel[i], dilations[i])?;
                let out = x.div_ceil(s);
                // total = (out - 1) * s + eff - x, clamped at 0.
                let need = out
                    .saturating_sub(1)
                    .checked_mul(s)
                    .and_then(|v| v.checked_add(eff))
                    .ok_or_else(|| OpError::Overflow("auto_pad padding".into()))?;
                let total = need.saturating_sub(x);
                let (small, big) = (total / 2, total - total / 2);
                (pads[i], pads[n + i]) = if auto_pad == AutoPad::SameUpper {
                    (small, big)
                } else {
                    (big, small)
                };
            }
            Ok(pads)
        }
    }
}

/// Checks that the resolved attribute lists of a windowed op agree with `n` spatial dims and
/// hold valid values (the op may have been built directly, not by a converter).
pub(crate) fn check_window_attrs(
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[usize],
) -> Result<(), OpError> {
    let n = kernel.len();
    if n == 0 {
        return Err(OpError::attr(
            "kernel_shape",
            "needs at least one spatial dim",
        ));
    }
    for (name, v, len) in [
        ("kernel_shape", kernel, n),
        ("strides", strides, n),
        ("dilations", dilations, n),
        ("pads", pads, 2 * n),
    ] {
        if v.len() != len {
            return Err(OpError::attr(
                name,
                format!("has {} entries, expected {len}", v.len()),
            ));
        }
        if name != "pads" && v.contains(&0) {
            return Err(OpError::attr(name, "entries must be >= 1"));
        }
    }
    Ok(())
}

/// Checks an output shape's element count.
pub(crate) fn checked_out(shape: Vec<usize>) -> Result<Vec<usize>, OpError> {
    checked_numel(&shape)
        .map(|_| shape.clone())
        .ok_or_else(|| OpError::Overflow(format!("output shape {}", fmt_shape(&shape))))
}

// ---------------------------------------------------------------------------------------------
// Converters

fn read_kernel(ctx: &NodeCtx<'_>, w: &[usize], n: usize) -> Result<Vec<usize>, OpError> {
    let from_w = w.get(2..).unwrap_or_default().to_vec();
    match ctx.attr_ints("kernel_shape")? {
        None => Ok(from_w),
        Some(k) => {
            let k: Vec<usize> = k.iter().map(|&v| usize::try_from(v).unwrap_or(0)).collect();
            if k.len() != n || k != from_w {
                return Err(OpError::attr(
                    "kernel_shape",
                    format!(
                        "{} disagrees with the weight's spatial dims {}",
                        fmt_list(&k),
                        fmt_shape(&from_w)
                    ),
                ));
            }
            Ok(k)
        }
    }
}

/// X and W types of a Conv/ConvTranspose node, checked for equal rank >= 3.
fn conv_inputs(ctx: &NodeCtx<'_>) -> Result<(Vec<usize>, Vec<usize>), OpError> {
    ctx.expect_inputs(2, 3)?;
    let x = ctx.input_type(0)?.shape.clone();
    let w = ctx.input_type(1)?.shape.clone();
    if x.len() < 3 || w.len() != x.len() {
        return Err(OpError::shape(
            "X must be [N,C,spatial...] with at least one spatial dim and W of the same rank",
            &[&x, &w],
        ));
    }
    Ok((x, w))
}

fn read_group(ctx: &NodeCtx<'_>) -> Result<usize, OpError> {
    let g = ctx.attr_int("group", 1)?;
    usize::try_from(g)
        .ok()
        .filter(|&g| g >= 1)
        .ok_or_else(|| OpError::attr("group", format!("{g} must be >= 1")))
}

fn convert_conv(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let (x, w) = conv_inputs(ctx)?;
    let n = x.len() - 2;
    let kernel = read_kernel(ctx, &w, n)?;
    let strides = spatial_ints(ctx, "strides", n, 1)?;
    let dilations = spatial_ints(ctx, "dilations", n, 1)?;
    let auto_pad = read_auto_pad(ctx)?;
    let pads = resolve_pads(ctx, auto_pad, &x[2..], &kernel, &strides, &dilations)?;
    Ok(Op::Conv(ConvAttrs {
        kernel,
        strides,
        dilations,
        pads,
        group: read_group(ctx)?,
    }))
}

fn convert_conv_transpose(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let (x, w) = conv_inputs(ctx)?;
    let n = x.len() - 2;
    let kernel = read_kernel(ctx, &w, n)?;
    let strides = spatial_ints(ctx, "strides", n, 1)?;
    let dilations = spatial_ints(ctx, "dilations", n, 1)?;
    let mut output_padding = nonneg_ints(ctx, "output_padding", n)?;
    let auto_pad = read_auto_pad(ctx)?;
    // The target output size, when given or implied by SAME_*.
    let target: Option<Vec<usize>> = match ctx.attr_ints("output_shape")? {
        Some(os) => {
            // Spatial dims only, though some exporters give [N,C,spatial...].
            let sp = if os.len() == n + 2 { &os[2..] } else { &os[..] };
            if sp.len() != n {
                return Err(OpError::attr(
                    "output_shape",
                    format!("has {} entries, expected {n} spatial dims", os.len()),
                ));
            }
            let v = sp
                .iter()
                .map(|&d| usize::try_from(d).ok().filter(|&d| d >= 1))
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| OpError::attr("output_shape", "entries must be >= 1"))?;
            Some(v)
        }
        None => match auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => Some(
                x[2..]
                    .iter()
                    .zip(&strides)
                    .map(|(&d, &s)| d.checked_mul(s))
                    .collect::<Option<Vec<usize>>>()
                    .ok_or_else(|| OpError::Overflow("auto_pad output size".into()))?,
            ),
            _ => None,
        },
    };
    let pads = match (target, auto_pad) {
        (None, AutoPad::Valid) => vec![0; 2 * n],
        (None, _) => nonneg_ints(ctx, "pads", 2 * n)?,
        (Some(target), _) => {
            let mut pads = vec![0; 2 * n];
            for i in 0..n {
                let full = transpose_full(x[2 + i], strides[i], dilations[i], kernel[i])?
                    .checked_add(output_padding[i])
                    .ok_or_else(|| OpError::Overflow("output size".into()))?;
                if full >= target[i] {
                    let total = full - target[i];
                    let (small, big) = (total / 2, total - total / 2);
                    // The spec's formula: SAME_UPPER puts the smaller half first, every other
                    // mode the larger half.
                    (pads[i], pads[n + i]) = if auto_pad == AutoPad::SameUpper {
                        (small, big)
                    } else {
                        (big, small)
                    };
                } else {
                    // A target larger than the full output: extend at the end (bias only).
                    output_padding[i] += target[i] - full;
                }
            }
            pads
        }
    };
    Ok(Op::ConvTranspose(ConvTransposeAttrs {
        kernel,
        strides,
        dilations,
        pads,
        output_padding,
        group: read_group(ctx)?,
    }))
}

/// Unpadded ConvTranspose output size `s * (x - 1) + (k - 1) * d + 1`.
fn transpose_full(x: usize, s: usize, d: usize, k: usize) -> Result<usize, OpError> {
    let eff = effective(k, d)?;
    x.checked_sub(1)
        .ok_or_else(|| OpError::Unsupported("ConvTranspose over an empty spatial dim".into()))?
        .checked_mul(s)
        .and_then(|v| v.checked_add(eff))
        .ok_or_else(|| OpError::Overflow("ConvTranspose output size".into()))
}

// ---------------------------------------------------------------------------------------------
// Inference

/// Printed op name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::Conv(_) => "Conv",
        Op::ConvTranspose(_) => "ConvTranspose",
        _ => "?",
    }
}

/// Common checks of X, W, B: dtypes, ranks, group divisibility. Returns `(X, W)` shapes.
fn check_conv_inputs<'a>(
    inputs: &'a [TensorType],
    kernel: &[usize],
    group: usize,
) -> Result<(&'a [usize], &'a [usize]), OpError> {
    if !(2..=3).contains(&inputs.len()) {
        return Err(OpError::Arity {
            expected: "2 to 3".into(),
            actual: inputs.len(),
        });
    }
    let dt = inputs[0].dtype;
    check_dtype(0, dt, FLOATS)?;
    for (i, t) in inputs.iter().enumerate().skip(1) {
        check_dtype(i, t.dtype, &[dt])?;
    }
    if group == 0 {
        return Err(OpError::attr("group", "must be >= 1"));
    }
    let (x, w) = (&inputs[0].shape[..], &inputs[1].shape[..]);
    let n = kernel.len();
    if x.len() != n + 2 || w.len() != n + 2 {
        return Err(OpError::shape(
            format!("X and W must have rank {} for a {n}-d kernel", n + 2),
            &[x, w],
        ));
    }
    if &w[2..] != kernel {
        return Err(OpError::shape(
            format!(
                "W's spatial dims differ from kernel_shape {}",
                fmt_list(kernel)
            ),
            &[x, w],
        ));
    }
    Ok((x, w))
}

fn check_bias(inputs: &[TensorType], m: usize) -> Result<(), OpError> {
    if let Some(b) = inputs.get(2)
        && b.shape != [m]
    {
        return Err(OpError::shape(
            format!("bias B must be [{m}] (one per output channel)"),
            &[&inputs[0].shape, &inputs[1].shape, &b.shape],
        ));
    }
    Ok(())
}

fn infer_conv(a: &ConvAttrs, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    check_window_attrs(&a.kernel, &a.strides, &a.dilations, &a.pads)?;
    let (x, w) = check_conv_inputs(inputs, &a.kernel, a.group)?;
    let n = a.kernel.len();
    let (c, m) = (x[1], w[0]);
    if m % a.group != 0 || w[1].checked_mul(a.group) != Some(c) {
        return Err(OpError::shape(
            format!(
                "X has {c} channels and W is [M={m}, C/group={}, ...] with group {}: need C = \
                 W[1] * group and M divisible by group",
                w[1], a.group
            ),
            &[x, w],
        ));
    }
    check_bias(inputs, m)?;
    let mut out = vec![x[0], m];
    for i in 0..n {
        let eff = effective(a.kernel[i], a.dilations[i])?;
        let padded = x[2 + i]
            .checked_add(a.pads[i])
            .and_then(|v| v.checked_add(a.pads[n + i]))
            .ok_or_else(|| OpError::Overflow("padded input size".into()))?;
        if padded < eff {
            return Err(OpError::shape(
                format!(
                    "spatial dim {i}: padded size {padded} is smaller than the dilated kernel {eff}"
                ),
                &[x, w],
            ));
        }
        out.push((padded - eff) / a.strides[i] + 1);
    }
    Ok(vec![TensorType::new(inputs[0].dtype, checked_out(out)?)])
}

fn infer_conv_transpose(
    a: &ConvTransposeAttrs,
    inputs: &[TensorType],
) -> Result<Vec<TensorType>, OpError> {
    check_window_attrs(&a.kernel, &a.strides, &a.dilations, &a.pads)?;
    let n = a.kernel.len();
    if a.output_padding.len() != n {
        return Err(OpError::attr(
            "output_padding",
            format!("has {} entries, expected {n}", a.output_padding.len()),
        ));
    }
    let (x, w) = check_conv_inputs(inputs, &a.kernel, a.group)?;
    let c = x[1];
    if w[0] != c || c % a.group != 0 {
        return Err(OpError::shape(
            format!(
                "X has {c} channels but W is [C={}, M/group={}, ...] with group {}: need \
                 W[0] = C, divisible by group",
                w[0], w[1], a.group
            ),
            &[x, w],
        ));
    }
    let m = w[1]
        .checked_mul(a.group)
        .ok_or_else(|| OpError::Overflow("output channels".into()))?;
    check_bias(inputs, m)?;
    let mut out = vec![x[0], m];
    for i in 0..n {
        let full = transpose_full(x[2 + i], a.strides[i], a.dilations[i], a.kernel[i])?
            .checked_add(a.output_padding[i])
            .ok_or_else(|| OpError::Overflow("output size".into()))?;
        let cut = a.pads[i]
            .checked_add(a.pads[n + i])
            .ok_or_else(|| OpError::Overflow("pads".into()))?;
        if cut >= full {
            return Err(OpError::shape(
                format!("spatial dim {i}: pads {cut} remove the whole output of size {full}"),
                &[x, w],
            ));
        }
        out.push(full - cut);
    }
    Ok(vec![TensorType::new(inputs[0].dtype, checked_out(out)?)])
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    match op {
        Op::Conv(a) => infer_conv(a, inputs),
        Op::ConvTranspose(a) => infer_conv_transpose(a, inputs),
        _ => Err(wrong_family(op, "conv")),
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation

/// The element offset within one spatial plane of `dims` reached from window origin `origin`
/// (may be negative) by kernel tap `k` with dilation `dil`; `None` when outside the plane.
pub(crate) fn tap_offset(
    origin: &[i128],
    k: &[usize],
    dil: &[usize],
    dims: &[usize],
    dim_strides: &[usize],
) -> Option<usize> {
    let mut off = 0usize;
    for i in 0..dims.len() {
        let p = origin[i] + (k[i] as i128) * (dil[i] as i128);
        if p < 0 || p >= dims[i] as i128 {
            return None;
        }
        off += p as usize * dim_strides[i];
    }
    Some(off)
}

fn eval_conv(a: &ConvAttrs, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out_ty = infer_conv(a, &types)?.remove(0);
    let (xs, ws, os) = (inputs[0].shape(), inputs[1].shape(), &out_ty.shape);
    let n = a.kernel.len();
    let (batch, c, m, cg) = (xs[0], xs[1], ws[0], ws[1]);
    let mg = m / a.group;
    let (in_sp, out_sp) = (&xs[2..], &os[2..]);
    let in_plane: usize = in_sp.iter().product();
    let out_plane: usize = out_sp.iter().product();
    let k_plane: usize = a.kernel.iter().product();
    let in_strides = row_strides(in_sp);
    let taps: Vec<Vec<usize>> = (0..k_plane).map(|f| unravel(f, &a.kernel)).collect();
    let xv = inputs[0].to_f64_vec();
    let wv = inputs[1].to_f64_vec();
    let bv = inputs.get(2).map(|b| b.to_f64_vec());
    let mut out = Vec::with_capacity(batch * m * out_plane);
    for b in 0..batch {
        for mo in 0..m {
            let g = mo / mg;
            for o in 0..out_plane {
                let oi = unravel(o, out_sp);
                let origin: Vec<i128> = (0..n)
                    .map(|i| (oi[i] * a.strides[i]) as i128 - a.pads[i] as i128)
                    .collect();
                let mut acc = bv.as_ref().map_or(0.0, |bv| bv[mo]);
                for ci in 0..cg {
                    let x_base = (b * c + g * cg + ci) * in_plane;
                    let w_base = (mo * cg + ci) * k_plane;
                    for (kf, k) in taps.iter().enumerate() {
                        if let Some(off) = tap_offset(&origin, k, &a.dilations, in_sp, &in_strides)
                        {
                            acc += xv[x_base + off] * wv[w_base + kf];
                        }
                    }
                }
                out.push(acc);
            }
        }
    }
    Ok(vec![Tensor::from_f64(out_ty.dtype, out_ty.shape, &out)])
}

fn eval_conv_transpose(a: &ConvTransposeAttrs, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out_ty = infer_conv_transpose(a, &types)?.remove(0);
    let (xs, ws, os) = (inputs[0].shape(), inputs[1].shape(), &out_ty.shape);
    let n = a.kernel.len();
    let (batch, c, mg) = (xs[0], xs[1], ws[1]);
    let m = os[1];
    let cg = c / a.group;
    let (in_sp, out_sp) = (&xs[2..], &os[2..]);
    let in_plane: usize = in_sp.iter().product();
    let out_plane: usize = out_sp.iter().product();
    let k_plane: usize = a.kernel.iter().product();
    let out_strides = row_strides(out_sp);
    let taps: Vec<Vec<usize>> = (0..k_plane).map(|f| unravel(f, &a.kernel)).collect();
    let xv = inputs[0].to_f64_vec();
    let wv = inputs[1].to_f64_vec();
    let bv = inputs.get(2).map(|b| b.to_f64_vec());
    let mut out = vec![0.0; batch * m * out_plane];
    for b in 0..batch {
        for mo in 0..m {
            let base = (b * m + mo) * out_plane;
            let bias = bv.as_ref().map_or(0.0, |bv| bv[mo]);
            out[base..base + out_plane].fill(bias);
        }
        for ci in 0..c {
            let g = ci / cg;
            for i in 0..in_plane {
                let ii = unravel(i, in_sp);
                // Input position i scatters to output origin i * stride - pad_begin.
                let origin: Vec<i128> = (0..n)
                    .map(|d| (ii[d] * a.strides[d]) as i128 - a.pads[d] as i128)
                    .collect();
                let xval = xv[(b * c + ci) * in_plane + i];
                for ml in 0..mg {
                    let mo = g * mg + ml;
                    let w_base = (ci * mg + ml) * k_plane;
                    let o_base = (b * m + mo) * out_plane;
                    for (kf, k) in taps.iter().enumerate() {
                        if let Some(off) =
                            tap_offset(&origin, k, &a.dilations, out_sp, &out_strides)
                        {
                            out[o_base + off] += xval * wv[w_base + kf];
                        }
                    }
                }
            }
        }
    }
    Ok(vec![Tensor::from_f64(out_ty.dtype, out_ty.shape, &out)])
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    match op {
        Op::Conv(a) => eval_conv(a, inputs),
        Op::ConvTranspose(a) => eval_conv_transpose(a, inputs),
        _ => Err(wrong_family(op, "conv")),
    }
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::Conv(a) => vec![
            ("kernel_shape", fmt_list(&a.kernel)),
            ("strides", fmt_list(&a.strides)),
            ("dilations", fmt_list(&a.dilations)),
            ("pads", fmt_list(&a.pads)),
            ("group", a.group.to_string()),
        ],
        Op::ConvTranspose(a) => vec![
            ("kernel_shape", fmt_list(&a.kernel)),
            ("strides", fmt_list(&a.strides)),
            ("dilations", fmt_list(&a.dilations)),
            ("pads", fmt_list(&a.pads)),
            ("output_padding", fmt_list(&a.output_padding)),
            ("group", a.group.to_string()),
        ],
        _ => Vec::new(),
    }
}

/// Helpers for the op family tests: build a node with attributes and run its converter.
#[cfg(test)]
pub(crate) mod test_util {
    use arenac_proto::{AttributeProto, NodeProto, attribute_proto::AttributeType};

    use crate::error::OpError;
    use crate::ir::types::{DType, TensorType};
    use crate::ops::Op;
    use crate::ops::ctx::{CtxInput, NodeCtx};

    /// An attribute value.
    pub(crate) enum A {
        I(i64),
        F(f32),
        S(&'static str),
        Is(Vec<i64>),
    }

    /// Runs the converter of `op_type` at `opset` on a node with `attrs`, data inputs of
    /// `inputs` types and `outputs` declared outputs.
    pub(crate) fn convert(
        op_type: &str,
        opset: i64,
        attrs: Vec<(&str, A)>,
        inputs: &[TensorType],
        outputs: usize,
    ) -> Result<Op, OpError> {
        let attribute = attrs
            .into_iter()
            .map(|(name, v)| {
                let mut a = AttributeProto {
                    name: Some(name.to_string()),
                    ..Default::default()
                };
                let kind = match v {
                    A::I(i) => {
                        a.i = Some(i);
                        AttributeType::Int
                    }
                    A::F(f) => {
                        a.f = Some(f);
                        AttributeType::Float
                    }
                    A::S(s) => {
                        a.s = Some(s.as_bytes().to_vec());
                        AttributeType::String
                    }
                    A::Is(v) => {
                        a.ints = v;
                        AttributeType::Ints
                    }
                };
                a.r#type = Some(kind as i32);
                a
            })
            .collect();
        let node = NodeProto {
            op_type: Some(op_type.to_string()),
            input: (0..inputs.len()).map(|i| format!("in{i}")).collect(),
            output: (0..outputs).map(|i| format!("out{i}")).collect(),
            attribute,
            ..Default::default()
        };
        let ctx_inputs = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| CtxInput {
                name: format!("in{i}"),
                ty: Some(t.clone()),
                value: None,
            })
            .collect();
        let mut ctx = NodeCtx::new(&node, opset, ctx_inputs);
        let def = crate::ops::lookup(op_type, opset).expect("op registered");
        (def.convert)(&mut ctx)
    }

    /// An f32 type.
    pub(crate) fn f32t(shape: &[usize]) -> TensorType {
        TensorType::new(DType::F32, shape.to_vec())
    }

    /// `0, 1, 2...` as f64.
    pub(crate) fn iota(n: usize) -> Vec<f64> {
        (0..n).map(|i| i as f64).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::{A, convert, f32t, iota};
    use super::*;

    fn t(shape: &[usize], v: &[f64]) -> Tensor {
        Tensor::from_f64(DType::F32, shape.to_vec(), v)
    }

    fn run(op: &Op, inputs: &[&Tensor]) -> (Vec<usize>, Vec<f64>) {
        let types: Vec<TensorType> = inputs.iter().map(|x| x.ty()).collect();
        let ty = op.infer(&types).unwrap().remove(0);
        let y = op.eval(inputs).unwrap().remove(0);
        assert_eq!(y.ty(), ty);
        (y.shape().to_vec(), y.to_f64_vec())
    }

    fn conv(kernel: &[usize], strides: &[usize], dil: &[usize], pads: &[usize], g: usize) -> Op {
        Op::Conv(ConvAttrs {
            kernel: kernel.to_vec(),
            strides: strides.to_vec(),
            dilations: dil.to_vec(),
            pads: pads.to_vec(),
            group: g,
        })
    }

    #[test]
    fn conv_3x3_pads_and_stride() {
        // ONNX spec example: 5x5 input 0..24, all-ones 3x3 kernel.
        let x = t(&[1, 1, 5, 5], &iota(25));
        let w = t(&[1, 1, 3, 3], &[1.0; 9]);
        let op = convert(
            "Conv",
            11,
            vec![
                ("pads", A::Is(vec![1, 1, 1, 1])),
                ("strides", A::Is(vec![2, 2])),
            ],
            &[x.ty(), w.ty()],
            1,
        )
        .unwrap();
        assert_eq!(op, conv(&[3, 3], &[2, 2], &[1, 1], &[1, 1, 1, 1], 1));
        let (shape, y) = run(&op, &[&x, &w]);
        assert_eq!(shape, vec![1, 1, 3, 3]);
        assert_eq!(y, vec![12., 27., 24., 63., 108., 81., 72., 117., 84.]);
        // No padding, stride 1.
        let op = conv(&[3, 3], &[1, 1], &[1, 1], &[0; 4], 1);
        let (shape, y) = run(&op, &[&x, &w]);
        assert_eq!(shape, vec![1, 1, 3, 3]);
        assert_eq!(y, vec![54., 63., 72., 99., 108., 117., 144., 153., 162.]);
    }

    #[test]
    fn conv_groups_and_depthwise() {
        // Depthwise: 2 channels, one 1x1 filter each, with bias.
        let x = t(&[1, 2, 2, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
        let w = t(&[2, 1, 1, 1], &[2., 3.]);
        let b = t(&[2], &[1., -1.]);
        let op = conv(&[1, 1], &[1, 1], &[1, 1], &[0; 4], 2);
        let (shape, y) = run(&op, &[&x, &w, &b]);
        assert_eq!(shape, vec![1, 2, 2, 2]);
        assert_eq!(y, vec![3., 5., 7., 9., 14., 17., 20., 23.]);
        // Group 2 over 4 channels: output 0 reads channels 0-1, output 1 channels 2-3.
        let x = t(&[1, 4, 1], &[1., 2., 3., 4.]);
        let w = t(&[2, 2, 1], &[1., 1., 1., -1.]);
        let op = conv(&[1], &[1], &[1], &[0, 0], 2);
        assert_eq!(run(&op, &[&x, &w]), (vec![1, 2, 1], vec![3., -1.]));
    }

    #[test]
    fn conv_dilated() {
        let x = t(&[1, 1, 5], &[1., 2., 3., 4., 5.]);
        let w = t(&[1, 1, 2], &[1., 10.]);
        let op = conv(&[2], &[1], &[2], &[0, 0], 1);
        assert_eq!(run(&op, &[&x, &w]), (vec![1, 1, 3], vec![31., 42., 53.]));
    }

    #[test]
    fn conv_auto_pad() {
        let x = t(&[1, 1, 5], &[1., 2., 3., 4., 5.]);
        let w = t(&[1, 1, 2], &[1., 1.]);
        let same = |mode: &'static str| {
            convert(
                "Conv",
                13,
                vec![("auto_pad", A::S(mode)), ("strides", A::Is(vec![2]))],
                &[x.ty(), w.ty()],
                1,
            )
            .unwrap()
        };
        // out = ceil(5 / 2) = 3, total padding (3 - 1) * 2 + 2 - 5 = 1.
        let upper = same("SAME_UPPER");
        assert_eq!(upper, conv(&[2], &[2], &[1], &[0, 1], 1));
        assert_eq!(run(&upper, &[&x, &w]), (vec![1, 1, 3], vec![3., 7., 5.]));
        let lower = same("SAME_LOWER");
        assert_eq!(lower, conv(&[2], &[2], &[1], &[1, 0], 1));
        assert_eq!(run(&lower, &[&x, &w]), (vec![1, 1, 3], vec![1., 5., 9.]));
        assert_eq!(same("VALID"), conv(&[2], &[2], &[1], &[0, 0], 1));
        // 4x4 with a 3x3 kernel, stride 1: one pixel each side.
        let op = convert(
            "Conv",
            7,
            vec![("auto_pad", A::S("SAME_UPPER"))],
            &[f32t(&[1, 1, 4, 4]), f32t(&[1, 1, 3, 3])],
            1,
        )
        .unwrap();
        assert_eq!(op, conv(&[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1], 1));
        let bad = convert(
            "Conv",
            7,
            vec![("auto_pad", A::S("SAME"))],
            &[f32t(&[1, 1, 4, 4]), f32t(&[1, 1, 3, 3])],
            1,
        );
        assert!(matches!(bad, Err(OpError::InvalidAttribute { .. })));
    }

    #[test]
    fn conv_errors() {
        let op = conv(&[3, 3], &[1, 1], &[1, 1], &[0; 4], 1);
        let err = op
            .infer(&[f32t(&[1, 3, 5, 5]), f32t(&[4, 2, 3, 3])])
            .unwrap_err();
        match err {
            OpError::ShapeMismatch { shapes, .. } => {
                assert_eq!(shapes, vec![vec![1, 3, 5, 5], vec![4, 2, 3, 3]]);
            }
            e => panic!("{e:?}"),
        }
        // Group 3 needs M divisible by 3.
        let g3 = conv(&[3, 3], &[1, 1], &[1, 1], &[0; 4], 3);
        assert!(matches!(
            g3.infer(&[f32t(&[1, 6, 5, 5]), f32t(&[4, 2, 3, 3])]),
            Err(OpError::ShapeMismatch { .. })
        ));
        assert!(
            g3.infer(&[f32t(&[1, 6, 5, 5]), f32t(&[3, 2, 3, 3])])
                .is_ok()
        );
        // Kernel larger than the input.
        assert!(matches!(
            op.infer(&[f32t(&[1, 2, 2, 2]), f32t(&[1, 2, 3, 3])]),
            Err(OpError::ShapeMismatch { .. })
        ));
        // Wrong bias length.
        assert!(matches!(
            op.infer(&[f32t(&[1, 2, 5, 5]), f32t(&[4, 2, 3, 3]), f32t(&[3])]),
            Err(OpError::ShapeMismatch { .. })
        ));
        // Integer input.
        let i = TensorType::new(DType::I32, vec![1, 2, 5, 5]);
        assert!(matches!(
            op.infer(&[i, f32t(&[4, 2, 3, 3])]),
            Err(OpError::DType { input: 0, .. })
        ));
        // Rank-2 X at conversion; kernel_shape disagreeing with W.
        assert!(convert("Conv", 11, vec![], &[f32t(&[1, 3]), f32t(&[1, 3])], 1).is_err());
        let k = convert(
            "Conv",
            11,
            vec![("kernel_shape", A::Is(vec![2, 2]))],
            &[f32t(&[1, 1, 5, 5]), f32t(&[1, 1, 3, 3])],
            1,
        );
        assert!(matches!(k, Err(OpError::InvalidAttribute { .. })));
    }

    #[test]
    fn conv_transpose_spec_example() {
        let x = t(&[1, 1, 3, 3], &iota(9));
        let w = t(&[1, 2, 3, 3], &[1.0; 18]);
        let op = convert("ConvTranspose", 11, vec![], &[x.ty(), w.ty()], 1).unwrap();
        let (shape, y) = run(&op, &[&x, &w]);
        assert_eq!(shape, vec![1, 2, 5, 5]);
        let plane = [
            0., 1., 3., 3., 2., 3., 8., 15., 12., 7., 9., 21., 36., 27., 15., 9., 20., 33., 24.,
            13., 6., 13., 21., 15., 8.,
        ];
        assert_eq!(&y[..25], &plane);
        assert_eq!(&y[25..], &plane);
        // Spec example with strides [3,2] and pads [1,2,1,2].
        let op = convert(
            "ConvTranspose",
            11,
            vec![
                ("strides", A::Is(vec![3, 2])),
                ("pads", A::Is(vec![1, 2, 1, 2])),
            ],
            &[x.ty(), w.ty()],
            1,
        )
        .unwrap();
        let (shape, y) = run(&op, &[&x, &w]);
        assert_eq!(shape, vec![1, 2, 7, 3]);
        let rows = [[1., 1., 3.], [7., 4., 9.], [13., 7., 15.]];
        let expect: Vec<f64> = [0, 0, 1, 1, 1, 2, 2]
            .iter()
            .flat_map(|&r| rows[r])
            .collect();
        assert_eq!(&y[..21], &expect[..]);
        assert_eq!(&y[21..], &expect[..]);
    }

    #[test]
    fn conv_transpose_output_shape_and_bias() {
        let x = t(&[1, 1, 3], &[1., 2., 3.]);
        let w = t(&[1, 1, 3], &[1., 1., 1.]);
        let b = t(&[1], &[10.]);
        let ct = |attrs: Vec<(&str, A)>| {
            convert("ConvTranspose", 17, attrs, &[x.ty(), w.ty(), b.ty()], 1).unwrap()
        };
        // Full output [1,3,6,5,3]; output_shape 3 crops one each side.
        let op = ct(vec![("output_shape", A::Is(vec![3]))]);
        let Op::ConvTranspose(a) = &op else { panic!() };
        assert_eq!(
            (a.pads.clone(), a.output_padding.clone()),
            (vec![1, 1], vec![0])
        );
        assert_eq!(
            run(&op, &[&x, &w, &b]),
            (vec![1, 1, 3], vec![13., 16., 15.])
        );
        // Odd total padding: the larger half first except with SAME_UPPER.
        let op = ct(vec![("output_shape", A::Is(vec![1, 1, 4]))]);
        assert_eq!(op.attrs()[3].1, "[1,0]");
        let op = ct(vec![
            ("output_shape", A::Is(vec![4])),
            ("auto_pad", A::S("SAME_UPPER")),
        ]);
        assert_eq!(op.attrs()[3].1, "[0,1]");
        // A target larger than the full output extends it at the end with the bias.
        let op = ct(vec![("output_shape", A::Is(vec![6]))]);
        assert_eq!(
            run(&op, &[&x, &w, &b]),
            (vec![1, 1, 6], vec![11., 13., 16., 15., 13., 10.])
        );
        // SAME_UPPER without output_shape: output = in * stride = 6, full = 2 * 2 + 3 = 7.
        let op = ct(vec![
            ("auto_pad", A::S("SAME_UPPER")),
            ("strides", A::Is(vec![2])),
        ]);
        assert_eq!(op.attrs()[3].1, "[0,1]");
        assert_eq!(
            op.infer(&[x.ty(), w.ty(), b.ty()]).unwrap()[0].shape,
            vec![1, 1, 6]
        );
        // output_padding adds at the end.
        let op = ct(vec![
            ("output_padding", A::Is(vec![1])),
            ("strides", A::Is(vec![2])),
        ]);
        assert_eq!(
            op.infer(&[x.ty(), w.ty(), b.ty()]).unwrap()[0].shape,
            vec![1, 1, 8]
        );
    }

    #[test]
    fn conv_transpose_groups_and_errors() {
        // Two groups, each one input channel to one output channel.
        let x = t(&[1, 2, 2], &[1., 2., 3., 4.]);
        let w = t(&[2, 1, 1], &[10., 100.]);
        let op = Op::ConvTranspose(ConvTransposeAttrs {
            kernel: vec![1],
            strides: vec![1],
            dilations: vec![1],
            pads: vec![0, 0],
            output_padding: vec![0],
            group: 2,
        });
        assert_eq!(
            run(&op, &[&x, &w]),
            (vec![1, 2, 2], vec![10., 20., 300., 400.])
        );
        assert_eq!(name(&op), "ConvTranspose");
        // W[0] must equal C.
        let err = op.infer(&[f32t(&[1, 2, 2]), f32t(&[3, 1, 1])]).unwrap_err();
        assert!(matches!(err, OpError::ShapeMismatch { ref shapes, .. }
            if shapes == &vec![vec![1, 2, 2], vec![3, 1, 1]]));
        // Pads removing the whole output.
        let op = convert(
            "ConvTranspose",
            11,
            vec![("pads", A::Is(vec![1, 1]))],
            &[f32t(&[1, 1, 1]), f32t(&[1, 1, 2])],
            1,
        )
        .unwrap();
        assert!(op.infer(&[f32t(&[1, 1, 1]), f32t(&[1, 1, 2])]).is_err());
    }

    #[test]
    fn conv_attrs_and_f16() {
        let op = conv(&[3, 3], &[2, 2], &[1, 1], &[1, 1, 1, 1], 1);
        assert_eq!(name(&op), "Conv");
        assert_eq!(
            attrs(&op),
            vec![
                ("kernel_shape", "[3,3]".to_string()),
                ("strides", "[2,2]".to_string()),
                ("dilations", "[1,1]".to_string()),
                ("pads", "[1,1,1,1]".to_string()),
                ("group", "1".to_string()),
            ]
        );
        let x = Tensor::from_f64(DType::F16, vec![1, 1, 2], &[1.5, 2.0]);
        let w = Tensor::from_f64(DType::F16, vec![1, 1, 1], &[2.0]);
        let op = conv(&[1], &[1], &[1], &[0, 0], 1);
        let y = op.eval(&[&x, &w]).unwrap().remove(0);
        assert_eq!(y.dtype(), DType::F16);
        assert_eq!(y.to_f64_vec(), vec![3.0, 4.0]);
    }
}
