//! Tests of Resize and Upsample.

use super::*;
use crate::ir::types::DType;
use crate::ops::test_util::{absent, attr_i, attr_s, cnst_named, convert_inputs, data_named};
use arenac_proto::{AttributeProto, attribute_proto::AttributeType};

/// Converts a node; input 0 is data of type `x`, the others are given constants (`None`
/// = omitted input, `Some(None)` = non-constant f32 [4]).
fn convert(
    op_type: &str,
    opset: i64,
    x: &[usize],
    consts: Vec<Option<Option<Tensor>>>,
    attrs: Vec<AttributeProto>,
) -> Result<Op, OpError> {
    let mut inputs = vec![data_named("x", TensorType::new(DType::F32, x.to_vec()))];
    for (i, c) in consts.into_iter().enumerate() {
        let name = format!("c{i}");
        inputs.push(match c {
            None => absent(),
            Some(None) => data_named(&name, TensorType::new(DType::F32, vec![4])),
            Some(Some(t)) => cnst_named(&name, t),
        });
    }
    let (op, data) = convert_inputs(op_type, opset, attrs, inputs, &["y"])?;
    assert_eq!(data, vec![0], "only X stays a data input");
    Ok(op)
}

fn scales(v: &[f32]) -> Option<Option<Tensor>> {
    Some(Some(Tensor::f32(vec![v.len()], v)))
}

fn sizes(v: &[i64]) -> Option<Option<Tensor>> {
    Some(Some(Tensor::i64(vec![v.len()], v)))
}

fn empty() -> Option<Option<Tensor>> {
    Some(Some(Tensor::f32(vec![0], &[])))
}

fn run(op: &Op, x: &Tensor) -> Vec<f64> {
    let ty = infer(op, &[x.ty()]).unwrap().remove(0);
    let y = eval(op, &[x]).unwrap().remove(0);
    assert_eq!(y.ty(), ty);
    y.to_f64_vec()
}

fn x22() -> Tensor {
    Tensor::f32(vec![1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0])
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
    }
}

#[test]
fn nearest_2x_asymmetric() {
    let attrs = vec![attr_s("coordinate_transformation_mode", "asymmetric")];
    let op = convert(
        "Resize",
        13,
        &[1, 1, 2, 2],
        vec![None, scales(&[1.0, 1.0, 2.0, 2.0])],
        attrs,
    )
    .unwrap();
    assert_eq!(name(&op), "Resize");
    assert_eq!(
        attrs_of(&op),
        [
            "nearest",
            "asymmetric",
            "round_prefer_floor",
            "[1.0,1.0,2.0,2.0]",
            "[1,1,4,4]"
        ]
    );
    // x/2 = 0, 0.5, 1, 1.5 -> round_prefer_floor -> 0, 0, 1, 1.
    #[rustfmt::skip]
    let want = [1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0,
                3.0, 3.0, 4.0, 4.0, 3.0, 3.0, 4.0, 4.0];
    assert_eq!(run(&op, &x22()), want);
    // round_prefer_ceil -> 0, 1, 1, 2 (clamped to 1).
    let attrs = vec![
        attr_s("coordinate_transformation_mode", "asymmetric"),
        attr_s("nearest_mode", "round_prefer_ceil"),
    ];
    let op = convert(
        "Resize",
        19,
        &[1, 1, 2, 2],
        vec![None, scales(&[1.0, 1.0, 1.0, 2.0])],
        attrs,
    )
    .unwrap();
    assert_eq!(run(&op, &x22()), [1.0, 2.0, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0]);
    // Nearest copies any dtype.
    let xi = Tensor::from_i64(DType::I64, vec![1, 1, 2, 2], &[1, 2, 3, 4]);
    let op = convert(
        "Resize",
        13,
        &[1, 1, 2, 2],
        vec![None, scales(&[1.0, 1.0, 1.0, 2.0])],
        vec![attr_s("coordinate_transformation_mode", "asymmetric")],
    )
    .unwrap();
    let y = eval(&op, &[&xi]).unwrap().remove(0);
    assert_eq!(y.to_i64_vec(), vec![1, 1, 2, 2, 3, 3, 4, 4]);
}

fn attrs_of(op: &Op) -> Vec<String> {
    attrs(op).into_iter().map(|(_, v)| v).collect()
}

#[test]
fn onnx_spec_examples() {
    // resize_upsample_scales_linear (half_pixel by default).
    let op = convert(
        "Resize",
        13,
        &[1, 1, 2, 2],
        vec![empty(), scales(&[1.0, 1.0, 2.0, 2.0])],
        vec![attr_s("mode", "linear")],
    )
    .unwrap();
    #[rustfmt::skip]
    let want = [1.0, 1.25, 1.75, 2.0,
                1.5, 1.75, 2.25, 2.5,
                2.5, 2.75, 3.25, 3.5,
                3.0, 3.25, 3.75, 4.0];
    close(&run(&op, &x22()), &want);
    // resize_upsample_scales_linear_align_corners.
    let op = convert(
        "Resize",
        11,
        &[1, 1, 2, 2],
        vec![empty(), scales(&[1.0, 1.0, 2.0, 2.0])],
        vec![
            attr_s("mode", "linear"),
            attr_s("coordinate_transformation_mode", "align_corners"),
        ],
    )
    .unwrap();
    let (a, b) = (1.0 / 3.0, 2.0 / 3.0);
    #[rustfmt::skip]
    let want = [1.0, 1.0 + a, 1.0 + b, 2.0,
                1.0 + b, 2.0, 2.0 + a, 2.0 + b,
                2.0 + a, 2.0 + b, 3.0, 3.0 + a,
                3.0, 3.0 + a, 3.0 + b, 4.0];
    close(&run(&op, &x22()), &want);
    // resize_upsample_scales_nearest: scales [1,1,2,3].
    let op = convert(
        "Resize",
        13,
        &[1, 1, 2, 2],
        vec![None, scales(&[1.0, 1.0, 2.0, 3.0])],
        vec![],
    )
    .unwrap();
    let r0 = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0];
    let r1 = [3.0, 3.0, 3.0, 4.0, 4.0, 4.0];
    assert_eq!(run(&op, &x22()), [r0, r0, r1, r1].concat());
    // resize_downsample_scales_nearest: [1,1,2,4] by 0.6 -> [[1, 3]].
    let x24 = Tensor::f32(vec![1, 1, 2, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let op = convert(
        "Resize",
        13,
        &[1, 1, 2, 4],
        vec![None, scales(&[1.0, 1.0, 0.6, 0.6])],
        vec![],
    )
    .unwrap();
    assert_eq!(run(&op, &x24), [1.0, 3.0]);
    // resize_upsample_sizes_nearest: sizes [1,1,7,8].
    let op = convert(
        "Resize",
        13,
        &[1, 1, 2, 2],
        vec![None, None, sizes(&[1, 1, 7, 8])],
        vec![],
    )
    .unwrap();
    let Op::Resize(a) = &op else { panic!() };
    assert_eq!(a.scales, [1.0, 1.0, 3.5, 4.0]);
    let r0 = [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0];
    let r1 = [3.0, 3.0, 3.0, 3.0, 4.0, 4.0, 4.0, 4.0];
    assert_eq!(run(&op, &x22()), [r0, r0, r0, r0, r1, r1, r1].concat());
    // Opset 18 axes: sizes for the last two dims only.
    let op = convert(
        "Resize",
        18,
        &[1, 1, 2, 2],
        vec![None, None, sizes(&[7, 8])],
        vec![AttributeProto {
            name: Some("axes".into()),
            r#type: Some(AttributeType::Ints as i32),
            ints: vec![-2, 3],
            ..Default::default()
        }],
    )
    .unwrap();
    assert_eq!(run(&op, &x22()), [r0, r0, r0, r0, r1, r1, r1].concat());
}

#[test]
fn legacy_resize10_and_upsample() {
    // Resize-10: asymmetric, floor when upsampling, ceil when downsampling.
    let op = convert(
        "Resize",
        10,
        &[1, 1, 2, 2],
        vec![scales(&[1.0, 1.0, 2.0, 3.0])],
        vec![],
    )
    .unwrap();
    let r0 = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0];
    let r1 = [3.0, 3.0, 3.0, 4.0, 4.0, 4.0];
    assert_eq!(run(&op, &x22()), [r0, r0, r1, r1].concat());
    let x24 = Tensor::f32(vec![1, 1, 2, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let op = convert(
        "Resize",
        10,
        &[1, 1, 2, 4],
        vec![scales(&[1.0, 1.0, 0.6, 0.6])],
        vec![],
    )
    .unwrap();
    assert_eq!(run(&op, &x24), [1.0, 3.0]);
    // Upsample-7 (attribute) nearest and Upsample-9 (input) linear, asymmetric.
    let op = convert(
        "Upsample",
        7,
        &[1, 1, 2, 2],
        vec![],
        vec![AttributeProto {
            name: Some("scales".into()),
            r#type: Some(AttributeType::Floats as i32),
            floats: vec![1.0, 1.0, 2.0, 3.0],
            ..Default::default()
        }],
    )
    .unwrap();
    assert_eq!(run(&op, &x22()), [r0, r0, r1, r1].concat());
    let op = convert(
        "Upsample",
        9,
        &[1, 1, 2, 2],
        vec![scales(&[1.0, 1.0, 1.0, 4.0])],
        vec![attr_s("mode", "linear")],
    )
    .unwrap();
    // x/4 = 0, .25, .5, .75, 1, 1.25...
    #[rustfmt::skip]
    let want = [1.0, 1.25, 1.5, 1.75, 2.0, 2.0, 2.0, 2.0,
                3.0, 3.25, 3.5, 3.75, 4.0, 4.0, 4.0, 4.0];
    close(&run(&op, &x22()), &want);
}

#[test]
fn errors() {
    let s = || scales(&[1.0, 1.0, 2.0, 2.0]);
    let e = convert(
        "Resize",
        13,
        &[1, 1, 2, 2],
        vec![None, s()],
        vec![attr_s("mode", "cubic"), attr_i("exclude_outside", 1)],
    );
    assert!(e.is_ok());
    // tf_crop_and_resize needs a roi; nearest has no antialias.
    let e = convert(
        "Resize",
        13,
        &[1, 1, 2, 2],
        vec![None, s()],
        vec![attr_s(
            "coordinate_transformation_mode",
            "tf_crop_and_resize",
        )],
    );
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let e = convert(
        "Resize",
        13,
        &[1, 1, 2, 2],
        vec![scales(&[0.0, 0.0, 1.0]), s()],
        vec![attr_s(
            "coordinate_transformation_mode",
            "tf_crop_and_resize",
        )],
    );
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let e = convert(
        "Resize",
        18,
        &[1, 1, 2, 2],
        vec![None, s()],
        vec![attr_i("antialias", 1)],
    );
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let e = convert(
        "Resize",
        13,
        &[1, 1, 2, 2],
        vec![None, s(), sizes(&[1, 1, 4, 4])],
        vec![],
    );
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let e = convert("Resize", 13, &[1, 1, 2, 2], vec![None, empty()], vec![]);
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let e = convert(
        "Resize",
        13,
        &[1, 1, 2, 2],
        vec![None, scales(&[2.0, 2.0])],
        vec![],
    );
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    let e = convert("Resize", 13, &[1, 1, 2, 2], vec![None, Some(None)], vec![]);
    assert!(matches!(e, Err(OpError::NotConstant { input: 2, .. })));
    let e = convert(
        "Resize",
        18,
        &[1, 1, 2, 2],
        vec![None, None, sizes(&[1, 1, 4, 4])],
        vec![attr_s("keep_aspect_ratio_policy", "sideways")],
    );
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
    // Linear needs floats; rank must match.
    let op = convert(
        "Resize",
        13,
        &[1, 1, 2, 2],
        vec![None, s()],
        vec![attr_s("mode", "linear")],
    )
    .unwrap();
    let e = infer(&op, &[TensorType::new(DType::I32, vec![1, 1, 2, 2])]);
    assert!(matches!(e, Err(OpError::DType { .. })));
    let e = infer(&op, &[TensorType::new(DType::F32, vec![1, 2, 2])]);
    assert!(matches!(e, Err(OpError::ShapeMismatch { .. })));
}

#[test]
fn keep_aspect_ratio_and_roi_axes() {
    // 2x4 to sizes [7, 8] over axes [2, 3]: not_larger takes min(3.5, 2) = 2 -> [4, 8],
    // not_smaller takes 3.5 -> [7, 14].
    for (policy, want) in [("not_larger", [4, 8]), ("not_smaller", [7, 14])] {
        let op = convert(
            "Resize",
            18,
            &[1, 1, 2, 4],
            vec![None, None, sizes(&[7, 8])],
            vec![
                attr_s("keep_aspect_ratio_policy", policy),
                AttributeProto {
                    name: Some("axes".into()),
                    r#type: Some(AttributeType::Ints as i32),
                    ints: vec![2, 3],
                    ..Default::default()
                },
            ],
        )
        .unwrap();
        let Op::Resize(a) = &op else { panic!() };
        assert_eq!(a.output_shape[2..], want, "{policy}");
        assert_eq!(a.scales[2], a.scales[3], "{policy}");
    }
    // roi given for axes [3, 2] expands to every dim, defaults 0 and 1 elsewhere.
    let op = convert(
        "Resize",
        18,
        &[1, 1, 4, 4],
        vec![
            Some(Some(Tensor::f32(vec![4], &[0.25, 0.5, 0.75, 1.0]))),
            None,
            sizes(&[3, 3]),
        ],
        vec![
            attr_s("coordinate_transformation_mode", "tf_crop_and_resize"),
            attr_s("mode", "linear"),
            AttributeProto {
                name: Some("axes".into()),
                r#type: Some(AttributeType::Ints as i32),
                ints: vec![3, 2],
                ..Default::default()
            },
        ],
    )
    .unwrap();
    let Op::Resize(a) = &op else { panic!() };
    assert_eq!(a.roi, [0.0, 0.0, 0.5, 0.25, 1.0, 1.0, 1.0, 0.75]);
}

#[test]
fn axis_taps_match_onnx_kernels() {
    // Cubic weights sum to 1 and interpolate exactly at integer coordinates; antialiased
    // linear downsampling by 1/2 spreads over 4 taps.
    let op = convert(
        "Resize",
        18,
        &[1, 1, 1, 8],
        vec![None, scales(&[1.0, 1.0, 1.0, 0.5])],
        vec![attr_s("mode", "linear"), attr_i("antialias", 1)],
    )
    .unwrap();
    let Op::Resize(a) = &op else { panic!() };
    let t = axis_taps(a, 3, 8, 4);
    assert_eq!(t.n, 4);
    for o in 0..4 {
        let w = &t.w[o * 4..o * 4 + 4];
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12, "{w:?}");
    }
    // half_pixel, out 1 -> x = 2.5: taps 1..=4 with weights [1, 3, 3, 1] / 8.
    close(&t.w[4..8], &[0.125, 0.375, 0.375, 0.125]);
    assert_eq!(t.idx[4..8], [1, 2, 3, 4]);
    let op = convert(
        "Resize",
        13,
        &[1, 1, 1, 4],
        vec![None, scales(&[1.0, 1.0, 1.0, 2.0])],
        vec![
            attr_s("mode", "cubic"),
            attr_s("coordinate_transformation_mode", "asymmetric"),
        ],
    )
    .unwrap();
    let Op::Resize(a) = &op else { panic!() };
    let t = axis_taps(a, 3, 4, 8);
    assert_eq!(t.n, 4);
    // Output 2 -> x = 1 exactly: all weight on input 1.
    let x = Tensor::f32(vec![1, 1, 1, 4], &[1.0, 5.0, -2.0, 7.0]);
    let y = run(&op, &x);
    assert_eq!(y[2], 5.0);
    assert_eq!(y[4], -2.0);
}
