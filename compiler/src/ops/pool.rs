//! Pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.
//!
//! Output size per spatial dim, with `eff = (k - 1) * d + 1`:
//! `floor((in + pads - eff) / s) + 1`, or with `ceil_mode` `ceil(...) + 1` minus one when the
//! last window would start inside the end padding (the spec's rule). `auto_pad` is resolved
//! into `pads` by the converters (its output size does not depend on `ceil_mode`, so the
//! resolved op carries `ceil_mode = false`).
//!
//! Padding never takes part in a max. AveragePool divides by the number of taps inside the
//! input (`count_include_pad = 0`) or inside the input plus its declared pads
//! (`count_include_pad = 1`; taps past the end padding, which only `ceil_mode` creates, do not
//! count, as in PyTorch and ONNX Runtime).

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType, strides as row_strides};
use crate::ops::conv::{
    AutoPad, FLOATS, check_dtype, check_window_attrs, checked_out, effective, read_auto_pad,
    resolve_pads, spatial_ints, tap_offset,
};
use crate::ops::ctx::NodeCtx;
use crate::ops::util::{expect_arity, fmt_list, unravel, wrong_family};
use crate::ops::{MAX_OPSET, MIN_OPSET, Op, OpDef};

/// Pooling attributes, resolved (`auto_pad` turned into `pads`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolAttrs {
    /// Window size per spatial dim.
    pub kernel: Vec<usize>,
    /// Stride per spatial dim.
    pub strides: Vec<usize>,
    /// Dilation per spatial dim.
    pub dilations: Vec<usize>,
    /// `[begin_0.., end_0..]` per spatial dim.
    pub pads: Vec<usize>,
    /// Output size rounds up instead of down.
    pub ceil_mode: bool,
    /// AveragePool: padding counts in the divisor.
    pub count_include_pad: bool,
}

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    OpDef {
        op_type: "MaxPool",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_max_pool,
    },
    OpDef {
        op_type: "AveragePool",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_average_pool,
    },
    OpDef {
        op_type: "GlobalAveragePool",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_global_average_pool,
    },
    OpDef {
        op_type: "GlobalMaxPool",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_global_max_pool,
    },
];

/// MaxPool's dtypes (8-bit integers since opset 12).
const MAX_POOL_DTYPES: &[DType] = &[
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I8,
    DType::U8,
];

/// Reads an attribute that exists only from opset `since` on; present earlier is an error.
fn check_since(ctx: &NodeCtx<'_>, name: &str, since: i64) -> Result<(), OpError> {
    if ctx.opset < since && ctx.has_attr(name) {
        return Err(OpError::attr(
            name,
            format!(
                "is not defined before opset {since} (model opset {})",
                ctx.opset
            ),
        ));
    }
    Ok(())
}

/// Common attribute reading of MaxPool and AveragePool.
fn read_pool(ctx: &NodeCtx<'_>, dilations_since: i64) -> Result<PoolAttrs, OpError> {
    ctx.expect_inputs(1, 1)?;
    let x = ctx.input_type(0)?.shape.clone();
    check_since(ctx, "dilations", dilations_since)?;
    check_since(ctx, "ceil_mode", 10)?;
    let kernel = ctx
        .attr_ints("kernel_shape")?
        .ok_or_else(|| OpError::attr("kernel_shape", "is required"))?;
    let n = kernel.len();
    if n == 0 || x.len() != n + 2 {
        return Err(OpError::shape(
            format!(
                "X must be [N,C,spatial...] with one spatial dim per kernel_shape entry \
                 ({n})"
            ),
            &[&x],
        ));
    }
    let kernel = spatial_ints(ctx, "kernel_shape", n, 1)?;
    let strides = spatial_ints(ctx, "strides", n, 1)?;
    let dilations = spatial_ints(ctx, "dilations", n, 1)?;
    let auto_pad = read_auto_pad(ctx)?;
    let pads = resolve_pads(ctx, auto_pad, &x[2..], &kernel, &strides, &dilations)?;
    let ceil_mode = match ctx.attr_int("ceil_mode", 0)? {
        0 => false,
        1 => true,
        v => return Err(OpError::attr("ceil_mode", format!("{v} is not 0 or 1"))),
    };
    Ok(PoolAttrs {
        kernel,
        strides,
        dilations,
        pads,
        // auto_pad's output size is ceil(in / s) (SAME) or floor((in - eff) / s) + 1 (VALID),
        // which the floor formula gives with the resolved pads.
        ceil_mode: ceil_mode && auto_pad == AutoPad::NotSet,
        count_include_pad: false,
    })
}

fn convert_max_pool(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let pool = read_pool(ctx, 10)?;
    if ctx.has_output(1) {
        // With Indices: a host kernel (`sample::argmax`); storage_order orders them.
        let column_major = match ctx.attr_int("storage_order", 0)? {
            0 => false,
            1 => true,
            v => return Err(OpError::attr("storage_order", format!("{v} is not 0 or 1"))),
        };
        return Ok(Op::Sample(crate::ops::SampleOp::MaxPoolIndices(
            crate::ops::sample::ArgmaxAttrs { pool, column_major },
        )));
    }
    Ok(Op::MaxPool(pool))
}

fn convert_average_pool(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let mut a = read_pool(ctx, 19)?;
    a.count_include_pad = match ctx.attr_int("count_include_pad", 0)? {
        0 => false,
        1 => true,
        v => {
            return Err(OpError::attr(
                "count_include_pad",
                format!("{v} is not 0 or 1"),
            ));
        }
    };
    Ok(Op::AveragePool(a))
}

fn convert_global_average_pool(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    Ok(Op::GlobalAveragePool)
}

fn convert_global_max_pool(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    Ok(Op::GlobalMaxPool)
}

/// Printed op name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::MaxPool(_) => "MaxPool",
        Op::AveragePool(_) => "AveragePool",
        Op::GlobalAveragePool => "GlobalAveragePool",
        Op::GlobalMaxPool => "GlobalMaxPool",
        _ => "?",
    }
}

/// Output spatial size of one dim (shared with LpPool).
pub(crate) fn pool_out_dim(
    a: &PoolAttrs,
    i: usize,
    input: usize,
    x: &[usize],
) -> Result<usize, OpError> {
    let n = a.kernel.len();
    let eff = effective(a.kernel[i], a.dilations[i])?;
    let (pb, pe, s) = (a.pads[i], a.pads[n + i], a.strides[i]);
    let padded = input
        .checked_add(pb)
        .and_then(|v| v.checked_add(pe))
        .ok_or_else(|| OpError::Overflow("padded input size".into()))?;
    if padded < eff {
        return Err(OpError::shape(
            format!("spatial dim {i}: padded size {padded} is smaller than the window {eff}"),
            &[x],
        ));
    }
    let span = padded - eff;
    if !a.ceil_mode {
        return Ok(span / s + 1);
    }
    let mut out = span.div_ceil(s) + 1;
    // A window starting in the end padding is dropped.
    if (out - 1).saturating_mul(s) >= input + pb {
        out -= 1;
    }
    Ok(out)
}

fn infer_pool(
    a: &PoolAttrs,
    inputs: &[TensorType],
    allowed: &[DType],
) -> Result<TensorType, OpError> {
    expect_arity(inputs, 1)?;
    check_window_attrs(&a.kernel, &a.strides, &a.dilations, &a.pads)?;
    let x = &inputs[0];
    check_dtype(0, x.dtype, allowed)?;
    let n = a.kernel.len();
    if x.shape.len() != n + 2 {
        return Err(OpError::shape(
            format!("X must have rank {} for a {n}-d window", n + 2),
            &[&x.shape],
        ));
    }
    // A pad as wide as the window makes windows that read only padding (ONNX Runtime
    // refuses it too: "Pad should be smaller than kernel").
    for i in 0..n {
        let eff = effective(a.kernel[i], a.dilations[i])?;
        if a.pads[i] >= eff || a.pads[n + i] >= eff {
            return Err(OpError::attr(
                "pads",
                format!("pads of axis {i} must be smaller than the {eff}-wide window"),
            ));
        }
    }
    let mut out = vec![x.shape[0], x.shape[1]];
    for i in 0..n {
        out.push(pool_out_dim(a, i, x.shape[2 + i], &x.shape)?);
    }
    Ok(TensorType::new(x.dtype, checked_out(out)?))
}

fn infer_global(inputs: &[TensorType], allowed: &[DType]) -> Result<TensorType, OpError> {
    expect_arity(inputs, 1)?;
    let x = &inputs[0];
    check_dtype(0, x.dtype, allowed)?;
    if x.shape.len() < 3 || x.shape[2..].contains(&0) {
        return Err(OpError::shape(
            "X must be [N,C,spatial...] with at least one non-empty spatial dim",
            &[&x.shape],
        ));
    }
    let mut out = x.shape.clone();
    out[2..].fill(1);
    Ok(TensorType::new(x.dtype, out))
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let t = match op {
        Op::MaxPool(a) => infer_pool(a, inputs, MAX_POOL_DTYPES)?,
        Op::AveragePool(a) => infer_pool(a, inputs, FLOATS)?,
        Op::GlobalAveragePool => infer_global(inputs, FLOATS)?,
        Op::GlobalMaxPool => infer_global(inputs, FLOATS)?,
        _ => return Err(wrong_family(op, "pool")),
    };
    Ok(vec![t])
}

/// The lowest finite value of a dtype: the max of a window made of padding only.
fn lowest(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::MIN,
        DType::F16 => f64::from(half::f16::MIN),
        DType::I8 => f64::from(i8::MIN),
        DType::U8 => 0.0,
        _ => f64::from(f32::MIN),
    }
}

fn eval_pool(a: &PoolAttrs, x: &Tensor, is_max: bool) -> Result<Tensor, OpError> {
    let allowed = if is_max { MAX_POOL_DTYPES } else { FLOATS };
    let out_ty = infer_pool(a, &[x.ty()], allowed)?;
    let n = a.kernel.len();
    let (xs, os) = (x.shape(), &out_ty.shape);
    let (in_sp, out_sp) = (&xs[2..], &os[2..]);
    let planes = xs[0] * xs[1];
    let in_plane: usize = in_sp.iter().product();
    let out_plane: usize = out_sp.iter().product();
    let k_plane: usize = a.kernel.iter().product();
    let in_strides = row_strides(in_sp);
    let taps: Vec<Vec<usize>> = (0..k_plane).map(|f| unravel(f, &a.kernel)).collect();
    // Bounds of the input plus its declared padding, relative to the input.
    let padded_hi: Vec<i128> = (0..n).map(|i| (in_sp[i] + a.pads[n + i]) as i128).collect();
    let xv = x.to_f64_vec();
    let mut out = Vec::with_capacity(planes * out_plane);
    for p in 0..planes {
        let base = p * in_plane;
        for o in 0..out_plane {
            let oi = unravel(o, out_sp);
            let origin: Vec<i128> = (0..n)
                .map(|i| (oi[i] * a.strides[i]) as i128 - a.pads[i] as i128)
                .collect();
            let (mut max, mut sum, mut inside, mut in_padded) = (None::<f64>, 0.0, 0usize, 0usize);
            for k in &taps {
                match tap_offset(&origin, k, &a.dilations, in_sp, &in_strides) {
                    Some(off) => {
                        let v = xv[base + off];
                        max = Some(max.map_or(v, |m: f64| if v > m || v.is_nan() { v } else { m }));
                        sum += v;
                        inside += 1;
                        in_padded += 1;
                    }
                    None => {
                        // Outside the input: count it when inside the declared padding.
                        let within = (0..n).all(|i| {
                            let q = origin[i] + (k[i] * a.dilations[i]) as i128;
                            q >= -(a.pads[i] as i128) && q < padded_hi[i]
                        });
                        in_padded += usize::from(within);
                    }
                }
            }
            out.push(if is_max {
                max.unwrap_or_else(|| lowest(x.dtype()))
            } else {
                let count = if a.count_include_pad {
                    in_padded
                } else {
                    inside
                };
                if count == 0 {
                    f64::NAN
                } else {
                    sum / count as f64
                }
            });
        }
    }
    Ok(Tensor::from_f64(out_ty.dtype, out_ty.shape, &out))
}

fn eval_global(x: &Tensor, is_max: bool) -> Result<Tensor, OpError> {
    let out_ty = infer_global(&[x.ty()], FLOATS)?;
    let xs = x.shape();
    let planes = xs[0] * xs[1];
    let plane: usize = xs[2..].iter().product();
    let xv = x.to_f64_vec();
    let out: Vec<f64> = (0..planes)
        .map(|p| {
            let vals = &xv[p * plane..(p + 1) * plane];
            if is_max {
                vals.iter().copied().fold(f64::NEG_INFINITY, |m, v| {
                    if v > m || v.is_nan() { v } else { m }
                })
            } else {
                vals.iter().sum::<f64>() / plane as f64
            }
        })
        .collect();
    Ok(Tensor::from_f64(out_ty.dtype, out_ty.shape, &out))
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let [x] = inputs else {
        return Err(OpError::Arity {
            expected: "1".into(),
            actual: inputs.len(),
        });
    };
    let t = match op {
        Op::MaxPool(a) => eval_pool(a, x, true)?,
        Op::AveragePool(a) => eval_pool(a, x, false)?,
        Op::GlobalAveragePool => eval_global(x, false)?,
        Op::GlobalMaxPool => eval_global(x, true)?,
        _ => return Err(wrong_family(op, "pool")),
    };
    Ok(vec![t])
}

fn window_attrs(a: &PoolAttrs) -> Vec<(&'static str, String)> {
    vec![
        ("kernel_shape", fmt_list(&a.kernel)),
        ("strides", fmt_list(&a.strides)),
        ("dilations", fmt_list(&a.dilations)),
        ("pads", fmt_list(&a.pads)),
        ("ceil_mode", u8::from(a.ceil_mode).to_string()),
    ]
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::MaxPool(a) => window_attrs(a),
        Op::AveragePool(a) => {
            let mut v = window_attrs(a);
            v.push((
                "count_include_pad",
                u8::from(a.count_include_pad).to_string(),
            ));
            v
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{A, convert, f32_tensor as t, f32t};

    fn run(op: &Op, x: &Tensor) -> (Vec<usize>, Vec<f64>) {
        let ty = op.infer(&[x.ty()]).unwrap().remove(0);
        let y = op.eval(&[x]).unwrap().remove(0);
        assert_eq!(y.ty(), ty);
        (y.shape().to_vec(), y.to_f64_vec())
    }

    fn pool(op: &str, opset: i64, x: &Tensor, attrs: Vec<(&str, A)>) -> Op {
        convert(op, opset, attrs, &[x.ty()], 1).unwrap()
    }

    #[test]
    fn max_pool_basic_and_dilated() {
        let x = t(&[1, 1, 4, 4], &(1..=16).map(f64::from).collect::<Vec<_>>());
        let op = pool(
            "MaxPool",
            12,
            &x,
            vec![
                ("kernel_shape", A::Is(vec![2, 2])),
                ("strides", A::Is(vec![2, 2])),
            ],
        );
        assert_eq!(run(&op, &x), (vec![1, 1, 2, 2], vec![6., 8., 14., 16.]));
        // ONNX spec example maxpool_2d_dilations.
        let op = pool(
            "MaxPool",
            12,
            &x,
            vec![
                ("kernel_shape", A::Is(vec![2, 2])),
                ("dilations", A::Is(vec![2, 2])),
            ],
        );
        assert_eq!(run(&op, &x), (vec![1, 1, 2, 2], vec![11., 12., 15., 16.]));
    }

    #[test]
    fn max_pool_ceil_mode() {
        // ONNX spec example maxpool_2d_ceil.
        let x = t(&[1, 1, 4, 4], &(1..=16).map(f64::from).collect::<Vec<_>>());
        let attrs = |ceil| {
            vec![
                ("kernel_shape", A::Is(vec![3, 3])),
                ("strides", A::Is(vec![2, 2])),
                ("ceil_mode", A::I(ceil)),
            ]
        };
        let op = pool("MaxPool", 12, &x, attrs(1));
        assert_eq!(run(&op, &x), (vec![1, 1, 2, 2], vec![11., 12., 15., 16.]));
        let op = pool("MaxPool", 12, &x, attrs(0));
        assert_eq!(run(&op, &x), (vec![1, 1, 1, 1], vec![11.]));
        // ceil adds a window over [5, past the end].
        let x = t(&[1, 1, 5], &[1., 2., 3., 4., 5.]);
        let a = vec![
            ("kernel_shape", A::Is(vec![2])),
            ("strides", A::Is(vec![2])),
            ("ceil_mode", A::I(1)),
        ];
        assert_eq!(
            run(&pool("MaxPool", 10, &x, a), &x),
            (vec![1, 1, 3], vec![2., 4., 5.])
        );
        // A window that would start inside the end padding is dropped: 4 inputs, pad 1 at
        // the end, k 2, s 2 gives ceil(3 / 2) + 1 = 3 windows, the last starting at 4.
        let x = t(&[1, 1, 4], &[1., 2., 3., 4.]);
        let a = vec![
            ("kernel_shape", A::Is(vec![2])),
            ("strides", A::Is(vec![2])),
            ("pads", A::Is(vec![0, 1])),
            ("ceil_mode", A::I(1)),
        ];
        assert_eq!(
            run(&pool("MaxPool", 10, &x, a), &x),
            (vec![1, 1, 2], vec![2., 4.])
        );
    }

    #[test]
    fn max_pool_excludes_pads() {
        let x = t(&[1, 1, 3], &[-1., -2., -3.]);
        let op = pool(
            "MaxPool",
            8,
            &x,
            vec![
                ("kernel_shape", A::Is(vec![3])),
                ("pads", A::Is(vec![1, 1])),
            ],
        );
        assert_eq!(run(&op, &x), (vec![1, 1, 3], vec![-1., -1., -2.]));
        // 8-bit integers since opset 12.
        let xi = Tensor::from_i64(DType::I8, vec![1, 1, 3], &[-1, -2, -3]);
        let y = op.eval(&[&xi]).unwrap().remove(0);
        assert_eq!(y.to_i64_vec(), vec![-1, -1, -2]);
    }

    #[test]
    fn average_pool_count_include_pad() {
        let x = t(&[1, 1, 3], &[1., 2., 3.]);
        let attrs = |cip| {
            vec![
                ("kernel_shape", A::Is(vec![3])),
                ("pads", A::Is(vec![1, 1])),
                ("count_include_pad", A::I(cip)),
            ]
        };
        let op = pool("AveragePool", 11, &x, attrs(0));
        assert_eq!(run(&op, &x), (vec![1, 1, 3], vec![1.5, 2., 2.5]));
        let op = pool("AveragePool", 11, &x, attrs(1));
        let (_, y) = run(&op, &x);
        assert_eq!(y[..2], [1., 2.]);
        assert!((y[2] - 5. / 3.).abs() < 1e-6);
        // ceil_mode: the last window reaches past the (zero) end padding; those taps do not
        // count even with count_include_pad.
        let x = t(&[1, 1, 5], &[1., 2., 3., 4., 5.]);
        for cip in [0, 1] {
            let op = pool(
                "AveragePool",
                19,
                &x,
                vec![
                    ("kernel_shape", A::Is(vec![2])),
                    ("strides", A::Is(vec![2])),
                    ("ceil_mode", A::I(1)),
                    ("count_include_pad", A::I(cip)),
                ],
            );
            assert_eq!(run(&op, &x), (vec![1, 1, 3], vec![1.5, 3.5, 5.]));
        }
        // 2-d with pads: corner window over [pad, pad; pad, 0..] etc.
        let x = t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
        let attrs2 = |cip| {
            vec![
                ("kernel_shape", A::Is(vec![2, 2])),
                ("pads", A::Is(vec![1, 1, 1, 1])),
                ("strides", A::Is(vec![2, 2])),
                ("count_include_pad", A::I(cip)),
            ]
        };
        let op = pool("AveragePool", 7, &x, attrs2(0));
        assert_eq!(run(&op, &x), (vec![1, 1, 2, 2], vec![1., 2., 3., 4.]));
        let op = pool("AveragePool", 7, &x, attrs2(1));
        assert_eq!(run(&op, &x), (vec![1, 1, 2, 2], vec![0.25, 0.5, 0.75, 1.]));
    }

    #[test]
    fn pool_auto_pad() {
        let x = t(&[1, 1, 5], &[1., 2., 3., 4., 5.]);
        let op = pool(
            "AveragePool",
            11,
            &x,
            vec![
                ("kernel_shape", A::Is(vec![2])),
                ("strides", A::Is(vec![2])),
                ("auto_pad", A::S("SAME_UPPER")),
                ("ceil_mode", A::I(1)),
            ],
        );
        let Op::AveragePool(a) = &op else { panic!() };
        assert_eq!((a.pads.clone(), a.ceil_mode), (vec![0, 1], false));
        assert_eq!(run(&op, &x), (vec![1, 1, 3], vec![1.5, 3.5, 5.]));
        let op = pool(
            "MaxPool",
            11,
            &x,
            vec![
                ("kernel_shape", A::Is(vec![3])),
                ("auto_pad", A::S("SAME_LOWER")),
            ],
        );
        assert_eq!(run(&op, &x), (vec![1, 1, 5], vec![2., 3., 4., 5., 5.]));
        let op = pool(
            "MaxPool",
            11,
            &x,
            vec![
                ("kernel_shape", A::Is(vec![3])),
                ("auto_pad", A::S("VALID")),
                ("pads", A::Is(vec![1, 1])),
            ],
        );
        assert_eq!(run(&op, &x), (vec![1, 1, 3], vec![3., 4., 5.]));
    }

    #[test]
    fn global_pools() {
        let x = t(&[1, 2, 2, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
        let op = convert("GlobalAveragePool", 7, vec![], &[x.ty()], 1).unwrap();
        assert_eq!(run(&op, &x), (vec![1, 2, 1, 1], vec![2.5, 6.5]));
        let op = convert("GlobalMaxPool", 7, vec![], &[x.ty()], 1).unwrap();
        assert_eq!(run(&op, &x), (vec![1, 2, 1, 1], vec![4., 8.]));
        assert_eq!(name(&op), "GlobalMaxPool");
        assert!(matches!(
            op.infer(&[f32t(&[2, 3])]),
            Err(OpError::ShapeMismatch { .. })
        ));
        let i = TensorType::new(DType::I64, vec![1, 1, 2]);
        assert!(matches!(op.infer(&[i]), Err(OpError::DType { .. })));
    }

    #[test]
    fn pool_errors() {
        let x = f32t(&[1, 1, 4, 4]);
        let e = convert("MaxPool", 12, vec![], std::slice::from_ref(&x), 1);
        assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
        let k = || vec![("kernel_shape", A::Is(vec![2, 2]))];
        // With Indices: the host kernel's op; storage_order 0 or 1.
        let e = convert("MaxPool", 12, k(), std::slice::from_ref(&x), 2);
        let indices = |e: &Result<Op, OpError>| {
            matches!(e, Ok(Op::Sample(crate::ops::SampleOp::MaxPoolIndices(_))))
        };
        assert!(indices(&e), "{e:?}");
        let mut bad = k();
        bad.push(("storage_order", A::I(2)));
        let e = convert("MaxPool", 12, bad, std::slice::from_ref(&x), 2);
        assert!(matches!(e, Err(OpError::InvalidAttribute { .. })), "{e:?}");
        let e = convert(
            "MaxPool",
            12,
            vec![("kernel_shape", A::Is(vec![2]))],
            std::slice::from_ref(&x),
            1,
        );
        assert!(matches!(e, Err(OpError::ShapeMismatch { .. })));
        let mut d = k();
        d.push(("dilations", A::Is(vec![2, 2])));
        let e = convert("MaxPool", 9, d, std::slice::from_ref(&x), 1);
        assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
        // Window larger than the padded input.
        let op = convert(
            "MaxPool",
            12,
            vec![("kernel_shape", A::Is(vec![5, 5]))],
            &[x],
            1,
        )
        .unwrap();
        assert!(matches!(
            op.infer(&[f32t(&[1, 1, 4, 4])]),
            Err(OpError::ShapeMismatch { .. })
        ));
        // AveragePool is float-only.
        let op = convert("AveragePool", 12, k(), &[f32t(&[1, 1, 4, 4])], 1).unwrap();
        let i = TensorType::new(DType::I8, vec![1, 1, 4, 4]);
        assert!(matches!(op.infer(&[i]), Err(OpError::DType { .. })));
        assert_eq!(
            attrs(&op),
            vec![
                ("kernel_shape", "[2,2]".to_string()),
                ("strides", "[1,1]".to_string()),
                ("dilations", "[1,1]".to_string()),
                ("pads", "[0,0,0,0]".to_string()),
                ("ceil_mode", "0".to_string()),
                ("count_include_pad", "0".to_string()),
            ]
        );
    }
}
