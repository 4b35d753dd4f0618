//! Integer convolution and quantized linear ops as ordinary nodes, following onnx's
//! reference implementations:
//!
//! - `ConvInteger`: int32 `Conv(x - x_zero_point, w - w_zero_point)` (per-tensor `x` zero
//!   point, per-tensor or per-output-channel `w` zero point; padding is zero after the shift);
//! - `QLinearConv`: that sum, plus the int32 bias `B`, times `x_scale * w_scale / y_scale`,
//!   plus `y_zero_point`, rounded half to even and saturated to the output type;
//! - `QLinearMatMul`: likewise over `MatMul(a - a_zero_point, b - b_zero_point)`, with
//!   per-row `a` and per-column `b` parameters (`[M]` / `[..., M, 1]` and `[N]` /
//!   `[..., 1, N]`).
//!
//! The integer sums are exact ([`super::exact`]). The requantization runs as the reference's
//! numpy does: the combined scale in the scales' type (f32, or f16/bf16 rounding each
//! step), then `sum * scale + zero_point` in f64 (numpy promotes int32 times a float to
//! float64).

use arenac_proto::NodeProto;

use super::exact::{Exact, Product, shift_bound};
use super::{Emitter, input, int_attr, output, unsupported};
use crate::error::OpError;
use crate::ir::types::{DType, TensorType};
use crate::ops::ctx::NodeCtx;

/// How a per-row/per-channel parameter lines up with its operand.
#[derive(Clone, Copy)]
enum Layout {
    /// One element only.
    Scalar,
    /// `[M]` over dim 0 of a Conv weight `[M, C, k...]` (or one element).
    OutChannel,
    /// `[M]` over the rows of a matrix `[..., M, K]` (or one element, or N-D as is).
    Rows,
    /// `[N]` over the columns of `[..., K, N]` (or one element, or N-D as is).
    Cols,
}

/// `p` (of type `p_ty`, named `what`) shaped to broadcast against an operand of `shape`.
fn lay_out(
    e: &mut Emitter,
    what: &str,
    p: &str,
    p_ty: &TensorType,
    shape: &[usize],
    layout: Layout,
) -> Result<String, OpError> {
    let ps = &p_ty.shape;
    if ps.iter().product::<usize>() == 1 {
        return Ok(if ps.is_empty() {
            p.to_string()
        } else {
            e.reshape(p, &[], None)
        });
    }
    let bad = || {
        OpError::shape(
            format!("{what} does not fit its operand"),
            &[ps.as_slice(), shape],
        )
    };
    match layout {
        Layout::Scalar => Err(bad()),
        Layout::OutChannel => {
            if ps.len() != 1 || shape.first() != ps.first() {
                return Err(bad());
            }
            let mut dims = vec![1; shape.len()];
            dims[0] = ps[0];
            Ok(e.reshape(p, &dims, None))
        }
        Layout::Rows if ps.len() == 1 && shape.len() >= 2 => {
            if ps[0] != shape[shape.len() - 2] {
                return Err(bad());
            }
            Ok(e.reshape(p, &[ps[0], 1], None))
        }
        Layout::Rows | Layout::Cols => Ok(p.to_string()),
    }
}

/// Operand `slot` minus its zero point `zp_slot` as exact f32 integers, and the bound of
/// their magnitude ([`shift_bound`]).
fn shifted(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
    (slot, zp_slot): (usize, usize),
    what: &str,
    layout: Layout,
) -> Result<(String, u64), OpError> {
    let (m, m_ty) =
        input(ctx, node, slot).ok_or_else(|| unsupported(format!("{what} is required")))?;
    if !matches!(m_ty.dtype, DType::U8 | DType::I8) {
        return Err(unsupported(format!(
            "{what} must be int8 or uint8 (got {})",
            m_ty.dtype
        )));
    }
    let mf = e.cast(m, m_ty.dtype, DType::F32);
    let Some((z, z_ty)) = input(ctx, node, zp_slot) else {
        return Ok((mf, shift_bound(m_ty.dtype, ctx.input_value(slot), None)));
    };
    if z_ty.dtype != m_ty.dtype {
        return Err(unsupported(format!(
            "{what}'s zero point is {} but {what} is {}",
            z_ty.dtype, m_ty.dtype
        )));
    }
    let zb = lay_out(
        e,
        &format!("{what}'s zero point"),
        z,
        z_ty,
        &m_ty.shape,
        layout,
    )?;
    let zf = e.cast(&zb, z_ty.dtype, DType::F32);
    let bound = shift_bound(
        m_ty.dtype,
        ctx.input_value(slot),
        Some((z_ty.dtype, ctx.input_value(zp_slot))),
    );
    Ok((e.op("Sub", &[&mf, &zf], vec![]), bound))
}

/// `round(acc * scale + y_zero_point)` saturated to the output type, into the node's output.
/// `scales` are (slot, layout, operand shape) of the two input scales; `y` the output scale
/// and zero point slots.
fn requantize(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
    acc: &str,
    scales: [(usize, Layout, &[usize]); 2],
    (ys_slot, yz_slot): (usize, usize),
    default_dt: DType,
) -> Result<(), OpError> {
    let (ys, ys_ty) =
        input(ctx, node, ys_slot).ok_or_else(|| unsupported("y_scale is required"))?;
    let sdt = ys_ty.dtype;
    if !sdt.is_float() {
        return Err(unsupported(format!(
            "the scales must be floats (got {sdt})"
        )));
    }
    let mut scale: Option<String> = None;
    for (slot, layout, shape) in scales {
        let (s, s_ty) =
            input(ctx, node, slot).ok_or_else(|| unsupported("every scale is required"))?;
        if s_ty.dtype != sdt {
            return Err(unsupported(format!(
                "the scales differ in type ({} and {sdt})",
                s_ty.dtype
            )));
        }
        let s = lay_out(e, "a scale", s, s_ty, shape, layout)?;
        scale = Some(match scale {
            None => s,
            Some(prev) => e.op("Mul", &[&prev, &s], vec![]),
        });
    }
    let ysb = lay_out(e, "y_scale", ys, ys_ty, &[], Layout::Scalar)?;
    let scale = e.op("Div", &[&scale.unwrap_or_default(), &ysb], vec![]);
    let scale = e.cast(&scale, sdt, DType::F64);
    let accf = e.cast(acc, DType::I32, DType::F64);
    let mut v = e.op("Mul", &[&accf, &scale], vec![]);
    let out_dt = match input(ctx, node, yz_slot) {
        Some((z, z_ty)) => {
            let zb = lay_out(e, "y_zero_point", z, z_ty, &[], Layout::Scalar)?;
            let zf = e.cast(&zb, z_ty.dtype, DType::F64);
            v = e.op("Add", &[&v, &zf], vec![]);
            z_ty.dtype
        }
        None => default_dt,
    };
    let (lo, hi) = match out_dt {
        DType::U8 => (0.0, 255.0),
        DType::I8 => (-128.0, 127.0),
        other => {
            return Err(unsupported(format!(
                "the output must be int8 or uint8 (got {other})"
            )));
        }
    };
    let r = e.op("Round", &[&v], vec![]);
    let lo = e.scalar(DType::F64, lo);
    let hi = e.scalar(DType::F64, hi);
    let c = e.op("Clip", &[&r, &lo, &hi], vec![]);
    let to = int_attr("to", i64::from(out_dt.to_onnx()));
    e.op_maybe_to("Cast", &[&c], vec![to], output(node, 0));
    Ok(())
}

/// The exact int32 convolution of input slots `x`/`x_zp`, `w`/`w_zp`.
fn conv_sum(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
    x: (usize, usize),
    w: (usize, usize),
    out: Option<&str>,
) -> Result<String, OpError> {
    let x_ty = ctx.input_type(x.0)?.clone();
    let w_ty = ctx.input_type(w.0)?.clone();
    let (xs, ws) = (&x_ty.shape, &w_ty.shape);
    let group = usize::try_from(ctx.attr_int("group", 1)?)
        .ok()
        .filter(|&g| g >= 1)
        .ok_or_else(|| OpError::attr("group", "must be at least 1"))?;
    if xs.len() < 3 || ws.len() != xs.len() || ws[1] * group != xs[1] {
        return Err(OpError::shape(
            format!("x must be [N, C, spatial...] and w [M, C / group, kernel...] (group {group})"),
            &[xs, ws],
        ));
    }
    let (xf, bx) = shifted(ctx, node, e, x, "x", Layout::Scalar)?;
    let (wf, bw) = shifted(ctx, node, e, w, "w", Layout::OutChannel)?;
    Exact {
        a: &xf,
        a_bound: bx,
        b: &wf,
        b_bound: bw,
        units: ws[1],
        per_unit: ws[2..].iter().product(),
        product: Product::Conv {
            attrs: node.attribute.clone(),
            x_shape: xs.clone(),
            group,
        },
    }
    .emit(e, out)
}

/// Expands one ConvInteger node.
pub(super) fn expand_conv_integer(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
) -> Result<(), OpError> {
    ctx.expect_inputs(2, 4)?;
    conv_sum(ctx, node, e, (0, 2), (1, 3), output(node, 0))?;
    Ok(())
}

/// Expands one QLinearConv node.
pub(super) fn expand_qlinear_conv(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
) -> Result<(), OpError> {
    ctx.expect_inputs(8, 9)?;
    let mut acc = conv_sum(ctx, node, e, (0, 2), (3, 5), None)?;
    let x_ty = ctx.input_type(0)?.clone();
    let w_shape = ctx.input_type(3)?.shape.clone();
    // Per-output-channel terms line up with [M, 1, ...] against the output [N, M, spatial...].
    let m = w_shape[0];
    let mut channels = vec![1; x_ty.shape.len() - 1];
    channels[0] = m;
    if let Some((b, b_ty)) = input(ctx, node, 8) {
        if b_ty.dtype != DType::I32 || b_ty.shape.as_slice() != [m] {
            return Err(unsupported(format!(
                "the bias must be int32 of shape [{m}] (got {} {:?})",
                b_ty.dtype, b_ty.shape
            )));
        }
        let bb = e.reshape(b, &channels, None);
        acc = e.op("Add", &[&acc, &bb], vec![]);
    }
    requantize(
        ctx,
        node,
        e,
        &acc,
        [(1, Layout::Scalar, &[]), (4, Layout::OutChannel, &channels)],
        (6, 7),
        x_ty.dtype,
    )
}

/// Expands one QLinearMatMul node.
pub(super) fn expand_qlinear_matmul(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
) -> Result<(), OpError> {
    ctx.expect_inputs(8, 8)?;
    let a_ty = ctx.input_type(0)?.clone();
    let b_ty = ctx.input_type(3)?.clone();
    let (af, ba) = shifted(ctx, node, e, (0, 2), "a", Layout::Rows)?;
    let (bf, bb) = shifted(ctx, node, e, (3, 5), "b", Layout::Cols)?;
    let acc = Exact {
        a: &af,
        a_bound: ba,
        b: &bf,
        b_bound: bb,
        units: a_ty.shape.last().copied().unwrap_or(1),
        per_unit: 1,
        product: Product::MatMul {
            b_rank: b_ty.shape.len(),
        },
    }
    .emit(e, None)?;
    requantize(
        ctx,
        node,
        e,
        &acc,
        [
            (1, Layout::Rows, &a_ty.shape),
            (4, Layout::Cols, &b_ty.shape),
        ],
        (6, 7),
        a_ty.dtype,
    )
}
