//! Ops that fold at import: Shape, Size, ConstantOfShape, Range, the window functions (and Constant, which the importer
//! turns straight into a constant value).
//!
//! Shape and Size fold from their input's type ([`Op::fold_from_types`]); ConstantOfShape and Range take
//! every input as a constant, so they have no data inputs and always fold.

use crate::error::OpError;
use crate::ir::tensor::{Scalar, Tensor};
use crate::ir::types::{DType, TensorType, checked_numel};
use crate::ops::ctx::NodeCtx;
use crate::ops::util::{expect_arity, fmt_list, wrong_family};
use crate::ops::{MAX_OPSET, MIN_OPSET, Op, OpDef};

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    OpDef {
        op_type: "Shape",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_shape,
    },
    OpDef {
        op_type: "Size",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_size,
    },
    OpDef {
        op_type: "ConstantOfShape",
        since: 9,
        until: MAX_OPSET,
        convert: convert_constant_of_shape,
    },
    OpDef {
        op_type: "HannWindow",
        since: 17,
        until: MAX_OPSET,
        convert: convert_window,
    },
    OpDef {
        op_type: "HammingWindow",
        since: 17,
        until: MAX_OPSET,
        convert: convert_window,
    },
    OpDef {
        op_type: "BlackmanWindow",
        since: 17,
        until: MAX_OPSET,
        convert: convert_window,
    },
    OpDef {
        op_type: "Range",
        since: 11,
        until: MAX_OPSET,
        convert: convert_range,
    },
];

fn convert_shape(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let rank = ctx.input_type(0)?.shape.len() as i64;
    let (start, end) = if ctx.opset >= 15 {
        (ctx.attr_int("start", 0)?, ctx.attr_int("end", rank)?)
    } else {
        (0, rank)
    };
    // Negative values count from the back; both clamp to [0, rank]; an empty range is allowed.
    let clamp = |v: i64| {
        let v = if v < 0 { v.saturating_add(rank) } else { v };
        v.clamp(0, rank) as usize
    };
    let start = clamp(start);
    let end = clamp(end).max(start);
    Ok(Op::Shape { start, end })
}

fn convert_size(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    Ok(Op::Size)
}

/// The three window functions of the signal ops (opset 17).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowKind {
    /// `sin²(πn/N)`.
    Hann,
    /// `25/46 - 21/46·cos(2πn/N)`.
    Hamming,
    /// `0.42 - 0.5·cos(2πn/N) + 0.08·cos(4πn/N)`.
    Blackman,
}

impl WindowKind {
    fn name(self) -> &'static str {
        match self {
            WindowKind::Hann => "HannWindow",
            WindowKind::Hamming => "HammingWindow",
            WindowKind::Blackman => "BlackmanWindow",
        }
    }

    /// Element `n` for the denominator `den` (`len` periodic, `len - 1` symmetric).
    fn value(self, n: usize, den: f64) -> f64 {
        use std::f64::consts::PI;
        let x = n as f64 / den;
        match self {
            WindowKind::Hann => (PI * x).sin().powi(2),
            WindowKind::Hamming => 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * (2.0 * PI * x).cos(),
            WindowKind::Blackman => 0.42 - 0.5 * (2.0 * PI * x).cos() + 0.08 * (4.0 * PI * x).cos(),
        }
    }
}

fn convert_window(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let kind = match ctx.op_type() {
        "HannWindow" => WindowKind::Hann,
        "HammingWindow" => WindowKind::Hamming,
        _ => WindowKind::Blackman,
    };
    let size_ty = ctx.input_type(0)?.clone();
    if !matches!(size_ty.dtype, DType::I32 | DType::I64) || size_ty.numel() != Some(1) {
        return Err(OpError::DType {
            input: 0,
            dtype: size_ty.dtype,
            expected: "an i32 or i64 scalar window length".into(),
        });
    }
    let size = ctx
        .take_const_ints(0)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    let len = usize::try_from(size)
        .map_err(|_| OpError::attr("size", format!("negative window length {size}")))?;
    let code = ctx.attr_int("output_datatype", 1)?;
    let dtype = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .filter(|d| *d != DType::Bool)
        .ok_or_else(|| {
            OpError::attr(
                "output_datatype",
                format!("element type {code} is not supported"),
            )
        })?;
    TensorType::new(dtype, vec![len])
        .bytes()
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| OpError::Overflow(format!("{} of length {len}", kind.name())))?;
    let periodic = ctx.attr_int("periodic", 1)? != 0;
    Ok(Op::Window {
        kind,
        len,
        periodic,
        dtype,
    })
}

fn convert_constant_of_shape(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(1, 1)?;
    let shape_ty = ctx.input_type(0)?;
    if shape_ty.shape.len() != 1 || shape_ty.dtype != DType::I64 {
        return Err(OpError::DType {
            input: 0,
            dtype: shape_ty.dtype,
            expected: format!("a 1-d i64 shape (got rank {})", shape_ty.shape.len()),
        });
    }
    let dims = ctx.take_const_ints(0)?.unwrap_or_default();
    let mut shape = Vec::with_capacity(dims.len());
    for d in dims {
        let d = usize::try_from(d)
            .map_err(|_| OpError::attr("input", format!("negative dim {d} in the shape")))?;
        shape.push(d);
    }
    TensorType::new(DType::F64, shape.clone())
        .bytes()
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| OpError::Overflow(format!("ConstantOfShape shape {shape:?}")))?;
    let value = match ctx.attr_tensor("value")? {
        Some(v) => {
            if v.numel() != 1 {
                return Err(OpError::attr(
                    "value",
                    format!("must hold one element, has {}", v.numel()),
                ));
            }
            v.reshaped(vec![])
                .ok_or_else(|| OpError::attr("value", "must hold one element"))?
        }
        None => Tensor::f32(vec![], &[0.0]),
    };
    Ok(Op::ConstantOfShape { shape, value })
}

fn convert_range(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(3, 3)?;
    let mut vals = Vec::with_capacity(3);
    for i in 0..3 {
        let ty = ctx.input_type(i)?.clone();
        let dtype0 = ctx.input_type(0)?.dtype;
        if ty.dtype == DType::Bool || ty.dtype != dtype0 {
            return Err(OpError::DType {
                input: i,
                dtype: ty.dtype,
                expected: format!("a number of the same dtype as input 0 ({dtype0})"),
            });
        }
        if ty.numel() != Some(1) {
            return Err(OpError::shape(
                format!("Range input {i} must be a scalar"),
                &[&ty.shape],
            ));
        }
        let t = ctx
            .take_const(i)?
            .unwrap_or_else(|| Tensor::i64(vec![], &[0]));
        let v = t
            .scalar_at(0)
            .ok_or_else(|| OpError::shape("Range input is empty", &[t.shape()]))?;
        vals.push(v);
    }
    let dtype = ctx.input_type(0)?.dtype;
    let (start, limit, delta) = (vals[0], vals[1], vals[2]);
    let len = match (start, limit, delta) {
        (Scalar::Int(s), Scalar::Int(l), Scalar::Int(d)) => {
            if d == 0 {
                return Err(OpError::attr("delta", "must not be zero"));
            }
            // ceil((l - s) / d) in exact integer arithmetic.
            let (num, den) = (i128::from(l) - i128::from(s), i128::from(d));
            let q = num / den;
            let q = if num % den != 0 && (num < 0) == (den < 0) {
                q + 1
            } else {
                q
            };
            usize::try_from(q.max(0)).map_err(|_| OpError::Overflow("Range length".into()))?
        }
        _ => {
            let (s, l, d) = (start.as_f64(), limit.as_f64(), delta.as_f64());
            if d == 0.0 || !d.is_finite() || !s.is_finite() || !l.is_finite() {
                return Err(OpError::attr(
                    "delta",
                    format!("Range({s}, {l}, {d}) has no finite length"),
                ));
            }
            let n = ((l - s) / d).ceil().max(0.0);
            if n >= usize::MAX as f64 {
                return Err(OpError::Overflow(format!("Range({s}, {l}, {d}) length")));
            }
            n as usize
        }
    };
    TensorType::new(dtype, vec![len])
        .bytes()
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| OpError::Overflow(format!("Range length {len}")))?;
    Ok(Op::Range {
        dtype,
        start,
        delta,
        len,
    })
}

/// Printed op name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::Shape { .. } => "Shape",
        Op::Size => "Size",
        Op::Window { kind, .. } => kind.name(),
        Op::ConstantOfShape { .. } => "ConstantOfShape",
        Op::Range { .. } => "Range",
        _ => "?",
    }
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    match op {
        Op::Shape { start, end } => {
            expect_arity(inputs, 1)?;
            let rank = inputs[0].shape.len();
            if start > end || *end > rank {
                return Err(OpError::shape(
                    format!("Shape range {start}..{end} out of bounds"),
                    &[&inputs[0].shape],
                ));
            }
            Ok(vec![TensorType::new(DType::I64, vec![end - start])])
        }
        Op::Size => {
            expect_arity(inputs, 1)?;
            Ok(vec![TensorType::new(DType::I64, vec![])])
        }
        Op::Window { len, dtype, .. } => {
            expect_arity(inputs, 0)?;
            Ok(vec![TensorType::new(*dtype, vec![*len])])
        }
        Op::ConstantOfShape { shape, value } => {
            expect_arity(inputs, 0)?;
            if value.numel() != 1 {
                return Err(OpError::attr("value", "must hold one element"));
            }
            let t = TensorType::new(value.dtype(), shape.clone());
            match t.bytes() {
                Some(b) if b <= isize::MAX as usize => Ok(vec![t]),
                _ => Err(OpError::Overflow(format!("ConstantOfShape output {t}"))),
            }
        }
        Op::Range { dtype, len, .. } => {
            expect_arity(inputs, 0)?;
            let t = TensorType::new(*dtype, vec![*len]);
            match t.bytes() {
                Some(b) if b <= isize::MAX as usize => Ok(vec![t]),
                _ => Err(OpError::Overflow(format!("Range output {t}"))),
            }
        }
        _ => Err(wrong_family(op, "constant")),
    }
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    infer(op, &types)?;
    match op {
        Op::Shape { start, end } => {
            let dims: Vec<i64> = inputs[0].shape()[*start..*end]
                .iter()
                .map(|&d| d as i64)
                .collect();
            Ok(vec![Tensor::i64(vec![dims.len()], &dims)])
        }
        Op::Size => {
            let n = i64::try_from(inputs[0].numel())
                .map_err(|_| OpError::Overflow("Size of the input".into()))?;
            Ok(vec![Tensor::i64(vec![], &[n])])
        }
        Op::Window {
            kind,
            len,
            periodic,
            dtype,
        } => {
            let den = if *periodic {
                *len as f64
            } else {
                *len as f64 - 1.0
            };
            let v: Vec<f64> = (0..*len).map(|n| kind.value(n, den)).collect();
            Ok(vec![Tensor::from_f64(*dtype, vec![*len], &v)])
        }
        Op::ConstantOfShape { shape, value } => {
            // The value's bytes repeated: exact for every dtype (NaN payloads included).
            let one = value
                .bytes()
                .get(..value.dtype().size())
                .ok_or_else(|| OpError::attr("value", "must hold one element"))?;
            let n = checked_numel(shape).ok_or_else(|| {
                OpError::Overflow(format!("shape {shape:?} has too many elements"))
            })?;
            let t = Tensor::from_bytes(value.dtype(), shape.clone(), one.repeat(n).into())
                .map_err(|e| OpError::Overflow(e.to_string()))?;
            Ok(vec![t])
        }
        Op::Range {
            dtype,
            start,
            delta,
            len,
        } => {
            let t = match (start, delta) {
                (Scalar::Int(s), Scalar::Int(d)) => {
                    let v: Vec<i64> = (0..*len as i64)
                        .map(|i| s.wrapping_add(i.wrapping_mul(*d)))
                        .collect();
                    Tensor::from_i64(*dtype, vec![*len], &v)
                }
                _ => {
                    let (s, d) = (start.as_f64(), delta.as_f64());
                    let v: Vec<f64> = (0..*len).map(|i| s + i as f64 * d).collect();
                    Tensor::from_f64(*dtype, vec![*len], &v)
                }
            };
            Ok(vec![t])
        }
        _ => Err(wrong_family(op, "constant")),
    }
}

fn fmt_scalar(s: Scalar) -> String {
    match s {
        Scalar::Int(v) => v.to_string(),
        Scalar::Float(v) => format!("{v:?}"),
    }
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::Shape { start, end } => vec![("start", start.to_string()), ("end", end.to_string())],
        Op::Size => vec![],
        Op::Window {
            len,
            periodic,
            dtype,
            ..
        } => vec![
            ("len", len.to_string()),
            ("periodic", periodic.to_string()),
            ("dtype", dtype.name().to_string()),
        ],
        Op::ConstantOfShape { shape, value } => {
            let v = value.scalar_at(0).map_or_else(|| "?".into(), fmt_scalar);
            vec![
                ("shape", fmt_list(shape)),
                ("value", format!("{}:{v}", value.dtype())),
            ]
        }
        Op::Range {
            dtype,
            start,
            delta,
            len,
        } => vec![
            ("dtype", dtype.to_string()),
            ("start", fmt_scalar(*start)),
            ("delta", fmt_scalar(*delta)),
            ("len", len.to_string()),
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ctx::CtxInput;
    use crate::ops::test_util::{cnst, convert_node, data_named, int_attr};
    use arenac_proto::{AttributeProto, NodeProto, TensorProto};

    fn node(op: &str, attrs: Vec<AttributeProto>) -> NodeProto {
        crate::ops::test_util::node(op, 1, attrs)
    }

    fn data(dtype: DType, shape: &[usize]) -> CtxInput {
        data_named("x", TensorType::new(dtype, shape.to_vec()))
    }

    fn convert(node: &NodeProto, opset: i64, inputs: Vec<CtxInput>) -> Result<Op, OpError> {
        convert_node(node, opset, inputs).map(|(op, _)| op)
    }

    fn run(op: &Op, inputs: &[&Tensor]) -> Tensor {
        let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
        let ty = infer(op, &types).unwrap().remove(0);
        let y = eval(op, inputs).unwrap().remove(0);
        assert_eq!(y.ty(), ty);
        y
    }

    #[test]
    fn windows_follow_their_formulas() {
        let win = |op: &str, len: i64, periodic: i64| {
            let size = Tensor::i64(vec![], &[len]);
            let n = node(op, vec![int_attr("periodic", periodic)]);
            let op = convert(&n, 17, vec![cnst(size)]).unwrap();
            run(&op, &[]).to_f32_vec()
        };
        let close = |a: Vec<f32>, b: &[f32]| {
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() < 1e-6, "{a:?} vs {b:?}");
            }
        };
        // Periodic: denominator N; symmetric: N - 1 (sin², 25/46 - 21/46 cos, Blackman).
        close(win("HannWindow", 4, 1), &[0.0, 0.5, 1.0, 0.5]);
        close(win("HannWindow", 3, 0), &[0.0, 1.0, 0.0]);
        close(win("HammingWindow", 3, 0), &[4.0 / 46.0, 1.0, 4.0 / 46.0]);
        close(win("BlackmanWindow", 4, 1), &[0.0, 0.34, 1.0, 0.34]);
        close(win("HannWindow", 0, 1), &[]);
        let neg = Tensor::i64(vec![], &[-2]);
        assert!(convert(&node("HannWindow", vec![]), 17, vec![cnst(neg)]).is_err());
        let f = Tensor::f32(vec![], &[2.0]);
        assert!(convert(&node("HannWindow", vec![]), 17, vec![cnst(f)]).is_err());
    }

    #[test]
    fn size_counts_elements_and_folds_from_types() {
        for shape in [vec![2, 3, 4], vec![], vec![5, 0]] {
            let n: usize = shape.iter().product();
            let x = Tensor::f32(shape.clone(), &vec![1.0; n]);
            let op = convert(&node("Size", vec![]), 13, vec![cnst(x.clone())]).unwrap();
            assert_eq!(op, Op::Size);
            assert_eq!(run(&op, &[&x]).to_i64_vec(), vec![n as i64]);
            let folded = op.fold_from_types(&[x.ty()]).unwrap().remove(0);
            assert_eq!(
                (folded.shape().to_vec(), folded.to_i64_vec()),
                (vec![], vec![n as i64])
            );
        }
        assert!(infer(&Op::Size, &[]).is_err());
    }

    #[test]
    fn shape_with_start_end() {
        let x = Tensor::f32(vec![2, 3, 4, 5], &[0.0; 120]);
        let n = node("Shape", vec![int_attr("start", 1), int_attr("end", -1)]);
        let op = convert(&n, 15, vec![cnst(x.clone())]).unwrap();
        assert_eq!(op, Op::Shape { start: 1, end: 3 });
        assert_eq!(run(&op, &[&x]).to_i64_vec(), vec![3, 4]);
        let types = [x.ty()];
        assert_eq!(
            op.fold_from_types(&types).unwrap()[0].to_i64_vec(),
            vec![3, 4]
        );
        // Before opset 15 the attributes do not exist.
        let op = convert(&n, 13, vec![cnst(x.clone())]).unwrap();
        assert_eq!(run(&op, &[&x]).to_i64_vec(), vec![2, 3, 4, 5]);
        // Clamping: start -10 → 0, end 10 → 4; start past end → empty.
        let n = node("Shape", vec![int_attr("start", -10), int_attr("end", 10)]);
        let op = convert(&n, 15, vec![cnst(x.clone())]).unwrap();
        assert_eq!(op, Op::Shape { start: 0, end: 4 });
        let n = node("Shape", vec![int_attr("start", 3), int_attr("end", 1)]);
        let op = convert(&n, 15, vec![cnst(x.clone())]).unwrap();
        assert_eq!(run(&op, &[&x]).shape(), &[0]);
        // Errors.
        assert!(infer(&Op::Shape { start: 0, end: 5 }, &types).is_err());
        assert!(infer(&Op::Shape { start: 0, end: 1 }, &[]).is_err());
    }

    #[test]
    fn constant_of_shape() {
        let shape = Tensor::i64(vec![2], &[2, 3]);
        let n = node("ConstantOfShape", vec![]);
        let op = convert(&n, 9, vec![cnst(shape.clone())]).unwrap();
        let y = run(&op, &[]);
        assert_eq!(y.ty(), TensorType::new(DType::F32, vec![2, 3]));
        assert_eq!(y.to_f32_vec(), vec![0.0; 6]);
        // An i32 value attribute.
        let value = AttributeProto {
            name: Some("value".into()),
            t: Some(TensorProto {
                dims: vec![1],
                data_type: Some(DType::I32.to_onnx()),
                int32_data: vec![7],
                ..Default::default()
            }),
            ..Default::default()
        };
        let n = node("ConstantOfShape", vec![value]);
        let op = convert(&n, 20, vec![cnst(shape.clone())]).unwrap();
        let y = run(&op, &[]);
        assert_eq!(y.dtype(), DType::I32);
        assert_eq!(y.to_i64_vec(), vec![7; 6]);
        assert_eq!(
            attrs(&op),
            vec![("shape", "[2,3]".into()), ("value", "i32:7".into())]
        );
        // Empty shape → scalar.
        let op = convert(&n, 20, vec![cnst(Tensor::i64(vec![0], &[]))]).unwrap();
        assert_eq!(run(&op, &[]).shape(), &[] as &[usize]);
        // Errors: negative dim, non-constant shape.
        assert!(convert(&n, 20, vec![cnst(Tensor::i64(vec![1], &[-2]))]).is_err());
        let huge = Tensor::i64(vec![2], &[1 << 40, 1 << 40]);
        assert!(matches!(
            convert(&n, 20, vec![cnst(huge)]),
            Err(OpError::Overflow(_))
        ));
        assert!(matches!(
            convert(&n, 20, vec![data(DType::I64, &[2])]),
            Err(OpError::NotConstant { .. })
        ));
    }

    fn range(vals: [Tensor; 3]) -> Result<Op, OpError> {
        let n = node("Range", vec![]);
        convert(&n, 11, vals.into_iter().map(cnst).collect())
    }

    #[test]
    fn range_ints() {
        let s = |v: i64| Tensor::from_i64(DType::I32, vec![], &[v]);
        // ONNX example: Range(10, 4, -3) = [10, 7].
        let op = range([s(10), s(4), s(-3)]).unwrap();
        let y = run(&op, &[]);
        assert_eq!(y.dtype(), DType::I32);
        assert_eq!(y.to_i64_vec(), vec![10, 7]);
        let op = range([s(0), s(10), s(3)]).unwrap();
        assert_eq!(run(&op, &[]).to_i64_vec(), vec![0, 3, 6, 9]);
        // Empty when the direction is wrong.
        let op = range([s(5), s(1), s(2)]).unwrap();
        assert_eq!(run(&op, &[]).shape(), &[0]);
        assert!(range([s(0), s(1), s(0)]).is_err());
        // Mixed dtypes.
        assert!(matches!(
            range([s(0), Tensor::i64(vec![], &[4]), s(1)]),
            Err(OpError::DType { input: 1, .. })
        ));
    }

    #[test]
    fn range_floats() {
        let s = |v: f32| Tensor::f32(vec![], &[v]);
        // ONNX example: Range(3, 9, 3) = [3, 6].
        let op = range([s(3.0), s(9.0), s(3.0)]).unwrap();
        assert_eq!(run(&op, &[]).to_f32_vec(), vec![3.0, 6.0]);
        let op = range([s(1.0), s(2.0), s(0.25)]).unwrap();
        assert_eq!(run(&op, &[]).to_f32_vec(), vec![1.0, 1.25, 1.5, 1.75]);
        let op = range([s(1.0), s(0.0), s(-0.4)]).unwrap();
        let y = run(&op, &[]).to_f32_vec();
        assert_eq!(y.len(), 3);
        assert!((y[2] - 0.2).abs() < 1e-6);
        assert!(range([s(0.0), s(f32::INFINITY), s(1.0)]).is_err());
        assert_eq!(attrs(&op)[0], ("dtype", "f32".into()));
    }

    #[test]
    fn foreign_op() {
        assert!(infer(&Op::Identity, &[]).is_err());
        assert_eq!(name(&Op::Identity), "?");
    }
}
