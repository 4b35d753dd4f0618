//! LinearAttention (opset 27): <https://onnx.ai/onnx/operators/onnx__LinearAttention.html>, the
//! recurrence of onnx's reference (`op_linear_attention.py`), one time step at a time:
//! per batch and key/value head, a `[d_k, d_v]` state `S` is
//! - decayed (`gated`, `gated_delta`): `S *= exp(g_t)` (per head, or per key row);
//! - corrected (`delta`, `gated_delta`): `v_t = beta_t (v_t - S^T k_t)`;
//! - updated: `S += k_t v_t^T`;
//!
//! and read by the query heads of its group: `o_t = scale q_t^T S` (`scale` 0 or absent:
//! `1 / sqrt(d_k)`). Inputs are `[B, T, heads * dim]`; `present_state` is the last `S`
//! (`[B, H_kv, d_k, d_v]`), starting from `past_state` or zeros. Each column of `S` is
//! corrected and updated on its own, so the kernel needs no work space beyond its outputs.

use super::{Real, float_input};
use crate::error::OpError;
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::ctx::NodeCtx;
use crate::ops::sample::SampleOp;

/// LinearAttention's attributes and which optional inputs it has (data inputs in order:
/// query, key, value, then past_state, decay, beta when present).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearAttrs {
    /// Query heads.
    pub q_heads: usize,
    /// Key/value heads (divides `q_heads`).
    pub kv_heads: usize,
    /// The read scale; 0: `1 / sqrt(d_k)`.
    pub scale: f32,
    /// A past_state input.
    pub past: bool,
    /// Decay (the `gated` rules).
    pub gating: bool,
    /// Beta (the `delta` rules).
    pub delta: bool,
}

pub(super) fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(3, 6)?;
    let (gating, delta) = match ctx.attr_string("update_rule", "gated_delta")?.as_str() {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        other => {
            return Err(OpError::attr(
                "update_rule",
                format!("'{other}' is not one of linear, gated, delta, gated_delta"),
            ));
        }
    };
    for (i, name, wanted) in [(4, "decay", gating), (5, "beta", delta)] {
        if ctx.has_input(i) != wanted {
            return Err(OpError::Unsupported(format!(
                "update_rule {} {name} (input {i})",
                if wanted { "requires" } else { "forbids" }
            )));
        }
    }
    let heads = |name: &str| -> Result<usize, OpError> {
        let v = ctx
            .attr_int_opt(name)?
            .ok_or_else(|| OpError::attr(name, "is required"))?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v >= 1)
            .ok_or_else(|| OpError::attr(name, format!("{v} must be at least 1")))
    };
    let (q_heads, kv_heads) = (heads("q_num_heads")?, heads("kv_num_heads")?);
    if q_heads % kv_heads != 0 {
        return Err(OpError::attr(
            "q_num_heads",
            format!("{q_heads} is not a multiple of kv_num_heads {kv_heads}"),
        ));
    }
    Ok(Op::Sample(SampleOp::LinearAttention(LinearAttrs {
        q_heads,
        kv_heads,
        scale: ctx.attr_float("scale", 0.0)?,
        past: ctx.has_input(3),
        gating,
        delta,
    })))
}

/// The sizes of one LinearAttention node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearGeometry {
    /// Batch.
    pub b: usize,
    /// Time steps.
    pub t: usize,
    /// Key dim per head.
    pub dk: usize,
    /// Value dim per head.
    pub dv: usize,
    /// Decay values per step and head: 1 or `d_k`.
    pub decay_width: usize,
    /// Beta values per step: `kv_heads` or 1.
    pub beta_width: usize,
}

impl LinearGeometry {
    /// The geometry of data inputs `inputs` (checked).
    pub fn new(a: &LinearAttrs, inputs: &[TensorType]) -> Result<LinearGeometry, OpError> {
        let want = 3 + usize::from(a.past) + usize::from(a.gating) + usize::from(a.delta);
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
        let bad = |what: &str| OpError::shape(format!("LinearAttention: {what}"), &shapes);
        let [b, t, qw] = shapes[0][..] else {
            return Err(bad("query must be [B, T, q_num_heads * d_k]"));
        };
        let (hq, hk) = (a.q_heads, a.kv_heads);
        let dk = qw / hq;
        let dv = match (shapes[1], shapes[2]) {
            ([kb, kt, kw], [vb, vt, vw])
                if *kb == b
                    && *kt == t
                    && *vb == b
                    && *vt == t
                    && qw % hq == 0
                    && *kw == hk * dk
                    && vw % hk == 0 =>
            {
                vw / hk
            }
            _ => {
                return Err(bad(
                    "key must be [B, T, kv_num_heads * d_k], value [B, T, kv_num_heads * d_v]",
                ));
            }
        };
        let mut next = 3;
        if a.past {
            if shapes[next] != [b, hk, dk, dv] {
                return Err(bad("past_state must be [B, kv_num_heads, d_k, d_v]"));
            }
            next += 1;
        }
        let mut decay_width = 1;
        if a.gating {
            decay_width = match shapes[next] {
                [db, dt, w] if *db == b && *dt == t && *w == hk => 1,
                [db, dt, w] if *db == b && *dt == t && *w == hk * dk => dk,
                _ => {
                    return Err(bad(
                        "decay must be [B, T, kv_num_heads] or [B, T, kv_num_heads * d_k]",
                    ));
                }
            };
            next += 1;
        }
        let mut beta_width = 1;
        if a.delta {
            beta_width = match shapes[next] {
                [bb, bt, w] if *bb == b && *bt == t && (*w == hk || *w == 1) => *w,
                _ => return Err(bad("beta must be [B, T, kv_num_heads] or [B, T, 1]")),
            };
        }
        Ok(LinearGeometry {
            b,
            t,
            dk,
            dv,
            decay_width,
            beta_width,
        })
    }
}

pub(super) fn infer(a: &LinearAttrs, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let g = LinearGeometry::new(a, inputs)?;
    let state_dtype = if a.past {
        inputs[3].dtype
    } else {
        inputs[0].dtype
    };
    Ok(vec![
        TensorType::new(inputs[0].dtype, vec![g.b, g.t, a.q_heads * g.dv]),
        TensorType::new(state_dtype, vec![g.b, a.kv_heads, g.dk, g.dv]),
    ])
}

/// The data a step reads: query, key, value, and the optional past state, decay and beta.
pub struct LinearInputs<'a, T> {
    /// `[B, T, H_q d_k]`.
    pub q: &'a [T],
    /// `[B, T, H_kv d_k]`.
    pub k: &'a [T],
    /// `[B, T, H_kv d_v]`.
    pub v: &'a [T],
    /// `[B, H_kv, d_k, d_v]`.
    pub past: Option<&'a [T]>,
    /// `[B, T, H_kv (d_k)]`.
    pub decay: Option<&'a [T]>,
    /// `[B, T, H_kv or 1]`.
    pub beta: Option<&'a [T]>,
}

/// Runs the recurrence: `y` (`[B, T, H_q d_v]`) and `state` (`[B, H_kv, d_k, d_v]`, the
/// present state). Slices shorter than the geometry read as 0 / are left unwritten.
pub fn linear_attention<T: Real>(
    a: &LinearAttrs,
    g: &LinearGeometry,
    x: &LinearInputs<'_, T>,
    y: &mut [T],
    state: &mut [T],
) {
    let (hq, hk, dk, dv) = (a.q_heads, a.kv_heads, g.dk, g.dv);
    let group = hq / hk;
    let scale = if a.scale == 0.0 {
        1.0 / (dk as f64).sqrt()
    } else {
        f64::from(a.scale)
    };
    let at = |s: &[T], i: usize| s.get(i).map_or(0.0, |v| v.get());
    for (i, s) in state.iter_mut().enumerate() {
        *s = T::put(x.past.map_or(0.0, |p| at(p, i)));
    }
    for b in 0..g.b {
        for t in 0..g.t {
            let bt = b * g.t + t;
            for h in 0..hk {
                let s0 = (b * hk + h) * dk * dv;
                let key = |d: usize| at(x.k, (bt * hk + h) * dk + d);
                if let Some(decay) = x.decay {
                    for d in 0..dk {
                        let w = g.decay_width;
                        let f = at(decay, (bt * hk + h) * w + d.min(w - 1)).exp();
                        for m in 0..dv {
                            if let Some(s) = state.get_mut(s0 + d * dv + m) {
                                *s = T::put(s.get() * f);
                            }
                        }
                    }
                }
                let beta = x.beta.map(|bs| {
                    let w = g.beta_width;
                    at(bs, bt * w + h.min(w - 1))
                });
                for m in 0..dv {
                    let mut vm = at(x.v, (bt * hk + h) * dv + m);
                    if let Some(beta) = beta {
                        let got: f64 = (0..dk).map(|d| at(state, s0 + d * dv + m) * key(d)).sum();
                        vm = beta * (vm - got);
                    }
                    for d in 0..dk {
                        if let Some(s) = state.get_mut(s0 + d * dv + m) {
                            *s = T::put(s.get() + key(d) * vm);
                        }
                    }
                }
                for qh in h * group..(h + 1) * group {
                    for m in 0..dv {
                        let o: f64 = (0..dk)
                            .map(|d| at(x.q, (bt * hq + qh) * dk + d) * at(state, s0 + d * dv + m))
                            .sum();
                        if let Some(out) = y.get_mut((bt * hq + qh) * dv + m) {
                            *out = T::put(scale * o);
                        }
                    }
                }
            }
        }
    }
}
