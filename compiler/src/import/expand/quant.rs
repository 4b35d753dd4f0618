//! Linear quantization as ordinary nodes: `QuantizeLinear` (Div → Round half-to-even → Add
//! zero point → Clip to the output range → Cast), `DequantizeLinear` ((Cast(x) − Cast(zero
//! point)) × scale → Cast), `DynamicQuantizeLinear` (ONNX's function body: uint8 scale and zero
//! point from the min/max of x, then the quantization above) and `MatMulInteger` (the
//! zero-point-shifted operands multiplied exactly by the f32 MatMul, in chunks of the
//! reduction: [`super::exact`]), following onnx's reference implementation.
//!
//! Scale and zero point may be run-time values: per-tensor ones are reshaped to scalars,
//! per-axis ones to `[1.., C, ..1]`, blocked ones repeated `block_size` times along the axis
//! (Reshape → Expand → Reshape, sliced to the axis length when the last block is partial).
//! Quantized types: int8, uint8, int16, uint16, int4, uint4, int2, uint2 (int32 inputs to
//! DequantizeLinear too), and the floats of onnx's reference: float8 E4M3FN, E4M3FNUZ, E5M2,
//! E5M2FNUZ (`y = Cast(x / scale)` with the node's `saturate`; the zero point must be 0: a
//! constant one that is not is an error, a run-time one is not read) and float4 E2M1
//! (`y = Cast(x / scale + zero_point)`; DequantizeLinear reads no zero point, like the
//! reference).

use arenac_proto::NodeProto;

use super::exact::{Exact, Product, shift_bound};
use super::{Emitter, input, int_attr, output, unsupported};
use crate::error::OpError;
use crate::ir::types::{DType, TensorType};
use crate::ops::ctx::{NodeCtx, norm_axis};

/// The quantized integer types and their ranges.
fn quant_range(dt: DType) -> Option<(f64, f64)> {
    Some(match dt {
        DType::U8 => (0.0, 255.0),
        DType::I8 => (-128.0, 127.0),
        DType::U16 => (0.0, 65535.0),
        DType::I16 => (-32768.0, 32767.0),
        DType::U4 => (0.0, 15.0),
        DType::I4 => (-8.0, 7.0),
        DType::U2 => (0.0, 3.0),
        DType::I2 => (-2.0, 1.0),
        _ => return None,
    })
}

/// The float8 types, whose zero point must be 0.
fn is_float8(dt: DType) -> bool {
    matches!(
        dt,
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ
    )
}

/// A float8 zero point (input `i`) that is a constant must be all zeros (ONNX: "must be 0").
fn check_float8_zero(ctx: &NodeCtx<'_>, i: usize, what: &str) -> Result<(), OpError> {
    match ctx.const_value(i) {
        Some(z) if z.to_f64_vec().iter().any(|&v| v != 0.0) => Err(unsupported(format!(
            "a float8 {what} must be 0 (ONNX gives it no other meaning)"
        ))),
        _ => Ok(()),
    }
}

/// A dtype attribute (`output_dtype`, `precision`): `None` when absent or 0.
fn dtype_attr(ctx: &NodeCtx<'_>, name: &str) -> Result<Option<DType>, OpError> {
    match ctx.attr_int(name, 0)? {
        0 => Ok(None),
        code => i32::try_from(code)
            .ok()
            .and_then(DType::from_onnx)
            .map(Some)
            .ok_or_else(|| {
                OpError::attr(
                    name,
                    format!("element type {code} is not one arenac handles (strings, complex and 6-bit floats are not)"),
                )
            }),
    }
}

/// Makes the scale or zero point `p` (of shape `p_shape`) broadcastable to `x_shape`:
/// per-tensor (one element), per-axis (1-d of `x_shape[axis]`), or blocked along `axis`.
fn broadcast_param(
    e: &mut Emitter,
    what: &str,
    p: &str,
    p_shape: &[usize],
    x_shape: &[usize],
    axis: i64,
    block: i64,
) -> Result<String, OpError> {
    if p_shape.iter().product::<usize>() == 1 {
        return Ok(if p_shape.is_empty() {
            p.to_string()
        } else {
            e.reshape(p, &[], None)
        });
    }
    let ax = norm_axis("axis", axis, x_shape.len())?;
    let bad = |why: &str| {
        OpError::shape(
            format!("{what} does not fit x along axis {ax}: {why}"),
            &[p_shape, x_shape],
        )
    };
    if block <= 0 {
        if p_shape.len() != 1 || p_shape[0] != x_shape[ax] {
            return Err(bad("a per-axis one must be 1-d of the axis length"));
        }
        if x_shape.len() == 1 {
            return Ok(p.to_string());
        }
        let mut dims = vec![1; x_shape.len()];
        dims[ax] = x_shape[ax];
        return Ok(e.reshape(p, &dims, None));
    }
    let b = usize::try_from(block).map_err(|_| bad("block_size"))?;
    let blocks = x_shape[ax].div_ceil(b);
    let fits = p_shape.len() == x_shape.len()
        && p_shape
            .iter()
            .zip(x_shape)
            .enumerate()
            .all(|(i, (&p, &x))| if i == ax { p == blocks } else { p == x });
    if !fits {
        return Err(bad(&format!(
            "a blocked one must match x except {blocks} blocks of {b} along the axis"
        )));
    }
    let mut one = p_shape.to_vec();
    one.insert(ax + 1, 1);
    let r = e.reshape(p, &one, None);
    one[ax + 1] = b;
    super::const_numel(&one, "blocked scale")?;
    let target = e.ints(&super::dims_i64(&one));
    let ex = e.op("Expand", &[&r, &target], vec![]);
    let mut flat = p_shape.to_vec();
    flat[ax] = blocks * b;
    let fl = e.reshape(&ex, &flat, None);
    Ok(if blocks * b == x_shape[ax] {
        fl
    } else {
        e.slice(&fl, ax as i64, 0, x_shape[ax] as i64, 1)
    })
}

/// The scale or zero point `z` broadcastable to `x` (see [`broadcast_param`]) and cast to
/// `c`. A storage-type one (int4, float4, E8M0...) is cast first: the broadcasting ops
/// (Expand, Slice) do not take those types.
fn param(
    e: &mut Emitter,
    what: &str,
    (z, z_ty): (&str, &TensorType),
    x_ty: &TensorType,
    axis: i64,
    block: i64,
    c: DType,
) -> Result<String, OpError> {
    if z_ty.dtype.is_storage() {
        let zc = e.cast(z, z_ty.dtype, c);
        return broadcast_param(e, what, &zc, &z_ty.shape, &x_ty.shape, axis, block);
    }
    let zb = broadcast_param(e, what, z, &z_ty.shape, &x_ty.shape, axis, block)?;
    Ok(e.cast(&zb, z_ty.dtype, c))
}

/// One quantization: `y = saturate(round(x / scale) + zero_point)` as `out_dt`.
struct Quantize<'a> {
    x: (&'a str, &'a TensorType),
    scale: (&'a str, &'a TensorType),
    zero: Option<(&'a str, &'a TensorType)>,
    axis: i64,
    block: i64,
    out_dt: DType,
    precision: Option<DType>,
    /// The `saturate` attribute (float8 outputs).
    saturate: bool,
}

impl Quantize<'_> {
    /// Emits the nodes, the last one writing `y` (fresh when `None`).
    fn emit(&self, e: &mut Emitter, y: Option<&str>) -> Result<String, OpError> {
        let (x, x_ty) = self.x;
        let s_ty = self.scale.1;
        let float_out = is_float8(self.out_dt) || self.out_dt == DType::F4E2M1;
        let range = quant_range(self.out_dt);
        if range.is_none() && !float_out {
            return Err(unsupported(format!(
                "quantizing to {} is not supported (int8, uint8, int16, uint16, int4, uint4, \
                 int2, uint2, float8 and float4e2m1 are)",
                self.out_dt
            )));
        }
        if !x_ty.dtype.is_float() || !s_ty.dtype.is_float() || x_ty.dtype.is_storage() {
            return Err(unsupported(format!(
                "x and the scale must be floats (got {} and {})",
                x_ty.dtype, s_ty.dtype
            )));
        }
        // The division runs in x's type as the reference does (numpy's promotion when the
        // scale's differs), the rest in f32 (f64 for f64): exact on the rounded integers.
        let f = match self.precision {
            Some(p) if p.is_float() && !p.is_storage() => p,
            Some(p) => {
                return Err(OpError::attr(
                    "precision",
                    format!("{p} is not a computing float (f32, f16, bf16, f64)"),
                ));
            }
            None if x_ty.dtype == s_ty.dtype => x_ty.dtype,
            None if x_ty.dtype == DType::F64 || s_ty.dtype == DType::F64 => DType::F64,
            None => DType::F32,
        };
        let c = if f == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        let sf = param(e, "y_scale", self.scale, x_ty, self.axis, self.block, f)?;
        let xf = e.cast(x, x_ty.dtype, f);
        let q = e.op("Div", &[&xf, &sf], vec![]);
        let to = int_attr("to", i64::from(self.out_dt.to_onnx()));
        if is_float8(self.out_dt) {
            let sat = int_attr("saturate", i64::from(self.saturate));
            return Ok(e.op_maybe_to("Cast", &[&q], vec![to, sat], y));
        }
        if self.out_dt == DType::F4E2M1 {
            // No rounding to integers: x / scale (+ zero point) rounds to the nearest E2M1.
            let mut v = q;
            if let Some((z, z_ty)) = self.zero {
                let zf = param(e, "y_zero_point", (z, z_ty), x_ty, self.axis, self.block, c)?;
                let vc = e.cast(&v, f, c);
                v = e.op("Add", &[&vc, &zf], vec![]);
            }
            return Ok(e.op_maybe_to("Cast", &[&v], vec![to], y));
        }
        let (lo, hi) = range.unwrap_or((0.0, 0.0));
        let r = e.op("Round", &[&q], vec![]);
        let mut v = e.cast(&r, f, c);
        if let Some((z, z_ty)) = self.zero {
            let zf = param(e, "y_zero_point", (z, z_ty), x_ty, self.axis, self.block, c)?;
            v = e.op("Add", &[&v, &zf], vec![]);
        }
        let lo = e.scalar(c, lo);
        let hi = e.scalar(c, hi);
        let clipped = e.op("Clip", &[&v, &lo, &hi], vec![]);
        Ok(e.op_maybe_to("Cast", &[&clipped], vec![to], y))
    }
}

/// Expands one QuantizeLinear node.
pub(super) fn expand_quantize(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
) -> Result<(), OpError> {
    ctx.expect_inputs(2, 3)?;
    let x = input(ctx, node, 0).ok_or_else(|| unsupported("x is required"))?;
    let scale = input(ctx, node, 1).ok_or_else(|| unsupported("y_scale is required"))?;
    let zero = input(ctx, node, 2);
    let attr_dt = dtype_attr(ctx, "output_dtype")?;
    let out_dt = match (zero, attr_dt) {
        (Some((_, z)), Some(a)) if z.dtype != a => {
            return Err(OpError::attr(
                "output_dtype",
                format!("{a} differs from the zero point's {}", z.dtype),
            ));
        }
        (Some((_, z)), _) => z.dtype,
        (None, Some(a)) => a,
        (None, None) => DType::U8,
    };
    if is_float8(out_dt) {
        check_float8_zero(ctx, 2, "y_zero_point")?;
    }
    let saturate = match ctx.attr_int("saturate", 1)? {
        0 => false,
        1 => true,
        v => return Err(OpError::attr("saturate", format!("{v} is neither 0 nor 1"))),
    };
    let q = Quantize {
        x,
        scale,
        zero,
        axis: ctx.attr_int("axis", 1)?,
        block: ctx.attr_int("block_size", 0)?,
        out_dt,
        precision: dtype_attr(ctx, "precision")?,
        saturate,
    };
    q.emit(e, output(node, 0))?;
    Ok(())
}

/// Expands one DequantizeLinear node.
pub(super) fn expand_dequantize(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
) -> Result<(), OpError> {
    ctx.expect_inputs(2, 3)?;
    let (x, x_ty) = input(ctx, node, 0).ok_or_else(|| unsupported("x is required"))?;
    let (s, s_ty) = input(ctx, node, 1).ok_or_else(|| unsupported("x_scale is required"))?;
    let mut zero = input(ctx, node, 2);
    let float_x = is_float8(x_ty.dtype) || x_ty.dtype == DType::F4E2M1;
    if quant_range(x_ty.dtype).is_none() && x_ty.dtype != DType::I32 && !float_x {
        return Err(unsupported(format!(
            "dequantizing {} is not supported (int8, uint8, int16, uint16, int32, int4, uint4, \
             int2, uint2, float8 and float4e2m1 are)",
            x_ty.dtype
        )));
    }
    if is_float8(x_ty.dtype) {
        check_float8_zero(ctx, 2, "x_zero_point")?;
    }
    if float_x {
        // The reference multiplies the float x by the scale and reads no zero point.
        zero = None;
    }
    if !s_ty.dtype.is_float() {
        return Err(unsupported(format!(
            "x_scale must be a float (got {})",
            s_ty.dtype
        )));
    }
    let out_dt = dtype_attr(ctx, "output_dtype")?.unwrap_or(s_ty.dtype);
    if !out_dt.is_float() {
        return Err(OpError::attr(
            "output_dtype",
            format!("{out_dt} is not a float"),
        ));
    }
    let axis = ctx.attr_int("axis", 1)?;
    let block = ctx.attr_int("block_size", 0)?;
    // The reference: x as f32, minus the zero point (int32 - f32 promotes to f64), times the
    // scale (f64 scales promote to f64), then the output type.
    let mut c = if s_ty.dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let xf = e.cast(x, x_ty.dtype, DType::F32);
    let mut v = xf;
    if let Some((z, z_ty)) = zero {
        if z_ty.dtype != x_ty.dtype {
            return Err(unsupported(format!(
                "x_zero_point is {} but x is {}",
                z_ty.dtype, x_ty.dtype
            )));
        }
        if x_ty.dtype == DType::I32 {
            c = DType::F64;
        }
        let zf = param(e, "x_zero_point", (z, z_ty), x_ty, axis, block, c)?;
        let vc = e.cast(&v, DType::F32, c);
        v = e.op("Sub", &[&vc, &zf], vec![]);
    }
    let vc = e.cast(&v, DType::F32, c);
    let sf = param(e, "x_scale", (s, s_ty), x_ty, axis, block, c)?;
    let y = output(node, 0);
    if c == out_dt {
        e.op_maybe_to("Mul", &[&vc, &sf], vec![], y);
    } else {
        let m = e.op("Mul", &[&vc, &sf], vec![]);
        let to = int_attr("to", i64::from(out_dt.to_onnx()));
        e.op_maybe_to("Cast", &[&m], vec![to], y);
    }
    Ok(())
}

/// Expands one DynamicQuantizeLinear node (ONNX's function body).
pub(super) fn expand_dynamic(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
) -> Result<(), OpError> {
    ctx.expect_inputs(1, 1)?;
    let (x, x_ty) = input(ctx, node, 0).ok_or_else(|| unsupported("x is required"))?;
    if x_ty.dtype != DType::F32 {
        return Err(unsupported(format!("x must be float (got {})", x_ty.dtype)));
    }
    let f = DType::F32;
    let qmin = e.scalar(f, 0.0);
    let qmax = e.scalar(f, 255.0);
    let keep0 = || vec![int_attr("keepdims", 0)];
    let xmin = e.op("ReduceMin", &[x], keep0());
    let xmin = e.op("Min", &[&xmin, &qmin], vec![]);
    let xmax = e.op("ReduceMax", &[x], keep0());
    let xmax = e.op("Max", &[&xmax, &qmin], vec![]);
    let range = e.op("Sub", &[&xmax, &xmin], vec![]);
    let scale = e.op_maybe_to("Div", &[&range, &qmax], vec![], output(node, 1));
    let min_scaled = e.op("Div", &[&xmin, &scale], vec![]);
    let zp = e.op("Sub", &[&qmin, &min_scaled], vec![]);
    let zp = e.op("Clip", &[&zp, &qmin, &qmax], vec![]);
    let zp = e.op("Round", &[&zp], vec![]);
    let to = int_attr("to", i64::from(DType::U8.to_onnx()));
    let zp = e.op_maybe_to("Cast", &[&zp], vec![to], output(node, 2));
    let scalar_f = TensorType::new(f, vec![]);
    let scalar_u8 = TensorType::new(DType::U8, vec![]);
    let q = Quantize {
        x: (x, x_ty),
        scale: (&scale, &scalar_f),
        zero: Some((&zp, &scalar_u8)),
        axis: 1,
        block: 0,
        out_dt: DType::U8,
        precision: None,
        saturate: true,
    };
    q.emit(e, output(node, 0))?;
    Ok(())
}

/// Expands one MatMulInteger node: int32 MatMul of `A - a_zero_point` and `B - b_zero_point`
/// (per-tensor or per-row `a_zero_point`, per-tensor or per-column `b_zero_point`), summed
/// exactly on the f32 MatMul ([`super::exact`]).
pub(super) fn expand_matmul_integer(
    ctx: &NodeCtx<'_>,
    node: &NodeProto,
    e: &mut Emitter,
) -> Result<(), OpError> {
    ctx.expect_inputs(2, 4)?;
    let (a, a_ty) = input(ctx, node, 0).ok_or_else(|| unsupported("A is required"))?;
    let (b, b_ty) = input(ctx, node, 1).ok_or_else(|| unsupported("B is required"))?;
    let mut shifted = |m: &str, m_ty: &TensorType, slot: usize, zp_slot: usize, row: bool| {
        if !matches!(m_ty.dtype, DType::U8 | DType::I8) {
            return Err(unsupported(format!(
                "MatMulInteger takes int8/uint8 operands (got {})",
                m_ty.dtype
            )));
        }
        let mf = e.cast(m, m_ty.dtype, DType::F32);
        let Some((z, z_ty)) = input(ctx, node, zp_slot) else {
            return Ok((mf, shift_bound(m_ty.dtype, ctx.input_value(slot), None)));
        };
        if z_ty.dtype != m_ty.dtype {
            return Err(unsupported(format!(
                "a zero point is {} but its operand is {}",
                z_ty.dtype, m_ty.dtype
            )));
        }
        let zs = &z_ty.shape;
        let rank = m_ty.shape.len();
        let zb = if zs.iter().product::<usize>() == 1 {
            e.reshape(z, &[], None)
        } else if row && zs.len() == 1 && rank >= 2 && zs[0] == m_ty.shape[rank - 2] {
            // A's per-row zero point [M] → [M, 1].
            e.reshape(z, &[zs[0], 1], None)
        } else {
            z.to_string()
        };
        let zf = e.cast(&zb, z_ty.dtype, DType::F32);
        let bound = shift_bound(
            m_ty.dtype,
            ctx.input_value(slot),
            Some((z_ty.dtype, ctx.input_value(zp_slot))),
        );
        Ok((e.op("Sub", &[&mf, &zf], vec![]), bound))
    };
    let (af, a_bound) = shifted(a, a_ty, 0, 2, true)?;
    let (bf, b_bound) = shifted(b, b_ty, 1, 3, false)?;
    Exact {
        a: &af,
        a_bound,
        b: &bf,
        b_bound,
        units: a_ty.shape.last().copied().unwrap_or(1),
        per_unit: 1,
        product: Product::MatMul {
            b_rank: b_ty.shape.len(),
        },
    }
    .emit(e, output(node, 0))?;
    Ok(())
}
