//! Conversion and reference-evaluation checks of the index-driven movement ops.

use super::*;
use crate::ops::test_util::{cnst_named, convert_node, data_named, node, str_attr};

fn ty(dtype: DType, shape: &[usize]) -> TensorType {
    TensorType::new(dtype, shape.to_vec())
}

fn folded_outputs(op: &Op) -> Vec<Tensor> {
    match op {
        Op::Move(MoveOp::Folded { outputs, .. }) => outputs.clone(),
        other => panic!("not folded: {other:?}"),
    }
}

#[test]
fn data_dependent_ops_need_their_inputs() {
    for op in ["NonZero", "Unique"] {
        let e = convert_node(
            &node(op, 1, vec![]),
            13,
            vec![data_named("x", ty(DType::F32, &[4]))],
        )
        .unwrap_err();
        assert!(matches!(e, OpError::DataDependent { input: 0, .. }), "{e}");
        assert!(
            e.to_string()
                .contains("output shape depends on the input's values")
        );
    }
}

#[test]
fn non_zero_lists_coordinates_column_wise() {
    let x = Tensor::f32(vec![2, 3], &[0.0, 1.0, 0.0, 2.0, 0.0, f32::NAN]);
    let (op, data) =
        convert_node(&node("NonZero", 1, vec![]), 13, vec![cnst_named("x", x)]).unwrap();
    assert!(data.is_empty());
    let y = &folded_outputs(&op)[0];
    assert_eq!(y.shape(), &[2, 3]);
    // (0,1), (1,0), (1,2): rows then columns.
    assert_eq!(y.to_i64_vec(), vec![0, 1, 1, 1, 0, 2]);
}

/// Unique's four outputs agree with each other and with the input.
fn check_unique(x: &Tensor, sorted: bool) {
    let attrs = vec![crate::ops::test_util::int_attr("sorted", i64::from(sorted))];
    let (op, _) = convert_node(
        &node("Unique", 4, attrs),
        11,
        vec![cnst_named("x", x.clone())],
    )
    .unwrap();
    let out = folded_outputs(&op);
    let (y, first, inverse, counts) = (
        out[0].to_f64_vec(),
        out[1].to_i64_vec(),
        out[2].to_i64_vec(),
        out[3].to_i64_vec(),
    );
    let xv = x.to_f64_vec();
    for (i, &g) in inverse.iter().enumerate() {
        assert_eq!(y[g as usize], xv[i]);
    }
    for (g, &f) in first.iter().enumerate() {
        assert_eq!(xv[f as usize], y[g]);
        assert!(
            xv[..f as usize].iter().all(|&v| v != y[g]),
            "first occurrence"
        );
        assert_eq!(
            counts[g] as usize,
            xv.iter().filter(|&&v| v == y[g]).count()
        );
    }
    if sorted {
        assert!(y.windows(2).all(|w| w[0] < w[1]));
    } else {
        assert!(first.windows(2).all(|w| w[0] < w[1]));
    }
}

#[test]
fn unique_outputs_are_consistent() {
    let x = Tensor::f32(vec![7], &[2.0, 1.0, 1.0, 3.0, 4.0, 3.0, -1.0]);
    check_unique(&x, true);
    check_unique(&x, false);
    let x = Tensor::i64(vec![5], &[5, 5, 5, 5, 5]);
    check_unique(&x, true);
}

#[test]
fn unique_along_an_axis_keeps_whole_slices() {
    let x = Tensor::f32(vec![3, 2], &[1.0, 0.0, 1.0, 0.0, 0.0, 2.0]);
    let attrs = vec![crate::ops::test_util::int_attr("axis", 0)];
    let (op, _) = convert_node(&node("Unique", 4, attrs), 11, vec![cnst_named("x", x)]).unwrap();
    let out = folded_outputs(&op);
    assert_eq!(out[0].shape(), &[2, 2]);
    // Sorted rows: [0, 2] before [1, 0].
    assert_eq!(out[0].to_f64_vec(), vec![0.0, 2.0, 1.0, 0.0]);
    assert_eq!(out[2].to_i64_vec(), vec![1, 1, 0]);
    assert_eq!(out[3].to_i64_vec(), vec![1, 2]);
}

#[test]
fn non_max_suppression_keeps_the_best_of_overlapping_boxes() {
    // Two heavily overlapping boxes and a distant one, corners (y1, x1, y2, x2).
    let boxes = Tensor::f32(
        vec![1, 3, 4],
        &[0.0, 0.0, 1.0, 1.0, 0.0, 0.1, 1.0, 1.1, 5.0, 5.0, 6.0, 6.0],
    );
    let scores = Tensor::f32(vec![1, 1, 3], &[0.9, 0.95, 0.5]);
    let inputs = vec![
        cnst_named("b", boxes),
        cnst_named("s", scores),
        cnst_named("m", Tensor::i64(vec![1], &[10])),
        cnst_named("i", Tensor::f32(vec![1], &[0.5])),
    ];
    let (op, _) = convert_node(&node("NonMaxSuppression", 1, vec![]), 11, inputs).unwrap();
    let y = &folded_outputs(&op)[0];
    assert_eq!(y.shape(), &[2, 3]);
    assert_eq!(y.to_i64_vec(), vec![0, 0, 1, 0, 0, 2]);
}

#[test]
fn center_crop_pad_is_a_centered_pad() {
    let inputs = vec![
        data_named("x", ty(DType::F32, &[3, 20, 8])),
        cnst_named("s", Tensor::i64(vec![2], &[10, 11])),
    ];
    let attrs = vec![crate::ops::test_util::ints_attr("axes", &[1, -1])];
    let (op, data) = convert_node(&node("CenterCropPad", 1, attrs), 18, inputs).unwrap();
    assert_eq!(data, vec![0]);
    // Crop 10 of dim 1 (5 each side); pad 3 on dim 2 (1 before, 2 after).
    assert_eq!(
        op,
        Op::Pad {
            mode: crate::ops::PadMode::Constant,
            pads: vec![0, -5, 1, 0, -5, 2],
            value: crate::ops::ScalarArg::Const(0.0),
        }
    );
}

#[test]
fn scatter_reductions_combine_repeated_indices() {
    let op = MoveOp::ScatterElements {
        axis: 0,
        reduction: Reduction::Add,
        legacy: false,
    };
    let x = Tensor::f32(vec![3], &[1.0, 2.0, 3.0]);
    let i = Tensor::i64(vec![3], &[-1, 2, 0]);
    let u = Tensor::f32(vec![3], &[10.0, 20.0, 30.0]);
    let y = &eval(&op, &[&x, &i, &u]).unwrap()[0];
    assert_eq!(y.to_f64_vec(), vec![31.0, 2.0, 33.0]);
    // Out-of-range indices are an error of the model, not a panic.
    let bad = Tensor::i64(vec![3], &[3, 0, 0]);
    assert!(eval(&op, &[&x, &bad, &u]).is_err());
}

#[test]
fn reductions_need_their_opset() {
    let inputs = || {
        vec![
            data_named("x", ty(DType::F32, &[3])),
            data_named("i", ty(DType::I64, &[3])),
            data_named("u", ty(DType::F32, &[3])),
        ]
    };
    let n = node("ScatterElements", 1, vec![str_attr("reduction", "max")]);
    assert!(convert_node(&n, 16, inputs()).is_err());
    assert!(convert_node(&n, 18, inputs()).is_ok());
}

#[test]
fn trilu_k_read_at_run_time() {
    let (op, data) = convert_node(
        &node("Trilu", 1, vec![]),
        14,
        vec![
            data_named("x", ty(DType::F32, &[3, 3])),
            data_named("k", ty(DType::I64, &[])),
        ],
    )
    .unwrap();
    assert_eq!(
        op,
        Op::Move(MoveOp::Trilu {
            upper: true,
            k: ScalarArg::Input
        })
    );
    assert_eq!(data, vec![0, 1]);
    let x = Tensor::f32(vec![3, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    let k = Tensor::i64(vec![], &[1]);
    let y = &crate::ops::Op::eval(&op, &[&x, &k]).unwrap()[0];
    assert_eq!(
        y.to_f32_vec(),
        vec![0.0, 2.0, 3.0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0]
    );
    // A constant k is still folded into the op; k must be one int64.
    let (op, data) = convert_node(
        &node("Trilu", 1, vec![]),
        14,
        vec![
            data_named("x", ty(DType::F32, &[3, 3])),
            cnst_named("k", Tensor::i64(vec![1], &[-1])),
        ],
    )
    .unwrap();
    assert_eq!(
        op,
        Op::Move(MoveOp::Trilu {
            upper: true,
            k: ScalarArg::Const(-1)
        })
    );
    assert_eq!(data, vec![0]);
    assert!(
        convert_node(
            &node("Trilu", 1, vec![]),
            14,
            vec![
                data_named("x", ty(DType::F32, &[3, 3])),
                data_named("k", ty(DType::I32, &[])),
            ],
        )
        .is_err()
    );
}
