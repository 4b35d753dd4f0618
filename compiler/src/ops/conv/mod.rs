//! Conv and ConvTranspose (NCHW, any number of spatial dims, groups, dilation, padding).
//!
//! `auto_pad` and ConvTranspose's `output_shape` are resolved into explicit `pads` by the
//! converters, from the input's static spatial dims. The helpers that read and resolve the
//! windowed-op attributes (kernel, strides, dilations, pads, `auto_pad`) are shared with
//! [`crate::ops::pool`].

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{TensorType, strides as row_strides};
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
    /// A residual sum fused into the Conv (`analysis::fuse`: `Conv -> Add(y, r)`): the node
    /// has four inputs `[X, W, B, R]`, `R` of the output's type, and computes
    /// `conv(X, W) + B + R`. Never set by the importer (ONNX's Conv has three inputs).
    pub sum: bool,
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

/// The kernel geometry a Conv node with data input `x` and output `y` runs with, as the
/// planner sizes its scratch (`crate::gemm::conv::conv2d_scratch_bytes`): `packed_a` set when
/// the weights are a constant (packed at compile time where the kernel reads them so), the
/// default tile. `None` when the kernel has no 1-d/2-d geometry for these shapes. Not yet
/// marked for its kernel: `crate::ops::Op::scratch_bytes` plans the im2col bytes whatever the
/// weights' storage, the liveness `scratch` pass none for a kernel that reads none with f32
/// weights (`crate::gemm::conv::conv2d_plan_bytes`).
pub fn scratch_params(
    a: &ConvAttrs,
    x: &TensorType,
    y: &TensorType,
    constant_weights: bool,
    threads: usize,
) -> Option<crate::gemm::conv::ConvParams> {
    let mut p = crate::gemm::conv::ConvParams::from_shapes(
        &x.shape,
        &y.shape,
        &a.kernel,
        &a.strides,
        &a.dilations,
        &a.pads,
        a.group,
    )?;
    p.packed_a = u64::from(constant_weights && p.packs_a());
    p.threads = threads.max(1) as u64;
    Some(p)
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

mod window;

pub(crate) use window::{
    AutoPad, FLOATS, check_dtype, check_float_operands, check_window_attrs, checked_out, effective,
    nonneg_ints, read_auto_pad, resolve_pads, spatial_ints, tap_offset,
};

/// Helpers for the op family tests: build a node with attributes and run its converter.
#[cfg(test)]
mod tests;

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
        sum: false,
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
    check_float_operands(inputs)?;
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
    if a.sum && inputs.len() != 4 {
        return Err(OpError::Arity {
            expected: "4 (X, W, B, R) for a Conv with a fused residual".into(),
            actual: inputs.len(),
        });
    }
    // The residual (four inputs then, checked above; its type below) is not one of ONNX's
    // operands.
    let onnx = if a.sum { &inputs[..3] } else { inputs };
    let (x, w) = check_conv_inputs(onnx, &a.kernel, a.group)?;
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
    let y = TensorType::new(inputs[0].dtype, checked_out(out)?);
    if a.sum && inputs.get(3) != Some(&y) {
        let r = inputs.get(3).map_or(&[][..], |r| &r.shape[..]);
        return Err(OpError::shape(
            "the residual R must have the output's type".to_string(),
            &[x, w, r],
        ));
    }
    Ok(vec![y])
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
    let rv = if a.sum {
        inputs.get(3).map(|r| r.to_f64_vec())
    } else {
        None
    };
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
                if let Some(rv) = &rv {
                    acc += rv[out.len()];
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
        ]
        .into_iter()
        .chain(a.sum.then(|| ("sum", "R".to_string())))
        .collect(),
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
