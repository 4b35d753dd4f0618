//! `Attention` (opset 23+) as MatMul/Softmax/Transpose/Reshape/Where/... nodes, following the
//! ONNX function body (onnx/defs/nn/utils.cc): 3-d inputs split into heads, past key/value
//! concatenated (present outputs), the additive bias from the mask (bool or float, padded to
//! the total kv length), the causal triangle (offset by the past length, or per batch by
//! `nonpad_kv_seqlen - q_len`), the sliding window (opset 25) and the kv padding mask; kv heads
//! repeated for grouped-query attention; `Q*√s @ (Kᵀ*√s)`, softcap, bias, Softmax (optionally
//! in `softmax_precision`), fully masked rows zeroed, `@ V`. The `qk_matmul_output` modes 0-3
//! name the raw product, the softcapped product, the biased product and the probabilities.
//!
//! Everything that depends only on shapes (the causal and window masks without
//! `nonpad_kv_seqlen`, reshape targets) is a constant; the rest folds when its inputs do.

use arenac_proto::NodeProto;

use super::{Emitter, const_numel, dims_i64, input, int_attr, output, unsupported};
use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::DType;
use crate::ops::ctx::NodeCtx;

/// A tensor of `dtype` and `shape` holding `0` where `allowed(index)` and `-inf` elsewhere.
fn mask_const(
    dtype: DType,
    rows: usize,
    cols: usize,
    allowed: impl Fn(usize, usize) -> bool,
) -> Result<Tensor, OpError> {
    let mut v = Vec::with_capacity(const_numel(&[rows, cols], "causal/window mask")?);
    for i in 0..rows {
        for j in 0..cols {
            v.push(if allowed(i, j) {
                0.0
            } else {
                f64::NEG_INFINITY
            });
        }
    }
    Ok(Tensor::from_f64(dtype, vec![rows, cols], &v))
}

/// `i64` values `0..n` as a tensor of `shape` (whose element count is `n`).
fn arange(n: usize, shape: Vec<usize>) -> Result<Tensor, OpError> {
    let v: Vec<i64> = (0..const_numel(&[n], "index range")?)
        .map(|x| x as i64)
        .collect();
    Ok(Tensor::i64(shape, &v))
}

/// Expands one Attention node.
pub(super) fn expand(ctx: &NodeCtx<'_>, node: &NodeProto, e: &mut Emitter) -> Result<(), OpError> {
    ctx.expect_inputs(3, 7)?;
    let (q, q_ty) = input(ctx, node, 0).ok_or_else(|| unsupported("Q is required"))?;
    let (k, k_ty) = input(ctx, node, 1).ok_or_else(|| unsupported("K is required"))?;
    let (v, v_ty) = input(ctx, node, 2).ok_or_else(|| unsupported("V is required"))?;
    let mask = input(ctx, node, 3);
    let past_k = input(ctx, node, 4);
    let past_v = input(ctx, node, 5);
    let nonpad = input(ctx, node, 6);
    let dt = q_ty.dtype;
    if !dt.is_float() || k_ty.dtype != dt || v_ty.dtype != dt {
        return Err(unsupported(format!(
            "Q, K and V must share one float dtype (got {}, {}, {})",
            q_ty.dtype, k_ty.dtype, v_ty.dtype
        )));
    }
    let rank = q_ty.shape.len();
    if k_ty.shape.len() != rank || v_ty.shape.len() != rank || !(rank == 3 || rank == 4) {
        return Err(OpError::shape(
            "Q, K and V must all be 3-d or all 4-d",
            &[&q_ty.shape, &k_ty.shape, &v_ty.shape],
        ));
    }
    let is_causal = ctx.attr_int("is_causal", 0)? != 0;
    let mode = ctx.attr_int("qk_matmul_output_mode", 0)?;
    if !(0..=3).contains(&mode) {
        return Err(OpError::attr(
            "qk_matmul_output_mode",
            format!("{mode} is not one of 0, 1, 2, 3"),
        ));
    }
    let softcap = ctx.attr_float("softcap", 0.0)?;
    let left_window = ctx.attr_int("left_window_size", -1)?;
    let right_window = ctx.attr_int("right_window_size", -1)?;
    let batch = q_ty.shape[0];

    // Q, K, V as [batch, heads, seq, head_size].
    let (q4, k4, v4, qh, kvh, q4s, k4s, v4s) = if rank == 3 {
        let heads = |name: &str| -> Result<usize, OpError> {
            match ctx.attr_int_opt(name)? {
                Some(h) if h > 0 => Ok(h as usize),
                _ => Err(OpError::attr(
                    name,
                    "a positive head count is required for 3-d inputs",
                )),
            }
        };
        let (qh, kvh) = (heads("q_num_heads")?, heads("kv_num_heads")?);
        let mut split = |x: &str, shape: &[usize], h: usize, what: &str| {
            if !shape[2].is_multiple_of(h) || shape[0] != batch {
                return Err(OpError::shape(
                    format!(
                        "{what}'s hidden size {} is not a multiple of {h} heads (or batch differs)",
                        shape[2]
                    ),
                    &[shape],
                ));
            }
            let mid = [shape[0], shape[1], h, shape[2] / h];
            let r = e.reshape(x, &mid, None);
            let t = e.transpose(&r, &[0, 2, 1, 3], None);
            Ok((t, vec![shape[0], h, shape[1], shape[2] / h]))
        };
        let (q4, q4s) = split(q, &q_ty.shape, qh, "Q")?;
        let (k4, k4s) = split(k, &k_ty.shape, kvh, "K")?;
        let (v4, v4s) = split(v, &v_ty.shape, kvh, "V")?;
        (q4, k4, v4, qh, kvh, q4s, k4s, v4s)
    } else {
        let (qh, kvh) = (q_ty.shape[1], k_ty.shape[1]);
        (
            q.to_string(),
            k.to_string(),
            v.to_string(),
            qh,
            kvh,
            q_ty.shape.clone(),
            k_ty.shape.clone(),
            v_ty.shape.clone(),
        )
    };
    if k4s[0] != batch || v4s[0] != batch || v4s[1] != kvh || k4s[3] != q4s[3] || v4s[2] != k4s[2] {
        return Err(OpError::shape(
            "K must be [batch, kv_heads, kv_len, head_size of Q] and V [batch, kv_heads, kv_len, *]",
            &[&q4s, &k4s, &v4s],
        ));
    }
    let q_len = q4s[2];
    let head = q4s[3];

    // Scale: √s applied to Q and to Kᵀ, computed in f32 like the function body.
    let s = match ctx.attr_float_opt("scale")? {
        Some(s) => s,
        None => 1.0f32 / (head as f32).sqrt(),
    };
    let scale = e.scalar(dt, f64::from(s.sqrt()));

    // Past key/value → present key/value.
    let (kp, vp, past_len) = match (past_k, past_v) {
        (Some((pk, pk_ty)), Some((pv, _))) => {
            if nonpad.is_some() {
                return Err(unsupported(
                    "nonpad_kv_seqlen together with past_key/past_value",
                ));
            }
            let kp = e.op_maybe_to(
                "Concat",
                &[pk, &k4],
                vec![int_attr("axis", 2)],
                output(node, 1),
            );
            let vp = e.op_maybe_to(
                "Concat",
                &[pv, &v4],
                vec![int_attr("axis", 2)],
                output(node, 2),
            );
            (kp, vp, pk_ty.shape.get(2).copied().unwrap_or(0))
        }
        (None, None) => {
            if let Some(out) = output(node, 1) {
                e.op_to("Identity", &[&k4], vec![], out);
            }
            if let Some(out) = output(node, 2) {
                e.op_to("Identity", &[&v4], vec![], out);
            }
            (k4.clone(), v4.clone(), 0)
        }
        _ => {
            return Err(unsupported(
                "past_key and past_value must be given together",
            ));
        }
    };
    let kv_len = k4s[2]
        .checked_add(past_len)
        .ok_or_else(|| OpError::Overflow("kv length".into()))?;

    // The additive bias, in the mask's float dtype (f32 for a bool mask or none).
    let bdt = match mask {
        Some((_, t)) if t.dtype.is_float() => t.dtype,
        _ => DType::F32,
    };
    let mut terms: Vec<String> = Vec::new();
    if let Some((m, m_ty)) = mask {
        let m = match m_ty.dtype {
            DType::Bool => {
                let zero = e.scalar(bdt, 0.0);
                let ninf = e.scalar(bdt, f64::NEG_INFINITY);
                e.op("Where", &[m, &zero, &ninf], vec![])
            }
            d if d.is_float() => m.to_string(),
            d => {
                return Err(unsupported(format!(
                    "attn_mask of dtype {d} (bool or float only)"
                )));
            }
        };
        let last = m_ty.shape.last().copied().unwrap_or(1);
        let m = if m_ty.shape.is_empty() || last == kv_len {
            m
        } else if last < kv_len {
            let mut pad_shape = m_ty.shape.clone();
            if let Some(l) = pad_shape.last_mut() {
                *l = kv_len - last;
            }
            let n = const_numel(&pad_shape, "attn_mask padding")?;
            let pad = e.constant(&Tensor::from_f64(
                bdt,
                pad_shape,
                &vec![f64::NEG_INFINITY; n],
            ));
            e.op("Concat", &[&m, &pad], vec![int_attr("axis", -1)])
        } else {
            return Err(OpError::shape(
                format!("attn_mask's last dim {last} is longer than the kv length {kv_len}"),
                &[&m_ty.shape],
            ));
        };
        terms.push(m);
    }
    if let Some((_, np_ty)) = nonpad
        && (np_ty.dtype != DType::I64 || np_ty.shape != [batch])
    {
        return Err(OpError::shape(
            format!("nonpad_kv_seqlen must be int64 [{batch}] (got {np_ty})"),
            &[&np_ty.shape],
        ));
    }
    let window = left_window >= 0 || right_window >= 0;
    if is_causal || window {
        let allowed = |i: usize, j: usize, off: i64| -> bool {
            let diff = i as i64 + off - j as i64;
            (!is_causal || diff >= 0)
                && (left_window < 0 || diff <= left_window)
                && (right_window < 0 || -diff <= right_window)
        };
        match nonpad {
            Some((np, _)) => {
                // j - i against the per-batch offset: diff = i + off - j.
                // Per-batch offsets `nonpad_kv_seqlen[b] - q_len` as [batch, 1, 1, 1].
                let ql = e.ints(&[q_len as i64]);
                let sub = e.op("Sub", &[np, &ql], vec![]);
                let off = e.reshape(&sub, &[batch, 1, 1, 1], None);
                let rows = e.constant(&arange(q_len, vec![1, 1, q_len, 1])?);
                let cols = e.constant(&arange(kv_len, vec![1, 1, 1, kv_len])?);
                let abs = e.op("Add", &[&rows, &off], vec![]);
                let diff = e.op("Sub", &[&abs, &cols], vec![]);
                let zero = e.scalar(bdt, 0.0);
                let ninf = e.scalar(bdt, f64::NEG_INFINITY);
                let mut conds: Vec<String> = Vec::new();
                if is_causal {
                    let z = e.ints(&[0]);
                    conds.push(e.op("GreaterOrEqual", &[&diff, &z], vec![]));
                }
                if left_window >= 0 {
                    let l = e.ints(&[left_window]);
                    conds.push(e.op("LessOrEqual", &[&diff, &l], vec![]));
                }
                if right_window >= 0 {
                    let r = e.ints(&[-right_window]);
                    conds.push(e.op("GreaterOrEqual", &[&diff, &r], vec![]));
                }
                for c in conds {
                    terms.push(e.op("Where", &[&c, &zero, &ninf], vec![]));
                }
            }
            None => {
                let off = past_len as i64;
                let t = mask_const(bdt, q_len, kv_len, |i, j| allowed(i, j, off))?;
                terms.push(e.constant(&t));
            }
        }
    }
    if let Some((np, _)) = nonpad {
        let cols = e.constant(&arange(kv_len, vec![1, kv_len])?);
        let lens = e.reshape(np, &[batch, 1], None);
        let keep = e.op("Less", &[&cols, &lens], vec![]);
        let zero = e.scalar(bdt, 0.0);
        let ninf = e.scalar(bdt, f64::NEG_INFINITY);
        let pad = e.op("Where", &[&keep, &zero, &ninf], vec![]);
        terms.push(e.reshape(&pad, &[batch, 1, 1, kv_len], None));
    }
    let bias = match terms.split_first() {
        None => None,
        Some((first, rest)) => {
            let mut acc = first.clone();
            for t in rest {
                acc = e.op("Add", &[&acc, t], vec![]);
            }
            Some(e.cast(&acc, bdt, dt))
        }
    };

    // Grouped-query attention: each kv head repeated qh / kvh times, interleaved.
    let (kx, vx) = if qh == kvh {
        (kp, vp)
    } else {
        if kvh == 0 || !qh.is_multiple_of(kvh) {
            return Err(unsupported(format!(
                "{qh} query heads are not a multiple of {kvh} kv heads"
            )));
        }
        let rep = qh / kvh;
        let two = e.ints(&[2]);
        let mut repeat = |x: &str, hs: usize| {
            let u = e.op("Unsqueeze", &[x, &two], vec![]);
            let shape = e.ints(&dims_i64(&[batch, kvh, rep, kv_len, hs]));
            let x = e.op("Expand", &[&u, &shape], vec![]);
            e.reshape(&x, &[batch, qh, kv_len, hs], None)
        };
        (repeat(&kp, head), repeat(&vp, v4s[3]))
    };

    let kt = e.transpose(&kx, &[0, 1, 3, 2], None);
    let qs = e.op("Mul", &[&q4, &scale], vec![]);
    let ks = e.op("Mul", &[&kt, &scale], vec![]);
    let qk = e.op("MatMul", &[&qs, &ks], vec![]);
    let qk_out = output(node, 3);
    if mode == 0
        && let Some(out) = qk_out
    {
        e.op_to("Identity", &[&qk], vec![], out);
    }
    let capped = if softcap > 0.0 {
        let c = e.scalar(dt, f64::from(softcap));
        let d = e.op("Div", &[&qk, &c], vec![]);
        let t = e.op("Tanh", &[&d], vec![]);
        e.op("Mul", &[&t, &c], vec![])
    } else {
        qk
    };
    if mode == 1
        && let Some(out) = qk_out
    {
        e.op_to("Identity", &[&capped], vec![], out);
    }
    let logits = match &bias {
        Some(b) => e.op("Add", &[&capped, b], vec![]),
        None => capped,
    };
    if mode == 2
        && let Some(out) = qk_out
    {
        e.op_to("Identity", &[&logits], vec![], out);
    }
    let sdt = match ctx.attr_int_opt("softmax_precision")? {
        None => dt,
        Some(code) => match i32::try_from(code).ok().and_then(DType::from_onnx) {
            Some(d) if d.is_float() => d,
            _ => {
                return Err(OpError::attr(
                    "softmax_precision",
                    format!("{code} is not a float dtype arenac handles"),
                ));
            }
        },
    };
    let sin = e.cast(&logits, dt, sdt);
    let sm = e.op("Softmax", &[&sin], vec![int_attr("axis", -1)]);
    let mut probs = e.cast(&sm, sdt, dt);
    if let Some(b) = &bias {
        // Rows whose bias is -inf everywhere attend nothing: their probabilities are 0.
        let axes = e.ints(&[-1]);
        let row_max = e.op("ReduceMax", &[b, &axes], vec![]);
        let ninf = e.scalar(dt, f64::NEG_INFINITY);
        let all_masked = e.op("Equal", &[&row_max, &ninf], vec![]);
        let zero = e.scalar(dt, 0.0);
        probs = e.op("Where", &[&all_masked, &zero, &probs], vec![]);
    }
    if mode == 3
        && let Some(out) = qk_out
    {
        e.op_to("Identity", &[&probs], vec![], out);
    }
    let y_out = output(node, 0);
    if rank == 3 {
        let y4 = e.op("MatMul", &[&probs, &vx], vec![]);
        let yt = e.transpose(&y4, &[0, 2, 1, 3], None);
        let hidden = qh
            .checked_mul(v4s[3])
            .ok_or_else(|| OpError::Overflow("output hidden size".into()))?;
        e.reshape(&yt, &[batch, q_len, hidden], y_out);
    } else {
        e.op_maybe_to("MatMul", &[&probs, &vx], vec![], y_out);
    }
    Ok(())
}
