//! DeformConv (opset 19), 2-d: <https://onnx.ai/onnx/operators/onnx__DeformConv.html>, as
//! onnx's reference computes it: output `(n, oc, i, j)` sums, over the input channels of its
//! group and the kernel taps `(a, b)`, `W[oc, c, a, b] * mask * X[n, c](p)` where `X(p)` is
//! bilinear sampling (zero outside the image) at
//! `p = (i * stride_h - pad_top + a * dilation_h + offset_h, j * stride_w - pad_left + b *
//! dilation_w + offset_w)`; the offsets (and the optional mask, else 1) are per offset group,
//! tap and output point; the optional bias is added.

use super::{Real, float_input};
use crate::error::OpError;
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::ctx::NodeCtx;
use crate::ops::sample::SampleOp;

/// DeformConv's attributes (2 spatial dims).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeformAttrs {
    /// Kernel `[kh, kw]`.
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// `[top, left, bottom, right]`.
    pub pads: [usize; 4],
    /// Channel groups.
    pub group: usize,
    /// Offset groups (over input channels).
    pub offset_group: usize,
    /// A bias input (position 3).
    pub bias: bool,
    /// A mask input (position 4).
    pub mask: bool,
}

fn pairs<const N: usize>(
    ctx: &NodeCtx<'_>,
    name: &str,
    default: [usize; N],
    min: usize,
) -> Result<[usize; N], OpError> {
    let Some(v) = ctx.attr_ints(name)? else {
        return Ok(default);
    };
    let vals: Option<Vec<usize>> = v
        .iter()
        .map(|&x| usize::try_from(x).ok().filter(|&x| x >= min))
        .collect();
    vals.and_then(|v| <[usize; N]>::try_from(v).ok())
        .ok_or_else(|| OpError::attr(name, format!("{v:?} must be {N} values of at least {min}")))
}

pub(super) fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(3, 5)?;
    let w = ctx.input_type(1)?.shape.clone();
    let [_, _, kh, kw] = w[..] else {
        return Err(OpError::Unsupported(
            "DeformConv over other than 2 spatial dims (W must be [OC, C/group, kH, kW])".into(),
        ));
    };
    let count = |name: &str| -> Result<usize, OpError> {
        let v = ctx.attr_int(name, 1)?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v >= 1)
            .ok_or_else(|| OpError::attr(name, format!("{v} must be at least 1")))
    };
    Ok(Op::Sample(SampleOp::DeformConv(Box::new(DeformAttrs {
        kernel: pairs(ctx, "kernel_shape", [kh, kw], 1)?,
        strides: pairs(ctx, "strides", [1, 1], 1)?,
        dilations: pairs(ctx, "dilations", [1, 1], 1)?,
        pads: pairs(ctx, "pads", [0; 4], 0)?,
        group: count("group")?,
        offset_group: count("offset_group")?,
        bias: ctx.has_input(3),
        mask: ctx.has_input(4),
    }))))
}

/// The sizes of one DeformConv.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeformGeometry {
    /// Batch, input channels, input height and width.
    pub x: [usize; 4],
    /// Output channels, output height and width.
    pub out: [usize; 3],
}

impl DeformGeometry {
    /// The geometry of the data inputs (checked).
    pub fn new(a: &DeformAttrs, inputs: &[TensorType]) -> Result<DeformGeometry, OpError> {
        let want = 3 + usize::from(a.bias) + usize::from(a.mask);
        if inputs.len() != want {
            return Err(OpError::Arity {
                expected: want.to_string(),
                actual: inputs.len(),
            });
        }
        for (i, t) in inputs.iter().enumerate() {
            float_input(i, t)?;
        }
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
        let bad = |what: &str| OpError::shape(format!("DeformConv: {what}"), &shapes);
        let ([n, ic, ih, iw], [oc, icg, kh, kw]) = (shapes[0], shapes[1]) else {
            return Err(bad("X must be [N, C, H, W] and W [OC, C/group, kH, kW]"));
        };
        let (n, ic, ih, iw, oc) = (*n, *ic, *ih, *iw, *oc);
        let (g, og) = (a.group, a.offset_group);
        if [*kh, *kw] != a.kernel || ic != icg * g || oc % g != 0 || ic % og != 0 {
            return Err(bad("channels, groups and the kernel do not agree"));
        }
        let out = |d: usize| {
            let span = (a.kernel[d] - 1) * a.dilations[d] + 1;
            let full = [ih, iw][d] + a.pads[d] + a.pads[d + 2];
            full.checked_sub(span).map(|v| v / a.strides[d] + 1)
        };
        let (Some(oh), Some(ow)) = (out(0), out(1)) else {
            return Err(bad("the kernel is larger than the padded input"));
        };
        let taps = og * kh * kw;
        if shapes[2] != [n, 2 * taps, oh, ow] {
            return Err(bad(
                "offset must be [N, offset_group * kH * kW * 2, oH, oW]",
            ));
        }
        let mut next = 3;
        if a.bias {
            if shapes[next] != [oc] {
                return Err(bad("B must be [OC]"));
            }
            next += 1;
        }
        if a.mask && shapes[next] != [n, taps, oh, ow] {
            return Err(bad("mask must be [N, offset_group * kH * kW, oH, oW]"));
        }
        Ok(DeformGeometry {
            x: [n, ic, ih, iw],
            out: [oc, oh, ow],
        })
    }
}

pub(super) fn infer(a: &DeformAttrs, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let g = DeformGeometry::new(a, inputs)?;
    let [oc, oh, ow] = g.out;
    Ok(vec![TensorType::new(
        inputs[0].dtype,
        vec![g.x[0], oc, oh, ow],
    )])
}

/// Bilinear sample of one `h x w` plane at `(y, x)`, zero outside.
fn bilinear<T: Real>(plane: &[T], h: usize, w: usize, y: f64, x: f64) -> f64 {
    let (y0, x0) = (y.floor(), x.floor());
    let (fy, fx) = (y - y0, x - x0);
    let mut v = 0.0;
    for (dy, wy) in [(0.0, 1.0 - fy), (1.0, fy)] {
        for (dx, wx) in [(0.0, 1.0 - fx), (1.0, fx)] {
            let (py, px) = (y0 + dy, x0 + dx);
            if py >= 0.0 && px >= 0.0 && py < h as f64 && px < w as f64 {
                let at = py as usize * w + px as usize;
                v += wy * wx * plane.get(at).map_or(0.0, |p| p.get());
            }
        }
    }
    v
}

/// The data DeformConv reads.
pub struct DeformInputs<'a, T> {
    /// `[N, C, H, W]`.
    pub x: &'a [T],
    /// `[OC, C / group, kH, kW]`.
    pub w: &'a [T],
    /// `[N, offset_group kH kW 2, oH, oW]`.
    pub offset: &'a [T],
    /// `[OC]`.
    pub bias: Option<&'a [T]>,
    /// `[N, offset_group kH kW, oH, oW]`.
    pub mask: Option<&'a [T]>,
}

/// DeformConv of the inputs into `y` (`[N, OC, oH, oW]`).
pub fn deform_conv<T: Real>(
    a: &DeformAttrs,
    g: &DeformGeometry,
    d: &DeformInputs<'_, T>,
    y: &mut [T],
) {
    let DeformInputs {
        x,
        w: wt,
        offset,
        bias,
        mask,
    } = *d;
    let [n, ic, ih, iw] = g.x;
    let [oc, oh, ow] = g.out;
    let [kh, kw] = a.kernel;
    let (icg, ocg) = (ic / a.group, oc / a.group);
    let ic_per_og = ic / a.offset_group;
    let taps = a.offset_group * kh * kw;
    let at = |s: &[T], i: usize| s.get(i).map_or(0.0, |v| v.get());
    for b in 0..n {
        for o in 0..oc {
            let grp = o / ocg;
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = bias.map_or(0.0, |bs| at(bs, o));
                    for cg in 0..icg {
                        let c = grp * icg + cg;
                        let og = c / ic_per_og;
                        let plane = x.get((b * ic + c) * ih * iw..(b * ic + c + 1) * ih * iw);
                        let Some(plane) = plane else { continue };
                        for ka in 0..kh {
                            for kb in 0..kw {
                                let tap = (og * kh + ka) * kw + kb;
                                let off = |k: usize| {
                                    at(offset, (((b * taps + tap) * 2 + k) * oh + i) * ow + j)
                                };
                                let py = (i * a.strides[0] + ka * a.dilations[0]) as f64
                                    - a.pads[0] as f64
                                    + off(0);
                                let px = (j * a.strides[1] + kb * a.dilations[1]) as f64
                                    - a.pads[1] as f64
                                    + off(1);
                                let m = mask
                                    .map_or(1.0, |m| at(m, ((b * taps + tap) * oh + i) * ow + j));
                                let wv = at(wt, ((o * icg + cg) * kh + ka) * kw + kb);
                                acc += wv * m * bilinear(plane, ih, iw, py, px);
                            }
                        }
                    }
                    if let Some(out) = y.get_mut(((b * oc + o) * oh + i) * ow + j) {
                        *out = T::put(acc);
                    }
                }
            }
        }
    }
}
