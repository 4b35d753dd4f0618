//! LpPool (opsets 7-28; `dilations` and `ceil_mode` from 18): `(sum |x|^p)^(1/p)` over each
//! window of an `N x C x spatial...` input, padding contributing 0 (onnx's reference pads
//! with zeros). Geometry as MaxPool/AveragePool (`ops::pool`): `auto_pad` resolved into
//! `pads`; output `floor((in + pads - eff) / s) + 1`, or with `ceil_mode` `ceil(...) + 1`
//! minus one when the last window would start in the end padding.
//!
//! Computed in f64: `|x|^p` by `p - 1` multiplications for `p <= 16`, else `powf`; the root
//! is `sqrt` for p = 2, `powf(s, 1/p)` otherwise ([`lp_power`], [`lp_root`], which the kernel
//! reproduces).

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{TensorType, strides as row_strides};
use crate::ops::Op;
use crate::ops::conv::{
    AutoPad, FLOATS, check_dtype, check_window_attrs, checked_out, read_auto_pad, resolve_pads,
    spatial_ints, tap_offset,
};
use crate::ops::ctx::NodeCtx;
use crate::ops::pool::{PoolAttrs, pool_out_dim};
use crate::ops::util::{expect_arity, fmt_list, unravel, wrong_family};

/// LpPool attributes, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LpPoolAttrs {
    /// The window geometry (`count_include_pad` unused).
    pub pool: PoolAttrs,
    /// The norm's order (at least 1).
    pub p: u32,
}

/// Largest `p` whose power is computed by multiplications.
pub const LP_MUL_MAX: u32 = 16;

/// `|x|^p` as the reference and the kernel compute it.
pub fn lp_power(x: f64, p: u32) -> f64 {
    let a = x.abs();
    if p > LP_MUL_MAX {
        return a.powf(f64::from(p));
    }
    let mut r = a;
    for _ in 1..p {
        r *= a;
    }
    r
}

/// `s^(1/p)` as the reference and the kernel compute it.
pub fn lp_root(s: f64, p: u32) -> f64 {
    match p {
        1 => s,
        2 => s.sqrt(),
        _ => s.powf(1.0 / f64::from(p)),
    }
}

/// Converts LpPool.
pub fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let x = ctx.input_type(0)?.shape.clone();
    let kernel = ctx
        .attr_ints("kernel_shape")?
        .ok_or_else(|| OpError::attr("kernel_shape", "is required"))?;
    let n = kernel.len();
    if n == 0 || x.len() != n + 2 {
        return Err(OpError::shape(
            format!("X must be [N,C,spatial...] with one spatial dim per kernel_shape entry ({n})"),
            &[&x],
        ));
    }
    let kernel = spatial_ints(ctx, "kernel_shape", n, 1)?;
    let strides = spatial_ints(ctx, "strides", n, 1)?;
    let dilations = spatial_ints(ctx, "dilations", n, 1)?;
    let auto_pad = read_auto_pad(ctx)?;
    let pads = resolve_pads(ctx, auto_pad, &x[2..], &kernel, &strides, &dilations)?;
    let ceil_mode = ctx.attr_int("ceil_mode", 0)? != 0 && auto_pad == AutoPad::NotSet;
    let p = ctx.attr_int("p", 2)?;
    let p = u32::try_from(p)
        .ok()
        .filter(|&p| p >= 1)
        .ok_or_else(|| OpError::attr("p", format!("{p} must be a positive integer")))?;
    Ok(Op::LpPool(LpPoolAttrs {
        pool: PoolAttrs {
            kernel,
            strides,
            dilations,
            pads,
            ceil_mode,
            count_include_pad: false,
        },
        p,
    }))
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let Op::LpPool(LpPoolAttrs { pool: a, p }) = op else {
        return Err(wrong_family(op, "lppool"));
    };
    expect_arity(inputs, 1)?;
    check_window_attrs(&a.kernel, &a.strides, &a.dilations, &a.pads)?;
    let x = &inputs[0];
    check_dtype(0, x.dtype, FLOATS)?;
    let n = a.kernel.len();
    if x.shape.len() != n + 2 || *p == 0 {
        return Err(OpError::shape(
            format!("X must have rank {} for a {n}-d window, p >= 1", n + 2),
            &[&x.shape],
        ));
    }
    let mut out = vec![x.shape[0], x.shape[1]];
    for i in 0..n {
        out.push(pool_out_dim(a, i, x.shape[2 + i], &x.shape)?);
    }
    Ok(vec![TensorType::new(x.dtype, checked_out(out)?)])
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let Op::LpPool(LpPoolAttrs { pool: a, p }) = op else {
        return Err(wrong_family(op, "lppool"));
    };
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out_ty = infer(op, &types)?.remove(0);
    let x = inputs[0];
    let n = a.kernel.len();
    let (xs, os) = (x.shape(), &out_ty.shape);
    let (in_sp, out_sp) = (&xs[2..], &os[2..]);
    let in_plane: usize = in_sp.iter().product();
    let out_plane: usize = out_sp.iter().product();
    let k_plane: usize = a.kernel.iter().product();
    let in_strides = row_strides(in_sp);
    let taps: Vec<Vec<usize>> = (0..k_plane).map(|f| unravel(f, &a.kernel)).collect();
    let xv = x.to_f64_vec();
    let mut out = Vec::with_capacity(xs[0] * xs[1] * out_plane);
    for plane in 0..xs[0] * xs[1] {
        let base = plane * in_plane;
        for o in 0..out_plane {
            let oi = unravel(o, out_sp);
            let origin: Vec<i128> = (0..n)
                .map(|i| (oi[i] * a.strides[i]) as i128 - a.pads[i] as i128)
                .collect();
            let mut s = 0.0;
            for k in &taps {
                if let Some(off) = tap_offset(&origin, k, &a.dilations, in_sp, &in_strides) {
                    s += lp_power(xv[base + off], *p);
                }
            }
            out.push(lp_root(s, *p));
        }
    }
    Ok(vec![Tensor::from_f64(out_ty.dtype, out_ty.shape, &out)])
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::LpPool(LpPoolAttrs { pool: a, p }) => vec![
            ("kernel_shape", fmt_list(&a.kernel)),
            ("strides", fmt_list(&a.strides)),
            ("dilations", fmt_list(&a.dilations)),
            ("pads", fmt_list(&a.pads)),
            ("ceil_mode", u8::from(a.ceil_mode).to_string()),
            ("p", p.to_string()),
        ],
        _ => Vec::new(),
    }
}
