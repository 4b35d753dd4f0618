//! MaxUnpool (opsets 9 and 11): <https://onnx.ai/onnx/operators/onnx__MaxUnpool.html>, as
//! onnx's reference computes it: every value of `X` is written at its index of `I` (MaxPool's
//! flat indices into the unpooled tensor `[N, C, (x - 1) s - pads + k ..]`), the rest is 0;
//! with an `output_shape` (a constant, at least the unpooled shape), the unpooled tensor is
//! its leading corner.

use super::{Real, float_input};
use crate::error::OpError;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::ctx::NodeCtx;
use crate::ops::sample::SampleOp;

/// MaxUnpool's attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnpoolAttrs {
    /// The pooling window.
    pub kernel: Vec<usize>,
    /// Its strides.
    pub strides: Vec<usize>,
    /// Begin pads then end pads.
    pub pads: Vec<usize>,
    /// The output shape when given (the third input, a constant).
    pub output_shape: Option<Vec<usize>>,
}

fn sizes(ctx: &NodeCtx<'_>, name: &str, len: usize, default: usize) -> Result<Vec<usize>, OpError> {
    match ctx.attr_ints(name)? {
        None => Ok(vec![default; len]),
        Some(v) if v.len() == len => v
            .iter()
            .map(|&d| usize::try_from(d).ok().filter(|&d| d >= default.min(1)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| OpError::attr(name, format!("{v:?} has a value out of range"))),
        Some(v) => Err(OpError::attr(
            name,
            format!("{v:?} must have {len} entries"),
        )),
    }
}

pub(super) fn convert(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 3)?;
    let kernel = ctx
        .attr_ints("kernel_shape")?
        .ok_or_else(|| OpError::attr("kernel_shape", "is required"))?;
    let r = kernel.len();
    let kernel = sizes(ctx, "kernel_shape", r, 1)?;
    let strides = sizes(ctx, "strides", r, 1)?;
    let pads = sizes(ctx, "pads", 2 * r, 0)?;
    let output_shape = if ctx.has_input(2) {
        let v = ctx.take_const_ints(2)?.ok_or_else(|| {
            OpError::Unsupported(
                "MaxUnpool's output_shape must be a constant (it decides the output shape)".into(),
            )
        })?;
        let dims = v
            .iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| OpError::attr("output_shape", format!("{v:?} has a negative dim")))?;
        Some(dims)
    } else {
        None
    };
    Ok(Op::Sample(SampleOp::MaxUnpool(UnpoolAttrs {
        kernel,
        strides,
        pads,
        output_shape,
    })))
}

/// The unpooled shape `[N, C, (x - 1) s - pads + k ..]` of input shape `x`.
pub fn unpooled(a: &UnpoolAttrs, x: &[usize]) -> Result<Vec<usize>, OpError> {
    let r = a.kernel.len();
    if x.len() != r + 2 {
        return Err(OpError::shape(
            format!("X must have rank {} for a {r}-d kernel", r + 2),
            &[x],
        ));
    }
    let mut shape = x[..2].to_vec();
    for i in 0..r {
        let d = x[i + 2]
            .checked_sub(1)
            .and_then(|v| v.checked_mul(a.strides[i]))
            .and_then(|v| v.checked_add(a.kernel[i]))
            .and_then(|v| v.checked_sub(a.pads[i] + a.pads[r + i]))
            .filter(|&d| d >= 1)
            .ok_or_else(|| OpError::shape(format!("dim {} unpools to no pixel", i + 2), &[x]))?;
        shape.push(d);
    }
    Ok(shape)
}

pub(super) fn infer(a: &UnpoolAttrs, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let [x, idx] = inputs else {
        return Err(OpError::Unsupported("MaxUnpool takes X and I".into()));
    };
    float_input(0, x)?;
    if idx.dtype != DType::I64 {
        return Err(OpError::DType {
            input: 1,
            dtype: idx.dtype,
            expected: "int64 indices".into(),
        });
    }
    if idx.shape != x.shape {
        return Err(OpError::shape(
            "I must have X's shape",
            &[&x.shape, &idx.shape],
        ));
    }
    let inner = unpooled(a, &x.shape)?;
    let shape = match &a.output_shape {
        Some(s) => {
            let fits = s.len() == inner.len() && s.iter().zip(&inner).all(|(o, i)| o >= i);
            if !fits {
                return Err(OpError::shape(
                    "output_shape must be at least the unpooled shape, dim by dim",
                    &[s, &inner],
                ));
            }
            s.clone()
        }
        None => inner,
    };
    Ok(vec![TensorType::new(x.dtype, shape)])
}

/// MaxUnpool of `x` at flat indices `idx` into `y` (`out` shaped; the indices count over
/// `inner`, the unpooled shape). Indices outside `inner` are skipped (the lowering reports
/// them as a fault first).
pub fn max_unpool<T: Real>(inner: &[usize], out: &[usize], x: &[T], idx: &[i64], y: &mut [T]) {
    y.fill(T::put(0.0));
    let total: usize = inner.iter().product();
    for (v, &i) in x.iter().zip(idx) {
        let Some(mut i) = usize::try_from(i).ok().filter(|&i| i < total) else {
            continue;
        };
        // The position in `inner`, then its offset in `out`.
        let (mut off, mut stride) = (0, 1);
        for (d, o) in inner.iter().zip(out).rev() {
            off += (i % d) * stride;
            i /= d;
            stride *= o;
        }
        if let Some(slot) = y.get_mut(off) {
            *slot = *v;
        }
    }
}
