//! Tests of the statistics normalizations: converters and hand-computed reference values.

use super::*;
use crate::ir::types::DType;
use crate::ops::test_util::{attr_f, attr_i, attr_ints, convert_inputs, data_inputs, f32t};

fn convert(
    op_type: &str,
    opset: i64,
    inputs: &[TensorType],
    outputs: &[&str],
    attrs: Vec<arenac_proto::AttributeProto>,
) -> Result<Op, OpError> {
    convert_inputs(op_type, opset, attrs, data_inputs(inputs), outputs).map(|(op, _)| op)
}

/// Evaluates `op`, checks the outputs' types against inference, returns their values.
fn run(op: &Op, inputs: &[Tensor]) -> Vec<Vec<f64>> {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out = eval(op, &refs).unwrap();
    let tys: Vec<TensorType> = out.iter().map(|t| t.ty()).collect();
    assert_eq!(tys, infer(op, &types).unwrap());
    out.iter().map(|t| t.to_f64_vec()).collect()
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-6, "{a:?} vs {b:?}");
    }
}

fn t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::f32(shape.to_vec(), v)
}

#[test]
fn instance_normalization() {
    let ins = [f32t(&[1, 2, 2]), f32t(&[2]), f32t(&[2])];
    let op = convert(
        "InstanceNormalization",
        7,
        &ins,
        &["y"],
        vec![attr_f("epsilon", 0.0)],
    )
    .unwrap();
    assert_eq!(op, Op::InstanceNormalization { epsilon: 0.0 });
    // Channel 0 [1, 3]: mean 2, sd 1; channel 1 [0, 4]: mean 2, sd 2, scale 2, bias 1.
    let y = run(
        &op,
        &[
            t(&[1, 2, 2], &[1.0, 3.0, 0.0, 4.0]),
            t(&[2], &[1.0, 2.0]),
            t(&[2], &[0.0, 1.0]),
        ],
    );
    close(&y[0], &[-1.0, 1.0, -1.0, 3.0]);
    assert!(infer(&op, &[f32t(&[1, 2, 2]), f32t(&[3]), f32t(&[2])]).is_err());
}

#[test]
fn group_normalization_per_channel_and_per_group() {
    let x = t(&[1, 4, 1], &[1.0, 3.0, 0.0, 4.0]);
    // Opset 21, 2 groups of 2 channels: [1, 3] -> [-1, 1]; [0, 4] -> [-1, 1].
    let ins = [f32t(&[1, 4, 1]), f32t(&[4]), f32t(&[4])];
    let op = convert(
        "GroupNormalization",
        21,
        &ins,
        &["y"],
        vec![attr_i("num_groups", 2), attr_f("epsilon", 0.0)],
    )
    .unwrap();
    assert_eq!(
        op,
        Op::GroupNormalization {
            groups: 2,
            epsilon: 0.0,
            per_channel: true
        }
    );
    let y = run(
        &op,
        &[
            x.clone(),
            t(&[4], &[1.0, 2.0, 3.0, 4.0]),
            t(&[4], &[0.0; 4]),
        ],
    );
    close(&y[0], &[-1.0, 2.0, -3.0, 4.0]);
    // Opset 18: scale and bias per group.
    let op = Op::GroupNormalization {
        groups: 2,
        epsilon: 0.0,
        per_channel: false,
    };
    let y = run(&op, &[x, t(&[2], &[2.0, 3.0]), t(&[2], &[1.0, 0.0])]);
    close(&y[0], &[-1.0, 3.0, -3.0, 3.0]);
    // num_groups must divide C and is required.
    assert!(infer(&op, &[f32t(&[1, 3, 1]), f32t(&[2]), f32t(&[2])]).is_err());
    let e = convert("GroupNormalization", 21, &ins, &["y"], vec![]);
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
}

#[test]
fn mean_variance_normalization() {
    let op = convert(
        "MeanVarianceNormalization",
        13,
        &[f32t(&[2, 1, 1, 1])],
        &["y"],
        vec![],
    )
    .unwrap();
    assert_eq!(
        op,
        Op::MeanVarianceNormalization {
            axes: vec![0, 2, 3]
        }
    );
    let y = run(&op, &[t(&[2, 1, 1, 1], &[1.0, 3.0])]);
    let d = 1.0 + MVN_EPSILON;
    close(&y[0], &[-1.0 / d, 1.0 / d]);
    let op = convert(
        "MeanVarianceNormalization",
        13,
        &[f32t(&[2, 2])],
        &["y"],
        vec![attr_ints("axes", &[-1])],
    )
    .unwrap();
    assert_eq!(op, Op::MeanVarianceNormalization { axes: vec![1] });
    let e = convert(
        "MeanVarianceNormalization",
        13,
        &[f32t(&[2, 2])],
        &["y"],
        vec![attr_ints("axes", &[1, -1])],
    );
    assert!(matches!(e, Err(OpError::InvalidAttribute { .. })));
}

#[test]
fn rms_normalization() {
    let ins = [f32t(&[1, 2]), f32t(&[2])];
    let op = convert(
        "RMSNormalization",
        23,
        &ins,
        &["y"],
        vec![attr_f("epsilon", 0.0)],
    )
    .unwrap();
    assert_eq!(
        op,
        Op::RmsNormalization {
            axis: 1,
            epsilon: 0.0
        }
    );
    // Mean square of [3, 4] is 12.5.
    let y = run(&op, &[t(&[1, 2], &[3.0, 4.0]), t(&[2], &[1.0, 2.0])]);
    let r = 12.5f64.sqrt();
    close(&y[0], &[3.0 / r, 8.0 / r]);
}

#[test]
fn batch_normalization_training_mode() {
    let c = f32t(&[1]);
    let ins = [f32t(&[2, 1]), c.clone(), c.clone(), c.clone(), c];
    let op = convert(
        "BatchNormalization",
        15,
        &ins,
        &["y", "rm", "rv"],
        vec![
            attr_i("training_mode", 1),
            attr_f("momentum", 0.5),
            attr_f("epsilon", 0.0),
        ],
    )
    .unwrap();
    assert_eq!(
        op,
        Op::BatchNormalization {
            epsilon: 0.0,
            training: Some(0.5)
        }
    );
    // Batch [1, 3]: mean 2, variance 1 (population); running = input/2 + batch/2.
    let one = |v: f32| t(&[1], &[v]);
    let out = run(
        &op,
        &[
            t(&[2, 1], &[1.0, 3.0]),
            one(1.0),
            one(0.0),
            one(0.0),
            one(3.0),
        ],
    );
    close(&out[0], &[-1.0, 1.0]);
    close(&out[1], &[1.0]);
    close(&out[2], &[2.0]);
}

#[test]
fn layer_normalization_statistics() {
    let ins = [f32t(&[2, 2]), f32t(&[2])];
    let op = convert(
        "LayerNormalization",
        17,
        &ins,
        &["y", "", "inv"],
        vec![attr_f("epsilon", 0.0)],
    )
    .unwrap();
    assert_eq!(
        op,
        Op::LayerNormalization {
            axis: 1,
            epsilon: 0.0,
            stats: Some(DType::F32)
        }
    );
    let out = run(
        &op,
        &[t(&[2, 2], &[1.0, 3.0, 0.0, 4.0]), t(&[2], &[1.0, 1.0])],
    );
    close(&out[0], &[-1.0, 1.0, -1.0, 1.0]);
    close(&out[1], &[2.0, 2.0]);
    close(&out[2], &[1.0, 0.5]);
    let types = infer(&op, &ins).unwrap();
    assert_eq!(types[1].shape, vec![2, 1]);
    // stash_type double: f64 statistics.
    let op = convert(
        "LayerNormalization",
        17,
        &ins,
        &["y", "m"],
        vec![attr_i("stash_type", 11)],
    )
    .unwrap();
    assert_eq!(infer(&op, &ins).unwrap()[1].dtype, DType::F64);
}
