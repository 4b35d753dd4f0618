//! Tests of Conv and ConvTranspose.

use super::*;
use crate::ir::types::DType;
use crate::ops::test_util::{A, convert, eval_checked as run, f32_tensor as t, f32t, iota};

fn conv(kernel: &[usize], strides: &[usize], dil: &[usize], pads: &[usize], g: usize) -> Op {
    Op::Conv(ConvAttrs {
        kernel: kernel.to_vec(),
        strides: strides.to_vec(),
        dilations: dil.to_vec(),
        pads: pads.to_vec(),
        group: g,
        sum: false,
    })
}

#[test]
fn conv_3x3_pads_and_stride() {
    // ONNX spec example: 5x5 input 0..24, all-ones 3x3 kernel.
    let x = t(&[1, 1, 5, 5], &iota(25));
    let w = t(&[1, 1, 3, 3], &[1.0; 9]);
    let op = convert(
        "Conv",
        11,
        vec![
            ("pads", A::Is(vec![1, 1, 1, 1])),
            ("strides", A::Is(vec![2, 2])),
        ],
        &[x.ty(), w.ty()],
        1,
    )
    .unwrap();
    assert_eq!(op, conv(&[3, 3], &[2, 2], &[1, 1], &[1, 1, 1, 1], 1));
    let (shape, y) = run(&op, &[&x, &w]);
    assert_eq!(shape, vec![1, 1, 3, 3]);
    assert_eq!(y, vec![12., 27., 24., 63., 108., 81., 72., 117., 84.]);
    // No padding, stride 1.
    let op = conv(&[3, 3], &[1, 1], &[1, 1], &[0; 4], 1);
    let (shape, y) = run(&op, &[&x, &w]);
    assert_eq!(shape, vec![1, 1, 3, 3]);
    assert_eq!(y, vec![54., 63., 72., 99., 108., 117., 144., 153., 162.]);
}

#[test]
fn conv_groups_and_depthwise() {
    // Depthwise: 2 channels, one 1x1 filter each, with bias.
    let x = t(&[1, 2, 2, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
    let w = t(&[2, 1, 1, 1], &[2., 3.]);
    let b = t(&[2], &[1., -1.]);
    let op = conv(&[1, 1], &[1, 1], &[1, 1], &[0; 4], 2);
    let (shape, y) = run(&op, &[&x, &w, &b]);
    assert_eq!(shape, vec![1, 2, 2, 2]);
    assert_eq!(y, vec![3., 5., 7., 9., 14., 17., 20., 23.]);
    // Group 2 over 4 channels: output 0 reads channels 0-1, output 1 channels 2-3.
    let x = t(&[1, 4, 1], &[1., 2., 3., 4.]);
    let w = t(&[2, 2, 1], &[1., 1., 1., -1.]);
    let op = conv(&[1], &[1], &[1], &[0, 0], 2);
    assert_eq!(run(&op, &[&x, &w]), (vec![1, 2, 1], vec![3., -1.]));
}

#[test]
fn conv_dilated() {
    let x = t(&[1, 1, 5], &[1., 2., 3., 4., 5.]);
    let w = t(&[1, 1, 2], &[1., 10.]);
    let op = conv(&[2], &[1], &[2], &[0, 0], 1);
    assert_eq!(run(&op, &[&x, &w]), (vec![1, 1, 3], vec![31., 42., 53.]));
}

#[test]
fn conv_auto_pad() {
    let x = t(&[1, 1, 5], &[1., 2., 3., 4., 5.]);
    let w = t(&[1, 1, 2], &[1., 1.]);
    let same = |mode: &'static str| {
        convert(
            "Conv",
            13,
            vec![("auto_pad", A::S(mode)), ("strides", A::Is(vec![2]))],
            &[x.ty(), w.ty()],
            1,
        )
        .unwrap()
    };
    // out = ceil(5 / 2) = 3, total padding (3 - 1) * 2 + 2 - 5 = 1.
    let upper = same("SAME_UPPER");
    assert_eq!(upper, conv(&[2], &[2], &[1], &[0, 1], 1));
    assert_eq!(run(&upper, &[&x, &w]), (vec![1, 1, 3], vec![3., 7., 5.]));
    let lower = same("SAME_LOWER");
    assert_eq!(lower, conv(&[2], &[2], &[1], &[1, 0], 1));
    assert_eq!(run(&lower, &[&x, &w]), (vec![1, 1, 3], vec![1., 5., 9.]));
    assert_eq!(same("VALID"), conv(&[2], &[2], &[1], &[0, 0], 1));
    // 4x4 with a 3x3 kernel, stride 1: one pixel each side.
    let op = convert(
        "Conv",
        7,
        vec![("auto_pad", A::S("SAME_UPPER"))],
        &[f32t(&[1, 1, 4, 4]), f32t(&[1, 1, 3, 3])],
        1,
    )
    .unwrap();
    assert_eq!(op, conv(&[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1], 1));
    let bad = convert(
        "Conv",
        7,
        vec![("auto_pad", A::S("SAME"))],
        &[f32t(&[1, 1, 4, 4]), f32t(&[1, 1, 3, 3])],
        1,
    );
    assert!(matches!(bad, Err(OpError::InvalidAttribute { .. })));
}

#[test]
fn conv_errors() {
    let op = conv(&[3, 3], &[1, 1], &[1, 1], &[0; 4], 1);
    let err = op
        .infer(&[f32t(&[1, 3, 5, 5]), f32t(&[4, 2, 3, 3])])
        .unwrap_err();
    match err {
        OpError::ShapeMismatch { shapes, .. } => {
            assert_eq!(shapes, vec![vec![1, 3, 5, 5], vec![4, 2, 3, 3]]);
        }
        e => panic!("{e:?}"),
    }
    // Group 3 needs M divisible by 3.
    let g3 = conv(&[3, 3], &[1, 1], &[1, 1], &[0; 4], 3);
    assert!(matches!(
        g3.infer(&[f32t(&[1, 6, 5, 5]), f32t(&[4, 2, 3, 3])]),
        Err(OpError::ShapeMismatch { .. })
    ));
    assert!(
        g3.infer(&[f32t(&[1, 6, 5, 5]), f32t(&[3, 2, 3, 3])])
            .is_ok()
    );
    // Kernel larger than the input.
    assert!(matches!(
        op.infer(&[f32t(&[1, 2, 2, 2]), f32t(&[1, 2, 3, 3])]),
        Err(OpError::ShapeMismatch { .. })
    ));
    // Wrong bias length.
    assert!(matches!(
        op.infer(&[f32t(&[1, 2, 5, 5]), f32t(&[4, 2, 3, 3]), f32t(&[3])]),
        Err(OpError::ShapeMismatch { .. })
    ));
    // Integer input.
    let i = TensorType::new(DType::I32, vec![1, 2, 5, 5]);
    assert!(matches!(
        op.infer(&[i, f32t(&[4, 2, 3, 3])]),
        Err(OpError::DType { input: 0, .. })
    ));
    // Rank-2 X at conversion; kernel_shape disagreeing with W.
    assert!(convert("Conv", 11, vec![], &[f32t(&[1, 3]), f32t(&[1, 3])], 1).is_err());
    let k = convert(
        "Conv",
        11,
        vec![("kernel_shape", A::Is(vec![2, 2]))],
        &[f32t(&[1, 1, 5, 5]), f32t(&[1, 1, 3, 3])],
        1,
    );
    assert!(matches!(k, Err(OpError::InvalidAttribute { .. })));
}

#[test]
fn conv_transpose_spec_example() {
    let x = t(&[1, 1, 3, 3], &iota(9));
    let w = t(&[1, 2, 3, 3], &[1.0; 18]);
    let op = convert("ConvTranspose", 11, vec![], &[x.ty(), w.ty()], 1).unwrap();
    let (shape, y) = run(&op, &[&x, &w]);
    assert_eq!(shape, vec![1, 2, 5, 5]);
    let plane = [
        0., 1., 3., 3., 2., 3., 8., 15., 12., 7., 9., 21., 36., 27., 15., 9., 20., 33., 24., 13.,
        6., 13., 21., 15., 8.,
    ];
    assert_eq!(&y[..25], &plane);
    assert_eq!(&y[25..], &plane);
    // Spec example with strides [3,2] and pads [1,2,1,2].
    let op = convert(
        "ConvTranspose",
        11,
        vec![
            ("strides", A::Is(vec![3, 2])),
            ("pads", A::Is(vec![1, 2, 1, 2])),
        ],
        &[x.ty(), w.ty()],
        1,
    )
    .unwrap();
    let (shape, y) = run(&op, &[&x, &w]);
    assert_eq!(shape, vec![1, 2, 7, 3]);
    let rows = [[1., 1., 3.], [7., 4., 9.], [13., 7., 15.]];
    let expect: Vec<f64> = [0, 0, 1, 1, 1, 2, 2]
        .iter()
        .flat_map(|&r| rows[r])
        .collect();
    assert_eq!(&y[..21], &expect[..]);
    assert_eq!(&y[21..], &expect[..]);
}

#[test]
fn conv_transpose_output_shape_and_bias() {
    let x = t(&[1, 1, 3], &[1., 2., 3.]);
    let w = t(&[1, 1, 3], &[1., 1., 1.]);
    let b = t(&[1], &[10.]);
    let ct = |attrs: Vec<(&str, A)>| {
        convert("ConvTranspose", 17, attrs, &[x.ty(), w.ty(), b.ty()], 1).unwrap()
    };
    // Full output [1,3,6,5,3]; output_shape 3 crops one each side.
    let op = ct(vec![("output_shape", A::Is(vec![3]))]);
    let Op::ConvTranspose(a) = &op else { panic!() };
    assert_eq!(
        (a.pads.clone(), a.output_padding.clone()),
        (vec![1, 1], vec![0])
    );
    assert_eq!(
        run(&op, &[&x, &w, &b]),
        (vec![1, 1, 3], vec![13., 16., 15.])
    );
    // Odd total padding: the larger half first except with SAME_UPPER.
    let op = ct(vec![("output_shape", A::Is(vec![1, 1, 4]))]);
    assert_eq!(op.attrs()[3].1, "[1,0]");
    let op = ct(vec![
        ("output_shape", A::Is(vec![4])),
        ("auto_pad", A::S("SAME_UPPER")),
    ]);
    assert_eq!(op.attrs()[3].1, "[0,1]");
    // A target larger than the full output extends it at the end with the bias.
    let op = ct(vec![("output_shape", A::Is(vec![6]))]);
    assert_eq!(
        run(&op, &[&x, &w, &b]),
        (vec![1, 1, 6], vec![11., 13., 16., 15., 13., 10.])
    );
    // SAME_UPPER without output_shape: output = in * stride = 6, full = 2 * 2 + 3 = 7.
    let op = ct(vec![
        ("auto_pad", A::S("SAME_UPPER")),
        ("strides", A::Is(vec![2])),
    ]);
    assert_eq!(op.attrs()[3].1, "[0,1]");
    assert_eq!(
        op.infer(&[x.ty(), w.ty(), b.ty()]).unwrap()[0].shape,
        vec![1, 1, 6]
    );
    // output_padding adds at the end.
    let op = ct(vec![
        ("output_padding", A::Is(vec![1])),
        ("strides", A::Is(vec![2])),
    ]);
    assert_eq!(
        op.infer(&[x.ty(), w.ty(), b.ty()]).unwrap()[0].shape,
        vec![1, 1, 8]
    );
}

#[test]
fn conv_transpose_groups_and_errors() {
    // Two groups, each one input channel to one output channel.
    let x = t(&[1, 2, 2], &[1., 2., 3., 4.]);
    let w = t(&[2, 1, 1], &[10., 100.]);
    let op = Op::ConvTranspose(ConvTransposeAttrs {
        kernel: vec![1],
        strides: vec![1],
        dilations: vec![1],
        pads: vec![0, 0],
        output_padding: vec![0],
        group: 2,
    });
    assert_eq!(
        run(&op, &[&x, &w]),
        (vec![1, 2, 2], vec![10., 20., 300., 400.])
    );
    assert_eq!(name(&op), "ConvTranspose");
    // W[0] must equal C.
    let err = op.infer(&[f32t(&[1, 2, 2]), f32t(&[3, 1, 1])]).unwrap_err();
    assert!(matches!(err, OpError::ShapeMismatch { ref shapes, .. }
        if shapes == &vec![vec![1, 2, 2], vec![3, 1, 1]]));
    // Pads removing the whole output.
    let op = convert(
        "ConvTranspose",
        11,
        vec![("pads", A::Is(vec![1, 1]))],
        &[f32t(&[1, 1, 1]), f32t(&[1, 1, 2])],
        1,
    )
    .unwrap();
    assert!(op.infer(&[f32t(&[1, 1, 1]), f32t(&[1, 1, 2])]).is_err());
}

#[test]
fn conv_attrs_and_f16() {
    let op = conv(&[3, 3], &[2, 2], &[1, 1], &[1, 1, 1, 1], 1);
    assert_eq!(name(&op), "Conv");
    assert_eq!(
        attrs(&op),
        vec![
            ("kernel_shape", "[3,3]".to_string()),
            ("strides", "[2,2]".to_string()),
            ("dilations", "[1,1]".to_string()),
            ("pads", "[1,1,1,1]".to_string()),
            ("group", "1".to_string()),
        ]
    );
    let x = Tensor::from_f64(DType::F16, vec![1, 1, 2], &[1.5, 2.0]);
    let w = Tensor::from_f64(DType::F16, vec![1, 1, 1], &[2.0]);
    let op = conv(&[1], &[1], &[1], &[0, 0], 1);
    let y = op.eval(&[&x, &w]).unwrap().remove(0);
    assert_eq!(y.dtype(), DType::F16);
    assert_eq!(y.to_f64_vec(), vec![3.0, 4.0]);
}
