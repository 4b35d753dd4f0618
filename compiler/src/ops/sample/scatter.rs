//! TensorScatter (opset 24): a KV-cache update
//! (<https://onnx.ai/onnx/operators/onnx__TensorScatter.html>): `present = past`, then for
//! each batch `b` and every index before `axis`, the `update`'s sequence positions `s` are
//! written at `write_indices[b] + s` along `axis` (`circular`: modulo the cache length).
//! Element-type agnostic: it moves bytes. In `linear` mode a write index must keep the whole
//! update inside the cache (`0 <= i <= max - len`); the kernel reports another one as the
//! run's fault and skips the writes that would leave the cache.

use crate::error::OpError;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::ctx::{NodeCtx, norm_axis};
use crate::ops::sample::SampleOp;

/// TensorScatter's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScatterAttrs {
    /// The sequence axis (normalized; at least 1).
    pub axis: usize,
    /// Indices wrap around the cache length.
    pub circular: bool,
    /// A `write_indices` input (else every batch writes at 0).
    pub indices: bool,
}

pub(super) fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 3)?;
    let circular = match ctx.attr_string("mode", "linear")?.as_str() {
        "linear" => false,
        "circular" => true,
        other => {
            return Err(OpError::attr(
                "mode",
                format!("'{other}' is not linear or circular"),
            ));
        }
    };
    let rank = ctx.input_type(0)?.shape.len();
    let axis = norm_axis("axis", ctx.attr_int("axis", -2)?, rank)?;
    if axis == 0 {
        return Err(OpError::attr("axis", "must not be the batch axis 0"));
    }
    Ok(Op::Sample(SampleOp::TensorScatter(ScatterAttrs {
        axis,
        circular,
        indices: ctx.has_input(2),
    })))
}

/// The sizes of one TensorScatter, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScatterGeometry {
    /// Batch (dim 0).
    pub batch: usize,
    /// Rows per batch: the product of the dims between 0 and `axis`.
    pub rows: usize,
    /// The cache length along `axis`.
    pub max: usize,
    /// The update's length along `axis`.
    pub len: usize,
    /// Elements after `axis`.
    pub inner: usize,
}

impl ScatterGeometry {
    /// The geometry of `inputs` (checked).
    pub fn new(a: &ScatterAttrs, inputs: &[TensorType]) -> Result<ScatterGeometry, OpError> {
        let want = 2 + usize::from(a.indices);
        let (Some(past), Some(up)) = (inputs.first(), inputs.get(1)) else {
            return Err(OpError::Arity {
                expected: want.to_string(),
                actual: inputs.len(),
            });
        };
        if inputs.len() != want {
            return Err(OpError::Arity {
                expected: want.to_string(),
                actual: inputs.len(),
            });
        }
        let (p, u) = (&past.shape, &up.shape);
        let fits = p.len() == u.len()
            && a.axis < p.len()
            && (0..p.len()).all(|i| {
                if i == a.axis {
                    u[i] <= p[i]
                } else {
                    u[i] == p[i]
                }
            });
        if !fits || past.dtype != up.dtype {
            return Err(OpError::shape(
                "update must have past_cache's shape and type except a shorter sequence axis",
                &[p, u],
            ));
        }
        if let Some(idx) = inputs.get(2)
            && (idx.dtype != DType::I64 || idx.shape != [p[0]])
        {
            return Err(OpError::DType {
                input: 2,
                dtype: idx.dtype,
                expected: format!("int64 write_indices of shape [{}]", p[0]),
            });
        }
        Ok(ScatterGeometry {
            batch: p[0],
            rows: p[1..a.axis].iter().product(),
            max: p[a.axis],
            len: u[a.axis],
            inner: p[a.axis + 1..].iter().product(),
        })
    }
}

pub(super) fn infer(a: &ScatterAttrs, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    ScatterGeometry::new(a, inputs)?;
    Ok(vec![inputs[0].clone()])
}

/// The first write index outside `0..=max - len` (linear mode), if any.
pub fn bad_index(a: &ScatterAttrs, g: &ScatterGeometry, idx: &[i64]) -> Option<i64> {
    let hi = (g.max - g.len) as i64;
    if a.circular {
        return None;
    }
    idx.iter().copied().find(|&i| i < 0 || i > hi)
}

/// TensorScatter over bytes (`elem` bytes per element): `out = past`, then the update's rows.
pub fn tensor_scatter(
    a: &ScatterAttrs,
    g: &ScatterGeometry,
    elem: usize,
    past: &[u8],
    update: &[u8],
    idx: Option<&[i64]>,
    out: &mut [u8],
) {
    let n = out.len().min(past.len());
    out[..n].copy_from_slice(&past[..n]);
    let row = g.inner * elem;
    for b in 0..g.batch {
        let start = idx.and_then(|v| v.get(b)).copied().unwrap_or(0);
        for r in 0..g.rows {
            let p = b * g.rows + r;
            for s in 0..g.len {
                let mut c = start + s as i64;
                if a.circular {
                    c = c.rem_euclid(g.max.max(1) as i64);
                }
                let Some(c) = usize::try_from(c).ok().filter(|&c| c < g.max) else {
                    continue;
                };
                let src = (p * g.len + s) * row;
                let dst = (p * g.max + c) * row;
                if let (Some(d), Some(v)) =
                    (out.get_mut(dst..dst + row), update.get(src..src + row))
                {
                    d.copy_from_slice(v);
                }
            }
        }
    }
}
