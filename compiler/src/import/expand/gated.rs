//! SwiGLU (opset 28) and CausalConvWithState (opset 27), expanded as their ONNX function
//! bodies read:
//! - `SwiGLU(a, b) {alpha = 1}` = `a * sigmoid(alpha * a) * b` (same shapes, no broadcast);
//! - `CausalConvWithState(input [B, C, L], weight [C, 1, K], bias?, past_state? [B, C, K-1])
//!   {activation = none | silu | swish}`: `padded = Concat(past_state or zeros, input)` on the
//!   time axis, `output = Conv(padded, weight, bias) {group = C}` (then `x * sigmoid(x)` for
//!   silu/swish), `present_state = padded[:, :, L : L + K - 1]`.

use arenac_proto::NodeProto;

use super::{Emitter, const_numel, input, int_attr, ints_attr, output, unsupported};
use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ops::ctx::NodeCtx;

/// Expands one SwiGLU node.
pub(super) fn expand_swiglu(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
) -> Result<(), OpError> {
    let (a, at) = input(ctx, node, 0).ok_or_else(|| unsupported("input A is missing"))?;
    let (b, bt) = input(ctx, node, 1).ok_or_else(|| unsupported("input B is missing"))?;
    if at != bt {
        return Err(OpError::shape(
            "SwiGLU's A and B must have one shape and type (no broadcasting)",
            &[&at.shape, &bt.shape],
        ));
    }
    let y = output(node, 0).ok_or_else(|| unsupported("the output is missing"))?;
    let alpha = f64::from(ctx.attr_float("alpha", 1.0)?);
    let scaled = if alpha == 1.0 {
        a.to_string()
    } else {
        let k = e.scalar(at.dtype, alpha);
        e.op("Mul", &[a, &k], vec![])
    };
    let s = e.op("Sigmoid", &[&scaled], vec![]);
    let gate = e.op("Mul", &[a, &s], vec![]);
    e.op_to("Mul", &[&gate, b], vec![], y);
    Ok(())
}

/// Expands one CausalConvWithState node.
pub(super) fn expand_causal_conv(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
) -> Result<(), OpError> {
    let (x, xt) = input(ctx, node, 0).ok_or_else(|| unsupported("input is missing"))?;
    let (w, wt) = input(ctx, node, 1).ok_or_else(|| unsupported("weight is missing"))?;
    let [b, c, l] = xt.shape[..] else {
        return Err(OpError::shape("input must be [B, C, L]", &[&xt.shape]));
    };
    let k = match wt.shape[..] {
        [wc, 1, k] if wc == c && k >= 1 => k,
        _ => {
            return Err(OpError::shape(
                "weight must be [C, 1, K] for input [B, C, L]",
                &[&xt.shape, &wt.shape],
            ));
        }
    };
    let silu = match ctx.attr_string("activation", "none")?.as_str() {
        "none" => false,
        "silu" | "swish" => true,
        other => {
            return Err(OpError::attr(
                "activation",
                format!("'{other}' is not one of none, silu, swish"),
            ));
        }
    };
    let y = output(node, 0).ok_or_else(|| unsupported("the output is missing"))?;
    let state = [b, c, k - 1];
    let past = match input(ctx, node, 3) {
        Some((p, pt)) if pt.shape == state => p.to_string(),
        Some((_, pt)) => {
            return Err(OpError::shape(
                "past_state must be [B, C, K - 1]",
                &[&xt.shape, &wt.shape, &pt.shape],
            ));
        }
        None => {
            let n = const_numel(&state, "zero state")?;
            e.constant(&Tensor::from_f64(xt.dtype, state.to_vec(), &vec![0.0; n]))
        }
    };
    let padded = if k > 1 {
        e.op("Concat", &[&past, x], vec![int_attr("axis", 2)])
    } else {
        x.to_string()
    };
    let mut conv_in = vec![padded.as_str(), w];
    let bias = input(ctx, node, 2).map(|(name, _)| name);
    conv_in.extend(bias);
    let attrs = vec![
        int_attr("group", c as i64),
        ints_attr("kernel_shape", &[k as i64]),
    ];
    if silu {
        let conv = e.op("Conv", &conv_in, attrs);
        let s = e.op("Sigmoid", &[&conv], vec![]);
        e.op_to("Mul", &[&conv, &s], vec![], y);
    } else {
        e.op_to("Conv", &conv_in, attrs, y);
    }
    if let Some(present) = output(node, 1) {
        let start = e.ints(&[l as i64]);
        let end = e.ints(&[(l + k - 1) as i64]);
        let axis = e.ints(&[2]);
        e.op_to("Slice", &[&padded, &start, &end, &axis], vec![], present);
    }
    Ok(())
}
