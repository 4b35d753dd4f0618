//! `RotaryEmbedding` (opset 23+) as Transpose/Reshape/Slice/Gather/Mul/Add/Concat nodes,
//! following the ONNX function body: X as [batch, seq, heads, head_size]; the first
//! `rotary_embedding_dim` features rotated (halves, or even/odd pairs when `interleaved`) by
//! the cos/sin caches (gathered at `position_ids` when given), the rest passed through.

use arenac_proto::NodeProto;

use super::{Emitter, input, int_attr, output, unsupported};
use crate::error::OpError;
use crate::ops::ctx::NodeCtx;

/// Expands one RotaryEmbedding node.
pub(super) fn expand(ctx: &NodeCtx<'_>, node: &NodeProto, e: &mut Emitter) -> Result<(), OpError> {
    ctx.expect_inputs(3, 4)?;
    let (x, x_ty) = input(ctx, node, 0).ok_or_else(|| unsupported("X is required"))?;
    let (cos, cos_ty) = input(ctx, node, 1).ok_or_else(|| unsupported("cos_cache is required"))?;
    let (sin, sin_ty) = input(ctx, node, 2).ok_or_else(|| unsupported("sin_cache is required"))?;
    let pos = input(ctx, node, 3);
    let dt = x_ty.dtype;
    if !dt.is_float() || cos_ty.dtype != dt || sin_ty.dtype != dt {
        return Err(unsupported(format!(
            "X, cos_cache and sin_cache must share one float dtype (got {}, {}, {})",
            dt, cos_ty.dtype, sin_ty.dtype
        )));
    }
    let interleaved = ctx.attr_int("interleaved", 0)? != 0;
    let shape = &x_ty.shape;
    // X as [batch, seq, heads, head_size].
    let (x4, batch, seq, head) = match shape.len() {
        4 => {
            let t = e.transpose(x, &[0, 2, 1, 3], None);
            (t, shape[0], shape[2], shape[3])
        }
        3 => {
            let heads = match ctx.attr_int("num_heads", 0)? {
                h if h > 0 && shape[2].is_multiple_of(h as usize) => h as usize,
                h => {
                    return Err(OpError::attr(
                        "num_heads",
                        format!("{h} does not divide the hidden size {} of 3-d X", shape[2]),
                    ));
                }
            };
            let d = shape[2] / heads;
            let r = e.reshape(x, &[shape[0], shape[1], heads, d], None);
            (r, shape[0], shape[1], d)
        }
        _ => return Err(OpError::shape("X must be 3-d or 4-d", &[shape])),
    };
    let rot = match ctx.attr_int("rotary_embedding_dim", 0)? {
        0 => head,
        r if r > 0 && (r as usize) <= head && r % 2 == 0 => r as usize,
        r => {
            return Err(OpError::attr(
                "rotary_embedding_dim",
                format!("{r} must be even and at most the head size {head}"),
            ));
        }
    };
    let half = rot / 2;
    let (r64, h64) = (rot as i64, half as i64);
    let x_rot = if rot == head {
        x4.clone()
    } else {
        e.slice(&x4, -1, 0, r64, 1)
    };

    // Caches as [batch, seq, 1, half].
    let mut cache = |c: &str, ty: &crate::ir::types::TensorType| -> Result<String, OpError> {
        let (g, gshape) = match pos {
            Some((p, p_ty)) => {
                if p_ty.shape != [batch, seq] || ty.shape.len() != 2 {
                    return Err(OpError::shape(
                        format!("position_ids must be [{batch}, {seq}] and the caches 2-d"),
                        &[&p_ty.shape, &ty.shape],
                    ));
                }
                let g = e.op("Gather", &[c, p], vec![int_attr("axis", 0)]);
                (g, vec![batch, seq, ty.shape[1]])
            }
            None => (c.to_string(), ty.shape.clone()),
        };
        if gshape.len() != 3 || gshape[0] != batch || gshape[1] != seq || gshape[2] < half {
            return Err(OpError::shape(
                format!("the caches must give [{batch}, {seq}, {half}] (rotary_dim / 2)"),
                &[&gshape],
            ));
        }
        let g = if gshape[2] == half {
            g
        } else {
            e.slice(&g, 2, 0, h64, 1)
        };
        let two = e.ints(&[2]);
        Ok(e.op("Unsqueeze", &[&g, &two], vec![]))
    };
    let cos4 = cache(cos, cos_ty)?;
    let sin4 = cache(sin, sin_ty)?;

    let (x1, x2) = if interleaved {
        (
            e.slice(&x_rot, 3, 0, r64, 2),
            e.slice(&x_rot, 3, 1, r64 + 1, 2),
        )
    } else {
        (
            e.slice(&x_rot, 3, 0, h64, 1),
            e.slice(&x_rot, 3, h64, r64, 1),
        )
    };
    let cos_x1 = e.op("Mul", &[&cos4, &x1], vec![]);
    let sin_x2 = e.op("Mul", &[&sin4, &x2], vec![]);
    let real = e.op("Sub", &[&cos_x1, &sin_x2], vec![]);
    let sin_x1 = e.op("Mul", &[&sin4, &x1], vec![]);
    let cos_x2 = e.op("Mul", &[&cos4, &x2], vec![]);
    let imag = e.op("Add", &[&sin_x1, &cos_x2], vec![]);
    let rotated = if interleaved {
        let last = e.ints(&[-1]);
        let re = e.op("Unsqueeze", &[&real, &last], vec![]);
        let im = e.op("Unsqueeze", &[&imag, &last], vec![]);
        let c = e.op("Concat", &[&re, &im], vec![int_attr("axis", -1)]);
        e.reshape(&c, &[batch, seq, x4_heads(shape, head), rot], None)
    } else {
        e.op("Concat", &[&real, &imag], vec![int_attr("axis", -1)])
    };
    let full = if rot == head {
        rotated
    } else {
        let rest = e.slice(&x4, -1, r64, head as i64, 1);
        e.op("Concat", &[&rotated, &rest], vec![int_attr("axis", -1)])
    };
    let y = output(node, 0);
    if shape.len() == 4 {
        e.transpose(&full, &[0, 2, 1, 3], y);
    } else {
        e.reshape(&full, shape, y);
    }
    Ok(())
}

/// The head count of X (4-d: dim 1; 3-d: hidden / head_size).
fn x4_heads(shape: &[usize], head: usize) -> usize {
    if shape.len() == 4 {
        shape[1]
    } else {
        shape[2] / head.max(1)
    }
}
