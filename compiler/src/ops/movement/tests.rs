use super::*;
use crate::ops::MoveOp;
use crate::ops::ctx::CtxInput;
use crate::ops::test_util::{
    absent, cnst, convert_node as convert, data, int_attr, ints_attr, node, str_attr,
};
use arenac_proto::{AttributeProto, NodeProto};

fn ty(dtype: DType, shape: &[usize]) -> TensorType {
    TensorType::new(dtype, shape.to_vec())
}

fn ints(v: &[i64]) -> CtxInput {
    cnst(Tensor::i64(vec![v.len()], v))
}

fn conv(node: &NodeProto, opset: i64, inputs: Vec<CtxInput>) -> Op {
    convert(node, opset, inputs).unwrap().0
}

/// Evaluates, checking the result against inference.
fn run(op: &Op, inputs: &[&Tensor]) -> Vec<Tensor> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let tys = infer(op, &types).unwrap();
    let ys = eval(op, inputs).unwrap();
    assert_eq!(ys.iter().map(Tensor::ty).collect::<Vec<_>>(), tys);
    ys
}

fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::f32(
        shape.to_vec(),
        &(0..n).map(|v| v as f32).collect::<Vec<_>>(),
    )
}

fn vals(t: &Tensor) -> Vec<f32> {
    t.to_f32_vec()
}

#[test]
fn transpose() {
    let x = iota(&[2, 3]);
    let op = conv(&node("Transpose", 1, vec![]), 13, vec![data(&[2, 3])]);
    assert_eq!(op, Op::Transpose { perm: vec![1, 0] });
    let y = &run(&op, &[&x])[0];
    assert_eq!(y.shape(), &[3, 2]);
    assert_eq!(vals(y), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    // perm [1, 2, 0] on [2, 3, 4]: y[i,j,k] = x[k,i,j].
    let x = iota(&[2, 3, 4]);
    let n = node("Transpose", 1, vec![ints_attr("perm", &[1, 2, 0])]);
    let op = conv(&n, 7, vec![data(&[2, 3, 4])]);
    let y = &run(&op, &[&x])[0];
    assert_eq!(y.shape(), &[3, 4, 2]);
    assert_eq!(vals(y)[..4], [0.0, 12.0, 1.0, 13.0]);
    // Not a permutation.
    let bad = node("Transpose", 1, vec![ints_attr("perm", &[0, 0, 1])]);
    assert!(convert(&bad, 13, vec![data(&[2, 3, 4])]).is_err());
    let op = Op::Transpose { perm: vec![0, 1] };
    assert!(infer(&op, &[ty(DType::F32, &[2, 3, 4])]).is_err());
}

#[test]
fn concat() {
    let n = node("Concat", 1, vec![int_attr("axis", -1)]);
    let op = conv(&n, 13, vec![data(&[2, 1]), data(&[2, 2])]);
    assert_eq!(op, Op::Concat { axis: 1 });
    let a = Tensor::f32(vec![2, 1], &[1.0, 2.0]);
    let b = Tensor::f32(vec![2, 2], &[3.0, 4.0, 5.0, 6.0]);
    let y = &run(&op, &[&a, &b])[0];
    assert_eq!(y.shape(), &[2, 3]);
    assert_eq!(vals(y), vec![1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);
    // Mismatch outside the axis, in rank, in dtype.
    let r = infer(&op, &[ty(DType::F32, &[2, 1]), ty(DType::F32, &[3, 1])]);
    assert!(matches!(r, Err(OpError::ShapeMismatch { .. })));
    let r = infer(&op, &[ty(DType::F32, &[2, 1]), ty(DType::F32, &[2, 1, 1])]);
    assert!(matches!(r, Err(OpError::ShapeMismatch { .. })));
    let r = infer(&op, &[ty(DType::F32, &[2, 1]), ty(DType::I64, &[2, 1])]);
    assert!(matches!(r, Err(OpError::DType { input: 1, .. })));
    assert!(infer(&op, &[]).is_err());
    // Axis is required.
    assert!(convert(&node("Concat", 1, vec![]), 13, vec![data(&[2])]).is_err());
}

#[test]
fn split_by_sizes() {
    let x = iota(&[2, 5]);
    // Opset 13: sizes as an input.
    let n = node("Split", 2, vec![int_attr("axis", 1)]);
    let (op, data_in) = convert(&n, 13, vec![data(&[2, 5]), ints(&[2, 3])]).unwrap();
    assert_eq!(data_in, vec![0]);
    assert_eq!(
        op,
        Op::Split {
            axis: 1,
            sizes: vec![2, 3]
        }
    );
    let ys = run(&op, &[&x]);
    assert_eq!(vals(&ys[0]), vec![0.0, 1.0, 5.0, 6.0]);
    assert_eq!(vals(&ys[1]), vec![2.0, 3.0, 4.0, 7.0, 8.0, 9.0]);
    // Opset 11: sizes as an attribute.
    let n = node(
        "Split",
        2,
        vec![int_attr("axis", 1), ints_attr("split", &[2, 3])],
    );
    assert_eq!(conv(&n, 11, vec![data(&[2, 5])]), op);
    // Sizes that do not add up.
    let n = node("Split", 2, vec![int_attr("axis", 1)]);
    assert!(convert(&n, 13, vec![data(&[2, 5]), ints(&[2, 2])]).is_err());
    let bad = Op::Split {
        axis: 1,
        sizes: vec![1, 1],
    };
    assert!(matches!(
        infer(&bad, &[ty(DType::F32, &[2, 5])]),
        Err(OpError::ShapeMismatch { .. })
    ));
}

#[test]
fn split_equal() {
    let x = iota(&[6]);
    let n = node("Split", 3, vec![]);
    let op = conv(&n, 13, vec![data(&[6])]);
    let ys = run(&op, &[&x]);
    assert_eq!(ys.len(), 3);
    assert_eq!(vals(&ys[2]), vec![4.0, 5.0]);
    assert!(convert(&node("Split", 4, vec![]), 13, vec![data(&[6])]).is_err());
    // Opset 18 num_outputs: chunks of ceil(7/4) = 2, the last smaller.
    let n = node("Split", 4, vec![int_attr("num_outputs", 4)]);
    let (op, _) = convert(&n, 18, vec![data(&[7])]).unwrap();
    assert_eq!(
        op,
        Op::Split {
            axis: 0,
            sizes: vec![2, 2, 2, 1]
        }
    );
    let n = node("Split", 4, vec![int_attr("num_outputs", 3)]);
    assert!(convert(&n, 18, vec![data(&[7])]).is_err());
}

fn slice(starts: &[i64], ends: &[i64], axes: &[i64], steps: &[i64], shape: &[usize]) -> Op {
    let n = node("Slice", 1, vec![]);
    let (op, data_in) = convert(
        &n,
        13,
        vec![
            data(shape),
            ints(starts),
            ints(ends),
            ints(axes),
            ints(steps),
        ],
    )
    .unwrap();
    assert_eq!(data_in, vec![0]);
    op
}

#[test]
fn slice_neg_steps() {
    // ONNX test slice_neg_steps: x[20:0:-1, 10:0:-3, 4:1:-2] on a [20, 10, 5] input.
    let x = iota(&[20, 10, 5]);
    let op = slice(
        &[20, 10, 4],
        &[0, 0, 1],
        &[0, 1, 2],
        &[-1, -3, -2],
        &[20, 10, 5],
    );
    let y = &run(&op, &[&x])[0];
    assert_eq!(y.shape(), &[19, 3, 2]);
    // First rows: x[19, 9, 4], x[19, 9, 2], x[19, 6, 4]...
    let at = |i: usize, j: usize, k: usize| (i * 50 + j * 5 + k) as f32;
    assert_eq!(
        vals(y)[..4],
        [at(19, 9, 4), at(19, 9, 2), at(19, 6, 4), at(19, 6, 2)]
    );
    assert_eq!(*vals(y).last().unwrap(), at(1, 3, 2));
    // Reverse everything with INT_MIN as the end.
    let x = iota(&[4]);
    let op = slice(&[-1], &[i64::MIN], &[0], &[-1], &[4]);
    assert_eq!(vals(&run(&op, &[&x])[0]), vec![3.0, 2.0, 1.0, 0.0]);
    assert_eq!(
        attrs(&op),
        vec![
            ("axes", "[0]".into()),
            ("starts", "[3]".into()),
            ("ends", "[-1]".into()),
            ("steps", "[-1]".into())
        ]
    );
}

#[test]
fn slice_clamped() {
    let x = iota(&[20, 10, 5]);
    // slice_end_out_of_bounds: x[:, 1:1000].
    let op = slice(&[1], &[1000], &[1], &[1], &[20, 10, 5]);
    assert_eq!(run(&op, &[&x])[0].shape(), &[20, 9, 5]);
    // slice_start_out_of_bounds: x[:, 1000:1000] is empty.
    let op = slice(&[1000], &[1000], &[1], &[1], &[20, 10, 5]);
    assert_eq!(run(&op, &[&x])[0].shape(), &[20, 0, 5]);
    // slice_neg: x[:, 0:-1]; INT_MAX end; negative axes.
    let op = slice(&[0], &[-1], &[-2], &[1], &[20, 10, 5]);
    assert_eq!(run(&op, &[&x])[0].shape(), &[20, 9, 5]);
    let x = iota(&[2, 5]);
    let op = slice(&[1, 1], &[i64::MAX, i64::MAX], &[1, 0], &[2, 1], &[2, 5]);
    assert_eq!(vals(&run(&op, &[&x])[0]), vec![6.0, 8.0]);
    // Opset 9: attributes, default axes.
    let n = node(
        "Slice",
        1,
        vec![ints_attr("starts", &[0, 1]), ints_attr("ends", &[1, 3])],
    );
    let op = conv(&n, 9, vec![data(&[2, 5])]);
    assert_eq!(vals(&run(&op, &[&x])[0]), vec![1.0, 2.0]);
    // Errors: zero step, repeated axis, non-normalized op, non-constant bounds.
    let n = node("Slice", 1, vec![]);
    let r = convert(
        &n,
        13,
        vec![data(&[4]), ints(&[0]), ints(&[4]), ints(&[0]), ints(&[0])],
    );
    assert!(r.is_err());
    let r = convert(
        &n,
        13,
        vec![data(&[4, 4]), ints(&[0, 0]), ints(&[1, 1]), ints(&[0, -2])],
    );
    assert!(r.is_err());
    let bad = Op::Slice {
        axes: vec![SliceAxis {
            axis: 0,
            start: 0,
            end: 9,
            step: 1,
        }],
    };
    assert!(infer(&bad, &[ty(DType::F32, &[4])]).is_err());
    let r = convert(&n, 13, vec![data(&[4]), data(&[1]), ints(&[4])]);
    assert!(r.is_err());
}

#[test]
fn gather_negative_indices_axis1() {
    let n = node("Gather", 1, vec![int_attr("axis", 1)]);
    let x = Tensor::f32(vec![2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let indices = Tensor::i64(vec![1, 2], &[-1, 0]);
    let (op, data_in) = convert(&n, 13, vec![data(&[2, 3]), cnst(indices.clone())]).unwrap();
    assert_eq!((op.clone(), data_in), (Op::Gather { axis: 1 }, vec![0, 1]));
    let y = &run(&op, &[&x, &indices])[0];
    assert_eq!(y.shape(), &[2, 1, 2]);
    assert_eq!(vals(y), vec![3.0, 1.0, 6.0, 4.0]);
    // i32 indices, scalar index on axis 0.
    let op0 = Op::Gather { axis: 0 };
    let i = Tensor::from_i64(DType::I32, vec![], &[-1]);
    let y = &run(&op0, &[&x, &i])[0];
    assert_eq!((y.shape(), vals(y)), (&[3usize][..], vec![4.0, 5.0, 6.0]));
    // Out of range at evaluation, float indices at inference.
    let far = Tensor::i64(vec![1], &[3]);
    assert!(eval(&op, &[&x, &far]).is_err());
    let far = Tensor::i64(vec![1], &[-4]);
    assert!(eval(&op, &[&x, &far]).is_err());
    let r = infer(&op, &[ty(DType::F32, &[2, 3]), ty(DType::F32, &[1])]);
    assert!(matches!(r, Err(OpError::DType { input: 1, .. })));
}

#[test]
fn expand() {
    // ONNX example expand_dim_changed: [3, 1] to [2, 1, 6] gives [2, 3, 6].
    let x = Tensor::f32(vec![3, 1], &[1.0, 2.0, 3.0]);
    let n = node("Expand", 1, vec![]);
    let op = conv(&n, 13, vec![data(&[3, 1]), ints(&[2, 1, 6])]);
    let y = &run(&op, &[&x])[0];
    assert_eq!(y.shape(), &[2, 3, 6]);
    let v = vals(y);
    assert_eq!(v[..7], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0]);
    assert_eq!(v[18..24], [1.0; 6]);
    // A smaller target broadcasts too: [3, 1] with [4] gives [3, 4].
    let op = Op::Expand { shape: vec![4] };
    assert_eq!(run(&op, &[&x])[0].shape(), &[3, 4]);
    let op = Op::Expand { shape: vec![2, 4] };
    assert!(infer(&op, &[ty(DType::F32, &[3, 1])]).is_err());
    assert!(convert(&n, 13, vec![data(&[3, 1]), ints(&[-2])]).is_err());
}

#[test]
fn tile() {
    // ONNX example tile_precomputed.
    let x = Tensor::f32(vec![2, 2], &[0.0, 1.0, 2.0, 3.0]);
    let n = node("Tile", 1, vec![]);
    let op = conv(&n, 13, vec![data(&[2, 2]), ints(&[2, 2])]);
    let y = &run(&op, &[&x])[0];
    assert_eq!(y.shape(), &[4, 4]);
    assert_eq!(
        vals(y),
        vec![
            0.0, 1.0, 0.0, 1.0, 2.0, 3.0, 2.0, 3.0, 0.0, 1.0, 0.0, 1.0, 2.0, 3.0, 2.0, 3.0
        ]
    );
    assert!(convert(&n, 13, vec![data(&[2, 2]), ints(&[2])]).is_err());
    let op = Op::Tile { repeats: vec![2] };
    assert!(infer(&op, &[ty(DType::F32, &[2, 2])]).is_err());
}

fn pad_op(mode: &str, opset: i64, x_shape: &[usize], pads: &[i64]) -> Op {
    let n = node("Pad", 1, vec![str_attr("mode", mode)]);
    conv(&n, opset, vec![data(x_shape), ints(pads)])
}

#[test]
fn pad_modes() {
    // ONNX Pad examples: pads [0, 2, 0, 0] on a 3x2 input.
    let x = Tensor::f32(vec![3, 2], &[1.0, 1.2, 2.3, 3.4, 4.5, 5.7]);
    let pads = [0, 2, 0, 0];
    let y = |mode| vals(&run(&pad_op(mode, 19, &[3, 2], &pads), &[&x])[0]);
    #[rustfmt::skip]
    let expected = [
        ("constant", [0.0, 0.0, 1.0, 1.2, 0.0, 0.0, 2.3, 3.4, 0.0, 0.0, 4.5, 5.7]),
        ("reflect", [1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7]),
        ("edge", [1.0, 1.0, 1.0, 1.2, 2.3, 2.3, 2.3, 3.4, 4.5, 4.5, 4.5, 5.7]),
        ("wrap", [1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7]),
    ];
    for (mode, want) in expected {
        assert_eq!(y(mode), want.to_vec(), "{mode}");
    }
    // 1-d, both sides.
    let x = Tensor::f32(vec![3], &[1.0, 2.0, 3.0]);
    let y = |mode, pads: &[i64]| vals(&run(&pad_op(mode, 19, &[3], pads), &[&x])[0]);
    assert_eq!(y("reflect", &[2, 2]), [3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]);
    assert_eq!(y("edge", &[2, 1]), [1.0, 1.0, 1.0, 2.0, 3.0, 3.0]);
    assert_eq!(
        y("wrap", &[2, 4]),
        [2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0]
    );
    // Negative pads crop first.
    assert_eq!(y("constant", &[-1, 2]), [2.0, 3.0, 0.0, 0.0]);
    assert_eq!(y("reflect", &[-1, 1]), [2.0, 3.0, 2.0]);
    // Reflect pads may exceed the dim (numpy's periodic reflection, period 4 here).
    assert_eq!(
        y("reflect", &[5, 0]),
        [2.0, 1.0, 2.0, 3.0, 2.0, 1.0, 2.0, 3.0]
    );
    // Edge/reflect/wrap of an empty dim; cropping past the dim; wrap before opset 19.
    let op = Op::Pad {
        mode: PadMode::Reflect,
        pads: vec![1, 0],
        value: crate::ops::ScalarArg::Const(0.0),
    };
    assert!(infer(&op, &[ty(DType::F32, &[0])]).is_err());
    let op = Op::Pad {
        mode: PadMode::Constant,
        pads: vec![-2, -2],
        value: crate::ops::ScalarArg::Const(0.0),
    };
    assert!(infer(&op, &[ty(DType::F32, &[3])]).is_err());
    let n = node("Pad", 1, vec![str_attr("mode", "wrap")]);
    assert!(convert(&n, 18, vec![data(&[3]), ints(&[1, 1])]).is_err());
}

#[test]
fn pad_operand_styles() {
    // Opset 7: attributes.
    let n = node(
        "Pad",
        1,
        vec![
            ints_attr("pads", &[1, 0]),
            AttributeProto {
                name: Some("value".into()),
                f: Some(1.5),
                ..Default::default()
            },
        ],
    );
    let op = conv(&n, 7, vec![data(&[2])]);
    let x = Tensor::f32(vec![2], &[7.0, 8.0]);
    assert_eq!(vals(&run(&op, &[&x])[0]), vec![1.5, 7.0, 8.0]);
    assert_eq!(
        attrs(&op),
        vec![
            ("mode", "constant".into()),
            ("pads", "[1,0]".into()),
            ("value", "1.5".into())
        ]
    );
    // Opset 18: constant_value and axes inputs, on i32 data.
    let xi = Tensor::from_i64(DType::I32, vec![2, 2], &[1, 2, 3, 4]);
    let n = node("Pad", 1, vec![]);
    let (op, data_in) = convert(
        &n,
        18,
        vec![
            cnst(xi.clone()),
            ints(&[1, 0]),
            cnst(Tensor::from_i64(DType::I32, vec![], &[9])),
            ints(&[-1]),
        ],
    )
    .unwrap();
    assert_eq!(data_in, vec![0]);
    let y = &run(&op, &[&xi])[0];
    assert_eq!(y.dtype(), DType::I32);
    assert_eq!(y.to_i64_vec(), vec![9, 1, 2, 9, 3, 4]);
    // Omitted constant_value with axes.
    let (op, _) = convert(
        &n,
        18,
        vec![cnst(xi.clone()), ints(&[0, 1]), absent(), ints(&[0])],
    )
    .unwrap();
    assert_eq!(run(&op, &[&xi])[0].to_i64_vec(), vec![1, 2, 3, 4, 0, 0]);
    // Axes input before opset 18; pads of the wrong length.
    let r = convert(
        &n,
        13,
        vec![cnst(xi.clone()), ints(&[1, 0]), absent(), ints(&[0])],
    );
    assert!(matches!(r, Err(OpError::Arity { .. })));
    assert!(convert(&n, 13, vec![cnst(xi), ints(&[1, 0])]).is_err());
}

#[test]
fn foreign_op() {
    assert!(infer(&Op::MatMul, &[]).is_err());
    assert!(eval(&Op::MatMul, &[]).is_err());
    assert_eq!(name(&Op::MatMul), "?");
}

#[test]
fn pad_value_read_at_run_time() {
    // constant_value computed in the graph: a data input, never a frozen operand.
    let n = node("Pad", 1, vec![]);
    let x_ty = ty(DType::F32, &[2]);
    let v_ty = ty(DType::F32, &[]);
    let inputs = || {
        vec![
            crate::ops::test_util::data_named("x", x_ty.clone()),
            ints(&[1, 2]),
            crate::ops::test_util::data_named("v", v_ty.clone()),
        ]
    };
    let (op, data_ins) = convert(&n, 18, inputs()).unwrap();
    assert_eq!(
        op,
        Op::Pad {
            mode: PadMode::Constant,
            pads: vec![1, 2],
            value: ScalarArg::Input,
        }
    );
    assert_eq!(data_ins, vec![0, 2]);
    let x = Tensor::f32(vec![2], &[1.0, 2.0]);
    let v = Tensor::f32(vec![], &[-7.5]);
    assert_eq!(vals(&run(&op, &[&x, &v])[0]), [-7.5, 1.0, 2.0, -7.5, -7.5]);
    // An integer fill value is copied bit for bit (no round trip through f64).
    let big = (1i64 << 62) + 3;
    let xi = Tensor::i64(vec![1], &[5]);
    let vi = Tensor::i64(vec![1], &[big]);
    assert_eq!(
        run(&op, &[&xi, &vi])[0].to_i64_vec(),
        vec![big, 5, big, big]
    );
    // The value must be one element of x's dtype.
    assert!(infer(&op, &[x_ty.clone(), ty(DType::F32, &[2])]).is_err());
    assert!(infer(&op, &[x_ty.clone(), ty(DType::F64, &[])]).is_err());
    assert!(infer(&op, std::slice::from_ref(&x_ty)).is_err());
    // Other modes ignore constant_value: no data input, no freezing.
    let n = node("Pad", 1, vec![str_attr("mode", "reflect")]);
    let (op, data_ins) = convert(&n, 18, inputs()).unwrap();
    assert_eq!(data_ins, vec![0]);
    assert!(matches!(
        op,
        Op::Pad {
            value: ScalarArg::Const(_),
            ..
        }
    ));
}

#[test]
fn constant_indices_out_of_range_are_errors() {
    let data_ty = ty(DType::F32, &[3, 4]);
    let idx = |v: &[i64]| Tensor::i64(vec![v.len()], v);
    let check = |op: &Op, i: &Tensor| {
        check_constant_indices(op, &[data_ty.clone(), i.ty()], &[None, Some(i)])
    };
    let gather = Op::Gather { axis: 1 };
    assert_eq!(check(&gather, &idx(&[0, 3, -4])), Ok(()));
    assert_eq!(
        check(&gather, &idx(&[1, 4])),
        Err(OpError::OutOfRange {
            input: 1,
            what: "index",
            value: 4,
            lo: -4,
            hi: 3
        })
    );
    assert!(check(&gather, &idx(&[-5])).is_err());
    // Run-time indices are the kernels' business.
    assert_eq!(
        check_constant_indices(
            &gather,
            &[data_ty.clone(), ty(DType::I64, &[2])],
            &[None, None]
        ),
        Ok(())
    );
    // GatherND rows: entry j indexes dim batch_dims + j.
    let rows = Tensor::i64(vec![2, 2], &[2, 3, 0, -4]);
    let nd = Op::Move(MoveOp::GatherNd { batch_dims: 0 });
    assert_eq!(check(&nd, &rows), Ok(()));
    let bad = Tensor::i64(vec![2, 2], &[2, 3, 3, 0]);
    assert!(matches!(
        check(&nd, &bad),
        Err(OpError::OutOfRange {
            value: 3,
            hi: 2,
            ..
        })
    ));
    // The error names the input, the value and the range.
    let e = check(&gather, &idx(&[9])).unwrap_err().to_string();
    assert!(e.contains("index 9") && e.contains("-4 to 3"), "{e}");
    // The reference evaluation of a folded Gather says the same.
    let x = iota(&[3, 4]);
    let e = eval(&gather, &[&x, &idx(&[7])]).unwrap_err();
    assert!(matches!(e, OpError::OutOfRange { value: 7, .. }), "{e}");
}
