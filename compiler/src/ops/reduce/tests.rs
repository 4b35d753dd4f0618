//! Unit tests of the Reduce* converters, inference and reference evaluation.

use super::*;
use crate::ops::ctx::CtxInput;
use crate::ops::test_util::{attr_i, attr_ints, convert_inputs};
use arenac_proto::AttributeProto;

/// Converts a node; inputs are `(type, constant value)`.
fn convert(
    op_type: &str,
    opset: i64,
    inputs: Vec<(TensorType, Option<Tensor>)>,
    attrs: Vec<AttributeProto>,
) -> Result<(Op, Vec<usize>), OpError> {
    let inputs = inputs
        .into_iter()
        .enumerate()
        .map(|(i, (t, v))| CtxInput {
            name: format!("in{i}"),
            ty: Some(t),
            value: v,
        })
        .collect();
    convert_inputs(op_type, opset, attrs, inputs, &["y"])
}

fn x_only(ty: &TensorType) -> Vec<(TensorType, Option<Tensor>)> {
    vec![(ty.clone(), None)]
}

fn with_axes(ty: &TensorType, axes: &[i64]) -> Vec<(TensorType, Option<Tensor>)> {
    let a = Tensor::i64(vec![axes.len()], axes);
    vec![(ty.clone(), None), (a.ty(), Some(a))]
}

fn run(op: &Op, x: &Tensor) -> Tensor {
    let ty = infer(op, &[x.ty()]).unwrap().remove(0);
    let out = eval(op, &[x]).unwrap().remove(0);
    assert_eq!(out.ty(), ty);
    out
}

fn attrs_of(kind: ReduceKind, axes: &[usize], keepdims: bool) -> Op {
    Op::Reduce(ReduceAttrs {
        kind,
        axes: axes.to_vec(),
        keepdims,
    })
}

#[test]
fn sum_axes_input_keepdims() {
    let ty = TensorType::new(DType::I64, vec![2, 3]);
    let x = Tensor::i64(vec![2, 3], &[1, 2, 3, 4, 5, 6]);
    let (op, data) = convert(
        "ReduceSum",
        13,
        with_axes(&ty, &[-1]),
        vec![attr_i("keepdims", 0)],
    )
    .unwrap();
    assert_eq!(op, attrs_of(ReduceKind::Sum, &[1], false));
    assert_eq!(data, vec![0]);
    assert_eq!(name(&op), "ReduceSum");
    assert_eq!(
        attrs(&op),
        vec![("axes", "[1]".to_string()), ("keepdims", "0".to_string())]
    );
    let y = run(&op, &x);
    assert_eq!(y.shape(), &[2]);
    assert_eq!(y.to_i64_vec(), vec![6, 15]);
    // keepdims defaults to 1; opset 11 takes axes as an attribute.
    let (op, _) = convert("ReduceSum", 11, x_only(&ty), vec![attr_ints("axes", &[-2])]).unwrap();
    assert_eq!(op, attrs_of(ReduceKind::Sum, &[0], true));
    let y = run(&op, &x);
    assert_eq!(y.shape(), &[1, 3]);
    assert_eq!(y.to_i64_vec(), vec![5, 7, 9]);
}

#[test]
fn mean_float_and_int() {
    let ty = TensorType::new(DType::F32, vec![2, 3]);
    let x = Tensor::f32(vec![2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 7.0]);
    let (op, _) = convert("ReduceMean", 11, x_only(&ty), vec![attr_ints("axes", &[0])]).unwrap();
    let y = run(&op, &x);
    assert_eq!(y.shape(), &[1, 3]);
    assert_eq!(y.to_f64_vec(), vec![2.5, 3.5, 5.0]);
    // Integer mean truncates toward zero: 1.5 -> 1, -1.5 -> -1, 13/3 -> 4.
    let xi = Tensor::from_i64(DType::I32, vec![3, 2], &[1, 2, -1, -2, 4, 9]);
    let op = attrs_of(ReduceKind::Mean, &[1], false);
    let y = run(&op, &xi);
    assert_eq!(y.dtype(), DType::I32);
    assert_eq!(y.to_i64_vec(), vec![1, -1, 6]);
    let y = run(&attrs_of(ReduceKind::Mean, &[0, 1], false), &xi);
    assert_eq!(y.to_i64_vec(), vec![2]);
}

#[test]
fn all_axes_and_noop() {
    let ty = TensorType::new(DType::F32, vec![2, 3]);
    let x = Tensor::f32(vec![2, 3], &[1.0, 6.0, 3.0, -4.0, 5.0, 2.0]);
    // No axes: every axis, listed explicitly.
    let (op, _) = convert("ReduceMax", 18, x_only(&ty), vec![]).unwrap();
    assert_eq!(op, attrs_of(ReduceKind::Max, &[0, 1], true));
    let y = run(&op, &x);
    assert_eq!(y.shape(), &[1, 1]);
    assert_eq!(y.to_f64_vec(), vec![6.0]);
    let (op, _) = convert("ReduceMin", 13, x_only(&ty), vec![attr_i("keepdims", 0)]).unwrap();
    let y = run(&op, &x);
    assert_eq!(y.shape(), &[] as &[usize]);
    assert_eq!(y.to_f64_vec(), vec![-4.0]);
    // An empty axes tensor also means every axis...
    let (op, _) = convert("ReduceMean", 18, with_axes(&ty, &[]), vec![]).unwrap();
    assert_eq!(op, attrs_of(ReduceKind::Mean, &[0, 1], true));
    assert_eq!(run(&op, &x).to_f64_vec(), vec![f64::from(13.0f32 / 6.0)]);
    // ...unless noop_with_empty_axes: then no reduction at all.
    let noop = vec![attr_i("noop_with_empty_axes", 1)];
    let (op, _) = convert("ReduceSum", 13, with_axes(&ty, &[]), noop.clone()).unwrap();
    assert_eq!(op, attrs_of(ReduceKind::Sum, &[], true));
    let (op, _) = convert("ReduceMin", 18, x_only(&ty), noop).unwrap();
    assert_eq!(op, attrs_of(ReduceKind::Min, &[], true));
    let y = run(&op, &x);
    assert_eq!(y, x);
}

#[test]
fn max_min_3d_and_bool() {
    let x = Tensor::f32(vec![2, 2, 2], &[1.0, 8.0, 3.0, 4.0, -5.0, 6.0, 7.0, 2.0]);
    let y = run(&attrs_of(ReduceKind::Min, &[0, 2], true), &x);
    assert_eq!(y.shape(), &[1, 2, 1]);
    assert_eq!(y.to_f64_vec(), vec![-5.0, 2.0]);
    let y = run(&attrs_of(ReduceKind::Max, &[0, 2], false), &x);
    assert_eq!(y.to_f64_vec(), vec![8.0, 7.0]);
    let b = Tensor::from_i64(DType::Bool, vec![2, 2], &[0, 1, 0, 0]);
    let y = run(&attrs_of(ReduceKind::Max, &[1], false), &b);
    assert_eq!(y.to_i64_vec(), vec![1, 0]);
    // Empty reduction of u8 max: the dtype minimum, 0.
    let e = Tensor::from_i64(DType::U8, vec![2, 0], &[]);
    let y = run(&attrs_of(ReduceKind::Max, &[1], false), &e);
    assert_eq!(y.to_i64_vec(), vec![0, 0]);
}

#[test]
fn errors() {
    let ty = TensorType::new(DType::F32, vec![2, 3]);
    let e = convert("ReduceSum", 13, with_axes(&ty, &[1, -1]), vec![]);
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let e = convert("ReduceMean", 11, x_only(&ty), vec![attr_ints("axes", &[2])]);
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    // Axes as a non-constant input.
    let axes_ty = TensorType::new(DType::I64, vec![1]);
    let e = convert(
        "ReduceMax",
        18,
        vec![(ty.clone(), None), (axes_ty, None)],
        vec![],
    );
    assert!(matches!(e, Err(OpError::NotConstant { input: 1, .. })));
    let op = attrs_of(ReduceKind::Sum, &[0], true);
    let b = TensorType::new(DType::Bool, vec![2]);
    assert!(matches!(infer(&op, &[b]), Err(OpError::DType { .. })));
    let op = attrs_of(ReduceKind::Sum, &[2], true);
    assert!(matches!(
        infer(&op, &[ty]),
        Err(OpError::ShapeMismatch { .. })
    ));
}
